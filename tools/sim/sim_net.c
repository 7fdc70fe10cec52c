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
  sim_event_t *deliver; /* per flow id: the message's delivery, and below its route's latency */
  double *latency;
  int cap;
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
  free(s->deliver);
  free(s->latency);
  free(s);
  w->net = NULL;
}

/* A drain event for every flow whose rate the last start or end changed; the older events of
 * those flows carry older versions and are dropped when they come up. */
static weft_result_t push_changed(sim_world_t *w) {
  const int *f;
  int n = net_changed(w->net->net, &f);
  for (int i = 0; i < n; i++) {
    sim_event_t e = {.t = net_flow_finish(w->net->net, f[i]),
                     .kind = SIM_EV_XFER,
                     .flow = f[i] + 1,
                     .version = net_flow_version(w->net->net, f[i])};
    if (e.t < w->now) e.t = w->now; /* rounding of bytes left near zero */
    if (sim_heap_push(&w->heap, &e)) return oom();
  }
  return WEFT_SUCCESS;
}

weft_result_t simnet_start(sim_world_t *w, const sim_event_t *deliver) {
  simnet_t *s = w->net;
  int links[NET_MAX_HOPS];
  double latency;
  int n = topo_route(&s->tn, deliver->from, deliver->to, links, &latency);
  int id = net_flow_start(s->net, w->now, links, n, deliver->bytes);
  if (id < 0) return oom();
  if (id >= s->cap) {
    int cap = s->cap ? 2 * s->cap : 256;
    while (cap <= id) cap *= 2;
    sim_event_t *d = realloc(s->deliver, sizeof *d * (size_t)cap);
    if (d) s->deliver = d;
    double *l = d ? realloc(s->latency, sizeof *l * (size_t)cap) : NULL;
    if (!l) return oom();
    s->latency = l;
    s->cap = cap;
  }
  s->deliver[id] = *deliver;
  s->deliver[id].flow = 0;
  s->latency[id] = latency;
  return push_changed(w);
}

weft_result_t simnet_drained(sim_world_t *w, const sim_event_t *e) {
  simnet_t *s = w->net;
  int id = e->flow - 1;
  if (!net_flow_active(s->net, id) || net_flow_version(s->net, id) != e->version)
    return WEFT_SUCCESS; /* superseded: the flow's rate changed after this was scheduled */
  sim_event_t d = s->deliver[id];
  d.t = w->now + s->latency[id];
  if (!net_flow_end(s->net, w->now, id)) return oom();
  WEFT_CHECK(push_changed(w));
  return sim_heap_push(&w->heap, &d) ? oom() : WEFT_SUCCESS;
}
