// timeout_test.cc -- a rank that never makes a call: its peers fail with WEFT_ERR_TIMEOUT within
// WEFT_TIMEOUT_MS plus a small slack, and the message leads with "Timed out" (the words torch's
// backends use) followed by weft's detail: the rank, the call, the peer, the step and the knob.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

extern "C" {
#include "include/weft.h"
}
#include "tests/harness/mp_harness.h"

namespace {

constexpr int kTimeoutMs = 1000;
// How late after the timeout an error may arrive: weft adds no wait of its own, so this is the
// scheduling of a loaded 2-core machine (measured: 0-20 ms idle).
constexpr double kSlackS = 0.5;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Checks a rank's failed call: when it came, and, for a timeout, what its message says. A rank
// whose peer gave up first may see that peer close instead (REMOTE); it must still be prompt.
std::string check_failure(int rank, const char* call, weft_result_t r, double took,
                          bool* timed_out) {
  std::string msg = weft_last_error();
  char when[64];
  snprintf(when, sizeof when, " after %.3f s", took);
  std::string where = "rank " + std::to_string(rank) + ": " + weft_result_string(r) + when + ": ";
  if (r == WEFT_SUCCESS) return where + "succeeded without the missing rank";
  if (took > kTimeoutMs / 1000.0 + kSlackS) return where + "too late: " + msg;
  if (r != WEFT_ERR_TIMEOUT) return r == WEFT_ERR_REMOTE ? "" : where + msg;
  *timed_out = true;
  if (took < kTimeoutMs / 1000.0 * 0.95) return where + "before the timeout: " + msg;
  std::string lead = "Timed out: rank " + std::to_string(rank) + ": " + call + " #";
  if (msg.rfind(lead, 0) != 0) return where + "does not start with \"" + lead + "\": " + msg;
  // The peer it waited on and where: "receiving from rank 2 at the call description".
  for (const char* part : {"no progress for", "(WEFT_TIMEOUT_MS) ", "ing ", " rank ", " at "})
    if (!contains(msg, part)) return where + "lacks \"" + part + "\": " + msg;
  fprintf(stderr, "rank %d:%s: %s\n", rank, when, msg.c_str());
  return "";
}

// Every rank but `missing` calls `call` once; `missing` stays away until the others are done.
std::vector<RankResult> run_without(int nranks, int missing, const char* call) {
  return mp_run(
      nranks,
      [&](int rank, int n, int port) -> std::string {
        setenv("WEFT_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
        weft_comm_t* comm;
        if (weft_comm_init(&comm, n, rank, "127.0.0.1", port) != WEFT_SUCCESS)
          return std::string("init: ") + weft_last_error();
        if (rank == missing) {
          usleep((kTimeoutMs * 3) * 1000);
          weft_comm_abort(comm);
          return "";
        }
        std::vector<float> buf(1024, 1.0f);
        double t0 = now_s();
        weft_result_t r = std::string(call) == "barrier"
                              ? weft_barrier(comm, nullptr)
                              : weft_all_reduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32,
                                                WEFT_SUM, comm, nullptr);
        double took = now_s() - t0;
        bool timed_out = false;
        std::string err = check_failure(rank, call, r, took, &timed_out);
        weft_comm_abort(comm);
        if (!err.empty()) return err;
        return timed_out ? "" : "REMOTE";  // told by a peer, not timed out itself
      },
      30000);
}

// At least one rank must time out itself (the one waiting on the missing rank); the others
// either time out too or hear of it from that one. None may be late or vague.
void expect_prompt_timeouts(const std::vector<RankResult>& res, int missing) {
  int timeouts = 0;
  for (int r = 0; r < (int)res.size(); r++) {
    if (r == missing) continue;
    if (res[r].message.empty())
      timeouts++;
    else
      EXPECT_EQ(res[r].message, "REMOTE") << mp_summary(res);
  }
  EXPECT_GE(timeouts, 1) << mp_summary(res);
}

TEST(Timeout, BarrierWithARankMissingSaysTimedOutWithinTheBound) {
  auto res = run_without(3, 2, "barrier");
  expect_prompt_timeouts(res, 2);
}

TEST(Timeout, AllReduceWithARankMissingSaysTimedOutWithinTheBound) {
  auto res = run_without(2, 0, "all_reduce");
  expect_prompt_timeouts(res, 0);
}

}  // namespace
