/* spin.h -- internal: the polling phase of a transport's wait, before it sleeps in the kernel.
 *
 * A wait that sleeps at once pays a wake-up (futex or poll) on every message; one that only spins
 * steals the core from a peer that shares it when ranks outnumber cores. In between: poll, and
 * between polls give the core away with sched_yield. With a free core the yield returns at once
 * (a busy poll, the lowest latency); with a runnable peer on this core the peer runs, which is
 * what we are waiting for. After `budget_us` the caller sleeps, so a long wait costs no CPU.
 * Measured, 4 ranks on 2 cores, 4 KiB all-reduce: 100 us -> 35 us over shm, 96 -> 68 over TCP.
 *
 * Where the peers of a wait run on other cores (the shm transport can tell: each rank publishes
 * the core it waits on), the yield is pure cost: a system call per poll, ~0.5 us on a virtual
 * machine, during which the peer's message arrives unseen. There the wait first polls without
 * system calls for up to SPIN_BUSY_US (spin_choose says when). Where they share this core, or
 * ranks outnumber cores, the yield is what lets them run: every poll yields, as before.
 * (Two ranks that yield to each other can stay on one core for a long time, each always
 * cache-hot: 2.5 us for an 8-byte all-reduce instead of 0.6 on a loaded 2-core host. Sleeping
 * on every 16th such wait, so that the wake-up would place the rank anew, did not separate
 * them there and cost 30% at 64 KiB: results/2026-11-28-shm-small-calls.) */
#ifndef WEFT_COMMON_SPIN_H_
#define WEFT_COMMON_SPIN_H_

#include <sched.h>
#include <stdint.h>
#include <unistd.h>

#include "common/clock.h"

/* How long a wait polls without system calls when its peers run on other cores. Long enough for
 * a peer's small-message round (1-15 us here, 8 B to 64 KiB), short enough that a process that
 * shares this core with us waits no longer than a time slice's fraction for it. */
#define SPIN_BUSY_US 50

/* How a wait polls before it sleeps. */
typedef enum {
  SPIN_YIELD, /* poll, yielding the core between polls (the peer may need it) */
  SPIN_BUSY,  /* poll without system calls first, then as SPIN_YIELD */
} spin_mode_t;

/* Where the peers of a wait run, as far as this rank can tell. */
typedef enum {
  SPIN_PEERS_UNKNOWN, /* a peer's core is not published (or not known) */
  SPIN_PEERS_APART,   /* every peer waited on, and every other local rank, last ran elsewhere */
  SPIN_PEERS_HERE,    /* a local rank, waited on or not, last ran on this rank's core */
} spin_peers_t;

/* One rank's part in where_peers: `theirs` is 1 + the core it last waited on (0: not published),
 * `mine` the same for this rank, `waited_on` whether this wait waits for it. A rank on this core
 * counts whether we wait for it or not: a busy poll would hold the core it needs (two ranks bound
 * to each core by hand: a busy 8-byte all-reduce took 56 us instead of 8 at 4 ranks on 2 cores,
 * results/2026-11-29-bound-placements). A rank we do not wait for and know nothing of does not
 * count. HERE and UNKNOWN are final: either makes the wait yield. */
static inline spin_peers_t spin_peers_note(spin_peers_t where, int32_t theirs, int32_t mine,
                                           int waited_on) {
  if (where != SPIN_PEERS_APART) return where;
  if (theirs == mine) return SPIN_PEERS_HERE;
  if (theirs == 0 && waited_on) return SPIN_PEERS_UNKNOWN;
  return SPIN_PEERS_APART;
}

/* The mode for one wait. `fit`: the ranks on this host are no more than the cores this process
 * may run on, so a busy poll takes no core a rank of the job needs; otherwise (and where a peer
 * shares this core, or its core is unknown) every wait yields, as before. */
static inline spin_mode_t spin_choose(int fit, spin_peers_t peers) {
  return fit && peers == SPIN_PEERS_APART ? SPIN_BUSY : SPIN_YIELD;
}

/* Whether this process may run on one CPU only: someone bound it to a core of its own (weft-run
 * --bind core, mpirun's default). Then a yield with nothing else of ours on that core gives it to
 * whatever else is runnable there for a whole time slice: with a busy process on each core, a
 * bound rank's 8-byte all-reduce took 4-8 ms per call instead of 0.5-8 us
 * (results/2026-11-28-first-touch). Such a wait polls busily first. */
static inline int spin_bound_to_one_cpu(void) {
  cpu_set_t cpus;
  return sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) == 1;
}

/* Whether `local_ranks` ranks have a core each among the `ncpus` this process may run on. One CPU
 * alone counts as enough: a rank bound to a core of its own (its peers have theirs). */
static inline int spin_cores_enough(int local_ranks, int ncpus) {
  return local_ranks <= ncpus || ncpus == 1;
}

/* The CPUs the host has online (not only those this process may use); 0 if unknown. */
static inline int spin_host_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 && n < 1 << 20 ? (int)n : 0;
}

/* Whether the host has a CPU for each of its `local_ranks` ranks of the job (0: not known yet,
 * and neither is `host_cpus`, then taken as fitting): a rank bound to one CPU cannot see the
 * others' CPUs, but with more ranks than the host has, some of them share one. */
static inline int spin_host_fits(int local_ranks, int host_cpus) {
  return local_ranks == 0 || host_cpus == 0 || local_ranks <= host_cpus;
}

/* How long a wait that may block at most timeout_ms polls before it sleeps: WEFT_SPIN_US, capped. */
static inline int64_t spin_budget_us(int spin_us, int timeout_ms) {
  int64_t cap = (int64_t)timeout_ms * 1000;
  return spin_us < cap ? spin_us : cap;
}

/* Polls ready(arg) without giving the core away until it returns nonzero (then returns 1) or
 * budget_us has passed (then 0). No PAUSE instruction: in a virtual machine a PAUSE loop makes
 * the hypervisor deschedule the vCPU (pause-loop exiting). */
static inline int spin_busy_until(int (*ready)(void *), void *arg, int64_t budget_us) {
  if (budget_us <= 0) return 0;
  int64_t end = clock_now_ns() + budget_us * 1000;
  do {
    for (int i = 0; i < 16; i++) /* the clock read costs more than a poll */
      if (ready(arg)) return 1;
  } while (clock_now_ns() < end);
  return ready(arg);
}

/* The busy phase of a wait that may poll *budget_us in all: polls without yielding for up to
 * SPIN_BUSY_US of it; 1 as soon as ready(arg), else 0 with *budget_us reduced by what it used. */
static inline int spin_busy_phase(int (*ready)(void *), void *arg, int64_t *budget_us) {
  int64_t busy_us = *budget_us < SPIN_BUSY_US ? *budget_us : SPIN_BUSY_US;
  if (spin_busy_until(ready, arg, busy_us)) return 1;
  *budget_us -= busy_us;
  return 0;
}

/* Polls ready(arg) until it returns nonzero (then returns 1) or budget_us has passed (then 0).
 * The budget counts from the end of the first yield: a wait that one yield ends, the most common
 * where ranks share cores, reads no clock (a clock read took as long as the rest of an 8-byte
 * call's polling: results/2026-11-29-user-time). */
static inline int spin_yield_until(int (*ready)(void *), void *arg, int64_t budget_us) {
  if (budget_us <= 0) return 0;
  if (ready(arg)) return 1;
  int64_t end = 0;
  for (;;) {
    sched_yield();
    if (ready(arg)) return 1;
    int64_t now = clock_now_ns();
    if (end == 0)
      end = now + budget_us * 1000;
    else if (now >= end)
      return 0;
  }
}

#endif /* WEFT_COMMON_SPIN_H_ */
