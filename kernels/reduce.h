/* reduce.h -- internal: host reduction loops (one per dtype x op), the final step of WEFT_AVG, and
 * their two-destination reduce-copy forms for a fused ring step. */
#ifndef WEFT_KERNELS_REDUCE_H_
#define WEFT_KERNELS_REDUCE_H_

#include <stddef.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = a[i] op b[i] for i < n. dst may be the same pointer as a or b (in place) but must not
 * partially overlap them. WEFT_AVG reduces as WEFT_SUM here (the division happens once, at the
 * end, via kern_reduce_avg_final). Integer sum and prod wrap; fp16/bf16 are computed in float and
 * rounded to nearest even at every call. min/max are `a < b ? a : b` and `a > b ? a : b`: with
 * a NaN in either operand the result is b (like SSE's minps/maxps). */
typedef void (*kern_reduce_fn)(void *dst, const void *a, const void *b, size_t n);

/* NULL when dtype or op is out of range. The widest instruction set's loop (kern_isa_best). */
kern_reduce_fn kern_reduce_lookup(weft_dtype_t dtype, weft_op_t op);

/* The instruction sets the loops are compiled for, narrowest first. Every one computes the same
 * bits (the same C, no FMA); they differ in vector width only. */
typedef enum {
  KERN_ISA_BASE, /* the architecture's baseline (SSE2 on x86-64) */
  KERN_ISA_AVX2, /* x86-64 with AVX2 and F16C (float16 converts in hardware) */
  KERN_NUM_ISAS,
} kern_isa_t;

/* The widest instruction set this build has loops for and this CPU runs (found once per process,
 * then a load: cheap enough for every lookup). */
kern_isa_t kern_isa_best(void);

/* "baseline", "avx2". */
const char *kern_isa_name(kern_isa_t isa);

/* The loop of one instruction set: NULL when dtype or op is out of range, or when this build or
 * this CPU has not got `isa` (tests compare every one against the baseline). */
kern_reduce_fn kern_reduce_lookup_isa(kern_isa_t isa, weft_dtype_t dtype, weft_op_t op);

/* dst[i] = (a[i] + b[i]) / nranks: the last step of an average. Floats: a true division; fp16/bf16
 * add and divide in float and round once at the end. Integers: the wrapping sum divided with C's
 * truncation toward zero, as include/weft.h documents. Same aliasing rules as kern_reduce_fn.
 * Requires nranks >= 1 and a valid dtype (callers validate at the API; an unknown dtype is a
 * no-op). */
void kern_reduce_avg_final(void *dst, const void *a, const void *b, size_t n, weft_dtype_t dtype,
                           int nranks);

/* dst[i] = src[i] / nranks, for world size 1 and other cases where no final add happens. dst may
 * equal src. Same requirements and rounding as kern_reduce_avg_final. */
void kern_scale_avg(void *dst, const void *src, size_t n, weft_dtype_t dtype, int nranks);

/* dst[i] = src[i] * *scalar for i < n: WEFT_PREMUL_SUM's scaling of a rank's input. `scalar` is
 * one element of dtype (any alignment). Integers wrap; fp16/bf16 multiply in float and round to
 * nearest even once. dst may equal src. An unknown dtype is a no-op (callers validate). */
void kern_premul(void *dst, const void *src, size_t n, weft_dtype_t dtype, const void *scalar);

/* Reduce-copy, for a fused ring step: a received slice is reduced with the local one and the result
 * written both into the next peer's transport slot and (on the last reduce-scatter step) into the
 * local output, in one pass over the inputs.
 *
 * dst[i] = dst2[i] = a[i] op b[i] for i < n: one read of each input, two writes. Every result is
 * bit for bit the one kern_reduce_lookup(dtype, op) gives (same wrapping, rounding and NaN rules;
 * the same loop body, see kernels/reduce.c), except the payload of a sum or product of two NaNs,
 * which is either input's (the compiler may swap a commutative instruction's operands). Aliasing:
 * dst is disjoint from a, b and dst2 (it is a transport slot; the loops declare it `restrict`).
 * dst2 may be exactly a or b (in place: the output buffer is the caller's input) but must not
 * partially overlap them. n == 0: no access. */
typedef void (*kern_reduce_copy_fn)(void *dst, void *dst2, const void *a, const void *b, size_t n);

/* NULL when dtype or op is out of range. WEFT_AVG adds, as in kern_reduce_lookup. */
kern_reduce_copy_fn kern_reduce_copy_lookup(weft_dtype_t dtype, weft_op_t op);

/* As kern_reduce_lookup_isa, for the reduce-copy loops. */
kern_reduce_copy_fn kern_reduce_copy_lookup_isa(kern_isa_t isa, weft_dtype_t dtype, weft_op_t op);

/* dst[i] = dst2[i] = (a[i] + b[i]) / nranks: kern_reduce_avg_final with a second destination, bit
 * for bit the same results and requirements (nranks >= 1; an unknown dtype is a no-op). Aliasing as
 * for kern_reduce_copy_fn. */
void kern_reduce_copy_avg_final(void *dst, void *dst2, const void *a, const void *b, size_t n,
                                weft_dtype_t dtype, int nranks);

/* dst[i] = dst2[i] = src[i] for `bytes` bytes (any count, any alignment): forward a slice and keep
 * it. dst is disjoint from src and dst2; dst2 may be exactly src. */
void kern_copy2(void *dst, void *dst2, const void *src, size_t bytes);

/* Checked wrapper around kern_reduce_lookup: WEFT_ERR_INVALID_ARGUMENT with a message naming the
 * bad dtype/op value, or a NULL buffer when n > 0. */
weft_result_t kern_reduce(void *dst, const void *a, const void *b, size_t n, weft_dtype_t dtype,
                          weft_op_t op);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_KERNELS_REDUCE_H_ */
