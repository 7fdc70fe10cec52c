// tree_skip_test.cc -- the periodic skip (sim_skip.h) on tree and double-tree all-reduce against
// the full slice-by-slice replay, with weft-sim's own decimal constants.
//
// skip_test compares every algorithm with power-of-two constants, where every sum is exact. The
// trees are where the skip has the most to do and where it is least sure to find anything:
// their reduction and broadcast share ports first-come first-served, and the interleaving is not
// periodic until the reduction's lead has settled (tools/sim/README.md, "Scale"). This test
// covers what the sweep `weft-sim -C all_reduce -A tree` runs: weft-sim's default alpha, beta and
// gamma (decimal, so periods round differently from one another), rank counts that are not
// powers of two, several slices and windows, and sizes from one slice to thousands.
//
// Times must agree within 1e-9 relative: after a jump every time is the checkpoint's plus n
// periods, which rounds differently from adding n periods up one event at a time (the full
// replay); counts (messages, bytes) must be equal.
//
// The widest cases (130 ranks at 256 MiB: a full replay of about a million messages) run only
// with WEFT_SIM_LONG_TESTS=1 in the environment.
#include <cstdlib>
#include <string>

#include "tests/sim/sim_util.h"

namespace {

sim_result_t Simulate(sim_model_t m, int skip, const sim_call_t& c) {
  m.skip = skip;
  sim_result_t r = {};
  EXPECT_EQ(sim_run(&m, &c, nullptr, nullptr, &r), WEFT_SUCCESS)
      << weft_algo_name(c.algo) << " p=" << c.nranks << " count=" << c.count << ": " << err_last();
  return r;
}

// Compares the two replays of one call; returns the jumps the fast one made.
long Compare(const sim_model_t& m, weft_algo_t algo, int p, size_t bytes) {
  sim_call_t c = {WEFT_COLL_ALL_REDUCE, algo, p, bytes / 4, WEFT_FLOAT32, 0};
  sim_result_t full = Simulate(m, 0, c), fast = Simulate(m, 1, c);
  std::string what = std::string(weft_algo_name(algo)) + " p=" + std::to_string(p) +
                     " bytes=" + std::to_string(bytes) + " slice=" + std::to_string(m.slice_bytes) +
                     " window=" + std::to_string(m.window);
  EXPECT_EQ(full.skip_jumps, 0) << what;
  EXPECT_NEAR(fast.time, full.time, 1e-9 * full.time) << what;
  EXPECT_EQ(fast.messages, full.messages) << what;
  EXPECT_EQ(fast.bytes, full.bytes) << what;
  EXPECT_LE(fast.skipped_messages, fast.messages) << what;
  return fast.skip_jumps;
}

// weft-sim's defaults (the CLI's model), with another slice and window.
sim_model_t CliModel(size_t slice_bytes, int window) {
  sim_model_t m;
  sim_model_defaults(&m);
  m.slice_bytes = slice_bytes;
  m.window = window;
  m.skip = 1;
  return m;
}

// Rank counts 3..130, odd and even, one slice to 1,024 slices an op, three slice and window
// settings: the same results as the full replay, and the skip does jump (else the comparisons
// would compare the full replay with itself).
TEST(TreeSkip, SameAsFullReplay) {
  struct {
    size_t slice;
    int window;
  } settings[] = {{65536, 4}, {16384, 2}, {4096, 8}};
  long jumps = 0;
  for (const auto& s : settings) {
    sim_model_t m = CliModel(s.slice, s.window);
    for (weft_algo_t algo : {WEFT_ALGO_TREE, WEFT_ALGO_DOUBLE_TREE})
      for (int p : {3, 5, 7, 12, 33, 64, 130})
        for (size_t bytes : {size_t(1) << 10, size_t(1) << 16, size_t(1) << 20, s.slice << 10}) {
          if (p > 33 && bytes > (size_t(4) << 20)) continue;  // kept quick: LargeSizes below
          jumps += Compare(m, algo, p, bytes);
        }
  }
  EXPECT_GT(jumps, 0);
}

// The test model (sim_util.h: 5 us, 10 GB/s), where alpha and beta weigh otherwise.
TEST(TreeSkip, SameAsFullReplayOtherModel) {
  sim_model_t m = simtest::Model(4096);
  long jumps = 0;
  for (weft_algo_t algo : {WEFT_ALGO_TREE, WEFT_ALGO_DOUBLE_TREE})
    for (int p : {4, 9, 31, 64}) jumps += Compare(m, algo, p, size_t(4) << 20);
  EXPECT_GT(jumps, 0);
}

// Up to 256 MiB at 64 KiB slices (4,096 slices an op) on 7..130 ranks: seconds each, so only
// with WEFT_SIM_LONG_TESTS=1.
TEST(TreeSkip, LargeSizes) {
  const char* env = std::getenv("WEFT_SIM_LONG_TESTS");
  if (!env || std::string(env) != "1") GTEST_SKIP() << "set WEFT_SIM_LONG_TESTS=1 to run";
  sim_model_t m = CliModel(65536, 4);
  long jumps = 0;
  for (weft_algo_t algo : {WEFT_ALGO_TREE, WEFT_ALGO_DOUBLE_TREE})
    for (int p : {7, 64, 130})
      for (size_t bytes : {size_t(64) << 20, size_t(256) << 20})
        jumps += Compare(m, algo, p, bytes);
  EXPECT_GT(jumps, 0);
}

}  // namespace
