/* store_server.c -- the bootstrap store's master: one thread, one poll loop, never a blocking call.
 *
 * A GET or WAIT on a missing key is not answered at once: the connection parks the request, every
 * SET/ADD re-checks parked requests, and the loop sleeps no longer than the nearest parked
 * deadline, so one waiting rank never stalls the others. A connection that breaks the protocol
 * (wrong magic, bad lengths, a second request while one is parked) is dropped on its own; the
 * store keeps serving everyone else.
 *
 * Strangers. Anyone who can reach MASTER_PORT can open connections, and an idle one costs a
 * descriptor. A connection that has not finished its hello (and, with a job token, its AUTH)
 * within HANDSHAKE_MS of being accepted is closed, and at most PENDING_SPARE + world size of them
 * are kept at once: the next one accepted closes the oldest (refused ones first, challenged ones
 * last). A real rank sends its hello right behind its connect, so it is read as it is accepted and
 * never waits in that queue for long. Greeted connections (ranks) are never closed for this. When
 * the process runs out of descriptors anyway, the loop closes the oldest un-greeted connection,
 * or sheds the new one through a reserve descriptor (net_shed_one), and never spins on a
 * listener it cannot accept from. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/store.h"
#include "bootstrap/store_kv.h"
#include "bootstrap/store_wire.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/hmac.h"
#include "common/net.h"

/* How long a refused client gets to read our answer before we close on it. */
#define LINGER_MS 2000
/* How long an accepted connection has to complete its hello (and AUTH): a rank sends its hello
 * with its connect, and answers the job token's challenge within a round trip. */
#define HANDSHAKE_MS 2000
/* Un-greeted connections kept at once, beyond one per rank (which a job's start may have). */
#define PENDING_SPARE 64
/* How long the listener is left alone when no descriptor can be freed to accept. */
#define EXHAUSTED_PAUSE_MS 100

typedef struct {
  int fd;
  int greeted; /* hello (and with a job token, AUTH) accepted: the other requests are allowed */
  /* Job token: the hello was fine and PROVE went out; only AUTH is allowed now. */
  int challenged;
  uint8_t hello[STORE_HELLO_SIZE]; /* the client's hello bytes: the MACs' context */
  uint8_t nc[STORE_NONCE_SIZE], ns[STORE_NONCE_SIZE];
  char peer[NET_ADDR_STRLEN]; /* for the refusal line */
  int closing; /* refused: flush the answer, shut down, wait for EOF or the linger deadline */
  int dead;
  uint64_t seq;        /* accept order: the oldest un-greeted connection goes first */
  int64_t hs_deadline; /* the hello (and AUTH) must be done by then */
  /* The request being read. */
  uint8_t hdr_bytes[STORE_HDR_SIZE];
  size_t hdr_got;
  int have_hdr;
  store_hdr_t hdr;
  uint8_t *body; /* key, then value */
  size_t body_len, body_got;
  /* A parked GET or WAIT. */
  int parked;
  store_hdr_t park_hdr;
  uint8_t *park_body;
  int64_t deadline; /* of the parked request or the linger; -1 = none */
  /* Unsent reply bytes. */
  uint8_t *out;
  size_t out_len, out_off;
  int told; /* was answered FAILED: knows that the job failed */
} conn_t;

struct store_server {
  store_identity_t id;
  char token[sizeof(((weft_config_t *)0)->job_token)]; /* id.token points here when set */
  int port;
  int listen_fd;
  int wake[2]; /* store_server_stop writes a byte to end the loop */
  pthread_t thread;
  store_kv_t *kv;
  conn_t **conns;
  size_t nconns, capconns;
  /* The job's first failure (store_wire.h), answered to every request from then on; failed is
   * also read by store_server_stop's thread, hence atomic. */
  int failed;
  int64_t failed_code;
  char failed_msg[STORE_MAX_FAILURE];
  size_t failed_len;
  int untold; /* greeted connections not yet answered FAILED (atomic: store_server_stop reads) */
  uint64_t accepted;           /* connections accepted so far: the next one's seq */
  int reserve_fd;              /* freed to shed a connection when out of descriptors */
  int64_t listen_paused_until; /* out of descriptors with none to free: until then, or 0 */
};

/* ---- Replies ------------------------------------------------------------------------------ */

static void flush(conn_t *c) {
  while (!c->dead && c->out_off < c->out_len) {
    ssize_t n =
        send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->out_off += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return; /* POLLOUT resumes */
    } else {
      c->dead = 1;
    }
  }
  if (c->out_off == c->out_len) {
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
    /* Half-close so the client reads our answer, then EOF, instead of a reset. */
    if (c->closing && !c->dead) shutdown(c->fd, SHUT_WR);
  }
}

static void reply(conn_t *c, uint32_t status, int64_t arg, const void *val, size_t vlen) {
  size_t total;
  uint8_t *msg = store_msg_build(STORE_REPLY, NULL, 0, val, vlen, arg, 0, status, &total);
  if (!msg) {
    c->dead = 1;
    return;
  }
  if (c->out_len == 0) {
    c->out = msg;
    c->out_len = total;
  } else {
    /* Only one request is in flight per client, so this is rare: append. */
    uint8_t *grown = realloc(c->out, c->out_len + total);
    if (!grown) {
      free(msg);
      c->dead = 1;
      return;
    }
    memcpy(grown + c->out_len, msg, total);
    free(msg);
    c->out = grown;
    c->out_len += total;
  }
  flush(c);
}

/* Refuses a client: answer, then close once it has read the answer. */
static void refuse(conn_t *c, uint32_t status, int64_t arg, const void *val, size_t vlen) {
  c->closing = 1;
  c->deadline = clock_now_ms() + LINGER_MS;
  reply(c, status, arg, val, vlen);
}

/* ---- Requests ----------------------------------------------------------------------------- */

static int has_key(const store_server_t *s, const uint8_t *key, size_t klen) {
  const void *v;
  size_t vl;
  return store_kv_get(s->kv, key, klen, &v, &vl);
}

static void tell_failed(store_server_t *s, conn_t *c) {
  reply(c, STORE_FAILED, s->failed_code, s->failed_msg, s->failed_len);
  c->told = 1;
}

static void unpark(conn_t *c) {
  free(c->park_body);
  c->park_body = NULL;
  c->parked = 0;
  c->deadline = -1;
}

/* Records the job's first failure and tells every parked request at once; later requests hear
 * of it as they come (on_request). A second failure keeps the first message: it is usually a
 * consequence of the first. */
static void fail_job(store_server_t *s, int64_t code, const void *msg, size_t len) {
  if (s->failed) return;
  if (len > sizeof s->failed_msg) len = sizeof s->failed_msg;
  memcpy(s->failed_msg, msg, len);
  s->failed_len = len;
  s->failed_code = code;
  int untold = 0;
  for (size_t i = 0; i < s->nconns; i++) {
    conn_t *c = s->conns[i];
    if (c->parked && !c->dead) {
      unpark(c);
      tell_failed(s, c);
    }
    untold += c->greeted && !c->told && !c->dead;
  }
  /* The count first: store_server_stop must not see the failure without it. */
  __atomic_store_n(&s->untold, untold, __ATOMIC_RELEASE);
  __atomic_store_n(&s->failed, 1, __ATOMIC_RELEASE);
}

/* Answers a parked request if its keys exist now, or, when `expired`, with STORE_TIMEOUT and
 * (for WAIT) the keys still missing. Returns 1 when answered. */
static int answer_parked(store_server_t *s, conn_t *c, int expired) {
  const store_hdr_t *h = &c->park_hdr;
  const uint8_t *body = c->park_body;
  if (h->type == STORE_GET) {
    const void *v;
    size_t vl;
    if (store_kv_get(s->kv, body, h->key_len, &v, &vl))
      reply(c, STORE_OK, 0, v, vl);
    else if (expired)
      reply(c, STORE_TIMEOUT, 0, NULL, 0);
    else
      return 0;
  } else {
    /* WAIT: collect the missing keys in the wire's list format. */
    uint8_t *missing = malloc(h->val_len ? h->val_len : 1);
    if (!missing) {
      c->dead = 1;
      return 1;
    }
    size_t off = 0, mlen = 0, klen;
    int64_t nmissing = 0;
    const uint8_t *key;
    while (store_keys_next(body, h->val_len, &off, &key, &klen) == 1) {
      if (has_key(s, key, klen)) continue;
      memcpy(missing + mlen, key - 4, klen + 4);
      mlen += klen + 4;
      nmissing++;
    }
    if (nmissing == 0)
      reply(c, STORE_OK, 0, NULL, 0);
    else if (expired)
      reply(c, STORE_TIMEOUT, nmissing, missing, mlen);
    free(missing);
    if (nmissing > 0 && !expired) return 0;
  }
  unpark(c);
  return 1;
}

static void wake_parked(store_server_t *s) {
  for (size_t i = 0; i < s->nconns; i++) {
    conn_t *c = s->conns[i];
    if (c->parked && !c->dead) answer_parked(s, c, 0);
  }
}

/* A refusal for the job token is always said on the server's stderr, not only with WEFT_DEBUG:
 * someone without the token tried to join, and whoever runs the job should see it. */
static void log_refusal(const store_server_t *s, const conn_t *c, const char *why) {
  fprintf(stderr, "weft rank 0 (store on port %d): refused a connection from %s: %s\n", s->port,
          c->peer, why);
}

/* Refuses a hello of this job whose world size or rank is wrong; returns 1 when it did. A world
 * size that differs fails the job: the ranks that did join would otherwise wait out their connect
 * timeout for a rank that will never come. Another job's hello (BAD_JOB) never fails ours. */
static int refuse_misfit(store_server_t *s, conn_t *c, const store_identity_t *them,
                         const uint8_t *ours) {
  if (them->world_size != s->id.world_size) {
    char why[200];
    int n = snprintf(why, sizeof why,
                     "rank %d joined with a world size of %d, but rank 0 (the master) has %d "
                     "(WORLD_SIZE must be the same on every rank)",
                     them->rank, them->world_size, s->id.world_size);
    fail_job(s, WEFT_ERR_MISMATCH, why, (size_t)n);
    refuse(c, STORE_BAD_SIZE, 0, ours, STORE_HELLO_SIZE);
    return 1;
  }
  if (them->rank < 0 || them->rank >= s->id.world_size) {
    refuse(c, STORE_BAD_RANK, 0, ours, STORE_HELLO_SIZE);
    return 1;
  }
  return 0;
}

static void on_hello(store_server_t *s, conn_t *c, const uint8_t *body, uint32_t len) {
  store_identity_t them, us = s->id;
  store_hello_decode(body, &them);
  us.rank = them.rank;
  uint8_t ours[STORE_HELLO_SIZE];
  store_hello_encode(&us, ours);
  int has_nonce = len == STORE_HELLO_SIZE + STORE_NONCE_SIZE;
  /* The token first: without it a stranger learns nothing but that one is required. */
  if (s->token[0] && !has_nonce) {
    log_refusal(s, c, "no job token (this job requires WEFT_JOB_TOKEN)");
    refuse(c, STORE_NO_TOKEN, 0, ours, sizeof ours);
  } else if (!s->token[0] && has_nonce) {
    log_refusal(s, c, "it has a job token but this job has none (set WEFT_JOB_TOKEN on every "
                      "rank or on none)");
    refuse(c, STORE_UNEXPECTED_TOKEN, 0, ours, sizeof ours);
  } else if (them.job_id != s->id.job_id) {
    refuse(c, STORE_BAD_JOB, 0, ours, sizeof ours);
  } else if (s->token[0]) {
    /* Challenge: our fresh nonce and our proof; the client's answer is checked in on_auth, and
     * only then its world size and rank: a stranger's forged hello must not fail the job. */
    uint8_t val[STORE_HELLO_SIZE + STORE_NONCE_SIZE + STORE_MAC_SIZE];
    memcpy(c->hello, body, STORE_HELLO_SIZE);
    memcpy(c->nc, body + STORE_HELLO_SIZE, STORE_NONCE_SIZE);
    if (hmac_random(c->ns, sizeof c->ns) != 0) {
      c->dead = 1; /* no fresh nonce, no handshake: a fixed one would make replays work */
      return;
    }
    memcpy(val, ours, sizeof ours);
    memcpy(val + STORE_HELLO_SIZE, c->ns, STORE_NONCE_SIZE);
    hmac_challenge(s->token, HMAC_LABEL_ACCEPT, c->hello, sizeof c->hello, c->nc, c->ns,
                   val + STORE_HELLO_SIZE + STORE_NONCE_SIZE);
    c->challenged = 1;
    reply(c, STORE_PROVE, 0, val, sizeof val);
  } else if (!refuse_misfit(s, c, &them, ours)) {
    c->greeted = 1;
    reply(c, STORE_OK, 0, ours, sizeof ours);
  }
}

static void on_auth(store_server_t *s, conn_t *c, const uint8_t *mac) {
  uint8_t want[STORE_MAC_SIZE];
  hmac_challenge(s->token, HMAC_LABEL_CONNECT, c->hello, sizeof c->hello, c->nc, c->ns, want);
  c->challenged = 0;
  if (c->hdr.arg == 0 && hmac_equal(want, mac, sizeof want)) {
    /* Now the hello is known to come from this job: check what on_hello left for here. */
    store_identity_t them, us = s->id;
    store_hello_decode(c->hello, &them);
    us.rank = them.rank;
    uint8_t ours[STORE_HELLO_SIZE];
    store_hello_encode(&us, ours);
    if (refuse_misfit(s, c, &them, ours)) return;
    c->greeted = 1;
    reply(c, STORE_OK, 0, NULL, 0);
    return;
  }
  log_refusal(s, c, c->hdr.arg == 0 ? "wrong job token" : "wrong job token (it found this job's proof wrong)");
  refuse(c, STORE_BAD_TOKEN, 0, NULL, 0);
}

/* Counters are decimal text so that store_get shows them; anything else is not a counter. */
static int parse_counter(const void *v, size_t n, int64_t *out) {
  char buf[24];
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, v, n);
  buf[n] = '\0';
  char *end;
  errno = 0;
  long long x = strtoll(buf, &end, 10);
  if (errno != 0 || *end != '\0' || end == buf) return -1;
  *out = x;
  return 0;
}

static void on_add(store_server_t *s, conn_t *c, const uint8_t *key) {
  const void *v;
  size_t vl;
  int64_t cur = 0;
  if (store_kv_get(s->kv, key, c->hdr.key_len, &v, &vl) && parse_counter(v, vl, &cur) != 0) {
    static const char why[] = "the key holds a value that is not a decimal integer";
    reply(c, STORE_NOT_INTEGER, 0, why, sizeof why - 1);
    return;
  }
  /* Wraps like the other integer reductions instead of being undefined. */
  int64_t next = (int64_t)((uint64_t)cur + (uint64_t)c->hdr.arg);
  char text[24];
  int n = snprintf(text, sizeof text, "%lld", (long long)next);
  if (store_kv_put(s->kv, key, c->hdr.key_len, text, (size_t)n) != 0) {
    c->dead = 1;
    return;
  }
  reply(c, STORE_OK, next, NULL, 0);
  wake_parked(s);
}

/* Handles the complete request in c->hdr / c->body; takes the body. */
static void on_request(store_server_t *s, conn_t *c) {
  uint8_t *body = c->body;
  const store_hdr_t *h = &c->hdr;
  c->body = NULL;
  if (s->failed && c->greeted) {
    tell_failed(s, c);
    free(body);
    return;
  }
  switch (h->type) {
    case STORE_HELLO:
      on_hello(s, c, body, h->val_len);
      break;
    case STORE_AUTH:
      on_auth(s, c, body);
      break;
    case STORE_SET:
      if (store_kv_put(s->kv, body, h->key_len, body + h->key_len, h->val_len) != 0) {
        c->dead = 1;
        break;
      }
      reply(c, STORE_OK, 0, NULL, 0);
      wake_parked(s);
      break;
    case STORE_ADD:
      on_add(s, c, body);
      break;
    case STORE_FAIL:
      /* The caller hears the failure back like everyone else (c is not parked). */
      fail_job(s, h->arg, body, h->val_len);
      tell_failed(s, c);
      break;
    case STORE_GET:
    case STORE_WAIT: {
      if (h->type == STORE_WAIT) {
        /* Check the list once here so answer_parked can trust it. */
        size_t off = 0, klen;
        const uint8_t *key;
        int64_t n = 0;
        int rc;
        while ((rc = store_keys_next(body, h->val_len, &off, &key, &klen)) == 1) n++;
        if (rc < 0 || n != h->arg) {
          c->dead = 1;
          break;
        }
      }
      c->parked = 1;
      c->park_hdr = *h;
      c->park_body = body;
      c->deadline = h->timeout_ms == STORE_NO_TIMEOUT ? -1 : clock_now_ms() + h->timeout_ms;
      body = NULL;
      answer_parked(s, c, 0);
      break;
    }
    default:
      c->dead = 1;
  }
  free(body);
}

/* Checks a complete header; returns 0 to go on reading the body. */
static int on_header(conn_t *c) {
  store_hdr_decode(c->hdr_bytes, &c->hdr);
  const store_hdr_t *h = &c->hdr;
  if (h->magic != STORE_MAGIC) return -1; /* not one of ours: drop it, serve the others */
  if (h->version != STORE_VERSION) {
    /* Tell another weft version which version we speak; anything else just goes. */
    if (!c->greeted && h->type == STORE_HELLO) refuse(c, STORE_BAD_VERSION, STORE_VERSION, NULL, 0);
    return -1;
  }
  if (store_hdr_problem(h) || h->type == STORE_REPLY) return -1;
  /* Hello first, and only once; with a job token AUTH next, and nothing else before it. */
  if (c->challenged) {
    if (h->type != STORE_AUTH) return -1;
  } else if (!c->greeted) {
    if (h->type != STORE_HELLO) return -1;
  } else if (h->type == STORE_HELLO || h->type == STORE_AUTH) {
    return -1;
  }
  c->body_len = (size_t)h->key_len + h->val_len;
  c->body_got = 0;
  c->body = malloc(c->body_len ? c->body_len : 1);
  if (!c->body) return -1;
  c->have_hdr = 1;
  return 0;
}

/* ---- Connections -------------------------------------------------------------------------- */

/* Reads whatever is there; returns when the socket would block or the connection ends. */
static void on_readable(store_server_t *s, conn_t *c) {
  uint8_t scratch[256];
  while (!c->dead) {
    uint8_t *dst;
    size_t want;
    /* Refused or parked connections must not send anything more; a refused one may still have
     * bytes in flight, which we read and drop until its EOF. */
    if (c->closing || c->parked) {
      dst = scratch;
      want = sizeof scratch;
    } else if (!c->have_hdr) {
      dst = c->hdr_bytes + c->hdr_got;
      want = STORE_HDR_SIZE - c->hdr_got;
    } else {
      dst = c->body + c->body_got;
      want = c->body_len - c->body_got;
    }
    ssize_t n = recv(c->fd, dst, want, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      c->dead = 1; /* EOF or error */
      return;
    }
    if (c->closing) continue;
    if (c->parked) {
      c->dead = 1; /* a second request while one is parked */
      return;
    }
    if (!c->have_hdr) {
      c->hdr_got += (size_t)n;
      if (c->hdr_got < STORE_HDR_SIZE) continue;
      if (on_header(c) != 0) {
        if (!c->closing) c->dead = 1;
        continue;
      }
    } else {
      c->body_got += (size_t)n;
    }
    if (c->have_hdr && c->body_got == c->body_len) {
      c->have_hdr = 0;
      c->hdr_got = 0;
      on_request(s, c);
    }
  }
}

static void conn_free(conn_t *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->body);
  free(c->park_body);
  free(c->out);
  free(c);
}

/* The dual-stack socket sees IPv4 clients as ::ffff:a.b.c.d; the refusal line names them the way
 * their owner knows them. */
static void unmap_v4(net_addr_t *a) {
  const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->ss;
  if (a->ss.ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) return;
  struct sockaddr_in in4 = {0};
  in4.sin_family = AF_INET;
  in4.sin_port = in6->sin6_port;
  memcpy(&in4.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
  memset(&a->ss, 0, sizeof a->ss);
  memcpy(&a->ss, &in4, sizeof in4);
  a->len = sizeof in4;
}

/* Closes with a reset: nothing lingers in TIME_WAIT, and the client knows at once. */
static void abort_close(int fd) {
  struct linger lg = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close(fd);
}

/* Closes the un-greeted connection that matters least: refused ones (lingering for their answer)
 * first, then those not yet challenged for the job token, oldest first. Returns 0 if none. */
static int drop_pending(store_server_t *s) {
  conn_t *victim = NULL;
  int worst = 3;
  for (size_t i = 0; i < s->nconns; i++) {
    conn_t *c = s->conns[i];
    if (c->greeted || c->dead) continue;
    int order = c->closing ? 0 : c->challenged ? 2 : 1; /* lowest goes first */
    if (order < worst || (order == worst && c->seq < victim->seq)) {
      victim = c;
      worst = order;
    }
  }
  if (!victim) return 0;
  /* Closed now, not at the next reap: the caller needs the descriptor back at once. A reset
   * tells a rank that was slow to say hello to connect again (store_connect). */
  abort_close(victim->fd);
  victim->fd = -1;
  victim->dead = 1;
  return 1;
}

static size_t pending_count(const store_server_t *s) {
  size_t n = 0;
  for (size_t i = 0; i < s->nconns; i++) n += !s->conns[i]->greeted && !s->conns[i]->dead;
  return n;
}

static void accept_all(store_server_t *s) {
  size_t cap = PENDING_SPARE + (size_t)s->id.world_size;
  size_t pending = pending_count(s);
  for (;;) {
    net_addr_t from;
    from.len = sizeof from.ss;
    int fd = accept4(s->listen_fd, (struct sockaddr *)&from.ss, &from.len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (!net_accept_exhausted(errno)) return; /* EAGAIN: nobody else is waiting */
      /* Out of descriptors: make room at a stranger's expense, never at a rank's. */
      if (drop_pending(s)) {
        pending--;
        continue;
      }
      if (!net_shed_one(s->listen_fd, &s->reserve_fd))
        s->listen_paused_until = clock_now_ms() + EXHAUSTED_PAUSE_MS;
      return;
    }
    if (s->nconns == s->capconns) {
      size_t grow = s->capconns ? 2 * s->capconns : 16;
      conn_t **grown = realloc(s->conns, grow * sizeof *grown);
      if (!grown) {
        close(fd);
        continue;
      }
      s->conns = grown;
      s->capconns = grow;
    }
    conn_t *c = calloc(1, sizeof *c);
    if (!c) {
      close(fd);
      continue;
    }
    if (pending >= cap && drop_pending(s)) pending--;
    c->fd = fd;
    c->deadline = -1;
    c->seq = s->accepted++;
    c->hs_deadline = clock_now_ms() + HANDSHAKE_MS;
    unmap_v4(&from);
    net_addr_str(&from, c->peer, sizeof c->peer);
    net_tune_stream(fd, 0); /* best effort: small replies should not wait for Nagle */
    s->conns[s->nconns++] = c;
    /* A rank's hello is already here: read it before more strangers can push it out. */
    on_readable(s, c);
    if (!c->greeted && !c->dead) pending++;
  }
}

/* Answers parked requests whose time is up and drops refused clients that never hung up; after
 * a failure, counts who has not heard of it yet (store_server_stop lingers for them). */
static void expire(store_server_t *s, int64_t now) {
  int untold = 0;
  for (size_t i = 0; i < s->nconns; i++)
    untold += s->conns[i]->greeted && !s->conns[i]->told && !s->conns[i]->dead;
  if (s->failed) __atomic_store_n(&s->untold, untold, __ATOMIC_RELEASE);
  for (size_t i = 0; i < s->nconns; i++) {
    conn_t *c = s->conns[i];
    if (c->dead) continue;
    if (!c->greeted && !c->closing && c->hs_deadline <= now) {
      /* A stranger, or a client too slow to be a rank: its slot is worth more. */
      abort_close(c->fd);
      c->fd = -1;
      c->dead = 1;
      continue;
    }
    if (c->deadline < 0 || c->deadline > now) continue;
    if (c->closing)
      c->dead = 1;
    else if (c->parked)
      answer_parked(s, c, 1);
  }
}

static void reap(store_server_t *s) {
  size_t j = 0;
  for (size_t i = 0; i < s->nconns; i++) {
    if (s->conns[i]->dead)
      conn_free(s->conns[i]);
    else
      s->conns[j++] = s->conns[i];
  }
  s->nconns = j;
}

static int poll_timeout(const store_server_t *s, int64_t now) {
  int64_t next = s->listen_paused_until > 0 ? s->listen_paused_until : -1;
  for (size_t i = 0; i < s->nconns; i++) {
    const conn_t *c = s->conns[i];
    int64_t d = c->deadline;
    if (!c->greeted && !c->closing && (d < 0 || c->hs_deadline < d)) d = c->hs_deadline;
    if (d >= 0 && (next < 0 || d < next)) next = d;
  }
  if (next < 0) return -1;
  return next <= now ? 0 : (int)(next - now);
}

static void *serve(void *arg) {
  store_server_t *s = (store_server_t *)arg;
  struct pollfd *fds = NULL;
  size_t capfds = 0;
  for (;;) {
    size_t n = s->nconns;
    if (n + 2 > capfds) {
      struct pollfd *grown = realloc(fds, (n + 2) * 2 * sizeof *grown);
      if (grown) {
        fds = grown;
        capfds = (n + 2) * 2;
      } else {
        n = capfds >= 2 ? capfds - 2 : 0; /* serve who fits; the rest wait a round */
      }
    }
    if (!fds) break;
    fds[0] = (struct pollfd){s->wake[0], POLLIN, 0};
    if (s->listen_paused_until > 0 && clock_now_ms() >= s->listen_paused_until)
      s->listen_paused_until = 0;
    fds[1] = (struct pollfd){s->listen_fd, (short)(s->listen_paused_until ? 0 : POLLIN), 0};
    for (size_t i = 0; i < n; i++) {
      conn_t *c = s->conns[i];
      fds[i + 2] = (struct pollfd){c->fd, (short)(POLLIN | (c->out_len ? POLLOUT : 0)), 0};
    }
    int r = poll(fds, n + 2, poll_timeout(s, clock_now_ms()));
    if (r < 0 && errno != EINTR) break;
    if (r > 0 && fds[0].revents) break;
    for (size_t i = 0; r > 0 && i < n; i++) {
      conn_t *c = s->conns[i];
      short ev = fds[i + 2].revents;
      if (ev & POLLOUT) flush(c);
      if (ev & (POLLIN | POLLHUP | POLLERR)) on_readable(s, c);
      if (ev & POLLNVAL) c->dead = 1;
    }
    if (r > 0 && fds[1].revents) accept_all(s);
    expire(s, clock_now_ms());
    reap(s);
  }
  free(fds);
  return NULL;
}

/* ---- Lifetime ----------------------------------------------------------------------------- */

static void server_free(store_server_t *s) {
  for (size_t i = 0; i < s->nconns; i++) conn_free(s->conns[i]);
  free(s->conns);
  if (s->listen_fd >= 0) close(s->listen_fd);
  if (s->wake[0] >= 0) close(s->wake[0]);
  if (s->wake[1] >= 0) close(s->wake[1]);
  if (s->reserve_fd >= 0) close(s->reserve_fd);
  store_kv_free(s->kv);
  memset(s->token, 0, sizeof s->token);
  free(s);
}

weft_result_t store_server_start(int port, const store_identity_t *id, store_server_t **out) {
  weft_result_t res = WEFT_SUCCESS;
  if (id->world_size < 1)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "store: world size %d must be at least 1",
                    id->world_size);
  store_server_t *s = calloc(1, sizeof *s);
  if (!s) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "store: out of memory");
  s->id = *id;
  s->id.token = NULL;
  if (id->token && id->token[0]) {
    if (strlen(id->token) >= sizeof s->token) {
      free(s);
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "store: the job token is longer than %zu bytes",
                      sizeof s->token - 1);
    }
    strcpy(s->token, id->token);
    s->id.token = s->token;
  }
  s->listen_fd = s->wake[0] = s->wake[1] = -1;
  s->reserve_fd = net_reserve_open(); /* best effort: without it, the listener pauses instead */
  /* A large backlog: every rank of a big job connects at the same moment. */
  res = net_listen_any(port, AF_UNSPEC, 4096, &s->listen_fd);
  if (res != WEFT_SUCCESS) {
    res = err_context(res, "store: cannot serve on MASTER_PORT %d", port);
    goto fail;
  }
  WEFT_CHECK_GOTO(net_set_nonblocking(s->listen_fd, 1), res, fail);
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(s->listen_fd, (struct sockaddr *)&ss, &len) != 0) {
    res = WEFT_ERR(WEFT_ERR_SYSTEM, "store: getsockname: %s", strerror(errno));
    goto fail;
  }
  net_addr_t bound = {ss, len};
  s->port = net_addr_port(&bound);
  s->kv = store_kv_new();
  if (!s->kv) {
    res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "store: out of memory");
    goto fail;
  }
  if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    res = WEFT_ERR(WEFT_ERR_SYSTEM, "store: pipe: %s", strerror(errno));
    goto fail;
  }
  int rc = pthread_create(&s->thread, NULL, serve, s);
  if (rc != 0) {
    res = WEFT_ERR(WEFT_ERR_SYSTEM, "store: pthread_create: %s", strerror(rc));
    goto fail;
  }
  *out = s;
  return WEFT_SUCCESS;
fail:
  server_free(s);
  return res;
}

int store_server_port(const store_server_t *s) { return s->port; }

void store_server_stop(store_server_t *s) {
  if (!s) return;
  /* After a job failure, give the ranks that have not asked since a moment to ask and hear why
   * (their next request gets the failure) instead of finding the store gone. */
  int64_t until = clock_now_ms() + LINGER_MS;
  while (__atomic_load_n(&s->failed, __ATOMIC_ACQUIRE) &&
         __atomic_load_n(&s->untold, __ATOMIC_ACQUIRE) > 0 && clock_now_ms() < until)
    usleep(2000);
  char b = 1;
  while (write(s->wake[1], &b, 1) < 0 && errno == EINTR) {
  }
  pthread_join(s->thread, NULL);
  server_free(s);
}
