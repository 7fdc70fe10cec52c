/* sim_skip.h -- private to the simulator's engine: jumps over the periodic middle of long
 * pipelines instead of replaying it slice by slice.
 *
 * In the middle of long ops the replay repeats itself: the whole world's state one period later
 * is the same shifted in time by T, with every active op a fixed number of slices further. At
 * checkpoints (every `every`-th message a chosen send stream starts of one long op) the engine
 * takes a signature of everything the future depends on, relative to now: per rank its ports
 * and CPU, CPU tasks, pending and waiting pairs; per stream its cursor, FIFO slots, waiting time
 * and how far its head's dependency lets it go; per active op its progress; every pending event
 * and the message it delivers. When three checkpoints in a row differ only by the same time
 * shift and the same progress increments, the replay jumps n periods at once: n*T added to every
 * time, n increments to every counter, n periods' messages and bytes to the result. n is the
 * most that keeps every active op (window + 2) slices short of its last slice (which may be
 * shorter, and after which its dependants see a finished op), rounded down to a multiple of the
 * window so that FIFO slots keep their places. Times are compared within 1e-9 of the period:
 * periods round differently. Off in network mode (flows share links, which the signature does
 * not cover) and with a trace (every message is listed). Tree all-reduce at scale has no such
 * period: its reduction runs ahead of its broadcast on shared ports, and their interleaving does
 * not repeat (README.md, "Scale", "Trees at scale"). */
#ifndef WEFT_TOOLS_SIM_SIM_SKIP_H_
#define WEFT_TOOLS_SIM_SIM_SKIP_H_

#include <stddef.h>

#include "tools/sim/sim_internal.h"

/* Sets w->skip where skipping applies (the model's `skip`, no network mode, no trace); leaves
 * it NULL otherwise. */
weft_result_t sim_skip_create(sim_world_t *w);
void sim_skip_free(sim_world_t *w);

/* Rank `from` started slice `slice` of op `op` (-1: the call description) on send stream `si`:
 * a checkpoint may be due after this round. */
void sim_skip_started(sim_world_t *w, int from, int si, int op, size_t slice);

/* Called after every round (try_start) at w->now: takes a due checkpoint and jumps when the
 * last three agree. */
weft_result_t sim_skip_round(sim_world_t *w);

#endif /* WEFT_TOOLS_SIM_SIM_SKIP_H_ */
