/* goal.h -- private to weft-sim: every rank's schedule written as GOAL text, the input of
 * LogGOPSim (Hoefler, Schneider & Lumsdaine 2010), so that another simulator runs the same
 * algorithm.
 *
 * What is written, per rank, slice by slice (the executor's slices, as weft-sim replays them):
 * - a send of `bytes` to the peer, a receive of as many from it; the tag is the message's place in
 *   its stream (ops to one peer in one direction), so the two ends match one to one;
 * - a reduction: `calc` of bytes * gamma after the receive that brought the slice; a local copy:
 *   `calc` of bytes * beta_mem. Everything runs on LogGOPSim's cpu 0: an op freed by a dependency
 *   starts at the clock of its own CPU, so a dependency carries its time only within one CPU.
 *   LogGOPSim also keeps that CPU busy (s-1) G while a message of s bytes arrives, so reductions
 *   and arrivals take turns where weft-sim's CPU reduces while its port receives;
 * - dependencies as weft-sim has them: slice j of an op with a dependency `requires` slice j of
 *   that op done (received, and reduced where it reduces); a whole-op dependency (dep_whole) holds
 *   the first slice until every slice of the other is done and the later ones until the first
 *   started (`irequires`); a send `irequires` the previous message of its stream, so a stream
 *   leaves in schedule order;
 * - the 40-byte call description first on the streams to hdr_to and from hdr_from, when the model
 *   sends them (headers).
 * Not written: the window (WEFT_SLICES_IN_FLIGHT). GOAL has no credits; a LogGOPSim sender runs
 * ahead of the receiver's posted receives under its eager protocol.
 *
 * Times (calc) are integers in units of `unit_s` seconds; goal_loggp gives LogGOPSim's
 * parameters in the same unit. */
#ifndef WEFT_TOOLS_SIM_GOAL_H_
#define WEFT_TOOLS_SIM_GOAL_H_

#include <stddef.h>
#include <stdio.h>

#include "collectives/schedule.h"
#include "include/weft.h"
#include "tools/sim/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What goal_write wrote, over all ranks. */
typedef struct {
  long sends, recvs, calcs; /* operations */
  long requires, irequires; /* dependency lines */
  double bytes;             /* bytes sent */
} goal_stats_t;

/* Every rank's schedule for `call`, as weft-sim builds it (collectives over all ranks; send, recv,
 * p2p groups and all_to_allv are not exported: WEFT_ERR_INVALID_ARGUMENT). scheds has
 * call->nranks entries; free them with goal_free. */
weft_result_t goal_build(const sim_model_t *m, const sim_call_t *call, schedule_t *scheds);
void goal_free(schedule_t *scheds, int nranks);

/* Writes the GOAL text of `nranks` schedules (esize bytes per element) to `out`. stats may be
 * NULL. WEFT_ERR_INVALID_ARGUMENT for a unit that is not > 0, WEFT_ERR_INTERNAL for schedules
 * whose streams do not pair up, WEFT_ERR_SYSTEM when writing fails. */
weft_result_t goal_write(FILE *out, const sim_model_t *m, int nranks, size_t esize,
                         const schedule_t *scheds, double unit_s, goal_stats_t *stats);

/* LogGOPSim parameters equivalent to the model's intra-node alpha and beta, in units of unit_s:
 * a message of s bytes arrives after L + (s-1) G, and a NIC starts its next message g + (s-1) G
 * after the last, so L = g = alpha and G = beta (weft-sim's port is busy alpha + s beta); no CPU
 * overhead (o = O = 0); S above every message, so every message goes eagerly. Each rounds to the
 * unit: the library's 1/1.5e9 s per byte is 667 ps for 666.67 (0.05%). */
typedef struct {
  long L, o, g, G, O, S;
} goal_loggp_t;

goal_loggp_t goal_loggp(const sim_model_t *m, double unit_s);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_SIM_GOAL_H_ */
