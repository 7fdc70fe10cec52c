// fused_test.cc -- fused ring steps across real processes: each rank writes every element of its
// output once and each byte it sends once (the executor's counters, exec_stats_t), over shared
// memory and TCP (WEFT_FUSED_STEPS=2: TCP's staging slots), in place and not; the two-pass path
// (WEFT_FUSED_STEPS=0, and TCP under the default 1) writes more and gives the same results; a
// rank killed while its neighbours are in fused steps fails every survivor within the timeout,
// and the dead rank is named (by every survivor that notices it first).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

extern "C" {
#include "comm/comm.h"
}

namespace {

struct Case {
  const char* transport;
  int nranks;
  bool in_place;
  int steps;        // WEFT_FUSED_STEPS
  int stream = -1;  // WEFT_SHM_STREAM: 1 every shm slot written with non-temporal stores
  // Whether the steps run fused: 1 fuses into slots the peer reads (shm), 2 into TCP's too.
  bool fused() const { return steps == 2 || (steps == 1 && std::string(transport) == "shm"); }
};

// Two rounds of equal chunks: count = p chunks of round_count elements, twice (algorithms.h),
// so every rank sends exactly 2(p-1)/p of the buffer.
size_t two_rounds(int p) {
  size_t slice_elems = 65536 / sizeof(float);
  return (size_t)p * sched_round_count(slice_elems, 32) * 2;
}

std::string check_bytes(const Case& c, int rank, int nranks, int port) {
  setenv("WEFT_TRANSPORT", c.transport, 1);
  setenv("WEFT_FUSED_STEPS", std::to_string(c.steps).c_str(), 1);
  setenv("WEFT_ALGO", "ring", 1);
  setenv("WEFT_SHM_STREAM", std::to_string(c.stream).c_str(), 1);
  weft_comm_t* comm = nullptr;
  std::string err = join(rank, nranks, port, &comm);
  if (!err.empty()) return err;
  size_t n = two_rounds(nranks), bytes = n * sizeof(float);
  std::vector<float> in(n), out(n);
  for (size_t i = 0; i < n; i++) in[i] = (float)((rank + 1) * 1000 + (int)(i % 997));
  exec_stats_t before = comm->exec.stats;
  float* send = in.data();
  float* recv = c.in_place ? in.data() : out.data();
  weft_result_t r = weft_all_reduce(send, recv, n, WEFT_FLOAT32, WEFT_SUM, comm, nullptr);
  exec_stats_t after = comm->exec.stats;
  if (r != WEFT_SUCCESS) err = std::string("all_reduce: ") + weft_last_error();
  for (size_t i = 0; i < n && err.empty(); i++) {
    float want = 0;
    for (int q = 0; q < nranks; q++) want += (float)((q + 1) * 1000 + (int)(i % 997));
    if (recv[i] != want)
      err = "element " + std::to_string(i) + " is " + std::to_string(recv[i]) + ", want " +
            std::to_string(want);
  }
  uint64_t out_bytes = after.recvbuf_bytes - before.recvbuf_bytes;
  uint64_t slot_bytes = after.slot_bytes - before.slot_bytes;
  uint64_t fused = after.fused_slices - before.fused_slices;
  uint64_t want_slots = 2 * (uint64_t)(nranks - 1) * bytes / (uint64_t)nranks;
  if (err.empty() && slot_bytes != want_slots)
    err = "sent " + std::to_string(slot_bytes) +
          " bytes, want 2(p-1)/p n = " + std::to_string(want_slots);
  if (err.empty() && c.fused() && out_bytes != bytes)
    err = "wrote " + std::to_string(out_bytes) +
          " bytes of recvbuf, want n = " + std::to_string(bytes) + " (each element once)";
  // Two passes: every reduce-scatter step but none lands its partial sum in recvbuf as well.
  if (err.empty() && !c.fused() && out_bytes != want_slots)
    err = "two-pass path wrote " + std::to_string(out_bytes) + " bytes of recvbuf, want " +
          std::to_string(want_slots);
  if (err.empty() && c.fused() != (fused > 0)) err = "fused slices: " + std::to_string(fused);
  // Asked for non-temporal stores, the fused steps fill every slot they are lent with them; with
  // 0, none; auto decides by measuring (transport/shm_stream.h), so nothing is fixed.
  uint64_t streamed = after.streamed_slices - before.streamed_slices;
  if (err.empty() && c.stream == 1 && streamed != fused)
    err = std::to_string(streamed) + " of " + std::to_string(fused) +
          " fused slices streamed, want all (WEFT_SHM_STREAM=1)";
  if (err.empty() && c.stream == 0 && streamed != 0)
    err = std::to_string(streamed) + " fused slices streamed with WEFT_SHM_STREAM=0";
  weft_comm_destroy(comm);
  return err.empty() ? "" : "rank " + std::to_string(rank) + ": " + err;
}

class FusedBytes : public ::testing::TestWithParam<Case> {};

TEST_P(FusedBytes, EachOutputElementWrittenOnce) {
  Case c = GetParam();
  auto results = mp_run(
      c.nranks, [&](int rank, int n, int port) { return check_bytes(c, rank, n, port); }, 120000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(Ring, FusedBytes,
                         ::testing::Values(Case{"shm", 3, false, 1}, Case{"shm", 4, true, 1},
                                           Case{"shm", 4, false, 1}, Case{"tcp", 3, false, 2},
                                           Case{"tcp", 3, true, 2}, Case{"tcp", 3, false, 1},
                                           Case{"shm", 3, false, 0}, Case{"tcp", 3, true, 0},
                                           Case{"shm", 3, false, 1, 1}, Case{"shm", 4, true, 1, 1},
                                           Case{"shm", 2, false, 1, 0}, Case{"shm", 3, true, 0, 1}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return std::string(c.transport) + "_p" + std::to_string(c.nranks) +
                                  (c.in_place ? "_inplace" : "_outofplace") + "_steps" +
                                  std::to_string(c.steps) + (c.fused() ? "_fused" : "_twopass") +
                                  (c.stream >= 0 ? "_stream" + std::to_string(c.stream) : "");
                         });

// Rank 2 of 3 dies in the middle of a large all-reduce, while its neighbours are forwarding
// through fused steps (rank 1 writes into rank 2's slots, rank 0 reduces what rank 2 sent).
// Both must fail within the timeout, at least one naming rank 2; nothing may hang.
TEST(FusedFaults, KilledPeerFailsEverySurvivorNamingIt) {
  for (const char* transport : {"shm", "tcp"}) {
    auto results = mp_run(
        3,
        [&](int rank, int nranks, int port) -> std::string {
          setenv("WEFT_TRANSPORT", transport, 1);
          setenv("WEFT_ALGO", "ring", 1);
          setenv("WEFT_TIMEOUT_MS", "5000", 1);
          setenv("WEFT_FUSED_STEPS", "2", 1);  // TCP's staging slots too
          weft_comm_t* comm = nullptr;
          std::string err = join(rank, nranks, port, &comm);
          if (!err.empty()) return err;
          size_t n = 32u << 20;  // 128 MiB of floats: many rounds, well past the kill
          std::vector<float> buf(n, 1.0f);
          // One call completes everywhere first: the connections are up and fused.
          if (weft_all_reduce(buf.data(), buf.data(), 1 << 20, WEFT_FLOAT32, WEFT_SUM, comm,
                              nullptr) != WEFT_SUCCESS)
            return "rank " + std::to_string(rank) + ": warm-up: " + weft_last_error();
          if (rank == 2) {
            std::thread([] {
              std::this_thread::sleep_for(std::chrono::milliseconds(30));
              kill(getpid(), SIGKILL);
            }).detach();
          }
          auto start = std::chrono::steady_clock::now();
          weft_result_t r = WEFT_SUCCESS;
          for (int i = 0; i < 50 && r == WEFT_SUCCESS; i++)
            r = weft_all_reduce(buf.data(), buf.data(), n, WEFT_FLOAT32, WEFT_SUM, comm, nullptr);
          double secs =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          std::string msg = weft_last_error();
          weft_comm_abort(comm);
          if (rank == 2) return "rank 2 should have been killed";
          std::string who = "rank " + std::to_string(rank) + " (" + transport + "): ";
          if (r == WEFT_SUCCESS) return who + "50 all-reduces succeeded without rank 2";
          if (secs > 20) return who + "took " + std::to_string(secs) + " s to fail: " + msg;
          // A survivor may hear of the death first from the other survivor's abortive close
          // (the close carries no reason): then it names that one. "named:" reports which.
          if (msg.find("rank 2") != std::string::npos) return "named: 2";
          return "named: other: " + msg;
        },
        120000);
    ASSERT_EQ(results.size(), 3u);
    int named = 0;
    for (int r = 0; r < 2; r++) {
      const std::string& m = results[r].message;
      EXPECT_EQ(m.rfind("named: ", 0), 0u) << transport << ": rank " << r << ": " << m;
      named += m == "named: 2";
    }
    EXPECT_GE(named, 1) << transport << ": no survivor named rank 2: " << results[0].message
                        << " / " << results[1].message;
    EXPECT_FALSE(results[2].exited) << transport;
    EXPECT_EQ(results[2].term_signal, SIGKILL) << transport;
  }
}

}  // namespace
