/* plan.h -- internal: how the CUDA kernels split a range into scalar head, 16-byte vector body and
 * scalar tail, and how big a grid they launch.
 *
 * Plain C with no CUDA in it: reduce_kernels.cu calls these on the host before every launch, and
 * tests/kernels/cuda_plan_test.cc checks them on the CPU, so the part of the kernels that decides
 * which element each thread touches is tested where there is no GPU. */
#ifndef WEFT_KERNELS_CUDA_PLAN_H_
#define WEFT_KERNELS_CUDA_PLAN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Widest access the kernels make: 16 bytes, one LDG.128/STG.128, the widest load a thread can
 * issue. Fewer, wider requests move the same bytes with a quarter of the instructions of 4-byte
 * accesses, which is what lets a 2-input reduction keep up with cudaMemcpy. */
#define KERN_CUDA_VEC_BYTES 16

/* Threads per block, and the blocks per multiprocessor the grid is bounded at. The kernels
 * declare the same pair in __launch_bounds__, so ptxas keeps them within 64 registers and the whole
 * grid is resident at once: one wave, no block waiting for another to finish (the grid-stride
 * loops give every block the same work, so a partial second wave would only add time). 1024
 * threads per SM with four 16-byte loads of each input in flight is 128 KiB or more per SM, far
 * above what it takes to cover DRAM latency at full bandwidth. */
#define KERN_CUDA_THREADS 256
#define KERN_CUDA_BLOCKS_PER_SM 4

/* Elements [0, head) and [head + nvec * vec_elems, n) are done one at a time; the nvec vectors in
 * between are vec_bytes wide and aligned to vec_bytes at every address. head + nvec * vec_elems +
 * tail == n. */
typedef struct {
  size_t head;
  size_t nvec;
  size_t vec_elems; /* elements per vector: vec_bytes / elem_size */
  size_t tail;
} kern_cuda_split_t;

/* Plans n elements of elem_size bytes that start at addrs[0..naddrs) (every input and output of
 * one kernel). vec_bytes is a power of two and a multiple of elem_size. The body is vectorized
 * only when every address has the same remainder modulo vec_bytes, a multiple of elem_size, since
 * one index then reaches a vector boundary in all of them at once; otherwise the whole range is the
 * head (head == n, nvec == 0). The head is as short as it can be (< vec_elems) and so is the tail.
 */
kern_cuda_split_t kern_cuda_plan_split(const uintptr_t *addrs, int naddrs, size_t elem_size,
                                       size_t n, size_t vec_bytes);

/* Threads a split needs: one per vector of the body, and one per scalar of the head and of the
 * tail, which the same threads do before and after the body. */
size_t kern_cuda_split_items(const kern_cuda_split_t *split);

/* The largest power of two <= max_bytes (itself a power of two) modulo which every address has the
 * same remainder: the widest word a copy between them can use. */
size_t kern_cuda_common_alignment(const uintptr_t *addrs, int naddrs, size_t max_bytes);

/* Launch geometry for `items` work items on a device with sm_count multiprocessors: threads per
 * block KERN_CUDA_THREADS, blocks enough for one item per thread but at most sm_count *
 * KERN_CUDA_BLOCKS_PER_SM (a grid-stride loop does the rest). blocks == 0 for items == 0: no
 * launch. sm_count <= 0 counts as 1. */
typedef struct {
  unsigned blocks;
  unsigned threads;
} kern_cuda_dims_t;

kern_cuda_dims_t kern_cuda_launch_dims(size_t items, int sm_count);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_KERNELS_CUDA_PLAN_H_ */
