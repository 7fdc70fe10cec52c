// symmetry_test.cc -- the symmetric replay (one rank per symmetry class) gives the full
// replay's result bit for bit, runs where a call is symmetric, and steps aside where it is not.
#include <cstdio>
#include <cstring>

#include "tests/sim/sim_util.h"

namespace {

// The model of the comparisons: nodes of `rpn` ranks (0: one node) whose links between nodes
// cost more than those within, small slices so that ops have several.
sim_model_t NodesModel(int rpn, int replay) {
  sim_model_t m = simtest::Model(/*slice_bytes=*/1024);
  m.ranks_per_node = rpn;
  m.inter_alpha = 3 * m.alpha;
  m.inter_beta = 2.5 * m.beta;
  m.beta_mem = 0.5 * m.beta;  // copies take CPU time too
  m.replay = replay;
  return m;
}

bool IsP2p(weft_coll_t c) {
  return c == WEFT_COLL_SEND || c == WEFT_COLL_RECV || c == WEFT_COLL_P2P_GROUP;
}

// Collectives whose count is one rank's block (weft.h): p of them make a rank's buffer.
bool PerRank(weft_coll_t c) {
  return c == WEFT_COLL_ALL_GATHER || c == WEFT_COLL_REDUCE_SCATTER || c == WEFT_COLL_GATHER ||
         c == WEFT_COLL_SCATTER || c == WEFT_COLL_ALL_TO_ALL || c == WEFT_COLL_ALL_TO_ALLV;
}

struct Outcome {
  weft_result_t res;
  sim_result_t r;
};

Outcome Simulate(const sim_model_t& m, const sim_call_t& c) {
  Outcome o;
  std::memset(&o.r, 0, sizeof o.r);
  o.res = sim_run(&m, &c, nullptr, nullptr, &o.r);
  return o;
}

// Runs `c` both ways and checks that they agree exactly; true when the fast path ran.
bool SameAsFull(const sim_call_t& c, int rpn) {
  Outcome full = Simulate(NodesModel(rpn, SIM_REPLAY_FULL), c);
  Outcome sym = Simulate(NodesModel(rpn, SIM_REPLAY_AUTO), c);
  std::string what = std::string(weft_coll_name(c.coll)) + " " + weft_algo_name(c.algo) +
                     " p=" + std::to_string(c.nranks) + " count=" + std::to_string(c.count) +
                     " rpn=" + std::to_string(rpn);
  EXPECT_EQ(sym.res, full.res) << what;
  if (full.res != WEFT_SUCCESS || sym.res != WEFT_SUCCESS) return false;
  EXPECT_EQ(full.r.replayed, c.nranks) << what;
  // Bitwise: the representatives' replay is the full one's, not an approximation of it.
  EXPECT_EQ(std::memcmp(&sym.r.time, &full.r.time, sizeof(double)), 0)
      << what << ": " << sym.r.time << " vs " << full.r.time;
  EXPECT_EQ(sym.r.messages, full.r.messages) << what;
  EXPECT_EQ(sym.r.bytes, full.r.bytes) << what;
  EXPECT_EQ(sym.r.cross_node, full.r.cross_node) << what;
  EXPECT_GE(sym.r.replayed, 1) << what;
  EXPECT_LE(sym.r.replayed, c.nranks) << what;
  return sym.r.replayed < c.nranks;
}

// Every table row, sizes even and uneven (count < p, count % p != 0, several slices), on one
// node and on nodes of 2 and 4 ranks.
TEST(SymmetryTest, SameAsFullReplayEverywhere) {
  int fast = 0, runs = 0;
  for (int i = 0; i < algo_count(); i++) {
    const algo_entry_t* e = algo_at(i);
    for (int p : {2, 3, 4, 5, 6, 8, 12, 16, 32, 64}) {
      for (int rpn : {0, 2, 4}) {
        // A block per rank (PerRank): the same bytes a rank sends, whatever p.
        size_t q = PerRank(e->coll) ? 1 : (size_t)p;
        for (size_t count : {(size_t)1, q - (q > 1), 3 * q + 1, 256 * q, 300 * q + 7}) {
          sim_call_t c = {e->coll, e->algo, p, count, WEFT_FLOAT32, IsP2p(e->coll) ? p - 1 : 0};
          fast += SameAsFull(c, rpn);
          runs++;
        }
      }
    }
  }
  // Most rows are symmetric somewhere: the comparison above must have seen the fast path.
  EXPECT_GT(fast, runs / 10) << fast << " of " << runs;
}

// The two all-reduces the scale targets rest on: replayed by fewer ranks than the call has.
TEST(SymmetryTest, FastPathRunsForRingAndRecursiveDoubling) {
  for (weft_algo_t a : {WEFT_ALGO_RING, WEFT_ALGO_RECURSIVE_DOUBLING}) {
    for (int rpn : {0, 4}) {
      for (size_t count : {(size_t)64 * 1024, (size_t)64 * 100}) {
        sim_call_t c = {WEFT_COLL_ALL_REDUCE, a, 64, count, WEFT_FLOAT32, 0};
        Outcome o = Simulate(NodesModel(rpn, SIM_REPLAY_AUTO), c);
        ASSERT_EQ(o.res, WEFT_SUCCESS) << err_last();
        EXPECT_LT(o.r.replayed, 64) << weft_algo_name(a) << " rpn=" << rpn << " count=" << count;
        SameAsFull(c, rpn);
      }
    }
  }
}

// Rabenseifner's all-reduce and halving reduce-scatter exchange with XOR partners, one op a step
// on every rank: at powers of two (even chunks) a few ranks replay the call, as in full.
TEST(SymmetryTest, FastPathRunsForRabenseifner) {
  for (weft_coll_t coll : {WEFT_COLL_ALL_REDUCE, WEFT_COLL_REDUCE_SCATTER}) {
    for (int rpn : {0, 4}) {
      for (size_t block : {(size_t)1, (size_t)1024}) {
        sim_call_t c = {coll,         WEFT_ALGO_RABENSEIFNER,
                        64,           block * (coll == WEFT_COLL_ALL_REDUCE ? 64 : 1),
                        WEFT_FLOAT32, 0};
        Outcome o = Simulate(NodesModel(rpn, SIM_REPLAY_AUTO), c);
        ASSERT_EQ(o.res, WEFT_SUCCESS) << err_last();
        EXPECT_LT(o.r.replayed, 64) << weft_coll_name(coll) << " rpn=" << rpn << " block=" << block;
        std::printf("%s rabenseifner p=64 rpn=%d block=%zu: %d ranks replayed\n",
                    weft_coll_name(coll), rpn, block, o.r.replayed);
        SameAsFull(c, rpn);
      }
    }
  }
}

// A tree and a broadcast from root 3 are not the same on every rank: replayed in full.
TEST(SymmetryTest, NonSymmetricCallsFallBack) {
  sim_call_t tree = {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_TREE, 64, 64 * 1024, WEFT_FLOAT32, 0};
  sim_call_t bcast = {WEFT_COLL_BROADCAST, WEFT_ALGO_RING, 16, 64 * 1024, WEFT_FLOAT32, 3};
  for (const sim_call_t& c : {tree, bcast}) {
    Outcome o = Simulate(NodesModel(0, SIM_REPLAY_AUTO), c);
    ASSERT_EQ(o.res, WEFT_SUCCESS) << err_last();
    EXPECT_EQ(o.r.replayed, c.nranks) << weft_algo_name(c.algo);
    EXPECT_FALSE(SameAsFull(c, 0));
  }
}

void Count(void* arg, int, int, double, double, double, const char*) { ++*(long*)arg; }

// A trace lists every rank's messages: it gets the full replay, whatever the model asks.
TEST(SymmetryTest, TraceReplaysInFull) {
  sim_call_t c = {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, 16, 16 * 1024, WEFT_FLOAT32, 0};
  sim_model_t m = NodesModel(0, SIM_REPLAY_AUTO);
  sim_result_t r;
  long traced = 0;
  ASSERT_EQ(sim_run(&m, &c, Count, &traced, &r), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(r.replayed, 16);
  EXPECT_EQ(traced, r.messages);
}

// The engine's default stays the full replay: callers ask for the symmetric one.
TEST(SymmetryTest, DefaultIsFull) {
  sim_model_t m;
  sim_model_defaults(&m);
  EXPECT_EQ(m.replay, SIM_REPLAY_FULL);
  sim_call_t c = {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, 16, 16 * 1024, WEFT_FLOAT32, 0};
  Outcome o = Simulate(m, c);
  ASSERT_EQ(o.res, WEFT_SUCCESS) << err_last();
  EXPECT_EQ(o.r.replayed, 16);
}

}  // namespace
