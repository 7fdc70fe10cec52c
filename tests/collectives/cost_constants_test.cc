// cost_constants_test.cc -- the committed per-transport constants (collectives/cost_constants.c),
// the model cost_model_for makes of a transport mix, and WEFT_TUNE_FILE's reader
// (comm/tune_file.c): single constants replaced by "<transport>.<intra|inter>.<param>", the whole
// model of weft-bench --tune as before, and errors that name the file and what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

extern "C" {
#include "collectives/cost_constants.h"
#include "comm/comm.h"
}

namespace {

TEST(CostConstants, EveryConstantIsFiniteAndPositive) {
  const cost_table_t* t = cost_constants();
  for (int k = 0; k < COST_NUM_TRANSPORTS; k++)
    for (int w = 0; w < 2; w++) {
      const cost_link_t& l = t->link[k][w];
      for (double v : {l.alpha, l.beta, l.gamma})
        EXPECT_TRUE(std::isfinite(v) && v > 0)
            << cost_transport_name((cost_transport_t)k) << " " << w;
    }
}

TEST(CostConstants, NamesRoundTrip) {
  for (int k = 0; k < COST_NUM_TRANSPORTS; k++)
    EXPECT_EQ(cost_transport_from_name(cost_transport_name((cost_transport_t)k)), k);
  EXPECT_EQ(cost_transport_from_name("ib"), COST_NUM_TRANSPORTS);
  EXPECT_EQ(cost_transport_from_name(nullptr), COST_NUM_TRANSPORTS);
}

// One class: its row. Several: per parameter the slowest. None: tcp on one host.
TEST(CostConstants, ModelIsTheSlowestLinkUsedPerParameter) {
  cost_table_t t = {};
  t.link[COST_SHM][COST_INTRA] = {1e-6, 5e-10, 3e-11};
  t.link[COST_TCP][COST_INTER] = {2e-5, 1e-10, 1e-12};
  t.link[COST_TCP][COST_INTRA] = {7e-6, 7e-10, 7e-11};
  cost_links_t l = {};
  l.used[COST_SHM][COST_INTRA] = 1;
  cost_model_t m = cost_model_for(&t, &l, 4096);
  EXPECT_EQ(m.alpha, 1e-6);
  EXPECT_EQ(m.beta, 5e-10);
  EXPECT_EQ(m.gamma, 3e-11);
  EXPECT_EQ(m.slice_bytes, 4096);
  l.used[COST_TCP][COST_INTER] = 1;
  m = cost_model_for(&t, &l, 4096);
  EXPECT_EQ(m.alpha, 2e-5);
  EXPECT_EQ(m.beta, 5e-10);
  EXPECT_EQ(m.gamma, 3e-11);
  cost_links_t none = {};
  m = cost_model_for(&t, &none, 4096);
  EXPECT_EQ(m.alpha, 7e-6);
  EXPECT_EQ(m.beta, 7e-10);
}

std::string Write(const char* name, const char* text) {
  std::string path =
      std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
  FILE* f = fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr);
  fputs(text, f);
  fclose(f);
  return path;
}

cost_tune_t Fresh() {
  cost_tune_t t;
  memset(&t, 0, sizeof t);
  t.table = *cost_constants();
  return t;
}

TEST(TuneFile, SingleConstantsReplaceTheirSlotOnly) {
  cost_tune_t t = Fresh();
  std::string p = Write("single.txt", "shm.intra.beta 2.5e-10\nrdma.inter.alpha 1e-6\n");
  ASSERT_EQ(cost_tune_load(p.c_str(), &t), WEFT_SUCCESS) << weft_last_error();
  EXPECT_FALSE(t.has_model);
  EXPECT_EQ(t.overrides, 2);
  EXPECT_EQ(t.table.link[COST_SHM][COST_INTRA].beta, 2.5e-10);
  EXPECT_EQ(t.table.link[COST_RDMA][COST_INTER].alpha, 1e-6);
  cost_table_t want = *cost_constants();
  want.link[COST_SHM][COST_INTRA].beta = 2.5e-10;
  want.link[COST_RDMA][COST_INTER].alpha = 1e-6;
  EXPECT_EQ(memcmp(&want, &t.table, sizeof want), 0);
}

// weft-bench --tune's file, as it has always been written; and both forms in one file.
TEST(TuneFile, WholeModelAsBefore) {
  cost_tune_t t = Fresh();
  std::string p = Write("model.txt", "alpha 2.5e-05\nbeta 6.1e-10\ngamma 2.2e-10\n");
  ASSERT_EQ(cost_tune_load(p.c_str(), &t), WEFT_SUCCESS) << weft_last_error();
  EXPECT_TRUE(t.has_model);
  EXPECT_EQ(t.overrides, 0);
  EXPECT_EQ(t.model.alpha, 2.5e-05);
  EXPECT_EQ(t.model.gamma, 2.2e-10);
  EXPECT_EQ(memcmp(cost_constants(), &t.table, sizeof t.table), 0);
  cost_model_t m = {0, 0, 0, 65536};
  ASSERT_EQ(cost_model_load(p.c_str(), &m), WEFT_SUCCESS);
  EXPECT_EQ(m.beta, 6.1e-10);
  EXPECT_EQ(m.slice_bytes, 65536);
  t = Fresh();
  p = Write("both.txt", "alpha 1e-5\nbeta 1e-9\ngamma 1e-10\ncuda_ipc.intra.gamma 1e-12\n");
  ASSERT_EQ(cost_tune_load(p.c_str(), &t), WEFT_SUCCESS) << weft_last_error();
  EXPECT_TRUE(t.has_model);
  EXPECT_EQ(t.table.link[COST_CUDA_IPC][COST_INTRA].gamma, 1e-12);
}

TEST(TuneFile, ErrorsNameTheFileAndTheLine) {
  struct {
    const char* text;
    const char* want;
  } cases[] = {
      {"ib.intra.alpha 1e-6\n", "\"ib.intra.alpha 1e-06\" is not"},
      {"shm.local.alpha 1e-6\n", "\"shm.local.alpha 1e-06\" is not"},
      {"shm.intra.delta 1e-6\n", "\"shm.intra.delta 1e-06\" is not"},
      {"shm.intra.alpha -1\n", "\"shm.intra.alpha -1\" is not"},
      {"shm.intra.alpha inf\n", "\"shm.intra.alpha inf\" is not"},
      {"alpha 1e-6\nbeta 1e-9\n", "needs lines \"alpha <s>\""},
      {"alpha 1e-6\nbeta 1e-9\nshm.intra.beta 1e-9\n", "needs lines \"alpha <s>\""},
      {"", "needs lines \"alpha <s>\""},
  };
  for (auto& c : cases) {
    cost_tune_t t = Fresh();
    std::string p = Write("bad.txt", c.text);
    EXPECT_EQ(cost_tune_load(p.c_str(), &t), WEFT_ERR_INVALID_ARGUMENT) << c.text;
    std::string msg = weft_last_error();
    EXPECT_NE(msg.find("WEFT_TUNE_FILE=" + p), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
  }
  // Only single constants: cost_model_load, which wants the whole model, refuses it.
  cost_model_t m = {};
  std::string p = Write("single_only.txt", "shm.intra.beta 1e-9\n");
  EXPECT_EQ(cost_model_load(p.c_str(), &m), WEFT_ERR_INVALID_ARGUMENT);
}

}  // namespace

// Where a host runs more ranks than it has CPUs (the model's wake), a small all-reduce and a
// barrier take the algorithms of one dependent round; where every rank has a CPU (wake 0), those
// with fewer messages, as before; and a large all-reduce keeps its bandwidth algorithm either way.
TEST(CostConstants, OneRoundWhereRanksShareCpus) {
  cost_links_t shm = {};
  shm.used[COST_SHM][COST_INTRA] = 1;
  cost_model_t m = cost_model_for(cost_constants(), &shm, 65536);
  algo_policy_t auto_all;
  ASSERT_EQ(algo_policy_parse("", &auto_all), WEFT_SUCCESS);
  auto pick = [&](weft_coll_t coll, int p, double bytes) {
    const algo_entry_t* e = nullptr;
    EXPECT_EQ(algo_choose(coll, WEFT_ALGO_AUTO, &auto_all, &m, p, bytes, nullptr, &e),
              WEFT_SUCCESS);
    return e ? e->algo : WEFT_ALGO_AUTO;
  };
  for (int p : {3, 4, 6}) {
    m.wake = 0;
    EXPECT_NE(pick(WEFT_COLL_ALL_REDUCE, p, 8), WEFT_ALGO_LINEAR) << p;
    EXPECT_NE(pick(WEFT_COLL_BARRIER, p, 0), WEFT_ALGO_LINEAR) << p;
    m.wake = COST_WAKE;
    EXPECT_EQ(pick(WEFT_COLL_ALL_REDUCE, p, 8), WEFT_ALGO_LINEAR) << p;
    EXPECT_EQ(pick(WEFT_COLL_ALL_REDUCE, p, 1024), WEFT_ALGO_LINEAR) << p;
    EXPECT_EQ(pick(WEFT_COLL_BARRIER, p, 0), WEFT_ALGO_LINEAR) << p;
    EXPECT_NE(pick(WEFT_COLL_ALL_REDUCE, p, 64 << 20), WEFT_ALGO_LINEAR) << p;
  }
  // The term is wake per round in the latency share of a round, and nothing else.
  const algo_entry_t* rd = algo_lookup(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING);
  m.wake = 1;
  EXPECT_DOUBLE_EQ(algo_predicted(rd, &m, 8, 100) - rd->cost(&m, 8, 100),
                   3 * m.alpha / (m.alpha + 100 * m.beta));
  EXPECT_EQ(algo_rounds(rd, 1), 0);
}
