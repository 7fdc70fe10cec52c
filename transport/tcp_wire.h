/* tcp_wire.h -- internal: the TCP transport's handshake messages and their byte layout. */
#ifndef WEFT_TRANSPORT_TCP_WIRE_H_
#define WEFT_TRANSPORT_TCP_WIRE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TCP_WIRE_MAGIC 0x57454654u /* "WEFT" */
#define TCP_WIRE_VERSION 1
#define TCP_HELLO_BYTES 32
#define TCP_ACK_BYTES 8

/* Sent by the connecting (lower) rank on each of its sockets. */
typedef struct {
  uint64_t comm_id;
  int32_t from_rank;
  int32_t to_rank;
  int32_t lane;
  int32_t nlanes;
} tcp_hello_t;

/* The accepting rank's answer. */
enum {
  TCP_ACK_OK = 0,
  TCP_ACK_GARBAGE = 1, /* not a weft hello at all: dropped without an answer */
  TCP_ACK_VERSION = 2,
  TCP_ACK_OTHER_COMM = 3,
  TCP_ACK_BAD_RANK = 4,
  TCP_ACK_BAD_LANES = 5,
};

void tcp_hello_encode(unsigned char out[TCP_HELLO_BYTES], const tcp_hello_t *h);
/* Decodes and checks a hello against what this rank expects; returns a TCP_ACK_* status. */
int32_t tcp_hello_decode(const unsigned char in[TCP_HELLO_BYTES], tcp_hello_t *h,
                         uint64_t my_comm_id, int my_rank, int nranks, int my_nlanes);
void tcp_ack_encode(unsigned char out[TCP_ACK_BYTES], int32_t status);
/* The status, or TCP_ACK_GARBAGE when the bytes are not an ack. */
int32_t tcp_ack_decode(const unsigned char in[TCP_ACK_BYTES]);
const char *tcp_ack_reason(int32_t status);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TRANSPORT_TCP_WIRE_H_ */
