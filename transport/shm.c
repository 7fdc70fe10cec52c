/* shm.c -- the shared-memory transport for ranks on one host: a ring of slots per direction.
 *
 * Each pair of ranks shares one segment (shm_ring.h) with a ring per direction of WEFT_SHM_SLOTS
 * slots of WEFT_SLICE_BYTES. A sender copies a message into the next free slots and publishes
 * them by moving `head` (release); the receiver copies them out, or, for a reducing receive,
 * hands the executor a pointer into the slot itself (post_recv_inplace) and frees it when the
 * reduction is done (release_recv): the reduction reads the peer's bytes once, with no staging
 * copy. Slots are freed in order by moving `tail` (release). Messages larger than a slot go
 * through several slots in turn. A fused ring step borrows the next outgoing slot instead
 * (lend_send), writes its reduction there, and publishes it (commit_send): the message is
 * written once, by the reduction, and never copied.
 *
 * Waiting: polls that yield the core between them for up to WEFT_SPIN_US (common/spin.h; without
 * the yields at first where the peers run on other cores, never where ranks outnumber cores), then
 * a futex sleep on this rank's doorbell, which every peer bumps after filling our incoming ring or
 * freeing space in our outgoing one. Spinning alone would let
 * oversubscribed ranks (more ranks than cores) burn the time slices their peers need. A sleep that
 * times out checks that the peers it waits for are alive (kill(pid, 0)): a killed peer fails the
 * wait within one executor wait slice (200 ms), never a hang. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/spin.h"
#include "transport/shm_ring.h"
#include "transport/transport.h"
#include "transport/xfer_queue.h"

#define ADDR_MAGIC 0x57534841u /* "WSHA" */

/* What each rank publishes: its pid names its segments and tells whether it is alive. */
typedef struct {
  uint32_t magic;
  int32_t pid;
  uint64_t comm_id;
} shm_addr_t;

typedef struct shm_transport {
  transport_t base;
  int rank, nranks, pid;
  uint64_t comm_id;
  const weft_config_t *cfg;
  shm_bells_t bells; /* ours, which peers ring, and theirs, mapped by attach_peers */
  int fit;           /* the local ranks are no more than our cores: waits may busy-poll */
} shm_transport_t;

typedef struct {
  conn_t base;
  shm_transport_t *t;
  int side, peer_pid;
  char name[SHM_NAME_MAX];
  shm_seg_t seg;
  shm_ring_ctl_t *out, *in;
  shm_bell_t *peer_bell;
  uint64_t head;        /* our copy of out->head */
  uint64_t lent;        /* outgoing slots lent to a fused step (lend_send): head .. lent-1 */
  int want_slot;        /* the last lend_send found the ring full: wait() waits for room too */
  uint64_t rcur;        /* next incoming slot to hand to a receive */
  uint64_t rtail;       /* our copy of in->tail */
  unsigned char *freed; /* per incoming slot: received and done with, not yet behind tail */
  int bad_len;          /* the next incoming slot's length was wrong when last looked at */
  xfer_part_t *send_head, *send_tail, *recv_head, *recv_tail;
} shm_conn_t;

static int pid_alive(int pid) { return kill(pid, 0) == 0 || errno == EPERM; }

/* How long to wait for a live local peer to create, join or attach something. Until every rank
 * published its address a peer may still be starting, and init allows it the connect timeout;
 * after, a peer that does not come within WEFT_TIMEOUT_MS is stopped or stuck, and waiting the
 * connect timeout (a minute by default) for it would hold a split, dup or destroy that long. */
static int peer_wait_ms(const shm_transport_t *t) {
  int ms = t->cfg->connect_timeout_ms;
  if (t->base.peers_listening && t->cfg->timeout_ms < ms) ms = t->cfg->timeout_ms;
  return ms;
}

static weft_result_t shm_create(const transport_params_t *p, transport_t **out) {
  shm_transport_t *t = calloc(1, sizeof *t);
  if (!t) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "shm transport: out of memory");
  t->base.ops = &shm_transport_ops;
  t->rank = p->rank;
  t->nranks = p->nranks;
  t->pid = (int)getpid();
  t->comm_id = p->comm_id;
  t->cfg = p->config;
  weft_result_t res = shm_bells_open(&t->bells, "bell", t->comm_id, t->rank, t->nranks, t->pid);
  if (res != WEFT_SUCCESS) {
    free(t);
    return err_context(res, "rank %d: shm transport", p->rank);
  }
  *out = &t->base;
  return WEFT_SUCCESS;
}

static void shm_local_addr(const transport_t *base, void *blob) {
  const shm_transport_t *t = (const shm_transport_t *)base;
  shm_addr_t a = {ADDR_MAGIC, t->pid, t->comm_id};
  memcpy(blob, &a, sizeof a);
}

/* Every local peer attaches to every other's doorbell now, before any connect, so the last one to
 * attach can unlink it: from then on a crash leaves nothing in /dev/shm. */
static weft_result_t shm_attach_peers(transport_t *base, const int *peers, const void *const *blobs,
                                      int n) {
  shm_transport_t *t = (shm_transport_t *)base;
  int *pids = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!pids) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: shm: out of memory", t->rank);
  for (int i = 0; i < n; i++) {
    shm_addr_t a;
    memcpy(&a, blobs[i], sizeof a);
    pids[i] = a.pid;
  }
  weft_result_t res = shm_bells_attach(&t->bells, peers, pids, n);
  free(pids);
  cpu_set_t cpus;
  t->fit = sched_getaffinity(0, sizeof cpus, &cpus) == 0 && n + 1 <= CPU_COUNT(&cpus);
  return res == WEFT_SUCCESS ? res : err_context(res, "rank %d: shm", t->rank);
}

/* An orderly teardown first lets every local peer attach to our doorbell (one may still be in
 * init), so that it finds it; a dead peer or peer_wait_ms() ends the wait. */
static void shm_destroy(transport_t *base) {
  shm_transport_t *t = (shm_transport_t *)base;
  if (!t) return;
  shm_bells_close(&t->bells, !t->base.aborting, peer_wait_ms(t), pid_alive);
  free(t);
}

static weft_result_t shm_connect_any(transport_t *base, int peer, const void *peer_blob,
                                     int pending, conn_t **out);

static weft_result_t shm_connect(transport_t *base, int peer, const void *peer_blob, conn_t **out) {
  return shm_connect_any(base, peer, peer_blob, 0, out);
}

/* A receive from any source joins only the segments its peers created: creating one for a peer
 * that never connects would hold our close for its attach (shm_close). */
static weft_result_t shm_connect_pending(transport_t *base, int peer, const void *peer_blob,
                                         conn_t **out) {
  *out = NULL;
  return shm_connect_any(base, peer, peer_blob, 1, out);
}

static weft_result_t shm_connect_any(transport_t *base, int peer, const void *peer_blob,
                                     int pending, conn_t **out) {
  shm_transport_t *t = (shm_transport_t *)base;
  shm_addr_t a;
  memcpy(&a, peer_blob, sizeof a);
  if (a.magic != ADDR_MAGIC || a.comm_id != t->comm_id || !t->bells.peers[peer])
    return WEFT_ERR(WEFT_ERR_INTERNAL, "rank %d: rank %d has no shm address here", t->rank, peer);
  shm_conn_t *c = calloc(1, sizeof *c);
  if (!c) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "shm transport: out of memory");
  c->base.ops = &shm_transport_ops;
  c->base.peer = peer;
  c->t = t;
  c->side = t->rank < peer ? 0 : 1;
  c->peer_pid = a.pid;
  c->peer_bell = t->bells.peers[peer];
  if (c->side == 0)
    shm_pair_name(c->name, t->comm_id, t->rank, t->pid, peer, a.pid);
  else
    shm_pair_name(c->name, t->comm_id, peer, a.pid, t->rank, t->pid);
  /* No handshake to wait for: whichever side comes first creates the segment and may start
   * writing; the other finds the messages waiting. */
  weft_result_t res;
  if (pending) {
    int found = 0;
    res = shm_seg_join_existing(c->name, t->cfg->shm_slots, t->cfg->slice_bytes,
                                clock_now_ms() + peer_wait_ms(t), &c->seg, &found);
    if (res == WEFT_SUCCESS && !found) {
      free(c);
      return WEFT_SUCCESS;
    }
  } else {
    res = shm_seg_open(c->name, t->cfg->shm_slots, t->cfg->slice_bytes,
                       clock_now_ms() + peer_wait_ms(t), pid_alive, a.pid, &c->seg);
  }
  if (res == WEFT_SUCCESS) {
    c->freed = calloc((size_t)c->seg.nslots, 1);
    if (!c->freed) res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "shm transport: out of memory");
  }
  if (res != WEFT_SUCCESS) {
    shm_seg_close(&c->seg, c->name);
    free(c);
    return err_context(res, "rank %d: shm connect to rank %d", t->rank, peer);
  }
  c->out = c->seg.ring[c->side];
  c->in = c->seg.ring[1 - c->side];
  *out = &c->base;
  return WEFT_SUCCESS;
}

/* Queues one message; ptr NULL marks an in-place receive. */
static void post(shm_conn_t *c, char *ptr, size_t len, xfer_t *x, int is_send) {
  if (is_send)
    xfer_queue_post(&c->send_head, &c->send_tail, ptr, len, x);
  else
    xfer_queue_post(&c->recv_head, &c->recv_tail, ptr, len, x);
}

static weft_result_t shm_post_send(conn_t *base, const void *buf, size_t len, xfer_t *x) {
  post((shm_conn_t *)base, (char *)buf, len, x, 1);
  return WEFT_SUCCESS;
}

static weft_result_t shm_post_recv(conn_t *base, void *buf, size_t len, xfer_t *x) {
  post((shm_conn_t *)base, buf, len, x, 0);
  return WEFT_SUCCESS;
}

static weft_result_t shm_post_recv_inplace(conn_t *base, size_t len, xfer_t *x) {
  shm_conn_t *c = (shm_conn_t *)base;
  if (len > c->seg.slot_bytes)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "in-place receive of %zu bytes from rank %d exceeds the "
                    "%zu-byte slot",
                    len, base->peer, c->seg.slot_bytes);
  post(c, NULL, len, x, 0);
  return WEFT_SUCCESS;
}

/* Lending: the fused step writes its result straight into the peer's next free slot; commit only
 * records the length and publishes the slot, so the message costs no copy here. Nothing is lent
 * while posted messages still wait for ring space (they are ahead of it in the stream), and the
 * executor makes no post_send while a slot is lent, so send_progress (which writes at head)
 * never meets a lent slot. */
static weft_result_t shm_lend_send(conn_t *base, size_t len, xfer_t *x, char **slot) {
  shm_conn_t *c = (shm_conn_t *)base;
  *slot = NULL;
  if (len > c->seg.slot_bytes || len == 0)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "lent send of %zu bytes to rank %d: must be 1..%zu bytes",
                    len, base->peer, c->seg.slot_bytes);
  /* Posted messages not yet copied into the ring go first: the stream's order is the ring's. */
  if (c->send_head) return WEFT_SUCCESS;
  if (c->lent < c->head) c->lent = c->head;
  uint64_t n = (uint64_t)c->seg.nslots;
  if (c->lent - atomic_load_explicit(&c->out->tail, memory_order_acquire) >= n) {
    c->want_slot = 1; /* the peer has not freed a slot yet */
    return WEFT_SUCCESS;
  }
  c->want_slot = 0;
  size_t i = (size_t)(c->lent++ % n);
  c->seg.len[c->side][i] = (uint32_t)len; /* read by the peer only once head passes it */
  x->complete = 0;
  x->parts_left = 1;
  x->data = c->seg.data[c->side] + i * c->seg.slot_bytes;
  *slot = (char *)x->data;
  return WEFT_SUCCESS;
}

static weft_result_t shm_commit_send(conn_t *base, xfer_t *x) {
  shm_conn_t *c = (shm_conn_t *)base;
  size_t i = (size_t)(c->head % (uint64_t)c->seg.nslots);
  if (c->head >= c->lent || x->data != c->seg.data[c->side] + i * c->seg.slot_bytes)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "shm commit to rank %d out of lending order", base->peer);
  atomic_store_explicit(&c->out->head, ++c->head, memory_order_release);
  shm_bell_ring(c->peer_bell);
  x->data = NULL;
  x->parts_left = 0;
  x->complete = 1;
  return WEFT_SUCCESS;
}

/* Moves tail past every slot done with, in order, and tells the sender there is room. */
static void free_slots(shm_conn_t *c) {
  uint64_t n = (uint64_t)c->seg.nslots, before = c->rtail;
  while (c->rtail < c->rcur && c->freed[c->rtail % n]) c->freed[c->rtail++ % n] = 0;
  if (c->rtail == before) return;
  atomic_store_explicit(&c->in->tail, c->rtail, memory_order_release);
  shm_bell_ring(c->peer_bell);
}

static weft_result_t shm_release_recv(conn_t *base, xfer_t *x) {
  shm_conn_t *c = (shm_conn_t *)base;
  if (!x->data) return WEFT_SUCCESS; /* an empty message took no slot */
  size_t i = (size_t)(x->data - c->seg.data[1 - c->side]) / c->seg.slot_bytes;
  c->freed[i] = 1;
  x->data = NULL;
  free_slots(c);
  return WEFT_SUCCESS;
}

static void send_progress(shm_conn_t *c, int *progressed) {
  uint64_t n = (uint64_t)c->seg.nslots;
  size_t slot = c->seg.slot_bytes;
  while (c->send_head) {
    if (c->head - atomic_load_explicit(&c->out->tail, memory_order_acquire) >= n) break;
    xfer_part_t *p = c->send_head;
    size_t k = p->left < slot ? p->left : slot, i = (size_t)(c->head % n);
    memcpy(c->seg.data[c->side] + i * slot, p->ptr, k);
    c->seg.len[c->side][i] = (uint32_t)k;
    atomic_store_explicit(&c->out->head, ++c->head, memory_order_release);
    shm_bell_ring(c->peer_bell); /* per slot: the receiver starts on it while we copy the next */
    p->ptr += k;
    p->left -= k;
    *progressed = 1;
    if (p->left == 0) xfer_queue_pop_done(&c->send_head, &c->send_tail);
  }
}

static weft_result_t recv_progress(shm_conn_t *c, int *progressed) {
  uint64_t n = (uint64_t)c->seg.nslots;
  size_t slot = c->seg.slot_bytes;
  const char *data = c->seg.data[1 - c->side];
  while (c->recv_head) {
    if (c->rcur == atomic_load_explicit(&c->in->head, memory_order_acquire)) break;
    xfer_part_t *p = c->recv_head;
    size_t k = p->left < slot ? p->left : slot, i = (size_t)(c->rcur % n);
    if (c->seg.len[1 - c->side][i] != k) {
      /* Reported one progress call late: the executor first checks the call description that
       * came before it, which says why far better (e.g. send and recv counts differ). */
      if (c->bad_len++)
        return WEFT_ERR(WEFT_ERR_MISMATCH,
                        "rank %d sent %u bytes where this rank expected %zu "
                        "(the ranks run different schedules)",
                        c->base.peer, c->seg.len[1 - c->side][i], k);
      break;
    }
    c->rcur++;
    *progressed = 1;
    if (!p->ptr) { /* in place: the slot stays taken until release_recv */
      p->owner->data = data + i * slot;
      xfer_queue_pop_done(&c->recv_head, &c->recv_tail);
      continue;
    }
    memcpy(p->ptr, data + i * slot, k);
    p->ptr += k;
    p->left -= k;
    c->freed[i] = 1;
    free_slots(c);
    if (p->left == 0) xfer_queue_pop_done(&c->recv_head, &c->recv_tail);
  }
  return WEFT_SUCCESS;
}

/* Something posted (or a refused lend) waits on this connection. */
static int waiting(const shm_conn_t *c) { return c->send_head || c->recv_head || c->want_slot; }

static int ring_full(const shm_conn_t *c) {
  uint64_t taken = c->lent > c->head ? c->lent : c->head; /* lent slots are taken too */
  return taken - atomic_load_explicit(&c->out->tail, memory_order_acquire) >=
         (uint64_t)c->seg.nslots;
}

static int ring_empty(const shm_conn_t *c) {
  return c->rcur == atomic_load_explicit(&c->in->head, memory_order_acquire);
}

static weft_result_t shm_progress(conn_t *base, int *progressed) {
  shm_conn_t *c = (shm_conn_t *)base;
  send_progress(c, progressed);
  WEFT_CHECK(recv_progress(c, progressed));
  /* A closed peer is an error only once we are stuck on it: what it wrote before is still read. */
  int how = atomic_load(&c->seg.closed[1 - c->side]);
  if (how == SHM_ABORTED && waiting(c))
    return WEFT_ERR(WEFT_ERR_REMOTE, "rank %d aborted the connection (it failed or was aborted)",
                    base->peer);
  if (how == SHM_CLOSED &&
      (((c->send_head || c->want_slot) && ring_full(c)) || (c->recv_head && ring_empty(c))))
    return WEFT_ERR(WEFT_ERR_REMOTE,
                    "rank %d closed the connection while this rank was still %s "
                    "it",
                    base->peer, c->recv_head ? "receiving from" : "sending to");
  return WEFT_SUCCESS;
}

/* Whether progress() would move something or report something now. */
static int ready(const shm_conn_t *c) {
  if (!waiting(c)) return 0;
  if (atomic_load_explicit(&c->seg.closed[1 - c->side], memory_order_relaxed)) return 1;
  return ((c->send_head || c->want_slot) && !ring_full(c)) || (c->recv_head && !ring_empty(c));
}

static int any_ready(conn_t *const *conns, int n) {
  for (int i = 0; i < n; i++)
    if (ready((const shm_conn_t *)conns[i])) return 1;
  return 0;
}

typedef struct {
  conn_t *const *conns;
  int n;
} wait_set_t;

static int set_ready(void *arg) {
  const wait_set_t *w = arg;
  return any_ready(w->conns, w->n);
}

/* Publishes the core this rank waits on, and says where the peers it waits for last waited. */
static spin_peers_t where_peers_are(shm_transport_t *t, conn_t *const *conns, int n) {
  int cpu = sched_getcpu();
  if (cpu < 0) return SPIN_PEERS_UNKNOWN;
  /* Relaxed: a hint for the peers' next choice, read racily on purpose. */
  if (atomic_load_explicit(&t->bells.mine->cpu, memory_order_relaxed) != cpu + 1)
    atomic_store_explicit(&t->bells.mine->cpu, cpu + 1, memory_order_relaxed);
  spin_peers_t where = SPIN_PEERS_APART;
  for (int i = 0; i < n; i++) {
    const shm_conn_t *c = (const shm_conn_t *)conns[i];
    if (!waiting(c)) continue;
    int32_t theirs = atomic_load_explicit(&c->peer_bell->cpu, memory_order_relaxed);
    if (theirs == 0) return SPIN_PEERS_UNKNOWN;
    if (theirs == cpu + 1) where = SPIN_PEERS_HERE;
  }
  return where;
}

static weft_result_t shm_wait(conn_t *const *conns, int n, int timeout_ms) {
  int busy = 0;
  for (int i = 0; i < n; i++) {
    busy |= waiting((const shm_conn_t *)conns[i]);
  }
  if (!busy) return WEFT_SUCCESS;
  /* No PAUSE-instruction spin first: in a virtual machine a PAUSE loop makes the hypervisor
   * deschedule the vCPU (pause-loop exiting). 300 PAUSEs before the yielding polls made a 4 KiB
   * all-reduce over shm (4 ranks, 2 vCPUs) take 60 us instead of 33; 3000 took 250 us. The
   * busy phase (spin_choose: only with a core per local rank, peers on other cores) has none. */
  shm_transport_t *t = ((const shm_conn_t *)conns[0])->t;
  int64_t budget_us = spin_budget_us(t->cfg->spin_us, timeout_ms);
  /* Where ranks outnumber cores every wait yields: no need to know where the peers are. */
  spin_mode_t mode = t->fit ? spin_choose(1, where_peers_are(t, conns, n)) : SPIN_YIELD;
  if (mode == SPIN_BUSY) {
    int64_t busy_us = budget_us < SPIN_BUSY_US ? budget_us : SPIN_BUSY_US;
    if (spin_busy_until(set_ready, &(wait_set_t){conns, n}, busy_us)) return WEFT_SUCCESS;
    budget_us -= busy_us;
  }
  if (shm_spin_until_ready(conns, n, any_ready, budget_us)) return WEFT_SUCCESS;
  /* Announce the sleep, then read the bell, then look once more (shm_bell_ring says why). */
  shm_bell_t *bell = t->bells.mine;
  atomic_store(&bell->sleeping, 1);
  uint32_t seen = atomic_load(&bell->bell);
  int timed_out = any_ready(conns, n) ? 0 : shm_bell_sleep(bell, seen, timeout_ms);
  atomic_store(&bell->sleeping, 0);
  if (!timed_out) return WEFT_SUCCESS;
  for (int i = 0; i < n; i++) {
    const shm_conn_t *c = (const shm_conn_t *)conns[i];
    if (waiting(c) && !pid_alive(c->peer_pid))
      return WEFT_ERR(WEFT_ERR_REMOTE, "rank %d (pid %d) exited while this rank was %s it",
                      c->base.peer, c->peer_pid, c->recv_head ? "receiving from" : "sending to");
  }
  return WEFT_SUCCESS;
}

/* The next incoming slot, looked at without taking it: a message of up to one slot lies whole in
 * it once head has passed it (the acquire load below pairs with the sender's release store). */
static weft_result_t shm_peek_recv(conn_t *base, void *buf, size_t len, int *state) {
  shm_conn_t *c = (shm_conn_t *)base;
  *state = TRANSPORT_PEEK_EMPTY;
  if (len == 0 || len > c->seg.slot_bytes)
    return WEFT_ERR(WEFT_ERR_INTERNAL, "peek of %zu bytes from rank %d: must be 1..%zu bytes", len,
                    base->peer, c->seg.slot_bytes);
  if (c->recv_head) return WEFT_SUCCESS;
  if (ring_empty(c)) {
    if (atomic_load(&c->seg.closed[1 - c->side]) || !pid_alive(c->peer_pid))
      *state = TRANSPORT_PEEK_CLOSED;
    return WEFT_SUCCESS;
  }
  size_t i = (size_t)(c->rcur % (uint64_t)c->seg.nslots);
  size_t have = c->seg.len[1 - c->side][i];
  size_t k = have < len ? have : len;
  memcpy(buf, c->seg.data[1 - c->side] + i * c->seg.slot_bytes, k);
  memset((char *)buf + k, 0, len - k);
  *state = TRANSPORT_PEEK_READY;
  return WEFT_SUCCESS;
}

static void shm_close(conn_t *base, int abortive) {
  shm_conn_t *c = (shm_conn_t *)base;
  if (!c) return;
  atomic_store(&c->seg.closed[c->side], abortive ? SHM_ABORTED : SHM_CLOSED);
  shm_bell_ring(c->peer_bell); /* a peer blocked on us fails now, not at its timeout */
  if (!abortive) { /* let a slow peer attach before the name goes (shm_seg_close unlinks it) */
    int64_t deadline = clock_now_ms() + peer_wait_ms(c->t);
    while (atomic_load(c->seg.attached) < 2 && pid_alive(c->peer_pid) && clock_now_ms() < deadline)
      usleep(1000);
  }
  shm_seg_close(&c->seg, c->name);
  free(c->freed);
  free(c);
}

const transport_ops_t shm_transport_ops = {
    .name = "shm",
    .addr_size = sizeof(shm_addr_t),
    .create = shm_create,
    .local_addr = shm_local_addr,
    .connect = shm_connect,
    .destroy = shm_destroy,
    .post_send = shm_post_send,
    .post_recv = shm_post_recv,
    .progress = shm_progress,
    .wait = shm_wait,
    .close = shm_close,
    .attach_peers = shm_attach_peers,
    .post_recv_inplace = shm_post_recv_inplace,
    .release_recv = shm_release_recv,
    .lend_send = shm_lend_send,
    .commit_send = shm_commit_send,
    .peek_recv = shm_peek_recv,
    .connect_pending = shm_connect_pending,
    .desc_slot = 1,
};
