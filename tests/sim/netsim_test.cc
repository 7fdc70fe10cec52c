// netsim_test.cc -- the network mode end to end: the library's schedules on topologies whose
// links are shared, against times derived here from the links' bandwidths.
#include <cstdio>
#include <string>
#include <vector>

#include "tests/sim/sim_util.h"

extern "C" {
#include "tools/sim/cli.h"
#include "tools/sim/topology.h"
}

namespace {

using simtest::Time;

// A model in network mode: the topology `text` on nodes of `rpn` ranks. Large slices and a
// small latency, so that bandwidth terms dominate where a test wants them to.
struct NetModel {
  topo_t t;
  sim_model_t m;
  NetModel(const std::string& text, int rpn, size_t slice = 1 << 20, int headers = 1) {
    topo_init(&t);
    EXPECT_EQ(topo_parse(&t, text.c_str(), "test"), WEFT_SUCCESS) << err_last();
    m = simtest::Model(slice, headers);
    m.gamma = 0;  // the links alone set the time
    m.ranks_per_node = rpn;
    m.topo = &t;
  }
  ~NetModel() { topo_free(&t); }
  NetModel(const NetModel&) = delete;
};

// Schedules for p ranks, no call descriptions (as engine_test's).
struct World {
  std::vector<schedule_t> s;
  World(int p, size_t count) : s(p) {
    for (schedule_t& x : s) sched_init(&x, count, count);
  }
  ~World() {
    for (schedule_t& x : s) sched_free(&x);
  }
  void Send(int from, int to, size_t count) {
    sched_op_t op = {};
    op.kind = SCHED_SEND;
    op.peer = to;
    op.buf = SCHED_SENDBUF;
    op.count = count;
    op.dep = -1;
    sched_add(&s[from], &op);
    op.kind = SCHED_RECV_COPY;
    op.peer = from;
    op.buf = SCHED_RECVBUF;
    op.src_buf = SCHED_SENDBUF;
    sched_add(&s[to], &op);
  }
  double Run(const sim_model_t& m) {
    sim_result_t r;
    weft_result_t res = sim_run_schedules(&m, (int)s.size(), 4, s.data(), nullptr, nullptr, &r);
    EXPECT_EQ(res, WEFT_SUCCESS) << err_last();
    return res == WEFT_SUCCESS ? r.time : -1;
  }
};

// An empty topology takes its values from the model (fabric = 1/beta and alpha, one NIC per
// device at 1/inter_beta and inter_alpha, one switch): where no rank sends to two peers at once,
// nothing is shared and every message takes alpha + bytes*beta as on the ports.
TEST(NetSimTest, EmptyTopologyIsThePortsModelWithoutConcurrency) {
  struct {
    weft_coll_t coll;
    weft_algo_t algo;
  } rows[] = {{WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING},
              {WEFT_COLL_BROADCAST, WEFT_ALGO_RING},
              {WEFT_COLL_ALL_GATHER, WEFT_ALGO_RING},
              {WEFT_COLL_SEND, WEFT_ALGO_LINEAR}};
  for (const auto& row : rows) {
    if (!algo_lookup(row.coll, row.algo)) continue;
    for (size_t count : {size_t(1), size_t(1000), size_t(1) << 20}) {
      NetModel n("", 4, 65536);
      n.m.inter_alpha = 20e-6;
      n.m.inter_beta = 1e-9;
      sim_model_t plain = n.m;
      plain.topo = nullptr;
      int root = row.coll == WEFT_COLL_SEND ? 7 : 0;
      double want = Time(plain, row.coll, row.algo, 8, count, root);
      double got = Time(n.m, row.coll, row.algo, 8, count, root);
      EXPECT_NEAR(got, want, 1e-9 * want) << weft_coll_name(row.coll) << " count " << count;
    }
  }
}

const size_t kN = 1 << 22;  // elements: 16 MiB of float32

// Two nodes of two devices. One flow from node 0 to node 1 takes latency + B / nic_bw; two flows
// from its two devices take twice the bandwidth term through one shared NIC, and the single
// flow's time through two NICs. A device sending to two peers at once shares its NIC too: the
// network mode has no one-port rule, the links are what is shared.
TEST(NetSimTest, TwoFlowsSharingOneNicTakeTwiceAsLong) {
  const double bw = 1e9, lat = 2e-6, bytes = 4.0 * kN;
  std::string base = "gpus_per_node 2\nnic_bw 1e9\nnic_latency 2e-6\n";
  NetModel one(base + "nics_per_node 1\n", 2, size_t(1) << 30, 0);
  NetModel two(base + "nics_per_node 2\n", 2, size_t(1) << 30, 0);
  {
    World w(4, kN);
    w.Send(0, 2, kN);
    EXPECT_NEAR(w.Run(one.m), lat + bytes / bw, 1e-9);
  }
  {
    World w(4, kN);
    w.Send(0, 2, kN);
    w.Send(1, 3, kN);
    EXPECT_NEAR(w.Run(one.m), lat + 2 * bytes / bw, 1e-9);
    EXPECT_NEAR(w.Run(two.m), lat + bytes / bw, 1e-9);
  }
  {
    World w(4, kN);
    w.Send(0, 2, kN);
    w.Send(0, 3, kN);
    EXPECT_NEAR(w.Run(two.m), lat + 2 * bytes / bw, 1e-9);
  }
}

// Two sends of one rank that become ready at once, where only the sender has news (they wait on
// a receive at rank 0; ranks 2 and 3 posted long before): both start when the receive lands and
// share rank 0's NIC, 2 latencies + 3 B / bw in all. A round that started one message per rank,
// as the ports model does, would hold the second until the first is delivered: a latency more.
TEST(NetSimTest, ReadySendsOfOneRankStartTogether) {
  const double bw = 1e9, lat = 1e-3, bytes = 4.0 * kN;
  NetModel n("gpus_per_node 1\nnics_per_node 1\nnic_bw 1e9\nnic_latency 1e-3\n", 1, size_t(1) << 30,
             0);
  World w(4, kN);
  w.Send(1, 0, kN);
  int recv = w.s[0].nops - 1;
  w.Send(0, 2, kN);
  w.s[0].ops[w.s[0].nops - 1].dep = recv;
  w.Send(0, 3, kN);
  w.s[0].ops[w.s[0].nops - 1].dep = recv;
  EXPECT_NEAR(w.Run(n.m), 2 * lat + 3 * bytes / bw, 1e-9);
}

// Flows that end at different times: the survivor speeds up when the other leaves. 0 -> 2 moves
// B, 1 -> 3 moves B/2 through one NIC: both at bw/2 until the short one is done at B/bw, then
// the long one's last B/2 at bw. Both end at 1.5 B/bw (+ latency); the short one at B/bw.
TEST(NetSimTest, SurvivorSpeedsUpWhenAFlowEnds) {
  NetModel one("gpus_per_node 2\nnics_per_node 1\nnic_bw 1e9\nnic_latency 0\n", 2, size_t(1) << 30,
               0);
  World w(4, kN);
  w.Send(0, 2, kN);
  w.Send(1, 3, kN / 2);
  EXPECT_NEAR(w.Run(one.m), 1.5 * 4.0 * kN / 1e9, 1e-9);
}

// A two-level fat-tree, one device and NIC per node, k = 2 NICs per leaf, 16 ranks. Pairwise
// all-to-all keeps every pair's flow up at once: on a 1:1 tree each NIC carries p-1 flows of c
// bytes, T1 = (p-1) c / nic. At 4:1 a leaf's uplink (k nic / 4) carries k (p-k) flows, each at
// k nic / (4 k (p-k)) = nic / (4 (p-k)): T4 = 4 (p-k) c / nic. T4 / T1 = 4 (p-k) / (p-1) = 3.73.
// All ranks under one leaf: the same time at 4:1 as at 1:1.
TEST(NetSimTest, OversubscribedFatTreeSlowsCrossLeafAllToAll) {
  const int p = 16, k = 2;
  const size_t count = size_t(1) << 22;  // elements per peer: 16 MiB
  std::string tree = "gpus_per_node 1\nnic_bw 1e9\nnic_latency 1e-6\nnics_per_leaf 2\n";
  NetModel full(tree + "oversubscription 1\n", 1);
  NetModel over(tree + "oversubscription 4\n", 1);
  double t1 = Time(full.m, WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_PAIRWISE, p, count);
  double t4 = Time(over.m, WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_PAIRWISE, p, count);
  double c = 4.0 * count;
  EXPECT_NEAR(t1, (p - 1) * c / 1e9, 0.02 * t1);
  EXPECT_NEAR(t4 / t1, 4.0 * (p - k) / (p - 1), 0.05);
  NetModel leaf_full("gpus_per_node 1\nnic_bw 1e9\noversubscription 1\nnics_per_leaf 4\n", 1);
  NetModel leaf_over("gpus_per_node 1\nnic_bw 1e9\noversubscription 4\nnics_per_leaf 4\n", 1);
  double i1 = Time(leaf_full.m, WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_PAIRWISE, 4, count);
  double i4 = Time(leaf_over.m, WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_PAIRWISE, 4, count);
  EXPECT_EQ(i4, i1);
}

// Two nodes of four devices on a rail-optimized 4:1 tree: rail switch i holds NIC i of both
// nodes, and a leaf-spine link has 2 nic / 4 = nic / 2. The ring in rank order crosses between
// nodes twice, 3 -> 4 and 7 -> 0, both from device 3 to device 0: rail 3 -> spine -> rail 0, the
// two flows on one uplink at nic / 4 each. Numbered so that node 1's devices run backwards
// (rank_order 0 1 2 3 7 6 5 4), each crossing stays on its rail (3 and 0) at nic. The fabric is
// 10x faster, so a ring step is as slow as its crossing: all-reduce takes 2 (p-1)/p n / bw_cross,
// the rail-unaware placement four times as long. A flat layout (one switch for all NICs) needs
// no alignment.
TEST(NetSimTest, RailAlignedRingBeatsRailUnaware) {
  const int p = 8;
  const size_t count = size_t(1) << 24;  // 64 MiB
  std::string rail =
      "gpus_per_node 4\nfabric_bw 1e10\nnic_bw 1e9\nnic_latency 1e-6\nfabric_latency 1e-6\n"
      "oversubscription 4\n";
  NetModel unaware(rail + "layout rail\n", 4);
  NetModel aligned(rail + "layout rail\nrank_order 0 1 2 3 7 6 5 4\n", 4);
  NetModel flat(rail + "layout flat\n", 4);
  double tu = Time(unaware.m, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, p, count);
  double ta = Time(aligned.m, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, p, count);
  double tf = Time(flat.m, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, p, count);
  double n = 4.0 * count;
  EXPECT_NEAR(ta, 2.0 * (p - 1) / p * n / 1e9, 0.02 * ta);
  EXPECT_NEAR(tu, 2.0 * (p - 1) / p * n / (1e9 / 4), 0.02 * tu);
  EXPECT_NEAR(tf, ta, 1e-9 * ta);
}

// Four nodes of four devices, one NIC per node, one node per leaf, 4:1: a leaf's uplink has
// nic / 4. The flat ring crosses each node boundary once, at nic / 4: T_ring = 2 (p-1)/p n / up.
// The hierarchical all-reduce reduce-scatters inside nodes (fabric), all-reduces each piece
// across the H nodes (L rings sharing one uplink: together 2 (H-1)/H n through it), and
// all-gathers inside: T_hier = 2 (H-1)/H n / up + 2 (L-1)/L n / fabric.
TEST(NetSimTest, HierarchicalBeatsFlatRingOnOversubscribedTree) {
  const int L = 4, H = 4, p = L * H;
  const size_t count = size_t(1) << 24;
  NetModel tree(
      "gpus_per_node 4\nnics_per_node 1\nfabric_bw 1e10\nnic_bw 1e9\nnics_per_leaf 1\n"
      "oversubscription 4\nnic_latency 1e-6\nfabric_latency 1e-6\n",
      4);
  double ring = Time(tree.m, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, p, count);
  double hier = Time(tree.m, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_HIERARCHICAL, p, count);
  double n = 4.0 * count, up = 1e9 / 4, fabric = 1e10;
  double want_ring = 2.0 * (p - 1) / p * n / up;
  double want_hier = 2.0 * (H - 1) / H * n / up + 2.0 * (L - 1) / L * n / fabric;
  EXPECT_NEAR(ring, want_ring, 0.02 * want_ring);
  EXPECT_NEAR(hier, want_hier, 0.05 * want_hier);
  EXPECT_LT(hier, 0.9 * ring);
}

// A rank order the topology's nodes see is also what the schedules' builders see (node_of) and
// what counts as crossing between nodes.
TEST(NetSimTest, RankOrderMovesCrossNodeMessages) {
  NetModel in_order("gpus_per_node 2\n", 2, 65536);
  NetModel spread("gpus_per_node 2\nrank_order 0 2 1 3\n", 2, 65536);
  sim_call_t c = {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, 4, 1 << 16, WEFT_FLOAT32, 0};
  sim_result_t a, b;
  ASSERT_EQ(sim_run(&in_order.m, &c, nullptr, nullptr, &a), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(sim_run(&spread.m, &c, nullptr, nullptr, &b), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(a.messages, b.messages);
  EXPECT_EQ(2 * a.cross_node, b.cross_node);  // every ring edge crosses once ranks alternate
}

// --- The command line: --topology, --net key=value, --rank-order.

struct Cli {
  simcli_t o;
  int rc;
  std::string err;
  explicit Cli(std::vector<const char*> args) {
    args.insert(args.begin(), "weft-sim");
    char e[512];
    rc = simcli_parse((int)args.size(), args.data(), &o, e, sizeof e);
    err = e;
  }
  ~Cli() { simcli_free(&o); }
  Cli(const Cli&) = delete;
};

std::string TempFile(const char* name, const char* text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  FILE* f = std::fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr);
  if (f) std::fputs(text, f), std::fclose(f);
  return path;
}

TEST(NetCliTest, NoNetworkFlagsNoTopology) {
  Cli c({"-p", "16"});
  ASSERT_EQ(c.rc, SIMCLI_OK) << c.err;
  EXPECT_EQ(c.o.model.topo, nullptr);
}

TEST(NetCliTest, FileThenFlagsAndGpusPerNodeSetsRanksPerNode) {
  std::string path = TempFile("cli.topo", "gpus_per_node 4\noversubscription 2\n");
  Cli c(
      {"-p", "16", "--topology", path.c_str(), "--net", "oversubscription=4", "--net=layout=rail"});
  ASSERT_EQ(c.rc, SIMCLI_OK) << c.err;
  ASSERT_EQ(c.o.model.topo, &c.o.topo);
  EXPECT_EQ(c.o.topo.oversubscription, 4);  // later flags win
  EXPECT_EQ(c.o.topo.layout, TOPO_RAIL);
  EXPECT_EQ(c.o.model.ranks_per_node, 4);
}

TEST(NetCliTest, RankOrderFile) {
  std::string path = TempFile("order.txt", "# node 1 backwards\n0 1 2 3\n7,6,5,4\n");
  Cli c({"-p", "8", "--net", "gpus_per_node=4", "--rank-order", path.c_str()});
  ASSERT_EQ(c.rc, SIMCLI_OK) << c.err;
  ASSERT_EQ(c.o.topo.nrank_order, 8);
  EXPECT_EQ(c.o.topo.rank_order[4], 7);
}

TEST(NetCliTest, ErrorsNameTheFlagOrLine) {
  std::string bad = TempFile("bad.topo", "gpus_per_node 4\nnic_bw x\n");
  std::string order = TempFile("short.txt", "0 1 2\n");
  struct {
    std::vector<const char*> args;
    std::string want;
  } cases[] = {
      {{"--topology", bad.c_str()}, bad + ":2: key 'nic_bw': bad value 'x'"},
      {{"--topology", "/nonexistent.topo"}, "topology /nonexistent.topo"},
      {{"--net", "spines"}, "--net: want key=value, got 'spines'"},
      {{"--net", "colour=red"}, "--net: unknown key 'colour'"},
      {{"-p", "8", "--rank-order", order.c_str()}, "rank order has 3 entries for -p 8"},
      {{"-p", "8", "--ranks-per-node", "2", "--net", "gpus_per_node=4"},
       "--ranks-per-node 2 but the topology has gpus_per_node 4"},
  };
  for (auto& k : cases) {
    Cli c(k.args);
    EXPECT_EQ(c.rc, SIMCLI_ERROR) << k.want;
    EXPECT_NE(c.err.find(k.want), std::string::npos) << c.err;
  }
}

}  // namespace
