/* collectives_api.c -- the public collective calls: argument checks, then schedule + executor. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "collectives/executor.h"
#include "collectives/schedule.h"
#include "comm/comm.h"
#include "common/clock.h"

/* Checks shared by every data-carrying collective; names the call and the bad argument. */
static weft_result_t check_args(const weft_comm_t *c, const char *call, const void *sendbuf,
                                const void *recvbuf, size_t count, weft_dtype_t dtype,
                                int need_sendbuf, weft_stream_t stream) {
  WEFT_CHECK(comm_check_usable(c));
  size_t esize = weft_dtype_size(dtype);
  if (esize == 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: %s: unknown dtype %d (valid: 0..%d)",
                    c->rank, call, (int)dtype, WEFT_NUM_DTYPES - 1);
  if (stream)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "rank %d: %s: a stream was given but this build handles host buffers only "
                    "(pass NULL)",
                    c->rank, call);
  if (count > SIZE_MAX / esize)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: %s: count %zu overflows", c->rank, call,
                    count);
  if (count == 0) return WEFT_SUCCESS;
  if (need_sendbuf && !sendbuf)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: %s: sendbuf is NULL (count %zu)", c->rank,
                    call, count);
  if (!recvbuf)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: %s: recvbuf is NULL (count %zu)", c->rank,
                    call, count);
  if (need_sendbuf && sendbuf != recvbuf) {
    uintptr_t s = (uintptr_t)sendbuf, r = (uintptr_t)recvbuf, n = count * esize;
    if (s < r + n && r < s + n)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "rank %d: %s: sendbuf and recvbuf overlap without being equal (in place "
                      "means sendbuf == recvbuf)",
                      c->rank, call);
  }
  return WEFT_SUCCESS;
}

/* Runs one schedule and turns a failure into a failed communicator with a full message. */
static weft_result_t run(weft_comm_t *c, const schedule_t *s, coll_desc_t *d, const void *sendbuf,
                         void *recvbuf) {
  int64_t start = c->config.debug >= 2 ? clock_now_ns() : 0;
  weft_result_t res = exec_run(&c->exec, s, d, sendbuf, recvbuf);
  c->seq++;
  if (c->config.debug >= 2)
    fprintf(stderr, "weft rank %d: %s #%llu count %zu %s %s root %d: %d ops, %.1f us, %s\n",
            c->rank, coll_name(d->kind), (unsigned long long)d->seq, d->count,
            weft_dtype_name(d->dtype), weft_op_name(d->op), d->root, s->nops,
            (double)(clock_now_ns() - start) / 1e3, weft_result_string(res));
  if (res == WEFT_SUCCESS) return res;
  err_context(res, "rank %d: %s #%llu (count %zu, %s)", c->rank, coll_name(d->kind),
              (unsigned long long)d->seq, d->count, weft_dtype_name(d->dtype));
  /* Printed too at WEFT_DEBUG >= 1: a failure on one rank explains the errors on the others. */
  if (c->config.debug >= 1) fprintf(stderr, "weft: %s\n", err_last());
  return comm_fail(c, res);
}

weft_result_t weft_all_reduce(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                              weft_op_t op, weft_comm_t *comm, weft_stream_t stream) {
  WEFT_CHECK(check_args(comm, "all_reduce", sendbuf, recvbuf, count, dtype, 1, stream));
  if ((unsigned)op >= WEFT_NUM_OPS)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: all_reduce: unknown op %d (valid: 0..%d: sum prod min max avg)",
                    comm->rank, (int)op, WEFT_NUM_OPS - 1);
  if (comm->nranks == 1) {
    if (sendbuf != recvbuf && count) memmove(recvbuf, sendbuf, count * weft_dtype_size(dtype));
    comm->seq++;
    return WEFT_SUCCESS;
  }
  schedule_t s;
  weft_result_t res = ring_allreduce_build(&s, comm->rank, comm->nranks, count);
  coll_desc_t d = {COLL_ALL_REDUCE, comm->seq, count, dtype, op, -1};
  if (res == WEFT_SUCCESS) res = run(comm, &s, &d, sendbuf, recvbuf);
  sched_free(&s);
  return res;
}

weft_result_t weft_broadcast(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                             int root, weft_comm_t *comm, weft_stream_t stream) {
  int is_root = comm && comm->rank == root;
  WEFT_CHECK(check_args(comm, "broadcast", sendbuf, recvbuf, count, dtype, is_root, stream));
  if (root < 0 || root >= comm->nranks)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: broadcast: root %d is out of range for a world of size %d",
                    comm->rank, root, comm->nranks);
  if (is_root && sendbuf != recvbuf && count)
    memcpy(recvbuf, sendbuf, count * weft_dtype_size(dtype));
  if (comm->nranks == 1) {
    comm->seq++;
    return WEFT_SUCCESS;
  }
  schedule_t s;
  weft_result_t res = chain_broadcast_build(&s, comm->rank, comm->nranks, root, count);
  coll_desc_t d = {COLL_BROADCAST, comm->seq, count, dtype, WEFT_SUM, root};
  /* The root forwards from recvbuf, which now holds its data, so sendbuf may be anything else. */
  if (res == WEFT_SUCCESS) res = run(comm, &s, &d, recvbuf, recvbuf);
  sched_free(&s);
  return res;
}

weft_result_t weft_barrier(weft_comm_t *comm, weft_stream_t stream) {
  WEFT_CHECK(check_args(comm, "barrier", NULL, NULL, 0, WEFT_UINT8, 0, stream));
  if (comm->nranks == 1) {
    comm->seq++;
    return WEFT_SUCCESS;
  }
  schedule_t s;
  weft_result_t res = ring_barrier_build(&s, comm->rank, comm->nranks);
  coll_desc_t d = {COLL_BARRIER, comm->seq, 0, WEFT_UINT8, WEFT_SUM, -1};
  if (res == WEFT_SUCCESS) res = run(comm, &s, &d, NULL, NULL);
  sched_free(&s);
  return res;
}
