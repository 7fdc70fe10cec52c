// patterns.h -- inputs for which every reduction order gives the same, exactly known result.
//
// Sums and min/max use small integers (|sum| stays far inside every dtype's exact range, bf16's
// 256 included); products use 1, 2 and -1, so float products are powers of two and integer ones
// wrap identically in any order; float averages use inputs whose sum is nranks * base(i), so the
// mean is exact while a missing rank still changes it.
//
// fp8 holds every integer only up to 8 (e5m2) or 16 (e4m3), so its sums and averages get inputs
// of their own (fp8_input): at most 8 unit steps of one sign in any element, so that no partial
// sum in any order leaves [-8, 8]. Products (powers of two up to 2^5 with 13 ranks) and min/max
// (|v| <= 3) need nothing special.
#ifndef WEFT_TESTS_COLLECTIVES_MP_PATTERNS_H_
#define WEFT_TESTS_COLLECTIVES_MP_PATTERNS_H_

#include <cstdint>

extern "C" {
#include "include/weft.h"
}

#include "tests/collectives_mp/typed.h"

inline bool is_unsigned_dtype(weft_dtype_t d) {
  return d == WEFT_UINT8 || d == WEFT_UINT32 || d == WEFT_UINT64;
}

// fp8 sum: +-1 from at most 8 ranks per element, which ranks rotating with i (stride is 1 up to
// 8 ranks, so every rank shows in every element there). fp8 avg: base b with n * |b| <= 8 and
// +1/-1 offsets in rank pairs, so all inputs share b's sign and the sum is n * b; beyond 8 ranks
// b is 0 and only the first 16 ranks give offsets (8 of them +1).
inline int64_t fp8_input(weft_op_t op, int r, int nranks, size_t i) {
  if (op == WEFT_AVG) {
    int64_t bmax = 8 / nranks < 2 ? 8 / nranks : 2;
    int64_t b = bmax ? (int64_t)((i * 3 + 1) % (size_t)(2 * bmax + 1)) - bmax : 0;
    int64_t off = r % 2 ? -1 : (r + 1 < nranks ? 1 : 0);
    return b + (r < 16 ? off : 0);
  }
  size_t stride = ((size_t)nranks + 7) / 8;
  if (((size_t)r + i) % stride != 0) return 0;
  return ((size_t)r * 7 + i) % 3 == 0 ? -1 : 1;
}

// Rank r's input at element i.
inline int64_t pattern_input(weft_dtype_t d, weft_op_t op, int r, int nranks, size_t i) {
  if (is_fp8_dtype(d) && (op == WEFT_SUM || op == WEFT_AVG)) return fp8_input(op, r, nranks, i);
  int64_t base = (int64_t)((i * 3 + 1) % 5);  // 0..4
  if (!is_unsigned_dtype(d)) base -= 2;        // -2..2
  switch (op) {
    case WEFT_PROD: {
      int64_t v = ((size_t)r + i) % 3 == 0 ? 2 : 1;
      return (!is_unsigned_dtype(d) && (r + i) % 7 == 3) ? -v : v;
    }
    case WEFT_AVG:
      if (is_float_dtype(d)) {
        // Offsets 0, 1, ..., p-2 and -(their sum): they cancel, so the mean is base exactly.
        int64_t off = r < nranks - 1 ? r : -(int64_t)(nranks - 1) * (nranks - 2) / 2;
        return base + off;
      }
      return base + (int64_t)((r * 7 + i) % 3);
    default:
      return base + (int64_t)((r * 7 + i) % 3) - (is_unsigned_dtype(d) ? 0 : 1);
  }
}

// The reduction of pattern_input over all ranks, per weft.h's semantics.
inline int64_t pattern_expected(weft_dtype_t d, weft_op_t op, int nranks, size_t i) {
  int64_t acc = pattern_input(d, op, 0, nranks, i);
  for (int r = 1; r < nranks; r++) {
    int64_t v = pattern_input(d, op, r, nranks, i);
    switch (op) {
      case WEFT_SUM:
      case WEFT_AVG: acc += v; break;
      case WEFT_PROD: acc = (int64_t)((uint64_t)acc * (uint64_t)v); break;
      case WEFT_MIN: acc = v < acc ? v : acc; break;
      case WEFT_MAX: acc = v > acc ? v : acc; break;
      default: break;
    }
  }
  if (op == WEFT_AVG) acc /= nranks;  // exact for floats by construction; truncation for ints
  return acc;
}

#endif  // WEFT_TESTS_COLLECTIVES_MP_PATTERNS_H_
