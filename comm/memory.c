/* memory.c -- weft_mem_alloc and weft_mem_free: device memory for device calls, allocated
 * outside any communicator (ncclMemAlloc's counterpart).
 *
 * An allocation needs an engine that outlives it (the emulated engine frees its memory when it
 * closes, and a CUDA engine is bound to one device), so the process keeps one engine per device
 * for these, opened at the first allocation on that device and kept until exit, as CUDA keeps a
 * context per device. Each allocation remembers its engine, so memory allocated with one device
 * current is freed on that device whatever device is current at free. */
#include <pthread.h>
#include <stdlib.h>

#include "common/config.h"
#include "common/error.h"
#include "device/device.h"
#include "include/weft.h"

#define MEM_MAX_DEVICES 64

typedef struct allocation {
  struct allocation *next;
  void *p;
  dev_engine_t *engine;
} allocation_t;

static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;
static dev_engine_t *engines[MEM_MAX_DEVICES];
static allocation_t *allocations;

/* The engine for the device `name` makes current now (mem_mu held). */
static weft_result_t engine_for(const char *name, dev_engine_t **out) {
  int device = dev_engine_current_device(name);
  if (device < 0 || device >= MEM_MAX_DEVICES)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "weft_mem_alloc: no device to allocate on (WEFT_DEVICE=%s; %s)", name,
                    (weft_build_features() & WEFT_FEATURE_CUDA) ? "no CUDA device was found"
                                                                 : "this build has no CUDA");
  if (!engines[device]) {
    dev_engine_t *e = NULL;
    WEFT_CHECK_CTX(dev_engine_open(name, &e), "weft_mem_alloc: opening the device engine");
    if (!e)
      return WEFT_ERR(WEFT_ERR_UNSUPPORTED, "weft_mem_alloc: no device to allocate on (%s)", name);
    engines[device] = e;
  }
  *out = engines[device];
  return WEFT_SUCCESS;
}

weft_result_t weft_mem_alloc(void **ptr, size_t bytes) {
  if (!ptr) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "weft_mem_alloc: ptr is NULL");
  *ptr = NULL;
  if (bytes == 0) return WEFT_SUCCESS;
  weft_config_t cfg;
  WEFT_CHECK_CTX(config_load(&cfg, NULL, NULL), "weft_mem_alloc: reading the settings");
  allocation_t *a = malloc(sizeof *a);
  if (!a) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft_mem_alloc: out of memory");
  pthread_mutex_lock(&mem_mu);
  dev_engine_t *e = NULL;
  weft_result_t res = engine_for(cfg.device, &e);
  if (res == WEFT_SUCCESS) {
    res = e->ops->alloc(e, bytes, 0, &a->p);
    if (res != WEFT_SUCCESS)
      err_context(res, "weft_mem_alloc: %zu bytes on %s device %d", bytes, e->ops->name,
                  e->device);
  }
  if (res == WEFT_SUCCESS) {
    a->engine = e;
    a->next = allocations;
    allocations = a;
    *ptr = a->p;
  } else {
    free(a);
  }
  pthread_mutex_unlock(&mem_mu);
  return res;
}

weft_result_t weft_mem_free(void *ptr) {
  if (!ptr) return WEFT_SUCCESS;
  pthread_mutex_lock(&mem_mu);
  allocation_t **at = &allocations;
  while (*at && (*at)->p != ptr) at = &(*at)->next;
  allocation_t *a = *at;
  if (a) *at = a->next;
  pthread_mutex_unlock(&mem_mu);
  if (!a)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "weft_mem_free: %p did not come from weft_mem_alloc (or was freed already)",
                    ptr);
  a->engine->ops->release(a->engine, a->p, 0);
  free(a);
  return WEFT_SUCCESS;
}
