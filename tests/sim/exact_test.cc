// exact_test.cc -- on one node the simulation reproduces the closed forms term for term.
//
// Where the schedule has no pipelining to gain from, or the closed form counts it (the chain),
// and the trees' latencies, whose closed forms count messages on shapes built elsewhere.
#include "tests/sim/sim_util.h"

namespace {

using simtest::Model;
using simtest::Time;

const double kHdr = SIM_HDR_BYTES;

// Ring all-reduce with one slice per chunk: 2(p-1) messages of n/p bytes and (p-1) reductions
// of n/p bytes on the critical path, nothing overlaps.
TEST(ExactTest, RingAllReduceUnsliced) {
  for (int p = 2; p <= 16; p++) {
    for (size_t per_chunk : {1, 256, 65536}) {
      size_t count = per_chunk * p, n = count * 4;
      sim_model_t m = Model(/*slice_bytes=*/1 << 30, /*headers=*/0);
      double c = (double)n / p;
      double want = 2 * (p - 1) * (m.alpha + c * m.beta) + (p - 1) * c * m.gamma;
      double got = Time(m, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, p, count);
      EXPECT_SAME_TIME(got, want) << "p=" << p << " n=" << n;
      // The call description goes first on every stream and delays everything by one message,
      // which the closed form counts.
      m.headers = 1;
      got = Time(m, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, p, count);
      EXPECT_SAME_TIME(got, want + m.alpha + kHdr * m.beta) << "p=" << p << " n=" << n;
      cost_model_t cm = {m.alpha, m.beta, m.gamma, (double)m.slice_bytes};
      EXPECT_SAME_TIME(got, ring_allreduce_cost(&cm, p, (double)n)) << "p=" << p;
    }
  }
}

// Chain broadcast with k equal slices: (p-1+k-1)(alpha + n/k beta), from every root.
TEST(ExactTest, ChainBroadcastPipelined) {
  for (int p = 2; p <= 16; p++) {
    for (size_t k : {1, 2, 7, 64}) {
      sim_model_t m = Model(/*slice_bytes=*/4096, /*headers=*/0);
      size_t n = k * m.slice_bytes;
      double want = (p - 1 + k - 1) * (m.alpha + (double)n / k * m.beta);
      cost_model_t cm = {m.alpha, m.beta, m.gamma, (double)m.slice_bytes};
      for (int root : {0, p / 2, p - 1}) {
        double got = Time(m, WEFT_COLL_BROADCAST, WEFT_ALGO_RING, p, n / 4, root);
        EXPECT_SAME_TIME(got, want) << "p=" << p << " k=" << k << " root=" << root;
      }
      m.headers = 1;
      double got = Time(m, WEFT_COLL_BROADCAST, WEFT_ALGO_RING, p, n / 4);
      EXPECT_SAME_TIME(got, want + m.alpha + kHdr * m.beta) << "p=" << p << " k=" << k;
      EXPECT_SAME_TIME(got, chain_broadcast_cost(&cm, p, (double)n)) << "p=" << p << " k=" << k;
    }
  }
}

// Ring barrier: the call description then p-1 one-byte tokens, one after another.
TEST(ExactTest, RingBarrier) {
  for (int p = 2; p <= 16; p++) {
    sim_model_t m = Model();
    double got = Time(m, WEFT_COLL_BARRIER, WEFT_ALGO_RING, p, 0);
    EXPECT_SAME_TIME(got, p * m.alpha + (kHdr + p - 1) * m.beta) << "p=" << p;
    cost_model_t cm = {m.alpha, m.beta, m.gamma, (double)m.slice_bytes};
    EXPECT_SAME_TIME(got, ring_barrier_cost(&cm, p, 0)) << "p=" << p;
  }
}

// The trees' single-slice latencies: tree_broadcast.c's 2 depth - [p even] messages down and
// tree_reduce.c's closed form for the messages up (a root's one incoming port takes its
// children's slices one after the other), from every root, well past the grid's 16 ranks.
TEST(ExactTest, TreeLatencyInMessages) {
  sim_model_t m = Model();
  m.beta = m.inter_beta = m.gamma = 0;
  cost_model_t cm = {m.alpha, m.beta, m.gamma, (double)m.slice_bytes};
  for (int p = 2; p <= 70; p++) {
    for (int root : {0, p / 3, p - 1}) {
      EXPECT_SAME_TIME(Time(m, WEFT_COLL_BROADCAST, WEFT_ALGO_TREE, p, 256, root),
                       tree_broadcast_cost(&cm, p, 1024))
          << "p=" << p << " root=" << root;
      EXPECT_SAME_TIME(Time(m, WEFT_COLL_REDUCE, WEFT_ALGO_TREE, p, 256, root),
                       tree_reduce_cost(&cm, p, 1024))
          << "p=" << p << " root=" << root;
    }
  }
}

// Send/recv: the token with tag and count (no call description: headers change nothing), then
// alpha + n beta in one slice; k slices cost k alphas.
TEST(ExactTest, PointToPoint) {
  const double tok = SIM_AGREE_BYTES;
  for (size_t n : {4, 4096, 1 << 20}) {
    for (weft_coll_t coll : {WEFT_COLL_SEND, WEFT_COLL_RECV, WEFT_COLL_P2P_GROUP}) {
      for (int headers : {0, 1}) {
        sim_model_t m = Model(/*slice_bytes=*/1 << 30, headers);
        EXPECT_SAME_TIME(Time(m, coll, WEFT_ALGO_RING, 4, n / 4, 3),
                         2 * m.alpha + (tok + n) * m.beta);
      }
      sim_model_t m = Model(/*slice_bytes=*/4096, /*headers=*/0);
      double k = std::ceil(n / 4096.0);
      EXPECT_SAME_TIME(Time(m, coll, WEFT_ALGO_RING, 2, n / 4, 1),
                       (k + 1) * m.alpha + (tok + n) * m.beta);
    }
  }
}

// One rank: nothing to send, nothing to wait for.
TEST(ExactTest, OneRankTakesNoTime) {
  sim_model_t m = Model();
  EXPECT_EQ(Time(m, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, 1, 1000), 0.0);
  EXPECT_EQ(Time(m, WEFT_COLL_BROADCAST, WEFT_ALGO_RING, 1, 1000), 0.0);
  EXPECT_EQ(Time(m, WEFT_COLL_BARRIER, WEFT_ALGO_RING, 1, 0), 0.0);
}

}  // namespace
