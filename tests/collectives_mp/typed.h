// typed.h -- writes and compares values of any weft dtype, so one test body covers them all.
#ifndef WEFT_TESTS_COLLECTIVES_MP_TYPED_H_
#define WEFT_TESTS_COLLECTIVES_MP_TYPED_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "include/weft.h"
#include "kernels/fp8.h"
#include "kernels/half.h"
}

inline bool is_fp8_dtype(weft_dtype_t d) { return d == WEFT_FLOAT8_E4M3 || d == WEFT_FLOAT8_E5M2; }

inline bool is_float_dtype(weft_dtype_t d) {
  return d == WEFT_FLOAT16 || d == WEFT_BFLOAT16 || d == WEFT_FLOAT32 || d == WEFT_FLOAT64 ||
         is_fp8_dtype(d);
}

// Stores v (an integer the tests make sure the dtype represents exactly, or wraps on purpose for
// integer types) at element i.
inline void typed_store(weft_dtype_t d, void* buf, size_t i, int64_t v) {
  switch (d) {
    case WEFT_INT8: ((int8_t*)buf)[i] = (int8_t)v; break;
    case WEFT_UINT8: ((uint8_t*)buf)[i] = (uint8_t)v; break;
    case WEFT_INT32: ((int32_t*)buf)[i] = (int32_t)v; break;
    case WEFT_UINT32: ((uint32_t*)buf)[i] = (uint32_t)v; break;
    case WEFT_INT64: ((int64_t*)buf)[i] = v; break;
    case WEFT_UINT64: ((uint64_t*)buf)[i] = (uint64_t)v; break;
    case WEFT_FLOAT16: ((uint16_t*)buf)[i] = kern_float_to_half((float)v); break;
    case WEFT_BFLOAT16: ((uint16_t*)buf)[i] = kern_float_to_bf16((float)v); break;
    case WEFT_FLOAT32: ((float*)buf)[i] = (float)v; break;
    case WEFT_FLOAT64: ((double*)buf)[i] = (double)v; break;
    case WEFT_FLOAT8_E4M3: ((uint8_t*)buf)[i] = kern_float_to_e4m3((float)v); break;
    case WEFT_FLOAT8_E5M2: ((uint8_t*)buf)[i] = kern_float_to_e5m2((float)v); break;
    default: break;
  }
}

// The value at element i as text, for failure messages.
inline std::string typed_str(weft_dtype_t d, const void* buf, size_t i) {
  switch (d) {
    case WEFT_INT8: return std::to_string(((const int8_t*)buf)[i]);
    case WEFT_UINT8: return std::to_string(((const uint8_t*)buf)[i]);
    case WEFT_INT32: return std::to_string(((const int32_t*)buf)[i]);
    case WEFT_UINT32: return std::to_string(((const uint32_t*)buf)[i]);
    case WEFT_INT64: return std::to_string(((const int64_t*)buf)[i]);
    case WEFT_UINT64: return std::to_string(((const uint64_t*)buf)[i]);
    case WEFT_FLOAT16: return std::to_string(kern_half_to_float(((const uint16_t*)buf)[i]));
    case WEFT_BFLOAT16: return std::to_string(kern_bf16_to_float(((const uint16_t*)buf)[i]));
    case WEFT_FLOAT32: return std::to_string(((const float*)buf)[i]);
    case WEFT_FLOAT64: return std::to_string(((const double*)buf)[i]);
    case WEFT_FLOAT8_E4M3: return std::to_string(kern_e4m3_to_float(((const uint8_t*)buf)[i]));
    case WEFT_FLOAT8_E5M2: return std::to_string(kern_e5m2_to_float(((const uint8_t*)buf)[i]));
    default: return "?";
  }
}

// "" when got and want are bitwise equal, else where and how they first differ.
inline std::string typed_compare(weft_dtype_t d, const void* got, const void* want, size_t count) {
  size_t es = weft_dtype_size(d);
  for (size_t i = 0; i < count; i++)
    if (memcmp((const char*)got + i * es, (const char*)want + i * es, es) != 0)
      return "element " + std::to_string(i) + " of " + std::to_string(count) + ": got " +
             typed_str(d, got, i) + ", want " + typed_str(d, want, i);
  return "";
}

#endif  // WEFT_TESTS_COLLECTIVES_MP_TYPED_H_
