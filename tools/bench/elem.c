/* elem.c -- typed element access for weft-bench's fill and check loops. */
#include "tools/bench/elem.h"

#include <math.h>

#include "kernels/fp8.h"
#include "kernels/half.h"

void bench_elem_store(weft_dtype_t dtype, void *buf, size_t i, int64_t v) {
  uint64_t u = (uint64_t)v; /* integer stores wrap: conversions to unsigned are defined */
  switch (dtype) {
    case WEFT_INT8:
    case WEFT_UINT8:
      ((uint8_t *)buf)[i] = (uint8_t)u;
      break;
    case WEFT_INT32:
    case WEFT_UINT32:
      ((uint32_t *)buf)[i] = (uint32_t)u;
      break;
    case WEFT_INT64:
    case WEFT_UINT64:
      ((uint64_t *)buf)[i] = u;
      break;
    case WEFT_FLOAT16:
      ((uint16_t *)buf)[i] = kern_float_to_half((float)v);
      break;
    case WEFT_BFLOAT16:
      ((uint16_t *)buf)[i] = kern_float_to_bf16((float)v);
      break;
    case WEFT_FLOAT32:
      ((float *)buf)[i] = (float)v;
      break;
    case WEFT_FLOAT64:
      ((double *)buf)[i] = (double)v;
      break;
    case WEFT_FLOAT8_E4M3:
      ((uint8_t *)buf)[i] = kern_float_to_e4m3((float)v);
      break;
    case WEFT_FLOAT8_E5M2:
      ((uint8_t *)buf)[i] = kern_float_to_e5m2((float)v);
      break;
    default:
      break;
  }
}

int bench_elem_equals(weft_dtype_t dtype, const void *buf, size_t i, int64_t v) {
  switch (dtype) {
    case WEFT_INT8:
      return ((const int8_t *)buf)[i] == v;
    case WEFT_UINT8:
      return ((const uint8_t *)buf)[i] == v;
    case WEFT_INT32:
      return ((const int32_t *)buf)[i] == v;
    case WEFT_UINT32:
      return ((const uint32_t *)buf)[i] == v;
    case WEFT_INT64:
      return ((const int64_t *)buf)[i] == v;
    case WEFT_UINT64:
      return v >= 0 && ((const uint64_t *)buf)[i] == (uint64_t)v;
    case WEFT_FLOAT16:
    case WEFT_BFLOAT16:
    case WEFT_FLOAT32:
    case WEFT_FLOAT64:
    case WEFT_FLOAT8_E4M3:
    case WEFT_FLOAT8_E5M2:
      /* Pattern values are integers of at most 53 significant bits: exact as doubles. */
      return bench_elem_load(dtype, buf, i) == (double)v;
    default:
      return 0;
  }
}

void bench_elem_poison(weft_dtype_t dtype, void *buf, size_t i, int64_t v) {
  switch (dtype) {
    case WEFT_FLOAT16:
      ((uint16_t *)buf)[i] = 0x7e00;
      break;
    case WEFT_BFLOAT16:
      ((uint16_t *)buf)[i] = 0x7fc0;
      break;
    case WEFT_FLOAT32:
      ((float *)buf)[i] = NAN;
      break;
    case WEFT_FLOAT64:
      ((double *)buf)[i] = NAN;
      break;
    case WEFT_FLOAT8_E4M3:
      ((uint8_t *)buf)[i] = 0x7f;
      break;
    case WEFT_FLOAT8_E5M2:
      ((uint8_t *)buf)[i] = 0x7e;
      break;
    default:
      bench_elem_store(dtype, buf, i, (int64_t)((uint64_t)v + 1));
      break;
  }
}

double bench_elem_load(weft_dtype_t dtype, const void *buf, size_t i) {
  switch (dtype) {
    case WEFT_INT8:
      return ((const int8_t *)buf)[i];
    case WEFT_UINT8:
      return ((const uint8_t *)buf)[i];
    case WEFT_INT32:
      return ((const int32_t *)buf)[i];
    case WEFT_UINT32:
      return ((const uint32_t *)buf)[i];
    case WEFT_INT64:
      return (double)((const int64_t *)buf)[i];
    case WEFT_UINT64:
      return (double)((const uint64_t *)buf)[i];
    case WEFT_FLOAT16:
      return kern_half_to_float(((const uint16_t *)buf)[i]);
    case WEFT_BFLOAT16:
      return kern_bf16_to_float(((const uint16_t *)buf)[i]);
    case WEFT_FLOAT32:
      return ((const float *)buf)[i];
    case WEFT_FLOAT64:
      return ((const double *)buf)[i];
    case WEFT_FLOAT8_E4M3:
      return kern_e4m3_to_float(((const uint8_t *)buf)[i]);
    case WEFT_FLOAT8_E5M2:
      return kern_e5m2_to_float(((const uint8_t *)buf)[i]);
    default:
      return 0.0;
  }
}
