/* main.c -- kernel_bw: memory bandwidth of weft's CUDA reduction kernels next to cudaMemcpy.
 *
 * A ring all-reduce step on a GPU reads the local chunk and the received chunk and writes the sum:
 * it is bound by memory bandwidth, and the best it can do is move its bytes as fast as the device
 * copies memory. So each kernel is timed on device buffers against a device-to-device cudaMemcpy
 * in the same run, and the table gives the ratio of the two bandwidths. The goal for the fused
 * 2-input reduce is at least 0.90 from 64 MiB up; the last line says whether this run met it.
 *
 * Without a CUDA device it says so and exits 0: there is nothing to measure, which is not an
 * error of the tool. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "kernels/cuda/reduce_kernels.h"
#include "tools/bench/types.h"
#include "tools/kernel_bw/opts.h"

static const char *const kernel_names[KBW_NUM_KERNELS] = {"memcpy", "reduce", "reduce_copy",
                                                          "copy"};

typedef struct {
  void *a, *b, *dst, *dst2;
  cudaStream_t stream;
  cudaEvent_t *start, *stop; /* one pair per timed launch */
  double *us;
} bench_t;

static int cuda_failed(const char *what, cudaError_t err) {
  fprintf(stderr, "kernel_bw: %s: %s (%s)\n", what, cudaGetErrorName(err), cudaGetErrorString(err));
  return 1;
}

/* Enqueues one launch of `kernel` on count elements (bytes bytes). */
static int run_once(bench_t *b, const kbw_opts_t *o, kbw_kernel_t kernel, size_t count,
                    size_t bytes) {
  weft_result_t res = WEFT_SUCCESS;
  switch (kernel) {
    case KBW_MEMCPY: {
      cudaError_t err = cudaMemcpyAsync(b->dst, b->a, bytes, cudaMemcpyDeviceToDevice, b->stream);
      if (err != cudaSuccess) return cuda_failed("cudaMemcpyAsync", err);
      return 0;
    }
    case KBW_REDUCE:
      res = kern_cuda_reduce(b->dst, b->a, b->b, count, o->dtype, o->op, o->avg_nranks, b->stream);
      break;
    case KBW_REDUCE_COPY:
      res = kern_cuda_reduce_copy(b->dst, b->dst2, b->a, b->b, count, o->dtype, o->op,
                                  o->avg_nranks, b->stream);
      break;
    default:
      res = kern_cuda_copy(b->dst, b->a, bytes, b->stream);
      break;
  }
  if (res != WEFT_SUCCESS) {
    fprintf(stderr, "kernel_bw: %s: %s\n", kernel_names[kernel], err_last());
    return 1;
  }
  return 0;
}

/* Median time in microseconds of o->iters launches, each between its own pair of events. */
static int time_kernel(bench_t *b, const kbw_opts_t *o, kbw_kernel_t kernel, size_t count,
                       size_t bytes, double *median_us) {
  for (int i = 0; i < o->warmup; i++)
    if (run_once(b, o, kernel, count, bytes)) return 1;
  cudaError_t err;
  for (int i = 0; i < o->iters; i++) {
    if ((err = cudaEventRecord(b->start[i], b->stream)) != cudaSuccess)
      return cuda_failed("cudaEventRecord", err);
    if (run_once(b, o, kernel, count, bytes)) return 1;
    if ((err = cudaEventRecord(b->stop[i], b->stream)) != cudaSuccess)
      return cuda_failed("cudaEventRecord", err);
  }
  if ((err = cudaStreamSynchronize(b->stream)) != cudaSuccess)
    return cuda_failed("cudaStreamSynchronize (a kernel failed)", err);
  for (int i = 0; i < o->iters; i++) {
    float ms = 0;
    if ((err = cudaEventElapsedTime(&ms, b->start[i], b->stop[i])) != cudaSuccess)
      return cuda_failed("cudaEventElapsedTime", err);
    b->us[i] = ms * 1e3;
  }
  *median_us = kbw_median(b->us, o->iters);
  return 0;
}

int main(int argc, char **argv) {
  kbw_opts_t o;
  char msg[256];
  int parsed = kbw_parse(argc, argv, &o, msg, sizeof msg);
  if (parsed == 1) return 0;
  if (parsed < 0) {
    fprintf(stderr, "kernel_bw: %s\n", msg);
    return 2;
  }

  int ndev = 0;
  cudaError_t err = cudaGetDeviceCount(&ndev);
  if (err != cudaSuccess || ndev == 0) {
    printf("kernel_bw: no CUDA device (%s): nothing to measure\n",
           err != cudaSuccess ? cudaGetErrorName(err) : "cudaGetDeviceCount found 0 devices");
    return 0;
  }
  int dev = 0;
  struct cudaDeviceProp prop;
  if ((err = cudaGetDevice(&dev)) != cudaSuccess) return cuda_failed("cudaGetDevice", err);
  if ((err = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess)
    return cuda_failed("cudaGetDeviceProperties", err);

  size_t es = bench_dtype_size(o.dtype);
  size_t max_bytes = o.maxbytes / es * es;
  bench_t b;
  memset(&b, 0, sizeof b);
  void **bufs[4] = {&b.a, &b.b, &b.dst, &b.dst2};
  for (int i = 0; i < 4; i++) {
    if ((err = cudaMalloc(bufs[i], max_bytes)) != cudaSuccess) {
      snprintf(msg, sizeof msg, "cudaMalloc of 4 x %zu bytes", max_bytes);
      return cuda_failed(msg, err);
    }
  }
  /* Ordinary finite values in every dtype (0x3c bytes: 1.06 in fp16, 0.0115 in fp32, ...): no
   * NaN or infinity, whatever the arithmetic costs on them. */
  if ((err = cudaMemset(b.a, 0x3c, max_bytes)) != cudaSuccess ||
      (err = cudaMemset(b.b, 0x3b, max_bytes)) != cudaSuccess)
    return cuda_failed("cudaMemset", err);
  if ((err = cudaStreamCreate(&b.stream)) != cudaSuccess)
    return cuda_failed("cudaStreamCreate", err);
  b.start = calloc((size_t)o.iters, sizeof *b.start);
  b.stop = calloc((size_t)o.iters, sizeof *b.stop);
  b.us = calloc((size_t)o.iters, sizeof *b.us);
  if (!b.start || !b.stop || !b.us) {
    fprintf(stderr, "kernel_bw: out of memory for %d iterations\n", o.iters);
    return 1;
  }
  for (int i = 0; i < o.iters; i++) {
    if ((err = cudaEventCreate(&b.start[i])) != cudaSuccess ||
        (err = cudaEventCreate(&b.stop[i])) != cudaSuccess)
      return cuda_failed("cudaEventCreate", err);
  }

  printf("# kernel_bw: device %d: %s, %d SMs; %s %s%s, median of %d launches after %d warm-up\n",
         dev, prop.name, prop.multiProcessorCount, bench_dtype_name(o.dtype), bench_op_name(o.op),
         o.op == WEFT_AVG ? " (final step)" : "", o.iters, o.warmup);
  printf(
      "# GB/s = bytes moved / time: memcpy (device to device) and copy 2 x size, reduce 3 x size\n"
      "# (2 reads + 1 write), reduce_copy 4 x size; ratio = kernel GB/s / memcpy GB/s\n#\n");
  printf("#%11s %11s %8s %6s %11s %8s %11s %8s %6s %11s %8s %6s %11s %8s %6s\n", "", "", "", "",
         "memcpy", "", "reduce", "", "", "reduce_copy", "", "", "copy", "", "");
  printf("#%11s %11s %8s %6s %11s %8s %11s %8s %6s %11s %8s %6s %11s %8s %6s\n", "size", "count",
         "type", "redop", "time(us)", "GB/s", "time(us)", "GB/s", "ratio", "time(us)", "GB/s",
         "ratio", "time(us)", "GB/s", "ratio");

  const size_t target_from = (size_t)64 << 20;
  double worst = 0;
  size_t worst_size = 0;
  int measured_target = 0;
  for (size_t size = o.minbytes; size <= o.maxbytes; size *= o.stepfactor) {
    size_t count = size / es, bytes = count * es;
    double us[KBW_NUM_KERNELS], gbps[KBW_NUM_KERNELS];
    for (int k = 0; k < KBW_NUM_KERNELS; k++) {
      if (time_kernel(&b, &o, (kbw_kernel_t)k, count, bytes, &us[k])) return 1;
      gbps[k] = kbw_gbps(kbw_bytes_moved((kbw_kernel_t)k, bytes), us[k]);
    }
    printf(" %11zu %11zu %8s %6s %11.1f %8.1f", bytes, count, bench_dtype_name(o.dtype),
           bench_op_name(o.op), us[KBW_MEMCPY], gbps[KBW_MEMCPY]);
    for (int k = KBW_REDUCE; k < KBW_NUM_KERNELS; k++)
      printf(" %11.1f %8.1f %6.3f", us[k], gbps[k], gbps[k] / gbps[KBW_MEMCPY]);
    printf("\n");
    fflush(stdout);
    double ratio = gbps[KBW_REDUCE] / gbps[KBW_MEMCPY];
    if (bytes >= target_from && (!measured_target || ratio < worst)) {
      worst = ratio;
      worst_size = bytes;
      measured_target = 1;
    }
    if (size > o.maxbytes / o.stepfactor) break; /* the next size would overflow or exceed -e */
  }
  if (measured_target) {
    printf(
        "# target: reduce >= 0.90 x memcpy bandwidth from 64 MiB up: %s (lowest ratio %.3f at "
        "%zu bytes)\n",
        worst >= 0.90 ? "met" : "NOT met", worst, worst_size);
  } else {
    printf(
        "# target: reduce >= 0.90 x memcpy bandwidth from 64 MiB up: no size >= 64 MiB in "
        "this run\n");
  }

  for (int i = 0; i < o.iters; i++) {
    cudaEventDestroy(b.start[i]);
    cudaEventDestroy(b.stop[i]);
  }
  free(b.start);
  free(b.stop);
  free(b.us);
  cudaStreamDestroy(b.stream);
  for (int i = 0; i < 4; i++) cudaFree(*bufs[i]);
  return 0;
}
