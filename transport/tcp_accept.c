/* tcp_accept.c -- the TCP transport's acceptor: many handshakes at once, none of them blocking.
 *
 * Each accepted connection is a small state machine: the hello's 8-byte prefix (magic and
 * version, so that another version is told at once), the rest of the hello, and with a job token
 * the connector's proof after our challenge (tcp_wire.h). Answers are a few dozen bytes on a
 * fresh socket, which always has room for them, so they are sent without waiting; a socket that
 * cannot take them is not a peer's. A checked socket goes to the stash, where tcp.c claims it.
 *
 * Readable connections are served before deadlines are checked: when a rank comes back to its
 * acceptor after computing for a while, a peer's proof that waited in the socket is read, not
 * held against it. */
#include "transport/tcp_accept.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/hmac.h"
#include "transport/tcp_wire.h"

/* The kernel keeps connections here until they are accepted: room for a flood of strangers, so
 * that a real peer's connect is not dropped while this rank is busy elsewhere (capped by
 * net.core.somaxconn). */
#define LISTEN_BACKLOG 4096
/* How long the listener is left alone when no descriptor can be freed to accept. */
#define EXHAUSTED_PAUSE_MS 100

typedef struct {
  int fd;       /* -1: finished (stashed or closed), removed at the next compaction */
  uint64_t seq; /* accept order: the oldest goes first when room is needed */
  int64_t deadline;
  int challenged; /* the hello was fine and PROVE went out: the proof is being read */
  size_t got;     /* bytes of the hello, or of the proof once challenged */
  unsigned char raw[TCP_HELLO_BYTES];
  tcp_hello_t hello;
  unsigned char ns[TCP_NONCE_BYTES];
  unsigned char proof[TCP_PROOF_BYTES];
} pending_t;

struct tcp_acceptor {
  int rank, nranks, nlanes;
  uint64_t comm_id;
  char token[sizeof(((weft_config_t *)0)->job_token)];
  int listen_fd;
  net_addr_t addr;
  int *stash; /* nranks * nlanes checked fds not yet taken, -1 when empty */
  pending_t *pend;
  size_t npend, cap;
  struct pollfd *fds; /* cap + 2: the extra fd, the listener, the pending */
  uint64_t accepted;
  int reserve_fd;
  int64_t paused_until; /* out of descriptors with none to free: the listener rests until then */
};

/* A refusal for the job token is said on this rank's stderr, not only with WEFT_DEBUG: someone
 * without the token reached this rank's port, and whoever runs the job should see it. */
static void log_refusal(const tcp_acceptor_t *a, int fd, const char *why) {
  char me[NET_ADDR_STRLEN], them[NET_ADDR_STRLEN] = "an unknown address";
  net_addr_t from;
  from.len = sizeof from.ss;
  if (getpeername(fd, (struct sockaddr *)&from.ss, &from.len) == 0)
    net_addr_str(&from, them, sizeof them);
  net_addr_str(&a->addr, me, sizeof me);
  fprintf(stderr, "weft rank %d (listening at %s): refused a connection from %s: %s\n", a->rank, me,
          them, why);
}

/* Returns 1 when all of buf went out at once. */
static int send_now(int fd, const void *buf, size_t len) {
  ssize_t n;
  do {
    n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  return n == (ssize_t)len;
}

static void finish(pending_t *p, int close_it) {
  if (close_it) close(p->fd);
  p->fd = -1;
}

static void stash(tcp_acceptor_t *a, pending_t *p) {
  int *slot = &a->stash[p->hello.from_rank * a->nlanes + p->hello.lane];
  if (*slot >= 0) close(*slot); /* a reconnect replaces a stale socket */
  *slot = p->fd;
  finish(p, 0);
}

/* The whole hello is in: refuse it, accept it, or challenge it for the job token. */
static void on_hello(tcp_acceptor_t *a, pending_t *p) {
  unsigned char ack[TCP_ACK_BYTES + TCP_PROVE_BYTES];
  int32_t status = tcp_hello_decode(p->raw, &p->hello, a->comm_id, a->rank, a->nranks, a->nlanes);
  int token = a->token[0] != '\0';
  /* The token first: without it a stranger learns nothing but that one is required. */
  if (token && !p->hello.has_token) {
    log_refusal(a, p->fd, "no job token (this job requires WEFT_JOB_TOKEN)");
    status = TCP_ACK_NO_TOKEN;
  } else if (!token && p->hello.has_token) {
    log_refusal(a, p->fd,
                "it has a job token but this rank has none (set WEFT_JOB_TOKEN on "
                "every rank or on none)");
    status = TCP_ACK_UNEXPECTED_TOKEN;
  }
  if (status != TCP_ACK_OK || !token) {
    tcp_ack_encode(ack, status);
    if (send_now(p->fd, ack, TCP_ACK_BYTES) && status == TCP_ACK_OK)
      stash(a, p);
    else
      finish(p, 1);
    return;
  }
  /* Challenge: a fresh nonce and our proof; the connector's answer is checked in on_proof. */
  if (hmac_random(p->ns, sizeof p->ns) != 0) {
    finish(p, 1); /* no fresh nonce, no handshake: a fixed one would make replays work */
    return;
  }
  tcp_ack_encode(ack, TCP_ACK_PROVE);
  memcpy(ack + TCP_ACK_BYTES, p->ns, TCP_NONCE_BYTES);
  hmac_challenge(a->token, HMAC_LABEL_ACCEPT, p->raw, TCP_HELLO_CONTEXT, p->hello.nonce, p->ns,
                 ack + TCP_ACK_BYTES + TCP_NONCE_BYTES);
  if (!send_now(p->fd, ack, sizeof ack)) {
    finish(p, 1);
    return;
  }
  p->challenged = 1;
  p->got = 0;
  p->deadline = clock_now_ms() + TCP_ACCEPT_PROOF_MS;
}

static void on_proof(tcp_acceptor_t *a, pending_t *p) {
  unsigned char want[TCP_MAC_BYTES];
  hmac_challenge(a->token, HMAC_LABEL_CONNECT, p->raw, TCP_HELLO_CONTEXT, p->hello.nonce, p->ns,
                 want);
  int32_t status = tcp_ack_decode(p->proof);
  if (status == TCP_ACK_OK && hmac_equal(want, p->proof + 8, sizeof want)) {
    stash(a, p);
    return;
  }
  log_refusal(a, p->fd,
              status == TCP_ACK_BAD_TOKEN ? "wrong job token (it found this rank's proof wrong)"
                                          : "wrong job token");
  finish(p, 1);
}

/* Reads what the connection has sent and acts on each complete step. Garbage and foreign
 * connections are refused and dropped: they are not this rank's error. */
static void advance(tcp_acceptor_t *a, pending_t *p) {
  while (p->fd >= 0) {
    unsigned char *dst;
    size_t need;
    if (p->challenged) {
      dst = p->proof;
      need = TCP_PROOF_BYTES;
    } else {
      dst = p->raw;
      need = p->got < TCP_HELLO_PREFIX ? TCP_HELLO_PREFIX : TCP_HELLO_BYTES;
    }
    ssize_t n = recv(p->fd, dst + p->got, need - p->got, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      finish(p, 1); /* EOF or error */
      return;
    }
    p->got += (size_t)n;
    if (p->got < need) continue;
    if (p->challenged) {
      on_proof(a, p);
    } else if (need == TCP_HELLO_PREFIX) {
      /* The version comes first, so that another version (whose hello may be shorter) is told
       * at once. */
      int64_t version = tcp_hello_version(p->raw);
      if (version != TCP_WIRE_VERSION) {
        unsigned char ack[TCP_ACK_BYTES];
        tcp_ack_encode(ack, TCP_ACK_VERSION);
        if (version >= 0) (void)send_now(p->fd, ack, sizeof ack);
        finish(p, 1);
      }
    } else {
      on_hello(a, p);
    }
  }
}

/* Closes the handshake that matters least: one not yet challenged before a challenged one (which
 * holds a well-formed hello for this communicator), the oldest first. Returns 0 if none. */
static int evict(tcp_acceptor_t *a) {
  pending_t *victim = NULL;
  for (size_t i = 0; i < a->npend; i++) {
    pending_t *p = &a->pend[i];
    if (p->fd < 0) continue;
    if (!victim || p->challenged < victim->challenged ||
        (p->challenged == victim->challenged && p->seq < victim->seq))
      victim = p;
  }
  if (!victim) return 0;
  finish(victim, 1);
  return 1;
}

static void compact(tcp_acceptor_t *a) {
  size_t j = 0;
  for (size_t i = 0; i < a->npend; i++)
    if (a->pend[i].fd >= 0) a->pend[j++] = a->pend[i];
  a->npend = j;
}

static void accept_all(tcp_acceptor_t *a) {
  for (;;) {
    int fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (!net_accept_exhausted(errno)) return; /* EAGAIN: nobody else is waiting */
      /* Out of descriptors: make room at a stranger's expense, never at a peer's. */
      if (evict(a)) {
        compact(a);
        continue;
      }
      if (!net_shed_one(a->listen_fd, &a->reserve_fd))
        a->paused_until = clock_now_ms() + EXHAUSTED_PAUSE_MS;
      return;
    }
    if (a->npend == a->cap) {
      evict(a);
      compact(a);
    }
    pending_t *p = &a->pend[a->npend++];
    memset(p, 0, sizeof *p);
    p->fd = fd;
    p->seq = a->accepted++;
    p->deadline = clock_now_ms() + TCP_ACCEPT_DEADLINE_MS;
    /* A peer's hello is already here: read it before more strangers can push it out. */
    advance(a, p);
    if (p->fd < 0) a->npend--;
  }
}

static void expire(tcp_acceptor_t *a, int64_t now) {
  for (size_t i = 0; i < a->npend; i++) {
    pending_t *p = &a->pend[i];
    if (p->fd < 0 || p->deadline > now) continue;
    if (p->challenged) {
      char why[80];
      snprintf(why, sizeof why, "no proof of the job token within %d ms of the challenge",
               TCP_ACCEPT_PROOF_MS);
      log_refusal(a, p->fd, why);
    }
    finish(p, 1);
  }
  compact(a);
}

weft_result_t tcp_acceptor_wait(tcp_acceptor_t *a, int extra_fd, int timeout_ms,
                                short *extra_revents) {
  int64_t now = clock_now_ms();
  if (a->paused_until > 0 && now >= a->paused_until) a->paused_until = 0;
  int64_t wake = timeout_ms < 0 ? -1 : now + timeout_ms;
  if (a->paused_until > 0 && (wake < 0 || a->paused_until < wake)) wake = a->paused_until;
  a->fds[0] = (struct pollfd){extra_fd, POLLIN, 0}; /* poll ignores a negative fd */
  a->fds[1] = (struct pollfd){a->listen_fd, (short)(a->paused_until ? 0 : POLLIN), 0};
  for (size_t i = 0; i < a->npend; i++) {
    a->fds[i + 2] = (struct pollfd){a->pend[i].fd, POLLIN, 0};
    if (wake < 0 || a->pend[i].deadline < wake) wake = a->pend[i].deadline;
  }
  int ms = wake < 0 ? -1 : wake > now ? (int)(wake - now) : 0;
  size_t n = a->npend;
  int r = poll(a->fds, (nfds_t)(n + 2), ms);
  if (r < 0 && errno != EINTR)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "rank %d: poll on the tcp listener: %s", a->rank,
                    strerror(errno));
  if (extra_revents) *extra_revents = r > 0 ? a->fds[0].revents : 0;
  for (size_t i = 0; r > 0 && i < n; i++)
    if (a->fds[i + 2].revents) advance(a, &a->pend[i]);
  compact(a);
  if (r > 0 && a->fds[1].revents) accept_all(a);
  expire(a, clock_now_ms());
  return WEFT_SUCCESS;
}

int tcp_acceptor_take(tcp_acceptor_t *a, int peer, int lane) {
  int *slot = &a->stash[peer * a->nlanes + lane];
  int fd = *slot;
  *slot = -1;
  return fd;
}

int tcp_acceptor_arrived(const tcp_acceptor_t *a, int peer) {
  int have = 0;
  for (int lane = 0; lane < a->nlanes; lane++) have += a->stash[peer * a->nlanes + lane] >= 0;
  return have;
}

const net_addr_t *tcp_acceptor_addr(const tcp_acceptor_t *a) { return &a->addr; }

void tcp_acceptor_free(tcp_acceptor_t *a) {
  if (!a) return;
  if (a->stash)
    for (int i = 0; i < a->nranks * a->nlanes; i++)
      if (a->stash[i] >= 0) close(a->stash[i]);
  for (size_t i = 0; i < a->npend; i++)
    if (a->pend[i].fd >= 0) close(a->pend[i].fd);
  if (a->listen_fd >= 0) close(a->listen_fd);
  if (a->reserve_fd >= 0) close(a->reserve_fd);
  memset(a->token, 0, sizeof a->token);
  free(a->stash);
  free(a->pend);
  free(a->fds);
  free(a);
}

weft_result_t tcp_acceptor_new(const net_addr_t *addr, int rank, int nranks, int nlanes,
                               uint64_t comm_id, const char *token, tcp_acceptor_t **out) {
  weft_result_t res;
  tcp_acceptor_t *a = calloc(1, sizeof *a);
  if (!a) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: tcp acceptor: out of memory", rank);
  a->rank = rank;
  a->nranks = nranks;
  a->nlanes = nlanes;
  a->comm_id = comm_id;
  a->listen_fd = -1;
  if (token && strlen(token) >= sizeof a->token) {
    free(a);
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: the job token is longer than %zu bytes",
                    rank, sizeof a->token - 1);
  }
  if (token) strcpy(a->token, token);
  a->reserve_fd = net_reserve_open(); /* best effort: without it, the listener pauses instead */
  a->cap = TCP_ACCEPT_SPARE + (size_t)nranks * (size_t)nlanes;
  a->stash = malloc(sizeof(int) * (size_t)nranks * (size_t)nlanes);
  a->pend = malloc(a->cap * sizeof *a->pend);
  a->fds = malloc((a->cap + 2) * sizeof *a->fds);
  if (!a->stash || !a->pend || !a->fds) {
    res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: tcp acceptor: out of memory", rank);
    goto fail;
  }
  for (int i = 0; i < nranks * nlanes; i++) a->stash[i] = -1;
  WEFT_CHECK_GOTO(net_listen(addr, LISTEN_BACKLOG, &a->listen_fd, &a->addr), res, fail);
  WEFT_CHECK_GOTO(net_set_nonblocking(a->listen_fd, 1), res, fail);
  *out = a;
  return WEFT_SUCCESS;
fail:
  tcp_acceptor_free(a);
  return res;
}
