/* reduce_kernels.cu -- the device reductions and copies of reduce_kernels.h: one grid-stride kernel
 * per dtype x op, 16-byte vectors for the aligned body, element-wise head and tail.
 *
 * These kernels only move memory: two loads and one or two stores per element against a handful
 * of arithmetic instructions. What decides their speed is how many bytes each instruction moves
 * and how many loads are in flight, hence 16-byte accesses (LDG.E.128 / STG.E.128) and an unrolled
 * body that issues all of its loads before the first use. The arithmetic is chosen to reproduce the
 * host loops of kernels/reduce.c and kernels/avg.c exactly, since ranks may mix host and device
 * steps in one reduction and every rank must end with identical bits. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <type_traits>

#include "common/error.h"
#include "kernels/cuda/plan.h"
#include "kernels/cuda/reduce_elems.cuh"
#include "kernels/cuda/reduce_kernels.h"
#include "kernels/fp8.h"

namespace {

/* One 16-byte vector, element by element. The union is how CUDA code (NCCL's BytePack too)
 * reinterprets a register quad; it compiles to register moves, or byte extracts for 8-bit types. */
template <class D, int K>
__device__ __forceinline__ uint4 apply_vec(uint4 x, uint4 y, int nranks, typename D::Storage f) {
  using T = typename D::Storage;
  constexpr int kElems = KERN_CUDA_VEC_BYTES / sizeof(T);
  union Vec {
    uint4 v;
    T e[kElems];
  } vx, vy, vr;
  vx.v = x;
  vy.v = y;
#pragma unroll
  for (int k = 0; k < kElems; k++) vr.e[k] = apply<D, K>(vx.e[k], vy.e[k], nranks, f);
  return vr.v;
}

/* ---- Kernels ------------------------------------------------------------------------------ */

/* Vectors per thread per iteration of the body: 4 x (1 or 2 inputs) 16-byte loads in flight
 * before any arithmetic, which hides DRAM latency with the grid plan.h sizes. */
constexpr int kUnroll = 4;

struct ReduceArgs {
  char *dst;
  char *dst2;    /* second output, or unused */
  const char *a; /* local */
  const char *b; /* incoming, or unused for one input */
  size_t head, nvec, tail;
  int nranks;
  uint64_t factor; /* kPreMul: the factor's bits, in the low sizeof(T) bytes */
};

/* The head [0, head) and tail element-wise, the body as nvec aligned 16-byte vectors starting at
 * element `head` (kernels/cuda/plan.c decides the split). Every loop is grid-stride, so any grid
 * covers every element exactly once. dst may be a (in place): each element is read before it is
 * written, by the same thread, and no pointer is declared __restrict__. */
template <class D, int K, int kInputs, bool kTwoOut>
__global__ void __launch_bounds__(KERN_CUDA_THREADS, KERN_CUDA_BLOCKS_PER_SM)
    reduce_kernel(ReduceArgs p) {
  using T = typename D::Storage;
  constexpr size_t kElems = KERN_CUDA_VEC_BYTES / sizeof(T);
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  T *dst = (T *)p.dst;
  T *dst2 = (T *)p.dst2;
  const T *a = (const T *)p.a;
  const T *b = (const T *)p.b;
  T f;
  memcpy(&f, &p.factor, sizeof f);

  auto scalar = [&](size_t i) {
    T r = apply<D, K>(a[i], kInputs == 2 ? b[i] : T(), p.nranks, f);
    dst[i] = r;
    if (kTwoOut) dst2[i] = r;
  };
  for (size_t i = tid; i < p.head; i += stride) scalar(i);

  uint4 *vd = (uint4 *)(dst + p.head);
  uint4 *vd2 = (uint4 *)(dst2 + p.head);
  const uint4 *va = (const uint4 *)(a + p.head);
  const uint4 *vb = (const uint4 *)(b + p.head);
  size_t i = tid;
  for (; i + (kUnroll - 1) * stride < p.nvec; i += kUnroll * stride) {
    uint4 x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      x[u] = va[i + u * stride];
      if (kInputs == 2) y[u] = vb[i + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      uint4 r = apply_vec<D, K>(x[u], kInputs == 2 ? y[u] : x[u], p.nranks, f);
      vd[i + u * stride] = r;
      if (kTwoOut) vd2[i + u * stride] = r;
    }
  }
  for (; i < p.nvec; i += stride) {
    uint4 r = apply_vec<D, K>(va[i], kInputs == 2 ? vb[i] : uint4(), p.nranks, f);
    vd[i] = r;
    if (kTwoOut) vd2[i] = r;
  }

  const size_t t0 = p.head + p.nvec * kElems;
  for (size_t j = tid; j < p.tail; j += stride) scalar(t0 + j);
}

/* Byte copy with words of W in the body: the plan's head and tail are in bytes. */
template <typename W>
__global__ void __launch_bounds__(KERN_CUDA_THREADS, KERN_CUDA_BLOCKS_PER_SM)
    copy_kernel(char *dst, const char *src, size_t head, size_t nvec, size_t tail) {
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = tid; i < head; i += stride) dst[i] = src[i];
  W *vd = (W *)(dst + head);
  const W *vs = (const W *)(src + head);
  size_t i = tid;
  for (; i + (kUnroll - 1) * stride < nvec; i += kUnroll * stride) {
    W w[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) w[u] = vs[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) vd[i + u * stride] = w[u];
  }
  for (; i < nvec; i += stride) vd[i] = vs[i];
  const size_t t0 = head + nvec * sizeof(W);
  for (size_t j = tid; j < tail; j += stride) dst[t0 + j] = src[t0 + j];
}

/* ---- Host side ---------------------------------------------------------------------------- */

const char *const kDtypeNames[WEFT_NUM_DTYPES] = {
    "int8",    "uint8",   "int32",       "uint32",     "int64",  "uint64", "float16",
    "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2"};
const char *const kOpNames[WEFT_NUM_OPS] = {"sum", "prod", "min", "max", "avg"};
const size_t kDtypeSizes[WEFT_NUM_DTYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};

weft_result_t cuda_fail(const char *what, cudaError_t err) {
  return WEFT_ERR(WEFT_ERR_SYSTEM, "%s: %s (%s)", what, cudaGetErrorName(err),
                  cudaGetErrorString(err));
}

/* Multiprocessors of the current device, cached per device: the grid is sized from it on every
 * call, and the answer never changes for the life of the process. */
constexpr int kMaxDevices = 64;
std::atomic<int> sm_cache[kMaxDevices];

cudaError_t current_sm_count(int *sms) {
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev >= 0 && dev < kMaxDevices) {
    *sms = sm_cache[dev].load(std::memory_order_relaxed);
    if (*sms > 0) return cudaSuccess;
  }
  err = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  if (dev >= 0 && dev < kMaxDevices) sm_cache[dev].store(*sms, std::memory_order_relaxed);
  return cudaSuccess;
}

/* Runs fn(D()) for the dtype's struct: one switch that turns the runtime dtype into a type. */
template <class Fn>
cudaError_t with_dtype(weft_dtype_t dtype, Fn &&fn) {
  switch (dtype) {
    case WEFT_INT8:
      return fn(IntType<int8_t, uint32_t>());
    case WEFT_UINT8:
      return fn(IntType<uint8_t, uint32_t>());
    case WEFT_INT32:
      return fn(IntType<int32_t, uint32_t>());
    case WEFT_UINT32:
      return fn(IntType<uint32_t, uint32_t>());
    case WEFT_INT64:
      return fn(IntType<int64_t, uint64_t>());
    case WEFT_UINT64:
      return fn(IntType<uint64_t, uint64_t>());
    case WEFT_FLOAT16:
      return fn(SmallFloatType<Half>());
    case WEFT_BFLOAT16:
      return fn(SmallFloatType<Bf16>());
    case WEFT_FLOAT32:
      return fn(FloatType<float>());
    case WEFT_FLOAT64:
      return fn(FloatType<double>());
    case WEFT_FLOAT8_E4M3:
      return fn(SmallFloatType<E4m3>());
    case WEFT_FLOAT8_E5M2:
      return fn(SmallFloatType<E5m2>());
    default:
      return cudaErrorInvalidValue; /* validated by the callers */
  }
}

template <int K>
using KindC = std::integral_constant<int, K>;

template <class Fn>
cudaError_t with_kind(int kind, Fn &&fn) {
  switch (kind) {
    case kSum:
      return fn(KindC<kSum>());
    case kProd:
      return fn(KindC<kProd>());
    case kMin:
      return fn(KindC<kMin>());
    case kMax:
      return fn(KindC<kMax>());
    case kAvgFinal:
      return fn(KindC<kAvgFinal>());
    case kPreMul:
      return fn(KindC<kPreMul>());
    default:
      return fn(KindC<kScale>());
  }
}

template <class D, int K, int kInputs, bool kTwoOut>
cudaError_t launch_reduce(ReduceArgs p, size_t n, cudaStream_t stream) {
  using T = typename D::Storage;
  uintptr_t addrs[4];
  int naddrs = 0;
  addrs[naddrs++] = (uintptr_t)p.dst;
  if (kTwoOut) addrs[naddrs++] = (uintptr_t)p.dst2;
  addrs[naddrs++] = (uintptr_t)p.a;
  if (kInputs == 2) addrs[naddrs++] = (uintptr_t)p.b;
  kern_cuda_split_t split = kern_cuda_plan_split(addrs, naddrs, sizeof(T), n, KERN_CUDA_VEC_BYTES);
  p.head = split.head;
  p.nvec = split.nvec;
  p.tail = split.tail;
  int sms = 0;
  cudaError_t err = current_sm_count(&sms);
  if (err != cudaSuccess) return err;
  kern_cuda_dims_t dims = kern_cuda_launch_dims(kern_cuda_split_items(&split), sms);
  reduce_kernel<D, K, kInputs, kTwoOut><<<dims.blocks, dims.threads, 0, stream>>>(p);
  return cudaGetLastError();
}

int misaligned(const void *p, size_t align) { return p != NULL && (uintptr_t)p % align != 0; }

/* Checks shared by the reductions; n == 0 needs no pointers. */
weft_result_t check_args(const char *what, weft_dtype_t dtype, weft_op_t op, size_t n,
                         const void *const *ptrs, int nptrs) {
  if ((unsigned)dtype >= WEFT_NUM_DTYPES) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: unknown dtype %d (valid: 0..%d)", what,
                    (int)dtype, WEFT_NUM_DTYPES - 1);
  }
  if ((unsigned)op >= WEFT_NUM_OPS) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: unknown op %d (valid: 0..%d)", what, (int)op,
                    WEFT_NUM_OPS - 1);
  }
  if (n == 0) return WEFT_SUCCESS;
  for (int i = 0; i < nptrs; i++) {
    if (ptrs[i] == NULL) {
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: NULL buffer for %zu elements of %s", what, n,
                      kDtypeNames[dtype]);
    }
    if (misaligned(ptrs[i], kDtypeSizes[dtype])) {
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "%s: buffer %p is not aligned to %zu bytes, the size of %s", what, ptrs[i],
                      kDtypeSizes[dtype], kDtypeNames[dtype]);
    }
  }
  return WEFT_SUCCESS;
}

weft_result_t reduce_common(const char *what, void *dst, void *dst2, const void *local,
                            const void *incoming, size_t n, weft_dtype_t dtype, weft_op_t op,
                            int avg_nranks, void *stream) {
  const void *ptrs[3] = {dst, local, incoming};
  weft_result_t res = check_args(what, dtype, op, n, ptrs, 3);
  if (res != WEFT_SUCCESS) return res;
  if (avg_nranks < 0) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: avg_nranks %d < 0", what, avg_nranks);
  }
  if (misaligned(dst2, kDtypeSizes[dtype])) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s: second output %p is not aligned to %zu bytes, the size of %s", what, dst2,
                    kDtypeSizes[dtype], kDtypeNames[dtype]);
  }
  if (n == 0) return WEFT_SUCCESS;
  int kind = op == WEFT_SUM || op == WEFT_AVG ? kSum
             : op == WEFT_PROD                ? kProd
             : op == WEFT_MIN                 ? kMin
                                              : kMax;
  if (op == WEFT_AVG && avg_nranks > 0) kind = kAvgFinal;
  ReduceArgs p = {(char *)dst, (char *)dst2, (const char *)local, (const char *)incoming, 0, 0,
                  0,           avg_nranks,   0};
  cudaStream_t s = (cudaStream_t)stream;
  bool two_out = dst2 != NULL;
  cudaError_t err = with_dtype(dtype, [&](auto d) {
    using D = decltype(d);
    return with_kind(kind, [&](auto k) {
      constexpr int K = decltype(k)::value;
      if constexpr (K == kScale || K == kPreMul) {
        return cudaErrorInvalidValue; /* not reachable: kind is never kScale or kPreMul here */
      } else {
        return two_out ? launch_reduce<D, K, 2, true>(p, n, s)
                       : launch_reduce<D, K, 2, false>(p, n, s);
      }
    });
  });
  if (err != cudaSuccess) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s (%s %s, %zu elements)", what, kDtypeNames[dtype], kOpNames[op],
             n);
    return cuda_fail(msg, err);
  }
  return WEFT_SUCCESS;
}

template <typename W>
cudaError_t launch_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  uintptr_t addrs[2] = {(uintptr_t)dst, (uintptr_t)src};
  kern_cuda_split_t split = kern_cuda_plan_split(addrs, 2, 1, bytes, sizeof(W));
  int sms = 0;
  cudaError_t err = current_sm_count(&sms);
  if (err != cudaSuccess) return err;
  kern_cuda_dims_t dims = kern_cuda_launch_dims(kern_cuda_split_items(&split), sms);
  copy_kernel<W><<<dims.blocks, dims.threads, 0, stream>>>((char *)dst, (const char *)src,
                                                           split.head, split.nvec, split.tail);
  return cudaGetLastError();
}

/* Asking for a kernel's attributes loads it: with lazy loading (CUDA_MODULE_LOADING=LAZY, the
 * default since CUDA 12.2) a kernel is otherwise loaded at its first launch, and loading waits
 * for the whole device, so a first launch behind a user stream that weft's gate holds never
 * returns. */
template <class D, int K, int kInputs, bool kTwoOut>
cudaError_t load_reduce() {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, reduce_kernel<D, K, kInputs, kTwoOut>);
}

template <typename W>
cudaError_t load_copy() {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, copy_kernel<W>);
}

/* Every reduce kernel of one dtype: each kind with one output and with two, the scale and the
 * premul. */
template <class D>
cudaError_t load_dtype() {
  cudaError_t err = load_reduce<D, kScale, 1, false>();
  if (err == cudaSuccess) err = load_reduce<D, kPreMul, 1, false>();
  for (int kind = kSum; kind < kScale && err == cudaSuccess; kind++)
    err = with_kind(kind, [](auto k) {
      constexpr int K = decltype(k)::value;
      if constexpr (K == kScale || K == kPreMul) {
        return cudaSuccess; /* loaded above, with their one input */
      } else {
        cudaError_t e = load_reduce<D, K, 2, false>();
        return e != cudaSuccess ? e : load_reduce<D, K, 2, true>();
      }
    });
  return err;
}

}  // namespace

extern "C" weft_result_t kern_cuda_reduce(void *dst, const void *local, const void *incoming,
                                          size_t n, weft_dtype_t dtype, weft_op_t op,
                                          int avg_nranks, void *stream) {
  return reduce_common("cuda reduce", dst, NULL, local, incoming, n, dtype, op, avg_nranks, stream);
}

extern "C" weft_result_t kern_cuda_reduce_copy(void *dst, void *dst2, const void *local,
                                               const void *incoming, size_t n, weft_dtype_t dtype,
                                               weft_op_t op, int avg_nranks, void *stream) {
  return reduce_common("cuda reduce_copy", dst, dst2, local, incoming, n, dtype, op, avg_nranks,
                       stream);
}

extern "C" weft_result_t kern_cuda_copy(void *dst, const void *src, size_t bytes, void *stream) {
  if (bytes == 0) return WEFT_SUCCESS;
  if (dst == NULL || src == NULL) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "cuda copy: NULL buffer for %zu bytes", bytes);
  }
  uintptr_t addrs[2] = {(uintptr_t)dst, (uintptr_t)src};
  cudaStream_t s = (cudaStream_t)stream;
  cudaError_t err;
  switch (kern_cuda_common_alignment(addrs, 2, KERN_CUDA_VEC_BYTES)) {
    case 16:
      err = launch_copy<uint4>(dst, src, bytes, s);
      break;
    case 8:
      err = launch_copy<uint2>(dst, src, bytes, s);
      break;
    case 4:
      err = launch_copy<uint32_t>(dst, src, bytes, s);
      break;
    case 2:
      err = launch_copy<uint16_t>(dst, src, bytes, s);
      break;
    default:
      err = launch_copy<uint8_t>(dst, src, bytes, s);
      break;
  }
  if (err != cudaSuccess) {
    char msg[96];
    snprintf(msg, sizeof msg, "cuda copy (%zu bytes)", bytes);
    return cuda_fail(msg, err);
  }
  return WEFT_SUCCESS;
}

extern "C" weft_result_t kern_cuda_scale_avg(void *dst, const void *src, size_t n,
                                             weft_dtype_t dtype, int nranks, void *stream) {
  const void *ptrs[2] = {dst, src};
  weft_result_t res = check_args("cuda scale_avg", dtype, WEFT_AVG, n, ptrs, 2);
  if (res != WEFT_SUCCESS) return res;
  if (nranks < 1) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "cuda scale_avg: nranks %d < 1", nranks);
  }
  if (n == 0) return WEFT_SUCCESS;
  ReduceArgs p = {(char *)dst, NULL, (const char *)src, NULL, 0, 0, 0, nranks, 0};
  cudaError_t err = with_dtype(dtype, [&](auto d) {
    return launch_reduce<decltype(d), kScale, 1, false>(p, n, (cudaStream_t)stream);
  });
  if (err != cudaSuccess) {
    char msg[96];
    snprintf(msg, sizeof msg, "cuda scale_avg (%s, %zu elements)", kDtypeNames[dtype], n);
    return cuda_fail(msg, err);
  }
  return WEFT_SUCCESS;
}

extern "C" weft_result_t kern_cuda_premul(void *dst, const void *src, size_t n,
                                          weft_dtype_t dtype, const void *scalar, void *stream) {
  const void *ptrs[2] = {dst, src};
  weft_result_t res = check_args("cuda premul", dtype, WEFT_SUM, n, ptrs, 2);
  if (res != WEFT_SUCCESS) return res;
  if (n == 0) return WEFT_SUCCESS;
  if (scalar == NULL)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "cuda premul: the factor is NULL");
  ReduceArgs p = {(char *)dst, NULL, (const char *)src, NULL, 0, 0, 0, 1, 0};
  memcpy(&p.factor, scalar, kDtypeSizes[dtype]);
  cudaError_t err = with_dtype(dtype, [&](auto d) {
    return launch_reduce<decltype(d), kPreMul, 1, false>(p, n, (cudaStream_t)stream);
  });
  if (err != cudaSuccess) {
    char msg[96];
    snprintf(msg, sizeof msg, "cuda premul (%s, %zu elements)", kDtypeNames[dtype], n);
    return cuda_fail(msg, err);
  }
  return WEFT_SUCCESS;
}

extern "C" weft_result_t kern_cuda_load_all(void) {
  cudaError_t err = cudaSuccess;
  for (int d = 0; d < WEFT_NUM_DTYPES && err == cudaSuccess; d++)
    err = with_dtype((weft_dtype_t)d, [](auto dt) { return load_dtype<decltype(dt)>(); });
  if (err == cudaSuccess) err = load_copy<uint4>();
  if (err == cudaSuccess) err = load_copy<uint2>();
  if (err == cudaSuccess) err = load_copy<uint32_t>();
  if (err == cudaSuccess) err = load_copy<uint16_t>();
  if (err == cudaSuccess) err = load_copy<uint8_t>();
  if (err != cudaSuccess) return cuda_fail("loading the reduce and copy kernels", err);
  return WEFT_SUCCESS;
}
