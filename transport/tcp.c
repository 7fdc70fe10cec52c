/* tcp.c -- the TCP transport: several nonblocking sockets per peer, messages striped over them.
 *
 * Connection setup. The lower rank of a pair connects (WEFT_NSOCKS sockets, called lanes) and
 * sends a hello on each; the higher rank accepts. A rank waiting for its own connections keeps
 * accepting and acknowledging everyone else's, stashing them until their owner asks, so ranks may
 * connect to their peers in any order without deadlock. The acceptor (tcp_accept.c) serves every
 * handshake at once with a deadline and a cap, so a silent stranger cannot hold up a peer. The
 * hello carries a magic number, the protocol version, the communicator id and both ranks: a stray
 * client, another job or another communicator is refused with a reason instead of being mistaken
 * for a peer. With a job token (WEFT_JOB_TOKEN) both ends also prove that they know it before a
 * socket counts as a peer's (tcp_wire.h); a stranger is refused with a line on this rank's stderr.
 *
 * What the token does not cover: after the handshake the bytes are neither encrypted nor
 * authenticated, so someone who can read or inject on the network path can still see or alter a
 * connection (use a trusted network, or a VPN/IPsec). The shm transport needs no handshake of its
 * own: only processes on this host with access to its POSIX shared memory names can reach it,
 * the same user's processes by the objects' 0600 mode. The verbs transport exchanges its queue
 * pairs over an embedded TCP transport, so its connections go through this handshake too.
 *
 * Striping. Both ends apply the same rule to each message, using only its length and the count
 * of messages before it in that direction: a large message is cut into one part per lane, sent in
 * parallel; a small one goes whole on the next lane, round robin. Each lane is an in-order byte
 * stream, so the receiver finds every part where the sender put it. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/hmac.h"
#include "common/net.h"
#include "common/spin.h"
#include "transport/tcp_accept.h"
#include "transport/tcp_iov.h"
#include "transport/tcp_wire.h"
#include "transport/transport.h"

/* Below this many bytes per lane a message is not worth splitting: one send beats several. */
#define STRIPE_MIN_PART (64 * 1024)

typedef struct {
  int fd;
  xfer_part_t *send_head, *send_tail;
  xfer_part_t *recv_head, *recv_tail;
} lane_t;

/* Send staging slots lent to fused steps (lend_send), allocated on the first lend. */
typedef struct {
  char *mem;           /* nslots slots of slot_bytes */
  unsigned char *busy; /* per slot: lent or on the wire */
  size_t *len;         /* per slot: the length given to lend_send */
  int nslots;
  size_t slot_bytes;
  uint64_t next; /* slots lent so far: slot next % nslots is the next one lent */
} lend_pool_t;

typedef struct {
  conn_t base;
  struct tcp_transport *t;
  int nlanes;
  uint64_t sent_msgs, recv_msgs; /* messages posted so far, per direction: the striping rule */
  lane_t lanes[XFER_MAX_LANES];
  lend_pool_t pool;
} tcp_conn_t;

/* One lane of a connect that never blocks (a dial): each call moves it as far as it can go now. */
enum { DIAL_OPEN, DIAL_CONNECTING, DIAL_HELLO, DIAL_ACK, DIAL_DONE };

typedef struct {
  int fd; /* -1 before DIAL_CONNECTING */
  int phase;
  size_t sent;      /* hello bytes out */
  size_t got, need; /* ack bytes in, and how many this step needs */
  unsigned char raw[TCP_HELLO_BYTES];
  unsigned char ack[TCP_ACK_BYTES + TCP_PROVE_BYTES];
} dial_lane_t;

/* How often connect_pending moves a dial on: the peer answers when its own acceptor runs, so
 * looking at every turn of a receive from any source would only cost the receive system calls. */
#define DIAL_PERIOD_NS 50000

/* A connect to a higher rank started by a receive from any source, which cannot wait for a peer
 * that may be busy elsewhere: it goes on across calls until every lane is acknowledged. */
typedef struct {
  net_addr_t addr;
  char where[NET_ADDR_STRLEN]; /* addr as text, for messages */
  int restarts; /* lanes the peer dropped before acknowledging them, opened again */
  int64_t next_ns; /* connect_pending moves it on no sooner than this (DIAL_PERIOD_NS) */
  dial_lane_t lanes[XFER_MAX_LANES];
} dial_t;

typedef struct tcp_transport {
  transport_t base;
  int rank, nranks, nlanes;
  uint64_t comm_id;
  const weft_config_t *cfg;
  tcp_acceptor_t *acc; /* the listening socket and the peers' checked sockets not yet claimed */
  dial_t **dials;      /* per peer: a dial in progress, or NULL */
  int bound;           /* spin_bound_to_one_cpu() at creation: waits may poll busily first */
  int host_cpus;       /* the host's online CPUs, at creation */
} tcp_transport_t;

static weft_result_t tcp_create(const transport_params_t *p, transport_t **out) {
  tcp_transport_t *t = calloc(1, sizeof *t);
  if (!t) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "tcp transport: out of memory");
  t->base.ops = &tcp_transport_ops;
  t->rank = p->rank;
  t->nranks = p->nranks;
  t->nlanes = p->config->nsocks;
  t->comm_id = p->comm_id;
  t->cfg = p->config;
  t->bound = spin_bound_to_one_cpu();
  t->host_cpus = spin_host_cpus();
  /* Listen on the address the bootstrap advertises, on a port the kernel picks. */
  net_addr_t addr = *(const net_addr_t *)p->bootstrap_addr;
  net_addr_set_port(&addr, 0);
  t->dials = calloc((size_t)p->nranks, sizeof *t->dials);
  if (!t->dials) {
    free(t);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "tcp transport: out of memory");
  }
  weft_result_t res = tcp_acceptor_new(&addr, p->rank, p->nranks, t->nlanes, p->comm_id,
                                       p->config->job_token, &t->acc);
  if (res != WEFT_SUCCESS) {
    free(t->dials);
    free(t);
    return err_context(res, "rank %d: tcp transport", p->rank);
  }
  *out = &t->base;
  return WEFT_SUCCESS;
}

static void tcp_local_addr(const transport_t *base, void *blob) {
  const tcp_transport_t *t = (const tcp_transport_t *)base;
  memcpy(blob, tcp_acceptor_addr(t->acc), sizeof(net_addr_t));
}

static void dial_free(dial_t *d, int nlanes) {
  if (!d) return;
  for (int i = 0; i < nlanes; i++)
    if (d->lanes[i].fd >= 0) close(d->lanes[i].fd);
  free(d);
}

static void tcp_destroy(transport_t *base) {
  tcp_transport_t *t = (tcp_transport_t *)base;
  if (!t) return;
  for (int p = 0; p < t->nranks; p++) dial_free(t->dials[p], t->nlanes);
  free(t->dials);
  tcp_acceptor_free(t->acc);
  free(t);
}

static weft_result_t conn_alloc(tcp_transport_t *t, int peer, tcp_conn_t **out) {
  tcp_conn_t *c = calloc(1, sizeof *c);
  if (!c) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "tcp transport: out of memory");
  c->base.ops = &tcp_transport_ops;
  c->base.peer = peer;
  c->t = t;
  c->nlanes = t->nlanes;
  for (int i = 0; i < XFER_MAX_LANES; i++) c->lanes[i].fd = -1;
  *out = c;
  return WEFT_SUCCESS;
}

static void conn_free(tcp_conn_t *c) {
  for (int i = 0; i < c->nlanes; i++)
    if (c->lanes[i].fd >= 0) close(c->lanes[i].fd);
  free(c->pool.mem);
  free(c->pool.busy);
  free(c->pool.len);
  free(c);
}

/* The connector's half of the job token (tcp_wire.h): check the acceptor's MAC, then send our
 * proof. `prove_bytes` holds Ns and the acceptor's MAC. */
static weft_result_t prove(tcp_transport_t *t, int peer, int fd, const unsigned char *raw,
                           const unsigned char *prove_bytes, const char *where, int64_t deadline) {
  const unsigned char *nc = raw + TCP_HELLO_CONTEXT + 4, *ns = prove_bytes;
  unsigned char want[TCP_MAC_BYTES], proof[TCP_PROOF_BYTES] = {0};
  int left = (int)(deadline - clock_now_ms());
  if (left < 1000) left = 1000; /* the acceptor waits for this; let it arrive */
  hmac_challenge(t->cfg->job_token, HMAC_LABEL_ACCEPT, raw, TCP_HELLO_CONTEXT, nc, ns, want);
  if (!hmac_equal(want, prove_bytes + TCP_NONCE_BYTES, sizeof want)) {
    /* Say so, so that the acceptor logs the refusal too; no proof of ours goes to a party that
     * could not prove itself. */
    tcp_ack_encode(proof, TCP_ACK_BAD_TOKEN);
    (void)net_send_all(fd, proof, sizeof proof, left);
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "rank %d at %s does not know this job's token: WEFT_JOB_TOKEN differs between "
                    "the ranks (or something else listens at that address)",
                    peer, where);
  }
  tcp_ack_encode(proof, TCP_ACK_OK);
  hmac_challenge(t->cfg->job_token, HMAC_LABEL_CONNECT, raw, TCP_HELLO_CONTEXT, nc, ns, proof + 8);
  return net_send_all(fd, proof, sizeof proof, left);
}

/* Lane `lane`'s hello to `peer`, with a fresh nonce when there is a job token. */
static weft_result_t make_hello(tcp_transport_t *t, int peer, int lane, int nlanes,
                                unsigned char raw[TCP_HELLO_BYTES]) {
  int token = t->cfg->job_token[0] != '\0';
  tcp_hello_t hello = {t->comm_id, t->rank, peer, lane, nlanes, token, {0}};
  if (token && hmac_random(hello.nonce, sizeof hello.nonce) != 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "getrandom for the job token's nonce: %s", strerror(errno));
  tcp_hello_encode(raw, &hello);
  return WEFT_SUCCESS;
}

/* A lane's whole answer is in: refused, accepted, or (with a job token) to be proved. */
static weft_result_t on_ack(tcp_transport_t *t, int peer, int fd, const unsigned char *raw,
                            const unsigned char *ack, const char *where, int64_t deadline) {
  int token = t->cfg->job_token[0] != '\0';
  int32_t status = tcp_ack_decode(ack);
  if (status == TCP_ACK_PROVE && token)
    return prove(t, peer, fd, raw, ack + TCP_ACK_BYTES, where, deadline);
  if (status != TCP_ACK_OK)
    return WEFT_ERR(WEFT_ERR_MISMATCH, "rank %d at %s refused the connection: %s", peer, where,
                    tcp_ack_reason(status));
  /* A version 2 acceptor without a token refuses with UNEXPECTED_TOKEN instead. */
  if (token)
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "rank %d at %s accepted the connection without checking the job token", peer,
                    where);
  return WEFT_SUCCESS;
}

/* The lower rank's side: open every lane, send hellos, then wait for every ack while still
 * serving the listen socket so that higher ranks waiting on us are never stuck. */
static weft_result_t connect_active(tcp_transport_t *t, tcp_conn_t *c, const net_addr_t *peer_addr,
                                    int64_t deadline, int bound_ms) {
  char where[96];
  net_addr_str(peer_addr, where, sizeof where);
  int token = t->cfg->job_token[0] != '\0';
  /* Each lane's hello: its first TCP_HELLO_CONTEXT bytes and Nc are the MACs' input. */
  unsigned char raw[XFER_MAX_LANES][TCP_HELLO_BYTES];
  for (int lane = 0; lane < c->nlanes; lane++) {
    int left = (int)(deadline - clock_now_ms());
    if (left < 1) left = 1;
    /* Once every peer listens, a refusal means this one is gone: no retrying until the bound. */
    WEFT_CHECK(t->base.peers_listening ? net_connect_listening(peer_addr, left, &c->lanes[lane].fd)
                                       : net_connect(peer_addr, left, &c->lanes[lane].fd));
    WEFT_CHECK(make_hello(t, c->base.peer, lane, c->nlanes, raw[lane]));
    WEFT_CHECK(net_send_all(c->lanes[lane].fd, raw[lane], sizeof raw[lane], left));
  }
  for (int lane = 0; lane < c->nlanes; lane++) {
    unsigned char ack[TCP_ACK_BYTES + TCP_PROVE_BYTES];
    size_t got = 0, need = TCP_ACK_BYTES;
    while (got < need) {
      int left = (int)(deadline - clock_now_ms());
      if (left <= 0)
        return WEFT_ERR(WEFT_ERR_TIMEOUT,
                        "no handshake answer from rank %d at %s within %d ms (is it stopped or "
                        "stuck?)",
                        c->base.peer, where, bound_ms);
      if (transport_aborted(&t->base))
        return WEFT_ERR(WEFT_ERR_ABORTED,
                        "the communicator was aborted while connecting to rank %d at %s",
                        c->base.peer, where);
      short ready = 0;
      WEFT_CHECK(tcp_acceptor_wait(t->acc, c->lanes[lane].fd, left < 100 ? left : 100, &ready));
      if (ready) {
        /* Never more than this step needs: without a token the acceptor may send its first
         * message right behind the ack, and those bytes belong to the connection's stream. */
        ssize_t r = recv(c->lanes[lane].fd, ack + got, need - got, 0);
        if (r == 0)
          return WEFT_ERR(WEFT_ERR_REMOTE,
                          "rank %d at %s closed the connection during the "
                          "handshake (is something other than weft listening there?)",
                          c->base.peer, where);
        if (r < 0 && errno != EINTR && errno != EAGAIN)
          return WEFT_ERR(WEFT_ERR_REMOTE, "handshake with rank %d at %s: %s", c->base.peer, where,
                          strerror(errno));
        if (r > 0) got += (size_t)r;
        /* A PROVE ack carries the acceptor's nonce and MAC after it. */
        if (got == TCP_ACK_BYTES && need == TCP_ACK_BYTES && token &&
            tcp_ack_decode(ack) == TCP_ACK_PROVE)
          need += TCP_PROVE_BYTES;
      }
    }
    WEFT_CHECK(on_ack(t, c->base.peer, c->lanes[lane].fd, raw[lane], ack, where, deadline));
  }
  return WEFT_SUCCESS;
}

/* The higher rank's side: accept until every lane from `peer` is stashed, then claim them. */
static weft_result_t connect_passive(tcp_transport_t *t, tcp_conn_t *c, int64_t deadline,
                                     int bound_ms) {
  for (;;) {
    int have = tcp_acceptor_arrived(t->acc, c->base.peer);
    if (have == c->nlanes) break;
    int left = (int)(deadline - clock_now_ms());
    if (left <= 0)
      return WEFT_ERR(WEFT_ERR_TIMEOUT,
                      "rank %d did not connect within %d ms (%d of %d sockets "
                      "arrived; is it running, and can it reach this host?)",
                      c->base.peer, bound_ms, have, c->nlanes);
    if (transport_aborted(&t->base))
      return WEFT_ERR(WEFT_ERR_ABORTED,
                      "the communicator was aborted while waiting for rank %d to connect",
                      c->base.peer);
    /* In slices, to see an abort from another thread soon. */
    WEFT_CHECK(tcp_acceptor_wait(t->acc, -1, left < 100 ? left : 100, NULL));
  }
  for (int lane = 0; lane < c->nlanes; lane++)
    c->lanes[lane].fd = tcp_acceptor_take(t->acc, c->base.peer, lane);
  return WEFT_SUCCESS;
}

/* Starts lane `l` of a dial over: the peer closed it before acknowledging it (its acceptor gives
 * a hello or a proof only so long, and this rank may have been busy elsewhere). A peer that is
 * gone refuses the new connect, which ends the dial. */
static weft_result_t dial_restart(tcp_transport_t *t, int peer, dial_t *d, dial_lane_t *l,
                                  const char *where) {
  if (++d->restarts > 4 * t->nlanes)
    return WEFT_ERR(WEFT_ERR_REMOTE,
                    "rank %d at %s closed %d connections during the handshake (is something other "
                    "than weft listening there?)",
                    peer, where, d->restarts);
  close(l->fd);
  l->fd = -1;
  l->phase = DIAL_OPEN;
  l->sent = l->got = 0;
  l->need = TCP_ACK_BYTES;
  return make_hello(t, peer, (int)(l - d->lanes), t->nlanes, l->raw);
}

/* Moves one lane of a dial as far as it goes without waiting. */
static weft_result_t dial_lane(tcp_transport_t *t, int peer, dial_t *d, dial_lane_t *l,
                               const char *where) {
  int token = t->cfg->job_token[0] != '\0';
  for (;;) {
    switch (l->phase) {
      case DIAL_OPEN: {
        l->fd = socket(d->addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (l->fd < 0)
          return WEFT_ERR(WEFT_ERR_SYSTEM, "connect to rank %d at %s: socket: %s", peer, where,
                          strerror(errno));
        l->phase = DIAL_CONNECTING;
        if (connect(l->fd, (const struct sockaddr *)&d->addr.ss, d->addr.len) == 0) {
          l->phase = DIAL_HELLO;
        } else if (errno != EINPROGRESS && errno != EINTR) {
          int err = errno;
          /* Every peer listens once the communicator exists: a refusal means this one is gone. */
          return WEFT_ERR(err == ECONNREFUSED ? WEFT_ERR_REMOTE : WEFT_ERR_SYSTEM,
                          "connect to rank %d at %s: %s (did it exit or fail?)", peer, where,
                          strerror(err));
        }
        break;
      }
      case DIAL_CONNECTING: {
        struct pollfd pfd = {l->fd, POLLOUT, 0};
        if (poll(&pfd, 1, 0) <= 0) return WEFT_SUCCESS;
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err != 0)
          return WEFT_ERR(err == ECONNREFUSED ? WEFT_ERR_REMOTE : WEFT_ERR_SYSTEM,
                          "connect to rank %d at %s: %s (did it exit or fail?)", peer, where,
                          strerror(err));
        l->phase = DIAL_HELLO;
        break;
      }
      case DIAL_HELLO: {
        ssize_t n =
            send(l->fd, l->raw + l->sent, sizeof l->raw - l->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
          return WEFT_SUCCESS;
        if (n < 0) {
          WEFT_CHECK(dial_restart(t, peer, d, l, where));
          break;
        }
        l->sent += (size_t)n;
        if (l->sent == sizeof l->raw) l->phase = DIAL_ACK;
        break;
      }
      case DIAL_ACK: {
        /* Never more than this step needs: the peer's first message may follow the ack. */
        ssize_t n = recv(l->fd, l->ack + l->got, l->need - l->got, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
          return WEFT_SUCCESS;
        if (n <= 0) {
          WEFT_CHECK(dial_restart(t, peer, d, l, where));
          break;
        }
        l->got += (size_t)n;
        if (l->got == TCP_ACK_BYTES && l->need == TCP_ACK_BYTES && token &&
            tcp_ack_decode(l->ack) == TCP_ACK_PROVE)
          l->need += TCP_PROVE_BYTES;
        if (l->got < l->need) break;
        if (token && tcp_ack_decode(l->ack) == TCP_ACK_PROVE) {
          /* A challenge behind which the peer has already closed timed out there: the proof
           * would go nowhere, and this rank would take the lane for connected. */
          char b;
          if (recv(l->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
            WEFT_CHECK(dial_restart(t, peer, d, l, where));
            break;
          }
        }
        WEFT_CHECK(on_ack(t, peer, l->fd, l->raw, l->ack, where,
                          clock_now_ms() + t->cfg->connect_timeout_ms));
        l->phase = DIAL_DONE;
        break;
      }
      default:
        return WEFT_SUCCESS;
    }
  }
}

/* Moves the dial to `peer` on; *done once every lane is acknowledged. */
static weft_result_t dial_advance(tcp_transport_t *t, int peer, dial_t *d, int *done) {
  *done = 1;
  for (int i = 0; i < t->nlanes; i++) {
    WEFT_CHECK(dial_lane(t, peer, d, &d->lanes[i], d->where));
    if (d->lanes[i].phase != DIAL_DONE) *done = 0;
  }
  return WEFT_SUCCESS;
}

static weft_result_t dial_start(tcp_transport_t *t, int peer, const net_addr_t *addr,
                                dial_t **out) {
  dial_t *d = calloc(1, sizeof *d);
  if (!d) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "tcp transport: out of memory");
  d->addr = *addr;
  net_addr_str(addr, d->where, sizeof d->where);
  for (int i = 0; i < XFER_MAX_LANES; i++) {
    d->lanes[i].fd = -1;
    d->lanes[i].need = TCP_ACK_BYTES;
  }
  for (int i = 0; i < t->nlanes; i++) {
    weft_result_t res = make_hello(t, peer, i, t->nlanes, d->lanes[i].raw);
    if (res != WEFT_SUCCESS) {
      free(d);
      return res;
    }
  }
  *out = d;
  return WEFT_SUCCESS;
}

/* A dial whose lanes are all acknowledged becomes the connection: its sockets move over. */
static void dial_claim(tcp_transport_t *t, int peer, tcp_conn_t *c) {
  dial_t *d = t->dials[peer];
  for (int i = 0; i < t->nlanes; i++) {
    c->lanes[i].fd = d->lanes[i].fd;
    d->lanes[i].fd = -1;
  }
  dial_free(d, t->nlanes);
  t->dials[peer] = NULL;
}

/* The lower rank's side when a dial to `peer` is already under way: finish it within the bound
 * instead of opening a second set of sockets. */
static weft_result_t connect_dialed(tcp_transport_t *t, tcp_conn_t *c, int64_t deadline,
                                    int bound_ms) {
  int peer = c->base.peer;
  for (;;) {
    int done = 0;
    weft_result_t res = dial_advance(t, peer, t->dials[peer], &done);
    if (res != WEFT_SUCCESS) {
      dial_free(t->dials[peer], t->nlanes);
      t->dials[peer] = NULL;
      return res;
    }
    if (done) break;
    int left = (int)(deadline - clock_now_ms());
    if (left <= 0)
      return WEFT_ERR(WEFT_ERR_TIMEOUT,
                      "no handshake answer from rank %d within %d ms (is it stopped or stuck?)",
                      peer, bound_ms);
    if (transport_aborted(&t->base))
      return WEFT_ERR(WEFT_ERR_ABORTED, "the communicator was aborted while connecting to rank %d",
                      peer);
    /* Serve this rank's own acceptor meanwhile, as connect_active does. */
    WEFT_CHECK(tcp_acceptor_wait(t->acc, -1, 1, NULL));
  }
  dial_claim(t, peer, c);
  return WEFT_SUCCESS;
}

/* Sizes a lane's socket buffers. The send buffer must take every lent staging slot (lend_send)
 * without the peer reading: a slot stays lent until its bytes are in the kernel, and the peer
 * reads only what its posted receives ask for, which it posts as its own slots come free. With a
 * send buffer smaller than the pool, two ranks sending to each other fill both pools and wait on
 * each other for good (2 ranks, a 16 MiB all-reduce with WEFT_SOCKET_BUFFER=65536 timed out every
 * time). So a set size is raised to the pool's for sending; where net.core.wmem_max caps that,
 * SO_SNDBUFFORCE asks past the cap (allowed to root). WEFT_SOCKET_BUFFER=0 leaves both to the
 * kernel's autotuning, as before. */
static weft_result_t lane_tune(tcp_transport_t *t, int fd) {
  int want = t->cfg->sockbuf_bytes;
  WEFT_CHECK(net_tune_stream(fd, want));
  if (want <= 0) return WEFT_SUCCESS;
  size_t pool = (size_t)t->cfg->shm_slots * t->cfg->slice_bytes;
  int need = pool > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)pool;
  int got = 0;
  socklen_t len = sizeof got;
  if (want < need && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &need, sizeof need) != 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "setsockopt SO_SNDBUF=%d on fd %d: %s", need, fd,
                    strerror(errno));
  if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got, &len) != 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "getsockopt SO_SNDBUF on fd %d: %s", fd, strerror(errno));
  /* The kernel reports twice what it granted; past the cap only a privileged ask gets more. */
  if (got / 2 < need) (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &need, sizeof need);
  return WEFT_SUCCESS;
}

/* Makes `c`'s sockets ready for traffic, or frees it. */
static weft_result_t conn_ready(tcp_transport_t *t, tcp_conn_t *c, conn_t **out) {
  weft_result_t res = WEFT_SUCCESS;
  for (int lane = 0; res == WEFT_SUCCESS && lane < c->nlanes; lane++) {
    res = lane_tune(t, c->lanes[lane].fd);
    if (res == WEFT_SUCCESS) res = net_set_nonblocking(c->lanes[lane].fd, 1);
  }
  if (res != WEFT_SUCCESS) {
    int peer = c->base.peer;
    conn_free(c);
    return err_context(res, "connect to rank %d", peer);
  }
  *out = &c->base;
  return WEFT_SUCCESS;
}

static weft_result_t tcp_connect(transport_t *base, int peer, const void *peer_blob, conn_t **out) {
  tcp_transport_t *t = (tcp_transport_t *)base;
  tcp_conn_t *c = NULL;
  WEFT_CHECK(conn_alloc(t, peer, &c));
  /* During init peers may not listen yet, so both sides wait the whole connect timeout. Later, a
   * connection on first use: the connecting side gets a short bound (refused = the peer is gone),
   * the accepting side waits as long as any collective waits for a late peer. Neither waits longer
   * than that: a peer that listens but does not answer (stopped, stuck) is a peer making no
   * progress, which WEFT_TIMEOUT_MS bounds everywhere else. */
  int active_ms = t->cfg->connect_timeout_ms, passive_ms = t->cfg->connect_timeout_ms;
  if (t->base.peers_listening) {
    active_ms = active_ms < 5000 ? active_ms : 5000;
    if (active_ms > t->cfg->timeout_ms) active_ms = t->cfg->timeout_ms;
    passive_ms = t->cfg->timeout_ms;
  }
  int64_t now = clock_now_ms();
  weft_result_t res = t->rank > peer ? connect_passive(t, c, now + passive_ms, passive_ms)
                      : t->dials[peer]
                          ? connect_dialed(t, c, now + active_ms, active_ms)
                          : connect_active(t, c, peer_blob, now + active_ms, active_ms);
  if (res != WEFT_SUCCESS) {
    conn_free(c);
    return err_context(res, "connect to rank %d", peer);
  }
  return conn_ready(t, c, out);
}

static void lane_push(xfer_part_t **head, xfer_part_t **tail, xfer_part_t *p) {
  p->next = NULL;
  if (*tail)
    (*tail)->next = p;
  else
    *head = p;
  *tail = p;
}

/* Cuts a message into its parts per the striping rule and queues them; returns nothing to do for
 * an empty message. */
static void post(tcp_conn_t *c, char *buf, size_t len, xfer_t *x, int is_send) {
  uint64_t *seq = is_send ? &c->sent_msgs : &c->recv_msgs;
  int nparts = len >= (size_t)STRIPE_MIN_PART * (size_t)c->nlanes ? c->nlanes : 1;
  int first = nparts == 1 ? (int)(*seq % (uint64_t)c->nlanes) : 0;
  (*seq)++;
  x->complete = len == 0;
  x->parts_left = len == 0 ? 0 : nparts;
  size_t part = len / (size_t)nparts;
  for (int i = 0; i < nparts && len > 0; i++) {
    xfer_part_t *p = &x->parts[i];
    lane_t *lane = &c->lanes[first + i];
    p->owner = x;
    p->ptr = buf + part * (size_t)i;
    p->left = i == nparts - 1 ? len - part * (size_t)i : part;
    if (is_send)
      lane_push(&lane->send_head, &lane->send_tail, p);
    else
      lane_push(&lane->recv_head, &lane->recv_tail, p);
  }
}

static weft_result_t tcp_post_send(conn_t *base, const void *buf, size_t len, xfer_t *x) {
  x->data = NULL; /* not from a lent slot (slot_done looks) */
  post((tcp_conn_t *)base, (char *)buf, len, x, 1);
  return WEFT_SUCCESS;
}

/* Lending: a fused step reduces into a staging slot here instead of into the caller's buffer, and
 * the socket reads it from there: the same bytes through the kernel, one buffer write fewer. The
 * pool has WEFT_SHM_SLOTS slots: a ring schedule needs every lending transport to hold more
 * slices in flight per direction than its rounds put on a link before forwarding (half of that;
 * see ring_allreduce.c), or the ring could wait on itself. */
static weft_result_t tcp_lend_send(conn_t *base, size_t len, xfer_t *x, char **slot) {
  tcp_conn_t *c = (tcp_conn_t *)base;
  lend_pool_t *pool = &c->pool;
  *slot = NULL;
  if (!pool->mem) {
    pool->nslots = c->t->cfg->shm_slots;
    pool->slot_bytes = c->t->cfg->slice_bytes;
    pool->mem = malloc((size_t)pool->nslots * pool->slot_bytes);
    pool->busy = calloc((size_t)pool->nslots, 1);
    pool->len = calloc((size_t)pool->nslots, sizeof *pool->len);
    if (!pool->mem || !pool->busy || !pool->len) {
      free(pool->mem);
      free(pool->busy);
      free(pool->len);
      memset(pool, 0, sizeof *pool);
      return WEFT_ERR(WEFT_ERR_NO_MEMORY, "tcp send staging to rank %d: out of memory", base->peer);
    }
    /* Touched now, all of it, so that this call pays the pages' first touch once instead of the
     * next nslots/2 calls paying a slot or two each (transport/shm_ring.c: map_fd). */
    memset(pool->mem, 0, (size_t)pool->nslots * pool->slot_bytes);
  }
  if (len == 0 || len > pool->slot_bytes)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "lent send of %zu bytes to rank %d: must be 1..%zu bytes",
                    len, base->peer, pool->slot_bytes);
  size_t i = (size_t)(pool->next % (uint64_t)pool->nslots);
  if (pool->busy[i]) return WEFT_SUCCESS; /* still on the wire: progress frees it */
  pool->busy[i] = 1;
  pool->len[i] = len;
  pool->next++;
  x->complete = 0;
  x->parts_left = 1;
  x->data = pool->mem + i * pool->slot_bytes;
  *slot = (char *)x->data;
  return WEFT_SUCCESS;
}

static weft_result_t tcp_commit_send(conn_t *base, xfer_t *x) {
  tcp_conn_t *c = (tcp_conn_t *)base;
  lend_pool_t *pool = &c->pool;
  if (!pool->mem || !x->data || x->data < pool->mem ||
      x->data >= pool->mem + (size_t)pool->nslots * pool->slot_bytes)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "tcp commit to rank %d of a slot it did not lend",
                    base->peer);
  char *slot = (char *)x->data;
  post(c, slot, pool->len[(size_t)(slot - pool->mem) / pool->slot_bytes], x, 1);
  x->data = slot; /* post leaves it: slot_done frees the slot once the bytes are out */
  return WEFT_SUCCESS;
}

static weft_result_t tcp_post_recv(conn_t *base, void *buf, size_t len, xfer_t *x) {
  x->data = NULL;
  post((tcp_conn_t *)base, (char *)buf, len, x, 0);
  return WEFT_SUCCESS;
}

/* A finished message that came from a lent slot gives the slot back. */
static void slot_done(lend_pool_t *pool, xfer_t *x) {
  if (!pool->mem || !x->data || x->data < pool->mem ||
      x->data >= pool->mem + (size_t)pool->nslots * pool->slot_bytes)
    return;
  pool->busy[(size_t)(x->data - pool->mem) / pool->slot_bytes] = 0;
  x->data = NULL;
}

static void part_done(tcp_conn_t *c, xfer_part_t **head, xfer_part_t **tail) {
  xfer_part_t *p = *head;
  *head = p->next;
  if (!*head) *tail = NULL;
  if (--p->owner->parts_left == 0) {
    p->owner->complete = 1;
    slot_done(&c->pool, p->owner);
  }
}

/* Bytes in flight per stream (transport_ops_t.depth_bytes): 1 MiB the socket holds per direction,
 * 16 slices of the default 64 KiB against 4 for a ring of shm slots. With tcp_iov.h's bytes per
 * system call: 2 ranks, 1-4 MiB, 5.6-6.1 GB/s against 4.3-4.7 with 4 slices
 * (results/2026-11-28-tcp-depth). */
#define TCP_DEPTH_BYTES ((size_t)1 << 20)

/* Advances the queue by `n` bytes moved, completing the parts they finish. */
static void consume(tcp_conn_t *c, xfer_part_t **head, xfer_part_t **tail, size_t n) {
  while (n > 0) {
    xfer_part_t *p = *head;
    size_t k = n < p->left ? n : p->left;
    p->ptr += k;
    p->left -= k;
    n -= k;
    if (p->left == 0) part_done(c, head, tail);
  }
}

static weft_result_t lane_progress(tcp_conn_t *c, lane_t *lane, int *progressed) {
  struct iovec iov[TCP_IOV_PARTS];
  while (lane->send_head) {
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)tcp_iov_gather(lane->send_head, iov)};
    ssize_t n = sendmsg(lane->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      return WEFT_ERR(WEFT_ERR_REMOTE, "send to rank %d: %s (did it exit or fail?)", c->base.peer,
                      strerror(errno));
    }
    *progressed = 1;
    consume(c, &lane->send_head, &lane->send_tail, (size_t)n);
  }
  while (lane->recv_head) {
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)tcp_iov_gather(lane->recv_head, iov)};
    ssize_t n = recvmsg(lane->fd, &m, MSG_DONTWAIT);
    if (n == 0)
      return WEFT_ERR(WEFT_ERR_REMOTE,
                      "connection closed by rank %d while receiving from it (did it exit or "
                      "fail?)",
                      c->base.peer);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      return WEFT_ERR(WEFT_ERR_REMOTE, "receive from rank %d: %s (did it exit or fail?)",
                      c->base.peer, strerror(errno));
    }
    *progressed = 1;
    consume(c, &lane->recv_head, &lane->recv_tail, (size_t)n);
  }
  return WEFT_SUCCESS;
}

static weft_result_t tcp_progress(conn_t *base, int *progressed) {
  tcp_conn_t *c = (tcp_conn_t *)base;
  for (int i = 0; i < c->nlanes; i++) WEFT_CHECK(lane_progress(c, &c->lanes[i], progressed));
  return WEFT_SUCCESS;
}

typedef struct {
  struct pollfd *fds;
  nfds_t n;
} pfd_set_t;

static int pfds_ready(void *arg) {
  pfd_set_t *set = arg;
  return poll(set->fds, set->n, 0) != 0; /* an error is reported by the blocking poll after */
}

static weft_result_t tcp_wait(conn_t *const *conns, int n, int timeout_ms, int spin_us) {
  struct pollfd pfds[64];
  int np = 0;
  for (int i = 0; i < n; i++) {
    const tcp_conn_t *c = (const tcp_conn_t *)conns[i];
    for (int l = 0; l < c->nlanes && np < 64; l++) {
      short ev =
          (short)((c->lanes[l].send_head ? POLLOUT : 0) | (c->lanes[l].recv_head ? POLLIN : 0));
      if (ev) pfds[np++] = (struct pollfd){c->lanes[l].fd, ev, 0};
    }
  }
  if (np == 0) return WEFT_SUCCESS;
  /* Poll without blocking (yielding the core) first: a blocking poll that sleeps costs a wake-up
   * per message, most of a small message's time (common/spin.h). */
  const tcp_transport_t *t = ((const tcp_conn_t *)conns[0])->t;
  int64_t budget_us = spin_budget_us(spin_us, timeout_ms);
  pfd_set_t set = {pfds, (nfds_t)np};
  /* A rank bound to a core of its own polls without yielding first (spin.h says why). Unlike shm,
   * TCP cannot tell where its peers run; it can tell that some share a core when the host's
   * ranks outnumber its CPUs (bound two to a core: 160 us per 8-byte all-reduce instead of 56,
   * results/2026-11-29-bound-placements). Ranks bound to one shared core while the host has
   * cores to spare (taskset around the whole job) still spend up to SPIN_BUSY_US per wait here
   * before the yields let the peer in. */
  if (t->bound && spin_host_fits(t->base.local_ranks, t->host_cpus) &&
      spin_busy_phase(pfds_ready, &set, &budget_us))
    return WEFT_SUCCESS;
  if (spin_yield_until(pfds_ready, &set, budget_us)) return WEFT_SUCCESS;
  if (poll(pfds, (nfds_t)np, timeout_ms) < 0 && errno != EINTR)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "poll: %s", strerror(errno));
  return WEFT_SUCCESS;
}

/* A message shorter than a stripe goes whole on the lane the striping rule gives the next one,
 * so its bytes can be read there without taking them (MSG_PEEK). */
static weft_result_t tcp_peek_recv(conn_t *base, void *buf, size_t len, int *state) {
  tcp_conn_t *c = (tcp_conn_t *)base;
  *state = TRANSPORT_PEEK_EMPTY;
  if (len == 0 || len >= (size_t)STRIPE_MIN_PART)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "peek of %zu bytes from rank %d: must be 1..%d bytes", len,
                    base->peer, STRIPE_MIN_PART - 1);
  for (int i = 0; i < c->nlanes; i++)
    if (c->lanes[i].recv_head) return WEFT_SUCCESS;
  lane_t *lane = &c->lanes[c->recv_msgs % (uint64_t)c->nlanes];
  ssize_t n = recv(lane->fd, buf, len, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) {
    *state = TRANSPORT_PEEK_CLOSED;
  } else if (n < 0) {
    if (errno == ECONNRESET || errno == EPIPE)
      *state = TRANSPORT_PEEK_CLOSED;
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return WEFT_ERR(WEFT_ERR_REMOTE, "receive from rank %d: %s", base->peer, strerror(errno));
  } else if ((size_t)n == len) {
    *state = TRANSPORT_PEEK_READY;
  }
  return WEFT_SUCCESS;
}

/* A lower rank that connects to us has sent its hellos to our acceptor: once every lane of it
 * has been checked, the passive connect finds them all there and returns at once. A higher rank
 * waits for us to connect (and a sender among them is waiting right now), so we dial it: a
 * connect that never blocks, moved on by each call until every lane is acknowledged. A dial the
 * receive leaves unfinished goes on at the next call, or finishes in connect(). */
static weft_result_t tcp_connect_pending(transport_t *base, int peer, const void *peer_blob,
                                         conn_t **out) {
  tcp_transport_t *t = (tcp_transport_t *)base;
  *out = NULL;
  if (peer < t->rank) {
    WEFT_CHECK(tcp_acceptor_wait(t->acc, -1, 0, NULL));
    if (tcp_acceptor_arrived(t->acc, peer) < t->nlanes) return WEFT_SUCCESS;
    return tcp_connect(base, peer, peer_blob, out);
  }
  if (!t->dials[peer])
    WEFT_CHECK_CTX(dial_start(t, peer, peer_blob, &t->dials[peer]), "connect to rank %d", peer);
  int64_t now = clock_now_ns();
  if (now < t->dials[peer]->next_ns) return WEFT_SUCCESS;
  t->dials[peer]->next_ns = now + DIAL_PERIOD_NS;
  int done = 0;
  weft_result_t res = dial_advance(t, peer, t->dials[peer], &done);
  if (res != WEFT_SUCCESS) {
    dial_free(t->dials[peer], t->nlanes);
    t->dials[peer] = NULL;
    return err_context(res, "connect to rank %d", peer);
  }
  if (!done) return WEFT_SUCCESS;
  tcp_conn_t *c = NULL;
  WEFT_CHECK(conn_alloc(t, peer, &c));
  dial_claim(t, peer, c);
  return conn_ready(t, c, out);
}

static void tcp_close(conn_t *base, int abortive) {
  tcp_conn_t *c = (tcp_conn_t *)base;
  if (!c) return;
  for (int i = 0; i < c->nlanes; i++) {
    if (c->lanes[i].fd < 0) continue;
    if (abortive) {
      /* Linger 0 sends a reset: the peer's next call fails at once instead of waiting. */
      struct linger lg = {1, 0};
      setsockopt(c->lanes[i].fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
  }
  conn_free(c);
}

const transport_ops_t tcp_transport_ops = {
    .name = "tcp",
    .addr_size = sizeof(net_addr_t),
    .create = tcp_create,
    .local_addr = tcp_local_addr,
    .connect = tcp_connect,
    .destroy = tcp_destroy,
    .post_send = tcp_post_send,
    .post_recv = tcp_post_recv,
    .progress = tcp_progress,
    .wait = tcp_wait,
    .close = tcp_close,
    .lend_send = tcp_lend_send,
    .commit_send = tcp_commit_send,
    .peek_recv = tcp_peek_recv,
    .connect_pending = tcp_connect_pending,
    .depth_bytes = TCP_DEPTH_BYTES,
};
