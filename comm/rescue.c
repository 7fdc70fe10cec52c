/* rescue.c -- the survivors' channel (rescue.h): a TCP transport of its own, used only after a
 * failure, and one exchange round over it that tells which peers answered. */
#include "comm/rescue.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/env.h"
#include "common/clock.h"
#include "common/net.h"

/* Its own id, so that a hello meant for the traffic's TCP listener is refused here and back. */
static uint64_t rescue_id(uint64_t comm_id) {
  char text[48];
  snprintf(text, sizeof text, "%llx/rescue", (unsigned long long)comm_id);
  return boot_job_hash(text);
}

/* How long a step may wait for a peer. Telling a stopped (or hung) rank from a busy one takes a
 * wait: the active side of a connection waits A for the peer's answer to its hello. Connections
 * are made one peer after another, so a rank may reach us only after A per stopped rank before
 * us: the passive side, and a round's silence, wait up to the timeout plus that chain, lest a
 * live rank delayed by stopped ones be counted as failed with them. A killed rank costs nothing
 * of this: its listener refuses at once (probe_refused). */
static int active_ms(const weft_config_t *cfg) {
  int a = cfg->connect_timeout_ms < cfg->timeout_ms ? cfg->connect_timeout_ms : cfg->timeout_ms;
  return a < 5000 ? a : 5000;
}

static int chain_ms(const weft_comm_t *c) {
  int64_t w = (int64_t)c->config.timeout_ms + (int64_t)c->nranks * active_ms(&c->config);
  return w < INT32_MAX ? (int)w : INT32_MAX;
}

weft_result_t rescue_open(weft_comm_t *c, boot_record_t *mine) {
  c->rescue_config = c->config;
  c->rescue_config.nsocks = 1; /* a few bytes per round: striping buys nothing */
  /* tcp.c, once peers listen: the connecting side waits min(connect timeout, 5 s), the accepting
   * side the timeout. */
  c->rescue_config.connect_timeout_ms = active_ms(&c->config);
  c->rescue_config.timeout_ms = chain_ms(c);
  transport_params_t tp = {c->rank,   c->nranks,     rescue_id(c->comm_id),
                           &c->rescue_config, &c->advertise, NULL};
  WEFT_CHECK_CTX(tcp_transport_ops.create(&tp, &c->rescue), "rank %d: the rescue listener",
                 c->rank);
  tcp_transport_ops.local_addr(c->rescue, mine->rescue);
  return WEFT_SUCCESS;
}

weft_result_t rescue_attach(weft_comm_t *c, const boot_record_t *all) {
  const size_t size = tcp_transport_ops.addr_size;
  c->rescue_addrs = calloc((size_t)c->nranks, size);
  c->rescue_conns = calloc((size_t)c->nranks, sizeof *c->rescue_conns);
  if (!c->rescue_addrs || !c->rescue_conns)
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory creating the communicator");
  for (int r = 0; r < c->nranks; r++) memcpy(c->rescue_addrs + (size_t)r * size, all[r].rescue, size);
  /* Every rank published after it started listening: a refused connection means a dead peer. */
  c->rescue->peers_listening = 1;
  return WEFT_SUCCESS;
}

void rescue_close(weft_comm_t *c, int abortive) {
  for (int p = 0; c->rescue_conns && p < c->nranks; p++)
    if (c->rescue_conns[p]) c->rescue_conns[p]->ops->close(c->rescue_conns[p], abortive);
  if (c->rescue) {
    c->rescue->aborting = abortive;
    c->rescue->ops->destroy(c->rescue);
  }
  free(c->rescue_conns);
  free(c->rescue_addrs);
  c->rescue = NULL;
  c->rescue_conns = NULL;
  c->rescue_addrs = NULL;
}

/* Whether the listener at `addr` refuses connections: its process is gone (or closed its
 * communicator). One attempt, at most 1 s; a connection that opens is closed at once, which the
 * peer's listener takes as a stray client. */
static int probe_refused(const net_addr_t *addr) {
  int s = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return 0;
  int err = 0;
  if (connect(s, (const struct sockaddr *)&addr->ss, addr->len) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      struct pollfd pfd = {s, POLLOUT, 0};
      socklen_t len = sizeof err;
      err = poll(&pfd, 1, 1000) == 1 && getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) == 0
                ? err
                : 0;
    }
  }
  close(s);
  return err == ECONNREFUSED;
}

typedef struct {
  xfer_t send, recv;
  int pending; /* posted, not both complete */
} rescue_peer_t;

/* Gives up on `peer` for good: its connection goes, and the reason is kept if it is the first. */
static void drop(weft_comm_t *c, int peer, rescue_peer_t *st, unsigned char *lost, char *why,
                 size_t cap) {
  if (why[0] == '\0') snprintf(why, cap, "rank %d: %s", peer, err_last());
  lost[peer] = 1;
  st[peer].pending = 0;
  if (c->rescue_conns[peer]) c->rescue_conns[peer]->ops->close(c->rescue_conns[peer], 1);
  c->rescue_conns[peer] = NULL;
}

weft_result_t rescue_exchange(weft_comm_t *c, const unsigned char *talk, const void *mine,
                              size_t bytes, void *theirs, unsigned char *lost, char *why,
                              size_t cap) {
  const int n = c->nranks;
  const size_t size = tcp_transport_ops.addr_size;
  rescue_peer_t *st = calloc((size_t)n, sizeof *st);
  conn_t **waiting = calloc((size_t)n, sizeof *waiting);
  if (!st || !waiting) {
    free(st);
    free(waiting);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory");
  }
  /* The peers this rank connects to first, then those that connect to it, each in rank order.
   * A connect serves the listener while it waits, so no two ranks wait on one another, and no rank
   * waits on an accepting peer before it has made its own connections (see chain_ms). */
  for (int pass = 0; pass < 2; pass++) {
    for (int p = 0; p < n; p++) {
      if (p == c->rank || !talk[p] || (pass == 0) != (p > c->rank)) continue;
      conn_t **conn = &c->rescue_conns[p];
      const unsigned char *addr = c->rescue_addrs + (size_t)p * size;
      if (!*conn && pass == 1 && probe_refused((const net_addr_t *)addr)) {
        WEFT_ERR(WEFT_ERR_REMOTE, "its listener refuses connections (the process is gone)");
        drop(c, p, st, lost, why, cap);
        continue;
      }
      if (!*conn && c->rescue->ops->connect(c->rescue, p, addr, conn) != WEFT_SUCCESS) {
        drop(c, p, st, lost, why, cap);
        continue;
      }
      if ((*conn)->ops->post_send(*conn, mine, bytes, &st[p].send) != WEFT_SUCCESS ||
          (*conn)->ops->post_recv(*conn, (char *)theirs + (size_t)p * bytes, bytes,
                                  &st[p].recv) != WEFT_SUCCESS) {
        drop(c, p, st, lost, why, cap);
        continue;
      }
      st[p].pending = 1;
    }
  }
  int64_t last = clock_now_ms();
  for (;;) {
    int nwait = 0, progressed = 0;
    for (int p = 0; p < n; p++) {
      if (!st[p].pending) continue;
      conn_t *conn = c->rescue_conns[p];
      if (conn->ops->progress(conn, &progressed) != WEFT_SUCCESS) {
        drop(c, p, st, lost, why, cap);
        continue;
      }
      if (st[p].send.complete && st[p].recv.complete)
        st[p].pending = 0;
      else
        waiting[nwait++] = conn;
    }
    if (nwait == 0) break;
    int64_t now = clock_now_ms();
    if (progressed) last = now;
    if (now - last > chain_ms(c)) {
      for (int p = 0; p < n; p++) {
        if (!st[p].pending) continue;
        WEFT_ERR(WEFT_ERR_TIMEOUT,
                 "no answer within %d ms (WEFT_TIMEOUT_MS, plus the time ranks stopped before it "
                 "may have delayed it)",
                 chain_ms(c));
        drop(c, p, st, lost, why, cap);
      }
      break;
    }
    /* A wait error only means we look again: progress() reports the connection's own error. */
    (void)waiting[0]->ops->wait(waiting, nwait, 100);
  }
  free(st);
  free(waiting);
  return WEFT_SUCCESS;
}
