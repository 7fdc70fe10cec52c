// topology_test.cc -- ranks on several nodes: exactly the messages between nodes go slower.
//
// They take the inter-node alpha and beta; nothing changes while those equal the others.
#include <algorithm>
#include <vector>

#include "tests/sim/sim_util.h"

namespace {

using simtest::Model;
using simtest::Time;

struct Msg {
  int from, to;
  double bytes, start, end;
};

void Record(void* arg, int from, int to, double bytes, double start, double end, const char*) {
  static_cast<std::vector<Msg>*>(arg)->push_back({from, to, bytes, start, end});
}

// Two nodes of four ranks; links between them 4x slower to start and 10x slower per byte.
sim_model_t TwoNodes(size_t slice_bytes = 65536, int headers = 1) {
  sim_model_t m = Model(slice_bytes, headers);
  m.ranks_per_node = 4;
  m.inter_alpha = 20e-6;
  m.inter_beta = 1e-9;
  return m;
}

TEST(TopologyTest, OnlyCrossNodeMessagesTakeInterNodeLinks) {
  sim_model_t m = TwoNodes();
  sim_call_t c = {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, 8, 1 << 20, WEFT_FLOAT32, 0};
  std::vector<Msg> msgs;
  sim_result_t r;
  ASSERT_EQ(sim_run(&m, &c, Record, &msgs, &r), WEFT_SUCCESS) << err_last();
  ASSERT_EQ((long)msgs.size(), r.messages);
  long cross = 0;
  for (const Msg& g : msgs) {
    bool inter = g.from / 4 != g.to / 4;
    double a = inter ? m.inter_alpha : m.alpha, b = inter ? m.inter_beta : m.beta;
    EXPECT_NEAR(g.end - g.start, a + g.bytes * b, 1e-15) << g.from << "->" << g.to;
    if (inter) {
      cross++;
      // A ring crosses between nodes only at 3->4 and 7->0.
      EXPECT_TRUE((g.from == 3 && g.to == 4) || (g.from == 7 && g.to == 0));
    }
  }
  EXPECT_EQ(cross, r.cross_node);
  EXPECT_GT(cross, 0);
}

// Inter-node values equal to the intra-node ones, or one node holding every rank: the same time
// as a single node, for every algorithm in the table. Except that the hierarchical all-reduce
// builds another schedule once ranks sit on several nodes (weft-sim passes them as node_of), so
// for it only one node holding every rank must change nothing.
TEST(TopologyTest, EqualLinksChangeNothing) {
  for (int i = 0; i < algo_count(); i++) {
    const algo_entry_t* e = algo_at(i);
    int p = 8;
    bool p2p =
        e->coll == WEFT_COLL_SEND || e->coll == WEFT_COLL_RECV || e->coll == WEFT_COLL_P2P_GROUP;
    int root = p2p ? 5 : 2;
    sim_model_t one = Model(), equal = Model(), wide = TwoNodes();
    equal.ranks_per_node = 2;
    wide.ranks_per_node = p;
    double t = Time(one, e->coll, e->algo, p, 300000, root);
    if (e->algo != WEFT_ALGO_HIERARCHICAL) {
      EXPECT_EQ(Time(equal, e->coll, e->algo, p, 300000, root), t) << weft_algo_name(e->algo);
    }
    EXPECT_EQ(Time(wide, e->coll, e->algo, p, 300000, root), t) << weft_algo_name(e->algo);
  }
}

TEST(TopologyTest, PointToPointWithinAndAcrossNodes) {
  sim_model_t m = TwoNodes(/*slice_bytes=*/1 << 30, /*headers=*/0);
  size_t n = 1 << 20;
  const double tok = SIM_AGREE_BYTES;  // the token with tag and count goes first
  EXPECT_SAME_TIME(Time(m, WEFT_COLL_SEND, WEFT_ALGO_RING, 8, n / 4, 3),
                   2 * m.alpha + (tok + n) * m.beta);
  EXPECT_SAME_TIME(Time(m, WEFT_COLL_SEND, WEFT_ALGO_RING, 8, n / 4, 4),
                   2 * m.inter_alpha + (tok + n) * m.inter_beta);
}

// An unsliced chain pays each link once, one after another: two of them cross nodes from root 2
// (3->4 and 7->0), one from root 0 (3->4).
TEST(TopologyTest, ChainBroadcastPaysEachLinkOnce) {
  sim_model_t m = TwoNodes(/*slice_bytes=*/1 << 30, /*headers=*/0);
  double n = 1 << 20;
  double intra = m.alpha + n * m.beta, inter = m.inter_alpha + n * m.inter_beta;
  EXPECT_SAME_TIME(Time(m, WEFT_COLL_BROADCAST, WEFT_ALGO_RING, 8, (size_t)n / 4, 0),
                   6 * intra + inter);
  EXPECT_SAME_TIME(Time(m, WEFT_COLL_BROADCAST, WEFT_ALGO_RING, 8, (size_t)n / 4, 2),
                   5 * intra + 2 * inter);
}

// Unsliced ring all-reduce against a reference written out for the ring: step s's message from
// r-1 to r starts once r-1 has finished its step s-1 receive and the link is free again; a
// reduce-scatter receive then takes c gamma on r's CPU, one reduction at a time.
TEST(TopologyTest, RingAllReduceMatchesRingRecurrence) {
  for (int p : {4, 6, 8, 12}) {
    sim_model_t m = TwoNodes(/*slice_bytes=*/1 << 30, /*headers=*/0);
    m.ranks_per_node = 3;
    m.gamma = 5e-9;  // slow reductions, so that the CPU queue matters
    size_t count = (size_t)p * 20000;
    double c = count / p * 4.0;
    std::vector<double> arrived(p, 0), done(p, 0), cpu(p, 0);  // step s-1, per receiving rank
    double end = 0;
    for (int s = 0; s < 2 * (p - 1); s++) {
      std::vector<double> a(p), d(p);
      for (int r = 0; r < p; r++) {
        int from = (r - 1 + p) % p;
        double start = s == 0 ? 0 : std::max(done[from], arrived[r]);
        a[r] = start + sim_link_time(&m, from, r, c);
        d[r] = a[r];
        if (s < p - 1) d[r] = cpu[r] = std::max(a[r], cpu[r]) + c * m.gamma;
        end = std::max(end, d[r]);
      }
      arrived = a;
      done = d;
    }
    EXPECT_SAME_TIME(Time(m, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, p, count), end) << "p=" << p;
    // And slower links between nodes cost time.
    sim_model_t one = m;
    one.ranks_per_node = 0;
    EXPECT_GT(end, Time(one, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, p, count));
  }
}

}  // namespace
