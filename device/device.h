/* device.h -- internal: what weft needs from an accelerator, as one vtable (dev_ops_t).
 *
 * The executor, the device transports (transport/cuda_ipc.c, transport/staged.c) and the stream
 * API never call CUDA themselves: they call a dev_engine_t. Two engines implement it:
 *   - cuda_engine.c: the CUDA runtime and the kernels of kernels/cuda;
 *   - emulated_engine.c: "device memory" that is host memory, queues run by worker threads, IPC
 *     through memory file descriptors. It does the same work in the same order with the same
 *     asynchrony (work finishes later than it is enqueued), so every piece of logic that depends
 *     on device work being asynchronous -- staging, fences, stream gates, IPC slots, the executor's
 *     device mode -- runs and is tested on machines without a GPU (WEFT_DEVICE=emulated).
 *
 * Model (CUDA's): device work is enqueued on in-order queues (streams) and finishes later. A fence
 * is a ticket after the work enqueued so far on one queue; poll() says whether it has passed.
 * Device pointers are plain addresses (unified virtual addressing): pinned host memory from
 * alloc(..., host_pinned=1) can be read and written by device work directly, which is how a
 * reduction reads a message that landed in a staging buffer without first copying it.
 *
 * A user's stream (weft_stream_t) meets weft's own work through a gate: the call records on the
 * user's stream where its inputs are ready and makes the stream wait until weft opens the gate,
 * so a collective is enqueued and returns at once, as in NCCL. */
#ifndef WEFT_DEVICE_DEVICE_H_
#define WEFT_DEVICE_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#include "include/weft.h"
#include "kernels/devloop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DEV_MEM_HOST = 0, DEV_MEM_DEVICE = 1 } dev_mem_t;

typedef struct dev_engine dev_engine_t;
typedef struct dev_queue dev_queue_t; /* an in-order queue of device work (a CUDA stream) */
typedef struct dev_gate dev_gate_t;   /* one call's hold on a user stream */

/* An exported allocation, as it travels to another process on the same host. */
#define DEV_IPC_HANDLE_BYTES 96
typedef struct {
  unsigned char bytes[DEV_IPC_HANDLE_BYTES];
} dev_ipc_handle_t;

typedef struct dev_ops {
  const char *name; /* "cuda", "emulated" */

  /* ---- memory ---- */
  /* Where p points: host memory (pageable or pinned) or device memory of device *device. */
  weft_result_t (*mem_kind)(dev_engine_t *e, const void *p, dev_mem_t *kind, int *device);
  /* Device memory (host_pinned = 0) or pinned host memory that device work reads and writes
   * directly (host_pinned = 1). Freed by release() with the same flag. */
  weft_result_t (*alloc)(dev_engine_t *e, size_t bytes, int host_pinned, void **out);
  /* Never waits for device work. CUDA frees memory only once the whole device is idle, which a
   * user stream held by a gate (below) is not until the call holding it ends: memory released
   * while any gate is closed is freed by close() instead. ipc_close() likewise. */
  void (*release)(dev_engine_t *e, void *p, int host_pinned);

  /* ---- queues of device work ---- */
  weft_result_t (*queue_create)(dev_engine_t *e, dev_queue_t **out);
  /* Waits for the queue's work (bounded) and frees it. */
  void (*queue_destroy)(dev_queue_t *q);
  /* Enqueued; each runs after everything enqueued on q before it. src and dst may be device or
   * host memory (pinned or not) in any combination. */
  weft_result_t (*copy)(dev_queue_t *q, void *dst, const void *src, size_t bytes);
  /* dst[i] = local[i] op incoming[i] for i < n, also written to dst2 unless it is NULL (the last
   * reduce step of a ring writes the buffer the next peer reads and the output at once). With
   * op WEFT_AVG and avg_nranks > 0 the result is divided by avg_nranks (the last step of an
   * average, kern_reduce_avg_final's semantics); otherwise WEFT_AVG adds. Host semantics of
   * kernels/reduce.h exactly, bit for bit. */
  weft_result_t (*reduce)(dev_queue_t *q, void *dst, void *dst2, const void *local,
                          const void *incoming, size_t n, weft_dtype_t dtype, weft_op_t op,
                          int avg_nranks);
  /* dst[i] = src[i] * scalar for i < n: WEFT_PREMUL_SUM's scaling of a rank's input. `scalar` is
   * one element of dtype in host memory, read before this returns. dst may equal src. Host
   * semantics of kern_premul exactly, bit for bit. */
  weft_result_t (*premul)(dev_queue_t *q, void *dst, const void *src, size_t n, weft_dtype_t dtype,
                          const void *scalar);
  /* A ticket after the work enqueued so far on q. Tickets of one queue grow. */
  weft_result_t (*fence)(dev_queue_t *q, uint64_t *ticket);
  /* *done = 1 once everything before the ticket has finished. Never blocks. A failed device
   * operation is returned here (and by drain), with the CUDA message. */
  weft_result_t (*poll)(dev_queue_t *q, uint64_t ticket, int *done);
  /* Blocks until all of q's work has finished, at most timeout_ms (then WEFT_ERR_TIMEOUT). */
  weft_result_t (*drain)(dev_queue_t *q, int timeout_ms);

  /* ---- device-resident programs (kernels/devloop.h) ---- */
  /* Enqueues one run of a device program on q: it starts after q's earlier work, and q's later
   * work waits for it to end. `run` and everything it points to (the program and its steps, the
   * link views, the buffers, the abort flag) must stay valid until q passes a fence taken after
   * this call: the run reads them while it goes, long after launch returned. *status is written
   * when the run ends: DL_DONE, or where and why it stopped; a run skipped because q had failed
   * before it ends DL_ABORTED at step -1. A run that ends other than DL_DONE also fails q (as a
   * failed copy does), with a message naming the step, the link, its peer
   * (prog->links[link].peer) and the round, so that fence, poll and drain report it. Every wait of
   * the run is bounded by run->timeout_ns; with 0 and no abort flag a peer that never comes holds
   * q forever. NULL where the engine cannot run programs (the CUDA engine unless
   * WEFT_CUDA_DEVICE_LOOP=1 at open: its kernel has not run on hardware yet): callers then take the
   * host-driven path. The CUDA engine writes *status, and fails q, at the first poll or drain
   * after the run has ended, and sees the abort flag at poll and drain (cuda_engine.c says how). */
  weft_result_t (*launch)(dev_queue_t *q, const dl_run_t *run, dl_status_t *status);

  /* ---- the user's streams ---- */
  /* Enters one call into `user_stream`: marks where its inputs are ready and makes the stream's
   * later work wait until gate_open(). Must not block. */
  weft_result_t (*gate_enter)(dev_engine_t *e, void *user_stream, dev_gate_t **out);
  /* Blocks until the work the user's stream had before gate_enter has finished (the call's
   * inputs are ready), at most timeout_ms (then WEFT_ERR_TIMEOUT). */
  weft_result_t (*gate_wait_inputs)(dev_gate_t *g, int timeout_ms);
  /* Lets the user's stream go on; the gate is freed once both sides are done with it. Called
   * exactly once per gate, on success and on failure alike (a failed call must not leave the
   * user's stream blocked forever; the failure is reported by the communicator). */
  void (*gate_open)(dev_gate_t *g);
  /* Streams for tools and tests (a CUDA stream, or the emulation's): created, synchronized,
   * destroyed. stream_sync waits at most timeout_ms. */
  weft_result_t (*stream_create)(dev_engine_t *e, void **stream);
  weft_result_t (*stream_sync)(dev_engine_t *e, void *stream, int timeout_ms);
  void (*stream_destroy)(dev_engine_t *e, void *stream);

  /* ---- sharing device memory with other processes on this host ---- */
  /* A handle to the whole allocation that starts at p (from alloc with host_pinned = 0). */
  weft_result_t (*ipc_export)(dev_engine_t *e, void *p, size_t bytes, dev_ipc_handle_t *h);
  /* Maps another process's exported allocation; *out is valid until ipc_close. */
  weft_result_t (*ipc_import)(dev_engine_t *e, const dev_ipc_handle_t *h, void **out);
  void (*ipc_close)(dev_engine_t *e, void *p);

  /* ---- GPUDirect RDMA: an RDMA adapter reading and writing device memory ---- */
  /* How an adapter registers [p, p + bytes) of an allocation from alloc(host_pinned = 0). *fd >= 0:
   * a dma-buf of the range, which starts *offset bytes into it (for ibv_reg_dmabuf_mr; the caller
   * closes the fd once registered). *fd = -1: the adapter registers it by address like host
   * memory (the emulated engine's device memory is host memory). WEFT_ERR_UNSUPPORTED, with why,
   * where the driver cannot export it. p and bytes must be multiples of the host page size. */
  weft_result_t (*rdma_export)(dev_engine_t *e, void *p, size_t bytes, int *fd, uint64_t *offset);

  void (*close)(dev_engine_t *e);
} dev_ops_t;

/* Every engine's state starts with this. */
struct dev_engine {
  const dev_ops_t *ops;
  int device; /* the device this engine works on (the current CUDA device at open) */
};

/* Opens the engine `name` names: "cuda" (WEFT_ERR_UNSUPPORTED in a build without CUDA, or
 * when there is no device), "emulated", or "auto": CUDA where this build has it and a device
 * is present, else *out = NULL and WEFT_SUCCESS (host buffers only). */
weft_result_t dev_engine_open(const char *name, dev_engine_t **out);
void dev_engine_close(dev_engine_t *e);

/* The device an engine opened now by `name` would work on (the current CUDA device for "cuda"
 * and "auto", 0 for "emulated"), or -1 where it would have none ("none", no GPU, no CUDA). */
int dev_engine_current_device(const char *name);
/* The CUDA part of it (absent from a CPU-only build): the current device, or -1. */
int cuda_current_device(void);

/* The engines this build has (cuda_engine_open is absent from a CPU-only build). */
weft_result_t emulated_engine_open(dev_engine_t **out);
weft_result_t cuda_engine_open(dev_engine_t **out);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_DEVICE_DEVICE_H_ */
