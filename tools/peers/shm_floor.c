/* shm_floor.c -- the least memory work of an all-reduce between local ranks, timed on this host.
 *
 * Usage: shm_floor RANKS BYTES [PASSES]
 *
 * Every all-reduce reads each rank's input and writes each rank's output at least once, whatever
 * its algorithm and however its ranks reach each other's memory. Here RANKS processes each make
 * one pass over a buffer of their own, reading and writing every float of it (x = x + 1), all
 * starting together; a pass lasts from the first process's start to the last one's end. No
 * all-reduce of BYTES per rank over RANKS local ranks can be faster than that pass, so its busbw
 * (nccl-tests' all-reduce formula, the median pass of PASSES) bounds every library's from above.
 * The bound is loose by the rest of an all-reduce's work: reading the peers' bytes, reducing. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer_common.h"

enum { MAX_RANKS = 64, MAX_PASSES = 101 };

typedef struct {
  atomic_long arrived;                     /* barrier: how many ranks have come, ever */
  double start[MAX_PASSES][MAX_RANKS], end[MAX_PASSES][MAX_RANKS]; /* us, CLOCK_MONOTONIC */
  int bad;
} shared_t;

/* Waits until `target` arrivals in all; yields, since ranks may outnumber cores. */
static void barrier(shared_t *s, long target) {
  atomic_fetch_add(&s->arrived, 1);
  while (atomic_load(&s->arrived) < target) sched_yield();
}

static void rank_main(shared_t *s, int rank, int p, size_t bytes, int passes) {
  size_t n = bytes / sizeof(float);
  float *x = malloc(n * sizeof(float));
  if (!x) {
    s->bad = 1;
    n = 0;
  }
  for (size_t i = 0; i < n; i++) x[i] = (float)(i & 1023); /* faults the pages in */
  long round = 0;
  for (int k = 0; k < passes; k++) {
    barrier(s, ++round * p);
    s->start[k][rank] = peer_now_us();
    for (size_t i = 0; i < n; i++) x[i] = x[i] + 1.0f;
    s->end[k][rank] = peer_now_us();
    barrier(s, ++round * p);
  }
  if (n && x[n / 2] != (float)((n / 2) & 1023) + (float)passes) s->bad = 1; /* keeps the passes */
  free(x);
}

int main(int argc, char **argv) {
  int p = argc > 1 ? atoi(argv[1]) : 0;
  size_t bytes = argc > 2 ? peer_parse_size(argv[2]) : 0;
  int passes = argc > 3 ? atoi(argv[3]) : 11;
  if (p < 1 || p > MAX_RANKS || bytes < sizeof(float) || passes < 1 || passes > MAX_PASSES) {
    fprintf(stderr, "usage: shm_floor RANKS(1-%d) BYTES [PASSES(1-%d)]\n", MAX_RANKS, MAX_PASSES);
    return 2;
  }
  shared_t *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) return 1;
  for (int r = 0; r < p; r++) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      rank_main(s, r, p, bytes, passes);
      _exit(0);
    }
  }
  int ok = 1;
  for (int r = 0; r < p; r++) {
    int st;
    if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) ok = 0;
  }
  if (!ok || s->bad) {
    fprintf(stderr, "shm_floor: a rank failed (out of memory?)\n");
    return 1;
  }
  double t[MAX_PASSES];
  for (int k = 0; k < passes; k++) {
    double lo = s->start[k][0], hi = s->end[k][0];
    for (int r = 1; r < p; r++) {
      if (s->start[k][r] < lo) lo = s->start[k][r];
      if (s->end[k][r] > hi) hi = s->end[k][r];
    }
    t[k] = hi - lo;
  }
  double us = peer_median(t, passes);
  double busbw = p > 1 ? bytes / us / 1e3 * 2.0 * (p - 1) / p : 0;
  printf("shm_floor_busbw_GBps %.3f ranks %d bytes %zu pass_us %.1f\n", busbw, p, bytes, us);
  return 0;
}
