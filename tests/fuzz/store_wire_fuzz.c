/* store_wire_fuzz.c -- the store protocol's bytes (bootstrap/store_wire.c), as both ends decode
 * them: a header re-encodes to the bytes it came from, a header store_hdr_problem accepts is
 * within every limit that the readers then size buffers by, a key list is walked without reading
 * past its end and re-encodes to itself when well formed, and a hello round-trips. */
#include <string.h>

#include "bootstrap/store_wire.h"
#include "tests/fuzz/fuzz.h"

static void check_header(const uint8_t *data) {
  store_hdr_t h;
  store_hdr_decode(data, &h);
  uint8_t again[STORE_HDR_SIZE];
  store_hdr_encode(&h, again);
  FUZZ_CHECK(memcmp(again, data, STORE_HDR_SIZE) == 0);
  const char *problem = store_hdr_problem(&h);
  if (problem) {
    FUZZ_CHECK(problem[0] != '\0');
    return;
  }
  /* What the server and client rely on once the header passed. */
  FUZZ_CHECK(h.type >= STORE_HELLO && h.type <= STORE_FAIL);
  FUZZ_CHECK(h.key_len <= STORE_MAX_KEY && h.val_len <= STORE_MAX_VALUE);
  if (h.type == STORE_HELLO) /* with a job token, the client's nonce follows its identity */
    FUZZ_CHECK(h.key_len == 0 && (h.val_len == STORE_HELLO_SIZE ||
                                  h.val_len == STORE_HELLO_SIZE + STORE_NONCE_SIZE));
  if (h.type == STORE_AUTH) FUZZ_CHECK(h.key_len == 0 && h.val_len == STORE_MAC_SIZE);
  if (h.type == STORE_SET || h.type == STORE_GET || h.type == STORE_ADD) FUZZ_CHECK(h.key_len > 0);
  if (h.type == STORE_GET || h.type == STORE_ADD) FUZZ_CHECK(h.val_len == 0);
  if (h.type == STORE_WAIT)
    FUZZ_CHECK(h.key_len == 0 && h.arg >= 0 && h.arg <= STORE_MAX_WAIT_KEYS);
}

static void check_keys(const uint8_t *buf, size_t len) {
  size_t off = 0, klen, nkeys = 0, prev = 0;
  const uint8_t *key;
  int rc;
  int has_nul = 0;
  while ((rc = store_keys_next(buf, len, &off, &key, &klen)) == 1) {
    FUZZ_CHECK(klen >= 1 && klen <= STORE_MAX_KEY);
    FUZZ_CHECK(key >= buf + 4 && key + klen <= buf + len);
    FUZZ_CHECK(off > prev && off <= len);
    if (memchr(key, 0, klen)) has_nul = 1;
    prev = off;
    nkeys++;
  }
  FUZZ_CHECK(rc == 0 || rc == -1);
  if (rc != 0 || has_nul || nkeys == 0) return;
  /* A well-formed list of NUL-free keys is what store_keys_encode writes for those keys. */
  char **keys = calloc(nkeys, sizeof *keys);
  FUZZ_CHECK(keys);
  off = 0;
  for (size_t i = 0; i < nkeys; i++) {
    FUZZ_CHECK(store_keys_next(buf, len, &off, &key, &klen) == 1);
    keys[i] = strndup((const char *)key, klen);
    FUZZ_CHECK(keys[i]);
  }
  size_t elen;
  uint8_t *enc = store_keys_encode((const char *const *)keys, (int)nkeys, &elen);
  FUZZ_CHECK(enc && elen == len && memcmp(enc, buf, len) == 0);
  free(enc);
  for (size_t i = 0; i < nkeys; i++) free(keys[i]);
  free(keys);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size >= STORE_HDR_SIZE) {
    check_header(data);
    /* A whole message: the header, then the body the lengths announce (as far as there are
     * bytes), built again from its parts. */
    store_hdr_t h;
    store_hdr_decode(data, &h);
    size_t body = size - STORE_HDR_SIZE;
    if (!store_hdr_problem(&h) && (size_t)h.key_len + h.val_len == body) {
      size_t total;
      uint8_t *msg = store_msg_build(h.type, data + STORE_HDR_SIZE, h.key_len,
                                     data + STORE_HDR_SIZE + h.key_len, h.val_len, h.arg,
                                     h.timeout_ms, h.status, &total);
      FUZZ_CHECK(msg && total == size);
      /* Magic and version are always this build's; the rest is the input's. */
      FUZZ_CHECK(memcmp(msg + 6, data + 6, size - 6) == 0);
      free(msg);
    }
  }
  if (size >= STORE_HELLO_SIZE) {
    store_identity_t id;
    store_hello_decode(data, &id);
    uint8_t again[STORE_HELLO_SIZE];
    store_hello_encode(&id, again);
    FUZZ_CHECK(memcmp(again, data, STORE_HELLO_SIZE) == 0);
  }
  check_keys(data, size);
  return 0;
}
