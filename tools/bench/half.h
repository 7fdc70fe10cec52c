/* half.h -- private to weft-bench: bit-exact fp16/bf16 conversions, round to nearest even. */
#ifndef WEFT_TOOLS_BENCH_HALF_H_
#define WEFT_TOOLS_BENCH_HALF_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* IEEE 754 binary16. Overflow goes to infinity, NaN stays NaN (quiet) with its sign. */
uint16_t bench_half_from_float(float f);
float bench_half_to_float(uint16_t h);

/* bfloat16: the top 16 bits of a binary32, rounded to nearest even. */
uint16_t bench_bf16_from_float(float f);
float bench_bf16_to_float(uint16_t b);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_HALF_H_ */
