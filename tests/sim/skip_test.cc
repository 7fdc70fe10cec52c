// skip_test.cc -- jumping over periodic stretches (sim_skip.h) against the full replay.
//
// Small slices give every op hundreds of slices while the buffers stay small: the skip has
// something to jump over, and the full replay stays quick. The model's constants are powers of
// two, so every time the replay adds up is exact: a jump must then land on the full replay's
// state exactly, and no rounding can tip a tie between two instants either way (README.md,
// "Scale", says what rounding does with other constants).
#include <cmath>
#include <string>

#include "tests/sim/sim_util.h"

extern "C" {
#include "tools/sim/topology.h"
}

namespace {

using simtest::Model;

const size_t kSlice = 256;    // bytes: 64 float32 elements
const size_t kCount = 16384;  // elements: 256 slices for an op over the whole buffer

// Times in multiples of 2^-35 s: sums stay exact far beyond these runs' seconds.
sim_model_t ExactModel(int ranks_per_node) {
  sim_model_t m = Model(kSlice);
  m.alpha = std::ldexp(1.0, -17);  // 7.6 us
  m.beta = std::ldexp(1.0, -33);   // 8.6 GB/s
  m.inter_alpha = 3 * m.alpha;
  m.inter_beta = 2 * m.beta;
  m.gamma = std::ldexp(1.0, -32);
  m.beta_mem = std::ldexp(1.0, -35);
  m.ranks_per_node = ranks_per_node;
  return m;
}

sim_result_t Simulate(sim_model_t m, int skip, const sim_call_t& c) {
  m.skip = skip;
  sim_result_t r = {};
  EXPECT_EQ(sim_run(&m, &c, nullptr, nullptr, &r), WEFT_SUCCESS)
      << weft_coll_name(c.coll) << " " << weft_algo_name(c.algo) << " p=" << c.nranks << ": "
      << err_last();
  return r;
}

bool Covered(weft_coll_t coll) {
  return coll == WEFT_COLL_ALL_REDUCE || coll == WEFT_COLL_BROADCAST || coll == WEFT_COLL_REDUCE ||
         coll == WEFT_COLL_ALL_GATHER || coll == WEFT_COLL_REDUCE_SCATTER ||
         coll == WEFT_COLL_ALL_TO_ALL;
}

// Every algorithm of the covered collectives, one node and nodes of two ranks (and one node
// without call descriptions): the same time (within rounding), messages, bytes and cross-node
// messages as the full replay.
TEST(Skip, SameAsFullReplay) {
  long jumps = 0;
  struct {
    int rpn, headers;
  } shapes[] = {{0, 1}, {2, 1}, {0, 0}};
  for (const auto& shape : shapes) {
    int rpn = shape.rpn;
    sim_model_t m = ExactModel(rpn);
    m.headers = shape.headers;
    for (int i = 0; i < algo_count(); i++) {
      const algo_entry_t* e = algo_at(i);
      if (!Covered(e->coll)) continue;
      for (int p : {2, 3, 4, 7, 8, 16}) {
        sim_call_t c = {e->coll, e->algo, p, kCount, WEFT_FLOAT32, p > 2 ? 1 : 0};
        sim_result_t full = Simulate(m, 0, c), fast = Simulate(m, 1, c);
        std::string what = std::string(weft_coll_name(e->coll)) + " " + weft_algo_name(e->algo) +
                           " p=" + std::to_string(p) + " rpn=" + std::to_string(rpn) +
                           " headers=" + std::to_string(m.headers);
        EXPECT_EQ(full.skip_jumps, 0) << what;
        EXPECT_NEAR(fast.time, full.time, 1e-9 * full.time) << what;
        EXPECT_EQ(fast.messages, full.messages) << what;
        EXPECT_EQ(fast.bytes, full.bytes) << what;
        EXPECT_EQ(fast.cross_node, full.cross_node) << what;
        EXPECT_LE(fast.skipped_messages, fast.messages) << what;
        jumps += fast.skip_jumps;
      }
    }
  }
  EXPECT_GT(jumps, 0);  // the comparisons above compared something
}

// The skip really happens where a pipeline is long: most messages of a tree and of recursive
// doubling are jumped over, not replayed.
TEST(Skip, JumpsOverLongPipelines) {
  for (weft_algo_t algo : {WEFT_ALGO_TREE, WEFT_ALGO_RECURSIVE_DOUBLING}) {
    for (int p : {4, 8, 16}) {
      sim_call_t c = {WEFT_COLL_ALL_REDUCE, algo, p, 4 * kCount, WEFT_FLOAT32, 0};
      sim_result_t r = Simulate(ExactModel(0), 1, c);
      EXPECT_GE(r.skip_jumps, 1) << weft_algo_name(algo) << " p=" << p;
      EXPECT_GT(r.skipped_messages, r.messages / 2) << weft_algo_name(algo) << " p=" << p;
    }
  }
}

// Off: a trace lists every message, so nothing is skipped and every message is traced.
TEST(Skip, OffWithTrace) {
  sim_call_t c = {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_TREE, 8, 4 * kCount, WEFT_FLOAT32, 0};
  long traced = 0;
  sim_result_t r = {};
  sim_model_t m = Model(kSlice);
  ASSERT_EQ(sim_run(
                &m, &c,
                [](void* arg, int, int, double, double, double, const char*) {
                  ++*static_cast<long*>(arg);
                },
                &traced, &r),
            WEFT_SUCCESS);
  EXPECT_EQ(r.skip_jumps, 0);
  EXPECT_EQ(traced, r.messages);
}

// Off in network mode: flows share links, which the signature does not cover. The same call
// without the topology does jump.
TEST(Skip, OffInNetworkMode) {
  topo_t t;
  topo_init(&t);
  ASSERT_EQ(topo_parse(&t, "", "test"), WEFT_SUCCESS) << err_last();
  sim_model_t m = ExactModel(4);
  sim_call_t c = {
      WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING, 8, 4 * kCount, WEFT_FLOAT32, 0};
  EXPECT_GE(Simulate(m, 1, c).skip_jumps, 1);
  m.topo = &t;
  sim_result_t net = Simulate(m, 1, c);
  EXPECT_EQ(net.skip_jumps, 0);
  EXPECT_EQ(net.skipped_messages, 0);
  topo_free(&t);
}

}  // namespace
