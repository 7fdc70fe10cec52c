/* topology.h -- private to weft-sim: the network mode's topology, its file format and routes.
 *
 * A topology file is one `key value...` per line; `#` starts a comment (README.md, "Network
 * model", lists every key). Nodes of gpus_per_node devices on a non-blocking local fabric; NICs
 * per node; NICs on leaf switches, leaves joined by spines (a two-level fat-tree) with a given
 * oversubscription; a flat or rail-optimized layout; and where each rank runs. */
#ifndef WEFT_TOOLS_SIM_TOPOLOGY_H_
#define WEFT_TOOLS_SIM_TOPOLOGY_H_

#include "include/weft.h"
#include "tools/sim/network.h"
#include "tools/sim/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TOPO_MAX_GPUS 64

typedef enum { TOPO_FLAT, TOPO_RAIL } topo_layout_t;

/* What the file says; 0 or < 0 where it says nothing (defaults come from the model, below). */
struct topo {
  int gpus_per_node;          /* 0: the model's ranks_per_node (every rank on one node if 0) */
  double fabric_bw;           /* bytes/s each way between a device and its node's fabric; 1/beta */
  double fabric_latency;      /* s per message inside a node; alpha */
  int nics_per_node;          /* 0: one per device */
  double nic_bw;              /* bytes/s each way per NIC; 1/inter_beta */
  double nic_latency;         /* s per message between nodes; inter_alpha */
  int nic_map[TOPO_MAX_GPUS]; /* local device -> NIC */
  int nic_map_len;            /* 0: device d uses NIC d * nics_per_node / gpus_per_node */
  int nics_per_leaf;          /* NIC ports per leaf switch; 0: all on one switch (or rail) */
  int spines;                 /* 1 */
  double oversubscription;    /* leaf downlink / uplink bandwidth; 1 */
  double spine_latency;       /* s added by a route through a spine; 0 */
  topo_layout_t layout;       /* flat */
  int *rank_order, nrank_order; /* rank r runs on device slot rank_order[r]; none: slot r */
};
typedef struct topo topo_t;

void topo_init(topo_t *t);
void topo_free(topo_t *t);

/* Sets one key from its text; `where` ("file:line" or "--net") leads the error message. */
weft_result_t topo_set(topo_t *t, const char *key, const char *value, const char *where);
/* Parses a whole file's text; errors name `name`:line and the key. */
weft_result_t topo_parse(topo_t *t, const char *text, const char *name);
weft_result_t topo_load(topo_t *t, const char *path);
/* A rank order from a file of whitespace- or comma-separated slots. */
weft_result_t topo_load_order(topo_t *t, const char *path);

/* The topology resolved for one run: sizes, link ids and bandwidths. */
typedef struct {
  int nranks, gpus, nics, nodes, leaves, spines, npl;
  topo_layout_t layout;
  double fabric_latency, nic_latency, spine_latency;
  double fabric_bw, nic_bw, up_bw; /* up_bw: one leaf-spine link, each way */
  int *slot_of;                    /* rank -> device slot (node * gpus + local device) */
  int nic_of[TOPO_MAX_GPUS];
  int dev0, nic0, up0; /* first link ids: device up/down, NIC up/down, leaf-spine up/down */
} topo_net_t;

/* Resolves `t` against the model's defaults for `nranks` ranks and adds its links to `net`.
 * WEFT_ERR_INVALID_ARGUMENT names what does not fit (a rank order that is not a permutation, a
 * nic_map of the wrong length, gpus_per_node against ranks_per_node...). */
weft_result_t topo_build(const topo_t *t, const sim_model_t *m, int nranks, net_t *net,
                         topo_net_t *out);
void topo_net_free(topo_net_t *tn);

/* One line (no newline) on what `tn` resolved to, for weft-sim's header. */
int topo_describe(const topo_net_t *tn, char *buf, size_t len);

/* The links from rank `from` to rank `to` (at most NET_MAX_HOPS) and the route's latency. */
int topo_route(const topo_net_t *tn, int from, int to, int *links, double *latency);

/* Node of rank r under the model (its topology's rank order and gpus_per_node, else
 * ranks_per_node). */
int topo_node_of(const sim_model_t *m, int rank);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_SIM_TOPOLOGY_H_ */
