/* p2p_group.c -- point-to-point as groups: any sends and receives to any peers, issued together
 * and completed together (weft_p2p_group), each matched by peer and tag. weft_send and weft_recv
 * are groups of one, so every message between two ranks takes the same path and they all match
 * one another.
 *
 * A group is one schedule (p2p.c builds it) run by the executor, whose streams to different
 * peers and directions all progress at once: two ranks that both send first to each other, at
 * any size, do not wait on each other. Ops to one peer in one direction are put in tag order
 * (issue order among equal tags) on both sides, so they pair up by tag whatever order each side
 * listed them in; each message is preceded by a token with its tag, dtype and count, which the
 * receiver checks against its own op (executor.c), so a disagreement fails with both values
 * named instead of landing in the wrong buffer.
 *
 * Ops carry their own buffers and dtypes, so the schedule works in bytes over two windows: sends
 * at offsets from the lowest send buffer, receives from the lowest receive buffer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "collectives/algo_select.h"
#include "collectives/executor.h"
#include "comm/comm.h"

static weft_result_t check_op(const weft_comm_t *c, const weft_p2p_op_t *o, int i) {
  int rank = c->rank;
  if (o->kind != WEFT_COLL_SEND && o->kind != WEFT_COLL_RECV)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: p2p group op %d: kind %d is neither WEFT_COLL_SEND nor "
                    "WEFT_COLL_RECV",
                    rank, i, (int)o->kind);
  const char *name = weft_coll_name(o->kind);
  size_t esize = weft_dtype_size(o->dtype);
  if (esize == 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: p2p group op %d (%s): unknown dtype %d",
                    rank, i, name, (int)o->dtype);
  if (o->peer == WEFT_ANY_SOURCE)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: p2p group op %d (%s): peer WEFT_ANY_SOURCE is for a receive of its "
                    "own (weft_recv_any, or a group of that one op) on host buffers without a "
                    "stream: a group posts its ops together, and an op whose peer is not known "
                    "yet has no place in a pair's ordered stream",
                    rank, i, name);
  if (o->peer < 0 || o->peer >= c->nranks)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: p2p group op %d (%s): peer %d is out of range for a world of size "
                    "%d",
                    rank, i, name, o->peer, c->nranks);
  if (o->peer == rank)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: p2p group op %d: %s to itself", rank, i,
                    name);
  if (o->count > SIZE_MAX / esize)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: p2p group op %d (%s): count %zu overflows",
                    rank, i, name, o->count);
  if (o->count > 0 && !o->buf)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: p2p group op %d (%s to peer %d): buf is NULL (count %zu)", rank, i,
                    name, o->peer, o->count);
  return WEFT_SUCCESS;
}

weft_result_t comm_check_group(const weft_comm_t *c, const weft_p2p_op_t *ops, int nops) {
  WEFT_CHECK(comm_check_usable(c));
  if (nops < 0 || (nops > 0 && !ops))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: p2p group: %d ops at %p", c->rank, nops,
                    (const void *)ops);
  for (int i = 0; i < nops; i++) WEFT_CHECK(check_op(c, &ops[i], i));
  return WEFT_SUCCESS;
}

/* Whether the group's buffers are device memory; all of them must be of one kind. */
weft_result_t comm_group_device(weft_comm_t *c, const weft_p2p_op_t *ops, int nops, int *device) {
  *device = 0;
  int first = -1;
  for (int i = 0; i < nops && c->dev; i++) {
    if (ops[i].count == 0) continue;
    weft_call_t k = {.coll = ops[i].kind,
                     .sendbuf = ops[i].kind == WEFT_COLL_SEND ? ops[i].buf : NULL,
                     .recvbuf = ops[i].kind == WEFT_COLL_RECV ? ops[i].buf : NULL,
                     .count = ops[i].count,
                     .dtype = ops[i].dtype,
                     .root = ops[i].peer};
    int dev = 0;
    WEFT_CHECK_CTX(comm_buffers_kind(c, &k, &dev), "p2p group op %d", i);
    if (first >= 0 && dev != first)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "rank %d: p2p group: op %d's buffer is %s memory but an earlier op's is %s: "
                      "one group's buffers are all on the device or all on the host",
                      c->rank, i, dev ? "device" : "host", first ? "device" : "host");
    first = dev;
  }
  *device = first > 0;
  return WEFT_SUCCESS;
}

/* A lone receive from WEFT_ANY_SOURCE: checked as a named one, then matched to the peer whose
 * next message carries its tag (any_source.c), then run as a receive from that peer, whose token
 * check reports a count or dtype that disagrees. */
static weft_result_t recv_any_source(weft_comm_t *c, const weft_p2p_op_t *any, int *source) {
  WEFT_CHECK(comm_check_usable(c));
  if (c->nranks < 2)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: receive from any source on a communicator of one rank: no rank can "
                    "send to it",
                    c->rank);
  weft_p2p_op_t op = *any;
  op.peer = (c->rank + 1) % c->nranks; /* for the checks; replaced by the match */
  WEFT_CHECK(comm_check_group(c, &op, 1));
  int device = 0;
  WEFT_CHECK(comm_group_device(c, &op, 1, &device));
  if (device)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "rank %d: receive from any source into device memory: not supported (receive "
                    "into host memory, or name the peer)",
                    c->rank);
  weft_result_t res = comm_match_any_source(c, op.tag, op.count, &op.peer);
  if (res != WEFT_SUCCESS) {
    if (c->config.debug >= 1) fprintf(stderr, "weft: %s\n", err_last());
    /* As a named receive that gives up: the communicator is marked failed. */
    return res == WEFT_ERR_ABORTED ? res : comm_fail(c, res);
  }
  res = comm_p2p_group(c, &op, 1, NULL);
  if (res != WEFT_SUCCESS)
    return err_context(res, "receive from any source (tag %d), matched with rank %d", op.tag,
                       op.peer);
  if (source) *source = op.peer;
  return WEFT_SUCCESS;
}

weft_result_t comm_p2p_group(weft_comm_t *c, const weft_p2p_op_t *ops, int nops, int *source) {
  if (nops == 1 && ops && ops[0].kind == WEFT_COLL_RECV && ops[0].peer == WEFT_ANY_SOURCE)
    return recv_any_source(c, &ops[0], source);
  WEFT_CHECK(comm_check_group(c, ops, nops));
  int device = 0;
  WEFT_CHECK(comm_group_device(c, ops, nops, &device));
  if (nops == 0) return WEFT_SUCCESS;
  /* The two windows: from the lowest buffer of each direction to the end of the highest. */
  uintptr_t lo[2] = {UINTPTR_MAX, UINTPTR_MAX}, hi[2] = {0, 0};
  for (int i = 0; i < nops; i++) {
    int d = ops[i].kind == WEFT_COLL_RECV;
    size_t bytes = ops[i].count * weft_dtype_size(ops[i].dtype);
    if (bytes == 0) continue;
    uintptr_t a = (uintptr_t)ops[i].buf;
    if (a < lo[d]) lo[d] = a;
    if (a + bytes > hi[d]) hi[d] = a + bytes;
  }
  sched_p2p_t *list = malloc(sizeof *list * (size_t)nops);
  if (!list) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: p2p group: out of memory", c->rank);
  for (int i = 0; i < nops; i++) {
    int d = ops[i].kind == WEFT_COLL_RECV;
    size_t bytes = ops[i].count * weft_dtype_size(ops[i].dtype);
    list[i] = (sched_p2p_t){ops[i].kind == WEFT_COLL_SEND,
                            ops[i].peer,
                            ops[i].tag,
                            ops[i].dtype,
                            ops[i].count,
                            bytes,
                            bytes ? (size_t)((uintptr_t)ops[i].buf - lo[d]) : 0};
  }
  sched_args_t args = {.coll = WEFT_COLL_P2P_GROUP,
                       .rank = c->rank,
                       .nranks = c->nranks,
                       .root = -1,
                       .p2p = list,
                       .np2p = nops,
                       .p2p_send_bytes = hi[0] > lo[0] ? (size_t)(hi[0] - lo[0]) : 0,
                       .p2p_recv_bytes = hi[1] > lo[1] ? (size_t)(hi[1] - lo[1]) : 0};
  /* Bytes, not elements: the ops' dtypes differ. The sequence number only names the group in
   * messages: its tokens, not a call description, are what the peers check. */
  coll_desc_t d = {WEFT_COLL_P2P_GROUP, WEFT_ALGO_RING, c->groups, 0, WEFT_UINT8, WEFT_SUM, -1};
  c->groups++;
  schedule_t s;
  weft_result_t res = p2p_build(&s, &args);
  if (res == WEFT_SUCCESS)
    res = exec_run(&c->exec, &s, &d, hi[0] > lo[0] ? (const void *)lo[0] : NULL,
                   hi[1] > lo[1] ? (void *)lo[1] : NULL, device);
  sched_free(&s);
  free(list);
  if (res == WEFT_SUCCESS) return res;
  err_context(res, "rank %d: p2p group #%llu (%d ops)", c->rank, (unsigned long long)d.seq, nops);
  if (c->config.debug >= 1) fprintf(stderr, "weft: %s\n", err_last());
  return comm_fail(c, res);
}

/* weft_send and weft_recv through weft_call: a group of one. */
weft_result_t comm_p2p_single(weft_comm_t *c, const weft_call_t *k) {
  weft_p2p_op_t op = {k->coll,  k->coll == WEFT_COLL_SEND ? (void *)k->sendbuf : k->recvbuf,
                      k->count, k->dtype,
                      k->root,  0};
  int any = k->coll == WEFT_COLL_RECV && k->root == WEFT_ANY_SOURCE; /* else `source` is unread */
  return comm_p2p_group(c, &op, 1, any ? k->source : NULL);
}
