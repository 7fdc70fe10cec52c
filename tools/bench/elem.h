/* elem.h -- private to weft-bench: one element of any dtype, read and written as an integer. */
#ifndef WEFT_TOOLS_BENCH_ELEM_H_
#define WEFT_TOOLS_BENCH_ELEM_H_

#include <stddef.h>
#include <stdint.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stores v as element i. Integer dtypes keep v modulo 2^bits; floating dtypes round v to nearest
 * (exact for the values the patterns use). */
void bench_elem_store(weft_dtype_t dtype, void *buf, size_t i, int64_t v);

/* Whether element i holds exactly the value v (NaN never does). */
int bench_elem_equals(weft_dtype_t dtype, const void *buf, size_t i, int64_t v);

/* Stores a value that is certainly not v: v + 1 (mod 2^bits) for integers, NaN for floats. */
void bench_elem_poison(weft_dtype_t dtype, void *buf, size_t i, int64_t v);

/* Element i as a double (integers converted, fp16/bf16/fp8 widened). */
double bench_elem_load(weft_dtype_t dtype, const void *buf, size_t i);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_ELEM_H_ */
