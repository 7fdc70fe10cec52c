/* sim_heap.c -- the simulator's event queue: a binary min-heap on (time, push order). */
#include <stdlib.h>

#include "tools/sim/sim_internal.h"

/* Push order breaks ties so that a run is deterministic and events at one instant keep the
 * causal order in which they were created. */
static int before(const sim_event_t *a, const sim_event_t *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int sim_heap_push(sim_heap_t *h, const sim_event_t *e) {
  if (h->n == h->cap) {
    long cap = h->cap ? 2 * h->cap : 256;
    sim_event_t *ev = realloc(h->ev, sizeof *ev * (size_t)cap);
    if (!ev) return -1;
    h->ev = ev;
    h->cap = cap;
  }
  long i = h->n++;
  h->ev[i] = *e;
  h->ev[i].seq = h->seq++;
  while (i > 0 && before(&h->ev[i], &h->ev[(i - 1) / 2])) {
    sim_event_t t = h->ev[i];
    h->ev[i] = h->ev[(i - 1) / 2];
    h->ev[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
  return 0;
}

int sim_heap_pop(sim_heap_t *h, sim_event_t *e) {
  if (h->n == 0) return 0;
  *e = h->ev[0];
  h->ev[0] = h->ev[--h->n];
  for (long i = 0;;) {
    long l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && before(&h->ev[l], &h->ev[m])) m = l;
    if (r < h->n && before(&h->ev[r], &h->ev[m])) m = r;
    if (m == i) break;
    sim_event_t t = h->ev[i];
    h->ev[i] = h->ev[m];
    h->ev[m] = t;
    i = m;
  }
  return 1;
}

void sim_heap_free(sim_heap_t *h) {
  free(h->ev);
  h->ev = NULL;
  h->n = h->cap = 0;
}
