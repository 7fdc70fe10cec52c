/* rescue.c -- the survivors' channel (rescue.h): a TCP transport of its own, used only after a
 * failure, and one exchange round over it that tells which peers answered. */
#include "comm/rescue.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
 * wait: the connecting side of a connection waits A for the peer's answer to its hello. A rank
 * makes its own connections first, one after another, so a live peer may reach us only after A
 * per stopped rank it tried before us: the accepting side waits for all its peers at once, up to
 * n x A. A round's silence may then last that, plus A per stopped rank this side connected to,
 * plus the timeout itself, before a live rank delayed by stopped ones would be counted as failed
 * with them. A killed rank costs nothing of this: its listener refuses at once (probe_refused). */
static int active_ms(const weft_config_t *cfg) {
  int a = cfg->connect_timeout_ms < cfg->timeout_ms ? cfg->connect_timeout_ms : cfg->timeout_ms;
  return a < 5000 ? a : 5000;
}

static int clamp_ms(int64_t ms) { return ms < INT32_MAX ? (int)ms : INT32_MAX; }

static int passive_ms(const weft_comm_t *c) {
  return clamp_ms((int64_t)c->nranks * active_ms(&c->config));
}

static int silence_ms(const weft_comm_t *c) {
  return clamp_ms((int64_t)c->config.timeout_ms + 2 * (int64_t)passive_ms(c));
}

weft_result_t rescue_open(weft_comm_t *c, boot_record_t *mine) {
  c->rescue_config = c->config;
  c->rescue_config.nsocks = 1; /* a few bytes per round: striping buys nothing */
  /* tcp.c, once peers listen, waits min(connect timeout, timeout, 5 s) on the connecting side,
   * which is A; the accepting side's timeout is set per attempt (rescue_exchange). */
  c->rescue_config.connect_timeout_ms = active_ms(&c->config);
  c->rescue_config.timeout_ms = active_ms(&c->config);
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
 * communicator). At most 1 s (net_connect_listening); a connection that opens is closed at
 * once, which the peer's listener takes as a stray client. */
static int probe_refused(const net_addr_t *addr) {
  int fd;
  weft_result_t r = net_connect_listening(addr, 1000, &fd);
  if (r == WEFT_SUCCESS) close(fd);
  return r == WEFT_ERR_REMOTE;
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

/* Posts this round's message to `peer` and its answer, and sends what it can now. */
static void post(weft_comm_t *c, int peer, rescue_peer_t *st, const void *mine, size_t bytes,
                 void *theirs, unsigned char *lost, char *why, size_t cap) {
  conn_t *conn = c->rescue_conns[peer];
  int progressed = 0;
  if (conn->ops->post_send(conn, mine, bytes, &st[peer].send) != WEFT_SUCCESS ||
      conn->ops->post_recv(conn, (char *)theirs + (size_t)peer * bytes, bytes,
                           &st[peer].recv) != WEFT_SUCCESS ||
      conn->ops->progress(conn, &progressed) != WEFT_SUCCESS) {
    drop(c, peer, st, lost, why, cap);
    return;
  }
  st[peer].pending = 1;
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
  /* First the peers this rank connects to, in rank order: a connect serves the listener while it
   * waits, so no two ranks wait on one another. Then those that connect to it, all at once: short
   * accepting attempts in turn until each has come or passive_ms has passed, so that one stopped
   * peer does not hold up the others. Each message goes out as soon as its connection is made. */
  for (int p = c->rank + 1; p < n; p++) {
    if (!talk[p]) continue;
    if (!c->rescue_conns[p] &&
        c->rescue->ops->connect(c->rescue, p, c->rescue_addrs + (size_t)p * size,
                                &c->rescue_conns[p]) != WEFT_SUCCESS) {
      drop(c, p, st, lost, why, cap);
      continue;
    }
    post(c, p, st, mine, bytes, theirs, lost, why, cap);
  }
  int64_t until = clock_now_ms() + passive_ms(c);
  c->rescue_config.timeout_ms = 50; /* one accepting attempt */
  for (int p = 0; p < c->rank; p++) {
    if (!talk[p] || c->rescue_conns[p]) continue;
    if (probe_refused((const net_addr_t *)(c->rescue_addrs + (size_t)p * size))) {
      WEFT_ERR(WEFT_ERR_REMOTE, "its listener refuses connections (the process is gone)");
      drop(c, p, st, lost, why, cap);
    }
  }
  for (;;) {
    int missing = 0;
    for (int p = 0; p < c->rank; p++) {
      if (!talk[p] || lost[p] || st[p].pending) continue;
      weft_result_t r = WEFT_SUCCESS;
      if (!c->rescue_conns[p])
        r = c->rescue->ops->connect(c->rescue, p, c->rescue_addrs + (size_t)p * size,
                                    &c->rescue_conns[p]);
      if (r == WEFT_SUCCESS)
        post(c, p, st, mine, bytes, theirs, lost, why, cap);
      else if (r != WEFT_ERR_TIMEOUT || clock_now_ms() >= until)
        drop(c, p, st, lost, why, cap);
      else
        missing++;
    }
    if (missing == 0) break;
  }
  c->rescue_config.timeout_ms = active_ms(&c->config);
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
    if (now - last > silence_ms(c)) {
      for (int p = 0; p < n; p++) {
        if (!st[p].pending) continue;
        WEFT_ERR(WEFT_ERR_TIMEOUT,
                 "no answer within %d ms (WEFT_TIMEOUT_MS, plus the time ranks stopped before it "
                 "may have delayed it)",
                 silence_ms(c));
        drop(c, p, st, lost, why, cap);
      }
      break;
    }
    /* A wait error only means we look again: progress() reports the connection's own error. */
    (void)waiting[0]->ops->wait(waiting, nwait, 100, c->config.spin_us);
  }
  free(st);
  free(waiting);
  return WEFT_SUCCESS;
}
