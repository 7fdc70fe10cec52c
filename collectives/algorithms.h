/* algorithms.h -- internal: the table of (collective, algorithm) pairs this build has, each with
 * its schedule builder and its alpha-beta-gamma cost.
 *
 * Adding an algorithm: one file with the builder and cost (diagram and cost formula at its top),
 * one row in algorithms.c. The executor, the cost-model choice, weft-sim and the tests find it
 * through this table. */
#ifndef WEFT_COLLECTIVES_ALGORITHMS_H_
#define WEFT_COLLECTIVES_ALGORITHMS_H_

#include <stddef.h>

#include "collectives/schedule.h"
#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a builder is asked for: one rank's part of one call. `count` follows weft.h (per rank:
 * all_gather's and gather's sendcount, reduce_scatter's and scatter's recvcount, all_to_all's
 * count per peer); root is the
 * root, or the peer of send and recv. */
typedef struct {
  weft_coll_t coll;
  int rank, nranks;
  size_t count;
  int root;
  int in_place; /* the caller used weft.h's in-place layout for this collective */
  /* Topology: node (host) index of every rank, numbered by first appearance, and how many nodes.
   * NULL / 0 when unknown (tests): treat all ranks as one node. */
  const int *node_of;
  int nnodes;
  /* Rings: the most elements of one rank's chunk that one round moves (0: one round). A ring
   * with fused steps forwards a slice only once it can write the next peer's slot, so each
   * link must hold more than a round's chunk or the ring could wait on itself; the executor's
   * lending transports hold WEFT_SHM_SLOTS slices and rounds are half that (sched_round_count). */
  size_t round_count;
  /* all_to_allv: weft_call_t's arrays (nranks entries each); NULL otherwise. */
  const size_t *send_counts, *send_displs, *recv_counts, *recv_displs;
  /* p2p groups (comm/p2p_group.c): the ops, and the bytes of the send and receive windows their
   * offsets are in. NULL for a single send or recv (`root` the peer, `count` bytes). */
  const struct sched_p2p *p2p;
  int np2p;
  size_t p2p_send_bytes, p2p_recv_bytes;
} sched_args_t;

/* One op of a p2p group, as p2p_build needs it. */
typedef struct sched_p2p {
  int is_send, peer, tag;
  weft_dtype_t dtype;
  size_t count;  /* elements, as the token says */
  size_t bytes;  /* what moves */
  size_t offset; /* bytes into its window */
} sched_p2p_t;

/* round_count for slices of slice_elems and transports that hold `slots` slices per link. */
static inline size_t sched_round_count(size_t slice_elems, int slots) {
  return slice_elems * (size_t)(slots / 2 > 1 ? slots / 2 : 1);
}

/* Rounds of a ring over `count` elements per chunk: how many, and round t's [base, +len). */
static inline size_t sched_rounds(size_t count, size_t round_count) {
  if (round_count == 0 || count <= round_count) return 1;
  return (count + round_count - 1) / round_count;
}
static inline void sched_round(size_t count, size_t round_count, size_t t, size_t *base,
                               size_t *len) {
  if (round_count == 0 || count <= round_count) {
    *base = 0;
    *len = count;
    return;
  }
  *base = t * round_count;
  *len = count - *base < round_count ? count - *base : round_count;
}

typedef weft_result_t (*sched_build_fn)(schedule_t *s, const sched_args_t *a);

/* The alpha-beta-gamma model: alpha seconds per message, beta seconds per byte on a link, gamma
 * seconds per byte reduced; slice_bytes is the executor's pipeline unit (WEFT_SLICE_BYTES).
 * wake: seconds a rank waits, per dependent round (algo_rounds), for the peer it needs to be
 * scheduled, where a host runs more ranks than it has CPUs; 0 where every rank has a CPU. */
typedef struct {
  double alpha, beta, gamma;
  double slice_bytes;
  double wake;
} cost_model_t;

/* Predicted seconds for `bytes` (nccl-tests' "size": the per-rank buffer of all_reduce,
 * broadcast and reduce; the gathered buffer of all_gather and gather; the input of
 * reduce_scatter and scatter, the root's sendbuf; all_to_all: one rank's whole sendbuf). */
typedef double (*cost_fn)(const cost_model_t *m, int nranks, double bytes);

/* How many rounds a rank of the algorithm goes through, each waiting for a peer's message that
 * the peer could only send once its own round before was done, as a function of p. */
typedef enum {
  ROUNDS_NONE,          /* point to point: no choice is made */
  ROUNDS_ONE,           /* every message depends on nothing received */
  ROUNDS_LOG,           /* ceil(log2 p): halving, doubling, binomial trees */
  ROUNDS_TWO_LOG,       /* 2 ceil(log2 p): down and up a tree, reduce-scatter then all-gather */
  ROUNDS_P_MINUS_ONE,   /* p - 1: around a ring or a chain once */
  ROUNDS_TWO_P_MINUS_2, /* 2 (p - 1): around a ring twice */
  ROUNDS_P              /* p: the ring barrier's token, around and on to the first rank again */
} algo_rounds_t;

typedef struct {
  weft_coll_t coll;
  weft_algo_t algo;
  sched_build_fn build;
  cost_fn cost;
  algo_rounds_t rounds;
} algo_entry_t;

/* The dependent rounds of `e` at p ranks (0 for p < 2). */
int algo_rounds(const algo_entry_t *e, int nranks);

/* What the automatic choice compares: the entry's cost plus, for each dependent round, the
 * model's wait for a descheduled peer (m->wake, 0 where every rank has a CPU), in the share of a
 * round that is latency, alpha / (alpha + bytes beta). */
double algo_predicted(const algo_entry_t *e, const cost_model_t *m, int nranks, double bytes);

/* The entry for (coll, algo), or NULL when this build has no such pair. */
const algo_entry_t *algo_lookup(weft_coll_t coll, weft_algo_t algo);
int algo_count(void);
const algo_entry_t *algo_at(int i);
/* "ring, tree, ..." for the algorithms `coll` has, for error messages. */
void algo_list_names(weft_coll_t coll, char *buf, size_t cap);

/* Builders and costs, one pair per file. */
weft_result_t ring_allreduce_build(schedule_t *s, const sched_args_t *a);
double ring_allreduce_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t chain_broadcast_build(schedule_t *s, const sched_args_t *a);
double chain_broadcast_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t ring_barrier_build(schedule_t *s, const sched_args_t *a);
double ring_barrier_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t p2p_build(schedule_t *s, const sched_args_t *a);
weft_result_t ring_reduce_scatter_build(schedule_t *s, const sched_args_t *a);
double ring_reduce_scatter_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t ring_allgather_build(schedule_t *s, const sched_args_t *a);
double ring_allgather_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t chain_reduce_build(schedule_t *s, const sched_args_t *a);
double chain_reduce_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t tree_broadcast_build(schedule_t *s, const sched_args_t *a);
double tree_broadcast_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t tree_reduce_build(schedule_t *s, const sched_args_t *a);
double tree_reduce_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t tree_allreduce_build(schedule_t *s, const sched_args_t *a);
double tree_allreduce_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t double_tree_allreduce_build(schedule_t *s, const sched_args_t *a);
double double_tree_allreduce_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t recursive_doubling_allreduce_build(schedule_t *s, const sched_args_t *a);
double recursive_doubling_allreduce_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t recursive_doubling_allgather_build(schedule_t *s, const sched_args_t *a);
double recursive_doubling_allgather_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t linear_allreduce_build(schedule_t *s, const sched_args_t *a);
double linear_allreduce_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t linear_barrier_build(schedule_t *s, const sched_args_t *a);
double linear_barrier_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t rabenseifner_allreduce_build(schedule_t *s, const sched_args_t *a);
double rabenseifner_allreduce_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t rabenseifner_reduce_scatter_build(schedule_t *s, const sched_args_t *a);
double rabenseifner_reduce_scatter_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t hierarchical_allreduce_build(schedule_t *s, const sched_args_t *a);
/* Without the topology: one host (= ring_allreduce_cost). */
double hierarchical_allreduce_cost(const cost_model_t *m, int nranks, double bytes);
/* Hosts of `local` ranks each, `hosts` of them. */
double hierarchical_allreduce_cost_topo(const cost_model_t *m, int local, int hosts, double bytes);
weft_result_t linear_gather_build(schedule_t *s, const sched_args_t *a);
double linear_gather_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t binomial_gather_build(schedule_t *s, const sched_args_t *a);
double binomial_gather_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t linear_scatter_build(schedule_t *s, const sched_args_t *a);
double linear_scatter_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t binomial_scatter_build(schedule_t *s, const sched_args_t *a);
double binomial_scatter_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t pairwise_alltoall_build(schedule_t *s, const sched_args_t *a);
double pairwise_alltoall_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t bruck_alltoall_build(schedule_t *s, const sched_args_t *a);
double bruck_alltoall_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t pairwise_alltoallv_build(schedule_t *s, const sched_args_t *a);
/* Even splits (count / p per pair): pairwise_alltoall_cost with a token per pair and direction. */
double pairwise_alltoallv_cost(const cost_model_t *m, int nranks, double bytes);
weft_result_t dissemination_barrier_build(schedule_t *s, const sched_args_t *a);
double dissemination_barrier_cost(const cost_model_t *m, int nranks, double bytes);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_ALGORITHMS_H_ */
