/* cost_model.c -- the automatic algorithm choice's alpha, beta and gamma: the committed
 * per-transport constants (collectives/cost_constants.c), single constants replaced or the whole
 * host model given by WEFT_TUNE_FILE (tune_file.c), combined by the transport mix.
 *
 * Nothing is measured: the choice is a pure function of (collective, size, ranks, hosts,
 * transports, topology, constants), so two runs of one job, and every rank of one run, pick the
 * same algorithms. weft-bench --tune measures on purpose and writes WEFT_TUNE_FILE. */
#include <string.h>

#include "comm/comm.h"
#include "transport/ibv_wrap.h"

weft_result_t cost_model_init(weft_comm_t *c) {
  cost_tune_t tune;
  memset(&tune, 0, sizeof tune);
  tune.table = *cost_constants();
  if (c->config.tune_file[0]) WEFT_CHECK(cost_tune_load(c->config.tune_file, &tune));
  c->costs = tune.table;
  c->model_tuned = tune.has_model;
  /* Until cost_model_connect knows the transports: as for one rank. */
  cost_links_t none;
  memset(&none, 0, sizeof none);
  c->model = c->dev_model = cost_model_for(&c->costs, &none, (double)c->config.slice_bytes);
  c->dev_model.slice_bytes = (double)config_for_device(&c->config).slice_bytes;
  if (tune.has_model) {
    c->model.alpha = tune.model.alpha;
    c->model.beta = tune.model.beta;
    c->model.gamma = tune.model.gamma;
  }
  return WEFT_SUCCESS;
}

/* Which (transport, host) class carries ranks a and b, for host and for device buffers: the rule
 * comm.c's choose_transports applies, but read from both ranks' records, so that every rank
 * sees every pair alike (a rank's own transports are those its record publishes). */
static void pair_classes(const weft_comm_t *c, const boot_record_t *all, int a, int b,
                         cost_links_t *host, cost_links_t *dev) {
  int same = c->node_of[a] == c->node_of[b];
  int w = same ? COST_INTRA : COST_INTER;
  const size_t shm_size = shm_transport_ops.addr_size, ipc_size = cuda_ipc_transport_ops.addr_size;
  ibvw_port_facts_t fa = ibverbs_blob_facts(all[a].addr[COMM_IB]);
  ibvw_port_facts_t fb = ibverbs_blob_facts(all[b].addr[COMM_IB]);
  int ib_mode = strcmp(c->config.transport, "ib") == 0;
  int ib = fa.present && fb.present && fa.link_layer == fb.link_layer && (!same || ib_mode);
  cost_transport_t t = COST_TCP;
  if (same && comm_blob_present(all[a].addr[COMM_SHM], shm_size) &&
      comm_blob_present(all[b].addr[COMM_SHM], shm_size))
    t = COST_SHM;
  else if (ib)
    t = COST_RDMA;
  host->used[t][w] = 1;
  cost_transport_t d = COST_STAGED;
  if (same && comm_blob_present(all[a].addr[COMM_CUDA_IPC], ipc_size) &&
      comm_blob_present(all[b].addr[COMM_CUDA_IPC], ipc_size))
    d = COST_CUDA_IPC;
  else if (t == COST_RDMA && fa.gdr && fb.gdr)
    d = COST_RDMA;
  dev->used[d][w] = 1;
}

/* Whether some host runs more of the communicator's ranks than it has CPUs: there a rank that
 * waits for a peer's message often waits for the peer to be scheduled first. From the records,
 * so that every rank sees the same (a host that did not say how many CPUs it has counts as
 * having enough). */
static int cost_oversubscribed(const weft_comm_t *c, const boot_record_t *all) {
  /* p^2 comparisons of two ints, once per communicator, as pair_classes' below. */
  for (int r = 0; r < c->nranks; r++) {
    int64_t cpus = all[r].host_cpus, on_host = 0;
    if (cpus <= 0) continue;
    for (int q = 0; q < c->nranks; q++) on_host += c->node_of[q] == c->node_of[r];
    if (on_host > cpus) return 1;
  }
  return 0;
}

void cost_model_connect(weft_comm_t *c, const boot_record_t *all) {
  cost_links_t host, dev;
  memset(&host, 0, sizeof host);
  memset(&dev, 0, sizeof dev);
  /* Every pair, not only this rank's: an algorithm's steps reach ranks this one never talks to.
   * p^2/2 comparisons of a few bytes each, once per communicator. */
  for (int a = 0; a < c->nranks; a++)
    for (int b = a + 1; b < c->nranks; b++) pair_classes(c, all, a, b, &host, &dev);
  if (!c->model_tuned) c->model = cost_model_for(&c->costs, &host, (double)c->config.slice_bytes);
  c->dev_model = cost_model_for(&c->costs, &dev, (double)c->dev_config.slice_bytes);
  /* Host buffers only: device calls go through the device's queue, whose per-message cost dwarfs
   * a context switch. */
  c->model.wake = cost_oversubscribed(c, all) ? COST_WAKE : 0;
}
