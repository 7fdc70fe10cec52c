/* reduce_elems.cuh -- internal: the device's element arithmetic, one struct per dtype (sum, prod,
 * min, max, the average's last step, scale, premul), chosen to give kernels/reduce.c's and
 * kernels/avg.c's bits exactly. Shared by reduce_kernels.cu (the host-driven kernels) and
 * devloop_kernel.cu (the device-resident loop), so both round alike. nvcc only. */
#ifndef WEFT_KERNELS_CUDA_REDUCE_ELEMS_CUH_
#define WEFT_KERNELS_CUDA_REDUCE_ELEMS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/fp8.h"

namespace {

/* ---- Element arithmetic, one struct per dtype ---------------------------------------------- */

/* Integers: sum and prod in the unsigned type W, where overflow wraps instead of being undefined,
 * then truncated back to T (kernels/dtypes.h picks the same W). The average divides the wrapped
 * sum by an int with C's usual conversions, exactly as kernels/avg.c does. */
template <typename T, typename W>
struct IntType {
  using Storage = T;
  static __device__ __forceinline__ T sum(T x, T y) { return (T)((W)x + (W)y); }
  static __device__ __forceinline__ T prod(T x, T y) { return (T)((W)x * (W)y); }
  static __device__ __forceinline__ T min(T x, T y) { return x < y ? x : y; }
  static __device__ __forceinline__ T max(T x, T y) { return x > y ? x : y; }
  static __device__ __forceinline__ T avg_final(T x, T y, int nranks) {
    T s = sum(x, y);
    return (T)(s / nranks);
  }
  static __device__ __forceinline__ T scale(T x, int nranks) { return (T)(x / nranks); }
  static __device__ __forceinline__ T premul(T x, T f) { return (T)((W)x * (W)f); }
};

/* float and double: IEEE operations rounded to nearest, as on the host. nvcc's defaults matter
 * here and reduce_kernels is built with them: no -use_fast_math, so `/` is the correctly rounded
 * division and subnormals are not flushed; and no expression has a product feeding a sum, so no
 * fused multiply-add can change a rounding. */
template <typename T>
struct FloatType {
  using Storage = T;
  static __device__ __forceinline__ T sum(T x, T y) { return x + y; }
  static __device__ __forceinline__ T prod(T x, T y) { return x * y; }
  static __device__ __forceinline__ T min(T x, T y) { return x < y ? x : y; }
  static __device__ __forceinline__ T max(T x, T y) { return x > y ? x : y; }
  static __device__ __forceinline__ T avg_final(T x, T y, int nranks) {
    return (x + y) / (T)nranks;
  }
  static __device__ __forceinline__ T scale(T x, int nranks) { return x / (T)nranks; }
  static __device__ __forceinline__ T premul(T x, T f) { return x * f; }
};

/* fp16 and bf16 travel as their 16 bits and are computed in float, rounded to nearest even once
 * per operation (cvt.rn): the host's definition. Computing natively in half precision (__hadd)
 * would give the same sums but not the same average, where the host adds and divides in float
 * before its one rounding. min/max compare in float and return an operand's own bits, so they are
 * exact and NaNs pass through unchanged. */
struct Half {
  using Storage = uint16_t;
  static __device__ __forceinline__ float to(uint16_t b) {
    return __half2float(__ushort_as_half(b));
  }
  static __device__ __forceinline__ uint16_t from(float f) {
    return __half_as_ushort(__float2half_rn(f));
  }
};

struct Bf16 {
  using Storage = uint16_t;
  static __device__ __forceinline__ float to(uint16_t b) {
    return __bfloat162float(__ushort_as_bfloat16(b));
  }
  static __device__ __forceinline__ uint16_t from(float f) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  }
};

/* fp8 e4m3 and e5m2: the host's own conversions from kernels/fp8.h, compiled for the device, and
 * not cuda_fp8.h's. Those round finite values the same way but saturate a float infinity to the
 * largest finite value (weft keeps e5m2 infinities); sharing the source is what keeps host and
 * device bit-identical, NaN results (0x7f) included. The float arithmetic around them is the same
 * as for fp16/bf16. */
struct E4m3 {
  using Storage = uint8_t;
  static __device__ __forceinline__ float to(uint8_t b) { return kern_e4m3_to_float(b); }
  static __device__ __forceinline__ uint8_t from(float f) { return kern_float_to_e4m3(f); }
};

struct E5m2 {
  using Storage = uint8_t;
  static __device__ __forceinline__ float to(uint8_t b) { return kern_e5m2_to_float(b); }
  static __device__ __forceinline__ uint8_t from(float f) { return kern_float_to_e5m2(f); }
};

template <typename C>
struct SmallFloatType {
  using Storage = typename C::Storage;
  using T = Storage;
  static __device__ __forceinline__ T sum(T x, T y) { return C::from(C::to(x) + C::to(y)); }
  static __device__ __forceinline__ T prod(T x, T y) { return C::from(C::to(x) * C::to(y)); }
  static __device__ __forceinline__ T min(T x, T y) { return C::to(x) < C::to(y) ? x : y; }
  static __device__ __forceinline__ T max(T x, T y) { return C::to(x) > C::to(y) ? x : y; }
  static __device__ __forceinline__ T avg_final(T x, T y, int nranks) {
    return C::from((C::to(x) + C::to(y)) / (float)nranks);
  }
  static __device__ __forceinline__ T scale(T x, int nranks) {
    return C::from(C::to(x) / (float)nranks);
  }
  static __device__ __forceinline__ T premul(T x, T f) { return C::from(C::to(x) * C::to(f)); }
};

/* What a kernel computes per element. kAvgFinal is WEFT_AVG's last step; intermediate WEFT_AVG
 * steps run as kSum. kScale and kPreMul have one input; kPreMul's factor is the kernel
 * argument's `factor` bits. */
enum Kind { kSum, kProd, kMin, kMax, kAvgFinal, kScale, kPreMul };

template <class D, int K>
__device__ __forceinline__ typename D::Storage apply(typename D::Storage x, typename D::Storage y,
                                                     int nranks, typename D::Storage f) {
  if constexpr (K == kSum) return D::sum(x, y);
  if constexpr (K == kProd) return D::prod(x, y);
  if constexpr (K == kMin) return D::min(x, y);
  if constexpr (K == kMax) return D::max(x, y);
  if constexpr (K == kAvgFinal) return D::avg_final(x, y, nranks);
  if constexpr (K == kScale) return D::scale(x, nranks);
  if constexpr (K == kPreMul) return D::premul(x, f);
}

}  // namespace

#endif /* WEFT_KERNELS_CUDA_REDUCE_ELEMS_CUH_ */
