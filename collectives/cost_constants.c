/* cost_constants.c -- the committed per-transport alpha, beta and gamma (cost_constants.h), and
 * the choice's model as a function of the transport mix.
 *
 * Where each number comes from:
 *   tcp, shm (one host)  measured: `weft-run -n 2 weft-bench --tune` with WEFT_TRANSPORT=tcp and
 *                        =shm one after the other, 5 times each on the 2-core development VM;
 *                        the medians (results/2026-11-27-cost-constants/, which also has 4
 *                        ranks: oversubscribed, slower, not committed).
 *   cuda_ipc (one host)  results/2026-11-25-first-gpu-run (one H100, 2 ranks, 4 MiB x 8 slices):
 *                        alpha: a 1 KiB all-reduce takes 419 us over its 2(p-1) = 2 steps; beta:
 *                        46.0 GB/s bus bandwidth at 256 MiB; gamma: kernel_bw's reduce of 256 MiB
 *                        in 284.2 us.
 *   staged               not measured: cuda_ipc's per-message cost (the stream gate's and the
 *                        fences' host round trips, which staging pays too) plus the host link's
 *                        alpha; the host link's beta plus a copy to and one from the device at
 *                        50 GB/s (PCIe 5.0 x16 as achieved by cudaMemcpy); the device's gamma.
 *   rdma                 datasheet-like, not measured: a 100 Gb/s adapter (12 GB/s achieved),
 *                        5 us per message (verbs write plus weft's slot handshake). The Soft-RoCE
 *                        numbers (results/2026-11-25-verbs-vm) come from two emulated VMs at
 *                        7 MB/s and say nothing about an adapter.
 *   tcp across hosts     datasheet-like, not measured: 25 GbE (2.9 GB/s achieved by one stream),
 *                        25 us per message (two kernel stacks and a switch).
 * shm and cuda_ipc exist on one host only: their inter-host rows are what auto uses there instead
 * (tcp, and staged over tcp). rdma and tcp across hosts take tcp's measured gamma (a network
 * link, a host reduction), cuda_ipc and staged the device's. */
#include "collectives/cost_constants.h"

#include <string.h>

/* Measured (see above): one-host tcp and shm. gamma is what reducing adds to a ring step as
 * --tune fits it: over shm the fused receive-reduce hides most of the reduction behind the copy,
 * over tcp little of it. */
#define TCP_ALPHA 3.849e-6
#define TCP_BETA 2.524e-10
#define TCP_GAMMA 3.626e-10
#define SHM_ALPHA 0.8712e-6
#define SHM_BETA 1.557e-10
#define SHM_GAMMA 1.478e-11
/* From results/2026-11-25-first-gpu-run (see above). */
#define IPC_ALPHA (419e-6 / 2)
#define IPC_BETA (1.0 / 46.0e9)
#define DEV_GAMMA (284.2e-6 / 268435456.0)
/* Datasheet-like (see above). */
#define PCIE_BETA (1.0 / 50e9)
#define RDMA_ALPHA 5e-6
#define RDMA_BETA (1.0 / 12e9)
#define NET_ALPHA 25e-6
#define NET_BETA (1.0 / 2.9e9)

static const cost_table_t committed = {{
    [COST_TCP] = {{TCP_ALPHA, TCP_BETA, TCP_GAMMA}, {NET_ALPHA, NET_BETA, TCP_GAMMA}},
    [COST_SHM] = {{SHM_ALPHA, SHM_BETA, SHM_GAMMA}, {NET_ALPHA, NET_BETA, TCP_GAMMA}},
    [COST_CUDA_IPC] = {{IPC_ALPHA, IPC_BETA, DEV_GAMMA},
                       {IPC_ALPHA + NET_ALPHA, NET_BETA + 2 * PCIE_BETA, DEV_GAMMA}},
    [COST_STAGED] = {{IPC_ALPHA + SHM_ALPHA, SHM_BETA + 2 * PCIE_BETA, DEV_GAMMA},
                     {IPC_ALPHA + NET_ALPHA, NET_BETA + 2 * PCIE_BETA, DEV_GAMMA}},
    [COST_RDMA] = {{RDMA_ALPHA, RDMA_BETA, TCP_GAMMA}, {RDMA_ALPHA, RDMA_BETA, TCP_GAMMA}},
}};

static const char *const names[COST_NUM_TRANSPORTS] = COST_TRANSPORT_NAMES;

const cost_table_t *cost_constants(void) { return &committed; }

cost_transport_t cost_transport_from_name(const char *name) {
  for (int t = 0; t < COST_NUM_TRANSPORTS; t++)
    if (name && strcmp(name, names[t]) == 0) return (cost_transport_t)t;
  return COST_NUM_TRANSPORTS;
}

const char *cost_transport_name(cost_transport_t t) {
  return (unsigned)t < COST_NUM_TRANSPORTS ? names[t] : "?";
}

static double max2(double a, double b) { return a > b ? a : b; }

cost_model_t cost_model_for(const cost_table_t *table, const cost_links_t *links,
                            double slice_bytes) {
  cost_model_t m = {0, 0, 0, slice_bytes};
  int any = 0;
  for (int t = 0; t < COST_NUM_TRANSPORTS; t++)
    for (int w = 0; w < 2; w++) {
      if (!links->used[t][w]) continue;
      const cost_link_t *l = &table->link[t][w];
      m.alpha = max2(m.alpha, l->alpha);
      m.beta = max2(m.beta, l->beta);
      m.gamma = max2(m.gamma, l->gamma);
      any = 1;
    }
  if (!any) {
    const cost_link_t *l = &table->link[COST_TCP][COST_INTRA];
    m.alpha = l->alpha;
    m.beta = l->beta;
    m.gamma = l->gamma;
  }
  return m;
}
