// stream_depth_test.cc -- how many slices the executor keeps posted ahead on one stream
// (WEFT_SLICES_IN_FLIGHT; 0, its default, leaves it to the transport: transport_ops_t.depth_bytes):
// over TCP 1 MiB's worth (16 slices of 64 KiB, 64 of 16 KiB, but never fewer than 4), over shared
// memory 4, and the knob where set, whatever the transport. Read from the executor's own count
// (exec_stats_t.deepest) over a 2-rank ring all-reduce of 4 MiB, whose first step posts a whole
// 2 MiB chunk as soon as it starts; the sums are checked too.
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

const size_t kCount = (size_t)1 << 20;  // 4 MiB of float32: a 2 MiB chunk per ring step

// The deepest any stream of this rank went over a few all-reduces, or the error.
std::string deepest(const char* transport, const char* window, const char* slice, int rank,
                    int nranks, int port) {
  setenv("WEFT_TRANSPORT", transport, 1);
  setenv("WEFT_ALGO", "ring", 1);
  setenv("WEFT_SLICE_BYTES", slice, 1);
  if (window)
    setenv("WEFT_SLICES_IN_FLIGHT", window, 1);
  else
    unsetenv("WEFT_SLICES_IN_FLIGHT");
  weft_comm_t* comm = nullptr;
  std::string err = join(rank, nranks, port, &comm);
  if (!err.empty()) return err;
  std::vector<float> x(kCount);
  for (int i = 0; i < 3 && err.empty(); i++) {
    for (size_t k = 0; k < kCount; k++) x[k] = (float)(rank + 1 + (k % 7));
    if (weft_all_reduce(x.data(), x.data(), kCount, WEFT_FLOAT32, WEFT_SUM, comm, nullptr) !=
        WEFT_SUCCESS)
      err = std::string("all_reduce: ") + weft_last_error();
    for (size_t k = 0; k < kCount && err.empty(); k++)
      if (x[k] != (float)(3 + 2 * (k % 7))) err = "wrong sum at " + std::to_string(k);
  }
  uint64_t d = comm->exec.stats.deepest;
  weft_comm_destroy(comm);
  return err.empty() ? std::to_string(d) : err;
}

void expect_depth(const char* transport, const char* window, const char* slice,
                  const std::string& want) {
  auto res = mp_run(
      2,
      [&](int rank, int n, int port) { return deepest(transport, window, slice, rank, n, port); },
      60000);
  for (int r = 0; r < 2; r++)
    EXPECT_EQ(res[r].message, want)
        << transport << ", WEFT_SLICES_IN_FLIGHT " << (window ? window : "unset")
        << ", WEFT_SLICE_BYTES " << slice << ", rank " << r;
}

TEST(StreamDepth, TcpKeepsAMebibyteInFlight) {
  expect_depth("tcp", nullptr, "65536", "16");
  expect_depth("tcp", nullptr, "16384", "64");
}

TEST(StreamDepth, TcpKeepsAtLeastFourLargeSlices) { expect_depth("tcp", nullptr, "524288", "4"); }

TEST(StreamDepth, SharedMemoryKeepsFour) { expect_depth("shm", nullptr, "65536", "4"); }

TEST(StreamDepth, ZeroLeavesItToTheTransport) { expect_depth("tcp", "0", "65536", "16"); }

TEST(StreamDepth, TheKnobWinsOverEveryTransport) {
  expect_depth("tcp", "6", "65536", "6");
  expect_depth("shm", "6", "65536", "6");
}

}  // namespace
