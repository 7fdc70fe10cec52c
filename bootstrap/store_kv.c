/* store_kv.c -- a chained hash table for the store server; keys are hashed with FNV-1a. */
#include "bootstrap/store_kv.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
  struct entry *next;
  uint64_t hash;
  size_t klen, vlen;
  uint8_t *val;
  uint8_t key[]; /* klen bytes */
} entry_t;

struct store_kv {
  entry_t **buckets;
  size_t nbuckets; /* a power of two */
  size_t count;
};

static uint64_t hash_bytes(const void *p, size_t n) {
  const uint8_t *b = (const uint8_t *)p;
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 1099511628211ULL;
  }
  return h;
}

store_kv_t *store_kv_new(void) {
  store_kv_t *kv = calloc(1, sizeof *kv);
  if (!kv) return NULL;
  kv->nbuckets = 64;
  kv->buckets = calloc(kv->nbuckets, sizeof *kv->buckets);
  if (!kv->buckets) {
    free(kv);
    return NULL;
  }
  return kv;
}

void store_kv_free(store_kv_t *kv) {
  if (!kv) return;
  for (size_t i = 0; i < kv->nbuckets; i++) {
    for (entry_t *e = kv->buckets[i], *next; e; e = next) {
      next = e->next;
      free(e->val);
      free(e);
    }
  }
  free(kv->buckets);
  free(kv);
}

static entry_t *find(const store_kv_t *kv, const void *key, size_t klen, uint64_t h) {
  for (entry_t *e = kv->buckets[h & (kv->nbuckets - 1)]; e; e = e->next) {
    if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0) return e;
  }
  return NULL;
}

/* Doubling keeps chains short as a job's rank count (and so its key count) grows. A failed
 * allocation just leaves the table as it is: longer chains, still correct. */
static void grow(store_kv_t *kv) {
  size_t n = kv->nbuckets * 2;
  entry_t **b = calloc(n, sizeof *b);
  if (!b) return;
  for (size_t i = 0; i < kv->nbuckets; i++) {
    for (entry_t *e = kv->buckets[i], *next; e; e = next) {
      next = e->next;
      e->next = b[e->hash & (n - 1)];
      b[e->hash & (n - 1)] = e;
    }
  }
  free(kv->buckets);
  kv->buckets = b;
  kv->nbuckets = n;
}

int store_kv_put(store_kv_t *kv, const void *key, size_t klen, const void *val, size_t vlen) {
  uint64_t h = hash_bytes(key, klen);
  uint8_t *copy = malloc(vlen ? vlen : 1);
  if (!copy) return -1;
  if (vlen) memcpy(copy, val, vlen);
  entry_t *e = find(kv, key, klen, h);
  if (e) {
    free(e->val);
    e->val = copy;
    e->vlen = vlen;
    return 0;
  }
  e = malloc(sizeof *e + klen);
  if (!e) {
    free(copy);
    return -1;
  }
  e->hash = h;
  e->klen = klen;
  e->vlen = vlen;
  e->val = copy;
  memcpy(e->key, key, klen);
  e->next = kv->buckets[h & (kv->nbuckets - 1)];
  kv->buckets[h & (kv->nbuckets - 1)] = e;
  if (++kv->count > 2 * kv->nbuckets) grow(kv);
  return 0;
}

int store_kv_get(const store_kv_t *kv, const void *key, size_t klen, const void **val,
                 size_t *vlen) {
  entry_t *e = find(kv, key, klen, hash_bytes(key, klen));
  if (!e) return 0;
  *val = e->val;
  *vlen = e->vlen;
  return 1;
}
