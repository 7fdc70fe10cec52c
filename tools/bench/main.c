/* main.c -- weft-bench: nccl-tests' all_reduce_perf and broadcast_perf for weft, one process per
 * rank under a launcher: `weft-run -n 4 weft-bench -b 4K -e 256M -f 2`.
 *
 * For each size, out of place and then in place: -w untimed iterations, a barrier, -n timed ones;
 * the time per iteration is combined over ranks as -a says. With -c 1 the collective then runs once
 * more on the data of pattern.h and every rank counts its wrong elements; rank 0 prints the row. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "include/weft.h"
#include "tools/bench/args.h"
#include "tools/bench/bw.h"
#include "tools/bench/pattern.h"
#include "tools/bench/sizes.h"
#include "tools/bench/table.h"

#define HOST_MAX 64

typedef struct {
  bench_args_t args;
  weft_comm_t *comm;
  int rank;
  int nranks;
  size_t eltsize;
  void *send;
  void *recv;
  uint64_t wrong; /* summed over ranks and sizes */
  double busbw_sum;
  int busbw_rows;
} bench_t;

/* Prints a failed weft call with the rank and weft's message; returns res. */
static weft_result_t report(const bench_t *b, weft_result_t res, const char *what, size_t bytes) {
  fprintf(stderr, "weft-bench: rank %d: %s (%zu bytes) failed: %s: %s\n", b->rank, what, bytes,
          weft_result_string(res), weft_last_error());
  return res;
}

#define BENCH_CHECK(b, call, what, bytes)                                            \
  do {                                                                               \
    weft_result_t check_res_ = (call);                                               \
    if (check_res_ != WEFT_SUCCESS) return report((b), check_res_, (what), (bytes)); \
  } while (0)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The rank the launcher gave this process, for messages printed before weft knows it; -1 if the
 * environment does not say (the same variables weft_comm_init_env reads). */
static int launcher_rank(void) {
  static const char *const vars[] = {"WEFT_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v != NULL && *v != '\0') return atoi(v);
  }
  return -1;
}

static weft_result_t run_coll(bench_t *b, const void *send, void *recv, size_t count) {
  if (b->args.coll == BENCH_BROADCAST) {
    return weft_broadcast(send, recv, count, b->args.dtype, b->args.root, b->comm, NULL);
  }
  return weft_all_reduce(send, recv, count, b->args.dtype, b->args.op, b->comm, NULL);
}

static const char *place_name(int in_place) { return in_place ? "in-place" : "out-of-place"; }

/* Time per iteration in microseconds, combined over ranks per -a. */
static weft_result_t time_coll(bench_t *b, int in_place, size_t count, double *time_us) {
  size_t bytes = count * b->eltsize;
  const void *send = in_place ? b->recv : b->send;
  const char *what = bench_coll_name(b->args.coll);
  for (int i = 0; i < b->args.warmup; i++) {
    BENCH_CHECK(b, run_coll(b, send, b->recv, count), what, bytes);
  }
  BENCH_CHECK(b, weft_barrier(b->comm, NULL), "barrier", bytes);
  double start = now_us();
  for (int i = 0; i < b->args.iters; i++) {
    BENCH_CHECK(b, run_coll(b, send, b->recv, count), what, bytes);
  }
  double t = (now_us() - start) / b->args.iters;
  weft_op_t op = WEFT_SUM;
  switch (b->args.average) {
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
  *time_us = b->args.average == BENCH_TIME_AVG ? t / b->nranks : t;
  return WEFT_SUCCESS;
}

/* Runs the collective once on pattern data; *wrong = wrong elements summed over ranks. */
static weft_result_t check_coll(bench_t *b, int in_place, size_t count, int64_t *wrong) {
  size_t bytes = count * b->eltsize;
  bench_pattern_t p;
  bench_pattern_init(&p, b->args.coll, b->args.dtype, b->args.op, b->nranks, b->args.root);
  void *in = in_place ? b->recv : b->send;
  bench_pattern_poison(&p, b->recv, count);
  /* A broadcast's in-place non-root buffer is output only: it stays poisoned. */
  if (!in_place || b->args.coll == BENCH_ALL_REDUCE || b->rank == b->args.root) {
    bench_pattern_fill(&p, b->rank, in, count);
  }
  BENCH_CHECK(b, run_coll(b, in, b->recv, count), bench_coll_name(b->args.coll), bytes);
  uint64_t n = bench_pattern_check(&p, b->recv, count);
  BENCH_CHECK(b, weft_all_reduce(&n, &n, 1, WEFT_UINT64, WEFT_SUM, b->comm, NULL),
              "#wrong reduction", sizeof n);
  *wrong = (int64_t)n;
  return WEFT_SUCCESS;
}

static weft_result_t bench_size(bench_t *b, size_t bytes) {
  size_t count = bytes / b->eltsize;
  bench_result_t res[2];
  for (int in_place = 0; in_place < 2; in_place++) {
    bench_result_t *r = &res[in_place];
    weft_result_t rc = time_coll(b, in_place, count, &r->time_us);
    if (rc != WEFT_SUCCESS) return rc;
    bench_bw_t bw = bench_bw(b->args.coll, b->nranks, bytes, r->time_us);
    r->algbw = bw.algbw;
    r->busbw = bw.busbw;
    r->wrong = -1;
    if (b->args.check) {
      rc = check_coll(b, in_place, count, &r->wrong);
      if (rc != WEFT_SUCCESS) return rc;
      b->wrong += (uint64_t)r->wrong;
      if (r->wrong > 0 && b->rank == 0) {
        fprintf(stderr, "weft-bench: %zu bytes %s: %lld wrong elements\n", bytes,
                place_name(in_place), (long long)r->wrong);
      }
    }
    b->busbw_sum += r->busbw;
    b->busbw_rows++;
  }
  if (b->rank == 0) {
    char line[512];
    bench_table_row(line, sizeof line, &b->args, bytes, &res[0], &res[1]);
    fputs(line, stdout);
    fflush(stdout);
  }
  return WEFT_SUCCESS;
}

/* Rank 0 prints the parameters and every rank's pid and host, gathered with one all-reduce (max
 * over bytes that only their own rank sets). */
static weft_result_t print_header(bench_t *b) {
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
    return report(b, res, "rank table", bytes);
  }
  if (b->rank == 0) {
    char line[512];
    bench_table_params(line, sizeof line, &b->args, b->nranks, weft_version());
    fputs(line, stdout);
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
    bench_table_header(line, sizeof line);
    fputs(line, stdout);
    fflush(stdout);
  }
  free(all);
  return WEFT_SUCCESS;
}

static weft_result_t bench_run(bench_t *b) {
  size_t max = bench_sizes_max(b->args.maxbytes, b->eltsize);
  size_t alloc = max > b->eltsize ? max : b->eltsize;
  b->send = malloc(alloc);
  b->recv = malloc(alloc);
  if (b->send == NULL || b->recv == NULL) {
    fprintf(stderr, "weft-bench: rank %d: cannot allocate 2 x %zu bytes\n", b->rank, alloc);
    return WEFT_ERR_NO_MEMORY;
  }
  /* Realistic data for the timed loops: the inputs of the check. */
  bench_pattern_t p;
  bench_pattern_init(&p, b->args.coll, b->args.dtype, b->args.op, b->nranks, b->args.root);
  bench_pattern_fill(&p, b->rank, b->send, max / b->eltsize);
  bench_pattern_fill(&p, b->rank, b->recv, max / b->eltsize);

  weft_result_t res = print_header(b);
  if (res != WEFT_SUCCESS) return res;
  bench_sizes_t it;
  bench_sizes_begin(&it, b->args.minbytes, b->args.maxbytes, b->args.stepfactor, b->args.stepbytes,
                    b->eltsize);
  size_t bytes;
  while (bench_sizes_next(&it, &bytes)) {
    res = bench_size(b, bytes);
    if (res != WEFT_SUCCESS) return res;
  }
  if (b->rank == 0) {
    char line[256];
    bench_table_footer(line, sizeof line, b->wrong,
                       b->busbw_rows ? b->busbw_sum / b->busbw_rows : 0.0);
    fputs(line, stdout);
    fflush(stdout);
  }
  return WEFT_SUCCESS;
}

int main(int argc, char **argv) {
  bench_t b;
  char err[512];
  memset(&b, 0, sizeof b);
  b.rank = launcher_rank();
  int parsed = bench_args_parse(argc, (const char *const *)argv, &b.args, err, sizeof err);
  if (parsed == BENCH_ARGS_HELP) {
    if (b.rank <= 0) bench_args_usage(stdout);
    return 0;
  }
  if (parsed != BENCH_ARGS_OK) {
    if (b.rank <= 0) fprintf(stderr, "weft-bench: %s\nTry 'weft-bench -h'.\n", err);
    return 2;
  }
  b.eltsize = bench_dtype_size(b.args.dtype);

  weft_result_t res = weft_comm_init_env(&b.comm);
  if (res != WEFT_SUCCESS) {
    fprintf(stderr, "weft-bench: rank %d: weft_comm_init_env failed: %s: %s\n", b.rank,
            weft_result_string(res), weft_last_error());
    return 1;
  }
  if (weft_comm_rank(b.comm, &b.rank) != WEFT_SUCCESS ||
      weft_comm_size(b.comm, &b.nranks) != WEFT_SUCCESS) {
    fprintf(stderr, "weft-bench: rank %d: %s\n", b.rank, weft_last_error());
    weft_comm_abort(b.comm);
    return 1;
  }
  if (bench_args_check_world(&b.args, b.nranks, err, sizeof err) != BENCH_ARGS_OK) {
    if (b.rank == 0) fprintf(stderr, "weft-bench: %s\n", err);
    weft_comm_destroy(b.comm);
    return 2;
  }

  res = bench_run(&b);
  free(b.send);
  free(b.recv);
  if (res != WEFT_SUCCESS) {
    weft_comm_abort(b.comm); /* so that the other ranks fail now instead of timing out */
    return 1;
  }
  res = weft_comm_destroy(b.comm);
  if (res != WEFT_SUCCESS) {
    fprintf(stderr, "weft-bench: rank %d: weft_comm_destroy failed: %s: %s\n", b.rank,
            weft_result_string(res), weft_last_error());
    return 1;
  }
  return b.wrong ? 1 : 0;
}
