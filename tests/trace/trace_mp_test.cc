// trace_mp_test.cc -- WEFT_TRACE across real processes: 3 ranks run an all-reduce and a broadcast
// and each writes a trace with its own track, the ring's and the chain's peers, reductions and
// waits; with tracing off nothing is written; the event cap truncates and says so.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/harness/mp_harness.h"
#include "tests/trace/trace_check.h"

extern "C" {
#include "include/weft.h"
}

namespace {

// Enough elements for several 64 KiB slices per ring chunk.
const size_t kCount = 100000;

// How long the late rank holds the all-reduce up: the others must block in poll meanwhile.
const int kLateMs = 50;

// Joins, runs an all-reduce (rank `late` enters it kLateMs late) and a broadcast from rank 0,
// checks the values, destroys.
std::string AllReduceThenBroadcast(int rank, int n, int port, int late) {
  weft_comm_t* comm;
  if (weft_comm_init(&comm, n, rank, "127.0.0.1", port) != WEFT_SUCCESS)
    return "rank " + std::to_string(rank) + ": init: " + weft_last_error();
  std::vector<float> x(kCount, static_cast<float>(rank + 1));
  if (rank == late) usleep(kLateMs * 1000);
  if (weft_all_reduce(x.data(), x.data(), kCount, WEFT_FLOAT32, WEFT_SUM, comm, nullptr) !=
      WEFT_SUCCESS)
    return std::string("all_reduce: ") + weft_last_error();
  float want = static_cast<float>(n * (n + 1) / 2);
  if (x[0] != want || x[kCount - 1] != want) return "all_reduce: wrong sum";
  std::vector<float> y(kCount, rank == 0 ? 42.0f : 0.0f);
  if (weft_broadcast(y.data(), y.data(), kCount, WEFT_FLOAT32, 0, comm, nullptr) != WEFT_SUCCESS)
    return std::string("broadcast: ") + weft_last_error();
  if (y[kCount - 1] != 42.0f) return "broadcast: wrong data";
  if (weft_comm_destroy(comm) != WEFT_SUCCESS) return std::string("destroy: ") + weft_last_error();
  return "";
}

std::string OnTime(int rank, int n, int port) { return AllReduceThenBroadcast(rank, n, port, -1); }

class TraceEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    ASSERT_NE(dir_, "");
    // The ring and the chain are the algorithms whose peers the checks below know.
    setenv("WEFT_ALGO", "ring", 1);
    unsetenv("WEFT_TRACE_MAX_EVENTS");
  }
  void TearDown() override {
    unsetenv("WEFT_TRACE");
    unsetenv("WEFT_ALGO");
    unsetenv("WEFT_TRACE_MAX_EVENTS");
  }
  std::string dir_;
};

TEST_F(TraceEnv, EveryRankTracesItsStepsWithTheirPeers) {
  const int n = 3;
  std::string base = dir_ + "/job";
  setenv("WEFT_TRACE", base.c_str(), 1);
  int64_t start = RealtimeNs();
  auto body = [](int rank, int n, int port) { return AllReduceThenBroadcast(rank, n, port, 1); };
  EXPECT_EQ(mp_summary(mp_run(n, body, 60000)), "");
  int64_t end = RealtimeNs();
  EXPECT_EQ(ListDir(dir_),
            (std::vector<std::string>{"job.rank0.json", "job.rank1.json", "job.rank2.json"}));
  for (int r = 0; r < n; r++) {
    SCOPED_TRACE("rank " + std::to_string(r));
    std::string text = ReadFile(base + ".rank" + std::to_string(r) + ".json");
    ASSERT_EQ(JsonShapeError(text), "") << text.substr(0, 2000);
    auto evs = Events(text);
    int right = (r + 1) % n, left = (r + n - 1) % n;
    const int pid = r + 1;  // not 0: Perfetto reserves pid 0 for the kernel's idle process
    std::string to_right = "\"peer\":" + std::to_string(right) + ",";
    std::string from_left = "\"peer\":" + std::to_string(left) + ",";
    EXPECT_EQ(
        Find(evs, "process_name", pid, {"\"name\":\"rank " + std::to_string(r) + "\""}).size(), 1u);
    // Every event is on this rank's track.
    for (const Event& e : evs) EXPECT_EQ(e.pid, pid) << e.line;

    // Ring all-reduce: data goes right, comes from the left and is reduced as it arrives.
    const std::string ar = "\"coll\":\"all_reduce\"";
    EXPECT_GE(Find(evs, "send", pid, {ar, to_right, "\"bytes\":65536"}).size(), 4u);
    EXPECT_EQ(Find(evs, "send", pid, {ar, from_left}).size(), 0u) << "ring sends only to the right";
    EXPECT_GE(Find(evs, "recv", pid, {ar, from_left}).size(), 4u);
    // Fused: each arriving slice is reduced straight into the right neighbour's slot, one event
    // per slice named after the step, and no separate reduce (or copy) events.
    size_t fused = Find(evs, "recv-reduce-send", pid, {ar, from_left}).size() +
                   Find(evs, "recv-reduce-copy-send", pid, {ar, from_left}).size();
    EXPECT_GE(fused, 2u);
    EXPECT_GE(Find(evs, "recv-reduce-copy-send", pid, {ar, from_left}).size(), 1u);
    EXPECT_EQ(Find(evs, "reduce", pid, {ar, from_left}).size(), 0u);
    EXPECT_EQ(Find(evs, "send desc", pid, {ar, to_right, "\"step\":-1,"}).size(), 1u);
    EXPECT_EQ(Find(evs, "recv desc", pid, {ar, from_left}).size(), 1u);
    // 4 steps of the ring (2(p-1)), each of at least one slice.
    for (int step = 0; step < 2 * (n - 1); step++)
      EXPECT_GE(Find(evs, "send", pid, {ar, "\"step\":" + std::to_string(step) + ","}).size(), 1u)
          << "step " << step;

    // Chain broadcast from 0: 0 -> 1 -> 2, no reductions.
    const std::string bc = "\"coll\":\"broadcast\"";
    EXPECT_EQ(Find(evs, "send", pid, {bc}).size() > 0, r < n - 1);
    EXPECT_EQ(Find(evs, "recv", pid, {bc}).size() > 0, r > 0);
    if (r < n - 1) {
      EXPECT_EQ(Find(evs, "send", pid, {bc}).size(), Find(evs, "send", pid, {bc, to_right}).size());
    }
    if (r > 0) {
      EXPECT_EQ(Find(evs, "recv", pid, {bc}).size(),
                Find(evs, "recv", pid, {bc, from_left}).size());
    }
    EXPECT_EQ(Find(evs, "reduce", pid, {bc}).size(), 0u);
    // Waiting for the late rank 1 is time blocked in poll, on the executor's track.
    if (r != 1) {
      int64_t waited = 0;
      for (const Event& e : Find(evs, "wait", pid, {ar})) waited += e.dur_ns;
      EXPECT_GE(waited, (kLateMs - 10) * 1000000LL);
    }

    // Tracks named, events on one track never overlap, and all lie within the test's run on
    // the wall clock that every rank shares.
    EXPECT_EQ(Find(evs, "thread_name", pid, {"send to " + std::to_string(right)}).size(), 1u);
    EXPECT_EQ(Find(evs, "thread_name", pid, {"recv from " + std::to_string(left)}).size(), 1u);
    EXPECT_EQ(OverlapError(evs), "");
    for (const Event& e : evs)
      if (e.ph == "X") {
        EXPECT_GE(e.ts_ns, start - 1000) << e.line;
        EXPECT_LE(e.ts_ns + e.dur_ns, end + 1000) << e.line;
      }
    EXPECT_EQ(text.find("trace truncated"), std::string::npos);
  }
}

TEST_F(TraceEnv, TracingOffWritesNothing) {
  for (const char* value : {static_cast<const char*>(nullptr), ""}) {
    if (value)
      setenv("WEFT_TRACE", value, 1);
    else
      unsetenv("WEFT_TRACE");
    std::string dir = dir_;
    auto results = mp_run(
        3,
        [dir](int rank, int n, int port) -> std::string {
          // Where a trace with a relative name would land.
          if (chdir(dir.c_str()) != 0) return "chdir failed";
          return OnTime(rank, n, port);
        },
        60000);
    EXPECT_EQ(mp_summary(results), "");
    EXPECT_EQ(ListDir(dir_), std::vector<std::string>{}) << (value ? "WEFT_TRACE=\"\"" : "unset");
  }
}

TEST_F(TraceEnv, CapTruncatesAndTheFileSaysSo) {
  std::string base = dir_ + "/capped";
  setenv("WEFT_TRACE", base.c_str(), 1);
  setenv("WEFT_TRACE_MAX_EVENTS", "5", 1);
  EXPECT_EQ(mp_summary(mp_run(2, OnTime, 60000)), "");
  for (int r = 0; r < 2; r++) {
    std::string text = ReadFile(base + ".rank" + std::to_string(r) + ".json");
    ASSERT_EQ(JsonShapeError(text), "") << text;
    int complete = 0;
    for (const Event& e : Events(text)) complete += e.ph == "X";
    EXPECT_EQ(complete, 5) << text;
    EXPECT_NE(text.find("trace truncated"), std::string::npos) << text;
    EXPECT_NE(text.find("WEFT_TRACE_MAX_EVENTS"), std::string::npos) << text;
  }
}

// An aborting rank is usually the one whose trace explains the failure.
TEST_F(TraceEnv, AbortWritesTheTraceToo) {
  std::string base = dir_ + "/aborted";
  setenv("WEFT_TRACE", base.c_str(), 1);
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        if (weft_comm_init(&comm, n, rank, "127.0.0.1", port) != WEFT_SUCCESS)
          return std::string("init: ") + weft_last_error();
        std::vector<float> x(kCount, 1.0f);
        if (weft_all_reduce(x.data(), x.data(), kCount, WEFT_FLOAT32, WEFT_SUM, comm, nullptr) !=
            WEFT_SUCCESS)
          return std::string("all_reduce: ") + weft_last_error();
        if (weft_comm_abort(comm) != WEFT_SUCCESS)
          return std::string("abort: ") + weft_last_error();
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
  for (int r = 0; r < 2; r++) {
    std::string text = ReadFile(base + ".rank" + std::to_string(r) + ".json");
    EXPECT_EQ(JsonShapeError(text), "") << text;
    EXPECT_GE(Find(Events(text), "send", r + 1, {"\"coll\":\"all_reduce\""}).size(), 1u) << text;
  }
}

TEST_F(TraceEnv, BadFolderFailsInit) {
  setenv("WEFT_TRACE", "/nonexistent-weft-dir/job", 1);
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm = nullptr;
        weft_result_t res = weft_comm_init(&comm, n, rank, "127.0.0.1", port);
        std::string msg = weft_last_error();
        if (res == WEFT_SUCCESS) return "init succeeded";
        if (msg.find("WEFT_TRACE=/nonexistent-weft-dir/job") == std::string::npos)
          return "message does not name WEFT_TRACE: " + msg;
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

}  // namespace
