/* premul.c -- WEFT_PREMUL_SUM's first step: a rank's input times its own factor, before the sum.
 *
 * Integers multiply in the unsigned W of kernels/dtypes.h (wrapping, as WEFT_PROD); the floating
 * dtypes multiply in their arithmetic type and round back once, as every host loop does. The
 * factor is read once, before the loop, so the loop is the same shape as kern_scale_avg's and
 * vectorizes the same way. */
#include <string.h>

#include "kernels/dtypes.h"
#include "kernels/reduce.h"

#define INT_PREMUL(sfx, DTYPE, T, W)                                                  \
  static void premul_##sfx(void *dst_v, const void *src_v, size_t n, const void *f) { \
    T *dst = (T *)dst_v;                                                              \
    const T *src = (const T *)src_v;                                                  \
    T s;                                                                              \
    memcpy(&s, f, sizeof s);                                                          \
    W w = (W)s;                                                                       \
    for (size_t i = 0; i < n; i++) dst[i] = (T)((W)src[i] * w);                       \
  }

#define FLOAT_PREMUL(sfx, DTYPE, T, W, TO_W, FROM_W)                                  \
  static void premul_##sfx(void *dst_v, const void *src_v, size_t n, const void *f) { \
    T *dst = (T *)dst_v;                                                              \
    const T *src = (const T *)src_v;                                                  \
    T s;                                                                              \
    memcpy(&s, f, sizeof s);                                                          \
    W w = TO_W(s);                                                                    \
    for (size_t i = 0; i < n; i++) dst[i] = FROM_W(TO_W(src[i]) * w);                 \
  }

KERN_INT_DTYPES(INT_PREMUL)
KERN_FLOAT_DTYPES(FLOAT_PREMUL)

#define PREMUL_CASE(sfx, DTYPE, ...)   \
  case DTYPE:                          \
    premul_##sfx(dst, src, n, scalar); \
    return;

void kern_premul(void *dst, const void *src, size_t n, weft_dtype_t dtype, const void *scalar) {
  switch (dtype) {
    KERN_INT_DTYPES(PREMUL_CASE)
    KERN_FLOAT_DTYPES(PREMUL_CASE)
    default:
      return;
  }
}
