/* sweep.c -- nccl-tests' output: the parameters, then one table per algorithm, row per size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/bench/bench.h"
#include "tools/bench/bw.h"
#include "tools/bench/sizes.h"
#include "tools/bench/table.h"

#define HOST_MAX 64

/* Rank 0 prints the parameters and every rank's pid and host, gathered with one all-reduce (max
 * over bytes that only their own rank sets). */
weft_result_t bench_print_header(bench_t *b) {
  size_t slot = sizeof(int64_t) + HOST_MAX;
  size_t bytes = slot * (size_t)b->nranks;
  uint8_t *all = calloc(bytes, 1);
  if (all == NULL) {
    fprintf(stderr, "weft-bench: rank %d: out of memory for %zu bytes\n", b->rank, bytes);
    return WEFT_ERR_NO_MEMORY;
  }
  uint8_t *mine = all + slot * (size_t)b->rank;
  int64_t pid = (int64_t)getpid();
  memcpy(mine, &pid, sizeof pid);
  if (gethostname((char *)mine + sizeof pid, HOST_MAX - 1) != 0) {
    strcpy((char *)mine + sizeof pid, "?");
  }
  weft_result_t res = weft_all_reduce(all, all, bytes, WEFT_UINT8, WEFT_MAX, b->comm, NULL);
  if (res != WEFT_SUCCESS) {
    free(all);
    return bench_report(b, res, "rank table", bytes);
  }
  if (b->rank == 0) {
    char line[512];
    bench_table_params(line, sizeof line, &b->args, b->nranks, weft_version());
    fputs(line, stdout);
    if (b->dev)
      printf("# Buffers: device memory (%s engine, device %d), calls enqueued on a stream; time "
             "runs to its synchronization\n",
             b->dev->ops->name, b->dev->device);
    fputs("#\n# Using ranks\n", stdout);
    for (int r = 0; r < b->nranks; r++) {
      const uint8_t *s = all + slot * (size_t)r;
      memcpy(&pid, s, sizeof pid);
      char host[HOST_MAX];
      memcpy(host, s + sizeof pid, HOST_MAX);
      host[HOST_MAX - 1] = '\0';
      bench_table_rank(line, sizeof line, r, (long)pid, host);
      fputs(line, stdout);
    }
    fputs("#\n", stdout);
    fflush(stdout);
  }
  free(all);
  return WEFT_SUCCESS;
}

/* Per-table totals for its footer. */
typedef struct {
  uint64_t wrong;
  double busbw_sum;
  int busbw_rows;
} totals_t;

/* One placement of one row: time, bandwidths, and the check with -c 1. */
static weft_result_t measure(bench_t *b, weft_algo_t algo, const bench_shape_t *sh, int in_place,
                             bench_result_t *r, totals_t *tot) {
  bench_coll_t coll = b->args.coll;
  weft_result_t rc = bench_time(b, coll, algo, sh, in_place, b->args.average, &r->time_us);
  if (rc != WEFT_SUCCESS) return rc;
  bench_bw_t bw = bench_bw(coll, b->nranks, sh->bytes, r->time_us);
  r->algbw = bw.algbw;
  r->busbw = bw.busbw;
  r->wrong = -1;
  if (b->args.check && coll != BENCH_BARRIER) { /* a barrier has no data to check */
    rc = bench_check(b, coll, algo, sh, in_place, &r->wrong);
    if (rc != WEFT_SUCCESS) return rc;
    tot->wrong += (uint64_t)r->wrong;
    if (r->wrong > 0 && b->rank == 0) {
      fprintf(stderr, "weft-bench: %s %s %zu bytes %s: %lld wrong elements\n",
              bench_coll_name(coll), weft_algo_name(algo), sh->bytes,
              in_place ? "in-place" : "out-of-place", (long long)r->wrong);
    }
  }
  tot->busbw_sum += r->busbw;
  tot->busbw_rows++;
  return WEFT_SUCCESS;
}

static weft_result_t row(bench_t *b, weft_algo_t algo, const bench_shape_t *sh, totals_t *tot) {
  bench_result_t res[2];
  for (int in_place = 0; in_place < 1 + sh->has_in_place; in_place++) {
    weft_result_t rc = measure(b, algo, sh, in_place, &res[in_place], tot);
    if (rc != WEFT_SUCCESS) return rc;
  }
  if (b->rank == 0) {
    char line[512];
    bench_table_row(line, sizeof line, &b->args, sh->bytes, sh->count, &res[0],
                    sh->has_in_place ? &res[1] : NULL);
    fputs(line, stdout);
    fflush(stdout);
  }
  return WEFT_SUCCESS;
}

static weft_result_t table(bench_t *b, weft_algo_t algo) {
  bench_coll_t coll = b->args.coll;
  totals_t tot = {0, 0.0, 0};
  if (b->rank == 0) {
    char line[512];
    if (strcmp(b->args.algo, "auto") != 0) {
      bench_table_algo(line, sizeof line, weft_algo_name(algo));
      fputs(line, stdout);
    }
    bench_table_header(line, sizeof line);
    fputs(line, stdout);
    fflush(stdout);
  }
  weft_result_t res = WEFT_SUCCESS;
  if (coll == BENCH_BARRIER) { /* no sizes: one row */
    bench_shape_t sh = bench_shape(coll, b->nranks, b->eltsize, 0);
    res = row(b, algo, &sh, &tot);
  } else {
    bench_sizes_t it;
    bench_sizes_begin(&it, b->args.minbytes, b->args.maxbytes, b->args.stepfactor,
                      b->args.stepbytes, bench_shape_granule(coll, b->nranks, b->eltsize));
    size_t bytes;
    while (res == WEFT_SUCCESS && bench_sizes_next(&it, &bytes)) {
      bench_shape_t sh = bench_shape(coll, b->nranks, b->eltsize, bytes);
      res = row(b, algo, &sh, &tot);
    }
  }
  if (res != WEFT_SUCCESS) return res;
  b->wrong += tot.wrong;
  if (b->rank == 0) {
    char line[256];
    bench_table_footer(line, sizeof line, tot.wrong,
                       tot.busbw_rows ? tot.busbw_sum / tot.busbw_rows : 0.0);
    fputs(line, stdout);
    fflush(stdout);
  }
  return WEFT_SUCCESS;
}

weft_result_t bench_sweep(bench_t *b, const weft_algo_t *algos, int nalgos) {
  if (b->rank == 0 && b->args.coll == BENCH_SENDRECV) {
    fputs(bench_sendrecv_note(), stdout);
    fputs("#\n", stdout);
  }
  for (int i = 0; i < nalgos; i++) {
    weft_result_t res = table(b, algos[i]);
    if (res != WEFT_SUCCESS) return res;
  }
  return WEFT_SUCCESS;
}
