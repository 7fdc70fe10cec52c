/* devloop_kernel.cu -- the device-resident step loop (kernels/devloop_steps.h) compiled by nvcc:
 * the DL_* macros for the device, and the kernel that runs one program in one thread block.
 *
 * Who does what. devloop_steps.h calls its element macros (DL_COPY, DL_REDUCE, ...) from inside the
 * control flow, one slice at a time, between the counter checks and the counter stores. Here
 * thread 0 alone runs that control flow (dl_validate, dl_loop: every counter load and store, the
 * timeout and the abort word). Each element macro, in thread 0, writes a work item to shared memory
 * and meets the other threads at a block barrier; all threads then do the item with a strided
 * element loop and meet again, and only then does thread 0 go on to the release store that
 * publishes the slot. The other threads do nothing but wait at the barrier for the next item, until
 * thread 0 hands them an exit item. The barrier is PTX's non-aligned `barrier.sync`, which may be
 * reached from different places in the code (thread 0 inside the loop, the others in their own
 * loop), unlike __syncthreads(); see block_barrier. Copies (DL_COPY, DL_COPY2) get no element
 * context from devloop_steps.h: block_work takes a NULL env for them.
 *
 * Limits: one block, so one SM's worth of bandwidth per run (one channel); the element loops go
 * element by element (reduce_kernels.cu's 16-byte body is not reused); thread 0 re-reads the steps
 * from device memory at every pass. Unverified on hardware: device/cuda_engine.c launches it only
 * with WEFT_CUDA_DEVICE_LOOP=1 (README). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda/atomic>

#include "common/error.h"
#include "kernels/cuda/devloop_kernel.h"
#include "kernels/cuda/reduce_elems.cuh"
#include "kernels/devloop.h"

namespace {

constexpr int kThreads = 256;

/* ---- One slice's element work, done by every thread of the block ---------------------------- */

enum WorkKind { kWorkExit, kWorkCopy, kWorkReduce, kWorkAvgFinal };

/* n is bytes for kWorkCopy, elements otherwise; dst2 may be NULL. */
struct Work {
  int kind;
  int dtype, op, nranks;
  char *dst;
  char *dst2;
  const char *a;
  const char *b;
  uint64_t n;
};

/* Written by thread 0 only, between two barriers; read by every thread between the next two. */
__shared__ Work g_work;

/* The element context devloop_steps.h passes to the element macros as `env`. */
struct DevEnv {
  int dtype, op, nranks;
};

/* A barrier of the whole block that may be reached from different places in the code: PTX's
 * `barrier.sync` without .aligned (bar.sync, which __syncthreads() emits, is barrier.sync.aligned
 * and requires every thread of a warp to execute the same instruction; here thread 0 of warp 0
 * calls it from inside the loop while lanes 1-31 call it from the workers' loop). Barrier 1, so it
 * never meets a __syncthreads(). Ordering: the barrier orders every memory access a thread made
 * before it before the accesses any participating thread makes after it (CTA scope), which is
 * what carries thread 0's acquire of a tail to the other threads' reads of the slot, and their
 * writes of a slot to thread 0's release of the tail (PTX memory model: causality order is
 * transitive, and a release is cumulative over what its thread has observed). */
__device__ __forceinline__ void block_barrier() { asm volatile("barrier.sync 1;" ::: "memory"); }

/* The widest word, up to 16 bytes, that every address and the length are a multiple of. */
__device__ __forceinline__ int copy_width(const Work &w) {
  uintptr_t all = (uintptr_t)w.dst | (uintptr_t)w.dst2 | (uintptr_t)w.a | (uintptr_t)w.n;
  if (all % 16 == 0) return 16;
  if (all % 8 == 0) return 8;
  if (all % 4 == 0) return 4;
  return 1;
}

template <typename W>
__device__ __forceinline__ void copy_words(const Work &w, int tid, int nt) {
  W *d = (W *)w.dst, *d2 = (W *)w.dst2;
  const W *s = (const W *)w.a;
  uint64_t n = w.n / sizeof(W);
  for (uint64_t i = tid; i < n; i += nt) {
    W v = s[i];
    d[i] = v;
    if (d2) d2[i] = v;
  }
}

__device__ void do_copy(const Work &w, int tid, int nt) {
  switch (copy_width(w)) {
    case 16:
      copy_words<uint4>(w, tid, nt);
      break;
    case 8:
      copy_words<uint2>(w, tid, nt);
      break;
    case 4:
      copy_words<uint32_t>(w, tid, nt);
      break;
    default:
      copy_words<uint8_t>(w, tid, nt);
      break;
  }
}

/* dst[i] (and dst2[i]) = a[i] op b[i]. dst or dst2 may be exactly a: each element is read before
 * it is written, by the same thread. */
template <class D, int K>
__device__ void reduce_elems(const Work &w, int tid, int nt) {
  using T = typename D::Storage;
  T *dst = (T *)w.dst, *dst2 = (T *)w.dst2;
  const T *a = (const T *)w.a, *b = (const T *)w.b;
  for (uint64_t i = tid; i < w.n; i += nt) {
    T r = apply<D, K>(a[i], b[i], w.nranks, T());
    dst[i] = r;
    if (dst2) dst2[i] = r;
  }
}

/* The op as reduce_elems' kind: WEFT_AVG sums until its final step. */
template <class D>
__device__ void reduce_dtype(const Work &w, int tid, int nt) {
  if (w.kind == kWorkAvgFinal) return reduce_elems<D, kAvgFinal>(w, tid, nt);
  switch (w.op) {
    case WEFT_PROD:
      return reduce_elems<D, kProd>(w, tid, nt);
    case WEFT_MIN:
      return reduce_elems<D, kMin>(w, tid, nt);
    case WEFT_MAX:
      return reduce_elems<D, kMax>(w, tid, nt);
    default: /* WEFT_SUM, WEFT_AVG (dl_validate checked the op) */
      return reduce_elems<D, kSum>(w, tid, nt);
  }
}

/* The same dtype -> struct table as reduce_kernels.cu's with_dtype, on the device. */
__device__ void do_reduce(const Work &w, int tid, int nt) {
  switch (w.dtype) {
    case WEFT_INT8:
      return reduce_dtype<IntType<int8_t, uint32_t>>(w, tid, nt);
    case WEFT_UINT8:
      return reduce_dtype<IntType<uint8_t, uint32_t>>(w, tid, nt);
    case WEFT_INT32:
      return reduce_dtype<IntType<int32_t, uint32_t>>(w, tid, nt);
    case WEFT_UINT32:
      return reduce_dtype<IntType<uint32_t, uint32_t>>(w, tid, nt);
    case WEFT_INT64:
      return reduce_dtype<IntType<int64_t, uint64_t>>(w, tid, nt);
    case WEFT_UINT64:
      return reduce_dtype<IntType<uint64_t, uint64_t>>(w, tid, nt);
    case WEFT_FLOAT16:
      return reduce_dtype<SmallFloatType<Half>>(w, tid, nt);
    case WEFT_BFLOAT16:
      return reduce_dtype<SmallFloatType<Bf16>>(w, tid, nt);
    case WEFT_FLOAT32:
      return reduce_dtype<FloatType<float>>(w, tid, nt);
    case WEFT_FLOAT64:
      return reduce_dtype<FloatType<double>>(w, tid, nt);
    case WEFT_FLOAT8_E4M3:
      return reduce_dtype<SmallFloatType<E4m3>>(w, tid, nt);
    case WEFT_FLOAT8_E5M2:
      return reduce_dtype<SmallFloatType<E5m2>>(w, tid, nt);
    default: /* dl_validate refused it */
      return;
  }
}

__device__ void do_work(const Work &w, int tid, int nt) {
  if (w.kind == kWorkCopy)
    do_copy(w, tid, nt);
  else
    do_reduce(w, tid, nt);
}

/* Thread 0, from inside the loop: hands one slice's work to the block and does its share. Returns
 * once every thread has finished it, so that the loop's next store (the tail that publishes the
 * slot, the head that frees it) comes after all of the block's accesses to the slot. */
__device__ void block_work(const DevEnv *env, int kind, void *dst, void *dst2, const void *a,
                           const void *b, uint64_t n) {
  Work w;
  w.kind = kind;
  w.dtype = env ? env->dtype : 0; /* copies have no element context */
  w.op = env ? env->op : 0;
  w.nranks = env ? env->nranks : 1;
  w.dst = (char *)dst;
  w.dst2 = (char *)dst2;
  w.a = (const char *)a;
  w.b = (const char *)b;
  w.n = n;
  g_work = w;
  block_barrier(); /* the item is in shared memory: everyone starts */
  do_work(w, 0, blockDim.x);
  block_barrier(); /* everyone is done with the slot */
}

/* ---- The counters: system-scope atomics ------------------------------------------------------
 *
 * Why system scope and not .gpu: the other end of a link is another process's kernel on another
 * GPU (transport/cuda_ipc.c maps the receiver's slots and counters into the sender over CUDA IPC,
 * across NVLink or PCIe). .gpu scope only orders accesses among threads of one GPU; threads of two
 * GPUs share no scope below .sys, so an acquire/release pair at .gpu scope between them is not
 * morally strong and orders nothing. The abort word and the status are in host memory that the
 * CPU reads and writes: .sys again. */

/* Acquire: pairs with the peer's release store of the counter (devloop_steps.h says which). */
__device__ __forceinline__ uint64_t ld_acquire_sys(uint64_t *p) {
  return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).load(cuda::memory_order_acquire);
}

/* Relaxed, but still a strong (atomic) access at system scope, so that a value written by the
 * host or a peer is eventually seen and never torn; used for this end's own counter at the start
 * and for the abort word, which carries no data (devloop_steps.h). volatile and const are cast
 * away for atomic_ref only: the access itself is atomic. */
template <typename T>
__device__ __forceinline__ T ld_relaxed_sys(const volatile T *p) {
  return cuda::atomic_ref<T, cuda::thread_scope_system>(*const_cast<T *>(p))
      .load(cuda::memory_order_relaxed);
}

/* Release: every write this thread made, or observed through the block barrier (the block's
 * writes of the slot), becomes visible to the peer before the counter does. */
__device__ __forceinline__ void st_release_sys(uint64_t *p, uint64_t v) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_release);
}

/* %globaltimer: nanoseconds, the same on every SM (its resolution is coarser, about a microsecond,
 * which is plenty for a timeout). */
__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace

#define DL_FN static __device__
#define DL_LOAD_ACQUIRE(p) ld_acquire_sys(p)
#define DL_LOAD_RELAXED(p) ld_relaxed_sys(p)
#define DL_STORE_RELEASE(p, v) st_release_sys((p), (v))
/* A pass moved nothing: back off briefly so that the polling thread does not flood the memory
 * system with loads of a counter that lives across NVLink or PCIe. */
#define DL_SPIN() __nanosleep(100)
#define DL_NOW_NS() now_ns()
#define DL_COPY(dst, src, bytes) \
  block_work((const DevEnv *)0, kWorkCopy, (dst), (void *)0, (src), (void *)0, (bytes))
#define DL_COPY2(dst, dst2, src, bytes) \
  block_work((const DevEnv *)0, kWorkCopy, (dst), (dst2), (src), (void *)0, (bytes))
#define DL_REDUCE(env, dst, a, b, n) \
  block_work((const DevEnv *)(env), kWorkReduce, (dst), (void *)0, (a), (b), (n))
#define DL_REDUCE_COPY(env, dst, dst2, a, b, n) \
  block_work((const DevEnv *)(env), kWorkReduce, (dst), (dst2), (a), (b), (n))
#define DL_AVG_FINAL(env, dst, dst2, a, b, n) \
  block_work((const DevEnv *)(env), kWorkAvgFinal, (dst), (dst2), (a), (b), (n))

#include "kernels/devloop_steps.h"

namespace {

/* One run, one block of kThreads. Thread 0 validates and runs the loop; the others serve its
 * element work until it hands them kWorkExit. Thread 0 then writes the status. */
__global__ void __launch_bounds__(kThreads, 1)
    dl_kernel(dl_run_t run, uint64_t *moved, dl_status_t *status) {
  if (threadIdx.x != 0) {
    for (;;) {
      block_barrier(); /* thread 0 has written an item */
      Work w = g_work;
      if (w.kind == kWorkExit) return;
      do_work(w, threadIdx.x, blockDim.x);
      block_barrier(); /* done with it */
    }
  }
  dl_status_t st = dl_validate(&run);
  if (st.code == DL_DONE) {
    const dp_program_t *p = run.prog;
    for (int i = 0; i < p->nsteps; i++) moved[i] = 0;
    DevEnv env = {(int)p->dtype, (int)p->op, p->nranks};
    st = dl_loop(&run, &env, moved);
  }
  g_work.kind = kWorkExit;
  block_barrier(); /* the others leave */
  /* The status in mapped pinned host memory: the fields first, the code last with release at
   * system scope, so a host thread that reads the code with acquire sees the rest (the engine
   * reads it only after the stream has passed the kernel, which orders everything anyway). */
  status->step = st.step;
  status->link = st.link;
  status->waiting_for = st.waiting_for;
  status->round = st.round;
  cuda::atomic_ref<int, cuda::thread_scope_system>(status->code)
      .store(st.code, cuda::memory_order_release);
}

weft_result_t cuda_fail(const char *what, cudaError_t err) {
  return WEFT_ERR(WEFT_ERR_SYSTEM, "%s: %s (%s)", what, cudaGetErrorName(err),
                  cudaGetErrorString(err));
}

}  // namespace

extern "C" weft_result_t kern_cuda_devloop_launch(const dl_run_t *run, uint64_t *moved,
                                                  dl_status_t *status, void *stream) {
  if (!run || !status || (run->prog && !moved))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "cuda devloop: launch with a NULL run, status or per-step counts");
  dl_kernel<<<1, kThreads, 0, (cudaStream_t)stream>>>(*run, moved, status);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_fail("cuda devloop: launching the device-resident loop", err);
  return WEFT_SUCCESS;
}

extern "C" weft_result_t kern_cuda_devloop_load(void) {
  cudaFuncAttributes attr;
  cudaError_t err = cudaFuncGetAttributes(&attr, dl_kernel);
  if (err != cudaSuccess) return cuda_fail("cuda devloop: loading the device-resident loop", err);
  return WEFT_SUCCESS;
}
