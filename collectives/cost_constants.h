/* cost_constants.h -- internal: the committed alpha, beta and gamma of each transport, and the
 * pure function from a communicator's transport mix to the cost model its automatic algorithm
 * choice uses. The numbers and where each comes from: cost_constants.c. */
#ifndef WEFT_COLLECTIVES_COST_CONSTANTS_H_
#define WEFT_COLLECTIVES_COST_CONSTANTS_H_

#include "collectives/algorithms.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What carries a pair of ranks. staged: device buffers copied through host memory and sent over
 * the host connection; rdma: verbs (GPUDirect included, for device buffers). */
typedef enum {
  COST_TCP,
  COST_SHM,
  COST_CUDA_IPC,
  COST_STAGED,
  COST_RDMA,
  COST_NUM_TRANSPORTS
} cost_transport_t;

/* The names WEFT_TUNE_FILE's keys and weft-sim's --transport use, in cost_transport_t's order.
 * A macro, so that the tune file's parser needs no other file (tests/fuzz builds it alone). */
#define COST_TRANSPORT_NAMES \
  { "tcp", "shm", "cuda_ipc", "staged", "rdma" }

enum { COST_INTRA = 0, COST_INTER = 1 }; /* the two ends on one host, on two hosts */

typedef struct {
  double alpha, beta, gamma; /* s per message, s per byte on the link, s per byte reduced */
} cost_link_t;

/* Per transport, per COST_INTRA / COST_INTER. */
typedef struct {
  cost_link_t link[COST_NUM_TRANSPORTS][2];
} cost_table_t;

/* Which (transport, intra/inter) classes some pair of the communicator's ranks uses. */
typedef struct {
  unsigned char used[COST_NUM_TRANSPORTS][2];
} cost_links_t;

/* Seconds a rank waits, per dependent round, for the peer it needs to be scheduled where a host
 * runs more ranks than it has CPUs (cost_model_t.wake). Fitted to 4 ranks on the 2-core
 * development VM: an 8-byte all-reduce in one round (linear_allreduce.c) took 2 us less than in
 * recursive doubling's two (results/2026-11-29-one-step), and the closed forms differ by
 * 3 alpha less one wake there: wake = 2 us + 3 x SHM_ALPHA. */
#define COST_WAKE 4.6e-6

/* The committed constants (cost_constants.c). */
const cost_table_t *cost_constants(void);

/* The transport named `name` (COST_TRANSPORT_NAMES), or COST_NUM_TRANSPORTS. */
cost_transport_t cost_transport_from_name(const char *name);
const char *cost_transport_name(cost_transport_t t);

/* The model of a communicator whose pairs use `links`: per parameter the largest over the classes
 * used, since a flat algorithm's step waits for its slowest link and every step of a ring or a
 * tree may land on it. No class used (one rank): tcp's intra-host row. A pure function: the same
 * table and links give the same bits on every rank and in every run. */
cost_model_t cost_model_for(const cost_table_t *table, const cost_links_t *links,
                            double slice_bytes);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_COST_CONSTANTS_H_ */
