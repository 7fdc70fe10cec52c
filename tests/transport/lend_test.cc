// lend_test.cc -- lend_send/commit_send on the host transports (shm, TCP) between real processes:
// runs of lent messages between ordinary sends, both ways, arrive intact and in order, also when
// the ring (or the staging pool) is full and ordinary sends are still queued when a slot is asked
// for: a lent slot must never overtake a message posted before it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/harness/mp_harness.h"
#include "tests/transport/device_xport_util.h"

extern "C" {
#include "common/error.h"
}

namespace {

constexpr size_t kSlot = 4096;

struct HostCase {
  const char* transport;
  int shm_slots;  // ring slots (shm) or send staging slots (TCP)
  Windows w;
  int count;
};

// LentScript's stream as host messages: in place only where shm lends received slots.
std::vector<Msg> HostScript(int from, int count, bool inplace_ok) {
  std::vector<Msg> s = LentScript(from, count, kSlot, kSlot, true, 29);
  for (Msg& m : s) {
    m.device = false;
    m.inplace = m.inplace && inplace_ok && m.len <= kSlot;
  }
  return s;
}

class HostLent : public ::testing::TestWithParam<HostCase> {};

TEST_P(HostLent, InOrderBothWays) {
  HostCase k = GetParam();
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;  // Drive's device queue; every message here is host memory
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, k.shm_slots, 4);
        RankXport x;
        bool shm = std::string(k.transport) == "shm";
        std::string err = shm ? OpenShm(rank, n, id, &cfg, &ex, &x)
                              : OpenTcp(rank, n, id, &cfg, &ex, &x);
        int peer = 1 - rank;
        if (err.empty())
          err = Drive(x.conns[peer], dev, rank, HostScript(rank, k.count, shm),
                      HostScript(peer, k.count, shm), k.w, 60000);
        x.Close(false);
        dev_engine_close(dev);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

INSTANTIATE_TEST_SUITE_P(
    Transports, HostLent,
    ::testing::Values(HostCase{"shm", 2, {1, 1}, 80},     // one message at a time
                      HostCase{"shm", 2, {16, 16}, 300},  // a ring of 2: sends queue behind it
                      HostCase{"shm", 8, {8, 2}, 300},    // the receiver behind
                      HostCase{"tcp", 2, {16, 16}, 300},  // 2 staging slots, runs of 5
                      HostCase{"tcp", 8, {8, 8}, 300}),
    [](const ::testing::TestParamInfo<HostCase>& info) {
      return std::string(info.param.transport) + "_slots" +
             std::to_string(info.param.shm_slots) + "_w" + std::to_string(info.param.w.send) +
             "_" + std::to_string(info.param.w.recv);
    });

}  // namespace
