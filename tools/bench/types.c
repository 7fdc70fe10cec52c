/* types.c -- the dtype and op tables of weft-bench (names as nccl-tests prints them). */
#include "tools/bench/types.h"

#include <string.h>

static const struct {
  const char *name;
  const char *alias;
  size_t size;
  int is_float;
  int is_signed;
} dtypes[WEFT_NUM_DTYPES] = {
    [WEFT_INT8] = {"int8", NULL, 1, 0, 1},
    [WEFT_UINT8] = {"uint8", NULL, 1, 0, 0},
    [WEFT_INT32] = {"int32", NULL, 4, 0, 1},
    [WEFT_UINT32] = {"uint32", NULL, 4, 0, 0},
    [WEFT_INT64] = {"int64", NULL, 8, 0, 1},
    [WEFT_UINT64] = {"uint64", NULL, 8, 0, 0},
    [WEFT_FLOAT16] = {"half", "float16", 2, 1, 1},
    [WEFT_BFLOAT16] = {"bfloat16", NULL, 2, 1, 1},
    [WEFT_FLOAT32] = {"float", "float32", 4, 1, 1},
    [WEFT_FLOAT64] = {"double", "float64", 8, 1, 1},
    [WEFT_FLOAT8_E4M3] = {"f8e4m3", "float8_e4m3", 1, 1, 1},
    [WEFT_FLOAT8_E5M2] = {"f8e5m2", "float8_e5m2", 1, 1, 1},
};

static const char *const ops[WEFT_NUM_OPS] = {
    [WEFT_SUM] = "sum", [WEFT_PROD] = "prod", [WEFT_MIN] = "min",
    [WEFT_MAX] = "max", [WEFT_AVG] = "avg",
};

static int dtype_ok(weft_dtype_t dtype) { return (unsigned)dtype < WEFT_NUM_DTYPES; }

const char *bench_dtype_name(weft_dtype_t dtype) {
  return dtype_ok(dtype) ? dtypes[dtype].name : NULL;
}

const char *bench_op_name(weft_op_t op) { return (unsigned)op < WEFT_NUM_OPS ? ops[op] : NULL; }

static const struct {
  const char *name;
  const char *alias;
  weft_coll_t weft;
} colls[BENCH_NUM_COLLS] = {
    [BENCH_ALL_REDUCE] = {"all_reduce", "allreduce", WEFT_COLL_ALL_REDUCE},
    [BENCH_BROADCAST] = {"broadcast", "bcast", WEFT_COLL_BROADCAST},
    [BENCH_REDUCE] = {"reduce", NULL, WEFT_COLL_REDUCE},
    [BENCH_ALL_GATHER] = {"all_gather", "allgather", WEFT_COLL_ALL_GATHER},
    [BENCH_REDUCE_SCATTER] = {"reduce_scatter", "reducescatter", WEFT_COLL_REDUCE_SCATTER},
    [BENCH_SENDRECV] = {"sendrecv", "send_recv", WEFT_COLL_SEND},
    [BENCH_BARRIER] = {"barrier", NULL, WEFT_COLL_BARRIER},
    [BENCH_GATHER] = {"gather", NULL, WEFT_COLL_GATHER},
    [BENCH_SCATTER] = {"scatter", NULL, WEFT_COLL_SCATTER},
    [BENCH_ALL_TO_ALL] = {"alltoall", "all_to_all", WEFT_COLL_ALL_TO_ALL},
};

static int coll_ok(bench_coll_t coll) { return (unsigned)coll < BENCH_NUM_COLLS; }

const char *bench_coll_name(bench_coll_t coll) { return coll_ok(coll) ? colls[coll].name : NULL; }

weft_coll_t bench_coll_weft(bench_coll_t coll) {
  return coll_ok(coll) ? colls[coll].weft : WEFT_NUM_COLLS;
}

int bench_coll_reduces(bench_coll_t coll) {
  return coll == BENCH_ALL_REDUCE || coll == BENCH_REDUCE || coll == BENCH_REDUCE_SCATTER;
}

int bench_coll_rooted(bench_coll_t coll) {
  return coll == BENCH_BROADCAST || coll == BENCH_REDUCE || coll == BENCH_GATHER ||
         coll == BENCH_SCATTER;
}

int bench_dtype_parse(const char *name, weft_dtype_t *dtype) {
  for (int i = 0; i < WEFT_NUM_DTYPES; i++) {
    if (strcmp(name, dtypes[i].name) == 0 ||
        (dtypes[i].alias != NULL && strcmp(name, dtypes[i].alias) == 0)) {
      *dtype = (weft_dtype_t)i;
      return 0;
    }
  }
  return -1;
}

int bench_op_parse(const char *name, weft_op_t *op) {
  for (int i = 0; i < WEFT_NUM_OPS; i++) {
    if (strcmp(name, ops[i]) == 0) {
      *op = (weft_op_t)i;
      return 0;
    }
  }
  return -1;
}

int bench_coll_parse(const char *name, bench_coll_t *coll) {
  for (int i = 0; i < BENCH_NUM_COLLS; i++) {
    if (strcmp(name, colls[i].name) == 0 ||
        (colls[i].alias != NULL && strcmp(name, colls[i].alias) == 0)) {
      *coll = (bench_coll_t)i;
      return 0;
    }
  }
  return -1;
}

size_t bench_dtype_size(weft_dtype_t dtype) { return dtype_ok(dtype) ? dtypes[dtype].size : 0; }

int bench_dtype_is_float(weft_dtype_t dtype) { return dtype_ok(dtype) && dtypes[dtype].is_float; }

int bench_dtype_is_signed(weft_dtype_t dtype) { return dtype_ok(dtype) && dtypes[dtype].is_signed; }
