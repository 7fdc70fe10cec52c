/* comm.h -- internal: the communicator object behind weft_comm_t. */
#ifndef WEFT_COMM_COMM_H_
#define WEFT_COMM_COMM_H_

#include <stdint.h>

#include "bootstrap/rendezvous.h"
#include "collectives/algo_select.h"
#include "collectives/algorithms.h"
#include "collectives/cost_constants.h"
#include "collectives/executor.h"
#include "common/config.h"
#include "common/error.h"
#include "common/net.h"
#include "device/device.h"
#include "include/weft.h"
#include "transport/transport.h"

/* Device programs (resident.c): device scratch, and the calls run as programs (tests read it). */
typedef struct {
  void *scratch;
  size_t scratch_bytes;
  uint64_t calls;
} comm_resident_t;

/* WEFT_PREMUL_SUM's buffers (premul.c): the largest scaled input so far, host and device. */
typedef struct {
  void *host, *dev;
  size_t host_bytes, dev_bytes;
} comm_premul_t;

struct weft_comm {
  int rank, nranks;
  int local_rank, local_size;
  int *node_of; /* node (host) index of every rank, numbered by first appearance; nnodes of them */
  int nnodes;
  uint64_t comm_id;
  weft_config_t config;
  weft_config_t dev_config; /* config_for_device(&config): device connections and calls */
  /* Indexed like boot_record_t.addr (COMM_TCP, COMM_SHM, COMM_CUDA_IPC, COMM_IB); NULL where not
   * created. */
  transport_t *transports[BOOT_NTRANSPORTS];
  unsigned char *peer_addrs[BOOT_NTRANSPORTS]; /* nranks address blobs, addr_size each */
  unsigned char *via;        /* per peer: the transport that carries it (WEFT_TRANSPORT) */
  conn_t **conns;            /* per peer, NULL until first used */
  /* Device buffers (device/device.h): the engine (NULL: host buffers only), and per peer the
   * connection that carries them: cuda_ipc on this host, else staged over the host connection. */
  dev_engine_t *dev;
  /* per peer: COMM_CUDA_IPC; COMM_IB_GDR where the verbs connection carries device buffers
   * itself (GPUDirect RDMA); else COMM_TCP, COMM_SHM or COMM_IB: staged over that connection */
  unsigned char *via_dev;
  conn_t **dev_conns;     /* per peer, NULL until first used */
  exec_ctx_t exec;
  comm_premul_t premul; /* premul.c's buffers */
  comm_resident_t resident;
  uint64_t seq; /* collectives called so far; travels in every call description */
  uint64_t *sent_to, *recv_from; /* send/recv messages per peer, for their descriptions */
  uint64_t groups;               /* p2p groups run so far, to name them in messages */
  int any_last; /* the peer a receive from any source last matched: the next looks after it */
  algo_policy_t algo_policy;     /* what WEFT_ALGO forces */
  struct msccl_program *algo_prog; /* WEFT_ALGO_FILE or weft_comm_load_algo's program, or NULL */
  /* The automatic choice's models, the same on every rank: model for host buffers, dev_model for
   * device buffers, both from costs and the transport mix (cost_model.c) unless model_tuned
   * (WEFT_TUNE_FILE gave the host model whole). costs: the committed constants with the tune
   * file's single-constant overrides. */
  cost_model_t model, dev_model;
  cost_table_t costs;
  int model_tuned;
  /* The last choice per collective (collectives_api.c) and what it was made from: a loop of like
   * calls chooses once, not once a call (pricing every algorithm and sorting them was a tenth of
   * a small call's instructions). The policy and topology do not change after init. */
  struct weft_comm_choice {
    int valid, device;
    weft_algo_t per_call;
    double bytes;
    cost_model_t model;
    const algo_entry_t *entry;
  } last_choice[WEFT_NUM_COLLS];
  /* The last schedule built per collective and what it was built from (collectives_api.c): a
   * loop of like calls builds it once (building, checking and freeing it was a fifth of a small
   * call's instructions). comm_sched_cache_release frees them (comm_free calls it). */
  struct weft_comm_sched {
    int valid;
    const algo_entry_t *algo;
    sched_args_t args;
    schedule_t s;
    exec_plan_t *plan; /* the executor's layout of s, kept between calls (executor.h) */
  } last_sched[WEFT_NUM_COLLS];
  weft_result_t failed;      /* WEFT_SUCCESS while healthy */
  char failed_msg[ERR_MSG_MAX];
  net_addr_t advertise;     /* where this rank's transports listen (port 0): splits reuse it */
  uint64_t nsplits;         /* splits and dups of this communicator so far: new comm_ids */
  struct comm_async *async; /* the progress thread and its queue, from the first async call */
  /* After a failure (rescue.h): the survivors' own TCP listener, every rank's address for it,
   * and the connections made so far; rescue_config is config with one socket per peer. */
  transport_t *rescue;
  weft_config_t rescue_config;
  unsigned char *rescue_addrs;
  conn_t **rescue_conns;
  uint64_t nshrinks; /* shrinks of this communicator so far: new comm_ids */
  /* Lifecycle (comm_enter and the closers in comm.c), guarded by the handles table's mutex
   * (handles.h): the threads inside a call on this communicator, the call that runs it on the
   * caller's thread (NULL when none: only one may), and who is closing it. */
  int users;
  const char *running;
  int closing; /* COMM_OPEN, COMM_DESTROYING or COMM_ABORTING */
  /* Set once by weft_comm_abort, from any thread; read without the mutex (atomically) by the
   * executor's wait loop and the progress thread, which give up their call when they see it. */
  int aborted;
};

enum { COMM_OPEN = 0, COMM_DESTROYING = 1, COMM_ABORTING = 2 };

/* How a call uses the communicator. COMM_RUNS: it issues operations (blocking, asynchronous or
 * stream calls; split, dup, shrink): one such call at a time, since the ranks must issue them in
 * the same order. COMM_SHARES: it only reads the communicator (queries, the async error): any
 * number at once, alongside a running call. */
typedef enum { COMM_SHARES = 0, COMM_RUNS = 1 } comm_use_t;

/* Every entry point that takes a communicator starts here: refuses a handle that is not live
 * (destroyed, aborted, never created), one being closed, and a second COMM_RUNS call while one
 * is inside, with a message naming `op`; on success the caller is counted inside until
 * comm_leave, and the communicator is not freed meanwhile. */
weft_result_t comm_enter(weft_comm_t *comm, const char *op, comm_use_t use);
/* comm_enter(comm, op, COMM_SHARES) that sets no error: 1 when entered (comm_leave(comm,
 * COMM_SHARES) then), 0 when the communicator is not live or is closing. `comm` may be a
 * communicator freed since: it is only looked up in the handles table before it is touched. */
int comm_try_share(weft_comm_t *comm);
void comm_leave(weft_comm_t *comm, comm_use_t use);

/* Whether weft_comm_abort was called: the call in progress gives up (safe from any thread). */
int comm_aborted(const weft_comm_t *comm);

typedef struct comm_async comm_async_t;

enum { COMM_TCP = 0, COMM_SHM = 1, COMM_CUDA_IPC = 2, COMM_IB = 3 };
/* Only in via_dev, never an index of transports[]: the verbs connection itself, with GPUDirect. */
enum { COMM_IB_GDR = 4 };

/* Name of the transport whose connection carries this rank's traffic with `peer` ("tcp",
 * "shm", "ib"), or NULL while not connected (introspection for WEFT_DEBUG and tests). */
const char *comm_transport_name(const weft_comm_t *comm, int peer);
/* The same for device buffers ("cuda_ipc", "staged", "ib" with GPUDirect RDMA), NULL until a
 * device call connected it. */
const char *comm_device_transport_name(const weft_comm_t *comm, int peer);

/* Creation steps shared by init (records exchanged through the bootstrap store) and split
 * (through the parent communicator). comm_alloc: a communicator with nothing set up; comm_free:
 * its teardown, closing connections in order or at once. */
weft_result_t comm_alloc(int nranks, int rank, weft_comm_t **out);
/* A communicator made from `parent` (split, shrink): rank and size in it, comm_id hashed from
 * `id_text` (which must differ between children and be the same on their members), config,
 * algorithm policy, cost constants and models (comm_connect then sets the models for the child's
 * own transport mix, unless WEFT_TUNE_FILE gave the host model) and advertised address copied
 * from the parent. */
weft_result_t comm_alloc_child(const weft_comm_t *parent, const char *id_text, int rank, int nranks,
                               weft_comm_t **out);
void comm_free(weft_comm_t *comm, int abortive);
/* Creates this rank's transports (those WEFT_TRANSPORT allows) on comm->advertise for
 * comm->comm_id and fills `mine` with what peers need to reach them (their addresses and this
 * host's identity). */
weft_result_t comm_open_transport(weft_comm_t *comm, boot_record_t *mine);
/* Everything after the exchange: all[r] is rank r's record. Records the addresses, derives local
 * rank and size unless known, picks each peer's transport (shm on this host; elsewhere ib where
 * both ends have a verbs port of one link layer, else tcp; unless WEFT_TRANSPORT says otherwise),
 * connects the ring, and sets the cost models from the transport mix (cost_model_connect). */
weft_result_t comm_connect(weft_comm_t *comm, const boot_record_t *all);
/* Whether a rank's record publishes an address for a transport (its n bytes are not all zero):
 * a rank publishes one exactly when it created that transport. */
int comm_blob_present(const unsigned char *blob, size_t n);

/* Loads the MSCCL program at `path` for c (NULL: unloads it), after every rank has agreed it
 * loaded the same one (algo_file.c). Collective; on failure c keeps its previous program. */
weft_result_t comm_algo_load(weft_comm_t *c, const char *path);
void comm_algo_release(weft_comm_t *c);

/* Stops the progress thread (async.c), if one runs: draining the queue, or with `abortive`
 * failing the operations not yet started with WEFT_ERR_ABORTED. */
void comm_async_stop(weft_comm_t *comm, int abortive);
/* How many requests their waiter ran itself (weft_wait found them queued and the progress thread
 * idle), for tests and benchmarks. */
long comm_async_waiter_runs(const weft_comm_t *comm);
/* How long the waits of the calls a progress thread runs poll before they sleep: WEFT_SPIN_US,
 * or WEFT_ASYNC_SPIN_US where fewer than local_size cores are ours (async.c says why). ncpus: the
 * cores this process may run on; one alone counts as enough (a rank bound to its own core). */
int comm_async_spin_us(const weft_config_t *config, int local_size, int ncpus);

/* The connection to `peer` for host or device buffers, set up on first use (executor callback). */
weft_result_t comm_get_conn(void *comm, int peer, int device, conn_t **out);

/* Records the current thread's error as the communicator's failure and resets its connections so
 * that peers blocked on this rank fail promptly instead of waiting for their timeout. */
weft_result_t comm_fail(weft_comm_t *comm, weft_result_t res);

/* The cost model (cost_model.c). cost_model_init: the committed constants (cost_constants.c)
 * and WEFT_TUNE_FILE, before the exchange. cost_model_connect: once every rank's record is known,
 * the models as a pure function of the constants and the transport each pair of ranks uses,
 * computed from the records alone, so every rank gets the same bits; nothing is measured. */
weft_result_t cost_model_init(weft_comm_t *comm);
void cost_model_connect(weft_comm_t *comm, const boot_record_t *all);

/* What WEFT_TUNE_FILE gave (tune_file.c): a whole host model ("alpha", "beta" and "gamma" lines,
 * as weft-bench --tune writes them: has_model), and single constants of the table
 * ("<transport>.<intra|inter>.<alpha|beta|gamma> <value>", e.g. "shm.intra.beta 2.5e-10"),
 * written over `table`, which the caller fills with the committed constants first. */
typedef struct {
  int has_model;
  cost_model_t model;
  cost_table_t table;
  int overrides; /* how many single constants the file set */
} cost_tune_t;
weft_result_t cost_tune_load(const char *path, cost_tune_t *tune);
/* The whole-model form alone (weft-bench's own check of what it wrote): alpha, beta and gamma
 * into *m; a file without them is an error. */
weft_result_t cost_model_load(const char *path, cost_model_t *m);

/* Runs one operation now, on the calling thread (collectives_api.c). Device buffers are detected
 * here; the call returns once the device work it enqueued has finished. */
weft_result_t comm_call(weft_comm_t *comm, const weft_call_t *call);

/* premul.c: a WEFT_PREMUL_SUM call that comm_call has checked (send_count: the elements of this
 * rank's input; device: whether the buffers are device memory), run as a WEFT_SUM of this rank's
 * scaled input. comm_premul_release frees its buffers (comm_free calls it). */
weft_result_t comm_run_premul(weft_comm_t *comm, const weft_call_t *call, size_t send_count,
                              int device);
void comm_premul_release(weft_comm_t *comm);
void comm_sched_cache_release(weft_comm_t *comm);

/* resident.c: whether a device call of `coll` with `algo` runs as a device program on this
 * communicator (the same answer on every rank of it), and that run: the call descriptions
 * checked over the host connections, then the schedule compiled and launched on the device
 * queue, waited for. comm_resident_release frees its scratch (comm_free calls it). */
int comm_resident_eligible(const weft_comm_t *comm, weft_coll_t coll, weft_algo_t algo);
weft_result_t comm_run_resident(weft_comm_t *comm, const schedule_t *s, const coll_desc_t *d,
                                const void *sendbuf, void *recvbuf);
void comm_resident_release(weft_comm_t *comm);

/* p2p groups (p2p_group.c): argument checks, where the buffers live, and a run; weft_send and
 * weft_recv run as groups of one (comm_p2p_single). */
weft_result_t comm_check_group(const weft_comm_t *comm, const weft_p2p_op_t *ops, int nops);
weft_result_t comm_group_device(weft_comm_t *comm, const weft_p2p_op_t *ops, int nops, int *device);
/* source: where a lone receive from WEFT_ANY_SOURCE writes the rank it matched (NULL: nowhere). */
weft_result_t comm_p2p_group(weft_comm_t *comm, const weft_p2p_op_t *ops, int nops, int *source);
/* any_source.c: the peer whose next p2p message to this rank carries `tag` (weft.h's rules). */
weft_result_t comm_match_any_source(weft_comm_t *comm, int tag, size_t count, int *peer);
weft_result_t comm_p2p_single(weft_comm_t *comm, const weft_call_t *call);

/* Where the buffers of `call` live (device memory when *device), checked for mixing; host
 * without an engine. */
weft_result_t comm_buffers_kind(weft_comm_t *comm, const weft_call_t *call, int *device);

/* Runs one device operation on the progress thread after everything issued before it, behind
 * `gate`: it waits for the gate's inputs, runs, and opens the gate whatever the outcome (a
 * failure marks the communicator failed; weft_comm_get_async_error reports it). Returns at once. */
weft_result_t comm_submit_gated(weft_comm_t *comm, const weft_call_t *call, dev_gate_t *gate);

/* Runs one operation after every operation issued before it on this communicator, blocking
 * until it completes (async.c: inline when nothing is queued). */
weft_result_t comm_submit(weft_comm_t *comm, const weft_call_t *call);

/* The communicator's failure (WEFT_SUCCESS while healthy); safe from any thread. */
weft_result_t comm_failure(const weft_comm_t *comm);

/* WEFT_ERR_COMM_FAILED with the original message if the communicator failed earlier. */
weft_result_t comm_check_usable(const weft_comm_t *comm);

#endif /* WEFT_COMM_COMM_H_ */
