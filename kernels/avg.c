/* avg.c -- the division step of WEFT_AVG: (a + b) / nranks at the end of a reduction, or src /
 * nranks.
 *
 * Dividing once at the end (rather than pre-scaling every contribution) is what makes the result
 * equal to sum / nranks: for floats one rounding of the quotient, for integers exactly C's
 * truncating division of the wrapped sum, as include/weft.h promises.
 *
 * kernels/vec_report.sh (gcc 12.2, -O3, SSE2 baseline): 12 of the 24 one-destination loops
 * (avg_final_<dtype>, scale_<dtype>) and 6 of the 12 two-destination avg_final_copy_<dtype> loops
 * vectorize, in both cases exactly the float dtypes (fp16, bf16, fp8, float32, float64); the
 * integer ones stay scalar (no SIMD integer division). */
#include "kernels/dtypes.h"
#include "kernels/reduce.h"

/* avg_final_<sfx> stores dst[i] = EXPR, avg_final_copy_<sfx> stores EXPR in dst[i] and dst2[i];
 * EXPR reads x = a[i], y = b[i] and nranks, and is written once per dtype below so that both give
 * the same bits. dst is `restrict` in the copy: kern_reduce_copy_avg_final promises it overlaps
 * nothing (see kernels/reduce.h). */
#define AVG_FINAL(sfx, T, EXPR)                                                                \
  static void avg_final_##sfx(T *dst, const T *a, const T *b, size_t n, int nranks) {          \
    for (size_t i = 0; i < n; i++) {                                                           \
      T x = a[i];                                                                              \
      T y = b[i];                                                                              \
      dst[i] = EXPR;                                                                           \
    }                                                                                          \
  }                                                                                            \
  static void avg_final_copy_##sfx(T *restrict dst, T *dst2, const T *a, const T *b, size_t n, \
                                   int nranks) {                                               \
    for (size_t i = 0; i < n; i++) {                                                           \
      T x = a[i];                                                                              \
      T y = b[i];                                                                              \
      T r = EXPR;                                                                              \
      dst[i] = r;                                                                              \
      dst2[i] = r;                                                                             \
    }                                                                                          \
  }

/* Integers: the wrapped sum in T, then `sum / nranks` with the usual arithmetic conversions on
 * purpose. nranks > 0, so the divisor takes T's signedness after promotion (int for
 * int8/uint8/int32, unsigned for uint32, 64 bits for the 64-bit types); casting nranks to T instead
 * would break int8 with nranks > 127. These loops do not vectorize (x86 has no SIMD integer
 * division); integer averages are rare. */
#define INT_AVG(sfx, DTYPE, T, W)                                       \
  AVG_FINAL(sfx, T, (T)((T)((W)x + (W)y) / nranks))                     \
  static void scale_##sfx(T *dst, const T *src, size_t n, int nranks) { \
    for (size_t i = 0; i < n; i++) dst[i] = (T)(src[i] / nranks);       \
  }

/* Floats: add and divide in W, convert back once. For fp16 that also keeps a sum above 65504
 * finite when the average is representable. (W)nranks is loop-invariant; gcc hoists it. */
#define FLOAT_AVG(sfx, DTYPE, T, W, TO_W, FROM_W)                       \
  AVG_FINAL(sfx, T, FROM_W((TO_W(x) + TO_W(y)) / (W)nranks))            \
  static void scale_##sfx(T *dst, const T *src, size_t n, int nranks) { \
    W div = (W)nranks;                                                  \
    for (size_t i = 0; i < n; i++) dst[i] = FROM_W(TO_W(src[i]) / div); \
  }

KERN_INT_DTYPES(INT_AVG)
KERN_FLOAT_DTYPES(FLOAT_AVG)

#define AVG_FINAL_CASE(sfx, DTYPE, ...)    \
  case DTYPE:                              \
    avg_final_##sfx(dst, a, b, n, nranks); \
    return;

void kern_reduce_avg_final(void *dst, const void *a, const void *b, size_t n, weft_dtype_t dtype,
                           int nranks) {
  switch (dtype) {
    KERN_INT_DTYPES(AVG_FINAL_CASE)
    KERN_FLOAT_DTYPES(AVG_FINAL_CASE)
    default:
      return;
  }
}

#define SCALE_CASE(sfx, DTYPE, ...)   \
  case DTYPE:                         \
    scale_##sfx(dst, src, n, nranks); \
    return;

void kern_scale_avg(void *dst, const void *src, size_t n, weft_dtype_t dtype, int nranks) {
  switch (dtype) {
    KERN_INT_DTYPES(SCALE_CASE)
    KERN_FLOAT_DTYPES(SCALE_CASE)
    default:
      return;
  }
}

#define AVG_FINAL_COPY_CASE(sfx, DTYPE, ...)          \
  case DTYPE:                                         \
    avg_final_copy_##sfx(dst, dst2, a, b, n, nranks); \
    return;

void kern_reduce_copy_avg_final(void *dst, void *dst2, const void *a, const void *b, size_t n,
                                weft_dtype_t dtype, int nranks) {
  switch (dtype) {
    KERN_INT_DTYPES(AVG_FINAL_COPY_CASE)
    KERN_FLOAT_DTYPES(AVG_FINAL_COPY_CASE)
    default:
      return;
  }
}
