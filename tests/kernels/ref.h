// ref.h -- slow, obviously-correct fp16/bf16/fp8 conversions that the kernel tests compare against.
//
// Written from the format definitions with ldexp/frexp/nearbyint in double, sharing nothing with
// the bit tricks in kernels/half.h. std::nearbyint rounds in the current mode, which is the
// default round-to-nearest-even; double holds every value involved exactly until that call.
#ifndef WEFT_TESTS_KERNELS_REF_H_
#define WEFT_TESTS_KERNELS_REF_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "include/weft.h"

namespace ref {

// A small IEEE-style binary format: `mant_bits` stored mantissa bits, exponent bias `bias`,
// all-ones exponent for inf/NaN.
struct Format {
  int mant_bits;
  int exp_bits;
  int bias;
};
constexpr Format kHalf = {10, 5, 15};
constexpr Format kBf16 = {7, 8, 127};

inline double decode(Format fmt, uint16_t bits) {
  int sign = bits >> 15;
  int exp = (bits >> fmt.mant_bits) & ((1 << fmt.exp_bits) - 1);
  int mant = bits & ((1 << fmt.mant_bits) - 1);
  double v;
  if (exp == 0) {  // zero or subnormal: mant * 2^(1 - bias - mant_bits)
    v = std::ldexp(mant, 1 - fmt.bias - fmt.mant_bits);
  } else if (exp == (1 << fmt.exp_bits) - 1) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp((1 << fmt.mant_bits) + mant, exp - fmt.bias - fmt.mant_bits);
  }
  return sign ? -v : v;
}

// Nearest representable value, ties to even; beyond the largest finite value plus half an ulp
// (ties there go up, since the largest mantissa is odd), infinity.
inline uint16_t encode(Format fmt, double d) {
  uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  int max_exp = (1 << fmt.exp_bits) - 2 - fmt.bias;  // exponent of the largest finite value
  uint16_t inf = (uint16_t)(((1 << fmt.exp_bits) - 1) << fmt.mant_bits);
  if (std::isnan(d)) return sign | inf | (1 << (fmt.mant_bits - 1));
  double a = std::fabs(d);
  double overflow = std::ldexp(2.0 - std::ldexp(1.0, -fmt.mant_bits - 1), max_exp);
  if (a >= overflow) return sign | inf;
  int min_exp = 1 - fmt.bias;
  if (a < std::ldexp(1.0, min_exp)) {
    // Subnormal: a multiple of 2^(min_exp - mant_bits). Rounding up to 2^mant_bits gives exactly
    // the smallest normal's bit pattern.
    return sign | (uint16_t)std::nearbyint(std::ldexp(a, fmt.mant_bits - min_exp));
  }
  int e;
  std::frexp(a, &e);                                                // a in [2^(e-1), 2^e)
  double m = std::nearbyint(std::ldexp(a, fmt.mant_bits + 1 - e));  // in [2^mant, 2^(mant+1)]
  // m == 2^(mant+1) (rounded up to the next power of two) carries into the exponent, correctly.
  uint32_t bits =
      ((uint32_t)(e - 1 + fmt.bias) << fmt.mant_bits) + (uint32_t)m - (1u << fmt.mant_bits);
  return (uint16_t)(sign | bits);
}

inline bool is_nan(Format fmt, uint16_t bits) {
  uint16_t inf = (uint16_t)(((1 << fmt.exp_bits) - 1) << fmt.mant_bits);
  return (bits & inf) == inf && (bits & ((1 << fmt.mant_bits) - 1)) != 0;
}

// An fp8 format (1 sign, 7 - mant_bits exponent bits). e5m2 is IEEE-like; e4m3 ("fn") has no
// infinities and only S.1111.111 is NaN.
struct Fp8 {
  int mant_bits;
  int bias;
  bool has_inf;
};
constexpr Fp8 kE4m3 = {3, 7, false};
constexpr Fp8 kE5m2 = {2, 15, true};

inline bool is_nan(Fp8 fmt, uint8_t b) {
  int exp = (b & 0x7f) >> fmt.mant_bits;
  int mant = b & ((1 << fmt.mant_bits) - 1);
  if (fmt.has_inf) return exp == (0x7f >> fmt.mant_bits) && mant != 0;
  return (b & 0x7f) == 0x7f;
}

// Whether the element of weft dtype `dtype` at p is a NaN (never for integers).
inline bool is_nan_elem(weft_dtype_t dtype, const void *p) {
  uint8_t b = 0;
  uint16_t h = 0;
  float f = 0;
  double d = 0;
  switch (dtype) {
    case WEFT_FLOAT16:
      return std::memcpy(&h, p, 2), is_nan(kHalf, h);
    case WEFT_BFLOAT16:
      return std::memcpy(&h, p, 2), is_nan(kBf16, h);
    case WEFT_FLOAT32:
      return std::memcpy(&f, p, 4), std::isnan(f);
    case WEFT_FLOAT64:
      return std::memcpy(&d, p, 8), std::isnan(d);
    case WEFT_FLOAT8_E4M3:
      return std::memcpy(&b, p, 1), is_nan(kE4m3, b);
    case WEFT_FLOAT8_E5M2:
      return std::memcpy(&b, p, 1), is_nan(kE5m2, b);
    default:
      return false;
  }
}

inline bool is_inf(Fp8 fmt, uint8_t b) {
  return fmt.has_inf && (b & 0x7f) == ((0x7f >> fmt.mant_bits) << fmt.mant_bits);
}

// The value of a pattern, from sign, exponent and mantissa with ldexp.
inline double decode(Fp8 fmt, uint8_t b) {
  int exp = (b & 0x7f) >> fmt.mant_bits;
  int mant = b & ((1 << fmt.mant_bits) - 1);
  double v;
  if (is_nan(fmt, b)) {
    v = NAN;
  } else if (is_inf(fmt, b)) {
    v = INFINITY;
  } else if (exp == 0) {
    v = std::ldexp(mant, 1 - fmt.bias - fmt.mant_bits);
  } else {
    v = std::ldexp((1 << fmt.mant_bits) + mant, exp - fmt.bias - fmt.mant_bits);
  }
  return (b & 0x80) ? -v : v;
}

inline uint8_t max_finite(Fp8 fmt) { return fmt.has_inf ? 0x7b : 0x7e; }

// Round to nearest by search: the finite pattern closest to |d|, the even one (mantissa bit 0
// clear) on a tie; from the largest finite value up, that value (saturation). An e5m2 infinity
// stays infinite; NaN gives 0x7f in both formats, whatever its sign.
inline uint8_t encode(Fp8 fmt, double d) {
  uint8_t sign = std::signbit(d) ? 0x80 : 0;
  if (std::isnan(d)) return 0x7f;
  if (std::isinf(d) && fmt.has_inf) return sign | 0x7c;
  double a = std::fabs(d);
  if (a >= decode(fmt, max_finite(fmt))) return sign | max_finite(fmt);
  int best = 0;
  double best_err = INFINITY;
  for (int b = 0; b <= max_finite(fmt); b++) {
    double err = std::fabs(decode(fmt, (uint8_t)b) - a);
    if (err < best_err || (err == best_err && (b & 1) == 0)) {
      best = b;
      best_err = err;
    }
  }
  return sign | (uint8_t)best;
}

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace ref

#endif  // WEFT_TESTS_KERNELS_REF_H_
