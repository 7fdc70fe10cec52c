/* half.c -- bit-exact fp16 and bfloat16 <-> float conversions for weft-bench's data patterns.
 *
 * Written on the bit patterns rather than with float arithmetic so that the result does not depend
 * on the FPU's rounding mode or on flush-to-zero settings. */
#include "tools/bench/half.h"

#include <string.h>

static uint32_t float_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return x;
}

static float bits_float(uint32_t x) {
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

/* Drops the low `shift` bits of `value`, rounding to nearest with ties to even. */
static uint32_t round_shift(uint32_t value, unsigned shift) {
  uint32_t q = value >> shift;
  uint32_t rem = value & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return q;
}

uint16_t bench_half_from_float(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff)); /* NaN */
  /* 65520 = 65504 + half an ulp: from there on, round to nearest even gives infinity. */
  if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00);
  if (ax >= 0x38800000) {
    /* Normal in fp16: rebias the exponent (127 - 15 = 112) and round the mantissa to 10 bits. A
     * carry out of the mantissa correctly bumps the exponent. */
    return (uint16_t)(sign | round_shift(ax - (112u << 23), 13));
  }
  /* Subnormal in fp16 (below 2^-14): count units of 2^-24. Up to 2^-25 (a tie with 0) -> 0. */
  if (ax <= 0x33000000) return (uint16_t)sign;
  uint32_t exp = ax >> 23; /* 102..112 here */
  uint32_t mant = (ax & 0x7fffff) | 0x800000;
  /* value = mant * 2^(exp - 150) = (mant >> (126 - exp)) units of 2^-24 */
  return (uint16_t)(sign | round_shift(mant, 126 - exp));
}

float bench_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000 | (mant << 13));
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  /* Zero or subnormal: mant units of 2^-24, exact in float. */
  float mag = (float)mant * 5.9604644775390625e-8f;
  return sign ? -mag : mag;
}

uint16_t bench_bf16_from_float(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x0040); /* quiet NaN */
  /* Adding 0x7fff plus the lowest kept bit rounds to nearest even; a carry into the exponent is the
   * right answer, up to and including infinity. */
  return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float bench_bf16_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }
