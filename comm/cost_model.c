/* cost_model.c -- alpha, beta and gamma for the automatic algorithm choice: read from
 * WEFT_TUNE_FILE (tune_file.c), or measured at init and averaged over all ranks so that every rank
 * makes the same choice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "common/clock.h"
#include "kernels/reduce.h"

/* Loopback-like defaults, used until the measurement runs (and by one-rank communicators). */
static const cost_model_t defaults = {30e-6, 1.0 / 1.5e9, 1.0 / 4e9, 65536};

weft_result_t cost_model_init(weft_comm_t *c) {
  c->model = defaults;
  c->model.slice_bytes = (double)c->config.slice_bytes;
  if (c->config.tune_file[0]) WEFT_CHECK(cost_model_load(c->config.tune_file, &c->model));
  return WEFT_SUCCESS;
}

/* The fastest of `iters` ring shifts of `bytes`, after two untimed ones: each rank sends to its
 * right neighbour and receives from its left one at once, as a ring step does. The minimum, not
 * the mean: on a busy or oversubscribed machine single shifts can wait milliseconds for a peer to
 * be scheduled, and a mean of such outliers made the algorithm choice change from run to run. */
static weft_result_t time_ring_shift(weft_comm_t *c, char *buf, size_t bytes, int iters,
                                     double *seconds) {
  int right = (c->rank + 1) % c->nranks, left = (c->rank - 1 + c->nranks) % c->nranks;
  weft_result_t res = WEFT_SUCCESS;
  *seconds = 0;
  for (int i = -2; i < iters && res == WEFT_SUCCESS; i++) {
    schedule_t s;
    sched_init(&s, bytes, bytes);
    sched_op_t send = {.kind = SCHED_SEND, .peer = right, .buf = SCHED_SENDBUF, .count = bytes,
                       .dep = -1};
    sched_op_t recv = {.kind = SCHED_RECV_COPY, .peer = left, .buf = SCHED_RECVBUF,
                       .count = bytes, .dep = -1};
    if (sched_add(&s, &send) < 0 || sched_add(&s, &recv) < 0)
      res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "cost measurement: out of memory");
    coll_desc_t d = {WEFT_COLL_BARRIER, WEFT_ALGO_RING, 0, bytes, WEFT_UINT8, WEFT_SUM, -1};
    int64_t start = clock_now_ns();
    if (res == WEFT_SUCCESS) res = exec_run(&c->exec, &s, &d, buf, buf + bytes, 0);
    double t = (double)(clock_now_ns() - start) / 1e9;
    if (i >= 0 && (*seconds == 0 || t < *seconds)) *seconds = t;
    sched_free(&s);
  }
  return res;
}

weft_result_t cost_model_measure(weft_comm_t *c) {
  if (c->nranks < 2 || c->config.tune_file[0]) return WEFT_SUCCESS;
  const size_t big = 1 << 20;
  char *buf = calloc(2, big);
  if (!buf) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "cost measurement: out of memory");
  double t_small, t_big;
  weft_result_t res = time_ring_shift(c, buf, 8, 8, &t_small);
  if (res == WEFT_SUCCESS) res = time_ring_shift(c, buf, big, 3, &t_big);
  /* gamma: one pass of the float32 sum loop over the same megabyte, as a reduce step does. */
  int64_t start = clock_now_ns();
  for (int i = 0; i < 4; i++)
    kern_reduce(buf, buf, buf + big, big / 4, WEFT_FLOAT32, WEFT_SUM);
  double t_reduce = (double)(clock_now_ns() - start) / 1e9 / 4;
  if (res == WEFT_SUCCESS) {
    double alpha = t_small, local[3];
    local[0] = alpha;
    local[1] = (t_big - alpha) / (double)big;
    local[2] = t_reduce / (double)big;
    if (local[1] < 0) local[1] = 0;
    /* Averaged over the ranks with a ring all-reduce, which gives every rank the same bits. */
    double sum[3];
    weft_call_t k = {.coll = WEFT_COLL_ALL_REDUCE,
                     .sendbuf = local,
                     .recvbuf = sum,
                     .count = 3,
                     .dtype = WEFT_FLOAT64,
                     .op = WEFT_SUM,
                     .root = -1,
                     .algo = WEFT_ALGO_RING};
    res = comm_call(c, &k);
    if (res == WEFT_SUCCESS) {
      c->model.alpha = sum[0] / c->nranks;
      c->model.beta = sum[1] / c->nranks;
      c->model.gamma = sum[2] / c->nranks;
    }
  }
  free(buf);
  return res == WEFT_SUCCESS ? res : err_context(res, "rank %d: measuring the cost model", c->rank);
}
