/* shm_ring.h -- internal: the shared-memory layout of the shm transport and the calls that map it.
 *
 * Two kinds of POSIX shm segments, both named after the communicator id, the ranks and their pids
 * (so a rerun of the same job, or a crashed one, never finds a stale segment under its name):
 *   - a doorbell per rank: one futex word that peers bump whenever they give the rank something to
 *     do (data in its incoming rings, space in its outgoing ones), so it can sleep on one word
 *     however many peers it waits for;
 *   - a segment per pair of ranks holding one ring of fixed-size slots per direction.
 * Every segment is unlinked as soon as everyone who will map it has: from then on it lives only
 * in the mappings, so a crash (even SIGKILL) leaves nothing behind in /dev/shm. */
#ifndef WEFT_TRANSPORT_SHM_RING_H_
#define WEFT_TRANSPORT_SHM_RING_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "include/weft.h"
#include "transport/transport.h"

#define SHM_NAME_MAX 96

typedef struct {
  _Atomic uint32_t bell;     /* bumped by a peer with news for this rank while it sleeps */
  _Atomic uint32_t sleeping; /* set while the owner futex-waits, else wakers skip the syscall */
  _Atomic int32_t attached;  /* peers that mapped this doorbell; the last one unlinks it */
  /* 1 + the core the owner last waited on, 0 unknown (spin.h). Its own cache line, stored only
   * when it changes: peers read it at every wait, and the bumps of `bell` must not move it. */
  _Alignas(64) _Atomic int32_t cpu;
} shm_bell_t;

/* One direction. head and tail sit on their own cache lines: each is written by one side only. */
typedef struct {
  /* Slots the sender filled (stored with release): cuda_ipc.c's publication; shm.c publishes
   * each slot in its header (shm_slot_hdr_t.seq) instead. */
  _Alignas(64) _Atomic uint64_t head;
  _Alignas(64) _Atomic uint64_t tail; /* slots the receiver freed (stored with release) */
  /* Written by the receiver too: every slot before it goes to a plain receive it posted already
   * (one that copies into its own buffer), so the sender may describe them (shm.c). */
  _Atomic uint64_t plain_end;
  /* Written by the receiver: how long a large slot's lines take it to bring over, per kind
   * (plain, streamed), in ns per 64 KiB, renewed every few slots; 0 until measured
   * (shm_stream.h). Its own line: the sender reads it only when it renews its own measures. */
  _Alignas(64) _Atomic int64_t read_ns[2];
} shm_ring_ctl_t;

enum { SHM_OPEN = 0, SHM_CLOSED = 1, SHM_ABORTED = 2 };

/* What a slot holds (shm_seg_t.mode), for the single-copy path (transport/shm.c). The sender sets
 * BYTES or DESC before publishing the slot; after that the two sides move it on only by
 * compare-and-swap, so exactly one of them copies the bytes:
 *   BYTES    the bytes are in the slot;
 *   DESC     they are at addr[] in the sender's memory, which stays untouched until the slot is
 *            READ or COPIED;
 *   READING  the receiver claimed DESC and is reading (process_vm_readv);
 *   READ     it has read them into its own buffer: the sender's buffer is free;
 *   COPYING  the sender claimed DESC (or ASK) and copies its bytes into the slot;
 *   COPIED   the bytes are in the slot now (copied by either side): as BYTES;
 *   ASK      the receiver's read was refused: it asks the sender to copy them into the slot. */
enum {
  SHM_SLOT_BYTES = 0,
  SHM_SLOT_DESC = 1,
  SHM_SLOT_READING = 2,
  SHM_SLOT_READ = 3,
  SHM_SLOT_COPYING = 4,
  SHM_SLOT_COPIED = 5,
  SHM_SLOT_ASK = 6,
};

/* How the sender wrote a slot (shm_slot_hdr_t.written): plainly, with non-temporal stores, or
 * only a small part of it, plainly (a call description): the receiver times the first two. */
enum { SHM_WRITTEN_PLAIN = 0, SHM_WRITTEN_STREAMED = 1, SHM_WRITTEN_PART = 2 };

/* shm_seg_t.can_read[s]: whether side s may read side 1-s's memory (its probe at connect). */
enum { SHM_CMA_UNKNOWN = 0, SHM_CMA_YES = 1, SHM_CMA_NO = 2 };

/* What the sender says about one slot, on a cache line of its own: the receiver finds the slot
 * published, its length and its mode with one cache miss, where a head index and separate length
 * and mode arrays cost it three, one after the other (a small call's latency is these misses). */
typedef struct {
  /* 1 + the slot's position in the stream, stored (release) once the rest is written: the
   * receiver of position q polls for q + 1, which a slot holds for one lap of the ring only. */
  _Alignas(64) _Atomic uint64_t seq;
  uint32_t len;                /* bytes in the slot (cuda_ipc.c: with its device bit) */
  _Atomic uint32_t mode;       /* SHM_SLOT_* */
  uint64_t addr;               /* a DESC slot's bytes in the sender's memory */
  uint32_t written;            /* SHM_WRITTEN_*: how (shm_stream.h) */
} shm_slot_hdr_t;

/* A mapped pair segment. Side 0 is the lower rank; ring[s] carries side s's messages. */
typedef struct {
  void *base;
  size_t bytes;
  int nslots;
  size_t slot_bytes;
  shm_ring_ctl_t *ring[2];
  _Atomic int32_t *closed;   /* [2]: SHM_CLOSED or SHM_ABORTED once that side closed */
  _Atomic int32_t *attached; /* sides that mapped it; the second one unlinks it */
  _Atomic int32_t *can_read; /* [2]: SHM_CMA_*, set by each side once it probed the other */
  shm_slot_hdr_t *hdr[2];    /* per slot of ring s: published, length, mode, address */
  char *data[2];             /* nslots slots of slot_bytes each, per ring */
} shm_seg_t;

/* `kind` tells transports' segments apart in the name ("bell", "ipcbell"). */
void shm_bell_name(char *buf, const char *kind, uint64_t comm_id, int rank, int pid);
void shm_pair_name(char *buf, uint64_t comm_id, int lo, int lo_pid, int hi, int hi_pid);

/* Creates this rank's doorbell; *out stays mapped until shm_unmap(*out, sizeof **out). */
weft_result_t shm_bell_create(const char *name, shm_bell_t **out);
/* Maps a peer's doorbell and counts itself in; the last of `expected` attachers unlinks it. */
weft_result_t shm_bell_attach(const char *name, int expected, shm_bell_t **out);
/* Tells the owner of `b` there is news (published before the call), waking it only if it sleeps
 * or is about to. */
void shm_bell_ring(shm_bell_t *b);
/* The owner, before it sleeps: announces the sleep and returns the bell's value to sleep on. It
 * must then look for news once more before shm_bell_sleep, and clear `sleeping` after it. */
uint32_t shm_bell_announce_sleep(shm_bell_t *b);
/* Sleeps until the bell moves from `seen` or timeout_ms passes; 1 if it timed out. */
int shm_bell_sleep(shm_bell_t *b, uint32_t seen, int timeout_ms);

/* A transport's doorbells: this rank's own, which its local peers ring, and theirs, mapped once
 * every rank has published its pid (shm.c and cuda_ipc.c keep one set each). */
typedef struct {
  const char *kind;
  uint64_t comm_id;
  int rank, nranks;
  char name[SHM_NAME_MAX]; /* of `mine` */
  shm_bell_t *mine;
  shm_bell_t **peers; /* per rank, mapped by shm_bells_attach; NULL where not a local peer */
  int *pids;          /* per rank, 0 where not a local peer */
  int npeers;         /* local peers: each of them attaches to `mine` */
} shm_bells_t;

/* Creates this rank's doorbell (named after `kind`, the communicator, the rank and `pid`). */
weft_result_t shm_bells_open(shm_bells_t *b, const char *kind, uint64_t comm_id, int rank,
                             int nranks, int pid);
/* Maps the doorbells of the local peers peers[i] (process pids[i]); the last of them to attach to
 * a doorbell unlinks it, and with no local peer ours is unlinked at once: from then on a crash
 * leaves nothing in /dev/shm. */
weft_result_t shm_bells_attach(shm_bells_t *b, const int *peers, const int *pids, int n);
/* Unmaps and frees everything. `orderly` first lets every local peer attach to our doorbell (one
 * may still be in init) until connect_timeout_ms, unless `alive` says one of them died. */
void shm_bells_close(shm_bells_t *b, int orderly, int connect_timeout_ms, int (*alive)(int pid));

/* The polling phase of a doorbell transport's wait (common/spin.h): polls any_ready(conns, n),
 * yielding the core between polls, for up to budget_us; 1 as soon as it reports something. */
int shm_spin_until_ready(conn_t *const *conns, int n, int (*any_ready)(conn_t *const *, int),
                         int64_t budget_us);

/* Opens the pair segment, creating it if the peer has not yet (either side may come first);
 * waits until it is initialized, at most until deadline_ms (clock_now_ms). `peer_alive` is
 * checked while waiting, so a dead peer fails fast. */
weft_result_t shm_seg_open(const char *name, int nslots, size_t slot_bytes, int64_t deadline_ms,
                           int (*peer_alive)(int pid), int peer_pid, shm_seg_t *out);
/* Joins the pair segment only if the peer has created it already: *found = 0 (and no error)
 * otherwise. Waits, at most until deadline_ms, only for a segment being initialized. */
weft_result_t shm_seg_join_existing(const char *name, int nslots, size_t slot_bytes,
                                    int64_t deadline_ms, shm_seg_t *out, int *found);
void shm_seg_close(shm_seg_t *s, const char *name);

void shm_unmap(void *p, size_t bytes);

#endif /* WEFT_TRANSPORT_SHM_RING_H_ */
