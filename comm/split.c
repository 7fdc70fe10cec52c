/* split.c -- weft_comm_split and weft_comm_dup: new communicators set up through their parent.
 *
 * Two all-gathers over the parent, every parent rank taking part (WEFT_SPLIT_NOCOLOR included):
 *   1. (color, key): each rank finds its group, ordered by key then parent rank, hence its new
 *      rank and size, which its new transport must know before it is created;
 *   2. a fixed-size record per rank: the new transport's address and the host identity, as init
 *      publishes through the store, plus whether creating the transport failed, so that a group
 *      fails together instead of its other members waiting for a peer that is not coming.
 * From there comm_connect() does what init does after its exchange.
 *
 * The new comm_id hashes the parent's id, the parent's split counter (every rank counts every
 * split, so all agree) and the color: members agree on it, and no two splits of one parent, nor
 * two groups of one split, share one. Config, algorithm policy and cost model are copied from the
 * parent, whose values every rank already agrees on; no state is shared between the two. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/env.h"
#include "comm/comm.h"
#include "common/trace.h"

typedef struct {
  int32_t color, key;
} split_pick_t;

typedef struct {
  int32_t failed;
  int32_t pad;
  boot_record_t rec;
} split_addr_t;

typedef struct {
  int32_t key, rank;
} split_member_t;

static int by_key_then_rank(const void *a, const void *b) {
  const split_member_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* out[r] = rank r's `bytes` at in. By all-gather where this build has one; otherwise by a sum
 * all-reduce of a zeroed array in which each rank fills only its own slot, which gives the same
 * bytes. Every rank runs the same build, so all take the same path. */
static weft_result_t gather(weft_comm_t *comm, const void *in, void *out, size_t bytes) {
  weft_call_t k = {.coll = WEFT_COLL_ALL_GATHER,
                   .sendbuf = in,
                   .recvbuf = out,
                   .count = bytes,
                   .dtype = WEFT_UINT8,
                   .op = WEFT_SUM,
                   .root = -1,
                   .algo = WEFT_ALGO_AUTO};
  if (!weft_algo_supported(WEFT_COLL_ALL_GATHER, WEFT_ALGO_RING)) {
    memset(out, 0, bytes * (size_t)comm->nranks);
    memcpy((char *)out + bytes * (size_t)comm->rank, in, bytes);
    k.coll = WEFT_COLL_ALL_REDUCE;
    k.sendbuf = out;
    k.count = bytes * (size_t)comm->nranks;
  }
  return comm_submit(comm, &k);
}

/* The parent ranks of `color`, in their new order; *me is this rank's position. */
static weft_result_t group_of(const weft_comm_t *comm, const split_pick_t *picks, int color,
                              int **members, int *n, int *me) {
  split_member_t *m = malloc(sizeof *m * (size_t)comm->nranks);
  *members = malloc(sizeof **members * (size_t)comm->nranks);
  if (!m || !*members) {
    free(m);
    free(*members);
    *members = NULL;
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory");
  }
  *n = 0;
  for (int r = 0; r < comm->nranks; r++)
    if (picks[r].color == color) m[(*n)++] = (split_member_t){picks[r].key, r};
  qsort(m, (size_t)*n, sizeof *m, by_key_then_rank);
  for (int i = 0; i < *n; i++) {
    (*members)[i] = m[i].rank;
    if (m[i].rank == comm->rank) *me = i;
  }
  free(m);
  return WEFT_SUCCESS;
}

static weft_result_t child_alloc(weft_comm_t *parent, int color, uint64_t serial, int rank,
                                 int nranks, weft_comm_t **out) {
  char text[96];
  snprintf(text, sizeof text, "%llx/split/%llu/%d", (unsigned long long)parent->comm_id,
           (unsigned long long)serial, color);
  return comm_alloc_child(parent, text, rank, nranks, out);
}

/* This rank's part before the second exchange: its group, the new communicator, its transport. */
static weft_result_t prepare(weft_comm_t *comm, const split_pick_t *picks, int color,
                             uint64_t serial, int **members, weft_comm_t **child,
                             boot_record_t *rec) {
  int n = 0, me = -1;
  WEFT_CHECK(group_of(comm, picks, color, members, &n, &me));
  WEFT_CHECK(child_alloc(comm, color, serial, me, n, child));
  return comm_open_transport(*child, rec);
}

/* The members' records in new-rank order, or the error of one that could not take part. */
static weft_result_t member_records(const split_addr_t *all, const int *members, int n,
                                    boot_record_t *recs) {
  for (int i = 0; i < n; i++) {
    if (all[members[i]].failed)
      return WEFT_ERR(WEFT_ERR_REMOTE,
                      "new rank %d (rank %d of the parent) could not set up its transport (its "
                      "own error says why)",
                      i, members[i]);
    recs[i] = all[members[i]].rec;
  }
  return WEFT_SUCCESS;
}

/* Prefixes the last error with the new communicator's members, "its rank 1 is rank 3, ...", so
 * that a peer named in the new communicator's numbering can be found in the caller's (nothing
 * where the two numberings are the same). */
static void name_members(weft_result_t res, const int *members, int n) {
  int same = 1; /* a dup, or a split that kept everyone in order: the numbers already agree */
  for (int i = 0; i < n; i++) same = same && members[i] == i;
  if (same) return;
  char list[256];
  size_t used = 0;
  list[0] = '\0';
  for (int i = 0; i < n && used + 40 < sizeof list; i++)
    used += (size_t)snprintf(list + used, sizeof list - used, "%sits rank %d is rank %d",
                             i ? ", " : "", i, members[i]);
  if (used + 40 >= sizeof list) snprintf(list + used, sizeof list - used, ", ...");
  err_context(res, "the new communicator of %d (%s)", n, list);
}

/* `op` is the public call, "comm_split" or "comm_dup" (a dup is a split with one color): errors
 * name the call the application made, not the one it happens to be built on. */
static weft_result_t split(const char *op, weft_comm_t *comm, int color, int key,
                           weft_comm_t **newcomm) {
  if (!newcomm) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: newcomm pointer is NULL", op);
  *newcomm = NULL;
  if (!comm) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: comm is NULL", op);
  if (color < 0 && color != WEFT_SPLIT_NOCOLOR)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: comm_split: color %d is negative (valid: >= 0, or "
                    "WEFT_SPLIT_NOCOLOR)",
                    comm->rank, color);
  uint64_t serial = comm->nsplits++;
  weft_result_t res, mine_res = WEFT_SUCCESS;
  weft_comm_t *child = NULL;
  int *members = NULL;
  boot_record_t *recs = NULL;
  char why[ERR_MSG_MAX] = "";
  split_pick_t pick = {color, key};
  split_addr_t addr;
  memset(&addr, 0, sizeof addr);
  split_pick_t *picks = calloc((size_t)comm->nranks, sizeof *picks);
  split_addr_t *all = calloc((size_t)comm->nranks, sizeof *all);
  if (!picks || !all) {
    res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory");
    goto done;
  }
  WEFT_CHECK_GOTO(gather(comm, &pick, picks, sizeof pick), res, done);
  if (color != WEFT_SPLIT_NOCOLOR) {
    mine_res = prepare(comm, picks, color, serial, &members, &child, &addr.rec);
    if (mine_res != WEFT_SUCCESS) {
      addr.failed = 1;
      snprintf(why, sizeof why, "%s", err_last());
    }
  }
  /* A rank that failed above still takes part, so that its group learns of it instead of
   * waiting for it. */
  WEFT_CHECK_GOTO(gather(comm, &addr, all, sizeof addr), res, done);
  res = mine_res == WEFT_SUCCESS ? WEFT_SUCCESS : err_set_message(mine_res, why);
  if (res != WEFT_SUCCESS || color == WEFT_SPLIT_NOCOLOR) goto done;
  recs = calloc((size_t)child->nranks, sizeof *recs);
  if (!recs) {
    res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory");
    goto done;
  }
  WEFT_CHECK_GOTO(member_records(all, members, child->nranks, recs), res, done);
  /* Every member created its transport, listening, before the second all-gather, and all of them
   * left it together: unlike init's, these connections wait for no peer that is still starting,
   * so a peer that does not answer within WEFT_TIMEOUT_MS is stopped or stuck (not the connect
   * timeout, a minute by default, that init allows). */
  for (int k = 0; k < BOOT_NTRANSPORTS; k++)
    if (child->transports[k]) child->transports[k]->peers_listening = 1;
  res = comm_connect(child, recs);
  if (res != WEFT_SUCCESS) {
    /* The new communicator's errors name its own ranks; say which ranks those are here. */
    name_members(res, members, child->nranks);
    goto done;
  }
  WEFT_CHECK_GOTO(trace_open(&child->exec.trace, &child->config, child->rank, child->nranks), res,
                  done);
  *newcomm = child;
  child = NULL;
done:
  comm_free(child, 1);
  free(picks);
  free(all);
  free(members);
  free(recs);
  if (res != WEFT_SUCCESS && !strcmp(op, "comm_dup"))
    err_context(res, "rank %d: comm_dup", comm->rank);
  else if (res != WEFT_SUCCESS)
    err_context(res, "rank %d: comm_split (color %d, key %d)", comm->rank, color, key);
  return res;
}

weft_result_t weft_comm_split(weft_comm_t *comm, int color, int key, weft_comm_t **newcomm) {
  if (newcomm) *newcomm = NULL;
  WEFT_CHECK(comm_enter(comm, "weft_comm_split", COMM_RUNS));
  weft_result_t res = split("comm_split", comm, color, key, newcomm);
  comm_leave(comm, COMM_RUNS);
  return res;
}

weft_result_t weft_comm_dup(weft_comm_t *comm, weft_comm_t **newcomm) {
  if (newcomm) *newcomm = NULL;
  WEFT_CHECK(comm_enter(comm, "weft_comm_dup", COMM_RUNS));
  weft_result_t res = split("comm_dup", comm, 0, comm->rank, newcomm);
  comm_leave(comm, COMM_RUNS);
  return res;
}
