/* topology.c -- the network mode's topology file, its defaults from the model, and routes. */
#include "tools/sim/topology.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

void topo_init(topo_t *t) {
  memset(t, 0, sizeof *t);
  t->fabric_bw = t->fabric_latency = t->nic_bw = t->nic_latency = -1;
  t->spines = 1;
  t->oversubscription = 1;
  t->layout = TOPO_FLAT;
}

void topo_free(topo_t *t) {
  free(t->rank_order);
  t->rank_order = NULL;
  t->nrank_order = 0;
}

/* Integers separated by spaces, tabs or commas; *out is malloc'ed. -1: not integers >= 0. */
static int parse_ints(const char *text, int **out, int *n) {
  int cap = 16, k = 0;
  int *v = malloc(sizeof(int) * (size_t)cap);
  if (!v) return -2;
  const char *p = text;
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == ',' || *p == '\n' || *p == '\r') p++;
    if (!*p) break;
    char *end;
    errno = 0;
    long x = strtol(p, &end, 10);
    if (end == p || errno || x < 0 || x > (1 << 24) ||
        (*end && *end != ' ' && *end != '\t' && *end != ',' && *end != '\n' && *end != '\r')) {
      free(v);
      return -1;
    }
    if (k == cap) {
      int *w = realloc(v, sizeof(int) * (size_t)(cap *= 2));
      if (!w) return free(v), -2;
      v = w;
    }
    v[k++] = (int)x;
    p = end;
  }
  *out = v;
  *n = k;
  return 0;
}

static int parse_num(const char *text, double *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  while (*end == ' ' || *end == '\t') end++;
  if (end == text || *end || errno || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

static int parse_count(const char *text, int min, int max, int *out) {
  double v;
  if (parse_num(text, &v) || v != floor(v) || v < min || v > max) return -1;
  *out = (int)v;
  return 0;
}

#define KEYS                                                                         \
  "gpus_per_node fabric_bw fabric_latency nics_per_node nic_bw nic_latency nic_map " \
  "nics_per_leaf spines oversubscription spine_latency layout rank_order"

weft_result_t topo_set(topo_t *t, const char *key, const char *value, const char *where) {
  const char *want = NULL;
  int bad = 0;
  double v = 0;
  if (strcmp(key, "gpus_per_node") == 0) {
    bad = parse_count(value, 1, TOPO_MAX_GPUS, &t->gpus_per_node), want = "an integer in 1..64";
  } else if (strcmp(key, "nics_per_node") == 0) {
    bad = parse_count(value, 1, TOPO_MAX_GPUS, &t->nics_per_node), want = "an integer in 1..64";
  } else if (strcmp(key, "nics_per_leaf") == 0) {
    bad = parse_count(value, 1, 1 << 20, &t->nics_per_leaf), want = "an integer >= 1";
  } else if (strcmp(key, "spines") == 0) {
    bad = parse_count(value, 1, 4096, &t->spines), want = "an integer in 1..4096";
  } else if (strcmp(key, "fabric_bw") == 0 || strcmp(key, "nic_bw") == 0) {
    bad = parse_num(value, &v) || !(v > 0), want = "bytes per second > 0";
    if (!bad) *(key[0] == 'f' ? &t->fabric_bw : &t->nic_bw) = v;
  } else if (strcmp(key, "fabric_latency") == 0 || strcmp(key, "nic_latency") == 0 ||
             strcmp(key, "spine_latency") == 0) {
    bad = parse_num(value, &v) || v < 0, want = "seconds >= 0";
    if (!bad)
      *(key[0] == 'f'   ? &t->fabric_latency
        : key[0] == 'n' ? &t->nic_latency
                        : &t->spine_latency) = v;
  } else if (strcmp(key, "oversubscription") == 0) {
    bad = parse_num(value, &v) || !(v > 0), want = "a ratio > 0 (downlink / uplink)";
    if (!bad) t->oversubscription = v;
  } else if (strcmp(key, "layout") == 0) {
    bad = strcmp(value, "rail") != 0 && strcmp(value, "flat") != 0, want = "rail or flat";
    if (!bad) t->layout = value[0] == 'r' ? TOPO_RAIL : TOPO_FLAT;
  } else if (strcmp(key, "nic_map") == 0 || strcmp(key, "rank_order") == 0) {
    int *ints = NULL, n = 0, rc = parse_ints(value, &ints, &n);
    if (rc == -2) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "%s: key '%s': out of memory", where, key);
    bad = rc != 0 || n == 0, want = "integers >= 0 separated by spaces or commas";
    if (!bad && key[0] == 'n') {
      bad = n > TOPO_MAX_GPUS, want = "at most 64 NICs, one per local device";
      if (!bad) memcpy(t->nic_map, ints, sizeof(int) * (size_t)n), t->nic_map_len = n;
      free(ints);
    } else if (!bad) {
      free(t->rank_order);
      t->rank_order = ints;
      t->nrank_order = n;
    } else {
      free(ints);
    }
  } else {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: unknown key '%s' (keys: %s)", where, key, KEYS);
  }
  if (bad)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: key '%s': bad value '%s' (want %s)", where, key,
                    value, want);
  return WEFT_SUCCESS;
}

weft_result_t topo_parse(topo_t *t, const char *text, const char *name) {
  int lineno = 0;
  const char *p = text;
  while (*p) {
    lineno++;
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    char *line = malloc(len + 1);
    if (!line) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "%s:%d: out of memory", name, lineno);
    memcpy(line, p, len);
    line[len] = '\0';
    p += len + (eol != NULL);
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *key = line + strspn(line, " \t\r");
    char *end = key + strcspn(key, " \t\r");
    char *value = end + strspn(end, " \t\r");
    *end = '\0';
    for (char *z = value + strlen(value); z > value && strchr(" \t\r", z[-1]); z--) z[-1] = '\0';
    weft_result_t res = WEFT_SUCCESS;
    if (*key && !*value)
      res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s:%d: key '%s' has no value", name, lineno, key);
    else if (*key) {
      char where[512];
      snprintf(where, sizeof where, "%s:%d", name, lineno);
      res = topo_set(t, key, value, where);
    }
    free(line);
    if (res != WEFT_SUCCESS) return res;
  }
  return WEFT_SUCCESS;
}

/* The whole file as a string; NULL with the error recorded. */
static char *slurp(const char *path, const char *what) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s %s: %s", what, path, strerror(errno));
    return NULL;
  }
  size_t cap = 4096, n = 0, k;
  char *buf = malloc(cap);
  while (buf && (k = fread(buf + n, 1, cap - 1 - n, f)) > 0) {
    n += k;
    if (n + 1 == cap) {
      char *b = realloc(buf, cap *= 2);
      if (!b) free(buf);
      buf = b;
    }
  }
  fclose(f);
  if (!buf) WEFT_ERR(WEFT_ERR_NO_MEMORY, "%s %s: out of memory", what, path);
  if (buf) buf[n] = '\0';
  return buf;
}

weft_result_t topo_load(topo_t *t, const char *path) {
  char *text = slurp(path, "topology");
  if (!text) return WEFT_ERR_INVALID_ARGUMENT;
  weft_result_t res = topo_parse(t, text, path);
  free(text);
  return res;
}

weft_result_t topo_load_order(topo_t *t, const char *path) {
  char *text = slurp(path, "rank order");
  if (!text) return WEFT_ERR_INVALID_ARGUMENT;
  char *hash;
  while ((hash = strchr(text, '#')) != NULL) /* comments run to the end of their line */
    for (; *hash && *hash != '\n'; hash++) *hash = ' ';
  weft_result_t res = topo_set(t, "rank_order", text, path);
  free(text);
  return res;
}

static int gpus_of(const topo_t *t, const sim_model_t *m) {
  return t->gpus_per_node > 0 ? t->gpus_per_node : m->ranks_per_node;
}

int topo_node_of(const sim_model_t *m, int rank) {
  const topo_t *t = m->topo;
  int g = t ? gpus_of(t, m) : m->ranks_per_node;
  int slot = t && t->rank_order && rank < t->nrank_order ? t->rank_order[rank] : rank;
  return g > 0 ? slot / g : 0;
}

weft_result_t topo_build(const topo_t *t, const sim_model_t *m, int nranks, net_t *net,
                         topo_net_t *o) {
  memset(o, 0, sizeof *o);
  int g = gpus_of(t, m), rpn = m->ranks_per_node;
  if (g <= 0 || g > nranks) g = nranks;
  if (rpn <= 0 || rpn > nranks) rpn = nranks;
  /* The schedules' builders see nodes through ranks_per_node: both must say the same. */
  if (g != rpn)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "topology: gpus_per_node %d but the model has %d ranks per node", g, rpn);
  if (g > TOPO_MAX_GPUS)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "topology: %d devices per node (at most %d; set gpus_per_node)", g,
                    TOPO_MAX_GPUS);
  o->nranks = nranks;
  o->gpus = g;
  o->nodes = (nranks + g - 1) / g;
  o->nics = t->nics_per_node > 0 ? t->nics_per_node : g;
  o->layout = t->layout;
  o->fabric_latency = t->fabric_latency >= 0 ? t->fabric_latency : m->alpha;
  o->nic_latency = t->nic_latency >= 0 ? t->nic_latency : m->inter_alpha;
  o->spine_latency = t->spine_latency;
  double fabric_bw = t->fabric_bw > 0 ? t->fabric_bw : 1 / m->beta;
  double nic_bw = t->nic_bw > 0 ? t->nic_bw : 1 / m->inter_beta;
  if (!(fabric_bw > 0 && isfinite(fabric_bw) && nic_bw > 0 && isfinite(nic_bw)))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "topology: no bandwidth (beta 0 and no fabric_bw or nic_bw given)");
  if (t->nic_map_len && t->nic_map_len != g)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "topology: nic_map has %d entries for %d devices per node", t->nic_map_len, g);
  for (int d = 0; d < g; d++) {
    o->nic_of[d] = t->nic_map_len ? t->nic_map[d] : d * o->nics / g;
    if (o->nic_of[d] >= o->nics)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "topology: nic_map sends device %d to NIC %d of %d", d, o->nic_of[d],
                      o->nics);
  }
  o->slot_of = malloc(sizeof(int) * (size_t)nranks);
  int *seen = calloc((size_t)nranks, sizeof(int));
  if (!o->slot_of || !seen) {
    free(seen);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "topology: out of memory");
  }
  if (t->rank_order && t->nrank_order != nranks) {
    free(seen);
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "topology: rank_order has %d entries for %d ranks",
                    t->nrank_order, nranks);
  }
  for (int r = 0; r < nranks; r++) {
    int s = t->rank_order ? t->rank_order[r] : r;
    if (s >= nranks || seen[s]++) {
      free(seen);
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "topology: rank_order is not a permutation of 0..%d (rank %d on slot %d)",
                      nranks - 1, r, s);
    }
    o->slot_of[r] = s;
  }
  free(seen);
  /* Leaves: flat puts NICs on switches in node order; rail puts NIC i of npl consecutive nodes
   * on rail switch i of their group. */
  int all = o->nodes * o->nics;
  if (o->layout == TOPO_FLAT) {
    o->npl = t->nics_per_leaf > 0 && t->nics_per_leaf < all ? t->nics_per_leaf : all;
    o->leaves = (all + o->npl - 1) / o->npl;
  } else {
    o->npl = t->nics_per_leaf > 0 && t->nics_per_leaf < o->nodes ? t->nics_per_leaf : o->nodes;
    o->leaves = (o->nodes + o->npl - 1) / o->npl * o->nics;
  }
  o->spines = o->leaves > 1 ? t->spines : 0;
  double up_bw = o->npl * nic_bw / (t->oversubscription * (o->spines ? o->spines : 1));
  o->fabric_bw = fabric_bw;
  o->nic_bw = nic_bw;
  o->up_bw = up_bw;
  o->dev0 = net_num_links(net);
  o->nic0 = o->dev0 + 2 * o->nodes * g;
  o->up0 = o->nic0 + 2 * all;
  int ok = 1;
  for (int i = 0; i < 2 * o->nodes * g; i++) ok &= net_add_link(net, fabric_bw) >= 0;
  for (int i = 0; i < 2 * all; i++) ok &= net_add_link(net, nic_bw) >= 0;
  for (int i = 0; i < 2 * o->leaves * o->spines; i++) ok &= net_add_link(net, up_bw) >= 0;
  if (!ok) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "topology: out of memory adding links");
  return WEFT_SUCCESS;
}

void topo_net_free(topo_net_t *tn) {
  free(tn->slot_of);
  tn->slot_of = NULL;
}

int topo_describe(const topo_net_t *o, char *buf, size_t len) {
  int n = snprintf(buf, len,
                   "%d nodes of %d devices (fabric %g B/s, %g s), %d NICs per node (%g B/s, %g s), "
                   "%s layout, %d leaves of %d NICs",
                   o->nodes, o->gpus, o->fabric_bw, o->fabric_latency, o->nics, o->nic_bw,
                   o->nic_latency, o->layout == TOPO_RAIL ? "rail" : "flat", o->leaves, o->npl);
  if (o->spines && n >= 0 && (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, ", %d spines (leaf-spine links %g B/s, +%g s)",
                  o->spines, o->up_bw, o->spine_latency);
  return n;
}

static int leaf_of(const topo_net_t *o, int node, int nic) {
  if (o->layout == TOPO_FLAT) return (node * o->nics + nic) / o->npl;
  return node / o->npl * o->nics + nic;
}

/* ECMP: a fixed hash of the two NICs picks the spine, so a pair's flows always share one. */
static int spine_of(const topo_net_t *o, int a, int b) {
  unsigned h = (unsigned)a * 2654435761u ^ ((unsigned)b + 0x9e3779b9u) * 2246822519u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return (int)(h % (unsigned)o->spines);
}

int topo_route(const topo_net_t *o, int from, int to, int *links, double *latency) {
  int sa = o->slot_of[from], sb = o->slot_of[to];
  int na = sa / o->gpus, nb = sb / o->gpus;
  if (na == nb) { /* device up to the fabric, across it, down to the other device */
    links[0] = o->dev0 + 2 * sa;
    links[1] = o->dev0 + 2 * sb + 1;
    *latency = o->fabric_latency;
    return 2;
  }
  int ia = o->nic_of[sa % o->gpus], ib = o->nic_of[sb % o->gpus];
  int ga = na * o->nics + ia, gb = nb * o->nics + ib; /* NICs numbered node by node */
  int la = leaf_of(o, na, ia), lb = leaf_of(o, nb, ib), n = 0;
  links[n++] = o->nic0 + 2 * ga;
  *latency = o->nic_latency;
  if (la != lb) {
    int s = spine_of(o, ga, gb);
    links[n++] = o->up0 + 2 * (la * o->spines + s);     /* leaf la up to spine s */
    links[n++] = o->up0 + 2 * (lb * o->spines + s) + 1; /* spine s down to leaf lb */
    *latency += o->spine_latency;
  }
  links[n++] = o->nic0 + 2 * gb + 1;
  return n;
}
