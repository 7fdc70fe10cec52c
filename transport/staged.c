/* staged.c -- device buffers across hosts: pinned host staging slots over any host connection.
 *
 * Each direction has a ring of pinned slots of WEFT_SLICE_BYTES and a device queue of its own, so
 * the copies between device and host overlap the network and each other (while slot i crosses the
 * wire, slot i+1 is being copied). Receiving takes max(2, WEFT_SLICES_IN_FLIGHT) slots
 * (STAGED_DEPTH where that is 0, its default); sending at least WEFT_SHM_SLOTS as well, for
 * lending (below).
 *
 *   send:      device buf --copy on "out"--> slot --inner post_send--> wire
 *   lent send: caller's device work (or CPU) writes the slot --inner post_send--> wire
 *   recv:      wire --inner post_recv--> slot --copy on "in"--> device buf   (complete at fence)
 *   in place:  wire --inner post_recv--> slot, lent as x->data until release_recv
 *
 * Lending (lend_send/commit_send, for fused ring steps): the next free send slot is lent to the
 * caller, whose reduction writes it directly (pinned host memory that device work writes), so the
 * device -> slot copy of a send disappears. It is taken in ring order like a staged send; commit
 * (the caller's fence passed) makes it ready without a copy, and it is handed to the inner
 * connection in ring order and freed when the inner send completes, like any other send slot.
 * Host and device messages alike may be lent. A slot lent and never committed is never handed on
 * (handing stops at it), so the peer never sees it; its memory is the ring's, released once with
 * it at close. The caller's work writing a lent slot must have ended before close (the executor
 * drains its queue after a failure).
 *
 * Why the send ring holds at least WEFT_SHM_SLOTS slots: the executor's ring schedules decide
 * how many slices a fused step keeps lent and in flight per direction from WEFT_SHM_SLOTS (shm's
 * ring depth), and they rely on a lending transport holding more than WEFT_SHM_SLOTS / 2 of them.
 * With the old max(2, WEFT_SLICES_IN_FLIGHT) slots, every rank of a ring could wait for a send
 * slot that frees only once its successor receives, while that successor waits the same way on
 * its own successor: a cycle, a deadlock. Lending takes no receive slot, so the receive ring
 * keeps its size.
 *
 * Order. The inner connection is an ordered stream, so everything reaches it in the order the
 * caller posted: a host send waits behind earlier device sends until their slots were handed to
 * the inner connection (their device copies finished), and slots are handed on strictly in ring
 * order. Receives are posted to the inner connection as soon as they have a slot, in order; a
 * host receive behind a device receive that waits for a slot waits too. Slots are freed in ring
 * order (tail), like the shm rings.
 *
 * Queue links: a posted xfer waiting here is linked through its parts[0] (ptr: the next byte to
 * stage or land, left: bytes still to hand on; ptr NULL marks an in-place receive). Once it is
 * handed to the inner connection (host xfers) its parts belong to that connection. */
#include "transport/staged.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "device/device.h"

/* While device copies are in flight, how long wait() polls them before waiting on the inner
 * connections (which a finished copy does not wake). */
#define FENCE_SPIN_NS 200000

/* Receive slots where WEFT_SLICES_IN_FLIGHT leaves it to the transport: the executor's own
 * default of slices in flight (this transport asks for no more: transport_ops_t.depth_bytes 0),
 * so that the device copy of slot i overlaps slot i+1 on the wire and a slot or two more in the
 * inner connection. */
#define STAGED_DEPTH 4

enum {
  SLOT_FREE = 0,
  SLOT_STAGING, /* send: device -> slot copy enqueued, fence not yet passed */
  SLOT_LENT,    /* send: lent to the caller (lend_send), not committed yet */
  SLOT_FILLED,  /* send: lent and committed: the bytes are there, no copy to wait for */
  SLOT_SENDING, /* send: handed to the inner connection */
  SLOT_LANDING, /* recv: inner receive posted into the slot */
  SLOT_COPYING, /* recv: slot -> device copy enqueued, fence not yet passed */
  SLOT_HELD,    /* recv in place: lent to the caller until release_recv */
  SLOT_DONE     /* recv: finished with, waiting to be freed in ring order */
};

typedef struct {
  char *mem; /* slot_bytes of pinned host memory */
  int state;
  int last; /* the owner's last piece: completing this slot completes the owner */
  size_t len;
  uint64_t ticket; /* fence after this slot's device copy */
  xfer_t *owner;
  char *dst; /* copy receive: where this piece goes; NULL for in place */
  xfer_t ix; /* the inner connection's transfer of this slot */
} slot_t;

typedef struct {
  slot_t *slots;
  int n;           /* slots in the ring */
  char *mem;       /* one pinned allocation for all slots */
  uint64_t head;   /* slots taken so far */
  uint64_t handed; /* send: slots handed to the inner connection; recv: slots that landed */
  uint64_t tail;   /* slots freed so far */
  xfer_part_t *q_head, *q_tail; /* posted by the caller, not yet (fully) given slots */
} ring_t;

typedef struct {
  conn_t base;
  conn_t *inner;
  dev_engine_t *dev;
  dev_queue_t *q_out, *q_in;
  size_t slot_bytes;
  ring_t tx, rx;
} staged_conn_t;

static slot_t *slot_at(ring_t *r, uint64_t i) { return &r->slots[i % (uint64_t)r->n]; }

static void q_push(ring_t *r, xfer_part_t *p) {
  p->next = NULL;
  if (r->q_tail)
    r->q_tail->next = p;
  else
    r->q_head = p;
  r->q_tail = p;
}

static void q_pop(ring_t *r) {
  r->q_head = r->q_head->next;
  if (!r->q_head) r->q_tail = NULL;
}

static void finish(xfer_t *x) {
  x->parts_left = 0;
  x->complete = 1;
}

static weft_result_t ring_init(staged_conn_t *c, ring_t *r, int n) {
  r->slots = calloc((size_t)n, sizeof *r->slots);
  if (!r->slots) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "staged connection: out of memory");
  r->n = n;
  void *mem = NULL;
  WEFT_CHECK(c->dev->ops->alloc(c->dev, (size_t)n * c->slot_bytes, 1, &mem));
  r->mem = mem;
  for (int i = 0; i < n; i++) r->slots[i].mem = r->mem + (size_t)i * c->slot_bytes;
  return WEFT_SUCCESS;
}

static void ring_free(staged_conn_t *c, ring_t *r) {
  if (r->mem) c->dev->ops->release(c->dev, r->mem, 1);
  free(r->slots);
}

static void staged_close(conn_t *base, int abortive) {
  staged_conn_t *c = (staged_conn_t *)base;
  if (!c) return;
  (void)abortive;
  /* The queues' copies read and write the slots: they end before the slots are freed. A slot
   * lent and never committed is only ring memory (nothing was posted from it): freed with it. */
  if (c->q_out) c->dev->ops->queue_destroy(c->q_out);
  if (c->q_in) c->dev->ops->queue_destroy(c->q_in);
  ring_free(c, &c->tx);
  ring_free(c, &c->rx);
  free(c);
}

weft_result_t staged_wrap(conn_t *inner, struct dev_engine *dev, const weft_config_t *cfg,
                          conn_t **out) {
  if (!inner || !dev || !cfg || cfg->slice_bytes == 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "staged connection needs an inner connection, a device engine and a "
                    "nonzero slice size");
  staged_conn_t *c = calloc(1, sizeof *c);
  if (!c) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "staged connection: out of memory");
  c->base.ops = &staged_conn_ops;
  c->base.peer = inner->peer;
  c->inner = inner;
  c->dev = dev;
  c->slot_bytes = cfg->slice_bytes;
  int nrx = cfg->slices_in_flight > 0 ? cfg->slices_in_flight : STAGED_DEPTH;
  if (nrx < 2) nrx = 2;
  /* Lending needs the send ring to be as deep as shm's (see the top of the file). */
  int ntx = cfg->shm_slots > nrx ? cfg->shm_slots : nrx;
  weft_result_t res;
  WEFT_CHECK_GOTO(ring_init(c, &c->tx, ntx), res, fail);
  WEFT_CHECK_GOTO(ring_init(c, &c->rx, nrx), res, fail);
  WEFT_CHECK_GOTO(dev->ops->queue_create(dev, &c->q_out), res, fail);
  WEFT_CHECK_GOTO(dev->ops->queue_create(dev, &c->q_in), res, fail);
  *out = &c->base;
  return WEFT_SUCCESS;
fail:
  staged_close(&c->base, 1);
  return err_context(res, "staged connection to rank %d", inner->peer);
}

/* ---- posting ------------------------------------------------------------------------------ */

static void queue_xfer(ring_t *r, char *ptr, size_t len, xfer_t *x) {
  x->complete = 0;
  x->parts_left = 1;
  x->data = NULL;
  xfer_part_t *p = &x->parts[0];
  p->owner = x;
  p->ptr = ptr;
  p->left = len;
  q_push(r, p);
}

static weft_result_t staged_post_send(conn_t *base, const void *buf, size_t len, xfer_t *x) {
  staged_conn_t *c = (staged_conn_t *)base;
  /* A host message with nothing ahead of it here goes straight on. */
  if (!x->device && !c->tx.q_head && c->tx.handed == c->tx.head)
    return c->inner->ops->post_send(c->inner, buf, len, x);
  if (len == 0) { /* nothing crosses the wire for an empty message on any transport */
    x->complete = 1;
    x->parts_left = 0;
    return WEFT_SUCCESS;
  }
  queue_xfer(&c->tx, (char *)buf, len, x);
  return WEFT_SUCCESS;
}

static weft_result_t staged_post_recv(conn_t *base, void *buf, size_t len, xfer_t *x) {
  staged_conn_t *c = (staged_conn_t *)base;
  if (!x->device && !c->rx.q_head) return c->inner->ops->post_recv(c->inner, buf, len, x);
  if (len == 0) {
    x->complete = 1;
    x->parts_left = 0;
    x->data = NULL;
    return WEFT_SUCCESS;
  }
  queue_xfer(&c->rx, buf, len, x);
  return WEFT_SUCCESS;
}

/* Host or device alike: the message lands in a pinned slot, which both the CPU and device work
 * can read. */
static weft_result_t staged_post_recv_inplace(conn_t *base, size_t len, xfer_t *x) {
  staged_conn_t *c = (staged_conn_t *)base;
  if (len > c->slot_bytes)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "in-place receive of %zu bytes from rank %d exceeds the %zu-byte staging "
                    "slot",
                    len, base->peer, c->slot_bytes);
  if (len == 0) {
    x->complete = 1;
    x->parts_left = 0;
    x->data = NULL;
    return WEFT_SUCCESS;
  }
  queue_xfer(&c->rx, NULL, len, x);
  return WEFT_SUCCESS;
}

/* ---- sending ------------------------------------------------------------------------------ */

/* Gives queued sends slots and starts their device copies; host sends go on once everything
 * before them has been handed to the inner connection. */
static weft_result_t tx_stage(staged_conn_t *c, int *progressed) {
  ring_t *r = &c->tx;
  while (r->q_head) {
    xfer_part_t *p = r->q_head;
    xfer_t *x = p->owner;
    if (!x->device) {
      if (r->handed != r->head) break;
      char *buf = p->ptr;
      size_t len = p->left;
      q_pop(r);
      WEFT_CHECK(c->inner->ops->post_send(c->inner, buf, len, x));
      *progressed = 1;
      continue;
    }
    if (r->head - r->tail >= (uint64_t)r->n) break;
    slot_t *s = slot_at(r, r->head);
    size_t k = p->left < c->slot_bytes ? p->left : c->slot_bytes;
    weft_result_t res = c->dev->ops->copy(c->q_out, s->mem, p->ptr, k);
    if (res == WEFT_SUCCESS) res = c->dev->ops->fence(c->q_out, &s->ticket);
    if (res != WEFT_SUCCESS)
      return err_context(res, "staging a %zu-byte device message for rank %d", x->parts[0].left,
                         c->base.peer);
    s->owner = x;
    s->len = k;
    s->last = k == p->left;
    s->state = SLOT_STAGING;
    r->head++;
    p->ptr += k;
    p->left -= k;
    if (p->left == 0) q_pop(r);
    *progressed = 1;
  }
  return WEFT_SUCCESS;
}

/* Hands slots whose bytes are there (staged copy finished, or lent and committed) to the inner
 * connection, in ring order; a lent slot not yet committed stops it. */
static weft_result_t tx_hand_on(staged_conn_t *c, int *progressed) {
  ring_t *r = &c->tx;
  while (r->handed < r->head) {
    slot_t *s = slot_at(r, r->handed);
    if (s->state == SLOT_LENT) break;
    if (s->state == SLOT_STAGING) {
      int done = 0;
      weft_result_t res = c->dev->ops->poll(c->q_out, s->ticket, &done);
      if (res != WEFT_SUCCESS)
        return err_context(res, "device copy of a message for rank %d", c->base.peer);
      if (!done) break;
    }
    memset(&s->ix, 0, sizeof s->ix);
    WEFT_CHECK(c->inner->ops->post_send(c->inner, s->mem, s->len, &s->ix));
    s->state = SLOT_SENDING;
    r->handed++;
    *progressed = 1;
  }
  return WEFT_SUCCESS;
}

/* Frees slots the inner connection has sent, in ring order; the last piece completes its xfer. */
static void tx_free(staged_conn_t *c, int *progressed) {
  ring_t *r = &c->tx;
  while (r->tail < r->handed) {
    slot_t *s = slot_at(r, r->tail);
    if (!s->ix.complete) break;
    if (s->last) finish(s->owner);
    s->state = SLOT_FREE;
    s->owner = NULL;
    r->tail++;
    *progressed = 1;
  }
}

/* Lends the next free send slot (see the top of the file). Sends queued before it go first. */
static weft_result_t staged_lend_send(conn_t *base, size_t len, xfer_t *x, char **slot) {
  staged_conn_t *c = (staged_conn_t *)base;
  ring_t *r = &c->tx;
  *slot = NULL;
  if (len == 0 || len > c->slot_bytes)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "lent send of %zu bytes to rank %d: must be 1..%zu bytes (one staging slot)",
                    len, base->peer, c->slot_bytes);
  if (r->q_head || r->head - r->tail >= (uint64_t)r->n) return WEFT_SUCCESS;
  slot_t *s = slot_at(r, r->head);
  s->owner = x;
  s->len = len;
  s->last = 1;
  s->state = SLOT_LENT;
  r->head++;
  x->complete = 0;
  x->parts_left = 1;
  x->data = NULL;
  *slot = s->mem;
  return WEFT_SUCCESS;
}

/* The oldest lent slot is ready as it is: no copy, no fence. Hands it on at once if everything
 * before it has been handed on. */
static weft_result_t staged_commit_send(conn_t *base, xfer_t *x) {
  staged_conn_t *c = (staged_conn_t *)base;
  ring_t *r = &c->tx;
  uint64_t i = r->handed;
  while (i < r->head && slot_at(r, i)->state != SLOT_LENT) i++;
  if (i == r->head || slot_at(r, i)->owner != x)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "staged commit to rank %d of a send it did not lend next (commits come in "
                    "lending order)",
                    base->peer);
  slot_at(r, i)->state = SLOT_FILLED;
  int progressed = 0;
  return tx_hand_on(c, &progressed);
}

/* ---- receiving ---------------------------------------------------------------------------- */

/* Posts queued receives to the inner connection in order: device and in-place ones into slots. */
static weft_result_t rx_post(staged_conn_t *c, int *progressed) {
  ring_t *r = &c->rx;
  while (r->q_head) {
    xfer_part_t *p = r->q_head;
    xfer_t *x = p->owner;
    if (!x->device && p->ptr) {
      char *buf = p->ptr;
      size_t len = p->left;
      q_pop(r);
      WEFT_CHECK(c->inner->ops->post_recv(c->inner, buf, len, x));
      *progressed = 1;
      continue;
    }
    if (r->head - r->tail >= (uint64_t)r->n) break;
    slot_t *s = slot_at(r, r->head);
    size_t k = p->left < c->slot_bytes ? p->left : c->slot_bytes;
    memset(&s->ix, 0, sizeof s->ix);
    WEFT_CHECK(c->inner->ops->post_recv(c->inner, s->mem, k, &s->ix));
    s->owner = x;
    s->len = k;
    s->dst = p->ptr;
    s->last = k == p->left;
    s->state = SLOT_LANDING;
    r->head++;
    if (p->ptr) p->ptr += k;
    p->left -= k;
    if (p->left == 0) q_pop(r);
    *progressed = 1;
  }
  return WEFT_SUCCESS;
}

/* Slots that landed: lent in place, or copied to the device. Then copies that finished, and
 * freeing in ring order. */
static weft_result_t rx_land(staged_conn_t *c, int *progressed) {
  ring_t *r = &c->rx;
  while (r->handed < r->head) {
    slot_t *s = slot_at(r, r->handed);
    if (!s->ix.complete) break;
    if (!s->dst) {
      s->owner->data = s->mem;
      finish(s->owner);
      s->state = SLOT_HELD;
    } else {
      weft_result_t res = c->dev->ops->copy(c->q_in, s->dst, s->mem, s->len);
      if (res == WEFT_SUCCESS) res = c->dev->ops->fence(c->q_in, &s->ticket);
      if (res != WEFT_SUCCESS)
        return err_context(res, "copying a message from rank %d to the device", c->base.peer);
      s->state = SLOT_COPYING;
    }
    r->handed++;
    *progressed = 1;
  }
  /* Copies finish in queue order; a slot lent in place ahead of them does not hold them up. */
  for (uint64_t i = r->tail; i < r->handed; i++) {
    slot_t *s = slot_at(r, i);
    if (s->state != SLOT_COPYING) continue;
    int done = 0;
    weft_result_t res = c->dev->ops->poll(c->q_in, s->ticket, &done);
    if (res != WEFT_SUCCESS)
      return err_context(res, "device copy of a message from rank %d", c->base.peer);
    if (!done) break;
    if (s->last) finish(s->owner);
    s->state = SLOT_DONE;
    *progressed = 1;
  }
  while (r->tail < r->handed && slot_at(r, r->tail)->state == SLOT_DONE) {
    slot_t *s = slot_at(r, r->tail);
    s->state = SLOT_FREE;
    s->owner = NULL;
    r->tail++;
    *progressed = 1;
  }
  return WEFT_SUCCESS;
}

static weft_result_t staged_release_recv(conn_t *base, xfer_t *x) {
  staged_conn_t *c = (staged_conn_t *)base;
  ring_t *r = &c->rx;
  if (!x->data) return WEFT_SUCCESS; /* an empty message took no slot */
  for (uint64_t i = r->tail; i < r->handed; i++) {
    slot_t *s = slot_at(r, i);
    if (s->state == SLOT_HELD && s->mem == x->data) {
      s->state = SLOT_DONE;
      x->data = NULL;
      int progressed = 0;
      return rx_land(c, &progressed);
    }
  }
  return WEFT_ERR(WEFT_ERR_INTERNAL, "release of a receive from rank %d that holds no staging slot",
                  base->peer);
}

static weft_result_t staged_progress(conn_t *base, int *progressed) {
  staged_conn_t *c = (staged_conn_t *)base;
  WEFT_CHECK(tx_stage(c, progressed));
  WEFT_CHECK(tx_hand_on(c, progressed));
  WEFT_CHECK(rx_post(c, progressed));
  WEFT_CHECK(c->inner->ops->progress(c->inner, progressed));
  tx_free(c, progressed);
  WEFT_CHECK(rx_land(c, progressed));
  /* Slots just freed take the next pieces at once; their copies start while we wait. */
  WEFT_CHECK(tx_stage(c, progressed));
  WEFT_CHECK(tx_hand_on(c, progressed));
  WEFT_CHECK(rx_post(c, progressed));
  return WEFT_SUCCESS;
}

/* ---- waiting ------------------------------------------------------------------------------ */

/* Device copies in flight: 1 if any, and *passed = 1 if one of them has already finished (the
 * next progress() moves it on). Fences ring no bell, so they are polled. */
static int fences_pending(staged_conn_t *c, int *passed) {
  int pending = 0;
  ring_t *r = &c->tx;
  slot_t *next = r->handed < r->head ? slot_at(r, r->handed) : NULL;
  if (next && next->state == SLOT_FILLED) *passed = 1; /* progress() hands it on */
  if (next && next->state == SLOT_STAGING) {
    pending = 1;
    int done = 0;
    if (c->dev->ops->poll(c->q_out, next->ticket, &done) != WEFT_SUCCESS || done)
      *passed = 1; /* an error is reported by progress() */
  }
  r = &c->rx;
  for (uint64_t i = r->tail; i < r->handed; i++) {
    slot_t *s = slot_at(r, i);
    if (s->state != SLOT_COPYING) continue;
    pending = 1;
    int done = 0;
    if (c->dev->ops->poll(c->q_in, s->ticket, &done) != WEFT_SUCCESS || done) *passed = 1;
    break;
  }
  return pending;
}

static int any_fence_passed(conn_t *const *conns, int n) {
  int passed = 0;
  for (int i = 0; i < n && !passed; i++) fences_pending((staged_conn_t *)conns[i], &passed);
  return passed;
}

/* Waits on the inner connections. Fences wake nobody, so while device copies are in flight it
 * first polls them for a moment, yielding the core (a slot's copy takes microseconds: a sleep
 * per slice would cost most of the time), then waits on the inner connections for at most 1 ms
 * at a time, so a finished copy is noticed soon. */
static weft_result_t staged_wait(conn_t *const *conns, int n, int timeout_ms, int spin_us) {
  conn_t *stack[64];
  conn_t **inner = n <= 64 ? stack : malloc(sizeof *inner * (size_t)n);
  if (!inner) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "staged wait: out of memory");
  int pending = 0, passed = 0, mixed = 0;
  for (int i = 0; i < n; i++) {
    staged_conn_t *c = (staged_conn_t *)conns[i];
    inner[i] = c->inner;
    mixed |= inner[i]->ops != inner[0]->ops;
    pending |= fences_pending(c, &passed);
  }
  weft_result_t res = WEFT_SUCCESS;
  if (passed || n == 0) goto done;
  if (pending) {
    int64_t until = clock_now_ns() + FENCE_SPIN_NS;
    while (clock_now_ns() < until) {
      if (any_fence_passed(conns, n)) goto done;
      sched_yield();
    }
  }
  int slice = pending && timeout_ms > 1 ? 1 : timeout_ms;
  if (!mixed) {
    res = inner[0]->ops->wait(inner, n, slice, spin_us);
  } else {
    for (int i = 0; i < n && res == WEFT_SUCCESS; i++)
      res = inner[i]->ops->wait(&inner[i], 1, slice < 1 ? slice : 1, spin_us);
  }
  /* The inner wait returns at once when nothing is posted to it (only copies in flight): let
   * the queues' workers, and ranks sharing this core, run before the caller polls again. */
  if (pending && res == WEFT_SUCCESS) sched_yield();
done:
  if (inner != stack) free(inner);
  return res;
}

const transport_ops_t staged_conn_ops = {
    .name = "staged",
    .addr_size = 0,
    .post_send = staged_post_send,
    .post_recv = staged_post_recv,
    .progress = staged_progress,
    .wait = staged_wait,
    .close = staged_close,
    .post_recv_inplace = staged_post_recv_inplace,
    .release_recv = staged_release_recv,
    .lend_send = staged_lend_send,
    .commit_send = staged_commit_send,
    .lend_in_place = 1,
};
