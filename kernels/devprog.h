/* devprog.h -- internal: a device program, one rank's schedule (collectives/schedule.h) compiled
 * into the flat list of steps that a device-resident loop (kernels/devloop.h: a CUDA kernel, or
 * the emulated engine's threads) runs with no host in the loop. The format lives here, below the
 * collectives, so that the loop can read it; collectives/devcompile.h makes programs.
 *
 * Why a second form of the schedule: the executor (executor.c) drives every slice from the host,
 * posting transfers and polling fences, so each slice of each ring step costs host round trips. A
 * device program is what a kernel can walk by itself: steps in a fixed order, each naming the
 * buffers, element ranges and links it reads and writes, nothing to allocate or decide.
 *
 * Links. A link is one direction of one peer connection, as the loop sees it: a ring of nslots
 * slots of slot_bytes that the receiver owns, a tail the sender writes (messages published) and a
 * head the receiver writes (messages consumed). A program names its links by index; links[i] says
 * which peer and which direction. A message is one slice: at most slice_elems elements.
 *
 * Order (the contract the loop keeps and both ends of a link rely on). The program runs in
 * rounds: round r moves slice r of every step that has more than r slices (slice r of a step of
 * `count` elements is elements [r * slice_elems, min(count, (r + 1) * slice_elems))). Within a
 * round, the steps that use one link use it in program order: on every link the messages travel
 * as (step, round) pairs ordered by round, then by step. Both ends of a link list their steps on
 * it in the same order with the same counts (the schedule's streams do: the k-th send to a peer
 * matches that peer's k-th receive from us, with the same count), and slice_elems is the same on
 * every rank, so the k-th message sent is the k-th one expected. A step may run its slice r once
 * its `dep` has finished its slice r (deps have the same count, so the same slices) and the steps
 * before it on its links have moved their slice r; otherwise steps of a round run in any order,
 * which is what lets a loop that polls them never wait on itself where the executor would not.
 * Round r + 1 starts once every step of round r is done. Steps with no slices (count 0) take no
 * part and send nothing.
 *
 * Fusing. A schedule's fused kinds (recv-reduce-send, recv-reduce-copy-send, recv-copy-send)
 * write the slot of their forward SEND op; the compiler folds that SEND into the fused step,
 * which then both consumes from its recv link and publishes on its send link, and drops the SEND.
 * The folded step takes the SEND's place in program order when that keeps every link's order (no
 * step between the two uses either link); otherwise it runs unfused: the receive into buf, then
 * the SEND from buf, as schedule.h allows. */
#ifndef WEFT_KERNELS_DEVPROG_H_
#define WEFT_KERNELS_DEVPROG_H_

#include <stddef.h>
#include <stdint.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The inline helpers below are also called by the device loop under nvcc
 * (kernels/cuda/devloop_kernel.cu). */
#ifdef __CUDACC__
#define DP_FN static inline __host__ __device__
#else
#define DP_FN static inline
#endif

/* The buffers a step names: the values of schedule.h's sched_buf_t (devcompile.c checks). */
typedef enum { DP_SENDBUF = 0, DP_RECVBUF = 1, DP_SCRATCH = 2, DP_NUM_BUFS = 3 } dp_buf_t;

/* Most links a program may use: a rank's peers in both directions, bounded so that a program and
 * its link table fit in a kernel's constant-size argument area. */
#define DP_MAX_LINKS 64

typedef enum {
  DP_SEND = 0,                 /* buf[offset, +count) -> send link */
  DP_RECV_COPY = 1,            /* recv link -> buf[offset, +count) */
  DP_RECV_REDUCE = 2,          /* buf[offset + i] = src[src_offset + i] op incoming */
  DP_RECV_REDUCE_SEND = 3,     /* send link <- src op incoming (buf not written) */
  DP_RECV_REDUCE_COPY_SEND = 4, /* send link and buf <- src op incoming, one pass */
  DP_RECV_COPY_SEND = 5,       /* send link and buf <- incoming, one read */
  DP_COPY = 6,                 /* buf[offset + i] = src[src_offset + i], no link */
  DP_NUM_KINDS = 7
} dp_kind_t;

/* One step. 40 bytes, no pointers: a program is position-independent and can be copied to a
 * device as it is; buffers are named (dp_buf_t) and bound at launch. */
typedef struct {
  uint8_t kind;      /* dp_kind_t */
  uint8_t buf;       /* dp_buf_t: source of DP_SEND, destination otherwise */
  uint8_t src_buf;   /* dp_buf_t: the local operand of reduce kinds, the source of DP_COPY */
  uint8_t final;     /* reduce kinds: these elements are now fully reduced (WEFT_AVG divides) */
  int16_t recv_link; /* index into dp_program_t.links; -1 where the kind receives nothing */
  int16_t send_link; /* likewise for sending */
  int32_t dep;       /* an earlier step whose slice r must be done before slice r here; -1 */
  int32_t op;        /* the schedule op it came from (the receive, for a folded step): messages */
  uint64_t offset, src_offset, count; /* elements */
} dp_step_t;

typedef enum { DP_LINK_SEND = 0, DP_LINK_RECV = 1 } dp_link_dir_t;

typedef struct {
  int32_t peer;
  int32_t dir; /* dp_link_dir_t */
} dp_link_t;

typedef struct {
  dp_step_t *steps;
  int nsteps;
  dp_link_t links[DP_MAX_LINKS];
  int nlinks;
  uint64_t slice_elems; /* elements per message: the slot size over the element size */
  uint64_t nrounds;     /* the most slices of any step: rounds the loop runs */
  size_t buf_count[DP_NUM_BUFS]; /* elements of each buffer, as the schedule's */
  weft_dtype_t dtype;
  weft_op_t op; /* a reduce kind's op; WEFT_AVG reduces as a sum and divides on `final` steps */
  int nranks;   /* WEFT_AVG's divisor */
} dp_program_t;

/* Frees what a program owns (its steps); the struct may then be reused. */
void dp_free(dp_program_t *p);

/* "send", "recv-reduce-copy-send", ...: a kind's name in messages. */
const char *dp_kind_name(dp_kind_t k);
/* A dtype's size in bytes, 0 for an unknown one: weft_dtype_size's answer, written here for the
 * layers below the collectives (the device loop on host and device, the emulated engine). */
DP_FN uint64_t dp_dtype_size(int dtype) {
  switch (dtype) {
    case WEFT_INT8:
    case WEFT_UINT8:
    case WEFT_FLOAT8_E4M3:
    case WEFT_FLOAT8_E5M2:
      return 1;
    case WEFT_FLOAT16:
    case WEFT_BFLOAT16:
      return 2;
    case WEFT_INT32:
    case WEFT_UINT32:
    case WEFT_FLOAT32:
      return 4;
    case WEFT_INT64:
    case WEFT_UINT64:
    case WEFT_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

/* Slices of a step: ceil(count / slice_elems). */
DP_FN uint64_t dp_step_slices(const dp_program_t *p, const dp_step_t *st) {
  return (st->count + p->slice_elems - 1) / p->slice_elems;
}
/* Whether a kind receives, sends. */
DP_FN int dp_kind_receives(int k) { return k >= DP_RECV_COPY && k <= DP_RECV_COPY_SEND; }
DP_FN int dp_kind_sends(int k) {
  return k == DP_SEND || k == DP_RECV_REDUCE_SEND || k == DP_RECV_REDUCE_COPY_SEND ||
         k == DP_RECV_COPY_SEND;
}
DP_FN int dp_kind_reduces(int k) {
  return k == DP_RECV_REDUCE || k == DP_RECV_REDUCE_SEND || k == DP_RECV_REDUCE_COPY_SEND;
}

#ifdef __cplusplus
}
#endif

#endif /* WEFT_KERNELS_DEVPROG_H_ */
