/* network.c -- max-min fair rates of flows over shared links, by progressive filling over the
 * component that a starting or ending flow touches (network.h). */
#include "tools/sim/network.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
  double bw;
  int *flows; /* the active flows that cross this link */
  int nflows, cap;
  unsigned mark; /* the recomputation that last reached it */
  int seeded;    /* in seeds: a flow started or ended on it since the last update */
  /* Progressive filling: capacity not yet given out, flows not yet frozen, and a version that
   * tells the live heap entry from stale ones. */
  double left;
  int unfrozen;
  unsigned ver;
  int touched; /* in `touched` while one bottleneck's flows freeze */
} link_t;

typedef struct {
  int links[NET_MAX_HOPS];
  int pos[NET_MAX_HOPS]; /* index of this flow in links[h]'s list */
  int nlinks;
  double left;  /* bytes still to drain at t_set */
  double t_set; /* when left and rate were last brought up to date */
  double rate, old_rate;
  unsigned version, mark;
  int active, frozen, fresh; /* fresh: added since the last update */
  double finish;             /* when it drains at its rate; its key in `due` */
  int due_at;                /* its index in `due`, -1 when not there */
} flow_t;

typedef struct {
  double share;
  int link;
  unsigned ver;
} entry_t;

struct net {
  link_t *links;
  int nlinks, cap_links;
  flow_t *flows;
  int nflows, cap_flows;
  int *free_ids, nfree;
  unsigned epoch;
  int *seeds, nseeds;     /* links whose flows changed since the last update; cap: nlinks */
  int *touched, ntouched; /* links that gave up capacity to one bottleneck; cap: nlinks */
  int *comp_links, ncl;   /* the component being recomputed; cap: nlinks */
  int *comp_flows, ncf;   /* cap: cap_flows */
  int *changed, nchanged; /* cap: cap_flows */
  entry_t *heap;
  int nheap, cap_heap;
  int *due, ndue; /* active flows with a rate, a min-heap on finish; cap: cap_flows */
  long recomputes;
  double flows_visited, links_visited;
};

/* Grows *v (of *cap elements of `size` bytes) to hold at least `need`; 0 when out of memory. */
static int grow(void **v, int *cap, int need, size_t size) {
  if (need <= *cap) return 1;
  int c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  void *p = realloc(*v, size * (size_t)c);
  if (!p) return 0;
  *v = p;
  *cap = c;
  return 1;
}

net_t *net_create(void) { return calloc(1, sizeof(net_t)); }

void net_free(net_t *n) {
  if (!n) return;
  for (int i = 0; i < n->nlinks; i++) free(n->links[i].flows);
  free(n->links);
  free(n->flows);
  free(n->free_ids);
  free(n->seeds);
  free(n->touched);
  free(n->comp_links);
  free(n->comp_flows);
  free(n->changed);
  free(n->heap);
  free(n->due);
  free(n);
}

int net_add_link(net_t *n, double bw) {
  int cap = n->cap_links;
  if (!grow((void **)&n->links, &n->cap_links, n->nlinks + 1, sizeof(link_t))) return -1;
  if (n->cap_links != cap) {
    int *c = realloc(n->comp_links, sizeof(int) * (size_t)n->cap_links);
    if (c) n->comp_links = c;
    int *s = c ? realloc(n->seeds, sizeof(int) * (size_t)n->cap_links) : NULL;
    if (s) n->seeds = s;
    int *t = s ? realloc(n->touched, sizeof(int) * (size_t)n->cap_links) : NULL;
    if (!t) return -1;
    n->touched = t;
  }
  n->links[n->nlinks] = (link_t){.bw = bw};
  return n->nlinks++;
}

int net_num_links(const net_t *n) { return n->nlinks; }

static void heap_push(net_t *n, double share, int link, unsigned ver) {
  /* Capacity is reserved in recompute: at most one live entry per link and hop of a flow. */
  int i = n->nheap++;
  n->heap[i] = (entry_t){share, link, ver};
  while (i > 0 && n->heap[i].share < n->heap[(i - 1) / 2].share) {
    entry_t t = n->heap[i];
    n->heap[i] = n->heap[(i - 1) / 2];
    n->heap[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

static entry_t heap_pop(net_t *n) {
  entry_t top = n->heap[0];
  n->heap[0] = n->heap[--n->nheap];
  for (int i = 0;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < n->nheap && n->heap[l].share < n->heap[m].share) m = l;
    if (r < n->nheap && n->heap[r].share < n->heap[m].share) m = r;
    if (m == i) break;
    entry_t t = n->heap[i];
    n->heap[i] = n->heap[m];
    n->heap[m] = t;
    i = m;
  }
  return top;
}

/* The flows by finish time: an indexed heap, so that a flow whose rate changed moves in place
 * and the simulator keeps one event for the earliest instead of one per change. */
static void due_swap(net_t *n, int i, int j) {
  int a = n->due[i], b = n->due[j];
  n->due[i] = b;
  n->due[j] = a;
  n->flows[b].due_at = i;
  n->flows[a].due_at = j;
}

static void due_fix(net_t *n, int i) {
  while (i > 0 && n->flows[n->due[i]].finish < n->flows[n->due[(i - 1) / 2]].finish) {
    due_swap(n, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < n->ndue && n->flows[n->due[l]].finish < n->flows[n->due[m]].finish) m = l;
    if (r < n->ndue && n->flows[n->due[r]].finish < n->flows[n->due[m]].finish) m = r;
    if (m == i) return;
    due_swap(n, i, m);
    i = m;
  }
}

static void due_set(net_t *n, int id) {
  flow_t *f = &n->flows[id];
  f->finish = f->left <= 0 ? f->t_set : f->rate > 0 ? f->t_set + f->left / f->rate : INFINITY;
  if (f->due_at < 0) {
    f->due_at = n->ndue;
    n->due[n->ndue++] = id;
  }
  due_fix(n, f->due_at);
}

static void due_drop(net_t *n, int id) {
  int i = n->flows[id].due_at;
  if (i < 0) return;
  n->flows[id].due_at = -1;
  if (i == --n->ndue) return;
  n->due[i] = n->due[n->ndue];
  n->flows[n->due[i]].due_at = i;
  due_fix(n, i);
}

/* Collects the component reachable from the seeds through shared links into comp_links and
 * comp_flows, and clears the seeds. */
static void component(net_t *n) {
  n->epoch++;
  n->ncl = n->ncf = 0;
  for (int i = 0; i < n->nseeds; i++) {
    n->links[n->seeds[i]].seeded = 0;
    n->links[n->seeds[i]].mark = n->epoch;
    n->comp_links[n->ncl++] = n->seeds[i];
  }
  n->nseeds = 0;
  for (int i = 0; i < n->ncl; i++) {
    const link_t *l = &n->links[n->comp_links[i]];
    for (int k = 0; k < l->nflows; k++) {
      flow_t *f = &n->flows[l->flows[k]];
      if (f->mark == n->epoch) continue;
      f->mark = n->epoch;
      n->comp_flows[n->ncf++] = l->flows[k];
      for (int h = 0; h < f->nlinks; h++) {
        link_t *o = &n->links[f->links[h]];
        if (o->mark == n->epoch) continue;
        o->mark = n->epoch;
        n->comp_links[n->ncl++] = f->links[h];
      }
    }
  }
}

/* Progressive filling over the component around the seeds, at time `now`. Returns 0 when out
 * of memory (rates then stay as they were). */
static int recompute(net_t *n, double now) {
  n->nchanged = 0;
  if (n->nseeds == 0) return 1;
  component(n);
  n->recomputes++;
  n->flows_visited += n->ncf;
  n->links_visited += n->ncl;
  int hops = 0;
  for (int i = 0; i < n->ncf; i++) hops += n->flows[n->comp_flows[i]].nlinks;
  if (!grow((void **)&n->heap, &n->cap_heap, n->ncl + hops, sizeof(entry_t))) return 0;
  n->nheap = 0;
  for (int i = 0; i < n->ncf; i++) {
    flow_t *f = &n->flows[n->comp_flows[i]];
    f->left -= f->rate * (now - f->t_set);
    if (f->left < 0) f->left = 0;
    f->t_set = now;
    f->old_rate = f->rate;
    f->frozen = 0;
  }
  for (int i = 0; i < n->ncl; i++) {
    link_t *l = &n->links[n->comp_links[i]];
    l->left = l->bw;
    l->unfrozen = l->nflows;
    l->ver++;
    if (l->nflows > 0) heap_push(n, l->left / l->nflows, n->comp_links[i], l->ver);
  }
  while (n->nheap > 0) {
    entry_t e = heap_pop(n);
    link_t *l = &n->links[e.link];
    if (e.ver != l->ver || l->unfrozen == 0) continue;
    /* The fullest link: its unfrozen flows get its share; every other link they cross gives
     * that much up, which can only raise what is left per flow there. Each such link goes
     * back on the heap once, with its new share, after all of them froze. */
    double share = e.share > 0 ? e.share : 0;
    n->ntouched = 0;
    for (int k = 0; k < l->nflows; k++) {
      flow_t *f = &n->flows[l->flows[k]];
      if (f->frozen) continue;
      f->frozen = 1;
      f->rate = share;
      for (int h = 0; h < f->nlinks; h++) {
        link_t *o = &n->links[f->links[h]];
        o->left -= share;
        o->unfrozen--;
        if (o != l && !o->touched) {
          o->touched = 1;
          n->touched[n->ntouched++] = f->links[h];
        }
      }
    }
    for (int i = 0; i < n->ntouched; i++) {
      link_t *o = &n->links[n->touched[i]];
      o->touched = 0;
      o->ver++;
      if (o->unfrozen > 0)
        heap_push(n, (o->left > 0 ? o->left : 0) / o->unfrozen, n->touched[i], o->ver);
    }
  }
  for (int i = 0; i < n->ncf; i++) {
    flow_t *f = &n->flows[n->comp_flows[i]];
    if (f->rate != f->old_rate || f->fresh) {
      f->fresh = 0;
      f->version++;
      n->changed[n->nchanged++] = n->comp_flows[i];
      due_set(n, n->comp_flows[i]);
    }
  }
  return 1;
}

static void seed(net_t *n, int link) {
  if (n->links[link].seeded) return;
  n->links[link].seeded = 1;
  n->seeds[n->nseeds++] = link;
}

int net_flow_add(net_t *n, double now, const int *links, int nlinks, double bytes) {
  if (nlinks < 1 || nlinks > NET_MAX_HOPS) return -1;
  int id;
  if (n->nfree > 0) {
    id = n->free_ids[--n->nfree];
  } else {
    int cap = n->cap_flows;
    if (!grow((void **)&n->flows, &n->cap_flows, n->nflows + 1, sizeof(flow_t))) return -1;
    if (cap != n->cap_flows) {
      int *a = realloc(n->comp_flows, sizeof(int) * (size_t)n->cap_flows);
      if (a) n->comp_flows = a;
      int *b = a ? realloc(n->changed, sizeof(int) * (size_t)n->cap_flows) : NULL;
      if (b) n->changed = b;
      int *c = b ? realloc(n->free_ids, sizeof(int) * (size_t)n->cap_flows) : NULL;
      if (c) n->free_ids = c;
      int *d = c ? realloc(n->due, sizeof(int) * (size_t)n->cap_flows) : NULL;
      if (!d) return -1;
      n->due = d;
    }
    id = n->nflows++;
    n->flows[id] = (flow_t){0};
  }
  flow_t *f = &n->flows[id];
  unsigned version = f->version;
  *f = (flow_t){.nlinks = nlinks, .left = bytes, .t_set = now, .fresh = 1, .due_at = -1};
  f->version = version; /* kept across reuse, so that the last occupant's events stay stale */
  f->active = 1;
  for (int h = 0; h < nlinks; h++) {
    link_t *l = &n->links[links[h]];
    if (!grow((void **)&l->flows, &l->cap, l->nflows + 1, sizeof(int))) return -1;
    f->links[h] = links[h];
    f->pos[h] = l->nflows;
    l->flows[l->nflows++] = id;
    seed(n, links[h]);
  }
  return id;
}

int net_flow_start(net_t *n, double now, const int *links, int nlinks, double bytes) {
  int id = net_flow_add(n, now, links, nlinks, bytes);
  return id < 0 || !recompute(n, now) ? -1 : id;
}

void net_flow_remove(net_t *n, int id) {
  flow_t *f = &n->flows[id];
  if (!f->active) return;
  for (int h = 0; h < f->nlinks; h++) {
    link_t *l = &n->links[f->links[h]];
    seed(n, f->links[h]);
    int last = l->flows[--l->nflows];
    if (last != id) {
      l->flows[f->pos[h]] = last;
      flow_t *g = &n->flows[last];
      for (int k = 0; k < g->nlinks; k++)
        if (g->links[k] == f->links[h]) g->pos[k] = f->pos[h];
    }
  }
  due_drop(n, id);
  f->active = 0;
  f->rate = 0;
  f->version++;
  n->free_ids[n->nfree++] = id;
}

int net_flow_end(net_t *n, double now, int id) {
  net_flow_remove(n, id);
  return recompute(n, now);
}

int net_update(net_t *n, double now) { return recompute(n, now); }

int net_changed(const net_t *n, const int **flows) {
  *flows = n->changed;
  return n->nchanged;
}

double net_flow_rate(const net_t *n, int f) { return n->flows[f].rate; }

double net_flow_finish(const net_t *n, int id) { return n->flows[id].finish; }

int net_next(const net_t *n) { return n->ndue > 0 ? n->due[0] : -1; }

unsigned net_flow_version(const net_t *n, int f) { return n->flows[f].version; }
int net_flow_active(const net_t *n, int f) { return f >= 0 && f < n->nflows && n->flows[f].active; }

void net_stats(const net_t *n, long *recomputes, double *flows_visited, double *links_visited) {
  *recomputes = n->recomputes;
  *flows_visited = n->flows_visited;
  *links_visited = n->links_visited;
}
