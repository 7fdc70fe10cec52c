// mp_harness.h -- runs a test body as N real processes (ranks) and collects how each one ended.
//
// Typical use, in a GoogleTest test:
//   auto results = mp_run(4, [&](int rank, int nranks, int port) -> std::string {
//     ... connect to 127.0.0.1:port, do the work ...
//     if (got != want) return "rank " + std::to_string(rank) + ": got " + ...;
//     return "";
//   }, 30000);
//   EXPECT_EQ(mp_summary(results), "");
//
// The body runs in a fork()ed child, so it sees a copy of the test's memory and nothing it does
// comes back except the returned string. Report problems by returning a message: gtest assertions
// in a child only show up as "a gtest expectation failed" (their text is in the child's log).
#ifndef WEFT_TESTS_HARNESS_MP_HARNESS_H_
#define WEFT_TESTS_HARNESS_MP_HARNESS_H_

#include <functional>
#include <string>
#include <vector>

struct RankResult {
  bool exited = false;     // ended through _exit()/exit(); false if killed by a signal
  int exit_code = -1;      // when exited
  int term_signal = 0;     // when killed (SIGKILL after a timeout)
  bool timed_out = false;  // still running at the deadline, so the harness killed it
  std::string message;     // what fn returned ("" = success), or why it never returned
  double seconds = 0;      // from the start of mp_run until the rank ended
};

// Runs fn(rank, nranks, port) in `nranks` forked processes, each in its own process group, with
// one free TCP port on 127.0.0.1 shared by all of them. Waits at most timeout_ms in all, then kills
// the ranks still running (and whatever they started). Returns one result per rank, in rank order.
std::vector<RankResult> mp_run(int nranks,
                               std::function<std::string(int rank, int nranks, int port)> fn,
                               int timeout_ms);

// "" if every rank succeeded; otherwise one paragraph per failing rank saying how it failed.
std::string mp_summary(const std::vector<RankResult>& results);

// A TCP port on 127.0.0.1 that was free a moment ago (bind port 0, read it, close), or -1.
int mp_free_port();

#endif  // WEFT_TESTS_HARNESS_MP_HARNESS_H_
