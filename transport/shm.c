/* shm.c -- the shared-memory transport for ranks on one host: a ring of slots per direction.
 *
 * Each pair of ranks shares one segment (shm_ring.h) with a ring per direction of WEFT_SHM_SLOTS
 * slots of WEFT_SLICE_BYTES. A sender copies a message into the next free slots and publishes
 * each in its header line (shm_slot_hdr_t.seq, release), which the receiver polls: one cache
 * miss tells it a slot came, its length and its mode. The receiver copies them out, or, for a
 * reducing receive,
 * hands the executor a pointer into the slot itself (post_recv_inplace) and frees it when the
 * reduction is done (release_recv): the reduction reads the peer's bytes once, with no staging
 * copy. Slots are freed in order by moving `tail` (release). Messages larger than a slot go
 * through several slots in turn. A fused ring step borrows the next outgoing slot instead
 * (lend_send), writes its reduction there, and publishes it (commit_send): the message is
 * written once, by the reduction, and never copied.
 *
 * Single copy: a slot of at least WEFT_SHM_SINGLE_COPY_BYTES may instead carry where the bytes lie
 * in the sender's memory (mode DESC, shm_ring.h); the receiver reads them with process_vm_readv
 * straight into its buffer, so each byte is copied once instead of twice. Only slots that a plain
 * receive already posted will take are described (the receiver publishes how far those reach,
 * plain_end): an in-place receive reads the slot once either way, and a slot nobody reads yet
 * would hold the sender's message open. (An in-place receive or a peek that meets a described
 * slot all the same reads it into the slot.) The sender's message
 * completes only once every such slot is READ or COPIED: until then its buffer must stay as it
 * was, as the transport contract already asks of a posted send. Lent slots (fused steps) are
 * written in place and never described. Each slot is claimed by compare-and-swap, so the sender
 * can take a described slot back and copy it itself: it does so when its wait has given the peer
 * TAKE_BACK_US to claim it (so no schedule waits on a peer's read any more than the slot path
 * waits on a peer's receive, and a descheduled peer costs no more than the slot path), when
 * the peer closed, when this side closes, and when the peer's read was refused (ASK). Whether a
 * side describes at all is decided per connection at connect: each side probes a known word of
 * the other with process_vm_readv and publishes the outcome (can_read); a refusal leaves that
 * direction on the slot path for good, with one WEFT_DEBUG line.
 *
 * Waiting: polls that yield the core between them for up to WEFT_SPIN_US (common/spin.h; without
 * the yields at first where the peers run on other cores, never where ranks outnumber cores), then
 * a futex sleep on this rank's doorbell, which a peer bumps, if we announced the sleep, after
 * filling our incoming ring or freeing space in our outgoing one. Spinning alone would let
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
#include "kernels/stream.h"
#include "transport/shm_cma.h"
#include "transport/shm_ring.h"
#include "transport/shm_stream.h"
#include "transport/transport.h"
#include "transport/xfer_queue.h"

#define ADDR_MAGIC 0x57534841u /* "WSHA" */
/* How long a wait gives the peer to claim our described slots before we copy them (shm_wait). */
#define TAKE_BACK_US 20

/* What each rank publishes: its pid names its segments and tells whether it is alive; probe is
 * the address of a word holding probe_word(), which peers read to test process_vm_readv. */
typedef struct {
  uint32_t magic;
  int32_t pid;
  uint64_t comm_id;
  uint64_t probe;
} shm_addr_t;

typedef struct shm_transport {
  transport_t base;
  int rank, nranks, pid;
  uint64_t comm_id;
  const weft_config_t *cfg;
  shm_bells_t bells; /* ours, which peers ring, and theirs, mapped by attach_peers */
  uint64_t probe;    /* probe_word(): what a peer's probe read must find here */
  int fit;           /* the local ranks are no more than our cores: waits may busy-poll */
  int *local;        /* the local peers' ranks (where_peers_are looks at all of them) */
  int nlocal;
} shm_transport_t;

/* A sent message whose described slots the peer may still read: it completes once `end` (the
 * head after its last slot) is acknowledged. */
typedef struct {
  xfer_t *x;
  uint64_t end;
} shm_ack_t;

typedef struct {
  conn_t base;
  shm_transport_t *t;
  int side, peer_pid;
  char name[SHM_NAME_MAX];
  shm_seg_t seg;
  shm_ring_ctl_t *out, *in;
  shm_bell_t *peer_bell;
  uint64_t head;        /* slots published so far (shm_slot_hdr_t.seq of the last) */
  uint64_t tail_seen;   /* out->tail when last read: reread only when the ring looks full */
  uint64_t lent;        /* outgoing slots lent to a fused step (lend_send): head .. lent-1 */
  int want_slot;        /* the last lend_send found the ring full: wait() waits for room too */
  uint64_t rcur;        /* next incoming slot to hand to a receive */
  uint64_t rtail;       /* our copy of in->tail */
  unsigned char *freed; /* per incoming slot: received and done with, not yet behind tail */
  int bad_len;          /* the next incoming slot's length was wrong when last looked at */
  xfer_part_t *send_head, *send_tail, *recv_head, *recv_tail;
  size_t single_copy; /* describe slots of at least this many bytes; 0: never */
  int described;      /* the message being sent has a described slot */
  uint64_t acked;     /* every outgoing slot before this no longer needs our buffers */
  shm_ack_t *acks;    /* nslots entries: messages waiting for `acked`, oldest first */
  int ack_first, ack_count;
  int stream_mode;           /* WEFT_SHM_STREAM (shm_stream.h) */
  int stream_preferred;      /* 1: our large slots go streamed (but for probes) */
  int stream_known;          /* the four measures the choice adds up have all come in */
  uint64_t large_sent;       /* outgoing slots of SHM_STREAM_MIN_BYTES or more */
  shm_stream_timer_t writes; /* how long our large slots take us to write, per kind */
  shm_stream_timer_t reads;  /* how long the peer's take us to bring over, per kind */
  int last_in_streamed;      /* the kind of the last incoming slot */
} shm_conn_t;

static uint64_t probe_word(uint64_t comm_id, int pid) {
  return comm_id ^ ((uint64_t)(uint32_t)pid << 32) ^ 0x57434d4150524f42ull; /* "WCMAPROB" */
}

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
  t->probe = probe_word(t->comm_id, t->pid);
  if (t->cfg->shm_single_copy_bytes) shm_cma_allow_peers();
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
  shm_addr_t a = {ADDR_MAGIC, t->pid, t->comm_id, (uint64_t)(uintptr_t)&t->probe};
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
  if (res != WEFT_SUCCESS) return err_context(res, "rank %d: shm", t->rank);
  free(t->local);
  t->nlocal = 0;
  t->local = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (!t->local) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: shm: out of memory", t->rank);
  memcpy(t->local, peers, sizeof(int) * (size_t)n);
  t->nlocal = n;
  /* A rank bound to one core (spin_bound_to_one_cpu) sees only that core, yet its peers may run
   * on cores of their own: whether they do, and whether any local rank shares ours (ranks bound
   * two to a core by hand), is what where_peers_are checks at every wait, so a single core counts
   * as fitting too. */
  cpu_set_t cpus;
  t->fit =
      sched_getaffinity(0, sizeof cpus, &cpus) == 0 && spin_cores_enough(n + 1, CPU_COUNT(&cpus));
  return WEFT_SUCCESS;
}

/* An orderly teardown first lets every local peer attach to our doorbell (one may still be in
 * init), so that it finds it; a dead peer or peer_wait_ms() ends the wait. */
static void shm_destroy(transport_t *base) {
  shm_transport_t *t = (shm_transport_t *)base;
  if (!t) return;
  shm_bells_close(&t->bells, !t->base.aborting, peer_wait_ms(t), pid_alive);
  free(t->local);
  free(t);
}

static weft_result_t shm_connect_any(transport_t *base, int peer, const void *peer_blob,
                                     int pending, conn_t **out);

/* The peer's reads of our memory were refused: it must not describe slots to us any more. */
static void cma_refused(shm_conn_t *c, const char *when, int err) {
  atomic_store(&c->seg.can_read[c->side], SHM_CMA_NO);
  if (c->t->cfg->debug >= 1)
    fprintf(stderr,
            "weft rank %d: shm: process_vm_readv from rank %d (pid %d) refused %s: %s; messages "
            "from it keep the two-copy slot path\n",
            c->t->rank, c->base.peer, c->peer_pid, when, strerror(err));
}

/* Tells the peer, through the segment, whether it may describe slots to us: whether a read of
 * the word it published (at `addr`) works and finds what it should. */
static void probe_peer(shm_conn_t *c, uint64_t addr) {
  if (!c->t->cfg->shm_single_copy_bytes) {
    atomic_store(&c->seg.can_read[c->side], SHM_CMA_NO);
    return;
  }
  int err = shm_cma_probe(c->peer_pid, addr, probe_word(c->t->comm_id, c->peer_pid));
  if (err)
    cma_refused(c, "at connect", err);
  else
    atomic_store(&c->seg.can_read[c->side], SHM_CMA_YES);
}

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
    c->acks = calloc((size_t)c->seg.nslots, sizeof *c->acks);
    if (!c->freed || !c->acks) res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "shm transport: out of memory");
  }
  if (res != WEFT_SUCCESS) {
    shm_seg_close(&c->seg, c->name);
    free(c->freed);
    free(c->acks);
    free(c);
    return err_context(res, "rank %d: shm connect to rank %d", t->rank, peer);
  }
  c->out = c->seg.ring[c->side];
  c->in = c->seg.ring[1 - c->side];
  c->single_copy = t->cfg->shm_single_copy_bytes;
  c->stream_mode = t->cfg->shm_stream;
  probe_peer(c, a.probe);
  *out = &c->base;
  return WEFT_SUCCESS;
}

/* Tells the sender which incoming slots posted plain receives will take: only those are worth
 * describing. A receive that reduces from the slot (in place) reads it once either way, and a
 * described slot nobody has posted for yet would hold the sender's message open (and its
 * executor's window) until we get to it. */
static void publish_plain(shm_conn_t *c) {
  if (atomic_load_explicit(&c->seg.can_read[c->side], memory_order_relaxed) != SHM_CMA_YES) return;
  size_t slot = c->seg.slot_bytes;
  uint64_t end = c->rcur;
  for (const xfer_part_t *p = c->recv_head; p && p->ptr; p = p->next)
    end += (p->left + slot - 1) / slot;
  if (end > atomic_load_explicit(&c->in->plain_end, memory_order_relaxed))
    atomic_store_explicit(&c->in->plain_end, end, memory_order_relaxed);
}

/* Publishes outgoing slot i, the next in the stream, once everything else about it is written. */
static void publish(shm_conn_t *c, size_t i) {
  atomic_store_explicit(&c->seg.hdr[c->side][i].seq, ++c->head, memory_order_release);
}

/* Whether the next outgoing slot, of k bytes, is written with non-temporal stores: the kind we
 * prefer, or the other once in SHM_STREAM_PROBE_SLOTS (SHM_STREAM_EXPLORE_SLOTS until every
 * measure is in: shm_stream.h). *timed: its write is timed (every probe, one in
 * SHM_STREAM_SAMPLE of the rest; every one until the measures are in). */
static int stream_next(shm_conn_t *c, size_t k, int *timed) {
  int period = shm_stream_period(c->stream_known, c->large_sent);
  int streamed = shm_stream_pick(c->stream_mode, c->stream_preferred, k, period, &c->large_sent);
  *timed = c->stream_mode == SHM_STREAM_AUTO && k >= SHM_STREAM_MIN_BYTES &&
           (streamed != c->stream_preferred || period == SHM_STREAM_EXPLORE_SLOTS ||
            c->large_sent % SHM_STREAM_SAMPLE == 1);
  return streamed;
}

/* Counts the timed write of an outgoing slot of k bytes; with a renewed measure, chooses again
 * from ours and the peer's. */
static void note_write(shm_conn_t *c, int streamed, size_t k, int64_t ns) {
  if (!shm_stream_note(&c->writes, streamed, k, ns)) return;
  int64_t read[2] = {atomic_load_explicit(&c->out->read_ns[0], memory_order_relaxed),
                     atomic_load_explicit(&c->out->read_ns[1], memory_order_relaxed)};
  int was = c->stream_preferred;
  c->stream_known = read[0] && read[1] && c->writes.measure[0] && c->writes.measure[1];
  c->stream_preferred = shm_stream_better(read, c->writes.measure, was);
  if (c->stream_preferred != was && c->t->cfg->debug >= 2)
    fprintf(stderr,
            "weft rank %d: shm: large slots to rank %d now written %s (us per 64 KiB: plain "
            "%.1f to write + %.1f to read, non-temporal %.1f + %.1f)\n",
            c->t->rank, c->base.peer, c->stream_preferred ? "with non-temporal stores" : "plainly",
            (double)c->writes.measure[0] / 1000, (double)read[0] / 1000,
            (double)c->writes.measure[1] / 1000, (double)read[1] / 1000);
}

/* Whether bringing over incoming slot i, of k bytes, is timed: every slot of another kind than
 * the one before it (the writer's probes, and each change), one in SHM_STREAM_SAMPLE of the
 * rest. */
static int stream_timed(shm_conn_t *c, size_t i, size_t k) {
  uint32_t how = c->seg.hdr[1 - c->side][i].written;
  if (c->stream_mode != SHM_STREAM_AUTO || k < SHM_STREAM_MIN_BYTES || how == SHM_WRITTEN_PART)
    return 0;
  int streamed = how == SHM_WRITTEN_STREAMED, was = c->last_in_streamed;
  c->last_in_streamed = streamed;
  return streamed != was || c->rcur % SHM_STREAM_SAMPLE == 0;
}

/* Brings the k bytes at p into this core's cache, one load per line, and returns how long that
 * took: how fast the slot's lines come over from where its writer left them, apart from whatever
 * the receive does with them next (which then finds them in the cache). */
static int64_t touch_ns(const char *p, size_t k) {
  int64_t t0 = clock_now_ns();
  for (size_t o = 0; o < k; o += 64) (void)*(const volatile char *)(p + o);
  return clock_now_ns() - t0;
}

/* Counts the timed read of incoming slot i (k bytes); a renewed measure goes to the writer. */
static void note_read(shm_conn_t *c, size_t i, size_t k, int64_t ns) {
  int streamed = c->seg.hdr[1 - c->side][i].written == SHM_WRITTEN_STREAMED;
  if (!shm_stream_note(&c->reads, streamed, k, ns)) return;
  atomic_store_explicit(&c->in->read_ns[streamed], c->reads.measure[streamed],
                        memory_order_relaxed);
}

/* Whether `taken` outgoing slots leave one free. The peer's tail is read only when our last look
 * says the ring is full: that cache line moves on every slot the peer frees, and a small call
 * would otherwise wait for it once per message. */
static int has_room(shm_conn_t *c, uint64_t taken) {
  uint64_t n = (uint64_t)c->seg.nslots;
  if (taken - c->tail_seen < n) return 1;
  c->tail_seen = atomic_load_explicit(&c->out->tail, memory_order_acquire);
  return taken - c->tail_seen < n;
}

/* Whether the next incoming slot is published (the acquire pairs with publish's release). */
static int slot_arrived(const shm_conn_t *c) {
  const shm_slot_hdr_t *h = &c->seg.hdr[1 - c->side][c->rcur % (uint64_t)c->seg.nslots];
  return atomic_load_explicit(&h->seq, memory_order_acquire) == c->rcur + 1;
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
  shm_conn_t *c = (shm_conn_t *)base;
  post(c, buf, len, x, 0);
  publish_plain(c);
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
  if (!has_room(c, c->lent)) {
    c->want_slot = 1; /* the peer has not freed a slot yet */
    return WEFT_SUCCESS;
  }
  c->want_slot = 0;
  size_t i = (size_t)(c->lent++ % n);
  c->seg.hdr[c->side][i].len = (uint32_t)len; /* read by the peer only once published */
  atomic_store_explicit(&c->seg.hdr[c->side][i].mode, SHM_SLOT_BYTES, memory_order_relaxed);
  x->time_fill = 0;
  x->fill_ns = 0;
  x->lent_stream = x->lend_part ? 0 : stream_next(c, len, &x->time_fill);
  c->seg.hdr[c->side][i].written = x->lend_part     ? SHM_WRITTEN_PART
                                   : x->lent_stream ? SHM_WRITTEN_STREAMED
                                                    : SHM_WRITTEN_PLAIN;
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
  if (x->time_fill && x->fill_ns > 0)
    note_write(c, x->lent_stream, c->seg.hdr[c->side][i].len, x->fill_ns);
  x->time_fill = 0;
  publish(c, i);
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

/* Whether an outgoing slot of k bytes of `x` goes described: the peer said it can read us. */
static int describe(const shm_conn_t *c, const xfer_t *x, size_t k) {
  return c->single_copy && k >= c->single_copy && !x->device &&
         c->head < atomic_load_explicit(&c->out->plain_end, memory_order_relaxed) &&
         atomic_load_explicit(&c->seg.can_read[1 - c->side], memory_order_relaxed) == SHM_CMA_YES;
}

/* Whether a slot in this mode no longer needs the sender's buffer. */
static int slot_done(uint32_t mode) {
  return mode == SHM_SLOT_BYTES || mode == SHM_SLOT_READ || mode == SHM_SLOT_COPIED;
}

static void advance_acks(shm_conn_t *c, int *progressed);

static void send_progress(shm_conn_t *c, int *progressed) {
  uint64_t n = (uint64_t)c->seg.nslots;
  size_t slot = c->seg.slot_bytes;
  while (c->send_head) {
    if (!has_room(c, c->head)) break;
    xfer_part_t *p = c->send_head;
    size_t k = p->left < slot ? p->left : slot, i = (size_t)(c->head % n);
    /* The mode and address are published with the slot below. */
    if (describe(c, p->owner, k)) {
      c->seg.hdr[c->side][i].addr = (uint64_t)(uintptr_t)p->ptr;
      atomic_store_explicit(&c->seg.hdr[c->side][i].mode, SHM_SLOT_DESC, memory_order_relaxed);
      /* If we copy it into the slot after all (take_back), plainly; the receiver times only the
       * slots it finds written. */
      c->seg.hdr[c->side][i].written = SHM_WRITTEN_PLAIN;
      c->described = 1;
    } else {
      int timed, streamed = stream_next(c, k, &timed);
      int64_t t0 = timed ? clock_now_ns() : 0;
      if (streamed)
        kern_copy_stream(c->seg.data[c->side] + i * slot, p->ptr, k);
      else
        memcpy(c->seg.data[c->side] + i * slot, p->ptr, k);
      if (t0) note_write(c, streamed, k, clock_now_ns() - t0);
      c->seg.hdr[c->side][i].written = streamed ? SHM_WRITTEN_STREAMED : SHM_WRITTEN_PLAIN;
      atomic_store_explicit(&c->seg.hdr[c->side][i].mode, SHM_SLOT_BYTES, memory_order_relaxed);
    }
    c->seg.hdr[c->side][i].len = (uint32_t)k;
    publish(c, i);
    shm_bell_ring(c->peer_bell); /* per slot: the receiver starts on it while we copy the next */
    p->ptr += k;
    p->left -= k;
    *progressed = 1;
    if (p->left > 0) continue;
    if (!c->described) {
      xfer_queue_pop_done(&c->send_head, &c->send_tail);
      continue;
    }
    /* Its buffer is still read from: it completes once every slot up to head is done with. */
    xfer_t *x = p->owner;
    xfer_queue_pop(&c->send_head, &c->send_tail);
    /* Entries already acknowledged may still sit in acks (tail moved since it was emptied):
     * the unacknowledged ones end at distinct slots in (tail, head], so this makes room. */
    if (c->ack_count == c->seg.nslots) advance_acks(c, progressed);
    c->acks[(c->ack_first + c->ack_count++) % c->seg.nslots] = (shm_ack_t){x, c->head};
    c->described = 0;
  }
}

/* Copies into their slots the described slots the peer asked for (its read was refused) or,
 * with `all`, every described slot it has not claimed yet: from then on nothing needs our
 * buffers but the slots the peer is reading now. Returns how many it copied. */
static int take_back(shm_conn_t *c, int all) {
  uint64_t n = (uint64_t)c->seg.nslots;
  size_t slot = c->seg.slot_bytes;
  int took = 0;
  for (uint64_t s = c->acked; s < c->head; s++) {
    size_t i = (size_t)(s % n);
    _Atomic uint32_t *mode = &c->seg.hdr[c->side][i].mode;
    uint32_t v = atomic_load_explicit(mode, memory_order_acquire);
    if (v != SHM_SLOT_ASK && !(all && v == SHM_SLOT_DESC)) continue;
    /* Loses to a receiver that claimed it first (READING): it reads it then. */
    if (!atomic_compare_exchange_strong(mode, &v, SHM_SLOT_COPYING)) continue;
    memcpy(c->seg.data[c->side] + i * slot, (const void *)(uintptr_t)c->seg.hdr[c->side][i].addr,
           c->seg.hdr[c->side][i].len);
    /* Release: the receiver's acquire load of COPIED finds the bytes in the slot. */
    atomic_store_explicit(mode, SHM_SLOT_COPIED, memory_order_release);
    took++;
  }
  if (took) shm_bell_ring(c->peer_bell);
  return took;
}

/* Moves `acked` past every outgoing slot done with, and completes the messages behind it. */
static void advance_acks(shm_conn_t *c, int *progressed) {
  uint64_t n = (uint64_t)c->seg.nslots;
  uint64_t tail = atomic_load_explicit(&c->out->tail, memory_order_acquire);
  if (c->acked < tail) c->acked = tail; /* freed slots are done with */
  /* A slot before head is not reused before tail passes it, so its mode is still its own. */
  while (c->acked < c->head && slot_done(atomic_load_explicit(
                                   &c->seg.hdr[c->side][c->acked % n].mode, memory_order_acquire)))
    c->acked++;
  while (c->ack_count && c->acks[c->ack_first].end <= c->acked) {
    xfer_t *x = c->acks[c->ack_first].x;
    x->parts_left = 0;
    x->complete = 1;
    c->ack_first = (c->ack_first + 1) % c->seg.nslots;
    c->ack_count--;
    *progressed = 1;
  }
}

/* Whether described slots wait on the peer (their messages are not complete yet). */
static int acks_pending(const shm_conn_t *c) { return c->ack_count > 0 || c->described; }

/* Whether advance_acks or take_back would do something now. */
static int acks_ready(const shm_conn_t *c) {
  if (!acks_pending(c)) return 0;
  uint64_t n = (uint64_t)c->seg.nslots;
  if (atomic_load_explicit(&c->out->tail, memory_order_acquire) > c->acked) return 1;
  for (uint64_t s = c->acked; s < c->head; s++) {
    uint32_t v = atomic_load_explicit(&c->seg.hdr[c->side][s % n].mode, memory_order_acquire);
    if (v == SHM_SLOT_ASK || (s == c->acked && slot_done(v))) return 1;
  }
  return 0;
}

/* The receiving side of a described slot i of k bytes: claims it and reads the bytes into dst
 * (into_slot: dst is the slot itself). *where: 0 not there yet (the sender is copying them into
 * the slot), 1 read into dst, 2 in the slot (the sender copied them). */
static weft_result_t read_described(shm_conn_t *c, size_t i, char *dst, size_t k, int into_slot,
                                    int *where) {
  _Atomic uint32_t *mode = &c->seg.hdr[1 - c->side][i].mode;
  uint32_t v = SHM_SLOT_DESC;
  *where = 0;
  if (atomic_compare_exchange_strong(mode, &v, SHM_SLOT_READING)) {
    int err = shm_cma_read(c->peer_pid, dst, c->seg.hdr[1 - c->side][i].addr, k);
    if (err == ESRCH)
      return WEFT_ERR(WEFT_ERR_REMOTE, "rank %d (pid %d) exited while this rank read from it",
                      c->base.peer, c->peer_pid);
    if (err) {
      /* The sender copies it into the slot instead; later slots come that way at once. */
      cma_refused(c, "mid-transfer", err);
      atomic_store_explicit(mode, SHM_SLOT_ASK, memory_order_release);
    } else {
      /* Release: the sender reuses its buffer once it sees this. */
      atomic_store_explicit(mode, into_slot ? SHM_SLOT_COPIED : SHM_SLOT_READ,
                            memory_order_release);
      *where = 1;
    }
    shm_bell_ring(c->peer_bell); /* it may wait for its message, or for the ASK */
    return WEFT_SUCCESS;
  }
  if (v == SHM_SLOT_BYTES || v == SHM_SLOT_COPIED) *where = 2;
  return WEFT_SUCCESS;
}

/* Whether the next incoming slot waits on the sender copying it (ASK or COPYING). */
static int recv_stalled(const shm_conn_t *c) {
  uint32_t v = atomic_load_explicit(
      &c->seg.hdr[1 - c->side][c->rcur % (uint64_t)c->seg.nslots].mode, memory_order_acquire);
  return v == SHM_SLOT_ASK || v == SHM_SLOT_COPYING;
}

static weft_result_t recv_progress(shm_conn_t *c, int *progressed) {
  uint64_t n = (uint64_t)c->seg.nslots;
  size_t slot = c->seg.slot_bytes;
  const char *data = c->seg.data[1 - c->side];
  while (c->recv_head) {
    if (!slot_arrived(c)) break;
    xfer_part_t *p = c->recv_head;
    size_t k = p->left < slot ? p->left : slot, i = (size_t)(c->rcur % n);
    if (c->seg.hdr[1 - c->side][i].len != k) {
      /* Reported one progress call late: the executor first checks the call description that
       * came before it, which says why far better (e.g. send and recv counts differ). */
      if (c->bad_len++)
        return WEFT_ERR(WEFT_ERR_MISMATCH,
                        "rank %d sent %u bytes where this rank expected %zu "
                        "(the ranks run different schedules)",
                        c->base.peer, c->seg.hdr[1 - c->side][i].len, k);
      break;
    }
    int where = 2; /* the bytes are in the slot */
    int timed = stream_timed(c, i, k); /* a slot the peer wrote (not a described one) */
    if (!slot_done(atomic_load_explicit(&c->seg.hdr[1 - c->side][i].mode, memory_order_acquire))) {
      timed = 0;
      char *dst = p->ptr ? p->ptr : (char *)data + i * slot;
      WEFT_CHECK(read_described(c, i, dst, k, !p->ptr, &where));
      if (!where) break;
      if (!p->ptr) where = 2;
    }
    if (timed) note_read(c, i, k, touch_ns(data + i * slot, k));
    c->rcur++;
    *progressed = 1;
    if (!p->ptr) { /* in place: the slot stays taken until release_recv */
      p->owner->data = data + i * slot;
      xfer_queue_pop_done(&c->recv_head, &c->recv_tail);
      publish_plain(c);
      continue;
    }
    if (where == 2) memcpy(p->ptr, data + i * slot, k);
    p->ptr += k;
    p->left -= k;
    c->freed[i] = 1;
    free_slots(c);
    if (p->left == 0) {
      xfer_queue_pop_done(&c->recv_head, &c->recv_tail);
      publish_plain(c); /* plain receives behind an in-place one are at the front now */
    }
  }
  return WEFT_SUCCESS;
}

/* Something posted (or a refused lend, or a message the peer still reads) waits on this
 * connection. */
static int waiting(const shm_conn_t *c) {
  return c->send_head || c->recv_head || c->want_slot || acks_pending(c);
}

static int ring_full(shm_conn_t *c) {
  uint64_t taken = c->lent > c->head ? c->lent : c->head; /* lent slots are taken too */
  return !has_room(c, taken);
}

static int ring_empty(const shm_conn_t *c) { return !slot_arrived(c); }

static weft_result_t shm_progress(conn_t *base, int *progressed) {
  shm_conn_t *c = (shm_conn_t *)base;
  send_progress(c, progressed);
  /* A closed peer reads nothing more: copy what it has not claimed, as the slot path would. */
  int how = atomic_load(&c->seg.closed[1 - c->side]);
  if (acks_pending(c)) {
    if (take_back(c, how != SHM_OPEN)) *progressed = 1;
    advance_acks(c, progressed);
  }
  WEFT_CHECK(recv_progress(c, progressed));
  /* A closed peer is an error only once we are stuck on it: what it wrote before is still read. */
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
static int ready(shm_conn_t *c) {
  if (!waiting(c)) return 0;
  if (atomic_load_explicit(&c->seg.closed[1 - c->side], memory_order_relaxed)) return 1;
  return ((c->send_head || c->want_slot) && !ring_full(c)) ||
         (c->recv_head && !ring_empty(c) && !recv_stalled(c)) || acks_ready(c);
}

static int any_ready(conn_t *const *conns, int n) {
  for (int i = 0; i < n; i++)
    if (ready((shm_conn_t *)conns[i])) return 1;
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

/* Publishes the core this rank waits on, and says where the peers it waits for, and the other
 * local ranks, last waited (spin_peers_note). */
static spin_peers_t where_peers_are(shm_transport_t *t, conn_t *const *conns, int n) {
  int cpu = sched_getcpu();
  if (cpu < 0) return SPIN_PEERS_UNKNOWN;
  int32_t mine = cpu + 1;
  /* Relaxed: a hint for the peers' next choice, read racily on purpose. */
  if (atomic_load_explicit(&t->bells.mine->cpu, memory_order_relaxed) != mine)
    atomic_store_explicit(&t->bells.mine->cpu, mine, memory_order_relaxed);
  spin_peers_t where = SPIN_PEERS_APART;
  for (int i = 0; i < n && where == SPIN_PEERS_APART; i++) {
    const shm_conn_t *c = (const shm_conn_t *)conns[i];
    if (!waiting(c)) continue;
    where = spin_peers_note(where, atomic_load_explicit(&c->peer_bell->cpu, memory_order_relaxed),
                            mine, 1);
  }
  for (int i = 0; i < t->nlocal && where == SPIN_PEERS_APART; i++) {
    const shm_bell_t *b = t->bells.peers[t->local[i]];
    where = spin_peers_note(where, atomic_load_explicit(&b->cpu, memory_order_relaxed), mine, 0);
  }
  return where;
}

static weft_result_t shm_wait(conn_t *const *conns, int n, int timeout_ms, int spin_us) {
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
  int64_t budget_us = spin_budget_us(spin_us, timeout_ms);
  /* Where ranks outnumber cores every wait yields: no need to know where the peers are. */
  spin_mode_t mode = t->fit ? spin_choose(1, where_peers_are(t, conns, n)) : SPIN_YIELD;
  if (mode == SPIN_BUSY && spin_busy_phase(set_ready, &(wait_set_t){conns, n}, &budget_us))
    return WEFT_SUCCESS;
  /* Described slots the peer has not claimed within TAKE_BACK_US are copied by us after all: a
   * peer that runs now claims a slot within microseconds of head moving, while one that is
   * descheduled (more ranks than cores) or busy elsewhere would hold our message, and with it our
   * executor's window, for its whole absence; a peer that reads only once we move on would never
   * read it. So the single copy happens where both sides run at once, and costs nothing where
   * they do not. */
  int64_t grace_us = budget_us < TAKE_BACK_US ? budget_us : TAKE_BACK_US;
  if (shm_spin_until_ready(conns, n, any_ready, grace_us)) return WEFT_SUCCESS;
  int took = 0;
  for (int i = 0; i < n; i++) {
    shm_conn_t *c = (shm_conn_t *)conns[i];
    if (acks_pending(c)) took += take_back(c, 1);
  }
  if (took) return WEFT_SUCCESS;
  if (shm_spin_until_ready(conns, n, any_ready, budget_us - grace_us)) return WEFT_SUCCESS;
  /* Announce the sleep, then read the bell, then look once more (shm_bell_ring says why). */
  shm_bell_t *bell = t->bells.mine;
  uint32_t seen = shm_bell_announce_sleep(bell);
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
 * it once it is published (ring_empty's acquire load pairs with the sender's release store). */
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
  size_t have = c->seg.hdr[1 - c->side][i].len;
  if (!slot_done(atomic_load_explicit(&c->seg.hdr[1 - c->side][i].mode, memory_order_acquire))) {
    /* Read the whole slot into itself (COPIED): the receive that takes it finds it there. */
    int where;
    if (have > c->seg.slot_bytes)
      return WEFT_ERR(WEFT_ERR_MISMATCH, "rank %d described a slot of %zu bytes (at most %zu)",
                      base->peer, have, c->seg.slot_bytes);
    char *slot = c->seg.data[1 - c->side] + i * c->seg.slot_bytes;
    WEFT_CHECK(read_described(c, i, slot, have, 1, &where));
    if (!where) return WEFT_SUCCESS;
  }
  size_t k = have < len ? have : len;
  memcpy(buf, c->seg.data[1 - c->side] + i * c->seg.slot_bytes, k);
  memset((char *)buf + k, 0, len - k);
  *state = TRANSPORT_PEEK_READY;
  return WEFT_SUCCESS;
}

/* Whether the peer is reading one of our described slots now. */
static int reading(const shm_conn_t *c) {
  for (uint64_t s = c->acked; s < c->head; s++)
    if (atomic_load(&c->seg.hdr[c->side][s % (uint64_t)c->seg.nslots].mode) == SHM_SLOT_READING)
      return 1;
  return 0;
}

static void shm_close(conn_t *base, int abortive) {
  shm_conn_t *c = (shm_conn_t *)base;
  if (!c) return;
  /* Our buffers may be gone once we return: copy what the peer has not claimed, and let it
   * finish the reads it started (bounded by peer_wait_ms; a dead peer reads nothing). */
  if (acks_pending(c)) {
    take_back(c, 1);
    int64_t deadline = clock_now_ms() + peer_wait_ms(c->t);
    while (reading(c) && pid_alive(c->peer_pid) && clock_now_ms() < deadline) usleep(50);
  }
  atomic_store(&c->seg.closed[c->side], abortive ? SHM_ABORTED : SHM_CLOSED);
  shm_bell_ring(c->peer_bell); /* a peer blocked on us fails now, not at its timeout */
  if (!abortive) { /* let a slow peer attach before the name goes (shm_seg_close unlinks it) */
    int64_t deadline = clock_now_ms() + peer_wait_ms(c->t);
    while (atomic_load(c->seg.attached) < 2 && pid_alive(c->peer_pid) && clock_now_ms() < deadline)
      usleep(1000);
  }
  shm_seg_close(&c->seg, c->name);
  free(c->freed);
  free(c->acks);
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
    .lend_in_place = 1,
    .peek_recv = shm_peek_recv,
    .connect_pending = shm_connect_pending,
    .desc_slot = 1,
};
