/* executor.h -- internal: runs any schedule over the communicator's transports.
 *
 * One executor serves every algorithm: it slices ops, keeps up to WEFT_SLICES_IN_FLIGHT slices
 * posted per stream (0, its default: as many as the stream's transport asks for), reduces
 * incoming slices (in the peer's slot where the transport lends it, else from a small staging
 * ring) as they arrive, forwards slices as soon as their dependency completed, and bounds every
 * wait by WEFT_TIMEOUT_MS of inactivity. Fused steps (schedule.h) write their result straight
 * into the slot the next peer reads (transport.h's lend_send): the received slice is read once
 * and the output written once, as NCCL's recvReduceSend and recvReduceCopySend do; exec_stats_t
 * counts what was written where. Before any data, each rank sends a description of the call (the
 * collective, its sequence number, count, dtype, op, root) to its right ring neighbour and checks
 * the one from its left: ranks that disagree fail with WEFT_ERR_MISMATCH instead of exchanging
 * garbage. Over shm (transport.h's desc_slot) the description takes a whole slot and carries the
 * stream's first message after it: a small call sends one message per hop instead of two.
 *
 * Device buffers (exec_run's `device`): the same schedule and the same loop; the transports move
 * device memory themselves (CUDA IPC slots, or pinned staging over TCP), and what the host loop
 * did on arrival -- reduce into the output, copy locally -- is enqueued on the engine's queue
 * instead, followed by a fence. A slice counts as done only once its fence has passed, so a
 * forwarding send never reads a slice the device has not finished writing, and a peer's slot is
 * released only after the reduction that reads it. */
#ifndef WEFT_COLLECTIVES_EXECUTOR_H_
#define WEFT_COLLECTIVES_EXECUTOR_H_

#include <stddef.h>
#include <stdint.h>

#include "collectives/call_desc.h"
#include "collectives/schedule.h"
#include "common/config.h"
#include "common/trace.h"
#include "device/device.h"
#include "include/weft.h"
#include "transport/transport.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Bytes the executor's steps wrote, summed over calls, and how deep its streams went (tests read
 * them to check that a fused ring writes each output element once and how many slices a
 * transport keeps in flight; nothing else depends on them). */
typedef struct {
  uint64_t recvbuf_bytes; /* written into the caller's output: receives, reductions, copies */
  uint64_t slot_bytes;    /* written into memory the peers read: every message sent */
  uint64_t fused_slices;  /* slices that went through a fused step */
  uint64_t streamed_slices; /* of those, written into a slot with non-temporal stores */
  uint64_t messages;      /* messages sent, call descriptions included */
  uint64_t deepest;       /* the most messages one stream had posted and not retired at once */
  uint64_t plans_reused;  /* calls that ran on their kept schedule's layout (exec_ctx_t.plan) */
} exec_stats_t;

/* A kept schedule's layout: its op states, streams, connections and FIFOs as the executor laid
 * them out for its last call. Opaque; the owner frees it with exec_plan_free. */
typedef struct exec_plan exec_plan_t;

/* The communicator side the executor needs: who we are, connections on demand, and scratch memory
 * that lives as long as the communicator (so small calls allocate nothing). */
typedef struct {
  int rank, nranks;
  const weft_config_t *config;
  const weft_config_t *dev_config; /* for calls on device buffers (config_for_device) */
  /* How long the run's waits poll, yielding the core, before they sleep (transport_ops.wait):
   * set by the communicator for each call, since it depends on who runs it (comm/async.c). */
  int spin_us;
  /* The connection to `peer` for host buffers (device = 0) or device buffers (device = 1: a
   * transport that takes xfers with x.device set). */
  weft_result_t (*get_conn)(void *owner, int peer, int device, conn_t **out);
  void *owner;
  /* Bumped by the owner whenever connections get_conn handed out are closed or replaced: a kept
   * layout (`plan`) holds connections of the epoch it was laid out in. */
  unsigned conn_epoch;
  void *scratch;
  size_t scratch_bytes;
  /* The run's own bookkeeping (op states, streams, their FIFOs), kept between calls like
   * `scratch`: allocating and zeroing it per call was a third of a small call's instructions. */
  void *run_mem, *fifo_mem;
  size_t run_mem_bytes, fifo_mem_bytes;
  /* A schedule the owner validated (sched_validate) when it built it and keeps unchanged while
   * this points to it: exec_run does not validate it again on every call. NULL: none. */
  const schedule_t *validated;
  /* Where the layout of `validated` is kept between its calls (host buffers only): the next call
   * of it with the same element size and connections sets the layout's counters back to the
   * start instead of laying it out again, which was a fifth of a small call's instructions. The
   * owner frees it (exec_plan_free) when it frees or changes the schedule. NULL: nowhere. */
  exec_plan_t **plan;
  trace_t *trace; /* WEFT_TRACE: every step is recorded here; NULL (and free) when off */
  /* Device mode: the engine, the queue the executor's reductions and copies run on (created on
   * first use), and device scratch memory kept like `scratch`. NULL without an engine. */
  dev_engine_t *dev;
  dev_queue_t *queue;
  void *dev_scratch;
  size_t dev_scratch_bytes;
  exec_stats_t stats;
  /* Set (atomically, by another thread) when the communicator is aborted: the run in progress
   * gives up with WEFT_ERR_ABORTED at its next turn, within one wait slice. NULL: never. */
  const int *aborted;
} exec_ctx_t;

/* Runs one rank's part of a schedule. With `device` set, sendbuf and recvbuf are device memory:
 * data moves through device transports, reductions and local copies run on ctx->queue, and the
 * call returns once all of that work has finished (the caller has already waited for the
 * buffers' producers). */
weft_result_t exec_run(exec_ctx_t *ctx, const schedule_t *s, const coll_desc_t *desc,
                       const void *sendbuf, void *recvbuf, int device);

/* ctx->queue, created on first use: the device queue the executor's work runs on, and the one
 * the communicator enqueues its own device work on (copies, scaling, device programs) so that it
 * stays in order with the executor's. */
weft_result_t exec_device_queue(exec_ctx_t *ctx, dev_queue_t **out);

void exec_ctx_release(exec_ctx_t *ctx);

/* Frees a kept layout (exec_ctx_t.plan) and sets *plan to NULL; NULL or *plan NULL: nothing. */
void exec_plan_free(exec_plan_t **plan);

/* The next message waiting on `conn`, looked at without taking it, when it is the token a p2p
 * group sends ahead of each message (p2p.c): *state TRANSPORT_PEEK_READY and its tag, dtype and
 * count. EMPTY while nothing has arrived, or when what waits is anything else (a collective's
 * call description or data, which no receive from any source may take); CLOSED when the peer is
 * gone. A receive from any source (comm/any_source.c) picks its peer by it. */
weft_result_t exec_peek_p2p(conn_t *conn, int *state, int *tag, weft_dtype_t *dtype, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_EXECUTOR_H_ */
