/* opts.c -- kernel_bw's flags (nccl-tests' -b -e -f -d -o -n -w) and table arithmetic. */
#include "tools/kernel_bw/opts.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/args.h"
#include "tools/bench/types.h"


static int parse_int(const char *text, int min, int max, int *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end || errno || v < min || v > max) return -1;
  *out = (int)v;
  return 0;
}

static void usage(void) {
  printf(
      "usage: kernel_bw [-b minbytes] [-e maxbytes] [-f stepfactor] [-d dtype] [-o op]\n"
      "                 [-n iters] [-w warmup] [-r avg_nranks]\n"
      "Times weft's CUDA reduce, reduce_copy and copy kernels against cudaMemcpy device to\n"
      "device on one GPU, for buffer sizes from -b to -e (K, M, G suffixes; default 1M..1G, x2).\n"
      "dtype: int8 uint8 int32 uint32 int64 uint64 half|float16 bfloat16 float|float32\n"
      "       double|float64 f8e4m3|float8_e4m3 f8e5m2|float8_e5m2 (default float);\n"
      "       op: sum prod min max avg (default sum; avg is timed as the final step,\n"
      "       dividing by -r, default 8).\n"
      "Each kernel runs -w times untimed, then -n times (default 20) timed one launch at a\n"
      "time with CUDA events; the table shows the median.\n");
}

int kbw_parse(int argc, char **argv, kbw_opts_t *o, char *err, size_t errlen) {
  kbw_opts_t d = {1 << 20, (size_t)1 << 30, 2, WEFT_FLOAT32, WEFT_SUM, 20, 5, 8};
  *o = d;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage();
      return 1;
    }
    if (a[0] != '-' || a[1] == 0 || a[2] != 0 || strchr("befdonwr", a[1]) == NULL) {
      snprintf(err, errlen, "unknown option '%s' (-h for help)", a);
      return -1;
    }
    if (i + 1 >= argc) {
      snprintf(err, errlen, "option %s needs a value", a);
      return -1;
    }
    const char *v = argv[++i];
    int bad = 0;
    switch (a[1]) {
      case 'b':
        bad = bench_parse_size(v, &o->minbytes);
        break;
      case 'e':
        bad = bench_parse_size(v, &o->maxbytes);
        break;
      case 'f':
        bad = bench_parse_size(v, &o->stepfactor) || o->stepfactor < 2;
        break;
      case 'd':
        bad = bench_dtype_parse(v, &o->dtype);
        break;
      case 'o':
        bad = bench_op_parse(v, &o->op);
        break;
      case 'n':
        bad = parse_int(v, 1, 1000000, &o->iters);
        break;
      case 'w':
        bad = parse_int(v, 0, 1000000, &o->warmup);
        break;
      case 'r':
        bad = parse_int(v, 1, 1 << 20, &o->avg_nranks);
        break;
    }
    if (bad) {
      snprintf(err, errlen, "bad value '%s' for %s", v, a);
      return -1;
    }
  }
  size_t es = bench_dtype_size(o->dtype);
  if (o->minbytes < es) {
    snprintf(err, errlen, "-b %zu is less than one %s element", o->minbytes,
             bench_dtype_name(o->dtype));
    return -1;
  }
  if (o->maxbytes < o->minbytes) {
    snprintf(err, errlen, "-e %zu is below -b %zu", o->maxbytes, o->minbytes);
    return -1;
  }
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double kbw_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

size_t kbw_bytes_moved(kbw_kernel_t kernel, size_t bytes) {
  switch (kernel) {
    case KBW_REDUCE:
      return 3 * bytes;
    case KBW_REDUCE_COPY:
      return 4 * bytes;
    default:
      return 2 * bytes;
  }
}

double kbw_gbps(size_t moved, double us) { return us > 0 ? (double)moved / us / 1e3 : 0; }
