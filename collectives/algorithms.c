/* algorithms.c -- the table behind algorithms.h: every (collective, algorithm) pair built. */
#include "collectives/algorithms.h"

#include <stdio.h>
#include <string.h>

static const algo_entry_t table[] = {
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, ring_allreduce_build, ring_allreduce_cost,
     ROUNDS_TWO_P_MINUS_2},
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_TREE, tree_allreduce_build, tree_allreduce_cost,
     ROUNDS_TWO_LOG},
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_DOUBLE_TREE, double_tree_allreduce_build,
     double_tree_allreduce_cost, ROUNDS_TWO_LOG},
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING, recursive_doubling_allreduce_build,
     recursive_doubling_allreduce_cost, ROUNDS_LOG},
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_LINEAR, linear_allreduce_build, linear_allreduce_cost,
     ROUNDS_ONE},
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RABENSEIFNER, rabenseifner_allreduce_build,
     rabenseifner_allreduce_cost, ROUNDS_TWO_LOG},
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_HIERARCHICAL, hierarchical_allreduce_build,
     hierarchical_allreduce_cost, ROUNDS_TWO_LOG},
    {WEFT_COLL_BROADCAST, WEFT_ALGO_RING, chain_broadcast_build, chain_broadcast_cost,
     ROUNDS_P_MINUS_ONE},
    {WEFT_COLL_BROADCAST, WEFT_ALGO_TREE, tree_broadcast_build, tree_broadcast_cost, ROUNDS_LOG},
    {WEFT_COLL_REDUCE, WEFT_ALGO_RING, chain_reduce_build, chain_reduce_cost, ROUNDS_P_MINUS_ONE},
    {WEFT_COLL_REDUCE, WEFT_ALGO_TREE, tree_reduce_build, tree_reduce_cost, ROUNDS_LOG},
    {WEFT_COLL_ALL_GATHER, WEFT_ALGO_RING, ring_allgather_build, ring_allgather_cost,
     ROUNDS_P_MINUS_ONE},
    {WEFT_COLL_ALL_GATHER, WEFT_ALGO_RECURSIVE_DOUBLING, recursive_doubling_allgather_build,
     recursive_doubling_allgather_cost, ROUNDS_LOG},
    {WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RING, ring_reduce_scatter_build, ring_reduce_scatter_cost,
     ROUNDS_P_MINUS_ONE},
    {WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RABENSEIFNER, rabenseifner_reduce_scatter_build,
     rabenseifner_reduce_scatter_cost, ROUNDS_LOG},
    {WEFT_COLL_BARRIER, WEFT_ALGO_RING, ring_barrier_build, ring_barrier_cost, ROUNDS_P},
    {WEFT_COLL_BARRIER, WEFT_ALGO_DISSEMINATION, dissemination_barrier_build,
     dissemination_barrier_cost, ROUNDS_LOG},
    {WEFT_COLL_BARRIER, WEFT_ALGO_LINEAR, linear_barrier_build, linear_barrier_cost, ROUNDS_ONE},
    {WEFT_COLL_GATHER, WEFT_ALGO_LINEAR, linear_gather_build, linear_gather_cost, ROUNDS_ONE},
    {WEFT_COLL_GATHER, WEFT_ALGO_TREE, binomial_gather_build, binomial_gather_cost, ROUNDS_LOG},
    {WEFT_COLL_SCATTER, WEFT_ALGO_LINEAR, linear_scatter_build, linear_scatter_cost, ROUNDS_ONE},
    {WEFT_COLL_SCATTER, WEFT_ALGO_TREE, binomial_scatter_build, binomial_scatter_cost, ROUNDS_LOG},
    {WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_PAIRWISE, pairwise_alltoall_build, pairwise_alltoall_cost,
     ROUNDS_P_MINUS_ONE},
    {WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_BRUCK, bruck_alltoall_build, bruck_alltoall_cost, ROUNDS_LOG},
    {WEFT_COLL_ALL_TO_ALLV, WEFT_ALGO_PAIRWISE, pairwise_alltoallv_build, pairwise_alltoallv_cost,
     ROUNDS_P_MINUS_ONE},
    {WEFT_COLL_SEND, WEFT_ALGO_RING, p2p_build, NULL, ROUNDS_NONE},
    {WEFT_COLL_RECV, WEFT_ALGO_RING, p2p_build, NULL, ROUNDS_NONE},
    {WEFT_COLL_P2P_GROUP, WEFT_ALGO_RING, p2p_build, NULL, ROUNDS_NONE},
};

enum { NUM_ENTRIES = sizeof table / sizeof table[0] };

const algo_entry_t *algo_lookup(weft_coll_t coll, weft_algo_t algo) {
  for (int i = 0; i < NUM_ENTRIES; i++)
    if (table[i].coll == coll && table[i].algo == algo) return &table[i];
  return NULL;
}

int algo_count(void) { return NUM_ENTRIES; }

static int ceil_log2(int p) {
  int k = 0;
  while ((1 << k) < p) k++;
  return k;
}

int algo_rounds(const algo_entry_t *e, int p) {
  if (p < 2) return 0;
  switch (e->rounds) {
    case ROUNDS_NONE:
      return 0;
    case ROUNDS_ONE:
      return 1;
    case ROUNDS_LOG:
      return ceil_log2(p);
    case ROUNDS_TWO_LOG:
      return 2 * ceil_log2(p);
    case ROUNDS_P_MINUS_ONE:
      return p - 1;
    case ROUNDS_TWO_P_MINUS_2:
      return 2 * (p - 1);
    case ROUNDS_P:
      return p;
  }
  return 0;
}

double algo_predicted(const algo_entry_t *e, const cost_model_t *m, int p, double bytes) {
  double cost = e->cost ? e->cost(m, p, bytes) : 0;
  if (m->wake <= 0) return cost;
  /* While a descheduled peer moves its bytes, the CPU is busy with work the rank would wait for
   * anyway: only the latency part of a round, alpha / (alpha + bytes beta) of it, is lost to the
   * switch. Large calls keep their bandwidth algorithms. */
  double latency = m->alpha > 0 ? m->alpha / (m->alpha + bytes * m->beta) : 0;
  return cost + m->wake * latency * algo_rounds(e, p);
}

const algo_entry_t *algo_at(int i) { return i >= 0 && i < NUM_ENTRIES ? &table[i] : NULL; }

void algo_list_names(weft_coll_t coll, char *buf, size_t cap) {
  if (cap == 0) return;
  buf[0] = '\0';
  for (int i = 0; i < NUM_ENTRIES; i++) {
    if (table[i].coll != coll) continue;
    size_t len = strlen(buf);
    snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", weft_algo_name(table[i].algo));
  }
}
