/* comm.h -- internal: the communicator object behind weft_comm_t. */
#ifndef WEFT_COMM_COMM_H_
#define WEFT_COMM_COMM_H_

#include <stdint.h>

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
  weft_result_t failed;      /* WEFT_SUCCESS while healthy */
  char failed_msg[ERR_MSG_MAX];
};

/* The connection to `peer`, set up on first use (executor callback). */
weft_result_t comm_get_conn(void *comm, int peer, conn_t **out);

/* Records the current thread's error as the communicator's failure and resets its connections so
 * that peers blocked on this rank fail promptly instead of waiting for their timeout. */
weft_result_t comm_fail(weft_comm_t *comm, weft_result_t res);

/* WEFT_ERR_COMM_FAILED with the original message if the communicator failed earlier. */
weft_result_t comm_check_usable(const weft_comm_t *comm);

#endif /* WEFT_COMM_COMM_H_ */
