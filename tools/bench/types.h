/* types.h -- private to weft-bench: names, sizes and classes of weft's dtypes and ops. */
#ifndef WEFT_TOOLS_BENCH_TYPES_H_
#define WEFT_TOOLS_BENCH_TYPES_H_

#include <stddef.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The collective under test: nccl-tests' *_perf programs, plus barrier. */
typedef enum {
  BENCH_ALL_REDUCE = 0,
  BENCH_BROADCAST = 1,
  BENCH_REDUCE = 2,
  BENCH_ALL_GATHER = 3,
  BENCH_REDUCE_SCATTER = 4,
  BENCH_SENDRECV = 5, /* each rank sends to rank+1 and receives from rank-1 at once */
  BENCH_BARRIER = 6,
  BENCH_GATHER = 7,
  BENCH_SCATTER = 8,
  BENCH_ALL_TO_ALL = 9, /* nccl-tests' alltoall */
  BENCH_NUM_COLLS = 10
} bench_coll_t;

/* The names nccl-tests prints ("half", "float", ...); NULL for an unknown value. */
const char *bench_dtype_name(weft_dtype_t dtype);
const char *bench_op_name(weft_op_t op);
const char *bench_coll_name(bench_coll_t coll);

/* Accepts the names above plus the aliases float16, float32, float64. Returns 0 or -1. */
int bench_dtype_parse(const char *name, weft_dtype_t *dtype);
int bench_op_parse(const char *name, weft_op_t *op);
/* all_reduce, broadcast, reduce, all_gather, reduce_scatter, sendrecv, barrier, gather, scatter,
 * alltoall; also without the underscore (allreduce, ...), all_to_all and bcast. */
int bench_coll_parse(const char *name, bench_coll_t *coll);

/* The weft operation that carries it (sendrecv: WEFT_COLL_SEND, paired with a WEFT_COLL_RECV). */
weft_coll_t bench_coll_weft(bench_coll_t coll);
/* Whether it combines values with -o (all_reduce, reduce, reduce_scatter). */
int bench_coll_reduces(bench_coll_t coll);
/* Whether it has a root (-r): broadcast, reduce, gather, scatter. */
int bench_coll_rooted(bench_coll_t coll);

/* Element size in bytes (0 for an unknown dtype). */
size_t bench_dtype_size(weft_dtype_t dtype);
int bench_dtype_is_float(weft_dtype_t dtype);
int bench_dtype_is_signed(weft_dtype_t dtype); /* true for the floating types too */

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_TYPES_H_ */
