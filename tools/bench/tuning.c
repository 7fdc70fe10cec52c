/* tuning.c -- --tune: alpha, beta and gamma measured on this job and written for WEFT_TUNE_FILE,
 * then the crossover table: per collective and size, the fastest algorithm against the model's
 * pick.
 *
 * A ring shift (every rank sends m bytes to its right neighbour and receives m from its left one,
 * at once) is measured as a ring all-gather of m bytes per rank: that is p-1 shifts back to back,
 * run by the library's own ring schedule with send and receive overlapped, so one shift takes
 * t / (p-1) = alpha + m beta. Only if the build lacks a ring all-gather is weft-bench's sendrecv
 * used instead: one grouped send and receive per rank (runner.c), one shift per call. tune.h
 * says how the fit works. */
#include <stdio.h>
#include <time.h>

#include "kernels/reduce.h"
#include "tools/bench/algos.h"
#include "tools/bench/bench.h"
#include "tools/bench/crossover.h"
#include "tools/bench/model.h"
#include "tools/bench/sizes.h"
#include "tools/bench/tune.h"

static const size_t shift_sizes[] = {8, 64, 512, 4096, 32768, 262144, 1u << 20, 4u << 20};
static const size_t reduce_sizes[] = {1u << 20, 4u << 20, 16u << 20};
#define NUM_SHIFTS (sizeof shift_sizes / sizeof shift_sizes[0])
#define NUM_REDUCES (sizeof reduce_sizes / sizeof reduce_sizes[0])

size_t bench_tune_alloc(int nranks) {
  size_t shift = shift_sizes[NUM_SHIFTS - 1] * (size_t)(nranks > 0 ? nranks : 1);
  size_t reduce = reduce_sizes[NUM_REDUCES - 1];
  return shift > reduce ? shift : reduce;
}

/* The fit's samples are the best of REPEATS timings (-w, then -n calls, the slowest rank's time):
 * on a shared machine the least disturbed run is the closest to what the model describes. */
#define REPEATS 3

static weft_result_t time_best(bench_t *b, bench_coll_t coll, weft_algo_t algo,
                               const bench_shape_t *sh, double *us) {
  for (int i = 0; i < REPEATS; i++) {
    double t;
    weft_result_t res = bench_time(b, coll, algo, sh, 0, BENCH_TIME_MAX, &t);
    if (res != WEFT_SUCCESS) return res;
    if (i == 0 || t < *us) *us = t;
  }
  return WEFT_SUCCESS;
}

/* Seconds per ring shift of `bytes`. */
static weft_result_t time_shift(bench_t *b, size_t bytes, int ring_allgather, double *seconds) {
  size_t count = bytes / b->eltsize;
  bench_shape_t sh = {count * b->eltsize, count, count, count, 0, 0, 0};
  double us = 0;
  weft_result_t res;
  if (ring_allgather) {
    sh.bytes *= (size_t)b->nranks;
    sh.recv_count *= (size_t)b->nranks;
    res = time_best(b, BENCH_ALL_GATHER, WEFT_ALGO_RING, &sh, &us);
    us /= b->nranks - 1;
  } else {
    res = time_best(b, BENCH_SENDRECV, WEFT_ALGO_AUTO, &sh, &us);
  }
  *seconds = us * 1e-6;
  return res;
}

/* gamma when the all-reduce residuals give none: the reduction loop alone over 1 MiB, the
 * slowest rank's. */
static weft_result_t time_kernel(bench_t *b, double *gamma) {
  size_t bytes = 1u << 20;
  size_t n = bytes / b->eltsize;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 8; i++) {
    BENCH_CHECK(b, kern_reduce(b->recv, b->recv, b->send, n, b->args.dtype, b->args.op),
                "reduction kernel", bytes);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9) / 8;
  *gamma = s / (double)(n * b->eltsize);
  BENCH_CHECK(b, weft_all_reduce(gamma, gamma, 1, WEFT_FLOAT64, WEFT_MAX, b->comm, NULL),
              "time reduction", sizeof *gamma);
  return WEFT_SUCCESS;
}

/* Rank 0 writes the file; every rank learns whether that worked. */
static weft_result_t write_file(bench_t *b, const bench_tune_t *t) {
  int failed = 0;
  if (b->rank == 0) {
    char text[256];
    bench_tune_format(text, sizeof text, t);
    FILE *f = fopen(b->args.tune_file, "w");
    failed = f == NULL || fputs(text, f) < 0;
    if (f != NULL && fclose(f) != 0) failed = 1;
    if (failed) perror(b->args.tune_file);
  }
  BENCH_CHECK(b, weft_all_reduce(&failed, &failed, 1, WEFT_INT32, WEFT_MAX, b->comm, NULL),
              "tune file status", sizeof failed);
  if (failed) {
    if (b->rank == 0) fprintf(stderr, "weft-bench: cannot write %s\n", b->args.tune_file);
    return WEFT_ERR_SYSTEM;
  }
  return WEFT_SUCCESS;
}

static void print_fit(const bench_t *b, const bench_tune_t *t, const bench_samples_t *sh,
                      const bench_samples_t *ar, int ring_allgather, int gamma_fitted) {
  double p = b->nranks;
  printf("# Cost model of this job (%d ranks, %s %s), as WEFT_TUNE_FILE:\n", b->nranks,
         bench_dtype_name(b->args.dtype), bench_op_name(b->args.op));
  printf("#   alpha %-12.4g s per message\n", t->alpha);
  printf("#   beta  %-12.4g s/B (%.3g GB/s per link)\n", t->beta,
         t->beta > 0 ? 1e-9 / t->beta : 0.0);
  printf("#   gamma %-12.4g s/B (%.3g GB/s reduced)\n", t->gamma,
         t->gamma > 0 ? 1e-9 / t->gamma : 0.0);
  printf(
      "# samples: best of %d runs; alpha, beta: least squares (relative error) over ring "
      "shifts of %zu B .. %zu MiB%s\n",
      REPEATS, shift_sizes[0], shift_sizes[NUM_SHIFTS - 1] >> 20,
      ring_allgather ? " (ring all_gather, time / (p-1))"
                     : " (grouped sendrecv: no ring all_gather in this build)");
  if (gamma_fitted) {
    printf("# gamma: ring all_reduce of %zu .. %zu MiB minus its alpha-beta part\n",
           reduce_sizes[0] >> 20, reduce_sizes[NUM_REDUCES - 1] >> 20);
  } else {
    printf(
        "# gamma: the reduction loop alone (ring all_reduce was no slower than its "
        "alpha-beta part)\n");
  }
  printf("# %16s  %12s  %13s  %13s\n", "sample", "bytes", "measured (us)", "model (us)");
  for (size_t i = 0; i < sh->n; i++) {
    printf("# %16s  %12.0f  %13.2f  %13.2f\n", "ring shift", sh->bytes[i], sh->seconds[i] * 1e6,
           (t->alpha + sh->bytes[i] * t->beta) * 1e6);
  }
  for (size_t i = 0; i < ar->n; i++) {
    double n = ar->bytes[i];
    double model = 2 * (p - 1) * t->alpha + (p - 1) / p * n * (2 * t->beta + t->gamma);
    printf("# %16s  %12.0f  %13.2f  %13.2f\n", "ring all_reduce", n, ar->seconds[i] * 1e6,
           model * 1e6);
  }
  printf("# Wrote %s: run with WEFT_TUNE_FILE=%s\n#\n", b->args.tune_file, b->args.tune_file);
}

static weft_result_t fit(bench_t *b, bench_tune_t *t) {
  double sbytes[NUM_SHIFTS], ssec[NUM_SHIFTS], rbytes[NUM_REDUCES], rsec[NUM_REDUCES];
  int ring_allgather = bench_algo_supported(BENCH_ALL_GATHER, WEFT_ALGO_RING);
  for (size_t i = 0; i < NUM_SHIFTS; i++) {
    sbytes[i] = (double)(shift_sizes[i] / b->eltsize * b->eltsize);
    weft_result_t res = time_shift(b, shift_sizes[i], ring_allgather, &ssec[i]);
    if (res != WEFT_SUCCESS) return res;
  }
  for (size_t i = 0; i < NUM_REDUCES; i++) {
    bench_shape_t sh = bench_shape(BENCH_ALL_REDUCE, b->nranks, b->eltsize, reduce_sizes[i]);
    double us = 0;
    weft_result_t res = time_best(b, BENCH_ALL_REDUCE, WEFT_ALGO_RING, &sh, &us);
    if (res != WEFT_SUCCESS) return res;
    rbytes[i] = (double)sh.bytes;
    rsec[i] = us * 1e-6;
  }
  bench_samples_t shifts = {sbytes, ssec, NUM_SHIFTS}, reduces = {rbytes, rsec, NUM_REDUCES};
  int gamma_fitted = 0;
  /* Every rank has the same (max-combined) samples, so every rank fits the same values. */
  if (bench_tune_fit(&shifts, &reduces, b->nranks, t, &gamma_fitted) != 0) {
    if (b->rank == 0) fprintf(stderr, "weft-bench: --tune: the ring shifts gave no fit\n");
    return WEFT_ERR_INTERNAL;
  }
  if (!gamma_fitted) {
    weft_result_t res = time_kernel(b, &t->gamma);
    if (res != WEFT_SUCCESS) return res;
  }
  weft_result_t res = write_file(b, t);
  if (res != WEFT_SUCCESS) return res;
  if (b->rank == 0) {
    print_fit(b, t, &shifts, &reduces, ring_allgather, gamma_fitted);
    fflush(stdout);
  }
  return WEFT_SUCCESS;
}

/* One collective's rows of the crossover table. */
static weft_result_t crossover(bench_t *b, bench_coll_t coll, const bench_tune_t *t,
                               bench_crossover_stats_t *stats) {
  weft_algo_t algos[WEFT_NUM_ALGOS];
  char err[256];
  int n = bench_algos_resolve(coll, "all", algos, WEFT_NUM_ALGOS, err, sizeof err);
  if (n < 0) {
    if (b->rank == 0) printf("# %s: skipped: %s\n", bench_coll_name(coll), err);
    return WEFT_SUCCESS;
  }
  bench_coll_t saved = b->args.coll;
  b->args.coll = coll;
  bench_sizes_t it;
  bench_sizes_begin(&it, b->args.minbytes, b->args.maxbytes, b->args.stepfactor, b->args.stepbytes,
                    bench_shape_granule(coll, b->nranks, b->eltsize));
  size_t bytes = 0;
  weft_result_t res = WEFT_SUCCESS;
  for (int first = 1; res == WEFT_SUCCESS; first = 0) {
    if (coll == BENCH_BARRIER ? !first : !bench_sizes_next(&it, &bytes)) break;
    bench_shape_t sh = bench_shape(coll, b->nranks, b->eltsize, bytes);
    bench_algo_time_t times[WEFT_NUM_ALGOS];
    for (int i = 0; i < n && res == WEFT_SUCCESS; i++) {
      times[i].name = weft_algo_name(algos[i]);
      res = bench_time(b, coll, algos[i], &sh, 0, b->args.average, &times[i].time_us);
    }
    if (res == WEFT_SUCCESS && b->rank == 0) {
      weft_algo_t pick = bench_model_pick(coll, t, b->nranks, (double)sh.bytes);
      char line[1024];
      bench_crossover_row(line, sizeof line, bench_coll_name(coll), b->nranks, sh.bytes,
                          pick == WEFT_NUM_ALGOS ? NULL : weft_algo_name(pick), times, n, stats);
      fputs(line, stdout);
      fflush(stdout);
    }
  }
  b->args.coll = saved;
  return res;
}

weft_result_t bench_tune(bench_t *b) {
  bench_tune_t t;
  weft_result_t res = fit(b, &t);
  if (res != WEFT_SUCCESS) return res;
  /* sendrecv is left out: it has one algorithm and nothing to choose. */
  static const bench_coll_t colls[] = {BENCH_ALL_REDUCE, BENCH_BROADCAST,      BENCH_REDUCE,
                                       BENCH_ALL_GATHER, BENCH_REDUCE_SCATTER, BENCH_BARRIER,
                                       BENCH_GATHER,     BENCH_SCATTER,        BENCH_ALL_TO_ALL};
  bench_crossover_stats_t stats = {0, 0, 0.0};
  if (b->rank == 0) {
    char line[512];
    printf(
        "# Crossovers: the fastest algorithm per size (-a %d over ranks, out of place) and the "
        "one the cost model above picks\n",
        (int)b->args.average);
    bench_crossover_header(line, sizeof line);
    fputs(line, stdout);
  }
  for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++) {
    if (b->args.coll_given && colls[i] != b->args.coll) continue;
    res = crossover(b, colls[i], &t, &stats);
    if (res != WEFT_SUCCESS) return res;
  }
  if (b->rank == 0) {
    char line[512];
    bench_crossover_summary(line, sizeof line, &stats);
    fputs(line, stdout);
    fflush(stdout);
  }
  return WEFT_SUCCESS;
}
