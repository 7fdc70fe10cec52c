/* half.h -- internal: branch-free IEEE binary16 and bfloat16 <-> float conversions for the loops.
 *
 * Every special case (zero, subnormal, inf, NaN, overflow) is computed unconditionally and picked
 * with a select instead of a branch, so that a loop calling these stays a single straight-line
 * body that gcc can vectorize. Bit casts go through memcpy (the one portable way in C and C++;
 * gcc turns it into a register move). Rounding relies on the default FP environment (round to
 * nearest even); flush-to-zero or denormals-are-zero would not change any result, because the
 * float arithmetic below only meets a subnormal float where the binary16 answer is 0 anyway. */
#ifndef WEFT_KERNELS_HALF_H_
#define WEFT_KERNELS_HALF_H_

#include <stdint.h>
#include <string.h>

static inline float kern_bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint32_t kern_float_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* All ones where cond holds, else 0. Selects are written as and/or with these masks rather than as
 * `?:`, because gcc sinks an unconditionally computed float operation into the one arm of a `?:`
 * that uses it and then, under the default -ftrapping-math, refuses to if-convert that arm back:
 * the loop keeps a branch and does not vectorize. */
static inline uint32_t kern_mask(int cond) { return 0u - (uint32_t)cond; }

/* Exact: every binary16 value is a float. NaN payloads are kept (shifted up). */
static inline float kern_half_to_float(uint16_t h) {
  const uint32_t exp_mask = 0x7c00u << 13; /* binary16's exponent field, moved to float's place */
  uint32_t em = (uint32_t)(h & 0x7fff) << 13;
  uint32_t exp = em & exp_mask;
  /* Normal numbers: rebias the exponent from 15 to 127; inf/NaN: once more, so 31 becomes 255. */
  uint32_t is_infnan = kern_mask(exp == exp_mask);
  uint32_t normal = em + ((127u - 15u) << 23) + (is_infnan & ((127u - 15u) << 23));
  /* Zero and subnormals (m * 2^-24): build the normal float 2^-14 * (1 + m/1024) and subtract the
   * implicit 2^-14; the difference is exact, and it is +0 for m == 0. */
  float sub = kern_bits_to_float(em + (113u << 23)) - kern_bits_to_float(113u << 23);
  uint32_t is_sub = kern_mask(exp == 0);
  uint32_t r = (is_sub & kern_float_to_bits(sub)) | (~is_sub & normal);
  return kern_bits_to_float(r | (uint32_t)(h & 0x8000) << 16);
}

/* Round to nearest, ties to even; overflow gives inf; NaN gives a quiet NaN with the top payload
 * bits kept (so a quiet binary16 NaN survives a round trip bit for bit). */
static inline uint16_t kern_float_to_half(float f) {
  /* Each case below leaves its binary16 bits at bits 13..28 and only the final select is shifted
   * down and narrowed. Narrowing each case to 16 bits on its own (the obvious code) makes gcc pack
   * every intermediate into 16-bit lanes separately: on SSE2 that was 123 instead of 85
   * instructions per 8 values, and fp16 sum ran at 0.42 instead of 0.56 Gelem/s. */
  uint32_t u = kern_float_to_bits(f);
  uint32_t a = u & 0x7fffffffu;
  uint32_t sign = (u >> 3) & 0x10000000u; /* bit 31 -> bit 28, i.e. bit 15 after the shift */
  /* Normal results: rebias 127 -> 15 and round away the 13 dropped bits: adding 0xfff plus the
   * lowest kept bit rounds up exactly when the dropped part is over half, or half with an odd
   * kept part. A carry out of the mantissa bumps the exponent, which is also the right answer
   * there, up to and including overflow to inf (0x7c00) from [65520, 65536). */
  uint32_t normal = a - ((127u - 15u) << 23) + 0xfffu + ((a >> 13) & 1);
  /* Subnormal results (|f| < 2^-14): in 0.5 + |f| the float ulp is 2^-24, binary16's subnormal
   * step, so the FPU's own round-to-nearest-even does the job and the low bits are the answer
   * (0x400 when it rounds up to the smallest normal). The shift also drops 0.5's exponent. */
  uint32_t sub = kern_float_to_bits(kern_bits_to_float(a) + 0.5f) << 13;
  /* |f| >= 65536, inf and NaN: 0x7c00, plus the quiet bit and the top payload bits for NaN.
   * Compared as int32_t (a has no sign bit, so the value is the same) because SSE2 has only
   * signed compares; an unsigned one costs extra instructions. */
  int32_t sa = (int32_t)a;
  uint32_t big =
      (0x7c00u << 13) | (kern_mask(sa > 0x7f800000) & ((0x200u << 13) | (a & 0x7fe000u)));
  uint32_t is_big = kern_mask(sa >= 0x47800000);
  uint32_t is_sub = kern_mask(sa < 0x38800000); /* |f| < 2^-14 */
  uint32_t r = (is_big & big) | (is_sub & sub) | (~(is_big | is_sub) & normal);
  return (uint16_t)((r | sign) >> 13);
}

/* Exact: bfloat16 is the top half of a float. */
static inline float kern_bf16_to_float(uint16_t h) { return kern_bits_to_float((uint32_t)h << 16); }

/* Round to nearest, ties to even (same carry trick as above; overflow carries into inf). A NaN
 * gets the quiet bit, since truncating a NaN whose payload is all in the low half would give inf.
 * As above, both cases stay 32 bits wide until the one final shift. */
static inline uint16_t kern_float_to_bf16(float f) {
  uint32_t u = kern_float_to_bits(f);
  uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1);
  uint32_t nan = u | 0x00400000u;
  uint32_t is_nan = kern_mask((int32_t)(u & 0x7fffffffu) > 0x7f800000);
  return (uint16_t)(((is_nan & nan) | (~is_nan & rounded)) >> 16);
}

#endif /* WEFT_KERNELS_HALF_H_ */
