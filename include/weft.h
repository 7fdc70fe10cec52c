/* weft.h -- the public C API of weft, a collective-communication library.
 *
 * A communicator joins `nranks` processes. Every rank calls the same collectives in the same order
 * with the same count, dtype, op and root; weft checks that and reports a mismatch as an error
 * instead of returning garbage. Every call returns a weft_result_t; on failure
 * weft_last_error() holds a message for the calling thread that names the rank, the peer and the
 * operation. After a communication failure the communicator is marked failed and every later call
 * on it returns WEFT_ERR_COMM_FAILED with the original message: destroy or abort it.
 *
 * Threads: different communicators are independent: each may be used on its own thread at the
 * same time (communicators split or duplicated from one another included). On one communicator:
 *  - calls that issue operations (the collectives, send and receive, groups, weft_call, the
 *    asynchronous calls, split, dup, shrink, weft_comm_get_failed_ranks) come from one thread at
 *    a time, since every rank must issue them in the same order; a second thread that calls one
 *    while another is inside gets WEFT_ERR_INVALID_ARGUMENT naming the call in progress;
 *  - weft_comm_abort may be called from any thread at any time: a call blocked on the
 *    communicator in another thread returns WEFT_ERR_ABORTED within about 0.2 s (one wait slice
 *    of a collective, or of a connect to a peer met for the first time; split, dup and shrink
 *    set up their new communicator within WEFT_TIMEOUT_MS, and a stream call waiting for its
 *    inputs on the progress thread within that too), queued operations fail with
 *    WEFT_ERR_ABORTED without running, and nothing is freed until every call has left;
 *  - weft_comm_rank, _size, _local_rank, _local_size and weft_comm_get_async_error may be called
 *    from any thread, alongside a running call;
 *  - weft_comm_destroy while another thread is inside a call is refused
 *    (WEFT_ERR_INVALID_ARGUMENT): abort instead;
 *  - weft_test and weft_wait may be called from any thread, one thread per request at a time.
 * weft_last_error() is per thread.
 *
 * Handles: every call checks that its communicator or request is live. A destroyed communicator,
 * a second weft_comm_destroy, a request already completed by weft_wait or weft_test, or a pointer
 * that never was a handle give WEFT_ERR_INVALID_ARGUMENT with a message; an aborted communicator
 * gives WEFT_ERR_ABORTED, except weft_comm_destroy and weft_comm_abort, which succeed and do
 * nothing (so destroy after abort is fine). What C cannot catch: once a handle's memory is given
 * to a new communicator or request at the same address, the stale handle names the new object.
 *
 * Buffers: `sendbuf` and `recvbuf` may be equal (in place). Counts are in elements of `dtype`.
 *
 * Streams and device buffers: every collective takes a weft_stream_t as its last argument, like
 * NCCL's cudaStream_t. Host buffers pass NULL; the call returns when the operation is complete.
 * Device buffers (memory of the device that was current when the communicator was created) may
 * pass a stream: the call is checked, enqueued on the stream and returns at once; the operation
 * starts once the stream's earlier work is done, and the stream's later work waits for it, so
 * completion is observed by synchronizing the stream (cudaStreamSynchronize). Device buffers with
 * a NULL stream run before the call returns (the caller must have finished producing them).
 * Buffers of one call are either all host or all device memory: mixing them is
 * WEFT_ERR_INVALID_ARGUMENT, and so are host buffers with a stream. Failures of enqueued
 * operations cannot be returned by the call that enqueued them: they mark the communicator
 * failed, so the next call returns WEFT_ERR_COMM_FAILED with the message, and
 * weft_comm_get_async_error() reports them without making a call (NCCL's ncclCommGetAsyncError).
 * The device engine is chosen by WEFT_DEVICE (docs/tuning.md).
 */
#ifndef WEFT_H_
#define WEFT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The release this header describes. libweft.so's SONAME is libweft.so.<MAJOR>: a change that
 * breaks the ABI raises MAJOR together with the SONAME in BUILD and the node in libweft.map
 * (tests/abi holds them to this header). */
#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
/* One integer, comparable: 10000 * major + 100 * minor + patch. */
#define WEFT_VERSION_CODE \
  (WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH)

typedef enum {
  WEFT_SUCCESS = 0,
  WEFT_ERR_INVALID_ARGUMENT = 1, /* NULL buffer, unknown dtype or op, bad rank, bad variable */
  WEFT_ERR_SYSTEM = 2,           /* an operating-system call failed (errno in the message) */
  WEFT_ERR_TIMEOUT = 3,          /* a wait ran past WEFT_TIMEOUT_MS */
  WEFT_ERR_REMOTE = 4,           /* a peer closed its connection or broke the protocol */
  WEFT_ERR_MISMATCH = 5,         /* ranks called with different count, dtype, op, root or size */
  WEFT_ERR_COMM_FAILED = 6,      /* the communicator failed earlier; see the message */
  WEFT_ERR_UNSUPPORTED = 7,      /* valid, but not available in this build */
  WEFT_ERR_NO_MEMORY = 8,
  WEFT_ERR_INTERNAL = 9, /* a bug in weft: please report it with the message */
  WEFT_ERR_ABORTED = 10  /* the communicator was aborted */
} weft_result_t;

typedef enum {
  WEFT_INT8 = 0,
  WEFT_UINT8 = 1,
  WEFT_INT32 = 2,
  WEFT_UINT32 = 3,
  WEFT_INT64 = 4,
  WEFT_UINT64 = 5,
  WEFT_FLOAT16 = 6,  /* IEEE 754 binary16 */
  WEFT_BFLOAT16 = 7, /* bfloat16 */
  WEFT_FLOAT32 = 8,
  WEFT_FLOAT64 = 9,
  WEFT_FLOAT8_E4M3 = 10, /* OCP fp8 e4m3 ("fn"): bias 7, no inf, NaN 0x7f/0xff, max 448 */
  WEFT_FLOAT8_E5M2 = 11, /* OCP fp8 e5m2: bias 15, inf and NaN as in IEEE, max 57344 */
  WEFT_NUM_DTYPES = 12
} weft_dtype_t;

/* fp16 and bf16 are reduced in float and rounded back to nearest, ties to even, at every step.
 * So are fp8 e4m3 and e5m2, except that a result beyond the largest finite value saturates to it
 * (448 or 57344, with its sign), as the __NV_SATFINITE conversion of NCCL's fp8 reductions does; a
 * NaN stays NaN: a sum, product or average that is NaN is written as 0x7f in either format (its
 * sign and payload would depend on which NaN operand the CPU or GPU propagates), while min and max
 * return an operand's own bits. An e5m2 infinity in the input stays infinite.
 * WEFT_AVG divides the sum by the number of ranks. On floating types that is a true division. On
 * integer types it is the sum (wrapping on overflow, like WEFT_SUM) divided by nranks with C's
 * truncation toward zero, as NCCL's ncclAvg does; torch rejects avg on integer tensors, so callers
 * that want torch's behaviour must not pass it. */
typedef enum {
  WEFT_SUM = 0,
  WEFT_PROD = 1,
  WEFT_MIN = 2,
  WEFT_MAX = 3,
  WEFT_AVG = 4,
  WEFT_NUM_OPS = 5, /* the element-wise operations above, which reductions apply step by step */
  /* The sum of every rank's input multiplied by that rank's own scalar (NCCL's
   * ncclRedOpCreatePreMulSum; gradient averaging with a factor): weft_call only, with
   * weft_call_t's `scalar`. Each rank scales its input into a buffer of its own (one extra pass
   * over the input, and memory as large, kept by the communicator for its next such call), then
   * the call runs as WEFT_SUM. Integers multiply wrapping, like WEFT_PROD; fp16 and bf16 multiply
   * in float and round once, then sum as WEFT_SUM does. */
  WEFT_PREMUL_SUM = 5
} weft_op_t;

typedef struct weft_comm weft_comm_t;

/* A cudaStream_t for device buffers; NULL for host buffers. */
typedef void *weft_stream_t;

/* Features compiled into this build, as returned by weft_build_features(). */
#define WEFT_FEATURE_CUDA 0x1

/* The operations a communicator offers (weft_call() takes any of them). */
typedef enum {
  WEFT_COLL_ALL_REDUCE = 0,
  WEFT_COLL_BROADCAST = 1,
  WEFT_COLL_REDUCE = 2,
  WEFT_COLL_ALL_GATHER = 3,
  WEFT_COLL_REDUCE_SCATTER = 4,
  WEFT_COLL_BARRIER = 5,
  WEFT_COLL_SEND = 6,
  WEFT_COLL_RECV = 7,
  WEFT_COLL_GATHER = 8,
  WEFT_COLL_SCATTER = 9,
  WEFT_COLL_ALL_TO_ALL = 10,
  WEFT_COLL_ALL_TO_ALLV = 11,
  WEFT_COLL_P2P_GROUP = 12, /* weft_p2p_group: weft_call_t's ops and nops */
  WEFT_NUM_COLLS = 13
} weft_coll_t;

/* Algorithms. WEFT_ALGO_AUTO picks by a cost model (docs/algorithms.md); the
 * others force one, where the collective has it (weft_algo_supported()). The environment
 * variable WEFT_ALGO does the same for every call: "ring", or per collective
 * "all_reduce=tree,broadcast=ring". */
typedef enum {
  WEFT_ALGO_AUTO = 0,
  WEFT_ALGO_RING = 1,               /* all_reduce, reduce_scatter, all_gather; chain for rooted */
  /* Pipelined binary tree: broadcast, reduce, all_reduce. Gather and scatter run a binomial
   * tree under the same name: "tree" means a collective's log-depth tree, and the binomial one
   * is the shape whose subtrees are contiguous rank ranges (a block travels as one message). */
  WEFT_ALGO_TREE = 2,
  WEFT_ALGO_DOUBLE_TREE = 3,        /* all_reduce over two complementary trees */
  WEFT_ALGO_RECURSIVE_DOUBLING = 4, /* all_reduce, all_gather: log2(p) steps, small messages */
  WEFT_ALGO_RABENSEIFNER = 5,       /* all_reduce (and reduce_scatter): recursive halving+doubling */
  WEFT_ALGO_DISSEMINATION = 6,      /* barrier in ceil(log2(p)) rounds */
  WEFT_ALGO_HIERARCHICAL = 7,       /* all_reduce: rings inside hosts, then across, then inside */
  /* Gather, scatter: the root exchanges with every rank directly. Its own value because no
   * other algorithm has this shape (ring would suggest a chain, which costs p-1 hops). */
  WEFT_ALGO_LINEAR = 8,
  /* all_to_all: p-1 exchanges, each rank with rank+k and rank-k in step k; for large blocks. */
  WEFT_ALGO_PAIRWISE = 9,           /* also all_to_allv, its only algorithm */
  /* all_to_all in ceil(log2(p)) exchanges of about half the blocks each (Bruck et al.); blocks
   * travel up to log2(p) times, so it wins for small blocks only. */
  WEFT_ALGO_BRUCK = 10,
  WEFT_NUM_ALGOS = 11
} weft_algo_t;

/* ---- Library ---------------------------------------------------------------------------- */

/* WEFT_VERSION_CODE of the library that is linked (may differ from the header's). */
int weft_version(void);
/* A bit set of WEFT_FEATURE_*. */
unsigned weft_build_features(void);
/* A static description of a result code, e.g. "timeout". */
const char *weft_result_string(weft_result_t result);
/* The message of the last failed call on this thread ("" if none). Valid until the next call. */
const char *weft_last_error(void);
const char *weft_coll_name(weft_coll_t coll);
/* "ring", "tree", ...; weft_algo_from_name returns WEFT_NUM_ALGOS for an unknown name. */
const char *weft_algo_name(weft_algo_t algo);
weft_algo_t weft_algo_from_name(const char *name);
/* 1 if `coll` can run with `algo` (WEFT_ALGO_AUTO: always). */
int weft_algo_supported(weft_coll_t coll, weft_algo_t algo);
/* Element size in bytes, or 0 for an unknown dtype. */
size_t weft_dtype_size(weft_dtype_t dtype);
const char *weft_dtype_name(weft_dtype_t dtype);
const char *weft_op_name(weft_op_t op);

/* ---- Device memory ------------------------------------------------------------------------ */

/* `bytes` of device memory for the buffers of device calls (what ncclMemAlloc gives), from the
 * engine WEFT_DEVICE names: with "auto" or "cuda" the current CUDA device's memory, with
 * "emulated" the emulation's (docs/gpus.md, "Device buffers"). WEFT_ERR_UNSUPPORTED,
 * with why, where there is no device (WEFT_DEVICE=none, no GPU, a build without CUDA). The
 * process keeps one engine per device for these allocations, opened at the first and kept until
 * exit. bytes == 0 gives *ptr = NULL. */
weft_result_t weft_mem_alloc(void **ptr, size_t bytes);
/* Frees memory from weft_mem_alloc (NULL: nothing). Another pointer is refused with
 * WEFT_ERR_INVALID_ARGUMENT. */
weft_result_t weft_mem_free(void *ptr);

/* ---- Communicators ----------------------------------------------------------------------- */

/* Joins the job described by the launcher's environment. Rank, size and master are read from
 * WEFT_RANK/WEFT_WORLD_SIZE/WEFT_MASTER_ADDR/WEFT_MASTER_PORT, else torchrun's RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT, else Open MPI's OMPI_COMM_WORLD_*, else Slurm's SLURM_*; WEFT_INIT_URL
 * (tcp://host:port) may stand for the master. docs/tuning.md lists every variable. */
weft_result_t weft_comm_init_env(weft_comm_t **comm);

/* Joins a job of `nranks` ranks as `rank`; rank 0 serves the rendezvous on master_addr:master_port
 * (an IPv4 or IPv6 address or a host name). Blocks until all ranks have joined or the timeout. */
weft_result_t weft_comm_init(weft_comm_t **comm, int nranks, int rank, const char *master_addr,
                             int master_port);

/* The same with the master given as a URL: "tcp://host:port" or "tcp://[v6addr]:port". */
weft_result_t weft_comm_init_url(weft_comm_t **comm, const char *url, int nranks, int rank);

/* Runs the queued operations, closes connections in order and frees the communicator. comm may
 * be NULL. Refused while another thread is inside a call on it ("Threads" above). */
weft_result_t weft_comm_destroy(weft_comm_t *comm);

/* Frees the communicator at once without any further communication; peers blocked on it get an
 * error promptly. For error paths: a rank that gives up calls this so that others do not wait.
 * Safe from any thread at any time, during a call or a destroy on another thread (which it makes
 * end with WEFT_ERR_ABORTED) as after an earlier abort. */
weft_result_t weft_comm_abort(weft_comm_t *comm);

weft_result_t weft_comm_rank(const weft_comm_t *comm, int *rank);
weft_result_t weft_comm_size(const weft_comm_t *comm, int *size);
/* The rank among the ranks on this host, and how many ranks this host has. */
weft_result_t weft_comm_local_rank(const weft_comm_t *comm, int *local_rank);
weft_result_t weft_comm_local_size(const weft_comm_t *comm, int *local_size);

/* *async_error = WEFT_SUCCESS while the communicator is healthy, else the failure of an earlier
 * operation (enqueued ones included), whose message weft_last_error() then returns. */
weft_result_t weft_comm_get_async_error(weft_comm_t *comm, weft_result_t *async_error);

/* ---- Collectives ------------------------------------------------------------------------- */

/* recvbuf[i] = op over all ranks of sendbuf[i], on every rank. */
weft_result_t weft_all_reduce(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                              weft_op_t op, weft_comm_t *comm, weft_stream_t stream);

/* recvbuf = root's sendbuf, on every rank. sendbuf is read on the root only (others may pass
 * NULL). */
weft_result_t weft_broadcast(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                             int root, weft_comm_t *comm, weft_stream_t stream);

/* recvbuf on the root = op over all ranks of sendbuf; recvbuf is not used on other ranks (may be
 * NULL there). */
weft_result_t weft_reduce(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                          weft_op_t op, int root, weft_comm_t *comm, weft_stream_t stream);

/* recvbuf[r * sendcount + i] = rank r's sendbuf[i]; recvbuf holds nranks * sendcount elements.
 * In place (NCCL's convention): sendbuf == recvbuf + rank * sendcount. */
weft_result_t weft_all_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                              weft_dtype_t dtype, weft_comm_t *comm, weft_stream_t stream);

/* recvbuf[i] = op over all ranks of sendbuf[rank * recvcount + i]; sendbuf holds
 * nranks * recvcount elements. In place: recvbuf == sendbuf + rank * recvcount. */
weft_result_t weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  weft_dtype_t dtype, weft_op_t op, weft_comm_t *comm,
                                  weft_stream_t stream);

/* On the root: recvbuf[r * sendcount + i] = rank r's sendbuf[i]; recvbuf holds
 * nranks * sendcount elements in rank order and is not used on other ranks (may be NULL there).
 * In place (the root only, as all_gather's rule): sendbuf == recvbuf + root * sendcount. */
weft_result_t weft_gather(const void *sendbuf, void *recvbuf, size_t sendcount, weft_dtype_t dtype,
                          int root, weft_comm_t *comm, weft_stream_t stream);

/* recvbuf[i] = the root's sendbuf[rank * recvcount + i], on every rank; the root's sendbuf holds
 * nranks * recvcount elements in rank order and is not used on other ranks (may be NULL there).
 * In place (the root only, as reduce_scatter's rule): recvbuf == sendbuf + root * recvcount. */
weft_result_t weft_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                           weft_dtype_t dtype, int root, weft_comm_t *comm, weft_stream_t stream);

/* recvbuf[i * count + j] = rank i's sendbuf[rank * count + j]: block k of sendbuf goes to rank k,
 * block i of recvbuf came from rank i. Both buffers hold nranks * count elements and must not
 * overlap (no in-place form). */
weft_result_t weft_all_to_all(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                              weft_comm_t *comm, weft_stream_t stream);

/* all_to_all with a count per pair, as MPI_Alltoallv (counts and displacements in elements):
 * sendcounts[j] elements from sendbuf + sdispls[j] go to rank j, and recvcounts[i] elements from
 * rank i land at recvbuf + rdispls[i]. Rank i's sendcounts[j] must equal rank j's recvcounts[i]:
 * where they differ, both ranks fail with WEFT_ERR_MISMATCH naming the two ranks and counts. The
 * regions must not overlap between sendbuf and recvbuf; sendcounts[rank] == recvcounts[rank]. */
weft_result_t weft_all_to_allv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                               void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                               weft_dtype_t dtype, weft_comm_t *comm, weft_stream_t stream);

/* Returns on each rank once every rank has entered it. */
weft_result_t weft_barrier(weft_comm_t *comm, weft_stream_t stream);

/* Point to point: each send is matched by a recv of the same count and dtype on `peer`, in the
 * order both ranks issue them (messages between two ranks never overtake each other). weft_send
 * and weft_recv use tag 0; the tagged forms match a send only with a recv of the same tag from
 * that rank. A count, dtype or tag that the two sides disagree on fails the receiver with
 * WEFT_ERR_MISMATCH naming both values. Each is a group of one (weft_p2p_group). */
weft_result_t weft_send(const void *buf, size_t count, weft_dtype_t dtype, int peer,
                        weft_comm_t *comm, weft_stream_t stream);
weft_result_t weft_recv(void *buf, size_t count, weft_dtype_t dtype, int peer, weft_comm_t *comm,
                        weft_stream_t stream);
weft_result_t weft_send_tagged(const void *buf, size_t count, weft_dtype_t dtype, int peer, int tag,
                               weft_comm_t *comm, weft_stream_t stream);
weft_result_t weft_recv_tagged(void *buf, size_t count, weft_dtype_t dtype, int peer, int tag,
                               weft_comm_t *comm, weft_stream_t stream);

/* Receive from any source (MPI_ANY_SOURCE): pass WEFT_ANY_SOURCE as the peer of weft_recv or
 * weft_recv_tagged, or call weft_recv_any to learn which rank was matched. The receive takes the
 * next message of any one peer whose next p2p message to this rank carries the receive's tag;
 * count and dtype must then agree as for a named receive (WEFT_ERR_MISMATCH naming both). Rules:
 *  - messages from one sender are never overtaken: each peer's messages are taken in the order it
 *    sent them, and a peer whose next message has another tag is passed over (its message stays
 *    for a later receive);
 *  - when several senders' messages are waiting, the first to arrive wins as far as this rank can
 *    see it (the receive looks at every peer in turns, yielding the core between them and, once
 *    it has waited a while, sleeping up to 1 ms); messages that arrived within one turn go to the
 *    lowest rank after the last one matched (round robin, so no sender starves), and the others
 *    stay for the next receive;
 *  - nothing arriving within WEFT_TIMEOUT_MS fails with WEFT_ERR_TIMEOUT naming the receive, its
 *    tag and "any source", and marks the communicator failed, as a named receive that times out;
 *    a peer that exits is passed over, and once every peer watched has closed its connection (and
 *    none is left that might still connect) the receive fails at once with WEFT_ERR_REMOTE.
 * Host buffers only (a device buffer: WEFT_ERR_UNSUPPORTED), without a stream, and not inside a
 * group of several ops (WEFT_ERR_INVALID_ARGUMENT): a group posts all its ops at once, and an op
 * whose peer is not known yet could not take its place in a pair's ordered stream. Peers are
 * watched over their connections: over shared memory every peer of the host (a sender's first
 * message creates the connection); over TCP every peer as well, whether or not the two have
 * connected before: a lower rank that connects to this one is taken as it arrives, and a higher
 * rank not yet connected (which waits for the lower to connect) is dialed by the receive without
 * waiting on it, so a peer busy elsewhere holds nothing up; one that cannot be reached (gone)
 * counts as closed. Verbs connections cannot be looked at
 * before a receive: a receive from any source that meets one fails with WEFT_ERR_UNSUPPORTED.
 * The matched rank goes to *source (may be NULL). */
#define WEFT_ANY_SOURCE (-2)
weft_result_t weft_recv_any(void *buf, size_t count, weft_dtype_t dtype, int tag, int *source,
                            weft_comm_t *comm, weft_stream_t stream);

/* One send or receive of a group. */
typedef struct {
  weft_coll_t kind; /* WEFT_COLL_SEND or WEFT_COLL_RECV */
  void *buf;        /* read only by a send */
  size_t count;
  weft_dtype_t dtype;
  int peer;
  int tag;
} weft_p2p_op_t;

/* Sends and receives to any peers, issued together and complete together (what torch's
 * batch_isend_irecv and NCCL's grouped calls express): no order of them between two ranks can
 * deadlock, whatever the sizes. Between two ranks, ops pair up by tag (in the order issued among
 * equal tags), whatever order each side lists them in. Only the ranks the ops name take part. */
weft_result_t weft_p2p_group(const weft_p2p_op_t *ops, int nops, weft_comm_t *comm,
                             weft_stream_t stream);

/* Any operation, described in full; `algo` overrides WEFT_ALGO and the cost model for this call.
 * count: per rank as in the calls above (all_gather, gather: sendcount; reduce_scatter,
 * scatter: recvcount; all_to_all: per peer). root: the root of broadcast, reduce, gather and
 * scatter, the peer of send and recv, ignored otherwise. */
typedef struct {
  weft_coll_t coll;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  weft_dtype_t dtype;
  weft_op_t op;
  int root;
  weft_algo_t algo;
  /* all_to_allv only (its count is unused): nranks entries each, weft_all_to_allv's arguments.
   * A queued or asynchronous call keeps its own copy, so they may go once the call returns. Read
   * for no other collective, so callers built before these fields existed are unaffected. */
  const size_t *send_counts, *send_displs, *recv_counts, *recv_displs;
  /* p2p_group only: the ops (copied like all_to_allv's arrays; their buffers must stay, as
   * every call's). */
  const weft_p2p_op_t *ops;
  int nops;
  /* op WEFT_PREMUL_SUM only: one element of `dtype`, this rank's factor. In host memory
   * (scalar_on_device = 0) it is read before weft_call or weft_call_async returns, so it may go
   * at once; in device memory (scalar_on_device = 1: a device call's, or the emulated engine's)
   * it is read when the operation runs, after the stream's earlier work, as NCCL reads a
   * ncclScalarDevice factor. Read for no other op. */
  const void *scalar;
  int scalar_on_device;
  /* A recv with root WEFT_ANY_SOURCE, or a group of one such op: where the matched rank is
   * written once the receive completes (NULL: not wanted). Read for no other call. */
  int *source;
} weft_call_t;

weft_result_t weft_call(const weft_call_t *call, weft_comm_t *comm, weft_stream_t stream);

/* What the cost model predicts for `call` on this communicator, without running it or talking
 * to any peer: the algorithm weft_call would run (the call's own, WEFT_ALGO's, else the cheapest;
 * WEFT_ALGO_AUTO for one rank, point to point and groups) and its time in seconds under the
 * communicator's alpha, beta and gamma, plus the wake of each dependent round where a host runs
 * more of the ranks than it has CPUs: the price the choice compared (docs/algorithms.md). Sends
 * and receives cost one latency plus their bytes; a group its larger direction. The call's
 * arguments are checked as weft_call checks them. Any thread may ask, as the queries. */
weft_result_t weft_call_estimate(const weft_call_t *call, weft_comm_t *comm, weft_algo_t *algo,
                                 double *seconds);

/* ---- Asynchronous operations -------------------------------------------------------------- */

/* A request stands for one operation in flight. Operations on one communicator complete in the
 * order they were issued, blocking calls included; a progress thread runs them, so the caller
 * computes meanwhile. The buffers must stay untouched until the request completes.
 *
 * Threads: the communicator's own thread rule still holds (one thread at a time issues
 * operations on it); weft_test and weft_wait touch only the request, so any thread may call them
 * (one per request at a time) while the progress thread works, and an operation's error becomes
 * that thread's weft_last_error(). weft_wait with no limit (-1) on a request that is next in line
 * and not yet started runs it on the waiting thread instead of handing it to the progress
 * thread; the issuing thread may go on issuing meanwhile (those operations queue behind it).
 * weft_comm_destroy runs every queued operation first;
 * weft_comm_abort completes those not yet started with WEFT_ERR_ABORTED at once, and the one
 * running gives up with WEFT_ERR_ABORTED within about 0.2 s. Either way each request stays
 * valid, and must still be completed by weft_test or weft_wait, which free it (a second wait is
 * refused with WEFT_ERR_INVALID_ARGUMENT). The operation's own errors, argument checks included,
 * come back from weft_test or weft_wait. */
typedef struct weft_request weft_request_t;

weft_result_t weft_call_async(const weft_call_t *call, weft_comm_t *comm, weft_request_t **req);
weft_result_t weft_iall_reduce(const void *sendbuf, void *recvbuf, size_t count,
                               weft_dtype_t dtype, weft_op_t op, weft_comm_t *comm,
                               weft_request_t **req);
/* weft_p2p_group as a request (the ops are copied; their buffers must stay until it completes). */
weft_result_t weft_p2p_group_async(const weft_p2p_op_t *ops, int nops, weft_comm_t *comm,
                                   weft_request_t **req);
/* weft_recv_any as a request: *source (which must stay valid until the request completes, as
 * the buffer) holds the matched rank once weft_test or weft_wait reports completion. */
weft_result_t weft_irecv_any(void *buf, size_t count, weft_dtype_t dtype, int tag, int *source,
                             weft_comm_t *comm, weft_request_t **req);
weft_result_t weft_ibroadcast(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                              int root, weft_comm_t *comm, weft_request_t **req);

/* *done = 1 once the operation finished; the request is then freed and the operation's result
 * returned. While it runs: *done = 0 and WEFT_SUCCESS. */
weft_result_t weft_test(weft_request_t *req, int *done);
/* Waits for completion at most timeout_ms (-1: no limit; the operation's own WEFT_TIMEOUT_MS
 * still applies). On completion frees the request and returns the operation's result; on
 * WEFT_ERR_TIMEOUT the request stays valid. */
weft_result_t weft_wait(weft_request_t *req, int timeout_ms);

/* ---- More communicators ------------------------------------------------------------------- */

/* Like MPI_Comm_split / ncclCommSplit: collective over `comm`; ranks with the same color form a
 * new communicator, ordered by key then by rank in `comm`. color WEFT_SPLIT_NOCOLOR gives
 * *newcomm = NULL. The new communicator is independent of `comm` (its own connections) and
 * starts with its settings: WEFT_* knobs, WEFT_ALGO and the cost model. */
#define WEFT_SPLIT_NOCOLOR (-1)
weft_result_t weft_comm_split(weft_comm_t *comm, int color, int key, weft_comm_t **newcomm);
/* A new communicator of the same ranks (collective over `comm`). */
weft_result_t weft_comm_dup(weft_comm_t *comm, weft_comm_t **newcomm);

/* ---- Algorithms from files ------------------------------------------------------------------ */

/* Loads an algorithm published as an MSCCL program (the XML of msccl-tools, TACCL, TE-CCL) for
 * `comm`: from then on, a call of the program's collective (its `coll`) on this communicator
 * runs the program, unless the call names its own algorithm (weft_call_t.algo) or is an
 * all_reduce/reduce_scatter with WEFT_AVG, or has a count that does not cut into the program's
 * chunks; other calls keep the normal choice. The program's ngpus must equal the communicator's
 * size. Collective: every rank calls it, with the same program
 * (the ranks compare a hash of the file: one that differs, or that a rank could not read, fails
 * the call on every rank and leaves the communicator as it was). A malformed file fails with a
 * message naming the line and element. NULL unloads. WEFT_ALGO_FILE does the same at init.
 * docs/msccl.md describes what is supported. */
weft_result_t weft_comm_load_algo(weft_comm_t *comm, const char *path);

/* ---- Carrying on after a failure ---------------------------------------------------------- */

/* Like ncclCommShrink: a new communicator of the ranks of `comm` that are still alive, minus
 * `exclude_ranks`, in their old order (a rank's new rank is its position among them). Collective
 * over the ranks that stay; the excluded ranks do not call it (an excluded caller gets
 * WEFT_ERR_INVALID_ARGUMENT), and every caller should pass the same list. It works on a
 * communicator that failed (a dead peer, WEFT_ERR_COMM_FAILED) as on a healthy one, and needs
 * neither the master nor any connection of `comm`: the ranks agree over a channel every
 * communicator keeps for this (a killed rank is found at once; one that does not answer, e.g.
 * stopped, within a bound derived from WEFT_TIMEOUT_MS (docs/reliability.md) is counted as failed
 * and left out), then set the new communicator up among
 * themselves. Every survivor ends with the same members or an error; a rank failing during the
 * call may make it fail, and it may be called again. `comm` stays as it was: destroy (or abort) it
 * once it is no longer needed. */
weft_result_t weft_comm_shrink(weft_comm_t *comm, const int *exclude_ranks, int nexclude,
                               weft_comm_t **newcomm);
/* Which ranks of `comm` have failed, agreed by the ranks still alive the way weft_comm_shrink
 * agrees (so, collective over them: every rank that is alive must call it, and each gets the
 * same answer). *nfailed is their number; the first `max` of them, ascending, go to `ranks`. A
 * rank that does not call it within WEFT_TIMEOUT_MS is counted as failed. */
weft_result_t weft_comm_get_failed_ranks(weft_comm_t *comm, int *ranks, int max, int *nfailed);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_H_ */
