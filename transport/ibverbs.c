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
  uint8_t pad[2];
} ib_addr_t;

/* A blob has room for 144 bytes (bootstrap/rendezvous.h's boot_record_t). */
_Static_assert(sizeof(ib_addr_t) <= 144, "the verbs address must fit a bootstrap record");

ibvw_port_facts_t ibverbs_blob_facts(const void *blob) {
  ib_addr_t a;
  memcpy(&a, blob, sizeof a);
  ibvw_port_facts_t f = {a.magic == ADDR_MAGIC, a.magic == ADDR_MAGIC ? a.link_layer : 0};
  return f;
}

#if IBVW_HAVE_VERBS

#define INFO_MAGIC 0x57494243u /* "WIBC" */
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
  uint32_t pad;
} ib_info_t;

typedef struct ib_transport {
  transport_t base;
  int rank, nranks;
  const weft_config_t *cfg;
  weft_config_t side_cfg; /* the communicator's, with one socket per peer */
  transport_t *side;      /* the embedded TCP transport */
  ib_device_t dev;
} ib_transport_t;

enum { CONN_INFO, CONN_RTS, CONN_READY }; /* waiting for the peer's data, its ready byte; ready */

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
  /* sending */
  uint64_t head;          /* slots written so far */
  uint64_t lent;          /* slots lent to fused steps: head .. lent-1 */
  unsigned char *tx_busy; /* per staging slot: lent, or its write not yet complete */
  uint32_t *tx_len;       /* per staging slot: the length given to lend_send */
  int writes_out;         /* data writes posted and not yet complete */
  int want_slot;          /* the last lend_send found no slot */
  xfer_part_t *send_head, *send_tail;
  /* receiving */
  uint64_t arrived;     /* slices whose completion was polled */
  uint32_t *rx_len;     /* per slot: the length the sender wrote */
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
  memcpy(blob, &a, sizeof a);
}

void ibverbs_describe(const transport_t *base, char *buf, size_t cap) {
  ib_device_describe(&((const ib_transport_t *)base)->dev, buf, cap);
}

/* ---- connections ----------------------------------------------------------------------------- */

static void conn_free(ib_conn_t *c, int abortive) {
  const ibvw_lib_t *lib = c->t->dev.lib;
  if (c->qp) lib->destroy_qp(c->qp);
  if (c->cq) lib->destroy_cq(c->cq);
  if (c->mr) lib->dereg_mr(c->mr);
  if (c->side) c->side->ops->close(c->side, abortive);
  free(c->mem);
  free(c->tx_busy);
  free(c->tx_len);
  free(c->rx_len);
  free(c->freed);
  free(c);
}

static weft_result_t post_recv_wr(ib_conn_t *c) {
  struct ibv_recv_wr wr = {.wr_id = WR_ID(WR_RECV, 0), .sg_list = NULL, .num_sge = 0}, *bad;
  int rc = ibv_post_recv(c->qp, &wr, &bad);
  if (rc)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "posting an RDMA receive for rank %d: %s", c->base.peer,
                    strerror(rc));
  return WEFT_SUCCESS;
}

/* Memory, registration, completion queue and queue pair (in INIT, receives posted). */
static weft_result_t setup(ib_conn_t *c) {
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
  c->tx_len = calloc((size_t)c->n, sizeof *c->tx_len);
  c->rx_len = calloc((size_t)c->n, sizeof *c->rx_len);
  c->freed = calloc((size_t)c->n, 1);
  if (!c->mem || !c->tx_busy || !c->tx_len || !c->rx_len || !c->freed)
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
  size_t parts = (c->slot + t->dev.max_msg - 1) / t->dev.max_msg; /* writes per slot */
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
  WEFT_CHECK_GOTO(setup(c), res, fail);
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

static weft_result_t ib_post_send(conn_t *base, const void *buf, size_t len, xfer_t *x) {
  post((ib_conn_t *)base, (char *)buf, len, x, 1);
  return WEFT_SUCCESS;
}

static weft_result_t ib_post_recv(conn_t *base, void *buf, size_t len, xfer_t *x) {
  post((ib_conn_t *)base, buf, len, x, 0);
  return WEFT_SUCCESS;
}

static weft_result_t ib_post_recv_inplace(conn_t *base, size_t len, xfer_t *x) {
  ib_conn_t *c = (ib_conn_t *)base;
  if (len > c->slot)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "in-place receive of %zu bytes from rank %d exceeds the %zu-byte slot", len,
                    base->peer, c->slot);
  post(c, NULL, len, x, 0);
  return WEFT_SUCCESS;
}

/* Writes staging slot i (len bytes) into the peer's slot i, with the length as immediate data. A
 * slot longer than the port's largest message goes as several writes; only the last carries the
 * immediate and asks for a completion (a reliable-connected queue pair completes in order). */
static weft_result_t write_slot(ib_conn_t *c, size_t i, size_t len) {
  size_t max = c->t->dev.max_msg, off = 0;
  do {
    size_t part = len - off > max ? max : len - off;
    int last = off + part == len;
    struct ibv_sge sge = {(uintptr_t)(c->tx + i * c->slot + off), (uint32_t)part, c->mr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = WR_ID(WR_DATA, i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = last ? IBV_SEND_SIGNALED : 0;
    wr.imm_data = last ? htonl((uint32_t)len) : 0;
    wr.wr.rdma.remote_addr = c->remote_rx + i * c->slot + off;
    wr.wr.rdma.rkey = c->remote_rx_rkey;
    int rc = ibv_post_send(c->qp, &wr, &bad);
    if (rc)
      return WEFT_ERR(WEFT_ERR_SYSTEM, "posting an RDMA write to rank %d: %s", c->base.peer,
                      strerror(rc));
    off += part;
  } while (off < len);
  c->tx_busy[i] = 1;
  c->head++;
  c->writes_out++;
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
    c->tx_busy[WR_INDEX(wc->wr_id)] = 0;
  } else if (kind == WR_CREDIT) {
    c->credits_out--;
  } else {
    if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM)
      return WEFT_ERR(WEFT_ERR_REMOTE, "rank %d sent something other than an RDMA write",
                      c->base.peer);
    c->rx_len[c->arrived % (uint64_t)c->n] = ntohl(wc->imm_data);
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

/* Whether staging slot `seq` may be written: the peer freed its slot, our last write from it is
 * complete. */
static int slot_free(const ib_conn_t *c, uint64_t seq) {
  return c->state == CONN_READY && seq - load_credit(c) < (uint64_t)c->n &&
         !c->tx_busy[seq % (uint64_t)c->n];
}

static weft_result_t send_progress(ib_conn_t *c, int *progressed) {
  while (c->send_head && slot_free(c, c->head)) {
    xfer_part_t *p = c->send_head;
    size_t k = p->left < c->slot ? p->left : c->slot, i = (size_t)(c->head % (uint64_t)c->n);
    memcpy(c->tx + i * c->slot, p->ptr, k);
    WEFT_CHECK(write_slot(c, i, k));
    p->ptr += k;
    p->left -= k;
    *progressed = 1;
    if (p->left == 0) xfer_queue_pop_done(&c->send_head, &c->send_tail); /* the bytes are in our slots */
  }
  return WEFT_SUCCESS;
}

/* Lending: the fused step writes into the next staging slot, and commit writes it to the peer.
 * Posted messages not yet in a slot go first (the stream's order is the slots' order), and the
 * executor makes no post_send while a slot is lent, so send_progress never meets a lent slot. */
static weft_result_t ib_lend_send(conn_t *base, size_t len, xfer_t *x, char **slot) {
  ib_conn_t *c = (ib_conn_t *)base;
  *slot = NULL;
  if (len == 0 || len > c->slot)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "lent send of %zu bytes to rank %d: must be 1..%zu bytes",
                    len, base->peer, c->slot);
  if (c->send_head) return WEFT_SUCCESS;
  if (c->lent < c->head) c->lent = c->head;
  if (!slot_free(c, c->lent)) {
    c->want_slot = 1;
    return WEFT_SUCCESS;
  }
  c->want_slot = 0;
  size_t i = (size_t)(c->lent++ % (uint64_t)c->n);
  c->tx_busy[i] = 1;
  c->tx_len[i] = (uint32_t)len;
  x->complete = 0;
  x->parts_left = 1;
  x->data = c->tx + i * c->slot;
  *slot = (char *)x->data;
  return WEFT_SUCCESS;
}

static weft_result_t ib_commit_send(conn_t *base, xfer_t *x) {
  ib_conn_t *c = (ib_conn_t *)base;
  size_t i = (size_t)(c->head % (uint64_t)c->n);
  if (c->head >= c->lent || x->data != c->tx + i * c->slot)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "RDMA commit to rank %d out of lending order", base->peer);
  WEFT_CHECK(write_slot(c, i, c->tx_len[i]));
  x->data = NULL;
  x->parts_left = 0;
  x->complete = 1;
  return WEFT_SUCCESS;
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
  c->freed[(size_t)(x->data - c->rx) / c->slot] = 1;
  x->data = NULL;
  return free_slots(c);
}

static weft_result_t recv_progress(ib_conn_t *c, int *progressed) {
  uint64_t n = (uint64_t)c->n;
  while (c->recv_head && c->rcur < c->arrived) {
    xfer_part_t *p = c->recv_head;
    size_t k = p->left < c->slot ? p->left : c->slot, i = (size_t)(c->rcur % n);
    if (c->rx_len[i] != k) {
      /* Reported one progress call late, as shm.c does: the call description ahead of it says
       * what went wrong far better. */
      if (c->bad_len++)
        return WEFT_ERR(WEFT_ERR_MISMATCH,
                        "rank %d sent %u bytes where this rank expected %zu "
                        "(the ranks run different schedules)",
                        c->base.peer, c->rx_len[i], k);
      break;
    }
    c->rcur++;
    *progressed = 1;
    if (!p->ptr) { /* in place: the slot stays taken until release_recv */
      p->owner->data = c->rx + i * c->slot;
      xfer_queue_pop_done(&c->recv_head, &c->recv_tail);
      continue;
    }
    memcpy(p->ptr, c->rx + i * c->slot, k);
    p->ptr += k;
    p->left -= k;
    c->freed[i] = 1;
    WEFT_CHECK(free_slots(c));
    if (p->left == 0) xfer_queue_pop_done(&c->recv_head, &c->recv_tail);
  }
  return WEFT_SUCCESS;
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

static int waiting(const ib_conn_t *c) { return c->send_head || c->recv_head || c->want_slot; }

/* Whether progress() would move something now (completions already drained). */
static int ready(const ib_conn_t *c) {
  if ((c->send_head && slot_free(c, c->head)) || (c->want_slot && slot_free(c, c->lent))) return 1;
  if (c->recv_head && c->rcur < c->arrived) return 1;
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

static weft_result_t ib_wait(conn_t *const *conns, int n, int timeout_ms) {
  int busy = 0;
  for (int i = 0; i < n; i++) busy |= waiting((const ib_conn_t *)conns[i]);
  if (!busy) return WEFT_SUCCESS;
  const ib_transport_t *t = ((const ib_conn_t *)conns[0])->t;
  wait_set_t w = {conns, n, WEFT_SUCCESS};
  if (spin_yield_until(any_ready, &w, spin_budget_us(t->cfg->spin_us, timeout_ms))) return w.res;
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
