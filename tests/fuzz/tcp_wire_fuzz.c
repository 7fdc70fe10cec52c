/* tcp_wire_fuzz.c -- the TCP transport's handshake (transport/tcp_wire.c) as the accepting rank
 * reads it: a hello it accepts names a lower rank of this communicator on one of the agreed
 * lanes and re-encodes to the very bytes that came; an ack decodes to a status that has a reason.
 *
 * Input: 8 bytes of this rank's view (rank, ranks, lanes, which comm id), then a 32-byte hello,
 * then an 8-byte ack. */
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "transport/tcp_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8 + TCP_HELLO_BYTES) return 0;
  int nranks = 1 + data[0] % 64;
  int my_rank = data[1] % nranks;
  int nlanes = 1 + data[2] % 16;
  uint64_t comm_id = 0;
  memcpy(&comm_id, data + 4, 4);
  const uint8_t *hello = data + 8;

  tcp_hello_t h;
  int32_t st = tcp_hello_decode(hello, &h, comm_id, my_rank, nranks, nlanes);
  FUZZ_CHECK(st >= TCP_ACK_OK && st <= TCP_ACK_BAD_LANES);
  FUZZ_CHECK(strcmp(tcp_ack_reason(st), "unknown reason") != 0);
  if (st == TCP_ACK_OK) {
    FUZZ_CHECK(h.comm_id == comm_id && h.to_rank == my_rank);
    FUZZ_CHECK(h.from_rank >= 0 && h.from_rank < my_rank);
    FUZZ_CHECK(h.nlanes == nlanes && h.lane >= 0 && h.lane < nlanes);
    unsigned char again[TCP_HELLO_BYTES];
    tcp_hello_encode(again, &h);
    FUZZ_CHECK(memcmp(again, hello, TCP_HELLO_BYTES) == 0);
  }

  if (size >= 8 + TCP_HELLO_BYTES + TCP_ACK_BYTES) {
    const uint8_t *ack = hello + TCP_HELLO_BYTES;
    int32_t a = tcp_ack_decode(ack);
    FUZZ_CHECK(tcp_ack_reason(a) != NULL);
    if (a != TCP_ACK_GARBAGE) {
      unsigned char again[TCP_ACK_BYTES];
      tcp_ack_encode(again, a);
      FUZZ_CHECK(memcmp(again, ack, TCP_ACK_BYTES) == 0);
    }
  }
  return 0;
}
