/* reduce.c -- the host reduction loops, one per dtype x op, and the table that picks one.
 *
 * Each loop is a plain counted loop over one dtype and one op so that gcc vectorizes it at -O3
 * (see kernels/BUILD). There is no `restrict`: dst may be exactly a or b (in place), so gcc emits
 * a runtime overlap check that takes the vector path in both the in-place and the disjoint case.
 *
 * Checked with kernels/vec_report.sh (gcc 12.2, -O3, -fopt-info-vec-optimized on the preprocessed
 * source so that each macro-generated loop gets its own line). With the SSE2 baseline, 34 of the
 * 40 loops vectorize: every int8/uint8/int32/uint32, fp16, bf16, float32 and float64 op, and
 * int64/uint64 sum. int64/uint64 prod, min and max stay scalar: SSE2 has no 64-bit lane multiply
 * and no 64-bit compare (pcmpgtq is SSE4.2); gcc vectorizes min/max with -msse4.2 and all three
 * with -mavx2, which we do not pass so that the library runs on any x86-64. fp16/bf16 vectorize
 * because kernels/half.h converts with masks instead of branches (see there for why `?:` failed).
 * kernels/avg.c: the float loops vectorize; the integer ones cannot (no SIMD integer division).
 */
#include "kernels/reduce.h"

#include "common/error.h"
#include "kernels/dtypes.h"

/* One loop: dst[i] = EXPR, where EXPR reads x = a[i] and y = b[i]. */
#define LOOP(name, T, EXPR)                                                            \
  static void reduce_##name(void *dst_v, const void *a_v, const void *b_v, size_t n) { \
    T *dst = (T *)dst_v;                                                               \
    const T *a = (const T *)a_v;                                                       \
    const T *b = (const T *)b_v;                                                       \
    for (size_t i = 0; i < n; i++) {                                                   \
      T x = a[i];                                                                      \
      T y = b[i];                                                                      \
      dst[i] = EXPR;                                                                   \
    }                                                                                  \
  }

#define INT_LOOPS(sfx, DTYPE, T, W)     \
  LOOP(sfx##_sum, T, (T)((W)x + (W)y))  \
  LOOP(sfx##_prod, T, (T)((W)x * (W)y)) \
  LOOP(sfx##_min, T, x < y ? x : y)     \
  LOOP(sfx##_max, T, x > y ? x : y)

/* min/max compare in W but store the selected input's own bits: no conversion back, so fp16/bf16
 * min/max are exact and NaN payloads pass through. */
#define FLOAT_LOOPS(sfx, DTYPE, T, W, TO_W, FROM_W) \
  LOOP(sfx##_sum, T, FROM_W(TO_W(x) + TO_W(y)))     \
  LOOP(sfx##_prod, T, FROM_W(TO_W(x) * TO_W(y)))    \
  LOOP(sfx##_min, T, TO_W(x) < TO_W(y) ? x : y)     \
  LOOP(sfx##_max, T, TO_W(x) > TO_W(y) ? x : y)

KERN_INT_DTYPES(INT_LOOPS)
KERN_FLOAT_DTYPES(FLOAT_LOOPS)

/* WEFT_AVG accumulates as a sum; kern_reduce_avg_final divides once at the end. */
#define TABLE_ROW(sfx, DTYPE, ...)                                        \
  [DTYPE] = {                                                             \
      [WEFT_SUM] = reduce_##sfx##_sum, [WEFT_PROD] = reduce_##sfx##_prod, \
      [WEFT_MIN] = reduce_##sfx##_min, [WEFT_MAX] = reduce_##sfx##_max,   \
      [WEFT_AVG] = reduce_##sfx##_sum,                                    \
  },

static const kern_reduce_fn table[WEFT_NUM_DTYPES][WEFT_NUM_OPS] = {
    KERN_INT_DTYPES(TABLE_ROW) KERN_FLOAT_DTYPES(TABLE_ROW)};

kern_reduce_fn kern_reduce_lookup(weft_dtype_t dtype, weft_op_t op) {
  /* Through unsigned so that a negative value (a cast from a bad int) is out of range too. */
  if ((unsigned)dtype >= WEFT_NUM_DTYPES || (unsigned)op >= WEFT_NUM_OPS) return NULL;
  return table[dtype][op];
}

weft_result_t kern_reduce(void *dst, const void *a, const void *b, size_t n, weft_dtype_t dtype,
                          weft_op_t op) {
  if ((unsigned)dtype >= WEFT_NUM_DTYPES) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "reduce: unknown dtype %d (valid: 0..%d)",
                    (int)dtype, WEFT_NUM_DTYPES - 1);
  }
  if ((unsigned)op >= WEFT_NUM_OPS) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "reduce: unknown op %d (valid: 0..%d)", (int)op,
                    WEFT_NUM_OPS - 1);
  }
  if (n > 0 && (dst == NULL || a == NULL || b == NULL)) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "reduce: NULL buffer for %zu elements of dtype %d",
                    n, (int)dtype);
  }
  table[dtype][op](dst, a, b, n);
  return WEFT_SUCCESS;
}
