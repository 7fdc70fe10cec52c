/* config.h -- internal: every WEFT_* tuning knob, read from the environment in one place.
 *
 * The table in config.c is the single list of knobs (docs/tuning.md documents the same table). A
 * communicator reads them once at init into its own weft_config_t, so nothing else in weft calls
 * getenv() and two communicators never share hidden state. */
#ifndef WEFT_COMMON_CONFIG_H_
#define WEFT_COMMON_CONFIG_H_

#include <stddef.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most slices one stream keeps in flight (WEFT_SLICES_IN_FLIGHT's bound). */
#define WEFT_MAX_SLICES_IN_FLIGHT 64

typedef struct {
  int timeout_ms;         /* WEFT_TIMEOUT_MS: longest wait without progress in any operation */
  int connect_timeout_ms; /* WEFT_CONNECT_TIMEOUT_MS: how long init waits for master and peers */
  int nsocks;             /* WEFT_NSOCKS: TCP connections per peer that large messages stripe over */
  int sockbuf_bytes;      /* WEFT_SOCKET_BUFFER: SO_SNDBUF/SO_RCVBUF, 0 = kernel default */
  size_t slice_bytes;     /* WEFT_SLICE_BYTES: pipeline unit: each chunk moves in slices of this */
  int slices_in_flight;   /* WEFT_SLICES_IN_FLIGHT: slices posted ahead per step (staging depth);
                           * 0: each transport's (transport_ops_t.depth_bytes) */
  int debug;              /* WEFT_DEBUG: 0 quiet, 1 info, 2 trace */
  char socket_ifname[128]; /* WEFT_SOCKET_IFNAME: interfaces to advertise (NCCL syntax) */
  char trace[1024];        /* WEFT_TRACE: per-rank Chrome trace files start with this; "" = off */
  int trace_max_events;    /* WEFT_TRACE_MAX_EVENTS: events kept per rank, the rest dropped */
  char algo[256];          /* WEFT_ALGO: "ring" or "all_reduce=tree,broadcast=ring" */
  int hierarchy;           /* WEFT_HIERARCHY: hierarchical all-reduce: 1 always, 0 never, -1 auto */
  char tune_file[512];     /* WEFT_TUNE_FILE: cost model written by weft-bench --tune */
  char algo_file[512];     /* WEFT_ALGO_FILE: an MSCCL program (XML) run for its collective */
  char transport[16];      /* WEFT_TRANSPORT: auto (shm on one host, else ib or tcp), tcp, shm, ib */
  int shm_slots;           /* WEFT_SHM_SLOTS: slots (of WEFT_SLICE_BYTES) per shm ring direction */
  size_t shm_single_copy_bytes; /* WEFT_SHM_SINGLE_COPY_BYTES: shm sends this large go by
                                 * process_vm_readv; 0 = never */
  int shm_stream;            /* WEFT_SHM_STREAM: large shm slots written with non-temporal stores:
                              * -1 where that costs less, 0 never, 1 every slot */
  size_t device_slice_bytes; /* WEFT_DEVICE_SLICE_BYTES: the slice of calls on device buffers */
  int device_slots;          /* WEFT_DEVICE_SLOTS: slots per direction of a device connection */
  int fused_steps;         /* WEFT_FUSED_STEPS: run fused ring steps fused (1) or as two passes */
  int device_resident;     /* WEFT_DEVICE_RESIDENT: device calls as device programs where eligible */
  int spin_us;             /* WEFT_SPIN_US: a wait polls (yielding the core) this long, then sleeps */
  int async_spin_us;       /* WEFT_ASYNC_SPIN_US: the same for calls the progress thread runs
                            * where the host's ranks outnumber its cores (comm/async.c) */
  char device[16];         /* WEFT_DEVICE: auto, cuda, emulated or none (device/device.h) */
  char ib_hca[256];        /* WEFT_IB_HCA: RDMA devices and ports to use (NCCL_IB_HCA syntax) */
  int ib_gid_index;        /* WEFT_IB_GID_INDEX: RoCE GID index, -1 = the RoCE v2 GID of our IPv4 */
  int ib_timeout;          /* WEFT_IB_TIMEOUT: QP ack timeout, 4.096 us * 2^value */
  int ib_retry_cnt;        /* WEFT_IB_RETRY_CNT: QP retransmissions before a write fails */
  int ib_gdr;              /* WEFT_IB_GDR: 1 = device buffers straight from device memory (GPUDirect) */
  /* WEFT_JOB_TOKEN, or the content of WEFT_JOB_TOKEN_FILE: the job's shared secret; "" = none.
   * Never printed: errors and WEFT_DEBUG lines name the variable or file, not the value. */
  char job_token[1024];
  char job_token_file[512]; /* WEFT_JOB_TOKEN_FILE: where job_token was read from, "" = not */
} weft_config_t;

typedef const char *(*config_getenv_fn)(void *ctx, const char *name);

/* Fills `cfg` from `get` (NULL: the process environment); rejects malformed or out-of-range
 * values with WEFT_ERR_INVALID_ARGUMENT naming the variable, its value and the valid range. */
weft_result_t config_load(weft_config_t *cfg, config_getenv_fn get, void *ctx);

/* The configuration calls on device buffers run with: `cfg` with its slice size and slot count
 * replaced by WEFT_DEVICE_SLICE_BYTES and WEFT_DEVICE_SLOTS (device connections and the executor
 * read those fields). */
weft_config_t config_for_device(const weft_config_t *cfg);

/* Number of knobs and their names/defaults/descriptions, for --help output and tests. */
int config_knob_count(void);
void config_knob_info(int i, const char **name, const char **default_value,
                      const char **description);

/* Knob i's value in `cfg` as text (sizes in bytes); a secret (WEFT_JOB_TOKEN) as "(set)" or "",
 * never its content. For weft-info. */
void config_knob_value(const weft_config_t *cfg, int i, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMMON_CONFIG_H_ */
