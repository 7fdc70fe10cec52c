// solo_test.cc -- requests and splits on one-rank communicators, in one process: argument
// errors, errors reported through weft_wait, several communicators with their own progress
// threads at once, and splitting a communicator of one.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "include/weft.h"
}
#include "tests/harness/mp_harness.h"

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A communicator of one on a port that was free a moment ago. Another test process may take that
// port before the store listens on it (pick, close, listen): then another port, a few times.
weft_result_t init_solo(weft_comm_t** comm) {
  weft_result_t res = WEFT_ERR_INTERNAL;
  for (int tries = 0; tries < 8; tries++) {
    res = weft_comm_init(comm, 1, 0, "127.0.0.1", mp_free_port());
    if (res == WEFT_SUCCESS || !contains(weft_last_error(), "address already in use")) break;
  }
  return res;
}

struct Solo : ::testing::Test {
  weft_comm_t* comm = nullptr;
  void SetUp() override { ASSERT_EQ(init_solo(&comm), WEFT_SUCCESS) << weft_last_error(); }
  void TearDown() override { weft_comm_destroy(comm); }
};

TEST_F(Solo, ArgumentErrors) {
  float x[4] = {1, 2, 3, 4};
  weft_request_t* req = reinterpret_cast<weft_request_t*>(1);
  EXPECT_EQ(weft_iall_reduce(x, x, 4, WEFT_FLOAT32, WEFT_SUM, nullptr, &req),
            WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(req, nullptr);
  EXPECT_TRUE(contains(weft_last_error(), "comm is NULL")) << weft_last_error();
  EXPECT_EQ(weft_iall_reduce(x, x, 4, WEFT_FLOAT32, WEFT_SUM, comm, nullptr),
            WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(weft_call_async(nullptr, comm, &req), WEFT_ERR_INVALID_ARGUMENT);
  int done;
  EXPECT_EQ(weft_test(nullptr, &done), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(weft_wait(nullptr, -1), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(weft_comm_split(comm, -5, 0, nullptr), WEFT_ERR_INVALID_ARGUMENT);
  weft_comm_t* sub = reinterpret_cast<weft_comm_t*>(1);
  EXPECT_EQ(weft_comm_split(comm, -5, 0, &sub), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sub, nullptr);
  EXPECT_TRUE(contains(weft_last_error(), "color -5")) << weft_last_error();
  EXPECT_EQ(weft_comm_dup(nullptr, &sub), WEFT_ERR_INVALID_ARGUMENT);
}

// An operation's own error (here a bad dtype) comes back from weft_wait, with its message set for
// the waiting thread, and leaves the communicator usable.
TEST_F(Solo, AnOperationsErrorComesBackThroughWait) {
  float x[4] = {1, 2, 3, 4};
  weft_request_t* req;
  ASSERT_EQ(weft_iall_reduce(x, x, 4, (weft_dtype_t)42, WEFT_SUM, comm, &req), WEFT_SUCCESS);
  EXPECT_EQ(weft_wait(req, -1), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(weft_last_error(), "unknown dtype 42")) << weft_last_error();
  ASSERT_EQ(weft_ibroadcast(x, x, 4, WEFT_FLOAT32, 0, comm, &req), WEFT_SUCCESS);
  int done = 0;
  while (weft_test(req, &done) == WEFT_SUCCESS && !done) {
  }
  EXPECT_EQ(done, 1);
}

TEST_F(Solo, OneRankOperationsCompleteInOrder) {
  std::vector<int32_t> a(100, 7), b(100, 0);
  weft_call_t copy = {WEFT_COLL_ALL_REDUCE, a.data(), b.data(), 100,
                      WEFT_INT32,           WEFT_MAX, -1,       WEFT_ALGO_AUTO};
  weft_request_t* req[2];
  ASSERT_EQ(weft_call_async(&copy, comm, &req[0]), WEFT_SUCCESS);
  // Reads b, so it must run after the first one wrote it.
  ASSERT_EQ(weft_iall_reduce(b.data(), a.data(), 100, WEFT_INT32, WEFT_SUM, comm, &req[1]),
            WEFT_SUCCESS);
  EXPECT_EQ(weft_wait(req[1], -1), WEFT_SUCCESS);
  EXPECT_EQ(weft_wait(req[0], 5000), WEFT_SUCCESS);
  EXPECT_EQ(a[99], 7);
  EXPECT_EQ(b[0], 7);
}

// A communicator of one splits into one of one (and NOCOLOR into none).
TEST_F(Solo, SplitOfOne) {
  weft_comm_t* sub = nullptr;
  ASSERT_EQ(weft_comm_split(comm, 3, 9, &sub), WEFT_SUCCESS) << weft_last_error();
  int rank = -1, size = -1;
  weft_comm_rank(sub, &rank);
  weft_comm_size(sub, &size);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(size, 1);
  int32_t v = 5;
  EXPECT_EQ(weft_all_reduce(&v, &v, 1, WEFT_INT32, WEFT_SUM, sub, nullptr), WEFT_SUCCESS);
  weft_comm_destroy(sub);
  ASSERT_EQ(weft_comm_split(comm, WEFT_SPLIT_NOCOLOR, 0, &sub), WEFT_SUCCESS);
  EXPECT_EQ(sub, nullptr);
}

// Independent communicators, each driven by its own thread and with its own progress thread.
TEST(SoloMany, CommunicatorsOnSeveralThreadsAreIndependent) {
  const int kComms = 4;
  std::vector<std::string> errors(kComms);
  std::vector<std::thread> threads;
  for (int t = 0; t < kComms; t++) {
    threads.emplace_back([t, &errors] {
      weft_comm_t* comm;
      if (init_solo(&comm) != WEFT_SUCCESS) {
        errors[t] = weft_last_error();
        return;
      }
      std::vector<int64_t> buf(1000, t);
      std::vector<weft_request_t*> reqs(20);
      for (auto& req : reqs)
        weft_iall_reduce(buf.data(), buf.data(), buf.size(), WEFT_INT64, WEFT_SUM, comm, &req);
      for (auto* req : reqs)
        if (weft_wait(req, -1) != WEFT_SUCCESS) errors[t] = weft_last_error();
      // An error on this thread must not show on the others.
      weft_request_t* bad;
      weft_iall_reduce(buf.data(), buf.data(), 1, WEFT_INT64, (weft_op_t)(40 + t), comm, &bad);
      weft_wait(bad, -1);
      if (!contains(weft_last_error(), "unknown op " + std::to_string(40 + t)))
        errors[t] = std::string("last error is another thread's: ") + weft_last_error();
      weft_comm_destroy(comm);
      if (buf[999] != t) errors[t] = "wrong data";
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kComms; t++) EXPECT_EQ(errors[t], "") << "comm " << t;
}

}  // namespace
