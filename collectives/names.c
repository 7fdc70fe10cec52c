/* names.c -- the names of collectives and algorithms (weft.h), for messages, WEFT_ALGO and tools.
 * They live with the algorithm table so that everything that reads the table links on its own. */
#include <string.h>

#include "include/weft.h"

const char *weft_coll_name(weft_coll_t coll) {
  static const char *const names[WEFT_NUM_COLLS] = {
      "all_reduce", "broadcast", "reduce",  "all_gather", "reduce_scatter", "barrier",  "send",
      "recv",       "gather",    "scatter", "all_to_all", "all_to_allv",    "p2p_group"};
  return (unsigned)coll < WEFT_NUM_COLLS ? names[coll] : "unknown-collective";
}

static const char *const algo_names[WEFT_NUM_ALGOS] = {
    "auto",         "ring",         "tree",        "double_tree", "recursive_doubling",
    "rabenseifner", "dissemination", "hierarchical", "linear",
    "pairwise",     "bruck"};

const char *weft_algo_name(weft_algo_t algo) {
  return (unsigned)algo < WEFT_NUM_ALGOS ? algo_names[algo] : "unknown-algorithm";
}

weft_algo_t weft_algo_from_name(const char *name) {
  for (int a = 0; name && a < WEFT_NUM_ALGOS; a++)
    if (strcmp(name, algo_names[a]) == 0) return (weft_algo_t)a;
  return WEFT_NUM_ALGOS;
}
