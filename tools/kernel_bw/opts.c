/* opts.c -- kernel_bw's flags (nccl-tests' -b -e -f -d -o -n -w) and table arithmetic. */
#include "tools/kernel_bw/opts.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dtype_names[WEFT_NUM_DTYPES] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "bfloat16", "float", "double"};
static const char *const weft_dtype_names[WEFT_NUM_DTYPES] = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64"};
static const size_t dtype_sizes[WEFT_NUM_DTYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
static const char *const op_names[WEFT_NUM_OPS] = {"sum", "prod", "min", "max", "avg"};

int kbw_parse_size(const char *text, size_t *bytes) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || errno || !(v >= 0)) return -1;
  double unit = 1;
  if (*end == 'K' || *end == 'k')
    unit = 1024.0, end++;
  else if (*end == 'M' || *end == 'm')
    unit = 1048576.0, end++;
  else if (*end == 'G' || *end == 'g')
    unit = 1073741824.0, end++;
  v *= unit;
  if (*end || v != floor(v) || v > (double)SIZE_MAX / 4) return -1;
  *bytes = (size_t)v;
  return 0;
}

int kbw_parse_dtype(const char *name, weft_dtype_t *dtype) {
  for (int d = 0; d < WEFT_NUM_DTYPES; d++) {
    if (strcmp(name, dtype_names[d]) == 0 || strcmp(name, weft_dtype_names[d]) == 0) {
      *dtype = (weft_dtype_t)d;
      return 0;
    }
  }
  return -1;
}

const char *kbw_dtype_name(weft_dtype_t dtype) {
  return (unsigned)dtype < WEFT_NUM_DTYPES ? dtype_names[dtype] : "?";
}

size_t kbw_dtype_size(weft_dtype_t dtype) {
  return (unsigned)dtype < WEFT_NUM_DTYPES ? dtype_sizes[dtype] : 0;
}

int kbw_parse_op(const char *name, weft_op_t *op) {
  for (int i = 0; i < WEFT_NUM_OPS; i++) {
    if (strcmp(name, op_names[i]) == 0) {
      *op = (weft_op_t)i;
      return 0;
    }
  }
  return -1;
}

const char *kbw_op_name(weft_op_t op) { return (unsigned)op < WEFT_NUM_OPS ? op_names[op] : "?"; }

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
      "       double|float64 (default float); op: sum prod min max avg (default sum; avg is\n"
      "       timed as the final step, dividing by -r, default 8).\n"
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
        bad = kbw_parse_size(v, &o->minbytes);
        break;
      case 'e':
        bad = kbw_parse_size(v, &o->maxbytes);
        break;
      case 'f':
        bad = kbw_parse_size(v, &o->stepfactor) || o->stepfactor < 2;
        break;
      case 'd':
        bad = kbw_parse_dtype(v, &o->dtype);
        break;
      case 'o':
        bad = kbw_parse_op(v, &o->op);
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
  size_t es = kbw_dtype_size(o->dtype);
  if (o->minbytes < es) {
    snprintf(err, errlen, "-b %zu is less than one %s element", o->minbytes,
             kbw_dtype_name(o->dtype));
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
