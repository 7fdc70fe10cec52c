/* rendezvous.c -- one communicator's rendezvous through the key-value store. */
#include "bootstrap/rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/env.h"
#include "bootstrap/store.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/net.h"

struct boot_session {
  boot_params_t p;
  store_server_t *server; /* rank 0 only */
  store_client_t *client;
};

/* Rank 0 names the communicator and every other rank takes its word for it. Each rank hashing
 * the master's name as it was given made "localhost" on one rank and "127.0.0.1" on another two
 * communicators whose transport handshakes refused each other; rank 0's numeric address is one
 * name for all of them. */
static weft_result_t agree_comm_id(boot_session_t *s, const net_addr_t *master, uint64_t *id) {
  const char *key = "comm-id";
  char text[24];
  if (s->p.rank == 0) {
    char host[NET_ADDR_STRLEN];
    if (getnameinfo((const struct sockaddr *)&master->ss, master->len, host, sizeof host, NULL, 0,
                    NI_NUMERICHOST) != 0)
      snprintf(host, sizeof host, "%s", s->p.master_host);
    *id = boot_comm_id(s->p.job_id, host, s->p.master_port);
    int n = snprintf(text, sizeof text, "%016llx", (unsigned long long)*id);
    return store_set(s->client, key, text, (size_t)n);
  }
  size_t len = 0;
  WEFT_CHECK(
      store_get(s->client, key, text, sizeof text - 1, &len, s->p.config->connect_timeout_ms));
  text[len] = '\0';
  char *end;
  *id = strtoull(text, &end, 16);
  if (len != 16 || *end != '\0')
    return WEFT_ERR(WEFT_ERR_REMOTE, "rank 0 published a malformed communicator id \"%s\"", text);
  return WEFT_SUCCESS;
}

/* Two processes started with the same rank would each wait for the rank nobody took, until the
 * connect timeout, and then name the wrong problem. So each rank claims its number (an atomic
 * add) and says who it is; the second claimer names both and fails the job, which ends every
 * rank's wait at once with that message. */
static weft_result_t claim_rank(boot_session_t *s) {
  char key[64], me[128], host[64] = "?", first[128];
  gethostname(host, sizeof host - 1);
  snprintf(me, sizeof me, "pid %d on host %s", (int)getpid(), host);
  int64_t n = 0;
  snprintf(key, sizeof key, "claim/%d", s->p.rank);
  WEFT_CHECK(store_add(s->client, key, 1, &n));
  snprintf(key, sizeof key, "claim/%d/%lld", s->p.rank, (long long)n);
  WEFT_CHECK(store_set(s->client, key, me, strlen(me)));
  if (n == 1) return WEFT_SUCCESS;
  /* The first claimer says who it is right after its add: this wait is short. */
  size_t len = 0;
  snprintf(key, sizeof key, "claim/%d/1", s->p.rank);
  if (store_get(s->client, key, first, sizeof first - 1, &len, s->p.config->connect_timeout_ms) ==
      WEFT_SUCCESS)
    first[len] = '\0';
  else
    snprintf(first, sizeof first, "another process");
  char why[400];
  snprintf(why, sizeof why,
           "rank %d is claimed by two processes: %s and %s (each process needs a RANK of its own)",
           s->p.rank, first, me);
  (void)store_fail(s->client, WEFT_ERR_MISMATCH, why);
  return WEFT_ERR(WEFT_ERR_MISMATCH, "%s", why);
}

weft_result_t boot_open(const boot_params_t *p, boot_session_t **out, void *advertise,
                        uint64_t *comm_id) {
  weft_result_t res;
  boot_session_t *s = calloc(1, sizeof *s);
  if (!s) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "bootstrap: out of memory");
  s->p = *p;
  net_addr_t master;
  WEFT_CHECK_GOTO(net_resolve(p->master_host, p->master_port, &master), res, fail);
  store_identity_t id = {p->job_id, p->nranks, p->rank, p->config->job_token};
  if (p->rank == 0) WEFT_CHECK_GOTO(store_server_start(p->master_port, &id, &s->server), res, fail);
  WEFT_CHECK_GOTO(store_connect(&master, &id, p->config->connect_timeout_ms, &s->client), res,
                  fail);
  WEFT_CHECK_GOTO(claim_rank(s), res, fail);
  WEFT_CHECK_GOTO(agree_comm_id(s, &master, comm_id), res, fail);
  WEFT_CHECK_GOTO(net_local_addr_for(&master, p->config->socket_ifname, advertise), res, fail);
  net_addr_set_port(advertise, 0);
  *out = s;
  return WEFT_SUCCESS;
fail:
  boot_close(s);
  return err_context(res, "rank %d: bootstrap with master %s:%d", p->rank, p->master_host,
                     p->master_port);
}

/* Rank 0 stops the store when init returns, so it first waits until every other rank has been
 * answered its last request: each one counts itself out after its wait returned, and the server
 * answers requests one at a time, so once rank 0 reads the full count every answer was sent. */
static weft_result_t wait_until_all_left(boot_session_t *s, int timeout_ms) {
  int64_t left = 0;
  if (s->p.rank != 0) return store_add(s->client, "left", 1, &left);
  int64_t deadline = clock_now_ms() + timeout_ms;
  for (;;) {
    WEFT_CHECK(store_add(s->client, "left", 0, &left));
    if (left >= s->p.nranks - 1) return WEFT_SUCCESS;
    if (clock_now_ms() > deadline)
      return WEFT_ERR(WEFT_ERR_TIMEOUT, "only %lld of %d ranks finished joining within %d ms",
                      (long long)left, s->p.nranks - 1, timeout_ms);
    usleep(1000);
  }
}

weft_result_t boot_exchange(boot_session_t *s, const boot_record_t *mine, boot_record_t *all) {
  char key[64];
  int timeout = s->p.config->connect_timeout_ms;
  weft_result_t res;
  snprintf(key, sizeof key, "peer/%d", s->p.rank);
  WEFT_CHECK_GOTO(store_set(s->client, key, mine, sizeof *mine), res, fail);
  for (int r = 0; r < s->p.nranks; r++) {
    size_t len = 0;
    snprintf(key, sizeof key, "peer/%d", r);
    WEFT_CHECK_GOTO(store_get(s->client, key, &all[r], sizeof all[r], &len, timeout), res, fail);
    if (len != sizeof all[r]) {
      res = WEFT_ERR(WEFT_ERR_MISMATCH, "rank %d published a record of %zu bytes, expected %zu "
                     "(different weft versions?)", r, len, sizeof all[r]);
      goto fail;
    }
    const char *problem = boot_record_problem(&all[r]);
    if (problem) {
      res = WEFT_ERR(WEFT_ERR_REMOTE, "rank %d published a malformed record: %s "
                     "(different weft versions?)", r, problem);
      goto fail;
    }
  }
  /* Count in; the last rank to arrive releases everyone. Only then may rank 0 stop the store. */
  int64_t arrived = 0;
  WEFT_CHECK_GOTO(store_add(s->client, "joined", 1, &arrived), res, fail);
  if (arrived == s->p.nranks) WEFT_CHECK_GOTO(store_set(s->client, "all-joined", "1", 1), res, fail);
  const char *keys[] = {"all-joined"};
  WEFT_CHECK_GOTO(store_wait(s->client, keys, 1, timeout), res, fail);
  WEFT_CHECK_GOTO(wait_until_all_left(s, timeout), res, fail);
  return WEFT_SUCCESS;
fail:
  return err_context(res, "rank %d: exchanging addresses", s->p.rank);
}

_Static_assert(sizeof(net_addr_t) <= sizeof(((boot_record_t *)0)->addr[0]),
               "a TCP address must fit its blob");
_Static_assert(sizeof(boot_record_t) % 8 == 0,
               "records lie back to back: each must keep the next one's blobs 8-byte aligned");

/* NULL for an all-zero blob or an IPv4/IPv6 address of its family's length. */
static const char *tcp_blob_problem(const unsigned char *blob, size_t size, const char *what) {
  int zero = 1;
  for (size_t i = 0; i < size; i++) zero &= blob[i] == 0;
  if (zero) return NULL;
  net_addr_t a;
  memcpy(&a, blob, sizeof a);
  int v4 = a.ss.ss_family == AF_INET && a.len == sizeof(struct sockaddr_in);
  int v6 = a.ss.ss_family == AF_INET6 && a.len == sizeof(struct sockaddr_in6);
  return v4 || v6 ? NULL : what;
}

const char *boot_record_problem(const boot_record_t *r) {
  if (!memchr(r->host_id, '\0', sizeof r->host_id)) return "its host id does not end";
  const char *p =
      tcp_blob_problem(r->addr[0], sizeof r->addr[0], "its TCP address is neither IPv4 nor IPv6");
  if (!p)
    p = tcp_blob_problem(r->rescue, sizeof r->rescue,
                         "its rescue address is neither IPv4 nor IPv6");
  return p;
}

void boot_close(boot_session_t *s) {
  if (!s) return;
  if (s->client) store_close(s->client);
  if (s->server) store_server_stop(s->server);
  free(s);
}

static void read_first_line(const char *path, char *buf, size_t cap) {
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (fgets(buf, (int)cap, f)) buf[strcspn(buf, "\n")] = '\0';
  fclose(f);
}

void boot_host_id(char *buf, size_t cap) {
  char host[64] = "", boot[48] = "";
  gethostname(host, sizeof host - 1);
  read_first_line("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
  /* Network namespaces on one machine act as separate hosts for the transports (loopback is per
   * namespace), so the namespace is part of the identity. */
  struct stat st;
  unsigned long long netns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
  snprintf(buf, cap, "%s/%s/%llu", host, boot, netns);
}

uint64_t boot_comm_id(uint64_t job_id, const char *master_host, int master_port) {
  char text[320];
  snprintf(text, sizeof text, "%llx@%s:%d", (unsigned long long)job_id, master_host, master_port);
  return boot_job_hash(text);
}
