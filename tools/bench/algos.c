/* algos.c -- which algorithms a weft-bench run times, checked against weft_algo_supported. */
#include "tools/bench/algos.h"

#include <stdio.h>
#include <string.h>

int bench_algo_supported(bench_coll_t coll, weft_algo_t algo) {
  if (coll == BENCH_SENDRECV) {
    return weft_algo_supported(WEFT_COLL_SEND, algo) && weft_algo_supported(WEFT_COLL_RECV, algo);
  }
  weft_coll_t c = bench_coll_weft(coll);
  return c != WEFT_NUM_COLLS && weft_algo_supported(c, algo);
}

/* "ring, tree" for what `coll` has; "none" when it has nothing but auto. */
static void list_supported(bench_coll_t coll, char *buf, size_t len) {
  buf[0] = '\0';
  size_t used = 0;
  for (int a = WEFT_ALGO_AUTO + 1; a < WEFT_NUM_ALGOS; a++) {
    if (!bench_algo_supported(coll, (weft_algo_t)a)) continue;
    int n =
        snprintf(buf + used, len - used, "%s%s", used ? ", " : "", weft_algo_name((weft_algo_t)a));
    if (n < 0 || (size_t)n >= len - used) break;
    used += (size_t)n;
  }
  if (used == 0) snprintf(buf, len, "none");
}

int bench_algos_resolve(bench_coll_t coll, const char *name, weft_algo_t *out, int cap, char *err,
                        size_t errlen) {
  char have[256];
  const char *coll_name = bench_coll_name(coll) ? bench_coll_name(coll) : "?";
  int n = 0;
  if (strcmp(name, "all") == 0) {
    for (int a = WEFT_ALGO_AUTO + 1; a < WEFT_NUM_ALGOS && n < cap; a++) {
      if (bench_algo_supported(coll, (weft_algo_t)a)) out[n++] = (weft_algo_t)a;
    }
    if (n == 0) {
      snprintf(err, errlen, "-A all: this build of weft has no algorithm for %s", coll_name);
      return -1;
    }
    return n;
  }
  weft_algo_t algo = weft_algo_from_name(name);
  if (algo == WEFT_NUM_ALGOS) {
    char known[256] = "";
    size_t used = 0;
    for (int a = 0; a < WEFT_NUM_ALGOS && used < sizeof known; a++) {
      int k = snprintf(known + used, sizeof known - used, "%s ", weft_algo_name((weft_algo_t)a));
      if (k > 0) used += (size_t)k;
    }
    snprintf(err, errlen, "-A: unknown algorithm '%s' (known: %sall)", name, known);
    return -1;
  }
  if (!bench_algo_supported(coll, algo)) {
    list_supported(coll, have, sizeof have);
    snprintf(err, errlen, "-A: %s has no '%s' algorithm in this build (it has: %s)", coll_name,
             name, have);
    return -1;
  }
  if (cap < 1) return 0;
  out[0] = algo;
  return 1;
}
