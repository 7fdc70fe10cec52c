/* call_desc_fuzz.c -- the check of the call description a peer sends ahead of a collective's
 * data (collectives/call_desc.c).
 *
 * Input: this rank's call as 40 bytes of description, then the 40 bytes that came from the peer
 * (a description or anything else: the peer's previous collective may have failed mid-stream).
 * The check passes exactly when the peer's call is this one (a receive: the peer's send to this
 * rank); otherwise it fails with WEFT_ERR_REMOTE or WEFT_ERR_MISMATCH and a message naming the
 * peer, however wild the peer's kind, dtype, op or algorithm values. A description decodes and
 * re-encodes to the same bytes. */
#include <string.h>

#include "collectives/call_desc.h"
#include "common/error.h"
#include "tests/fuzz/fuzz.h"

#define MY_RANK 2
#define PEER 1

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 * CALL_DESC_BYTES) return 0;
  coll_desc_t mine;
  if (!call_desc_decode(data, &mine)) return 0;
  const uint8_t *theirs_bytes = data + CALL_DESC_BYTES;

  unsigned char again[CALL_DESC_BYTES];
  call_desc_encode(again, &mine);
  FUZZ_CHECK(memcmp(again, data, CALL_DESC_BYTES) == 0);

  /* The description this rank would have to receive for the check to pass. */
  coll_desc_t expect = mine;
  if (mine.kind == WEFT_COLL_RECV) {
    expect.kind = WEFT_COLL_SEND;
    expect.root = MY_RANK;
  }
  unsigned char matching[CALL_DESC_BYTES];
  call_desc_encode(matching, &expect);
  FUZZ_CHECK(call_desc_check(matching, &mine, MY_RANK, PEER) == WEFT_SUCCESS);

  coll_desc_t theirs;
  int is_desc = call_desc_decode(theirs_bytes, &theirs);
  err_clear();
  weft_result_t res = call_desc_check(theirs_bytes, &mine, MY_RANK, PEER);
  if (!is_desc) {
    FUZZ_CHECK(res == WEFT_ERR_REMOTE);
  } else {
    call_desc_encode(again, &theirs);
    FUZZ_CHECK(memcmp(again, theirs_bytes, CALL_DESC_BYTES) == 0);
    int same = memcmp(theirs_bytes, matching, CALL_DESC_BYTES) == 0;
    FUZZ_CHECK(same ? res == WEFT_SUCCESS : res == WEFT_ERR_MISMATCH);
  }
  if (res != WEFT_SUCCESS) FUZZ_CHECK(strstr(err_last(), "rank 1 ") != NULL);
  return 0;
}
