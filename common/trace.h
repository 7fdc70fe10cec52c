/* trace.h -- internal: per-rank Chrome trace of every step (WEFT_TRACE), buffered in memory.
 *
 * The executor calls the hooks below only when exec_ctx_t.trace is not NULL, so tracing costs one
 * NULL check per hook when it is off. A communicator owns one trace_t and uses it from one thread
 * at a time (the executor's), so the hooks take no locks.
 *
 * Tracks: one process per rank, named "rank N", with pid N + 1 (Perfetto reserves pid 0 for the
 * kernel's idle process); in it tid 1 is the executor thread (reduce, wait) and each peer has a
 * "send to P" and a "recv from P" track. A transfer's event spans the time its stream spent on it:
 * from when it was posted, or from when the transfer before it on the same stream was retired if
 * that was later (a stream moves one message at a time, in order), until the executor retired it.
 * So events on one track never overlap, which Perfetto needs to draw them as slices.
 *
 * Timestamps: microseconds of CLOCK_REALTIME, read once at trace_open, advanced with
 * CLOCK_MONOTONIC. The wall clock lines up the ranks of one machine (to the microsecond) and of
 * different machines (as well as NTP keeps them), which a monotonic clock, whose zero is each
 * machine's boot, would not; advancing with the monotonic clock keeps a rank's own events in
 * order even if the wall clock is stepped while it runs. */
#ifndef WEFT_COMMON_TRACE_H_
#define WEFT_COMMON_TRACE_H_

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct trace trace_t;

/* *out = NULL when cfg->trace is empty. Otherwise a trace that trace_close() writes to
 * "<cfg->trace>.rank<rank>.json" (".rank<rank>-<k>.json" for the k-th further communicator this
 * process traces). Fails if that file's directory is not writable, so a bad path shows at init. */
weft_result_t trace_open(trace_t **out, const weft_config_t *cfg, int rank, int nranks);

/* The check trace_open makes of cfg->trace's directory, on its own: init makes it before it
 * connects, so that every rank fails on a bad WEFT_TRACE alike instead of one rank failing while
 * its peers are still connecting to it (and then reporting a vanished peer). */
weft_result_t trace_check_folder(const weft_config_t *cfg, int rank);

/* Writes the file (via a temporary, renamed into place, so a reader never sees half of it) and
 * frees the trace. NULL does nothing. WEFT_ERR_SYSTEM naming the path if writing failed. */
weft_result_t trace_close(trace_t *t);

/* The file trace_close() writes. */
const char *trace_path(const trace_t *t);

/* ---- Executor hooks (t != NULL) ------------------------------------------------------------ */

/* A transfer was posted in window slot `slot` of the stream to (is_send) or from `peer`. coll
 * and algo must be static strings (weft_coll_name, weft_algo_name). step < 0 marks the call
 * description that precedes a collective's data. */
void trace_post(trace_t *t, int peer, int is_send, int slot, const char *coll, const char *algo,
                uint64_t seq, int step, long slice, size_t bytes);
/* The transfer in that slot completed and was retired: records its send or recv event. */
void trace_retire(trace_t *t, int peer, int is_send, int slot);
/* The slot just retired was folded into the output: a reduce event from the retire until now. */
void trace_reduce(trace_t *t, int peer, int slot);
/* The slot just retired went through a fused step (`name`: "recv-reduce-send", ...): one event
 * on the executor track for the pass that read it and wrote the next peer's slot (no separate
 * reduce, and no copy into the slot). */
void trace_fused(trace_t *t, int peer, int slot, const char *name);
/* The executor blocks in the transport's wait (poll) between these two. */
void trace_wait_begin(trace_t *t);
void trace_wait_end(trace_t *t);

/* Events kept and dropped so far (tests, and the truncation note). */
size_t trace_event_count(const trace_t *t);
size_t trace_dropped_count(const trace_t *t);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMMON_TRACE_H_ */
