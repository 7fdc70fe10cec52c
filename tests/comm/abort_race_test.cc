// abort_race_test.cc -- the thread combinations weft.h allows, hammered at random timings (and
// run under ThreadSanitizer by scripts/test.sh): weft_comm_abort racing a blocking call, an
// asynchronous one being waited on, and weft_comm_destroy; calls on communicators split from one
// another, each on its own thread, while a third thread reads their state.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

std::string where(int rank, int round) {
  return "rank " + std::to_string(rank) + ", round " + std::to_string(round) + ": ";
}

bool one_of(weft_result_t r, std::initializer_list<weft_result_t> ok) {
  for (weft_result_t o : ok)
    if (r == o) return true;
  return false;
}

// All-reduces on `comm` until one fails or `max` succeeded; each success is checked (the sum of
// rank + 1 over the ranks). Async: iall_reduce then weft_wait, so the abort meets a waiter.
weft_result_t reduce_until_error(weft_comm_t* comm, int n, int max, bool async, std::string* bad) {
  std::vector<int32_t> buf(512);
  int rank = 0;
  weft_comm_rank(comm, &rank);
  for (int i = 0; i < max; i++) {
    std::fill(buf.begin(), buf.end(), rank + 1);
    weft_result_t r;
    if (async) {
      weft_request_t* req;
      r = weft_iall_reduce(buf.data(), buf.data(), buf.size(), WEFT_INT32, WEFT_SUM, comm, &req);
      if (r == WEFT_SUCCESS) r = weft_wait(req, -1);
    } else {
      r = weft_all_reduce(buf.data(), buf.data(), buf.size(), WEFT_INT32, WEFT_SUM, comm,
                          nullptr);
    }
    if (r != WEFT_SUCCESS) return r;
    if (buf[0] != n * (n + 1) / 2 || buf[511] != n * (n + 1) / 2)
      *bad = "all_reduce gave " + std::to_string(buf[0]);
  }
  return WEFT_SUCCESS;
}

// Rank 0 aborts while its other thread is in a call (or between calls); rank 1 calls until the
// abort reaches it, then aborts its side.
std::string abort_races_a_call(int rank, int n, int round, weft_comm_t* child, std::mt19937& rng) {
  std::string bad;
  bool async = round % 2 == 1;
  if (rank == 1) {
    weft_result_t r = reduce_until_error(child, n, 100000, async, &bad);
    weft_comm_abort(child);
    if (!one_of(r, {WEFT_ERR_REMOTE, WEFT_ERR_COMM_FAILED, WEFT_ERR_TIMEOUT}))
      return where(rank, round) + "calls ended with " + weft_result_string(r) + ": " +
             weft_last_error();
    return bad.empty() ? "" : where(rank, round) + bad;
  }
  weft_result_t call_res = WEFT_SUCCESS;
  std::string call_msg;
  std::thread caller([&] {
    call_res = reduce_until_error(child, n, 100000, async, &bad);
    call_msg = weft_last_error();
  });
  usleep(rng() % 20000);
  weft_result_t ab = weft_comm_abort(child);
  caller.join();
  if (ab != WEFT_SUCCESS) return where(rank, round) + "abort: " + weft_last_error();
  // Aborted inside a call, or refused at entry after the abort; a peer's reset may come first.
  if (!one_of(call_res, {WEFT_ERR_ABORTED, WEFT_ERR_REMOTE, WEFT_ERR_COMM_FAILED}))
    return where(rank, round) + "the call ended with " + weft_result_string(call_res) + ": " +
           call_msg;
  return bad.empty() ? "" : where(rank, round) + bad;
}

// Destroy and abort at once on both ranks: one of them closes, the other returns success or
// (when it came after the close) that the communicator was destroyed.
std::string abort_races_destroy(int rank, int round, weft_comm_t* child) {
  std::atomic<int> go{0};
  weft_result_t d = WEFT_SUCCESS, a = WEFT_SUCCESS;
  std::string dmsg, amsg;
  std::thread destroyer([&] {
    while (!go) {
    }
    d = weft_comm_destroy(child);
    dmsg = weft_last_error();
  });
  std::thread aborter([&] {
    while (!go) {
    }
    a = weft_comm_abort(child);
    amsg = weft_last_error();
  });
  go = 1;
  destroyer.join();
  aborter.join();
  // Destroy during or after an abort waits for it and succeeds; abort during a destroy hurries
  // it and succeeds, after a finished destroy it is refused as a use after destroy.
  bool d_ok = d == WEFT_SUCCESS;
  bool a_ok = a == WEFT_SUCCESS ||
              (a == WEFT_ERR_INVALID_ARGUMENT && amsg.find("was destroyed") != std::string::npos);
  if (!d_ok || !a_ok)
    return where(rank, round) + "destroy: " + weft_result_string(d) + " (" + dmsg +
           "), abort: " + weft_result_string(a) + " (" + amsg + ")";
  return "";
}

// Two communicators from one, a thread each running calls, and a third thread reading both.
std::string split_comms_on_threads(int rank, int n, int round, weft_comm_t* parent) {
  weft_comm_t* c[2];
  for (int k = 0; k < 2; k++)
    if (weft_comm_dup(parent, &c[k]) != WEFT_SUCCESS)
      return where(rank, round) + "dup: " + weft_last_error();
  std::string bad[2];
  weft_result_t res[2];
  std::atomic<int> running{2};
  std::thread readers([&] {
    while (running > 0) {
      for (int k = 0; k < 2; k++) {
        weft_result_t e;
        int size;
        weft_comm_get_async_error(c[k], &e);
        weft_comm_size(c[k], &size);
      }
    }
  });
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; k++)
    threads.emplace_back([&, k] {
      res[k] = reduce_until_error(c[k], n, 20, k == 1, &bad[k]);
      running--;
    });
  for (auto& t : threads) t.join();
  readers.join();
  std::string out;
  for (int k = 0; k < 2; k++) {
    if (res[k] != WEFT_SUCCESS)
      out += where(rank, round) + "comm " + std::to_string(k) + ": " + weft_result_string(res[k]);
    if (!bad[k].empty()) out += where(rank, round) + bad[k];
    weft_comm_destroy(c[k]);
  }
  return out;
}

TEST(AbortRace, AllowedThreadCombinations) {
  setenv("WEFT_TIMEOUT_MS", "20000", 1);
  const int rounds = 60;
  auto results = mp_run(
      2,
      [&](int rank, int n, int port) -> std::string {
        weft_comm_t* parent;
        std::string err = join(rank, n, port, &parent);
        if (!err.empty()) return err;
        std::mt19937 rng(1234 + rank);
        for (int round = 0; round < rounds && err.empty(); round++) {
          if (round % 3 == 2) {
            err = split_comms_on_threads(rank, n, round, parent);
          } else {
            weft_comm_t* child;
            if (weft_comm_dup(parent, &child) != WEFT_SUCCESS)
              return where(rank, round) + "dup: " + weft_last_error();
            // Every rank has finished the dup: an abort earlier may fail a peer's dup instead.
            if (weft_barrier(parent, nullptr) != WEFT_SUCCESS)
              return where(rank, round) + "barrier after dup: " + weft_last_error();
            err = round % 3 == 0 ? abort_races_a_call(rank, n, round, child, rng)
                                 : abort_races_destroy(rank, round, child);
          }
          // Both ranks finish the round before the next dup.
          if (err.empty() && weft_barrier(parent, nullptr) != WEFT_SUCCESS)
            err = where(rank, round) + "barrier: " + weft_last_error();
        }
        weft_comm_destroy(parent);
        return err;
      },
      240000);
  EXPECT_EQ(mp_summary(results), "");
}

}  // namespace
