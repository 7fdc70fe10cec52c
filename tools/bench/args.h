/* args.h -- private to weft-bench: the command line, parsed and validated as nccl-tests does. */
#ifndef WEFT_TOOLS_BENCH_ARGS_H_
#define WEFT_TOOLS_BENCH_ARGS_H_

#include <stddef.h>
#include <stdio.h>

#include "include/weft.h"
#include "tools/bench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How per-rank times are combined into the reported one (-a), as nccl-tests' --average. */
typedef enum {
  BENCH_TIME_RANK0 = 0,
  BENCH_TIME_AVG = 1,
  BENCH_TIME_MIN = 2,
  BENCH_TIME_MAX = 3
} bench_average_t;

typedef struct {
  size_t minbytes;   /* -b, default 32M (nccl-tests' default) */
  size_t maxbytes;   /* -e, default 32M */
  size_t stepbytes;  /* -i, default 1M; used when -f is not given */
  size_t stepfactor; /* -f, 0 when not given */
  int iters;         /* -n, default 20 */
  int warmup;        /* -w, default 5 */
  int check;         /* -c, default 1 */
  int root;          /* -r, default 0; checked against the world size by bench_args_check_world */
  bench_average_t average; /* -a, default BENCH_TIME_AVG */
  weft_dtype_t dtype;      /* -d, default float */
  weft_op_t op;            /* -o, default sum */
  bench_coll_t coll;       /* -C / --coll, default all_reduce */
  int coll_given;          /* -C was on the command line (--tune then times that one only) */
  char algo[32];           /* -A / --algo: an algorithm name, "all", or "auto" (the default);
                            * resolved against the build by algos.h */
  char tune_file[512];     /* --tune FILE: fit the cost model, write it there; "" when not given */
  char device[16];         /* -G / --device ENGINE: buffers in device memory ("" = host), e.g.
                            * cuda, or emulated (device/device.h) */
} bench_args_t;

enum { BENCH_ARGS_OK = 0, BENCH_ARGS_HELP = 1, BENCH_ARGS_ERROR = 2 };

void bench_args_defaults(bench_args_t *args);

/* Parses argv[1..argc) into `args` (starting from the defaults). Returns BENCH_ARGS_OK,
 * BENCH_ARGS_HELP for -h, or BENCH_ARGS_ERROR with a one-line message in `err`. */
int bench_args_parse(int argc, const char *const *argv, bench_args_t *args, char *err,
                     size_t errlen);

/* What can only be checked once the world size is known (the root). BENCH_ARGS_OK or
 * BENCH_ARGS_ERROR with a message. */
int bench_args_check_world(const bench_args_t *args, int nranks, char *err, size_t errlen);

/* "4096", "4K", "1.5M", "2g": a byte count with an optional K, M or G suffix (powers of 1024).
 * Returns 0, or -1 when the text is not such a number or is not a whole number of bytes. */
int bench_parse_size(const char *text, size_t *bytes);

void bench_args_usage(FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_ARGS_H_ */
