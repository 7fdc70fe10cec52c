/* collectives_api.c -- every public operation goes through comm_call(): argument checks, the
 * algorithm choice, the schedule from the algorithm's builder, then the executor. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "collectives/algo_select.h"
#include "collectives/executor.h"
#include "collectives/msccl_import.h"
#include "comm/comm.h"
#include "common/clock.h"

static int is_reducing(weft_coll_t c) {
  return c == WEFT_COLL_ALL_REDUCE || c == WEFT_COLL_REDUCE || c == WEFT_COLL_REDUCE_SCATTER;
}

static int is_rooted(weft_coll_t c) {
  return c == WEFT_COLL_BROADCAST || c == WEFT_COLL_REDUCE || c == WEFT_COLL_GATHER ||
         c == WEFT_COLL_SCATTER || c == WEFT_COLL_SEND || c == WEFT_COLL_RECV;
}

/* The elements of a buffer that all_to_allv's counts and displacements reach. */
static size_t extent(const size_t *counts, const size_t *displs, int n) {
  size_t end = 0;
  for (int j = 0; j < n; j++)
    if (counts[j] && displs[j] + counts[j] > end) end = displs[j] + counts[j];
  return end;
}

/* Buffer sizes (elements) and which buffers this rank must pass, per weft.h. */
typedef struct {
  size_t send_count, recv_count;
  int needs_send, needs_recv;
  int in_place;
} call_shape_t;

static void shape_of(const weft_comm_t *c, const weft_call_t *k, size_t esize, call_shape_t *sh) {
  size_t n = k->count, p = (size_t)c->nranks, me = (size_t)c->rank;
  int root = c->rank == k->root;
  const char *sb = k->sendbuf, *rb = k->recvbuf;
  *sh = (call_shape_t){n, n, 1, 1, sb == rb};
  switch (k->coll) {
    case WEFT_COLL_ALL_REDUCE: break;
    case WEFT_COLL_BROADCAST: sh->needs_send = root; break;
    case WEFT_COLL_REDUCE: sh->needs_recv = root; break;
    case WEFT_COLL_ALL_GATHER:
      sh->recv_count = n * p;
      sh->in_place = rb && sb == rb + me * n * esize;
      break;
    case WEFT_COLL_REDUCE_SCATTER:
      sh->send_count = n * p;
      sh->in_place = sb && rb == sb + me * n * esize;
      break;
    case WEFT_COLL_GATHER: /* the other ranks pass no recvbuf */
      *sh = (call_shape_t){n, root ? n * p : 0, 1, root, root && rb && sb == rb + me * n * esize};
      break;
    case WEFT_COLL_SCATTER: /* the other ranks pass no sendbuf */
      *sh = (call_shape_t){root ? n * p : 0, n, root, 1, root && sb && rb == sb + me * n * esize};
      break;
    case WEFT_COLL_ALL_TO_ALL: /* no in-place form: the overlap check rejects equal buffers */
      *sh = (call_shape_t){n * p, n * p, 1, 1, 0};
      break;
    case WEFT_COLL_ALL_TO_ALLV: /* check_call has checked the arrays */
      sh->send_count = extent(k->send_counts, k->send_displs, c->nranks);
      sh->recv_count = extent(k->recv_counts, k->recv_displs, c->nranks);
      *sh =
          (call_shape_t){sh->send_count, sh->recv_count, sh->send_count > 0, sh->recv_count > 0, 0};
      break;
    case WEFT_COLL_BARRIER: *sh = (call_shape_t){0, 0, 0, 0, 0}; break;
    case WEFT_COLL_SEND: *sh = (call_shape_t){n, 0, 1, 0, 0}; break;
    case WEFT_COLL_RECV: *sh = (call_shape_t){0, n, 0, 1, 0}; break;
    default: break;
  }
}

/* all_to_allv's arrays: present, in range, and its own part the same both ways (the peers' parts
 * are checked against the peers' own counts by the schedule's tokens). */
static weft_result_t check_counts(const weft_comm_t *c, const weft_call_t *k, size_t esize) {
  const size_t *arrays[4] = {k->send_counts, k->send_displs, k->recv_counts, k->recv_displs};
  const char *names[4] = {"send_counts", "send_displs", "recv_counts", "recv_displs"};
  for (int i = 0; i < 4; i++)
    if (!arrays[i])
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: all_to_allv: %s is NULL", c->rank,
                      names[i]);
  for (int j = 0; j < c->nranks; j++)
    for (int i = 0; i < 4; i += 2)
      if (arrays[i + 1][j] > SIZE_MAX / esize - arrays[i][j])
        return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                        "rank %d: all_to_allv: %s[%d] + %s[%d] overflows", c->rank, names[i + 1], j,
                        names[i], j);
  if (k->send_counts[c->rank] != k->recv_counts[c->rank])
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: all_to_allv: sends itself %zu elements (send_counts[%d]) but expects "
                    "%zu (recv_counts[%d])",
                    c->rank, k->send_counts[c->rank], c->rank, k->recv_counts[c->rank], c->rank);
  return WEFT_SUCCESS;
}

static weft_result_t check_call(const weft_comm_t *c, const weft_call_t *k, call_shape_t *sh) {
  WEFT_CHECK(comm_check_usable(c));
  if (!k) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: call is NULL", c->rank);
  if ((unsigned)k->coll >= WEFT_NUM_COLLS)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: unknown collective %d", c->rank,
                    (int)k->coll);
  const char *name = weft_coll_name(k->coll);
  int rank = c->rank;
  if (k->coll == WEFT_COLL_BARRIER) {
    *sh = (call_shape_t){0, 0, 0, 0, 0};
    return WEFT_SUCCESS;
  }
  size_t esize = weft_dtype_size(k->dtype);
  if (esize == 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: %s: unknown dtype %d (valid: 0..%d)", rank,
                    name, (int)k->dtype, WEFT_NUM_DTYPES - 1);
  if (is_reducing(k->coll) && (unsigned)k->op >= WEFT_NUM_OPS && k->op != WEFT_PREMUL_SUM)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: %s: unknown op %d (valid: 0..%d: sum prod min max avg premul_sum)",
                    rank, name, (int)k->op, WEFT_PREMUL_SUM);
  if (is_reducing(k->coll) && k->op == WEFT_PREMUL_SUM && !k->scalar)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: %s: op premul_sum needs its factor: weft_call_t's scalar is NULL",
                    rank, name);
  if ((unsigned)k->algo >= WEFT_NUM_ALGOS)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: %s: unknown algorithm %d", rank, name,
                    (int)k->algo);
  int any_source = k->coll == WEFT_COLL_RECV && k->root == WEFT_ANY_SOURCE;
  if (is_rooted(k->coll) && !any_source && (k->root < 0 || k->root >= c->nranks))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: %s: %s %d is out of range for a world of size %d", rank, name,
                    k->coll == WEFT_COLL_SEND || k->coll == WEFT_COLL_RECV ? "peer" : "root",
                    k->root, c->nranks);
  if ((k->coll == WEFT_COLL_SEND || k->coll == WEFT_COLL_RECV) && k->root == rank)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: %s to itself", rank, name);
  if (k->count > SIZE_MAX / esize / (size_t)c->nranks)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: %s: count %zu overflows", rank, name,
                    k->count);
  if (k->coll == WEFT_COLL_ALL_TO_ALLV) WEFT_CHECK(check_counts(c, k, esize));
  shape_of(c, k, esize, sh);
  if (sh->send_count == 0 && sh->recv_count == 0) return WEFT_SUCCESS;
  if (sh->needs_send && !k->sendbuf)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: %s: sendbuf is NULL (%zu elements)", rank,
                    name, sh->send_count);
  if (sh->needs_recv && !k->recvbuf)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: %s: recvbuf is NULL (%zu elements)", rank,
                    name, sh->recv_count);
  if (sh->needs_send && sh->needs_recv && !sh->in_place) {
    uintptr_t s = (uintptr_t)k->sendbuf, r = (uintptr_t)k->recvbuf;
    uintptr_t sn = sh->send_count * esize, rn = sh->recv_count * esize;
    if (s < r + rn && r < s + sn)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "rank %d: %s: sendbuf and recvbuf overlap without being in place (see "
                      "weft.h for this collective's in-place layout)",
                      rank, name);
  }
  return WEFT_SUCCESS;
}

/* One rank: nothing travels; the output is the input (avg over one rank included). */
static weft_result_t run_alone(weft_comm_t *c, const weft_call_t *k, const call_shape_t *sh,
                               size_t esize, int device) {
  if (k->coll == WEFT_COLL_BARRIER || k->coll == WEFT_COLL_SEND || k->coll == WEFT_COLL_RECV ||
      sh->in_place || (!k->count && k->coll != WEFT_COLL_ALL_TO_ALLV))
    return WEFT_SUCCESS;
  size_t bytes = k->count * esize;
  const char *from = k->sendbuf;
  char *to = k->recvbuf;
  if (k->coll == WEFT_COLL_ALL_TO_ALLV) { /* its one part, at its displacements */
    bytes = k->recv_counts[0] * esize;
    if (bytes == 0) return WEFT_SUCCESS;
    from += k->send_displs[0] * esize;
    to += k->recv_displs[0] * esize;
  }
  if (!device) {
    memmove(to, from, bytes);
    return WEFT_SUCCESS;
  }
  dev_queue_t *q;
  WEFT_CHECK(exec_device_queue(&c->exec, &q));
  WEFT_CHECK(c->dev->ops->copy(q, to, from, bytes));
  return c->dev->ops->drain(q, c->config.timeout_ms);
}

/* The buffers this rank passes for the call, by role, for the memory-kind check. */
static const char *kind_name(dev_mem_t k) { return k == DEV_MEM_DEVICE ? "device" : "host"; }

weft_result_t comm_buffers_kind(weft_comm_t *c, const weft_call_t *k, int *device) {
  *device = 0;
  if (!c->dev || !k || k->coll == WEFT_COLL_BARRIER) return WEFT_SUCCESS;
  call_shape_t sh;
  size_t esize = weft_dtype_size(k->dtype);
  if (esize == 0) return WEFT_SUCCESS; /* check_call reports it */
  if (k->coll == WEFT_COLL_ALL_TO_ALLV && !k->send_counts) return WEFT_SUCCESS; /* ditto */
  shape_of(c, k, esize, &sh);
  if (sh.send_count == 0 && sh.recv_count == 0) return WEFT_SUCCESS;
  const void *bufs[2] = {sh.needs_send ? k->sendbuf : NULL, sh.needs_recv ? k->recvbuf : NULL};
  const char *roles[2] = {"sendbuf", "recvbuf"};
  dev_mem_t kinds[2] = {DEV_MEM_HOST, DEV_MEM_HOST};
  int devs[2] = {-1, -1};
  int first = -1;
  for (int i = 0; i < 2; i++) {
    if (!bufs[i]) continue;
    WEFT_CHECK_CTX(c->dev->ops->mem_kind(c->dev, bufs[i], &kinds[i], &devs[i]),
                   "rank %d: %s: looking up %s", c->rank, weft_coll_name(k->coll), roles[i]);
    if (first < 0) {
      first = i;
      continue;
    }
    if (kinds[i] != kinds[first])
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "rank %d: %s: %s is %s memory but %s is %s memory: pass both on the device "
                      "(with a stream) or both on the host",
                      c->rank, weft_coll_name(k->coll), roles[first], kind_name(kinds[first]),
                      roles[i], kind_name(kinds[i]));
  }
  if (first < 0 || kinds[first] != DEV_MEM_DEVICE) return WEFT_SUCCESS;
  for (int i = 0; i < 2; i++)
    if (bufs[i] && devs[i] != c->dev->device)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "rank %d: %s: %s is on device %d but this communicator uses device %d (the "
                      "current device when it was created)",
                      c->rank, weft_coll_name(k->coll), roles[i], devs[i], c->dev->device);
  *device = 1;
  return WEFT_SUCCESS;
}

/* The sequence number that travels in the call description: collectives count calls on the
 * communicator; send and recv count messages between the two ranks only, since the others take
 * no part. */
static uint64_t *seq_counter(weft_comm_t *c, const weft_call_t *k) {
  if (k->coll == WEFT_COLL_SEND) return &c->sent_to[k->root];
  if (k->coll == WEFT_COLL_RECV) return &c->recv_from[k->root];
  return &c->seq;
}

/* The cost model that prices a call: device buffers travel over other transports (cuda_ipc,
 * staged, GPUDirect) than host ones. */
static const cost_model_t *model_for(const weft_comm_t *c, int device) {
  return device ? &c->dev_model : &c->model;
}

/* The algorithm a checked call runs and the size the cost model prices (*bytes, if asked). */
static weft_result_t choose(weft_comm_t *c, const weft_call_t *k, const call_shape_t *sh,
                            size_t esize, int device, const algo_entry_t **algo,
                            double *bytes_out) {
  /* Only a call remembers its choice: weft_call_estimate may run beside a call on another
   * thread, so it neither reads nor writes last_choice (it asks for *bytes, a call does not). */
  int cached = bytes_out == NULL && (unsigned)k->coll < WEFT_NUM_COLLS;
  double bytes = (double)(k->coll == WEFT_COLL_ALL_GATHER ? sh->recv_count : sh->send_count) *
                 (double)esize;
  if (k->coll == WEFT_COLL_BROADCAST || k->coll == WEFT_COLL_RECV)
    bytes = (double)k->count * (double)esize;
  /* The whole buffer at the root, as nccl-tests' size; the same on every rank, which must all
   * choose alike although only the root holds it. */
  if (k->coll == WEFT_COLL_GATHER || k->coll == WEFT_COLL_SCATTER)
    bytes = (double)k->count * (double)c->nranks * (double)esize;
  if (bytes_out) *bytes_out = bytes;
  const cost_model_t *m = model_for(c, device);
  struct weft_comm_choice *last = cached ? &c->last_choice[k->coll] : NULL;
  if (last && last->valid && last->per_call == k->algo &&
      last->device == device && last->bytes == bytes && memcmp(&last->model, m, sizeof *m) == 0) {
    *algo = last->entry;
    return WEFT_SUCCESS;
  }
  algo_topo_t topo = {c->node_of, c->nnodes, c->config.hierarchy};
  WEFT_CHECK(algo_choose(k->coll, k->algo, &c->algo_policy, m, c->nranks, bytes, &topo, algo));
  if (last) *last = (struct weft_comm_choice){1, device, k->algo, bytes, *m, *algo};
  return WEFT_SUCCESS;
}

weft_result_t weft_call_estimate(const weft_call_t *call, weft_comm_t *comm, weft_algo_t *algo,
                                 double *seconds) {
  if (!algo || !seconds)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "weft_call_estimate: algo or seconds is NULL");
  *algo = WEFT_ALGO_AUTO;
  *seconds = 0;
  WEFT_CHECK(comm_enter(comm, "weft_call_estimate", COMM_SHARES));
  weft_result_t res = WEFT_SUCCESS;
  const cost_model_t *m = &comm->model;
  if (call && call->coll == WEFT_COLL_P2P_GROUP) {
    /* Sends and receives travel at once: one latency, and the largest direction's bytes. */
    res = comm_check_group(comm, call->ops, call->nops);
    double sent = 0, received = 0;
    for (int i = 0; res == WEFT_SUCCESS && i < call->nops; i++) {
      double b = (double)call->ops[i].count * (double)weft_dtype_size(call->ops[i].dtype);
      if (call->ops[i].kind == WEFT_COLL_SEND)
        sent += b;
      else
        received += b;
    }
    if (res == WEFT_SUCCESS && call->nops > 0)
      *seconds = m->alpha + m->beta * (sent > received ? sent : received);
  } else {
    call_shape_t sh = {0, 0, 0, 0, 0};
    res = check_call(comm, call, &sh);
    if (res == WEFT_SUCCESS && (call->coll == WEFT_COLL_SEND || call->coll == WEFT_COLL_RECV)) {
      *seconds = m->alpha + m->beta * (double)call->count * (double)weft_dtype_size(call->dtype);
    } else if (res == WEFT_SUCCESS && comm->nranks > 1) {
      size_t esize = call->coll == WEFT_COLL_BARRIER ? 1 : weft_dtype_size(call->dtype);
      const algo_entry_t *entry;
      double bytes = 0;
      int device = 0;
      res = comm_buffers_kind(comm, call, &device);
      m = model_for(comm, device);
      if (res == WEFT_SUCCESS) res = choose(comm, call, &sh, esize, device, &entry, &bytes);
      if (res == WEFT_SUCCESS) {
        *algo = entry->algo;
        /* The price the choice compared, the wake term of ranks sharing CPUs included. */
        *seconds = algo_predicted(entry, m, comm->nranks, bytes);
      }
      /* premul_sum scales the input first: one more pass over it. */
      if (res == WEFT_SUCCESS && is_reducing(call->coll) && call->op == WEFT_PREMUL_SUM)
        *seconds += m->gamma * (double)sh.send_count * (double)esize;
    }
  }
  comm_leave(comm, COMM_SHARES);
  return res;
}

/* Whether a schedule built from `a` is the one `b` would build (the builders read nothing else).
 * all_to_allv's arrays are the caller's and may change in place: those calls are never reused. */
static int same_args(const sched_args_t *a, const sched_args_t *b) {
  return a->coll == b->coll && a->rank == b->rank && a->nranks == b->nranks &&
         a->count == b->count && a->root == b->root && a->in_place == b->in_place &&
         a->node_of == b->node_of && a->nnodes == b->nnodes && a->round_count == b->round_count &&
         !a->send_counts && !b->send_counts && !a->p2p && !b->p2p;
}

/* The schedule of a call: the previous call's of this collective when built from the same
 * arguments by the same algorithm, else built now, validated and kept in its place. */
static weft_result_t schedule_for(weft_comm_t *c, const algo_entry_t *algo, const sched_args_t *a,
                                  const schedule_t **out) {
  struct weft_comm_sched *last = &c->last_sched[a->coll];
  if (last->valid && last->algo == algo && same_args(&last->args, a)) {
    *out = &last->s;
    return WEFT_SUCCESS;
  }
  if (last->valid) sched_free(&last->s);
  exec_plan_free(&last->plan);
  last->valid = 0;
  weft_result_t res = algo->build(&last->s, a);
  if (res == WEFT_SUCCESS) res = sched_validate(&last->s, c->nranks);
  if (res != WEFT_SUCCESS) {
    sched_free(&last->s);
    return res;
  }
  last->valid = 1;
  last->algo = algo;
  last->args = *a;
  *out = &last->s;
  return WEFT_SUCCESS;
}

void comm_sched_cache_release(weft_comm_t *c) {
  for (int i = 0; i < WEFT_NUM_COLLS; i++) {
    if (c->last_sched[i].valid) sched_free(&c->last_sched[i].s);
    exec_plan_free(&c->last_sched[i].plan);
  }
  memset(c->last_sched, 0, sizeof c->last_sched);
}

weft_result_t comm_call(weft_comm_t *c, const weft_call_t *k) {
  call_shape_t sh = {0, 0, 0, 0, 0};
  if (k && k->coll == WEFT_COLL_P2P_GROUP) {
    /* `source` only for a lone receive from any source: callers built before it existed never
     * make one, and their weft_call_t ends before it. */
    int lone_any = k->nops == 1 && k->ops && k->ops[0].kind == WEFT_COLL_RECV &&
                   k->ops[0].peer == WEFT_ANY_SOURCE;
    return comm_p2p_group(c, k->ops, k->nops, lone_any ? k->source : NULL);
  }
  WEFT_CHECK(check_call(c, k, &sh));
  if (k->coll == WEFT_COLL_SEND || k->coll == WEFT_COLL_RECV) return comm_p2p_single(c, k);
  int device = 0;
  WEFT_CHECK(comm_buffers_kind(c, k, &device));
  if (is_reducing(k->coll) && k->op == WEFT_PREMUL_SUM)
    return comm_run_premul(c, k, sh.send_count, device);
  size_t esize = k->coll == WEFT_COLL_BARRIER ? 1 : weft_dtype_size(k->dtype);
  uint64_t *seq = seq_counter(c, k);
  if (c->nranks == 1) {
    (*seq)++;
    return run_alone(c, k, &sh, esize, device);
  }
  const algo_entry_t *algo;
  weft_result_t res = choose(c, k, &sh, esize, device, &algo, NULL);
  if (res != WEFT_SUCCESS) return err_context(res, "rank %d", c->rank);
  /* A loaded program (algo_file.c) runs its collective unless the call names an algorithm; an
   * average needs the division where a sum is final, which a program does not mark. */
  int from_file = 0;
  if (c->algo_prog && k->algo == WEFT_ALGO_AUTO && !(is_reducing(k->coll) && k->op == WEFT_AVG)) {
    res = msccl_applies(c->algo_prog, k->coll, c->nranks, k->count, &from_file);
    if (res != WEFT_SUCCESS) return err_context(res, "rank %d", c->rank);
  }
  /* Device calls slice as their connections' slots do (config_for_device). */
  const weft_config_t *cfg = device ? &c->dev_config : &c->config;
  size_t slice_elems = cfg->slice_bytes / esize ? cfg->slice_bytes / esize : 1;
  sched_args_t args = {.coll = k->coll,
                       .rank = c->rank,
                       .nranks = c->nranks,
                       .count = k->count,
                       .root = k->root,
                       .in_place = sh.in_place,
                       .node_of = c->node_of,
                       .nnodes = c->nnodes,
                       .round_count = sched_round_count(slice_elems, cfg->shm_slots),
                       .send_counts = k->send_counts,
                       .send_displs = k->send_displs,
                       .recv_counts = k->recv_counts,
                       .recv_displs = k->recv_displs};
  /* all_to_allv's count is unused (the ranks' totals differ; the tokens check the pairs). */
  size_t count = k->coll == WEFT_COLL_ALL_TO_ALLV ? 0 : k->count;
  coll_desc_t d = {k->coll,
                   algo->algo,
                   *seq,
                   count,
                   k->dtype,
                   is_reducing(k->coll) ? k->op : WEFT_SUM,
                   is_rooted(k->coll) ? k->root : -1};
  schedule_t own = {0}; /* a schedule built for this call alone */
  const schedule_t *s = &own;
  int64_t start = c->config.debug >= 2 ? clock_now_ns() : 0;
  if (from_file) d.algo = WEFT_ALGO_AUTO; /* "auto" in messages: the program's, on every rank */
  if (from_file)
    res = msccl_build(c->algo_prog, &own, &args);
  else if (k->coll == WEFT_COLL_ALL_TO_ALLV)
    res = algo->build(&own, &args);
  else
    res = schedule_for(c, algo, &args, &s);
  if (res == WEFT_SUCCESS && device && !from_file && comm_resident_eligible(c, k->coll, d.algo))
    res = comm_run_resident(c, s, &d, k->sendbuf, k->recvbuf);
  else if (res == WEFT_SUCCESS) {
    /* A kept schedule was validated once, when schedule_for built it. */
    c->exec.validated = s != &own ? s : NULL;
    c->exec.plan = s != &own ? &c->last_sched[k->coll].plan : NULL;
    res = exec_run(&c->exec, s, &d, k->sendbuf, k->recvbuf, device);
    c->exec.validated = NULL;
    c->exec.plan = NULL;
  }
  (*seq)++;
  if (c->config.debug >= 2)
    fprintf(stderr, "weft rank %d: %s #%llu count %zu %s %s root %d algo %s: %d ops, %.1f us, %s\n",
            c->rank, weft_coll_name(d.kind), (unsigned long long)d.seq, d.count,
            weft_dtype_name(d.dtype), weft_op_name(d.op), d.root,
            from_file ? "file" : weft_algo_name(d.algo), s->nops,
            (double)(clock_now_ns() - start) / 1e3, weft_result_string(res));
  if (s == &own) sched_free(&own);
  if (res == WEFT_SUCCESS) return res;
  err_context(res, "rank %d: %s #%llu (count %zu, %s, %s)", c->rank, weft_coll_name(d.kind),
              (unsigned long long)d.seq, d.count, weft_dtype_name(d.dtype),
              from_file ? "file" : weft_algo_name(d.algo));
  /* Printed too at WEFT_DEBUG >= 1: a failure on one rank explains the errors on the others. */
  if (c->config.debug >= 1) fprintf(stderr, "weft: %s\n", err_last());
  return comm_fail(c, res);
}

/* With a stream, the call is checked here (so argument errors come back at once), then enqueued:
 * the user's stream waits for it, and the progress thread runs it once the stream's earlier work
 * has produced the inputs. Without one it runs before returning, device buffers included. */
static weft_result_t call_on_stream(const weft_call_t *call, weft_comm_t *comm,
                                    weft_stream_t stream);

/* The call's name for messages about the communicator: "weft_all_reduce". */
static const char *entry_name(const weft_call_t *call) {
  static const char *const names[WEFT_NUM_COLLS] = {
      "weft_all_reduce", "weft_broadcast", "weft_reduce", "weft_all_gather",
      "weft_reduce_scatter", "weft_barrier", "weft_send", "weft_recv", "weft_gather",
      "weft_scatter", "weft_all_to_all", "weft_all_to_allv", "weft_p2p_group"};
  if (!call || (unsigned)call->coll >= WEFT_NUM_COLLS) return "weft_call";
  return names[call->coll];
}

weft_result_t weft_call(const weft_call_t *call, weft_comm_t *comm, weft_stream_t stream) {
  WEFT_CHECK(comm_enter(comm, entry_name(call), COMM_RUNS));
  weft_result_t res = stream ? call_on_stream(call, comm, stream) : comm_submit(comm, call);
  comm_leave(comm, COMM_RUNS);
  return res;
}

static weft_result_t call_on_stream(const weft_call_t *call, weft_comm_t *comm,
                                    weft_stream_t stream) {
  const char *name = call ? weft_coll_name(call->coll) : "call";
  if (!comm->dev)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "rank %d: %s: a stream was given but this communicator has no device engine "
                    "(%s; WEFT_DEVICE=%s): pass NULL with host buffers",
                    comm->rank, name,
                    (weft_build_features() & WEFT_FEATURE_CUDA) ? "no CUDA device was found"
                                                                 : "this build has no CUDA",
                    comm->config.device);
  call_shape_t sh = {0, 0, 0, 0, 0};
  int device = 0;
  if (call && call->coll == WEFT_COLL_P2P_GROUP) {
    WEFT_CHECK(comm_check_group(comm, call->ops, call->nops));
    WEFT_CHECK(comm_group_device(comm, call->ops, call->nops, &device));
    for (int i = 0; i < call->nops; i++) sh.send_count += call->ops[i].count;
  } else {
    WEFT_CHECK(check_call(comm, call, &sh));
    WEFT_CHECK(comm_buffers_kind(comm, call, &device));
  }
  if (!device && sh.send_count + sh.recv_count > 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: %s: a stream was given with host buffers: pass device buffers, or "
                    "NULL as the stream",
                    comm->rank, name);
  dev_gate_t *gate;
  WEFT_CHECK_CTX(comm->dev->ops->gate_enter(comm->dev, stream, &gate),
                 "rank %d: %s: entering the stream", comm->rank, name);
  return comm_submit_gated(comm, call, gate);
}

weft_result_t weft_comm_get_async_error(weft_comm_t *comm, weft_result_t *async_error) {
  if (!async_error)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "weft_comm_get_async_error: async_error is NULL");
  WEFT_CHECK(comm_enter(comm, "weft_comm_get_async_error", COMM_SHARES));
  *async_error = comm_failure(comm);
  if (*async_error != WEFT_SUCCESS) (void)comm_check_usable(comm);
  comm_leave(comm, COMM_SHARES);
  return WEFT_SUCCESS;
}

weft_result_t weft_all_reduce(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                              weft_op_t op, weft_comm_t *comm, weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_ALL_REDUCE,
                   .sendbuf = sendbuf,
                   .recvbuf = recvbuf,
                   .count = count,
                   .dtype = dtype,
                   .op = op,
                   .root = -1,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_broadcast(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                             int root, weft_comm_t *comm, weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_BROADCAST,
                   .sendbuf = sendbuf,
                   .recvbuf = recvbuf,
                   .count = count,
                   .dtype = dtype,
                   .op = WEFT_SUM,
                   .root = root,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_reduce(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                          weft_op_t op, int root, weft_comm_t *comm, weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_REDUCE,
                   .sendbuf = sendbuf,
                   .recvbuf = recvbuf,
                   .count = count,
                   .dtype = dtype,
                   .op = op,
                   .root = root,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_all_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                              weft_dtype_t dtype, weft_comm_t *comm, weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_ALL_GATHER,
                   .sendbuf = sendbuf,
                   .recvbuf = recvbuf,
                   .count = sendcount,
                   .dtype = dtype,
                   .op = WEFT_SUM,
                   .root = -1,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  weft_dtype_t dtype, weft_op_t op, weft_comm_t *comm,
                                  weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_REDUCE_SCATTER,
                   .sendbuf = sendbuf,
                   .recvbuf = recvbuf,
                   .count = recvcount,
                   .dtype = dtype,
                   .op = op,
                   .root = -1,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_gather(const void *sendbuf, void *recvbuf, size_t sendcount, weft_dtype_t dtype,
                          int root, weft_comm_t *comm, weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_GATHER,
                   .sendbuf = sendbuf,
                   .recvbuf = recvbuf,
                   .count = sendcount,
                   .dtype = dtype,
                   .op = WEFT_SUM,
                   .root = root,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                           weft_dtype_t dtype, int root, weft_comm_t *comm, weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_SCATTER,
                   .sendbuf = sendbuf,
                   .recvbuf = recvbuf,
                   .count = recvcount,
                   .dtype = dtype,
                   .op = WEFT_SUM,
                   .root = root,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_all_to_all(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                              weft_comm_t *comm, weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_ALL_TO_ALL,
                   .sendbuf = sendbuf,
                   .recvbuf = recvbuf,
                   .count = count,
                   .dtype = dtype,
                   .op = WEFT_SUM,
                   .root = -1,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_all_to_allv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                               void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                               weft_dtype_t dtype, weft_comm_t *comm, weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_ALL_TO_ALLV,
                   .sendbuf = sendbuf,
                   .recvbuf = recvbuf,
                   .dtype = dtype,
                   .op = WEFT_SUM,
                   .root = -1,
                   .algo = WEFT_ALGO_AUTO,
                   .send_counts = sendcounts,
                   .send_displs = sdispls,
                   .recv_counts = recvcounts,
                   .recv_displs = rdispls};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_barrier(weft_comm_t *comm, weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_BARRIER,
                   .sendbuf = NULL,
                   .recvbuf = NULL,
                   .count = 0,
                   .dtype = WEFT_UINT8,
                   .op = WEFT_SUM,
                   .root = -1,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_send(const void *buf, size_t count, weft_dtype_t dtype, int peer,
                        weft_comm_t *comm, weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_SEND,
                   .sendbuf = buf,
                   .recvbuf = NULL,
                   .count = count,
                   .dtype = dtype,
                   .op = WEFT_SUM,
                   .root = peer,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_send_tagged(const void *buf, size_t count, weft_dtype_t dtype, int peer, int tag,
                               weft_comm_t *comm, weft_stream_t stream) {
  weft_p2p_op_t op = {WEFT_COLL_SEND, (void *)buf, count, dtype, peer, tag};
  return weft_p2p_group(&op, 1, comm, stream);
}

weft_result_t weft_recv_tagged(void *buf, size_t count, weft_dtype_t dtype, int peer, int tag,
                               weft_comm_t *comm, weft_stream_t stream) {
  weft_p2p_op_t op = {WEFT_COLL_RECV, buf, count, dtype, peer, tag};
  return weft_p2p_group(&op, 1, comm, stream);
}

weft_result_t weft_recv_any(void *buf, size_t count, weft_dtype_t dtype, int tag, int *source,
                            weft_comm_t *comm, weft_stream_t stream) {
  weft_p2p_op_t op = {WEFT_COLL_RECV, buf, count, dtype, WEFT_ANY_SOURCE, tag};
  weft_call_t k = {
      .coll = WEFT_COLL_P2P_GROUP, .ops = &op, .nops = 1, .root = -1, .source = source};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_p2p_group(const weft_p2p_op_t *ops, int nops, weft_comm_t *comm,
                             weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_P2P_GROUP, .ops = ops, .nops = nops, .root = -1};
  return weft_call(&k, comm, stream);
}

weft_result_t weft_recv(void *buf, size_t count, weft_dtype_t dtype, int peer, weft_comm_t *comm,
                        weft_stream_t stream) {
  weft_call_t k = {.coll = WEFT_COLL_RECV,
                   .sendbuf = NULL,
                   .recvbuf = buf,
                   .count = count,
                   .dtype = dtype,
                   .op = WEFT_SUM,
                   .root = peer,
                   .algo = WEFT_ALGO_AUTO};
  return weft_call(&k, comm, stream);
}
