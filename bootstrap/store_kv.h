/* store_kv.h -- internal: the store server's table of byte-string keys and values. */
#ifndef WEFT_BOOTSTRAP_STORE_KV_H_
#define WEFT_BOOTSTRAP_STORE_KV_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct store_kv store_kv_t;

/* NULL when out of memory. */
store_kv_t *store_kv_new(void);
void store_kv_free(store_kv_t *kv);
/* Copies key and value in; returns 0, or -1 when out of memory (the old value then stays). */
int store_kv_put(store_kv_t *kv, const void *key, size_t klen, const void *val, size_t vlen);
/* 1 with the value (valid until the key is next put) when present, else 0. */
int store_kv_get(const store_kv_t *kv, const void *key, size_t klen, const void **val,
                 size_t *vlen);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_BOOTSTRAP_STORE_KV_H_ */
