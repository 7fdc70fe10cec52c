/* rendezvous.h -- internal: how the ranks of a new communicator find each other.
 *
 * Rank 0 serves the key-value store on the master port; every rank connects to it, publishes
 * one record (its transport addresses and host identity), reads everyone's, and counts itself in.
 * Init is complete when all ranks have counted themselves in, after which the store is no longer
 * needed: rank 0 stops serving it, freeing the port for the next job. */
#ifndef WEFT_BOOTSTRAP_RENDEZVOUS_H_
#define WEFT_BOOTSTRAP_RENDEZVOUS_H_

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BOOT_HOST_ID_MAX 160

typedef struct {
  int rank, nranks;
  const char *master_host;
  int master_port;
  uint64_t job_id; /* boot_job_hash() of the launcher's job id */
  const weft_config_t *config;
} boot_params_t;

/* Transports a rank may publish an address for: 0 TCP, 1 shared memory, 2 CUDA IPC, 3 RDMA verbs
 * (comm.c's table). */
#define BOOT_NTRANSPORTS 4

/* What every rank publishes: a blob per transport plus the identity of its host. A transport the
 * rank did not create (WEFT_TRANSPORT ruled it out, or it failed) leaves its blob all zeros.
 * `rescue` is the TCP address survivors reach this rank at after a failure (comm/rescue.h),
 * whatever WEFT_TRANSPORT chose for the traffic itself. `settings` holds, at init, the settings
 * that must match on every rank (comm/agree.h); split and shrink leave it all zeros. */
typedef struct {
  char host_id[BOOT_HOST_ID_MAX];
  unsigned char addr[BOOT_NTRANSPORTS][128 + 16]; /* a net_addr_t for TCP */
  unsigned char rescue[128 + 16];                 /* a net_addr_t */
  unsigned char settings[512];
  /* CPUs online on the rank's host, 0 if unknown: with the ranks counted per host, whether some of
   * them share a CPU (comm/cost_model.c). 64 bits: records lie back to back in the store's
   * exchange, and the size must stay a multiple of 8 for the net_addr_t blobs in the next one. */
  int64_t host_cpus;
} boot_record_t;

typedef struct boot_session boot_session_t;

/* Starts the store on rank 0 and connects this rank to it. `advertise` receives the local
 * address (a net_addr_t with port 0) that peers can reach this rank at, `comm_id` the id of the
 * new communicator: rank 0 derives it (boot_comm_id of the address it resolved the master to)
 * and the others read it from the store, so that ranks naming the master differently
 * ("localhost", "127.0.0.1", a host name) still agree on it. */
weft_result_t boot_open(const boot_params_t *p, boot_session_t **out, void *advertise,
                        uint64_t *comm_id);

/* Publishes `mine` and fills all[nranks] with every rank's record; returns when all ranks have
 * done the same. */
weft_result_t boot_exchange(boot_session_t *s, const boot_record_t *mine, boot_record_t *all);

void boot_close(boot_session_t *s);

/* NULL when a published record can be used as it is, else what is wrong with it: a host id
 * without its terminating NUL (comm.c compares host ids as strings), or a TCP blob (the TCP
 * transport's or the rescue address) that is neither all zeros nor an IPv4 or IPv6 address of its
 * family's length. boot_exchange refuses
 * such a record from any rank: it came from another build or from something that is not weft. */
const char *boot_record_problem(const boot_record_t *r);

/* This host's identity: host name, boot id and network namespace. Ranks with equal identities
 * share memory and loopback. */
void boot_host_id(char *buf, size_t cap);

/* A communicator id from the job and the rendezvous address (rank 0 passes the numeric address
 * it resolved the master to, see boot_open). */
uint64_t boot_comm_id(uint64_t job_id, const char *master_host, int master_port);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_BOOTSTRAP_RENDEZVOUS_H_ */
