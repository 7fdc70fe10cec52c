// errors_test.cc -- every way a user can get weft wrong, and every way a peer can fail, ends in
// an error whose text says what happened, within the timeout: never a hang, crash or garbage.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

extern "C" {
#include "include/weft.h"
}
#include "tests/harness/mp_harness.h"

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Returns "" when result == want and the last error contains every part, else why not.
std::string expect_error(weft_result_t got, weft_result_t want, std::vector<std::string> parts) {
  std::string msg = weft_last_error();
  if (got != want)
    return std::string("result ") + weft_result_string(got) + ", want " +
           weft_result_string(want) + " (message: " + msg + ")";
  for (auto& p : parts)
    if (!contains(msg, p)) return "message \"" + msg + "\" lacks \"" + p + "\"";
  return "";
}

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// A one-rank communicator is enough for argument checks.
struct Solo : ::testing::Test {
  weft_comm_t* comm = nullptr;
  void SetUp() override {
    ASSERT_EQ(weft_comm_init(&comm, 1, 0, "127.0.0.1", mp_free_port()), WEFT_SUCCESS)
        << weft_last_error();
  }
  void TearDown() override { weft_comm_destroy(comm); }
};

TEST_F(Solo, NullBuffers) {
  float x[4] = {1, 2, 3, 4};
  EXPECT_EQ(expect_error(weft_all_reduce(nullptr, x, 4, WEFT_FLOAT32, WEFT_SUM, comm, nullptr),
                         WEFT_ERR_INVALID_ARGUMENT, {"all_reduce", "sendbuf is NULL"}),
            "");
  EXPECT_EQ(expect_error(weft_all_reduce(x, nullptr, 4, WEFT_FLOAT32, WEFT_SUM, comm, nullptr),
                         WEFT_ERR_INVALID_ARGUMENT, {"recvbuf is NULL"}),
            "");
  EXPECT_EQ(expect_error(weft_broadcast(x, nullptr, 4, WEFT_FLOAT32, 0, comm, nullptr),
                         WEFT_ERR_INVALID_ARGUMENT, {"broadcast", "recvbuf is NULL"}),
            "");
  EXPECT_EQ(expect_error(weft_broadcast(nullptr, x, 4, WEFT_FLOAT32, 0, comm, nullptr),
                         WEFT_ERR_INVALID_ARGUMENT, {"sendbuf is NULL"}),
            "");
  // Count 0 needs no buffers at all.
  EXPECT_EQ(weft_all_reduce(nullptr, nullptr, 0, WEFT_FLOAT32, WEFT_SUM, comm, nullptr),
            WEFT_SUCCESS);
  EXPECT_EQ(expect_error(weft_all_reduce(x, x, 1, WEFT_FLOAT32, WEFT_SUM, nullptr, nullptr),
                         WEFT_ERR_INVALID_ARGUMENT, {"comm is NULL"}),
            "");
}

TEST_F(Solo, UnknownDtypeOrOpOrRoot) {
  float x[4] = {};
  EXPECT_EQ(expect_error(weft_all_reduce(x, x, 4, (weft_dtype_t)42, WEFT_SUM, comm, nullptr),
                         WEFT_ERR_INVALID_ARGUMENT, {"unknown dtype 42"}),
            "");
  EXPECT_EQ(expect_error(weft_all_reduce(x, x, 4, WEFT_FLOAT32, (weft_op_t)9, comm, nullptr),
                         WEFT_ERR_INVALID_ARGUMENT, {"unknown op 9"}),
            "");
  EXPECT_EQ(expect_error(weft_broadcast(x, x, 4, WEFT_FLOAT32, 3, comm, nullptr),
                         WEFT_ERR_INVALID_ARGUMENT, {"root 3 is out of range"}),
            "");
}

TEST_F(Solo, PartialOverlapAndStreams) {
  float x[8] = {};
  EXPECT_EQ(expect_error(weft_all_reduce(x, x + 1, 4, WEFT_FLOAT32, WEFT_SUM, comm, nullptr),
                         WEFT_ERR_INVALID_ARGUMENT, {"overlap"}),
            "");
  int fake_stream;
  EXPECT_EQ(expect_error(weft_all_reduce(x, x, 4, WEFT_FLOAT32, WEFT_SUM, comm, &fake_stream),
                         WEFT_ERR_UNSUPPORTED, {"stream"}),
            "");
}

TEST(Init, RankOutOfRangeAndBadArguments) {
  weft_comm_t* comm;
  EXPECT_EQ(expect_error(weft_comm_init(&comm, 4, 4, "127.0.0.1", 29500),
                         WEFT_ERR_INVALID_ARGUMENT, {"rank 4 is out of range", "size 4"}),
            "");
  EXPECT_EQ(expect_error(weft_comm_init(&comm, 0, 0, "127.0.0.1", 29500),
                         WEFT_ERR_INVALID_ARGUMENT, {"nranks is 0"}),
            "");
  EXPECT_EQ(expect_error(weft_comm_init(&comm, 2, 1, "127.0.0.1", 70000),
                         WEFT_ERR_INVALID_ARGUMENT, {"port 70000"}),
            "");
  EXPECT_EQ(expect_error(weft_comm_init_url(&comm, "http://x:1", 2, 1), WEFT_ERR_INVALID_ARGUMENT,
                         {"http://x:1"}),
            "");
}

// Environment init runs in a child so the variables it sets cannot leak into other tests.
std::string init_env_error(std::vector<std::pair<const char*, const char*>> vars) {
  auto res = mp_run(
      1,
      [&](int, int, int) -> std::string {
        for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK",
                              "WEFT_RANK", "WEFT_WORLD_SIZE", "WEFT_INIT_URL", "OMPI_COMM_WORLD_RANK",
                              "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"})
          unsetenv(v);
        for (auto& kv : vars) setenv(kv.first, kv.second, 1);
        weft_comm_t* comm;
        weft_result_t r = weft_comm_init_env(&comm);
        if (r == WEFT_SUCCESS) return "unexpected success";
        return std::string("ERR:") + weft_last_error();
      },
      30000);
  return res[0].message;
}

TEST(InitEnv, MissingOrMalformedVariables) {
  EXPECT_TRUE(contains(init_env_error({}), "RANK")) << init_env_error({});
  std::string m = init_env_error({{"RANK", "abc"}, {"WORLD_SIZE", "2"}});
  EXPECT_TRUE(contains(m, "RANK") && contains(m, "abc")) << m;
  m = init_env_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", "29500"}});
  EXPECT_TRUE(contains(m, "RANK=2") && contains(m, "WORLD_SIZE=2")) << m;
  m = init_env_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_TRUE(contains(m, "MASTER_ADDR")) << m;
  m = init_env_error({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", "port"}});
  EXPECT_TRUE(contains(m, "MASTER_PORT")) << m;
  m = init_env_error({{"WEFT_TIMEOUT_MS", "soon"}, {"RANK", "0"}, {"WORLD_SIZE", "1"},
                      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29511"}});
  EXPECT_TRUE(contains(m, "WEFT_TIMEOUT_MS")) << m;
}

TEST(InitEnv, JoinsFromTorchrunVariables) {
  int port = mp_free_port();
  auto res = mp_run(
      3,
      [&](int rank, int, int) -> std::string {
        setenv("RANK", std::to_string(rank).c_str(), 1);
        setenv("WORLD_SIZE", "3", 1);
        setenv("MASTER_ADDR", "localhost", 1);
        setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
        weft_comm_t* comm;
        if (weft_comm_init_env(&comm) != WEFT_SUCCESS) return weft_last_error();
        int r, n, lr, ls;
        weft_comm_rank(comm, &r);
        weft_comm_size(comm, &n);
        weft_comm_local_rank(comm, &lr);
        weft_comm_local_size(comm, &ls);
        int64_t x = rank + 1, sum = 0;
        if (weft_all_reduce(&x, &sum, 1, WEFT_INT64, WEFT_SUM, comm, nullptr) != WEFT_SUCCESS)
          return weft_last_error();
        weft_comm_destroy(comm);
        // All ranks share this host, so the local rank and size come from the host identities.
        if (r != rank || n != 3 || lr != rank || ls != 3 || sum != 6)
          return "rank " + std::to_string(rank) + " saw r=" + std::to_string(r) +
                 " n=" + std::to_string(n) + " local " + std::to_string(lr) + "/" +
                 std::to_string(ls) + " sum " + std::to_string(sum);
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

TEST(Init, UnreachableMasterFailsWithinTheTimeoutNamingAddressAndPort) {
  int port = mp_free_port();  // nobody listens there
  auto res = mp_run(
      1,
      [&](int, int, int) -> std::string {
        setenv("WEFT_CONNECT_TIMEOUT_MS", "1500", 1);
        weft_comm_t* comm;
        double t0 = now_s();
        weft_result_t r = weft_comm_init(&comm, 2, 1, "127.0.0.1", port);
        double took = now_s() - t0;
        std::string err = expect_error(r, WEFT_ERR_TIMEOUT, {"127.0.0.1", std::to_string(port)});
        if (!err.empty()) return err;
        if (took > 4.0) return "took " + std::to_string(took) + " s for a 1.5 s timeout";
        return "";
      },
      30000);
  EXPECT_EQ(mp_summary(res), "");
}

TEST(Init, MasterPortInUseIsReported) {
  int port = mp_free_port();
  auto res = mp_run(
      2,
      [&](int rank, int, int) -> std::string {
        // Both ranks claim to be rank 0 of their own job: the second cannot serve the store.
        setenv("WEFT_CONNECT_TIMEOUT_MS", "3000", 1);
        if (rank == 1) usleep(300 * 1000);
        weft_comm_t* comm;
        weft_result_t r = weft_comm_init(&comm, 2, 0, "127.0.0.1", port);
        if (rank == 1)
          return r == WEFT_SUCCESS ? "second rank 0 succeeded"
                                   : expect_error(r, r, {std::to_string(port)});
        return "";  // the first one waits for a rank 1 that never comes: its error is expected
      },
      30000);
  EXPECT_EQ(res[1].message, "");
}

// Every rank of a 4-rank job runs `body`; returns each rank's message.
std::vector<RankResult> run4(std::function<std::string(int, weft_comm_t*)> body) {
  return mp_run(
      4,
      [&](int rank, int n, int port) -> std::string {
        setenv("WEFT_TIMEOUT_MS", "20000", 1);
        weft_comm_t* comm;
        if (weft_comm_init(&comm, n, rank, "127.0.0.1", port) != WEFT_SUCCESS)
          return std::string("init: ") + weft_last_error();
        return body(rank, comm);
      },
      60000);
}

TEST(PeerFailure, KilledMidCollectiveEveryOtherRankErrsWellWithinTheTimeout) {
  auto res = run4([](int rank, weft_comm_t* comm) -> std::string {
    std::vector<float> buf((size_t)64 << 20, 1.0f);
    if (rank == 2) {
      // Die for real (SIGKILL: no cleanup runs) once the collective is under way.
      signal(SIGALRM, [](int) { raise(SIGKILL); });
      ualarm(150 * 1000, 0);
    }
    double t0 = now_s();
    for (int i = 0; i < 50; i++) {
      weft_result_t r =
          weft_all_reduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32, WEFT_SUM, comm, nullptr);
      if (r != WEFT_SUCCESS) {
        double took = now_s() - t0;
        std::string msg = weft_last_error();
        if (took > 10.0) return "error only after " + std::to_string(took) + " s: " + msg;
        if (!contains(msg, "rank " + std::to_string(rank)) || !contains(msg, "all_reduce"))
          return "message does not name this rank and the call: " + msg;
        // Later calls report the failure instead of hanging.
        r = weft_barrier(comm, nullptr);
        if (r != WEFT_ERR_COMM_FAILED) return "after failure barrier returned " +
                                              std::string(weft_result_string(r));
        weft_comm_abort(comm);
        return "OK:" + msg;
      }
    }
    return "rank " + std::to_string(rank) + " never saw an error";
  });
  EXPECT_FALSE(res[2].exited) << "rank 2 should have been killed";
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(contains(res[r].message, "OK:")) << "rank " << r << ": " << res[r].message;
  }
  // A rank that exchanges data with the dead one names it (which ranks those are depends on the
  // algorithm the cost model picks: 1 and 3 in a ring, 0 and 3 in halving-doubling); the others
  // may first hear of it as an abort from a survivor.
  EXPECT_TRUE(contains(res[0].message, "rank 2") || contains(res[1].message, "rank 2") ||
              contains(res[3].message, "rank 2"))
      << res[0].message << "\n" << res[1].message << "\n" << res[3].message;
}

TEST(Mismatch, CountThatDiffersAcrossRanksIsReportedNotGarbage) {
  auto res = run4([](int rank, weft_comm_t* comm) -> std::string {
    size_t count = rank == 1 ? 999 : 1000;
    std::vector<int32_t> buf(1000, rank);
    weft_result_t r = weft_all_reduce(buf.data(), buf.data(), count, WEFT_INT32, WEFT_SUM, comm,
                                      nullptr);
    if (r == WEFT_SUCCESS) return "rank " + std::to_string(rank) + ": succeeded";
    return std::string("ERR:") + weft_result_string(r) + ": " + weft_last_error();
  });
  int mismatch_reports = 0;
  for (int r = 0; r < 4; r++) {
    EXPECT_TRUE(contains(res[r].message, "ERR:")) << "rank " << r << ": " << res[r].message;
    if (contains(res[r].message, "count 999") && contains(res[r].message, "count 1000") &&
        contains(res[r].message, "mismatch"))
      mismatch_reports++;
  }
  EXPECT_GE(mismatch_reports, 1) << mp_summary(res);
}

TEST(Mismatch, DtypeOrCollectiveThatDiffersIsReported) {
  auto res = run4([](int rank, weft_comm_t* comm) -> std::string {
    std::vector<float> buf(64, 1.0f);
    weft_result_t r;
    if (rank == 3)
      r = weft_broadcast(buf.data(), buf.data(), 64, WEFT_FLOAT32, 0, comm, nullptr);
    else
      r = weft_all_reduce(buf.data(), buf.data(), 64, WEFT_FLOAT32, WEFT_SUM, comm, nullptr);
    if (r == WEFT_SUCCESS) return "rank " + std::to_string(rank) + ": succeeded";
    return std::string("ERR:") + weft_last_error();
  });
  bool named = false;
  for (int r = 0; r < 4; r++) {
    EXPECT_TRUE(contains(res[r].message, "ERR:")) << "rank " << r << ": " << res[r].message;
    named |= contains(res[r].message, "broadcast") && contains(res[r].message, "all_reduce");
  }
  EXPECT_TRUE(named) << mp_summary(res);
}

}  // namespace
