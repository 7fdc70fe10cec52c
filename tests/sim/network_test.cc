// network_test.cc -- the network mode's pieces alone: max-min fair rates on hand-made links,
// finish times that move when rates change, the topology file's errors, and routes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "common/error.h"
#include "tools/sim/network.h"
#include "tools/sim/sim.h"
#include "tools/sim/topology.h"
}

namespace {

struct Net {
  net_t* n = net_create();
  ~Net() { net_free(n); }
  int Link(double bw) { return net_add_link(n, bw); }
  int Start(double now, std::vector<int> links, double bytes = 1e9) {
    int f = net_flow_start(n, now, links.data(), (int)links.size(), bytes);
    EXPECT_GE(f, 0);
    return f;
  }
  double Rate(int f) { return net_flow_rate(n, f); }
  std::vector<int> Changed() {
    const int* v;
    int k = net_changed(n, &v);
    std::vector<int> out(v, v + k);
    std::sort(out.begin(), out.end());
    return out;
  }
};

// Links A (1 B/s) and B (2 B/s); f0 on A, f1 on A and B, f2 on B. A is the bottleneck: f0 and
// f1 get 1/2 each; f2 gets what B has left, 2 - 1/2.
TEST(MaxMinTest, ThreeFlowsOnTwoLinks) {
  Net n;
  int a = n.Link(1), b = n.Link(2);
  int f0 = n.Start(0, {a}), f1 = n.Start(0, {a, b}), f2 = n.Start(0, {b});
  EXPECT_DOUBLE_EQ(n.Rate(f0), 0.5);
  EXPECT_DOUBLE_EQ(n.Rate(f1), 0.5);
  EXPECT_DOUBLE_EQ(n.Rate(f2), 1.5);
  // f0 leaves: f1 and f2 now split B evenly (A alone would give f1 all of 1).
  ASSERT_TRUE(net_flow_end(n.n, 0, f0));
  EXPECT_DOUBLE_EQ(n.Rate(f1), 1.0);
  EXPECT_DOUBLE_EQ(n.Rate(f2), 1.0);
}

// k flows on one link get bw / k each; a flow on a link nobody shares keeps all of it.
TEST(MaxMinTest, EqualSharesAndDisjointLinks) {
  for (int k = 1; k <= 5; k++) {
    Net n;
    int l = n.Link(10), other = n.Link(3);
    std::vector<int> f;
    for (int i = 0; i < k; i++) f.push_back(n.Start(0, {l}));
    int g = n.Start(0, {other});
    for (int x : f) EXPECT_DOUBLE_EQ(n.Rate(x), 10.0 / k);
    EXPECT_DOUBLE_EQ(n.Rate(g), 3.0);
  }
}

// Only the component of the starting flow is recomputed: a flow on a disjoint link is neither
// visited nor told its finish time moved.
TEST(MaxMinTest, RecomputesOnlyTheComponent) {
  Net n;
  int a = n.Link(1), b = n.Link(1), c = n.Link(1);
  int f0 = n.Start(0, {a});
  int f1 = n.Start(0, {b, c});
  EXPECT_EQ(n.Changed(), std::vector<int>{f1});
  unsigned v0 = net_flow_version(n.n, f0);
  int f2 = n.Start(0, {c});
  EXPECT_EQ(n.Changed(), (std::vector<int>{f1, f2}));
  EXPECT_EQ(net_flow_version(n.n, f0), v0);
  long recomputes;
  double flows, links;
  net_stats(n.n, &recomputes, &flows, &links);
  EXPECT_EQ(recomputes, 3);
  EXPECT_EQ(flows, 1 + 1 + 2);  // f0 alone, f1 alone, then f1 and f2
  EXPECT_EQ(links, 1 + 2 + 2);
}

// A flow of 10 bytes alone on a 1 B/s link ends at 10; a second one from t = 4 halves its rate,
// so its remaining 6 bytes take 12 s more: it ends at 16, with a new version.
TEST(MaxMinTest, FinishTimesMoveWhenRatesChange) {
  Net n;
  int l = n.Link(1);
  int f0 = n.Start(0, {l}, 10);
  EXPECT_DOUBLE_EQ(net_flow_finish(n.n, f0), 10);
  unsigned v = net_flow_version(n.n, f0);
  int f1 = n.Start(4, {l}, 2);
  EXPECT_DOUBLE_EQ(net_flow_finish(n.n, f0), 16);
  EXPECT_NE(net_flow_version(n.n, f0), v);
  EXPECT_DOUBLE_EQ(net_flow_finish(n.n, f1), 8);  // 2 bytes at 1/2 B/s
  ASSERT_TRUE(net_flow_end(n.n, 8, f1));
  // f0 drained 4 + 4 * 1/2 = 6 bytes by t = 8; 4 left at full rate.
  EXPECT_DOUBLE_EQ(net_flow_finish(n.n, f0), 12);
  // An ended flow's id is reused with a newer version, so the old one's events stay stale.
  unsigned old = net_flow_version(n.n, f1);
  int f2 = n.Start(8, {l}, 1);
  EXPECT_EQ(f2, f1);
  EXPECT_GT(net_flow_version(n.n, f2), old);
}

// Random link sets: the rates are max-min fair, checked by definition. No link carries more than
// its bandwidth, and every flow crosses a full link where no flow gets more than it does (its
// bottleneck), so no flow could get more without taking from one that has no more.
TEST(MaxMinTest, RandomInstancesAreMaxMinFair) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; trial++) {
    Net n;
    int nl = 1 + (int)(rng() % 6), nf = 1 + (int)(rng() % 12);
    std::vector<double> bw(nl);
    for (int i = 0; i < nl; i++) bw[i] = 1 + (double)(rng() % 100), n.Link(bw[i]);
    std::vector<std::vector<int>> route(nf);
    std::vector<int> ids;
    for (int f = 0; f < nf; f++) {
      for (int i = 0; i < nl; i++)
        if (rng() % 2) route[f].push_back(i);
      if (route[f].empty()) route[f].push_back((int)(rng() % nl));
      ids.push_back(n.Start(0, route[f]));
    }
    // End a few, so that rates also come from the end path.
    std::vector<bool> alive(nf, true);
    for (int f = 0; f < nf; f++)
      if (rng() % 4 == 0) {
        ASSERT_TRUE(net_flow_end(n.n, 0, ids[f]));
        alive[f] = false;
      }
    std::vector<double> load(nl, 0);
    std::vector<double> top(nl, 0);
    for (int f = 0; f < nf; f++)
      if (alive[f])
        for (int l : route[f]) load[l] += n.Rate(ids[f]), top[l] = std::max(top[l], n.Rate(ids[f]));
    for (int l = 0; l < nl; l++) EXPECT_LE(load[l], bw[l] * (1 + 1e-9)) << "trial " << trial;
    for (int f = 0; f < nf; f++) {
      if (!alive[f]) continue;
      bool bottleneck = false;
      for (int l : route[f])
        bottleneck |= load[l] >= bw[l] * (1 - 1e-9) && n.Rate(ids[f]) >= top[l] * (1 - 1e-9);
      EXPECT_TRUE(bottleneck) << "trial " << trial << " flow " << f;
    }
  }
}

// --- The topology file.

struct Topo {
  topo_t t;
  Topo() { topo_init(&t); }
  ~Topo() { topo_free(&t); }
  weft_result_t Parse(const char* text) { return topo_parse(&t, text, "t.topo"); }
};

TEST(TopologyFileTest, ParsesEveryKey) {
  Topo t;
  ASSERT_EQ(t.Parse("# a rail-optimized cluster\n"
                    "gpus_per_node 4\n"
                    "fabric_bw 450e9   # NVLink\n"
                    "fabric_latency 2e-6\n"
                    "\n"
                    "nics_per_node 2\n"
                    "nic_bw 50e9\n"
                    "nic_latency 5e-6\n"
                    "nic_map 0 0 1,1\n"
                    "nics_per_leaf 16\n"
                    "spines 4\n"
                    "oversubscription 2.5\n"
                    "spine_latency 1e-6\n"
                    "layout rail\n"
                    "rank_order 3 2 1 0\n"),
            WEFT_SUCCESS)
      << err_last();
  EXPECT_EQ(t.t.gpus_per_node, 4);
  EXPECT_EQ(t.t.fabric_bw, 450e9);
  EXPECT_EQ(t.t.fabric_latency, 2e-6);
  EXPECT_EQ(t.t.nics_per_node, 2);
  EXPECT_EQ(t.t.nic_bw, 50e9);
  EXPECT_EQ(t.t.nic_latency, 5e-6);
  ASSERT_EQ(t.t.nic_map_len, 4);
  EXPECT_EQ(t.t.nic_map[3], 1);
  EXPECT_EQ(t.t.nics_per_leaf, 16);
  EXPECT_EQ(t.t.spines, 4);
  EXPECT_EQ(t.t.oversubscription, 2.5);
  EXPECT_EQ(t.t.spine_latency, 1e-6);
  EXPECT_EQ(t.t.layout, TOPO_RAIL);
  ASSERT_EQ(t.t.nrank_order, 4);
  EXPECT_EQ(t.t.rank_order[0], 3);
}

// Every error names the file, the line and the key.
TEST(TopologyFileTest, ErrorsNameLineAndKey) {
  struct {
    const char* text;
    const char* want;
  } cases[] = {
      {"gpus_per_node 8\nnic_bw fast\n", "t.topo:2: key 'nic_bw': bad value 'fast'"},
      {"\n\nbandwidth 5\n", "t.topo:3: unknown key 'bandwidth'"},
      {"layout torus\n", "t.topo:1: key 'layout': bad value 'torus' (want rail or flat)"},
      {"spines\n", "t.topo:1: key 'spines' has no value"},
      {"gpus_per_node 0\n", "t.topo:1: key 'gpus_per_node': bad value '0'"},
      {"gpus_per_node 2.5\n", "t.topo:1: key 'gpus_per_node'"},
      {"oversubscription -1\n", "t.topo:1: key 'oversubscription'"},
      {"nic_latency -1e-6\n", "t.topo:1: key 'nic_latency'"},
      {"fabric_bw 1e9x\n", "t.topo:1: key 'fabric_bw'"},
      {"rank_order 0 1 x\n", "t.topo:1: key 'rank_order'"},
      {"nic_map 0 -1\n", "t.topo:1: key 'nic_map'"},
  };
  for (const auto& c : cases) {
    Topo t;
    EXPECT_EQ(t.Parse(c.text), WEFT_ERR_INVALID_ARGUMENT) << c.text;
    EXPECT_NE(std::string(err_last()).find(c.want), std::string::npos)
        << c.text << " gave: " << err_last();
  }
}

TEST(TopologyFileTest, MissingFileNamesIt) {
  Topo t;
  EXPECT_EQ(topo_load(&t.t, "/nonexistent/x.topo"), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("/nonexistent/x.topo"), std::string::npos);
}

// What only fits once the number of ranks is known.
TEST(TopologyFileTest, BuildErrorsNameWhatDoesNotFit) {
  struct {
    const char* text;
    int nranks, rpn;
    const char* want;
  } cases[] = {
      {"rank_order 0 1 2 2\n", 4, 2, "not a permutation of 0..3 (rank 3 on slot 2)"},
      {"rank_order 0 1 2\n", 4, 2, "rank_order has 3 entries for 4 ranks"},
      {"rank_order 0 1 2 4\n", 4, 2, "rank 3 on slot 4"},
      {"gpus_per_node 2\nnic_map 0 0 0\n", 8, 2, "nic_map has 3 entries for 2 devices"},
      {"gpus_per_node 2\nnics_per_node 1\nnic_map 0 1\n", 8, 2, "device 1 to NIC 1 of 1"},
      {"gpus_per_node 4\n", 8, 2, "gpus_per_node 4 but the model has 2 ranks per node"},
  };
  for (const auto& c : cases) {
    Topo t;
    ASSERT_EQ(t.Parse(c.text), WEFT_SUCCESS) << err_last();
    sim_model_t m;
    sim_model_defaults(&m);
    m.ranks_per_node = c.rpn;
    net_t* net = net_create();
    topo_net_t tn;
    EXPECT_EQ(topo_build(&t.t, &m, c.nranks, net, &tn), WEFT_ERR_INVALID_ARGUMENT) << c.text;
    EXPECT_NE(std::string(err_last()).find(c.want), std::string::npos)
        << c.text << " gave: " << err_last();
    topo_net_free(&tn);
    net_free(net);
  }
}

// --- Routes.

struct Built {
  Topo t;
  sim_model_t m;
  net_t* net = net_create();
  topo_net_t tn = {};
  Built(const char* text, int nranks, int rpn) {
    EXPECT_EQ(t.Parse(text), WEFT_SUCCESS) << err_last();
    sim_model_defaults(&m);
    m.ranks_per_node = rpn;
    m.topo = &t.t;
    EXPECT_EQ(topo_build(&t.t, &m, nranks, net, &tn), WEFT_SUCCESS) << err_last();
  }
  ~Built() {
    topo_net_free(&tn);
    net_free(net);
  }
  int Hops(int from, int to, double* lat = nullptr) {
    int links[NET_MAX_HOPS];
    double l;
    int n = topo_route(&tn, from, to, links, &l);
    if (lat) *lat = l;
    return n;
  }
};

// Inside a node: device up, device down, the fabric's latency. Between nodes on one leaf: NIC up
// and down. Across leaves: through a spine, with its latency added.
TEST(TopologyRouteTest, HopsAndLatencies) {
  Built b(
      "gpus_per_node 2\nfabric_latency 1e-6\nnic_latency 3e-6\nnics_per_leaf 2\n"
      "spine_latency 2e-6\nspines 2\n",
      8, 2);
  EXPECT_EQ(b.tn.leaves, 4);  // 4 nodes of 2 NICs, 2 per leaf
  double lat;
  EXPECT_EQ(b.Hops(0, 1, &lat), 2);
  EXPECT_DOUBLE_EQ(lat, 1e-6);
  EXPECT_EQ(b.Hops(0, 3, &lat), 4);  // node 0 NIC 0 (leaf 0) -> node 1 NIC 1 (leaf 1)
  EXPECT_DOUBLE_EQ(lat, 5e-6);
  Built flat("gpus_per_node 2\nnics_per_node 1\nnics_per_leaf 2\n", 8, 2);
  EXPECT_EQ(flat.Hops(0, 3), 2);  // nodes 0 and 1 share leaf 0
  EXPECT_EQ(flat.Hops(0, 5), 4);
}

// Rail layout: NIC i of every node sits on rail switch i, so device i talks to device i of any
// node through one switch and to device j != i of another node through a spine.
TEST(TopologyRouteTest, RailsCrossTheSpineBetweenRails) {
  Built b("gpus_per_node 4\nlayout rail\n", 16, 4);
  EXPECT_EQ(b.tn.leaves, 4);
  EXPECT_EQ(b.Hops(0, 4), 2);   // node 0 device 0 -> node 1 device 0
  EXPECT_EQ(b.Hops(3, 15), 2);  // device 3 -> device 3
  EXPECT_EQ(b.Hops(3, 4), 4);   // device 3 -> device 0: rail 3 -> spine -> rail 0
  Built flat("gpus_per_node 4\nlayout flat\n", 16, 4);
  EXPECT_EQ(flat.Hops(3, 4), 2);  // one switch holds every NIC
  // A rank order moves ranks between slots: rank 4 on node 1's device 3.
  Built order("gpus_per_node 4\nlayout rail\nrank_order 0 1 2 3 7 6 5 4\n", 8, 4);
  EXPECT_EQ(order.Hops(3, 4), 2);
  EXPECT_EQ(order.Hops(7, 0), 2);
  EXPECT_EQ(topo_node_of(&order.m, 4), 1);
}

// Leaf-spine links: a leaf's downlink bandwidth (its NICs') over the ratio, split over spines.
TEST(TopologyRouteTest, OversubscriptionSetsUplinks) {
  Built b("gpus_per_node 1\nnic_bw 100\nnics_per_leaf 4\nspines 2\noversubscription 4\n", 8, 1);
  EXPECT_DOUBLE_EQ(b.tn.up_bw, 4 * 100.0 / (4 * 2));
}

}  // namespace
