/* main.c -- weft-bench: nccl-tests' *_perf programs for weft's collectives, one process per rank
 * under a launcher: `weft-run -n 4 weft-bench -C all_reduce -b 4K -e 256M -f 2`.
 *
 * For each size, out of place and then in place: -w untimed iterations, a barrier, -n timed ones;
 * the time per iteration is combined over ranks as -a says. With -c 1 the collective then runs once
 * more on the data of pattern.h and every rank counts its wrong elements; rank 0 prints the row.
 * -A all prints one such table per algorithm; --tune fits the cost model instead (tuning.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/algos.h"
#include "tools/bench/bench.h"
#include "tools/bench/pattern.h"
#include "tools/bench/sizes.h"

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

/* Both buffers, large enough for the largest row (and --tune's fit), filled with realistic data
 * for the timed loops: the inputs of the check. */
static weft_result_t allocate(bench_t *b) {
  size_t max = bench_sizes_max(b->args.maxbytes, b->eltsize);
  if (b->args.tune_file[0] != '\0' && bench_tune_alloc(b->nranks) > max) {
    max = bench_tune_alloc(b->nranks);
  }
  b->alloc = max > b->eltsize ? max : b->eltsize;
  if (b->dev) return bench_device_alloc(b);
  b->send = malloc(b->alloc);
  b->recv = malloc(b->alloc);
  if (b->send == NULL || b->recv == NULL) {
    fprintf(stderr, "weft-bench: rank %d: cannot allocate 2 x %zu bytes\n", b->rank, b->alloc);
    return WEFT_ERR_NO_MEMORY;
  }
  bench_pattern_t p;
  bench_pattern_init(&p, b->args.coll, b->args.dtype, b->args.op, b->nranks, b->args.root);
  bench_pattern_fill(&p, b->rank, b->send, b->alloc / b->eltsize);
  bench_pattern_fill(&p, b->rank, b->recv, b->alloc / b->eltsize);
  return WEFT_SUCCESS;
}

static weft_result_t bench_run(bench_t *b, const weft_algo_t *algos, int nalgos) {
  weft_result_t res = allocate(b);
  if (res == WEFT_SUCCESS) res = bench_print_header(b);
  if (res != WEFT_SUCCESS) return res;
  return b->args.tune_file[0] != '\0' ? bench_tune(b) : bench_sweep(b, algos, nalgos);
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
  weft_algo_t algos[WEFT_NUM_ALGOS];
  int nalgos = 0;
  if (parsed == BENCH_ARGS_OK && b.args.tune_file[0] == '\0') {
    nalgos = bench_algos_resolve(b.args.coll, b.args.algo, algos, WEFT_NUM_ALGOS, err, sizeof err);
    if (nalgos < 0) parsed = BENCH_ARGS_ERROR;
  }
  if (parsed != BENCH_ARGS_OK) {
    if (b.rank <= 0) fprintf(stderr, "weft-bench: %s\nTry 'weft-bench -h'.\n", err);
    return 2;
  }
  b.eltsize = bench_dtype_size(b.args.dtype);
  if (b.args.device[0] != '\0' && bench_device_open(&b) != WEFT_SUCCESS) {
    fprintf(stderr, "weft-bench: rank %d: -G %s: %s\n", b.rank, b.args.device, weft_last_error());
    return 1;
  }

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
    /* The others wait for rank 0's message: a launcher stops the job at the first exit. */
    weft_barrier(b.comm, NULL);
    weft_comm_destroy(b.comm);
    return 2;
  }

  res = bench_run(&b, algos, nalgos);
  if (b.dev) {
    bench_device_close(&b);
  } else {
    free(b.send);
    free(b.recv);
  }
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
