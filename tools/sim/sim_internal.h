/* sim_internal.h -- private to the simulator's engine files (sim_build.c, sim_run.c, sim_heap.c,
 * sim_net.c, sim_skip.c). */
#ifndef WEFT_TOOLS_SIM_SIM_INTERNAL_H_
#define WEFT_TOOLS_SIM_SIM_INTERNAL_H_

#include <stddef.h>
#include <stdint.h>

#include "collectives/algorithms.h"
#include "collectives/schedule.h"
#include "tools/sim/sim.h"

/* One message in a stream's FIFO: started, not yet retired. */
typedef struct {
  int op; /* schedule index, -1 for the call description */
  size_t slice;
  int complete; /* handed over, and reduced where the op reduces */
} sim_slot_t;

typedef struct {
  int peer, is_send;
  /* peer is the index in sim_world_t's ranks; gpeer the rank among all of the call's. They
   * differ only in a symmetric replay (sim_symmetry.h), where peer is gpeer's representative. */
  int gpeer;
  unsigned char symkind;   /* symmetric replay: the kind of map its peer follows (sim_sym_t) */
  int symchecked, sympeer; /* while checking a symmetry: the last rank checked here + 1, and
                              its peer on this stream */
  int hdr;        /* the call description still has to start on this stream */
  int *ops, nops; /* schedule indices in stream order (a part of the rank's stream_ops) */
  int cur;        /* ops[cur] holds the next slice to start */
  size_t slice;
  long nmsgs;       /* messages in all, the call description included */
  sim_slot_t *fifo; /* `window` slots (a part of the rank's fifos) */
  int head, count;
  int match;      /* index of the peer's stream in the other direction */
  double waiting; /* since when the pair's head waits only for ports; < 0: it does not */
  unsigned wserial; /* counts the waits: an entry of an earlier one in a wait list is dead */
  int listed;       /* in its rank's `pending` list */
  /* Send streams: the message on the wire (one at a time: one outgoing port). An XFER event
   * whose version is not xfer_version is stale (its completion was moved) and is skipped. */
  unsigned xfer_version;
  int xfer_slot; /* its slot in the receiving stream's fifo */
  double xfer_start, xfer_bytes;
  unsigned epoch; /* the last try_start round that looked at this stream */
} sim_stream_t;

typedef enum { SIM_TASK_REDUCE, SIM_TASK_COPY } sim_task_kind_t;

/* Work for a rank's CPU: fold a received slice (stream, slot) or copy slice `slice` of `op`. */
typedef struct {
  sim_task_kind_t kind;
  int stream, slot, op;
  double seconds;
} sim_task_t;

/* What the replay needs of a schedule op, kept instead of the schedule (sched_op_t is about
 * 2.6 times the size), with the op's progress. */
typedef struct {
  size_t count;            /* elements */
  uint32_t nslices, done;  /* slices in all; completed (retired, reduced, copied) */
  int dep, stream;         /* stream: -1 for a copy */
  int dep_first, dep_next; /* the ops that depend on this one, as a linked list */
  int step;                /* the algorithm's step, for messages */
  unsigned char kind, dep_whole, agree;
  unsigned char has_more; /* further dependencies in sim_rank_t's more_by_op */
} sim_op_t;

/* A further dependency (schedule.h's deps list: imported programs' ops wait on their thread
 * block's previous step and on one of another) of op `op` on op `dep`. Rare, so kept aside. */
typedef struct {
  int op, dep;
  unsigned char whole;
} sim_more_t;

/* A pair that waits only for ports, named by its send end, with its first-come first-served
 * key (waiting, rank, stream) and the stream's wserial when it began to wait. */
typedef struct {
  double waiting;
  int rank, stream;
  unsigned serial;
} sim_wait_t;

/* A rank's pairs waiting for one of its ports, in key order from `head` (up to `sorted`; entries
 * after it were added in this round). Entries of pairs that started since are dead: skipped, and
 * dropped when the list is full. */
typedef struct {
  sim_wait_t *v;
  int head, n, cap, sorted;
  int live; /* entries not dead */
} sim_waitlist_t;

typedef struct {
  sim_op_t *ops; /* schedule order */
  int nops;
  sim_stream_t *streams;
  int nstreams;
  int *stream_ops; /* every stream's ops, stream after stream */
  sim_slot_t *fifos;
  int *copies, ncopies;
  size_t *copy_queued;                  /* per copy: slices handed to the CPU */
  sim_more_t *more_by_op, *more_by_dep; /* the further dependencies, in two orders */
  int nmore;
  /* Streams whose pair may have changed (posted or not) since a round last looked at it; pairs
   * that wait only for ports, by their send end (out_wait) and their receive end (in_wait). */
  int *pending, npending;
  sim_waitlist_t out_wait, in_wait;
  int unsorted; /* a wait list has entries added this round (then it is in unsorted_list) */
  int out_busy, in_busy, cpu_busy;
  sim_task_t *tasks; /* FIFO ring of task_cap */
  int task_head, task_count, task_cap;
  double end; /* when this rank last finished something */
  /* Symmetric replay: the round (try_start's epoch) in which this rank last started a message,
   * and that message's wait key. */
  unsigned out_epoch;
  sim_wait_t out_key;
  /* The last task handed to the CPU: when, and in which event (sim_world_t's nevents + 1). */
  double push_t;
  long push_ev;
  int dirty;  /* something changed here since the last try_start (then it is in dirty_list) */
} sim_rank_t;

/* SIM_EV_NET: network mode's own events (sim_net.h), a flow's drain or the rates' update. */
typedef enum { SIM_EV_XFER, SIM_EV_CPU, SIM_EV_NET } sim_ev_kind_t;

typedef struct {
  double t;
  long seq; /* ties in time run in the order they were pushed */
  sim_ev_kind_t kind;
  int rank;         /* XFER: the sender; CPU: the rank whose CPU finished; NET: sim_net.c's */
  int stream;       /* XFER: the sender's stream (the rest is in the stream) */
  unsigned version; /* XFER: the stream's xfer_version when pushed; NET: sim_net.c's */
} sim_event_t;

typedef struct {
  sim_event_t *ev;
  long n, cap, seq;
} sim_heap_t;

/* Rank maps (sim_symmetry.h): rotations by multiples of d, and for p and d powers of two XOR
 * by them; each of a representative's streams follows one kind (sim_stream_t's symkind). */
enum { SIM_SYM_ROTATE = 1, SIM_SYM_XOR = 2 };

typedef struct {
  int p, d;       /* ranks; representatives 0..d-1 */
  unsigned kinds; /* the kinds of maps the model admits for this d */
} sim_sym_t;

typedef struct {
  const sim_model_t *m;
  int nranks; /* ranks replayed: the call's, or its representatives' in a symmetric replay */
  /* A symmetric replay: only ranks 0..sym.d-1 of sym.p are replayed. `tie` is set when the
   * replay met an order decided by rank numbers, which the representatives may decide otherwise
   * than the full replay: the call is then replayed in full. */
  int symmetric, tie;
  sim_sym_t sym;
  int *started, nstarted; /* symmetric replay: the ranks that started a message this round */
  int *sym_owner;         /* while checking a symmetry: sim_sym_matches' owner */
  size_t esize, slice_elems;
  sim_rank_t *ranks;
  sim_heap_t heap;
  double now;
  unsigned epoch;
  int *dirty_list, ndirty;       /* ranks with `dirty` set, for the next try_start */
  int *unsorted_list, nunsorted; /* ranks with `unsorted` set */
  int *slot_of;                  /* while building: 2 * nranks entries, -1 (sim_build.c) */
  sim_trace_fn trace;
  void *trace_arg;
  sim_result_t res;
  long nevents;       /* events handled so far */
  struct simnet *net; /* network mode (sim_net.h); NULL: the two ports per rank */
  struct sim_skip *skip; /* the periodic-stretch skipper (sim_skip.h); NULL: off */
} sim_world_t;

typedef struct sim_skip sim_skip_t;

typedef struct simnet simnet_t;

/* Builds every rank's schedule and streams; checks that the two ends of each pair of streams
 * carry the same number of messages. sim_world_free is safe after a failed build. */
weft_result_t sim_world_build(sim_world_t *w, const sim_model_t *m, const sim_call_t *call);
/* The same for ranks 0..d-1 only, where the call has a symmetry (sim_symmetry.h) that every
 * rank's schedule verifies; *found = 0 (and nothing built) where none does. */
weft_result_t sim_world_build_symmetric(sim_world_t *w, const sim_model_t *m,
                                        const sim_call_t *call, int *found);
/* The same over schedules built elsewhere, which stay the caller's. */
weft_result_t sim_world_borrow(sim_world_t *w, const sim_model_t *m, int nranks, size_t esize,
                               const schedule_t *scheds);
void sim_world_free(sim_world_t *w);

/* SIM_REPLAY_ESTIMATE (sim_estimate.c): the elements a built world's call loses per slice
 * removed from every op (0: none), whether a call that long is estimated, and the estimate. */
size_t sim_estimate_quantum(const sim_world_t *w, const sim_call_t *call);
int sim_estimate_applies(const sim_model_t *m, const sim_call_t *call, size_t quantum);
weft_result_t sim_estimate_run(const sim_model_t *m, const sim_call_t *call, size_t quantum,
                               sim_result_t *out);

int sim_same_node(const sim_model_t *m, int a, int b);

/* Slices of op `oi` of `r` whose dependencies let them start (sim_run.c's rule). */
size_t sim_dep_ready(const sim_rank_t *r, int oi);

/* Bytes of slice `j` of op `oi` on rank `r` (tokens: 1). */
double sim_slice_bytes(const sim_world_t *w, const sim_rank_t *r, int oi, size_t j);

/* The one place where a message's end is decided: rank `from` starts the head of its send
 * stream `si` now (the receiver's slot `dslot`, `bytes` long); its completion is pushed as an
 * XFER event. A link model replaces the alpha-beta time here and may later move the completion
 * with sim_xfer_move: in network mode the message becomes a flow (sim_net.h), whose delivery is
 * pushed once it has drained. */
weft_result_t sim_xfer_schedule(sim_world_t *w, int from, int si, int dslot, double bytes);
/* Moves the completion of the message on send stream `si` of `from` to time `end` (>= now): the
 * event pushed before becomes stale. */
weft_result_t sim_xfer_move(sim_world_t *w, int from, int si, double end);

int sim_heap_push(sim_heap_t *h, const sim_event_t *e); /* -1 when out of memory */
int sim_heap_pop(sim_heap_t *h, sim_event_t *e);        /* 0 when empty */
void sim_heap_free(sim_heap_t *h);

#endif /* WEFT_TOOLS_SIM_SIM_INTERNAL_H_ */
