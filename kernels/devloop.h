/* devloop.h -- internal: the device-resident loop's interface: the view of a link that the loop
 * drives, what one run is given, and how it ends. The loop itself (devloop_steps.h) is written
 * once and compiled twice: by the host compiler for the emulated engine and the tests
 * (devloop_host.c), and by nvcc for the CUDA kernel.
 *
 * The link protocol (the bandwidth protocol: whole slots, a release fence, then a counter):
 *   - the receiver owns the slots; the sender writes slot (seq % nslots) of message seq, then
 *     publishes it by storing tail = seq + 1 with release semantics, so a receiver that reads
 *     tail > seq with acquire semantics sees the whole slot;
 *   - the receiver reads (or reduces from) the slot, then frees it by storing head = seq + 1 with
 *     release semantics, after its last read of the slot, so the sender, reading head with
 *     acquire semantics, never overwrites a slot that is still being read;
 *   - the sender may fill message seq only while seq - head < nslots.
 * Each counter has one writer and lives on its own 128-byte line (no false sharing between the
 * two ends). Counters only grow: a run starts where the last one stopped (the sender's position
 * is its tail, the receiver's its head), so a link needs no reset between calls. */
#ifndef WEFT_KERNELS_DEVLOOP_H_
#define WEFT_KERNELS_DEVLOOP_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels/devprog.h"
#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 128 bytes: the line the two counters of a link never share. */
#define DL_COUNTER_ALIGN 128

/* The counters of one link, in memory both ends map (device memory exported over IPC, or the
 * emulation's shared memory). */
typedef struct {
  uint64_t tail __attribute__((aligned(DL_COUNTER_ALIGN))); /* written by the sender only */
  uint64_t head __attribute__((aligned(DL_COUNTER_ALIGN))); /* written by the receiver only */
} dl_counters_t;

/* One link as the loop drives it, from either end. */
typedef struct {
  char *slots; /* nslots * slot_bytes, owned by the receiver, mapped by the sender */
  uint64_t nslots;
  uint64_t slot_bytes;
  dl_counters_t *ctr;
} dl_link_view_t;

/* How a run ended. */
typedef enum {
  DL_DONE = 0,
  DL_TIMEOUT = 1, /* a wait saw no progress for timeout_ns */
  DL_ABORTED = 2, /* *abort became nonzero */
  DL_BAD_PROGRAM = 3 /* a step names a link or buffer the run was not given */
} dl_code_t;

typedef struct {
  int code;        /* dl_code_t */
  int step;        /* the step that waited (or was bad); -1 */
  int link;        /* the link it waited on; -1 */
  int waiting_for; /* 0: a message to arrive; 1: a slot to come free */
  uint64_t round;
} dl_status_t;

/* One run of a program. */
typedef struct {
  const dp_program_t *prog;
  const dl_link_view_t *links; /* prog->nlinks, indexed as prog->links */
  char *bufs[DP_NUM_BUFS];     /* sendbuf, recvbuf, scratch (NULL where the program has none) */
  const volatile int *abort;   /* polled at every wait; NULL: never */
  uint64_t timeout_ns;         /* longest wait without progress; 0: none */
} dl_run_t;

/* Runs the program on the host's CPU (the emulated engine's device, and the tests), one thread:
 * returns when every step is done, or on timeout or abort with where it waited. */
dl_status_t dl_run_host(const dl_run_t *run);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_KERNELS_DEVLOOP_H_ */
