/* store_wire.h -- internal: the bytes of the bootstrap store protocol, shared by client and server.
 *
 * Every message is a 32-byte header, then key_len bytes of key, then val_len bytes of value.
 * Integers are little-endian. The header layout never changes between protocol versions, so two
 * versions can always tell each other which version they speak.
 *
 *   offset size field
 *      0    4   magic       STORE_MAGIC
 *      4    2   version     STORE_VERSION
 *      6    2   type        STORE_HELLO ... STORE_REPLY
 *      8    4   key_len     <= STORE_MAX_KEY
 *     12    4   val_len     <= STORE_MAX_VALUE
 *     16    8   arg         ADD: delta / new value; WAIT: number of keys (request) or missing keys
 *     24    4   timeout_ms  GET, WAIT: the server answers STORE_TIMEOUT after this; ~0 = never
 *     28    4   status      replies: STORE_OK ...
 *
 * Requests and their replies (type STORE_REPLY):
 *   HELLO  val = store_hello (16 bytes), then Nc (32) when the client has a job token
 *                                        -> status, val = the server's store_hello; with PROVE
 *                                           also Ns (32) and the server's MAC (32)
 *   AUTH   val = the client's MAC (32); arg = 1: the server's MAC was wrong, the client gives up
 *                                        -> OK, or BAD_TOKEN
 *   SET    key, val                      -> OK
 *   SET    key, val                      -> OK
 *   GET    key, timeout                  -> OK + val, or TIMEOUT (deferred until the key is set)
 *   ADD    key, arg = delta              -> OK + arg = new value, or NOT_INTEGER
 *   WAIT   val = key list, arg = n, timeout -> OK, or TIMEOUT + val = list of missing keys
 *   FAIL   val = message, arg = a weft_result_t -> FAILED (below)
 * A key list is, per key, a u32 length and the key's bytes.
 *
 * Job failure: once a FAIL is recorded (or the master itself refuses a rank of this job for a
 * world size that differs), the job has failed. Every parked GET/WAIT and every later SET, GET,
 * ADD, WAIT or FAIL is answered FAILED with val = the first failure's message and arg = its
 * code, so that every rank stops at once naming the problem instead of waiting out its timeout.
 * Only greeted (with a job token: authenticated) clients can fail the job.
 *
 * Job token (hmac.h): a server with a token answers a hello that carries Nc with PROVE, Ns and
 * HMAC(token, "weft accept" || hello || Nc || Ns), where hello is the client's 16 hello bytes
 * (job, world size, rank); the client checks it and answers AUTH with HMAC(token, "weft connect"
 * || hello || Nc || Ns). Until that AUTH checks out the server serves nothing else. A hello
 * without Nc to a server with a token is refused with NO_TOKEN, one with Nc to a server without
 * a token with UNEXPECTED_TOKEN, so that a configuration that differs fails on both ends. */
#ifndef WEFT_BOOTSTRAP_STORE_WIRE_H_
#define WEFT_BOOTSTRAP_STORE_WIRE_H_

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STORE_MAGIC 0x54534657u /* "WFST" on the wire */
/* 2: the job token's HELLO with a nonce and AUTH. 3: FAIL and FAILED; with a job token, the
 * world size and rank are checked after AUTH. */
#define STORE_VERSION 3
#define STORE_HDR_SIZE 32
#define STORE_HELLO_SIZE 16
#define STORE_NONCE_SIZE 32 /* HMAC_NONCE_BYTES */
#define STORE_MAC_SIZE 32   /* SHA256_BYTES */
#define STORE_MAX_KEY 4096
#define STORE_MAX_VALUE (64u << 20)
#define STORE_MAX_WAIT_KEYS 65536
#define STORE_NO_TIMEOUT 0xffffffffu
#define STORE_MAX_FAILURE 1024 /* a FAIL's message, ERR_MSG_MAX */

enum {
  STORE_HELLO = 1,
  STORE_SET = 2,
  STORE_GET = 3,
  STORE_ADD = 4,
  STORE_WAIT = 5,
  STORE_REPLY = 6,
  STORE_AUTH = 7,
  STORE_FAIL = 8
};

enum {
  STORE_OK = 0,
  STORE_TIMEOUT = 1,
  STORE_BAD_VERSION = 2, /* arg = the server's version */
  STORE_BAD_JOB = 3,
  STORE_BAD_SIZE = 4,
  STORE_BAD_RANK = 5,
  STORE_NOT_INTEGER = 6, /* ADD on a value that is not a decimal integer */
  STORE_PROVE = 7,       /* the hello is fine; now prove the job token (AUTH) */
  STORE_NO_TOKEN = 8,    /* the server has a job token, the hello carried no nonce */
  STORE_UNEXPECTED_TOKEN = 9, /* the hello carried a nonce, the server has no job token */
  STORE_BAD_TOKEN = 10,  /* AUTH's MAC is wrong */
  STORE_FAILED = 11      /* the job failed: val = why, arg = a weft_result_t */
};

typedef struct {
  uint32_t magic;
  uint16_t version, type;
  uint32_t key_len, val_len;
  int64_t arg;
  uint32_t timeout_ms, status;
} store_hdr_t;

void store_hdr_encode(const store_hdr_t *h, uint8_t out[STORE_HDR_SIZE]);
void store_hdr_decode(const uint8_t in[STORE_HDR_SIZE], store_hdr_t *h);
/* NULL when type and lengths are sane for this version, else what is wrong (magic and version
 * are the caller's to check first). */
const char *store_hdr_problem(const store_hdr_t *h);

/* A whole message in one buffer (one send, so one packet with TCP_NODELAY); free() it. NULL when
 * out of memory. */
uint8_t *store_msg_build(uint16_t type, const void *key, size_t klen, const void *val, size_t vlen,
                         int64_t arg, uint32_t timeout_ms, uint32_t status, size_t *total);

void store_hello_encode(const store_identity_t *id, uint8_t out[STORE_HELLO_SIZE]);
void store_hello_decode(const uint8_t in[STORE_HELLO_SIZE], store_identity_t *id);

/* Key lists. store_keys_encode returns a malloc'd buffer (NULL when out of memory). */
uint8_t *store_keys_encode(const char *const *keys, int nkeys, size_t *len);
/* Steps through a list: 1 and the next key, 0 at the end, -1 when malformed. */
int store_keys_next(const uint8_t *buf, size_t len, size_t *off, const uint8_t **key, size_t *klen);

/* Milliseconds to the wire's timeout field: negative means never. */
uint32_t store_timeout_to_wire(int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_BOOTSTRAP_STORE_WIRE_H_ */
