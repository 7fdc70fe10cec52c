/* emulated_engine.c -- device work without a GPU: in-order queues run by worker threads, fences as
 * tickets, gates on user streams, and the vtable of the emulated engine.
 *
 * Each queue (weft's own, or a user's stream) is a FIFO of operations that one worker thread runs
 * strictly in order, after a short delay each, so that work finishes well after it was enqueued,
 * as on a GPU: code that reads a result before its fence has passed reads stale data here too. A
 * failed operation's error is sticky on its queue (later work is skipped, every poll and drain
 * returns it), like a CUDA fault that poisons the context. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "device/emulated.h"
#include "kernels/devloop.h"
#include "kernels/reduce.h"

#define DEFAULT_DELAY_US 20
/* queue_destroy and close wait this long for work still queued before dropping it: long enough
 * for any real backlog, bounded so that a gate nobody opens cannot hang the process. */
#define DESTROY_WAIT_MS 10000
/* How often a worker held by a closed gate checks whether its queue is being destroyed. */
#define GATE_CHECK_MS 10

typedef enum {
  OP_COPY,
  OP_REDUCE,
  OP_PREMUL,
  OP_MARK,
  OP_GATE_INPUTS,
  OP_GATE_BLOCK,
  OP_LAUNCH
} op_kind_t;

typedef struct op {
  struct op *next;
  op_kind_t kind;
  uint64_t seq;
  void *dst, *dst2;
  const void *src, *src2; /* copy: src; reduce: local, incoming */
  size_t n;               /* copy: bytes; reduce: elements */
  weft_dtype_t dtype;
  weft_op_t rop;
  int avg_nranks;
  unsigned char scalar[8]; /* premul: the factor, one element of dtype */
  dev_gate_t *gate;
  const dl_run_t *run; /* launch: the caller's, valid until a fence after it passes */
  dl_status_t *status; /* launch: written when the run ends */
} op_t;

struct dev_queue {
  struct emu_engine *e;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work; /* the worker waits for operations */
  pthread_cond_t done; /* drain and fences wait for the worker */
  op_t *head, *tail;
  uint64_t enqueued;  /* seq of the last operation enqueued */
  uint64_t completed; /* seq of the last operation finished (they finish in order) */
  weft_result_t err;  /* sticky: the first failure */
  char errmsg[ERR_MSG_MAX];
  _Atomic int stop;
  struct dev_queue *next_live;
};

/* One call's hold on a user stream. Three parties each hold a reference: the "inputs ready"
 * operation, the blocking operation (both on the stream's worker) and the caller until
 * gate_open; the last one out frees it. */
struct dev_gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;
  int inputs_ready;
  int opened;
  weft_result_t err; /* the stream's sticky error when its inputs were reached */
  char errmsg[ERR_MSG_MAX];
};

struct emu_engine {
  dev_engine_t base;
  int delay_us; /* WEFT_EMULATED_DELAY_US */
  pthread_mutex_t mu;
  dev_queue_t *default_stream; /* what a NULL user stream means, as CUDA's stream 0 */
};

/* Every live queue of the process, so that a stream handed in by a caller can be checked (a
 * CUDA stream or a freed one is refused instead of being dereferenced), and close() finds its
 * engine's queues. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static dev_queue_t *live;

/* ---- time ---- */

static void cond_init_monotonic(pthread_cond_t *c) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
}

static struct timespec deadline_after_ms(int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (ms < 0) ms = 0;
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* ---- gates ---- */

static void gate_unref(dev_gate_t *g) {
  pthread_mutex_lock(&g->mu);
  int left = --g->refs;
  pthread_mutex_unlock(&g->mu);
  if (left > 0) return;
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g);
}

static void gate_mark_inputs(dev_gate_t *g, weft_result_t err, const char *msg) {
  pthread_mutex_lock(&g->mu);
  g->inputs_ready = 1;
  g->err = err;
  if (err != WEFT_SUCCESS) snprintf(g->errmsg, sizeof g->errmsg, "%s", msg);
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  gate_unref(g);
}

/* Runs on the stream's worker: holds the stream until gate_open, or until the queue is destroyed
 * (then the rest of its work is dropped). */
static void gate_block(dev_queue_t *q, dev_gate_t *g) {
  pthread_mutex_lock(&g->mu);
  while (!g->opened && !atomic_load(&q->stop)) {
    struct timespec ts = deadline_after_ms(GATE_CHECK_MS);
    pthread_cond_timedwait(&g->cv, &g->mu, &ts);
  }
  pthread_mutex_unlock(&g->mu);
  gate_unref(g);
}

/* ---- operations ---- */

static op_t *op_new(op_kind_t kind) {
  op_t *op = calloc(1, sizeof *op);
  if (op) op->kind = kind;
  return op;
}

/* Frees an operation that will never run; a gate's operation gives up its reference. */
static void op_drop(op_t *op) {
  if (op->kind == OP_GATE_INPUTS || op->kind == OP_GATE_BLOCK) gate_unref(op->gate);
  free(op);
}

static weft_result_t run_reduce(const op_t *op) {
  size_t esize = emu_dtype_size(op->dtype);
  if (esize == 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "emulated device: reduce: unknown dtype %d",
                    (int)op->dtype);
  if ((int)op->rop < 0 || op->rop >= WEFT_NUM_OPS)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "emulated device: reduce: unknown op %d",
                    (int)op->rop);
  if (op->avg_nranks < 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "emulated device: reduce: avg_nranks %d < 0",
                    op->avg_nranks);
  if (op->rop == WEFT_AVG && op->avg_nranks > 0) {
    kern_reduce_avg_final(op->dst, op->src, op->src2, op->n, op->dtype, op->avg_nranks);
  } else {
    kern_reduce_fn fn = kern_reduce_lookup(op->dtype, op->rop);
    if (!fn)
      return WEFT_ERR(WEFT_ERR_INTERNAL, "emulated device: reduce: no kernel for %d x %d",
                      (int)op->dtype, (int)op->rop);
    fn(op->dst, op->src, op->src2, op->n);
  }
  if (op->dst2 && op->n) memcpy(op->dst2, op->dst, op->n * esize);
  return WEFT_SUCCESS;
}

static const char *waiting_name(const dl_status_t *st) {
  return st->waiting_for ? "a free slot (the receiver to consume)" : "a message to arrive";
}

/* Runs a device program on the worker thread: the worker is the emulation's device, so the loop
 * runs here, strictly after the queue's earlier work and before its later work, like a kernel. A
 * run that does not finish fails the queue with where it stopped, naming the peer it waited for. */
/* The status of an ended run, its code stored last with release: a thread watching the run (the
 * caller of launch, between waits on the queue) may read the code alone to learn that the run
 * has ended, while the rest is read once the queue has drained. */
static void publish_status(dl_status_t *out, dl_status_t st) {
  out->step = st.step;
  out->link = st.link;
  out->waiting_for = st.waiting_for;
  out->round = st.round;
  __atomic_store_n(&out->code, st.code, __ATOMIC_RELEASE);
}

static weft_result_t run_launch(const op_t *op, int skip) {
  if (skip) {
    /* Nothing ran: the queue's own error says why. */
    dl_status_t st = {DL_ABORTED, -1, -1, 0, 0};
    publish_status(op->status, st);
    return WEFT_SUCCESS;
  }
  dl_status_t st = dl_run_host(op->run);
  publish_status(op->status, st);
  if (st.code == DL_DONE) return WEFT_SUCCESS;
  const dp_program_t *p = op->run->prog;
  const char *kind = "-";
  if (p && st.step >= 0 && st.step < p->nsteps)
    kind = dp_kind_name((dp_kind_t)p->steps[st.step].kind);
  int peer = -1, dir = -1;
  if (p && st.link >= 0 && st.link < p->nlinks && st.link < DP_MAX_LINKS) {
    peer = p->links[st.link].peer;
    dir = p->links[st.link].dir;
  }
  const char *dirname = dir == DP_LINK_SEND ? "to" : "from";
  unsigned long long round = (unsigned long long)st.round;
  switch (st.code) {
    case DL_TIMEOUT:
      return WEFT_ERR(WEFT_ERR_TIMEOUT,
                      "emulated device: device-resident loop saw no progress for %llu ms at "
                      "step %d (%s), round %llu, link %d %s rank %d, waiting for %s",
                      (unsigned long long)(op->run->timeout_ns / 1000000ull), st.step, kind, round,
                      st.link, dirname, peer, waiting_name(&st));
    case DL_ABORTED:
      return WEFT_ERR(WEFT_ERR_ABORTED,
                      "emulated device: device-resident loop aborted at step %d (%s), round %llu, "
                      "link %d %s rank %d, waiting for %s",
                      st.step, kind, round, st.link, dirname, peer, waiting_name(&st));
    default:
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "emulated device: device-resident loop refused its program (code %d) at step "
                      "%d (%s), link %d (rank %d): a step names a link or buffer the run was not "
                      "given, or a range outside its buffer",
                      st.code, st.step, kind, st.link, peer);
  }
}

/* Runs one operation on the worker. `skip`: the queue has failed, so data work is not done
 * (markers still pass, so that fences and drains complete and report the error). */
static weft_result_t run_op(dev_queue_t *q, op_t *op, int skip, weft_result_t qerr,
                            const char *qmsg) {
  switch (op->kind) {
    case OP_COPY:
      if (!skip && op->n) memcpy(op->dst, op->src, op->n);
      return WEFT_SUCCESS;
    case OP_REDUCE:
      return skip ? WEFT_SUCCESS : run_reduce(op);
    case OP_PREMUL:
      if (skip) return WEFT_SUCCESS;
      if (emu_dtype_size(op->dtype) == 0)
        return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "emulated device: premul: unknown dtype %d",
                        (int)op->dtype);
      kern_premul(op->dst, op->src, op->n, op->dtype, op->scalar);
      return WEFT_SUCCESS;
    case OP_MARK:
      return WEFT_SUCCESS;
    case OP_GATE_INPUTS:
      gate_mark_inputs(op->gate, qerr, qmsg);
      return WEFT_SUCCESS;
    case OP_GATE_BLOCK:
      gate_block(q, op->gate);
      return WEFT_SUCCESS;
    case OP_LAUNCH:
      return run_launch(op, skip);
  }
  return WEFT_SUCCESS;
}

static void *worker_main(void *arg) {
  dev_queue_t *q = arg;
  int delay_us = q->e->delay_us;
  char qmsg[ERR_MSG_MAX];
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (!q->head && !atomic_load(&q->stop)) pthread_cond_wait(&q->work, &q->mu);
    if (atomic_load(&q->stop)) break;
    op_t *op = q->head;
    q->head = op->next;
    if (!q->head) q->tail = NULL;
    weft_result_t qerr = q->err;
    if (qerr != WEFT_SUCCESS) snprintf(qmsg, sizeof qmsg, "%s", q->errmsg);
    pthread_mutex_unlock(&q->mu);

    if (delay_us > 0) {
      struct timespec d = {delay_us / 1000000, (long)(delay_us % 1000000) * 1000L};
      nanosleep(&d, NULL);
    }
    weft_result_t res = run_op(q, op, qerr != WEFT_SUCCESS, qerr, qmsg);

    pthread_mutex_lock(&q->mu);
    if (res != WEFT_SUCCESS && q->err == WEFT_SUCCESS) {
      q->err = res;
      snprintf(q->errmsg, sizeof q->errmsg, "%s", err_last());
    }
    q->completed = op->seq;
    pthread_cond_broadcast(&q->done);
    free(op);
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

/* Appends ops[0..n) at once (a gate's two operations must be adjacent); *seq gets the last's. */
static void enqueue(dev_queue_t *q, op_t **ops, int n, uint64_t *seq) {
  pthread_mutex_lock(&q->mu);
  for (int i = 0; i < n; i++) {
    ops[i]->seq = ++q->enqueued;
    ops[i]->next = NULL;
    if (q->tail)
      q->tail->next = ops[i];
    else
      q->head = ops[i];
    q->tail = ops[i];
  }
  if (seq) *seq = q->enqueued;
  pthread_cond_signal(&q->work);
  pthread_mutex_unlock(&q->mu);
}

static weft_result_t enqueue_one(dev_queue_t *q, op_t *op, uint64_t *seq) {
  if (!op) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "emulated device: allocating a queue operation");
  enqueue(q, &op, 1, seq);
  return WEFT_SUCCESS;
}

/* Returns the queue's sticky error, as this thread's error, or WEFT_SUCCESS. */
static weft_result_t sticky_error(dev_queue_t *q) {
  pthread_mutex_lock(&q->mu);
  weft_result_t err = q->err;
  char msg[ERR_MSG_MAX];
  if (err != WEFT_SUCCESS) snprintf(msg, sizeof msg, "%s", q->errmsg);
  pthread_mutex_unlock(&q->mu);
  if (err != WEFT_SUCCESS) return err_set_message(err, msg);
  return WEFT_SUCCESS;
}

/* ---- queues ---- */

static weft_result_t queue_new(struct emu_engine *e, dev_queue_t **out) {
  dev_queue_t *q = calloc(1, sizeof *q);
  if (!q) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "emulated device: allocating a queue");
  q->e = e;
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->work, NULL);
  cond_init_monotonic(&q->done);
  int rc = pthread_create(&q->thread, NULL, worker_main, q);
  if (rc != 0) {
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->done);
    free(q);
    return WEFT_ERR(WEFT_ERR_SYSTEM, "emulated device: starting a queue's worker thread: %s",
                    strerror(rc));
  }
  pthread_mutex_lock(&live_mu);
  q->next_live = live;
  live = q;
  pthread_mutex_unlock(&live_mu);
  *out = q;
  return WEFT_SUCCESS;
}

/* Takes q out of the live list; 0 if it was not there (freed already, or not a queue). */
static int unlink_live(dev_queue_t *q) {
  int found = 0;
  pthread_mutex_lock(&live_mu);
  for (dev_queue_t **pp = &live; *pp; pp = &(*pp)->next_live) {
    if (*pp == q) {
      *pp = q->next_live;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&live_mu);
  return found;
}

static int is_live(const dev_queue_t *q) {
  int found = 0;
  pthread_mutex_lock(&live_mu);
  for (dev_queue_t *it = live; it; it = it->next_live) found |= it == q;
  pthread_mutex_unlock(&live_mu);
  return found;
}

static weft_result_t emu_drain(dev_queue_t *q, int timeout_ms) {
  struct timespec ts = deadline_after_ms(timeout_ms);
  pthread_mutex_lock(&q->mu);
  while (q->completed < q->enqueued) {
    if (pthread_cond_timedwait(&q->done, &q->mu, &ts) == ETIMEDOUT && q->completed < q->enqueued) {
      unsigned long long pending = q->enqueued - q->completed;
      pthread_mutex_unlock(&q->mu);
      return WEFT_ERR(WEFT_ERR_TIMEOUT,
                      "emulated device: %llu operations still pending on a queue after %d ms (a "
                      "gate on this stream not opened yet?)",
                      pending, timeout_ms);
    }
  }
  pthread_mutex_unlock(&q->mu);
  return sticky_error(q);
}

/* Waits (bounded) for q's work, stops its worker and frees it; work still queued is dropped. */
static void queue_free(dev_queue_t *q) {
  emu_drain(q, DESTROY_WAIT_MS);
  pthread_mutex_lock(&q->mu);
  atomic_store(&q->stop, 1);
  pthread_cond_signal(&q->work);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  while (q->head) {
    op_t *op = q->head;
    q->head = op->next;
    op_drop(op);
  }
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->work);
  pthread_cond_destroy(&q->done);
  free(q);
}

static weft_result_t emu_queue_create(dev_engine_t *e, dev_queue_t **out) {
  return queue_new((struct emu_engine *)e, out);
}

static void emu_queue_destroy(dev_queue_t *q) {
  if (q && unlink_live(q)) queue_free(q);
}

static weft_result_t emu_copy(dev_queue_t *q, void *dst, const void *src, size_t bytes) {
  if (bytes && (!dst || !src))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "emulated device: copy of %zu bytes from %p to %p",
                    bytes, src, dst);
  WEFT_CHECK(emu_mem_check(dst, bytes, 1, "copy to"));
  WEFT_CHECK(emu_mem_check(src, bytes, 1, "copy from"));
  op_t *op = op_new(OP_COPY);
  if (op) {
    op->dst = dst;
    op->src = src;
    op->n = bytes;
  }
  return enqueue_one(q, op, NULL);
}

static weft_result_t emu_reduce(dev_queue_t *q, void *dst, void *dst2, const void *local,
                                const void *incoming, size_t n, weft_dtype_t dtype, weft_op_t op,
                                int avg_nranks) {
  if (n && (!dst || !local || !incoming))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "emulated device: reduce of %zu elements with a NULL buffer", n);
  /* The buffers are checked now, as the CUDA engine's kernels check theirs at launch (with the
   * element size of a valid dtype). dtype, op and avg_nranks are checked when the operation runs
   * and fail the queue instead: the emulation's way to exercise the handling of device work that
   * fails after it was enqueued. */
  size_t bytes = n * emu_dtype_size(dtype);
  WEFT_CHECK(emu_mem_check(dst, bytes, 0, "reduce into"));
  if (dst2) WEFT_CHECK(emu_mem_check(dst2, bytes, 0, "reduce into (second output)"));
  WEFT_CHECK(emu_mem_check(local, bytes, 0, "reduce reading local data"));
  WEFT_CHECK(emu_mem_check(incoming, bytes, 0, "reduce reading incoming data"));
  op_t *o = op_new(OP_REDUCE);
  if (o) {
    o->dst = dst;
    o->dst2 = dst2;
    o->src = local;
    o->src2 = incoming;
    o->n = n;
    o->dtype = dtype;
    o->rop = op;
    o->avg_nranks = avg_nranks;
  }
  return enqueue_one(q, o, NULL);
}

static weft_result_t emu_premul(dev_queue_t *q, void *dst, const void *src, size_t n,
                                weft_dtype_t dtype, const void *scalar) {
  size_t esize = emu_dtype_size(dtype);
  if (n && (!dst || !src || !scalar))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "emulated device: premul of %zu elements with a NULL buffer or factor", n);
  if (esize == 0 || esize > sizeof(((op_t *)0)->scalar))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "emulated device: premul: unknown dtype %d",
                    (int)dtype);
  WEFT_CHECK(emu_mem_check(dst, n * esize, 0, "premul into"));
  WEFT_CHECK(emu_mem_check(src, n * esize, 0, "premul reading"));
  op_t *o = op_new(OP_PREMUL);
  if (o) {
    o->dst = dst;
    o->src = src;
    o->n = n;
    o->dtype = dtype;
    memcpy(o->scalar, scalar, esize);
  }
  return enqueue_one(q, o, NULL);
}

static weft_result_t emu_launch(dev_queue_t *q, const dl_run_t *run, dl_status_t *status) {
  if (!run || !run->prog || !status)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "emulated device: launch of a device program with a NULL run, program or "
                    "status");
  op_t *op = op_new(OP_LAUNCH);
  if (op) {
    op->run = run;
    op->status = status;
  }
  return enqueue_one(q, op, NULL);
}

static weft_result_t emu_fence(dev_queue_t *q, uint64_t *ticket) {
  /* A marker operation, as cudaEventRecord is one: tickets of one queue grow strictly. */
  return enqueue_one(q, op_new(OP_MARK), ticket);
}

static weft_result_t emu_poll(dev_queue_t *q, uint64_t ticket, int *done) {
  pthread_mutex_lock(&q->mu);
  uint64_t enqueued = q->enqueued;
  *done = q->completed >= ticket;
  pthread_mutex_unlock(&q->mu);
  if (ticket > enqueued)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "emulated device: poll of ticket %llu, but only %llu operations were enqueued",
                    (unsigned long long)ticket, (unsigned long long)enqueued);
  return sticky_error(q);
}

/* ---- user streams and gates ---- */

/* The queue a user's stream names: NULL is the engine's default stream (made on first use). */
static weft_result_t user_queue(struct emu_engine *e, void *stream, int create, dev_queue_t **q) {
  *q = NULL;
  if (stream) {
    if (!is_live(stream))
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "emulated device: %p is not a stream of the emulated engine (a CUDA stream, "
                      "or one already destroyed?)",
                      stream);
    *q = stream;
    return WEFT_SUCCESS;
  }
  weft_result_t res = WEFT_SUCCESS;
  pthread_mutex_lock(&e->mu);
  if (!e->default_stream && create) res = queue_new(e, &e->default_stream);
  *q = e->default_stream;
  pthread_mutex_unlock(&e->mu);
  return res;
}

static weft_result_t emu_gate_enter(dev_engine_t *e, void *user_stream, dev_gate_t **out) {
  dev_queue_t *q;
  WEFT_CHECK(user_queue((struct emu_engine *)e, user_stream, 1, &q));
  dev_gate_t *g = calloc(1, sizeof *g);
  op_t *ops[2] = {op_new(OP_GATE_INPUTS), op_new(OP_GATE_BLOCK)};
  if (!g || !ops[0] || !ops[1]) {
    free(g);
    free(ops[0]);
    free(ops[1]);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "emulated device: allocating a stream gate");
  }
  pthread_mutex_init(&g->mu, NULL);
  cond_init_monotonic(&g->cv);
  g->refs = 3;
  ops[0]->gate = g;
  ops[1]->gate = g;
  enqueue(q, ops, 2, NULL);
  *out = g;
  return WEFT_SUCCESS;
}

static weft_result_t emu_gate_wait_inputs(dev_gate_t *g, int timeout_ms) {
  struct timespec ts = deadline_after_ms(timeout_ms);
  pthread_mutex_lock(&g->mu);
  while (!g->inputs_ready) {
    if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) == ETIMEDOUT && !g->inputs_ready) {
      pthread_mutex_unlock(&g->mu);
      return WEFT_ERR(WEFT_ERR_TIMEOUT,
                      "emulated device: the user's stream did not finish the work before the call "
                      "(its inputs) within %d ms",
                      timeout_ms);
    }
  }
  weft_result_t err = g->err;
  char msg[ERR_MSG_MAX];
  if (err != WEFT_SUCCESS) snprintf(msg, sizeof msg, "%s", g->errmsg);
  pthread_mutex_unlock(&g->mu);
  if (err != WEFT_SUCCESS) return err_set_message(err, msg);
  return WEFT_SUCCESS;
}

static void emu_gate_open(dev_gate_t *g) {
  pthread_mutex_lock(&g->mu);
  g->opened = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  gate_unref(g);
}

static weft_result_t emu_stream_create(dev_engine_t *e, void **stream) {
  dev_queue_t *q;
  WEFT_CHECK(queue_new((struct emu_engine *)e, &q));
  *stream = q;
  return WEFT_SUCCESS;
}

static weft_result_t emu_stream_sync(dev_engine_t *e, void *stream, int timeout_ms) {
  dev_queue_t *q;
  WEFT_CHECK(user_queue((struct emu_engine *)e, stream, 0, &q));
  return q ? emu_drain(q, timeout_ms) : WEFT_SUCCESS;
}

static void emu_stream_destroy(dev_engine_t *e, void *stream) {
  (void)e;
  if (stream && unlink_live(stream)) queue_free(stream);
}

/* ---- the engine ---- */

static void emu_close(dev_engine_t *base) {
  struct emu_engine *e = (struct emu_engine *)base;
  for (;;) {
    dev_queue_t *q = NULL;
    pthread_mutex_lock(&live_mu);
    for (dev_queue_t **pp = &live; *pp; pp = &(*pp)->next_live) {
      if ((*pp)->e == e) {
        q = *pp;
        *pp = q->next_live;
        break;
      }
    }
    pthread_mutex_unlock(&live_mu);
    if (!q) break;
    queue_free(q);
  }
  emu_mem_release_all(base);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

/* The emulated device memory is host memory (a shared memfd mapping): an adapter registers it by
 * address, which is what lets the GPUDirect path of the verbs transport run in the Soft-RoCE VMs. */
static weft_result_t emu_rdma_export(dev_engine_t *base, void *p, size_t bytes, int *fd,
                                     uint64_t *offset) {
  (void)base;
  (void)p;
  (void)bytes;
  *fd = -1;
  *offset = 0;
  return WEFT_SUCCESS;
}

static const dev_ops_t emulated_ops = {
    .name = "emulated",
    .mem_kind = emu_mem_kind,
    .alloc = emu_alloc,
    .release = emu_release,
    .queue_create = emu_queue_create,
    .queue_destroy = emu_queue_destroy,
    .copy = emu_copy,
    .reduce = emu_reduce,
    .premul = emu_premul,
    .launch = emu_launch,
    .fence = emu_fence,
    .poll = emu_poll,
    .drain = emu_drain,
    .gate_enter = emu_gate_enter,
    .gate_wait_inputs = emu_gate_wait_inputs,
    .gate_open = emu_gate_open,
    .stream_create = emu_stream_create,
    .stream_sync = emu_stream_sync,
    .stream_destroy = emu_stream_destroy,
    .ipc_export = emu_ipc_export,
    .ipc_import = emu_ipc_import,
    .ipc_close = emu_ipc_close,
    .rdma_export = emu_rdma_export,
    .close = emu_close,
};

weft_result_t emulated_engine_open(dev_engine_t **out) {
  /* WEFT_EMULATED_DELAY_US is read here with getenv rather than through common/config.c: it tunes
   * a test engine, not a communicator, and is read once per engine at open. */
  int delay_us = DEFAULT_DELAY_US;
  const char *env = getenv("WEFT_EMULATED_DELAY_US");
  if (env && *env) {
    char *end;
    errno = 0;
    long v = strtol(env, &end, 10);
    if (errno || *end || v < 0 || v > 10000000)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "WEFT_EMULATED_DELAY_US=%s: expected microseconds, 0 to 10000000", env);
    delay_us = (int)v;
  }
  struct emu_engine *e = calloc(1, sizeof *e);
  if (!e) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "emulated device: allocating the engine");
  e->base.ops = &emulated_ops;
  e->base.device = 0;
  e->delay_us = delay_us;
  pthread_mutex_init(&e->mu, NULL);
  *out = &e->base;
  return WEFT_SUCCESS;
}
