// shm_test.cc -- the shm transport: collectives over it at several world sizes, WEFT_TRANSPORT's
// choice per peer, nothing left in /dev/shm after a job or a SIGKILL, dead peers, oversubscription.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "bootstrap/env.h"
#include "bootstrap/rendezvous.h"
#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

// Internal (comm/comm.h, which is C only): the transport carrying this rank's traffic with peer.
extern "C" const char* comm_transport_name(const weft_comm_t* comm, int peer);

namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Segments in /dev/shm that belong to the communicator rank_body's join() makes on `port`.
std::vector<std::string> Leftovers(int port) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "weft-%016llx-",
           (unsigned long long)boot_comm_id(boot_job_hash(""), "127.0.0.1", port));
  std::vector<std::string> found;
  DIR* d = opendir("/dev/shm");
  if (!d) return found;
  while (dirent* e = readdir(d))
    if (std::string(e->d_name).rfind(prefix, 0) == 0) found.push_back(e->d_name);
  closedir(d);
  return found;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + " ";
  return s;
}

// "" if every connected peer is carried by `want`, and at least one is.
std::string CheckCarriedBy(weft_comm_t* comm, const char* want) {
  int rank, n, connected = 0;
  weft_comm_rank(comm, &rank);
  weft_comm_size(comm, &n);
  for (int p = 0; p < n; p++) {
    const char* name = comm_transport_name(comm, p);
    if (!name) continue;
    connected++;
    if (std::string(name) != want)
      return "rank " + std::to_string(rank) + ": peer " + std::to_string(p) + " went over " + name +
             ", expected " + want;
  }
  return connected || n == 1 ? "" : "rank " + std::to_string(rank) + ": no peer connected";
}

const weft_coll_t kColls[] = {WEFT_COLL_ALL_REDUCE, WEFT_COLL_BROADCAST, WEFT_COLL_ALL_GATHER};

class ShmCollectives : public ::testing::TestWithParam<int> {};

// Every algorithm of all_reduce, broadcast and all_gather once per count, over shm only.
TEST_P(ShmCollectives, EveryAlgorithm) {
  int n = GetParam();
  auto results = mp_run(
      n,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "shm", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        for (weft_coll_t coll : kColls)
          for (int a = 1; a < WEFT_NUM_ALGOS && err.empty(); a++) {
            if (!weft_algo_supported(coll, (weft_algo_t)a)) continue;
            // all_gather's output is n times its count: a quarter keeps 8 ranks in memory.
            size_t big = coll == WEFT_COLL_ALL_GATHER ? (1 << 18) + 3 : (1 << 20) + 7;
            for (size_t count : {(size_t)1, (size_t)1000, big}) {
              err = check_call(comm, coll, (weft_algo_t)a, WEFT_FLOAT32, WEFT_SUM, count,
                               count == 1000, (int)(count % (size_t)n));
              if (!err.empty()) break;
            }
          }
        if (err.empty()) err = CheckCarriedBy(comm, "shm");
        weft_comm_destroy(comm);
        return err;
      },
      300000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmCollectives, ::testing::Values(2, 3, 4, 8));

// WEFT_TRANSPORT: tcp and shm force one; auto picks shm for ranks on this host (all of them here).
class TransportChoice : public ::testing::TestWithParam<const char*> {};

TEST_P(TransportChoice, CarriesTheData) {
  std::string mode = GetParam();
  int port = -1;
  auto results = mp_run(
      3,
      [&](int rank, int n, int p) -> std::string {
        if (mode != "unset")
          setenv("WEFT_TRANSPORT", mode.c_str(), 1);
        else
          unsetenv("WEFT_TRANSPORT");
        weft_comm_t* comm;
        std::string err = join(rank, n, p, &comm);
        if (!err.empty()) return err;
        err = check_all_reduce(comm, WEFT_FLOAT64, WEFT_SUM, 100000, false);
        if (err.empty()) err = CheckCarriedBy(comm, mode == "tcp" ? "tcp" : "shm");
        weft_comm_destroy(comm);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
  (void)port;
}

INSTANTIATE_TEST_SUITE_P(Modes, TransportChoice, ::testing::Values("tcp", "shm", "auto", "unset"));

TEST(Shm, BadTransportNameIsAnError) {
  auto results = mp_run(
      1,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "carrier-pigeon", 1);
        weft_comm_t* comm;
        if (weft_comm_init(&comm, n, rank, "127.0.0.1", port) == WEFT_SUCCESS)
          return "init accepted WEFT_TRANSPORT=carrier-pigeon";
        std::string msg = weft_last_error();
        return msg.find("WEFT_TRANSPORT") == std::string::npos ? "message: " + msg : "";
      },
      30000);
  EXPECT_EQ(mp_summary(results), "");
}

// After a normal job nothing of it is left in /dev/shm. The port is learnt from the ranks.
TEST(Shm, NothingLeftAfterNormalExit) {
  int port = mp_free_port();
  ASSERT_GT(port, 0);
  auto results = mp_run(
      4,
      [&](int rank, int n, int) -> std::string {
        setenv("WEFT_TRANSPORT", "shm", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        // Recursive doubling reaches non-neighbours too: more pairs than the init ring.
        err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING, WEFT_INT32,
                         WEFT_SUM, 5000, false, 0);
        weft_comm_destroy(comm);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Join(Leftovers(port)), "");
}

// A rank SIGKILLed after init: the others fail within a few seconds, a neighbour naming it, and
// nothing is left in /dev/shm (every segment was unlinked once mapped, before the kill).
TEST(Shm, KilledPeerFailsOthersAndLeavesNothing) {
  int port = mp_free_port();
  ASSERT_GT(port, 0);
  auto results = mp_run(
      3,
      [&](int rank, int n, int) -> std::string {
        setenv("WEFT_TRANSPORT", "shm", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (weft_barrier(comm, nullptr) != WEFT_SUCCESS) return weft_last_error();
        if (rank == 1) kill(getpid(), SIGKILL);
        std::vector<float> buf(1 << 20, 1.0f);
        double start = Now();
        weft_result_t r = weft_all_reduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32,
                                          WEFT_SUM, comm, nullptr);
        double took = Now() - start;
        std::string msg = weft_last_error();
        weft_comm_destroy(comm);
        if (r == WEFT_SUCCESS) return "all_reduce succeeded without rank 1";
        if (took > 5) return "failed only after " + std::to_string(took) + " s: " + msg;
        return "FAILED AS EXPECTED: " + msg;
      },
      60000);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_FALSE(results[1].exited);
  EXPECT_EQ(results[1].term_signal, SIGKILL);
  bool named = false;
  for (int r : {0, 2}) {
    EXPECT_EQ(results[r].message.rfind("FAILED AS EXPECTED: ", 0), 0u) << results[r].message;
    named |= results[r].message.find("rank 1 (pid") != std::string::npos;
  }
  EXPECT_TRUE(named) << results[0].message << "\n" << results[2].message;
  printf("rank 0: %s\nrank 2: %s\n", results[0].message.c_str(), results[2].message.c_str());
  EXPECT_EQ(Join(Leftovers(port)), "");
}

// 8 ranks pinned to 2 cores: ranks that spin instead of sleeping would starve the peers they
// wait for; with the futex doorbell this takes seconds, not the timeout.
TEST(Shm, OversubscribedRanksDoNotStarve) {
  auto results = mp_run(
      8,
      [](int rank, int n, int port) -> std::string {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        CPU_SET(1, &set);
        sched_setaffinity(0, sizeof set, &set);
        setenv("WEFT_TRANSPORT", "shm", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        double start = Now();
        for (int i = 0; i < 3 && err.empty(); i++)
          err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, WEFT_FLOAT32, WEFT_SUM,
                           (1 << 20) + 7, false, 0);
        for (int i = 0; i < 50 && err.empty(); i++)
          if (weft_barrier(comm, nullptr) != WEFT_SUCCESS) err = weft_last_error();
        double took = Now() - start;
        weft_comm_destroy(comm);
        if (err.empty() && took > 30) err = "took " + std::to_string(took) + " s";
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
}

// WEFT_SPIN_US=0: every wait announces its sleep and sleeps at once, so every message meets a
// sleeper or one about to sleep (shm_bell_ring's fence against shm_bell_announce_sleep's). A lost
// wake-up costs the wait slice (200 ms): 400 small calls would take 80 s or more, not a second.
TEST(Shm, SleepersAreWokenByEveryMessage) {
  auto results = mp_run(
      4,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "shm", 1);
        setenv("WEFT_SPIN_US", "0", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        double start = Now();
        for (int i = 0; i < 200 && err.empty(); i++) {
          err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, WEFT_FLOAT32, WEFT_SUM,
                           i % 2 ? 2 : 3000, i % 3 == 0, 0);
          if (err.empty() && weft_barrier(comm, nullptr) != WEFT_SUCCESS) err = weft_last_error();
        }
        double took = Now() - start;
        weft_comm_destroy(comm);
        if (err.empty() && took > 20) err = "took " + std::to_string(took) + " s";
        return err;
      },
      240000);
  EXPECT_EQ(mp_summary(results), "");
}

}  // namespace
