/* call_desc.h -- internal: the call description that goes ahead of a collective's data on every
 * stream, and the check of the one a peer sent.
 *
 * 40 bytes: magic "WFCD", kind, dtype, op (u32), seq, count (u64), root, algo (i32), in the
 * host's byte order (every rank of a job runs the same build on the same architecture). Apart
 * from the executor so that the bytes a peer sent can be checked, and fuzzed
 * (tests/fuzz/call_desc_fuzz.c), without a communicator. */
#ifndef WEFT_COLLECTIVES_CALL_DESC_H_
#define WEFT_COLLECTIVES_CALL_DESC_H_

#include <stddef.h>
#include <stdint.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CALL_DESC_BYTES 40

/* What every rank must agree on; travels in the header. */
typedef struct {
  weft_coll_t kind;
  weft_algo_t algo; /* the algorithm chosen: ranks that chose differently must not exchange data */
  uint64_t seq;     /* collectives (or, for send/recv, messages with this peer) before this one */
  size_t count;
  weft_dtype_t dtype;
  weft_op_t op; /* WEFT_SUM where the collective has none */
  int root;     /* -1 where the collective has none */
} coll_desc_t;

void call_desc_encode(unsigned char out[CALL_DESC_BYTES], const coll_desc_t *d);
/* 1 with *d filled when the bytes are a call description, else 0. */
int call_desc_decode(const unsigned char in[CALL_DESC_BYTES], coll_desc_t *d);
/* Checks the description `peer` sent against this rank's call `mine`: WEFT_SUCCESS when they
 * match (a receive matches the peer's send to my_rank), WEFT_ERR_REMOTE when the bytes are not a
 * description, WEFT_ERR_MISMATCH with both calls in the message otherwise. */
weft_result_t call_desc_check(const unsigned char in[CALL_DESC_BYTES], const coll_desc_t *mine,
                              int my_rank, int peer);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_CALL_DESC_H_ */
