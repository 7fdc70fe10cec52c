/* init.c -- the NCCL front end's communicators: unique ids, init (ncclCommInitRank, ...Config,
 * ...All, ...Scalable), split, shrink, finalize, destroy, abort and the queries, on weft's
 * weft_comm_init, weft_comm_split, weft_comm_shrink and friends.
 *
 * A unique id names weft's rendezvous: the host and port that rank 0's weft_comm_init serves,
 * and a fresh random nonce so that two ids are never equal. ncclGetUniqueId picks this host's
 * address (NCCL_SOCKET_IFNAME chooses the interface, in NCCL's syntax, else the first that is up
 * and not loopback) and a port free at that moment; NCCL_COMM_ID=host:port names both
 * instead. So rank 0 must run on the host that made the id, as it does in torch and in NCCL's
 * examples; the port is only reserved once rank 0 joins (another program may take it first, which
 * is why it is drawn from outside the ports the kernel hands out by itself: free_port). */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nccl/nccl_internal.h"

/* How weft lays out the 128 bytes of ncclUniqueId. */
#define ID_MAGIC "weft-id1"
typedef struct {
  char magic[8];
  uint64_t nonce;
  int32_t port;
  char host[NCCL_UNIQUE_ID_BYTES - 20];
} weft_id_t;
_Static_assert(sizeof(weft_id_t) <= sizeof(ncclUniqueId), "weft's id must fit NCCL's");

/* The kernel's range for ports it hands out by itself (bind to port 0, outgoing connections). */
static void ephemeral_range(int *lo, int *hi) {
  *lo = 32768, *hi = 60999; /* Linux's default */
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (!f) return;
  int a, b;
  if (fscanf(f, "%d %d", &a, &b) == 2 && 0 < a && a <= b && b <= 65535) *lo = a, *hi = b;
  fclose(f);
}

static int port_is_free(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
  a.sin_port = htons((uint16_t)port);
  socklen_t len = sizeof a;
  int got = -1;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    got = ntohs(a.sin_port);
  close(fd);
  return got;
}

/* A port free now, for rank 0's store, drawn from outside the kernel's ephemeral range: the id
 * holds no socket (it may be made long before rank 0 joins), and a port the kernel handed out once
 * it hands out again to anyone, weft's own transport listeners of an earlier communicator
 * included; rank 0 then fails to listen and its peers wait out the connect timeout. Random tries
 * in 20000 up to the range's start (or above its end where that leaves more), then any port. */
static int free_port(void) {
  int lo, hi;
  ephemeral_range(&lo, &hi);
  int from = 20000, to = lo - 1;
  if (65535 - hi > to - from) from = hi + 1, to = 65535;
  for (int tries = 0; to - from >= 1000 && tries < 64; tries++) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) break;
    int port = from + (int)(r % (uint32_t)(to - from + 1));
    if (port_is_free(port) == port) return port;
  }
  return port_is_free(0);
}

/* Whether interface `name` is one that `spec` selects, in NCCL_SOCKET_IFNAME's (and
 * WEFT_SOCKET_IFNAME's) syntax: a comma-separated list of name prefixes, "=" before the list for
 * exact names, "^" before it to exclude those instead. An empty spec selects every interface
 * but loopback. */
static int if_selected(const char *name, int loopback, const char *spec) {
  if (!spec || !*spec) return !loopback;
  int exclude = *spec == '^';
  if (exclude) spec++;
  int exact = *spec == '=';
  if (exact) spec++;
  int listed = 0;
  for (const char *p = spec; *p && !listed;) {
    size_t len = strcspn(p, ",");
    if (len > 0)
      listed = exact ? strlen(name) == len && strncmp(name, p, len) == 0
                     : strncmp(name, p, len) == 0;
    p += len + (p[len] == ',');
  }
  return exclude ? !listed && !loopback : listed;
}

/* This host's IPv4 address on the first interface that is up and that WEFT_SOCKET_IFNAME
 * selects (env.c sets it from NCCL_SOCKET_IFNAME), else 127.0.0.1. */
static void local_host(char *out, size_t cap) {
  const char *want = getenv("WEFT_SOCKET_IFNAME");
  snprintf(out, cap, "127.0.0.1");
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) != 0) return;
  for (struct ifaddrs *i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    if (!if_selected(i->ifa_name, (i->ifa_flags & IFF_LOOPBACK) != 0, want)) continue;
    inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)cap);
    break;
  }
  freeifaddrs(list);
}

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId *uniqueId) {
  if (!uniqueId) return nccl_fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  weft_id_t id;
  memset(&id, 0, sizeof id);
  memcpy(id.magic, ID_MAGIC, sizeof id.magic);
  if (getrandom(&id.nonce, sizeof id.nonce, 0) != (ssize_t)sizeof id.nonce)
    return nccl_fail(ncclSystemError, "ncclGetUniqueId: getrandom failed");
  const char *env = getenv("NCCL_COMM_ID");
  if (env && *env) {
    /* host:port, or [v6]:port; the last colon separates the port. */
    const char *colon = strrchr(env, ':');
    int port = colon ? atoi(colon + 1) : 0;
    size_t hl = colon ? (size_t)(colon - env) : 0;
    if (hl >= 2 && env[0] == '[' && env[hl - 1] == ']') env++, hl -= 2;
    if (!colon || port <= 0 || port > 65535 || hl == 0 || hl >= sizeof id.host)
      return nccl_fail(ncclInvalidArgument, "NCCL_COMM_ID='%s' is not host:port",
                       getenv("NCCL_COMM_ID"));
    memcpy(id.host, env, hl);
    id.port = port;
  } else {
    local_host(id.host, sizeof id.host);
    id.port = free_port();
    if (id.port <= 0) return nccl_fail(ncclSystemError, "ncclGetUniqueId: found no free port");
  }
  memset(uniqueId, 0, sizeof *uniqueId);
  memcpy(uniqueId, &id, sizeof id);
  return ncclSuccess;
}

static int current_cuda_device(void) {
  int (*get)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT, "cudaGetDevice");
  int dev = 0;
  if (!get || get(&dev) != 0) dev = 0;
  return dev;
}

/* Reads what the caller's config declares, never past its `size` and never writing to it.
 * NULL stands for the defaults. *blocking: the config's `blocking` (1 unless it says 0). */
static ncclResult_t read_config(const ncclConfig_t *cfg, const char *call, int *blocking) {
  *blocking = 1;
  if (!cfg) return ncclSuccess;
  size_t size;
  unsigned magic, version;
  memcpy(&size, cfg, sizeof size);
  if (size < offsetof(ncclConfig_t, blocking))
    return nccl_fail(ncclInvalidArgument, "%s: config size %zu is too small", call, size);
  memcpy(&magic, (const char *)cfg + offsetof(ncclConfig_t, magic), sizeof magic);
  memcpy(&version, (const char *)cfg + offsetof(ncclConfig_t, version), sizeof version);
  if (magic != NCCL_API_MAGIC)
    return nccl_fail(ncclInvalidArgument,
                     "%s: config magic 0x%x is not 0x%x: initialize it with "
                     "NCCL_CONFIG_INITIALIZER",
                     call, magic, NCCL_API_MAGIC);
  if (version < (unsigned)NCCL_VERSION(2, 14, 0))
    return nccl_fail(ncclInvalidArgument, "%s: config version %u is older than any config", call,
                     version);
  /* blocking = 0 makes init return ncclInProgress at once (ncclCommInitRankConfig); calls on the
   * communicator then complete before they return (ncclSuccess, which a nonblocking caller
   * accepts as well as ncclInProgress). Every other option tunes NCCL's kernels or channels,
   * which weft has not. */
  if (size >= offsetof(ncclConfig_t, blocking) + sizeof(int)) {
    int b;
    memcpy(&b, (const char *)cfg + offsetof(ncclConfig_t, blocking), sizeof b);
    if (b == 0) *blocking = 0;
  }
  return ncclSuccess;
}

static struct ncclComm *wrapper_new(void) {
  struct ncclComm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  if (pthread_mutex_init(&c->init_mu, NULL) != 0) {
    free(c);
    return NULL;
  }
  if (pthread_mutex_init(&c->ops_mu, NULL) != 0) {
    pthread_mutex_destroy(&c->init_mu);
    free(c);
    return NULL;
  }
  c->magic = NCCL_COMM_MAGIC;
  return c;
}

static void wrapper_free(struct ncclComm *c) {
  c->magic = 0;
  nccl_premul_free(c);
  pthread_mutex_destroy(&c->ops_mu);
  pthread_mutex_destroy(&c->init_mu);
  free(c);
}

/* Fills what the queries answer from weft's communicator. */
static void adopt(struct ncclComm *c, weft_comm_t *w) {
  c->w = w;
  weft_comm_rank(w, &c->rank);
  weft_comm_size(w, &c->nranks);
  c->cuda_dev = current_cuda_device();
}

static ncclResult_t wrap(weft_comm_t *w, struct ncclComm **out) {
  struct ncclComm *c = wrapper_new();
  if (!c) {
    weft_comm_destroy(w);
    return nccl_fail(ncclSystemError, "out of memory for a communicator");
  }
  adopt(c, w);
  c->initialized = c->joined = 1;
  *out = c;
  return ncclSuccess;
}

/* ---- Nonblocking init ---------------------------------------------------------------------
 *
 * With blocking = 0, ncclCommInitRankConfig hands the init to a thread of its own and returns
 * ncclInProgress with the communicator set; ncclCommGetAsyncError answers ncclInProgress until
 * the init has finished, then its outcome (as XLA and torch poll). Any other call on the
 * communicator first waits for the init (nccl_comm_ready), so it never sees half of one. */

typedef struct {
  struct ncclComm *c;
  int nranks, rank;
  weft_id_t id;
} pending_init_t;

static void *init_main(void *arg) {
  pending_init_t *p = arg;
  struct ncclComm *c = p->c;
  weft_comm_t *w = NULL;
  weft_result_t r = weft_comm_init(&w, p->nranks, p->rank, p->id.host, p->id.port);
  if (r == WEFT_SUCCESS) {
    adopt(c, w);
  } else {
    c->init_res = nccl_from_weft(r);
    snprintf(c->init_err, sizeof c->init_err, "%s", weft_last_error());
  }
  free(p);
  __atomic_store_n(&c->initialized, 1, __ATOMIC_RELEASE); /* publishes w and init_res */
  return NULL;
}

static ncclResult_t init_nonblocking(struct ncclComm **out, int nranks, int rank,
                                     const weft_id_t *id) {
  struct ncclComm *c = wrapper_new();
  pending_init_t *p = malloc(sizeof *p);
  if (!c || !p) {
    free(p);
    if (c) wrapper_free(c);
    return nccl_fail(ncclSystemError, "ncclCommInitRankConfig: out of memory");
  }
  *p = (pending_init_t){c, nranks, rank, *id};
  c->nonblocking = 1;
  c->rank = rank;
  c->nranks = nranks;
  int err = pthread_create(&c->init_thread, NULL, init_main, p);
  if (err != 0) {
    free(p);
    wrapper_free(c);
    return nccl_fail(ncclSystemError, "ncclCommInitRankConfig: starting the init thread: %s",
                     strerror(err));
  }
  *out = c;
  return ncclInProgress;
}

/* Joins the init thread once (after which w and init_res are plain to read). */
static void init_join(struct ncclComm *c) {
  pthread_mutex_lock(&c->init_mu);
  if (!c->joined) {
    pthread_join(c->init_thread, NULL);
    c->joined = 1;
  }
  pthread_mutex_unlock(&c->init_mu);
}

ncclResult_t nccl_comm_ready(struct ncclComm *c, const char *call) {
  if (!c->nonblocking) return ncclSuccess;
  init_join(c);
  if (c->init_res != ncclSuccess)
    return nccl_fail(c->init_res, "%s: the communicator's nonblocking init failed: %s", call,
                     c->init_err);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t *comm, int nranks, ncclUniqueId commId,
         int rank, ncclConfig_t *config) {
  static const char call[] = "ncclCommInitRankConfig";
  if (!comm) return nccl_fail(ncclInvalidArgument, "%s: comm is NULL", call);
  *comm = NULL;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return nccl_fail(ncclInvalidArgument, "%s: rank %d of %d ranks", call, rank, nranks);
  int blocking;
  ncclResult_t res = read_config(config, call, &blocking);
  if (res != ncclSuccess) return res;
  weft_id_t id;
  memcpy(&id, &commId, sizeof id);
  id.host[sizeof id.host - 1] = '\0';
  if (memcmp(id.magic, ID_MAGIC, sizeof id.magic) != 0)
    return nccl_fail(ncclInvalidArgument, "%s: the unique id was not made by ncclGetUniqueId",
                     call);
  if (!blocking) return init_nonblocking(comm, nranks, rank, &id);
  weft_comm_t *w = NULL;
  weft_result_t r = weft_comm_init(&w, nranks, rank, id.host, id.port);
  if (r != WEFT_SUCCESS) return nccl_from_weft(r);
  return wrap(w, comm);
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t *comm, int nranks, ncclUniqueId commId,
         int rank) {
  return pncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

/* weft has one rendezvous, so the first of the ids serves (NCCL spreads the bootstrap over all
 * of them); every rank passes the same list. */
NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t *newcomm, int nranks, int myrank,
         int nId, ncclUniqueId *commIds, ncclConfig_t *config) {
  if (nId < 1 || !commIds)
    return nccl_fail(ncclInvalidArgument, "ncclCommInitRankScalable: %d ids at %p", nId,
                     (void *)commIds);
  return pncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

/* ncclCommInitAll: one process, ndev ranks, one thread per rank (each init blocks until all
 * have joined). Rank i runs on devlist[i] (or device i) where a CUDA runtime is loaded. */
typedef struct {
  ncclComm_t *comm;
  int ndev, rank, dev;
  ncclUniqueId id;
  ncclResult_t res;
  char err[256];
} init_all_arg_t;

static void *init_all_rank(void *p) {
  init_all_arg_t *a = p;
  int (*set)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cudaSetDevice");
  if (set) set(a->dev);
  a->res = pncclCommInitRank(a->comm, a->ndev, a->id, a->rank);
  if (a->res != ncclSuccess) snprintf(a->err, sizeof a->err, "%s", pncclGetLastError(NULL));
  return NULL;
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t *comm, int ndev, const int *devlist) {
  if (!comm || ndev < 1)
    return nccl_fail(ncclInvalidArgument, "ncclCommInitAll: comm %p, ndev %d", (void *)comm, ndev);
  ncclUniqueId id;
  ncclResult_t res = pncclGetUniqueId(&id);
  if (res != ncclSuccess) return res;
  init_all_arg_t *args = calloc((size_t)ndev, sizeof *args);
  pthread_t *th = calloc((size_t)ndev, sizeof *th);
  if (!args || !th) {
    free(args);
    free(th);
    return nccl_fail(ncclSystemError, "ncclCommInitAll: out of memory");
  }
  int started = 0;
  for (int i = 0; i < ndev; i++) {
    args[i] = (init_all_arg_t){
        .comm = &comm[i], .ndev = ndev, .rank = i, .dev = devlist ? devlist[i] : i, .id = id};
    if (pthread_create(&th[i], NULL, init_all_rank, &args[i]) != 0) break;
    started++;
  }
  res = ncclSuccess;
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < started && res == ncclSuccess; i++)
    if (args[i].res != ncclSuccess) res = nccl_fail(args[i].res, "%s", args[i].err + 6);
  if (res == ncclSuccess && started < ndev)
    res = nccl_fail(ncclSystemError, "ncclCommInitAll: could not start %d threads", ndev);
  if (res != ncclSuccess)
    for (int i = 0; i < started; i++)
      if (args[i].res == ncclSuccess && comm[i]) pncclCommAbort(comm[i]), comm[i] = NULL;
  free(args);
  free(th);
  return res;
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
         ncclConfig_t *config) {
  ncclResult_t res = nccl_check_comm(comm, "ncclCommSplit");
  if (res != ncclSuccess) return res;
  if (!newcomm) return nccl_fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
  *newcomm = NULL;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return nccl_fail(ncclInvalidArgument, "ncclCommSplit: color %d is negative", color);
  int blocking; /* a split completes before it returns, nonblocking or not */
  if ((res = read_config(config, "ncclCommSplit", &blocking)) != ncclSuccess) return res;
  weft_comm_t *w = NULL;
  weft_result_t r = weft_comm_split(comm->w, color < 0 ? WEFT_SPLIT_NOCOLOR : color, key, &w);
  if (r != WEFT_SUCCESS) return nccl_from_weft(r);
  return w ? wrap(w, newcomm) : ncclSuccess;
}

/* NCCL_SHRINK_ABORT needs nothing more: weft_comm_shrink uses none of the parent's connections,
 * so operations still pending on the parent cannot hold it up. */
NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int *excludeRanksList,
         int excludeRanksCount, ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags) {
  (void)shrinkFlags;
  ncclResult_t res = nccl_check_comm(comm, "ncclCommShrink");
  if (res != ncclSuccess) return res;
  if (!newcomm) return nccl_fail(ncclInvalidArgument, "ncclCommShrink: newcomm is NULL");
  *newcomm = NULL;
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
    return nccl_fail(ncclInvalidArgument, "ncclCommShrink: %d excluded ranks at %p",
                     excludeRanksCount, (void *)excludeRanksList);
  int blocking; /* as split's */
  if ((res = read_config(config, "ncclCommShrink", &blocking)) != ncclSuccess) return res;
  weft_comm_t *w = NULL;
  weft_result_t r = weft_comm_shrink(comm->w, excludeRanksList, excludeRanksCount, &w);
  if (r != WEFT_SUCCESS) return nccl_from_weft(r);
  return wrap(w, newcomm);
}

/* weft runs every operation before the call (or the stream work) that issued it completes, so
 * there is nothing left to flush; the communicator is still destroyed with ncclCommDestroy. */
NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  return nccl_check_comm(comm, "ncclCommFinalize");
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  if (__atomic_load_n(&comm->magic, __ATOMIC_ACQUIRE) == NCCL_COMM_DEAD)
    return ncclSuccess; /* destroy after abort */
  ncclResult_t res = nccl_check_handle(comm, "ncclCommDestroy");
  if (res != ncclSuccess) return res;
  init_join(comm); /* a nonblocking init finishes first; a failed one left no communicator */
  if (comm->w) {
    weft_result_t r = weft_comm_destroy(comm->w);
    if (r != WEFT_SUCCESS) return nccl_from_weft(r);
  }
  wrapper_free(comm);
  return ncclSuccess;
}

/* Safe from any thread while another is inside a call on comm (torch's watchdog does this), so
 * the few bytes of the wrapper stay, on a list that keeps them reachable: the other thread may
 * still read the wrapper between its check and its weft call. weft_comm_abort frees the
 * communicator itself once every call has left it. */
static struct ncclComm *aborted;
static pthread_mutex_t aborted_lock = PTHREAD_MUTEX_INITIALIZER;

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (!comm || __atomic_load_n(&comm->magic, __ATOMIC_ACQUIRE) == NCCL_COMM_DEAD)
    return ncclSuccess;
  ncclResult_t res = nccl_check_handle(comm, "ncclCommAbort");
  if (res != ncclSuccess) return res;
  /* A nonblocking init cannot be cut short: it ends within WEFT_CONNECT_TIMEOUT_MS. */
  init_join(comm);
  /* Two threads may abort at once: only the one that turns the magic aborts. */
  unsigned live = NCCL_COMM_MAGIC;
  if (!__atomic_compare_exchange_n(&comm->magic, &live, NCCL_COMM_DEAD, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return ncclSuccess;
  pthread_mutex_lock(&aborted_lock);
  comm->next_dead = aborted;
  aborted = comm;
  pthread_mutex_unlock(&aborted_lock);
  return comm->w ? nccl_from_weft(weft_comm_abort(comm->w)) : ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t *asyncError) {
  ncclResult_t res = nccl_check_handle(comm, "ncclCommGetAsyncError");
  if (res != ncclSuccess) return res;
  if (!asyncError)
    return nccl_fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  /* The one call that does not wait for a nonblocking init: it is how the caller polls it. */
  if (comm->nonblocking && !__atomic_load_n(&comm->initialized, __ATOMIC_ACQUIRE)) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  if ((res = nccl_comm_ready(comm, "ncclCommGetAsyncError")) != ncclSuccess) {
    *asyncError = res; /* the init's failure, whose message is now this thread's last error */
    return ncclSuccess;
  }
  weft_result_t async = WEFT_SUCCESS;
  weft_result_t r = weft_comm_get_async_error(comm->w, &async);
  if (r != WEFT_SUCCESS) return nccl_from_weft(r);
  *asyncError = nccl_from_weft(async);
  return ncclSuccess;
}

#define QUERY(name, field)                                                        \
  NCCL_API(ncclResult_t, name, const ncclComm_t comm, int *out) {                 \
    ncclResult_t res = nccl_check_comm(comm, #name);                              \
    if (res != ncclSuccess) return res;                                           \
    if (!out) return nccl_fail(ncclInvalidArgument, "%s: output is NULL", #name); \
    *out = comm->field;                                                           \
    return ncclSuccess;                                                           \
  }
QUERY(ncclCommCount, nranks)
QUERY(ncclCommUserRank, rank)
QUERY(ncclCommCuDevice, cuda_dev)
