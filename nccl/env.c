/* env.c -- the NCCL_* environment variables that mean something weft has, set as their WEFT_*
 * counterparts when the library loads; everything else of NCCL's is ignored, as NCCL ignores
 * variables it does not know. A WEFT_* variable the user set wins over its NCCL_* twin.
 *
 * Why at load time: weft reads its settings from the environment at each communicator's init,
 * and setenv is not safe while other threads read the environment. A shared library's
 * constructor runs while the loader holds its lock, before the program can call into it, which
 * is as early as this can happen (NCCL itself sets variables from nccl.conf the same way). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nccl/nccl_internal.h"

/* Values that mean the same in both: interfaces and adapters (prefixes, ^ to exclude, = for
 * exact names, :port), and the verbs timeouts. */
static const struct {
  const char *nccl, *weft;
} same[] = {
    {"NCCL_SOCKET_IFNAME", "WEFT_SOCKET_IFNAME"}, {"NCCL_IB_HCA", "WEFT_IB_HCA"},
    {"NCCL_IB_TIMEOUT", "WEFT_IB_TIMEOUT"},       {"NCCL_IB_RETRY_CNT", "WEFT_IB_RETRY_CNT"},
    {"NCCL_IB_GID_INDEX", "WEFT_IB_GID_INDEX"},
};

/* NCCL_DEBUG: VERSION, WARN and INFO print weft's setup and failures (and the version line of
 * ncclGetVersion); TRACE every collective too. */
static const char *debug_level(const char *v) {
  if (!strcasecmp(v, "VERSION") || !strcasecmp(v, "WARN") || !strcasecmp(v, "INFO")) return "1";
  if (!strcasecmp(v, "TRACE")) return "2";
  return NULL;
}

/* NCCL_ALGO: one algorithm for every collective. NCCL's Ring is weft's ring; its Tree, which NCCL
 * runs for all-reduce only, is a pair of complementary binary trees: weft's double_tree. Lists,
 * exclusions (^) and NCCL's other algorithms (CollNet, NVLS, PAT) have no counterpart: weft then
 * chooses by its cost model. */
static const char *algo_policy(const char *v) {
  if (!strcasecmp(v, "Ring")) return "ring";
  if (!strcasecmp(v, "Tree")) return "all_reduce=double_tree";
  return NULL;
}

/* NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS: the sockets per peer connection, weft's
 * WEFT_NSOCKS (at most 16). */
static void socket_count(char *buf, size_t cap) {
  const char *per = getenv("NCCL_NSOCKS_PERTHREAD"), *threads = getenv("NCCL_SOCKET_NTHREADS");
  if (!per && !threads) return;
  long n = (per ? atol(per) : 1) * (threads ? atol(threads) : 1);
  if (n < 1) return;
  snprintf(buf, cap, "%ld", n > 16 ? 16 : n);
  setenv("WEFT_NSOCKS", buf, 0);
}

void nccl_env_apply(void) {
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
    const char *v = getenv(same[i].nccl);
    if (v && *v) setenv(same[i].weft, v, 0);
  }
  const char *v = getenv("NCCL_DEBUG");
  const char *mapped = v ? debug_level(v) : NULL;
  if (mapped) setenv("WEFT_DEBUG", mapped, 0);
  v = getenv("NCCL_ALGO");
  mapped = v && *v ? algo_policy(v) : NULL;
  if (mapped) {
    setenv("WEFT_ALGO", mapped, 0);
  } else if (v && *v && getenv("NCCL_DEBUG")) {
    fprintf(stderr,
            "weft: NCCL_ALGO=%s has no counterpart in weft (it maps Ring and Tree); weft chooses "
            "by its cost model\n",
            v);
  }
  char buf[16];
  socket_count(buf, sizeof buf);
}

__attribute__((constructor)) static void apply_at_load(void) { nccl_env_apply(); }
