/* plan.c -- head/body/tail split and launch geometry of the CUDA kernels (see plan.h). */
#include "kernels/cuda/plan.h"

kern_cuda_split_t kern_cuda_plan_split(const uintptr_t *addrs, int naddrs, size_t elem_size,
                                       size_t n, size_t vec_bytes) {
  kern_cuda_split_t s = {n, 0, vec_bytes / elem_size, 0};
  size_t rem = naddrs > 0 ? (size_t)(addrs[0] % vec_bytes) : 0;
  for (int i = 1; i < naddrs; i++) {
    if ((size_t)(addrs[i] % vec_bytes) != rem) return s; /* no index aligns them all */
  }
  if (rem % elem_size != 0) return s; /* misaligned elements never reach a vector boundary */
  size_t head = ((vec_bytes - rem) % vec_bytes) / elem_size;
  if (head >= n) return s;
  s.head = head;
  s.nvec = (n - head) / s.vec_elems;
  s.tail = n - head - s.nvec * s.vec_elems;
  return s;
}

size_t kern_cuda_split_items(const kern_cuda_split_t *split) {
  size_t items = split->nvec;
  if (split->head > items) items = split->head;
  if (split->tail > items) items = split->tail;
  return items;
}

size_t kern_cuda_common_alignment(const uintptr_t *addrs, int naddrs, size_t max_bytes) {
  size_t width = max_bytes;
  /* Two addresses agree modulo 2^k exactly when their difference has k trailing zero bits. */
  for (int i = 1; i < naddrs; i++) {
    uintptr_t diff = addrs[i] - addrs[0];
    while (width > 1 && diff % width != 0) width /= 2;
  }
  return width;
}

kern_cuda_dims_t kern_cuda_launch_dims(size_t items, int sm_count) {
  kern_cuda_dims_t d = {0, KERN_CUDA_THREADS};
  if (items == 0) return d;
  size_t max_blocks = (size_t)(sm_count > 0 ? sm_count : 1) * KERN_CUDA_BLOCKS_PER_SM;
  size_t blocks = (items + KERN_CUDA_THREADS - 1) / KERN_CUDA_THREADS;
  if (blocks > max_blocks) blocks = max_blocks;
  if (blocks > 0x7fffffff) blocks = 0x7fffffff; /* gridDim.x's limit */
  d.blocks = (unsigned)blocks;
  return d;
}
