/* devloop_kernel.h -- internal: the device-resident loop (kernels/devloop_steps.h) as a CUDA
 * kernel, reached from plain C (device/cuda_engine.c's launch). No CUDA header is needed to include
 * this.
 *
 * The kernel runs one thread block (one channel): thread 0 walks the program (waits, counters,
 * timeout, abort), and every thread of the block does each slice's element work.
 *
 * What it reads must be reachable from the device for the whole run: the program (its steps
 * included) and the link views in device memory, the buffers and slots in device memory (or
 * mapped pinned host memory), the abort word and the status in mapped pinned host memory so that
 * the host can set the one and read the other while the kernel runs. The caller (the engine)
 * copies the program there before the launch: devloop_kernel.cu reads nothing of the host's. */
#ifndef WEFT_KERNELS_CUDA_DEVLOOP_KERNEL_H_
#define WEFT_KERNELS_CUDA_DEVLOOP_KERNEL_H_

#include <stdint.h>

#include "include/weft.h"
#include "kernels/devloop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues one run on `stream` (a cudaStream_t). `run` is read before this returns (it travels as
 * the kernel's argument); every pointer in it must be device-accessible as said above. `moved` is
 * run->prog->nsteps uint64_t of device memory, the loop's per-step counts (the kernel zeroes it).
 * `status` is written when the run ends, its code last with release semantics at system scope.
 * WEFT_ERR_SYSTEM, naming the CUDA error, when the launch fails. */
weft_result_t kern_cuda_devloop_launch(const dl_run_t *run, uint64_t *moved, dl_status_t *status,
                                       void *stream);

/* Loads the kernel onto the current device now (kern_cuda_load_all says why). */
weft_result_t kern_cuda_devloop_load(void);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_KERNELS_CUDA_DEVLOOP_KERNEL_H_ */
