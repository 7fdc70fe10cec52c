/* schedule.h -- internal: an algorithm as data: which element ranges go to and come from which
 * peer, what happens to them on arrival, and what each transfer waits for.
 *
 * An algorithm file (ring_allreduce.c, chain_broadcast.c, ...) only builds a schedule for one
 * rank; executor.c runs every schedule. Ops to the same peer in the same direction form an ordered
 * stream, so a schedule lists them in the order they travel. The executor cuts each op into
 * slices and pipelines them: slice j of an op with a dependency starts once slice j of the op it
 * depends on has completed (for a ring: forward a slice as soon as it has been reduced). */
#ifndef WEFT_COLLECTIVES_SCHEDULE_H_
#define WEFT_COLLECTIVES_SCHEDULE_H_

#include <stddef.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  SCHED_SEND,        /* send buf[offset, +count) to peer */
  SCHED_RECV_COPY,   /* receive from peer straight into buf[offset, +count) */
  SCHED_RECV_REDUCE, /* receive from peer, then buf[offset+i] = src[src_offset+i] op incoming */
  SCHED_SEND_TOKEN,  /* send one byte that carries no data (barriers) */
  SCHED_RECV_TOKEN,
} sched_kind_t;

/* The buffers an op may name: the caller's input and output. */
typedef enum { SCHED_SENDBUF = 0, SCHED_RECVBUF = 1 } sched_buf_t;

typedef struct {
  sched_kind_t kind;
  int peer;
  sched_buf_t buf; /* SEND: source; RECV_*: destination */
  size_t offset;   /* in elements */
  size_t count;    /* in elements; tokens: 0 */
  sched_buf_t src_buf; /* RECV_REDUCE: the local operand */
  size_t src_offset;
  int dep;   /* index of an earlier op with the same count, slice-wise prerequisite; -1: none */
  int final; /* RECV_REDUCE: these elements are now fully reduced (WEFT_AVG divides here) */
  int step;  /* the algorithm's step number, for error messages and traces */
} sched_op_t;

typedef struct {
  sched_op_t *ops;
  int nops, cap;
} schedule_t;

void sched_init(schedule_t *s);
void sched_free(schedule_t *s);
/* Appends an op and returns its index, or -1 when out of memory. */
int sched_add(schedule_t *s, const sched_op_t *op);
/* Checks the invariants the executor relies on (peers in range, deps earlier and of equal count,
 * ranges inside `count`); WEFT_ERR_INTERNAL naming the op otherwise. */
weft_result_t sched_validate(const schedule_t *s, int nranks, size_t count);

/* Element range of chunk `c` when `count` elements are cut into `nchunks` nearly equal chunks
 * (the first count % nchunks chunks get one more). */
void sched_chunk(size_t count, int nchunks, int c, size_t *offset, size_t *len);

/* The algorithms of this build; each lives in its own file. They return WEFT_ERR_NO_MEMORY or
 * WEFT_SUCCESS. */
weft_result_t ring_allreduce_build(schedule_t *s, int rank, int nranks, size_t count);
weft_result_t chain_broadcast_build(schedule_t *s, int rank, int nranks, int root, size_t count);
weft_result_t ring_barrier_build(schedule_t *s, int rank, int nranks);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_SCHEDULE_H_ */
