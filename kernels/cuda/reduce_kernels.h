/* reduce_kernels.h -- internal: the device-side reductions and copies of a collective's steps, as C
 * calls that enqueue one kernel on a stream.
 *
 * No CUDA header is needed to include this: a stream is a cudaStream_t passed as `void *` (NULL is
 * the legacy default stream). Every call checks its arguments, launches nothing when the count is
 * 0, and returns once the kernel is enqueued; the result is ready when the stream says so.
 *
 * Pointers may be device memory or mapped pinned host memory (cudaHostAllocMapped, under UVA), in
 * any mix, on the current device. Each must be aligned to its element size; beyond that any
 * alignment works: the kernels use 16-byte loads and stores where all of a call's pointers share
 * their alignment modulo 16, and element-wise accesses elsewhere. An output may be exactly an
 * input (in place) but must not partially overlap one.
 *
 * Results equal the host kernels' (kernels/reduce.h) bit for bit: same wrapping integer arithmetic,
 * fp16/bf16/fp8 computed in float and rounded to nearest even once per call (fp8 saturating as
 * include/weft.h says), min/max as `a < b ? a : b`
 * and `a > b ? a : b` (a NaN in either operand gives b, with its bits). One exception: where the
 * result of a sum, product or average is a NaN, it is a NaN but its payload may differ, because
 * GPU arithmetic returns the canonical NaN where x86 propagates an operand's payload. fp8 has no
 * such exception: every NaN result is written as 0x7f (kernels/fp8.h).
 *
 * Errors: WEFT_ERR_INVALID_ARGUMENT (unknown dtype or op, NULL or misaligned pointer, nranks < 1);
 * WEFT_ERR_SYSTEM when the CUDA runtime fails, with a message naming the CUDA error (e.g.
 * "cudaErrorNoDevice"). A failure of an earlier asynchronous kernel on the device can surface here
 * too, as CUDA reports errors. */
#ifndef WEFT_KERNELS_CUDA_REDUCE_KERNELS_H_
#define WEFT_KERNELS_CUDA_REDUCE_KERNELS_H_

#include <stddef.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = local[i] op incoming[i] for i < n. When op is WEFT_AVG and avg_nranks > 0 this is the
 * last step of an average: (local[i] + incoming[i]) / avg_nranks, as kern_reduce_avg_final. With
 * avg_nranks == 0 WEFT_AVG reduces as WEFT_SUM (the intermediate steps, like kern_reduce_lookup);
 * other ops ignore avg_nranks. avg_nranks < 0 is an invalid argument. */
weft_result_t kern_cuda_reduce(void *dst, const void *local, const void *incoming, size_t n,
                               weft_dtype_t dtype, weft_op_t op, int avg_nranks, void *stream);

/* The same, writing the result to both dst and dst2 (the last reduce step of a ring: into the
 * buffer the next peer reads and into the output) in one pass. dst2 may be NULL: then only dst. */
weft_result_t kern_cuda_reduce_copy(void *dst, void *dst2, const void *local, const void *incoming,
                                    size_t n, weft_dtype_t dtype, weft_op_t op, int avg_nranks,
                                    void *stream);

/* dst[0..bytes) = src[0..bytes) (all-gather steps forward what they received). Uses the widest
 * word, up to 16 bytes, that both addresses share their alignment modulo; any alignment works. */
weft_result_t kern_cuda_copy(void *dst, const void *src, size_t bytes, void *stream);

/* dst[i] = src[i] / nranks, as kern_scale_avg (world size 1 and other averages with no final add).
 * dst may equal src. nranks >= 1. */
weft_result_t kern_cuda_scale_avg(void *dst, const void *src, size_t n, weft_dtype_t dtype,
                                  int nranks, void *stream);

/* dst[i] = src[i] * factor, as kern_premul (WEFT_PREMUL_SUM's scaling of a rank's input).
 * `scalar` points to the factor, one element of dtype in host memory, read before this returns
 * (it travels as a kernel argument). dst may equal src. */
weft_result_t kern_cuda_premul(void *dst, const void *src, size_t n, weft_dtype_t dtype,
                               const void *scalar, void *stream);

/* Loads every kernel above onto the current device now. Call it once per device before any
 * collective can hold a user stream: under lazy module loading a kernel's first launch waits for
 * the whole device, including a stream that weft holds until that very kernel has run. */
weft_result_t kern_cuda_load_all(void);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_KERNELS_CUDA_REDUCE_KERNELS_H_ */
