/* netns_rank.c -- one rank of the emulated multi-host tests: checks locality, then collectives.
 *
 * Started by weft-run inside netns-hosts.sh's namespaces. Usage:
 *   netns_rank --hosts H --local-size L [--derive-locality]
 * --derive-locality removes the launcher's local rank and size from the environment before
 * init, so weft must find them itself from the host identities (hostname + boot id + network
 * namespace): that is what tells the emulated hosts apart. The host of each rank is taken from
 * HOST_INDEX (netns-hosts.sh), so weft's view is checked against where the rank really runs.
 *
 * Prints "netns_rank OK rank R/N host H local l/L nodes M" on success; every failure prints a
 * line starting "netns_rank FAIL" and exits 1. Run it with WEFT_DEBUG=1 to get weft's setup line
 * per rank on stderr (the test checks the transport there; see netns_test.cc).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/weft.h"

static int rank = -1;

#define FAIL(...)                                       \
  do {                                                  \
    fprintf(stderr, "netns_rank FAIL rank %d: ", rank); \
    fprintf(stderr, __VA_ARGS__);                       \
    fputc('\n', stderr);                                \
    goto fail;                                          \
  } while (0)

#define CHECK_WEFT(call)                                                      \
  do {                                                                        \
    weft_result_t res_ = (call);                                              \
    if (res_ != WEFT_SUCCESS)                                                 \
      FAIL("%s: %s: %s", #call, weft_result_string(res_), weft_last_error()); \
  } while (0)

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

/* Every launcher's local-rank variable (bootstrap/env.c reads these families). */
static void unset_locality(void) {
  static const char *const vars[] = {
      "WEFT_LOCAL_RANK",  "WEFT_LOCAL_WORLD_SIZE",      "LOCAL_RANK",
      "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
      "SLURM_LOCALID",    "SLURM_NTASKS_PER_NODE",
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

int main(int argc, char **argv) {
  int hosts = 1, want_local_size = 1, derive = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--hosts") && i + 1 < argc) {
      hosts = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--local-size") && i + 1 < argc) {
      want_local_size = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--derive-locality")) {
      derive = 1;
    } else {
      fprintf(stderr, "usage: netns_rank --hosts H --local-size L [--derive-locality]\n");
      return 2;
    }
  }
  /* Where this rank really is: HOST_INDEX from netns-hosts.sh, else weft-run's node rank. */
  int host = env_int("HOST_INDEX", env_int("GROUP_RANK", 0));
  int launcher_local_rank = env_int("LOCAL_RANK", -1);
  if (derive) unset_locality();

  weft_comm_t *comm = NULL;
  float *buf = NULL;
  int *hosts_of = NULL;
  int size = 0, local_rank = -1, local_size = -1;
  CHECK_WEFT(weft_comm_init_env(&comm));
  CHECK_WEFT(weft_comm_rank(comm, &rank));
  CHECK_WEFT(weft_comm_size(comm, &size));
  CHECK_WEFT(weft_comm_local_rank(comm, &local_rank));
  CHECK_WEFT(weft_comm_local_size(comm, &local_size));

  /* Locality: weft's local size and rank must match where the ranks really are. */
  if (local_size != want_local_size)
    FAIL("local size %d, want %d (host %d)", local_size, want_local_size, host);
  if (launcher_local_rank >= 0 && local_rank != launcher_local_rank)
    FAIL("local rank %d, but weft-run started it as local rank %d", local_rank,
         launcher_local_rank);
  hosts_of = calloc((size_t)size, sizeof *hosts_of);
  if (!hosts_of) FAIL("out of memory");
  hosts_of[rank] = host;
  CHECK_WEFT(weft_all_gather(hosts_of + rank, hosts_of, 1, WEFT_INT32, comm, NULL));
  int same = 0, before = 0;
  for (int r = 0; r < size; r++) {
    if (hosts_of[r] != host) continue;
    same++;
    if (r < rank) before++;
  }
  if (same != local_size || before != local_rank)
    FAIL("weft says local rank %d of %d, but %d rank(s) run on host %d and %d of them before it",
         local_rank, local_size, same, host, before);
  /* Node count: one local rank 0 per host. */
  int leader = local_rank == 0, nodes = 0;
  CHECK_WEFT(weft_all_reduce(&leader, &nodes, 1, WEFT_INT32, WEFT_SUM, comm, NULL));
  if (nodes != hosts) FAIL("%d node(s) (ranks with local rank 0), want %d", nodes, hosts);

  /* all_reduce, float32 sum, small and pipelined sizes: rank r holds r + 1 + i % 7, all small
   * integers, so the sums are exact in float whatever the order of reduction. */
  static const size_t counts[] = {1, 1000, 1 << 20, (1 << 22) + 3};
  buf = malloc(sizeof(float) * ((1 << 22) + 3));
  if (!buf) FAIL("out of memory");
  /* Each size with the automatic choice, then forced through the hierarchy (shm within a host,
   * TCP across hosts) and the flat ring, so the hierarchical schedule is checked on real hosts. */
  static const weft_algo_t algos[] = {WEFT_ALGO_AUTO, WEFT_ALGO_HIERARCHICAL, WEFT_ALGO_RING};
  for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++)
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      size_t n = counts[c];
      for (size_t i = 0; i < n; i++) buf[i] = (float)(rank + 1 + (int)(i % 7));
      weft_call_t call = {.coll = WEFT_COLL_ALL_REDUCE,
                          .sendbuf = buf,
                          .recvbuf = buf,
                          .count = n,
                          .dtype = WEFT_FLOAT32,
                          .op = WEFT_SUM,
                          .root = -1,
                          .algo = algos[a]};
      CHECK_WEFT(weft_call(&call, comm, NULL));
      for (size_t i = 0; i < n; i++) {
        float want = (float)(size * (size + 1) / 2 + size * (int)(i % 7));
        if (buf[i] != want)
          FAIL("all_reduce %s count %zu: [%zu] = %g, want %g", weft_algo_name(algos[a]), n, i,
               buf[i], want);
      }
    }

  /* broadcast from the last rank (on the last host, so the data crosses hosts). */
  int root = size - 1;
  size_t n = 1 << 18;
  for (size_t i = 0; i < n; i++) buf[i] = rank == root ? (float)(i % 1000) * 0.5f : -1.0f;
  CHECK_WEFT(weft_broadcast(buf, buf, n, WEFT_FLOAT32, root, comm, NULL));
  for (size_t i = 0; i < n; i++) {
    float want = (float)(i % 1000) * 0.5f;
    if (buf[i] != want) FAIL("broadcast root %d: [%zu] = %g, want %g", root, i, buf[i], want);
  }
  CHECK_WEFT(weft_barrier(comm, NULL));

  printf("netns_rank OK rank %d/%d host %d local %d/%d nodes %d\n", rank, size, host, local_rank,
         local_size, nodes);
  fflush(stdout);
  free(buf);
  buf = NULL;
  free(hosts_of);
  hosts_of = NULL;
  weft_comm_t *done = comm;
  comm = NULL; /* destroyed below even if that fails: nothing left to abort */
  CHECK_WEFT(weft_comm_destroy(done));
  return 0;
fail:
  free(buf);
  free(hosts_of);
  if (comm) weft_comm_abort(comm); /* so the other ranks fail at once instead of waiting */
  return 1;
}
