/* shm_ring.c -- creating, attaching and unlinking the shm transport's segments; futex doorbells. */
#include "transport/shm_ring.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/spin.h"

#define SEG_MAGIC 0x5746534du /* "WFSM" */
#define HDR_BYTES 64
#define CTL_BYTES 192 /* an shm_ring_ctl_t: three cache lines */
#define PAGE 4096

/* The first HDR_BYTES of a pair segment. */
typedef struct {
  _Atomic uint32_t magic; /* stored last, with release, by the creator: the rest is then valid */
  uint32_t nslots;
  uint64_t slot_bytes;
  _Atomic int32_t closed[2];
  _Atomic int32_t attached;
  _Atomic int32_t can_read[2];
} seg_hdr_t;

_Static_assert(sizeof(seg_hdr_t) <= HDR_BYTES, "segment header grew");
_Static_assert(sizeof(shm_ring_ctl_t) == CTL_BYTES, "ring control block changed size");
_Static_assert(sizeof(shm_slot_hdr_t) == 64, "a slot header is one cache line");
_Static_assert((HDR_BYTES + 2 * CTL_BYTES) % 64 == 0, "slot headers start on a cache line");

void shm_bell_name(char *buf, const char *kind, uint64_t comm_id, int rank, int pid) {
  snprintf(buf, SHM_NAME_MAX, "/weft-%016llx-%s-%d.%d", (unsigned long long)comm_id, kind, rank,
           pid);
}

void shm_pair_name(char *buf, uint64_t comm_id, int lo, int lo_pid, int hi, int hi_pid) {
  snprintf(buf, SHM_NAME_MAX, "/weft-%016llx-pair-%d.%d-%d.%d", (unsigned long long)comm_id, lo,
           lo_pid, hi, hi_pid);
}

void shm_unmap(void *p, size_t bytes) {
  if (p) munmap(p, bytes);
}

/* MAP_POPULATE: the pages are allocated already (reserve), so mapping them all now costs no
 * memory, and a call is not the one that pays each page's first touch. A ring's slots are touched
 * one message at a time: with 64 KiB messages a fresh segment took 16 calls to touch every slot,
 * and a 2-rank all-reduce of 64 KiB measured over 20 calls took 30-400 us instead of 10 on this
 * host (a virtual machine, where a page's first touch is dearer still): results/
 * 2026-11-28-first-touch. */
static weft_result_t map_fd(int fd, size_t bytes, const char *name, void **out) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "mmap of shared memory %s (%zu bytes): %s", name, bytes,
                    strerror(errno));
  *out = p;
  return WEFT_SUCCESS;
}

/* Sizes the segment for real (not sparse): a full /dev/shm then fails here with ENOSPC instead of
 * killing the process with SIGBUS on first touch. */
static weft_result_t reserve(int fd, size_t bytes, const char *name) {
  int rc = posix_fallocate(fd, 0, (off_t)bytes);
  if (rc != 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM,
                    "reserving %zu bytes of shared memory for %s: %s (is "
                    "/dev/shm big enough? WEFT_SHM_SLOTS and WEFT_SLICE_BYTES set its size)",
                    bytes, name, strerror(rc));
  return WEFT_SUCCESS;
}

weft_result_t shm_bell_create(const char *name, shm_bell_t **out) {
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno == EEXIST) { /* left by a dead process that had our pid: ours now */
    shm_unlink(name);
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  }
  if (fd < 0) return WEFT_ERR(WEFT_ERR_SYSTEM, "shm_open %s: %s", name, strerror(errno));
  void *p = NULL;
  weft_result_t res = reserve(fd, sizeof(shm_bell_t), name);
  if (res == WEFT_SUCCESS) res = map_fd(fd, sizeof(shm_bell_t), name, &p);
  close(fd);
  if (res != WEFT_SUCCESS) {
    shm_unlink(name);
    return res;
  }
  *out = p;
  return WEFT_SUCCESS;
}

weft_result_t shm_bell_attach(const char *name, int expected, shm_bell_t **out) {
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "shm_open of a peer's doorbell %s: %s (did it exit?)", name,
                    strerror(errno));
  void *p = NULL;
  weft_result_t res = map_fd(fd, sizeof(shm_bell_t), name, &p);
  close(fd);
  WEFT_CHECK(res);
  *out = p;
  if (atomic_fetch_add(&(*out)->attached, 1) + 1 == expected) shm_unlink(name);
  return WEFT_SUCCESS;
}

void shm_bell_ring(shm_bell_t *b) {
  /* The fence pairs with shm_bell_announce_sleep's: either the owner's last look finds our news,
   * or we see `sleeping` and bump the bell it sleeps on (futex_wait then returns at once, or the
   * wake finds it). Only then: a bump on every message moved the line that every local peer rings
   * between their cores (an atomic add where the receiver never sleeps; 7% of an 8-byte call's
   * user time at 4 ranks, results/2026-11-29-user-time). */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&b->sleeping, memory_order_relaxed)) {
    atomic_fetch_add(&b->bell, 1);
    syscall(SYS_futex, (uint32_t *)&b->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
  }
}

uint32_t shm_bell_announce_sleep(shm_bell_t *b) {
  atomic_store_explicit(&b->sleeping, 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  /* Read before the last look: a bump after it (news the look missed) moves the bell away from
   * this value, so the sleep returns at once. */
  return atomic_load(&b->bell);
}

int shm_bell_sleep(shm_bell_t *b, uint32_t seen, int timeout_ms) {
  struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
  long rc = syscall(SYS_futex, (uint32_t *)&b->bell, FUTEX_WAIT, seen, &ts, NULL, 0);
  return rc != 0 && errno == ETIMEDOUT;
}

weft_result_t shm_bells_open(shm_bells_t *b, const char *kind, uint64_t comm_id, int rank,
                             int nranks, int pid) {
  memset(b, 0, sizeof *b);
  b->kind = kind;
  b->comm_id = comm_id;
  b->rank = rank;
  b->nranks = nranks;
  b->peers = calloc((size_t)nranks, sizeof *b->peers);
  b->pids = calloc((size_t)nranks, sizeof *b->pids);
  if (!b->peers || !b->pids) {
    shm_bells_close(b, 0, 0, NULL);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "out of memory for %d doorbells", nranks);
  }
  shm_bell_name(b->name, kind, comm_id, rank, pid);
  weft_result_t res = shm_bell_create(b->name, &b->mine);
  if (res != WEFT_SUCCESS) shm_bells_close(b, 0, 0, NULL);
  return res;
}

weft_result_t shm_bells_attach(shm_bells_t *b, const int *peers, const int *pids, int n) {
  b->npeers = n;
  if (n == 0) shm_unlink(b->name); /* nobody will attach */
  for (int i = 0; i < n; i++) {
    char name[SHM_NAME_MAX];
    shm_bell_name(name, b->kind, b->comm_id, peers[i], pids[i]);
    b->pids[peers[i]] = pids[i];
    WEFT_CHECK_CTX(shm_bell_attach(name, n, &b->peers[peers[i]]), "with rank %d", peers[i]);
  }
  return WEFT_SUCCESS;
}

/* Whether `name` (a segment's name in /dev/shm) carries the pid of a process that was a local
 * peer here and is gone: every pid in a name follows a '.' (rank.pid). */
static int names_dead_peer(const shm_bells_t *b, const char *name, int (*alive)(int pid)) {
  for (const char *dot = strchr(name, '.'); dot; dot = strchr(dot + 1, '.')) {
    int pid = atoi(dot + 1);
    for (int r = 0; pid > 0 && r < b->nranks; r++)
      if (b->pids[r] == pid && !alive(pid)) return 1;
  }
  return 0;
}

/* A local peer killed after creating a segment and before its peers attached to it (a doorbell
 * in init or in a split, whose new communicator's members may never learn its pid; a pair's ring
 * the other side never joined) leaves it behind. Names end in the creators' pids: remove every
 * weft segment, whatever its communicator, that names a process which was a local peer here and
 * is gone. Only known peers' pids, so a process in another pid namespace sharing /dev/shm is
 * never mistaken for a dead one. */
static void sweep_dead_peers(const shm_bells_t *b, int (*alive)(int pid)) {
  if (!b->pids) return;
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, "weft-", 5) != 0 || !names_dead_peer(b, e->d_name, alive)) continue;
    char name[SHM_NAME_MAX + 8];
    snprintf(name, sizeof name, "/%s", e->d_name);
    shm_unlink(name);
  }
  closedir(d);
}

void shm_bells_close(shm_bells_t *b, int orderly, int connect_timeout_ms, int (*alive)(int pid)) {
  int64_t deadline = clock_now_ms() + connect_timeout_ms;
  int dead = 0;
  while (orderly && b->mine && !dead && atomic_load(&b->mine->attached) < b->npeers &&
         clock_now_ms() < deadline) {
    for (int r = 0; r < b->nranks; r++) dead |= b->pids[r] && !alive(b->pids[r]);
    if (!dead) usleep(1000);
  }
  if (b->mine) shm_unlink(b->name); /* normally gone already (ENOENT); not after a failed init */
  sweep_dead_peers(b, alive);
  for (int r = 0; b->peers && r < b->nranks; r++) shm_unmap(b->peers[r], sizeof(shm_bell_t));
  shm_unmap(b->mine, sizeof(shm_bell_t));
  free(b->peers);
  free(b->pids);
  b->mine = NULL;
  b->peers = NULL;
  b->pids = NULL;
}

static size_t seg_bytes(int nslots, size_t slot_bytes, size_t *data_off) {
  /* Per slot of each ring: its header line (shm_slot_hdr_t). */
  size_t meta = HDR_BYTES + 2 * CTL_BYTES + 2 * sizeof(shm_slot_hdr_t) * (size_t)nslots;
  *data_off = (meta + PAGE - 1) & ~(size_t)(PAGE - 1);
  return *data_off + 2 * (size_t)nslots * slot_bytes;
}

static void seg_layout(shm_seg_t *s, int nslots, size_t slot_bytes, size_t data_off) {
  char *b = s->base;
  seg_hdr_t *h = s->base;
  s->nslots = nslots;
  s->slot_bytes = slot_bytes;
  s->closed = h->closed;
  s->attached = &h->attached;
  s->can_read = h->can_read;
  char *slots = b + HDR_BYTES + 2 * CTL_BYTES;
  for (int d = 0; d < 2; d++) {
    s->ring[d] = (shm_ring_ctl_t *)(b + HDR_BYTES + (size_t)d * CTL_BYTES);
    s->hdr[d] = (shm_slot_hdr_t *)slots + (size_t)d * (size_t)nslots;
    s->data[d] = b + data_off + (size_t)d * (size_t)nslots * slot_bytes;
  }
}

/* The creating side: size, map and initialize, then publish with the magic number. */
static weft_result_t seg_init(int fd, const char *name, int nslots, size_t slot_bytes,
                              shm_seg_t *s) {
  size_t data_off;
  s->bytes = seg_bytes(nslots, slot_bytes, &data_off);
  WEFT_CHECK(reserve(fd, s->bytes, name));
  WEFT_CHECK(map_fd(fd, s->bytes, name, &s->base));
  seg_hdr_t *h = s->base;
  h->nslots = (uint32_t)nslots;
  h->slot_bytes = slot_bytes;
  atomic_store(&h->attached, 1);
  seg_layout(s, nslots, slot_bytes, data_off);
  atomic_store_explicit(&h->magic, SEG_MAGIC, memory_order_release);
  return WEFT_SUCCESS;
}

/* The second side: wait for the creator's magic, check both sides agree on the ring shape, count
 * in and unlink: both sides have it mapped now. *gone = 1 (and no error) when the creator gave up
 * before sizing it (it unlinks the name then, e.g. when /dev/shm is full): the caller starts over
 * and meets the same trouble itself, instead of waiting for a size that never comes. */
static weft_result_t seg_join(int fd, const char *name, int nslots, size_t slot_bytes,
                              int64_t deadline, shm_seg_t *s, int *gone) {
  struct stat st;
  *gone = 0;
  for (;;) {
    if (fstat(fd, &st) != 0)
      return WEFT_ERR(WEFT_ERR_SYSTEM, "fstat %s: %s", name, strerror(errno));
    if (st.st_size >= HDR_BYTES) break;
    if (st.st_nlink == 0) {
      *gone = 1;
      return WEFT_SUCCESS;
    }
    if (clock_now_ms() > deadline)
      return WEFT_ERR(WEFT_ERR_TIMEOUT, "shared memory %s was never sized", name);
    usleep(100);
  }
  s->bytes = (size_t)st.st_size;
  WEFT_CHECK(map_fd(fd, s->bytes, name, &s->base));
  seg_hdr_t *h = s->base;
  while (atomic_load_explicit(&h->magic, memory_order_acquire) != SEG_MAGIC) {
    if (clock_now_ms() > deadline)
      return WEFT_ERR(WEFT_ERR_TIMEOUT, "shared memory %s was never initialized", name);
    usleep(100);
  }
  size_t data_off;
  if (h->nslots != (uint32_t)nslots || h->slot_bytes != slot_bytes ||
      s->bytes != seg_bytes(nslots, slot_bytes, &data_off))
    return WEFT_ERR(WEFT_ERR_MISMATCH,
                    "the peer made its shm rings %u slots of %llu bytes, this rank wants %d of "
                    "%zu: WEFT_SHM_SLOTS and WEFT_SLICE_BYTES must agree",
                    h->nslots, (unsigned long long)h->slot_bytes, nslots, slot_bytes);
  seg_layout(s, nslots, slot_bytes, data_off);
  if (atomic_fetch_add(&h->attached, 1) + 1 == 2) shm_unlink(name);
  return WEFT_SUCCESS;
}

weft_result_t shm_seg_open(const char *name, int nslots, size_t slot_bytes, int64_t deadline,
                           int (*peer_alive)(int pid), int peer_pid, shm_seg_t *out) {
  memset(out, 0, sizeof *out);
  weft_result_t res;
  for (;;) {
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
      res = seg_init(fd, name, nslots, slot_bytes, out);
      close(fd);
      if (res != WEFT_SUCCESS) shm_unlink(name);
      break;
    }
    if (errno != EEXIST) return WEFT_ERR(WEFT_ERR_SYSTEM, "shm_open %s: %s", name, strerror(errno));
    fd = shm_open(name, O_RDWR, 0);
    if (fd >= 0) {
      int gone;
      res = seg_join(fd, name, nslots, slot_bytes, deadline, out, &gone);
      close(fd);
      if (!gone) break;
      if (clock_now_ms() > deadline)
        return WEFT_ERR(WEFT_ERR_TIMEOUT, "shared memory %s: the peer gave up creating it", name);
      continue;
    }
    /* ENOENT: the peer's segment vanished between our two opens (it gave up); try again. */
    if (!peer_alive(peer_pid))
      return WEFT_ERR(WEFT_ERR_REMOTE, "pid %d exited before connecting", peer_pid);
    if (clock_now_ms() > deadline)
      return WEFT_ERR(WEFT_ERR_TIMEOUT, "shm_open %s: %s", name, strerror(errno));
  }
  if (res != WEFT_SUCCESS && out->base) {
    munmap(out->base, out->bytes);
    out->base = NULL;
  }
  return res;
}

weft_result_t shm_seg_join_existing(const char *name, int nslots, size_t slot_bytes,
                                    int64_t deadline, shm_seg_t *out, int *found) {
  memset(out, 0, sizeof *out);
  *found = 0;
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0) {
    if (errno == ENOENT) return WEFT_SUCCESS; /* the peer has not created it */
    return WEFT_ERR(WEFT_ERR_SYSTEM, "shm_open %s: %s", name, strerror(errno));
  }
  int gone = 0;
  weft_result_t res = seg_join(fd, name, nslots, slot_bytes, deadline, out, &gone);
  close(fd);
  if (res == WEFT_SUCCESS && !gone) *found = 1;
  if ((res != WEFT_SUCCESS || gone) && out->base) {
    munmap(out->base, out->bytes);
    out->base = NULL;
  }
  return res;
}

void shm_seg_close(shm_seg_t *s, const char *name) {
  if (!s->base) return;
  /* The peer never mapped it: nobody else will unlink it. */
  if (atomic_load(s->attached) < 2) shm_unlink(name);
  munmap(s->base, s->bytes);
  s->base = NULL;
}

typedef struct {
  conn_t *const *conns;
  int n;
  int (*any_ready)(conn_t *const *, int);
} conn_set_t;

static int set_ready(void *arg) {
  const conn_set_t *set = arg;
  return set->any_ready(set->conns, set->n);
}

int shm_spin_until_ready(conn_t *const *conns, int n, int (*any_ready)(conn_t *const *, int),
                         int64_t budget_us) {
  return spin_yield_until(set_ready, &(conn_set_t){conns, n, any_ready}, budget_us);
}
