/* tcp_wire.c -- encodes and checks the TCP transport's handshake (little-endian on the wire). */
#include "transport/tcp_wire.h"

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}

static void put64(unsigned char *p, uint64_t v) {
  put32(p, (uint32_t)v);
  put32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get64(const unsigned char *p) {
  return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* Layout: magic, version, comm id, from, to, lane, nlanes, token flag, nonce. */
void tcp_hello_encode(unsigned char out[TCP_HELLO_BYTES], const tcp_hello_t *h) {
  put32(out, TCP_WIRE_MAGIC);
  put32(out + 4, TCP_WIRE_VERSION);
  put64(out + 8, h->comm_id);
  put32(out + 16, (uint32_t)h->from_rank);
  put32(out + 20, (uint32_t)h->to_rank);
  put32(out + 24, (uint32_t)h->lane);
  put32(out + 28, (uint32_t)h->nlanes);
  put32(out + 32, (uint32_t)h->has_token);
  for (int i = 0; i < TCP_NONCE_BYTES; i++) out[36 + i] = h->nonce[i];
}

int64_t tcp_hello_version(const unsigned char in[TCP_HELLO_PREFIX]) {
  if (get32(in) != TCP_WIRE_MAGIC) return -1;
  return get32(in + 4);
}

int32_t tcp_hello_decode(const unsigned char in[TCP_HELLO_BYTES], tcp_hello_t *h,
                         uint64_t my_comm_id, int my_rank, int nranks, int my_nlanes) {
  if (get32(in) != TCP_WIRE_MAGIC) return TCP_ACK_GARBAGE;
  if (get32(in + 4) != TCP_WIRE_VERSION) return TCP_ACK_VERSION;
  h->comm_id = get64(in + 8);
  h->from_rank = (int32_t)get32(in + 16);
  h->to_rank = (int32_t)get32(in + 20);
  h->lane = (int32_t)get32(in + 24);
  h->nlanes = (int32_t)get32(in + 28);
  uint32_t flag = get32(in + 32);
  if (flag > 1) return TCP_ACK_GARBAGE; /* 0 or 1 only, so a hello re-encodes to its bytes */
  h->has_token = (int)flag;
  for (int i = 0; i < TCP_NONCE_BYTES; i++) h->nonce[i] = in[36 + i];
  if (h->comm_id != my_comm_id) return TCP_ACK_OTHER_COMM;
  if (h->to_rank != my_rank || h->from_rank < 0 || h->from_rank >= nranks ||
      h->from_rank >= my_rank)
    return TCP_ACK_BAD_RANK;
  if (h->nlanes != my_nlanes || h->lane < 0 || h->lane >= my_nlanes) return TCP_ACK_BAD_LANES;
  return TCP_ACK_OK;
}

void tcp_ack_encode(unsigned char out[TCP_ACK_BYTES], int32_t status) {
  put32(out, TCP_WIRE_MAGIC);
  put32(out + 4, (uint32_t)status);
}

int32_t tcp_ack_decode(const unsigned char in[TCP_ACK_BYTES]) {
  if (get32(in) != TCP_WIRE_MAGIC) return TCP_ACK_GARBAGE;
  return (int32_t)get32(in + 4);
}

const char *tcp_ack_reason(int32_t status) {
  switch (status) {
    case TCP_ACK_OK: return "ok";
    case TCP_ACK_GARBAGE: return "the answer was not weft's protocol";
    case TCP_ACK_VERSION: return "it speaks another version of weft's protocol";
    case TCP_ACK_OTHER_COMM: return "it belongs to another communicator or job";
    case TCP_ACK_BAD_RANK: return "the ranks in the handshake do not match";
    case TCP_ACK_BAD_LANES:
      return "WEFT_NSOCKS differs between the two ranks (set it the same everywhere)";
    case TCP_ACK_NO_TOKEN:
      return "it requires a job token and this rank has none (set WEFT_JOB_TOKEN alike on every "
             "rank)";
    case TCP_ACK_UNEXPECTED_TOKEN:
      return "this rank has a job token but it has none (set WEFT_JOB_TOKEN alike on every rank, "
             "or on none)";
    case TCP_ACK_BAD_TOKEN: return "it does not know this job's token";
    case TCP_ACK_PROVE:
      return "it asks for a job token and this rank has none (set WEFT_JOB_TOKEN alike on every "
             "rank)";
    default: return "unknown reason";
  }
}
