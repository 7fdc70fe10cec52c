/* comm.c -- creating, querying and tearing down communicators. */
#include "comm/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/env.h"
#include "bootstrap/rendezvous.h"
#include "comm/agree.h"
#include "comm/handles.h"
#include "comm/rescue.h"
#include "common/net.h"
#include "common/spin.h"
#include "common/trace.h"
#include "kernels/reduce.h"
#include "transport/ibv_wrap.h"
#include "transport/staged.h"

weft_result_t comm_alloc(int nranks, int rank, weft_comm_t **out) {
  weft_comm_t *c = calloc(1, sizeof *c);
  if (!c) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory creating the communicator");
  c->rank = rank;
  c->nranks = nranks;
  c->local_rank = -1;
  c->local_size = -1;
  c->conns = calloc((size_t)nranks, sizeof *c->conns);
  c->sent_to = calloc((size_t)nranks, sizeof *c->sent_to);
  c->recv_from = calloc((size_t)nranks, sizeof *c->recv_from);
  c->dev_conns = calloc((size_t)nranks, sizeof *c->dev_conns);
  int listed = 0;
  if (c->conns && c->sent_to && c->recv_from && c->dev_conns) {
    handles_lock();
    listed = handles_add(c, HANDLE_COMM) == 0;
    handles_unlock();
  }
  if (!listed) {
    free(c->conns);
    free(c->dev_conns);
    free(c->sent_to);
    free(c->recv_from);
    free(c);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory creating the communicator");
  }
  *out = c;
  return WEFT_SUCCESS;
}

weft_result_t comm_alloc_child(const weft_comm_t *parent, const char *id_text, int rank, int nranks,
                               weft_comm_t **out) {
  WEFT_CHECK(comm_alloc(nranks, rank, out));
  weft_comm_t *c = *out;
  c->config = parent->config;
  c->algo_policy = parent->algo_policy;
  c->model = parent->model;
  c->dev_model = parent->dev_model;
  c->costs = parent->costs;
  c->model_tuned = parent->model_tuned;
  c->advertise = parent->advertise;
  c->comm_id = boot_job_hash(id_text);
  return WEFT_SUCCESS;
}

void comm_free(weft_comm_t *c, int abortive) {
  if (!c) return;
  /* A communicator the caller never got (a failed init, split or shrink) leaves the table; a
   * destroyed or aborted one was marked so by its closer, and stays. */
  handles_lock();
  if (handles_live(c, HANDLE_COMM)) handles_remove(c);
  handles_unlock();
  /* Device connections first: a staged one wraps the host connection closed below. */
  for (int p = 0; p < c->nranks; p++)
    if (c->dev_conns[p]) c->dev_conns[p]->ops->close(c->dev_conns[p], abortive);
  for (int p = 0; p < c->nranks; p++)
    if (c->conns[p]) c->conns[p]->ops->close(c->conns[p], abortive);
  for (int k = 0; k < BOOT_NTRANSPORTS; k++) {
    if (!c->transports[k]) continue;
    c->transports[k]->aborting = abortive;
    c->transports[k]->ops->destroy(c->transports[k]);
    free(c->peer_addrs[k]);
  }
  rescue_close(c, abortive);
  comm_premul_release(c);
  comm_sched_cache_release(c);
  comm_resident_release(c);
  comm_algo_release(c);
  exec_ctx_release(&c->exec);
  dev_engine_close(c->dev);
  free(c->via);
  free(c->via_dev);
  free(c->dev_conns);
  free(c->node_of);
  free(c->conns);
  free(c->sent_to);
  free(c->recv_from);
  free(c);
}

weft_result_t comm_get_conn(void *owner, int peer, int device, conn_t **out) {
  weft_comm_t *c = owner;
  if (device) {
    /* A verbs connection with GPUDirect carries device buffers itself. */
    if (c->via_dev[peer] == COMM_IB_GDR) return comm_get_conn(c, peer, 0, out);
    if (!c->dev_conns[peer]) {
      if (c->via_dev[peer] == COMM_CUDA_IPC) {
        transport_t *t = c->transports[COMM_CUDA_IPC];
        WEFT_CHECK(t->ops->connect(t, peer,
                                   c->peer_addrs[COMM_CUDA_IPC] + (size_t)peer * t->ops->addr_size,
                                   &c->dev_conns[peer]));
      } else {
        conn_t *host;
        WEFT_CHECK(comm_get_conn(c, peer, 0, &host));
        WEFT_CHECK(staged_wrap(host, c->dev, &c->dev_config, &c->dev_conns[peer]));
      }
    }
    *out = c->dev_conns[peer];
    return WEFT_SUCCESS;
  }
  if (!c->conns[peer]) {
    transport_t *t = c->transports[c->via[peer]];
    WEFT_CHECK(t->ops->connect(
        t, peer, c->peer_addrs[c->via[peer]] + (size_t)peer * t->ops->addr_size, &c->conns[peer]));
  }
  *out = c->conns[peer];
  return WEFT_SUCCESS;
}

/* `failed` is read by other threads (weft_call on a stream checks it while the progress thread
 * runs earlier calls): the message is written first and published by the release store. */
weft_result_t comm_failure(const weft_comm_t *c) {
  return (weft_result_t)__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE);
}

weft_result_t comm_fail(weft_comm_t *c, weft_result_t res) {
  /* The first failure is the one to report, and once published the message is read by other
   * threads (weft_comm_get_async_error): it is written once. */
  if (comm_failure(c) == WEFT_SUCCESS) {
    snprintf(c->failed_msg, sizeof c->failed_msg, "%s", err_last());
    __atomic_store_n(&c->failed, res, __ATOMIC_RELEASE);
  }
  c->exec.conn_epoch++; /* the layouts kept for the executor hold the connections closed here */
  for (int p = 0; p < c->nranks; p++) {
    if (!c->dev_conns[p]) continue;
    c->dev_conns[p]->ops->close(c->dev_conns[p], 1);
    c->dev_conns[p] = NULL;
  }
  for (int p = 0; p < c->nranks; p++) {
    if (!c->conns[p]) continue;
    c->conns[p]->ops->close(c->conns[p], 1);
    c->conns[p] = NULL;
  }
  return res;
}

weft_result_t comm_check_usable(const weft_comm_t *c) {
  if (!c) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "comm is NULL");
  if (comm_failure(c) != WEFT_SUCCESS)
    return WEFT_ERR(WEFT_ERR_COMM_FAILED,
                    "rank %d: the communicator failed earlier and cannot be used (destroy or "
                    "abort it): %s",
                    c->rank, c->failed_msg);
  return WEFT_SUCCESS;
}

/* Local rank and size from the host identities everyone published (ranks on one host are numbered
 * in global rank order, as launchers do). */
/* Numbers the hosts in order of their first rank, so every rank computes the same map. */
static weft_result_t map_nodes(weft_comm_t *c, const boot_record_t *all) {
  c->node_of = malloc(sizeof(int) * (size_t)c->nranks);
  if (!c->node_of) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory creating the communicator");
  c->nnodes = 0;
  for (int r = 0; r < c->nranks; r++) {
    c->node_of[r] = -1;
    for (int q = 0; q < r && c->node_of[r] < 0; q++)
      if (strcmp(all[q].host_id, all[r].host_id) == 0) c->node_of[r] = c->node_of[q];
    if (c->node_of[r] < 0) c->node_of[r] = c->nnodes++;
  }
  return WEFT_SUCCESS;
}

static void derive_locality(weft_comm_t *c, const boot_record_t *all) {
  int local_rank = 0, local_size = 0;
  for (int r = 0; r < c->nranks; r++) {
    if (strcmp(all[r].host_id, all[c->rank].host_id) != 0) continue;
    if (r < c->rank) local_rank++;
    local_size++;
  }
  c->local_rank = local_rank;
  c->local_size = local_size;
}

/* Indexed by COMM_TCP, COMM_SHM, COMM_CUDA_IPC, COMM_IB: where each transport's blob sits in
 * boot_record_t. */
static const transport_ops_t *const kinds[BOOT_NTRANSPORTS] = {
    &tcp_transport_ops, &shm_transport_ops, &cuda_ipc_transport_ops, &ibverbs_transport_ops};

const char *comm_transport_name(const weft_comm_t *c, int peer) {
  if (!c || peer < 0 || peer >= c->nranks || !c->conns[peer]) return NULL;
  return c->conns[peer]->ops->name;
}

const char *comm_device_transport_name(const weft_comm_t *c, int peer) {
  if (!c || peer < 0 || peer >= c->nranks) return NULL;
  if (c->via_dev[peer] == COMM_IB_GDR) return c->conns[peer] ? "ib" : NULL;
  if (!c->dev_conns[peer]) return NULL;
  return c->dev_conns[peer]->ops->name;
}

/* WEFT_TRANSPORT: auto creates tcp, shm and ib (shm and ib are optional: without usable /dev/shm
 * or an active RDMA port peers use tcp), tcp, shm or ib only the one. */
static weft_result_t transport_mode(const weft_comm_t *c, int *want) {
  const char *m = c->config.transport;
  int is_auto = strcmp(m, "auto") == 0;
  want[COMM_TCP] = is_auto || strcmp(m, "tcp") == 0;
  want[COMM_SHM] = is_auto || strcmp(m, "shm") == 0;
  want[COMM_IB] = is_auto || strcmp(m, "ib") == 0;
  if (!want[COMM_TCP] && !want[COMM_SHM] && !want[COMM_IB])
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: WEFT_TRANSPORT=\"%s\" is not one of auto, tcp, shm, ib", c->rank, m);
  return WEFT_SUCCESS;
}

static int mode_is(const weft_comm_t *c, const char *mode) {
  return strcmp(c->config.transport, mode) == 0;
}

weft_result_t comm_open_transport(weft_comm_t *c, boot_record_t *mine) {
  /* The device engine first: it decides whether there is a CUDA IPC transport to create. */
  if (!c->dev && strcmp(c->config.device, "none") != 0)
    WEFT_CHECK_CTX(dev_engine_open(c->config.device, &c->dev), "rank %d", c->rank);
  c->dev_config = config_for_device(&c->config);
  transport_params_t tp = {c->rank, c->nranks, c->comm_id, &c->config, &c->advertise, c->dev};
  transport_params_t dev_tp = tp;
  dev_tp.config = &c->dev_config;
  int want[BOOT_NTRANSPORTS];
  memset(mine, 0, sizeof *mine);
  WEFT_CHECK(transport_mode(c, want));
  /* Device buffers between ranks of one host go by CUDA IPC wherever shared memory may be used. */
  want[COMM_CUDA_IPC] = c->dev && want[COMM_SHM];
  for (int k = 0; k < BOOT_NTRANSPORTS; k++) {
    const transport_ops_t *t = kinds[k];
    if (!want[k]) continue;
    if (t->addr_size > sizeof mine->addr[k])
      return WEFT_ERR(WEFT_ERR_INTERNAL, "rank %d: %s address of %zu bytes does not fit a record",
                      c->rank, t->name, t->addr_size);
    weft_result_t res = t->create(k == COMM_CUDA_IPC ? &dev_tp : &tp, &c->transports[k]);
    if (res != WEFT_SUCCESS && k == COMM_CUDA_IPC) {
      /* Device buffers then go staged over the host connection. */
      if (c->config.debug >= 1)
        fprintf(stderr, "weft rank %d: no CUDA IPC, device buffers go staged: %s\n", c->rank,
                err_last());
      continue;
    }
    if (res != WEFT_SUCCESS && k == COMM_IB && res != WEFT_ERR_INVALID_ARGUMENT) {
      /* A malformed WEFT_IB_HCA fails init whatever the mode; no device, no active port, or a
       * WEFT_IB_GID_INDEX the port lacks leave this rank without verbs. */
      if (mode_is(c, "ib")) {
        char why[ERR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err_last());
        return WEFT_ERR(res, "rank %d: WEFT_TRANSPORT=ib but no active RDMA port (%s)", c->rank,
                        why);
      }
      /* auto: peers see our all-zero ib blob and use tcp (or shm) with us. */
      if (c->config.debug >= 1)
        fprintf(stderr, "weft rank %d: no usable RDMA port, using tcp across hosts: %s\n", c->rank,
                err_last());
      continue;
    }
    if (res != WEFT_SUCCESS && k == COMM_SHM && want[COMM_TCP]) {
      /* auto: peers see our all-zero shm blob and use tcp with us. */
      if (c->config.debug >= 1)
        fprintf(stderr, "weft rank %d: no shared memory, using tcp: %s\n", c->rank, err_last());
      continue;
    }
    WEFT_CHECK(res);
    c->transports[k]->aborted = &c->aborted;
    t->local_addr(c->transports[k], mine->addr[k]);
  }
  boot_host_id(mine->host_id, sizeof mine->host_id);
  mine->host_cpus = spin_host_cpus();
  return rescue_open(c, mine);
}

int comm_blob_present(const unsigned char *blob, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (blob[i]) return 1;
  return 0;
}

/* Whether rank r and this rank both have a verbs port, of the same link layer. */
static int ib_both(const weft_comm_t *c, const boot_record_t *all, int r) {
  if (!c->transports[COMM_IB]) return 0;
  ibvw_port_facts_t mine = ibverbs_blob_facts(all[c->rank].addr[COMM_IB]);
  ibvw_port_facts_t theirs = ibverbs_blob_facts(all[r].addr[COMM_IB]);
  return mine.present && theirs.present && mine.link_layer == theirs.link_layer;
}

/* Whether device buffers to rank r go over verbs straight from device memory: both published
 * GPUDirect (WEFT_IB_GDR=1 where it works); otherwise they are staged through host memory. */
static int ib_gdr_both(const weft_comm_t *c, const boot_record_t *all, int r) {
  return ibverbs_blob_facts(all[c->rank].addr[COMM_IB]).gdr &&
         ibverbs_blob_facts(all[r].addr[COMM_IB]).gdr;
}

/* Every rank applies the same rule to the same records, so both ends of a pair agree: shm between
 * ranks of one host that both have it; across hosts ib where both have a verbs port of the same
 * link layer; tcp otherwise. WEFT_TRANSPORT=ib puts every peer on ib, and fails naming a peer
 * without a port; WEFT_TRANSPORT=shm with a peer elsewhere is an error naming both hosts. Then shm
 * maps the doorbells of its peers. */
static weft_result_t choose_transports(weft_comm_t *c, const boot_record_t *all) {
  const size_t shm_size = shm_transport_ops.addr_size;
  const size_t ipc_size = cuda_ipc_transport_ops.addr_size;
  int *peers = malloc(sizeof(int) * (size_t)c->nranks);
  const void **blobs = malloc(sizeof(void *) * (size_t)c->nranks);
  int *ipc_peers = malloc(sizeof(int) * (size_t)c->nranks);
  const void **ipc_blobs = malloc(sizeof(void *) * (size_t)c->nranks);
  c->via = calloc((size_t)c->nranks, 1);
  c->via_dev = calloc((size_t)c->nranks, 1);
  weft_result_t res = WEFT_SUCCESS;
  int n = 0, nipc = 0;
  if (!peers || !blobs || !ipc_peers || !ipc_blobs || !c->via || !c->via_dev) {
    res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory creating the communicator");
    goto done;
  }
  for (int r = 0; r < c->nranks; r++) {
    if (r == c->rank) continue;
    int same_host = c->node_of[r] == c->node_of[c->rank];
    if (mode_is(c, "shm") && !same_host) {
      res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                     "rank %d: WEFT_TRANSPORT=shm, but rank %d is on another host (%s, this rank "
                     "is on %s): use auto or tcp",
                     c->rank, r, all[r].host_id, all[c->rank].host_id);
      goto done;
    }
    if (same_host && c->transports[COMM_SHM] &&
        comm_blob_present(all[r].addr[COMM_SHM], shm_size)) {
      c->via[r] = COMM_SHM;
      blobs[n] = all[r].addr[COMM_SHM];
      peers[n++] = r;
    } else if ((!same_host || mode_is(c, "ib")) && ib_both(c, all, r)) {
      c->via[r] = COMM_IB;
    } else if (mode_is(c, "ib")) {
      res = WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                     "rank %d: WEFT_TRANSPORT=ib, but rank %d has no active RDMA port of this "
                     "rank's link layer (its own error, if any, says why): use auto or tcp",
                     c->rank, r);
      goto done;
    } else {
      c->via[r] = COMM_TCP;
    }
    /* Init compares WEFT_TRANSPORT on every rank first (agree.c); this keeps a communicator made
     * some other way from connecting through a transport this rank never created. */
    if (!c->transports[c->via[r]]) {
      res = WEFT_ERR(WEFT_ERR_MISMATCH,
                     "rank %d: WEFT_TRANSPORT=%s, but rank %d can only be reached by %s, which "
                     "this rank does not have (its WEFT_TRANSPORT, or its /dev/shm, differs)",
                     c->rank, c->config.transport, r, kinds[c->via[r]]->name);
      goto done;
    }
    c->via_dev[r] = c->via[r] == COMM_IB && ib_gdr_both(c, all, r) ? COMM_IB_GDR : c->via[r];
    if (same_host && c->transports[COMM_CUDA_IPC] &&
        comm_blob_present(all[r].addr[COMM_CUDA_IPC], ipc_size)) {
      c->via_dev[r] = COMM_CUDA_IPC;
      ipc_blobs[nipc] = all[r].addr[COMM_CUDA_IPC];
      ipc_peers[nipc++] = r;
    }
  }
  int local = 1;
  for (int r = 0; r < c->nranks; r++) local += r != c->rank && c->node_of[r] == c->node_of[c->rank];
  for (int k = 0; k < BOOT_NTRANSPORTS; k++)
    if (c->transports[k]) c->transports[k]->local_ranks = local;
  if (c->transports[COMM_SHM])
    res = c->transports[COMM_SHM]->ops->attach_peers(c->transports[COMM_SHM], peers, blobs, n);
  transport_t *ipc = c->transports[COMM_CUDA_IPC];
  if (res == WEFT_SUCCESS && ipc && ipc->ops->attach_peers)
    res = ipc->ops->attach_peers(ipc, ipc_peers, ipc_blobs, nipc);
done:
  free(peers);
  free(blobs);
  free(ipc_peers);
  free(ipc_blobs);
  return res;
}

/* WEFT_DEBUG=1: which transport each peer gets, e.g. "0:self 1:shm 2:tcp". */
static void describe_via(const weft_comm_t *c, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int r = 0; r < c->nranks && used + 16 < cap; r++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%d:%s", r ? " " : "", r,
                             r == c->rank ? "self" : kinds[c->via[r]]->name);
  if (used + 16 >= cap) snprintf(buf + used, cap - used, " ...");
}

weft_result_t comm_connect(weft_comm_t *c, const boot_record_t *all) {
  for (int k = 0; k < BOOT_NTRANSPORTS; k++) {
    if (!c->transports[k]) continue;
    size_t size = c->transports[k]->ops->addr_size;
    c->peer_addrs[k] = calloc((size_t)c->nranks, size);
    if (!c->peer_addrs[k])
      return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory creating the communicator");
    for (int r = 0; r < c->nranks; r++)
      memcpy(c->peer_addrs[k] + (size_t)r * size, all[r].addr[k], size);
  }
  WEFT_CHECK(rescue_attach(c, all));
  if (c->local_rank < 0 || c->local_size < 0) derive_locality(c, all);
  WEFT_CHECK(map_nodes(c, all));
  WEFT_CHECK(choose_transports(c, all));
  cost_model_connect(c, all);
  c->exec = (exec_ctx_t){.rank = c->rank, .nranks = c->nranks, .config = &c->config,
                         .dev_config = &c->dev_config, .spin_us = c->config.spin_us,
                         .get_conn = comm_get_conn, .owner = c, .dev = c->dev,
                         .aborted = &c->aborted};
  /* Connect the ring now, so that an unreachable peer is reported by init, not by the first
   * collective. Other peers connect on first use. */
  if (c->nranks > 1) {
    conn_t *unused;
    int right = (c->rank + 1) % c->nranks, left = (c->rank - 1 + c->nranks) % c->nranks;
    int first = right < left ? right : left, second = right < left ? left : right;
    WEFT_CHECK(comm_get_conn(c, first, 0, &unused));
    WEFT_CHECK(comm_get_conn(c, second, 0, &unused));
  }
  /* Every rank published its address after it started listening, so all peers listen now. */
  for (int k = 0; k < BOOT_NTRANSPORTS; k++)
    if (c->transports[k]) c->transports[k]->peers_listening = 1;
  if (c->config.debug >= 1) {
    char where[NET_ADDR_STRLEN] = "(off)", via[512], rdma[256] = "";
    if (c->transports[COMM_TCP])
      net_addr_str((const net_addr_t *)all[c->rank].addr[COMM_TCP], where, sizeof where);
    describe_via(c, via, sizeof via);
    int ib_peers = 0;
    for (int r = 0; r < c->nranks; r++) ib_peers += r != c->rank && c->via[r] == COMM_IB;
    char window[48] = "each transport's own number of slices";
    if (c->config.slices_in_flight > 0)
      snprintf(window, sizeof window, "%d slices", c->config.slices_in_flight);
    if (ib_peers) {
      char dev[224];
      ibverbs_describe(c->transports[COMM_IB], dev, sizeof dev);
      snprintf(rdma, sizeof rdma, "; ib on %s", dev);
    }
    fprintf(stderr,
            "weft rank %d/%d: local rank %d/%d, transport per rank: %s%s; tcp at %s (%d socket(s) "
            "per peer), shm rings of %d slots, slices of %zu bytes (device buffers: %d slots of "
            "%zu), %s in flight, timeout %d ms, host reductions %s; "
            "cost model%s alpha %.2f us, beta %.3f ns/B, gamma %.3f ns/B, wake %.1f us per round "
            "(ranks sharing CPUs) (device buffers: %.2f us, %.3f ns/B, %.3f ns/B)\n",
            c->rank, c->nranks, c->local_rank, c->local_size, via, rdma, where, c->config.nsocks,
            c->config.shm_slots, c->config.slice_bytes, c->dev_config.shm_slots,
            c->dev_config.slice_bytes, window, c->config.timeout_ms, kern_isa_name(kern_isa_best()),
            c->model_tuned ? " (WEFT_TUNE_FILE)" : "", c->model.alpha * 1e6, c->model.beta * 1e9,
            c->model.gamma * 1e9, c->model.wake * 1e6, c->dev_model.alpha * 1e6,
            c->dev_model.beta * 1e9, c->dev_model.gamma * 1e9);
  }
  return WEFT_SUCCESS;
}

/* Init's exchange goes through the bootstrap store (split's through the parent: split.c). */
static weft_result_t comm_setup(weft_comm_t *c, const char *host, int port, uint64_t job) {
  weft_result_t res;
  boot_session_t *boot = NULL;
  boot_params_t bp = {c->rank, c->nranks, host, port, job, &c->config};
  WEFT_CHECK(boot_open(&bp, &boot, &c->advertise, &c->comm_id));
  boot_record_t mine;
  boot_record_t *all = calloc((size_t)c->nranks, sizeof *all);
  if (!all) {
    res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory creating the communicator");
    goto done;
  }
  WEFT_CHECK_GOTO(comm_open_transport(c, &mine), res, done);
  agree_fill(c, job, &mine);
  WEFT_CHECK_GOTO(boot_exchange(boot, &mine, all), res, done);
  /* Before any connection: settings that differ would otherwise surface as a crash or a stall. */
  WEFT_CHECK_GOTO(agree_check(c, all), res, done);
  res = comm_connect(c, all);
done:
  free(all);
  boot_close(boot);
  return res;
}

static weft_result_t init_common(weft_comm_t **out, int nranks, int rank, const char *host,
                                 int port, uint64_t job, int local_rank, int local_size) {
  if (!out) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "comm pointer is NULL");
  *out = NULL;
  if (nranks < 1)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "nranks is %d: it must be at least 1", nranks);
  if (rank < 0 || rank >= nranks)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d is out of range for a world of size %d (valid: 0..%d)", rank, nranks,
                    nranks - 1);
  if (!host || !*host)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: master address is empty", rank);
  if (port < 1 || port > 65535)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: master port %d is out of range 1..65535",
                    rank, port);
  weft_comm_t *c = NULL;
  WEFT_CHECK(comm_alloc(nranks, rank, &c));
  weft_result_t res = config_load(&c->config, NULL, NULL);
  if (res == WEFT_SUCCESS) res = algo_policy_parse(c->config.algo, &c->algo_policy);
  if (res == WEFT_SUCCESS) res = cost_model_init(c);
  if (res == WEFT_SUCCESS) res = trace_check_folder(&c->config, rank);
  if (res == WEFT_SUCCESS) {
    c->local_rank = local_rank;
    c->local_size = local_size;
    res = comm_setup(c, host, port, job);
  }
  /* After setup, which fills in c->exec: a failed init leaves no trace file behind. */
  if (res == WEFT_SUCCESS) res = trace_open(&c->exec.trace, &c->config, rank, nranks);
  /* Last: loading agrees over the communicator's own connections. */
  if (res == WEFT_SUCCESS && c->config.algo_file[0]) res = comm_algo_load(c, c->config.algo_file);
  if (res != WEFT_SUCCESS) {
    comm_free(c, 1);
    /* A failure deep in setup ("measuring the cost model: receive from rank 3") does not say
     * that it was init that failed; the caller may have several calls in flight to tell apart. */
    return err_context(res, "comm_init");
  }
  *out = c;
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_init(weft_comm_t **comm, int nranks, int rank, const char *master_addr,
                             int master_port) {
  return init_common(comm, nranks, rank, master_addr, master_port, boot_job_hash(""), -1, -1);
}

weft_result_t weft_comm_init_url(weft_comm_t **comm, const char *url, int nranks, int rank) {
  char host[256];
  int port;
  if (!url) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "init URL is NULL");
  WEFT_CHECK(net_parse_url(url, host, sizeof host, &port));
  return init_common(comm, nranks, rank, host, port, boot_job_hash(""), -1, -1);
}

weft_result_t weft_comm_init_env(weft_comm_t **comm) {
  boot_env_t env;
  WEFT_CHECK(boot_env_resolve_process(&env));
  return init_common(comm, env.world_size, env.rank, env.master_host, env.master_port,
                     boot_job_hash(env.job_id), env.local_rank, env.local_size);
}

/* ---- Lifecycle ---------------------------------------------------------------------------
 *
 * A communicator is live from its creation until a closer (destroy or abort) marks it destroyed or
 * aborted in the handles table (handles.h). Every call enters (comm_enter) and leaves; a closer
 * marks it closing, so that no new call gets in, and waits under the table's mutex for the
 * callers inside to leave before it frees anything. weft_comm_abort also sets `aborted`, which makes the call in
 * progress give up within one wait slice of the executor, so it never waits long. */

/* Why a handle that is not a live communicator is refused, with the table's mutex held. Using an
 * aborted communicator says WEFT_ERR_ABORTED, as the calls interrupted by the abort did. */
static weft_result_t not_live(const weft_comm_t *c, const char *op) {
  switch (handles_kind(c)) {
    case HANDLE_COMM_DESTROYED:
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "%s: the communicator was destroyed (weft_comm_destroy): a handle must not "
                      "be used after that",
                      op);
    case HANDLE_COMM_ABORTED:
      return WEFT_ERR(WEFT_ERR_ABORTED,
                      "%s: the communicator was aborted (weft_comm_abort): only "
                      "weft_comm_destroy and weft_comm_abort may still be called on it, and do "
                      "nothing",
                      op);
    default:
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "%s: not a communicator: the handle never came from weft_comm_init, a "
                      "split or a shrink (or its memory was reused)",
                      op);
  }
}

weft_result_t comm_enter(weft_comm_t *c, const char *op, comm_use_t use) {
  if (!c) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: comm is NULL", op);
  weft_result_t res = WEFT_SUCCESS;
  handles_lock();
  if (!handles_live(c, HANDLE_COMM))
    res = not_live(c, op);
  else if (c->closing == COMM_ABORTING)
    res = WEFT_ERR(WEFT_ERR_ABORTED, "rank %d: %s: the communicator was aborted (weft_comm_abort)",
                   c->rank, op);
  else if (c->closing == COMM_DESTROYING)
    res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                   "rank %d: %s: the communicator is being destroyed by another thread", c->rank,
                   op);
  else if (use == COMM_RUNS && c->running)
    res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                   "rank %d: %s: another thread is inside %s on this communicator, and a "
                   "communicator takes one call at a time (weft.h, \"Threads\"): issue its calls "
                   "from one thread, or give each thread a communicator (weft_comm_dup)",
                   c->rank, op, c->running);
  if (res == WEFT_SUCCESS) {
    c->users++;
    if (use == COMM_RUNS) c->running = op;
  }
  handles_unlock();
  return res;
}

int comm_try_share(weft_comm_t *c) {
  handles_lock();
  int ok = handles_live(c, HANDLE_COMM) && !c->closing;
  if (ok) c->users++;
  handles_unlock();
  return ok;
}

void comm_leave(weft_comm_t *c, comm_use_t use) {
  handles_lock();
  c->users--;
  if (use == COMM_RUNS) c->running = NULL;
  if (c->closing) handles_changed(); /* a closer waits for the last one out */
  handles_unlock();
}

int comm_aborted(const weft_comm_t *c) { return __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE); }

/* Claims the communicator for a closer, with the table's mutex held. Destroy refuses while a call
 * runs on it (it would have to wait for that call, as long as WEFT_TIMEOUT_MS; abort is the way to
 * end it); abort makes calls give up. A closer that finds another at work waits for it to finish
 * (*done = 1): after an abort during a destroy, both return once the communicator is gone. */
static weft_result_t claim_for_close(weft_comm_t *c, const char *op, int abortive, int *done) {
  *done = 0;
  if (handles_kind(c) == HANDLE_COMM_ABORTED) {
    *done = 1; /* closing an aborted communicator again: nothing left to do */
    return WEFT_SUCCESS;
  }
  if (!handles_live(c, HANDLE_COMM)) return not_live(c, op);
  if (abortive) __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
  if (c->closing == COMM_DESTROYING && !abortive)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: %s: another thread is destroying this communicator already", c->rank,
                    op);
  if (c->closing) {
    while (handles_live(c, HANDLE_COMM)) handles_wait();
    *done = 1;
    return WEFT_SUCCESS;
  }
  if (!abortive && c->running)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: %s: another thread is inside %s on this communicator: destroy it "
                    "once that call returned, or call weft_comm_abort, which makes the call "
                    "return WEFT_ERR_ABORTED",
                    c->rank, op, c->running);
  c->closing = abortive ? COMM_ABORTING : COMM_DESTROYING;
  while (c->users > 0) handles_wait();
  return WEFT_SUCCESS;
}

/* Both write the trace after closing the connections: a large one takes a while to write, and
 * peers must not wait for that (least of all after an abort). */
static weft_result_t comm_close(weft_comm_t *c, const char *op, int abortive) {
  if (!c) return WEFT_SUCCESS; /* as free(NULL) */
  int done;
  handles_lock();
  weft_result_t res = claim_for_close(c, op, abortive, &done);
  handles_unlock();
  if (res != WEFT_SUCCESS || done) return res;
  comm_async_stop(c, abortive);
  trace_t *trace = c->exec.trace;
  /* Marked before the memory goes, which also releases a closer waiting for this one. */
  handles_lock();
  (void)handles_add(c, abortive ? HANDLE_COMM_ABORTED : HANDLE_COMM_DESTROYED);
  handles_changed();
  handles_unlock();
  comm_free(c, abortive);
  return trace_close(trace);
}

weft_result_t weft_comm_destroy(weft_comm_t *comm) {
  return comm_close(comm, "weft_comm_destroy", 0);
}

weft_result_t weft_comm_abort(weft_comm_t *comm) { return comm_close(comm, "weft_comm_abort", 1); }

#define QUERY(fn, field)                                                              \
  weft_result_t fn(const weft_comm_t *comm, int *out) {                               \
    if (!out) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, #fn ": output is NULL");     \
    weft_comm_t *c = (weft_comm_t *)comm; /* entering counts a user; nothing else */  \
    WEFT_CHECK(comm_enter(c, #fn, COMM_SHARES));                                      \
    *out = c->field;                                                                  \
    comm_leave(c, COMM_SHARES);                                                       \
    return WEFT_SUCCESS;                                                              \
  }

QUERY(weft_comm_rank, rank)
QUERY(weft_comm_size, nranks)
QUERY(weft_comm_local_rank, local_rank)
QUERY(weft_comm_local_size, local_size)
