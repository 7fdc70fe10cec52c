/* config.c -- the table of WEFT_* knobs and their parsing. */
#include "common/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"

typedef enum { KNOB_INT, KNOB_SIZE, KNOB_STRING } knob_kind_t;

typedef struct {
  const char *name;
  const char *default_value;
  knob_kind_t kind;
  long long min, max; /* strings: max is the buffer size */
  size_t offset;      /* where the value lives in weft_config_t */
  const char *description;
} knob_t;

#define KNOB_AT(field) offsetof(weft_config_t, field)
#define STRING_KNOB(field) KNOB_STRING, 0, sizeof(((weft_config_t *)0)->field), KNOB_AT(field)

/* Defaults: 30 s without progress is Gloo's default and long enough for a 1 GiB message on a slow
 * link. One socket per peer and 64 KiB slices gave the best loopback all-reduce in weft-bench on a
 * 2-core machine with 4 ranks (striping pays off only where one stream cannot fill the link). */
static const knob_t knobs[] = {
    {"WEFT_TIMEOUT_MS", "30000", KNOB_INT, 1, 86400000, KNOB_AT(timeout_ms),
     "longest wait without progress in a collective before it fails"},
    {"WEFT_CONNECT_TIMEOUT_MS", "60000", KNOB_INT, 1, 86400000, KNOB_AT(connect_timeout_ms),
     "how long init waits for the master and the peers"},
    {"WEFT_NSOCKS", "1", KNOB_INT, 1, 16, KNOB_AT(nsocks),
     "TCP connections per peer; large messages are striped over them"},
    /* Fixed 4 MiB rather than the kernel's autotuning (0): over loopback, ring all-reduce at 2-16
     * MiB ran up to 40% faster with 2 ranks (sender and receiver on their own cores keep more in
     * flight), while with 4 ranks on 2 cores autotuning was about 5% faster (smaller buffers stay
     * in cache); on 1 Gbit/s namespace links both reached 94% of the link. */
    {"WEFT_SOCKET_BUFFER", "4194304", KNOB_INT, 0, 1 << 30, KNOB_AT(sockbuf_bytes),
     "SO_SNDBUF/SO_RCVBUF in bytes, the send side at least WEFT_SHM_SLOTS x WEFT_SLICE_BYTES "
     "(0: the kernel's default and autotuning)"},
    {"WEFT_SLICE_BYTES", "65536", KNOB_SIZE, 4096, 1 << 30, KNOB_AT(slice_bytes),
     "pipeline unit: each ring chunk moves in slices of this many bytes"},
    {"WEFT_SLICES_IN_FLIGHT", "0", KNOB_INT, 0, WEFT_MAX_SLICES_IN_FLIGHT,
     KNOB_AT(slices_in_flight),
     "slices each step keeps posted ahead per peer (staging buffers); 0: each transport's own "
     "(TCP 1 MiB's worth, at least 4; the others 4)"},
    {"WEFT_DEBUG", "0", KNOB_INT, 0, 2, KNOB_AT(debug), "0 quiet, 1 setup and failures, 2 every collective (stderr)"},
    {"WEFT_SOCKET_IFNAME", "", STRING_KNOB(socket_ifname),
     "interfaces to use: prefixes, ^ to exclude, = for exact names (e.g. eth0, ^lo)"},
    {"WEFT_ALGO", "auto", STRING_KNOB(algo),
     "algorithm for every call (ring, tree, ...) or per collective: all_reduce=tree,broadcast=ring"},
    {"WEFT_HIERARCHY", "-1", KNOB_INT, -1, 1, KNOB_AT(hierarchy),
     "all_reduce across hosts: 1 always hierarchical, 0 never, -1 when several hosts and one has "
     "several ranks (WEFT_ALGO and a call's own choice still win)"},
    {"WEFT_TUNE_FILE", "", STRING_KNOB(tune_file),
     "cost model (alpha, beta, gamma) written by weft-bench --tune, and/or single constants "
     "(shm.intra.beta 2.5e-10); empty: the committed per-transport constants"},
    {"WEFT_ALGO_FILE", "", STRING_KNOB(algo_file),
     "an MSCCL program (XML) that runs its collective on communicators of its size (init's)"},
    {"WEFT_TRANSPORT", "auto", STRING_KNOB(transport),
     "auto (shared memory to ranks on this host; to others RDMA verbs where both have an active "
     "port of the same link layer, else TCP), tcp, shm (one host only), or ib (verbs to every "
     "peer)"},
    {"WEFT_IB_HCA", "", STRING_KNOB(ib_hca),
     "RDMA devices and ports to use: prefixes, ^ to exclude, = for exact names, :port (e.g. "
     "mlx5_0:1,mlx5_1; empty: the first active port)"},
    {"WEFT_IB_GID_INDEX", "-1", KNOB_INT, -1, 255, KNOB_AT(ib_gid_index),
     "RoCE GID index (-1: the RoCE v2 GID of the address the rank advertises, else another RoCE "
     "v2 one)"},
    /* NCCL's defaults: 4.096 us * 2^18 = 1.07 s per try, 7 tries: a dead peer fails a write in
     * about 8 s, while a congested fabric gets time to recover. */
    {"WEFT_IB_TIMEOUT", "18", KNOB_INT, 1, 31, KNOB_AT(ib_timeout),
     "RDMA ack timeout per try: 4.096 us * 2^value"},
    {"WEFT_IB_RETRY_CNT", "7", KNOB_INT, 0, 7, KNOB_AT(ib_retry_cnt),
     "RDMA retransmissions before a write fails (peer dead or unreachable)"},
    /* Off by default: the dma-buf path has run only against the emulated engine (Soft-RoCE VMs),
     * never on a GPU next to an RDMA adapter. */
    {"WEFT_IB_GDR", "0", KNOB_INT, 0, 1, KNOB_AT(ib_gdr),
     "1: device buffers go over verbs straight from and into device memory (GPUDirect RDMA, "
     "dma-buf); 0: staged through pinned host memory"},
    /* 32 slots (2 MiB a direction): with more ranks than cores a sender fills the ring while its
     * receiver is descheduled instead of sleeping after 8 slots; 4 ranks on 2 cores, ring
     * all-reduce over shm, busbw at 4 MiB went from 0.9-1.6 GB/s (8 slots, bimodal) to 2.1-2.2
     * (32 slots; 16: bimodal, 64: no better). */
    /* At least 2: rings run in rounds of half the slots per link (algorithms.h), and a round of
     * as many slices as a link holds could wait on itself. */
    {"WEFT_SHM_SLOTS", "32", KNOB_INT, 2, 1024, KNOB_AT(shm_slots),
     "slots of WEFT_SLICE_BYTES in each direction of a shared-memory connection (also TCP's "
     "send staging slots; rings move half that many slices per chunk per round)"},
    /* Off by default: on the 2-core development host, 2 ranks, 65536 (one slice, the smallest
     * piece process_vm_readv moves as fast as memcpy there) made broadcast at 256 KiB 1.6x faster
     * but sendrecv at 4 MiB 0.8x, and nothing changed past that within the noise; all_reduce never
     * takes the path (its receives reduce in place) (results/2026-11-28-shm-single-copy). */
    {"WEFT_SHM_SINGLE_COPY_BYTES", "0", KNOB_SIZE, 0, 1LL << 40, KNOB_AT(shm_single_copy_bytes),
     "shm slots of at least this many bytes that a plain receive takes are read straight from "
     "the sender's buffer (process_vm_readv: one copy instead of two); 0: never"},
    /* Auto: where lines cross between the cores' caches slowly, slots written with non-temporal
     * stores made a 2-rank 1 MiB all-reduce 6x faster than plain ones; where the cores share a
     * cache, 3x slower. The 2-core development VM is in both states by turns, seconds at a time
     * (results/2026-11-29-shm-streaming), so each connection measures (transport/shm_stream.h). */
    {"WEFT_SHM_STREAM", "-1", KNOB_INT, -1, 1, KNOB_AT(shm_stream),
     "shm slots of 16 KiB and more written with non-temporal stores: -1 while that costs less "
     "to write and read (measured per connection), 0 never, 1 every slot"},
    /* Device buffers pay a host round trip per slice (a copy or kernel enqueued, then its fence
     * polled): on an H100, 2 ranks over CUDA IPC, all-reduce busbw at 256 MiB was 0.88 GB/s in
     * 64 KiB slices and 46 in 8 slots of 4 MiB; 4 ranks 0.44 and 24 (4 slots of 4 MiB: 16 and
     * 4.6; 8 of 8 MiB: 77 and 46 at 256 MiB but less from 16 to 64 MiB), so 32 MiB a direction
     * per peer (results/2026-11-25-first-gpu-run). */
    {"WEFT_DEVICE_SLICE_BYTES", "4194304", KNOB_SIZE, 4096, 1 << 30,
     KNOB_AT(device_slice_bytes),
     "pipeline unit of calls on device buffers (CUDA IPC and staged slots are this large)"},
    {"WEFT_DEVICE_SLOTS", "8", KNOB_INT, 2, 1024, KNOB_AT(device_slots),
     "slots of WEFT_DEVICE_SLICE_BYTES in each direction of a device connection (CUDA IPC, staged "
     "send slots); rings on device buffers move half that many slices per chunk per round"},
    {"WEFT_DEVICE_RESIDENT", "1", KNOB_INT, 0, 1, KNOB_AT(device_resident),
     "1: device calls among the ranks of one host run as one device program the engine launches "
     "(where the engine, the algorithm and the transport allow; comm/resident.c); 0: host-driven"},
    {"WEFT_FUSED_STEPS", "1", KNOB_INT, 0, 2, KNOB_AT(fused_steps),
     "1: a received slice is reduced (or copied) straight into the next peer's slot where that "
     "slot is what the peer reads (shm, CUDA IPC, verbs, staged), over TCP into the output and "
     "sent from there; 2: into TCP's send staging too; 0: never (two passes; for comparison "
     "and debugging)"},
    /* 4 ranks on 2 cores, all-reduce over shm: 4 KiB 100 -> 35 us and 16 MiB 1.9 -> 2.5 GB/s busbw
     * with 1000 us against none (50 and 200 us were in between); over TCP 4 KiB 96 -> 68 us. */
    {"WEFT_SPIN_US", "1000", KNOB_INT, 0, 10000000, KNOB_AT(spin_us),
     "a transport's wait polls this long, yielding the core between polls, before it sleeps "
     "(0: sleep at once; more: lower latency, more CPU while waiting)"},
    /* A DDP step of an 8x256 MLP (torch 2.13), 4 ranks on 2 cores: 15.8-16.2 ms with the
     * progress thread's waits at WEFT_SPIN_US (1000), 14.2-15.0 at 20, 13.3-14.3 at 0; no change
     * at 2 ranks on 2 cores (results/2026-11-28-async-spin). */
    {"WEFT_ASYNC_SPIN_US", "20", KNOB_INT, 0, 10000000, KNOB_AT(async_spin_us),
     "where the host's ranks outnumber its cores, the waits of operations the progress thread "
     "runs (asynchronous calls, which overlap the caller's own work: DDP's buckets during the "
     "backward pass) poll at most this long, yielding, before they sleep, instead of WEFT_SPIN_US: "
     "their polls would take the cores the ranks' computation needs"},
    {"WEFT_DEVICE", "auto", STRING_KNOB(device),
     "device engine for device buffers: auto (CUDA where built in and a GPU is present, else "
     "host buffers only), cuda, emulated (host memory standing in for a GPU, for tests), none"},
    /* The token is a secret: a value that is too long is reported by name only (parse_knob). */
    {"WEFT_JOB_TOKEN", "", STRING_KNOB(job_token),
     "shared secret of the job: the store and every TCP peer connection prove both ends know it "
     "(HMAC challenge-response); empty: no authentication (weft-run sets one per job)"},
    {"WEFT_JOB_TOKEN_FILE", "", STRING_KNOB(job_token_file),
     "file holding WEFT_JOB_TOKEN (trailing newline stripped; must not be readable by group or "
     "others)"},
    {"WEFT_TRACE", "", STRING_KNOB(trace),
     "write a Chrome trace of every step: rank N writes PATH.rankN.json (weft-run merges them)"},
    /* 72 bytes an event: the default caps a rank's trace buffer near 72 MB. */
    {"WEFT_TRACE_MAX_EVENTS", "1000000", KNOB_INT, 1, 100000000, KNOB_AT(trace_max_events),
     "events each rank's trace keeps; later ones are dropped and the file says how many"},
};

enum { NUM_KNOBS = sizeof knobs / sizeof knobs[0] };

static const char *process_getenv(void *ctx, const char *name) {
  (void)ctx;
  return getenv(name);
}

static weft_result_t parse_knob(const knob_t *k, const char *text, weft_config_t *cfg) {
  char *base = (char *)cfg + k->offset;
  if (k->kind == KNOB_STRING) {
    size_t cap = (size_t)k->max;
    if (strlen(text) >= cap)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s is longer than %zu characters", k->name,
                      cap - 1);
    strcpy(base, text);
    return WEFT_SUCCESS;
  }
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (k->kind == KNOB_SIZE && end && end != text) {
    /* Sizes accept K/M/G suffixes, powers of 1024, as weft-bench's -b/-e do. */
    if (*end == 'K' || *end == 'k') v <<= 10, end++;
    else if (*end == 'M' || *end == 'm') v <<= 20, end++;
    else if (*end == 'G' || *end == 'g') v <<= 30, end++;
  }
  if (errno || end == text || *end != '\0')
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s=\"%s\" is not an integer", k->name, text);
  if (v < k->min || v > k->max)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s=%s is out of range [%lld, %lld]", k->name, text,
                    k->min, k->max);
  if (k->kind == KNOB_SIZE)
    *(size_t *)base = (size_t)v;
  else
    *(int *)base = (int)v;
  return WEFT_SUCCESS;
}

/* Reads WEFT_JOB_TOKEN_FILE into cfg->job_token. A file that others may read is refused rather
 * than used: the token only keeps strangers out while they cannot read it. Errors name the path,
 * never the content. */
static weft_result_t read_token_file(weft_config_t *cfg) {
  const char *path = cfg->job_token_file;
  FILE *f = fopen(path, "r");
  if (!f)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "WEFT_JOB_TOKEN_FILE=%s: cannot read it: %s", path,
                    strerror(errno));
  struct stat st;
  weft_result_t res = WEFT_SUCCESS;
  if (fstat(fileno(f), &st) != 0) {
    res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "WEFT_JOB_TOKEN_FILE=%s: %s", path, strerror(errno));
  } else if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                   "WEFT_JOB_TOKEN_FILE=%s is accessible to group or others (mode %03o): make it "
                   "private (chmod 600)",
                   path, (unsigned)(st.st_mode & 0777));
  } else {
    size_t n = fread(cfg->job_token, 1, sizeof cfg->job_token, f);
    if (ferror(f))
      res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "WEFT_JOB_TOKEN_FILE=%s: read failed", path);
    else if (n == sizeof cfg->job_token)
      res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                     "WEFT_JOB_TOKEN_FILE=%s: the token is longer than %zu bytes", path,
                     sizeof cfg->job_token - 1);
    else {
      cfg->job_token[n] = '\0';
      if (strlen(cfg->job_token) != n)
        res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                       "WEFT_JOB_TOKEN_FILE=%s holds a NUL byte: the token must be text", path);
      while (n > 0 && (cfg->job_token[n - 1] == '\n' || cfg->job_token[n - 1] == '\r'))
        cfg->job_token[--n] = '\0';
      if (res == WEFT_SUCCESS && n == 0)
        res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "WEFT_JOB_TOKEN_FILE=%s is empty", path);
    }
  }
  fclose(f);
  if (res != WEFT_SUCCESS) memset(cfg->job_token, 0, sizeof cfg->job_token);
  return res;
}

weft_result_t config_load(weft_config_t *cfg, config_getenv_fn get, void *ctx) {
  if (!get) get = process_getenv;
  memset(cfg, 0, sizeof *cfg);
  for (int i = 0; i < NUM_KNOBS; i++) {
    const char *set = get(ctx, knobs[i].name);
    WEFT_CHECK(parse_knob(&knobs[i], knobs[i].default_value, cfg));
    if (set && *set) WEFT_CHECK(parse_knob(&knobs[i], set, cfg));
  }
  if (cfg->job_token_file[0]) {
    if (cfg->job_token[0])
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "both WEFT_JOB_TOKEN and WEFT_JOB_TOKEN_FILE are set: set one of them");
    WEFT_CHECK(read_token_file(cfg));
  }
  return WEFT_SUCCESS;
}

int config_knob_count(void) { return NUM_KNOBS; }

void config_knob_info(int i, const char **name, const char **default_value,
                      const char **description) {
  *name = knobs[i].name;
  *default_value = knobs[i].default_value;
  *description = knobs[i].description;
}

void config_knob_value(const weft_config_t *cfg, int i, char *buf, size_t cap) {
  const knob_t *k = &knobs[i];
  const char *base = (const char *)cfg + k->offset;
  if (k->offset == KNOB_AT(job_token))
    snprintf(buf, cap, "%s", *base ? "(set)" : "");
  else if (k->kind == KNOB_STRING)
    snprintf(buf, cap, "%s", base);
  else if (k->kind == KNOB_SIZE)
    snprintf(buf, cap, "%zu", *(const size_t *)base);
  else
    snprintf(buf, cap, "%d", *(const int *)base);
}

weft_config_t config_for_device(const weft_config_t *cfg) {
  weft_config_t d = *cfg;
  d.slice_bytes = cfg->device_slice_bytes;
  d.shm_slots = cfg->device_slots;
  return d;
}
