/* sim_net.c -- the simulator's network mode: messages as flows on a topology's links.
 *
 * Ranks' one-port rule does not apply here: a rank may have one message in flight on each of
 * its send streams at once, and what it sends at once shares its links (device to fabric, NIC,
 * leaf-spine) with everything else on them. Per stream, messages still go one at a time, in
 * order, as the executor's connections carry them. */
#include "tools/sim/sim_net.h"

#include <stdlib.h>

#include "common/error.h"
#include "tools/sim/network.h"
#include "tools/sim/topology.h"

struct simnet {
  net_t *net;
  topo_net_t tn;
  int *from, *stream; /* per flow id: the message's send stream, and its route's latency */
  double *latency;
  int cap;
  int update_due; /* an update event (rank -1) is in the heap for this instant */
  int armed;      /* 1 + the flow whose drain the heap holds, at version armed_version */
  unsigned armed_version;
};

static weft_result_t oom(void) {
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory in the network model");
}

weft_result_t simnet_create(sim_world_t *w) {
  if (!w->m->topo) return WEFT_SUCCESS;
  simnet_t *s = calloc(1, sizeof *s);
  if (!s || !(s->net = net_create())) return free(s), oom();
  w->net = s;
  return topo_build(w->m->topo, w->m, w->nranks, s->net, &s->tn);
}

void simnet_free(sim_world_t *w) {
  simnet_t *s = w->net;
  if (!s) return;
  net_free(s->net);
  topo_net_free(&s->tn);
  free(s->from);
  free(s->stream);
  free(s->latency);
  free(s);
  w->net = NULL;
}

/* Keeps a drain event in the heap for the flow that drains first, at its current version. A
 * drain scheduled before a rate changed carries an older version and is dropped when it comes
 * up; one still current is valid wherever the flow stands now. */
static weft_result_t arm(sim_world_t *w) {
  simnet_t *s = w->net;
  int f = net_next(s->net);
  if (f < 0) return WEFT_SUCCESS;
  unsigned v = net_flow_version(s->net, f);
  if (s->armed == f + 1 && s->armed_version == v) return WEFT_SUCCESS;
  sim_event_t e = {
      .t = net_flow_finish(s->net, f), .kind = SIM_EV_NET, .rank = f + 1, .version = v};
  if (e.t < w->now) e.t = w->now; /* rounding of bytes left near zero */
  s->armed = f + 1;
  s->armed_version = v;
  return sim_heap_push(&w->heap, &e) ? oom() : WEFT_SUCCESS;
}

/* Flows that start or end at one instant share one recomputation: the first asks for an update
 * event at this instant, which the heap runs after the events already queued for it. The engine
 * starts new messages only once nothing is left at this instant, so those get one more. */
static weft_result_t update_soon(sim_world_t *w) {
  if (w->net->update_due) return WEFT_SUCCESS;
  w->net->update_due = 1;
  sim_event_t e = {.t = w->now, .kind = SIM_EV_NET, .rank = -1};
  return sim_heap_push(&w->heap, &e) ? oom() : WEFT_SUCCESS;
}

/* Grows the per-flow arrays to hold flow `id`. */
static int reserve(simnet_t *s, int id) {
  if (id < s->cap) return 1;
  int cap = s->cap ? 2 * s->cap : 256;
  while (cap <= id) cap *= 2;
  int *f = realloc(s->from, sizeof *f * (size_t)cap);
  if (f) s->from = f;
  int *st = f ? realloc(s->stream, sizeof *st * (size_t)cap) : NULL;
  if (st) s->stream = st;
  double *l = st ? realloc(s->latency, sizeof *l * (size_t)cap) : NULL;
  if (!l) return 0;
  s->latency = l;
  s->cap = cap;
  return 1;
}

weft_result_t simnet_start(sim_world_t *w, int from, int si, double bytes) {
  simnet_t *s = w->net;
  int links[NET_MAX_HOPS];
  double latency;
  int n = topo_route(&s->tn, from, w->ranks[from].streams[si].peer, links, &latency);
  int id = net_flow_add(s->net, w->now, links, n, bytes);
  if (id < 0 || !reserve(s, id)) return oom();
  s->from[id] = from;
  s->stream[id] = si;
  s->latency[id] = latency;
  return update_soon(w);
}

weft_result_t simnet_event(sim_world_t *w, const sim_event_t *e) {
  simnet_t *s = w->net;
  if (e->rank < 0) {
    s->update_due = 0;
    if (!net_update(s->net, w->now)) return oom();
    return arm(w);
  }
  int id = e->rank - 1;
  if (!net_flow_active(s->net, id) || net_flow_version(s->net, id) != e->version)
    return WEFT_SUCCESS; /* superseded: the flow's rate changed after this was scheduled */
  double deliver = w->now + s->latency[id];
  net_flow_remove(s->net, id);
  WEFT_CHECK(update_soon(w));
  WEFT_CHECK(arm(w));
  return sim_xfer_move(w, s->from[id], s->stream[id], deliver);
}
