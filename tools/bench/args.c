/* args.c -- weft-bench's command line: nccl-tests' flags, each value validated. */
#include "tools/bench/args.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
  OPT_SIZE,
  OPT_INT,
  OPT_DTYPE,
  OPT_OP,
  OPT_COLL,
  OPT_ALGO,
  OPT_TUNE,
  OPT_DEVICE,
  OPT_HELP
} opt_kind_t;

typedef struct {
  char short_name; /* 0: long form only */
  const char *long_name;
  opt_kind_t kind;
  long min, max; /* for OPT_INT */
} opt_t;

static const opt_t options[] = {
    {'b', "minbytes", OPT_SIZE, 0, 0},   {'e', "maxbytes", OPT_SIZE, 0, 0},
    {'i', "stepbytes", OPT_SIZE, 0, 0},  {'f', "stepfactor", OPT_INT, 2, LONG_MAX},
    {'n', "iters", OPT_INT, 1, INT_MAX}, {'w', "warmup_iters", OPT_INT, 0, INT_MAX},
    {'c', "check", OPT_INT, 0, 1},       {'d', "datatype", OPT_DTYPE, 0, 0},
    {'o', "op", OPT_OP, 0, 0},           {'r', "root", OPT_INT, 0, INT_MAX},
    {'a', "average", OPT_INT, 0, 3},     {'C', "coll", OPT_COLL, 0, 0},
    {'A', "algo", OPT_ALGO, 0, 0},       {0, "tune", OPT_TUNE, 0, 0},
    {'G', "device", OPT_DEVICE, 0, 0},
    {'h', "help", OPT_HELP, 0, 0},
};

#define NUM_OPTIONS (sizeof options / sizeof options[0])

void bench_args_defaults(bench_args_t *args) {
  args->minbytes = 32u << 20;
  args->maxbytes = 32u << 20;
  args->stepbytes = 1u << 20;
  args->stepfactor = 0;
  args->iters = 20;
  args->warmup = 5;
  args->check = 1;
  args->root = 0;
  args->average = BENCH_TIME_AVG;
  args->dtype = WEFT_FLOAT32;
  args->op = WEFT_SUM;
  args->coll = BENCH_ALL_REDUCE;
  args->coll_given = 0;
  snprintf(args->algo, sizeof args->algo, "auto");
  args->tune_file[0] = '\0';
  args->device[0] = '\0';
}

int bench_parse_size(const char *text, size_t *bytes) {
  const char *p = text;
  uint64_t whole = 0, frac = 0, frac_scale = 1, units = 1;
  if (*p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (whole > (UINT64_MAX - 9) / 10) return -1;
    whole = whole * 10 + (uint64_t)(*p - '0');
  }
  if (*p == '.') {
    p++;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
      if (frac_scale == 1000000000) return -1; /* more than 9 decimals: not a byte count anyway */
      frac = frac * 10 + (uint64_t)(*p - '0');
      frac_scale *= 10;
    }
  }
  switch (*p) {
    case 'K':
    case 'k':
      units = 1ull << 10;
      p++;
      break;
    case 'M':
    case 'm':
      units = 1ull << 20;
      p++;
      break;
    case 'G':
    case 'g':
      units = 1ull << 30;
      p++;
      break;
    default:
      break;
  }
  if (*p != '\0') return -1;
  if (whole > UINT64_MAX / units) return -1;
  /* frac < 10^9 and units <= 2^30, so the product cannot overflow. */
  if (frac * units % frac_scale != 0) return -1; /* not a whole number of bytes */
  uint64_t total = whole * units;
  uint64_t extra = frac * units / frac_scale;
  if (total > UINT64_MAX - extra || total + extra > SIZE_MAX) return -1;
  *bytes = (size_t)(total + extra);
  return 0;
}

static int parse_long(const char *text, long *value) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return -1;
  *value = v;
  return 0;
}

static const opt_t *find_short(char c) {
  for (size_t i = 0; c != 0 && i < NUM_OPTIONS; i++) {
    if (options[i].short_name == c) return &options[i];
  }
  return NULL;
}

static const opt_t *find_long(const char *name, size_t len) {
  for (size_t i = 0; i < NUM_OPTIONS; i++) {
    if (strlen(options[i].long_name) == len && strncmp(options[i].long_name, name, len) == 0) {
      return &options[i];
    }
  }
  return NULL;
}

/* Stores `value` for option `o`. Returns BENCH_ARGS_OK or BENCH_ARGS_ERROR with a message. */
static int apply(const opt_t *o, const char *value, bench_args_t *args, char *err, size_t errlen) {
  long n = 0;
  size_t bytes = 0;
  switch (o->kind) {
    case OPT_SIZE:
      if (bench_parse_size(value, &bytes) != 0) {
        snprintf(err, errlen,
                 "-%c: invalid size '%s' (a whole number of bytes, optionally with K, M or G)",
                 o->short_name, value);
        return BENCH_ARGS_ERROR;
      }
      if (o->short_name == 'b') args->minbytes = bytes;
      if (o->short_name == 'e') args->maxbytes = bytes;
      if (o->short_name == 'i') args->stepbytes = bytes;
      return BENCH_ARGS_OK;
    case OPT_INT:
      if (parse_long(value, &n) != 0 || n < o->min || n > o->max) {
        if (o->max == LONG_MAX || o->max == INT_MAX) {
          snprintf(err, errlen, "-%c: expected an integer >= %ld, got '%s'", o->short_name, o->min,
                   value);
        } else {
          snprintf(err, errlen, "-%c: expected an integer from %ld to %ld, got '%s'", o->short_name,
                   o->min, o->max, value);
        }
        return BENCH_ARGS_ERROR;
      }
      switch (o->short_name) {
        case 'f':
          args->stepfactor = (size_t)n;
          break;
        case 'n':
          args->iters = (int)n;
          break;
        case 'w':
          args->warmup = (int)n;
          break;
        case 'c':
          args->check = (int)n;
          break;
        case 'r':
          args->root = (int)n;
          break;
        case 'a':
          args->average = (bench_average_t)n;
          break;
        default:
          break;
      }
      return BENCH_ARGS_OK;
    case OPT_DTYPE:
      if (bench_dtype_parse(value, &args->dtype) != 0) {
        snprintf(err, errlen,
                 "-d: unknown dtype '%s' (int8 uint8 int32 uint32 int64 uint64 half bfloat16 float "
                 "double f8e4m3 f8e5m2, or float16 float32 float64 float8_e4m3 float8_e5m2)",
                 value);
        return BENCH_ARGS_ERROR;
      }
      return BENCH_ARGS_OK;
    case OPT_OP:
      if (bench_op_parse(value, &args->op) != 0) {
        snprintf(err, errlen, "-o: unknown op '%s' (sum prod min max avg)", value);
        return BENCH_ARGS_ERROR;
      }
      return BENCH_ARGS_OK;
    case OPT_COLL:
      if (bench_coll_parse(value, &args->coll) != 0) {
        snprintf(err, errlen,
                 "-C: unknown collective '%s' (all_reduce broadcast reduce all_gather "
                 "reduce_scatter sendrecv barrier gather scatter alltoall)",
                 value);
        return BENCH_ARGS_ERROR;
      }
      args->coll_given = 1;
      return BENCH_ARGS_OK;
    case OPT_ALGO:
      if (value[0] == '\0' || strlen(value) >= sizeof args->algo) {
        snprintf(err, errlen, "-A: '%s' is not an algorithm name (try -A all)", value);
        return BENCH_ARGS_ERROR;
      }
      snprintf(args->algo, sizeof args->algo, "%s", value);
      return BENCH_ARGS_OK;
    case OPT_TUNE:
      if (value[0] == '\0' || strlen(value) >= sizeof args->tune_file) {
        snprintf(err, errlen, "--tune: expected a file name shorter than %zu bytes",
                 sizeof args->tune_file);
        return BENCH_ARGS_ERROR;
      }
      snprintf(args->tune_file, sizeof args->tune_file, "%s", value);
      return BENCH_ARGS_OK;
    case OPT_DEVICE:
      if (strcmp(value, "cuda") != 0 && strcmp(value, "emulated") != 0) {
        snprintf(err, errlen, "-G: unknown device engine '%s' (cuda, or emulated for tests)",
                 value);
        return BENCH_ARGS_ERROR;
      }
      snprintf(args->device, sizeof args->device, "%s", value);
      return BENCH_ARGS_OK;
    case OPT_HELP:
      break;
  }
  return BENCH_ARGS_OK;
}

/* Cross-flag checks, once every flag is in. */
static int check_all(const bench_args_t *args, char *err, size_t errlen) {
  if (args->minbytes > args->maxbytes) {
    snprintf(err, errlen, "-b (%zu bytes) must not exceed -e (%zu bytes)", args->minbytes,
             args->maxbytes);
    return BENCH_ARGS_ERROR;
  }
  if (args->stepfactor == 0 && args->stepbytes == 0 && args->minbytes < args->maxbytes) {
    snprintf(err, errlen, "-i 0 never gets from -b to -e: give -i > 0 or -f");
    return BENCH_ARGS_ERROR;
  }
  if (args->tune_file[0] != '\0' && args->device[0] != '\0') {
    snprintf(err, errlen, "--tune fits the host cost model: leave out -G");
    return BENCH_ARGS_ERROR;
  }
  if (args->tune_file[0] != '\0' && strcmp(args->algo, "auto") != 0) {
    snprintf(err, errlen, "--tune times every algorithm of each collective: leave out -A");
    return BENCH_ARGS_ERROR;
  }
  if (args->tune_file[0] != '\0' && args->coll_given && args->coll == BENCH_SENDRECV) {
    snprintf(err, errlen, "--tune -C sendrecv: sendrecv has one algorithm, nothing to compare");
    return BENCH_ARGS_ERROR;
  }
  return BENCH_ARGS_OK;
}

int bench_args_parse(int argc, const char *const *argv, bench_args_t *args, char *err,
                     size_t errlen) {
  bench_args_defaults(args);
  err[0] = '\0';
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const opt_t *o = NULL;
    const char *value = NULL;
    int has_value = 0;
    if (arg[0] == '-' && arg[1] == '-' && arg[2] != '\0') {
      const char *eq = strchr(arg + 2, '=');
      size_t len = eq ? (size_t)(eq - (arg + 2)) : strlen(arg + 2);
      o = find_long(arg + 2, len);
      if (o == NULL) {
        snprintf(err, errlen, "unknown option '%.*s'", (int)(len + 2), arg);
        return BENCH_ARGS_ERROR;
      }
      if (eq != NULL) {
        value = eq + 1;
        has_value = 1;
      }
    } else if (arg[0] == '-' && arg[1] != '\0' && arg[1] != '-') {
      o = find_short(arg[1]);
      if (o == NULL) {
        snprintf(err, errlen, "unknown option '-%c'", arg[1]);
        return BENCH_ARGS_ERROR;
      }
      if (arg[2] != '\0') {
        value = arg + 2; /* -b4K, as getopt allows */
        has_value = 1;
      }
    } else {
      snprintf(err, errlen, "unexpected argument '%s'", arg);
      return BENCH_ARGS_ERROR;
    }
    if (o->kind == OPT_HELP) {
      if (has_value) {
        snprintf(err, errlen, "-h takes no value, got '%s'", arg);
        return BENCH_ARGS_ERROR;
      }
      return BENCH_ARGS_HELP;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        if (o->short_name != 0) {
          snprintf(err, errlen, "option -%c (--%s) needs a value", o->short_name, o->long_name);
        } else {
          snprintf(err, errlen, "option --%s needs a value", o->long_name);
        }
        return BENCH_ARGS_ERROR;
      }
      value = argv[++i];
    }
    if (apply(o, value, args, err, errlen) != BENCH_ARGS_OK) return BENCH_ARGS_ERROR;
  }
  return check_all(args, err, errlen);
}

int bench_args_check_world(const bench_args_t *args, int nranks, char *err, size_t errlen) {
  if (bench_coll_rooted(args->coll) && args->root >= nranks) {
    snprintf(err, errlen, "-r: root %d is not a rank of this job of %d ranks", args->root, nranks);
    return BENCH_ARGS_ERROR;
  }
  if (args->coll == BENCH_SENDRECV && nranks < 2 && args->tune_file[0] == '\0') {
    snprintf(err, errlen, "-C sendrecv needs 2 ranks or more (weft has no send to self)");
    return BENCH_ARGS_ERROR;
  }
  if (args->tune_file[0] != '\0' && nranks < 2) {
    snprintf(err, errlen, "--tune needs 2 ranks or more: one rank sends nothing to measure");
    return BENCH_ARGS_ERROR;
  }
  return BENCH_ARGS_OK;
}

void bench_args_usage(FILE *out) {
  fputs(
      "Usage: weft-run -n N weft-bench [options]\n"
      "A benchmark of weft's collectives with the flags and output of nccl-tests.\n"
      "\n"
      "  -C, --coll <name>         all_reduce (default) broadcast reduce all_gather\n"
      "                            reduce_scatter sendrecv barrier gather scatter alltoall\n"
      "  -A, --algo <name>         auto (default: the cost model picks), ring, tree, ..., or\n"
      "                            all: one table per algorithm the collective has\n"
      "  -b, --minbytes <size>     smallest size (default 32M); sizes take K, M, G (x1024)\n"
      "  -e, --maxbytes <size>     largest size (default 32M); all_gather, reduce_scatter,\n"
      "                            gather and scatter size the whole gathered/scattered\n"
      "                            buffer (gather's and scatter's at the root), alltoall one\n"
      "                            rank's send buffer, as nccl-tests\n"
      "  -f, --stepfactor <n>      multiply the size by n (>= 2) at each step\n"
      "  -i, --stepbytes <size>    add this to the size at each step when -f is not given "
      "(default 1M)\n"
      "  -n, --iters <n>           timed iterations per size (default 20)\n"
      "  -w, --warmup_iters <n>    untimed iterations before each timed loop (default 5)\n"
      "  -c, --check <0|1>         check the results (default 1)\n"
      "  -d, --datatype <type>     int8 uint8 int32 uint32 int64 uint64 half (float16) bfloat16\n"
      "                            float (float32, the default) double (float64)\n"
      "                            f8e4m3 (float8_e4m3) f8e5m2 (float8_e5m2)\n"
      "  -o, --op <op>             sum (default) prod min max avg; all_reduce, reduce,\n"
      "                            reduce_scatter\n"
      "  -r, --root <rank>         root of broadcast, reduce, gather and scatter (default 0)\n"
      "  -a, --average <0|1|2|3>   time reported: 0 rank 0's, 1 average over ranks (default),\n"
      "                            2 minimum, 3 maximum\n"
      "      --tune <file>         measure alpha, beta and gamma, write them to <file> for\n"
      "                            WEFT_TUNE_FILE, then time every algorithm of each collective\n"
      "                            (-C: of that one) over -b..-e and print the cost model's pick\n"
      "                            next to the fastest\n"
      "  -G, --device <engine>     buffers in device memory, collectives enqueued on a stream\n"
      "                            and timed to its synchronization: cuda, or emulated (host\n"
      "                            memory standing in for a GPU, for tests)\n"
      "  -h, --help                this text\n"
      "\n"
      "Each rank gets its communicator from the launcher's environment (weft_comm_init_env).\n"
      "Exit status: 0 when every result checks out, 1 on wrong results or a weft error, 2 on a "
      "bad\n"
      "command line.\n",
      out);
}
