/* shape.c -- sizes, counts and in-place offsets per collective, as nccl-tests computes them. */
#include "tools/bench/shape.h"

/* nccl-tests' ALIGN in all_gather.cu and reduce_scatter.cu: per-rank counts are multiples of 4.
 * Gather and scatter are cut the same way. */
#define SPLIT_ALIGN 4

static int splits(bench_coll_t coll) {
  return coll == BENCH_ALL_GATHER || coll == BENCH_REDUCE_SCATTER || coll == BENCH_GATHER ||
         coll == BENCH_SCATTER || coll == BENCH_ALL_TO_ALL;
}

size_t bench_shape_granule(bench_coll_t coll, int nranks, size_t eltsize) {
  size_t n = nranks > 0 ? (size_t)nranks : 1;
  if (eltsize == 0) eltsize = 1;
  return splits(coll) ? eltsize * SPLIT_ALIGN * n : eltsize;
}

bench_shape_t bench_shape(bench_coll_t coll, int nranks, size_t eltsize, size_t bytes) {
  bench_shape_t s = {0, 0, 0, 0, 0, 0, 0};
  size_t n = nranks > 0 ? (size_t)nranks : 1;
  if (eltsize == 0 || coll == BENCH_BARRIER) return s;
  size_t elems = bytes / eltsize;
  if (splits(coll)) {
    s.count = elems / (SPLIT_ALIGN * n) * SPLIT_ALIGN;
    s.bytes = s.count * n * eltsize;
    s.has_in_place = 1;
    if (coll == BENCH_ALL_TO_ALL) { /* weft has no in-place all-to-all */
      s.send_count = s.recv_count = s.count * n;
      s.has_in_place = 0;
    } else if (coll == BENCH_ALL_GATHER || coll == BENCH_GATHER) {
      s.send_count = s.count;
      s.recv_count = s.count * n;
      s.send_offset = s.count;
    } else {
      s.send_count = s.count * n;
      s.recv_count = s.count;
      s.recv_offset = s.count;
    }
    return s;
  }
  s.count = s.send_count = s.recv_count = elems;
  s.bytes = elems * eltsize;
  s.has_in_place = coll != BENCH_SENDRECV;
  return s;
}
