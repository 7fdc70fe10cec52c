// algos_test.cc -- -A against the algorithms this build has, and the cost model's pick. Written
// so that it holds whatever algorithms the build gains: it asks weft_algo_supported, and only
// assumes the ring all-reduce.
#include "tools/bench/algos.h"

#include <gtest/gtest.h>

#include <string>

#include "tools/bench/model.h"

namespace {

std::string Resolve(bench_coll_t c, const char *name, int *n, weft_algo_t *out = nullptr) {
  weft_algo_t buf[WEFT_NUM_ALGOS];
  char err[512] = "";
  *n = bench_algos_resolve(c, name, out ? out : buf, WEFT_NUM_ALGOS, err, sizeof err);
  return err;
}

TEST(Algos, AllListsWhatIsSupportedInOrder) {
  for (int c = 0; c < BENCH_NUM_COLLS; c++) {
    bench_coll_t coll = static_cast<bench_coll_t>(c);
    weft_algo_t out[WEFT_NUM_ALGOS];
    int n;
    std::string err = Resolve(coll, "all", &n, out);
    int expect = 0;
    for (int a = 1; a < WEFT_NUM_ALGOS; a++) {
      expect += bench_algo_supported(coll, static_cast<weft_algo_t>(a));
    }
    if (expect == 0) {
      EXPECT_EQ(n, -1);
      EXPECT_NE(err.find("has no algorithm for"), std::string::npos) << err;
      continue;
    }
    ASSERT_EQ(n, expect) << bench_coll_name(coll);
    for (int i = 0; i < n; i++) {
      EXPECT_NE(out[i], WEFT_ALGO_AUTO);
      EXPECT_TRUE(bench_algo_supported(coll, out[i]));
      if (i > 0) {
        EXPECT_LT(out[i - 1], out[i]);
      }
    }
  }
  int n;
  Resolve(BENCH_ALL_REDUCE, "all", &n);
  EXPECT_GE(n, 1);
}

TEST(Algos, OneName) {
  weft_algo_t out[WEFT_NUM_ALGOS];
  int n;
  Resolve(BENCH_ALL_REDUCE, "ring", &n, out);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(out[0], WEFT_ALGO_RING);
  Resolve(BENCH_SENDRECV, "auto", &n, out);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(out[0], WEFT_ALGO_AUTO);
}

TEST(Algos, UnknownName) {
  int n;
  std::string err = Resolve(BENCH_ALL_REDUCE, "bogus", &n);
  EXPECT_EQ(n, -1);
  EXPECT_EQ(err.rfind("-A: unknown algorithm 'bogus' (known: auto ring tree", 0), 0u) << err;
  EXPECT_NE(err.find(" all)"), std::string::npos) << err;
}

// dissemination is a barrier algorithm only; all_reduce never has it.
TEST(Algos, UnsupportedNamesWhatThereIs) {
  int n;
  std::string err = Resolve(BENCH_ALL_REDUCE, "dissemination", &n);
  EXPECT_EQ(n, -1);
  EXPECT_EQ(
      err.rfind("-A: all_reduce has no 'dissemination' algorithm in this build (it has: ring", 0),
      0u)
      << err;
}

// gather and scatter: -A all times the binomial tree and the linear schedule, in that order;
// either name alone gives that one, and a name they lack lists the two.
TEST(Algos, AllToAllHasPairwiseAndBruck) {
  weft_algo_t out[WEFT_NUM_ALGOS];
  int n;
  Resolve(BENCH_ALL_TO_ALL, "all", &n, out);
  ASSERT_EQ(n, 2);
  Resolve(BENCH_ALL_TO_ALL, "bruck", &n, out);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(out[0], WEFT_ALGO_BRUCK);
  Resolve(BENCH_ALL_TO_ALL, "pairwise", &n, out);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(out[0], WEFT_ALGO_PAIRWISE);
  std::string err = Resolve(BENCH_ALL_TO_ALL, "ring", &n);
  EXPECT_EQ(n, -1);
  EXPECT_NE(err.find("alltoall has no 'ring' algorithm"), std::string::npos) << err;
}

TEST(Algos, GatherAndScatterHaveTreeAndLinear) {
  for (bench_coll_t c : {BENCH_GATHER, BENCH_SCATTER}) {
    weft_algo_t out[WEFT_NUM_ALGOS];
    int n;
    Resolve(c, "all", &n, out);
    ASSERT_EQ(n, 2) << bench_coll_name(c);
    EXPECT_EQ(out[0], WEFT_ALGO_TREE);
    EXPECT_EQ(out[1], WEFT_ALGO_LINEAR);
    Resolve(c, "linear", &n, out);
    ASSERT_EQ(n, 1);
    EXPECT_EQ(out[0], WEFT_ALGO_LINEAR);
    Resolve(c, "tree", &n, out);
    ASSERT_EQ(n, 1);
    EXPECT_EQ(out[0], WEFT_ALGO_TREE);
    std::string err = Resolve(c, "ring", &n);
    EXPECT_EQ(n, -1);
    EXPECT_EQ(err, std::string("-A: ") + bench_coll_name(c) +
                       " has no 'ring' algorithm in this build (it has: tree, linear)");
  }
  // all_reduce has a linear algorithm too (one round, for ranks that share CPUs); broadcast none.
  int n;
  weft_algo_t out[WEFT_NUM_ALGOS];
  Resolve(BENCH_ALL_REDUCE, "linear", &n, out);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(out[0], WEFT_ALGO_LINEAR);
  std::string err = Resolve(BENCH_BROADCAST, "linear", &n);
  EXPECT_EQ(n, -1) << err;
}

TEST(Algos, SendrecvNeedsBothHalves) {
  for (int a = 0; a < WEFT_NUM_ALGOS; a++) {
    weft_algo_t algo = static_cast<weft_algo_t>(a);
    EXPECT_EQ(
        bench_algo_supported(BENCH_SENDRECV, algo),
        weft_algo_supported(WEFT_COLL_SEND, algo) && weft_algo_supported(WEFT_COLL_RECV, algo));
  }
}

// The pick is the library's: a supported algorithm of least predicted cost, whatever the sizes,
// world sizes and model; and it moves with the model (latency-bound vs bandwidth-bound).
TEST(Model, PickIsTheCheapestSupported) {
  bench_tune_t models[] = {{30e-6, 1 / 1.5e9, 1 / 4e9}, {1e-3, 1e-12, 1e-12}, {1e-9, 1e-8, 1e-8}};
  for (const bench_tune_t &t : models) {
    for (int c = 0; c < BENCH_NUM_COLLS; c++) {
      bench_coll_t coll = static_cast<bench_coll_t>(c);
      if (coll == BENCH_SENDRECV) continue;
      for (int p : {2, 3, 4, 8, 16}) {
        for (double bytes : {0.0, 4096.0, 1048576.0, 268435456.0}) {
          weft_algo_t pick = bench_model_pick(coll, &t, p, bytes);
          int n;
          weft_algo_t all[WEFT_NUM_ALGOS];
          Resolve(coll, "all", &n, all);
          if (n < 0) {
            EXPECT_EQ(pick, WEFT_NUM_ALGOS);
            continue;
          }
          ASSERT_TRUE(bench_algo_supported(coll, pick)) << c << " " << p << " " << bytes;
          double best = bench_model_cost(coll, pick, &t, p, bytes);
          for (int i = 0; i < n; i++) {
            double cost = bench_model_cost(coll, all[i], &t, p, bytes);
            if (cost >= 0) {
              EXPECT_LE(best, cost) << c << " " << weft_algo_name(all[i]);
            }
          }
        }
      }
    }
  }
}

TEST(Model, CostOfRingAllReduceFollowsItsFormula) {
  bench_tune_t t = {10e-6, 1e-9, 5e-10};
  double n = 1 << 20;
  EXPECT_NEAR(bench_model_cost(BENCH_ALL_REDUCE, WEFT_ALGO_RING, &t, 4, n),
              // The call description, then 6 steps of a 256 KiB chunk in four 64 KiB slices; the
              // reductions hide behind the transfers, so the busiest port sets the time.
              10e-6 + 40e-9 + 6 * (4 * 10e-6 + n / 4 * 1e-9), 1e-12);
  EXPECT_LT(bench_model_cost(BENCH_ALL_REDUCE, WEFT_ALGO_DISSEMINATION, &t, 4, n), 0.0);
}

}  // namespace
