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
  SCHED_COPY, /* local: buf[offset+i] = src[src_offset+i] (peer unused) */
  /* Fused steps, as NCCL's primitives: one pass over a received slice that writes the memory
   * the next peer reads (the slot of op `fwd`, a SEND whose dep is this op) instead of a local
   * buffer that the send then copies. The SEND op stays in the schedule, in its stream's order;
   * the executor posts its slices from here. */
  SCHED_RECV_REDUCE_SEND,      /* src op incoming -> fwd's slot only (buf is not written) */
  SCHED_RECV_REDUCE_COPY_SEND, /* src op incoming -> fwd's slot and buf, in the same pass */
  SCHED_RECV_COPY_SEND,        /* incoming -> fwd's slot and buf: forward and keep, one read */
  SCHED_REDUCE, /* local: buf[offset+i] = buf[offset+i] op src[src_offset+i] (peer unused) */
} sched_kind_t;

/* Where the executor cannot fuse (the send's transport lends no slot, or a copy-send's receive
 * does not land in place), a fused kind runs as its parts: RECV_REDUCE (or RECV_COPY) into buf,
 * then the SEND from buf. So buf of every fused kind names memory the send may read, sized like
 * the op, and the schedule must be correct either way. */
static inline int sched_is_fused(sched_kind_t k) {
  return k == SCHED_RECV_REDUCE_SEND || k == SCHED_RECV_REDUCE_COPY_SEND ||
         k == SCHED_RECV_COPY_SEND;
}

/* "send", "recv-copy", "recv-reduce-send", ...: the kind's name in traces and messages. */
const char *sched_kind_name(sched_kind_t k);

/* Kinds that combine the incoming data with src (reducing receives, fused or not). */
static inline int sched_is_reduce(sched_kind_t k) {
  return k == SCHED_RECV_REDUCE || k == SCHED_RECV_REDUCE_SEND || k == SCHED_RECV_REDUCE_COPY_SEND;
}

/* Kinds that run on this rank alone, on no stream: copies and local reductions. */
static inline int sched_is_local(sched_kind_t k) { return k == SCHED_COPY || k == SCHED_REDUCE; }

/* Kinds that read a local operand at src_buf/src_offset. */
static inline int sched_has_src(sched_kind_t k) { return sched_is_reduce(k) || sched_is_local(k); }

/* How many of an op's `op_slices` slices may start, its dependency having finished `dep_done` of
 * its `dep_slices`: every engine (executor, weft-sim, the test simulator) asks this. */
static inline size_t sched_dep_ready(int dep, int dep_whole, size_t op_slices, size_t dep_done,
                                     size_t dep_slices) {
  if (dep < 0) return op_slices;
  if (dep_whole) return dep_done >= dep_slices ? op_slices : 0;
  return dep_done < op_slices ? dep_done : op_slices;
}

/* What two ranks must agree on beyond the call description, carried by a token (SEND_TOKEN and
 * RECV_TOKEN with `on` set; the executor sends these values instead of a bare byte): all_to_allv's
 * element counts between each pair, a p2p group's tags. The send carries its side's values; the
 * receive holds what its side expects and compares. `count`: what the token's sender sends the
 * receiver (in its next data op); `back`: what the receiver sends the sender. A mismatch fails both
 * ranks (each checks the token of the other) with a message naming the two ranks and values. */
typedef struct {
  int on;
  int tag;
  weft_dtype_t dtype;
  size_t count, back;
} sched_agree_t;

/* The buffers an op may name: the caller's input and output, and scratch memory the executor
 * provides (for partial results that fit neither, e.g. a reduce-scatter's passing sums). */
typedef enum {
  SCHED_SENDBUF = 0,
  SCHED_RECVBUF = 1,
  SCHED_SCRATCH = 2,
  SCHED_NUM_BUFS = 3
} sched_buf_t;

typedef struct {
  sched_kind_t kind;
  int peer;
  sched_buf_t buf;     /* SEND: source; RECV_*, COPY: destination */
  size_t offset;       /* in elements */
  size_t count;        /* in elements; tokens: 0 */
  sched_buf_t src_buf; /* RECV_REDUCE: the local operand; COPY: the source */
  size_t src_offset;
  int dep;   /* index of an earlier op with the same count, slice-wise prerequisite; -1: none */
  int final; /* RECV_REDUCE: these elements are now fully reduced (WEFT_AVG divides here) */
  int step;  /* the algorithm's step number, for error messages and traces */
  int fwd;   /* fused kinds: the SEND op this one writes the slots of (it depends on this op) */
  /* 1: `dep` (above) must have finished all of its slices before any slice of this op starts, and may
   * then have another count. Store-and-forward steps need it: a binomial tree forwards part of
   * a block it received as one message, or one message made of blocks from several peers (then
   * those receives are chained, each waiting whole for the one before). */
  int dep_whole;
  sched_agree_t agree; /* tokens only */
  /* Further prerequisites beyond `dep` (imported programs, where a step waits for the step before
   * it on its thread block and for one on another): s->deps[more_deps, +nmore). A slice starts
   * when every dependency lets it, the minimum of sched_dep_ready over them. 0: none. */
  int more_deps, nmore;
  /* The channel an imported program gave the op: traces and weft-sim show it; the executor
   * carries every channel of a peer on its one ordered stream (msccl_import.h says why). */
  int channel;
} sched_op_t;

/* One further prerequisite: op `op`, slice-wise or (whole = 1) all of it, as dep/dep_whole. */
typedef struct {
  int op;
  int whole;
} sched_dep_t;

typedef struct {
  sched_op_t *ops;
  int nops, cap;
  size_t buf_count[SCHED_NUM_BUFS]; /* elements in each buffer; scratch is the executor's */
  /* The peers this rank sends its call description to and checks one from (-1: none). Every
   * pair of ranks that exchange data should be linked by these checks, directly or through a
   * chain, so that ranks making different calls fail instead of exchanging garbage. */
  int hdr_to, hdr_from;
  sched_dep_t *deps; /* the ops' further prerequisites (sched_op_t.more_deps) */
  int ndeps, deps_cap;
} schedule_t;

/* An empty schedule over a send buffer of send_count and a receive buffer of recv_count
 * elements, no scratch, no call-description exchange. */
void sched_init(schedule_t *s, size_t send_count, size_t recv_count);
void sched_free(schedule_t *s);
/* Appends an op and returns its index, or -1 when out of memory. */
int sched_add(schedule_t *s, const sched_op_t *op);
/* Adds a prerequisite to op `i`, the last op that got one: `dep` if that is free, else to its
 * further ones. -1 when out of memory or when another op got one since (the list is contiguous). */
int sched_add_dep(schedule_t *s, int i, int dep, int whole);
/* An op's dependencies, `dep` first then its further ones: how many, and the k-th. Every engine
 * lets a slice start when sched_dep_ready allows it for each of them (the minimum). */
static inline int sched_ndeps(const sched_op_t *op) { return (op->dep >= 0) + op->nmore; }
static inline sched_dep_t sched_dep_at(const schedule_t *s, const sched_op_t *op, int k) {
  if (op->dep >= 0 && k == 0) return (sched_dep_t){op->dep, op->dep_whole};
  return s->deps[op->more_deps + k - (op->dep >= 0)];
}
/* Appends the ops of `part`, a schedule over a piece of the same buffers that starts at element
 * `base` of each (send and receive buffers alike, as an all-reduce's): offsets move by base,
 * dependencies and fused links by the ops already in s. `part` must use no scratch. */
weft_result_t sched_append(schedule_t *s, const schedule_t *part, size_t base);
/* Call descriptions go around the ring: to rank+1, from rank-1 (collectives over all ranks). */
void sched_ring_headers(schedule_t *s, int rank, int nranks);
/* Checks the invariants the executor relies on (peers in range, deps earlier and of equal count,
 * ranges inside their buffers); WEFT_ERR_INTERNAL naming the op otherwise. */
weft_result_t sched_validate(const schedule_t *s, int nranks);

/* Element range of chunk `c` when `count` elements are cut into `nchunks` nearly equal chunks
 * (the first count % nchunks chunks get one more). */
void sched_chunk(size_t count, int nchunks, int c, size_t *offset, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_SCHEDULE_H_ */
