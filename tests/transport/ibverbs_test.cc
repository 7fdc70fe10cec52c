// ibverbs_test.cc -- the RDMA verbs transport between real processes.
//
// Everywhere: WEFT_TRANSPORT=ib on a machine without an active RDMA port (no libibverbs, no
// device) fails init with a message naming the rank and why, auto carries on over shm and TCP, and
// a malformed WEFT_IB_HCA is an error. Where a port is active (a Soft-RoCE device in
// scripts/rdma-vm.sh, or real hardware): scripted streams over the transport itself (ordinary,
// in-place and lent messages, both ways, rings that fill, many posted at once; empty, odd and
// longer-than-the-ring messages; one way, where credits alone free the slots), the handshake
// (four ranks connecting crosswise; rings that disagree), backpressure (sends and lent slots stop
// at the ring's size until the receiver takes them), collectives with WEFT_TRANSPORT=ib, and a
// peer killed mid-stream; those skip elsewhere. In a VM:
//   scripts/rdma-vm.sh --hosts 1 -- .bazel/bin/tests/transport/ibverbs_test
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"
#include "tests/transport/device_xport_util.h"

extern "C" {
#include "common/error.h"
#include "common/net.h"
#include "transport/ibv_wrap.h"
// Internal (comm/comm.h, which is C only): the transport carrying this rank's traffic with peer.
const char* comm_transport_name(const weft_comm_t* comm, int peer);
}

namespace {

// "" where this machine has an active RDMA port weft can use, else why not. Found in a forked
// child: a verbs context must not be open in the test process when it forks its ranks.
const std::string& NoPortReason() {
  static const std::string reason = [] {
    auto r = mp_run(
        1,
        [](int rank, int n, int) -> std::string {
          weft_config_t cfg = TestConfig(4096, 4, 4);
          net_addr_t addr;
          if (net_resolve("127.0.0.1", 0, &addr) != WEFT_SUCCESS) return "resolve 127.0.0.1";
          transport_params_t tp = {rank, n, TestCommId(), &cfg, &addr, nullptr};
          transport_t* t = nullptr;
          if (ibverbs_transport_ops.create(&tp, &t) != WEFT_SUCCESS) return err_last();
          ibverbs_transport_ops.destroy(t);
          return "";
        },
        60000);
    return r[0].message.empty() && r[0].exited && r[0].exit_code == 0 ? std::string()
                                                                      : r[0].message;
  }();
  return reason;
}

#define SKIP_WITHOUT_PORT()                                                          \
  do {                                                                               \
    if (!NoPortReason().empty()) GTEST_SKIP() << "no RDMA port: " << NoPortReason(); \
  } while (0)

#define SKIP_WITH_PORT()                                                                \
  do {                                                                                  \
    if (NoPortReason().empty()) GTEST_SKIP() << "this machine has an active RDMA port"; \
  } while (0)

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

// ---- without a port --------------------------------------------------------------------------

TEST(IbChoice, ForcedWithoutPortFailsInitNamingTheRank) {
  SKIP_WITH_PORT();
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "ib", 1);
        // Rank 0 hosts the rendezvous and fails before anyone may have joined it: the others
        // then wait for a master that is gone, up to the connect timeout, and fail too.
        setenv("WEFT_CONNECT_TIMEOUT_MS", "5000", 1);
        weft_comm_t* comm;
        if (weft_comm_init(&comm, n, rank, "127.0.0.1", port) == WEFT_SUCCESS) {
          weft_comm_destroy(comm);
          return "init succeeded with WEFT_TRANSPORT=ib and no RDMA port";
        }
        std::string msg = weft_last_error();
        std::string want =
            "rank " + std::to_string(rank) + ": WEFT_TRANSPORT=ib but no active RDMA port (";
        if (rank == 0 && msg.find(want) == std::string::npos) return "message: " + msg;
        return "";
      },
      30000);
  EXPECT_EQ(mp_summary(results), "");
}

// auto with no port anywhere is what it was before verbs: shm on this host; tcp forced stays tcp.
TEST(IbChoice, AutoWithoutPortKeepsShmAndTcp) {
  SKIP_WITH_PORT();
  for (const char* mode : {"auto", "tcp"}) {
    auto results = mp_run(
        3,
        [&](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", mode, 1);
          setenv("WEFT_IB_HCA", "mlx5_0:1", 1);  // well-formed, names nothing here
          weft_comm_t* comm;
          std::string err = join(rank, n, port, &comm);
          if (!err.empty()) return err;
          err = check_all_reduce(comm, WEFT_FLOAT32, WEFT_SUM, 100000, false);
          if (err.empty()) err = CheckCarriedBy(comm, std::string(mode) == "tcp" ? "tcp" : "shm");
          weft_comm_destroy(comm);
          return err;
        },
        120000);
    EXPECT_EQ(mp_summary(results), "") << mode;
  }
}

TEST(IbChoice, MalformedHcaIsAnErrorInAnyMode) {
  auto results = mp_run(
      1,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_IB_HCA", "mlx5_0:zero", 1);
        weft_comm_t* comm;
        if (weft_comm_init(&comm, n, rank, "127.0.0.1", port) == WEFT_SUCCESS) {
          weft_comm_destroy(comm);
          return "init accepted WEFT_IB_HCA=mlx5_0:zero";
        }
        std::string msg = weft_last_error();
        return msg.find("WEFT_IB_HCA") == std::string::npos ? "message: " + msg : "";
      },
      30000);
  EXPECT_EQ(mp_summary(results), "");
}

// ---- with a port -------------------------------------------------------------------------------

constexpr size_t kSlot = 4096;

// What the verbs transport `t` publishes about itself.
ibvw_port_facts_t PublishedFacts(const transport_t* t) {
  std::vector<char> blob(ibverbs_transport_ops.addr_size);
  ibverbs_transport_ops.local_addr(t, blob.data());
  return ibverbs_blob_facts(blob.data());
}

// With `dev` and cfg->ib_gdr set, the connections carry device messages themselves (GPUDirect).
std::string OpenIb(int rank, int n, uint64_t comm_id, const weft_config_t* cfg, BlobExchange* ex,
                   RankXport* out, dev_engine_t* dev = nullptr) {
  net_addr_t addr;
  if (net_resolve("127.0.0.1", 0, &addr) != WEFT_SUCCESS) return "resolve 127.0.0.1";
  transport_params_t tp = {rank, n, comm_id, cfg, &addr, dev};
  const transport_ops_t* ops = &ibverbs_transport_ops;
  if (ops->create(&tp, &out->t) != WEFT_SUCCESS)
    return "rank " + std::to_string(rank) + ": create: " + err_last();
  std::vector<char> blob(ops->addr_size);
  ops->local_addr(out->t, blob.data());
  std::vector<std::vector<char>> all;
  std::string err = ex->Exchange(rank, blob.data(), blob.size(), &all, 20000);
  if (!err.empty()) return err;
  out->conns.assign(n, nullptr);
  for (int p = 0; p < n; p++)
    if (p != rank && ops->connect(out->t, p, all[p].data(), &out->conns[p]) != WEFT_SUCCESS)
      return "rank " + std::to_string(rank) + ": connect to " + std::to_string(p) + ": " +
             err_last();
  return "";
}

struct IbCase {
  int slots;
  Windows w;
  int count;
};

class IbStreams : public ::testing::TestWithParam<IbCase> {};

// Ordinary, in-place and lent messages of every awkward length, both ways at once.
TEST_P(IbStreams, InOrderBothWays) {
  SKIP_WITHOUT_PORT();
  IbCase k = GetParam();
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;  // Drive's device queue; every message here is host memory
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, k.slots, 4);
        RankXport x;
        std::string err = OpenIb(rank, n, id, &cfg, &ex, &x);
        auto script = [&](int from) {
          std::vector<Msg> s = LentScript(from, k.count, kSlot, kSlot, true, 31);
          for (Msg& m : s) m.device = false;
          return s;
        };
        int peer = 1 - rank;
        if (err.empty())
          err = Drive(x.conns[peer], dev, rank, script(rank), script(peer), k.w, 60000);
        x.Close(false);
        dev_engine_close(dev);
        if (err.empty()) err = LeakCheck(rank);  // connections, registrations, the side channel
        return err;
      },
      180000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(Rings, IbStreams,
                         ::testing::Values(IbCase{2, {1, 1}, 80}, IbCase{2, {16, 16}, 300},
                                           IbCase{8, {8, 2}, 300}, IbCase{32, {8, 8}, 300}),
                         [](const ::testing::TestParamInfo<IbCase>& info) {
                           return "slots" + std::to_string(info.param.slots) + "_w" +
                                  std::to_string(info.param.w.send) + "_" +
                                  std::to_string(info.param.w.recv);
                         });

class IbCollectives : public ::testing::TestWithParam<int> {};

// WEFT_TRANSPORT=ib carries every peer, also on one host (the device loops back).
TEST_P(IbCollectives, AllReduceAndBroadcast) {
  SKIP_WITHOUT_PORT();
  auto results = mp_run(
      GetParam(),
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "ib", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        for (size_t count : {size_t{1}, size_t{1000}, size_t{300000}})
          if (err.empty()) err = check_all_reduce(comm, WEFT_FLOAT32, WEFT_SUM, count, count > 1);
        if (err.empty()) err = check_broadcast(comm, WEFT_INT32, n - 1, 50000, false);
        if (err.empty()) err = CheckCarriedBy(comm, "ib");
        weft_comm_destroy(comm);
        return err;
      },
      300000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, IbCollectives, ::testing::Values(2, 3));

// A peer killed while this rank waits for its data: the wait fails naming it, well within the
// collective timeout, instead of hanging.
TEST(IbFailures, KilledPeerIsNamed) {
  SKIP_WITHOUT_PORT();
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "ib", 1);
        setenv("WEFT_TIMEOUT_MS", "60000", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (rank == 1) {
          weft_barrier(comm, nullptr);
          kill(getpid(), SIGKILL);
        }
        weft_barrier(comm, nullptr);
        std::vector<float> v(1000, 1.0f);
        weft_result_t res =
            weft_all_reduce(v.data(), v.data(), v.size(), WEFT_FLOAT32, WEFT_SUM, comm, nullptr);
        std::string msg = weft_last_error();
        weft_comm_abort(comm);
        if (res == WEFT_SUCCESS) return "all_reduce with a killed peer succeeded";
        if (msg.find("rank 1") == std::string::npos) return "message: " + msg;
        return "";
      },
      120000);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].message, "");
  EXPECT_LT(results[0].seconds, 50.0);
  EXPECT_EQ(results[1].term_signal, SIGKILL);
}

// ---- with a port: the handshake, credits and backpressure on their own --------------------------

// Like OpenIb, but connecting to the peers in the given order.
std::string OpenIbInOrder(int rank, int n, uint64_t comm_id, const weft_config_t* cfg,
                          BlobExchange* ex, const std::vector<int>& order, RankXport* out) {
  net_addr_t addr;
  if (net_resolve("127.0.0.1", 0, &addr) != WEFT_SUCCESS) return "resolve 127.0.0.1";
  transport_params_t tp = {rank, n, comm_id, cfg, &addr, nullptr};
  const transport_ops_t* ops = &ibverbs_transport_ops;
  if (ops->create(&tp, &out->t) != WEFT_SUCCESS)
    return "rank " + std::to_string(rank) + ": create: " + err_last();
  std::vector<char> blob(ops->addr_size);
  ops->local_addr(out->t, blob.data());
  std::vector<std::vector<char>> all;
  std::string err = ex->Exchange(rank, blob.data(), blob.size(), &all, 20000);
  if (!err.empty()) return err;
  out->conns.assign(n, nullptr);
  for (int p : order)
    if (ops->connect(out->t, p, all[p].data(), &out->conns[p]) != WEFT_SUCCESS)
      return "rank " + std::to_string(rank) + ": connect to " + std::to_string(p) + ": " +
             err_last();
  return "";
}

std::vector<Msg> HostScript(int from, int count, uint32_t seed) {
  std::vector<Msg> s = LentScript(from, count, kSlot, kSlot, true, seed);
  for (Msg& m : s) m.device = false;
  return s;
}

// Four ranks connect to each other at once, each starting with a different peer (rank r with
// r+1, r+2, r+3), so that handshakes cross: a rank whose side connection was accepted may be busy
// with a third one. Then every pair streams in turn (rounds of partners r ^ 1, r ^ 2, r ^ 3) over
// rings of two slots: each connection has slots and credits of its own.
TEST(IbHandshake, FourRanksConnectingCrosswise) {
  SKIP_WITHOUT_PORT();
  uint64_t id = TestCommId();
  BlobExchange ex(4);
  auto results = mp_run(
      4,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 2, 4);
        std::vector<int> order;
        for (int s = 1; s < n; s++) order.push_back((rank + s) % n);
        RankXport x;
        std::string err = OpenIbInOrder(rank, n, id, &cfg, &ex, order, &x);
        for (int k = 1; k < n && err.empty(); k++) {
          int peer = rank ^ k;
          err = Drive(x.conns[peer], dev, rank, HostScript(rank, 40, 7 * k),
                      HostScript(peer, 40, 7 * k), Windows{4, 4}, 60000);
        }
        x.Close(false);
        dev_engine_close(dev);
        if (err.empty()) err = LeakCheck(rank);
        return err;
      },
      180000);
  EXPECT_EQ(mp_summary(results), "");
}

// Ranks that disagree on the ring's shape fail the handshake naming the peer and the knobs,
// before any write.
TEST(IbHandshake, MismatchedSlotsAreNamed) {
  SKIP_WITHOUT_PORT();
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        weft_config_t cfg = TestConfig(kSlot, rank == 0 ? 4 : 8, 4);
        RankXport x;
        std::string err = OpenIb(rank, n, id, &cfg, &ex, &x);
        if (!err.empty()) {
          x.Close(true);
          return err;
        }
        conn_t* c = x.conns[1 - rank];
        weft_result_t res = WEFT_SUCCESS;
        for (double end = NowSeconds() + 20; res == WEFT_SUCCESS && NowSeconds() < end;) {
          int progressed = 0;
          res = c->ops->progress(c, &progressed);
          if (res == WEFT_SUCCESS && !progressed) usleep(1000);
        }
        std::string msg = err_last();
        // Both ends see the mismatch in the other's data; neither closes before the other has
        // (a close would reach the peer as a reset instead).
        std::vector<std::vector<char>> all;
        char b = 1;
        err = ex.Exchange(rank, &b, 1, &all, 30000);
        x.Close(true);
        if (!err.empty()) return err;
        std::string peer = "rank " + std::to_string(1 - rank);
        if (res != WEFT_ERR_MISMATCH)
          return "rank " + std::to_string(rank) + ": handshake gave " + weft_result_string(res) +
                 ", expected a mismatch: " + msg;
        if (msg.find(peer) == std::string::npos || msg.find("WEFT_SHM_SLOTS") == std::string::npos)
          return "rank " + std::to_string(rank) + ": message: " + msg;
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

// Both ranks send `script` to each other over one verbs connection (config `cfg`, windows `w`) and
// check what arrives; "" or mp_summary's account. With leak_check, each rank also checks that
// closing freed everything.
std::string SameScriptBothWays(const std::vector<Msg>& script, const weft_config_t& cfg, Windows w,
                               int drive_ms, bool leak_check) {
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t c = cfg;
        RankXport x;
        std::string err = OpenIb(rank, n, id, &c, &ex, &x);
        if (err.empty()) err = Drive(x.conns[1 - rank], dev, rank, script, script, w, drive_ms);
        x.Close(false);
        dev_engine_close(dev);
        if (err.empty() && leak_check) err = LeakCheck(rank);
        return err;
      },
      2 * drive_ms);
  return mp_summary(results);
}

// Messages of every awkward length around the slot and the ring (two slots): empty ones (which
// take no slot) between others, one byte, a slot less one, a slot, a slot and one, two slots and
// around, and five slots and three, longer than the whole ring; in place where they fit, lent
// where they may be. Both ways at once, one at a time and many posted.
TEST(IbSlices, EmptyOddAndLongerThanTheRing) {
  SKIP_WITHOUT_PORT();
  const size_t k = kSlot;
  const size_t lens[] = {0,         1,     0,         k - 1,     k, k + 1, 0, 0,
                         2 * k - 1, 2 * k, 2 * k + 1, 5 * k + 3, 3, 0,     1};
  std::vector<Msg> script;
  for (int round = 0; round < 3; round++)
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
      size_t len = lens[i];
      bool fits = len <= kSlot;
      // Lent messages take 1 .. kSlot bytes; in-place receives at most a slot (empty ones too).
      script.push_back(
          Msg{false, len, fits && (i + round) % 2 == 0, fits && len > 0 && (i + round) % 3 == 1});
    }
  for (Windows w : {Windows{1, 1}, Windows{16, 16}})
    EXPECT_EQ(SameScriptBothWays(script, TestConfig(kSlot, 2, 4), w, 60000, true), "")
        << "windows " << w.send << "/" << w.recv;
}

// Slots longer than the port's largest message (rxe's is 8 MiB): each slot goes as several RDMA
// writes, only the last with the immediate; the receiver sees whole messages, in place and not,
// lent and not, including ones that end just past a write's limit. This checks the cut writes'
// offsets and ordering; rxe itself accepts longer writes than it advertises, so here a build
// that does not cut passes too (real adapters refuse them).
TEST(IbSlices, SlotsLongerThanThePortsLargestMessage) {
  SKIP_WITHOUT_PORT();
  // Just over the limit: the test runs in a VM of 512 MB.
  const size_t max = 8u << 20, slot = max + 4096;
  const size_t lens[] = {slot, max, max + 1, 1, 2 * slot + 3, slot - 1, 0, slot};
  std::vector<Msg> script;
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
    script.push_back(Msg{false, lens[i], i % 2 == 0 && lens[i] <= slot,
                         i % 3 == 1 && lens[i] > 0 && lens[i] <= slot});
  EXPECT_EQ(SameScriptBothWays(script, TestConfig(slot, 2, 2), Windows{2, 2}, 120000, false), "");
}

// One way only: the receiver's credit writes are all that comes back, and they alone free the
// sender's slots, hundreds of times round a ring of two.
TEST(IbSlices, OneWayCreditsAloneFreeTheSlots) {
  SKIP_WITHOUT_PORT();
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, 2, 4);
        RankXport x;
        std::string err = OpenIb(rank, n, id, &cfg, &ex, &x);
        std::vector<Msg> s = HostScript(0, 300, 11);
        if (err.empty())
          err = rank == 0 ? Drive(x.conns[1], dev, rank, s, {}, Windows{16, 1}, 60000)
                          : Drive(x.conns[0], dev, rank, {}, s, Windows{1, 16}, 60000);
        x.Close(false);
        dev_engine_close(dev);
        if (err.empty()) err = LeakCheck(rank);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
}

// ---- with a port: device buffers straight from device memory (WEFT_IB_GDR) --------------------

struct GdrCase {
  int slots, dev_slots;
  Windows w;
};

class IbGdr : public ::testing::TestWithParam<GdrCase> {};

// Host and device messages interleaved on one verbs connection, both ways at once: ordinary,
// in-place and lent, of every awkward length around the slots, device ones longer than a device
// slot cut alike at both ends. The device slots are fewer than the stream's (or more): a device
// slot is written again only once the stream slot of its last use was freed. On the emulated
// engine, whose device memory the adapter registers by address; without the device slots, the
// transport refuses device messages and this fails.
TEST_P(IbGdr, DeviceAndHostMessagesInterleave) {
  SKIP_WITHOUT_PORT();
  GdrCase k = GetParam();
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, k.slots, 4);
        cfg.ib_gdr = 1;
        cfg.device_slice_bytes = 2 * kSlot;
        cfg.device_slots = k.dev_slots;
        RankXport x;
        std::string err = OpenIb(rank, n, id, &cfg, &ex, &x, dev);
        if (err.empty() && !PublishedFacts(x.t).gdr)
          err = "rank " + std::to_string(rank) + ": WEFT_IB_GDR=1 but no GPUDirect: " + err_last();
        auto script = [&](int from) {
          return LentScript(from, 240, 2 * kSlot, kSlot, true, 57 + (uint32_t)k.dev_slots);
        };
        int peer = 1 - rank;
        if (err.empty())
          err = Drive(x.conns[peer], dev, rank, script(rank), script(peer), k.w, 60000);
        x.Close(false);
        dev_engine_close(dev);
        if (err.empty()) err = LeakCheck(rank);
        return err;
      },
      180000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(Slots, IbGdr,
                         ::testing::Values(GdrCase{4, 2, {1, 1}}, GdrCase{4, 2, {16, 16}},
                                           GdrCase{2, 3, {16, 16}}),
                         [](const ::testing::TestParamInfo<GdrCase>& info) {
                           return "slots" + std::to_string(info.param.slots) + "_dev" +
                                  std::to_string(info.param.dev_slots) + "_w" +
                                  std::to_string(info.param.w.send);
                         });

// Many messages posted at once on rings small and large.
INSTANTIATE_TEST_SUITE_P(ManyInFlight, IbStreams,
                         ::testing::Values(IbCase{4, {64, 64}, 400}, IbCase{32, {64, 64}, 600}),
                         [](const ::testing::TestParamInfo<IbCase>& info) {
                           return "slots" + std::to_string(info.param.slots) + "_w" +
                                  std::to_string(info.param.w.send) + "_" +
                                  std::to_string(info.param.w.recv);
                         });

constexpr int kRingSlots = 4;

// Runs both handshakes to the end (each side's progress answers the other's) with one message
// from rank 1 to rank 0: rank 0's own direction stays untouched, no credit of it outstanding.
std::string Handshake(conn_t* c, dev_engine_t* dev, int rank) {
  std::vector<Msg> one = {Msg{false, 100, false, false}};
  return rank == 0 ? Drive(c, dev, rank, {}, one, Windows{1, 1}, 30000)
                   : Drive(c, dev, rank, one, {}, Windows{1, 1}, 30000);
}

// Backpressure with ordinary sends: a send completes once its bytes are in a staging slot, and a
// staging slot is written again only once the receiver freed the slot it went to. With the
// receiver taking nothing, exactly as many one-slot sends complete as the ring has slots, however
// long the sender goes on; once the receiver takes them, all arrive intact and in order.
TEST(IbBackpressure, SendsStopAtTheRingThenResume) {
  SKIP_WITHOUT_PORT();
  const int kTotal = 4 * kRingSlots + 1;
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, kRingSlots, 4);
        RankXport x;
        std::string err = OpenIb(rank, n, id, &cfg, &ex, &x);
        conn_t* c = err.empty() ? x.conns[1 - rank] : nullptr;
        if (err.empty()) err = Handshake(c, dev, rank);
        std::vector<std::vector<uint8_t>> bufs(kTotal, std::vector<uint8_t>(kSlot));
        std::vector<xfer_t> xs(kTotal);
        auto go = [&]() {  // the receiver starts once the sender has seen the ring full
          std::vector<std::vector<char>> all;
          char b = 1;
          return ex.Exchange(rank, &b, 1, &all, 30000);
        };
        auto run_until = [&](double seconds, const std::function<bool()>& done) -> std::string {
          for (double end = NowSeconds() + seconds; !done() && NowSeconds() < end;) {
            int progressed = 0;
            if (c->ops->progress(c, &progressed) != WEFT_SUCCESS ||
                (!progressed && c->ops->wait(&c, 1, 20, kWaitSpinUs) != WEFT_SUCCESS))
              return "rank " + std::to_string(rank) + ": " + err_last();
          }
          return "";
        };
        auto completed = [&]() {
          int k = 0;
          while (k < kTotal && xs[k].complete) k++;
          return k;
        };
        if (err.empty() && rank == 0) {
          for (int m = 0; m < kTotal && err.empty(); m++) {
            for (size_t j = 0; j < kSlot; j++) bufs[m][j] = (uint8_t)(m * 31 + j * 7 + 1);
            if (c->ops->post_send(c, bufs[m].data(), kSlot, &xs[m]) != WEFT_SUCCESS)
              err = "post_send: " + std::string(err_last());
          }
          if (err.empty()) err = run_until(0.5, [] { return false; });
          int stalled = completed();
          if (err.empty() && stalled != kRingSlots)
            err = std::to_string(stalled) + " sends completed with nothing received, expected " +
                  std::to_string(kRingSlots) + " (the ring's slots)";
          if (err.empty()) err = go();
          if (err.empty()) err = run_until(30, [&] { return completed() == kTotal; });
          if (err.empty() && completed() != kTotal)
            err = "only " + std::to_string(completed()) + " of " + std::to_string(kTotal) +
                  " sends completed once the receiver took them";
        } else if (err.empty()) {
          err = go();
          for (int m = 0; m < kTotal && err.empty(); m++)
            if (c->ops->post_recv(c, bufs[m].data(), kSlot, &xs[m]) != WEFT_SUCCESS)
              err = "post_recv: " + std::string(err_last());
          if (err.empty()) err = run_until(30, [&] { return completed() == kTotal; });
          for (int m = 0; m < kTotal && err.empty(); m++) {
            if (!xs[m].complete) err = "message " + std::to_string(m) + " never arrived";
            for (size_t j = 0; j < kSlot && err.empty(); j++)
              if (bufs[m][j] != (uint8_t)(m * 31 + j * 7 + 1))
                err = "message " + std::to_string(m) + " byte " + std::to_string(j) + " is wrong";
          }
        }
        x.Close(false);
        dev_engine_close(dev);
        if (err.empty()) err = LeakCheck(rank);
        return err.empty() ? "" : "rank " + std::to_string(rank) + ": " + err;
      },
      90000);
  EXPECT_EQ(mp_summary(results), "");
}

// Backpressure with lent device slots (fused steps on device buffers, WEFT_IB_GDR): lend_send
// gives exactly as many slots at once as the fewer of the stream's and the device slots, then,
// committed and not received, no more however long the sender asks; once the receiver takes them,
// lending goes on to the end.
struct LendCase {
  int slots, dev_slots;
};

class IbLendBackpressure : public ::testing::TestWithParam<LendCase> {};

TEST_P(IbLendBackpressure, LendingStopsAtTheRingThenResumes) {
  SKIP_WITHOUT_PORT();
  LendCase k = GetParam();
  const int ring = std::min(k.slots, k.dev_slots), kTotal = 4 * ring + 3;
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, k.slots, 2);
        cfg.ib_gdr = 1;
        cfg.device_slice_bytes = kSlot;
        cfg.device_slots = k.dev_slots;
        RankXport x;
        std::string err = OpenIb(rank, n, id, &cfg, &ex, &x, dev);
        conn_t* c = err.empty() ? x.conns[1 - rank] : nullptr;
        if (err.empty()) err = Handshake(c, dev, rank);
        auto go = [&]() {
          std::vector<std::vector<char>> all;
          char b = 1;
          return ex.Exchange(rank, &b, 1, &all, 30000);
        };
        if (err.empty() && rank == 0) {
          int at_once = 0, stalled = 0;
          err = LendUntilFull(c, dev, rank, kSlot, kTotal, go, &at_once, &stalled, 30000);
          if (err.empty() && (at_once != ring || stalled != ring))
            err = "lent " + std::to_string(at_once) + " at once and stalled after " +
                  std::to_string(stalled) + ", expected " + std::to_string(ring) + " and " +
                  std::to_string(ring);
        } else if (err.empty()) {
          std::vector<Msg> in;
          for (int i = 0; i < kTotal; i++) in.push_back({true, kSlot, i % 2 == 0});
          err = go();
          if (err.empty()) err = Drive(c, dev, rank, {}, in, Windows{3, 3}, 30000);
        }
        x.Close(false);
        dev_engine_close(dev);
        if (err.empty()) err = LeakCheck(rank);
        return err;
      },
      90000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(Slots, IbLendBackpressure,
                         ::testing::Values(LendCase{kRingSlots, kRingSlots},
                                           LendCase{kRingSlots, 2}, LendCase{2, kRingSlots}),
                         [](const ::testing::TestParamInfo<LendCase>& info) {
                           return "slots" + std::to_string(info.param.slots) + "_dev" +
                                  std::to_string(info.param.dev_slots);
                         });

}  // namespace
