// sim_harness.h -- runs every rank's schedule of one call in one process, on in-memory links, and
// checks what the executor relies on and what the caller gets.
//
// The simulator follows the executor's rules (executor.c): ops to one peer in one direction form
// a stream whose ops are cut into slices and posted in order, at most `window` slices in flight,
// the call description first; slice j of an op with a dependency is posted (a copy: runs) only
// once slice j of the op it depends on has been retired; slices retire in stream order once their
// transfer completed, and a reducing receive folds its slice into the output as it retires. Which
// ready event happens next is drawn at random, so different seeds explore different timings.
//
// Links buffer without bound (a send may complete before its receive is posted) unless
// `rendezvous` is set: then a send only completes once the peer has posted the matching receive,
// the way TCP behaves when a slice does not fit into the socket buffers. Nothing left to run while
// ops remain is a deadlock and fails the run.
//
// Hazards fail the run too: a send reads its memory at any time until the peer has received it or
// the send completed, a plain receive writes at any time between both sides posting and its
// completion; anything else touching that memory meanwhile is a race. So are reading memory no op
// has written yet, and touching a buffer the caller may pass as NULL.
//
// Every element carries the set of ranks whose input it sums and how many final folds (WEFT_AVG's
// division) its value went through: sums must not count a rank twice, a final fold must complete
// the sum and happen once, and a finalized value may only be copied, never folded again.
#ifndef WEFT_TESTS_COLLECTIVES_SIM_HARNESS_H_
#define WEFT_TESTS_COLLECTIVES_SIM_HARNESS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

extern "C" {
#include "collectives/algorithms.h"
}

namespace sim {

struct Options {
  size_t slice_elems = 4;   // WEFT_SLICE_BYTES in elements
  int window = 4;           // WEFT_SLICES_IN_FLIGHT
  bool rendezvous = false;  // a send completes only once the matching receive was posted
  uint64_t seed = 1;        // the order in which ready events happen
};

std::string Describe(const Options& o);

bool IsSend(sched_kind_t k);
bool IsToken(sched_kind_t k);
bool Writes(sched_kind_t k);  // the op stores into its `buf`
const char* BufName(int b);
// "rank 2 op 5 (recv-reduce from 1, recvbuf[0, +3) src sendbuf[0], dep 4, step 2)"
std::string OpName(const schedule_t& s, int rank, int op);

// One element of a buffer as the simulator tracks it.
struct Cell {
  int64_t v = 0;
  uint32_t ranks = 0;  // whose inputs the value sums
  int finals = 0;      // final folds the value went through
  bool init = false;   // written by the caller or by an op
};

// One rank's memory: the caller's two buffers and the executor's scratch. In place, the schedule's
// SENDBUF or RECVBUF names part of the other buffer's storage (`alias` below).
struct Memory {
  std::vector<Cell> send, recv, scratch;
  bool has_send = true, has_recv = true;  // false: the caller may pass NULL
  // Where a schedule buffer lives: storage 0 send, 1 recv, 2 scratch, at element `base`.
  int store[SCHED_NUM_BUFS] = {0, 1, 2};
  size_t base[SCHED_NUM_BUFS] = {0, 0, 0};
};

struct World {
  std::vector<schedule_t> sched;
  std::vector<Memory> mem;
  std::vector<uint32_t> heard;  // after Simulate: the ranks each rank provably heard from
};

// Static checks: sched_validate, no op writes SENDBUF or talks to itself, call-description links
// pair up (and, when `all_linked`, connect every rank), and the ops on each (peer, direction)
// pair match in kind and count across the two ranks.
std::string CheckStatic(const World& w, bool all_linked);

// Runs the schedules on w.mem (scratch is sized from buf_count here); "" or what went wrong.
std::string Simulate(World& w, const Options& o);

// One collective call as every rank makes it.
struct Call {
  weft_coll_t coll;
  int nranks;
  size_t count;
  int root;
  bool in_place;
  const int* node_of = nullptr;  // sched_args_t's topology; nullptr: one host
  int nnodes = 0;
  size_t round_count = 0;  // sched_args_t's: rings move at most this much of a chunk per round
};

// all_to_allv's uneven split of a Call: rank i sends rank j AllToAllvCount(c, i, j) elements
// (0, count/2, count or 3 count/2: zeros, odd sizes and pairs that differ each way), laid out
// with a gap of one element between parts, rank order in sendbuf and reverse rank order in
// recvbuf, so that displacements matter.
size_t AllToAllvCount(const Call& c, int i, int j);
struct Splits {
  std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;
  size_t send_size = 0, recv_size = 0;
};
Splits AllToAllvSplits(const Call& c, int rank);

std::string Describe(const Call& c);
std::string CollName(weft_coll_t c);

// Builds every rank's schedule with `build`, checks them, runs them and checks each rank's output
// against the collective's definition (integer sum; for barrier, that every rank heard from all).
::testing::AssertionResult RunCall(sched_build_fn build, const Call& call, const Options& o);

// The input element i of rank r.
inline int64_t Input(int r, size_t i) { return (int64_t)(r + 1) * 1000 + (int64_t)i; }

}  // namespace sim

#endif  // WEFT_TESTS_COLLECTIVES_SIM_HARNESS_H_
