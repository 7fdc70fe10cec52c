// cost_test.cc -- the cost functions: sane everywhere; their beta terms are the bytes the schedules
// send and their alpha terms the messages (weft-sim's tests, tests/sim/, check the whole of them
// against the simulated schedules).
#include <gtest/gtest.h>

#include <cmath>

#include "tests/collectives/sim_harness.h"

namespace {

TEST(Cost, FiniteNonNegativeAndGrowingWithSize) {
  cost_model_t m = {5e-6, 1e-9, 2e-10, 65536};
  for (int i = 0; i < algo_count(); i++) {
    const algo_entry_t* e = algo_at(i);
    if (!e->cost) continue;
    for (int p = 1; p <= 64; p++) {
      double prev = 0;
      for (double n : {0.0, 1.0, 100.0, 65536.0, 1e6, 1e9}) {
        double t = e->cost(&m, p, n);
        EXPECT_TRUE(std::isfinite(t) && t >= 0) << "row " << i << " p " << p << " n " << n;
        EXPECT_GE(t, prev * (1 - 1e-12)) << "row " << i << " p " << p << " n " << n;
        prev = t;
      }
    }
  }
}

// With alpha = gamma = 0, beta = 1 and no slicing, the cost is the 40 bytes of the call
// description plus the bytes the busiest rank sends; for powers of two the formulas are exact.
TEST(Cost, BetaTermIsWhatTheBusiestRankSends) {
  cost_model_t m = {0, 1, 0, 1e18};
  const std::pair<weft_coll_t, weft_algo_t> rows[] = {
      {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING},
      {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING},
      {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RABENSEIFNER},
      {WEFT_COLL_ALL_GATHER, WEFT_ALGO_RING},
      {WEFT_COLL_ALL_GATHER, WEFT_ALGO_RECURSIVE_DOUBLING},
      {WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RING},
      {WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RABENSEIFNER},
  };
  for (auto [coll, algo] : rows) {
    const algo_entry_t* e = algo_lookup(coll, algo);
    ASSERT_NE(e, nullptr);
    for (int p : {2, 4, 8, 16}) {
      size_t count = 64 * (size_t)p;
      size_t most = 0;
      for (int r = 0; r < p; r++) {
        schedule_t s;
        sched_args_t a = {coll, r, p, count, 0, 0, nullptr, 0, 0};
        ASSERT_EQ(e->build(&s, &a), WEFT_SUCCESS);
        size_t sent = 0;
        for (int i = 0; i < s.nops; i++)
          if (s.ops[i].kind == SCHED_SEND) sent += s.ops[i].count;
        most = sent > most ? sent : most;
        sched_free(&s);
      }
      bool all_reduce = coll == WEFT_COLL_ALL_REDUCE;
      double bytes = (double)count * (all_reduce ? 1 : p);
      EXPECT_DOUBLE_EQ(e->cost(&m, p, bytes), 40 + most)
          << sim::CollName(coll) << " algo " << algo << " p " << p;
    }
  }
}

// With alpha = 1 and beta = gamma = 0 the cost counts messages: one per slice, not one per step,
// and the call description's.
TEST(Cost, AlphaTermCountsMessages) {
  cost_model_t m = {1, 0, 0, 1000};
  auto cost = [&](weft_coll_t c, weft_algo_t a, int p, double n) {
    return algo_lookup(c, a)->cost(&m, p, n);
  };
  for (int p : {2, 3, 8, 13}) {
    for (double k : {1, 2, 7}) {  // slices per chunk, block or buffer
      double chunk = 1000 * k * p;
      EXPECT_EQ(cost(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, p, chunk), 1 + 2 * (p - 1) * k);
      EXPECT_EQ(cost(WEFT_COLL_ALL_GATHER, WEFT_ALGO_RING, p, chunk), 1 + (p - 1) * k);
      EXPECT_EQ(cost(WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RING, p, chunk), 1 + (p - 1) * k);
      EXPECT_EQ(cost(WEFT_COLL_BROADCAST, WEFT_ALGO_RING, p, 1000 * k), 1 + (p - 1) + (k - 1));
      EXPECT_EQ(cost(WEFT_COLL_ALL_GATHER, WEFT_ALGO_RECURSIVE_DOUBLING, 8, 8000 * k), 1 + 7 * k);
    }
    EXPECT_EQ(cost(WEFT_COLL_BARRIER, WEFT_ALGO_RING, p, 0), p);
  }
}

// Gather and scatter, one slice per block: the linear root takes p-1 messages, the binomial
// tree ceil(log2 p) one after another (its largest subtree's chain); both move (p-1)/p of the
// buffer through the root's port, the tree in stages (each rank waits for its whole subtree).
TEST(Cost, GatherAndScatterMessagesAndBytes) {
  cost_model_t alpha = {1, 0, 0, 1e18}, beta = {0, 1, 0, 1e18};
  for (weft_coll_t c : {WEFT_COLL_GATHER, WEFT_COLL_SCATTER}) {
    const algo_entry_t* lin = algo_lookup(c, WEFT_ALGO_LINEAR);
    const algo_entry_t* tree = algo_lookup(c, WEFT_ALGO_TREE);
    ASSERT_NE(lin, nullptr);
    ASSERT_NE(tree, nullptr);
    for (int p = 2; p <= 33; p++) {
      int logp = 0;
      while ((1 << logp) < p) logp++;
      double n = 1000.0 * p;
      EXPECT_EQ(lin->cost(&alpha, p, n), 1 + (p - 1)) << sim::CollName(c) << " p " << p;
      EXPECT_EQ(tree->cost(&alpha, p, n), 1 + logp) << sim::CollName(c) << " p " << p;
      EXPECT_DOUBLE_EQ(lin->cost(&beta, p, n), 40 + 1000.0 * (p - 1)) << sim::CollName(c);
      // Powers of two: every block after the root's own crosses the critical path once.
      if ((p & (p - 1)) == 0)
        EXPECT_DOUBLE_EQ(tree->cost(&beta, p, n), 40 + 1000.0 * (p - 1)) << sim::CollName(c);
      EXPECT_GE(tree->cost(&beta, p, n), lin->cost(&beta, p, n) - 1e-9) << sim::CollName(c);
    }
    // Small blocks: the tree's log2(p) messages win. Large ones: both are bound by the root's
    // port, (p-1)/p n b, and cost the same within the slices' rounding.
    cost_model_t m = {20e-6, 1e-10, 1e-11, 65536};
    EXPECT_LT(tree->cost(&m, 16, 64), lin->cost(&m, 16, 64) / 3) << sim::CollName(c);
    EXPECT_NEAR(tree->cost(&m, 13, 1e9) / lin->cost(&m, 13, 1e9), 1, 1e-3) << sim::CollName(c);
  }
}

// All-to-all, one slice per message: the pairwise exchange sends p-1 messages of one block,
// Bruck ceil(log2 p) of about half the blocks, so Bruck wins small and loses large.
TEST(Cost, AllToAllPairwiseAgainstBruck) {
  const algo_entry_t* pw = algo_lookup(WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_PAIRWISE);
  const algo_entry_t* br = algo_lookup(WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_BRUCK);
  ASSERT_NE(pw, nullptr);
  ASSERT_NE(br, nullptr);
  cost_model_t alpha = {1, 0, 0, 1e18}, beta = {0, 1, 0, 1e18};
  for (int p = 2; p <= 33; p++) {
    int logp = 0;
    while ((1 << logp) < p) logp++;
    double n = 1000.0 * p;
    EXPECT_EQ(pw->cost(&alpha, p, n), 1 + (p - 1)) << "p " << p;
    EXPECT_EQ(br->cost(&alpha, p, n), 1 + logp) << "p " << p;
    EXPECT_DOUBLE_EQ(pw->cost(&beta, p, n), 40 + 1000.0 * (p - 1)) << "p " << p;
    EXPECT_GE(br->cost(&beta, p, n), pw->cost(&beta, p, n) - 1e-9) << "p " << p;
  }
  cost_model_t m = {20e-6, 1e-10, 1e-11, 65536};
  EXPECT_LT(br->cost(&m, 16, 16 * 64), pw->cost(&m, 16, 16 * 64) / 2);
  EXPECT_GT(br->cost(&m, 16, 16 * 4e6), pw->cost(&m, 16, 16 * 4e6));
  EXPECT_EQ(pw->cost(&m, 1, 100), 0);
  EXPECT_EQ(br->cost(&m, 1, 100), 0);
}

TEST(Cost, LogarithmicAlgorithmsWinForSmallMessagesAndBandwidthOnesForLarge) {
  cost_model_t m = {20e-6, 1e-10, 1e-11, 65536};
  auto cost = [&](weft_coll_t c, weft_algo_t a, int p, double n) {
    return algo_lookup(c, a)->cost(&m, p, n);
  };
  EXPECT_LT(cost(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING, 16, 64),
            cost(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, 16, 64));
  EXPECT_LT(cost(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, 16, 1e9),
            cost(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING, 16, 1e9));
  EXPECT_LT(cost(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_DOUBLE_TREE, 16, 1e9),
            cost(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_TREE, 16, 1e9));
  EXPECT_LT(cost(WEFT_COLL_BARRIER, WEFT_ALGO_DISSEMINATION, 16, 0),
            cost(WEFT_COLL_BARRIER, WEFT_ALGO_RING, 16, 0));
  EXPECT_LT(cost(WEFT_COLL_BROADCAST, WEFT_ALGO_TREE, 16, 64),
            cost(WEFT_COLL_BROADCAST, WEFT_ALGO_RING, 16, 64));
}

}  // namespace
