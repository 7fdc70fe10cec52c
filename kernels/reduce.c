/* reduce.c -- the host reduction loops, one per dtype x op, their two-destination reduce-copy
 * twins, the tables that pick one, and kern_copy2.
 *
 * Each loop is a plain counted loop over one dtype and one op so that gcc vectorizes it at -O3
 * (see kernels/BUILD). There is no `restrict` on a, b or the in-place output: dst (dst2 in the
 * reduce-copy loops) may be exactly a or b (in place), so gcc emits a runtime overlap check that
 * takes the vector path in both the in-place and the disjoint case.
 *
 * Checked with kernels/vec_report.sh (gcc 12.2, -O3, -fopt-info-vec-optimized on the preprocessed
 * source so that each macro-generated loop gets its own line). With the SSE2 baseline, 42 of the
 * 48 loops vectorize: every int8/uint8/int32/uint32, fp16, bf16, fp8, float32 and float64 op, and
 * int64/uint64 sum. int64/uint64 prod, min and max stay scalar: SSE2 has no 64-bit lane multiply
 * and no 64-bit compare (pcmpgtq is SSE4.2); gcc vectorizes min/max with -msse4.2 and all three
 * with -mavx2, which we do not pass so that the library runs on any x86-64. fp16/bf16/fp8
 * vectorize because kernels/half.h and fp8.h convert with masks instead of branches (see half.h for
 * why `?:` failed).
 * kernels/avg.c: the float loops vectorize; the integer ones cannot (no SIMD integer division).
 *
 * The two-destination reduce-copy loops (reduce_copy_*, same report): 44 of 48 vectorize, the
 * same set plus int64/uint64 prod. Only int64/uint64 min and max stay scalar (no 64-bit compare in
 * SSE2, as above). 64-bit prod is emulated with three pmuludq per vector in both kinds of loop;
 * gcc's cost model rates that exactly break-even against two imulq for one store and profitable
 * once the second store is counted, and measured it is (8192 int64 on a 2-core AMD EPYC VM: 4.4 us
 * vectorized against 6.4 us scalar). The in-place case (dst2 == a or b) takes the vector path as
 * fast as the disjoint one. kernels/avg.c's avg_final_copy_*: 6 of 12, the float ones, as above.
 */
#include "kernels/reduce.h"

#include <string.h>

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

/* The same EXPR stored twice: dst[i] = dst2[i] = EXPR. dst is `restrict` because
 * kern_reduce_copy_fn promises it overlaps nothing else (it is a transport slot), which leaves gcc
 * only dst2 against a and b to check at run time; dst2 may still be exactly a or b. The result goes
 * through a local so that both stores write the value computed from the inputs as they were before
 * either store. */
#define COPY_LOOP(name, T, EXPR)                                                              \
  static void reduce_copy_##name(void *dst_v, void *dst2_v, const void *a_v, const void *b_v, \
                                 size_t n) {                                                  \
    T *restrict dst = (T *)dst_v;                                                             \
    T *dst2 = (T *)dst2_v;                                                                    \
    const T *a = (const T *)a_v;                                                              \
    const T *b = (const T *)b_v;                                                              \
    for (size_t i = 0; i < n; i++) {                                                          \
      T x = a[i];                                                                             \
      T y = b[i];                                                                             \
      T r = EXPR;                                                                             \
      dst[i] = r;                                                                             \
      dst2[i] = r;                                                                            \
    }                                                                                         \
  }

/* Each op's EXPR is written once and expanded by both LOOP and COPY_LOOP (L), so a reduce-copy
 * computes exactly what the plain reduce does. */
#define INT_OPS(L, sfx, T, W)        \
  L(sfx##_sum, T, (T)((W)x + (W)y))  \
  L(sfx##_prod, T, (T)((W)x * (W)y)) \
  L(sfx##_min, T, x < y ? x : y)     \
  L(sfx##_max, T, x > y ? x : y)

/* min/max compare in W but store the selected input's own bits: no conversion back, so fp16/bf16
 * min/max are exact and NaN payloads pass through. */
#define FLOAT_OPS(L, sfx, T, TO_W, FROM_W)    \
  L(sfx##_sum, T, FROM_W(TO_W(x) + TO_W(y)))  \
  L(sfx##_prod, T, FROM_W(TO_W(x) * TO_W(y))) \
  L(sfx##_min, T, TO_W(x) < TO_W(y) ? x : y)  \
  L(sfx##_max, T, TO_W(x) > TO_W(y) ? x : y)

#define INT_LOOPS(sfx, DTYPE, T, W) INT_OPS(LOOP, sfx, T, W) INT_OPS(COPY_LOOP, sfx, T, W)
#define FLOAT_LOOPS(sfx, DTYPE, T, W, TO_W, FROM_W) \
  FLOAT_OPS(LOOP, sfx, T, TO_W, FROM_W) FLOAT_OPS(COPY_LOOP, sfx, T, TO_W, FROM_W)

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

#define COPY_TABLE_ROW(sfx, DTYPE, ...)                                             \
  [DTYPE] = {                                                                       \
      [WEFT_SUM] = reduce_copy_##sfx##_sum, [WEFT_PROD] = reduce_copy_##sfx##_prod, \
      [WEFT_MIN] = reduce_copy_##sfx##_min, [WEFT_MAX] = reduce_copy_##sfx##_max,   \
      [WEFT_AVG] = reduce_copy_##sfx##_sum,                                         \
  },

static const kern_reduce_copy_fn copy_table[WEFT_NUM_DTYPES][WEFT_NUM_OPS] = {
    KERN_INT_DTYPES(COPY_TABLE_ROW) KERN_FLOAT_DTYPES(COPY_TABLE_ROW)};

kern_reduce_copy_fn kern_reduce_copy_lookup(weft_dtype_t dtype, weft_op_t op) {
  if ((unsigned)dtype >= WEFT_NUM_DTYPES || (unsigned)op >= WEFT_NUM_OPS) return NULL;
  return copy_table[dtype][op];
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

/* Two memcpy calls per 8 KiB chunk: src into dst, then dst (still in L1) into dst2. glibc's memcpy
 * picks the widest moves the CPU has (AVX2, rep movsb) and aligns its stores, which a loop built
 * for the SSE2 baseline cannot. Measured on 64 KiB slices (AMD EPYC VM, gcc 12.2 -O3, glibc 2.36),
 * in GB/s of src, with src/dst/dst2 aligned / mutually misaligned: this 28-30 / 22-24; two whole
 * memcpy calls 24.6 / 21; a 16-byte-vectorized load-once-store-twice loop 22 / 7.9. Reading dst
 * back instead of src also keeps it correct when dst2 is src. */
void kern_copy2(void *dst, void *dst2, const void *src, size_t bytes) {
  enum { kChunk = 8192 };
  unsigned char *d = (unsigned char *)dst;
  unsigned char *d2 = (unsigned char *)dst2;
  const unsigned char *s = (const unsigned char *)src;
  for (size_t off = 0; off < bytes; off += kChunk) {
    size_t len = bytes - off < kChunk ? bytes - off : kChunk;
    memcpy(d + off, s + off, len);
    memcpy(d2 + off, d + off, len);
  }
}
