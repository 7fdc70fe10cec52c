/* dtypes.h -- internal: each weft dtype's C storage type and arithmetic type, as X-macro lists.
 *
 * reduce.c and avg.c expand these lists into one loop per dtype, so the choice of arithmetic type
 * (the part that decides wrapping and rounding) is written down once. */
#ifndef WEFT_KERNELS_DTYPES_H_
#define WEFT_KERNELS_DTYPES_H_

#include <stdint.h>

#include "include/weft.h"
#include "kernels/fp8.h"
#include "kernels/half.h"

/* X(suffix, DTYPE, T, W) for integer dtypes. T is the storage type. W is the unsigned type that
 * sum and prod are computed in: unsigned overflow wraps where signed overflow would be undefined,
 * and W is at least as wide as unsigned int so that integer promotion cannot turn the operands
 * back into a signed int (uint8 * uint8 in int is fine, but uint32 * uint32 must stay unsigned).
 * Converting the wrapped W back to a signed T keeps the low bits (gcc documents this). */
#define KERN_INT_DTYPES(X)                   \
  X(int8, WEFT_INT8, int8_t, uint32_t)       \
  X(uint8, WEFT_UINT8, uint8_t, uint32_t)    \
  X(int32, WEFT_INT32, int32_t, uint32_t)    \
  X(uint32, WEFT_UINT32, uint32_t, uint32_t) \
  X(int64, WEFT_INT64, int64_t, uint64_t)    \
  X(uint64, WEFT_UINT64, uint64_t, uint64_t)

/* X(suffix, DTYPE, T, W, TO_W, FROM_W) for floating dtypes. W is the type arithmetic happens in;
 * TO_W and FROM_W convert storage to it and back (rounding to nearest even for fp16/bf16/fp8,
 * saturating for fp8). */
#define KERN_FLOAT_DTYPES(X)                                                               \
  X(float16, WEFT_FLOAT16, uint16_t, float, kern_half_to_float, kern_float_to_half)        \
  X(bfloat16, WEFT_BFLOAT16, uint16_t, float, kern_bf16_to_float, kern_float_to_bf16)      \
  X(float32, WEFT_FLOAT32, float, float, KERN_SAME, KERN_SAME)                             \
  X(float64, WEFT_FLOAT64, double, double, KERN_SAME, KERN_SAME)                           \
  X(float8_e4m3, WEFT_FLOAT8_E4M3, uint8_t, float, kern_e4m3_to_float, kern_float_to_e4m3) \
  X(float8_e5m2, WEFT_FLOAT8_E5M2, uint8_t, float, kern_e5m2_to_float, kern_float_to_e5m2)

#define KERN_SAME(x) (x)

#endif /* WEFT_KERNELS_DTYPES_H_ */
