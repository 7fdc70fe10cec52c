/* avg.c -- the division step of WEFT_AVG: (a + b) / nranks at the end of a reduction, or src /
 * nranks.
 *
 * Dividing once at the end (rather than pre-scaling every contribution) is what makes the result
 * equal to sum / nranks: for floats one rounding of the quotient, for integers exactly C's
 * truncating division of the wrapped sum, as include/weft.h promises. */
#include "kernels/dtypes.h"
#include "kernels/reduce.h"

/* Integers: `sum / nranks` uses the usual arithmetic conversions on purpose. nranks > 0, so the
 * divisor takes T's signedness after promotion (int for int8/uint8/int32, unsigned for uint32,
 * 64 bits for the 64-bit types); casting nranks to T instead would break int8 with nranks > 127.
 * These loops do not vectorize (x86 has no SIMD integer division); integer averages are rare. */
#define INT_AVG(sfx, DTYPE, T, W)                                                     \
  static void avg_final_##sfx(T *dst, const T *a, const T *b, size_t n, int nranks) { \
    for (size_t i = 0; i < n; i++) {                                                  \
      T sum = (T)((W)a[i] + (W)b[i]);                                                 \
      dst[i] = (T)(sum / nranks);                                                     \
    }                                                                                 \
  }                                                                                   \
  static void scale_##sfx(T *dst, const T *src, size_t n, int nranks) {               \
    for (size_t i = 0; i < n; i++) dst[i] = (T)(src[i] / nranks);                     \
  }

/* Floats: add and divide in W, convert back once. For fp16 that also keeps a sum above 65504
 * finite when the average is representable. */
#define FLOAT_AVG(sfx, DTYPE, T, W, TO_W, FROM_W)                                     \
  static void avg_final_##sfx(T *dst, const T *a, const T *b, size_t n, int nranks) { \
    W div = (W)nranks;                                                                \
    for (size_t i = 0; i < n; i++) dst[i] = FROM_W((TO_W(a[i]) + TO_W(b[i])) / div);  \
  }                                                                                   \
  static void scale_##sfx(T *dst, const T *src, size_t n, int nranks) {               \
    W div = (W)nranks;                                                                \
    for (size_t i = 0; i < n; i++) dst[i] = FROM_W(TO_W(src[i]) / div);               \
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
