/* fp8.h -- internal: branch-free fp8 (OCP e4m3 "fn" and e5m2) <-> float conversions, for the host
 * loops and, compiled by nvcc, for the CUDA kernels.
 *
 * One source for both sides is what makes a device reduction give the host's bits exactly
 * (kernels/cuda/reduce_kernels.cu): cuda_fp8.h's conversions turn a float infinity into the largest
 * finite value under __NV_SATFINITE, where weft keeps e5m2 infinities (include/weft.h). Every NaN
 * is written as 0x7f in both formats: which NaN operand x86 or a GPU propagates through a sum
 * differs (and differs between two compilations of the same loop), so keeping the payload or sign
 * would make results depend on the code generated. As in kernels/half.h, every case is computed and
 * the answer picked with masks, so that a loop calling these stays straight-line code. Rounding
 * relies on the default FP environment (round to nearest even), on the host and on the device (nvcc
 * without -use_fast_math does not flush subnormals; flushing would not change a result anyway,
 * since a subnormal float is 0 in either fp8 format).
 *
 * Formats (1 sign bit first):
 *   e4m3: 4 exponent bits, bias 7, 3 mantissa bits. No infinities; S.1111.111 is NaN, so the
 *         largest finite value is S.1111.110 = 448. Subnormals are m * 2^-9.
 *   e5m2: 5 exponent bits, bias 15, 2 mantissa bits: binary16's top byte, with inf x.11111.00
 *         and NaN as IEEE has them. Largest finite value 57344; subnormals m * 2^-16. */
#ifndef WEFT_KERNELS_FP8_H_
#define WEFT_KERNELS_FP8_H_

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define KERN_FP8_FN static inline __host__ __device__
#else
#define KERN_FP8_FN static inline
#endif

KERN_FP8_FN float fp8_bits_to_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

KERN_FP8_FN uint32_t fp8_float_to_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

/* All ones where cond holds, else 0 (kernels/half.h says why selects are masks, not `?:`). */
KERN_FP8_FN uint32_t fp8_mask(int cond) { return 0u - (uint32_t)cond; }

/* The magnitude bits of an fp8 value with `mant` mantissa bits and exponent bias `bias`, as the
 * float of the same value, for finite values only. Normal numbers: the fields moved into float's
 * place and the exponent rebiased. Zero and subnormals (exponent field 0): the normal float
 * 2^emin * (1 + m/2^mant) minus 2^emin, which is exact and +0 for m == 0. */
KERN_FP8_FN uint32_t fp8_finite_bits(uint32_t mag, int mant, int bias) {
  uint32_t em = mag << (23 - mant);
  uint32_t normal = em + ((uint32_t)(127 - bias) << 23);
  uint32_t one = (uint32_t)(128 - bias) << 23; /* 2^emin, emin = 1 - bias */
  float sub = fp8_bits_to_float(em + one) - fp8_bits_to_float(one);
  uint32_t is_sub = fp8_mask((mag >> mant) == 0);
  return (is_sub & fp8_float_to_bits(sub)) | (~is_sub & normal);
}

/* Exact. 0x7f/0xff become a quiet float NaN of the same sign. */
KERN_FP8_FN float kern_e4m3_to_float(uint8_t b) {
  uint32_t mag = b & 0x7fu;
  uint32_t r = fp8_finite_bits(mag, 3, 7);
  /* NaN: the normal path gave exponent 15 + 120 with mantissa 111; all exponent bits set on top
   * of that is a float NaN with the quiet bit. */
  r |= fp8_mask(mag == 0x7fu) & 0x7f800000u;
  return fp8_bits_to_float(r | (uint32_t)(b & 0x80u) << 24);
}

/* Exact. Infinities stay infinite and NaN payloads are kept (moved up). */
KERN_FP8_FN float kern_e5m2_to_float(uint8_t b) {
  uint32_t mag = b & 0x7fu;
  uint32_t r = fp8_finite_bits(mag, 2, 15);
  /* Exponent field 31 came out as 31 + 112; adding 112 once more makes it 255. */
  r += fp8_mask((mag >> 2) == 31) & (112u << 23);
  return fp8_bits_to_float(r | (uint32_t)(b & 0x80u) << 24);
}

/* The fp8 magnitude bits of a float's magnitude bits `a` that is finite and not below 2^emin,
 * rounded to nearest even and saturated at `max_finite`. Adding half an fp8 ulp less one, plus the
 * lowest kept bit, rounds up exactly when the dropped part is over half, or half with an odd kept
 * part; a carry out of the mantissa bumps the exponent, as it should. */
KERN_FP8_FN uint32_t fp8_round_normal(uint32_t a, int mant, int bias, uint32_t max_finite) {
  int drop = 23 - mant;
  uint32_t r =
      (a - ((uint32_t)(127 - bias) << 23) + ((1u << (drop - 1)) - 1) + ((a >> drop) & 1)) >> drop;
  /* Compared as int32_t: SSE2 has signed compares only (r < 2^12, so the value is the same). */
  return r ^ ((r ^ max_finite) & fp8_mask((int32_t)r > (int32_t)max_finite));
}

/* The same for a float below 2^emin, where the result is a subnormal (or the smallest normal when
 * it rounds up): in c + |f| with c = 2^(emin - mant + 23), float's ulp is the fp8 subnormal step,
 * so the FPU's own round-to-nearest-even does the rounding and the low bits are the answer. */
KERN_FP8_FN uint32_t fp8_round_sub(uint32_t a, int mant, int bias) {
  uint32_t c = (uint32_t)(127 + 1 - bias - mant + 23) << 23;
  return fp8_float_to_bits(fp8_bits_to_float(a) + fp8_bits_to_float(c)) - c;
}

/* Picks among the cases: below 2^emin, infinite (`inf`, with the sign), NaN (0x7f whatever its
 * sign and payload), the rest (with the sign). */
KERN_FP8_FN uint8_t fp8_select(uint32_t u, uint32_t a, int bias, uint32_t sub, uint32_t inf,
                               uint32_t normal) {
  int32_t sa = (int32_t)a; /* a has no sign bit: signed compares, as above */
  uint32_t is_big = fp8_mask(sa >= 0x7f800000);
  uint32_t is_nan = fp8_mask(sa > 0x7f800000);
  uint32_t is_sub = fp8_mask(sa < (int32_t)((uint32_t)(128 - bias) << 23));
  uint32_t r = (is_big & inf) | (is_sub & sub) | (~(is_big | is_sub) & normal);
  r |= (u >> 24) & 0x80u;
  return (uint8_t)((is_nan & 0x7fu) | (~is_nan & r));
}

/* Round to nearest, ties to even; beyond 448 (infinity included) saturates to 448; NaN gives
 * 0x7f. */
KERN_FP8_FN uint8_t kern_float_to_e4m3(float f) {
  uint32_t u = fp8_float_to_bits(f);
  uint32_t a = u & 0x7fffffffu;
  return fp8_select(u, a, 7, fp8_round_sub(a, 3, 7), 0x7eu, fp8_round_normal(a, 3, 7, 0x7eu));
}

/* Round to nearest, ties to even; a finite value beyond 57344 saturates to 57344, infinity stays
 * infinity; NaN gives 0x7f (a quiet NaN). */
KERN_FP8_FN uint8_t kern_float_to_e5m2(float f) {
  uint32_t u = fp8_float_to_bits(f);
  uint32_t a = u & 0x7fffffffu;
  return fp8_select(u, a, 15, fp8_round_sub(a, 2, 15), 0x7cu, fp8_round_normal(a, 2, 15, 0x7bu));
}

#endif /* WEFT_KERNELS_FP8_H_ */
