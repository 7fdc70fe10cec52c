/* store_client.c -- a rank's connection to the bootstrap store: one request at a time, each bounded
 * by a timeout, every failure turned into a message that names the master and the key. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/store.h"
#include "bootstrap/store_wire.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/error.h"
#include "common/hmac.h"
#include "common/net.h"

/* GET and WAIT time out on the master, which then answers STORE_TIMEOUT; the client waits this
 * much longer before it decides that the master itself stopped answering. */
#define REPLY_GRACE_MS 5000
/* The hello's answer is immediate; do not let a slow connect leave it no time at all. */
#define MIN_HELLO_MS 1000
/* Between tries when the master reset the connection before answering the hello. */
#define REJOIN_NAP_MS 100

struct store_client {
  int fd;
  int timeout_ms; /* bounds SET/ADD replies (the connect timeout) */
  /* After an I/O or protocol error the byte stream is out of step; every later call fails. */
  int broken;
  /* The master said the job failed (STORE_FAILED): every later call fails with the same. */
  weft_result_t failed;
  char failed_msg[STORE_MAX_FAILURE + 1];
  int answered; /* a reply header arrived: a failure after it is not worth a retry */
  char master[NET_ADDR_STRLEN];
  store_identity_t id;
  char token[sizeof(((weft_config_t *)0)->job_token)]; /* id.token points here when set */
};

/* ---- Requests ----------------------------------------------------------------------------- */

static weft_result_t version_error(const store_client_t *c, unsigned theirs) {
  return WEFT_ERR(WEFT_ERR_MISMATCH,
                  "master at %s speaks store protocol version %u, this process speaks version %d: "
                  "run the same weft version on every rank",
                  c->master, theirs, STORE_VERSION);
}

/* Reads and checks a reply header. */
static weft_result_t read_reply(store_client_t *c, int timeout_ms, store_hdr_t *h) {
  uint8_t raw[STORE_HDR_SIZE];
  WEFT_CHECK(net_recv_all(c->fd, raw, sizeof raw, timeout_ms));
  c->answered = 1;
  store_hdr_decode(raw, h);
  if (h->magic != STORE_MAGIC)
    return WEFT_ERR(WEFT_ERR_REMOTE,
                    "master at %s answered with bytes that are not the weft store protocol "
                    "(magic 0x%08x): is another service listening on MASTER_PORT?",
                    c->master, (unsigned)h->magic);
  if (h->version != STORE_VERSION) return version_error(c, h->version);
  const char *problem = store_hdr_problem(h);
  if (problem || h->type != STORE_REPLY)
    return WEFT_ERR(WEFT_ERR_REMOTE, "master at %s broke the store protocol: %s", c->master,
                    problem ? problem : "not a reply");
  return WEFT_SUCCESS;
}

static weft_result_t job_failed(const store_client_t *c) {
  return WEFT_ERR(c->failed, "%s", c->failed_msg);
}

/* Reads a FAILED answer's message; the stream stays in step. Its code is checked, so that a
 * broken master cannot make us return success or a code weft does not have. */
static weft_result_t read_failure(store_client_t *c, const store_hdr_t *h) {
  if (h->val_len > STORE_MAX_FAILURE) {
    c->broken = 1;
    return WEFT_ERR(WEFT_ERR_REMOTE, "master at %s reported a job failure of %u bytes", c->master,
                    (unsigned)h->val_len);
  }
  WEFT_CHECK(net_recv_all(c->fd, c->failed_msg, h->val_len, c->timeout_ms));
  c->failed_msg[h->val_len] = '\0';
  c->failed =
      h->arg > WEFT_SUCCESS && h->arg <= WEFT_ERR_ABORTED ? (weft_result_t)h->arg : WEFT_ERR_REMOTE;
  return job_failed(c);
}

/* Sends one request and reads the reply's header; the caller reads h->val_len value bytes.
 * wait_ms is the master-side timeout of GET/WAIT (-1: none). A FAILED answer is read here and
 * returned as the job's failure. */
static weft_result_t roundtrip(store_client_t *c, uint16_t type, const char *key, const void *val,
                               size_t vlen, int64_t arg, int wait_ms, store_hdr_t *h) {
  if (c->failed) return job_failed(c);
  if (c->broken)
    return WEFT_ERR(WEFT_ERR_COMM_FAILED,
                    "connection to master at %s is unusable after an earlier error", c->master);
  size_t klen = key ? strlen(key) : 0;
  if ((key && (klen == 0 || klen > STORE_MAX_KEY)) || vlen > STORE_MAX_VALUE)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "key must be 1..%d bytes and value at most %u bytes (got %zu and %zu)",
                    STORE_MAX_KEY, STORE_MAX_VALUE, klen, vlen);
  size_t total;
  uint8_t *msg =
      store_msg_build(type, key, klen, val, vlen, arg, store_timeout_to_wire(wait_ms), 0, &total);
  if (!msg) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory for a %zu-byte request", vlen);
  int reply_ms = c->timeout_ms;
  if (type == STORE_GET || type == STORE_WAIT)
    reply_ms = wait_ms < 0 ? -1 : wait_ms + REPLY_GRACE_MS;
  weft_result_t res = net_send_all(c->fd, msg, total, c->timeout_ms);
  free(msg);
  if (res == WEFT_SUCCESS) res = read_reply(c, reply_ms, h);
  if (res != WEFT_SUCCESS) c->broken = 1;
  if (res == WEFT_SUCCESS && h->status == STORE_FAILED) res = read_failure(c, h);
  return res;
}

/* A job failure is the whole story; anything else gets `what` (the request and its key). */
#define STORE_CONTEXT(c, res, ...) ((c)->failed ? (res) : err_context((res), __VA_ARGS__))

static weft_result_t recv_value(store_client_t *c, void *buf, size_t len) {
  weft_result_t res = net_recv_all(c->fd, buf, len, c->timeout_ms);
  if (res != WEFT_SUCCESS) c->broken = 1;
  return res;
}

/* Reads and drops n value bytes, so that the stream stays in step after a refused value. */
static weft_result_t drain(store_client_t *c, size_t n) {
  char scratch[4096];
  while (n > 0) {
    size_t k = n < sizeof scratch ? n : sizeof scratch;
    WEFT_CHECK(recv_value(c, scratch, k));
    n -= k;
  }
  return WEFT_SUCCESS;
}

static weft_result_t unexpected_status(store_client_t *c, const store_hdr_t *h) {
  c->broken = 1;
  return WEFT_ERR(WEFT_ERR_REMOTE, "master at %s answered with unknown status %u", c->master,
                  (unsigned)h->status);
}

/* ---- Connecting --------------------------------------------------------------------------- */

static weft_result_t refused(const store_client_t *c, uint32_t status, const store_identity_t *m) {
  const store_identity_t *me = &c->id;
  switch (status) {
    case STORE_BAD_JOB:
      return WEFT_ERR(WEFT_ERR_MISMATCH,
                      "master at %s serves job 0x%016" PRIx64
                      "; this process belongs to job "
                      "0x%016" PRIx64 ": is another job using this MASTER_PORT?",
                      c->master, m->job_id, me->job_id);
    case STORE_BAD_SIZE:
      return WEFT_ERR(WEFT_ERR_MISMATCH, "master at %s expects world size %d, this rank says %d",
                      c->master, m->world_size, me->world_size);
    case STORE_BAD_RANK:
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "master at %s refused rank %d: ranks of a world of size %d are 0..%d",
                      c->master, me->rank, m->world_size, m->world_size - 1);
    case STORE_NO_TOKEN:
      return WEFT_ERR(WEFT_ERR_MISMATCH,
                      "master at %s requires a job token and this rank has none: set "
                      "WEFT_JOB_TOKEN (or WEFT_JOB_TOKEN_FILE) alike on every rank",
                      c->master);
    case STORE_UNEXPECTED_TOKEN:
      return WEFT_ERR(WEFT_ERR_MISMATCH,
                      "this rank has a job token but the master at %s has none: set "
                      "WEFT_JOB_TOKEN (or WEFT_JOB_TOKEN_FILE) alike on every rank, or on none",
                      c->master);
    default:
      return WEFT_ERR(WEFT_ERR_REMOTE, "master at %s refused the hello with unknown status %u",
                      c->master, (unsigned)status);
  }
}

static weft_result_t send_msg(store_client_t *c, uint16_t type, const void *val, size_t vlen,
                              int64_t arg, int timeout_ms) {
  size_t total;
  uint8_t *msg = store_msg_build(type, NULL, 0, val, vlen, arg, 0, 0, &total);
  if (!msg) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory");
  weft_result_t res = net_send_all(c->fd, msg, total, timeout_ms);
  free(msg);
  return res;
}

/* The job token's second half (store_wire.h): check the master's proof, send ours. `reply`
 * holds the master's hello, Ns and MAC. */
static weft_result_t prove(store_client_t *c, const uint8_t *mine, const uint8_t *nc,
                           const uint8_t *reply, int timeout_ms) {
  const uint8_t *ns = reply + STORE_HELLO_SIZE, *theirs = ns + STORE_NONCE_SIZE;
  uint8_t want[STORE_MAC_SIZE], mac[STORE_MAC_SIZE];
  hmac_challenge(c->token, HMAC_LABEL_ACCEPT, mine, STORE_HELLO_SIZE, nc, ns, want);
  if (!hmac_equal(want, theirs, sizeof want)) {
    /* Say so, so that the master logs the refusal too, then give up; no proof of ours goes to
     * a party that could not prove itself. */
    memset(mac, 0, sizeof mac);
    if (send_msg(c, STORE_AUTH, mac, sizeof mac, 1, timeout_ms) == WEFT_SUCCESS) {
      /* The master logs before it answers: waiting (briefly) for its refusal keeps this rank
       * from exiting, and a launcher from stopping rank 0, before that line is out. */
      store_hdr_t h;
      (void)read_reply(c, timeout_ms < 1000 ? timeout_ms : 1000, &h);
    }
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "the master at %s does not know this job's token: WEFT_JOB_TOKEN differs "
                    "between this rank and rank 0 (or something else answers on MASTER_PORT)",
                    c->master);
  }
  hmac_challenge(c->token, HMAC_LABEL_CONNECT, mine, STORE_HELLO_SIZE, nc, ns, mac);
  WEFT_CHECK(send_msg(c, STORE_AUTH, mac, sizeof mac, 0, timeout_ms));
  store_hdr_t h;
  WEFT_CHECK(read_reply(c, timeout_ms, &h));
  if ((h.status == STORE_BAD_SIZE || h.status == STORE_BAD_RANK) && h.val_len == STORE_HELLO_SIZE) {
    /* With a job token the master checks world size and rank only now (store_wire.h). */
    uint8_t raw[STORE_HELLO_SIZE];
    store_identity_t m;
    WEFT_CHECK(net_recv_all(c->fd, raw, sizeof raw, timeout_ms));
    store_hello_decode(raw, &m);
    return refused(c, h.status, &m);
  }
  WEFT_CHECK(drain(c, h.val_len));
  if (h.status == STORE_OK) return WEFT_SUCCESS;
  if (h.status == STORE_BAD_TOKEN)
    return WEFT_ERR(WEFT_ERR_MISMATCH, "the master at %s refused this rank's job token",
                    c->master);
  return unexpected_status(c, &h);
}

static weft_result_t hello(store_client_t *c, int timeout_ms) {
  uint8_t mine[STORE_HELLO_SIZE + STORE_NONCE_SIZE];
  uint8_t theirs[STORE_HELLO_SIZE + STORE_NONCE_SIZE + STORE_MAC_SIZE];
  size_t mine_len = STORE_HELLO_SIZE;
  store_hello_encode(&c->id, mine);
  if (c->token[0]) {
    if (hmac_random(mine + STORE_HELLO_SIZE, STORE_NONCE_SIZE) != 0)
      return WEFT_ERR(WEFT_ERR_SYSTEM, "getrandom for the job token's nonce: %s",
                      strerror(errno));
    mine_len += STORE_NONCE_SIZE;
  }
  WEFT_CHECK(send_msg(c, STORE_HELLO, mine, mine_len, 0, timeout_ms));
  store_hdr_t h;
  WEFT_CHECK(read_reply(c, timeout_ms, &h));
  size_t want = h.status == STORE_PROVE ? sizeof theirs : STORE_HELLO_SIZE;
  if (h.val_len != want || (h.status == STORE_PROVE && !c->token[0]))
    return WEFT_ERR(WEFT_ERR_REMOTE, "master at %s sent a malformed hello reply", c->master);
  WEFT_CHECK(net_recv_all(c->fd, theirs, want, timeout_ms));
  if (h.status == STORE_PROVE)
    return prove(c, mine, mine + STORE_HELLO_SIZE, theirs, timeout_ms);
  if (h.status == STORE_OK && c->token[0])
    /* A master that skips the proof does not know the token (a version 2 master without one
     * refuses with UNEXPECTED_TOKEN instead). */
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "the master at %s accepted this rank without checking its job token", c->master);
  if (h.status == STORE_OK) return WEFT_SUCCESS;
  store_identity_t m;
  store_hello_decode(theirs, &m);
  return refused(c, h.status, &m);
}

weft_result_t store_connect(const net_addr_t *master, const store_identity_t *id, int timeout_ms,
                            store_client_t **out) {
  weft_result_t res;
  store_client_t *c = calloc(1, sizeof *c);
  if (!c) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "store: out of memory");
  c->fd = -1;
  c->timeout_ms = timeout_ms;
  c->id = *id;
  c->id.token = NULL;
  if (id->token && id->token[0]) {
    if (strlen(id->token) >= sizeof c->token) {
      free(c);
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "store: the job token is longer than %zu bytes",
                      sizeof c->token - 1);
    }
    strcpy(c->token, id->token);
    c->id.token = c->token;
  }
  net_addr_str(master, c->master, sizeof c->master);
  int64_t start = clock_now_ms();
  for (;;) {
    int left = timeout_ms;
    if (timeout_ms >= 0) {
      left = timeout_ms - (int)(clock_now_ms() - start);
      if (left < 0) left = 0;
    }
    res = net_connect(master, left, &c->fd);
    if (res != WEFT_SUCCESS) {
      res = err_context(res, "store: rank %d cannot reach the master", id->rank);
      goto fail;
    }
    net_tune_stream(c->fd, 0); /* best effort: requests are small and latency-bound */
    if (timeout_ms >= 0) {
      left = timeout_ms - (int)(clock_now_ms() - start);
      if (left < MIN_HELLO_MS) left = MIN_HELLO_MS;
    }
    c->answered = 0;
    res = hello(c, left);
    if (res == WEFT_SUCCESS) break;
    /* A master out of descriptors, or shedding strangers, resets a connection before it
     * answers; it is listening, so try again while the connect timeout lasts. A master that
     * answered (a refusal, a wrong token) or closed the connection in order is not retried. */
    int64_t spent = clock_now_ms() - start;
    if (res != WEFT_ERR_REMOTE || c->answered || !net_last_reset() ||
        (timeout_ms >= 0 && spent + REJOIN_NAP_MS >= timeout_ms)) {
      res = err_context(res, "store: rank %d joining", id->rank);
      goto fail;
    }
    close(c->fd);
    c->fd = -1;
    struct timespec nap = {0, REJOIN_NAP_MS * 1000000L};
    nanosleep(&nap, NULL);
  }
  *out = c;
  return WEFT_SUCCESS;
fail:
  store_close(c);
  return res;
}

void store_close(store_client_t *c) {
  if (!c) return;
  if (c->fd >= 0) close(c->fd);
  memset(c->token, 0, sizeof c->token);
  free(c);
}

/* ---- Operations --------------------------------------------------------------------------- */

weft_result_t store_set(store_client_t *c, const char *key, const void *val, size_t len) {
  store_hdr_t h;
  weft_result_t res = roundtrip(c, STORE_SET, key, val, len, 0, 0, &h);
  if (res == WEFT_SUCCESS && h.status != STORE_OK) res = unexpected_status(c, &h);
  if (res == WEFT_SUCCESS) res = drain(c, h.val_len);
  return res == WEFT_SUCCESS ? res : STORE_CONTEXT(c, res, "store set '%s'", key);
}

weft_result_t store_get(store_client_t *c, const char *key, void *buf, size_t cap, size_t *len,
                        int timeout_ms) {
  store_hdr_t h;
  weft_result_t res = roundtrip(c, STORE_GET, key, NULL, 0, 0, timeout_ms, &h);
  if (res != WEFT_SUCCESS) return STORE_CONTEXT(c, res, "store get '%s'", key);
  if (h.status == STORE_TIMEOUT) {
    WEFT_CHECK(drain(c, h.val_len));
    return WEFT_ERR(WEFT_ERR_TIMEOUT, "store get '%s' (master at %s): key not set within %d ms",
                    key, c->master, timeout_ms);
  }
  if (h.status != STORE_OK) return err_context(unexpected_status(c, &h), "store get '%s'", key);
  if (len) *len = h.val_len;
  size_t take = h.val_len < cap ? h.val_len : cap;
  res = recv_value(c, buf, take);
  if (res == WEFT_SUCCESS) res = drain(c, h.val_len - take);
  if (res != WEFT_SUCCESS) return STORE_CONTEXT(c, res, "store get '%s'", key);
  if (take < h.val_len)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "store get '%s': the value has %u bytes but the buffer holds %zu", key,
                    (unsigned)h.val_len, cap);
  return WEFT_SUCCESS;
}

weft_result_t store_add(store_client_t *c, const char *key, int64_t delta, int64_t *result) {
  store_hdr_t h;
  weft_result_t res = roundtrip(c, STORE_ADD, key, NULL, 0, delta, 0, &h);
  if (res == WEFT_SUCCESS) res = drain(c, h.val_len);
  if (res != WEFT_SUCCESS) return STORE_CONTEXT(c, res, "store add '%s'", key);
  if (h.status == STORE_NOT_INTEGER)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "store add '%s': the key holds a value that is not a decimal integer", key);
  if (h.status != STORE_OK) return err_context(unexpected_status(c, &h), "store add '%s'", key);
  if (result) *result = h.arg;
  return WEFT_SUCCESS;
}

/* "'a', 'b', ... and 12 more" from a key list, cut to fit the error buffer. */
static void describe_keys(const uint8_t *list, size_t len, char *out, size_t cap) {
  size_t off = 0, klen, used = 0;
  const uint8_t *key;
  int shown = 0, total = 0;
  out[0] = '\0';
  while (store_keys_next(list, len, &off, &key, &klen) == 1) {
    total++;
    if (used + klen + 16 > cap) continue;
    used += (size_t)snprintf(out + used, cap - used, "%s'%.*s'", shown ? ", " : "", (int)klen,
                             (const char *)key);
    shown++;
  }
  if (total > shown) snprintf(out + used, cap - used, " and %d more", total - shown);
}

weft_result_t store_fail(store_client_t *c, weft_result_t code, const char *why) {
  size_t len = strlen(why);
  if (len > STORE_MAX_FAILURE) len = STORE_MAX_FAILURE;
  if (len == 0) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "store fail: empty message");
  store_hdr_t h;
  weft_result_t res = roundtrip(c, STORE_FAIL, NULL, why, len, code, 0, &h);
  if (c->failed) return WEFT_SUCCESS; /* recorded (ours, or an earlier failure) */
  if (res == WEFT_SUCCESS) res = unexpected_status(c, &h);
  return err_context(res, "store fail");
}

weft_result_t store_wait(store_client_t *c, const char *const *keys, int nkeys, int timeout_ms) {
  if (nkeys < 0 || nkeys > STORE_MAX_WAIT_KEYS)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "store wait: %d keys is not in 0..%d", nkeys,
                    STORE_MAX_WAIT_KEYS);
  for (int i = 0; i < nkeys; i++) {
    size_t k = strlen(keys[i]);
    if (k == 0 || k > STORE_MAX_KEY)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "store wait: key %d must be 1..%d bytes", i,
                      STORE_MAX_KEY);
  }
  size_t len;
  uint8_t *list = store_keys_encode(keys, nkeys, &len);
  if (!list) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "store wait: out of memory");
  store_hdr_t h;
  weft_result_t res = roundtrip(c, STORE_WAIT, NULL, list, len, nkeys, timeout_ms, &h);
  free(list);
  if (res != WEFT_SUCCESS) return STORE_CONTEXT(c, res, "store wait for %d keys", nkeys);
  if (h.status == STORE_OK) return drain(c, h.val_len);
  if (h.status != STORE_TIMEOUT) return unexpected_status(c, &h);
  uint8_t *missing = malloc(h.val_len ? h.val_len : 1);
  if (!missing) {
    c->broken = 1;
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "store wait: out of memory");
  }
  res = recv_value(c, missing, h.val_len);
  if (res != WEFT_SUCCESS) {
    free(missing);
    return STORE_CONTEXT(c, res, "store wait for %d keys", nkeys);
  }
  char names[600];
  describe_keys(missing, h.val_len, names, sizeof names);
  free(missing);
  return WEFT_ERR(WEFT_ERR_TIMEOUT,
                  "store wait (master at %s): %lld of %d keys not set within %d ms: %s", c->master,
                  (long long)h.arg, nkeys, timeout_ms, names);
}
