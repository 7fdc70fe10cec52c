/* comm.h -- internal: the communicator object behind weft_comm_t. */
#ifndef WEFT_COMM_COMM_H_
#define WEFT_COMM_COMM_H_

#include <stdint.h>

#include "collectives/algo_select.h"
#include "collectives/algorithms.h"
#include "collectives/executor.h"
#include "common/config.h"
#include "common/error.h"
#include "include/weft.h"
#include "transport/transport.h"

struct weft_comm {
  int rank, nranks;
  int local_rank, local_size;
  uint64_t comm_id;
  weft_config_t config;
  transport_t *transport;
  unsigned char *peer_addrs; /* nranks transport address blobs, addr_size each */
  conn_t **conns;            /* per peer, NULL until first used */
  exec_ctx_t exec;
  uint64_t seq; /* collectives called so far; travels in every call description */
  uint64_t *sent_to, *recv_from; /* send/recv messages per peer, for their descriptions */
  algo_policy_t algo_policy;     /* what WEFT_ALGO forces */
  cost_model_t model;            /* alpha, beta, gamma: the same on every rank */
  weft_result_t failed;      /* WEFT_SUCCESS while healthy */
  char failed_msg[ERR_MSG_MAX];
};

/* The connection to `peer`, set up on first use (executor callback). */
weft_result_t comm_get_conn(void *comm, int peer, conn_t **out);

/* Records the current thread's error as the communicator's failure and resets its connections so
 * that peers blocked on this rank fail promptly instead of waiting for their timeout. */
weft_result_t comm_fail(weft_comm_t *comm, weft_result_t res);

/* The cost model (cost_model.c): defaults or WEFT_TUNE_FILE at init; then, once the ring is
 * connected, a short measurement that every rank agrees on. */
weft_result_t cost_model_init(weft_comm_t *comm);
weft_result_t cost_model_measure(weft_comm_t *comm);
weft_result_t cost_model_load(const char *path, cost_model_t *m);

/* Runs one operation now, on the calling thread (collectives_api.c). */
weft_result_t comm_call(weft_comm_t *comm, const weft_call_t *call);

/* Runs one operation after every operation issued before it on this communicator, blocking
 * until it completes (async.c: inline when nothing is queued). */
weft_result_t comm_submit(weft_comm_t *comm, const weft_call_t *call);

/* WEFT_ERR_COMM_FAILED with the original message if the communicator failed earlier. */
weft_result_t comm_check_usable(const weft_comm_t *comm);

#endif /* WEFT_COMM_COMM_H_ */
