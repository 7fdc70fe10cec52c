// cuda_ipc_test.cc -- the cuda_ipc transport between real processes on the emulated device engine
// (WEFT_TEST_DEVICE=cuda: the CUDA one):
// device and host messages interleaved both ways, in-place receives read through x->data and
// released in order, copy receives, more messages in flight than slots, odd lengths, a mismatch,
// a killed or aborting peer, and nothing left in /dev/shm. Lent sends (lend_send/commit_send):
// filled on a device queue and committed between ordinary sends, no slot while the ring is full,
// and a slot lent but never committed at close.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "device/device.h"
#include "tests/harness/mp_harness.h"
#include "tests/transport/device_xport_util.h"

namespace {

const size_t kSlot = 4096;
const size_t kHostCap = 256;  // cuda_ipc's host slots: in-place host receives fit in one

struct Shape {
  int shm_slots;
  Windows w;
  int count;
};

class CudaIpcStreams : public ::testing::TestWithParam<Shape> {};

// Two ranks each send a scripted stream to the other at once; every byte is checked.
TEST_P(CudaIpcStreams, BothWaysInterleaved) {
  Shape sh = GetParam();
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, sh.shm_slots, 4);
        RankXport x;
        std::string err = OpenCudaIpc(rank, n, id, &cfg, dev, &ex, &x);
        if (err.empty()) {
          int peer = 1 - rank;
          err = Drive(x.conns[peer], dev, rank, Script(rank, sh.count, kSlot, kHostCap, 7),
                      Script(peer, sh.count, kSlot, kHostCap, 7), sh.w, 60000);
        }
        x.Close(false);
        dev_engine_close(dev);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

INSTANTIATE_TEST_SUITE_P(
    Windows, CudaIpcStreams,
    ::testing::Values(Shape{4, {1, 1}, 60},      // one at a time
                      Shape{4, {4, 4}, 200},     // as many as slots
                      Shape{2, {16, 16}, 200},   // far more posted than slots: backpressure
                      Shape{1, {8, 3}, 120},     // a single entry per direction
                      Shape{8, {32, 1}, 150}));  // the sender far ahead of a slow receiver

// Three ranks, each streaming to both others through one wait over two connections.
TEST(CudaIpc, ThreeRanksEachToEach) {
  uint64_t id = TestCommId();
  BlobExchange ex(3);
  auto results = mp_run(
      3,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 4, 4);
        RankXport x;
        std::string err = OpenCudaIpc(rank, n, id, &cfg, dev, &ex, &x);
        // Pairwise in a fixed order (0-1, 0-2, 1-2), so every pair is driven by both its ranks.
        for (int a = 0; a < n && err.empty(); a++)
          for (int b = a + 1; b < n && err.empty(); b++) {
            if (rank != a && rank != b) continue;
            int peer = rank == a ? b : a;
            err = Drive(x.conns[peer], dev, rank, Script(rank, 80, kSlot, kHostCap, 11 + a + b),
                        Script(peer, 80, kSlot, kHostCap, 11 + a + b), Windows{6, 6}, 60000);
          }
        x.Close(false);
        dev_engine_close(dev);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

class CudaIpcLent : public ::testing::TestWithParam<Shape> {};

// As BothWaysInterleaved, with runs of lent device messages between ordinary sends: the receiver
// gets every byte, in order, in place or copied.
TEST_P(CudaIpcLent, BothWaysInterleaved) {
  Shape sh = GetParam();
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, sh.shm_slots, 4);
        RankXport x;
        std::string err = OpenCudaIpc(rank, n, id, &cfg, dev, &ex, &x);
        if (err.empty()) {
          int peer = 1 - rank;
          err =
              Drive(x.conns[peer], dev, rank, LentScript(rank, sh.count, kSlot, kHostCap, false, 5),
                    LentScript(peer, sh.count, kSlot, kHostCap, false, 5), sh.w, 60000);
        }
        x.Close(false);
        dev_engine_close(dev);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

INSTANTIATE_TEST_SUITE_P(Windows, CudaIpcLent,
                         ::testing::Values(Shape{4, {1, 1}, 60},      // one at a time
                                           Shape{4, {6, 6}, 200},     // runs longer than the ring
                                           Shape{8, {8, 8}, 200},     // whole runs lent at once
                                           Shape{2, {16, 3}, 150}));  // the receiver behind

// With the peer not receiving, lend_send gives exactly one ring of entries (lent and not yet
// committed, or committed and unread), then none; once the peer reads, lending goes on. Host
// messages are not lent.
TEST(CudaIpc, LendWaitsForAFreeEntry) {
  const int kSlots = 4, kTotal = 3 * kSlots + 3;
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, kSlots, 4);
        RankXport x;
        std::string err = OpenCudaIpc(rank, n, id, &cfg, dev, &ex, &x);
        auto go = [&]() {  // the receiver starts only once the sender has run out of entries
          std::vector<std::vector<char>> all;
          char b = 1;
          return ex.Exchange(rank, &b, 1, &all, 30000);
        };
        conn_t* c = err.empty() ? x.conns[1 - rank] : nullptr;
        if (c && rank == 0) {
          xfer_t xh = {};
          char* slot = nullptr;
          if (c->ops->lend_send(c, 40, &xh, &slot) != WEFT_ERR_INTERNAL || slot)
            err = "a lent host send was accepted";
          else if (std::string(err_last()).find("rank 1") == std::string::npos)
            err = std::string("message does not name the peer: ") + err_last();
          int at_once = 0, stalled = 0;
          if (err.empty())
            err = LendUntilFull(c, dev, rank, kSlot, kTotal, go, &at_once, &stalled, 30000);
          if (err.empty() && (at_once != kSlots || stalled != kSlots))
            err = "lent " + std::to_string(at_once) + " at once and stalled after " +
                  std::to_string(stalled) + ", expected " + std::to_string(kSlots) + " and " +
                  std::to_string(kSlots);
        } else if (c) {
          std::vector<Msg> in;
          for (int i = 0; i < kTotal; i++) in.push_back({true, kSlot, i % 2 == 0});
          err = go();
          if (err.empty()) err = Drive(c, dev, rank, {}, in, Windows{3, 3}, 30000);
        }
        x.Close(false);
        dev_engine_close(dev);
        return err;
      },
      90000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

// Rank 0 sends one message, then lends two slots, fills them and closes without committing: rank 1
// gets the message and then sees the close, never the lent bytes; nothing leaks (under ASan) and
// nothing stays in /dev/shm.
TEST(CudaIpc, CloseWithALentSlot) {
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 4, 4);
        RankXport x;
        std::string err = OpenCudaIpc(rank, n, id, &cfg, dev, &ex, &x);
        std::vector<xfer_t> xs;
        xfer_t xr = {};
        if (err.empty() && rank == 0)
          err = SendThenLendWithoutCommit(x.conns[1], dev, rank, kSlot + 5, 2, kSlot, kSlot, &xs,
                                          20000);
        else if (err.empty())
          err = ReceiveThenNothing(x.conns[0], dev, rank, kSlot + 5, kSlot, &xr, 20000);
        x.Close(false);
        dev_engine_close(dev);
        if (err.empty()) err = LeakCheck(rank);
        return err;
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

TEST(CudaIpc, NeedsADeviceEngine) {
  weft_config_t cfg = TestConfig(kSlot, 4, 4);
  transport_params_t tp = {0, 2, TestCommId(), &cfg, nullptr, nullptr};
  transport_t* t = nullptr;
  EXPECT_EQ(cuda_ipc_transport_ops.create(&tp, &t), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("device engine"), std::string::npos) << err_last();
}

TEST(CudaIpc, InPlaceLargerThanASlotIsRefused) {
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 4, 4);
        RankXport x;
        std::string err = OpenCudaIpc(rank, n, id, &cfg, dev, &ex, &x);
        if (err.empty()) {
          xfer_t xd = {}, xh = {};
          xd.device = 1;
          conn_t* c = x.conns[1 - rank];
          if (c->ops->post_recv_inplace(c, kSlot + 1, &xd) != WEFT_ERR_INTERNAL)
            err = "a device in-place receive of a slot + 1 bytes was accepted";
          else if (c->ops->post_recv_inplace(c, kHostCap + 1, &xh) != WEFT_ERR_INTERNAL)
            err = "a host in-place receive larger than a host slot was accepted";
          else if (std::string(err_last()).find("rank " + std::to_string(1 - rank)) ==
                   std::string::npos)
            err = std::string("message does not name the peer: ") + err_last();
        }
        x.Close(false);
        dev_engine_close(dev);
        return err;
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

// A device message where the receiver expects a host one: a mismatch naming the peer, not garbage.
TEST(CudaIpc, DeviceWhereHostExpectedIsAMismatch) {
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 4, 4);
        RankXport x;
        std::string err = OpenCudaIpc(rank, n, id, &cfg, dev, &ex, &x);
        std::string result = err;
        if (err.empty() && rank == 0) {
          result = Drive(x.conns[1], dev, rank, {{true, 40, false}}, {}, Windows{1, 1}, 20000);
        } else if (err.empty()) {
          std::string d =
              Drive(x.conns[0], dev, rank, {}, {{false, 40, false}}, Windows{1, 1}, 20000);
          if (d.find("device memory where this rank expected 40 of host memory") ==
                  std::string::npos ||
              d.find("rank 0") == std::string::npos)
            result = "expected a mismatch naming rank 0, got: " + d;
        }
        x.Close(false);
        dev_engine_close(dev);
        return result;
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

// Rank 1 is SIGKILLed after a first exchange (its slots are imported); rank 0, sending and
// receiving device messages, fails within seconds naming it, and nothing is left in /dev/shm.
TEST(CudaIpc, KilledPeerFailsTheWait) {
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 2, 4);
        RankXport x;
        std::string err = OpenCudaIpc(rank, n, id, &cfg, dev, &ex, &x);
        if (err.empty())
          err = Drive(x.conns[1 - rank], dev, rank, Script(rank, 20, kSlot, kHostCap, 3),
                      Script(1 - rank, 20, kSlot, kHostCap, 3), Windows{4, 4}, 20000);
        if (!err.empty()) return err;
        // Both ranks are through the exchange before rank 1 dies: the failure to check is the
        // one that follows, not an early kill cutting rank 0's first exchange short.
        std::vector<std::vector<char>> all;
        char done = 1;
        err = ex.Exchange(rank, &done, 1, &all, 20000);
        if (!err.empty()) return err;
        if (rank == 1) kill(getpid(), SIGKILL);
        std::string msg;
        double took = 0;
        err = WaitForFailure(x.conns[1], dev, kSlot, 1, 6, 20000, &msg, &took);
        x.Close(false);
        dev_engine_close(dev);
        if (!err.empty()) return err;
        printf("rank %d failed after %.3f s: %s\n", rank, took, msg.c_str());
        if (took > 5) return "failed only after " + std::to_string(took) + " s: " + msg;
        if (msg.find("rank 1 (pid") == std::string::npos) return "message: " + msg;
        return "";
      },
      60000);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].message, "");
  EXPECT_EQ(results[1].term_signal, SIGKILL);
  EXPECT_EQ(Leftovers(id), "");
}

// Rank 0 closes abortively with device messages in flight; rank 1 fails promptly naming it, and
// both tear down leaving nothing in /dev/shm.
TEST(CudaIpc, AbortiveCloseFailsThePeer) {
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 2, 4);
        RankXport x;
        std::string err = OpenCudaIpc(rank, n, id, &cfg, dev, &ex, &x);
        if (err.empty())
          err = Drive(x.conns[1 - rank], dev, rank, Script(rank, 10, kSlot, kHostCap, 5),
                      Script(1 - rank, 10, kSlot, kHostCap, 5), Windows{4, 4}, 20000);
        if (!err.empty()) {
          x.Close(true);
          return err;
        }
        if (rank == 0) {
          // Three device sends into two slots: one is still queued when the close comes.
          void* buf;
          if (dev->ops->alloc(dev, 3 * kSlot, 0, &buf) != WEFT_SUCCESS) return err_last();
          xfer_t xs[3] = {};
          conn_t* c = x.conns[1];
          for (int i = 0; i < 3; i++) {
            xs[i].device = 1;
            c->ops->post_send(c, static_cast<char*>(buf) + i * kSlot, kSlot, &xs[i]);
          }
          int progressed = 0;
          c->ops->progress(c, &progressed);
          x.Close(true);
          dev->ops->release(dev, buf, 0);
          dev_engine_close(dev);
          return "";
        }
        std::string msg;
        double took = 0;
        err = WaitForFailure(x.conns[0], dev, kSlot, 4, 1, 20000, &msg, &took);
        x.Close(true);
        dev_engine_close(dev);
        if (!err.empty()) return err;
        printf("rank %d failed after %.3f s: %s\n", rank, took, msg.c_str());
        if (took > 5) return "failed only after " + std::to_string(took) + " s: " + msg;
        if (msg.find("rank 0") == std::string::npos) return "message: " + msg;
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

}  // namespace
