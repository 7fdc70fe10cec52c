/* memory.c -- ncclMemAlloc and ncclMemFree on weft_mem_alloc: device memory of the current
 * device (or of the emulated engine under WEFT_DEVICE=emulated). NCCL allocates with the CUDA
 * driver's virtual-memory calls so that NVLink SHARP and registration can use the buffer; weft
 * registers nothing ahead of a call, so plain device memory serves every use. */
#include "nccl/nccl_internal.h"

NCCL_API(ncclResult_t, ncclMemAlloc, void **ptr, size_t size) {
  if (!ptr) return nccl_fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  weft_result_t r = weft_mem_alloc(ptr, size);
  /* No device is a CUDA error in NCCL's terms (cudaErrorNoDevice). */
  if (r == WEFT_ERR_UNSUPPORTED)
    return nccl_fail(ncclUnhandledCudaError, "ncclMemAlloc: %s", weft_last_error());
  return nccl_from_weft(r);
}

NCCL_API(ncclResult_t, ncclMemFree, void *ptr) { return nccl_from_weft(weft_mem_free(ptr)); }
