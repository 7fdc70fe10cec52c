/* table.h -- private to weft-bench: the text nccl-tests prints, line by line. */
#ifndef WEFT_TOOLS_BENCH_TABLE_H_
#define WEFT_TOOLS_BENCH_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "tools/bench/args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One placement's (out-of-place or in-place) measurement of one size. */
typedef struct {
  double time_us; /* per iteration */
  double algbw;   /* GB/s */
  double busbw;   /* GB/s */
  int64_t wrong;  /* wrong elements summed over ranks; -1 when not checked (prints N/A) */
} bench_result_t;

/* Each function writes whole lines ending in '\n' into buf (cut to len, like snprintf) and
 * returns what snprintf returns. */

/* "# weft-bench all_reduce, weft 0.1.0" and the parameter line. */
int bench_table_params(char *buf, size_t len, const bench_args_t *args, int nranks,
                       int weft_version_code);
/* "#  Rank  0 Pid  12345 on     host" */
int bench_table_rank(char *buf, size_t len, int rank, long pid, const char *host);
/* The three-line column header. */
int bench_table_header(char *buf, size_t len);
/* "# Algorithm: ring" above a table's column header (when -A is given). */
int bench_table_algo(char *buf, size_t len, const char *algo);
/* One row of `bytes` (the size column) and `count` (elements per rank), both from shape.h. redop
 * prints "none" for collectives that do not reduce and root -1 for those without one, as
 * nccl-tests; barrier's type prints "none". in_place NULL: the collective has no in-place form
 * (sendrecv, barrier), and its columns print N/A. */
int bench_table_row(char *buf, size_t len, const bench_args_t *args, size_t bytes, size_t count,
                    const bench_result_t *out_of_place, const bench_result_t *in_place);
/* "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X", "#". */
int bench_table_footer(char *buf, size_t len, uint64_t wrong, double avg_busbw);

/* A time as nccl-tests prints it in 7 columns: 0, 1 or 2 decimals depending on magnitude. */
void bench_table_time(char *buf, size_t len, double time_us);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_TABLE_H_ */
