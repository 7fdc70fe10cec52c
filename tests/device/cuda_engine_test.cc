// cuda_engine_test.cc -- the engine contract (contract.cc) on the CUDA engine: the same checks the
// emulation passes, on a GPU. Without a device every test skips, saying so ("no CUDA device").
#include <cuda_runtime_api.h>

#include "tests/device/contract.h"

namespace {

// The user's own work on their stream, as a program would enqueue it.
weft_result_t CudaUserCopy(dev_engine_t *e, void *stream, void *dst, const void *src,
                           size_t bytes) {
  (void)e;
  cudaError_t rc = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream);
  if (rc != cudaSuccess)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "test: cudaMemcpyAsync on the user's stream: %s",
                    cudaGetErrorString(rc));
  return WEFT_SUCCESS;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Engine, EngineContract, testing::Values(EngineParam{"cuda", CudaUserCopy}),
                         EngineParamName);
