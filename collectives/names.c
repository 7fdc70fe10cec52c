/* names.c -- the names of collectives, algorithms, dtypes and ops (weft.h), for messages,
 * WEFT_ALGO and tools. They live with the algorithm table so that everything that reads the table,
 * or describes a call (call_desc.c), links on its own. */
#include <string.h>

#include "include/weft.h"

const char *weft_coll_name(weft_coll_t coll) {
  static const char *const names[WEFT_NUM_COLLS] = {
      "all_reduce", "broadcast", "reduce",  "all_gather", "reduce_scatter", "barrier",  "send",
      "recv",       "gather",    "scatter", "all_to_all", "all_to_allv",    "p2p_group"};
  return (unsigned)coll < WEFT_NUM_COLLS ? names[coll] : "unknown-collective";
}

static const char *const algo_names[WEFT_NUM_ALGOS] = {
    "auto",         "ring",         "tree",        "double_tree", "recursive_doubling",
    "rabenseifner", "dissemination", "hierarchical", "linear",
    "pairwise",     "bruck"};

const char *weft_algo_name(weft_algo_t algo) {
  return (unsigned)algo < WEFT_NUM_ALGOS ? algo_names[algo] : "unknown-algorithm";
}

weft_algo_t weft_algo_from_name(const char *name) {
  for (int a = 0; name && a < WEFT_NUM_ALGOS; a++)
    if (strcmp(name, algo_names[a]) == 0) return (weft_algo_t)a;
  return WEFT_NUM_ALGOS;
}

static const struct {
  const char *name;
  size_t size;
} dtypes[WEFT_NUM_DTYPES] = {
    [WEFT_INT8] = {"int8", 1},
    [WEFT_UINT8] = {"uint8", 1},
    [WEFT_INT32] = {"int32", 4},
    [WEFT_UINT32] = {"uint32", 4},
    [WEFT_INT64] = {"int64", 8},
    [WEFT_UINT64] = {"uint64", 8},
    [WEFT_FLOAT16] = {"float16", 2},
    [WEFT_BFLOAT16] = {"bfloat16", 2},
    [WEFT_FLOAT32] = {"float32", 4},
    [WEFT_FLOAT64] = {"float64", 8},
    [WEFT_FLOAT8_E4M3] = {"float8_e4m3", 1},
    [WEFT_FLOAT8_E5M2] = {"float8_e5m2", 1},
};

size_t weft_dtype_size(weft_dtype_t d) {
  return (unsigned)d < WEFT_NUM_DTYPES ? dtypes[d].size : 0;
}

const char *weft_dtype_name(weft_dtype_t d) {
  return (unsigned)d < WEFT_NUM_DTYPES ? dtypes[d].name : "unknown-dtype";
}

const char *weft_op_name(weft_op_t op) {
  static const char *const names[] = {"sum", "prod", "min", "max", "avg", "premul_sum"};
  return (unsigned)op <= WEFT_PREMUL_SUM ? names[op] : "unknown-op";
}
