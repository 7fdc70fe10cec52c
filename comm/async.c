/* async.c -- requests, and the per-communicator progress thread that runs them in issue order.
 *
 * The first asynchronous call on a communicator starts its progress thread, which runs the
 * communicator's operations from then on. Requests form one FIFO per communicator, so operations
 * complete in the order they were issued. A blocking call issued while requests are queued or
 * running joins the same FIFO and waits (on the stack), so it runs after them and sees their
 * results; when the thread is idle a blocking call runs inline on the caller's thread instead,
 * saving the hand-off (nothing else can touch the communicator then), and so does a request
 * whose weft_wait(-1) finds it first in the queue with the thread idle (run_by_waiter). Either
 * way `busy` says that someone runs an operation, and only the one who set it does.
 *
 * Each request carries its own mutex and condition variable rather than using the queue's lock:
 * a request outlives its communicator (weft_comm_destroy drains the queue and returns, the caller
 * waits afterwards), so everything a waiter needs must live in the request.
 *
 * How the progress thread waits. A call it runs overlaps the caller's own work (DDP issues a
 * bucket's all-reduce and goes on with the backward pass). Where the host's ranks outnumber its
 * cores, that work is what the cores are short of, and the yielding polls of a long wait
 * (WEFT_SPIN_US, 1 ms) take them from it: sched_yield returns at once while the threads that
 * would run wait on the other core's queue. So its waits poll only WEFT_ASYNC_SPIN_US, then
 * sleep until a peer rings. A call its caller waits for (inline, or run_by_waiter) keeps
 * WEFT_SPIN_US: nothing of the caller's competes for the core then. Measured on 2 cores, DDP step
 * of an 8x256 MLP at 4 ranks: 15.8-16.2 ms -> 14.2-15.0 (results/2026-11-28-async-spin).
 *
 * Error messages are per thread. The progress thread copies an operation's message into its
 * request, and weft_test/weft_wait make it the waiting thread's weft_last_error().
 *
 * Shutting down: destroy drains (every queued operation runs, then the thread leaves); abort
 * completes the queued operations that have not started with WEFT_ERR_ABORTED at once, and waits
 * for the one running, which ends when its peers finish it, one of them fails, or WEFT_TIMEOUT_MS
 * passes without progress. Either way the requests stay valid until waited on. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "comm/handles.h"
#include "common/spin.h"

struct weft_request {
  weft_call_t call;
  int rank; /* for messages: the issuing communicator may be gone when they are written */
  /* The issuing communicator, for weft_wait to run the request itself (run_by_waiter); looked up
   * in the handles table before use, since it may be gone by then. */
  weft_comm_t *comm;
  /* A call enqueued on a user's stream: nobody waits on the request; the progress thread waits
   * for the gate's inputs, runs the call, opens the gate and frees the request. */
  dev_gate_t *gate;
  const dev_ops_t *gate_ops;
  struct weft_request *next;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* on CLOCK_MONOTONIC, for weft_wait's timeout */
  int done;
  int waited_on; /* a thread is in weft_wait or weft_test on it (under the handles mutex) */
  weft_result_t result;
  char msg[ERR_MSG_MAX];
  /* The request's own copy of what the call points to besides buffers (a group's ops,
   * all_to_allv's arrays): a caller's may be gone before a queued call runs. */
  void *owned;
  /* A WEFT_PREMUL_SUM's factor given in host memory: weft.h lets the caller's go at once. */
  unsigned char factor[8];
};

struct comm_async {
  weft_comm_t *comm;
  int spin_us; /* the spin of the calls this thread runs (comm_async_spin_us) */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* work arrived or stop was asked */
  weft_request_t *head, *tail;
  int busy; /* the thread is running an operation */
  int stop; /* leave once the queue is empty */
  long waiter_runs; /* requests their waiter ran (run_by_waiter), under mu */
};

/* Copies a group's ops or all_to_allv's arrays into r->owned, and a host premul factor into
 * r->factor, and points r->call at the copies. */
static weft_result_t own_arrays(weft_request_t *r, int nranks) {
  weft_call_t *k = &r->call;
  if (k->coll == WEFT_COLL_P2P_GROUP && k->ops && k->nops > 0) {
    weft_p2p_op_t *ops = malloc(sizeof *ops * (size_t)k->nops);
    if (!ops) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: out of memory for a request", r->rank);
    memcpy(ops, k->ops, sizeof *ops * (size_t)k->nops);
    k->ops = ops;
    r->owned = ops;
  }
  if (k->coll == WEFT_COLL_ALL_TO_ALLV && k->send_counts && k->send_displs && k->recv_counts &&
      k->recv_displs) {
    size_t *a = malloc(sizeof *a * 4 * (size_t)nranks), n = (size_t)nranks;
    if (!a) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: out of memory for a request", r->rank);
    memcpy(a, k->send_counts, sizeof *a * n);
    memcpy(a + n, k->send_displs, sizeof *a * n);
    memcpy(a + 2 * n, k->recv_counts, sizeof *a * n);
    memcpy(a + 3 * n, k->recv_displs, sizeof *a * n);
    k->send_counts = a;
    k->send_displs = a + n;
    k->recv_counts = a + 2 * n;
    k->recv_displs = a + 3 * n;
    r->owned = a;
  }
  size_t esize = weft_dtype_size(k->dtype);
  if (k->op == WEFT_PREMUL_SUM && k->scalar && !k->scalar_on_device && esize > 0 &&
      esize <= sizeof r->factor) {
    memcpy(r->factor, k->scalar, esize);
    k->scalar = r->factor;
  }
  return WEFT_SUCCESS;
}

static weft_result_t request_init(weft_request_t *r, const weft_call_t *call, int rank,
                                  int nranks) {
  memset(r, 0, sizeof *r);
  r->call = *call;
  r->rank = rank;
  WEFT_CHECK(own_arrays(r, nranks));
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) != 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "rank %d: creating a request: pthread_condattr_init", rank);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  int err = pthread_cond_init(&r->cv, &attr);
  pthread_condattr_destroy(&attr);
  if (err == 0 && (err = pthread_mutex_init(&r->mu, NULL)) != 0) pthread_cond_destroy(&r->cv);
  if (err != 0) {
    free(r->owned);
    return WEFT_ERR(WEFT_ERR_SYSTEM, "rank %d: creating a request: %s", rank, strerror(err));
  }
  return WEFT_SUCCESS;
}

/* The last touch of the request by whoever completes it: a waiter may free it right after. */
static void request_complete(weft_request_t *r, weft_result_t res, const char *msg) {
  pthread_mutex_lock(&r->mu);
  r->result = res;
  if (res != WEFT_SUCCESS) snprintf(r->msg, sizeof r->msg, "%s", msg);
  r->done = 1;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

/* Hands a completed request's result (and message) to the calling thread. */
static weft_result_t request_take(weft_request_t *r) {
  weft_result_t res = r->result;
  if (res != WEFT_SUCCESS) err_set_message(res, r->msg);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r->owned);
  return res;
}

int comm_async_spin_us(const weft_config_t *config, int local_size, int ncpus) {
  if (spin_cores_enough(local_size, ncpus) || config->async_spin_us >= config->spin_us)
    return config->spin_us;
  return config->async_spin_us;
}

/* A call run on the progress thread, its waits at the thread's spin (see the top). */
static weft_result_t progress_call(comm_async_t *a, const weft_call_t *call) {
  weft_comm_t *c = a->comm;
  c->exec.spin_us = a->spin_us;
  weft_result_t res = comm_call(c, call);
  c->exec.spin_us = c->config.spin_us;
  return res;
}

/* A gated call: inputs first (bounded by WEFT_TIMEOUT_MS), then the call; the gate opens whatever
 * happened, so the user's stream never stays blocked. A failure marks the communicator failed
 * (its next call, and weft_comm_get_async_error, report it). */
static void run_gated(comm_async_t *a, weft_request_t *r) {
  weft_comm_t *c = a->comm;
  weft_result_t res = r->gate_ops->gate_wait_inputs(r->gate, c->config.timeout_ms);
  if (res != WEFT_SUCCESS) {
    err_context(res, "rank %d: %s (count %zu): waiting for the stream to produce its inputs",
                c->rank, weft_coll_name(r->call.coll), r->call.count);
    if (comm_failure(c) == WEFT_SUCCESS) comm_fail(c, res);
  } else {
    res = progress_call(a, &r->call);
    /* comm_call marks the communicator failed for communication errors, not for argument
     * errors; a gated call has nobody to return those to. */
    if (res != WEFT_SUCCESS && comm_failure(c) == WEFT_SUCCESS) comm_fail(c, res);
  }
  r->gate_ops->gate_open(r->gate);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r->owned);
  free(r);
}

/* After weft_comm_abort, what is still queued is not run: each request fails at once. */
static weft_result_t aborted_before_running(const weft_comm_t *c, const weft_request_t *r) {
  return WEFT_ERR(WEFT_ERR_ABORTED,
                  "rank %d: %s (count %zu): the communicator was aborted before this operation "
                  "ran",
                  c->rank, weft_coll_name(r->call.coll), r->call.count);
}

static void *progress_main(void *arg) {
  comm_async_t *a = arg;
  pthread_mutex_lock(&a->mu);
  for (;;) {
    /* `busy` is also set by a blocking call running inline on its caller's thread. */
    while ((!a->head || a->busy) && !a->stop) pthread_cond_wait(&a->cv, &a->mu);
    weft_request_t *r = a->head;
    if (!r) break;
    a->head = r->next;
    if (!a->head) a->tail = NULL;
    a->busy = 1;
    pthread_mutex_unlock(&a->mu);
    if (comm_aborted(a->comm) && r->gate) {
      (void)aborted_before_running(a->comm, r);
      r->gate_ops->gate_open(r->gate);
      pthread_mutex_destroy(&r->mu);
      pthread_cond_destroy(&r->cv);
      free(r->owned);
      free(r);
    } else if (comm_aborted(a->comm)) {
      weft_result_t res = aborted_before_running(a->comm, r);
      request_complete(r, res, err_last());
    } else if (r->gate) {
      run_gated(a, r);
    } else {
      weft_result_t res = progress_call(a, &r->call);
      request_complete(r, res, err_last());
    }
    pthread_mutex_lock(&a->mu);
    a->busy = 0;
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

static weft_result_t async_create(weft_comm_t *c, comm_async_t **out) {
  comm_async_t *a = calloc(1, sizeof *a);
  if (!a) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: out of memory starting async", c->rank);
  a->comm = c;
  cpu_set_t cpus;
  int ncpus = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : c->local_size;
  a->spin_us = comm_async_spin_us(&c->config, c->local_size, ncpus);
  int err = pthread_mutex_init(&a->mu, NULL);
  if (err == 0 && (err = pthread_cond_init(&a->cv, NULL)) != 0) pthread_mutex_destroy(&a->mu);
  if (err == 0 && (err = pthread_create(&a->thread, NULL, progress_main, a)) != 0) {
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
  }
  if (err != 0) {
    free(a);
    return WEFT_ERR(WEFT_ERR_SYSTEM, "rank %d: starting the progress thread: %s", c->rank,
                    strerror(err));
  }
  *out = a;
  return WEFT_SUCCESS;
}

static weft_result_t async_start(weft_comm_t *c) {
  return c->async ? WEFT_SUCCESS : async_create(c, &c->async);
}

static void enqueue(comm_async_t *a, weft_request_t *r) {
  pthread_mutex_lock(&a->mu);
  if (a->tail)
    a->tail->next = r;
  else
    a->head = r;
  a->tail = r;
  pthread_cond_signal(&a->cv);
  pthread_mutex_unlock(&a->mu);
}

/* Claims the progress thread's turn for a blocking call when nothing is queued or running, so
 * that the call runs inline on its caller's thread and the progress thread stays off the
 * communicator until async_release. */
static int async_claim_idle(comm_async_t *a) {
  pthread_mutex_lock(&a->mu);
  int idle = !a->head && !a->busy;
  if (idle) a->busy = 1;
  pthread_mutex_unlock(&a->mu);
  return idle;
}

static void async_release(comm_async_t *a) {
  pthread_mutex_lock(&a->mu);
  a->busy = 0;
  pthread_cond_signal(&a->cv);
  pthread_mutex_unlock(&a->mu);
}

weft_result_t comm_submit(weft_comm_t *c, const weft_call_t *call) {
  if (!call) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: call is NULL", c->rank);
  comm_async_t *a = c->async;
  if (!a) return comm_call(c, call);
  if (async_claim_idle(a)) {
    weft_result_t res = comm_call(c, call);
    async_release(a);
    return res;
  }
  weft_request_t r;
  WEFT_CHECK(request_init(&r, call, c->rank, c->nranks));
  enqueue(a, &r);
  pthread_mutex_lock(&r.mu);
  while (!r.done) pthread_cond_wait(&r.cv, &r.mu);
  pthread_mutex_unlock(&r.mu);
  return request_take(&r);
}

void comm_async_stop(weft_comm_t *c, int abortive) {
  comm_async_t *a = c->async;
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  weft_request_t *dropped = abortive ? a->head : NULL;
  if (abortive) a->head = a->tail = NULL;
  a->stop = 1;
  pthread_cond_signal(&a->cv);
  pthread_mutex_unlock(&a->mu);
  while (dropped) {
    weft_request_t *r = dropped;
    dropped = r->next; /* read before completing: the request may be freed right after */
    if (r->gate) {
      /* Nobody waits on it: release the user's stream and free it. */
      r->gate_ops->gate_open(r->gate);
      pthread_mutex_destroy(&r->mu);
      pthread_cond_destroy(&r->cv);
      free(r->owned);
      free(r);
      continue;
    }
    char msg[ERR_MSG_MAX];
    snprintf(msg, sizeof msg,
             "rank %d: %s (count %zu): the communicator was aborted before this operation ran "
             "[%s:%d]",
             c->rank, weft_coll_name(r->call.coll), r->call.count, __FILE__, __LINE__);
    request_complete(r, WEFT_ERR_ABORTED, msg);
  }
  pthread_join(a->thread, NULL);
  pthread_cond_destroy(&a->cv);
  pthread_mutex_destroy(&a->mu);
  free(a);
  c->async = NULL;
}

weft_result_t comm_submit_gated(weft_comm_t *c, const weft_call_t *call, dev_gate_t *gate) {
  weft_result_t res = async_start(c);
  weft_request_t *r = res == WEFT_SUCCESS ? malloc(sizeof *r) : NULL;
  if (res == WEFT_SUCCESS && !r)
    res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: out of memory for a request", c->rank);
  if (r && (res = request_init(r, call, c->rank, c->nranks)) != WEFT_SUCCESS) {
    free(r);
    r = NULL;
  }
  if (!r) {
    c->dev->ops->gate_open(gate);
    return res;
  }
  r->gate = gate;
  r->gate_ops = c->dev->ops;
  enqueue(c->async, r);
  return WEFT_SUCCESS;
}

static weft_result_t call_async(const weft_call_t *call, weft_comm_t *comm, weft_request_t **req) {
  if (!call) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: call is NULL", comm->rank);
  WEFT_CHECK(async_start(comm));
  weft_request_t *r = malloc(sizeof *r);
  if (!r) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: out of memory for a request", comm->rank);
  weft_result_t res = request_init(r, call, comm->rank, comm->nranks);
  if (res != WEFT_SUCCESS) {
    free(r);
    return res;
  }
  handles_lock();
  int listed = handles_add(r, HANDLE_REQUEST) == 0;
  handles_unlock();
  if (!listed) {
    (void)request_take(r);
    free(r);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: out of memory for a request", comm->rank);
  }
  r->comm = comm;
  enqueue(comm->async, r);
  *req = r;
  return WEFT_SUCCESS;
}

weft_result_t weft_call_async(const weft_call_t *call, weft_comm_t *comm, weft_request_t **req) {
  if (!req) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "request pointer is NULL");
  *req = NULL;
  WEFT_CHECK(comm_enter(comm, "weft_call_async", COMM_RUNS));
  weft_result_t res = call_async(call, comm, req);
  comm_leave(comm, COMM_RUNS);
  return res;
}

weft_result_t weft_p2p_group_async(const weft_p2p_op_t *ops, int nops, weft_comm_t *comm,
                                   weft_request_t **req) {
  weft_call_t k = {.coll = WEFT_COLL_P2P_GROUP, .ops = ops, .nops = nops, .root = -1};
  return weft_call_async(&k, comm, req);
}

weft_result_t weft_iall_reduce(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                               weft_op_t op, weft_comm_t *comm, weft_request_t **req) {
  weft_call_t k = {.coll = WEFT_COLL_ALL_REDUCE,
                   .sendbuf = sendbuf,
                   .recvbuf = recvbuf,
                   .count = count,
                   .dtype = dtype,
                   .op = op,
                   .root = -1,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call_async(&k, comm, req);
}

weft_result_t weft_irecv_any(void *buf, size_t count, weft_dtype_t dtype, int tag, int *source,
                             weft_comm_t *comm, weft_request_t **req) {
  weft_p2p_op_t op = {WEFT_COLL_RECV, buf, count, dtype, WEFT_ANY_SOURCE, tag};
  weft_call_t k = {
      .coll = WEFT_COLL_P2P_GROUP, .ops = &op, .nops = 1, .root = -1, .source = source};
  return weft_call_async(&k, comm, req);
}

weft_result_t weft_ibroadcast(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                              int root, weft_comm_t *comm, weft_request_t **req) {
  weft_call_t k = {.coll = WEFT_COLL_BROADCAST,
                   .sendbuf = sendbuf,
                   .recvbuf = recvbuf,
                   .count = count,
                   .dtype = dtype,
                   .op = WEFT_SUM,
                   .root = root,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call_async(&k, comm, req);
}

/* A request is live from weft_call_async until the weft_test or weft_wait that completes it
 * frees it. One thread at a time waits on it: the one that frees it must be the last to touch it.
 * claim refuses a request that is not live (completed already, or never issued) or that another
 * thread waits on; release gives the claim back, retire takes the request out of the table. */
static weft_result_t request_claim(weft_request_t *r, const char *op) {
  weft_result_t res = WEFT_SUCCESS;
  handles_lock();
  if (!handles_live(r, HANDLE_REQUEST))
    res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                   "%s: the request is not live: a weft_wait or weft_test that completed it freed "
                   "it already, or it never came from an asynchronous call",
                   op);
  else if (r->waited_on)
    res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                   "rank %d: %s: another thread is waiting on this request (%s, count %zu); one "
                   "thread at a time may wait on or test a request",
                   r->rank, op, weft_coll_name(r->call.coll), r->call.count);
  else
    r->waited_on = 1;
  handles_unlock();
  return res;
}

static void request_release(weft_request_t *r) {
  handles_lock();
  r->waited_on = 0;
  handles_unlock();
}

/* Completes a finished request for the caller: its result, and the request freed. */
static weft_result_t request_retire(weft_request_t *r) {
  handles_lock();
  handles_remove(r);
  handles_unlock();
  weft_result_t res = request_take(r);
  free(r);
  return res;
}

weft_result_t weft_test(weft_request_t *req, int *done) {
  if (!done) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "weft_test: done pointer is NULL");
  *done = 0;
  if (!req) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "weft_test: request is NULL");
  WEFT_CHECK(request_claim(req, "weft_test"));
  pthread_mutex_lock(&req->mu);
  int finished = req->done;
  pthread_mutex_unlock(&req->mu);
  if (!finished) {
    request_release(req);
    return WEFT_SUCCESS;
  }
  *done = 1;
  return request_retire(req);
}

/* Absolute CLOCK_MONOTONIC time timeout_ms from now, for pthread_cond_timedwait. */
static struct timespec deadline_in(int timeout_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += timeout_ms / 1000;
  ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* A request waited on with no limit that is still first in the queue while the progress thread
 * is idle runs on the waiting thread: handing it to the thread and back costs a wake-up each way
 * (35 us a request, results/2026-11-26-torch2-latency), most of a small call's time, and the
 * waiter would only sleep meanwhile. Taking it from the head with `busy` set, under the queue's
 * mutex, is what the progress thread itself does, so issue order holds and nothing else runs on
 * the communicator meanwhile (a blocking call issued meanwhile queues behind it). The
 * communicator is entered as a sharer first: that it is still live is checked in the handles
 * table, and a destroy or abort waits for the run to leave; the issuing thread may go on issuing.
 * A wait with a time limit leaves the request to the thread: a run cannot stop at the limit. */
static void run_by_waiter(weft_request_t *r) {
  pthread_mutex_lock(&r->mu);
  int done = r->done;
  pthread_mutex_unlock(&r->mu);
  weft_comm_t *c = r->comm;
  if (done || !c || !comm_try_share(c)) return;
  comm_async_t *a = c->async;
  int mine = 0;
  if (a) {
    pthread_mutex_lock(&a->mu);
    mine = a->head == r && !a->busy;
    if (mine) {
      a->head = r->next;
      if (!a->head) a->tail = NULL;
      a->busy = 1;
      a->waiter_runs++;
    }
    pthread_mutex_unlock(&a->mu);
  }
  if (mine) {
    weft_result_t res = comm_aborted(c) ? aborted_before_running(c, r) : comm_call(c, &r->call);
    request_complete(r, res, err_last());
    async_release(a);
  }
  comm_leave(c, COMM_SHARES);
}

long comm_async_waiter_runs(const weft_comm_t *c) {
  comm_async_t *a = c->async;
  if (!a) return 0;
  pthread_mutex_lock(&a->mu);
  long n = a->waiter_runs;
  pthread_mutex_unlock(&a->mu);
  return n;
}

weft_result_t weft_wait(weft_request_t *req, int timeout_ms) {
  if (!req) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "weft_wait: request is NULL");
  WEFT_CHECK(request_claim(req, "weft_wait"));
  if (timeout_ms < 0) run_by_waiter(req);
  struct timespec deadline = deadline_in(timeout_ms < 0 ? 0 : timeout_ms);
  int timed_out = 0;
  pthread_mutex_lock(&req->mu);
  while (!req->done && !timed_out) {
    if (timeout_ms < 0)
      pthread_cond_wait(&req->cv, &req->mu);
    else
      timed_out = pthread_cond_timedwait(&req->cv, &req->mu, &deadline) == ETIMEDOUT;
  }
  int finished = req->done;
  pthread_mutex_unlock(&req->mu);
  if (!finished) {
    request_release(req);
    return WEFT_ERR(WEFT_ERR_TIMEOUT,
                    "rank %d: weft_wait: %s (count %zu) not complete after %d ms; the request "
                    "stays valid: wait or test it again",
                    req->rank, weft_coll_name(req->call.coll), req->call.count, timeout_ms);
  }
  return request_retire(req);
}
