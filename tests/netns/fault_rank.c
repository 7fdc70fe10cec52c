/* fault_rank.c -- one rank of the fault matrix (faults_test.cc): checked collectives for a while.
 *
 * Usage: fault_rank --workload large|small|split [--seconds S] [--count N] [--pause-ms P]
 * Rank, size and master come from the environment (WEFT_RANK, WEFT_WORLD_SIZE, MASTER_ADDR, ...).
 *   large  all_reduce of N floats (default 2^21 = 8 MiB), again and again
 *   small  a stream of small mixed collectives: all_reduce, broadcast, all_gather
 *   split  after P ms of idling (the store is gone by then: rank 0 stops it when init returns),
 *          dup and split the communicator again and again, with a checked all_reduce on each
 * Every result is checked against values computed here; the values are small integers, so sums
 * are exact in float whatever the order of reduction.
 *
 * It prints machine-readable lines that the test parses:
 *   READY rank=R pid=P                     after init, so faults can be aimed at a rank
 *   RESULT rank=R ok iters=N               after S seconds of correct results; exit 0
 *   RESULT rank=R error op=O code=C elapsed_ms=T msg=M
 *                                          a weft call O failed after T ms; exit 1
 *   RESULT rank=R wrong op=O iter=I msg=M  a result was wrong; exit 1
 * It ends on its own after S seconds (plus at most the timeout of the call in flight), so it never
 * outlives a job that the test gave up on by more than weft's own timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "include/weft.h"

static int rank = -1, size = 0;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The weft call in flight: named in the RESULT line, timed from its start. */
static const char *op = "init";
static double op_start;

static void begin(const char *name) {
  op = name;
  op_start = now_ms();
}

static int report_error(weft_result_t res) {
  /* One line, whatever the message holds: the test reads to the end of it. */
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", weft_last_error());
  for (char *p = msg; *p; p++)
    if (*p == '\n') *p = ' ';
  printf("RESULT rank=%d error op=%s code=%d elapsed_ms=%.0f msg=%s: %s\n", rank, op, (int)res,
         now_ms() - op_start, weft_result_string(res), msg);
  fflush(stdout);
  return 1;
}

static int report_wrong(long iter, const char *what) {
  printf("RESULT rank=%d wrong op=%s iter=%ld msg=%s\n", rank, op, iter, what);
  fflush(stdout);
  return 1;
}

#define CALL(name, call)         \
  do {                           \
    begin(name);                 \
    weft_result_t res_ = (call); \
    if (res_ != WEFT_SUCCESS) {  \
      rc = report_error(res_);   \
      goto done;                 \
    }                            \
  } while (0)

#define WRONG(what)                \
  do {                             \
    rc = report_wrong(iter, what); \
    goto done;                     \
  } while (0)

/* all_reduce of n floats: rank r holds r + 1 + (i + iter) % 7. */
static int large_step(weft_comm_t *comm, float *buf, size_t n, long iter) {
  int rc = 0;
  for (size_t i = 0; i < n; i++) buf[i] = (float)(rank + 1 + (int)((i + (size_t)iter) % 7));
  CALL("all_reduce", weft_all_reduce(buf, buf, n, WEFT_FLOAT32, WEFT_SUM, comm, NULL));
  for (size_t i = 0; i < n; i++)
    if (buf[i] != (float)(size * (size + 1) / 2 + size * (int)((i + (size_t)iter) % 7)))
      WRONG("all_reduce sum differs");
done:
  return rc;
}

/* One round of small collectives, each with values that change with the round. */
static int small_step(weft_comm_t *comm, long iter) {
  int rc = 0;
  int32_t in[5], sum[5];
  for (int i = 0; i < 5; i++) in[i] = rank * 3 + i + (int32_t)(iter % 100);
  CALL("all_reduce", weft_all_reduce(in, sum, 5, WEFT_INT32, WEFT_SUM, comm, NULL));
  for (int i = 0; i < 5; i++)
    if (sum[i] != 3 * size * (size - 1) / 2 + size * (i + (int32_t)(iter % 100)))
      WRONG("all_reduce sum differs");

  int root = (int)(iter % size);
  float b[3];
  for (int i = 0; i < 3; i++) b[i] = rank == root ? (float)(iter % 1000 + i) : -1.0f;
  CALL("broadcast", weft_broadcast(b, b, 3, WEFT_FLOAT32, root, comm, NULL));
  for (int i = 0; i < 3; i++)
    if (b[i] != (float)(iter % 1000 + i)) WRONG("broadcast value differs");

  int32_t mine[2] = {rank, (int32_t)(iter % 1000)}, all[2 * 64];
  if (size > 64) WRONG("more than 64 ranks");
  CALL("all_gather", weft_all_gather(mine, all, 2, WEFT_INT32, comm, NULL));
  for (int r = 0; r < size; r++)
    if (all[2 * r] != r || all[2 * r + 1] != (int32_t)(iter % 1000))
      WRONG("all_gather block differs");
done:
  return rc;
}

/* A checked all_reduce on a new communicator: each member adds its parent rank + 1. */
static int check_child(weft_comm_t *child, int32_t want, long iter) {
  int rc = 0;
  int32_t v = rank + 1, got = 0;
  CALL("all_reduce", weft_all_reduce(&v, &got, 1, WEFT_INT32, WEFT_SUM, child, NULL));
  if (got != want) WRONG("all_reduce on the new communicator differs");
done:
  return rc;
}

/* dup, then split into even and odd parent ranks; each new communicator is checked, destroyed. */
static int split_step(weft_comm_t *comm, long iter) {
  int rc = 0;
  weft_comm_t *child = NULL;
  CALL("dup", weft_comm_dup(comm, &child));
  if ((rc = check_child(child, size * (size + 1) / 2, iter))) goto done;
  CALL("destroy", weft_comm_destroy(child));
  child = NULL;
  CALL("split", weft_comm_split(comm, rank % 2, rank, &child));
  int32_t want = 0;
  for (int r = rank % 2; r < size; r += 2) want += r + 1;
  if ((rc = check_child(child, want, iter))) goto done;
  CALL("destroy", weft_comm_destroy(child));
  child = NULL;
done:
  if (child) weft_comm_abort(child);
  return rc;
}

int main(int argc, char **argv) {
  const char *workload = NULL;
  double seconds = 5;
  size_t count = (size_t)1 << 21;
  int pause_ms = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--workload") && i + 1 < argc) {
      workload = argv[++i];
    } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
      count = (size_t)atoll(argv[++i]);
    } else if (!strcmp(argv[i], "--pause-ms") && i + 1 < argc) {
      pause_ms = atoi(argv[++i]);
    } else {
      workload = NULL;
      break;
    }
  }
  if (!workload ||
      (strcmp(workload, "large") && strcmp(workload, "small") && strcmp(workload, "split"))) {
    fprintf(stderr,
            "usage: fault_rank --workload large|small|split [--seconds S] [--count N] "
            "[--pause-ms P]\n");
    return 2;
  }

  /* Until init says otherwise, the rank the launcher gave, so that an init error names it too. */
  const char *env_rank = getenv("WEFT_RANK");
  if (env_rank) rank = atoi(env_rank);
  int rc = 0;
  long iter = 0;
  weft_comm_t *comm = NULL;
  float *buf = NULL;
  CALL("init", weft_comm_init_env(&comm));
  CALL("rank", weft_comm_rank(comm, &rank));
  CALL("size", weft_comm_size(comm, &size));
  printf("READY rank=%d pid=%d\n", rank, (int)getpid());
  fflush(stdout);

  if (!strcmp(workload, "large")) {
    buf = malloc(sizeof(float) * (count ? count : 1));
    if (!buf) WRONG("out of memory");
  }
  if (pause_ms > 0) usleep((useconds_t)pause_ms * 1000);
  double end = now_ms() + seconds * 1e3;
  for (int32_t stop = 0; !stop; iter++) {
    if (!strcmp(workload, "large"))
      rc = large_step(comm, buf, count, iter);
    else if (!strcmp(workload, "small"))
      rc = small_step(comm, iter);
    else
      rc = split_step(comm, iter);
    if (rc) goto done;
    /* The clocks differ a little, so the ranks agree on when to stop: one that stopped alone
     * would leave the others waiting in a collective it never joins. */
    int32_t mine = now_ms() >= end;
    CALL("all_reduce", weft_all_reduce(&mine, &stop, 1, WEFT_INT32, WEFT_MAX, comm, NULL));
  }
  begin("destroy");
  weft_comm_t *last = comm;
  comm = NULL;
  weft_result_t res = weft_comm_destroy(last);
  if (res != WEFT_SUCCESS) {
    rc = report_error(res);
    goto done;
  }
  printf("RESULT rank=%d ok iters=%ld\n", rank, iter);
  fflush(stdout);
done:
  free(buf);
  if (comm) weft_comm_abort(comm); /* so the other ranks fail at once instead of waiting */
  return rc;
}
