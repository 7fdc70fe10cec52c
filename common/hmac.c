/* hmac.c -- SHA-256 as FIPS 180-4 section 6.2 describes it, HMAC as RFC 2104 builds it on top. */
#include "common/hmac.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

/* FIPS 180-4 4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64
 * primes. */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 512-bit block: the message schedule W, then 64 rounds (FIPS 180-4 6.2.2). */
static void compress(uint32_t h[8], const uint8_t *p) {
  uint32_t w[64];
  for (int t = 0; t < 16; t++)
    w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 |
           (uint32_t)p[4 * t + 3];
  for (int t = 16; t < 64; t++) {
    uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = s1 + w[t - 7] + s0 + w[t - 16];
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int t = 0; t < 64; t++) {
    uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void sha256_init(sha256_t *s) {
  /* FIPS 180-4 5.3.3: fractional parts of the square roots of the first 8 primes. */
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->total = 0;
  s->used = 0;
}

void sha256_update(sha256_t *s, const void *data, size_t len) {
  const uint8_t *p = data;
  s->total += len;
  while (len > 0) {
    size_t take = SHA256_BLOCK - s->used;
    if (take > len) take = len;
    memcpy(s->block + s->used, p, take);
    s->used += take;
    p += take;
    len -= take;
    if (s->used == SHA256_BLOCK) {
      compress(s->h, s->block);
      s->used = 0;
    }
  }
}

void sha256_final(sha256_t *s, uint8_t out[SHA256_BYTES]) {
  /* FIPS 180-4 5.1.1: a 1 bit, zeros up to 56 bytes into a block, then the length in bits. */
  uint64_t bits = s->total * 8;
  uint8_t pad = 0x80;
  sha256_update(s, &pad, 1);
  pad = 0;
  while (s->used != 56) sha256_update(s, &pad, 1);
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
  sha256_update(s, len, 8);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(s->h[i] >> (24 - 8 * j));
  memset(s, 0, sizeof *s);
}

void hmac_sha256(const void *key, size_t key_len, int nparts, const void *const *parts,
                 const size_t *lens, uint8_t out[SHA256_BYTES]) {
  /* RFC 2104: a key longer than a block is hashed first; shorter ones are padded with zeros. */
  uint8_t k[SHA256_BLOCK] = {0}, pad[SHA256_BLOCK], inner[SHA256_BYTES];
  sha256_t s;
  if (key_len > SHA256_BLOCK) {
    sha256_init(&s);
    sha256_update(&s, key, key_len);
    sha256_final(&s, k);
  } else if (key_len > 0) {
    memcpy(k, key, key_len);
  }
  for (int i = 0; i < SHA256_BLOCK; i++) pad[i] = k[i] ^ 0x36;
  sha256_init(&s);
  sha256_update(&s, pad, sizeof pad);
  for (int i = 0; i < nparts; i++) sha256_update(&s, parts[i], lens[i]);
  sha256_final(&s, inner);
  for (int i = 0; i < SHA256_BLOCK; i++) pad[i] = k[i] ^ 0x5c;
  sha256_init(&s);
  sha256_update(&s, pad, sizeof pad);
  sha256_update(&s, inner, sizeof inner);
  sha256_final(&s, out);
  /* The padded key is the secret itself: do not leave it on the stack. */
  memset(k, 0, sizeof k);
  memset(pad, 0, sizeof pad);
}

void hmac_challenge(const char *token, const char *label, const void *context, size_t context_len,
                    const uint8_t nc[HMAC_NONCE_BYTES], const uint8_t ns[HMAC_NONCE_BYTES],
                    uint8_t out[SHA256_BYTES]) {
  const void *parts[] = {label, context, nc, ns};
  size_t lens[] = {strlen(label) + 1, context_len, HMAC_NONCE_BYTES, HMAC_NONCE_BYTES};
  hmac_sha256(token, strlen(token), 4, parts, lens, out);
}

int hmac_equal(const void *a, const void *b, size_t n) {
  const volatile uint8_t *x = a, *y = b;
  uint8_t diff = 0;
  for (size_t i = 0; i < n; i++) diff |= (uint8_t)(x[i] ^ y[i]);
  return diff == 0;
}

int hmac_random(void *buf, size_t n) {
  uint8_t *p = buf;
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += got;
    n -= (size_t)got;
  }
  return 0;
}
