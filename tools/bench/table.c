/* table.c -- weft-bench's output, column for column as nccl-tests' common.cu prints it. */
#include "tools/bench/table.h"

#include <inttypes.h>
#include <stdio.h>

int bench_table_params(char *buf, size_t len, const bench_args_t *args, int nranks,
                       int weft_version_code) {
  int factor = args->stepfactor > 1;
  return snprintf(buf, len,
                  "# weft-bench %s, weft %d.%d.%d\n"
                  "# nRanks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
                  "validation: %d average: %d\n",
                  bench_coll_name(args->coll), weft_version_code / 10000,
                  weft_version_code / 100 % 100, weft_version_code % 100, nranks, args->minbytes,
                  args->maxbytes, factor ? args->stepfactor : args->stepbytes,
                  factor ? "factor" : "bytes", args->warmup, args->iters, args->check,
                  (int)args->average);
}

int bench_table_rank(char *buf, size_t len, int rank, long pid, const char *host) {
  return snprintf(buf, len, "#  Rank %2d Pid %6ld on %10s\n", rank, pid, host);
}

int bench_table_header(char *buf, size_t len) {
  return snprintf(
      buf, len,
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
      "\n"
      "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n"
      "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n",
      "", "", "", "", "",                                                           /* line 1 */
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", /* line 2 */
      "time", "algbw", "busbw", "#wrong",                                           /* */
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",      /* line 3 */
      "(GB/s)", "(GB/s)", "");
}

void bench_table_time(char *buf, size_t len, double time_us) {
  if (time_us >= 10000.0) {
    snprintf(buf, len, "%7.0f", time_us);
  } else if (time_us >= 100.0) {
    snprintf(buf, len, "%7.1f", time_us);
  } else {
    snprintf(buf, len, "%7.2f", time_us);
  }
}

int bench_table_algo(char *buf, size_t len, const char *algo) {
  return snprintf(buf, len, "# Algorithm: %s\n", algo);
}

/* "  time  algbw  busbw  wrong" for one placement; all N/A when r is NULL. */
static int format_result(char *buf, size_t len, const bench_result_t *r) {
  if (r == NULL) return snprintf(buf, len, "  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
  char time[32];
  char wrong[32];
  bench_table_time(time, sizeof time, r->time_us);
  if (r->wrong < 0) {
    snprintf(wrong, sizeof wrong, "N/A");
  } else {
    snprintf(wrong, sizeof wrong, "%" PRId64, r->wrong);
  }
  return snprintf(buf, len, "  %7s  %6.2f  %6.2f  %5s", time, r->algbw, r->busbw, wrong);
}

int bench_table_row(char *buf, size_t len, const bench_args_t *args, size_t bytes, size_t count,
                    const bench_result_t *out_of_place, const bench_result_t *in_place) {
  char oop[128];
  char ip[128];
  format_result(oop, sizeof oop, out_of_place);
  format_result(ip, sizeof ip, in_place);
  const char *type = args->coll == BENCH_BARRIER ? "none" : bench_dtype_name(args->dtype);
  const char *op = bench_coll_reduces(args->coll) ? bench_op_name(args->op) : "none";
  int root = bench_coll_rooted(args->coll) ? args->root : -1;
  return snprintf(buf, len, "%12zu  %12zu  %8s  %6s  %6d%s%s\n", bytes, count, type, op, root, oop,
                  ip);
}

int bench_table_footer(char *buf, size_t len, uint64_t wrong, double avg_busbw) {
  return snprintf(buf, len,
                  "# Out of bounds values : %" PRIu64
                  " %s\n"
                  "# Avg bus bandwidth    : %g\n"
                  "#\n",
                  wrong, wrong ? "FAILED" : "OK", avg_busbw);
}
