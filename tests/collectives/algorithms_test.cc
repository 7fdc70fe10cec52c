// algorithms_test.cc -- every (collective, algorithm) row of the table, simulated for world sizes
// 1..9, 13, 16, counts around every edge, every kind of root, in place and out, under several
// slice sizes, windows, link behaviours and event orders.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/collectives/sim_harness.h"

namespace {

const char* AlgoName(weft_algo_t a) {
  static const char* names[] = {
      "auto",         "ring",          "tree",        "double_tree", "recursive_doubling",
      "rabenseifner", "dissemination", "hierarchical", "linear",       "pairwise",
      "bruck"};
  return (unsigned)a < sizeof names / sizeof names[0] ? names[a] : "unknown";
}

// The rows the collective tests cover: send and recv pair two ranks and have their own test.
std::vector<int> CollectiveRows() {
  std::vector<int> rows;
  for (int i = 0; i < algo_count(); i++) {
    weft_coll_t c = algo_at(i)->coll;
    if (c != WEFT_COLL_SEND && c != WEFT_COLL_RECV && c != WEFT_COLL_P2P_GROUP) rows.push_back(i);
  }
  return rows;
}

// Pipelined (small slices, deep and shallow windows), whole ops as one slice, and links that
// buffer nothing, each with its own event order. Large counts get proportionally larger slices:
// a handful of slices per op exercises the pipeline as well as a hundred do.
const sim::Options kOptions[] = {
    {4, 4, false, 1},
    {3, 1, true, 2},
    {1000, 2, false, 3},
    {1, 8, true, 4},
};

sim::Options Scaled(sim::Options o, size_t count) {
  if (count > 16) o.slice_elems *= 8;
  return o;
}

// The builders that cut their buffer into rounds of sched_args_t.round_count.
bool UsesRounds(const algo_entry_t* e) {
  return e->algo == WEFT_ALGO_HIERARCHICAL ||
         (e->algo == WEFT_ALGO_RING &&
          (e->coll == WEFT_COLL_ALL_REDUCE || e->coll == WEFT_COLL_REDUCE_SCATTER ||
           e->coll == WEFT_COLL_ALL_GATHER));
}

bool Rooted(weft_coll_t c) {
  return c == WEFT_COLL_BROADCAST || c == WEFT_COLL_REDUCE || c == WEFT_COLL_GATHER ||
         c == WEFT_COLL_SCATTER;
}

class Algorithms : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(Algorithms, EveryRankGetsTheCollectivesResult) {
  auto [row, p] = GetParam();
  const algo_entry_t* e = algo_at(row);
  bool rooted = Rooted(e->coll);
  std::set<int> roots = {0};
  if (rooted) roots = {0, 1 % p, p / 2, p - 1};
  std::vector<size_t> counts = {0, 1, 3, 7, 100};
  if (e->coll == WEFT_COLL_BARRIER) counts = {0};
  for (size_t count : counts)
    for (int root : roots)
      for (bool in_place : {false, true})
        for (const sim::Options& o : kOptions)
          // One round; the rings also in rounds of 2 and 5 elements per chunk (only their
          // builders read round_count, and only counts above it make more than one round).
          for (size_t round_count : {0, 2, 5}) {
            if (round_count > 0 && (!UsesRounds(e) || count <= round_count)) continue;
            sim::Call c = {e->coll, p, count, rooted ? root : -1, in_place};
            c.round_count = round_count;
            ASSERT_TRUE(sim::RunCall(e->build, c, Scaled(o, count)))
                << AlgoName(e->algo) << " round_count " << round_count;
          }
}

INSTANTIATE_TEST_SUITE_P(Table, Algorithms,
                         ::testing::Combine(::testing::ValuesIn(CollectiveRows()),
                                            ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
                           const algo_entry_t* e = algo_at(std::get<0>(info.param));
                           return sim::CollName(e->coll) + "_" + AlgoName(e->algo) + "_p" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(Algorithms, EveryCollectiveHasARing) {
  // The ring (chain for broadcast and reduce) is the fallback every collective can use; gather
  // and scatter have the root talk to each rank directly instead (a chain would forward every
  // block through up to p-2 ranks).
  // All-to-all's direct form is the pairwise exchange.
  for (int c = 0; c < WEFT_NUM_COLLS; c++) {
    bool linear = c == WEFT_COLL_GATHER || c == WEFT_COLL_SCATTER;
    weft_algo_t a = linear                                                    ? WEFT_ALGO_LINEAR
                    : c == WEFT_COLL_ALL_TO_ALL || c == WEFT_COLL_ALL_TO_ALLV ? WEFT_ALGO_PAIRWISE
                                                                              : WEFT_ALGO_RING;
    EXPECT_NE(algo_lookup((weft_coll_t)c, a), nullptr) << sim::CollName((weft_coll_t)c);
  }
}

TEST(Algorithms, AllToAllHasPairwiseAndBruck) {
  EXPECT_NE(algo_lookup(WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_PAIRWISE), nullptr);
  EXPECT_NE(algo_lookup(WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_BRUCK), nullptr);
  EXPECT_EQ(algo_lookup(WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_RING), nullptr);
  EXPECT_STREQ(weft_algo_name(WEFT_ALGO_PAIRWISE), "pairwise");
  EXPECT_STREQ(weft_algo_name(WEFT_ALGO_BRUCK), "bruck");
  EXPECT_EQ(weft_algo_from_name("bruck"), WEFT_ALGO_BRUCK);
  EXPECT_STREQ(weft_coll_name(WEFT_COLL_ALL_TO_ALL), "all_to_all");
  // Appended: the values callers compiled against stay.
  EXPECT_EQ((int)WEFT_COLL_ALL_TO_ALL, 10);
  EXPECT_EQ((int)WEFT_ALGO_PAIRWISE, 9);
  EXPECT_EQ((int)WEFT_ALGO_BRUCK, 10);
  EXPECT_EQ((int)WEFT_COLL_ALL_TO_ALLV, 11);
  EXPECT_STREQ(weft_coll_name(WEFT_COLL_ALL_TO_ALLV), "all_to_allv");
  EXPECT_EQ(algo_lookup(WEFT_COLL_ALL_TO_ALLV, WEFT_ALGO_BRUCK), nullptr);
}

TEST(Algorithms, GatherAndScatterHaveLinearAndBinomialTree) {
  for (weft_coll_t c : {WEFT_COLL_GATHER, WEFT_COLL_SCATTER}) {
    EXPECT_NE(algo_lookup(c, WEFT_ALGO_LINEAR), nullptr) << sim::CollName(c);
    EXPECT_NE(algo_lookup(c, WEFT_ALGO_TREE), nullptr) << sim::CollName(c);
    EXPECT_EQ(algo_lookup(c, WEFT_ALGO_RING), nullptr) << sim::CollName(c);
  }
  EXPECT_NE(algo_lookup(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_LINEAR), nullptr);
  EXPECT_EQ(algo_lookup(WEFT_COLL_BROADCAST, WEFT_ALGO_LINEAR), nullptr);
  EXPECT_STREQ(weft_algo_name(WEFT_ALGO_LINEAR), "linear");
  EXPECT_EQ(weft_algo_from_name("linear"), WEFT_ALGO_LINEAR);
  EXPECT_STREQ(weft_coll_name(WEFT_COLL_GATHER), "gather");
  EXPECT_STREQ(weft_coll_name(WEFT_COLL_SCATTER), "scatter");
}

TEST(Algorithms, RowsAreUniqueAndComplete) {
  std::set<std::pair<int, int>> seen;
  for (int i = 0; i < algo_count(); i++) {
    const algo_entry_t* e = algo_at(i);
    EXPECT_TRUE(seen.insert({e->coll, e->algo}).second) << "row " << i << " repeats";
    EXPECT_NE(e->build, nullptr);
    bool p2p =
        e->coll == WEFT_COLL_SEND || e->coll == WEFT_COLL_RECV || e->coll == WEFT_COLL_P2P_GROUP;
    EXPECT_EQ(e->cost == nullptr, p2p) << "row " << i;
    EXPECT_EQ(algo_lookup(e->coll, e->algo), e);
  }
  EXPECT_EQ(algo_at(algo_count()), nullptr);
  EXPECT_EQ(algo_lookup(WEFT_COLL_BARRIER, WEFT_ALGO_TREE), nullptr);
}

// Schedules that would hang or race must not depend on a lucky order: many seeds on a few shapes
// where pipelining and folding interact most.
TEST(Algorithms, ManyEventOrders) {
  for (int i = 0; i < algo_count(); i++) {
    const algo_entry_t* e = algo_at(i);
    if (e->coll == WEFT_COLL_SEND || e->coll == WEFT_COLL_RECV || e->coll == WEFT_COLL_P2P_GROUP)
      continue;
    for (int p : {3, 6, 7})
      for (uint64_t seed = 10; seed < 40; seed++) {
        sim::Options o = {2, (int)(seed % 3) + 1, seed % 2 == 0, seed};
        sim::Call c = {e->coll, p, e->coll == WEFT_COLL_BARRIER ? 0u : 11u, (int)(seed % p),
                       seed % 4 == 0};
        if (!Rooted(e->coll)) c.root = -1;
        ASSERT_TRUE(sim::RunCall(e->build, c, o)) << AlgoName(e->algo);
      }
  }
}

}  // namespace
