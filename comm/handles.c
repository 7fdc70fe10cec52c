/* handles.c -- the table of live communicators and requests: an open-addressing hash set of
 * pointers (linear probing, deletion by moving the rest of the cluster back) under one mutex.
 * Lookups happen on every call, so they must stay O(1) with thousands of requests in flight. */
#include "comm/handles.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
  const void *h; /* NULL: empty */
  handle_kind_t kind;
} slot_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static slot_t *slots;
static size_t cap, used; /* cap: 0 or a power of two */

void handles_lock(void) { pthread_mutex_lock(&mu); }
void handles_unlock(void) { pthread_mutex_unlock(&mu); }
void handles_wait(void) { pthread_cond_wait(&cv, &mu); }
void handles_changed(void) { pthread_cond_broadcast(&cv); }

static size_t home(const void *h, size_t mask) {
  uint64_t x = (uint64_t)(uintptr_t)h;
  x ^= x >> 33; /* allocations are aligned: mix the high bits into the low ones */
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x & mask;
}

static size_t find(const void *h) {
  size_t mask = cap - 1, i = home(h, mask);
  while (slots[i].h && slots[i].h != h) i = (i + 1) & mask;
  return i;
}

static int grow(void) {
  size_t ncap = cap ? cap * 2 : 64;
  slot_t *n = calloc(ncap, sizeof *n);
  if (!n) return -1;
  slot_t *old = slots;
  size_t ocap = cap;
  slots = n;
  cap = ncap;
  for (size_t i = 0; i < ocap; i++)
    if (old[i].h) slots[find(old[i].h)] = old[i];
  free(old);
  return 0;
}

int handles_add(const void *h, handle_kind_t kind) {
  if (handles_kind(h) != HANDLE_NONE) {
    slots[find(h)].kind = kind;
    return 0;
  }
  if ((used + 1) * 2 > cap && grow() != 0) return -1; /* at most half full: short probes */
  size_t i = find(h);
  if (!slots[i].h) used++;
  slots[i] = (slot_t){h, kind};
  return 0;
}

handle_kind_t handles_kind(const void *h) {
  if (!h || cap == 0) return HANDLE_NONE;
  size_t i = find(h);
  return slots[i].h == h ? slots[i].kind : HANDLE_NONE;
}

int handles_live(const void *h, handle_kind_t kind) { return handles_kind(h) == kind; }

void handles_remove(const void *h) {
  if (!h || cap == 0) return;
  size_t mask = cap - 1, i = find(h);
  if (!slots[i].h) return;
  slots[i].h = NULL;
  used--;
  /* Move back every later member of the cluster whose home is not between the hole and it, so
   * that probes from their homes still reach them without tombstones. */
  for (size_t j = (i + 1) & mask; slots[j].h; j = (j + 1) & mask) {
    size_t k = home(slots[j].h, mask);
    int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    slots[i] = slots[j];
    slots[j].h = NULL;
    i = j;
  }
}
