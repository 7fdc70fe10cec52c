/* tcp_accept.h -- internal: the TCP transport's acceptor: a rank's listening socket, the
 * connections accepted on it whose handshake is not done yet, and the peers' sockets it has
 * checked and keeps until tcp.c claims them.
 *
 * No connection can hold up another: every accepted socket is nonblocking, and one poll covers
 * the listener and every handshake in progress. A hello not complete within TCP_ACCEPT_DEADLINE_MS
 * of its accept, or a proof within TCP_ACCEPT_PROOF_MS of the challenge, is dropped, and at most
 * TCP_ACCEPT_SPARE + nranks * nlanes are kept at once (the oldest goes first, a challenged one
 * last), so silent or slow strangers cannot starve real peers of time or descriptors. Out of
 * descriptors, the acceptor drops a pending stranger or sheds the new connection through a reserve
 * descriptor instead of spinning. */
#ifndef WEFT_TRANSPORT_TCP_ACCEPT_H_
#define WEFT_TRANSPORT_TCP_ACCEPT_H_

#include <stdint.h>

#include "common/net.h"
#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A peer sends its hello right behind its connect and its proof right behind our challenge. */
#define TCP_ACCEPT_DEADLINE_MS 2000
/* Only a connector that named this communicator is challenged, and one dropped after it sent its
 * proof would take the socket for connected: the proof gets the old, longer bound. */
#define TCP_ACCEPT_PROOF_MS 5000
/* Handshakes in progress kept at once, beyond one per peer lane. */
#define TCP_ACCEPT_SPARE 64

typedef struct tcp_acceptor tcp_acceptor_t;

/* Listens on addr (port 0 picks one). token: the job token ("" = none), copied. */
weft_result_t tcp_acceptor_new(const net_addr_t *addr, int rank, int nranks, int nlanes,
                               uint64_t comm_id, const char *token, tcp_acceptor_t **out);
void tcp_acceptor_free(tcp_acceptor_t *a);
const net_addr_t *tcp_acceptor_addr(const tcp_acceptor_t *a);

/* Polls the listener, every handshake in progress and `extra_fd` (-1: none) for up to timeout_ms,
 * and advances whatever is ready: new connections, hellos, proofs, deadlines. *extra_revents
 * (may be NULL) gets extra_fd's events. Fails only when poll itself fails. */
weft_result_t tcp_acceptor_wait(tcp_acceptor_t *a, int extra_fd, int timeout_ms,
                                short *extra_revents);

/* The checked socket of `peer`'s lane, taken from the acceptor (blocking or not: the caller sets
 * it up), or -1 when it has not arrived. */
int tcp_acceptor_take(tcp_acceptor_t *a, int peer, int lane);
/* How many of `peer`'s lanes have arrived. */
int tcp_acceptor_arrived(const tcp_acceptor_t *a, int peer);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TRANSPORT_TCP_ACCEPT_H_ */
