// misuse_test.cc -- what a caller may do wrong with handles and threads, and what weft answers:
// weft_comm_abort from another thread while a call waits (the call returns WEFT_ERR_ABORTED
// within a bound, nothing crashes), abort racing destroy, two threads running calls on one
// communicator, and handles used after they were freed (a destroyed or aborted communicator, a
// request waited twice). Each answer is an error with a message, never a crash.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string where(int rank) { return "rank " + std::to_string(rank) + ": "; }

// Expects `got` to be `want` with a message that contains `part`; "" when it is.
std::string expect(int rank, const std::string& what, weft_result_t got, weft_result_t want,
                   const std::string& part) {
  std::string msg = got == WEFT_SUCCESS ? "" : weft_last_error();
  if (got == want && (part.empty() || contains(msg, part))) return "";
  return where(rank) + what + ": got " + weft_result_string(got) + " (" + msg + "), want " +
         weft_result_string(want) + " with '" + part + "'";
}

// A single-rank communicator on a free port, for the handle checks that need no peer.
weft_comm_t* solo() {
  weft_comm_t* comm = nullptr;
  int port = mp_free_port();
  if (weft_comm_init(&comm, 1, 0, "127.0.0.1", port) != WEFT_SUCCESS) return nullptr;
  return comm;
}

// Rank 0 blocks in an all_reduce that rank 1 does not join yet; another thread of rank 0 aborts
// the communicator. The call returns WEFT_ERR_ABORTED within the bound weft.h states (well under
// the 30 s timeout), the abort returns success, and rank 1, calling later, fails at once (its
// connection to rank 0 was reset) instead of waiting for the timeout.
TEST(Abort, FromAnotherThreadEndsTheWaitingCall) {
  setenv("WEFT_TIMEOUT_MS", "30000", 1);
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (rank == 1) {
          usleep(2000 * 1000);  // rank 0 has aborted by now
          std::vector<float> buf(1024, 1.0f);
          // The first all_reduce may still complete from what rank 0 sent before it gave up;
          // the next one has nobody to talk to.
          double t0 = now_s();
          weft_result_t r = WEFT_SUCCESS;
          for (int i = 0; i < 3 && r == WEFT_SUCCESS; i++)
            r = weft_all_reduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32, WEFT_SUM, comm,
                                nullptr);
          double took = now_s() - t0;
          weft_comm_abort(comm);
          if (r == WEFT_SUCCESS) return where(rank) + "three all_reduces succeeded";
          if (took > 5) return where(rank) + "learned of the abort only after " +
                               std::to_string(took) + " s";
          return "";
        }
        std::vector<float> buf(1024, 1.0f);
        std::atomic<int> state{0};
        weft_result_t call_res = WEFT_SUCCESS;
        std::string call_msg;
        double returned_at = 0;
        std::thread caller([&] {
          state = 1;
          call_res = weft_all_reduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32, WEFT_SUM,
                                     comm, nullptr);
          call_msg = weft_last_error();
          returned_at = now_s();
          state = 2;
        });
        while (state == 0) usleep(1000);
        usleep(300 * 1000);  // the call is waiting on rank 1 by now
        if (state != 1) {
          caller.join();
          return where(rank) + "the all_reduce returned before the abort: " + call_msg;
        }
        double aborted_at = now_s();
        weft_result_t ab = weft_comm_abort(comm);
        double abort_took = now_s() - aborted_at;
        caller.join();
        if (ab != WEFT_SUCCESS) return where(rank) + "abort: " + weft_last_error();
        if (call_res != WEFT_ERR_ABORTED || !contains(call_msg, "aborted"))
          return where(rank) + "the waiting call returned " + weft_result_string(call_res) +
                 ": " + call_msg;
        if (!contains(call_msg, "rank 1"))
          return where(rank) + "the message does not say what the call waited for: " + call_msg;
        if (returned_at - aborted_at > 2.0 || abort_took > 2.0)
          return where(rank) + "the call took " + std::to_string(returned_at - aborted_at) +
                 " s to return after the abort, the abort " + std::to_string(abort_took) + " s";
        // The handle is dead now: a call says so, another abort and a destroy do nothing.
        std::string bad = expect(rank, "all_reduce after abort",
                                 weft_all_reduce(buf.data(), buf.data(), 1, WEFT_FLOAT32, WEFT_SUM,
                                                 comm, nullptr),
                                 WEFT_ERR_ABORTED, "was aborted");
        if (bad.empty())
          bad = expect(rank, "abort after abort", weft_comm_abort(comm), WEFT_SUCCESS, "");
        if (bad.empty())
          bad = expect(rank, "destroy after abort", weft_comm_destroy(comm), WEFT_SUCCESS, "");
        return bad;
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

// Operations queued behind a waiting asynchronous one fail with WEFT_ERR_ABORTED at once when
// another thread aborts; their requests stay valid and are completed by weft_wait.
TEST(Abort, FailsQueuedRequests) {
  setenv("WEFT_TIMEOUT_MS", "30000", 1);
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (rank == 1) {
          usleep(3000 * 1000);  // never calls; leaves after rank 0 is done
          weft_comm_abort(comm);
          return "";
        }
        std::vector<float> buf(4 * 256, 1.0f);
        weft_request_t* reqs[4];
        for (int i = 0; i < 4; i++)
          if (weft_iall_reduce(&buf[i * 256], &buf[i * 256], 256, WEFT_FLOAT32, WEFT_SUM, comm,
                               &reqs[i]) != WEFT_SUCCESS)
            return where(rank) + "iall_reduce: " + weft_last_error();
        usleep(200 * 1000);
        double t0 = now_s();
        std::thread aborter([&] { weft_comm_abort(comm); });
        std::string bad;
        for (int i = 0; i < 4 && bad.empty(); i++)
          bad = expect(rank, "request " + std::to_string(i), weft_wait(reqs[i], 10000),
                       WEFT_ERR_ABORTED, "aborted");
        aborter.join();
        if (bad.empty() && now_s() - t0 > 2.0)
          bad = where(rank) + "the requests took " + std::to_string(now_s() - t0) + " s to fail";
        return bad;
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

// An abort while a call is still connecting to a peer it meets for the first time (weft connects
// the ring at init and other peers on first use): over TCP, rank 0 opens the connection to rank 2
// and waits for its answer (up to 5 s), rank 3 waits for rank 1 to connect (up to
// WEFT_TIMEOUT_MS); neither peer is in a call. Each gives up within the bound when aborted.
// A peer still inside init answers connections (its acceptor runs while it connects its ring),
// so every rank first passes a ring barrier (a ring: it connects no new pair, where a
// dissemination barrier would connect rank 0 to rank 2), and the callers wait a little longer:
// by then ranks 1 and 2 sleep outside any call, which is the case under test.
TEST(Abort, DuringAConnectOnFirstUse) {
  setenv("WEFT_TIMEOUT_MS", "30000", 1);
  setenv("WEFT_TRANSPORT", "tcp", 1);
  setenv("WEFT_ALGO", "barrier=ring", 1);
  auto results = mp_run(
      4,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (weft_barrier(comm, nullptr) != WEFT_SUCCESS)
          return where(rank) + "barrier: " + weft_last_error();
        if (rank == 1 || rank == 2) {
          usleep(2000 * 1000);
          weft_comm_abort(comm);
          return "";
        }
        usleep(200 * 1000);
        std::vector<float> buf(16, 1.0f);
        weft_result_t call_res = WEFT_SUCCESS;
        std::string call_msg;
        std::atomic<int> state{0};
        std::thread caller([&] {
          state = 1;
          call_res = rank == 0 ? weft_send(buf.data(), buf.size(), WEFT_FLOAT32, 2, comm, nullptr)
                               : weft_recv(buf.data(), buf.size(), WEFT_FLOAT32, 1, comm, nullptr);
          call_msg = weft_last_error();
          state = 2;
        });
        while (state == 0) usleep(1000);
        usleep(300 * 1000);
        double t0 = now_s();
        weft_result_t ab = weft_comm_abort(comm);
        double took = now_s() - t0;
        caller.join();
        if (ab != WEFT_SUCCESS) return where(rank) + "abort: " + weft_last_error();
        if (call_res != WEFT_ERR_ABORTED || !contains(call_msg, "aborted"))
          return where(rank) + "the connecting call returned " + weft_result_string(call_res) +
                 ": " + call_msg;
        if (took > 1.0) return where(rank) + "the abort took " + std::to_string(took) + " s";
        return "";
      },
      60000);
  unsetenv("WEFT_TRANSPORT");
  unsetenv("WEFT_ALGO");
  EXPECT_EQ(mp_summary(results), "");
}

// Two threads of one rank running calls on one communicator: the second is refused, naming the
// call the first is in, instead of interleaving their messages.
TEST(Threads, SecondRunningCallIsRefused) {
  setenv("WEFT_TIMEOUT_MS", "30000", 1);
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        std::vector<float> buf(64, 1.0f);
        std::string bad;
        if (rank == 0) {
          std::atomic<int> started{0};
          std::thread first([&] {
            started = 1;
            weft_barrier(comm, nullptr);  // waits for rank 1, which comes after the check below
          });
          while (!started) usleep(1000);
          usleep(200 * 1000);
          bad = expect(rank, "all_reduce from a second thread",
                       weft_all_reduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32, WEFT_SUM,
                                       comm, nullptr),
                       WEFT_ERR_INVALID_ARGUMENT, "another thread is inside weft_barrier");
          if (bad.empty())
            bad = expect(rank, "destroy while a call runs", weft_comm_destroy(comm),
                         WEFT_ERR_INVALID_ARGUMENT, "another thread is inside weft_barrier");
          int size = 0;
          if (bad.empty())
            bad = expect(rank, "a query while a call runs", weft_comm_size(comm, &size),
                         WEFT_SUCCESS, "");
          first.join();
        } else {
          usleep(600 * 1000);
          if (weft_barrier(comm, nullptr) != WEFT_SUCCESS)
            bad = where(rank) + "barrier: " + weft_last_error();
        }
        weft_comm_destroy(comm);
        return bad;
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

// Handles after they are freed: each use is refused with a message, nothing crashes.
TEST(Handles, UseAfterDestroyAndDoubleDestroy) {
  weft_comm_t* comm = solo();
  ASSERT_NE(comm, nullptr) << weft_last_error();
  float x = 1;
  ASSERT_EQ(weft_comm_destroy(comm), WEFT_SUCCESS);
  EXPECT_EQ(expect(0, "all_reduce after destroy",
                   weft_all_reduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm, nullptr),
                   WEFT_ERR_INVALID_ARGUMENT, "weft_all_reduce: the communicator was destroyed"),
            "");
  int rank = -1;
  EXPECT_EQ(expect(0, "rank after destroy", weft_comm_rank(comm, &rank),
                   WEFT_ERR_INVALID_ARGUMENT, "was destroyed"),
            "");
  weft_result_t async_err;
  EXPECT_EQ(expect(0, "async error after destroy", weft_comm_get_async_error(comm, &async_err),
                   WEFT_ERR_INVALID_ARGUMENT, "was destroyed"),
            "");
  weft_comm_t* dup = nullptr;
  EXPECT_EQ(expect(0, "dup after destroy", weft_comm_dup(comm, &dup), WEFT_ERR_INVALID_ARGUMENT,
                   "weft_comm_dup: the communicator was destroyed"),
            "");
  EXPECT_EQ(dup, nullptr);
  EXPECT_EQ(expect(0, "second destroy", weft_comm_destroy(comm), WEFT_ERR_INVALID_ARGUMENT,
                   "weft_comm_destroy: the communicator was destroyed"),
            "");
  EXPECT_EQ(expect(0, "abort after destroy", weft_comm_abort(comm), WEFT_ERR_INVALID_ARGUMENT,
                   "was destroyed"),
            "");
}

TEST(Handles, NeverACommunicator) {
  alignas(64) static char junk[4096];
  weft_comm_t* fake = reinterpret_cast<weft_comm_t*>(junk);
  float x = 1;
  EXPECT_EQ(expect(0, "all_reduce on a stray pointer",
                   weft_all_reduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, fake, nullptr),
                   WEFT_ERR_INVALID_ARGUMENT, "not a communicator"),
            "");
  EXPECT_EQ(expect(0, "destroy on a stray pointer", weft_comm_destroy(fake),
                   WEFT_ERR_INVALID_ARGUMENT, "not a communicator"),
            "");
}

TEST(Handles, RequestWaitedTwice) {
  weft_comm_t* comm = solo();
  ASSERT_NE(comm, nullptr) << weft_last_error();
  float x = 2;
  weft_request_t* req = nullptr;
  ASSERT_EQ(weft_iall_reduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm, &req), WEFT_SUCCESS);
  ASSERT_EQ(weft_wait(req, -1), WEFT_SUCCESS) << weft_last_error();
  EXPECT_EQ(expect(0, "second wait", weft_wait(req, -1), WEFT_ERR_INVALID_ARGUMENT,
                   "weft_wait: the request is not live"),
            "");
  int done = 0;
  EXPECT_EQ(expect(0, "test after wait", weft_test(req, &done), WEFT_ERR_INVALID_ARGUMENT,
                   "weft_test: the request is not live"),
            "");
  EXPECT_EQ(done, 0);
  // A request completed by weft_test is as dead.
  ASSERT_EQ(weft_iall_reduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm, &req), WEFT_SUCCESS);
  do {
    ASSERT_EQ(weft_test(req, &done), WEFT_SUCCESS) << weft_last_error();
  } while (!done);
  EXPECT_EQ(expect(0, "wait after test", weft_wait(req, 0), WEFT_ERR_INVALID_ARGUMENT,
                   "not live"),
            "");
  EXPECT_EQ(weft_comm_destroy(comm), WEFT_SUCCESS);
}

// A request outlives its communicator (weft.h): waiting on it after destroy still works.
TEST(Handles, RequestAfterDestroy) {
  weft_comm_t* comm = solo();
  ASSERT_NE(comm, nullptr) << weft_last_error();
  float x = 3;
  weft_request_t* req = nullptr;
  ASSERT_EQ(weft_iall_reduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm, &req), WEFT_SUCCESS);
  ASSERT_EQ(weft_comm_destroy(comm), WEFT_SUCCESS);
  EXPECT_EQ(weft_wait(req, 5000), WEFT_SUCCESS) << weft_last_error();
  EXPECT_EQ(x, 3);
}

}  // namespace
