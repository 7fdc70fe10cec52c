// staged_test.cc -- device buffers over host connections through pinned staging (staged_wrap), on
// the emulated device engine (WEFT_TEST_DEVICE=cuda: the CUDA one), between real processes over
// TCP (one socket or striped over three)
// and over shm: device and host messages interleaved both ways, in-place and copy receives, more
// in flight than slots, odd lengths, the inner connection still serving host calls afterwards, a
// killed or aborting peer. Lent sends (lend_send/commit_send): send slots filled by device work
// (or memcpy) and committed between ordinary sends, max(2, slices in flight, shm slots) of them,
// none while all are taken, and slots lent but never committed at close.
#include "transport/staged.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "device/device.h"
#include "tests/harness/mp_harness.h"
#include "tests/transport/device_xport_util.h"

namespace {

const size_t kSlot = 4096;

struct Case {
  const char* inner;  // "tcp", "shm"
  int nsocks;
  int slices_in_flight;  // staging slots per direction: max(2, this)
  Windows w;
  int count;
};

std::string OpenInner(const Case& k, int rank, int n, uint64_t id, const weft_config_t* cfg,
                      BlobExchange* ex, RankXport* x) {
  if (std::string(k.inner) == "shm") return OpenShm(rank, n, id, cfg, ex, x);
  return OpenTcp(rank, n, id, cfg, ex, x);
}

std::vector<Msg> HostOnly(int count) {
  std::vector<Msg> s;
  for (int i = 0; i < count; i++)
    s.push_back({false, static_cast<size_t>(1 + i * 97 % 5000), false});
  return s;
}

class StagedStreams : public ::testing::TestWithParam<Case> {};

// Both ranks stream to each other through the wrapper; then the inner connection, still open,
// carries host messages on its own (the communicator's host calls).
TEST_P(StagedStreams, BothWaysInterleaved) {
  Case k = GetParam();
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 4, k.slices_in_flight);
        cfg.nsocks = k.nsocks;
        RankXport x;
        std::string err = OpenInner(k, rank, n, id, &cfg, &ex, &x);
        int peer = 1 - rank;
        conn_t* w = nullptr;
        if (err.empty() && staged_wrap(x.conns[peer], dev, &cfg, &w) != WEFT_SUCCESS)
          err = std::string("staged_wrap: ") + err_last();
        if (err.empty())
          err = Drive(w, dev, rank, Script(rank, k.count, kSlot, kSlot, 9),
                      Script(peer, k.count, kSlot, kSlot, 9), k.w, 60000);
        if (w) w->ops->close(w, 0);
        if (err.empty())
          err = Drive(x.conns[peer], dev, rank, HostOnly(20), HostOnly(20), Windows{4, 4}, 30000);
        x.Close(false);
        dev_engine_close(dev);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

INSTANTIATE_TEST_SUITE_P(
    InnerAndWindows, StagedStreams,
    ::testing::Values(Case{"tcp", 1, 4, {1, 1}, 60},     // one at a time
                      Case{"tcp", 1, 4, {4, 4}, 200},    // as many as slots
                      Case{"tcp", 1, 1, {16, 16}, 200},  // 2 slots (the minimum), far more posted
                      Case{"tcp", 3, 4, {8, 8}, 200},    // striped lanes complete out of order
                      Case{"tcp", 1, 2, {32, 1}, 150},   // the sender far ahead of the receiver
                      Case{"shm", 1, 3, {8, 8}, 200}));  // any host connection

struct LentCase {
  const char* inner;
  int nsocks;
  int shm_slots;  // with slices_in_flight: send slots max(2, both)
  int slices_in_flight;
  Windows w;
  int count;
};

class StagedLent : public ::testing::TestWithParam<LentCase> {};

// Runs of lent messages, device and host, between ordinary sends, both ways: the receiver gets
// every byte, in order, in place or copied.
TEST_P(StagedLent, BothWaysInterleaved) {
  LentCase k = GetParam();
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, k.shm_slots, k.slices_in_flight);
        cfg.nsocks = k.nsocks;
        RankXport x;
        Case inner = {k.inner, k.nsocks, k.slices_in_flight, k.w, k.count};
        std::string err = OpenInner(inner, rank, n, id, &cfg, &ex, &x);
        int peer = 1 - rank;
        conn_t* w = nullptr;
        if (err.empty() && staged_wrap(x.conns[peer], dev, &cfg, &w) != WEFT_SUCCESS)
          err = std::string("staged_wrap: ") + err_last();
        if (err.empty())
          err = Drive(w, dev, rank, LentScript(rank, k.count, kSlot, kSlot, true, 13),
                      LentScript(peer, k.count, kSlot, kSlot, true, 13), k.w, 60000);
        if (w) w->ops->close(w, 0);
        x.Close(false);
        dev_engine_close(dev);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

INSTANTIATE_TEST_SUITE_P(
    InnerAndWindows, StagedLent,
    ::testing::Values(LentCase{"tcp", 1, 4, 2, {1, 1}, 60},      // one at a time
                      LentCase{"tcp", 1, 2, 1, {16, 16}, 200},   // 2 send slots, runs of 5
                      LentCase{"tcp", 3, 8, 4, {8, 8}, 200},     // striped lanes
                      LentCase{"shm", 1, 4, 2, {6, 6}, 200},     // the inner ring fills too
                      LentCase{"tcp", 1, 2, 6, {32, 1}, 150}));  // the receiver far behind

// How many send slots lend_send gives with nothing committed: max(2, slices in flight, shm
// slots), then none. Closing with all of them lent frees them (nothing leaks under ASan); the
// inner connection is never used.
TEST(Staged, SendSlotsForLending) {
  auto results = mp_run(
      1,
      [&](int, int, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        struct {
          int shm_slots, slices_in_flight, want;
        } cases[] = {{1, 1, 2}, {4, 6, 6}, {32, 4, 32}, {3, 2, 3}};
        std::string err;
        for (auto& k : cases) {
          weft_config_t cfg = TestConfig(kSlot, k.shm_slots, k.slices_in_flight);
          conn_t inner = {&tcp_transport_ops, 3};
          conn_t* w = nullptr;
          if (staged_wrap(&inner, dev, &cfg, &w) != WEFT_SUCCESS) return err_last();
          std::vector<xfer_t> xs(static_cast<size_t>(k.want) + 1);
          int lent = 0;
          for (xfer_t& x : xs) {
            x.device = lent % 2;
            char* slot = nullptr;
            if (w->ops->lend_send(w, kSlot, &x, &slot) != WEFT_SUCCESS) {
              err = std::string("lend_send: ") + err_last();
              break;
            }
            if (!slot) break;
            memset(slot, lent, kSlot);  // pinned host memory: the CPU writes it too
            lent++;
          }
          w->ops->close(w, 0);
          if (err.empty() && lent != k.want)
            err = "shm_slots " + std::to_string(k.shm_slots) + ", slices_in_flight " +
                  std::to_string(k.slices_in_flight) + ": lent " + std::to_string(lent) +
                  " send slots, expected " + std::to_string(k.want);
          if (!err.empty()) break;
        }
        dev_engine_close(dev);
        if (err.empty()) err = LeakCheck(0);
        return err;
      },
      30000);
  EXPECT_EQ(mp_summary(results), "");
}

// Over shm (whose own ring fills once the peer stops reading): with the peer not receiving, lending
// runs out of slots after at least the send ring's worth, and goes on once the peer reads.
TEST(Staged, LendWaitsForAFreeSlot) {
  const int kSlots = 4, kTotal = 4 * kSlots + 3;
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, kSlots, 2);
        RankXport x;
        std::string err = OpenShm(rank, n, id, &cfg, &ex, &x);
        conn_t* w = nullptr;
        if (err.empty() && staged_wrap(x.conns[1 - rank], dev, &cfg, &w) != WEFT_SUCCESS)
          err = std::string("staged_wrap: ") + err_last();
        auto go = [&]() {  // the receiver starts only once the sender has run out of slots
          std::vector<std::vector<char>> all;
          char b = 1;
          return ex.Exchange(rank, &b, 1, &all, 30000);
        };
        if (err.empty() && rank == 0) {
          int at_once = 0, stalled = 0;
          err = LendUntilFull(w, dev, rank, kSlot, kTotal, go, &at_once, &stalled, 30000);
          if (err.empty() && (at_once != kSlots || stalled < kSlots))
            err = "lent " + std::to_string(at_once) + " at once and stalled after " +
                  std::to_string(stalled) + ", expected " + std::to_string(kSlots) +
                  " and at least as many";
          printf("rank 0: lent %d at once, stalled after %d\n", at_once, stalled);
        } else if (err.empty()) {
          std::vector<Msg> in;
          for (int i = 0; i < kTotal; i++) in.push_back({true, kSlot, i % 2 == 0});
          err = go();
          if (err.empty()) err = Drive(w, dev, rank, {}, in, Windows{3, 3}, 30000);
        }
        if (w) w->ops->close(w, 0);
        x.Close(false);
        dev_engine_close(dev);
        return err;
      },
      90000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

// Rank 0 sends one message over TCP, then lends two send slots, fills them and closes without
// committing: rank 1 gets the message and then sees the close, never the lent bytes; nothing
// leaks (under ASan).
TEST(Staged, CloseWithALentSlot) {
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 4, 2);
        RankXport x;
        std::string err = OpenTcp(rank, n, id, &cfg, &ex, &x);
        conn_t* w = nullptr;
        if (err.empty() && staged_wrap(x.conns[1 - rank], dev, &cfg, &w) != WEFT_SUCCESS)
          err = std::string("staged_wrap: ") + err_last();
        std::vector<xfer_t> xs;
        xfer_t xr = {};
        if (err.empty() && rank == 0)
          err = SendThenLendWithoutCommit(w, dev, rank, kSlot + 5, 2, kSlot, kSlot, &xs, 20000);
        else if (err.empty())
          err = ReceiveThenNothing(w, dev, rank, kSlot + 5, kSlot, &xr, 20000);
        if (w) w->ops->close(w, 0);
        x.Close(false);
        dev_engine_close(dev);
        if (err.empty()) err = LeakCheck(rank);
        return err;
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

TEST(Staged, NeedsADeviceEngine) {
  weft_config_t cfg = TestConfig(kSlot, 4, 4);
  conn_t inner = {&tcp_transport_ops, 1};
  conn_t* w = nullptr;
  EXPECT_EQ(staged_wrap(&inner, nullptr, &cfg, &w), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("device engine"), std::string::npos) << err_last();
}

TEST(Staged, InPlaceLargerThanASlotIsRefused) {
  auto results = mp_run(
      1,
      [&](int, int, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 4, 4);
        conn_t inner = {&tcp_transport_ops, 3};
        conn_t* w = nullptr;
        std::string err;
        if (staged_wrap(&inner, dev, &cfg, &w) != WEFT_SUCCESS) return err_last();
        xfer_t x = {};
        x.device = 1;
        if (w->ops->post_recv_inplace(w, kSlot + 1, &x) != WEFT_ERR_INTERNAL)
          err = "an in-place receive of a slot + 1 bytes was accepted";
        else if (std::string(err_last()).find("rank 3") == std::string::npos)
          err = std::string("message does not name the peer: ") + err_last();
        w->ops->close(w, 0);
        dev_engine_close(dev);
        return err;
      },
      30000);
  EXPECT_EQ(mp_summary(results), "");
}

// Rank 1 is SIGKILLed after a first exchange; rank 0's device sends and receive fail within
// seconds, naming it.
TEST(Staged, KilledPeerFailsTheWait) {
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 4, 2);
        RankXport x;
        std::string err = OpenTcp(rank, n, id, &cfg, &ex, &x);
        conn_t* w = nullptr;
        if (err.empty() && staged_wrap(x.conns[1 - rank], dev, &cfg, &w) != WEFT_SUCCESS)
          err = std::string("staged_wrap: ") + err_last();
        if (err.empty())
          err = Drive(w, dev, rank, Script(rank, 20, kSlot, kSlot, 3),
                      Script(1 - rank, 20, kSlot, kSlot, 3), Windows{4, 4}, 20000);
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
        // Enough sends to fill the socket buffers too: the failure must come from the peer.
        err = WaitForFailure(w, dev, 1 << 20, 1, 64, 20000, &msg, &took);
        w->ops->close(w, 1);
        x.Close(true);
        dev_engine_close(dev);
        if (!err.empty()) return err;
        printf("rank %d failed after %.3f s: %s\n", rank, took, msg.c_str());
        if (took > 5) return "failed only after " + std::to_string(took) + " s: " + msg;
        if (msg.find("rank 1") == std::string::npos) return "message: " + msg;
        return "";
      },
      60000);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].message, "");
  EXPECT_EQ(results[1].term_signal, SIGKILL);
}

// Rank 0 closes abortively with device messages in flight; rank 1 fails promptly naming it.
TEST(Staged, AbortiveCloseFailsThePeer) {
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 4, 2);
        RankXport x;
        std::string err = OpenTcp(rank, n, id, &cfg, &ex, &x);
        conn_t* w = nullptr;
        if (err.empty() && staged_wrap(x.conns[1 - rank], dev, &cfg, &w) != WEFT_SUCCESS)
          err = std::string("staged_wrap: ") + err_last();
        if (err.empty())
          err = Drive(w, dev, rank, Script(rank, 10, kSlot, kSlot, 5),
                      Script(1 - rank, 10, kSlot, kSlot, 5), Windows{4, 4}, 20000);
        if (!err.empty()) return err;
        if (rank == 0) {
          void* buf;
          if (dev->ops->alloc(dev, 3 * kSlot, 0, &buf) != WEFT_SUCCESS) return err_last();
          xfer_t xs[3] = {};
          for (int i = 0; i < 3; i++) {
            xs[i].device = 1;
            w->ops->post_send(w, static_cast<char*>(buf) + i * kSlot, kSlot, &xs[i]);
          }
          int progressed = 0;
          w->ops->progress(w, &progressed);
          w->ops->close(w, 1);
          x.Close(true);
          dev->ops->release(dev, buf, 0);
          dev_engine_close(dev);
          return "";
        }
        std::string msg;
        double took = 0;
        err = WaitForFailure(w, dev, kSlot, 4, 1, 20000, &msg, &took);
        w->ops->close(w, 1);
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
}

}  // namespace
