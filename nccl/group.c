/* group.c -- ncclGroupStart/ncclGroupEnd on weft's calls.
 *
 * Groups nest per thread; calls made inside are queued and the outermost ncclGroupEnd issues
 * them. Per communicator, every send and receive of the group becomes one weft_p2p_group, issued
 * where the communicator's first one was queued, so sends and receives pair per peer in issue
 * order and no order of them between two ranks can deadlock; collectives run in issue order.
 * Calls with a stream are enqueued on it (weft_call returns at once); calls without one are
 * issued with weft_call_async and all waited for at the end, so a group over several
 * communicators of one process (ncclCommInitAll's) does not wait on itself. */
#include <stdlib.h>
#include <string.h>

#include "nccl/nccl_internal.h"

typedef struct {
  struct ncclComm *comm;
  cudaStream_t stream;
  weft_call_t call;        /* a collective; call.coll is WEFT_COLL_P2P_GROUP for the p2p batch */
  unsigned char factor[8]; /* a PreMulSum's host factor, which call.scalar points at once issued */
  weft_p2p_op_t *ops;      /* the p2p batch's sends and receives */
  int nops, capops;
} pending_t;

static __thread int depth;
static __thread pending_t *queue;
static __thread int nqueue, capqueue;
static __thread ncclResult_t group_error; /* the first error met while queueing */

NCCL_API(ncclResult_t, ncclGroupStart, void) {
  depth++;
  return ncclSuccess;
}

static pending_t *push(void) {
  if (nqueue == capqueue) {
    int cap = capqueue ? 2 * capqueue : 16;
    pending_t *q = realloc(queue, (size_t)cap * sizeof *q);
    if (!q) return NULL;
    queue = q;
    capqueue = cap;
  }
  pending_t *p = &queue[nqueue++];
  memset(p, 0, sizeof *p);
  return p;
}

static ncclResult_t enqueue(struct ncclComm *c, const weft_call_t *call, const weft_p2p_op_t *p2p,
                            cudaStream_t stream) {
  pending_t *p = NULL;
  if (p2p) {
    for (int i = 0; i < nqueue && !p; i++)
      if (queue[i].comm == c && queue[i].call.coll == WEFT_COLL_P2P_GROUP) p = &queue[i];
    if (p && p->stream != stream)
      return nccl_fail(ncclInvalidUsage,
                       "sends and receives of one group on one communicator must share a stream");
    if (!p) {
      if (!(p = push())) return nccl_fail(ncclSystemError, "out of memory queueing a call");
      p->comm = c;
      p->stream = stream;
      p->call.coll = WEFT_COLL_P2P_GROUP;
    }
    if (p->nops == p->capops) {
      int cap = p->capops ? 2 * p->capops : 8;
      weft_p2p_op_t *ops = realloc(p->ops, (size_t)cap * sizeof *ops);
      if (!ops) return nccl_fail(ncclSystemError, "out of memory queueing a call");
      p->ops = ops;
      p->capops = cap;
    }
    p->ops[p->nops++] = *p2p;
    return ncclSuccess;
  }
  if (!(p = push())) return nccl_fail(ncclSystemError, "out of memory queueing a call");
  p->comm = c;
  p->stream = stream;
  p->call = *call;
  /* The caller's copy of a host factor goes when it returns; the queue moves as it grows, so
   * call.scalar is pointed at this copy only when the group is issued. */
  if (call->op == WEFT_PREMUL_SUM && !call->scalar_on_device)
    memcpy(p->factor, call->scalar, sizeof p->factor);
  return ncclSuccess;
}

ncclResult_t nccl_issue(struct ncclComm *c, const weft_call_t *call, const weft_p2p_op_t *p2p,
                        cudaStream_t stream) {
  if (depth > 0) {
    ncclResult_t res = enqueue(c, call, p2p, stream);
    return res == ncclSuccess ? res : nccl_refused(res);
  }
  if (p2p) return nccl_from_weft(weft_p2p_group(p2p, 1, c->w, stream));
  return nccl_from_weft(weft_call(call, c->w, stream));
}

ncclResult_t nccl_refused(ncclResult_t res) {
  if (depth > 0 && group_error == ncclSuccess) group_error = res;
  return res;
}

static void clear_queue(void) {
  for (int i = 0; i < nqueue; i++) free(queue[i].ops);
  free(queue);
  queue = NULL;
  nqueue = capqueue = 0;
  group_error = ncclSuccess;
}

/* Points a queued call at what the queue holds for it (a p2p batch's ops, a PreMulSum's host
 * factor): done only once the group is issued, since the queue moves while it grows. */
static void point_at_copies(pending_t *p) {
  if (p->call.coll == WEFT_COLL_P2P_GROUP) {
    p->call.ops = p->ops;
    p->call.nops = p->nops;
  }
  if (p->call.op == WEFT_PREMUL_SUM && !p->call.scalar_on_device) p->call.scalar = p->factor;
}

NCCL_API(ncclResult_t, ncclGroupEnd, void) {
  if (depth == 0)
    return nccl_fail(ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
  if (--depth > 0) return ncclSuccess;
  ncclResult_t res = group_error;
  if (res != ncclSuccess) {
    /* A call of the group was refused when queued: NCCL fails the whole group, and so does
     * weft, before any of it reaches a peer. */
    char msg[1024];
    strncpy(msg, pncclGetLastError(NULL), sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    clear_queue();
    return nccl_fail(res, "%s", msg + 6);
  }
  weft_request_t **reqs = calloc((size_t)(nqueue ? nqueue : 1), sizeof *reqs);
  if (!reqs) {
    clear_queue();
    return nccl_fail(ncclSystemError, "out of memory issuing a group");
  }
  for (int i = 0; i < nqueue; i++) {
    pending_t *p = &queue[i];
    point_at_copies(p);
    weft_result_t r = p->stream ? weft_call(&p->call, p->comm->w, p->stream)
                                : weft_call_async(&p->call, p->comm->w, &reqs[i]);
    if (r != WEFT_SUCCESS && res == ncclSuccess) res = nccl_from_weft(r);
  }
  for (int i = 0; i < nqueue; i++) {
    if (!reqs[i]) continue;
    weft_result_t r = weft_wait(reqs[i], -1);
    if (r != WEFT_SUCCESS && res == ncclSuccess) res = nccl_from_weft(r);
  }
  free(reqs);
  clear_queue();
  return res;
}

/* The group's calls priced by weft's cost model (weft_call_estimate) and added up, as they run
 * one after another, in microseconds as NCCL's tuner reports; then dropped without running, as
 * NCCL's simulation drops them. A nested end only closes its level. */
NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t *simInfo) {
  if (depth == 0)
    return nccl_fail(ncclInvalidUsage, "ncclGroupSimulateEnd without a matching ncclGroupStart");
  if (--depth > 0) return ncclSuccess;
  ncclResult_t res = group_error;
  double seconds = 0;
  for (int i = 0; i < nqueue && res == ncclSuccess; i++) {
    pending_t *p = &queue[i];
    point_at_copies(p);
    weft_algo_t algo;
    double t = 0;
    res = nccl_from_weft(weft_call_estimate(&p->call, p->comm->w, &algo, &t));
    seconds += t;
  }
  clear_queue();
  if (res != ncclSuccess) return res;
  if (simInfo) {
    size_t size;
    memcpy(&size, simInfo, sizeof size);
    if (size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float))
      simInfo->estimatedTime = (float)(seconds * 1e6);
  }
  return ncclSuccess;
}
