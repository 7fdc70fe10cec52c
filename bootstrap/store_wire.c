/* store_wire.c -- encoding and checking of the bootstrap store's messages (see store_wire.h). */
#include "bootstrap/store_wire.h"

#include <stdlib.h>
#include <string.h>

/* Byte by byte, so the layout does not depend on the host's endianness or struct padding. */
static void put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

void store_hdr_encode(const store_hdr_t *h, uint8_t out[STORE_HDR_SIZE]) {
  put_le(out + 0, h->magic, 4);
  put_le(out + 4, h->version, 2);
  put_le(out + 6, h->type, 2);
  put_le(out + 8, h->key_len, 4);
  put_le(out + 12, h->val_len, 4);
  put_le(out + 16, (uint64_t)h->arg, 8);
  put_le(out + 24, h->timeout_ms, 4);
  put_le(out + 28, h->status, 4);
}

void store_hdr_decode(const uint8_t in[STORE_HDR_SIZE], store_hdr_t *h) {
  h->magic = (uint32_t)get_le(in + 0, 4);
  h->version = (uint16_t)get_le(in + 4, 2);
  h->type = (uint16_t)get_le(in + 6, 2);
  h->key_len = (uint32_t)get_le(in + 8, 4);
  h->val_len = (uint32_t)get_le(in + 12, 4);
  h->arg = (int64_t)get_le(in + 16, 8);
  h->timeout_ms = (uint32_t)get_le(in + 24, 4);
  h->status = (uint32_t)get_le(in + 28, 4);
}

const char *store_hdr_problem(const store_hdr_t *h) {
  if (h->type < STORE_HELLO || h->type > STORE_FAIL) return "unknown message type";
  if (h->key_len > STORE_MAX_KEY) return "key too long";
  if (h->val_len > STORE_MAX_VALUE) return "value too long";
  switch (h->type) {
    case STORE_HELLO:
      if (h->key_len != 0 ||
          (h->val_len != STORE_HELLO_SIZE && h->val_len != STORE_HELLO_SIZE + STORE_NONCE_SIZE))
        return "malformed hello";
      break;
    case STORE_AUTH:
      if (h->key_len != 0 || h->val_len != STORE_MAC_SIZE) return "malformed auth";
      break;
    case STORE_SET:
    case STORE_GET:
    case STORE_ADD:
      if (h->key_len == 0) return "empty key";
      if (h->type != STORE_SET && h->val_len != 0) return "unexpected value";
      break;
    case STORE_WAIT:
      if (h->key_len != 0 || h->arg < 0 || h->arg > STORE_MAX_WAIT_KEYS) return "malformed wait";
      break;
    case STORE_FAIL:
      if (h->key_len != 0 || h->val_len == 0 || h->val_len > STORE_MAX_FAILURE)
        return "malformed fail";
      break;
    default:
      break;
  }
  return NULL;
}

uint8_t *store_msg_build(uint16_t type, const void *key, size_t klen, const void *val, size_t vlen,
                         int64_t arg, uint32_t timeout_ms, uint32_t status, size_t *total) {
  store_hdr_t h = {STORE_MAGIC,    STORE_VERSION, type,       (uint32_t)klen,
                   (uint32_t)vlen, arg,           timeout_ms, status};
  uint8_t *buf = malloc(STORE_HDR_SIZE + klen + vlen);
  if (!buf) return NULL;
  store_hdr_encode(&h, buf);
  if (klen) memcpy(buf + STORE_HDR_SIZE, key, klen);
  if (vlen) memcpy(buf + STORE_HDR_SIZE + klen, val, vlen);
  *total = STORE_HDR_SIZE + klen + vlen;
  return buf;
}

void store_hello_encode(const store_identity_t *id, uint8_t out[STORE_HELLO_SIZE]) {
  put_le(out + 0, id->job_id, 8);
  put_le(out + 8, (uint32_t)id->world_size, 4);
  put_le(out + 12, (uint32_t)id->rank, 4);
}

void store_hello_decode(const uint8_t in[STORE_HELLO_SIZE], store_identity_t *id) {
  id->job_id = get_le(in + 0, 8);
  id->world_size = (int32_t)(uint32_t)get_le(in + 8, 4);
  id->rank = (int32_t)(uint32_t)get_le(in + 12, 4);
}

uint8_t *store_keys_encode(const char *const *keys, int nkeys, size_t *len) {
  size_t n = 0;
  for (int i = 0; i < nkeys; i++) n += 4 + strlen(keys[i]);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return NULL;
  size_t off = 0;
  for (int i = 0; i < nkeys; i++) {
    size_t k = strlen(keys[i]);
    put_le(buf + off, k, 4);
    memcpy(buf + off + 4, keys[i], k);
    off += 4 + k;
  }
  *len = n;
  return buf;
}

int store_keys_next(const uint8_t *buf, size_t len, size_t *off, const uint8_t **key,
                    size_t *klen) {
  if (*off == len) return 0;
  if (len - *off < 4) return -1;
  size_t k = (size_t)get_le(buf + *off, 4);
  if (k == 0 || k > STORE_MAX_KEY || k > len - *off - 4) return -1;
  *key = buf + *off + 4;
  *klen = k;
  *off += 4 + k;
  return 1;
}

uint32_t store_timeout_to_wire(int timeout_ms) {
  return timeout_ms < 0 ? STORE_NO_TIMEOUT : (uint32_t)timeout_ms;
}
