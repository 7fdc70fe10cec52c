/* reduce.h -- internal: host reduction loops (one per dtype x op) and the final step of WEFT_AVG.
 */
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

/* NULL when dtype or op is out of range. */
kern_reduce_fn kern_reduce_lookup(weft_dtype_t dtype, weft_op_t op);

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

/* Checked wrapper around kern_reduce_lookup: WEFT_ERR_INVALID_ARGUMENT with a message naming the
 * bad dtype/op value, or a NULL buffer when n > 0. */
weft_result_t kern_reduce(void *dst, const void *a, const void *b, size_t n, weft_dtype_t dtype,
                          weft_op_t op);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_KERNELS_REDUCE_H_ */
