// api_test.cc -- the NCCL API on weft, called through nccl/nccl.h as a program written for NCCL
// calls it: unique ids (made by the test and by NCCL_COMM_ID), init with configs of every size,
// the collectives on a few dtypes and ops, send/recv rings in (nested) groups, split, and
// NCCL's answers to bad arguments and to the calls weft refuses. Host buffers with NULL streams
// (weft.h's host mode), 4 real processes on loopback.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl/nccl.h"
#include "tests/harness/mp_harness.h"

// NCCL 2.30's parameter API, which nccl/nccl.h (2.29's surface) does not declare; weft refuses
// it without reading arguments.
extern "C" ncclResult_t ncclParamBind();

namespace {

const int kTimeoutMs = 60000;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

#define CHECK_NCCL(call)                                                                          \
  do {                                                                                            \
    ncclResult_t res_ = (call);                                                                   \
    if (res_ != ncclSuccess)                                                                      \
      return "rank " + std::to_string(rank) + ": " #call ": " + ncclGetErrorString(res_) + ": " + \
             ncclGetLastError(nullptr);                                                           \
  } while (0)

#define CHECK_TRUE(cond, what)                                          \
  do {                                                                  \
    if (!(cond)) return "rank " + std::to_string(rank) + ": " + (what); \
  } while (0)

// All-reduce (int32 sum, float32 max, float64 avg, fp8 e4m3 and e5m2 sums), broadcast from rank
// 1, in-place bcast from the last rank, reduce to rank 2 (int64 prod), all-gather, reduce-scatter
// (float sum, in place too), all-to-all, gather and scatter on `comm` of n ranks.
std::string check_collectives(ncclComm_t comm, int rank, int n) {
  const size_t count = 1000;
  {
    std::vector<int32_t> in(count), out(count, -1);
    for (size_t i = 0; i < count; i++) in[i] = static_cast<int32_t>(rank * 1000 + i);
    CHECK_NCCL(ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr));
    for (size_t i = 0; i < count; i++)
      CHECK_TRUE(out[i] == static_cast<int32_t>(1000 * n * (n - 1) / 2 + n * i),
                 "all-reduce sum at " + std::to_string(i) + ": " + std::to_string(out[i]));
  }
  {
    std::vector<float> x(count);
    for (size_t i = 0; i < count; i++) x[i] = static_cast<float>((rank + i) % n);
    CHECK_NCCL(ncclAllReduce(x.data(), x.data(), count, ncclFloat32, ncclMax, comm, nullptr));
    for (size_t i = 0; i < count; i++) CHECK_TRUE(x[i] == n - 1, "all-reduce max (in place)");
  }
  {
    std::vector<double> x(count, rank);
    CHECK_NCCL(ncclAllReduce(x.data(), x.data(), count, ncclFloat64, ncclAvg, comm, nullptr));
    for (size_t i = 0; i < count; i++) CHECK_TRUE(x[i] == (n - 1) / 2.0, "all-reduce avg");
  }
  {
    // fp8 travels as bytes: e4m3 448 (0x7e) from every rank saturates at 448; e5m2 1.0 (0x3c)
    // from every rank adds up to n, written out here for n <= 8.
    std::vector<uint8_t> e4(count, 0x7e), e5(count, 0x3c);
    CHECK_NCCL(ncclAllReduce(e4.data(), e4.data(), count, ncclFloat8e4m3, ncclSum, comm, nullptr));
    CHECK_NCCL(ncclAllReduce(e5.data(), e5.data(), count, ncclFloat8e5m2, ncclSum, comm, nullptr));
    static const uint8_t kE5m2Int[] = {0x00, 0x3c, 0x40, 0x42, 0x44, 0x45, 0x46, 0x47, 0x48};
    for (size_t i = 0; i < count; i++) {
      CHECK_TRUE(e4[i] == 0x7e, "all-reduce e4m3 sum saturates: " + std::to_string(e4[i]));
      if (n <= 8) CHECK_TRUE(e5[i] == kE5m2Int[n], "all-reduce e5m2 sum: " + std::to_string(e5[i]));
    }
  }
  {
    std::vector<float> in(count, static_cast<float>(rank)), out(count, -1);
    CHECK_NCCL(ncclBroadcast(in.data(), out.data(), count, ncclFloat32, 1, comm, nullptr));
    for (size_t i = 0; i < count; i++) CHECK_TRUE(out[i] == 1, "broadcast from 1");
    std::vector<uint8_t> b(count, static_cast<uint8_t>(rank + 7));
    CHECK_NCCL(ncclBcast(b.data(), count, ncclUint8, n - 1, comm, nullptr));
    for (size_t i = 0; i < count; i++) CHECK_TRUE(b[i] == n - 1 + 7, "bcast in place");
  }
  {
    std::vector<int64_t> in(count, rank + 1), out(count, 0);
    CHECK_NCCL(ncclReduce(in.data(), out.data(), count, ncclInt64, ncclProd, 2, comm, nullptr));
    int64_t want = 1;
    for (int r = 1; r <= n; r++) want *= r;
    if (rank == 2)
      for (size_t i = 0; i < count; i++) CHECK_TRUE(out[i] == want, "reduce prod");
  }
  {
    std::vector<int64_t> in(count, rank), out(count * n, -1);
    CHECK_NCCL(ncclAllGather(in.data(), out.data(), count, ncclInt64, comm, nullptr));
    for (size_t i = 0; i < count * n; i++)
      CHECK_TRUE(out[i] == static_cast<int64_t>(i / count), "all-gather");
  }
  {
    std::vector<float> in(count * n), out(count, -1);
    for (size_t i = 0; i < count * n; i++) in[i] = static_cast<float>(i / count + rank);
    CHECK_NCCL(
        ncclReduceScatter(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
    for (size_t i = 0; i < count; i++)
      CHECK_TRUE(out[i] == rank * n + n * (n - 1) / 2.0f, "reduce-scatter");
    // In place: recvbuff is sendbuff + rank * recvcount.
    CHECK_NCCL(ncclReduceScatter(in.data(), in.data() + rank * count, count, ncclFloat32, ncclSum,
                                 comm, nullptr));
    for (size_t i = 0; i < count; i++)
      CHECK_TRUE(in[rank * count + i] == out[i], "reduce-scatter in place");
  }
  {
    std::vector<int32_t> in(count * n), out(count * n, -1);
    for (size_t i = 0; i < count * n; i++) in[i] = static_cast<int32_t>(rank * 100 + i / count);
    CHECK_NCCL(ncclAlltoAll(in.data(), out.data(), count, ncclInt32, comm, nullptr));
    for (size_t i = 0; i < count * n; i++)
      CHECK_TRUE(out[i] == static_cast<int32_t>(i / count * 100 + rank), "all-to-all");
  }
  {
    std::vector<int32_t> in(count, rank), out(count * n, -1);
    CHECK_NCCL(ncclGather(in.data(), out.data(), count, ncclInt32, 0, comm, nullptr));
    if (rank == 0)
      for (size_t i = 0; i < count * n; i++)
        CHECK_TRUE(out[i] == static_cast<int32_t>(i / count), "gather to 0");
    std::vector<int32_t> back(count, -1);
    CHECK_NCCL(ncclScatter(out.data(), back.data(), count, ncclInt32, 0, comm, nullptr));
    for (size_t i = 0; i < count; i++) CHECK_TRUE(back[i] == rank, "scatter from 0");
  }
  return "";
}

// An id names a port nobody holds until rank 0 joins; one the kernel hands out by itself (port
// 0 binds, outgoing connections) it may hand out again meanwhile, e.g. to a transport listener of
// an earlier communicator, and rank 0 would fail to listen there. So ids take ports below (or
// above) the kernel's ephemeral range. White box: weft's id keeps the port at bytes 16..19.
TEST(NcclApi, UniqueIdsTakePortsTheKernelDoesNotHandOut) {
  int lo = 32768, hi = 60999;
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768, hi = 60999;
    fclose(f);
  }
  if (lo - 20000 < 1000 && 65535 - hi < 1000) GTEST_SKIP() << "the ephemeral range is everything";
  unsetenv("NCCL_COMM_ID");
  for (int i = 0; i < 20; i++) {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
    int32_t port = 0;
    memcpy(&port, id.internal + 16, sizeof port);
    EXPECT_TRUE(port > 0 && (port < lo || port > hi))
        << "port " << port << " is in the ephemeral range " << lo << "-" << hi;
  }
}

TEST(NcclApi, CollectivesWithAnIdMadeBeforeTheRanksStart) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  auto results = mp_run(
      4,
      [&](int rank, int n, int) -> std::string {
        ncclComm_t comm = nullptr;
        CHECK_NCCL(ncclCommInitRank(&comm, n, id, rank));
        int count = -1, me = -1, dev = -1;
        CHECK_NCCL(ncclCommCount(comm, &count));
        CHECK_NCCL(ncclCommUserRank(comm, &me));
        CHECK_NCCL(ncclCommCuDevice(comm, &dev));
        CHECK_TRUE(count == n && me == rank && dev >= 0, "count/rank/device");
        std::string err = check_collectives(comm, rank, n);
        if (!err.empty()) return err;
        ncclResult_t async = ncclInternalError;
        CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
        CHECK_TRUE(async == ncclSuccess, "async error " + std::to_string(async));
        CHECK_NCCL(ncclCommFinalize(comm));
        CHECK_NCCL(ncclCommDestroy(comm));
        return "";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

// Sends to rank+1 and receives from rank-1 (and the reverse ring in the same group), inside a
// group nested twice: the inner ncclGroupEnd issues nothing, the outer one everything, and two
// all-reduces queued in the same group run in issue order.
TEST(NcclApi, SendRecvRingsInNestedGroups) {
  auto results = mp_run(
      4,
      [&](int rank, int n, int port) -> std::string {
        setenv("NCCL_COMM_ID", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
        ncclUniqueId id;
        CHECK_NCCL(ncclGetUniqueId(&id));
        ncclComm_t comm = nullptr;
        CHECK_NCCL(ncclCommInitRank(&comm, n, id, rank));
        const size_t count = 5000;
        std::vector<float> out(count, static_cast<float>(rank)),
            back(count, static_cast<float>(rank));
        std::vector<float> from_left(count, -1), from_right(count, -1);
        int right = (rank + 1) % n, left = (rank + n - 1) % n;
        CHECK_NCCL(ncclGroupStart());
        CHECK_NCCL(ncclGroupStart());
        CHECK_NCCL(ncclSend(out.data(), count, ncclFloat32, right, comm, nullptr));
        CHECK_NCCL(ncclRecv(from_left.data(), count, ncclFloat32, left, comm, nullptr));
        CHECK_NCCL(ncclGroupEnd());
        CHECK_TRUE(from_left[0] == -1, "the inner ncclGroupEnd ran the group");
        CHECK_NCCL(ncclRecv(from_right.data(), count, ncclFloat32, right, comm, nullptr));
        CHECK_NCCL(ncclSend(back.data(), count, ncclFloat32, left, comm, nullptr));
        std::vector<int32_t> a(10, 1), b(10, 0);
        CHECK_NCCL(ncclAllReduce(a.data(), b.data(), 10, ncclInt32, ncclSum, comm, nullptr));
        CHECK_NCCL(ncclAllReduce(b.data(), b.data(), 10, ncclInt32, ncclSum, comm, nullptr));
        CHECK_NCCL(ncclGroupEnd());
        for (size_t i = 0; i < count; i++) {
          CHECK_TRUE(from_left[i] == left, "from the left: " + std::to_string(from_left[i]));
          CHECK_TRUE(from_right[i] == right, "from the right: " + std::to_string(from_right[i]));
        }
        for (int i = 0; i < 10; i++) CHECK_TRUE(b[i] == n * n, "two all-reduces in order");
        // A send/recv outside any group, as its own group.
        if (rank == 0) CHECK_NCCL(ncclSend(out.data(), 10, ncclFloat32, 1, comm, nullptr));
        if (rank == 1) {
          CHECK_NCCL(ncclRecv(from_left.data(), 10, ncclFloat32, 0, comm, nullptr));
          CHECK_TRUE(from_left[0] == 0, "a lone recv");
        }
        CHECK_NCCL(ncclCommDestroy(comm));
        return "";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

// A caller's config as an older or newer release lays it out: `size` bytes of it, then guard
// bytes that weft must neither read for meaning nor write.
struct SizedConfig {
  unsigned char bytes[160];
  explicit SizedConfig(size_t size, unsigned version) {
    memset(bytes, 0xa5, sizeof bytes);
    ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    memcpy(bytes, &init, size < sizeof init ? size : sizeof init);
    memcpy(bytes, &size, sizeof size);
    memcpy(bytes + offsetof(ncclConfig_t, version), &version, sizeof version);
  }
  ncclConfig_t* get() { return reinterpret_cast<ncclConfig_t*>(bytes); }
  bool guard_intact(size_t size) const {
    for (size_t i = size; i < sizeof bytes; i++)
      if (bytes[i] != 0xa5) return false;
    return true;
  }
};

// Configs of 2.28 (80 bytes), 2.29 (88, torch 2.13's header), 2.30 (96, torch 2.14/2.15's) and
// a later, larger one: each accepted, nonblocking included, and nothing written past its size.
// Then split by parity and use the halves.
TEST(NcclApi, ConfigsOfEverySizeAndSplit) {
  ncclUniqueId ids[4];  // one per init: a new rendezvous each time
  for (auto& id : ids) ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  auto results = mp_run(
      4,
      [&](int rank, int n, int) -> std::string {
        struct {
          size_t size;
          unsigned version;
        } sizes[] = {{80, 22809}, {88, 22907}, {96, 23007}, {120, 23200}};
        ncclComm_t comm = nullptr;
        for (int k = 0; k < 4; k++) {
          auto s = sizes[k];
          SizedConfig cfg(s.size, s.version);
          int blocking = s.size == 88 ? 0 : 1;
          memcpy(cfg.bytes + offsetof(ncclConfig_t, blocking), &blocking, sizeof blocking);
          ncclResult_t res = ncclCommInitRankConfig(&comm, n, ids[k], rank, cfg.get());
          CHECK_TRUE(
              res == ncclSuccess || res == ncclInProgress,
              "config of " + std::to_string(s.size) + " bytes: " + ncclGetLastError(nullptr));
          ncclResult_t state = ncclInProgress;
          while (state == ncclInProgress) CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
          CHECK_TRUE(state == ncclSuccess, "init state with a config of " +
                                               std::to_string(s.size) + " bytes: " +
                                               ncclGetLastError(comm));
          CHECK_TRUE(cfg.guard_intact(s.size),
                     "wrote past a config of " + std::to_string(s.size) + " bytes");
          int32_t x = rank;
          CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr));
          CHECK_TRUE(x == n * (n - 1) / 2, "all-reduce after a config init");
          if (s.size != 120) CHECK_NCCL(ncclCommDestroy(comm));
        }
        ncclComm_t half = nullptr;
        SizedConfig cfg(88, 22907);
        CHECK_NCCL(ncclCommSplit(comm, rank % 2, -rank, &half, cfg.get()));
        CHECK_TRUE(cfg.guard_intact(88), "split wrote past its config");
        int hn = -1, hr = -1;
        CHECK_NCCL(ncclCommCount(half, &hn));
        CHECK_NCCL(ncclCommUserRank(half, &hr));
        CHECK_TRUE(hn == n / 2 && hr == (n / 2 - 1 - rank / 2), "split shape");
        int32_t x = rank;
        CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, half, nullptr));
        CHECK_TRUE(x == (rank % 2 ? 1 + 3 : 0 + 2), "all-reduce on a half: " + std::to_string(x));
        ncclComm_t none = reinterpret_cast<ncclComm_t>(1);
        CHECK_NCCL(ncclCommSplit(comm, NCCL_SPLIT_NOCOLOR, 0, &none, nullptr));
        CHECK_TRUE(none == nullptr, "NOCOLOR gives no communicator");
        CHECK_NCCL(ncclCommDestroy(half));
        CHECK_NCCL(ncclCommDestroy(comm));
        return "";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

// A nonblocking init (blocking = 0): the call returns ncclInProgress at once while a rank is
// still missing, ncclCommGetAsyncError says ncclInProgress until every rank joined and then
// ncclSuccess, and the communicator works. Rank 1 arrives 500 ms late.
TEST(NcclApi, NonblockingInitReturnsInProgressAndIsPolled) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclComm_t comm = nullptr;
        auto t0 = std::chrono::steady_clock::now();
        ncclResult_t res = ncclCommInitRankConfig(&comm, n, id, rank, &cfg);
        double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CHECK_TRUE(comm != nullptr, "no communicator from a nonblocking init");
        ncclResult_t state = ncclInProgress;
        int polls = 0;
        CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
        if (rank == 0) {
          CHECK_TRUE(res == ncclInProgress, std::string("init returned ") +
                                                ncclGetErrorString(res) + " with a rank missing");
          CHECK_TRUE(took < 0.2, "a nonblocking init took " + std::to_string(took) + " s");
          CHECK_TRUE(state == ncclInProgress, "polled right after init: not in progress");
        }
        while (state == ncclInProgress) {
          polls++;
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
        }
        CHECK_TRUE(state == ncclSuccess, std::string("init ended with ") +
                                             ncclGetErrorString(state) + ": " +
                                             ncclGetLastError(nullptr));
        int count = -1;
        CHECK_NCCL(ncclCommCount(comm, &count));
        CHECK_TRUE(count == n, "count after a nonblocking init");
        int32_t x = rank + 1;
        CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr));
        CHECK_TRUE(x == 3, "all-reduce after a nonblocking init: " + std::to_string(x));
        CHECK_NCCL(ncclCommDestroy(comm));
        return "";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

// A nonblocking init that cannot complete (its peer never comes) is reported by
// ncclCommGetAsyncError with the reason, within the connect timeout; the communicator is then
// destroyed without trouble, and a call on it says why it cannot run.
TEST(NcclApi, NonblockingInitFailureIsReportedByThePoll) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  setenv("WEFT_CONNECT_TIMEOUT_MS", "1000", 1);
  auto results = mp_run(
      1,
      [&](int rank, int, int) -> std::string {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclComm_t comm = nullptr;
        ncclResult_t res = ncclCommInitRankConfig(&comm, 2, id, 0, &cfg);  // rank 1 never comes
        CHECK_TRUE(res == ncclInProgress, std::string("init returned ") + ncclGetErrorString(res));
        ncclResult_t state = ncclInProgress;
        auto t0 = std::chrono::steady_clock::now();
        while (state == ncclInProgress) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
        }
        double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::string why = ncclGetLastError(nullptr);
        CHECK_TRUE(state != ncclSuccess, "an init without its peer succeeded");
        CHECK_TRUE(took < 10, "the failure took " + std::to_string(took) + " s to show");
        CHECK_TRUE(contains(why, "comm_init"), "the poll's last error does not say why: " + why);
        int32_t x = 1;
        ncclResult_t call = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr);
        std::string msg = ncclGetLastError(nullptr);
        CHECK_TRUE(call != ncclSuccess && contains(msg, "nonblocking init failed"),
                   "a call after the failed init: " + msg);
        CHECK_NCCL(ncclCommDestroy(comm));
        return "";
      },
      kTimeoutMs);
  unsetenv("WEFT_CONNECT_TIMEOUT_MS");
  EXPECT_EQ(mp_summary(results), "");
}

// ncclCommInitAll: 3 ranks in one process, then one group over the 3 communicators (an
// all-reduce on each and a send/recv ring), which the thread issues without waiting on itself.
TEST(NcclApi, InitAllAndAGroupOverItsCommunicators) {
  const int n = 3;
  ncclComm_t comms[n] = {nullptr, nullptr, nullptr};
  ASSERT_EQ(ncclCommInitAll(comms, n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<int32_t>> x(n), got(n, std::vector<int32_t>(8, -1));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++) {
    int rank = -1;
    ASSERT_EQ(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    ASSERT_EQ(rank, r);
    x[r].assign(8, r + 1);
    ASSERT_EQ(ncclAllReduce(x[r].data(), x[r].data(), 8, ncclInt32, ncclSum, comms[r], nullptr),
              ncclSuccess);
    ASSERT_EQ(ncclSend(x[r].data(), 8, ncclInt32, (r + 1) % n, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclRecv(got[r].data(), 8, ncclInt32, (r + n - 1) % n, comms[r], nullptr),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(x[r][7], 6);
    // The send reads x after the all-reduce queued before it on the same communicator.
    EXPECT_EQ(got[r][0], 6);
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

// ncclCommAbort from another thread (torch's watchdog) ends an all-reduce that waits for a peer
// that never joins it: within a few seconds, not at WEFT_TIMEOUT_MS.
TEST(NcclApi, AbortFromAnotherThreadEndsABlockedCall) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        setenv("WEFT_TIMEOUT_MS", "30000", 1);
        ncclComm_t comm = nullptr;
        CHECK_NCCL(ncclCommInitRank(&comm, n, id, rank));
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(2));
          CHECK_NCCL(ncclCommAbort(comm));
          return "";
        }
        std::thread watchdog([comm] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          ncclCommAbort(comm);
        });
        auto start = std::chrono::steady_clock::now();
        float x[16] = {0};
        ncclResult_t res = ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, comm, nullptr);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        watchdog.join();
        CHECK_TRUE(res != ncclSuccess, "the blocked all-reduce succeeded");
        CHECK_TRUE(s < 1.5, "the abort took " + std::to_string(s) + " s");
        ncclResult_t async;
        CHECK_TRUE(ncclCommGetAsyncError(comm, &async) == ncclInvalidUsage, "comm still usable");
        CHECK_NCCL(ncclCommDestroy(comm));
        return "";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

// ncclCommShrink: ranks 0-2 leave rank 3 out (it calls nothing and aborts later) and use the
// new communicator of 3.
TEST(NcclApi, ShrinkLeavesARankOut) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  auto results = mp_run(
      4,
      [&](int rank, int n, int) -> std::string {
        ncclComm_t comm = nullptr;
        CHECK_NCCL(ncclCommInitRank(&comm, n, id, rank));
        if (rank == 3) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          CHECK_NCCL(ncclCommAbort(comm));
          return "";
        }
        int out[] = {3};
        ncclComm_t small = nullptr;
        CHECK_NCCL(ncclCommShrink(comm, out, 1, &small, nullptr, NCCL_SHRINK_DEFAULT));
        int count = -1, me = -1;
        CHECK_NCCL(ncclCommCount(small, &count));
        CHECK_NCCL(ncclCommUserRank(small, &me));
        CHECK_TRUE(count == 3 && me == rank, "shrunk shape");
        int32_t x = rank + 1;
        CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, small, nullptr));
        CHECK_TRUE(x == 6, "all-reduce on the shrunk communicator: " + std::to_string(x));
        CHECK_NCCL(ncclCommDestroy(small));
        CHECK_NCCL(ncclCommAbort(comm));
        return "";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

// ncclGroupSimulateEnd prices the group with weft's cost model (microseconds) and runs nothing:
// a larger all-reduce costs more, a send/recv pair costs something, the buffers stay as they
// were, and the next real call pairs up on every rank (no simulated call was issued).
// After rank 3 is killed (SIGKILL, mid-job), an all-reduce on the others fails with an error
// instead of hanging, and ncclCommShrink with NCCL_SHRINK_ABORT gives the three survivors a
// communicator that works.
TEST(NcclApi, ShrinkAfterAKilledRank) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  auto results = mp_run(
      4,
      [&](int rank, int n, int) -> std::string {
        setenv("WEFT_TIMEOUT_MS", "10000", 1);
        ncclComm_t comm = nullptr;
        CHECK_NCCL(ncclCommInitRank(&comm, n, id, rank));
        int32_t x = 1;
        CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr));
        CHECK_TRUE(x == 4, "all-reduce before the kill");
        if (rank == 3) raise(SIGKILL);
        std::vector<int32_t> big(1 << 16, 1);
        ncclResult_t res = ncclAllReduce(big.data(), big.data(), big.size(), ncclInt32, ncclSum,
                                         comm, nullptr);
        CHECK_TRUE(res != ncclSuccess, "an all-reduce with a killed rank succeeded");
        std::string why = ncclGetLastError(nullptr);
        ncclResult_t async = ncclSuccess;
        CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
        CHECK_TRUE(async != ncclSuccess, "the failed communicator reports no error: " + why);
        int out[] = {3};
        ncclComm_t small = nullptr;
        CHECK_NCCL(ncclCommShrink(comm, out, 1, &small, nullptr, NCCL_SHRINK_ABORT));
        int count = -1;
        CHECK_NCCL(ncclCommCount(small, &count));
        CHECK_TRUE(count == 3, "shrunk to " + std::to_string(count));
        x = rank + 1;
        CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, small, nullptr));
        CHECK_TRUE(x == 6, "all-reduce among the survivors: " + std::to_string(x));
        CHECK_NCCL(ncclCommDestroy(small));
        CHECK_NCCL(ncclCommAbort(comm));
        return "";
      },
      kTimeoutMs);
  for (int r = 0; r < 3; r++) EXPECT_EQ(results[r].message, "") << "rank " << r;
  EXPECT_EQ(results[3].term_signal, SIGKILL);
}

TEST(NcclApi, GroupSimulateEndEstimatesWithoutRunning) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        ncclComm_t comm;
        CHECK_NCCL(ncclCommInitRank(&comm, n, id, rank));
        std::vector<float> x(1 << 20, static_cast<float>(rank + 1));
        float est[3];
        for (int k = 0; k < 3; k++) {
          ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
          CHECK_NCCL(ncclGroupStart());
          if (k < 2) {
            size_t count = k == 0 ? 1000 : x.size();
            CHECK_NCCL(ncclAllReduce(x.data(), x.data(), count, ncclFloat32, ncclSum, comm,
                                     nullptr));
          } else {
            CHECK_NCCL(ncclSend(x.data(), 1000, ncclFloat32, 1 - rank, comm, nullptr));
            CHECK_NCCL(ncclRecv(x.data(), 1000, ncclFloat32, 1 - rank, comm, nullptr));
          }
          CHECK_NCCL(ncclGroupSimulateEnd(&info));
          est[k] = info.estimatedTime;
          CHECK_TRUE(est[k] > 0 && est[k] < 1e7, "estimate " + std::to_string(est[k]) + " us");
        }
        CHECK_TRUE(est[1] > est[0], "1 Mi floats estimated at " + std::to_string(est[1]) +
                                        " us, 1000 at " + std::to_string(est[0]));
        for (float v : x) CHECK_TRUE(v == rank + 1, "a simulated call ran");
        CHECK_NCCL(ncclAllReduce(x.data(), x.data(), 4, ncclFloat32, ncclSum, comm, nullptr));
        CHECK_TRUE(x[0] == 3, "the all-reduce after the simulations: " + std::to_string(x[0]));
        // A refused call in a simulated group fails it, as in a real one.
        ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
        CHECK_NCCL(ncclGroupStart());
        CHECK_TRUE(ncclAllReduce(x.data(), x.data(), 4, static_cast<ncclDataType_t>(42), ncclSum,
                                 comm, nullptr) == ncclInvalidArgument,
                   "bad datatype accepted");
        CHECK_TRUE(ncclGroupSimulateEnd(&info) == ncclInvalidArgument, "simulated bad group");
        CHECK_NCCL(ncclCommDestroy(comm));
        return "";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

TEST(NcclApi, VersionAndErrorStrings) {
  int v = 0;
  EXPECT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION(2, 30, 7));
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "weft")) << ncclGetLastError(nullptr);
  for (int r = ncclSuccess; r <= ncclNumResults; r++)
    EXPECT_GT(strlen(ncclGetErrorString(static_cast<ncclResult_t>(r))), 0u);
}

// NCCL's codes for misuse, on one rank: a NULL or bogus comm, bad datatypes and ops, a count
// that overflows, a bad peer, config errors, unmatched group ends, the calls weft refuses, and
// PreMulSum operators' lifetime and datatype.
TEST(NcclApi, BadArgumentsGetNcclCodes) {
  float x[4] = {1, 2, 3, 4};
  EXPECT_EQ(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "ncclAllReduce: comm is NULL"));
  int bogus[16] = {0};
  EXPECT_EQ(ncclCommCount(reinterpret_cast<ncclComm_t>(bogus), bogus), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(nullptr, 1, ncclUniqueId{}, 0), ncclInvalidArgument);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 1, ncclUniqueId{}, 0), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "not made by ncclGetUniqueId"));
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "NCCL_CONFIG_INITIALIZER"));

  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclAllReduce(x, x, 4, static_cast<ncclDataType_t>(12), ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "invalid datatype 12"));
  EXPECT_EQ(ncclAllReduce(x, x, SIZE_MAX / 2, ncclFloat32, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "overflows")) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclAllReduce(x, x, 4, ncclFloat32, static_cast<ncclRedOp_t>(9), comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclSend(x, 4, ncclFloat32, 1, comm, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "peer 1"));
  EXPECT_EQ(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  for (int i = 0; i < 4; i++) EXPECT_EQ(x[i], i + 1);

  // A refused call inside a group fails the group's end, and nothing of it runs.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(x, x, 4, static_cast<ncclDataType_t>(99), ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "without a matching ncclGroupStart"));

  // No-ops, refusals, not yet.
  void* handle = nullptr;
  EXPECT_EQ(ncclCommRegister(comm, x, sizeof x, &handle), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(comm, handle), ncclSuccess);
  EXPECT_EQ(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess);
  EXPECT_EQ(ncclCommResume(comm), ncclSuccess);
  uint64_t bytes = 7;
  EXPECT_EQ(ncclCommMemStats(comm, ncclStatGpuMemTotal, &bytes), ncclSuccess);
  EXPECT_EQ(bytes, 0u);
  ncclWindow_t win;
  EXPECT_EQ(ncclCommWindowRegister(comm, x, sizeof x, &win, NCCL_WIN_DEFAULT), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "memory windows"));
  EXPECT_EQ(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclInvalidUsage);
  EXPECT_EQ(ncclSignal(0, 0, 0, 0, comm, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclParamBind(), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "environment variables"));

  // PreMulSum operators: made per communicator, for one datatype, refused once destroyed.
  ncclRedOp_t op, op2;
  float f = 3;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &f, ncclFloat32, ncclScalarHostImmediate, comm),
            ncclSuccess);
  EXPECT_EQ(static_cast<int>(op), static_cast<int>(ncclNumOps));
  f = 100;  // read at creation
  EXPECT_EQ(ncclAllReduce(x, x, 4, ncclFloat32, op, comm, nullptr), ncclSuccess);
  for (int i = 0; i < 4; i++) EXPECT_EQ(x[i], 3 * (i + 1));
  EXPECT_EQ(ncclAllReduce(x, x, 4, ncclFloat64, op, comm, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "made for datatype 7"));
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op2, &f, ncclFloat32, ncclScalarHostImmediate, comm),
            ncclSuccess);
  EXPECT_NE(op, op2);
  EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
  EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(x, x, 4, ncclFloat32, op, comm, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "no live operator"));
  EXPECT_EQ(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat32, ncclScalarHostImmediate, comm),
            ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &f, ncclFloat32, static_cast<ncclScalarResidence_t>(5),
                                     comm),
            ncclInvalidArgument);
  EXPECT_EQ(ncclRedOpDestroy(op2, comm), ncclSuccess);

  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);  // destroy after abort
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
}

}  // namespace
