/* any_source.c -- which peer a receive from WEFT_ANY_SOURCE takes its message from.
 *
 * Every p2p message travels behind a token that names its tag, dtype and count (collectives/p2p.c),
 * and each direction between two ranks is one ordered stream. So the next message a peer has for
 * this rank can be read off the head of that stream without taking it (exec_peek_p2p): the
 * receive watches the head of every peer's stream and takes the first that carries its tag, then
 * runs as an ordinary named receive from that peer, which takes that very token and checks count
 * and dtype against it. Only heads are looked at, so a sender's messages are never overtaken; a
 * head with another tag, or a collective's traffic, stays where it is.
 *
 * Turns go round the peers starting after the one matched last: messages that arrived within one
 * turn go round robin, so a sender that keeps sending cannot starve the others. Between turns the
 * receive yields the core, then sleeps a little longer each time, up to 1 ms: the streams give no
 * one thing to block on, since a peer not connected yet may appear at any time.
 *
 * A peer not connected yet is watched through the transport's connect_pending, which connects
 * without waiting (over TCP: a lower rank that has connected to us is taken, a higher one is
 * dialed), so every peer can reach the receive whatever the rank order. A peer that cannot be
 * connected (it is gone) counts as closed for the rest of the receive. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "collectives/executor.h"
#include "comm/comm.h"
#include "common/clock.h"

/* The longest sleep between two turns, and how many turns only yield before sleeping starts. */
#define MAX_NAP_US 1000
#define YIELD_TURNS 64

static void nap(int turn) {
  if (turn < YIELD_TURNS) {
    sched_yield();
    return;
  }
  long us = (long)(turn - YIELD_TURNS + 1) * 10;
  if (us > MAX_NAP_US) us = MAX_NAP_US;
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

/* The connection to `peer` if there is one, or one the peer has started (*conn NULL: neither). */
static weft_result_t watch(weft_comm_t *c, int peer, conn_t **conn) {
  *conn = c->conns[peer];
  if (*conn) return WEFT_SUCCESS;
  transport_t *t = c->transports[c->via[peer]];
  if (!t || !t->ops->connect_pending) return WEFT_SUCCESS;
  WEFT_CHECK(t->ops->connect_pending(
      t, peer, c->peer_addrs[c->via[peer]] + (size_t)peer * t->ops->addr_size, &c->conns[peer]));
  *conn = c->conns[peer];
  return WEFT_SUCCESS;
}

/* `unreached` (one byte per rank) marks the peers that could not be connected. */
static weft_result_t match(weft_comm_t *c, int tag, size_t count, unsigned char *unreached,
                           int *peer) {
  int n = c->nranks, timeout = c->config.timeout_ms;
  int64_t start = clock_now_ms();
  for (int turn = 0;; turn++) {
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
      return WEFT_ERR(WEFT_ERR_ABORTED,
                      "rank %d: receive from any source (tag %d): the communicator was aborted "
                      "(weft_comm_abort): this call gave up",
                      c->rank, tag);
    int open = 0;
    for (int k = 1; k <= n; k++) {
      int p = (c->any_last + k) % n;
      if (p == c->rank || unreached[p]) continue;
      conn_t *conn;
      weft_result_t res = watch(c, p, &conn);
      /* Gone or unreachable counts as closed; anything else (a job token that differs, an
       * abort, no memory) is this receive's failure. */
      if (res != WEFT_SUCCESS && res != WEFT_ERR_REMOTE && res != WEFT_ERR_SYSTEM &&
          res != WEFT_ERR_TIMEOUT)
        return err_context(res, "rank %d: receive from any source", c->rank);
      if (res != WEFT_SUCCESS) {
        unreached[p] = 1; /* gone, like a closed connection; the others may still send */
        continue;
      }
      if (!conn) {
        open++; /* it may still connect */
        continue;
      }
      int state = TRANSPORT_PEEK_EMPTY, got_tag = 0;
      weft_dtype_t dtype;
      size_t got_count;
      WEFT_CHECK_CTX(exec_peek_p2p(conn, &state, &got_tag, &dtype, &got_count),
                     "rank %d: receive from any source", c->rank);
      if (state == TRANSPORT_PEEK_CLOSED) continue;
      open++;
      if (state == TRANSPORT_PEEK_READY && got_tag == tag) {
        c->any_last = p;
        *peer = p;
        return WEFT_SUCCESS;
      }
    }
    if (open == 0)
      return WEFT_ERR(WEFT_ERR_REMOTE,
                      "rank %d: receive from any source (tag %d, %zu elements): every other rank "
                      "has closed its connection or cannot be reached (did they exit or fail?)",
                      c->rank, tag, count);
    int64_t waited = clock_now_ms() - start;
    if (waited >= timeout) {
      int gone = 0, first = -1;
      for (int p = 0; p < n; p++)
        if (unreached[p] && gone++ == 0) first = p;
      char why[96] = "";
      if (gone > 0)
        snprintf(why, sizeof why, " (%d rank(s) could not be connected, rank %d first: gone?)",
                 gone, first);
      return WEFT_ERR(WEFT_ERR_TIMEOUT,
                      "rank %d: receive from any source (tag %d, %zu elements): no message with "
                      "that tag arrived from any rank within %d ms (WEFT_TIMEOUT_MS)%s: is a rank "
                      "sending it?",
                      c->rank, tag, count, (int)waited, why);
    }
    nap(turn);
  }
}

weft_result_t comm_match_any_source(weft_comm_t *c, int tag, size_t count, int *peer) {
  unsigned char *unreached = calloc((size_t)c->nranks, 1);
  if (!unreached)
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: receive from any source: out of memory", c->rank);
  weft_result_t res = match(c, tag, count, unreached, peer);
  free(unreached);
  return res;
}
