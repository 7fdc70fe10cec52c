// soak.h -- private header of weft-soak: options, the seeded generator, the checked operations.
#ifndef WEFT_TOOLS_SOAK_SOAK_H_
#define WEFT_TOOLS_SOAK_SOAK_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" {
#include "include/weft.h"
}

struct SoakOptions {
  uint64_t seed = 1;
  double seconds = 0;          // run this long (ranks agree when to stop), or
  long calls = 0;              // this many calls; neither: 1000 calls
  size_t max_count = 1 << 20;  // elements in the largest buffer of one call
  int max_inflight = 6;        // asynchronous requests outstanding at once
  long churn = 0;              // > 0: the leak loop instead of the soak
  bool verbose = false;        // print every call as it is issued (rank 0)
};

// Every decision comes from a generator seeded by (seed, stream, index): all ranks derive the
// same call #i without talking, and one call's draws do not shift any other's, so a failing call
// reads the same whatever ran before it.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream, uint64_t index);
  uint64_t next();
  // Uniform in [0, n); n > 0.
  uint64_t below(uint64_t n) { return next() % n; }
  bool chance(double p) { return (double)(next() >> 11) * 0x1.0p-53 < p; }

 private:
  uint64_t s_;
};

uint64_t soak_mix(uint64_t x);

// One rank's view of one operation: its buffers, what it should find in them afterwards, and the
// request while it is in flight.
struct SoakOp {
  long index = 0;    // call number, for the failure line
  std::string what;  // "all_reduce/ring int32 sum count 17 in place root 0 on split"
  weft_comm_t* comm = nullptr;
  weft_call_t call{};
  bool async = false;
  weft_request_t* req = nullptr;
  std::vector<char> a, b;   // a: the input (and the output in place), b: the output otherwise
  std::vector<char> want;   // expected output, recv_n elements
  std::vector<char> input;  // a copy of an input that is not also the output
  const char* input_at = nullptr;  // where that input is (nullptr: none to check)
  char* out = nullptr;             // where the output is checked (nullptr: nothing to check)
  size_t recv_n = 0;
  size_t a_used = 0, b_used = 0;  // bytes of a and b the call may touch; the rest is a guard
  size_t bytes = 0;               // the largest buffer's bytes, for the summary
  // all_to_allv: send counts, send displacements, receive counts, receive displacements (n
  // each); p2p_group: the ops. The call points at them.
  std::vector<size_t> v_counts;
  std::vector<weft_p2p_op_t> p2p_ops;
};

// Fills op's buffers and expected output for `call` (buffers are set here) on a communicator
// where this rank is `rank` of `n`. `salt` varies the data from call to call, so a stale result
// of an earlier call never passes for this one; send and recv name the peer in call.root. For
// all_to_allv and p2p_group, count bounds each pair's elements, and every rank derives every
// pair's counts (and a p2p group's messages and tags) from salt alone.
// null_unused: pass NULL for the buffers weft.h lets a rank leave out.
void soak_prepare(SoakOp* op, int rank, int n, uint64_t salt, bool in_place, bool null_unused);

// "" or what is wrong with op's output after it completed.
std::string soak_verify(const SoakOp& op, int rank);

int soak_run(const SoakOptions& o, weft_comm_t* world);
int soak_churn(const SoakOptions& o, weft_comm_t* world);

#endif  // WEFT_TOOLS_SOAK_SOAK_H_
