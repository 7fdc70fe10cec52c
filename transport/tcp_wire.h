/* tcp_wire.h -- internal: the TCP transport's handshake messages and their byte layout.
 *
 *   connector -> acceptor  hello: magic, version, comm id, ranks, lane, lanes, token flag, Nc
 *   acceptor -> connector  ack: magic, status; with TCP_ACK_PROVE also Ns and
 *                          HMAC(token, "weft accept" || hello[0..32) || Nc || Ns)
 *   connector -> acceptor  (PROVE only) proof: magic, status (OK, or BAD_TOKEN when the
 *                          acceptor's MAC was wrong), HMAC(token, "weft connect" || ...)
 * hello[0..32) names the communicator, both ranks and the lane, so a proof recorded on one
 * connection is worth nothing on another; Ns is fresh for every connection, so a replayed hello
 * and proof fail too. The first 8 bytes of hello and ack never change between versions, so two
 * versions can still tell each other that they differ. */
#ifndef WEFT_TRANSPORT_TCP_WIRE_H_
#define WEFT_TRANSPORT_TCP_WIRE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TCP_WIRE_MAGIC 0x57454654u /* "WEFT" */
/* 2: the job token's flag and nonces. */
#define TCP_WIRE_VERSION 2
#define TCP_HELLO_PREFIX 8 /* magic and version: read first, so any version can be told apart */
#define TCP_HELLO_CONTEXT 32 /* the part of the hello the token's MACs cover */
#define TCP_NONCE_BYTES 32
#define TCP_MAC_BYTES 32
#define TCP_HELLO_BYTES (TCP_HELLO_CONTEXT + 4 + TCP_NONCE_BYTES)
#define TCP_ACK_BYTES 8
#define TCP_PROVE_BYTES (TCP_NONCE_BYTES + TCP_MAC_BYTES) /* after a PROVE ack */
#define TCP_PROOF_BYTES (8 + TCP_MAC_BYTES)

/* Sent by the connecting (lower) rank on each of its sockets. */
typedef struct {
  uint64_t comm_id;
  int32_t from_rank;
  int32_t to_rank;
  int32_t lane;
  int32_t nlanes;
  int32_t has_token; /* the connector has a job token; nonce is Nc */
  unsigned char nonce[TCP_NONCE_BYTES];
} tcp_hello_t;

/* The accepting rank's answer. */
enum {
  TCP_ACK_OK = 0,
  TCP_ACK_GARBAGE = 1, /* not a weft hello at all: dropped without an answer */
  TCP_ACK_VERSION = 2,
  TCP_ACK_OTHER_COMM = 3,
  TCP_ACK_BAD_RANK = 4,
  TCP_ACK_BAD_LANES = 5,
  TCP_ACK_PROVE = 6,            /* the hello is fine: Ns and MAC follow, the proof is due */
  TCP_ACK_NO_TOKEN = 7,         /* the acceptor has a job token, the hello has none */
  TCP_ACK_UNEXPECTED_TOKEN = 8, /* the hello has a job token, the acceptor has none */
  TCP_ACK_BAD_TOKEN = 9,        /* in a proof: the acceptor's MAC was wrong */
};

void tcp_hello_encode(unsigned char out[TCP_HELLO_BYTES], const tcp_hello_t *h);
/* Decodes and checks a hello against what this rank expects; returns a TCP_ACK_* status. */
int32_t tcp_hello_decode(const unsigned char in[TCP_HELLO_BYTES], tcp_hello_t *h,
                         uint64_t my_comm_id, int my_rank, int nranks, int my_nlanes);
/* The version in a hello's first TCP_HELLO_PREFIX bytes, or -1 when the magic is not ours. */
int64_t tcp_hello_version(const unsigned char in[TCP_HELLO_PREFIX]);
void tcp_ack_encode(unsigned char out[TCP_ACK_BYTES], int32_t status);
/* The status, or TCP_ACK_GARBAGE when the bytes are not an ack. */
int32_t tcp_ack_decode(const unsigned char in[TCP_ACK_BYTES]);
const char *tcp_ack_reason(int32_t status);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TRANSPORT_TCP_WIRE_H_ */
