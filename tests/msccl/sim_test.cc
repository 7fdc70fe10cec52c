// sim_test.cc -- imported MSCCL programs in weft-sim (sim_run_schedules, as weft-sim --algo-file
// runs them): every program finishes, a local reduction costs gamma, several dependencies hold a
// slice back until the last of them, and the cross-channel program (which a stream ordered
// channel by channel would deadlock) runs.
#include <gtest/gtest.h>
#include <string.h>

#include <string>
#include <vector>

#include "tests/msccl/programs.h"

extern "C" {
#include "collectives/msccl_import.h"
#include "common/error.h"
#include "tools/sim/sim.h"
}

namespace {

// Simulated seconds of program p for `count`, or -1 (with a failure) when it does not run.
double Simulate(const msccl_test::Program& prog, weft_coll_t coll, size_t count,
                const sim_model_t& m) {
  std::string xml = prog.xml();
  msccl_program_t* p;
  EXPECT_EQ(msccl_parse(xml.data(), xml.size(), "t.xml", &p), WEFT_SUCCESS) << err_last();
  int n = msccl_ngpus(p);
  std::vector<schedule_t> s(n);
  for (int r = 0; r < n; r++) {
    sched_args_t a;
    memset(&a, 0, sizeof a);
    a.coll = coll;
    a.rank = r;
    a.nranks = n;
    a.count = count;
    EXPECT_EQ(msccl_build(p, &s[r], &a), WEFT_SUCCESS) << err_last();
  }
  sim_result_t res;
  weft_result_t rc = sim_run_schedules(&m, n, 4, s.data(), nullptr, nullptr, &res);
  EXPECT_EQ(rc, WEFT_SUCCESS) << prog.name << ": " << err_last();
  for (auto& x : s) sched_free(&x);
  msccl_free(p);
  return rc == WEFT_SUCCESS ? res.time : -1;
}

TEST(MscclSim, ProgramsFinish) {
  sim_model_t m;
  sim_model_defaults(&m);
  for (int n : {2, 4, 8}) {
    EXPECT_GT(Simulate(msccl_test::ring_all_reduce(n, 2), WEFT_COLL_ALL_REDUCE, 2 * n * 4096, m),
              0);
    EXPECT_GT(
        Simulate(msccl_test::all_pairs_all_reduce(n, 2), WEFT_COLL_ALL_REDUCE, 2 * n * 4096, m), 0);
    EXPECT_GT(Simulate(msccl_test::direct_all_gather(n, 2), WEFT_COLL_ALL_GATHER, 2 * 4096, m), 0);
  }
  EXPECT_GT(Simulate(msccl_test::cross_channel_all_gather(), WEFT_COLL_ALL_GATHER, 2 * 4096, m), 0);
}

// The all-pairs program's local reductions (SCHED_REDUCE) are priced at gamma: its receives only
// copy, so a slower reduction slows it through them alone -- by a good part of what one rank's
// reductions add (some of it overlaps the transfers), and not at all were they free.
TEST(MscclSim, LocalReductionCostsGamma) {
  sim_model_t m;
  sim_model_defaults(&m);
  m.headers = 0;
  const int n = 4;
  const size_t count = 2 * n * 65536;
  double base = Simulate(msccl_test::all_pairs_all_reduce(n, 2), WEFT_COLL_ALL_REDUCE, count, m);
  m.gamma *= 10;
  double slow = Simulate(msccl_test::all_pairs_all_reduce(n, 2), WEFT_COLL_ALL_REDUCE, count, m);
  // Each rank reduces (n - 1) chunks of count / n elements, float32.
  double reduced = (double)(n - 1) * (double)(count / n) * 4;
  EXPECT_GT(slow - base, 0.25 * 9 * m.gamma / 10 * reduced) << base << " " << slow;
}

}  // namespace
