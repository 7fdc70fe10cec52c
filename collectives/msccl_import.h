/* msccl_import.h -- internal: algorithms published as MSCCL programs (the XML that msccl-tools,
 * TACCL and TE-CCL emit) read into weft schedules.
 *
 * A program names, per GPU (rank), thread blocks (tb) with one send peer, one receive peer and a
 * channel; each tb runs its steps in order, and a step may also wait for one step of another tb
 * of the same GPU (depid/deps). Offsets and counts are in chunks: a call's buffers are cut into
 * the program's i_chunks (input) and o_chunks (output) chunks, plus s_chunks of scratch.
 *
 * Streams and channels. MSCCL gives each (peer, channel) its own FIFO; weft's executor carries one
 * ordered stream per (peer, direction) over one connection. We keep the executor as it is and
 * order each stream by a linearization both ends compute alike (every rank reads the same file):
 * an untimed reference execution of the whole program, in rounds -- every step whose
 * prerequisites are met runs in the round, sends in (gpu, tb) order -- where a send is buffered
 * and a receive takes its peer's next message only if that message is the one its channel
 * expects. A stream's order is the order its messages were sent there; each rank's ops are listed
 * in the order its steps ran, so every dependency points to an earlier op. Programs whose
 * channels only make progress through reordering that one FIFO per peer cannot express (a
 * receive that must overtake an earlier message from the same peer) stop the reference execution:
 * such a program is refused at load, naming the step that could not run, instead of hanging.
 * Channels stay on the ops (sched_op_t.channel) for traces and weft-sim.
 *
 * Each step becomes one op (s: SEND, r: RECV_COPY, rrc: RECV_REDUCE, cpy: COPY, re: REDUCE) or
 * two (rcs, rrcs, rrs: the receive, then a SEND from its result that depends on it slice by
 * slice; rrs keeps its result in extra scratch, since MSCCL's writes nothing); nop steps become
 * none, their prerequisites passed on. A step waits for the step before it on its tb and for its
 * depid/deps step: slice by slice when both move the same count and every chunk range they share
 * sits at the same place in both, else for the whole step; and only for a step's receiving part
 * when it does not overwrite what that step sends (wait_for in msccl_build.c says why).
 *
 * Buffers and sizes: msccl_build maps i, o and s onto the call's send, receive and scratch
 * buffers (docs/msccl.md, "Buffers"); a call's chunk is its input over i_chunks elements. */
#ifndef WEFT_COLLECTIVES_MSCCL_IMPORT_H_
#define WEFT_COLLECTIVES_MSCCL_IMPORT_H_

#include <stddef.h>
#include <stdint.h>

#include "collectives/algorithms.h"
#include "collectives/schedule.h"
#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct msccl_program msccl_program_t;

/* Reads and checks a program: its XML, its attributes, its step references and dependency graph
 * (acyclic), sends against receives per (sender, receiver, channel), offsets inside the buffers,
 * and the reference execution above. Errors name the file, the line and the element. */
weft_result_t msccl_parse(const char *text, size_t len, const char *what, msccl_program_t **out);
weft_result_t msccl_load(const char *path, msccl_program_t **out);
void msccl_free(msccl_program_t *p);

const char *msccl_name(const msccl_program_t *p);
weft_coll_t msccl_coll(const msccl_program_t *p);
int msccl_ngpus(const msccl_program_t *p);
int msccl_nchannels(const msccl_program_t *p);
/* FNV-1a of the file's bytes: what ranks compare to know they loaded the same program. */
uint64_t msccl_hash(const msccl_program_t *p);

/* Whether a call of `coll` with `count` (weft.h's per-rank count) on `nranks` ranks runs this
 * program: its collective, and a count that cuts into its chunks (a multiple of
 * msccl_count_unit). Other counts, count 0 and other collectives are not run by it (*use = 0):
 * they take the normal choice, as NCCL's MSCCL leaves sizes outside a program's range to NCCL's
 * own algorithms. A communicator of another size is WEFT_ERR_INVALID_ARGUMENT naming both. */
weft_result_t msccl_applies(const msccl_program_t *p, weft_coll_t coll, int nranks, size_t count,
                            int *use);
/* The counts the program runs are the multiples of this (weft.h's per-rank count). */
size_t msccl_count_unit(const msccl_program_t *p, int nranks);

/* Rank a->rank's schedule for the call in `a` (msccl_applies said yes). */
weft_result_t msccl_build(const msccl_program_t *p, schedule_t *s, const sched_args_t *a);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_MSCCL_IMPORT_H_ */
