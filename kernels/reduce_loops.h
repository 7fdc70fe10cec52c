/* reduce_loops.h -- internal to kernels/: the host reduction loops and their tables, written once
 * and compiled once per instruction set (reduce.c: the x86-64 baseline, SSE2; reduce_avx2.c: AVX2,
 * taken where the CPU has it: kern_isa_best). The includer defines
 *   REDUCE_ATTR        what goes before each loop (a target attribute, or nothing),
 *   REDUCE_TABLE       the name of the kern_reduce_fn table it defines,
 *   REDUCE_COPY_TABLE  the name of the kern_reduce_copy_fn table.
 * Every copy is the same C, so each computes the same bits: only the vector width differs (no
 * instruction set here has FMA enabled, so nothing is contracted). See reduce.c for which loops
 * gcc vectorizes and why there is no `restrict` on the one-destination loops. */
#if !defined(REDUCE_ATTR) || !defined(REDUCE_TABLE) || !defined(REDUCE_COPY_TABLE)
#error "define REDUCE_ATTR, REDUCE_TABLE and REDUCE_COPY_TABLE before including reduce_loops.h"
#endif

#include "kernels/dtypes.h"
#include "kernels/reduce_isa.h"

/* One loop: dst[i] = EXPR, where EXPR reads x = a[i] and y = b[i]. */
#define LOOP(name, T, EXPR)                                                                        \
  REDUCE_ATTR static void reduce_##name(void *dst_v, const void *a_v, const void *b_v, size_t n) { \
    T *dst = (T *)dst_v;                                                                           \
    const T *a = (const T *)a_v;                                                                   \
    const T *b = (const T *)b_v;                                                                   \
    for (size_t i = 0; i < n; i++) {                                                               \
      T x = a[i];                                                                                  \
      T y = b[i];                                                                                  \
      dst[i] = EXPR;                                                                               \
    }                                                                                              \
  }

/* The same EXPR stored twice: dst[i] = dst2[i] = EXPR. dst is `restrict` because
 * kern_reduce_copy_fn promises it overlaps nothing else (it is a transport slot), which leaves gcc
 * only dst2 against a and b to check at run time; dst2 may still be exactly a or b. The result goes
 * through a local so that both stores write the value computed from the inputs as they were before
 * either store. */
#define COPY_LOOP(name, T, EXPR)                                                         \
  REDUCE_ATTR static void reduce_copy_##name(void *dst_v, void *dst2_v, const void *a_v, \
                                             const void *b_v, size_t n) {                \
    T *restrict dst = (T *)dst_v;                                                        \
    T *dst2 = (T *)dst2_v;                                                               \
    const T *a = (const T *)a_v;                                                         \
    const T *b = (const T *)b_v;                                                         \
    for (size_t i = 0; i < n; i++) {                                                     \
      T x = a[i];                                                                        \
      T y = b[i];                                                                        \
      T r = EXPR;                                                                        \
      dst[i] = r;                                                                        \
      dst2[i] = r;                                                                       \
    }                                                                                    \
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
#define GENERIC_FLOAT_LOOPS(sfx, DTYPE, T, W, TO_W, FROM_W) \
  FLOAT_OPS(LOOP, sfx, T, TO_W, FROM_W) FLOAT_OPS(COPY_LOOP, sfx, T, TO_W, FROM_W)

/* An includer with its own loops for float16 (reduce_avx2.c: the F16C conversions) defines them,
 * reduce_float16_<op> and reduce_copy_float16_<op>, before including this file, and
 * REDUCE_OWN_FLOAT16. */
#ifdef REDUCE_OWN_FLOAT16
#define LOOPS_FOR_float16(...)
#else
#define LOOPS_FOR_float16 GENERIC_FLOAT_LOOPS
#endif
#define LOOPS_FOR_bfloat16 GENERIC_FLOAT_LOOPS
#define LOOPS_FOR_float32 GENERIC_FLOAT_LOOPS
#define LOOPS_FOR_float64 GENERIC_FLOAT_LOOPS
#define LOOPS_FOR_float8_e4m3 GENERIC_FLOAT_LOOPS
#define LOOPS_FOR_float8_e5m2 GENERIC_FLOAT_LOOPS
#define FLOAT_LOOPS(sfx, ...) LOOPS_FOR_##sfx(sfx, __VA_ARGS__)

KERN_INT_DTYPES(INT_LOOPS)
KERN_FLOAT_DTYPES(FLOAT_LOOPS)

/* WEFT_AVG accumulates as a sum; kern_reduce_avg_final divides once at the end. */
#define TABLE_ROW(sfx, DTYPE, ...)                                        \
  [DTYPE] = {                                                             \
      [WEFT_SUM] = reduce_##sfx##_sum, [WEFT_PROD] = reduce_##sfx##_prod, \
      [WEFT_MIN] = reduce_##sfx##_min, [WEFT_MAX] = reduce_##sfx##_max,   \
      [WEFT_AVG] = reduce_##sfx##_sum,                                    \
  },

const kern_reduce_fn REDUCE_TABLE[WEFT_NUM_DTYPES][WEFT_NUM_OPS] = {
    KERN_INT_DTYPES(TABLE_ROW) KERN_FLOAT_DTYPES(TABLE_ROW)};

#define COPY_TABLE_ROW(sfx, DTYPE, ...)                                             \
  [DTYPE] = {                                                                       \
      [WEFT_SUM] = reduce_copy_##sfx##_sum, [WEFT_PROD] = reduce_copy_##sfx##_prod, \
      [WEFT_MIN] = reduce_copy_##sfx##_min, [WEFT_MAX] = reduce_copy_##sfx##_max,   \
      [WEFT_AVG] = reduce_copy_##sfx##_sum,                                         \
  },

const kern_reduce_copy_fn REDUCE_COPY_TABLE[WEFT_NUM_DTYPES][WEFT_NUM_OPS] = {
    KERN_INT_DTYPES(COPY_TABLE_ROW) KERN_FLOAT_DTYPES(COPY_TABLE_ROW)};
