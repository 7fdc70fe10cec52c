// ibverbs_test.cc -- the RDMA verbs transport between real processes.
//
// Everywhere: WEFT_TRANSPORT=ib on a machine without an active RDMA port (no libibverbs, no
// device) fails init with a message naming the rank and why, auto carries on over shm and TCP, and
// a malformed WEFT_IB_HCA is an error. Where a port is active (a Soft-RoCE device in
// scripts/rdma-vm.sh, or real hardware): scripted streams over the transport itself (ordinary,
// in-place and lent messages, both ways, rings that fill), collectives with WEFT_TRANSPORT=ib, and
// a peer killed mid-stream; those skip elsewhere.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

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

std::string OpenIb(int rank, int n, uint64_t comm_id, const weft_config_t* cfg, BlobExchange* ex,
                   RankXport* out) {
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

}  // namespace
