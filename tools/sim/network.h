/* network.h -- private to weft-sim: links shared by flows at max-min fair rates.
 *
 * A flow crosses a fixed list of directed links (its route) and drains `bytes` at a rate that
 * the links share out max-min fairly, by progressive filling: all unfrozen flows grow together
 * until a link is full, the flows on it freeze at that rate, and the rest go on. Rates are
 * recomputed whenever a flow starts or ends, but only over the connected component of links and
 * flows that the starting or ending flow touches: flows elsewhere keep their rates, so their
 * finish times stay valid. What is not modeled: packets, queues and latency under load,
 * congestion control (rates are reached at once), adaptive routing (a route is fixed per flow).
 *
 * Cost of one start or end: O((F_c h + L_c) log L_c) for a component of F_c flows of up to h
 * hops on L_c links (a heap of link shares; a link's share only grows as flows freeze). */
#ifndef WEFT_TOOLS_SIM_NETWORK_H_
#define WEFT_TOOLS_SIM_NETWORK_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NET_MAX_HOPS 8

typedef struct net net_t;

/* NULL when out of memory. */
net_t *net_create(void);
void net_free(net_t *n);

/* A directed link of `bw` bytes per second (> 0). Returns its id (0, 1, ...), -1 when out of
 * memory. */
int net_add_link(net_t *n, double bw);
int net_num_links(const net_t *n);

/* Starts a flow of `bytes` over links[0..nlinks) (1 <= nlinks <= NET_MAX_HOPS, ids valid) at
 * time `now`, and recomputes the rates of its component. Returns the flow's id (ids are reused
 * once a flow ends), -1 when out of memory. */
int net_flow_start(net_t *n, double now, const int *links, int nlinks, double bytes);

/* Ends flow `f` at `now` (drained or not) and recomputes the rates of what it shared links
 * with. 0 when out of memory. */
int net_flow_end(net_t *n, double now, int f);

/* The same in two steps, for many flows that start or end at one instant: add and remove only
 * change the links (an added flow has rate 0 until then); net_update recomputes once, over the
 * union of the components they touched. 0 or -1 when out of memory. */
int net_flow_add(net_t *n, double now, const int *links, int nlinks, double bytes);
void net_flow_remove(net_t *n, int f);
int net_update(net_t *n, double now);

/* The flows whose rate the last start, end or update set or changed (started flows included):
 * their finish times moved. The array stays valid until the next one. */
int net_changed(const net_t *n, const int **flows);

double net_flow_rate(const net_t *n, int f);
/* When flow `f` drains at its current rate, given how much it had left when its rate was last
 * set. */
double net_flow_finish(const net_t *n, int f);
/* Counts every rate change of the flow slot, across reuse: an event that carries an older
 * version is stale. */
unsigned net_flow_version(const net_t *n, int f);
/* The active flow that drains first, -1 when none. */
int net_next(const net_t *n);
int net_flow_active(const net_t *n, int f);

/* Work done so far: flows and links visited by recomputations (for the cost in README.md). */
void net_stats(const net_t *n, long *recomputes, double *flows_visited, double *links_visited);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_SIM_NETWORK_H_ */
