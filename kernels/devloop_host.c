/* devloop_host.c -- the device-resident loop (devloop_steps.h) on the host's CPU: gcc's __atomic
 * builtins for the counters, sched_yield between idle passes, and kernels/reduce.h's loops for the
 * element work. The emulated engine's device threads and the tests run programs through this. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/devloop.h"
#include "kernels/reduce.h"

/* The element context the DL_* element macros get as `env`. */
typedef struct {
  kern_reduce_fn reduce;
  kern_reduce_copy_fn reduce_copy;
  weft_dtype_t dtype;
  int nranks;
} host_env_t;

static uint64_t host_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void host_avg_final(const host_env_t *e, void *dst, void *dst2, const void *a, const void *b,
                           size_t n) {
  if (dst2)
    kern_reduce_copy_avg_final(dst, dst2, a, b, n, e->dtype, e->nranks);
  else
    kern_reduce_avg_final(dst, a, b, n, e->dtype, e->nranks);
}

/* The counters are plain uint64_t in shared memory; gcc's __atomic builtins give them C11's
 * acquire/release semantics (and ThreadSanitizer understands them). On x86 an acquire load and a
 * release store are plain moves that the compiler may not reorder across; elsewhere they carry
 * the fences the architecture needs. */
#if DL_MUTATION == 4
/* Test build only: every counter access relaxed, so nothing orders the slots' data. */
#define DL_LOAD_ACQUIRE(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define DL_STORE_RELEASE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#else
#define DL_LOAD_ACQUIRE(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define DL_STORE_RELEASE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#endif
#define DL_LOAD_RELAXED(p) __atomic_load_n((p), __ATOMIC_RELAXED)
/* Yield, not a pause: ranks run as threads and may outnumber cores, and the peer we wait for may
 * need this one (common/spin.h measured the same trade for the transports). */
#define DL_SPIN() sched_yield()
#define DL_NOW_NS() host_now_ns()
#define DL_COPY(dst, src, bytes) memcpy((dst), (src), (bytes))
#define DL_COPY2(dst, dst2, src, bytes) kern_copy2((dst), (dst2), (src), (bytes))
#define DL_REDUCE(env, dst, a, b, n) ((const host_env_t *)(env))->reduce((dst), (a), (b), (n))
#define DL_REDUCE_COPY(env, dst, dst2, a, b, n) \
  ((const host_env_t *)(env))->reduce_copy((dst), (dst2), (a), (b), (n))
#define DL_AVG_FINAL(env, dst, dst2, a, b, n) \
  host_avg_final((const host_env_t *)(env), (dst), (dst2), (a), (b), (n))
/* Test builds (//kernels:devloop_chaos and the mutations) call a hook the test defines, which
 * sleeps or yields at random to shake out orderings; the real build has no hook at all. */
#ifdef DL_HOST_CHAOS
void dl_host_chaos(int where);
#define DL_CHAOS(where) dl_host_chaos(where)
#endif

#include "kernels/devloop_steps.h"

/* Small programs keep the per-step counts on the stack; larger ones allocate them. */
#define HOST_STACK_STEPS 256

dl_status_t dl_run_host(const dl_run_t *run) {
  dl_status_t st = dl_validate(run);
  if (st.code != DL_DONE) return st;
  const dp_program_t *p = run->prog;
  host_env_t env = {
      .reduce = kern_reduce_lookup(p->dtype, p->op),
      .reduce_copy = kern_reduce_copy_lookup(p->dtype, p->op),
      .dtype = p->dtype,
      .nranks = p->nranks,
  };
  if (!env.reduce || !env.reduce_copy) return dl_status(DL_BAD_PROGRAM, -1, -1, 0, 0);
  uint64_t stack_moved[HOST_STACK_STEPS];
  uint64_t *moved = stack_moved;
  if (p->nsteps > HOST_STACK_STEPS) {
    moved = calloc((size_t)p->nsteps, sizeof *moved);
    /* No dl_code_t says "out of memory"; nothing has moved yet, so the run can be refused whole
     * like a program the host cannot run. */
    if (!moved) return dl_status(DL_BAD_PROGRAM, -1, -1, 0, 0);
  } else {
    memset(stack_moved, 0, sizeof stack_moved);
  }
  st = dl_loop(run, &env, moved);
  if (moved != stack_moved) free(moved);
  return st;
}
