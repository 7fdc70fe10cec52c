// hierarchical_test.cc -- the hierarchical all-reduce simulated over host layouts (even, uneven,
// interleaved, one host, one rank per host), and the rule that picks it automatically.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/collectives/sim_harness.h"

extern "C" {
#include "collectives/algo_select.h"
}

namespace {

struct Layout {
  const char* name;
  std::vector<int> node_of;  // numbered by first appearance, as the communicator does
};

// Host sizes in rank order ("3+1+2": ranks 0-2 on host 0, 3 on host 1, 4-5 on host 2).
std::vector<int> Blocks(std::vector<int> sizes) {
  std::vector<int> v;
  for (int h = 0; h < (int)sizes.size(); h++) v.insert(v.end(), sizes[h], h);
  return v;
}

// Round robin over `hosts`: rank r on host r % hosts.
std::vector<int> Interleaved(int p, int hosts) {
  std::vector<int> v;
  for (int r = 0; r < p; r++) v.push_back(r % hosts);
  return v;
}

std::vector<Layout> Layouts() {
  return {
      {"2x2", Blocks({2, 2})},
      {"3x2", Blocks({2, 2, 2})},
      {"2x3", Blocks({3, 3})},
      {"3+1+2", Blocks({3, 1, 2})},
      {"1+3", Blocks({1, 3})},
      {"interleaved 2x2", Interleaved(4, 2)},
      {"interleaved 3x3", Interleaved(9, 3)},
      {"interleaved 2x8", Interleaved(16, 2)},
      {"scattered 5+2+1", {0, 1, 0, 0, 2, 1, 0, 0}},
      {"4x4", Blocks({4, 4, 4, 4})},
      {"8x2", Blocks({2, 2, 2, 2, 2, 2, 2, 2})},
      {"uneven 7+4+5", Blocks({7, 4, 5})},
      {"uneven 1+15", Blocks({1, 15})},
      {"one per host", Blocks({1, 1, 1, 1, 1})},
      {"one host of 6", Blocks({6})},
      {"one host of 1", Blocks({1})},
      {"3+2+1 scattered", {0, 1, 2, 0, 1, 0}},
  };
}

int Nodes(const std::vector<int>& node_of) {
  int n = 0;
  for (int x : node_of) n = x + 1 > n ? x + 1 : n;
  return n;
}

const sim::Options kOptions[] = {
    {4, 4, false, 1},
    {3, 1, true, 2},
    {1000, 2, false, 3},
    {1, 8, true, 4},
};

const algo_entry_t* Row() { return algo_lookup(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_HIERARCHICAL); }

TEST(Hierarchical, IsARowWithACost) {
  ASSERT_NE(Row(), nullptr);
  EXPECT_NE(Row()->cost, nullptr);
  EXPECT_STREQ(weft_algo_name(WEFT_ALGO_HIERARCHICAL), "hierarchical");
  EXPECT_EQ(weft_algo_from_name("hierarchical"), WEFT_ALGO_HIERARCHICAL);
  // Values are part of the ABI: later algorithms are appended after it.
  EXPECT_EQ(WEFT_ALGO_HIERARCHICAL, 7);
}

TEST(Hierarchical, EveryLayoutGetsTheSum) {
  for (const Layout& l : Layouts()) {
    int p = (int)l.node_of.size();
    for (size_t count : {0, 1, 2, 3, 5, 7, 13, 100})
      for (bool in_place : {false, true})
        for (sim::Options o : kOptions)
          for (size_t round_count : {0, 3}) {  // one round; rounds of a few elements
            if (round_count > 0 && count <= round_count * 2) continue;  // one round anyway
            if (count > 16 && round_count == 0) o.slice_elems *= 8;
            sim::Call c = {WEFT_COLL_ALL_REDUCE, p, count, -1, in_place, l.node_of.data(),
                           Nodes(l.node_of)};
            c.round_count = round_count;
            ASSERT_TRUE(sim::RunCall(Row()->build, c, o)) << l.name << " rounds " << round_count;
          }
  }
}

TEST(Hierarchical, ManyEventOrders) {
  for (const Layout& l : Layouts())
    for (uint64_t seed = 10; seed < 30; seed++) {
      sim::Options o = {2, (int)(seed % 3) + 1, seed % 2 == 0, seed};
      sim::Call c = {WEFT_COLL_ALL_REDUCE, (int)l.node_of.size(), 23, -1, seed % 4 == 0,
                     l.node_of.data(),     Nodes(l.node_of)};
      ASSERT_TRUE(sim::RunCall(Row()->build, c, o)) << l.name;
    }
}

// Without a topology, or on one host, it is a ring in rank order: the same traffic as the ring
// row, op for op (the ring shifts which chunk each rank finishes; sizes and peers agree).
TEST(Hierarchical, OneHostIsARing) {
  std::vector<int> one(6, 0);
  for (const int* node_of : {(const int*)nullptr, (const int*)one.data()}) {
    for (int r = 0; r < 12; r++) {  // ranks 6..11: the same in rounds of 40 elements per chunk
      sched_args_t a = {WEFT_COLL_ALL_REDUCE, r % 6, 6, 600, -1, 0, node_of, node_of ? 1 : 0,
                        r < 6 ? 0u : 40u};
      schedule_t h, g;
      ASSERT_EQ(Row()->build(&h, &a), WEFT_SUCCESS);
      ASSERT_EQ(ring_allreduce_build(&g, &a), WEFT_SUCCESS);
      ASSERT_EQ(h.nops, g.nops);
      for (int i = 0; i < h.nops; i++) {
        EXPECT_EQ(h.ops[i].kind, g.ops[i].kind);
        EXPECT_EQ(sched_is_fused(h.ops[i].kind) ? h.ops[i].fwd : -1,
                  sched_is_fused(g.ops[i].kind) ? g.ops[i].fwd : -1);
        EXPECT_EQ(h.ops[i].peer, g.ops[i].peer);
        EXPECT_EQ(h.ops[i].count, g.ops[i].count);
      }
      EXPECT_EQ(h.hdr_to, g.hdr_to);
      EXPECT_EQ(h.hdr_from, g.hdr_from);
      sched_free(&h);
      sched_free(&g);
    }
  }
}

// Inter-host traffic: on 2 hosts x 4 ranks each rank sends 2(H-1)/H of its 1/4 across hosts,
// interleaved or not; every inter-host message goes between ranks of the same local index.
TEST(Hierarchical, CrossesHostsOnlyBetweenPeersOfOneLocalIndex) {
  for (const std::vector<int>& node_of : {Blocks({4, 4}), Interleaved(8, 2)}) {
    size_t count = 800, cross = 0;
    for (int r = 0; r < 8; r++) {
      sched_args_t a = {WEFT_COLL_ALL_REDUCE, r, 8, count, -1, 0, node_of.data(), 2, 0};
      schedule_t s;
      ASSERT_EQ(Row()->build(&s, &a), WEFT_SUCCESS);
      int local = 0;
      for (int q = 0; q < r; q++) local += node_of[q] == node_of[r];
      for (int i = 0; i < s.nops; i++) {
        const sched_op_t& op = s.ops[i];
        if (op.kind != SCHED_SEND || node_of[op.peer] == node_of[r]) continue;
        int peer_local = 0;
        for (int q = 0; q < op.peer; q++) peer_local += node_of[q] == node_of[op.peer];
        EXPECT_EQ(peer_local, local);
        cross += op.count;
      }
      sched_free(&s);
    }
    EXPECT_EQ(cross, 8 * (count / 4) * 2 * 1 / 2);  // per rank: 2 (H-1)/H of n/L
  }
}

TEST(Hierarchical, BadTopologyIsAnError) {
  int node_of[] = {0, 5};
  sched_args_t a = {WEFT_COLL_ALL_REDUCE, 0, 2, 10, -1, 0, node_of, 2, 0};
  schedule_t s;
  EXPECT_EQ(Row()->build(&s, &a), WEFT_ERR_INTERNAL);
  sched_free(&s);
}

TEST(Hierarchical, CostWithoutTopologyIsTheRings) {
  cost_model_t m = {5e-6, 1e-9, 2e-10, 65536};
  for (int p : {2, 3, 8, 16})
    for (double n : {0.0, 1e3, 1e6, 1e8}) {
      EXPECT_DOUBLE_EQ(Row()->cost(&m, p, n), ring_allreduce_cost(&m, p, n));
      EXPECT_DOUBLE_EQ(hierarchical_allreduce_cost_topo(&m, 1, p, n),
                       ring_allreduce_cost(&m, p, n));
    }
  // Fewer steps than a flat ring across 4 hosts of 4: the alpha term shrinks, the bytes stay.
  cost_model_t lat = {1, 0, 0, 1e18};
  EXPECT_LT(hierarchical_allreduce_cost_topo(&lat, 4, 4, 1e6), ring_allreduce_cost(&lat, 16, 1e6));
  cost_model_t bw = {0, 1, 0, 1e18};
  EXPECT_NEAR(hierarchical_allreduce_cost_topo(&bw, 4, 4, 1e6), ring_allreduce_cost(&bw, 16, 1e6),
              1e-6 * 1e6);
}

// The choice rule.
TEST(HierarchicalChoice, TopologyRule) {
  std::vector<int> two_by_two = Blocks({2, 2}), one_host = Blocks({4}), singles = Blocks({1, 1, 1});
  std::vector<int> uneven = Blocks({3, 1, 2});
  algo_topo_t t = {two_by_two.data(), 2, -1};
  EXPECT_TRUE(algo_topo_prefers_hierarchy(&t, 4));
  t = {uneven.data(), 3, -1};
  EXPECT_TRUE(algo_topo_prefers_hierarchy(&t, 6));
  t = {one_host.data(), 1, -1};  // one host: nothing to gain
  EXPECT_FALSE(algo_topo_prefers_hierarchy(&t, 4));
  t = {singles.data(), 3, -1};  // one rank per host: it would be the ring
  EXPECT_FALSE(algo_topo_prefers_hierarchy(&t, 3));
  t = {nullptr, 0, -1};  // unknown
  EXPECT_FALSE(algo_topo_prefers_hierarchy(&t, 4));
  EXPECT_FALSE(algo_topo_prefers_hierarchy(nullptr, 4));
  t = {two_by_two.data(), 2, 0};  // WEFT_HIERARCHY=0
  EXPECT_FALSE(algo_topo_prefers_hierarchy(&t, 4));
  t = {one_host.data(), 1, 1};  // WEFT_HIERARCHY=1
  EXPECT_TRUE(algo_topo_prefers_hierarchy(&t, 4));
}

TEST(HierarchicalChoice, AlgoChoose) {
  cost_model_t m = {30e-6, 1.0 / 1.5e9, 1.0 / 4e9, 65536};
  algo_policy_t autos;
  ASSERT_EQ(algo_policy_parse("", &autos), WEFT_SUCCESS);
  std::vector<int> hosts = Blocks({4, 4}), one = Blocks({8});
  const algo_entry_t* e = nullptr;
  for (double bytes : {4.0, 1e3, 1e6, 1e9}) {
    // Several hosts with several ranks: a bandwidth-bound all_reduce goes hierarchical, a
    // latency-bound one keeps the model's few-step pick (unless WEFT_HIERARCHY=1), and other
    // collectives never do.
    algo_topo_t t = {hosts.data(), 2, -1};
    ASSERT_EQ(algo_choose(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, &autos, &m, 8, bytes, &t, &e),
              WEFT_SUCCESS);
    if (bytes >= 1e6)
      EXPECT_EQ(e->algo, WEFT_ALGO_HIERARCHICAL) << bytes;
    else
      EXPECT_EQ(e->algo, WEFT_ALGO_RECURSIVE_DOUBLING) << bytes;
    algo_topo_t forced = {hosts.data(), 2, 1};
    ASSERT_EQ(algo_choose(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, &autos, &m, 8, bytes, &forced, &e),
              WEFT_SUCCESS);
    EXPECT_EQ(e->algo, WEFT_ALGO_HIERARCHICAL) << bytes;
    ASSERT_EQ(algo_choose(WEFT_COLL_ALL_GATHER, WEFT_ALGO_AUTO, &autos, &m, 8, bytes, &t, &e),
              WEFT_SUCCESS);
    EXPECT_NE(e->algo, WEFT_ALGO_HIERARCHICAL);
    // WEFT_HIERARCHY=0, one host, or no topology: the cost model, never the hierarchical row.
    for (algo_topo_t u : {algo_topo_t{hosts.data(), 2, 0}, algo_topo_t{one.data(), 1, -1}}) {
      ASSERT_EQ(algo_choose(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, &autos, &m, 8, bytes, &u, &e),
                WEFT_SUCCESS);
      EXPECT_NE(e->algo, WEFT_ALGO_HIERARCHICAL);
    }
    ASSERT_EQ(algo_choose(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, &autos, &m, 8, bytes, nullptr, &e),
              WEFT_SUCCESS);
    EXPECT_NE(e->algo, WEFT_ALGO_HIERARCHICAL);
    // WEFT_ALGO and a call's own choice win over the topology either way.
    algo_policy_t ring;
    ASSERT_EQ(algo_policy_parse("all_reduce=ring", &ring), WEFT_SUCCESS);
    ASSERT_EQ(algo_choose(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, &ring, &m, 8, bytes, &t, &e),
              WEFT_SUCCESS);
    EXPECT_EQ(e->algo, WEFT_ALGO_RING);
    algo_policy_t hier;
    ASSERT_EQ(algo_policy_parse("all_reduce=hierarchical", &hier), WEFT_SUCCESS);
    algo_topo_t off = {hosts.data(), 2, 0};
    ASSERT_EQ(algo_choose(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, &hier, &m, 8, bytes, &off, &e),
              WEFT_SUCCESS);
    EXPECT_EQ(e->algo, WEFT_ALGO_HIERARCHICAL);
    ASSERT_EQ(algo_choose(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_TREE, &hier, &m, 8, bytes, &t, &e),
              WEFT_SUCCESS);
    EXPECT_EQ(e->algo, WEFT_ALGO_TREE);
  }
  // A bare "hierarchical" applies to all_reduce only; other collectives lack it.
  algo_policy_t bare;
  ASSERT_EQ(algo_policy_parse("hierarchical", &bare), WEFT_SUCCESS);
  EXPECT_EQ(bare.forced[WEFT_COLL_ALL_REDUCE], WEFT_ALGO_HIERARCHICAL);
  EXPECT_EQ(bare.forced[WEFT_COLL_BROADCAST], WEFT_ALGO_AUTO);
  EXPECT_NE(algo_policy_parse("broadcast=hierarchical", &bare), WEFT_SUCCESS);
}

}  // namespace
