/* runner.c -- weft-bench's calls: any collective with any algorithm, timed or checked. */
#include <stdio.h>
#include <time.h>

#include "tools/bench/bench.h"
#include "tools/bench/pattern.h"

weft_result_t bench_report(const bench_t *b, weft_result_t res, const char *what, size_t bytes) {
  fprintf(stderr, "weft-bench: rank %d: %s (%zu bytes) failed: %s: %s\n", b->rank, what, bytes,
          weft_result_string(res), weft_last_error());
  return res;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* sendrecv as nccl-tests' sendrecv_perf: every rank sends to rank+1 and receives from rank-1,
 * both in one weft_p2p_group, as nccl-tests issues them inside one ncclGroupStart/End: the two
 * halves overlap and no order of them can deadlock. -A names the algorithm of send and recv,
 * which a group has as well ("ring", the only one). */
static weft_result_t sendrecv(bench_t *b, weft_algo_t algo, const void *send, void *recv,
                              size_t count) {
  int right = (b->rank + 1) % b->nranks, left = (b->rank + b->nranks - 1) % b->nranks;
  (void)algo;
  weft_p2p_op_t ops[2] = {{WEFT_COLL_SEND, (void *)send, count, b->args.dtype, right, 0},
                          {WEFT_COLL_RECV, recv, count, b->args.dtype, left, 0}};
  return weft_p2p_group(ops, 2, b->comm, b->stream);
}

const char *bench_sendrecv_note(void) {
  return "# sendrecv: the send and the receive of each rank run as one group (weft_p2p_group)\n";
}

weft_result_t bench_call(bench_t *b, bench_coll_t coll, weft_algo_t algo, const void *send,
                         void *recv, size_t count) {
  if (coll == BENCH_SENDRECV) return sendrecv(b, algo, send, recv, count);
  int root = bench_coll_rooted(coll) ? b->args.root : -1;
  weft_call_t k = {.coll = bench_coll_weft(coll),
                   .sendbuf = send,
                   .recvbuf = recv,
                   .count = count,
                   .dtype = b->args.dtype,
                   .op = b->args.op,
                   .root = root,
                   .algo = algo};
  return weft_call(&k, b->comm, b->stream);
}

/* The buffers of one call: out of place the two allocations; in place weft.h's layout inside
 * the receive allocation (shape.h's offsets). Out of place, a rank other than the root passes
 * NULL for the buffer weft.h says gather and scatter do not use there (gather's recvbuf,
 * scatter's sendbuf); in place it passes nccl-tests' layout, whose other pointer weft ignores. */
static void buffers(const bench_t *b, bench_coll_t coll, const bench_shape_t *sh, int in_place,
                    void **send, void **recv) {
  if (!in_place) {
    int root = b->rank == b->args.root;
    *send = coll == BENCH_SCATTER && !root ? NULL : b->send;
    *recv = coll == BENCH_GATHER && !root ? NULL : b->recv;
    return;
  }
  char *base = b->recv;
  *send = base + (size_t)b->rank * sh->send_offset * b->eltsize;
  *recv = base + (size_t)b->rank * sh->recv_offset * b->eltsize;
}

weft_result_t bench_time(bench_t *b, bench_coll_t coll, weft_algo_t algo, const bench_shape_t *sh,
                         int in_place, bench_average_t average, double *time_us) {
  void *send, *recv;
  buffers(b, coll, sh, in_place, &send, &recv);
  const char *what = bench_coll_name(coll);
  for (int i = 0; i < b->args.warmup; i++) {
    BENCH_CHECK(b, bench_call(b, coll, algo, send, recv, sh->count), what, sh->bytes);
  }
  BENCH_CHECK(b, bench_sync(b), "stream synchronization", sh->bytes);
  BENCH_CHECK(b, weft_barrier(b->comm, NULL), "barrier", sh->bytes);
  double start = now_us();
  for (int i = 0; i < b->args.iters; i++) {
    BENCH_CHECK(b, bench_call(b, coll, algo, send, recv, sh->count), what, sh->bytes);
  }
  /* Device calls are only enqueued: the time runs to the stream's end, as in nccl-tests. */
  BENCH_CHECK(b, bench_sync(b), "stream synchronization", sh->bytes);
  double t = (now_us() - start) / b->args.iters;
  weft_op_t op = WEFT_SUM;
  switch (average) {
    case BENCH_TIME_RANK0:
      *time_us = t; /* only rank 0 prints */
      return WEFT_SUCCESS;
    case BENCH_TIME_AVG:
      op = WEFT_SUM;
      break;
    case BENCH_TIME_MIN:
      op = WEFT_MIN;
      break;
    case BENCH_TIME_MAX:
      op = WEFT_MAX;
      break;
  }
  BENCH_CHECK(b, weft_all_reduce(&t, &t, 1, WEFT_FLOAT64, op, b->comm, NULL), "time reduction",
              sizeof t);
  *time_us = average == BENCH_TIME_AVG ? t / b->nranks : t;
  return WEFT_SUCCESS;
}

weft_result_t bench_check(bench_t *b, bench_coll_t coll, weft_algo_t algo, const bench_shape_t *sh,
                          int in_place, int64_t *wrong) {
  bench_pattern_t p;
  bench_pattern_init(&p, coll, b->args.dtype, b->args.op, b->nranks, b->args.root);
  void *send, *recv;
  buffers(b, coll, sh, in_place, &send, &recv);
  /* Poison first: in place, the input then overwrites what of the output it shares. A
   * broadcast's in-place buffer on a non-root rank is output only: it stays poisoned. */
  bench_pattern_poison_recv(&p, b->rank, bench_host_view(b, recv), sh->count);
  if (!(coll == BENCH_BROADCAST && in_place && b->rank != b->args.root)) {
    bench_pattern_fill_send(&p, b->rank, bench_host_view(b, send), sh->count);
  }
  /* Device buffers: the rows' whole extent, in place layouts included, both ways. */
  size_t most = sh->send_count > sh->recv_count ? sh->send_count : sh->recv_count;
  size_t off = sh->send_offset > sh->recv_offset ? sh->send_offset : sh->recv_offset;
  size_t span = (most + (size_t)b->rank * off) * b->eltsize;
  if (span > b->alloc) span = b->alloc;
  BENCH_CHECK(b, bench_device_upload(b, span), "upload", sh->bytes);
  BENCH_CHECK(b, bench_call(b, coll, algo, send, recv, sh->count), bench_coll_name(coll),
              sh->bytes);
  BENCH_CHECK(b, bench_sync(b), "stream synchronization", sh->bytes);
  BENCH_CHECK(b, bench_device_download(b, span), "download", sh->bytes);
  uint64_t n = bench_pattern_check_recv(&p, b->rank, bench_host_view(b, recv), sh->count);
  BENCH_CHECK(b, weft_all_reduce(&n, &n, 1, WEFT_UINT64, WEFT_SUM, b->comm, NULL),
              "#wrong reduction", sizeof n);
  *wrong = (int64_t)n;
  return WEFT_SUCCESS;
}
