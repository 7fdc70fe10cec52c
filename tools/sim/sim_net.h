/* sim_net.h -- private to the simulator's engine: the hooks of its network mode (sim_net.c).
 *
 * With a topology in the model, a message is a flow on its route (topology.h) at its max-min
 * fair rate (network.h) plus the route's latency, instead of alpha + bytes*beta on two ports.
 * The engine calls four hooks: simnet_create/simnet_free around a run, simnet_start where a
 * message starts (instead of scheduling its end), and simnet_drained for an event that carries
 * a flow (e->flow > 0): a drain that is still current ends the flow and schedules the message's
 * delivery (flow 0) a latency later; a superseded one (older version) is dropped. Flow -1: the
 * rates' recomputation for every flow that started or ended at this instant. */
#ifndef WEFT_TOOLS_SIM_SIM_NET_H_
#define WEFT_TOOLS_SIM_SIM_NET_H_

#include "tools/sim/sim_internal.h"

weft_result_t simnet_create(sim_world_t *w); /* no-op without a topology */
void simnet_free(sim_world_t *w);
/* `deliver`: the XFER event the plain model would schedule; its time is ignored. */
weft_result_t simnet_start(sim_world_t *w, const sim_event_t *deliver);
weft_result_t simnet_drained(sim_world_t *w, const sim_event_t *e);

#endif /* WEFT_TOOLS_SIM_SIM_NET_H_ */
