/* call_desc.c -- encodes, decodes and checks call descriptions (see call_desc.h). */
#include "collectives/call_desc.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"

#define CALL_DESC_MAGIC 0x57464344u /* "WFCD" */

void call_desc_encode(unsigned char *p, const coll_desc_t *d) {
  uint32_t w[4] = {CALL_DESC_MAGIC, (uint32_t)d->kind, (uint32_t)d->dtype, (uint32_t)d->op};
  uint64_t q[2] = {d->seq, (uint64_t)d->count};
  int32_t root = d->root, algo = (int32_t)d->algo;
  memcpy(p, w, sizeof w);
  memcpy(p + 16, q, sizeof q);
  memcpy(p + 32, &root, sizeof root);
  memcpy(p + 36, &algo, sizeof algo);
}

int call_desc_decode(const unsigned char *p, coll_desc_t *d) {
  uint32_t w[4];
  uint64_t q[2];
  int32_t root, algo;
  memcpy(w, p, sizeof w);
  memcpy(q, p + 16, sizeof q);
  memcpy(&root, p + 32, sizeof root);
  memcpy(&algo, p + 36, sizeof algo);
  if (w[0] != CALL_DESC_MAGIC) return 0;
  d->kind = (weft_coll_t)w[1];
  d->algo = (weft_algo_t)algo;
  d->dtype = (weft_dtype_t)w[2];
  d->op = (weft_op_t)w[3];
  d->seq = q[0];
  d->count = (size_t)q[1];
  d->root = root;
  return 1;
}

static void describe(const coll_desc_t *d, char *buf, size_t cap) {
  snprintf(buf, cap, "%s #%llu (count %zu, %s, %s, root %d, %s)", weft_coll_name(d->kind),
           (unsigned long long)d->seq, d->count, weft_dtype_name(d->dtype), weft_op_name(d->op),
           d->root, weft_algo_name(d->algo));
}

weft_result_t call_desc_check(const unsigned char *in, const coll_desc_t *mine, int my_rank,
                              int peer) {
  coll_desc_t theirs;
  if (!call_desc_decode(in, &theirs))
    return WEFT_ERR(WEFT_ERR_REMOTE,
                    "rank %d sent bytes that are not a call description "
                    "(the previous collective probably failed there)",
                    peer);
  /* A receive is matched by the peer's send to this rank; everything else by the same call. */
  coll_desc_t expect = *mine;
  if (mine->kind == WEFT_COLL_RECV) {
    expect.kind = WEFT_COLL_SEND;
    expect.root = my_rank;
  }
  if (theirs.kind == expect.kind && theirs.seq == expect.seq && theirs.count == expect.count &&
      theirs.dtype == expect.dtype && theirs.op == expect.op && theirs.root == expect.root &&
      theirs.algo == expect.algo)
    return WEFT_SUCCESS;
  char a[160], b[160];
  describe(&theirs, a, sizeof a);
  describe(mine, b, sizeof b);
  return WEFT_ERR(WEFT_ERR_MISMATCH,
                  "rank %d called %s but this rank called %s: every rank must make the same "
                  "calls with the same count, dtype, op and root (and algorithm: WEFT_ALGO must "
                  "agree)",
                  peer, a, b);
}
