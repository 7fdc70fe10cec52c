// plan_reuse_test.cc -- a kept schedule keeps the executor's layout between its calls
// (collectives/executor.c, exec_plan_t): the second and later calls of the same collective with
// the same arguments and element size set the layout's counters back instead of laying it out
// again (exec_stats_t.plans_reused counts them); another element size, count or collective lays
// it out anew; and every call, reused or not, gives exact results, over shm and TCP, with calls
// of several slices, fused ring steps, tokens and values to agree on.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

extern "C" {
#include "comm/comm.h"
}

namespace {

// Sum over ranks of (r + 1) * (i + k): exact in float32 and float64 at these sizes.
template <typename T>
std::string sum_call(weft_comm_t* comm, weft_dtype_t dtype, size_t count, int k) {
  int rank, n;
  weft_comm_rank(comm, &rank);
  weft_comm_size(comm, &n);
  std::vector<T> x(count);
  for (size_t i = 0; i < count; i++) x[i] = (T)((rank + 1) * (int)((i + k) % 1000));
  if (weft_all_reduce(x.data(), x.data(), count, dtype, WEFT_SUM, comm, nullptr) != WEFT_SUCCESS)
    return std::string("all_reduce: ") + weft_last_error();
  T ranks = (T)(n * (n + 1) / 2);
  for (size_t i = 0; i < count; i++)
    if (x[i] != ranks * (T)((i + k) % 1000))
      return "element " + std::to_string(i) + " of " + std::to_string(count) +
             " wrong: " + std::to_string((double)x[i]);
  return "";
}

// One step of a sequence: a call, and whether it may run on the layout of the call before it.
struct Step {
  const char* what;  // f32 / f64 / barrier
  size_t count;
  bool reuses;
};

std::string run_steps(const char* transport, int rank, int nranks, int port,
                      const std::vector<Step>& steps) {
  setenv("WEFT_TRANSPORT", transport, 1);
  setenv("WEFT_ALGO", "all_reduce=ring", 1);
  setenv("WEFT_SLICE_BYTES", "4096", 1);  // 3000 float32 take 3 slices, float64 6
  weft_comm_t* comm = nullptr;
  std::string err = join(rank, nranks, port, &comm);
  for (size_t i = 0; i < steps.size() && err.empty(); i++) {
    const Step& s = steps[i];
    uint64_t before = comm->exec.stats.plans_reused;
    if (std::string(s.what) == "f32")
      err = sum_call<float>(comm, WEFT_FLOAT32, s.count, (int)i);
    else if (std::string(s.what) == "f64")
      err = sum_call<double>(comm, WEFT_FLOAT64, s.count, (int)i);
    else if (weft_barrier(comm, nullptr) != WEFT_SUCCESS)
      err = std::string("barrier: ") + weft_last_error();
    uint64_t reused = comm->exec.stats.plans_reused - before;
    if (err.empty() && reused != (s.reuses ? 1u : 0u))
      err = "step " + std::to_string(i) + " (" + s.what + ", " + std::to_string(s.count) +
            "): plans_reused went up by " + std::to_string(reused) + ", expected " +
            (s.reuses ? "1" : "0");
    if (!err.empty()) err = "step " + std::to_string(i) + ": " + err;
  }
  if (comm) weft_comm_destroy(comm);
  return err;
}

// The first call lays its layout out; the same call again reuses it, also after a barrier (its
// own kept schedule and layout); float64 of the same count keeps the schedule but has more
// slices, so it is laid out again, and so is float32 after it; another count is another schedule.
const std::vector<Step> kSteps = {
    {"f32", 3000, false}, {"f32", 3000, true},  {"f32", 3000, true},  {"barrier", 0, false},
    {"f32", 3000, true},  {"barrier", 0, true}, {"f64", 3000, false}, {"f64", 3000, true},
    {"f32", 3000, false}, {"f32", 7, false},    {"f32", 7, true},     {"f32", 3000, false},
    {"f32", 3000, true},
};

TEST(PlanReuse, KeptScheduleKeepsItsLayoutOverShm) {
  for (int nranks : {2, 3}) {
    auto res = mp_run(
        nranks, [](int rank, int n, int port) { return run_steps("shm", rank, n, port, kSteps); },
        60000);
    for (int r = 0; r < nranks; r++)
      EXPECT_EQ(res[r].message, "") << nranks << " ranks, rank " << r;
  }
}

TEST(PlanReuse, KeptScheduleKeepsItsLayoutOverTcp) {
  auto res = mp_run(
      3, [](int rank, int n, int port) { return run_steps("tcp", rank, n, port, kSteps); }, 60000);
  for (int r = 0; r < 3; r++) EXPECT_EQ(res[r].message, "") << "rank " << r;
}

// Every collective and algorithm, called three times in a row with fresh buffers (in place and
// not): the second and third run on the first one's layout and are exact.
TEST(PlanReuse, RepeatedCallsOfEveryCollectiveAreExact) {
  struct Case {
    weft_coll_t coll;
    weft_algo_t algo;
  };
  const Case cases[] = {
      {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING},  // fused steps
      {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING},
      {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_TREE},
      {WEFT_COLL_BROADCAST, WEFT_ALGO_RING},
      {WEFT_COLL_REDUCE, WEFT_ALGO_RING},
      {WEFT_COLL_ALL_GATHER, WEFT_ALGO_RING},
      {WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RING},
      {WEFT_COLL_GATHER, WEFT_ALGO_AUTO},
      {WEFT_COLL_SCATTER, WEFT_ALGO_AUTO},
      {WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_AUTO},  // tokens that carry values
      {WEFT_COLL_BARRIER, WEFT_ALGO_AUTO},
  };
  for (const char* transport : {"shm", "tcp"}) {
    auto res = mp_run(
        3,
        [&](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", transport, 1);
          setenv("WEFT_SLICE_BYTES", "4096", 1);
          weft_comm_t* comm = nullptr;
          std::string err = join(rank, n, port, &comm);
          uint64_t before = err.empty() ? comm->exec.stats.plans_reused : 0;
          for (const Case& c : cases)
            for (size_t count : {1, 3000})
              for (bool in_place : {false, true})
                for (int again = 0; again < 3 && err.empty(); again++)
                  err = check_call(comm, c.coll, c.algo, WEFT_FLOAT32, WEFT_SUM, count, in_place,
                                   n - 1);
          if (err.empty() && comm->exec.stats.plans_reused - before < 2 * 2 * 2 * 5)
            err = "only " + std::to_string(comm->exec.stats.plans_reused - before) +
                  " calls ran on a kept layout";
          if (comm) weft_comm_destroy(comm);
          return err;
        },
        120000);
    for (int r = 0; r < 3; r++) EXPECT_EQ(res[r].message, "") << transport << ", rank " << r;
  }
}

}  // namespace
