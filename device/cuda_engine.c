/* cuda_engine.c -- the device engine on a GPU: the CUDA runtime API for memory, streams, events
 * and IPC, and the kernels of kernels/cuda for reductions.
 *
 * Plain C compiled by the host compiler: every kernel lives in kernels/cuda and is reached through
 * reduce_kernels.h. Every CUDA failure becomes a weft_result_t whose message names what was being
 * done and CUDA's own error name and text.
 *
 * The current device is per thread in CUDA, and weft calls the engine from the caller's thread and
 * from the progress thread alike, so every entry point that touches a stream or memory first makes
 * the engine's device current (cudaSetDevice is a thread-local store once the context exists). */
#include <cuda.h> /* driver API types only (cu_rdma_export) */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/error.h"
#include "device/device.h"
#include "kernels/cuda/devloop_kernel.h"
#include "kernels/cuda/reduce_kernels.h"

/* queue_destroy and close wait this long for a queue's work before destroying it anyway. */
#define DESTROY_WAIT_MS 10000
/* How long poll loops sleep between queries: short against a GPU step, long enough not to spin
 * a core that the transports need. */
#define POLL_SLEEP_NS 20000L
#define IPC_MAGIC 0x57464355u /* "WFCU", after CUDA's 64 bytes: tells our handles from others */

_Static_assert(sizeof(cudaIpcMemHandle_t) + sizeof(uint32_t) <= DEV_IPC_HANDLE_BYTES,
               "a CUDA IPC handle does not fit dev_ipc_handle_t");

typedef enum { TRACK_DEVICE, TRACK_PINNED, TRACK_IMPORT, TRACK_QUEUE, TRACK_STREAM } track_t;

/* What the engine made and close() must free. */
typedef struct {
  void *p;
  track_t what;
} tracked_t;

typedef struct {
  dev_engine_t base;
  pthread_mutex_t mu;
  tracked_t *tracked;
  size_t ntracked, cap;
  /* Gates entered and not yet opened. While one is closed, freeing memory would wait for the
   * device, the held user stream included, and so for the very call that opens the gate:
   * release() and ipc_close() then leave the memory tracked, and close() frees it. */
  int gates_closed;
} cuda_engine_t;

typedef struct launch_rec launch_rec_t;

/* A queue: a non-blocking stream, and its fences as a FIFO of recorded events. The stream runs in
 * order, so fences pass in order: poll() pops the passed ones from the front. */
struct dev_queue {
  cuda_engine_t *e;
  cudaStream_t stream;
  pthread_mutex_t mu;
  cudaEvent_t *pend;     /* ring of pending fences' events, oldest at pend[head] */
  uint64_t *pend_ticket; /* their tickets */
  size_t head, npend, cap;
  cudaEvent_t *pool; /* passed events, ready to record again; room for cap */
  size_t npool;
  uint64_t issued;   /* the last ticket handed out */
  uint64_t passed;   /* every ticket <= passed has passed */
  weft_result_t err; /* sticky: the first failure of the queue's work */
  char errmsg[ERR_MSG_MAX];
  launch_rec_t *launches; /* cu_launch's records, busy or free for reuse (q->mu) */
};

/* One call's hold on a user stream: an event where its inputs are ready, then a host function
 * that blocks the stream until gate_open. The host function and the caller each hold a reference;
 * the host function may not call CUDA, so the event is destroyed by gate_open. */
struct dev_gate {
  cuda_engine_t *e;
  cudaEvent_t inputs;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int opened;
  int refs;
};

/* ---- errors ---- */

static weft_result_t cuda_result(cudaError_t rc) {
  switch (rc) {
    case cudaErrorMemoryAllocation:
      return WEFT_ERR_NO_MEMORY;
    case cudaErrorInvalidValue:
      return WEFT_ERR_INVALID_ARGUMENT;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return WEFT_ERR_UNSUPPORTED;
    default:
      return WEFT_ERR_SYSTEM;
  }
}

/* Records "cuda: <what>: <name>: <text> [file:line]" and clears CUDA's last error, so that a
 * failure here (e.g. probing a pageable pointer) is not picked up by a later, unrelated
 * cudaGetLastError() such as a kernel launch check. */
static weft_result_t cuda_fail(cudaError_t rc, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static weft_result_t cuda_fail(cudaError_t rc, const char *file, int line, const char *fmt, ...) {
  char what[ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  (void)cudaGetLastError();
  return err_set(cuda_result(rc), file, line, "cuda: %s: %s: %s", what, cudaGetErrorName(rc),
                 cudaGetErrorString(rc));
}

#define CUDA_FAIL(rc, ...) cuda_fail((rc), __FILE__, __LINE__, __VA_ARGS__)

/* Returns from the current function with a weft error if the CUDA call fails. */
#define CUDA_CHECK(call, ...)                                             \
  do {                                                                    \
    cudaError_t cuda_rc_ = (call);                                        \
    if (cuda_rc_ != cudaSuccess) return CUDA_FAIL(cuda_rc_, __VA_ARGS__); \
  } while (0)

static weft_result_t use_device(cuda_engine_t *e) {
  CUDA_CHECK(cudaSetDevice(e->base.device), "making device %d current", e->base.device);
  return WEFT_SUCCESS;
}

static void sleep_a_little(void) {
  struct timespec d = {0, POLL_SLEEP_NS};
  nanosleep(&d, NULL);
}

/* ---- what the engine made ---- */

static weft_result_t track(cuda_engine_t *e, void *p, track_t what) {
  weft_result_t res = WEFT_SUCCESS;
  pthread_mutex_lock(&e->mu);
  if (e->ntracked == e->cap) {
    size_t cap = e->cap ? 2 * e->cap : 16;
    tracked_t *grown = realloc(e->tracked, cap * sizeof *grown);
    if (grown) {
      e->tracked = grown;
      e->cap = cap;
    } else {
      res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "cuda engine: growing its table of allocations");
    }
  }
  if (res == WEFT_SUCCESS) e->tracked[e->ntracked++] = (tracked_t){p, what};
  pthread_mutex_unlock(&e->mu);
  return res;
}

/* 1 if p was tracked as `what` (and is no longer). 0 also while a gate is closed: then p stays
 * tracked, to be freed by close() (see gates_closed). */
static int untrack(cuda_engine_t *e, const void *p, track_t what) {
  int found = 0;
  pthread_mutex_lock(&e->mu);
  for (size_t i = 0; i < e->ntracked && e->gates_closed == 0; i++) {
    if (e->tracked[i].p == p && e->tracked[i].what == what) {
      e->tracked[i] = e->tracked[--e->ntracked];
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&e->mu);
  return found;
}

/* ---- memory ---- */

static weft_result_t cu_mem_kind(dev_engine_t *base, const void *p, dev_mem_t *kind, int *device) {
  (void)base;
  *kind = DEV_MEM_HOST;
  if (device) *device = -1;
  if (!p) return WEFT_SUCCESS;
  struct cudaPointerAttributes a;
  memset(&a, 0, sizeof a);
  cudaError_t rc = cudaPointerGetAttributes(&a, p);
  if (rc == cudaErrorInvalidValue) {
    /* Runtimes before 11.0 fail on pageable memory instead of answering "unregistered", and
     * leave that as the last error: clear it, it is an answer, not a failure. */
    (void)cudaGetLastError();
    return WEFT_SUCCESS;
  }
  if (rc != cudaSuccess) return CUDA_FAIL(rc, "cudaPointerGetAttributes(%p)", p);
  if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) {
    *kind = DEV_MEM_DEVICE;
    if (device) *device = a.device;
  }
  return WEFT_SUCCESS;
}

static weft_result_t cu_alloc(dev_engine_t *base, size_t bytes, int host_pinned, void **out) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  *out = NULL;
  if (bytes == 0) return WEFT_SUCCESS;
  WEFT_CHECK(use_device(e));
  void *p = NULL;
  if (host_pinned)
    CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
               "cudaHostAlloc of %zu bytes of pinned host memory", bytes);
  else
    CUDA_CHECK(cudaMalloc(&p, bytes), "cudaMalloc of %zu bytes on device %d", bytes,
               e->base.device);
  weft_result_t res = track(e, p, host_pinned ? TRACK_PINNED : TRACK_DEVICE);
  if (res != WEFT_SUCCESS) {
    if (host_pinned)
      cudaFreeHost(p);
    else
      cudaFree(p);
    return res;
  }
  *out = p;
  return WEFT_SUCCESS;
}

static void free_memory(cuda_engine_t *e, void *p, track_t what) {
  if (use_device(e) != WEFT_SUCCESS) return;
  cudaError_t rc = cudaSuccess;
  switch (what) {
    case TRACK_DEVICE:
      rc = cudaFree(p);
      break;
    case TRACK_PINNED:
      rc = cudaFreeHost(p);
      break;
    case TRACK_IMPORT:
      rc = cudaIpcCloseMemHandle(p);
      break;
    default:
      break;
  }
  if (rc != cudaSuccess) (void)cudaGetLastError(); /* nothing to report to: release() is void */
}

static void cu_release(dev_engine_t *base, void *p, int host_pinned) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  track_t what = host_pinned ? TRACK_PINNED : TRACK_DEVICE;
  if (p && untrack(e, p, what)) free_memory(e, p, what);
}

/* ---- queues ---- */

static weft_result_t queue_new(cuda_engine_t *e, dev_queue_t **out) {
  WEFT_CHECK(use_device(e));
  dev_queue_t *q = calloc(1, sizeof *q);
  if (!q) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "cuda engine: allocating a queue");
  q->e = e;
  cudaError_t rc = cudaStreamCreateWithFlags(&q->stream, cudaStreamNonBlocking);
  if (rc != cudaSuccess) {
    free(q);
    return CUDA_FAIL(rc, "cudaStreamCreateWithFlags for a queue on device %d", e->base.device);
  }
  pthread_mutex_init(&q->mu, NULL);
  *out = q;
  return WEFT_SUCCESS;
}

/* Makes the first failure of q's work sticky and returns it (as this thread's error). */
static weft_result_t queue_fail(dev_queue_t *q, weft_result_t res) {
  if (q->err == WEFT_SUCCESS) {
    q->err = res;
    snprintf(q->errmsg, sizeof q->errmsg, "%s", err_last());
  }
  return err_set_message(q->err, q->errmsg);
}

/* ---- device-resident programs (launch) ----
 *
 * The caller's run (kernels/devloop.h) lives in host memory: the program, its steps and the link
 * views in ordinary (pageable) memory, the abort word and the status on its stack. A kernel can
 * read none of that, so each launch goes through a record the engine keeps per queue:
 *   - a block of mapped pinned host memory (cudaHostAlloc, cudaHostAllocMapped) holding the
 *     kernel's abort word, the status the kernel writes, and a staging copy of the program header,
 *     link views and steps, written here at launch;
 *   - a block of device memory the same size, that the staging copy is copied into on q's stream
 *     (cudaMemcpyAsync, ahead of the kernel) and that the kernel reads, followed by the loop's
 *     per-step counts. The device copy's pointers (the program's steps, the run's program and
 *     links) are rewritten to point into it; the buffers, slots and counters are the caller's
 *     (device memory, or mapped pinned memory: the run's contract).
 * The kernel reads the steps from device memory (cached), not over PCIe; only the abort word and
 * the status cross the bus.
 *
 * The abort word. The caller's word is host memory the device cannot read, so the engine mirrors
 * it: whenever q's owner calls poll or drain (drain at every pass of its wait), every running
 * record whose caller word is set gets its own mapped word set, which the kernel polls at its
 * next wait. comm/resident.c's watch sets its word between drains, so a stop reaches the kernel
 * within one pass of the next drain.
 *
 * The status. The kernel writes it to the record's mapped word, its code last. The engine copies
 * it to the caller's *status once the event recorded after the kernel has passed (seen at the next
 * poll or drain, before any fence behind the run is reported passed), the code last with
 * release as the emulated engine does, and fails q (the run's contract: a message naming step,
 * link, peer and round) when the code is not DL_DONE. The stream itself goes on: later work on q
 * still runs on the device, but q reports the failure from then on.
 *
 * Memory. Records are reused by later launches on q once reaped (a running one never is), grown by
 * allocating a bigger one, and freed with the queue, through cu_alloc/cu_release so that memory is
 * never freed while a gate holds a user stream (release()'s rule). No host function is enqueued
 * (the gates' rule above cu_gate_enter).
 *
 * Unverified on hardware: the engine offers launch only with WEFT_CUDA_DEVICE_LOOP=1 (at open). */

/* What the kernel and the engine share in the mapped block, before the staging copy. */
typedef struct {
  int abort;          /* the kernel's abort word: 0, or 1 once the caller's is set */
  dl_status_t status; /* written by the kernel when the run ends, its code last */
} launch_words_t;

enum { LAUNCH_FREE = 0, LAUNCH_CLAIMED = 1, LAUNCH_RUNNING = 2 };

#define LAUNCH_ALIGN 64
#define LAUNCH_ROUND(x) (((x) + LAUNCH_ALIGN - 1) / LAUNCH_ALIGN * LAUNCH_ALIGN)

struct launch_rec {
  launch_rec_t *next;
  size_t cap;        /* bytes of each block */
  char *host;        /* mapped pinned: launch_words_t, then the staging copy */
  char *dev;         /* device: the copy the kernel reads, then the per-step counts */
  cudaEvent_t ended; /* recorded right after the kernel */
  int state;         /* LAUNCH_FREE, LAUNCH_CLAIMED (being launched), LAUNCH_RUNNING */
  /* Of the running run: the caller's words, and what the failure message needs (host copies). */
  const volatile int *caller_abort;
  dl_status_t *caller_status;
  uint64_t timeout_ns;
  dp_program_t prog; /* the header, its steps pointer cleared */
  dp_step_t *steps;  /* the staging copy's steps, in host memory */
};

/* The staging layout, the same in both blocks (offsets from the start of the copy). */
typedef struct {
  size_t links, steps, moved, copy_bytes, total;
} launch_layout_t;

static launch_layout_t launch_layout(const dp_program_t *p) {
  launch_layout_t l;
  l.links = LAUNCH_ROUND(sizeof(dp_program_t));
  l.steps = l.links + LAUNCH_ROUND((size_t)p->nlinks * sizeof(dl_link_view_t));
  l.copy_bytes = l.steps + (size_t)p->nsteps * sizeof(dp_step_t);
  l.moved = LAUNCH_ROUND(l.copy_bytes);
  l.total = LAUNCH_ROUND(sizeof(launch_words_t)) + l.moved + (size_t)p->nsteps * sizeof(uint64_t);
  return l;
}

static launch_words_t *launch_words(launch_rec_t *r) { return (launch_words_t *)r->host; }
static char *launch_staging(launch_rec_t *r) {
  return r->host + LAUNCH_ROUND(sizeof(launch_words_t));
}

/* The status of an ended run into the caller's, its code last with release: a thread watching
 * the run (comm/resident.c) may read the code alone, with acquire, to learn that it has ended. */
static void launch_publish(dl_status_t *out, dl_status_t st) {
  out->step = st.step;
  out->link = st.link;
  out->waiting_for = st.waiting_for;
  out->round = st.round;
  __atomic_store_n(&out->code, st.code, __ATOMIC_RELEASE);
}

/* The error of a run that ended other than DL_DONE, as this thread's error. */
static weft_result_t launch_error(const launch_rec_t *r, const dl_status_t *st, int device) {
  const dp_program_t *p = &r->prog;
  const char *kind = "-";
  if (st->step >= 0 && st->step < p->nsteps)
    kind = dp_kind_name((dp_kind_t)r->steps[st->step].kind);
  int peer = -1, dir = -1;
  if (st->link >= 0 && st->link < p->nlinks && st->link < DP_MAX_LINKS) {
    peer = p->links[st->link].peer;
    dir = p->links[st->link].dir;
  }
  const char *dirname = dir == DP_LINK_SEND ? "to" : "from";
  const char *waiting =
      st->waiting_for ? "a free slot (the receiver to consume)" : "a message to arrive";
  unsigned long long round = (unsigned long long)st->round;
  switch (st->code) {
    case DL_TIMEOUT:
      return WEFT_ERR(WEFT_ERR_TIMEOUT,
                      "cuda engine: device-resident loop on device %d saw no progress for %llu ms "
                      "at step %d (%s), round %llu, link %d %s rank %d, waiting for %s",
                      device, (unsigned long long)(r->timeout_ns / 1000000ull), st->step, kind,
                      round, st->link, dirname, peer, waiting);
    case DL_ABORTED:
      return WEFT_ERR(WEFT_ERR_ABORTED,
                      "cuda engine: device-resident loop on device %d aborted at step %d (%s), "
                      "round %llu, link %d %s rank %d, waiting for %s",
                      device, st->step, kind, round, st->link, dirname, peer, waiting);
    default:
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "cuda engine: device-resident loop on device %d refused its program (code "
                      "%d) at step %d (%s), link %d (rank %d): a step names a link or buffer the "
                      "run was not given, or a range outside its buffer",
                      device, st->code, st->step, kind, st->link, peer);
  }
}

/* Reaps the runs that have ended and mirrors the abort word of those still going; q->mu held.
 * Runs before reap_fences pops any fence, so a run's status and failure are in place before a
 * fence behind it is reported passed (and while the caller's run is still valid). */
static void reap_launches(dev_queue_t *q) {
  for (launch_rec_t *r = q->launches; r; r = r->next) {
    if (r->state != LAUNCH_RUNNING) continue;
    launch_words_t *w = launch_words(r);
    cudaError_t rc = cudaEventQuery(r->ended);
    if (rc == cudaErrorNotReady) {
      (void)cudaGetLastError(); /* not an error: still running */
      /* Relaxed on both sides: the word carries no data, only the decision to stop; the store
       * to mapped pinned memory reaches the device eventually, where the kernel's relaxed
       * system-scope load sees it at a later wait. */
      if (r->caller_abort && __atomic_load_n(r->caller_abort, __ATOMIC_RELAXED))
        __atomic_store_n(&w->abort, 1, __ATOMIC_RELAXED);
      continue;
    }
    dl_status_t st = {DL_ABORTED, -1, -1, 0, 0};
    if (rc == cudaSuccess) {
      /* The event has passed: the kernel and its writes to the mapped status are complete and
       * visible to the host (event completion orders them), so plain reads are enough. */
      st = w->status;
    } else {
      /* The device failed under the run; the fence that follows reports CUDA's error. */
      (void)cudaGetLastError();
    }
    r->state = LAUNCH_FREE;
    if (rc == cudaSuccess && st.code != DL_DONE) {
      weft_result_t res = launch_error(r, &st, q->e->base.device);
      (void)queue_fail(q, res);
    }
    launch_publish(r->caller_status, st);
  }
}

/* A record with room for layout l: a free one, or a new one at the front of the list. */
static weft_result_t launch_record(dev_queue_t *q, const launch_layout_t *l, launch_rec_t **out) {
  pthread_mutex_lock(&q->mu);
  launch_rec_t *r = q->launches;
  while (r && (r->state != LAUNCH_FREE || r->cap < l->total)) r = r->next;
  if (r) r->state = LAUNCH_CLAIMED; /* no other launch takes it, reap_launches leaves it */
  pthread_mutex_unlock(&q->mu);
  if (r) {
    *out = r;
    return WEFT_SUCCESS;
  }
  r = calloc(1, sizeof *r);
  if (!r) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "cuda engine: allocating a launch record");
  r->cap = l->total;
  weft_result_t res = cu_alloc(&q->e->base, r->cap, 1, (void **)&r->host);
  if (res == WEFT_SUCCESS) res = cu_alloc(&q->e->base, r->cap, 0, (void **)&r->dev);
  if (res == WEFT_SUCCESS) {
    cudaError_t rc = cudaEventCreateWithFlags(&r->ended, cudaEventDisableTiming);
    if (rc != cudaSuccess) res = CUDA_FAIL(rc, "cudaEventCreateWithFlags for a launch");
  }
  if (res != WEFT_SUCCESS) {
    cu_release(&q->e->base, r->host, 1);
    cu_release(&q->e->base, r->dev, 0);
    free(r);
    return res;
  }
  r->state = LAUNCH_CLAIMED;
  pthread_mutex_lock(&q->mu);
  r->next = q->launches;
  q->launches = r;
  pthread_mutex_unlock(&q->mu);
  *out = r;
  return WEFT_SUCCESS;
}

/* Frees q's records (q's stream idle, or given up on). With release = 0 (the engine is closing)
 * their memory stays tracked, for close() to free with the rest. */
static void launch_free_all(dev_queue_t *q, int release) {
  launch_rec_t *r = q->launches;
  while (r) {
    launch_rec_t *next = r->next;
    cudaEventDestroy(r->ended);
    if (release) {
      cu_release(&q->e->base, r->host, 1);
      cu_release(&q->e->base, r->dev, 0);
    }
    free(r);
    r = next;
  }
  q->launches = NULL;
}

/* Sets the abort word of every run still going on q, whose queue is being destroyed: the kernels
 * end at their next wait instead of holding the stream (and the memory freed after it). */
static void launch_stop_all(dev_queue_t *q) {
  pthread_mutex_lock(&q->mu);
  for (launch_rec_t *r = q->launches; r; r = r->next)
    if (r->state == LAUNCH_RUNNING) __atomic_store_n(&launch_words(r)->abort, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&q->mu);
}

static weft_result_t cu_launch(dev_queue_t *q, const dl_run_t *run, dl_status_t *status) {
  if (!run || !run->prog || !status)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "cuda engine: launch of a device program with a NULL run, program or status");
  const dp_program_t *p = run->prog;
  /* What the copy below needs; the kernel's dl_validate checks everything else. */
  if (p->nsteps < 0 || p->nlinks < 0 || p->nlinks > DP_MAX_LINKS || (p->nsteps > 0 && !p->steps) ||
      (p->nlinks > 0 && !run->links))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "cuda engine: launch of a device program with %d steps and %d links "
                    "(at most %d), steps or link views missing",
                    p->nsteps, p->nlinks, DP_MAX_LINKS);
  WEFT_CHECK(use_device(q->e));
  pthread_mutex_lock(&q->mu);
  int failed = q->err != WEFT_SUCCESS;
  pthread_mutex_unlock(&q->mu);
  if (failed) {
    /* Nothing runs: the queue's own error says why (the contract's skipped run). */
    launch_publish(status, (dl_status_t){DL_ABORTED, -1, -1, 0, 0});
    return WEFT_SUCCESS;
  }
  launch_layout_t l = launch_layout(p);
  launch_rec_t *r = NULL;
  WEFT_CHECK(launch_record(q, &l, &r));

  /* The staging copy, with the device copy's addresses in it. */
  launch_words_t *w = launch_words(r);
  char *stage = launch_staging(r);
  w->abort = 0;
  w->status = (dl_status_t){-1, -1, -1, 0, 0};
  dp_program_t *hp = (dp_program_t *)stage;
  *hp = *p;
  hp->steps = (dp_step_t *)(r->dev + l.steps);
  if (p->nlinks > 0) memcpy(stage + l.links, run->links, (size_t)p->nlinks * sizeof *run->links);
  if (p->nsteps > 0) memcpy(stage + l.steps, p->steps, (size_t)p->nsteps * sizeof *p->steps);
  r->prog = *p;
  r->prog.steps = NULL;
  r->steps = (dp_step_t *)(stage + l.steps);
  r->caller_abort = run->abort;
  r->caller_status = status;
  r->timeout_ns = run->timeout_ns;

  /* The mapped words as the device addresses them (the same address under UVA, asked anyway). */
  launch_words_t *dw = NULL;
  cudaError_t rc = cudaHostGetDevicePointer((void **)&dw, w, 0);
  weft_result_t res = WEFT_SUCCESS;
  if (rc != cudaSuccess) res = CUDA_FAIL(rc, "cudaHostGetDevicePointer of a launch's words");
  dl_run_t dr = *run;
  dr.prog = (const dp_program_t *)r->dev;
  dr.links = p->nlinks > 0 ? (const dl_link_view_t *)(r->dev + l.links) : NULL;
  dr.abort = dw ? &dw->abort : NULL;
  if (res == WEFT_SUCCESS) {
    /* From pinned memory, so truly asynchronous: the staging copy is not touched again until
     * the record is reaped, after the kernel (and so the copy) has finished. */
    rc = cudaMemcpyAsync(r->dev, stage, l.copy_bytes, cudaMemcpyHostToDevice, q->stream);
    if (rc != cudaSuccess)
      res = CUDA_FAIL(rc, "cudaMemcpyAsync of a device program (%zu bytes)", l.copy_bytes);
  }
  if (res == WEFT_SUCCESS)
    res = kern_cuda_devloop_launch(&dr, (uint64_t *)(r->dev + l.moved), &dw->status, q->stream);
  if (res == WEFT_SUCCESS) {
    rc = cudaEventRecord(r->ended, q->stream);
    if (rc != cudaSuccess) res = CUDA_FAIL(rc, "cudaEventRecord after a device program");
  }
  if (res != WEFT_SUCCESS) {
    /* The kernel may be enqueued without its event: fail the queue rather than reuse a record
     * that a kernel may still read. The record stays claimed until the queue is freed. */
    pthread_mutex_lock(&q->mu);
    res = queue_fail(q, res);
    pthread_mutex_unlock(&q->mu);
    return res;
  }
  pthread_mutex_lock(&q->mu);
  r->state = LAUNCH_RUNNING; /* its event is recorded: reap_launches may query it now */
  pthread_mutex_unlock(&q->mu);
  return WEFT_SUCCESS;
}

/* Pops the fences that have passed; q->mu held. */
static weft_result_t reap_fences(dev_queue_t *q) {
  reap_launches(q);
  if (q->err != WEFT_SUCCESS) return err_set_message(q->err, q->errmsg);
  while (q->npend > 0) {
    cudaEvent_t ev = q->pend[q->head];
    cudaError_t rc = cudaEventQuery(ev);
    if (rc == cudaErrorNotReady) {
      (void)cudaGetLastError(); /* not an error: not reached yet */
      break;
    }
    if (rc != cudaSuccess)
      return queue_fail(q,
                        CUDA_FAIL(rc,
                                  "device work on a queue of device %d failed "
                                  "(cudaEventQuery of its fence %llu)",
                                  q->e->base.device, (unsigned long long)q->pend_ticket[q->head]));
    q->passed = q->pend_ticket[q->head];
    q->head = (q->head + 1) % q->cap;
    q->npend--;
    q->pool[q->npool++] = ev; /* fits: a queue never has more than cap events */
  }
  return WEFT_SUCCESS;
}

/* Grows the fence ring (q->mu held). Events are created only when the pool is empty, so a queue
 * has at most as many events as the ring has room, and the pool can always take them all back. */
static weft_result_t grow_fences(dev_queue_t *q) {
  size_t cap = q->cap ? 2 * q->cap : 16;
  cudaEvent_t *pend = malloc(cap * sizeof *pend);
  uint64_t *ticket = malloc(cap * sizeof *ticket);
  cudaEvent_t *pool = realloc(q->pool, cap * sizeof *pool);
  if (pool) q->pool = pool;
  if (!pend || !ticket || !pool) {
    free(pend);
    free(ticket);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "cuda engine: growing a queue's fences to %zu", cap);
  }
  for (size_t i = 0; i < q->npend; i++) {
    pend[i] = q->pend[(q->head + i) % q->cap];
    ticket[i] = q->pend_ticket[(q->head + i) % q->cap];
  }
  free(q->pend);
  free(q->pend_ticket);
  q->pend = pend;
  q->pend_ticket = ticket;
  q->head = 0;
  q->cap = cap;
  return WEFT_SUCCESS;
}

static weft_result_t cu_fence(dev_queue_t *q, uint64_t *ticket) {
  WEFT_CHECK(use_device(q->e));
  weft_result_t res = WEFT_SUCCESS;
  pthread_mutex_lock(&q->mu);
  if (q->npend == q->cap) res = grow_fences(q);
  cudaEvent_t ev = NULL;
  if (res == WEFT_SUCCESS) {
    if (q->npool > 0) {
      ev = q->pool[--q->npool];
    } else {
      cudaError_t rc = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
      if (rc != cudaSuccess) res = CUDA_FAIL(rc, "cudaEventCreateWithFlags for a fence");
    }
  }
  if (res == WEFT_SUCCESS) {
    cudaError_t rc = cudaEventRecord(ev, q->stream);
    if (rc != cudaSuccess) {
      res = CUDA_FAIL(rc, "cudaEventRecord of a fence");
      q->pool[q->npool++] = ev;
    }
  }
  if (res == WEFT_SUCCESS) {
    q->pend[(q->head + q->npend) % q->cap] = ev;
    q->pend_ticket[(q->head + q->npend) % q->cap] = ++q->issued;
    q->npend++;
    *ticket = q->issued;
  }
  pthread_mutex_unlock(&q->mu);
  return res;
}

static weft_result_t cu_poll(dev_queue_t *q, uint64_t ticket, int *done) {
  *done = 0;
  WEFT_CHECK(use_device(q->e));
  pthread_mutex_lock(&q->mu);
  weft_result_t res = reap_fences(q);
  *done = ticket <= q->passed;
  uint64_t issued = q->issued;
  pthread_mutex_unlock(&q->mu);
  if (res == WEFT_SUCCESS && ticket > issued)
    return WEFT_ERR(WEFT_ERR_INTERNAL,
                    "cuda engine: poll of ticket %llu, but only %llu fences were issued",
                    (unsigned long long)ticket, (unsigned long long)issued);
  return res;
}

/* Polls `stream` until all its work has finished, at most timeout_ms. */
/* With q (draining it), each pass also reaps q's ended runs and mirrors the abort words of those
 * still running (reap_launches), so a stop reaches a kernel while the caller waits. */
static weft_result_t wait_stream(cudaStream_t stream, int timeout_ms, const char *what,
                                 dev_queue_t *q) {
  int64_t deadline = clock_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
  for (;;) {
    if (q) {
      pthread_mutex_lock(&q->mu);
      reap_launches(q);
      pthread_mutex_unlock(&q->mu);
    }
    cudaError_t rc = cudaStreamQuery(stream);
    if (rc == cudaSuccess) return WEFT_SUCCESS;
    if (rc != cudaErrorNotReady) return CUDA_FAIL(rc, "%s (cudaStreamQuery)", what);
    (void)cudaGetLastError();
    if (clock_now_ms() >= deadline)
      return WEFT_ERR(WEFT_ERR_TIMEOUT,
                      "cuda engine: %s: work still running after %d ms (a gate on the stream "
                      "not opened yet?)",
                      what, timeout_ms);
    sleep_a_little();
  }
}

static weft_result_t cu_drain(dev_queue_t *q, int timeout_ms) {
  WEFT_CHECK(use_device(q->e));
  pthread_mutex_lock(&q->mu);
  reap_launches(q); /* a run that ended gets its status even when q has failed */
  weft_result_t res = q->err != WEFT_SUCCESS ? err_set_message(q->err, q->errmsg) : WEFT_SUCCESS;
  pthread_mutex_unlock(&q->mu);
  WEFT_CHECK(res);
  res = wait_stream(q->stream, timeout_ms, "draining a queue", q);
  pthread_mutex_lock(&q->mu);
  if (res == WEFT_SUCCESS) {
    res = reap_fences(q); /* every fence has passed now: this empties the ring */
  } else if (res != WEFT_ERR_TIMEOUT) {
    res = queue_fail(q, res);
  }
  pthread_mutex_unlock(&q->mu);
  return res;
}

/* release: whether to free the launch records' memory now (0 while the engine closes: close()
 * frees all tracked memory after the queues). */
static void queue_free(dev_queue_t *q, int release) {
  if (use_device(q->e) == WEFT_SUCCESS) {
    launch_stop_all(q);
    (void)wait_stream(q->stream, DESTROY_WAIT_MS, "destroying a queue", NULL);
    for (size_t i = 0; i < q->npend; i++) cudaEventDestroy(q->pend[(q->head + i) % q->cap]);
    for (size_t i = 0; i < q->npool; i++) cudaEventDestroy(q->pool[i]);
    cudaStreamDestroy(q->stream); /* if work is still running, CUDA frees it once it finishes */
    (void)cudaGetLastError();
  }
  launch_free_all(q, release);
  free(q->pend);
  free(q->pend_ticket);
  free(q->pool);
  pthread_mutex_destroy(&q->mu);
  free(q);
}

static weft_result_t cu_queue_create(dev_engine_t *base, dev_queue_t **out) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  WEFT_CHECK(queue_new(e, out));
  weft_result_t res = track(e, *out, TRACK_QUEUE);
  if (res != WEFT_SUCCESS) {
    queue_free(*out, 1);
    *out = NULL;
  }
  return res;
}

static void cu_queue_destroy(dev_queue_t *q) {
  if (q && untrack(q->e, q, TRACK_QUEUE)) queue_free(q, 1);
}

static weft_result_t cu_copy(dev_queue_t *q, void *dst, const void *src, size_t bytes) {
  if (bytes == 0) return WEFT_SUCCESS;
  WEFT_CHECK(use_device(q->e));
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, q->stream),
             "cudaMemcpyAsync of %zu bytes from %p to %p", bytes, src, dst);
  return WEFT_SUCCESS;
}

static weft_result_t cu_reduce(dev_queue_t *q, void *dst, void *dst2, const void *local,
                               const void *incoming, size_t n, weft_dtype_t dtype, weft_op_t op,
                               int avg_nranks) {
  WEFT_CHECK(use_device(q->e));
  if (dst2)
    return kern_cuda_reduce_copy(dst, dst2, local, incoming, n, dtype, op, avg_nranks, q->stream);
  return kern_cuda_reduce(dst, local, incoming, n, dtype, op, avg_nranks, q->stream);
}

static weft_result_t cu_premul(dev_queue_t *q, void *dst, const void *src, size_t n,
                               weft_dtype_t dtype, const void *scalar) {
  WEFT_CHECK(use_device(q->e));
  return kern_cuda_premul(dst, src, n, dtype, scalar, q->stream);
}

/* ---- user streams and gates ---- */

static void gate_unref(dev_gate_t *g) {
  pthread_mutex_lock(&g->mu);
  int left = --g->refs;
  pthread_mutex_unlock(&g->mu);
  if (left > 0) return;
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g);
}

/* Runs on CUDA's host-function thread, in the user stream's order, and holds the stream there
 * until gate_open: the user's later kernels cannot start before weft has written the outputs.
 *
 * Blocking a host function is allowed (CUDA only requires that it make no CUDA calls), but CUDA
 * may serve the host functions of many streams from one thread, so while this one waits, host
 * functions elsewhere in the process may wait behind it. Hence the rule: the engine's own queues
 * never use host functions -- fences are events that poll() queries, gate_wait_inputs queries an
 * event too -- so the work that opens a gate never waits on a blocked host function, and every
 * closed gate opens. There is no timeout here on purpose: letting the stream go before the call
 * finished would hand the user wrong data silently; gate_open is called on every path, failure
 * included (device.h). */
static void CUDART_CB gate_host_fn(void *arg) {
  dev_gate_t *g = arg;
  pthread_mutex_lock(&g->mu);
  while (!g->opened) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
  gate_unref(g);
}

static weft_result_t cu_gate_enter(dev_engine_t *base, void *user_stream, dev_gate_t **out) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  WEFT_CHECK(use_device(e));
  cudaStream_t s = (cudaStream_t)user_stream;
  dev_gate_t *g = calloc(1, sizeof *g);
  if (!g) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "cuda engine: allocating a stream gate");
  g->e = e;
  g->refs = 2;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  weft_result_t res = WEFT_SUCCESS;
  cudaError_t rc = cudaEventCreateWithFlags(&g->inputs, cudaEventDisableTiming);
  if (rc != cudaSuccess) {
    res = CUDA_FAIL(rc, "cudaEventCreateWithFlags for a stream gate");
    goto fail;
  }
  /* Counted before the stream can block: no memory is freed from here on. */
  pthread_mutex_lock(&e->mu);
  e->gates_closed++;
  pthread_mutex_unlock(&e->mu);
  rc = cudaEventRecord(g->inputs, s);
  if (rc == cudaSuccess) rc = cudaLaunchHostFunc(s, gate_host_fn, g);
  if (rc != cudaSuccess) {
    pthread_mutex_lock(&e->mu);
    e->gates_closed--;
    pthread_mutex_unlock(&e->mu);
    res = CUDA_FAIL(rc,
                    "holding the user's stream %p for a call (cudaEventRecord, "
                    "cudaLaunchHostFunc)",
                    user_stream);
    cudaEventDestroy(g->inputs);
    goto fail;
  }
  *out = g;
  return WEFT_SUCCESS;
fail:
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g);
  return res;
}

static weft_result_t cu_gate_wait_inputs(dev_gate_t *g, int timeout_ms) {
  WEFT_CHECK(use_device(g->e));
  int64_t deadline = clock_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
  for (;;) {
    cudaError_t rc = cudaEventQuery(g->inputs);
    if (rc == cudaSuccess) return WEFT_SUCCESS;
    if (rc != cudaErrorNotReady)
      return CUDA_FAIL(rc, "waiting for the user's stream to produce a call's inputs");
    (void)cudaGetLastError();
    if (clock_now_ms() >= deadline)
      return WEFT_ERR(WEFT_ERR_TIMEOUT,
                      "cuda engine: the user's stream did not finish the work before the call "
                      "(its inputs) within %d ms",
                      timeout_ms);
    sleep_a_little();
  }
}

static void cu_gate_open(dev_gate_t *g) {
  /* The event is destroyed here, on the caller's thread: the host function may not call CUDA.
   * Destroying a recorded event is safe even if the stream has not reached it yet. */
  if (use_device(g->e) == WEFT_SUCCESS) cudaEventDestroy(g->inputs);
  (void)cudaGetLastError();
  cuda_engine_t *e = g->e;
  pthread_mutex_lock(&g->mu);
  g->opened = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  gate_unref(g);
  pthread_mutex_lock(&e->mu);
  e->gates_closed--;
  pthread_mutex_unlock(&e->mu);
}

static weft_result_t cu_stream_create(dev_engine_t *base, void **stream) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  WEFT_CHECK(use_device(e));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  weft_result_t res = track(e, s, TRACK_STREAM);
  if (res != WEFT_SUCCESS) {
    cudaStreamDestroy(s);
    return res;
  }
  *stream = s;
  return WEFT_SUCCESS;
}

static weft_result_t cu_stream_sync(dev_engine_t *base, void *stream, int timeout_ms) {
  WEFT_CHECK(use_device((cuda_engine_t *)base));
  return wait_stream((cudaStream_t)stream, timeout_ms, "synchronizing a stream", NULL);
}

static void cu_stream_destroy(dev_engine_t *base, void *stream) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  if (!stream || !untrack(e, stream, TRACK_STREAM)) return;
  if (use_device(e) == WEFT_SUCCESS) cudaStreamDestroy((cudaStream_t)stream);
  (void)cudaGetLastError();
}

/* ---- IPC ---- */

static weft_result_t cu_ipc_export(dev_engine_t *base, void *p, size_t bytes, dev_ipc_handle_t *h) {
  (void)bytes; /* the handle covers the whole allocation; CUDA does not take a size */
  WEFT_CHECK(use_device((cuda_engine_t *)base));
  cudaIpcMemHandle_t ch;
  CUDA_CHECK(cudaIpcGetMemHandle(&ch, p), "cudaIpcGetMemHandle(%p)", p);
  uint32_t magic = IPC_MAGIC;
  memset(h, 0, sizeof *h);
  memcpy(h->bytes, &ch, sizeof ch);
  memcpy(h->bytes + sizeof ch, &magic, sizeof magic);
  return WEFT_SUCCESS;
}

static weft_result_t cu_ipc_import(dev_engine_t *base, const dev_ipc_handle_t *h, void **out) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  *out = NULL;
  cudaIpcMemHandle_t ch;
  uint32_t magic;
  memcpy(&ch, h->bytes, sizeof ch);
  memcpy(&magic, h->bytes + sizeof ch, sizeof magic);
  if (magic != IPC_MAGIC)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "cuda engine: ipc_import: not a handle of the CUDA engine (magic %#x; does "
                    "the peer use another engine?)",
                    magic);
  WEFT_CHECK(use_device(e));
  void *p = NULL;
  CUDA_CHECK(cudaIpcOpenMemHandle(&p, ch, cudaIpcMemLazyEnablePeerAccess),
             "cudaIpcOpenMemHandle of a peer's allocation on device %d", e->base.device);
  weft_result_t res = track(e, p, TRACK_IMPORT);
  if (res != WEFT_SUCCESS) {
    cudaIpcCloseMemHandle(p);
    return res;
  }
  *out = p;
  return WEFT_SUCCESS;
}

static void cu_ipc_close(dev_engine_t *base, void *p) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  if (p && untrack(e, p, TRACK_IMPORT)) free_memory(e, p, TRACK_IMPORT);
}

/* ---- GPUDirect RDMA ---- */

/* cuMemGetHandleForAddressRange (CUDA 11.7+), from the driver through the runtime's entry-point
 * query: the engine links the static runtime and never libcuda directly. */
typedef CUresult (*range_handle_fn)(void *handle, CUdeviceptr dptr, size_t size,
                                    CUmemRangeHandleType type, unsigned long long flags);

static weft_result_t cu_rdma_export(dev_engine_t *base, void *p, size_t bytes, int *fd,
                                    uint64_t *offset) {
  *fd = -1;
  *offset = 0;
  WEFT_CHECK(use_device((cuda_engine_t *)base));
  void *sym = NULL;
  enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t rc = cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &sym, 11070,
                                                    cudaEnableDefault, &found);
  if (rc != cudaSuccess || found != cudaDriverEntryPointSuccess || !sym) {
    (void)cudaGetLastError();
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "cuda engine: the driver has no cuMemGetHandleForAddressRange, so device "
                    "memory cannot be exported as a dma-buf for GPUDirect RDMA (driver 515 or "
                    "newer needed; unset WEFT_IB_GDR to stage through host memory)");
  }
  range_handle_fn get_handle;
  memcpy(&get_handle, &sym, sizeof sym); /* object to function pointer, as POSIX allows */
  int dmabuf = -1;
  CUresult r = get_handle(&dmabuf, (CUdeviceptr)(uintptr_t)p, bytes,
                          CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (r != CUDA_SUCCESS || dmabuf < 0)
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                    "cuda engine: exporting %zu bytes of device memory at %p as a dma-buf failed "
                    "(CUresult %d): GPUDirect RDMA over dma-buf needs NVIDIA's open kernel modules "
                    "and a kernel with dma-buf support (unset WEFT_IB_GDR to stage through host "
                    "memory)",
                    bytes, p, (int)r);
  *fd = dmabuf;
  return WEFT_SUCCESS;
}

/* ---- the engine ---- */

static void cu_close(dev_engine_t *base) {
  cuda_engine_t *e = (cuda_engine_t *)base;
  /* Queues and streams first: their work may still read the memory freed below. */
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < e->ntracked; i++) {
      tracked_t t = e->tracked[i];
      int is_queue = t.what == TRACK_QUEUE || t.what == TRACK_STREAM;
      if (is_queue != (pass == 0)) continue;
      switch (t.what) {
        case TRACK_QUEUE:
          queue_free(t.p, 0);
          break;
        case TRACK_STREAM:
          if (use_device(e) == WEFT_SUCCESS) {
            (void)wait_stream(t.p, DESTROY_WAIT_MS, "closing the engine", NULL);
            cudaStreamDestroy(t.p);
          }
          break;
        default:
          free_memory(e, t.p, t.what);
          break;
      }
    }
  }
  (void)cudaGetLastError();
  free(e->tracked);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

static const dev_ops_t cuda_ops = {
    .name = "cuda",
    .mem_kind = cu_mem_kind,
    .alloc = cu_alloc,
    .release = cu_release,
    .queue_create = cu_queue_create,
    .queue_destroy = cu_queue_destroy,
    .copy = cu_copy,
    .reduce = cu_reduce,
    .premul = cu_premul,
    /* No launch by default: the CUDA kernel of the device-resident loop
     * (kernels/cuda/devloop_kernel.cu) has not run on hardware yet, so device calls take the
     * host-driven path. WEFT_CUDA_DEVICE_LOOP=1 at open gives the engine cuda_loop_ops instead,
     * these with launch = cu_launch. */
    .launch = NULL,
    .fence = cu_fence,
    .poll = cu_poll,
    .drain = cu_drain,
    .gate_enter = cu_gate_enter,
    .gate_wait_inputs = cu_gate_wait_inputs,
    .gate_open = cu_gate_open,
    .stream_create = cu_stream_create,
    .stream_sync = cu_stream_sync,
    .stream_destroy = cu_stream_destroy,
    .ipc_export = cu_ipc_export,
    .ipc_import = cu_ipc_import,
    .ipc_close = cu_ipc_close,
    .rdma_export = cu_rdma_export,
    .close = cu_close,
};

/* cuda_ops with the device-resident loop: built once, by the first open that asks for it. */
static dev_ops_t cuda_loop_ops;
static pthread_once_t cuda_loop_once = PTHREAD_ONCE_INIT;

static void cuda_loop_ops_init(void) {
  cuda_loop_ops = cuda_ops;
  cuda_loop_ops.launch = cu_launch;
}

/* WEFT_CUDA_DEVICE_LOOP, read with getenv at open like WEFT_EMULATED_DELAY_US: it picks the
 * engine's code, not a communicator's setting. Unset, empty or 0: no launch; 1: launch. */
static weft_result_t device_loop_wanted(int *on) {
  const char *env = getenv("WEFT_CUDA_DEVICE_LOOP");
  *on = 0;
  if (!env || !*env || strcmp(env, "0") == 0) return WEFT_SUCCESS;
  if (strcmp(env, "1") == 0) {
    *on = 1;
    return WEFT_SUCCESS;
  }
  return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "WEFT_CUDA_DEVICE_LOOP=%s: expected 0 or 1", env);
}

int cuda_current_device(void) {
  int count = 0, device = -1;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 ||
      cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return device;
}

weft_result_t cuda_engine_open(dev_engine_t **out) {
  *out = NULL;
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED, "cuda engine: no CUDA device (%s)",
                    rc != cudaSuccess ? cudaGetErrorString(rc) : "the driver lists none");
  }
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device), "cudaGetDevice");
  /* Creates the context now, so that a broken driver or a device in exclusive use by another
   * process fails here and not in the middle of the first collective. */
  CUDA_CHECK(cudaFree(NULL), "initializing device %d", device);
  /* Every kernel is loaded now: a kernel loaded lazily at its first launch would wait for the
   * device to go idle, and a user stream held by a gate (below) keeps it busy until the very
   * call that launches the kernel finishes. */
  WEFT_CHECK(kern_cuda_load_all());
  int loop = 0;
  WEFT_CHECK(device_loop_wanted(&loop));
  if (loop) {
    WEFT_CHECK(kern_cuda_devloop_load()); /* loaded now for the same reason */
    pthread_once(&cuda_loop_once, cuda_loop_ops_init);
  }
  cuda_engine_t *e = calloc(1, sizeof *e);
  if (!e) return WEFT_ERR(WEFT_ERR_NO_MEMORY, "cuda engine: allocating the engine");
  e->base.ops = loop ? &cuda_loop_ops : &cuda_ops;
  e->base.device = device;
  pthread_mutex_init(&e->mu, NULL);
  *out = &e->base;
  return WEFT_SUCCESS;
}
