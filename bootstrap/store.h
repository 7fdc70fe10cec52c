/* store.h -- internal: the bootstrap key-value store (like torch's TCPStore) that ranks meet in.
 *
 * Rank 0 serves it on MASTER_PORT from a background thread; every rank (rank 0 included) talks
 * to it through a client. A client is one TCP connection with one request in flight: use one
 * client per thread. Values are bytes; store_add keeps its counter as decimal text, so that
 * store_get of a counter reads "3". The protocol is described in store_wire.h. */
#ifndef WEFT_BOOTSTRAP_STORE_H_
#define WEFT_BOOTSTRAP_STORE_H_

#include <stddef.h>
#include <stdint.h>

#include "common/net.h"
#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a client proves in its hello: the master refuses another job's ranks (a stale job on the
 * same MASTER_PORT) and ranks that disagree about the world size; the latter also fails the job,
 * so that every rank hears of it (store_wire.h). A request of a failed job fails with the
 * failure's code and message, as it was recorded. */
typedef struct {
  uint64_t job_id;
  int world_size;
  int rank;
  /* The job token (WEFT_JOB_TOKEN); NULL or "" = none. With one, server and client prove to
   * each other that they know it (store_wire.h) before any other request is served. Copied by
   * store_server_start and store_connect. */
  const char *token;
} store_identity_t;

typedef struct store_server store_server_t;
typedef struct store_client store_client_t;

/* Listens on the wildcard address (IPv6 dual-stack, else IPv4) and serves until stopped; port 0
 * picks a free one (see store_server_port). Only id->job_id and id->world_size are used. */
weft_result_t store_server_start(int port, const store_identity_t *id, store_server_t **out);
/* The port the server listens on. */
int store_server_port(const store_server_t *s);
/* Wakes and joins the server thread, then closes every connection. NULL is allowed. */
void store_server_stop(store_server_t *s);

/* Connects (retrying until the master listens or timeout_ms) and says hello; a connection the
 * master resets before it answers the hello (out of descriptors, shedding strangers) is made
 * again within timeout_ms. timeout_ms also bounds each later set/add reply, and get/wait
 * replies beyond their own timeout. */
weft_result_t store_connect(const net_addr_t *master, const store_identity_t *id, int timeout_ms,
                            store_client_t **out);
weft_result_t store_set(store_client_t *c, const char *key, const void *val, size_t len);
/* Waits up to timeout_ms for the key to exist. *len gets the value's full length; a value longer
 * than cap fails with WEFT_ERR_INVALID_ARGUMENT and leaves the client usable. */
weft_result_t store_get(store_client_t *c, const char *key, void *buf, size_t cap, size_t *len,
                        int timeout_ms);
/* Adds delta to the decimal counter at key (missing counts as 0); *result (may be NULL) gets the
 * new value. */
weft_result_t store_add(store_client_t *c, const char *key, int64_t delta, int64_t *result);
/* Waits up to timeout_ms until every key exists; a timeout names the keys still missing. */
weft_result_t store_wait(store_client_t *c, const char *const *keys, int nkeys, int timeout_ms);
/* Puts the job into the failed state (store_wire.h) with `why` (at most STORE_MAX_FAILURE bytes
 * are kept) and `code`: every rank's pending and later request fails with them, the caller's
 * too. Success means the master recorded a failure, ours or an earlier one. */
weft_result_t store_fail(store_client_t *c, weft_result_t code, const char *why);
/* NULL is allowed. */
void store_close(store_client_t *c);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_BOOTSTRAP_STORE_H_ */
