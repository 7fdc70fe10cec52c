/* sim_net.h -- private to the simulator's engine: the hooks of its network mode (sim_net.c).
 *
 * With a topology in the model, a message is a flow on its route (topology.h) at its max-min
 * fair rate (network.h) plus the route's latency, instead of alpha + bytes*beta on two ports.
 * The engine calls four hooks: simnet_create/simnet_free around a run, simnet_start from
 * sim_xfer_schedule (instead of scheduling the message's end), and simnet_event for a SIM_EV_NET
 * event. Such an event's `rank` is 1 + the flow it drains, or -1 for the rates' recomputation
 * for every flow that started or ended at this instant; its `version` the flow's rate version.
 * A drain that is still current ends the flow and moves the message's delivery to a latency
 * later (sim_xfer_move); a superseded one (older version) is dropped. */
#ifndef WEFT_TOOLS_SIM_SIM_NET_H_
#define WEFT_TOOLS_SIM_SIM_NET_H_

#include "tools/sim/sim_internal.h"

weft_result_t simnet_create(sim_world_t *w); /* no-op without a topology */
void simnet_free(sim_world_t *w);
/* The message on send stream `si` of `from` starts now as a flow of `bytes`. */
weft_result_t simnet_start(sim_world_t *w, int from, int si, double bytes);
weft_result_t simnet_event(sim_world_t *w, const sim_event_t *e);

#endif /* WEFT_TOOLS_SIM_SIM_NET_H_ */
