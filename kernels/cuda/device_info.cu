/* device_info.cu -- device discovery and a self-test kernel; proves the CUDA build path works. */
#include <cuda_runtime.h>

#include "kernels/cuda/device_info.h"

extern "C" int kern_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

__global__ void fill_pattern(int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i + 1;
}

extern "C" int kern_cuda_selftest(void) {
  if (kern_cuda_device_count() == 0) return -1;
  const int n = 1000;
  int host[n];
  int *dev = nullptr;
  cudaError_t err = cudaMalloc(&dev, n * sizeof(int));
  if (err != cudaSuccess) return (int)err;
  fill_pattern<<<(n + 255) / 256, 256>>>(dev, n);
  err = cudaMemcpy(host, dev, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(dev);
  if (err != cudaSuccess) return (int)err;
  for (int i = 0; i < n; i++)
    if (host[i] != 3 * i + 1) return 1000000 + i;
  return 0;
}
