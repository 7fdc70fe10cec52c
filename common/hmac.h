/* hmac.h -- internal: SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) for the job token's
 * challenge-response, plus a constant-time comparison of MACs and fresh random nonces. */
#ifndef WEFT_COMMON_HMAC_H_
#define WEFT_COMMON_HMAC_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHA256_BYTES 32
#define SHA256_BLOCK 64

typedef struct {
  uint32_t h[8];
  uint64_t total; /* bytes hashed so far */
  uint8_t block[SHA256_BLOCK];
  size_t used; /* bytes waiting in block */
} sha256_t;

void sha256_init(sha256_t *s);
void sha256_update(sha256_t *s, const void *data, size_t len);
void sha256_final(sha256_t *s, uint8_t out[SHA256_BYTES]);

/* HMAC-SHA256 over the concatenation of nparts buffers (part i: parts[i], lens[i]). */
void hmac_sha256(const void *key, size_t key_len, int nparts, const void *const *parts,
                 const size_t *lens, uint8_t out[SHA256_BYTES]);

/* The job token's challenge-response (the store and TCP peer connections; docs/reliability.md):
 * each side sends a fresh nonce and proves it knows the token with
 *   HMAC(token, label || context || Nc || Ns)
 * where label ("weft accept" / "weft connect", with its NUL) keeps one direction's proof from
 * being replayed as the other's, context names the job/communicator and the ranks, and Nc and Ns
 * are the connecting and accepting side's nonces. Fresh nonces on both sides make a recorded
 * handshake worthless; the token itself never goes on the wire. */
#define HMAC_NONCE_BYTES 32
#define HMAC_LABEL_ACCEPT "weft accept"
#define HMAC_LABEL_CONNECT "weft connect"
void hmac_challenge(const char *token, const char *label, const void *context, size_t context_len,
                    const uint8_t nc[HMAC_NONCE_BYTES], const uint8_t ns[HMAC_NONCE_BYTES],
                    uint8_t out[SHA256_BYTES]);

/* 1 when the n bytes are equal; the time taken does not depend on where they differ, so a
 * refusing peer's timing does not tell a forger how many leading bytes of a MAC it got right. */
int hmac_equal(const void *a, const void *b, size_t n);

/* Fills buf with n bytes from getrandom(2); 0 on success, else -1 with errno set. */
int hmac_random(void *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMMON_HMAC_H_ */
