/* transport.h -- internal: the interface every transport implements (TCP, shared memory; CUDA IPC
 * and verbs later, one file each).
 *
 * A transport connects this rank to a peer and moves messages over that connection. Each
 * direction of a connection is an ordered stream: messages are delivered in the order they were
 * posted, and the receiver posts receives of the same lengths in the same order. Transfers are
 * asynchronous: post_send/post_recv queue them, progress() moves bytes without blocking, and
 * wait() blocks until one of a set of connections may progress. The executor drives all of it, so
 * collectives never know which transport carries a step. */
#ifndef WEFT_TRANSPORT_TRANSPORT_H_
#define WEFT_TRANSPORT_TRANSPORT_H_

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "include/weft.h"
#include "kernels/devloop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest number of sockets (or lanes) a transport may stripe one message over. */
#define XFER_MAX_LANES 16

typedef struct transport transport_t;
typedef struct conn conn_t;
typedef struct transport_ops transport_ops_t;

/* One part of a transfer on one lane; transports link parts into their per-lane queues. */
typedef struct xfer_part {
  struct xfer *owner;
  struct xfer_part *next;
  char *ptr;
  size_t left;
} xfer_part_t;

/* One posted message. The caller owns the storage and must keep it (and the buffer) alive until
 * `complete` is set or the connection is closed. */
typedef struct xfer {
  int complete;
  int parts_left;
  /* Set by the caller before posting: the buffer is device memory (device/device.h). Only the
   * device transports (cuda_ipc, staged) accept it; host transports never see device buffers. */
  int device;
  const char *data; /* post_recv_inplace: where the message lies once complete */
  /* Set by the caller before lend_send: it writes only a small part of the slot (a call
   * description), plainly: the transport has nothing to choose or measure about it. */
  int lend_part;
  /* Set by lend_send: fill the lent slot with non-temporal stores (kernels/stream.h), which costs
   * less now than plain ones (transport/shm_stream.h); a request, not a condition of the data
   * being right. 0 where a transport never asks. */
  int lent_stream;
  /* Set by lend_send where the transport times how long filling its slot takes
   * (transport/shm_stream.h): the caller then sets fill_ns, the time its pass writing the slot
   * took, before commit_send (0: not measured). */
  int time_fill;
  int64_t fill_ns;
  xfer_part_t parts[XFER_MAX_LANES];
} xfer_t;

/* What a transport needs to know about the communicator that creates it. */
typedef struct {
  int rank;
  int nranks;
  uint64_t comm_id; /* the same on every rank of one communicator, different across them */
  const weft_config_t *config;
  const void *bootstrap_addr; /* net_addr_t this rank advertises (from the bootstrap) */
  struct dev_engine *dev;     /* the device engine, for device transports; NULL without one */
} transport_params_t;

struct transport_ops {
  const char *name;
  /* Size of the address blob each rank publishes through the bootstrap. */
  size_t addr_size;

  weft_result_t (*create)(const transport_params_t *params, transport_t **out);
  /* This rank's address blob (addr_size bytes), to be published to every peer. */
  void (*local_addr)(const transport_t *t, void *blob);
  /* Connects to `peer`, whose published blob is `peer_blob`. Both ranks call it, in any order
   * relative to their other connects; it blocks at most config->connect_timeout_ms. */
  weft_result_t (*connect)(transport_t *t, int peer, const void *peer_blob, conn_t **out);
  void (*destroy)(transport_t *t);

  weft_result_t (*post_send)(conn_t *c, const void *buf, size_t len, xfer_t *x);
  weft_result_t (*post_recv)(conn_t *c, void *buf, size_t len, xfer_t *x);
  /* Moves whatever bytes can move now; adds 1 to *progressed if any did. */
  weft_result_t (*progress)(conn_t *c, int *progressed);
  /* Blocks until a posted transfer on one of `conns` may progress, or timeout_ms passes. Before
   * it sleeps it polls for up to spin_us (common/spin.h), yielding the core between polls: the
   * caller's policy (the executor's run says how long; WEFT_SPIN_US, WEFT_ASYNC_SPIN_US). */
  weft_result_t (*wait)(conn_t *const *conns, int n, int timeout_ms, int spin_us);
  /* abortive: reset the connection at once instead of closing it in order. */
  void (*close)(conn_t *c, int abortive);

  /* Optional (NULL where a transport lacks them). */
  /* Called once after the exchange with the peers this transport will serve, peers[i] having
   * published blobs[i], before any connect: lets shm map every peer's doorbell. */
  weft_result_t (*attach_peers)(transport_t *t, const int *peers, const void *const *blobs,
                                int npeers);
  /* Receives a message of len <= one slice without copying it: once x->complete, x->data points
   * at it inside the transport's own memory, valid until release_recv(c, x). Releases come in the
   * order the receives were posted. Lets a reduction read straight from the peer's slot. */
  weft_result_t (*post_recv_inplace)(conn_t *c, size_t len, xfer_t *x);
  weft_result_t (*release_recv)(conn_t *c, xfer_t *x);
  /* Lends the sender the memory the peer will read the next message (len <= one slice) from,
   * so that a fused ring step writes its result there directly instead of into a local buffer
   * that post_send then copies: shm, the next slot of the peer's ring; cuda_ipc, the peer's
   * device slot; TCP and staged, a send staging slot the socket (or the copy engine) drains.
   * *slot is NULL when none is free now: call again after progress(). With x->device set the
   * slot is memory device work may write (device memory, or pinned host memory).
   * The caller fills the slot and then calls commit_send(c, x), which posts the message as
   * post_send would have (x completes as a sent message does). Slots are committed in the order
   * they were lent, and no post_send is made on the connection while a lent slot is
   * uncommitted. A slot lent but never committed is given back when the connection closes. */
  weft_result_t (*lend_send)(conn_t *c, size_t len, xfer_t *x, char **slot);
  weft_result_t (*commit_send)(conn_t *c, xfer_t *x);
  /* Nonzero: a lent slot is where the message is taken from (shm's ring slot the peer reads,
   * cuda_ipc's device slot, the registered or pinned slot verbs and staged hand to the hardware),
   * so a fused step that writes its result there saves a pass, and the executor fuses into it
   * (WEFT_FUSED_STEPS=1). TCP's slot is a private staging buffer the socket copies out of again:
   * fused over it measured slower than reducing into the output and sending from there (2 ranks,
   * 64 KiB-8 MiB: up to 2x; results/2026-11-28-tcp-unfused), so it lends only when asked
   * (WEFT_FUSED_STEPS=2). */
  int lend_in_place;
  /* The link view a device-resident loop (kernels/devloop.h) drives for this connection's
   * direction `dir` (DP_LINK_SEND: to the peer; DP_LINK_RECV: from it): the receiver's slots and
   * counters, mapped on both ends. Its memory lives as long as the connection; counters start at
   * 0 and only grow, so one view serves every run in turn. It is apart from the memory the host
   * path above uses: both may carry traffic on one connection, never the same message. The send
   * side may wait (bounded by the connect timeout) for the peer to have published its end. Runs
   * on the view must have ended (their queue drained) before the connection closes. */
  weft_result_t (*device_link)(conn_t *c, int dir, dl_link_view_t *view);
  /* 0 once the peer's process is known to be gone (a transport within one host can ask the
   * system), else 1. What watches a device-resident run calls it: the run itself only sees a
   * link go quiet. */
  int (*peer_alive)(conn_t *c);
  /* What a receive from any source looks at (comm/any_source.c). peek_recv: when no receive is
   * posted on the connection, copies the first `len` bytes of the next incoming message into
   * `buf` without taking it (zero-filled past a shorter one) and sets *state to
   * TRANSPORT_PEEK_READY once they have all arrived; TRANSPORT_PEEK_EMPTY while they have not
   * (or a receive is posted); TRANSPORT_PEEK_CLOSED when the peer is gone and nothing waits. The
   * next post_recv takes the same bytes. `len` is at most one slice. */
  weft_result_t (*peek_recv)(conn_t *c, void *buf, size_t len, int *state);
  /* Connects to `peer` without waiting for it: *out is the connection once it is made, NULL
   * while it is not. A transport whose connection waits on this rank (TCP's lower rank connects)
   * starts that connect here and moves it on at each call; a later connect() finishes it rather
   * than opening a second connection. An error means the peer cannot be connected (gone). */
  weft_result_t (*connect_pending)(transport_t *t, int peer, const void *peer_blob, conn_t **out);
  /* Nonzero: a whole slot of config slice_bytes costs no more to lend, commit and receive in
   * place than a short message (only what is written moves), so the executor sends a call's
   * description as one such slot, with the stream's first message inside (executor.c). */
  int desc_slot;
  /* Bytes the executor keeps posted ahead on one stream over this transport when
   * WEFT_SLICES_IN_FLIGHT is 0 (its default): as many slices as that takes, at least the
   * executor's default of 4 (which a transport leaving this 0 gets). TCP asks for more than a
   * ring of slots needs: the socket is the pipe, and what it holds decides how long a peer that
   * is busy elsewhere leaves it idle (tcp.c, TCP_DEPTH_BYTES). In bytes, not slices, so that
   * larger slices do not multiply the staging a reducing stream keeps. */
  size_t depth_bytes;
};

#define TRANSPORT_PEEK_CLOSED (-1)
#define TRANSPORT_PEEK_EMPTY 0
#define TRANSPORT_PEEK_READY 1

/* Every transport's connection starts with this, so generic code can reach the ops. */
struct conn {
  const transport_ops_t *ops;
  int peer;
};

struct transport {
  const transport_ops_t *ops;
  /* Set by the communicator once every rank has published its address, i.e. every peer is
   * listening. From then on a refused connection means the peer is gone, so connect() gives up at
   * once instead of retrying for the whole connect timeout. */
  int peers_listening;
  /* Set by the communicator once it knows which ranks share this host: how many do, this one
   * included; 0 until then. A wait may poll without yielding only with a core for each of them
   * (common/spin.h): with more, a rank beside it needs the core it would hold. */
  int local_ranks;
  /* Set by the communicator before destroy() in an abortive teardown: do not wait for peers. */
  int aborting;
  /* The communicator's abort flag (comm.h), set by weft_comm_abort on another thread: a connect
   * in progress gives up with WEFT_ERR_ABORTED instead of waiting out its bound. NULL: never. */
  const int *aborted;
};

/* Whether the communicator that owns `t` was aborted (see transport.aborted). */
static inline int transport_aborted(const transport_t *t) {
  return t->aborted && __atomic_load_n(t->aborted, __ATOMIC_ACQUIRE);
}

/* The transports this build has. */
extern const transport_ops_t tcp_transport_ops;
extern const transport_ops_t shm_transport_ops;
/* Device buffers between ranks on one host (transport/cuda_ipc.c); needs transport_params_t.dev
 * and, like shm, attach_peers before any connect. Across hosts device buffers go through
 * staged_wrap() (transport/staged.h) over a host connection. */
extern const transport_ops_t cuda_ipc_transport_ops;

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TRANSPORT_TRANSPORT_H_ */
