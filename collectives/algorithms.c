/* algorithms.c -- the table behind algorithms.h: every (collective, algorithm) pair of the build. */
#include "collectives/algorithms.h"

static const algo_entry_t table[] = {
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, ring_allreduce_build, ring_allreduce_cost},
    {WEFT_COLL_BROADCAST, WEFT_ALGO_RING, chain_broadcast_build, chain_broadcast_cost},
    {WEFT_COLL_BARRIER, WEFT_ALGO_RING, ring_barrier_build, ring_barrier_cost},
    {WEFT_COLL_SEND, WEFT_ALGO_RING, p2p_build, NULL},
    {WEFT_COLL_RECV, WEFT_ALGO_RING, p2p_build, NULL},
};

enum { NUM_ENTRIES = sizeof table / sizeof table[0] };

const algo_entry_t *algo_lookup(weft_coll_t coll, weft_algo_t algo) {
  for (int i = 0; i < NUM_ENTRIES; i++)
    if (table[i].coll == coll && table[i].algo == algo) return &table[i];
  return NULL;
}

int algo_count(void) { return NUM_ENTRIES; }

const algo_entry_t *algo_at(int i) { return i >= 0 && i < NUM_ENTRIES ? &table[i] : NULL; }
