/* resident.c -- device calls run as one device program (kernels/devprog.h) that the engine
 * launches, instead of the executor's host-driven slices.
 *
 * A call runs here when every rank of the call takes the same path, so the choice rests only on
 * what all ranks share: WEFT_DEVICE_RESIDENT, the engine's ability to launch programs, every peer
 * reached through cuda_ipc (one host; a communicator across hosts stages through the host and
 * keeps the executor), at most 33 ranks (a linear root or a pairwise all_to_all then stays within
 * DP_MAX_LINKS links), and an algorithm whose schedule every rank compiles alike and whose runs
 * cannot wait on themselves with the slots a link has (collectives/devcompile.h; the
 * hierarchical all_reduce is left out: its cells put more messages ahead of its first forward
 * than two slots hold, tests/collectives:devrun_test shows it).
 *
 * The run: the call descriptions are exchanged and checked over the host connections first, as
 * the executor does (ranks that disagree fail before any data moves), then the program is
 * compiled from the same schedule the executor would run and launched on the executor's device
 * queue, with the connections' device links (transport.h device_link) and the communicator's
 * abort word, and the call waits for the queue. A run that times out or is aborted fails the
 * queue with the step, peer and round it waited on; the communicator is then failed, since its
 * links' counters no longer agree with the peers'. */
#include <string.h>

#include "collectives/devcompile.h"
#include "comm/comm.h"
#include "kernels/devloop.h"

/* The rows whose schedules compile on every rank (devcompile.h); Rabenseifner's steps wait whole
 * (store and forward), which the device loop does not take: the executor runs them. */
static int resident_algorithm(weft_coll_t coll, weft_algo_t algo) {
  switch (coll) {
    case WEFT_COLL_ALL_REDUCE:
      return algo == WEFT_ALGO_RING || algo == WEFT_ALGO_TREE || algo == WEFT_ALGO_DOUBLE_TREE ||
             algo == WEFT_ALGO_RECURSIVE_DOUBLING;
    case WEFT_COLL_BROADCAST:
    case WEFT_COLL_REDUCE:
      return algo == WEFT_ALGO_RING || algo == WEFT_ALGO_TREE;
    case WEFT_COLL_ALL_GATHER:
      return algo == WEFT_ALGO_RING || algo == WEFT_ALGO_RECURSIVE_DOUBLING;
    case WEFT_COLL_REDUCE_SCATTER:
      return algo == WEFT_ALGO_RING;
    case WEFT_COLL_GATHER:
    case WEFT_COLL_SCATTER:
      return algo == WEFT_ALGO_LINEAR;
    case WEFT_COLL_ALL_TO_ALL:
      return algo == WEFT_ALGO_PAIRWISE;
    default:
      return 0;
  }
}

int comm_resident_eligible(const weft_comm_t *c, weft_coll_t coll, weft_algo_t algo) {
  if (!c->config.device_resident || !c->dev || !c->dev->ops->launch) return 0;
  if (c->nranks < 2 || c->nranks > 33 || !resident_algorithm(coll, algo)) return 0;
  transport_t *ipc = c->transports[COMM_CUDA_IPC];
  if (!ipc || !ipc->ops->device_link) return 0;
  for (int p = 0; p < c->nranks; p++)
    if (p != c->rank && c->via_dev[p] != COMM_CUDA_IPC) return 0;
  return 1;
}

/* The communicator's device scratch for programs that need one, grown as needed. */
static weft_result_t resident_scratch(weft_comm_t *c, size_t bytes, char **out) {
  comm_resident_t *r = &c->resident;
  if (bytes > r->scratch_bytes) {
    if (r->scratch) c->dev->ops->release(c->dev, r->scratch, 0);
    r->scratch = NULL;
    r->scratch_bytes = 0;
    WEFT_CHECK_CTX(c->dev->ops->alloc(c->dev, bytes, 0, &r->scratch),
                   "rank %d: device scratch of %zu bytes for a device program", c->rank, bytes);
    r->scratch_bytes = bytes;
  }
  *out = (char *)r->scratch;
  return WEFT_SUCCESS;
}

/* The call descriptions of the schedule, alone, over the host connections. */
static weft_result_t check_descriptions(weft_comm_t *c, const schedule_t *s, const coll_desc_t *d) {
  if (s->hdr_to < 0 && s->hdr_from < 0) return WEFT_SUCCESS;
  schedule_t hdr;
  sched_init(&hdr, 0, 0);
  hdr.hdr_to = s->hdr_to;
  hdr.hdr_from = s->hdr_from;
  weft_result_t res = exec_run(&c->exec, &hdr, d, NULL, NULL, 0);
  sched_free(&hdr);
  return res;
}

static const char *waited_for(const dl_status_t *st) {
  return st->waiting_for ? "a free slot on its link to" : "a message from";
}

/* Waits for the launched run, in slices: the run's own waits are bounded (timeout_ns without
 * progress, the stop word), however long the data takes. Between slices it is the run's
 * watchdog: an abort of the communicator, or a peer whose process is gone, sets the stop word
 * (*dead names that peer), and the run ends at its next wait. Returns once the run has ended and
 * the queue has let go of everything the run reads. */
static weft_result_t watch(weft_comm_t *c, const dp_program_t *prog, conn_t *const *conns,
                           int *stop, const dl_status_t *status, int *dead) {
  exec_ctx_t *x = &c->exec;
  for (;;) {
    weft_result_t res = x->dev->ops->drain(x->queue, 100);
    if (res != WEFT_ERR_TIMEOUT) return res;
    /* The run ended (it failed the queue, hence the sticky timeout): let the queue finish the
     * operation, which still reads the program to name where it stopped. */
    if (__atomic_load_n(&status->code, __ATOMIC_ACQUIRE) != -1)
      return x->dev->ops->drain(x->queue, c->config.timeout_ms);
    err_clear();
    /* The run reads the word atomically from its own thread: store it so. */
    if (__atomic_load_n(stop, __ATOMIC_RELAXED)) continue;
    if (comm_aborted(c)) __atomic_store_n(stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < prog->nlinks && *dead < 0 && !comm_aborted(c); i++)
      if (conns[i]->ops->peer_alive && !conns[i]->ops->peer_alive(conns[i])) {
        *dead = prog->links[i].peer;
        __atomic_store_n(stop, 1, __ATOMIC_RELEASE);
      }
  }
}

weft_result_t comm_run_resident(weft_comm_t *c, const schedule_t *s, const coll_desc_t *d,
                                const void *sendbuf, void *recvbuf) {
  WEFT_CHECK(check_descriptions(c, s, d));
  size_t esize = weft_dtype_size(d->dtype);
  dp_program_t prog;
  weft_result_t res =
      dp_compile(s, d->dtype, d->op, c->nranks, c->dev_config.slice_bytes / esize * esize, &prog);
  if (res != WEFT_SUCCESS)
    return err_context(WEFT_ERR_INTERNAL,
                       "rank %d: %s (%s): a shape chosen for the device loop did not compile",
                       c->rank, weft_coll_name(d->kind), weft_algo_name(d->algo));
  /* Every connection first: a rank publishes the link it receives on when it connects, and a
   * sender's view waits for that, so asking for views while connecting would have each rank wait
   * for a neighbour that is itself still waiting further round the ring. */
  dl_link_view_t views[DP_MAX_LINKS];
  conn_t *conns[DP_MAX_LINKS];
  for (int i = 0; i < prog.nlinks && res == WEFT_SUCCESS; i++)
    res = comm_get_conn(c, prog.links[i].peer, 1, &conns[i]);
  for (int i = 0; i < prog.nlinks && res == WEFT_SUCCESS; i++) {
    conn_t *conn = conns[i];
    const char *dir = prog.links[i].dir == DP_LINK_SEND ? "to" : "from";
    res = conn->ops->device_link(conn, prog.links[i].dir, &views[i]);
    if (res != WEFT_SUCCESS)
      err_context(res, "rank %d: the device link %s rank %d", c->rank, dir, prog.links[i].peer);
    else if (views[i].slot_bytes < prog.slice_elems * esize)
      res = WEFT_ERR(WEFT_ERR_INTERNAL,
                     "rank %d: the device link %s rank %d has %llu-byte slots, the program "
                     "%llu-byte messages",
                     c->rank, dir, prog.links[i].peer, (unsigned long long)views[i].slot_bytes,
                     (unsigned long long)(prog.slice_elems * esize));
  }
  /* The run stops at this word: set by the watch below when the communicator is aborted or a
   * peer's process is gone. */
  int stop = 0;
  dl_run_t run = {.prog = &prog,
                  .links = views,
                  .bufs = {(char *)sendbuf, (char *)recvbuf, NULL},
                  .abort = (const volatile int *)&stop,
                  .timeout_ns = (uint64_t)c->config.timeout_ms * 1000000u};
  if (res == WEFT_SUCCESS && prog.buf_count[DP_SCRATCH] > 0)
    res = resident_scratch(c, prog.buf_count[DP_SCRATCH] * esize, &run.bufs[DP_SCRATCH]);
  dev_queue_t *q = NULL;
  if (res == WEFT_SUCCESS) res = exec_device_queue(&c->exec, &q);
  dl_status_t status = {-1, -1, -1, 0, 0};
  if (res == WEFT_SUCCESS) res = c->dev->ops->launch(q, &run, &status);
  int dead = -1;
  if (res == WEFT_SUCCESS) res = watch(c, &prog, conns, &stop, &status, &dead);
  if (res != WEFT_SUCCESS && dead >= 0)
    res = WEFT_ERR(WEFT_ERR_REMOTE,
                   "rank %d: %s #%llu: rank %d's process is gone (the device program was stopped)",
                   c->rank, weft_coll_name(d->kind), (unsigned long long)d->seq, dead);
  else if (res == WEFT_SUCCESS && status.code != DL_DONE)
    res = WEFT_ERR(status.code == DL_ABORTED ? WEFT_ERR_ABORTED : WEFT_ERR_TIMEOUT,
                   "rank %d: device program step %d waited for %s rank %d (round %llu)", c->rank,
                   status.step, waited_for(&status),
                   status.link >= 0 ? prog.links[status.link].peer : -1,
                   (unsigned long long)status.round);
  if (res == WEFT_SUCCESS) c->resident.calls++;
  dp_free(&prog);
  return res;
}

void comm_resident_release(weft_comm_t *c) {
  if (c->resident.scratch && c->dev) c->dev->ops->release(c->dev, c->resident.scratch, 0);
  memset(&c->resident, 0, sizeof c->resident);
}
