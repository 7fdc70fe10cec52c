/* sim.h -- private to weft-sim: one call's schedules replayed on the alpha-beta-gamma model.
 *
 * The engine builds the schedule of each rank from the algorithms table and replays it as a
 * discrete-event simulation that follows executor.c's rules:
 *
 * - Ops to one peer in one direction form a stream, in schedule order; the call description
 *   (HDR_BYTES) leads the streams to hdr_to and from hdr_from. Each op is cut into slices of
 *   slice_bytes; a token is one 1-byte message.
 * - Slice j of an op with a dependency is posted once slice j of that op has completed; at most
 *   `window` slices are posted and not yet retired per stream; slices retire in stream order.
 * - A message starts when its send slice and the matching receive slice are both posted (the
 *   receiver's staging slot bounds what may arrive, as credits do) and both ports are free.
 *
 * Assumptions of the model (stated once, here):
 * - Each rank has one outgoing and one incoming port: it sends one message at a time and receives
 *   one at a time, whatever the number of peers. A message holds both ports for alpha + bytes*beta,
 *   with the inter-node alpha and beta when sender and receiver sit on different nodes. Ranks of
 *   a node do not share a NIC (no contention beyond the two ports).
 * - Each rank has one CPU that reduces arrived slices (bytes*gamma) and runs local copies
 *   (bytes*beta_mem) one after another, in the order they became ready; sends cost it nothing.
 * - Ready messages that compete for a port go first-come first-served (ties: lower rank first).
 * - All ranks enter the call at time 0; the call's time is when the last rank retired its last
 *   slice.
 *
 * What a run costs (tools/sim/README.md, "Scale", has measurements):
 * - Memory: compact records, not lazy generation. Each rank's schedule is built, validated
 *   (linear in its ops) and turned into one 40-byte record per op (sim_internal.h's sim_op_t:
 *   count, slices, progress, dependency, stream, dependants) plus 4 bytes in its stream's op list;
 *   the schedule itself (104 bytes an op) is freed before the next rank's is built, so at most one
 *   lives at a time. Streams are numbered through a per-peer index and sized exactly. Chosen
 *   because the builders stay untouched and the replay sees exactly the ops the library runs;
 *   the price is ~44 bytes per op of the whole call: fine for the trees and Rabenseifner
 *   (O(log p) ops a rank), but a ring all-reduce has 4(p-1) ops a rank, ~1.07e9 at 16,384 ranks
 *   (~47 GB). Going past that needs builders that can emit op i of a rank on demand, so that the
 *   engine keeps a window of live ops per stream; not done yet. Where a call is symmetric
 *   (sim_symmetry.h, SIM_REPLAY_AUTO), only one rank per class is kept and replayed: every
 *   rank's schedule is still built and checked, one at a time, which then sets the time.
 * - Time: per message, one event (O(log n) heap on n pending events, no allocation per event)
 *   and bookkeeping for what changed: a round at one instant looks only at the streams whose
 *   state changed, and starts messages by merging the first-come first-served wait lists of the
 *   ports that freed through a heap. A walk skips pairs whose other port is busy, so a rank with
 *   many pairs waiting on busy peers (pairwise all-to-all) costs O(p) per message. Slices are not
 *   aggregated: one event per slice and one per reduction, so a run costs O(slices x log n) over
 *   all ranks. Where a message ends is decided in one place (sim_internal.h's
 *   sim_xfer_schedule), and a scheduled completion can be moved (sim_xfer_move: events carry a
 *   version, stale ones are skipped), for a link model that shares bandwidth: the network mode
 *   (`topo`, sim_net.h) plugs in there. It has no ports: a rank's streams may each have one
 *   message in flight at once, so a walk goes on past a pair it starts, and a pair whose send
 *   stream still has one stays in the wait lists, skipped, until its delivery.
 * - Skipping: in the middle of long ops the replay repeats itself; sim_skip.h finds where and
 *   jumps over whole periods at once (on by default, off in network mode and with a trace). */
#ifndef WEFT_TOOLS_SIM_SIM_H_
#define WEFT_TOOLS_SIM_SIM_H_

#include <stddef.h>

#include "collectives/schedule.h"
#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* executor.c's HDR_BYTES: the call description every ring collective sends first. */
#define SIM_HDR_BYTES 40
/* executor.c's AGREE_BYTES: a token with values two ranks agree on (all_to_allv, p2p). */
#define SIM_AGREE_BYTES 32

typedef struct {
  double alpha, beta;             /* seconds per message, per byte, between ranks of one node */
  double inter_alpha, inter_beta; /* the same between ranks on different nodes */
  double gamma;                   /* seconds per byte reduced */
  double beta_mem;                /* seconds per byte of a local copy */
  size_t slice_bytes;             /* WEFT_SLICE_BYTES */
  int window;                     /* WEFT_SLICES_IN_FLIGHT */
  int ranks_per_node;             /* ranks r and q share a node iff r / rpn == q / rpn; <= 0: one */
  int headers;                    /* send the call description as the executor does */
  const struct topo *topo;        /* network mode (topology.h); NULL: the two ports per rank */
  int replay;                     /* sim_replay_t: sim_run's choice; sim_run_schedules: full */
  int skip; /* jump over periodic stretches of long ops (sim_skip.h); 0: replay every slice */
  /* SIM_REPLAY_ESTIMATE: a call whose ops run past 2K slices is estimated from replays of K and
   * 2K slices, K = sim_estimate_slices: estimate_slices, fewer at many ranks (sim_estimate.c). */
  int estimate_slices;
  /* The short replays' results, kept for the calls that share them (sizes of a sweep with the
   * same remainder replay the same two calls); NULL: none. Thread-safe; holds results of this
   * model only: a cache must not be shared by models that differ. */
  struct sim_estimate_cache *estimate_cache;
} sim_model_t;

/* SIM_REPLAY_AUTO replays one rank per symmetry class where the call has a symmetry
 * (sim_symmetry.h) and nothing tells the ranks apart: not in network mode, not with a trace.
 * The result is the full replay's, bit for bit (README.md, "Scale").
 * SIM_REPLAY_ESTIMATE is AUTO, except that a call without a symmetry whose pipelines are long
 * (more than 2K slices an op, K = sim_estimate_slices) is not replayed whole: it is replayed
 * twice, shortened to K and 2K slices, and its time extrapolated along
 * the line through the two (sim_result_t.estimated says so). Not exact: README.md, "Estimated
 * replay", has the errors measured against the full replay. */
typedef enum { SIM_REPLAY_FULL = 0, SIM_REPLAY_AUTO = 1, SIM_REPLAY_ESTIMATE = 2 } sim_replay_t;

/* weft-sim's defaults: a loopback-like alpha, beta, gamma (the library's per-transport ones are
 * --transport's, collectives/cost_constants.c), config.c's slice and window; one node, headers
 * on, skipping on. */
void sim_model_defaults(sim_model_t *m);

/* One call. count follows weft.h (all_gather, gather: sendcount; reduce_scatter, scatter:
 * recvcount). root: the root of broadcast, reduce, gather and scatter; for send and recv, rank 0
 * sends to rank `root`. */
typedef struct {
  weft_coll_t coll;
  weft_algo_t algo;
  int nranks;
  size_t count;
  weft_dtype_t dtype;
  int root;
} sim_call_t;

typedef struct {
  double time;     /* seconds until the last rank finished */
  long messages;   /* messages on the wire, call descriptions included */
  double bytes;    /* bytes on the wire */
  long cross_node; /* messages between different nodes */
  int replayed;    /* ranks the engine replayed: fewer than the call's in a symmetric replay */
  /* Periodic stretches jumped over (sim_skip.h), and the messages in them (counted above). */
  long skip_jumps, skipped_messages;
  /* SIM_REPLAY_ESTIMATE: 1 when time, messages and bytes were extrapolated from replays of the
   * call shortened to estimated_from[0] and estimated_from[1] elements (sim_call_t.count). */
  int estimated;
  size_t estimated_from[2];
} sim_result_t;

/* Called for every message once it has been handed over (for traces and tests). */
/* `step`: what the receiving op does with it (sched_kind_name: "recv-reduce-send" for a fused
 * step, ...), or "desc" for a call description. */
typedef void (*sim_trace_fn)(void *arg, int from, int to, double bytes, double start, double end,
                             const char *step);

/* Simulates `call` on `m`. WEFT_ERR_INVALID_ARGUMENT for a pair the table lacks (the message lists
 * what the collective has), WEFT_ERR_INTERNAL for schedules that disagree or deadlock. */
weft_result_t sim_run(const sim_model_t *m, const sim_call_t *call, sim_trace_fn trace,
                      void *trace_arg, sim_result_t *out);

/* The same for schedules made elsewhere (hand-made ones in tests): scheds[r] is rank r's, `esize`
 * the bytes per element. The schedules stay the caller's. */
weft_result_t sim_run_schedules(const sim_model_t *m, int nranks, size_t esize,
                                const schedule_t *scheds, sim_trace_fn trace, void *trace_arg,
                                sim_result_t *out);

/* K of SIM_REPLAY_ESTIMATE at nranks: estimate_slices, or fewer at many ranks, where a replayed
 * slice costs an event per rank and more (the replay's state outgrows the caches): K x nranks at
 * most 2^19, and never under 16, a few times a tree's fill even at a million ranks (about
 * 2 log2 p slices). */
size_t sim_estimate_slices(const sim_model_t *m, int nranks);

/* A cache for sim_model_t.estimate_cache (SIM_REPLAY_ESTIMATE). NULL when out of memory. */
struct sim_estimate_cache *sim_estimate_cache_create(void);
void sim_estimate_cache_free(struct sim_estimate_cache *c);

/* Seconds one message of `bytes` takes from rank `from` to rank `to`. */
double sim_link_time(const sim_model_t *m, int from, int to, double bytes);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_SIM_SIM_H_ */
