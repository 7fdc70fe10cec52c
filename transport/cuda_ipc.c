/* cuda_ipc.c -- device buffers between ranks on one host: rings whose slots live in device memory.
 *
 * Layout. Like shm.c, each pair of ranks shares one POSIX shm segment (shm_ring.h) with a ring per
 * direction, and each rank has a futex doorbell. Every ring entry has two homes: a small host slot
 * in the segment (HOST_SLOT bytes) for host messages -- the executor's 40-byte call descriptions
 * and 1-byte tokens -- and a device slot of WEFT_SLICE_BYTES for device messages (xfer_t.device).
 * The device slots of a ring belong to its receiver: it allocates them through the device engine
 * at connect, exports them (ipc_export), and leaves the handle in the segment; the sender imports
 * them (ipc_import) on its first device message, so connect never waits for the peer. The handle
 * sits in one extra host slot per ring (index WEFT_SHM_SLOTS), which keeps shm_ring.c's layout as
 * it is. One head/tail pair per direction orders host and device messages alike.
 *
 * A device message, per entry: the sender waits for a free entry (tail), enqueues on its own
 * device queue a copy from its buffer into the peer's device slot, and takes a fence; once poll()
 * says the fence passed it records the length (with DEV_BIT) and publishes the entry (head,
 * release) in ring order, so a host message behind a device one is never seen first, then rings
 * the peer's doorbell. The receiver either lends the slot (post_recv_inplace: x->data is the
 * device slot, read by device work directly, freed by release_recv), or enqueues a copy from the
 * slot to the destination on its own queue and frees the entry once that copy's fence passed.
 * Messages longer than a slot take several entries.
 *
 * Lending (lend_send/commit_send, for fused ring steps): a device message of at most one slot may
 * instead borrow the peer's device slot of the next free entry, which the caller's own device work
 * (a reduction on the executor's queue) writes directly. Lending takes the entry in ring order
 * like a queued send, after importing the peer's slots if needed; it returns no slot while the
 * import is not possible yet, the ring is full, or earlier sends still wait for entries (they go
 * first); the length (with DEV_BIT) is recorded then. The caller commits once its work's fence
 * passed, so commit copies nothing: the entry becomes publishable and is published in ring order,
 * behind any earlier entry whose copy is still in flight. An entry lent and never committed is
 * never published: head stops before it, the peer never sees it, and close frees nothing extra
 * for it (entries own no memory). The caller's work writing a lent slot must have ended before
 * close, which unmaps the peer's slots (the executor drains its queue after a failure). Host
 * messages are not lent (WEFT_ERR_INTERNAL): they are the executor's call descriptions and
 * tokens, which fit a 256-byte host slot and cost next to nothing to copy.
 *
 * Device-resident links (device_link, for kernels/devloop.h's loop). Apart from the ring above,
 * each side also allocates at connect, through the engine, one more region for its incoming
 * direction: n slots of slot_bytes (the same count and size as the ring's device slots) and then,
 * at a 128-byte aligned offset, the link's dl_counters_t, zeroed by an engine copy before the
 * region is exported. Its handle sits in the same handle area as the ring's, with its own ready
 * flag; the sender imports it on its first device_link(DP_LINK_SEND), waiting for the flag at most
 * the connect timeout. Being separate memory with separate counters, a device loop's traffic and
 * the host-driven ring's never meet, so both paths can run on one connection (in turn or at once).
 * The region is released (ours) or unmapped (the peer's) when the connection closes.
 *
 * Waiting is shm's -- spin, then a futex sleep on this rank's doorbell -- except while device
 * copies are in flight: fences ring no bell, so then it polls them, yielding, and sleeps in 1 ms
 * slices. A sleep that times out checks the peers with kill(pid, 0): a dead peer fails the wait.
 * Segments and doorbells are unlinked as soon as both sides mapped them; nothing stays in
 * /dev/shm after a crash. Names differ from shm.c's ("ipcbell", "ipcpair"), so a communicator may
 * run both transports to the same peer. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/spin.h"
#include "device/device.h"
#include "transport/shm_ring.h"
#include "transport/transport.h"
#include "transport/xfer_queue.h"

#define ADDR_MAGIC 0x57434941u /* "WCIA" */
#define HOST_SLOT 256          /* bytes of a host slot; also holds a handle_area_t */
#define DEV_BIT 0x80000000u    /* in an entry's length word: the bytes are in the device slot */
/* While device copies are in flight: poll them (yielding the core) this long before each 1 ms
 * sleep. A slot copy takes microseconds; a 1 ms sleep per slice would be most of the time. */
#define FENCE_SPIN_US 200

/* What each rank publishes: its pid names its segments and tells whether it is alive. */
typedef struct {
  uint32_t magic;
  int32_t pid;
  uint64_t comm_id;
} ipc_addr_t;

/* In the extra host slot of ring s: side s's exports of the device memory it receives into: the
 * ring's device slots, and the device-resident link's slots and counters. */
typedef struct {
  _Atomic uint32_t ready; /* stored with release once the rest is written */
  uint32_t pad;
  uint64_t bytes;
  dev_ipc_handle_t handle;
  _Atomic uint32_t link_ready; /* likewise, for link_bytes and link_handle */
  uint32_t link_pad;
  uint64_t link_bytes;
  dev_ipc_handle_t link_handle;
} handle_area_t;

_Static_assert(sizeof(handle_area_t) <= HOST_SLOT, "the handle area must fit a host slot");

typedef struct ipc_transport {
  transport_t base;
  int rank, nranks, pid;
  uint64_t comm_id;
  const weft_config_t *cfg;
  dev_engine_t *dev;
  shm_bells_t bells; /* ours, which peers ring, and theirs, mapped by attach_peers */
} ipc_transport_t;

/* What this side remembers of one ring entry while it is in flight. */
typedef struct {
  xfer_t *owner;
  uint64_t ticket; /* fence after the entry's device copy */
  char fenced;     /* send: publish only once the ticket passed */
  char pending;    /* recv: a copy out of the device slot is in flight */
  char last;       /* the owner's last entry: finishing it completes the owner */
  char lent;       /* send: lent to the caller (lend_send), not committed yet: not publishable */
} entry_t;

typedef struct {
  conn_t base;
  ipc_transport_t *t;
  int side, peer_pid, n;
  size_t slot_bytes;
  char name[SHM_NAME_MAX];
  shm_seg_t seg;
  shm_ring_ctl_t *out, *in;
  shm_bell_t *peer_bell;
  char *my_dev;   /* device slots of the incoming ring: ours, exported */
  char *peer_dev; /* device slots of the outgoing ring: the peer's, imported on first use */
  char *my_link;  /* the device-resident link we receive on: slots, then counters; exported */
  char *peer_link; /* the peer's, which we send on: imported on the first device_link(SEND) */
  dev_queue_t *q_send, *q_recv; /* created on first use */
  /* sending */
  uint64_t assigned; /* entries filled or being filled */
  uint64_t head;     /* our copy of out->head: entries published */
  entry_t *tx;
  int lend_blocked; /* the last lend_send found no entry: wait() watches for one to come free */
  /* receiving */
  uint64_t rcur, rtail; /* as in shm.c */
  entry_t *rx;
  unsigned char *freed;
  int bad_len;
  xfer_part_t *send_head, *send_tail, *recv_head, *recv_tail;
} ipc_conn_t;

static int pid_alive(int pid) { return kill(pid, 0) == 0 || errno == EPERM; }

static void pair_name(char *buf, uint64_t comm_id, int lo, int lo_pid, int hi, int hi_pid) {
  snprintf(buf, SHM_NAME_MAX, "/weft-%016llx-ipcpair-%d.%d-%d.%d", (unsigned long long)comm_id, lo,
           lo_pid, hi, hi_pid);
}

static char *host_slot(ipc_conn_t *c, int s, uint64_t i) {
  return c->seg.data[s] + (size_t)(i % (uint64_t)c->n) * HOST_SLOT;
}

static handle_area_t *handle_area(ipc_conn_t *c, int s) {
  return (handle_area_t *)(c->seg.data[s] + (size_t)c->n * HOST_SLOT);
}

/* ---- transport ---------------------------------------------------------------------------- */

static weft_result_t ipc_create(const transport_params_t *p, transport_t **out) {
  if (!p->dev)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: the cuda_ipc transport needs a device engine", p->rank);
  if (p->config->slice_bytes == 0 || p->config->slice_bytes >= DEV_BIT)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: cuda_ipc slots of %zu bytes (WEFT_SLICE_BYTES) must be 1 byte to "
                    "2 GiB",
                    p->rank, p->config->slice_bytes);
  ipc_transport_t *t = calloc(1, sizeof *t);
  if (!t) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "cuda_ipc transport: out of memory");
  t->base.ops = &cuda_ipc_transport_ops;
  t->rank = p->rank;
  t->nranks = p->nranks;
  t->pid = (int)getpid();
  t->comm_id = p->comm_id;
  t->cfg = p->config;
  t->dev = p->dev;
  /* Named apart from shm.c's, so a communicator may run both to the same peer. */
  weft_result_t res = shm_bells_open(&t->bells, "ipcbell", t->comm_id, t->rank, t->nranks, t->pid);
  if (res != WEFT_SUCCESS) {
    free(t);
    return err_context(res, "rank %d: cuda_ipc transport", p->rank);
  }
  *out = &t->base;
  return WEFT_SUCCESS;
}

static void ipc_local_addr(const transport_t *base, void *blob) {
  const ipc_transport_t *t = (const ipc_transport_t *)base;
  ipc_addr_t a = {ADDR_MAGIC, t->pid, t->comm_id};
  memcpy(blob, &a, sizeof a);
}

/* As shm.c: every local peer maps every other's doorbell before any connect; the last one to
 * attach unlinks it. */
static weft_result_t ipc_attach_peers(transport_t *base, const int *peers, const void *const *blobs,
                                      int n) {
  ipc_transport_t *t = (ipc_transport_t *)base;
  int *pids = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!pids) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: cuda_ipc: out of memory", t->rank);
  weft_result_t res = WEFT_SUCCESS;
  for (int i = 0; i < n && res == WEFT_SUCCESS; i++) {
    ipc_addr_t a;
    memcpy(&a, blobs[i], sizeof a);
    pids[i] = a.pid;
    if (a.magic != ADDR_MAGIC || a.comm_id != t->comm_id)
      res = WEFT_ERR(WEFT_ERR_INTERNAL, "rank %d: rank %d published no cuda_ipc address", t->rank,
                     peers[i]);
  }
  if (res == WEFT_SUCCESS) res = shm_bells_attach(&t->bells, peers, pids, n);
  free(pids);
  return res == WEFT_SUCCESS ? res : err_context(res, "rank %d: cuda_ipc", t->rank);
}

static void ipc_destroy(transport_t *base) {
  ipc_transport_t *t = (ipc_transport_t *)base;
  if (!t) return;
  shm_bells_close(&t->bells, !t->base.aborting, t->cfg->connect_timeout_ms, pid_alive);
  free(t);
}

/* ---- connections -------------------------------------------------------------------------- */

static void conn_free(ipc_conn_t *c) {
  dev_engine_t *dev = c->t->dev;
  /* Our copies write into the peer's slots and read ours: they end before either goes. */
  if (c->q_send) dev->ops->queue_destroy(c->q_send);
  if (c->q_recv) dev->ops->queue_destroy(c->q_recv);
  if (c->peer_dev) dev->ops->ipc_close(dev, c->peer_dev);
  if (c->peer_link) dev->ops->ipc_close(dev, c->peer_link);
  shm_seg_close(&c->seg, c->name);
  if (c->my_dev) dev->ops->release(dev, c->my_dev, 0);
  if (c->my_link) dev->ops->release(dev, c->my_link, 0);
  free(c->tx);
  free(c->rx);
  free(c->freed);
  free(c);
}

/* Allocates the device slots we receive into and leaves their handle for the peer. */
static weft_result_t export_slots(ipc_conn_t *c) {
  dev_engine_t *dev = c->t->dev;
  size_t bytes = (size_t)c->n * c->slot_bytes;
  void *p = NULL;
  WEFT_CHECK(dev->ops->alloc(dev, bytes, 0, &p));
  c->my_dev = p;
  handle_area_t *h = handle_area(c, c->side);
  WEFT_CHECK(dev->ops->ipc_export(dev, c->my_dev, bytes, &h->handle));
  h->bytes = bytes;
  atomic_store_explicit(&h->ready, 1, memory_order_release);
  shm_bell_ring(c->peer_bell); /* a peer already waiting to send device data goes on */
  return WEFT_SUCCESS;
}

static weft_result_t get_queue(ipc_conn_t *c, dev_queue_t **q);

/* A device-resident link region: n slots, then the counters on their own 128-byte lines. */
static size_t link_ctr_offset(const ipc_conn_t *c) {
  size_t slots = (size_t)c->n * c->slot_bytes;
  return (slots + DL_COUNTER_ALIGN - 1) / DL_COUNTER_ALIGN * DL_COUNTER_ALIGN;
}

static size_t link_bytes(const ipc_conn_t *c) { return link_ctr_offset(c) + sizeof(dl_counters_t); }

/* Allocates the device-resident link we receive on, zeroes its counters and leaves its handle for
 * the peer. The counters are zeroed by an engine copy (drained) rather than a memset: CUDA device
 * memory is not host-addressable, and the emulation must take the same path. */
static weft_result_t export_link(ipc_conn_t *c) {
  static const dl_counters_t zero; /* all 0: a fresh link */
  dev_engine_t *dev = c->t->dev;
  size_t bytes = link_bytes(c);
  void *p = NULL;
  WEFT_CHECK(dev->ops->alloc(dev, bytes, 0, &p));
  c->my_link = p;
  WEFT_CHECK(get_queue(c, &c->q_recv));
  WEFT_CHECK(dev->ops->copy(c->q_recv, c->my_link + link_ctr_offset(c), &zero, sizeof zero));
  weft_result_t res = dev->ops->drain(c->q_recv, c->t->cfg->connect_timeout_ms);
  if (res != WEFT_SUCCESS) return err_context(res, "zeroing the device-resident link's counters");
  handle_area_t *h = handle_area(c, c->side);
  WEFT_CHECK(dev->ops->ipc_export(dev, c->my_link, bytes, &h->link_handle));
  h->link_bytes = bytes;
  /* Release: the peer reads link_bytes and link_handle after it sees the flag (acquire). */
  atomic_store_explicit(&h->link_ready, 1, memory_order_release);
  return WEFT_SUCCESS;
}

static weft_result_t ipc_connect(transport_t *base, int peer, const void *peer_blob, conn_t **out) {
  ipc_transport_t *t = (ipc_transport_t *)base;
  ipc_addr_t a;
  memcpy(&a, peer_blob, sizeof a);
  if (a.magic != ADDR_MAGIC || a.comm_id != t->comm_id || !t->bells.peers[peer])
    return WEFT_ERR(WEFT_ERR_INTERNAL, "rank %d: rank %d has no cuda_ipc address here", t->rank,
                    peer);
  ipc_conn_t *c = calloc(1, sizeof *c);
  if (!c) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "cuda_ipc transport: out of memory");
  c->base.ops = &cuda_ipc_transport_ops;
  c->base.peer = peer;
  c->t = t;
  c->side = t->rank < peer ? 0 : 1;
  c->peer_pid = a.pid;
  c->peer_bell = t->bells.peers[peer];
  c->n = t->cfg->shm_slots;
  c->slot_bytes = t->cfg->slice_bytes;
  if (c->side == 0)
    pair_name(c->name, t->comm_id, t->rank, t->pid, peer, a.pid);
  else
    pair_name(c->name, t->comm_id, peer, a.pid, t->rank, t->pid);
  /* n host slots per ring plus one for the handle area. */
  weft_result_t res =
      shm_seg_open(c->name, c->n + 1, HOST_SLOT, clock_now_ms() + t->cfg->connect_timeout_ms,
                   pid_alive, a.pid, &c->seg);
  if (res == WEFT_SUCCESS) {
    c->tx = calloc((size_t)c->n, sizeof *c->tx);
    c->rx = calloc((size_t)c->n, sizeof *c->rx);
    c->freed = calloc((size_t)c->n, 1);
    if (!c->tx || !c->rx || !c->freed)
      res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "cuda_ipc transport: out of memory");
  }
  if (res == WEFT_SUCCESS) {
    c->out = c->seg.ring[c->side];
    c->in = c->seg.ring[1 - c->side];
    res = export_slots(c);
    if (res == WEFT_SUCCESS) res = export_link(c);
  }
  if (res != WEFT_SUCCESS) {
    /* Tell a peer that already mapped the segment that this side is gone. */
    if (c->seg.base) atomic_store(&c->seg.closed[c->side], SHM_ABORTED);
    conn_free(c);
    return err_context(res, "rank %d: cuda_ipc connect to rank %d", t->rank, peer);
  }
  *out = &c->base;
  return WEFT_SUCCESS;
}

/* Maps the peer's device slots once it has exported them; *ok = 0 while it has not yet. */
static weft_result_t import_peer(ipc_conn_t *c, int *ok) {
  handle_area_t *h = handle_area(c, 1 - c->side);
  *ok = 0;
  if (!atomic_load_explicit(&h->ready, memory_order_acquire)) return WEFT_SUCCESS;
  if (h->bytes != (uint64_t)c->n * c->slot_bytes)
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "rank %d exported %llu bytes of device slots, this rank expects %d of %zu: "
                    "WEFT_SHM_SLOTS and WEFT_SLICE_BYTES must agree",
                    c->base.peer, (unsigned long long)h->bytes, c->n, c->slot_bytes);
  void *p = NULL;
  weft_result_t res = c->t->dev->ops->ipc_import(c->t->dev, &h->handle, &p);
  if (res != WEFT_SUCCESS)
    return err_context(res, "importing the device slots of rank %d", c->base.peer);
  c->peer_dev = p;
  *ok = 1;
  return WEFT_SUCCESS;
}

static weft_result_t get_queue(ipc_conn_t *c, dev_queue_t **q) {
  if (*q) return WEFT_SUCCESS;
  weft_result_t res = c->t->dev->ops->queue_create(c->t->dev, q);
  if (res != WEFT_SUCCESS) return err_context(res, "device queue for rank %d", c->base.peer);
  return WEFT_SUCCESS;
}

/* ---- device-resident links ---------------------------------------------------------------- */

/* Maps the peer's device-resident link, waiting for its export at most the connect timeout: the
 * peer exports at its connect, so this only waits for a peer still connecting. */
static weft_result_t import_peer_link(ipc_conn_t *c) {
  handle_area_t *h = handle_area(c, 1 - c->side);
  int rank = c->t->rank, peer = c->base.peer, timeout_ms = c->t->cfg->connect_timeout_ms;
  int64_t deadline = clock_now_ms() + timeout_ms;
  /* Acquire: pairs with the peer's release store after it wrote link_bytes and link_handle. */
  while (!atomic_load_explicit(&h->link_ready, memory_order_acquire)) {
    if (transport_aborted(&c->t->base))
      return WEFT_ERR(WEFT_ERR_ABORTED,
                      "rank %d: aborted while waiting for rank %d to export its device-resident "
                      "link (device_link)",
                      rank, peer);
    if (atomic_load(&c->seg.closed[1 - c->side]) || !pid_alive(c->peer_pid))
      return WEFT_ERR(WEFT_ERR_REMOTE,
                      "rank %d: rank %d (pid %d) closed the connection or exited before exporting "
                      "its device-resident link (device_link)",
                      rank, peer, c->peer_pid);
    if (clock_now_ms() >= deadline)
      return WEFT_ERR(WEFT_ERR_TIMEOUT,
                      "rank %d: rank %d did not export its device-resident link within %d ms "
                      "(device_link; WEFT_CONNECT_TIMEOUT_MS)",
                      rank, peer, timeout_ms);
    usleep(200);
  }
  if (h->link_bytes != (uint64_t)link_bytes(c))
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "rank %d: rank %d exported a device-resident link of %llu bytes, this rank "
                    "expects %zu (%d slots of %zu bytes): WEFT_SHM_SLOTS and WEFT_SLICE_BYTES "
                    "must agree",
                    rank, peer, (unsigned long long)h->link_bytes, link_bytes(c), c->n,
                    c->slot_bytes);
  void *p = NULL;
  weft_result_t res = c->t->dev->ops->ipc_import(c->t->dev, &h->link_handle, &p);
  if (res != WEFT_SUCCESS)
    return err_context(res, "rank %d: importing the device-resident link of rank %d", rank, peer);
  c->peer_link = p;
  return WEFT_SUCCESS;
}

static weft_result_t ipc_device_link(conn_t *base, int dir, dl_link_view_t *view) {
  ipc_conn_t *c = (ipc_conn_t *)base;
  char *region;
  if (dir == DP_LINK_RECV) {
    region = c->my_link;
  } else if (dir == DP_LINK_SEND) {
    if (!c->peer_link) WEFT_CHECK(import_peer_link(c));
    region = c->peer_link;
  } else {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: device_link to rank %d: direction %d is neither DP_LINK_SEND nor "
                    "DP_LINK_RECV",
                    c->t->rank, base->peer, dir);
  }
  view->slots = region;
  view->nslots = (uint64_t)c->n;
  view->slot_bytes = (uint64_t)c->slot_bytes;
  view->ctr = (dl_counters_t *)(region + link_ctr_offset(c));
  return WEFT_SUCCESS;
}

static int ring_full(const ipc_conn_t *c) {
  return c->assigned - atomic_load_explicit(&c->out->tail, memory_order_acquire) >= (uint64_t)c->n;
}

/* ---- posting ------------------------------------------------------------------------------ */

static void finish(xfer_t *x) {
  x->parts_left = 0;
  x->complete = 1;
}

/* Queues one message; ptr NULL marks an in-place receive. */
static void post(ipc_conn_t *c, char *ptr, size_t len, xfer_t *x, int is_send) {
  if (is_send)
    xfer_queue_post(&c->send_head, &c->send_tail, ptr, len, x);
  else
    xfer_queue_post(&c->recv_head, &c->recv_tail, ptr, len, x);
}

static weft_result_t ipc_post_send(conn_t *base, const void *buf, size_t len, xfer_t *x) {
  ((ipc_conn_t *)base)->lend_blocked = 0; /* the caller sends this way instead */
  post((ipc_conn_t *)base, (char *)buf, len, x, 1);
  return WEFT_SUCCESS;
}

static weft_result_t ipc_post_recv(conn_t *base, void *buf, size_t len, xfer_t *x) {
  post((ipc_conn_t *)base, buf, len, x, 0);
  return WEFT_SUCCESS;
}

/* Device messages are lent from the device slot, host messages from the host slot. */
static weft_result_t ipc_post_recv_inplace(conn_t *base, size_t len, xfer_t *x) {
  ipc_conn_t *c = (ipc_conn_t *)base;
  size_t cap = x->device ? c->slot_bytes : HOST_SLOT;
  if (len > cap)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "in-place receive of %zu bytes (%s) from rank %d exceeds the %zu-byte slot",
                    len, x->device ? "device" : "host", base->peer, cap);
  post(c, NULL, len, x, 0);
  return WEFT_SUCCESS;
}

/* ---- sending ------------------------------------------------------------------------------ */

/* Publishes, in ring order, every entry whose bytes are there; a lent entry not yet committed
 * stops it, and so does one whose device copy is still in flight. */
static weft_result_t publish(ipc_conn_t *c, int *progressed) {
  uint64_t n = (uint64_t)c->n;
  dev_engine_t *dev = c->t->dev;
  uint64_t before = c->head;
  while (c->head < c->assigned) {
    entry_t *e = &c->tx[c->head % n];
    if (e->lent) break;
    if (e->fenced) {
      int done = 0;
      weft_result_t res = dev->ops->poll(c->q_send, e->ticket, &done);
      if (res != WEFT_SUCCESS)
        return err_context(res, "device copy of a message to rank %d", c->base.peer);
      if (!done) break;
    }
    atomic_store_explicit(&c->out->head, ++c->head, memory_order_release);
    if (e->last) finish(e->owner);
    e->owner = NULL;
  }
  if (c->head != before) {
    shm_bell_ring(c->peer_bell);
    *progressed = 1;
  }
  return WEFT_SUCCESS;
}

/* Fills free entries from the queued sends: host bytes at once, device bytes by a copy on our
 * queue into the peer's slot. Then publishes what it can. */
static weft_result_t send_progress(ipc_conn_t *c, int *progressed) {
  uint64_t n = (uint64_t)c->n;
  dev_engine_t *dev = c->t->dev;
  while (c->send_head) {
    if (c->assigned - atomic_load_explicit(&c->out->tail, memory_order_acquire) >= n) break;
    xfer_part_t *p = c->send_head;
    xfer_t *x = p->owner;
    uint64_t i = c->assigned % n;
    entry_t *e = &c->tx[i];
    size_t k;
    if (x->device) {
      if (!c->peer_dev) {
        int ok;
        WEFT_CHECK(import_peer(c, &ok));
        if (!ok) break; /* the peer has not connected yet; its export rings our bell */
      }
      WEFT_CHECK(get_queue(c, &c->q_send));
      k = p->left < c->slot_bytes ? p->left : c->slot_bytes;
      weft_result_t res = dev->ops->copy(c->q_send, c->peer_dev + i * c->slot_bytes, p->ptr, k);
      if (res == WEFT_SUCCESS) res = dev->ops->fence(c->q_send, &e->ticket);
      if (res != WEFT_SUCCESS)
        return err_context(res, "device copy of a message to rank %d", c->base.peer);
      e->fenced = 1;
      c->seg.hdr[c->side][i].len = (uint32_t)k | DEV_BIT;
    } else {
      k = p->left < HOST_SLOT ? p->left : HOST_SLOT;
      memcpy(host_slot(c, c->side, i), p->ptr, k);
      e->fenced = 0;
      c->seg.hdr[c->side][i].len = (uint32_t)k;
    }
    e->owner = x;
    e->last = k == p->left;
    e->lent = 0;
    c->assigned++;
    p->ptr += k;
    p->left -= k;
    if (p->left == 0) xfer_queue_pop(&c->send_head, &c->send_tail); /* completes when published */
    *progressed = 1;
  }
  return publish(c, progressed);
}

/* Lends the peer's device slot of the next free entry (see the top of the file). The entry is
 * taken now, so later sends queue behind it; sends queued before it must have entries first. */
static weft_result_t ipc_lend_send(conn_t *base, size_t len, xfer_t *x, char **slot) {
  ipc_conn_t *c = (ipc_conn_t *)base;
  *slot = NULL;
  if (!x->device)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "rank %d: lent send of a host message to rank %d: cuda_ipc lends device "
                    "slots only (post_send host messages)",
                    c->t->rank, base->peer);
  if (len == 0 || len > c->slot_bytes)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "rank %d: lent send of %zu bytes to rank %d: must be 1..%zu bytes (one slot)",
                    c->t->rank, len, base->peer, c->slot_bytes);
  c->lend_blocked = 1; /* until an entry is lent below */
  if (c->send_head || ring_full(c)) return WEFT_SUCCESS;
  if (!c->peer_dev) {
    int ok;
    WEFT_CHECK(import_peer(c, &ok));
    if (!ok) return WEFT_SUCCESS; /* the peer has not connected yet; its export rings our bell */
  }
  c->lend_blocked = 0;
  uint64_t i = c->assigned % (uint64_t)c->n;
  entry_t *e = &c->tx[i];
  e->owner = x;
  e->fenced = 0; /* the caller waited for its own fence before it commits */
  e->last = 1;
  e->lent = 1;
  c->seg.hdr[c->side][i].len = (uint32_t)len | DEV_BIT; /* read by the peer only once head passes */
  c->assigned++;
  x->complete = 0;
  x->parts_left = 1;
  x->data = NULL;
  *slot = c->peer_dev + i * c->slot_bytes;
  return WEFT_SUCCESS;
}

/* Makes the oldest lent entry publishable and publishes what it can: nothing is copied, the
 * caller's work already wrote the slot. */
static weft_result_t ipc_commit_send(conn_t *base, xfer_t *x) {
  ipc_conn_t *c = (ipc_conn_t *)base;
  uint64_t n = (uint64_t)c->n, q = c->head;
  while (q < c->assigned && !c->tx[q % n].lent) q++;
  if (q == c->assigned || c->tx[q % n].owner != x)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "rank %d: cuda_ipc commit to rank %d of a send it did not lend next (commits "
                    "come in lending order)",
                    c->t->rank, base->peer);
  c->tx[q % n].lent = 0;
  int progressed = 0;
  return publish(c, &progressed);
}

/* ---- receiving ---------------------------------------------------------------------------- */

/* Moves tail past every entry done with, in order, and tells the sender there is room. */
static void free_slots(ipc_conn_t *c) {
  uint64_t n = (uint64_t)c->n, before = c->rtail;
  while (c->rtail < c->rcur && c->freed[c->rtail % n]) c->freed[c->rtail++ % n] = 0;
  if (c->rtail == before) return;
  atomic_store_explicit(&c->in->tail, c->rtail, memory_order_release);
  shm_bell_ring(c->peer_bell);
}

static weft_result_t ipc_release_recv(conn_t *base, xfer_t *x) {
  ipc_conn_t *c = (ipc_conn_t *)base;
  if (!x->data) return WEFT_SUCCESS; /* an empty message took no slot */
  const char *d = x->data, *host = c->seg.data[1 - c->side];
  size_t i;
  if (d >= c->my_dev && d < c->my_dev + (size_t)c->n * c->slot_bytes)
    i = (size_t)(d - c->my_dev) / c->slot_bytes;
  else if (d >= host && d < host + (size_t)c->n * HOST_SLOT)
    i = (size_t)(d - host) / HOST_SLOT;
  else
    return WEFT_ERR(WEFT_ERR_INTERNAL, "release of a receive from rank %d that holds no slot",
                    base->peer);
  c->freed[i] = 1;
  x->data = NULL;
  free_slots(c);
  return WEFT_SUCCESS;
}

static weft_result_t recv_progress(ipc_conn_t *c, int *progressed) {
  uint64_t n = (uint64_t)c->n;
  int ps = 1 - c->side;
  dev_engine_t *dev = c->t->dev;
  while (c->recv_head) {
    if (c->rcur == atomic_load_explicit(&c->in->head, memory_order_acquire)) break;
    xfer_part_t *p = c->recv_head;
    xfer_t *x = p->owner;
    uint64_t i = c->rcur % n;
    uint32_t word = c->seg.hdr[ps][i].len;
    int dev_msg = (word & DEV_BIT) != 0;
    size_t got = word & ~DEV_BIT, cap = x->device ? c->slot_bytes : HOST_SLOT;
    size_t k = p->left < cap ? p->left : cap;
    if (dev_msg != (x->device != 0) || got != k) {
      /* Reported one progress call late, as in shm.c: the call description before it says why
       * far better. */
      if (c->bad_len++)
        return WEFT_ERR(WEFT_ERR_MISMATCH,
                        "rank %d sent %zu bytes of %s memory where this rank expected %zu of %s "
                        "memory (the ranks run different schedules)",
                        c->base.peer, got, dev_msg ? "device" : "host", k,
                        x->device ? "device" : "host");
      break;
    }
    c->rcur++;
    *progressed = 1;
    if (!p->ptr) { /* in place: the entry stays taken until release_recv */
      x->data = dev_msg ? c->my_dev + i * c->slot_bytes : host_slot(c, ps, i);
      finish(x);
      xfer_queue_pop(&c->recv_head, &c->recv_tail);
      continue;
    }
    if (dev_msg) {
      entry_t *e = &c->rx[i];
      WEFT_CHECK(get_queue(c, &c->q_recv));
      weft_result_t res = dev->ops->copy(c->q_recv, p->ptr, c->my_dev + i * c->slot_bytes, k);
      if (res == WEFT_SUCCESS) res = dev->ops->fence(c->q_recv, &e->ticket);
      if (res != WEFT_SUCCESS)
        return err_context(res, "device copy of a message from rank %d", c->base.peer);
      e->owner = x;
      e->pending = 1;
      e->last = k == p->left;
    } else {
      memcpy(p->ptr, host_slot(c, ps, i), k);
      c->freed[i] = 1;
      free_slots(c);
    }
    p->ptr += k;
    p->left -= k;
    if (p->left == 0) {
      xfer_queue_pop(&c->recv_head, &c->recv_tail);
      if (!dev_msg) finish(x); /* a device one completes when its last copy is done */
    }
  }
  /* Copies out of our device slots finish in queue order. */
  for (uint64_t q = c->rtail; q < c->rcur; q++) {
    entry_t *e = &c->rx[q % n];
    if (!e->pending) continue;
    int done = 0;
    weft_result_t res = dev->ops->poll(c->q_recv, e->ticket, &done);
    if (res != WEFT_SUCCESS)
      return err_context(res, "device copy of a message from rank %d", c->base.peer);
    if (!done) break;
    e->pending = 0;
    c->freed[q % n] = 1;
    if (e->last) finish(e->owner);
    e->owner = NULL;
    *progressed = 1;
  }
  free_slots(c);
  return WEFT_SUCCESS;
}

/* ---- progress and waiting ----------------------------------------------------------------- */

static int ring_empty(const ipc_conn_t *c) {
  return c->rcur == atomic_load_explicit(&c->in->head, memory_order_acquire);
}

/* Device copies in flight, whose end wakes nobody. */
static int fences_pending(const ipc_conn_t *c) {
  if (c->head < c->assigned && c->tx[c->head % (uint64_t)c->n].fenced) return 1;
  for (uint64_t q = c->rtail; q < c->rcur; q++)
    if (c->rx[q % (uint64_t)c->n].pending) return 1;
  return 0;
}

/* An entry at head that publish() may move on: not one the caller still fills. */
static int publishable(const ipc_conn_t *c) {
  return c->head < c->assigned && !c->tx[c->head % (uint64_t)c->n].lent;
}

static int busy(const ipc_conn_t *c) {
  return c->send_head || c->recv_head || publishable(c) || fences_pending(c) || c->lend_blocked;
}

static weft_result_t ipc_progress(conn_t *base, int *progressed) {
  ipc_conn_t *c = (ipc_conn_t *)base;
  WEFT_CHECK(send_progress(c, progressed));
  WEFT_CHECK(recv_progress(c, progressed));
  /* A closed peer is an error only once we are stuck on it: what it wrote before is still read. */
  int how = atomic_load(&c->seg.closed[1 - c->side]);
  int sending = c->send_head || c->head < c->assigned || c->lend_blocked;
  if (how == SHM_ABORTED && (sending || c->recv_head))
    return WEFT_ERR(WEFT_ERR_REMOTE, "rank %d aborted the connection (it failed or was aborted)",
                    base->peer);
  if (how == SHM_CLOSED &&
      (((c->send_head || c->lend_blocked) && ring_full(c)) || (c->recv_head && ring_empty(c))))
    return WEFT_ERR(WEFT_ERR_REMOTE,
                    "rank %d closed the connection while this rank was still %s it", base->peer,
                    c->recv_head ? "receiving from" : "sending to");
  return WEFT_SUCCESS;
}

/* Whether progress() would move something or report something now. */
static int ready(ipc_conn_t *c) {
  if (!busy(c)) return 0;
  if (atomic_load_explicit(&c->seg.closed[1 - c->side], memory_order_relaxed)) return 1;
  dev_engine_t *dev = c->t->dev;
  uint64_t n = (uint64_t)c->n;
  int done = 0;
  if (publishable(c)) {
    const entry_t *e = &c->tx[c->head % n];
    if (!e->fenced || dev->ops->poll(c->q_send, e->ticket, &done) != WEFT_SUCCESS || done)
      return 1; /* an error is reported by progress() */
  }
  for (uint64_t q = c->rtail; q < c->rcur; q++) {
    const entry_t *e = &c->rx[q % n];
    if (!e->pending) continue;
    if (dev->ops->poll(c->q_recv, e->ticket, &done) != WEFT_SUCCESS || done) return 1;
    break;
  }
  if (c->recv_head && !ring_empty(c)) return 1;
  /* A queued send, or a lend_send that found nothing, goes on once an entry is free and, for
   * device bytes, the peer's slots are exported. */
  if ((c->send_head || c->lend_blocked) && !ring_full(c)) {
    if ((c->send_head && !c->send_head->owner->device) || c->peer_dev) return 1;
    return atomic_load_explicit(&handle_area(c, 1 - c->side)->ready, memory_order_acquire) != 0;
  }
  return 0;
}

static int any_ready(conn_t *const *conns, int n) {
  for (int i = 0; i < n; i++)
    if (ready((ipc_conn_t *)conns[i])) return 1;
  return 0;
}

static weft_result_t ipc_wait(conn_t *const *conns, int n, int timeout_ms, int spin_us) {
  int any_busy = 0, fences = 0;
  for (int i = 0; i < n; i++) {
    const ipc_conn_t *c = (const ipc_conn_t *)conns[i];
    any_busy |= busy(c);
    fences |= fences_pending(c);
  }
  if (!any_busy) return WEFT_SUCCESS;
  /* Yielding polls first, as shm's wait (no PAUSE spin: see shm.c). */
  const ipc_transport_t *t = ((const ipc_conn_t *)conns[0])->t;
  int64_t budget_us = spin_budget_us(spin_us, timeout_ms);
  if (shm_spin_until_ready(conns, n, any_ready, budget_us)) return WEFT_SUCCESS;
  /* The copy engines (or the emulation's workers) need the core more than we do. */
  if (fences && shm_spin_until_ready(conns, n, any_ready, FENCE_SPIN_US)) return WEFT_SUCCESS;
  /* Announce the sleep, then read the bell, then look once more (shm_bell_ring says why). */
  shm_bell_t *bell = t->bells.mine;
  int slice = fences && timeout_ms > 1 ? 1 : timeout_ms;
  uint32_t seen = shm_bell_announce_sleep(bell);
  int timed_out = any_ready(conns, n) ? 0 : shm_bell_sleep(bell, seen, slice);
  atomic_store(&bell->sleeping, 0);
  if (!timed_out) return WEFT_SUCCESS;
  for (int i = 0; i < n; i++) {
    const ipc_conn_t *c = (const ipc_conn_t *)conns[i];
    if (busy(c) && !pid_alive(c->peer_pid))
      return WEFT_ERR(WEFT_ERR_REMOTE, "rank %d (pid %d) exited while this rank was %s it",
                      c->base.peer, c->peer_pid, c->recv_head ? "receiving from" : "sending to");
  }
  return WEFT_SUCCESS;
}

static void ipc_close(conn_t *base, int abortive) {
  ipc_conn_t *c = (ipc_conn_t *)base;
  if (!c) return;
  atomic_store(&c->seg.closed[c->side], abortive ? SHM_ABORTED : SHM_CLOSED);
  shm_bell_ring(c->peer_bell); /* a peer blocked on us fails now, not at its timeout */
  if (!abortive) { /* let a slow peer attach before the name goes (shm_seg_close unlinks it) */
    int64_t deadline = clock_now_ms() + c->t->cfg->connect_timeout_ms;
    while (atomic_load(c->seg.attached) < 2 && pid_alive(c->peer_pid) && clock_now_ms() < deadline)
      usleep(1000);
  }
  conn_free(c);
}

static int ipc_peer_alive(conn_t *base) {
  const ipc_conn_t *c = (const ipc_conn_t *)base;
  return c->peer_pid <= 0 || pid_alive(c->peer_pid);
}

const transport_ops_t cuda_ipc_transport_ops = {
    .name = "cuda_ipc",
    .addr_size = sizeof(ipc_addr_t),
    .create = ipc_create,
    .local_addr = ipc_local_addr,
    .connect = ipc_connect,
    .destroy = ipc_destroy,
    .post_send = ipc_post_send,
    .post_recv = ipc_post_recv,
    .progress = ipc_progress,
    .wait = ipc_wait,
    .close = ipc_close,
    .attach_peers = ipc_attach_peers,
    .post_recv_inplace = ipc_post_recv_inplace,
    .release_recv = ipc_release_recv,
    .lend_send = ipc_lend_send,
    .commit_send = ipc_commit_send,
    .lend_in_place = 1,
    .device_link = ipc_device_link,
    .peer_alive = ipc_peer_alive,
};
