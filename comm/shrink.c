/* shrink.c -- carrying on without dead ranks: weft_comm_shrink and weft_comm_get_failed_ranks.
 *
 * Both start with an agreement among the ranks still alive, over the rescue channel (rescue.h),
 * so neither needs the master nor any connection the failure broke. Each rank holds a view: per
 * rank of the communicator, alive, excluded (named by a caller) or failed (found unreachable).
 * Each round, every rank sends its view to every rank its view holds alive and receives theirs:
 *
 *   round k:   A --view--> B, C      B --view--> A, C      C --view--> A, B
 *              then each: view = max(own, received) per rank; a peer that did not answer within
 *              WEFT_TIMEOUT_MS (refused, closed, or silent: killed, stopped) becomes failed
 *
 * A rank is done after a round in which every peer it talked to answered with exactly its own
 * view. Every alive rank sent that same view to all the others, so all of them finish in that
 * round too, with the same view: no leader, nothing to elect. The views only grow, so without new
 * failures rounds end after the union stops growing plus one. A rank that fails during the
 * agreement can leave two survivors with different views; the record exchange that follows
 * carries each rank's view, and a difference fails the shrink on the ranks that see it (call it
 * again) instead of building two different communicators.
 *
 * Shrink then builds the new communicator as split does, with the records exchanged over the
 * same channel: the survivors in their old order, comm_id hashed from the parent's, the count of
 * shrinks and the agreed view. Cost O(rounds x survivors) small messages, plus, per rank that died
 * without closing its sockets, up to WEFT_TIMEOUT_MS of waiting to find out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/rescue.h"
#include "common/trace.h"

enum { MEMBER_ALIVE = 0, MEMBER_EXCLUDED = 1, MEMBER_FAILED = 2 };
enum { MSG_AGREE = 1, MSG_RECORD = 2 };

/* Every message has one size: a view, then a record that only MSG_RECORD fills. */
typedef struct {
  uint32_t kind, round;
  int32_t nranks;
  int32_t failed; /* MSG_RECORD: this rank could not create its transport */
} shrink_head_t;

typedef struct {
  weft_comm_t *c;
  size_t view_bytes, bytes; /* the view padded to 8; the whole message */
  unsigned char *view;      /* nranks entries, MEMBER_* */
  unsigned char *mine, *theirs, *talk, *lost;
  uint32_t round;
  char why[ERR_MSG_MAX]; /* the first reason a peer was lost */
} shrink_ctx_t;

/* The membership view sits right after the head (the record follows it, record_of). */
static unsigned char *view_of(unsigned char *msg) {
  return msg + sizeof(shrink_head_t);
}

static boot_record_t *record_of(const shrink_ctx_t *x, unsigned char *msg) {
  return (boot_record_t *)(msg + sizeof(shrink_head_t) + x->view_bytes);
}

static unsigned char *msg_from(const shrink_ctx_t *x, int peer) {
  return x->theirs + (size_t)peer * x->bytes;
}

static void ctx_free(shrink_ctx_t *x) {
  free(x->view);
  free(x->mine);
  free(x->theirs);
  free(x->talk);
  free(x->lost);
}

static weft_result_t ctx_init(shrink_ctx_t *x, weft_comm_t *c) {
  memset(x, 0, sizeof *x);
  x->c = c;
  size_t n = (size_t)c->nranks;
  x->view_bytes = (n + 7) / 8 * 8;
  x->bytes = sizeof(shrink_head_t) + x->view_bytes + sizeof(boot_record_t);
  x->view = calloc(n, 1);
  x->mine = calloc(1, x->bytes);
  x->theirs = calloc(n, x->bytes);
  x->talk = calloc(n, 1);
  x->lost = calloc(n, 1);
  if (x->view && x->mine && x->theirs && x->talk && x->lost) return WEFT_SUCCESS;
  ctx_free(x);
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory");
}

/* Sends this rank's view (and record) to every rank it holds alive, receives theirs. */
static weft_result_t exchange(shrink_ctx_t *x, uint32_t kind, const boot_record_t *rec,
                              int failed) {
  weft_comm_t *c = x->c;
  shrink_head_t head = {kind, x->round++, c->nranks, failed};
  memset(x->mine, 0, x->bytes);
  memcpy(x->mine, &head, sizeof head);
  memcpy(view_of(x->mine), x->view, (size_t)c->nranks);
  if (rec) memcpy(record_of(x, x->mine), rec, sizeof *rec);
  for (int p = 0; p < c->nranks; p++) x->talk[p] = p != c->rank && x->view[p] == MEMBER_ALIVE;
  memset(x->lost, 0, (size_t)c->nranks);
  return rescue_exchange(c, x->talk, x->mine, x->bytes, x->theirs, x->lost, x->why,
                         sizeof x->why);
}

/* A peer's answer must be the same step of the same protocol. */
static weft_result_t check_head(const shrink_ctx_t *x, int peer, uint32_t kind) {
  shrink_head_t head, mine;
  memcpy(&head, msg_from(x, peer), sizeof head);
  memcpy(&mine, x->mine, sizeof mine);
  if (head.kind == kind && head.round == mine.round && head.nranks == mine.nranks)
    return WEFT_SUCCESS;
  return WEFT_ERR(WEFT_ERR_MISMATCH,
                  "rank %d is at another step of the agreement (step %u of kind %u for %d ranks, "
                  "this rank at step %u of kind %u): it called weft_comm_shrink or "
                  "weft_comm_get_failed_ranks a different number of times, or decided on other "
                  "survivors",
                  peer, head.round, head.kind, head.nranks, mine.round, mine.kind);
}

/* Rounds until every rank alive answers with this rank's own view (see the top of the file). */
static weft_result_t agree(shrink_ctx_t *x) {
  weft_comm_t *c = x->c;
  const int n = c->nranks;
  for (int round = 0; round < 2 * n + 2; round++) {
    WEFT_CHECK(exchange(x, MSG_AGREE, NULL, 0));
    int same = 1;
    unsigned char *next = x->mine + sizeof(shrink_head_t); /* reuse: the view just sent */
    for (int p = 0; p < n; p++) {
      if (!x->talk[p]) continue;
      if (x->lost[p]) {
        same = 0;
        next[p] = MEMBER_FAILED;
        continue;
      }
      WEFT_CHECK(check_head(x, p, MSG_AGREE));
      const unsigned char *theirs = view_of(msg_from(x, p));
      for (int r = 0; r < n; r++) {
        if (theirs[r] > MEMBER_FAILED)
          return WEFT_ERR(WEFT_ERR_REMOTE, "rank %d sent a view with state %d for rank %d", p,
                          theirs[r], r);
        same &= theirs[r] == x->view[r];
        if (theirs[r] > next[r]) next[r] = theirs[r];
      }
    }
    memcpy(x->view, next, (size_t)n);
    if (x->view[c->rank] != MEMBER_ALIVE)
      return WEFT_ERR(WEFT_ERR_REMOTE,
                      "the other ranks count this rank as %s (it answered too late, or a caller "
                      "named it in exclude_ranks)",
                      x->view[c->rank] == MEMBER_FAILED ? "failed" : "excluded");
    if (same) return WEFT_SUCCESS;
  }
  return WEFT_ERR(WEFT_ERR_REMOTE, "the ranks alive did not agree within %d rounds (ranks kept "
                                   "failing meanwhile; last: %s)",
                  2 * n + 2, x->why[0] ? x->why : "none");
}

/* The agreed view as one number, for the new comm_id. */
static uint64_t view_hash(const unsigned char *view, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int r = 0; r < n; r++) h = (h ^ (uint64_t)(view[r] != MEMBER_ALIVE)) * 1099511628211ull;
  return h;
}

/* The survivors' records in new-rank order, checked: every survivor answered, with the same
 * view, and created its transport. */
static weft_result_t survivor_records(shrink_ctx_t *x, const boot_record_t *mine,
                                      boot_record_t *recs) {
  weft_comm_t *c = x->c;
  int i = 0;
  for (int p = 0; p < c->nranks; p++) {
    if (x->view[p] != MEMBER_ALIVE) continue;
    if (p == c->rank) {
      recs[i++] = *mine;
      continue;
    }
    if (x->lost[p])
      return WEFT_ERR(WEFT_ERR_REMOTE,
                      "survivor rank %d was lost while the new communicator was set up (%s): call "
                      "weft_comm_shrink again",
                      p, x->why);
    WEFT_CHECK(check_head(x, p, MSG_RECORD));
    unsigned char *msg = msg_from(x, p);
    if (memcmp(view_of(msg), x->view, (size_t)c->nranks) != 0)
      return WEFT_ERR(WEFT_ERR_MISMATCH,
                      "rank %d agreed on other survivors than this rank (a rank failed during the "
                      "agreement): call weft_comm_shrink again",
                      p);
    shrink_head_t head;
    memcpy(&head, msg, sizeof head);
    if (head.failed)
      return WEFT_ERR(WEFT_ERR_REMOTE,
                      "survivor rank %d could not set up its transport (its own error says why)", p);
    const char *problem = boot_record_problem(record_of(x, msg));
    if (problem) return WEFT_ERR(WEFT_ERR_REMOTE, "rank %d sent a record: %s", p, problem);
    recs[i++] = *record_of(x, msg);
  }
  return WEFT_SUCCESS;
}

/* From the agreed view: the new communicator, its transport, the records, its connections. */
static weft_result_t build(shrink_ctx_t *x, uint64_t serial, weft_comm_t **out) {
  weft_comm_t *c = x->c, *child = NULL;
  int m = 0, me = 0;
  for (int p = 0; p < c->nranks; p++) {
    if (x->view[p] != MEMBER_ALIVE) continue;
    if (p == c->rank) me = m;
    m++;
  }
  char text[96];
  snprintf(text, sizeof text, "%llx/shrink/%llu/%llx", (unsigned long long)c->comm_id,
           (unsigned long long)serial, (unsigned long long)view_hash(x->view, c->nranks));
  boot_record_t rec;
  memset(&rec, 0, sizeof rec);
  boot_record_t *recs = calloc((size_t)m, sizeof *recs);
  weft_result_t res = recs ? comm_alloc_child(c, text, me, m, &child)
                           : WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory");
  if (res != WEFT_SUCCESS) goto done;
  /* A rank whose transport failed still answers, so that the others learn of it at once. */
  weft_result_t mine_res = comm_open_transport(child, &rec);
  char why[ERR_MSG_MAX];
  snprintf(why, sizeof why, "%s", err_last());
  WEFT_CHECK_GOTO(exchange(x, MSG_RECORD, &rec, mine_res != WEFT_SUCCESS), res, done);
  if (mine_res != WEFT_SUCCESS) {
    res = err_set_message(mine_res, why);
    goto done;
  }
  WEFT_CHECK_GOTO(survivor_records(x, &rec, recs), res, done);
  WEFT_CHECK_GOTO(comm_connect(child, recs), res, done);
  WEFT_CHECK_GOTO(trace_open(&child->exec.trace, &child->config, child->rank, child->nranks), res,
                  done);
  *out = child;
  child = NULL;
done:
  comm_free(child, 1);
  free(recs);
  return res;
}

static weft_result_t shrink(weft_comm_t *comm, const int *exclude_ranks, int nexclude,
                            weft_comm_t **newcomm) {
  if (!newcomm) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "comm_shrink: newcomm pointer is NULL");
  *newcomm = NULL;
  if (!comm) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "comm_shrink: comm is NULL");
  if (nexclude < 0 || (nexclude > 0 && !exclude_ranks))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: comm_shrink: %d excluded ranks at %p (want a count >= 0 and, if "
                    "any, an array)",
                    comm->rank, nexclude, (const void *)exclude_ranks);
  for (int i = 0; i < nexclude; i++) {
    int r = exclude_ranks[i];
    if (r < 0 || r >= comm->nranks)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "rank %d: comm_shrink: exclude_ranks[%d] = %d is not a rank of this "
                      "communicator (0..%d)",
                      comm->rank, i, r, comm->nranks - 1);
    if (r == comm->rank)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "rank %d: comm_shrink: this rank is in exclude_ranks (only the ranks that "
                      "stay call weft_comm_shrink)",
                      comm->rank);
  }
  shrink_ctx_t x;
  WEFT_CHECK(ctx_init(&x, comm));
  for (int i = 0; i < nexclude; i++) x.view[exclude_ranks[i]] = MEMBER_EXCLUDED;
  uint64_t serial = comm->nshrinks++;
  weft_result_t res = agree(&x);
  if (res == WEFT_SUCCESS) res = build(&x, serial, newcomm);
  if (res == WEFT_SUCCESS && comm->config.debug >= 1) {
    int m;
    weft_comm_size(*newcomm, &m);
    fprintf(stderr, "weft rank %d: shrunk to %d of %d ranks, now rank %d\n", comm->rank, m,
            comm->nranks, (*newcomm)->rank);
  }
  ctx_free(&x);
  if (res != WEFT_SUCCESS) err_context(res, "rank %d: comm_shrink", comm->rank);
  return res;
}

static weft_result_t failed_ranks(weft_comm_t *comm, int *ranks, int max, int *nfailed) {
  if (!comm || !nfailed || max < 0 || (max > 0 && !ranks))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "comm_get_failed_ranks: comm %p, ranks %p (room for %d), nfailed %p: comm and "
                    "nfailed must be set, max >= 0, ranks set where max > 0",
                    (void *)comm, (void *)ranks, max, (void *)nfailed);
  shrink_ctx_t x;
  WEFT_CHECK(ctx_init(&x, comm));
  weft_result_t res = agree(&x);
  if (res == WEFT_SUCCESS) {
    *nfailed = 0;
    for (int r = 0; r < comm->nranks; r++) {
      if (x.view[r] == MEMBER_ALIVE) continue;
      if (*nfailed < max) ranks[*nfailed] = r;
      (*nfailed)++;
    }
  }
  ctx_free(&x);
  if (res != WEFT_SUCCESS) err_context(res, "rank %d: comm_get_failed_ranks", comm->rank);
  return res;
}

weft_result_t weft_comm_shrink(weft_comm_t *comm, const int *exclude_ranks, int nexclude,
                               weft_comm_t **newcomm) {
  if (newcomm) *newcomm = NULL;
  WEFT_CHECK(comm_enter(comm, "weft_comm_shrink", COMM_RUNS));
  weft_result_t res = shrink(comm, exclude_ranks, nexclude, newcomm);
  comm_leave(comm, COMM_RUNS);
  return res;
}

weft_result_t weft_comm_get_failed_ranks(weft_comm_t *comm, int *ranks, int max, int *nfailed) {
  WEFT_CHECK(comm_enter(comm, "weft_comm_get_failed_ranks", COMM_RUNS));
  weft_result_t res = failed_ranks(comm, ranks, max, nfailed);
  comm_leave(comm, COMM_RUNS);
  return res;
}
