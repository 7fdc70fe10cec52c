/* ibverbs.c -- the RDMA verbs transport: a reliable-connected queue pair per peer, slices written
 * straight into the receiver's registered slots.
 *
 * Setup. Every rank opens the first active port WEFT_IB_HCA allows (ib_device.c; InfiniBand:
 * addressed by LID; RoCE: by the GID WEFT_IB_GID_INDEX picks, by default the RoCE v2 GID of the
 * address the rank advertises) and publishes the address of a side channel: a TCP transport of one socket per peer,
 * embedded here. connect() opens the side connection (tcp.c decides who connects and who accepts,
 * and keeps accepting other peers while it waits) and sends this end's queue pair number, PSN,
 * LID, GID, MTU, and where its receive slots and credit word are registered. The rest runs in
 * progress(): with the peer's data the queue pair goes to ready-to-send, and one more byte each
 * way says so; nothing is written before the peer's byte came, so no write meets a queue pair that
 * cannot take it. Not blocking in connect() for the peer's half matters: a peer that has acked our
 * TCP connection may be busy connecting to a third rank that waits on us, and a rank blocked in a
 * handshake accepts no one. The side connection stays open: a peer that exits or aborts closes it,
 * which a rank waiting on that peer notices.
 *
 * Data. Each direction has WEFT_SHM_SLOTS slots of WEFT_SLICE_BYTES registered at the receiver
 * (and as many send staging slots at the sender). A sender copies a slice into its staging slot i
 * and RDMA-writes it, with immediate data (the length), into the receiver's slot i, i = slices so
 * far mod slots; the immediate consumes one of the receive requests the receiver keeps posted, so
 * the receiver learns of the slice from a completion, in order. The receiver copies it out
 * (post_recv) or lends the slot itself to a reduction (post_recv_inplace, release_recv), and frees
 * slots in order. A fused ring step borrows the next staging slot (lend_send) and the write goes
 * from there once committed: the step writes the slice once, the adapter reads it once.
 *
 * Credits. The receiver tells the sender how many slots it has freed in all by an RDMA write of
 * that count into a word registered at the sender; the sender writes slot i again only once the
 * count says it was freed. A cumulative count rather than a message per freed slot: it needs no
 * receive requests posted at the sender, a newer value replaces any not yet written (a few writes
 * in flight carry any number of freed slots), and the sender reads it with a plain load. Every
 * write lands in a slot the receiver has posted a receive request for (requests are reposted as
 * their completions are polled, and a slot is freed only after its completion), so a receiver is
 * never "not ready".
 *
 * Device buffers (GPUDirect RDMA, WEFT_IB_GDR=1 on both ends, off by default). Without it the
 * communicator stages device buffers through pinned host memory over this connection
 * (transport/staged.c). With it, each direction also has WEFT_DEVICE_SLOTS slots of
 * WEFT_DEVICE_SLICE_BYTES in device memory from the device engine, registered through a dma-buf
 * the engine exports (ibv_reg_dmabuf_mr; the emulated engine's device memory is host memory and is
 * registered by address), and this connection carries device messages itself, as cuda_ipc.c does
 * within a host: a device message takes the next slot of the stream as any message does, plus the
 * next device slot; the sender copies into its device staging slot on its own device queue and
 * writes once that copy's fence passed (writes still go in stream order), and the receiver copies
 * out of its device slot on another queue, or lends the slot itself to device work. The immediate
 * data carries DEV_BIT for a device message; both ends count device messages alike, so the k-th
 * one is in device slot k mod slots on both. A device slot is written again only once the credit
 * count says the receiver freed the stream slot of its last use. Fewer device slots than stream
 * slots: a device slice is 64 times a host one, and device memory is scarcer.
 *
 * Completions are polled in progress() and wait(); wait() polls, yielding the core, for
 * WEFT_SPIN_US, then sleeps in short naps until its timeout, looking at the side connection every
 * 100 ms. A failed work completion names the peer, the operation and the status in words. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/net.h"
#include "common/spin.h"
#include "device/device.h"
#include "transport/ib_device.h"
#include "transport/ibv_wrap.h"
#include "transport/transport.h"
#include "transport/xfer_queue.h"

#define ADDR_MAGIC 0x57494241u /* "WIBA" */

/* What each rank publishes: the side channel's address and what the choice per peer needs. */
typedef struct {
  net_addr_t side;
  uint32_t magic; /* ADDR_MAGIC where this rank has a usable port */
  uint8_t link_layer;
  uint8_t port;
  uint8_t gdr; /* device messages go from and into device memory (WEFT_IB_GDR, and it works here) */
  uint8_t pad;
} ib_addr_t;

/* A blob has room for 144 bytes (bootstrap/rendezvous.h's boot_record_t). */
_Static_assert(sizeof(ib_addr_t) <= 144, "the verbs address must fit a bootstrap record");

ibvw_port_facts_t ibverbs_blob_facts(const void *blob) {
  ib_addr_t a;
  memcpy(&a, blob, sizeof a);
  int ok = a.magic == ADDR_MAGIC;
  ibvw_port_facts_t f = {ok, ok ? a.link_layer : 0, ok && a.gdr};
  return f;
}

#if IBVW_HAVE_VERBS

#define INFO_MAGIC 0x57494243u /* "WIBC" */
#define DEV_BIT 0x80000000u    /* in the immediate data: the bytes are in a device slot */
/* Credit writes in flight at once; each reads its own word, never changed under the adapter. */
#define CREDIT_WRITES 4
/* How often a waiting rank looks at the side connection for a peer that went away. */
#define SIDE_CHECK_MS 100

enum { WR_DATA = 1, WR_CREDIT = 2, WR_RECV = 3 };
#define WR_ID(kind, i) (((uint64_t)(kind) << 32) | (uint32_t)(i))
#define WR_KIND(id) ((int)((id) >> 32))
#define WR_INDEX(id) ((uint32_t)(id))

/* Connection data each end sends over the side connection; both ends run the same build. */
typedef struct {
  uint32_t magic;
  uint32_t qpn, psn;
  uint16_t lid;
  uint8_t mtu, link_layer;
  uint8_t gid[16];
  uint32_t nslots;
  uint32_t rx_rkey;
  uint64_t slot_bytes;
  uint64_t rx_addr;
  uint64_t credit_addr;
  uint32_t credit_rkey;
  uint32_t dev_nslots; /* 0: no device slots (no GPUDirect with this peer) */
  uint64_t dev_slot_bytes;
  uint64_t dev_rx_addr;
  uint32_t dev_rx_rkey;
  uint32_t pad;
} ib_info_t;

typedef struct ib_transport {
  transport_t base;
  int rank, nranks;
  const weft_config_t *cfg;
  weft_config_t side_cfg; /* the communicator's, with one socket per peer */
  transport_t *side;      /* the embedded TCP transport */
  ib_device_t dev;
  dev_engine_t *engine; /* the device engine, for device slots; NULL without GPUDirect */
  int gdr;              /* device slots with peers that have them too */
  int dev_nslots;
  size_t dev_slot;
} ib_transport_t;

enum { CONN_INFO, CONN_RTS, CONN_READY }; /* waiting for the peer's data, its ready byte; ready */

/* A sending slot of the stream, from the time a message takes it until its write is posted. */
typedef struct {
  xfer_t *owner;   /* completed when this, its last slot, is written */
  uint64_t ticket; /* fence after the device copy into the device slot */
  uint32_t len;
  uint32_t home; /* the device slot, for a device message */
  char dev;      /* the bytes are in device slot `home` */
  char fenced;   /* write only once the ticket passed */
  char lent;     /* lent to a fused step, not committed yet */
  char last;
} tx_entry_t;

/* A receiving slot of the stream, from its arrival until it is freed. */
typedef struct {
  xfer_t *owner;   /* completed when this, its last slot, is copied out */
  uint64_t ticket; /* fence after the device copy out of the device slot */
  uint32_t len;
  uint32_t home;
  char dev;
  char pending; /* a device copy out of the slot is in flight */
  char last;
} rx_entry_t;

typedef struct {
  conn_t base;
  ib_transport_t *t;
  conn_t *side;
  int state;
  ib_info_t mine, theirs;
  unsigned char ready_out, ready_in;
  xfer_t info_tx, info_rx, ready_tx, ready_rx;
  xfer_t side_x; /* a one-byte receive that completes or fails only when the peer goes away */
  unsigned char side_byte;
  int64_t side_checked_ms;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  struct ibv_mr *mr;
  char *mem; /* rx slots | tx slots | credit word | credit sources: one registration */
  int n;     /* slots per direction */
  size_t slot;
  char *rx, *tx;
  uint64_t *credit;     /* written by the peer: how many of our writes' slots it freed */
  uint64_t *credit_src; /* CREDIT_WRITES words our credit writes read from */
  uint64_t remote_rx, remote_credit;
  uint32_t remote_rx_rkey, remote_credit_rkey;
  int peer_mtu;
  int status; /* the first failed work completion's status (0: none) */
  /* device slots (GPUDirect with this peer; dn == 0 without) */
  int dn;
  size_t dslot;
  char *dmem; /* rx device slots | tx device slots: one allocation from the engine */
  char *drx, *dtx;
  struct ibv_mr *dmr;
  uint64_t remote_drx;
  uint32_t remote_drx_rkey;
  dev_queue_t *q_send, *q_recv;
  /* sending */
  uint64_t assigned;      /* slots taken by messages (or lent) so far */
  uint64_t head;          /* slots written so far: head <= assigned */
  tx_entry_t *tx_e;       /* per staging slot */
  unsigned char *tx_busy; /* per staging slot: taken, or its write not yet complete */
  uint64_t dev_assigned;  /* device messages (slices) so far */
  uint64_t *dev_last;     /* per device slot: the stream slot of its last use + 1 (0: none) */
  unsigned char *dtx_busy; /* per device slot: taken, or its write not yet complete */
  int writes_out;         /* data writes posted and not yet complete */
  int want_slot;          /* the last lend_send found no slot */
  xfer_part_t *send_head, *send_tail;
  /* receiving */
  uint64_t arrived;     /* slices whose completion was polled */
  uint64_t dev_arrived; /* of which device slices */
  rx_entry_t *rx_e;     /* per slot */
  uint64_t rcur, rtail; /* next slot handed to a receive; slots freed in order */
  unsigned char *freed; /* per slot: done with, not yet behind rtail */
  int bad_len;
  xfer_part_t *recv_head, *recv_tail;
  uint64_t credit_sent; /* the count last written to the peer */
  uint64_t credit_posts;
  int credits_out; /* credit writes not yet complete */
} ib_conn_t;

static uint64_t load_credit(const ib_conn_t *c) {
  return __atomic_load_n(c->credit, __ATOMIC_ACQUIRE);
}

static weft_result_t reg_device(ib_transport_t *t, void *p, size_t bytes, struct ibv_mr **out);

/* Whether device memory from the engine can be registered here: one small allocation tried at
 * create, so that a machine without dma-buf support says so once, at init, and stages. */
static weft_result_t probe_gdr(ib_transport_t *t) {
  const dev_ops_t *d = t->engine->ops;
  size_t bytes = (size_t)2 << 20;
  void *p = NULL;
  WEFT_CHECK(d->alloc(t->engine, bytes, 0, &p));
  struct ibv_mr *mr = NULL;
  weft_result_t res = reg_device(t, p, bytes, &mr);
  if (mr) t->dev.lib->dereg_mr(mr);
  d->release(t->engine, p, 0);
  return res;
}

static void ib_destroy(transport_t *base) {
  ib_transport_t *t = (ib_transport_t *)base;
  if (!t) return;
  if (t->side) {
    t->side->aborting = t->base.aborting;
    t->side->ops->destroy(t->side);
  }
  ib_device_close(&t->dev);
  free(t);
}

static weft_result_t ib_create(const transport_params_t *p, transport_t **out) {
  ibvw_hca_list_t hca;
  WEFT_CHECK(ibvw_hca_parse(p->config->ib_hca, &hca)); /* malformed: an error on any machine */
  const char *why = "";
  const ibvw_lib_t *lib = ibvw_load(&why);
  if (!lib) return WEFT_ERR(WEFT_ERR_UNSUPPORTED, "%s", why);
  if (!p->bootstrap_addr)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "the verbs transport needs the bootstrap address");
  ib_transport_t *t = calloc(1, sizeof *t);
  if (!t) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "verbs transport: out of memory");
  t->base.ops = &ibverbs_transport_ops;
  t->rank = p->rank;
  t->nranks = p->nranks;
  t->cfg = p->config;
  t->side_cfg = *p->config;
  t->side_cfg.nsocks = 1;
  weft_result_t res;
  WEFT_CHECK_GOTO(ib_device_open(lib, &hca, p->config->ib_gid_index,
                                 ib_advertised_ipv4(p->bootstrap_addr), &t->dev),
                  res, fail);
  transport_params_t sp = *p;
  sp.config = &t->side_cfg;
  WEFT_CHECK_GOTO(tcp_transport_ops.create(&sp, &t->side), res, fail);
  if (p->config->ib_gdr && p->dev) {
    weft_config_t dc = config_for_device(p->config);
    t->engine = p->dev;
    t->dev_nslots = dc.shm_slots;
    t->dev_slot = dc.slice_bytes;
    if (probe_gdr(t) == WEFT_SUCCESS)
      t->gdr = 1;
    else /* said whatever WEFT_DEBUG is: the user asked for it */
      fprintf(stderr,
              "weft rank %d: WEFT_IB_GDR=1, but device memory cannot be registered for RDMA "
              "here, so device buffers go through host memory: %s\n",
              t->rank, err_last());
  }
  *out = &t->base;
  return WEFT_SUCCESS;
fail:
  ib_destroy(&t->base);
  return res;
}

static void ib_local_addr(const transport_t *base, void *blob) {
  const ib_transport_t *t = (const ib_transport_t *)base;
  ib_addr_t a;
  memset(&a, 0, sizeof a);
  t->side->ops->local_addr(t->side, &a.side);
  a.magic = ADDR_MAGIC;
  a.link_layer = (uint8_t)t->dev.link_layer;
  a.port = (uint8_t)t->dev.port;
  a.gdr = (uint8_t)t->gdr;
  memcpy(blob, &a, sizeof a);
}

void ibverbs_describe(const transport_t *base, char *buf, size_t cap) {
  const ib_transport_t *t = (const ib_transport_t *)base;
  ib_device_describe(&t->dev, buf, cap);
  size_t used = strlen(buf);
  if (t->gdr && used < cap)
    snprintf(buf + used, cap - used, ", GPUDirect RDMA (%s device memory)", t->engine->ops->name);
}

/* ---- connections ----------------------------------------------------------------------------- */

/* Both directions' device slots of one connection, rounded up to 2 MiB: a dma-buf is exported in
 * whole pages, and CUDA hands out large allocations in 2 MiB pages anyway. */
static size_t dev_pool_bytes(const ib_transport_t *t) {
  size_t b = 2 * (size_t)t->dev_nslots * t->dev_slot, page = (size_t)2 << 20;
  return (b + page - 1) / page * page;
}

static void conn_free(ib_conn_t *c, int abortive) {
  const ibvw_lib_t *lib = c->t->dev.lib;
  dev_engine_t *engine = c->t->engine;
  if (c->qp) lib->destroy_qp(c->qp);
  if (c->cq) lib->destroy_cq(c->cq);
  if (c->mr) lib->dereg_mr(c->mr);
  if (c->dmr) lib->dereg_mr(c->dmr);
  /* The queues first: copies still on them read or write the device slots. */
  if (c->q_send) engine->ops->queue_destroy(c->q_send);
  if (c->q_recv) engine->ops->queue_destroy(c->q_recv);
  if (c->dmem) engine->ops->release(engine, c->dmem, 0);
  if (c->side) c->side->ops->close(c->side, abortive);
  free(c->mem);
  free(c->tx_busy);
  free(c->tx_e);
  free(c->rx_e);
  free(c->freed);
  free(c->dev_last);
  free(c->dtx_busy);
  free(c);
}

/* Registers device memory [p, p + bytes) from the engine with the adapter: through the dma-buf
 * the engine exports, or by address where the engine says it is host memory. */
static weft_result_t reg_device(ib_transport_t *t, void *p, size_t bytes, struct ibv_mr **out) {
  const ibvw_lib_t *lib = t->dev.lib;
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  int fd = -1;
  uint64_t offset = 0;
  WEFT_CHECK(t->engine->ops->rdma_export(t->engine, p, bytes, &fd, &offset));
  if (fd < 0) {
    *out = lib->reg_mr(t->dev.pd, p, bytes, access);
  } else {
    if (!lib->reg_dmabuf_mr) {
      close(fd);
      return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                      "this libibverbs has no ibv_reg_dmabuf_mr (rdma-core 34 or newer is needed "
                      "for GPUDirect RDMA over dma-buf)");
    }
    *out = lib->reg_dmabuf_mr(t->dev.pd, offset, bytes, (uintptr_t)p, fd, access);
    int err = errno;
    close(fd); /* the registration holds its own reference to the dma-buf */
    errno = err;
  }
  if (!*out)
    return WEFT_ERR(WEFT_ERR_SYSTEM,
                    "registering %zu bytes of %s device memory on %s: %s (GPUDirect RDMA needs an "
                    "adapter driver that accepts dma-bufs)",
                    bytes, t->engine->ops->name, t->dev.name, strerror(errno));
  return WEFT_SUCCESS;
}

/* Device slots for one connection: rx | tx in one allocation, registered once, and the two
 * queues their copies run on. */
static weft_result_t setup_device(ib_conn_t *c) {
  ib_transport_t *t = c->t;
  const dev_ops_t *d = t->engine->ops;
  c->dn = t->dev_nslots;
  c->dslot = t->dev_slot;
  c->dev_last = calloc((size_t)c->dn, sizeof *c->dev_last);
  c->dtx_busy = calloc((size_t)c->dn, 1);
  if (!c->dev_last || !c->dtx_busy)
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "verbs connection to rank %d: out of memory", c->base.peer);
  void *mem = NULL;
  WEFT_CHECK_CTX(d->alloc(t->engine, dev_pool_bytes(t), 0, &mem),
                 "device slots for rank %d", c->base.peer);
  c->dmem = mem;
  c->drx = c->dmem;
  c->dtx = c->dmem + (size_t)c->dn * c->dslot;
  WEFT_CHECK_CTX(reg_device(t, c->dmem, dev_pool_bytes(t), &c->dmr), "rank %d: device slots for "
                 "rank %d", t->rank, c->base.peer);
  WEFT_CHECK(d->queue_create(t->engine, &c->q_send));
  WEFT_CHECK(d->queue_create(t->engine, &c->q_recv));
  return WEFT_SUCCESS;
}

static weft_result_t post_recv_wr(ib_conn_t *c) {
  struct ibv_recv_wr wr = {.wr_id = WR_ID(WR_RECV, 0), .sg_list = NULL, .num_sge = 0}, *bad;
  int rc = ibv_post_recv(c->qp, &wr, &bad);
  if (rc)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "posting an RDMA receive for rank %d: %s", c->base.peer,
                    strerror(rc));
  return WEFT_SUCCESS;
}

/* Memory, registration, completion queue and queue pair (in INIT, receives posted); device slots
 * too where both ends have GPUDirect. */
static weft_result_t setup(ib_conn_t *c, int gdr) {
  ib_transport_t *t = c->t;
  const ibvw_lib_t *lib = t->dev.lib;
  c->n = t->cfg->shm_slots;
  c->slot = t->cfg->slice_bytes;
  size_t data = (size_t)c->n * c->slot;
  size_t bytes = 2 * data + (1 + CREDIT_WRITES) * sizeof(uint64_t);
  long page = sysconf(_SC_PAGESIZE);
  void *mem = NULL;
  if (posix_memalign(&mem, page > 0 ? (size_t)page : 4096, bytes)) mem = NULL;
  c->mem = mem;
  c->tx_busy = calloc((size_t)c->n, 1);
  c->tx_e = calloc((size_t)c->n, sizeof *c->tx_e);
  c->rx_e = calloc((size_t)c->n, sizeof *c->rx_e);
  c->freed = calloc((size_t)c->n, 1);
  if (!c->mem || !c->tx_busy || !c->tx_e || !c->rx_e || !c->freed)
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "verbs connection to rank %d: out of memory", c->base.peer);
  memset(c->mem, 0, bytes);
  c->rx = c->mem;
  c->tx = c->mem + data;
  c->credit = (uint64_t *)(c->mem + 2 * data);
  c->credit_src = c->credit + 1;
  c->mr = lib->reg_mr(t->dev.pd, c->mem, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!c->mr)
    return WEFT_ERR(WEFT_ERR_SYSTEM,
                    "registering %zu bytes for rank %d on %s: %s (is the locked-memory limit, "
                    "ulimit -l, large enough?)",
                    bytes, c->base.peer, t->dev.name, strerror(errno));
  if (gdr) WEFT_CHECK(setup_device(c));
  size_t biggest = c->dslot > c->slot ? c->dslot : c->slot;
  size_t parts = (biggest + t->dev.max_msg - 1) / t->dev.max_msg; /* writes per slot */
  int send_depth = c->n * (int)(parts ? parts : 1) + CREDIT_WRITES + 1, recv_depth = c->n + 1;
  c->cq = lib->create_cq(t->dev.ctx, send_depth + recv_depth, NULL, NULL, 0);
  if (!c->cq)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "creating a completion queue for rank %d: %s", c->base.peer,
                    strerror(errno));
  struct ibv_qp_init_attr qa = {
      .send_cq = c->cq,
      .recv_cq = c->cq,
      .cap = {.max_send_wr = (uint32_t)send_depth,
              .max_recv_wr = (uint32_t)recv_depth,
              .max_send_sge = 1,
              .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC,
  };
  c->qp = lib->create_qp(t->dev.pd, &qa);
  if (!c->qp)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "creating a queue pair for rank %d: %s", c->base.peer,
                    strerror(errno));
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .pkey_index = 0,
                          .port_num = (uint8_t)t->dev.port,
                          .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
  int rc = lib->modify_qp(c->qp, &a,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "queue pair for rank %d to INIT: %s", c->base.peer,
                    strerror(rc));
  for (int i = 0; i < c->n; i++) WEFT_CHECK(post_recv_wr(c));
  return WEFT_SUCCESS;
}

static weft_result_t to_rts(ib_conn_t *c, const ib_info_t *peer, uint32_t psn) {
  ib_transport_t *t = c->t;
  int mtu = t->dev.mtu < peer->mtu ? t->dev.mtu : peer->mtu;
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
                          .path_mtu = (enum ibv_mtu)mtu,
                          .dest_qp_num = peer->qpn,
                          .rq_psn = peer->psn,
                          .max_dest_rd_atomic = 1,
                          .min_rnr_timer = 12};
  a.ah_attr.dlid = peer->lid;
  a.ah_attr.port_num = (uint8_t)t->dev.port;
  if (t->dev.link_layer == IBV_LINK_LAYER_ETHERNET) {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)t->dev.gid_index;
    a.ah_attr.grh.hop_limit = 64;
  }
  int rc = t->dev.lib->modify_qp(c->qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc)
    return WEFT_ERR(WEFT_ERR_SYSTEM,
                    "queue pair for rank %d to ready-to-receive: %s (are both on the same fabric, "
                    "with GIDs that reach each other? WEFT_IB_GID_INDEX)",
                    c->base.peer, strerror(rc));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = (uint8_t)t->cfg->ib_timeout;
  a.retry_cnt = (uint8_t)t->cfg->ib_retry_cnt;
  a.rnr_retry = 7;
  a.sq_psn = psn;
  a.max_rd_atomic = 1;
  rc = t->dev.lib->modify_qp(c->qp, &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "queue pair for rank %d to ready-to-send: %s", c->base.peer,
                    strerror(rc));
  c->peer_mtu = mtu;
  return WEFT_SUCCESS;
}

/* Sends this end's connection data and posts the receives of the peer's and of its ready byte. */
static weft_result_t start_handshake(ib_conn_t *c) {
  ib_transport_t *t = c->t;
  const transport_ops_t *ops = c->side->ops;
  ib_info_t *m = &c->mine;
  memset(m, 0, sizeof *m);
  m->magic = INFO_MAGIC;
  m->qpn = c->qp->qp_num;
  m->psn =
      (uint32_t)(clock_now_ns() ^ ((uint64_t)t->rank << 8) ^ (uint64_t)c->base.peer) & 0xffffff;
  m->lid = t->dev.lid;
  m->mtu = (uint8_t)t->dev.mtu;
  m->link_layer = (uint8_t)t->dev.link_layer;
  memcpy(m->gid, t->dev.gid.raw, 16);
  m->nslots = (uint32_t)c->n;
  m->slot_bytes = c->slot;
  m->rx_addr = (uintptr_t)c->rx;
  m->rx_rkey = c->mr->rkey;
  m->credit_addr = (uintptr_t)c->credit;
  m->credit_rkey = c->mr->rkey;
  m->dev_nslots = (uint32_t)c->dn;
  m->dev_slot_bytes = c->dslot;
  m->dev_rx_addr = (uintptr_t)c->drx;
  m->dev_rx_rkey = c->dmr ? c->dmr->rkey : 0;
  WEFT_CHECK(ops->post_send(c->side, m, sizeof *m, &c->info_tx));
  WEFT_CHECK(ops->post_recv(c->side, &c->theirs, sizeof c->theirs, &c->info_rx));
  WEFT_CHECK(ops->post_recv(c->side, &c->ready_in, 1, &c->ready_rx));
  int progressed = 0;
  return ops->progress(c->side, &progressed);
}

static weft_result_t accept_info(ib_conn_t *c) {
  const ib_info_t *peer = &c->theirs, *mine = &c->mine;
  if (peer->magic != INFO_MAGIC)
    return WEFT_ERR(WEFT_ERR_REMOTE, "rank %d sent garbage instead of its RDMA connection data",
                    c->base.peer);
  if (peer->nslots != mine->nslots || peer->slot_bytes != mine->slot_bytes ||
      peer->link_layer != mine->link_layer)
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "rank %d has %u slots of %llu bytes on a %s port, this rank %u of %llu on a %s "
                    "port (WEFT_SHM_SLOTS and WEFT_SLICE_BYTES must agree)",
                    c->base.peer, peer->nslots, (unsigned long long)peer->slot_bytes,
                    ib_link_layer_name(peer->link_layer),
                    mine->nslots, (unsigned long long)mine->slot_bytes,
                    ib_link_layer_name(mine->link_layer));
  if (peer->dev_nslots != mine->dev_nslots || peer->dev_slot_bytes != mine->dev_slot_bytes)
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "rank %d has %u device slots of %llu bytes, this rank %u of %llu "
                    "(WEFT_DEVICE_SLOTS and WEFT_DEVICE_SLICE_BYTES must agree)",
                    c->base.peer, peer->dev_nslots, (unsigned long long)peer->dev_slot_bytes,
                    mine->dev_nslots, (unsigned long long)mine->dev_slot_bytes);
  c->remote_drx = peer->dev_rx_addr;
  c->remote_drx_rkey = peer->dev_rx_rkey;
  c->remote_rx = peer->rx_addr;
  c->remote_rx_rkey = peer->rx_rkey;
  c->remote_credit = peer->credit_addr;
  c->remote_credit_rkey = peer->credit_rkey;
  return to_rts(c, peer, mine->psn);
}

/* The handshake's next steps, as far as the peer's bytes allow. */
static weft_result_t handshake_progress(ib_conn_t *c, int *progressed) {
  if (c->state == CONN_READY) return WEFT_SUCCESS;
  int moved = 0;
  weft_result_t res = c->side->ops->progress(c->side, &moved);
  if (res != WEFT_SUCCESS)
    return err_context(res, "RDMA connection setup with rank %d", c->base.peer);
  if (c->state == CONN_INFO && c->info_rx.complete) {
    WEFT_CHECK(accept_info(c));
    c->ready_out = 1;
    WEFT_CHECK(c->side->ops->post_send(c->side, &c->ready_out, 1, &c->ready_tx));
    WEFT_CHECK(c->side->ops->progress(c->side, &moved));
    c->state = CONN_RTS;
    moved = 1;
  }
  if (c->state == CONN_RTS && c->ready_rx.complete && c->ready_tx.complete) {
    /* From now on the side connection only tells whether the peer is still there: a byte that
     * never comes. Posted only now, so that a peer that finished with us and closed at once does
     * not fail the handshake after its ready byte came. */
    WEFT_CHECK(c->side->ops->post_recv(c->side, &c->side_byte, 1, &c->side_x));
    c->state = CONN_READY;
    c->side_checked_ms = clock_now_ms();
    moved = 1;
  }
  if (moved) *progressed = 1;
  return WEFT_SUCCESS;
}

static weft_result_t ib_connect(transport_t *base, int peer, const void *peer_blob, conn_t **out) {
  ib_transport_t *t = (ib_transport_t *)base;
  ib_addr_t a;
  memcpy(&a, peer_blob, sizeof a);
  if (a.magic != ADDR_MAGIC)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED, "rank %d: rank %d has no active RDMA port", t->rank,
                    peer);
  if (a.link_layer != t->dev.link_layer)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "rank %d: rank %d's RDMA port is %s, this rank's %s: they cannot connect",
                    t->rank, peer, ib_link_layer_name(a.link_layer),
                    ib_link_layer_name(t->dev.link_layer));
  ib_conn_t *c = calloc(1, sizeof *c);
  if (!c) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "verbs transport: out of memory");
  c->base.ops = &ibverbs_transport_ops;
  c->base.peer = peer;
  c->t = t;
  t->side->peers_listening = t->base.peers_listening;
  weft_result_t res;
  WEFT_CHECK_GOTO(t->side->ops->connect(t->side, peer, &a.side, &c->side), res, fail);
  WEFT_CHECK_GOTO(setup(c, t->gdr && a.gdr), res, fail);
  WEFT_CHECK_GOTO(start_handshake(c), res, fail);
  *out = &c->base;
  return WEFT_SUCCESS;
fail:
  conn_free(c, 1);
  return err_context(res, "rank %d: RDMA connect to rank %d on %s", t->rank, peer, t->dev.name);
}

/* ---- the data path --------------------------------------------------------------------------- */

/* Queues one message; ptr NULL marks an in-place receive. */
static void post(ib_conn_t *c, char *ptr, size_t len, xfer_t *x, int is_send) {
  if (is_send)
    xfer_queue_post(&c->send_head, &c->send_tail, ptr, len, x);
  else
    xfer_queue_post(&c->recv_head, &c->recv_tail, ptr, len, x);
}

/* Device messages come here only from a communicator that saw GPUDirect on both ends. */
static weft_result_t check_memory(const ib_conn_t *c, const xfer_t *x, const char *what) {
  if (x->device && !c->dn)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "rank %d: %s of device memory with rank %d over a verbs connection without "
                    "device slots (it should have been staged through host memory)",
                    c->t->rank, what, c->base.peer);
  return WEFT_SUCCESS;
}

static void finish(xfer_t *x) {
  x->parts_left = 0;
  x->complete = 1;
}

static weft_result_t ib_post_send(conn_t *base, const void *buf, size_t len, xfer_t *x) {
  WEFT_CHECK(check_memory((ib_conn_t *)base, x, "a send"));
  post((ib_conn_t *)base, (char *)buf, len, x, 1);
  return WEFT_SUCCESS;
}

static weft_result_t ib_post_recv(conn_t *base, void *buf, size_t len, xfer_t *x) {
  WEFT_CHECK(check_memory((ib_conn_t *)base, x, "a receive"));
  post((ib_conn_t *)base, buf, len, x, 0);
  return WEFT_SUCCESS;
}

static weft_result_t ib_post_recv_inplace(conn_t *base, size_t len, xfer_t *x) {
  ib_conn_t *c = (ib_conn_t *)base;
  WEFT_CHECK(check_memory(c, x, "an in-place receive"));
  size_t cap = x->device ? c->dslot : c->slot;
  if (len > cap)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "in-place receive of %zu bytes (%s) from rank %d exceeds the %zu-byte slot",
                    len, x->device ? "device" : "host", base->peer, cap);
  post(c, NULL, len, x, 0);
  return WEFT_SUCCESS;
}

/* Writes stream slot i (its entry says from where: the staging slot i or a device staging slot)
 * into the peer's matching slot, with the length (and DEV_BIT) as immediate data. A slot longer
 * than the port's largest message goes as several writes; only the last carries the immediate
 * and asks for a completion (a reliable-connected queue pair completes in order). */
static weft_result_t write_slot(ib_conn_t *c, size_t i) {
  tx_entry_t *e = &c->tx_e[i];
  size_t len = e->len, max = c->t->dev.max_msg, off = 0;
  const char *local = e->dev ? c->dtx + e->home * c->dslot : c->tx + i * c->slot;
  uint64_t remote = e->dev ? c->remote_drx + e->home * c->dslot : c->remote_rx + i * c->slot;
  uint32_t lkey = e->dev ? c->dmr->lkey : c->mr->lkey;
  uint32_t rkey = e->dev ? c->remote_drx_rkey : c->remote_rx_rkey;
  do {
    size_t part = len - off > max ? max : len - off;
    int last = off + part == len;
    struct ibv_sge sge = {(uintptr_t)(local + off), (uint32_t)part, lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = WR_ID(WR_DATA, i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = last ? IBV_SEND_SIGNALED : 0;
    wr.imm_data = last ? htonl((uint32_t)len | (e->dev ? DEV_BIT : 0)) : 0;
    wr.wr.rdma.remote_addr = remote + off;
    wr.wr.rdma.rkey = rkey;
    int rc = ibv_post_send(c->qp, &wr, &bad);
    if (rc)
      return WEFT_ERR(WEFT_ERR_SYSTEM, "posting an RDMA write to rank %d: %s", c->base.peer,
                      strerror(rc));
    off += part;
  } while (off < len);
  c->head++;
  c->writes_out++;
  if (e->last && e->owner) finish(e->owner);
  e->owner = NULL;
  return WEFT_SUCCESS;
}

/* Tells the sender about freed slots, unless CREDIT_WRITES writes are still in flight: the next
 * one then carries the newer count. */
static weft_result_t send_credit(ib_conn_t *c) {
  if (c->rtail == c->credit_sent || c->credits_out >= CREDIT_WRITES) return WEFT_SUCCESS;
  size_t k = (size_t)(c->credit_posts % CREDIT_WRITES);
  c->credit_src[k] = c->rtail;
  struct ibv_sge sge = {(uintptr_t)&c->credit_src[k], sizeof(uint64_t), c->mr->lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = WR_ID(WR_CREDIT, k);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = c->remote_credit;
  wr.wr.rdma.rkey = c->remote_credit_rkey;
  int rc = ibv_post_send(c->qp, &wr, &bad);
  if (rc)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "posting a credit write to rank %d: %s", c->base.peer,
                    strerror(rc));
  c->credit_sent = c->rtail;
  c->credit_posts++;
  c->credits_out++;
  return WEFT_SUCCESS;
}

static const char *status_hint(enum ibv_wc_status s) {
  switch (s) {
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return " (peer dead or unreachable)";
    case IBV_WC_REM_ACCESS_ERR:
      return " (the peer's memory registration is gone: did it close the connection?)";
    case IBV_WC_REM_INV_REQ_ERR:
      return " (the peer refused the request: its queue pair or registration is gone, or it "
             "took a retransmission for a new request; with a short WEFT_IB_TIMEOUT, try a "
             "longer one)";
    default:
      return "";
  }
}

static weft_result_t wc_error(ib_conn_t *c, const char *what, enum ibv_wc_status s) {
  /* After the first error the queue pair flushes everything else: report the cause, not that. */
  if (s == IBV_WC_WR_FLUSH_ERR && c->status) s = (enum ibv_wc_status)c->status;
  return WEFT_ERR(WEFT_ERR_REMOTE, "%s rank %d failed: %s%s", what, c->base.peer,
                  c->t->dev.lib->wc_status_str(s), status_hint(s));
}

static weft_result_t completion(ib_conn_t *c, const struct ibv_wc *wc) {
  int kind = WR_KIND(wc->wr_id);
  if (kind == WR_DATA) c->writes_out--;
  if (wc->status != IBV_WC_SUCCESS) {
    enum ibv_wc_status s = wc->status;
    if (kind == WR_CREDIT) {
      /* A peer that finished and closed while our last credits were on their way is no error;
       * one that died fails whatever we next send it or wait for from it. */
      c->credits_out--;
      if (!c->status) c->status = s;
      return WEFT_SUCCESS;
    }
    if (kind == WR_RECV) {
      if (!c->status && s != IBV_WC_WR_FLUSH_ERR) c->status = s;
      return c->recv_head ? wc_error(c, "RDMA receive from", s) : WEFT_SUCCESS;
    }
    return wc_error(c, "RDMA write to", s);
  }
  if (kind == WR_DATA) {
    size_t i = WR_INDEX(wc->wr_id);
    c->tx_busy[i] = 0;
    if (c->tx_e[i].dev) c->dtx_busy[c->tx_e[i].home] = 0;
  } else if (kind == WR_CREDIT) {
    c->credits_out--;
  } else {
    if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM)
      return WEFT_ERR(WEFT_ERR_REMOTE, "rank %d sent something other than an RDMA write",
                      c->base.peer);
    uint32_t imm = ntohl(wc->imm_data);
    rx_entry_t *e = &c->rx_e[c->arrived % (uint64_t)c->n];
    memset(e, 0, sizeof *e);
    e->len = imm & ~DEV_BIT;
    e->dev = (imm & DEV_BIT) != 0;
    if (e->dev) {
      if (!c->dn)
        return WEFT_ERR(WEFT_ERR_REMOTE,
                        "rank %d wrote device memory, but this connection has no device slots "
                        "(WEFT_IB_GDR differs between the ranks?)",
                        c->base.peer);
      e->home = (uint32_t)(c->dev_arrived++ % (uint64_t)c->dn);
    }
    c->arrived++;
    WEFT_CHECK(post_recv_wr(c));
  }
  return WEFT_SUCCESS;
}

static weft_result_t drain(ib_conn_t *c, int *progressed) {
  struct ibv_wc wc[16];
  for (;;) {
    int got = ibv_poll_cq(c->cq, 16, wc);
    if (got < 0)
      return WEFT_ERR(WEFT_ERR_SYSTEM, "polling RDMA completions for rank %d failed", c->base.peer);
    if (got == 0) return WEFT_SUCCESS;
    *progressed = 1;
    for (int i = 0; i < got; i++) WEFT_CHECK(completion(c, &wc[i]));
  }
}

/* Whether stream slot `seq` may be taken: the peer freed its slot, our last write from it is
 * complete. */
static int slot_free(const ib_conn_t *c, uint64_t seq) {
  return c->state == CONN_READY && seq - load_credit(c) < (uint64_t)c->n &&
         !c->tx_busy[seq % (uint64_t)c->n];
}

/* Whether the next device staging slot may be taken: the peer freed the stream slot its last
 * message used (the peer's device slot of the same number is then free too), and our write from
 * it is complete. */
static int dev_slot_free(const ib_conn_t *c) {
  size_t j = (size_t)(c->dev_assigned % (uint64_t)c->dn);
  return !c->dtx_busy[j] && load_credit(c) >= c->dev_last[j];
}

/* Takes the next stream slot (and, for a device message, the next device slot). */
static tx_entry_t *take_slot(ib_conn_t *c, int dev, size_t len) {
  size_t i = (size_t)(c->assigned % (uint64_t)c->n);
  tx_entry_t *e = &c->tx_e[i];
  memset(e, 0, sizeof *e);
  e->len = (uint32_t)len;
  c->tx_busy[i] = 1;
  if (dev) {
    size_t j = (size_t)(c->dev_assigned++ % (uint64_t)c->dn);
    e->dev = 1;
    e->home = (uint32_t)j;
    c->dtx_busy[j] = 1;
    c->dev_last[j] = c->assigned + 1;
  }
  c->assigned++;
  return e;
}

static weft_result_t fence_passed(ib_conn_t *c, dev_queue_t *q, uint64_t ticket, int *done,
                                  const char *dir) {
  weft_result_t res = c->t->engine->ops->poll(q, ticket, done);
  if (res != WEFT_SUCCESS)
    return err_context(res, "device copy of a message %s rank %d", dir, c->base.peer);
  return WEFT_SUCCESS;
}

/* Writes, in stream order, every taken slot whose bytes are there: a lent slot not yet committed
 * stops it, and so does one whose device copy is still in flight. */
static weft_result_t post_writes(ib_conn_t *c, int *progressed) {
  while (c->head < c->assigned) {
    size_t i = (size_t)(c->head % (uint64_t)c->n);
    tx_entry_t *e = &c->tx_e[i];
    if (e->lent) break;
    if (e->fenced) {
      int done = 0;
      WEFT_CHECK(fence_passed(c, c->q_send, e->ticket, &done, "to"));
      if (!done) break;
      e->fenced = 0;
    }
    WEFT_CHECK(write_slot(c, i));
    *progressed = 1;
  }
  return WEFT_SUCCESS;
}

/* Fills free slots from the queued sends: host bytes at once, device bytes by a copy on our
 * device queue into a device staging slot. A message completes when its last slot is written. */
static weft_result_t send_progress(ib_conn_t *c, int *progressed) {
  while (c->send_head) {
    xfer_part_t *p = c->send_head;
    xfer_t *x = p->owner;
    int dev = x->device != 0;
    if (!slot_free(c, c->assigned) || (dev && !dev_slot_free(c))) break;
    size_t cap = dev ? c->dslot : c->slot, k = p->left < cap ? p->left : cap;
    size_t i = (size_t)(c->assigned % (uint64_t)c->n);
    tx_entry_t *e = take_slot(c, dev, k);
    if (dev) {
      const dev_ops_t *d = c->t->engine->ops;
      weft_result_t res = d->copy(c->q_send, c->dtx + e->home * c->dslot, p->ptr, k);
      if (res == WEFT_SUCCESS) res = d->fence(c->q_send, &e->ticket);
      if (res != WEFT_SUCCESS)
        return err_context(res, "device copy of a message to rank %d", c->base.peer);
      e->fenced = 1;
    } else {
      memcpy(c->tx + i * c->slot, p->ptr, k);
    }
    e->owner = x;
    e->last = k == p->left;
    p->ptr += k;
    p->left -= k;
    *progressed = 1;
    if (p->left == 0) xfer_queue_pop(&c->send_head, &c->send_tail);
  }
  return post_writes(c, progressed);
}

/* Lending: the fused step writes into the next staging slot (a device one for device work), and
 * commit writes it to the peer. Posted messages not yet in a slot go first (the stream's order is
 * the slots' order), and the executor makes no post_send while a slot is lent, so send_progress
 * never takes a slot behind a lent one. */
static weft_result_t ib_lend_send(conn_t *base, size_t len, xfer_t *x, char **slot) {
  ib_conn_t *c = (ib_conn_t *)base;
  *slot = NULL;
  WEFT_CHECK(check_memory(c, x, "a lent send"));
  int dev = x->device != 0;
  size_t cap = dev ? c->dslot : c->slot;
  if (len == 0 || len > cap)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "lent send of %zu bytes to rank %d: must be 1..%zu bytes",
                    len, base->peer, cap);
  if (c->send_head) return WEFT_SUCCESS;
  if (!slot_free(c, c->assigned) || (dev && !dev_slot_free(c))) {
    c->want_slot = dev ? 2 : 1;
    return WEFT_SUCCESS;
  }
  c->want_slot = 0;
  size_t i = (size_t)(c->assigned % (uint64_t)c->n);
  tx_entry_t *e = take_slot(c, dev, len);
  e->lent = 1;
  e->owner = x;
  e->last = 1;
  x->complete = 0;
  x->parts_left = 1;
  x->data = dev ? c->dtx + e->home * c->dslot : c->tx + i * c->slot;
  *slot = (char *)x->data;
  return WEFT_SUCCESS;
}

/* Makes the oldest lent slot writable and writes what can be written: nothing is copied, the
 * caller's work already filled the slot (and its own fence passed). */
static weft_result_t ib_commit_send(conn_t *base, xfer_t *x) {
  ib_conn_t *c = (ib_conn_t *)base;
  uint64_t n = (uint64_t)c->n, q = c->head;
  while (q < c->assigned && !c->tx_e[q % n].lent) q++;
  if (q == c->assigned || c->tx_e[q % n].owner != x)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "RDMA commit to rank %d out of lending order", base->peer);
  c->tx_e[q % n].lent = 0;
  x->data = NULL;
  int progressed = 0;
  return post_writes(c, &progressed);
}

/* Moves rtail past every slot done with, in order, and credits the sender. */
static weft_result_t free_slots(ib_conn_t *c) {
  uint64_t n = (uint64_t)c->n;
  while (c->rtail < c->rcur && c->freed[c->rtail % n]) c->freed[c->rtail++ % n] = 0;
  return send_credit(c);
}

static weft_result_t ib_release_recv(conn_t *base, xfer_t *x) {
  ib_conn_t *c = (ib_conn_t *)base;
  if (!x->data) return WEFT_SUCCESS; /* an empty message took no slot */
  const char *d = x->data;
  uint64_t n = (uint64_t)c->n, i = n;
  if (d >= c->rx && d < c->rx + (size_t)c->n * c->slot) {
    i = (uint64_t)(d - c->rx) / c->slot;
  } else if (c->dn && d >= c->drx && d < c->drx + (size_t)c->dn * c->dslot) {
    /* The stream slot that holds this device slot: at most one unfreed one does, since the
     * sender reuses a device slot only after the stream slot of its last use was freed. */
    uint32_t home = (uint32_t)((size_t)(d - c->drx) / c->dslot);
    for (uint64_t q = c->rtail; q < c->rcur && i == n; q++)
      if (c->rx_e[q % n].dev && c->rx_e[q % n].home == home && !c->freed[q % n]) i = q % n;
  }
  if (i == n)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "release of a receive from rank %d that holds no slot",
                    base->peer);
  c->freed[i] = 1;
  x->data = NULL;
  return free_slots(c);
}

static const char *memory_name(int dev) { return dev ? "device" : "host"; }

static weft_result_t recv_progress(ib_conn_t *c, int *progressed) {
  uint64_t n = (uint64_t)c->n;
  while (c->recv_head && c->rcur < c->arrived) {
    xfer_part_t *p = c->recv_head;
    xfer_t *x = p->owner;
    size_t i = (size_t)(c->rcur % n);
    rx_entry_t *e = &c->rx_e[i];
    int dev = x->device != 0;
    size_t cap = dev ? c->dslot : c->slot, k = p->left < cap ? p->left : cap;
    if (e->len != k || e->dev != dev) {
      /* Reported one progress call late, as shm.c does: the call description ahead of it says
       * what went wrong far better. */
      if (c->bad_len++)
        return WEFT_ERR(WEFT_ERR_MISMATCH,
                        "rank %d sent %u bytes of %s memory where this rank expected %zu of %s "
                        "memory (the ranks run different schedules)",
                        c->base.peer, e->len, memory_name(e->dev), k, memory_name(dev));
      break;
    }
    c->rcur++;
    *progressed = 1;
    const char *src = e->dev ? c->drx + e->home * c->dslot : c->rx + i * c->slot;
    if (!p->ptr) { /* in place: the slot stays taken until release_recv */
      x->data = src;
      xfer_queue_pop_done(&c->recv_head, &c->recv_tail);
      continue;
    }
    if (e->dev) {
      const dev_ops_t *d = c->t->engine->ops;
      weft_result_t res = d->copy(c->q_recv, p->ptr, src, k);
      if (res == WEFT_SUCCESS) res = d->fence(c->q_recv, &e->ticket);
      if (res != WEFT_SUCCESS)
        return err_context(res, "device copy of a message from rank %d", c->base.peer);
      e->pending = 1;
      e->owner = x;
      e->last = k == p->left;
    } else {
      memcpy(p->ptr, src, k);
      c->freed[i] = 1;
    }
    p->ptr += k;
    p->left -= k;
    if (p->left == 0) {
      if (e->dev)
        xfer_queue_pop(&c->recv_head, &c->recv_tail); /* complete when its last copy is done */
      else
        xfer_queue_pop_done(&c->recv_head, &c->recv_tail);
    }
  }
  /* Copies out of the device slots finish in queue order. */
  for (uint64_t q = c->rtail; q < c->rcur; q++) {
    rx_entry_t *e = &c->rx_e[q % n];
    if (!e->pending) continue;
    int done = 0;
    WEFT_CHECK(fence_passed(c, c->q_recv, e->ticket, &done, "from"));
    if (!done) break;
    e->pending = 0;
    c->freed[q % n] = 1;
    if (e->last) finish(e->owner);
    e->owner = NULL;
    *progressed = 1;
  }
  return free_slots(c);
}

static weft_result_t ib_progress(conn_t *base, int *progressed) {
  ib_conn_t *c = (ib_conn_t *)base;
  WEFT_CHECK(handshake_progress(c, progressed));
  WEFT_CHECK(drain(c, progressed));
  WEFT_CHECK(send_progress(c, progressed));
  WEFT_CHECK(recv_progress(c, progressed));
  return send_credit(c); /* a count held back while CREDIT_WRITES were in flight */
}

/* ---- waiting --------------------------------------------------------------------------------- */

/* A taken slot that post_writes() may write once its bytes are there (not one still lent). */
static int write_due(const ib_conn_t *c) {
  return c->head < c->assigned && !c->tx_e[c->head % (uint64_t)c->n].lent;
}

/* The oldest copy out of a device slot still in flight, or NULL. */
static const rx_entry_t *copy_out(const ib_conn_t *c) {
  for (uint64_t q = c->rtail; q < c->rcur; q++)
    if (c->rx_e[q % (uint64_t)c->n].pending) return &c->rx_e[q % (uint64_t)c->n];
  return NULL;
}

static int waiting(const ib_conn_t *c) {
  return c->send_head || c->recv_head || c->want_slot || write_due(c) || copy_out(c);
}

static int passed(ib_conn_t *c, dev_queue_t *q, uint64_t ticket) {
  int done = 0;
  return fence_passed(c, q, ticket, &done, "with") != WEFT_SUCCESS || done;
}

/* Whether progress() would move something now (completions already drained). */
static int ready(ib_conn_t *c) {
  int dev_ok = c->want_slot != 2 || dev_slot_free(c);
  if ((c->send_head && slot_free(c, c->assigned)) ||
      (c->want_slot && slot_free(c, c->assigned) && dev_ok))
    return 1;
  if (c->recv_head && c->rcur < c->arrived) return 1;
  if (write_due(c)) {
    const tx_entry_t *e = &c->tx_e[c->head % (uint64_t)c->n];
    if (!e->fenced || passed(c, c->q_send, e->ticket)) return 1;
  }
  const rx_entry_t *r = copy_out(c);
  if (r && passed(c, c->q_recv, r->ticket)) return 1;
  return c->rtail != c->credit_sent && c->credits_out < CREDIT_WRITES;
}

/* The side connection failed or closed: the peer is gone. Completions it left are still used. */
static weft_result_t side_gone(ib_conn_t *c) {
  int progressed = 0;
  if (c->side_x.complete || c->side->ops->progress(c->side, &progressed) != WEFT_SUCCESS ||
      c->side_x.complete) {
    WEFT_CHECK(drain(c, &progressed));
    if (!ready(c))
      return WEFT_ERR(WEFT_ERR_REMOTE,
                      "rank %d closed its connection while this rank was still %s it (did it "
                      "exit or fail?)",
                      c->base.peer, c->recv_head ? "receiving from" : "sending to");
  }
  return WEFT_SUCCESS;
}

typedef struct {
  conn_t *const *conns;
  int n;
  weft_result_t res;
} wait_set_t;

static int any_ready(void *arg) {
  wait_set_t *w = arg;
  for (int i = 0; i < w->n; i++) {
    ib_conn_t *c = (ib_conn_t *)w->conns[i];
    int progressed = 0;
    w->res = handshake_progress(c, &progressed);
    if (w->res == WEFT_SUCCESS) w->res = drain(c, &progressed);
    if (w->res != WEFT_SUCCESS || progressed || ready(c)) return 1;
  }
  return 0;
}

static weft_result_t ib_wait(conn_t *const *conns, int n, int timeout_ms, int spin_us) {
  int busy = 0;
  for (int i = 0; i < n; i++) busy |= waiting((const ib_conn_t *)conns[i]);
  if (!busy) return WEFT_SUCCESS;
  wait_set_t w = {conns, n, WEFT_SUCCESS};
  if (spin_yield_until(any_ready, &w, spin_budget_us(spin_us, timeout_ms))) return w.res;
  /* Naps of 50 us growing to 1 ms: no completion channel to sleep on, and a nap costs little
   * next to the spin that came first. */
  int64_t end = clock_now_ms() + timeout_ms;
  int nap_us = 50;
  for (;;) {
    if (any_ready(&w)) return w.res;
    int64_t now = clock_now_ms();
    for (int i = 0; i < n; i++) {
      ib_conn_t *c = (ib_conn_t *)conns[i];
      if (c->state != CONN_READY || !waiting(c) || now - c->side_checked_ms < SIDE_CHECK_MS)
        continue;
      c->side_checked_ms = now;
      WEFT_CHECK(side_gone(c));
    }
    if (now >= end) return WEFT_SUCCESS;
    usleep((useconds_t)nap_us);
    if (nap_us < 1000) nap_us *= 2;
  }
}

/* A send completes once its bytes are in a staging slot, so the last writes may still be on the
 * wire when the connection closes: an orderly close lets them land first (the peer would never
 * get them once the queue pair is gone), as a socket's close still delivers what was sent. */
static void ib_close(conn_t *base, int abortive) {
  ib_conn_t *c = (ib_conn_t *)base;
  if (!c) return;
  int64_t end = clock_now_ms() + c->t->cfg->timeout_ms;
  while (!abortive && c->state == CONN_READY && c->writes_out > 0 && clock_now_ms() < end) {
    int progressed = 0;
    if (drain(c, &progressed) != WEFT_SUCCESS) break;
    if (!progressed) usleep(100);
  }
  conn_free(c, abortive);
}

const transport_ops_t ibverbs_transport_ops = {
    .name = "ib",
    .addr_size = sizeof(ib_addr_t),
    .create = ib_create,
    .local_addr = ib_local_addr,
    .connect = ib_connect,
    .destroy = ib_destroy,
    .post_send = ib_post_send,
    .post_recv = ib_post_recv,
    .progress = ib_progress,
    .wait = ib_wait,
    .close = ib_close,
    .post_recv_inplace = ib_post_recv_inplace,
    .release_recv = ib_release_recv,
    .lend_send = ib_lend_send,
    .commit_send = ib_commit_send,
    .lend_in_place = 1,
};

#else /* !IBVW_HAVE_VERBS: built without <infiniband/verbs.h> */

static weft_result_t ib_create(const transport_params_t *p, transport_t **out) {
  ibvw_hca_list_t hca;
  (void)out;
  WEFT_CHECK(ibvw_hca_parse(p->config->ib_hca, &hca)); /* malformed: an error on any machine */
  return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                  "this build has no RDMA verbs (it was built without libibverbs-dev)");
}

void ibverbs_describe(const transport_t *t, char *buf, size_t cap) {
  (void)t;
  snprintf(buf, cap, "(no verbs)");
}

const transport_ops_t ibverbs_transport_ops = {
    .name = "ib",
    .addr_size = sizeof(ib_addr_t),
    .create = ib_create,
};

#endif
