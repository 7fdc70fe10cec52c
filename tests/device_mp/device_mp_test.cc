// device_mp_test.cc -- collectives on device buffers, enqueued on streams, across real processes.
//
// The device is the emulated engine (WEFT_DEVICE=emulated, device/device.h): host memory standing
// in for a GPU, with device work finishing asynchronously on worker threads. So what runs here is
// everything of the device path except the CUDA calls: memory-kind checks, stream gates, the
// executor's device mode (reductions and copies on the device queue behind fences), the CUDA IPC
// transport between ranks of this host (its IPC handles are memory file descriptors) and pinned
// staging over TCP (WEFT_TRANSPORT=tcp). The same tests run against CUDA with WEFT_DEVICE=cuda.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/device_mp/device_runner.h"
#include "tests/harness/mp_harness.h"

extern "C" {
#include "comm/comm.h"
#include "device/device.h"
}

namespace {

const int kTimeoutMs = 20000;

const weft_coll_t kColls[] = {WEFT_COLL_ALL_REDUCE, WEFT_COLL_BROADCAST,      WEFT_COLL_REDUCE,
                              WEFT_COLL_ALL_GATHER, WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_BARRIER,
                              WEFT_COLL_GATHER,     WEFT_COLL_SCATTER,        WEFT_COLL_ALL_TO_ALL};

bool reduces(weft_coll_t c) {
  return c == WEFT_COLL_ALL_REDUCE || c == WEFT_COLL_REDUCE || c == WEFT_COLL_REDUCE_SCATTER;
}

// Every collective x algorithm x dtype x op, counts 0, 1, 3, 1000, in place and not, on device
// buffers enqueued on a stream, checked exactly against the host patterns.
std::string matrix_body(int rank, int n, int port, const char* transport) {
  setenv("WEFT_TRANSPORT", transport, 1);
  setenv("WEFT_TIMEOUT_MS", "10000", 1);
  Device dev;
  weft_comm_t* comm;
  std::string err = dev.open_and_join(rank, n, port, &comm);
  if (!err.empty()) return err;
  CallRunner runner = dev.runner();
  for (weft_coll_t coll : kColls)
    for (int a = 1; a < WEFT_NUM_ALGOS; a++) {
      weft_algo_t algo = (weft_algo_t)a;
      if (!weft_algo_supported(coll, algo)) continue;
      for (size_t count : {0, 1, 3, 1000})
        for (int d = 0; d < WEFT_NUM_DTYPES; d++)
          for (int op = 0; op < (reduces(coll) ? WEFT_NUM_OPS : 1); op++)
            for (bool in_place : {false, true}) {
              if (in_place && coll == WEFT_COLL_ALL_TO_ALL) continue;  // it has no such form
              // Fewer cases at larger counts: every dtype and op still meets every algorithm.
              if (count == 1000 && (d + op + (in_place ? 1 : 0)) % 3 != 0) continue;
              int root = (int)((count + (size_t)d + (size_t)op) % (size_t)n);
              err = check_call(comm, coll, algo, (weft_dtype_t)d, (weft_op_t)op, count, in_place,
                               root, &runner);
              if (!err.empty()) return err;
              if (coll == WEFT_COLL_BARRIER) break;
            }
    }
  // Within the host the eligible calls ran as device programs (comm/resident.c); staged over
  // TCP none did: a communicator across the transports keeps the executor.
  bool ipc = strcmp(transport, "tcp") != 0;
  if (n > 1 && ipc != (comm->resident.calls > 0))
    return "rank " + std::to_string(rank) + ": " + std::to_string(comm->resident.calls) +
           " calls ran as device programs over " + transport;
  // Device buffers went by CUDA IPC within the host, staged when TCP was forced.
  const char* want = ipc ? "cuda_ipc" : "staged";
  const char* got = n > 1 ? comm_device_transport_name(comm, (rank + 1) % n) : want;
  if (!got || strcmp(got, want) != 0)
    return "rank " + std::to_string(rank) + ": device transport to the right neighbour is " +
           (got ? got : "(none)") + ", expected " + want;
  weft_comm_destroy(comm);
  return "";
}

class DeviceMatrix : public ::testing::TestWithParam<int> {};

TEST_P(DeviceMatrix, OverCudaIpcWithinTheHost) {
  auto results = mp_run(
      GetParam(), [](int rank, int n, int port) { return matrix_body(rank, n, port, "auto"); },
      300000);
  EXPECT_EQ(mp_summary(results), "");
}

TEST_P(DeviceMatrix, StagedOverTcp) {
  auto results = mp_run(
      GetParam(), [](int rank, int n, int port) { return matrix_body(rank, n, port, "tcp"); },
      300000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DeviceMatrix, ::testing::Values(1, 2, 3, 4));

// Many slices in flight per step: 1 Mi floats through ring, double tree and Rabenseifner, in
// 64 KiB slices (WEFT_DEVICE_SLICE_BYTES) through the default WEFT_DEVICE_SLOTS, so rings run in
// many rounds.
TEST(DeviceLarge, AllReduceOneMebiAtFourRanks) {
  for (const char* transport : {"auto", "tcp"}) {
    auto results = mp_run(
        4,
        [transport](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", transport, 1);
          setenv("WEFT_DEVICE_SLICE_BYTES", "65536", 1);
          Device dev;
          weft_comm_t* comm;
          std::string err = dev.open_and_join(rank, n, port, &comm);
          if (!err.empty()) return err;
          CallRunner runner = dev.runner();
          for (weft_algo_t algo : {WEFT_ALGO_RING, WEFT_ALGO_DOUBLE_TREE, WEFT_ALGO_RABENSEIFNER}) {
            err = check_call(comm, WEFT_COLL_ALL_REDUCE, algo, WEFT_FLOAT32, WEFT_SUM,
                             (1 << 20) + 3, false, 0, &runner);
            if (err.empty())
              err = check_call(comm, WEFT_COLL_ALL_REDUCE, algo, WEFT_BFLOAT16, WEFT_AVG,
                               (1 << 18) + 1, true, 0, &runner);
            if (!err.empty()) return std::string(transport) + ": " + err;
          }
          weft_comm_destroy(comm);
          return "";
        },
        300000);
    EXPECT_EQ(mp_summary(results), "") << transport;
  }
}

// Fused ring steps on the device path: the device queue reduces each arriving slice straight
// into the next peer's slot (cuda_ipc: its device slot; staged: a pinned send slot), so a ring
// all-reduce of two rounds of equal chunks writes recvbuf n bytes and sends 2(p-1)/p n, in place
// and not, through the executor's counters (exec_stats_t) -- and the results are right. The
// host-driven path (WEFT_DEVICE_RESIDENT=0): a device program keeps no such counters.
// WEFT_DEVICE_RESIDENT=0 keeps every call on the host-driven executor; 1 (the default) runs the
// same ring all-reduce as a device program; the results agree.
TEST(DeviceResident, TheKnobChoosesThePath) {
  for (const char* knob : {"0", "1"}) {
    auto results = mp_run(
        3,
        [&](int rank, int n, int port) -> std::string {
          setenv("WEFT_DEVICE_RESIDENT", knob, 1);
          setenv("WEFT_ALGO", "ring", 1);
          Device dev;
          weft_comm_t* comm;
          std::string err = dev.open_and_join(rank, n, port, &comm);
          if (!err.empty()) return err;
          CallRunner runner = dev.runner();
          err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, WEFT_FLOAT32, WEFT_SUM,
                           100000, false, 0, &runner);
          uint64_t calls = comm->resident.calls;
          weft_comm_destroy(comm);
          if (!err.empty()) return err;
          if ((calls > 0) != (knob[0] == '1'))
            return "rank " + std::to_string(rank) + ": WEFT_DEVICE_RESIDENT=" + knob + " ran " +
                   std::to_string(calls) + " device programs";
          return "";
        },
        kTimeoutMs);
    EXPECT_EQ(mp_summary(results), "") << "WEFT_DEVICE_RESIDENT=" << knob;
  }
}

// weft_comm_abort from another thread stops a device program that waits for a peer that never
// comes: the call returns WEFT_ERR_ABORTED within a second or so, long before WEFT_TIMEOUT_MS.
TEST(DeviceResident, AbortFromAnotherThreadStopsTheProgram) {
  auto results = mp_run(
      2,
      [&](int rank, int n, int port) -> std::string {
        setenv("WEFT_TIMEOUT_MS", "30000", 1);
        setenv("WEFT_ALGO", "ring", 1);
        Device dev;
        weft_comm_t* comm;
        std::string err = dev.open_and_join(rank, n, port, &comm);
        if (!err.empty()) return err;
        void* buf = nullptr;
        if (dev.e->ops->alloc(dev.e, 4 << 20, 0, &buf) != WEFT_SUCCESS) return weft_last_error();
        // One call both ranks make, so the links exist; then rank 1 stays away.
        if (weft_all_reduce(buf, buf, 1 << 20, WEFT_FLOAT32, WEFT_SUM, comm, nullptr) !=
            WEFT_SUCCESS)
          return std::string("warm-up: ") + weft_last_error();
        if (comm->resident.calls != 1) return "the warm-up did not run as a device program";
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(3));
          weft_comm_abort(comm);
          dev.e->ops->release(dev.e, buf, 0);
          return "";
        }
        std::thread aborter([comm] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          weft_comm_abort(comm);
        });
        auto t0 = std::chrono::steady_clock::now();
        weft_result_t r = weft_all_reduce(buf, buf, 1 << 20, WEFT_FLOAT32, WEFT_SUM, comm, nullptr);
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::string msg = weft_last_error();
        aborter.join();
        dev.e->ops->release(dev.e, buf, 0);
        if (r != WEFT_ERR_ABORTED) return "got " + std::to_string(r) + ": " + msg;
        if (secs > 2.5) return "took " + std::to_string(secs) + " s";
        return "";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

TEST(DeviceFused, RingWritesEachOutputElementOnce) {
  for (const char* transport : {"auto", "tcp"})
    for (bool in_place : {false, true}) {
      auto results = mp_run(
          3,
          [&](int rank, int n, int port) -> std::string {
            setenv("WEFT_DEVICE_RESIDENT", "0", 1);
            setenv("WEFT_TRANSPORT", transport, 1);
            setenv("WEFT_DEVICE_SLICE_BYTES", "65536", 1);
            setenv("WEFT_DEVICE_SLOTS", "8", 1);
            Device dev;
            weft_comm_t* comm;
            std::string err = dev.open_and_join(rank, n, port, &comm);
            if (!err.empty()) return err;
            size_t count = (size_t)n * sched_round_count(65536 / sizeof(float), 8) * 2;
            size_t bytes = count * sizeof(float);
            exec_stats_t before = comm->exec.stats;
            CallRunner runner = dev.runner();
            err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, WEFT_FLOAT32, WEFT_SUM,
                             count, in_place, 0, &runner);
            exec_stats_t after = comm->exec.stats;
            uint64_t out = after.recvbuf_bytes - before.recvbuf_bytes;
            uint64_t sent = after.slot_bytes - before.slot_bytes;
            uint64_t want_sent = 2 * (uint64_t)(n - 1) * bytes / (uint64_t)n;
            if (err.empty() && (out != bytes || sent != want_sent))
              err = "wrote " + std::to_string(out) + " bytes of recvbuf (want " +
                    std::to_string(bytes) + ") and sent " + std::to_string(sent) + " (want " +
                    std::to_string(want_sent) + ")";
            if (err.empty() && after.fused_slices == before.fused_slices)
              err = "no slice went through a fused step";
            weft_comm_destroy(comm);
            return err.empty() ? "" : "rank " + std::to_string(rank) + " " + transport + ": " + err;
          },
          300000);
      EXPECT_EQ(mp_summary(results), "") << transport << (in_place ? " in place" : "");
    }
}

// Calls on device buffers slice by WEFT_DEVICE_SLICE_BYTES, whatever WEFT_SLICE_BYTES says: the
// same ring all-reduce of 1 MiB per rank's chunk on device buffers goes through 4x as many fused
// slices with 64 KiB device slices as with 256 KiB ones (host slices 64 KiB both times), over
// CUDA IPC and staged alike, with the right results (host-driven: WEFT_DEVICE_RESIDENT=0).
TEST(DeviceSlices, DeviceCallsSliceByTheirOwnSize) {
  for (const char* transport : {"auto", "tcp"}) {
    auto results = mp_run(
        3,
        [&](int rank, int n, int port) -> std::string {
          setenv("WEFT_DEVICE_RESIDENT", "0", 1);
          setenv("WEFT_TRANSPORT", transport, 1);
          setenv("WEFT_SLICE_BYTES", "65536", 1);
          uint64_t fused[2] = {0, 0};
          const char* sizes[2] = {"65536", "262144"};
          std::string err;
          for (int k = 0; k < 2 && err.empty(); k++) {
            setenv("WEFT_DEVICE_SLICE_BYTES", sizes[k], 1);
            Device dev;
            weft_comm_t* comm;
            err = dev.open_and_join(rank, n, port, &comm);
            if (!err.empty()) break;
            CallRunner runner = dev.runner();
            uint64_t before = comm->exec.stats.fused_slices;
            err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, WEFT_FLOAT32, WEFT_SUM,
                             (size_t)n * (1u << 18), false, 0, &runner);
            fused[k] = comm->exec.stats.fused_slices - before;
            weft_comm_destroy(comm);
          }
          if (err.empty() && (fused[1] == 0 || fused[0] != 4 * fused[1]))
            err = "fused slices: " + std::to_string(fused[0]) + " in 64 KiB device slices, " +
                  std::to_string(fused[1]) + " in 256 KiB ones (want 4:1)";
          return err.empty() ? "" : "rank " + std::to_string(rank) + " " + transport + ": " + err;
        },
        300000);
    EXPECT_EQ(mp_summary(results), "") << transport;
  }
}

// Rank 2 of 3 is killed in the middle of large device all-reduces, while its neighbours' device
// queues fill lent slots (rank 1 writes rank 2's slots, rank 0 reduces out of rank 2's): both
// survivors fail within the timeout (the executor drains its queue before the connections and
// their lent slots go), at least one naming rank 2; nothing hangs, and ASan sees no bad access.
TEST(DeviceFused, KilledPeerFailsTheSurvivors) {
  for (const char* transport : {"auto", "tcp"}) {
    auto results = mp_run(
        3,
        [&](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", transport, 1);
          setenv("WEFT_ALGO", "ring", 1);
          setenv("WEFT_TIMEOUT_MS", "5000", 1);
          Device dev;
          weft_comm_t* comm;
          std::string err = dev.open_and_join(rank, n, port, &comm);
          if (!err.empty()) return err;
          size_t count = 8u << 20;
          void* buf = nullptr;
          if (dev.e->ops->alloc(dev.e, count * sizeof(float), 0, &buf) != WEFT_SUCCESS)
            return weft_last_error();
          if (weft_all_reduce(buf, buf, 1 << 16, WEFT_FLOAT32, WEFT_SUM, comm, nullptr) !=
              WEFT_SUCCESS)
            return std::string("warm-up: ") + weft_last_error();
          if (rank == 2) {
            std::thread([] {
              std::this_thread::sleep_for(std::chrono::milliseconds(30));
              kill(getpid(), SIGKILL);
            }).detach();
          }
          auto start = std::chrono::steady_clock::now();
          weft_result_t r = WEFT_SUCCESS;
          for (int i = 0; i < 100 && r == WEFT_SUCCESS; i++)
            r = weft_all_reduce(buf, buf, count, WEFT_FLOAT32, WEFT_SUM, comm, nullptr);
          double secs =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          std::string msg = weft_last_error();
          weft_comm_abort(comm);
          dev.e->ops->release(dev.e, buf, 0);
          if (rank == 2) return "rank 2 should have been killed";
          if (r == WEFT_SUCCESS) return "100 all-reduces succeeded without rank 2";
          if (secs > 20) return "took " + std::to_string(secs) + " s to fail: " + msg;
          return msg.find("rank 2") != std::string::npos ? "named: 2" : "named: other: " + msg;
        },
        120000);
    ASSERT_EQ(results.size(), 3u);
    int named = 0;
    for (int r = 0; r < 2; r++) {
      EXPECT_EQ(results[r].message.rfind("named: ", 0), 0u)
          << transport << " rank " << r << ": " << results[r].message;
      named += results[r].message == "named: 2";
    }
    EXPECT_GE(named, 1) << transport << ": " << results[0].message << " / " << results[1].message;
    EXPECT_EQ(results[2].term_signal, SIGKILL) << transport;
  }
}

// The call is enqueued and returns at once: rank 1 joins the collective 400 ms late, rank 0's call
// returns long before that, and its stream delivers the result once rank 1 has joined.
TEST(DeviceStream, CallReturnsBeforeTheOperationCompletes) {
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        Device dev;
        weft_comm_t* comm;
        std::string err = dev.open_and_join(rank, n, port, &comm);
        if (!err.empty()) return err;
        const size_t count = 4096;
        std::vector<float> host(count, (float)(rank + 1)), out(count, 0);
        void* buf = nullptr;
        if (dev.e->ops->alloc(dev.e, count * sizeof(float), 0, &buf) != WEFT_SUCCESS)
          return weft_last_error();
        if (dev.upload(buf, host.data(), count * sizeof(float)) != WEFT_SUCCESS)
          return weft_last_error();
        if (rank == 1) usleep(400 * 1000);
        auto t0 = std::chrono::steady_clock::now();
        if (weft_all_reduce(buf, buf, count, WEFT_FLOAT32, WEFT_SUM, comm, dev.stream) !=
            WEFT_SUCCESS)
          return std::string("all_reduce: ") + weft_last_error();
        double call_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (rank == 0 && call_ms > 200)
          return "rank 0: enqueueing took " + std::to_string(call_ms) +
                 " ms: the call waited for the operation";
        if (dev.e->ops->stream_sync(dev.e, dev.stream, kTimeoutMs) != WEFT_SUCCESS)
          return std::string("stream_sync: ") + weft_last_error();
        double total_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (rank == 0 && total_ms < 300)
          return "rank 0: the stream finished after " + std::to_string(total_ms) +
                 " ms, before rank 1 joined";
        if (dev.upload(out.data(), buf, count * sizeof(float)) != WEFT_SUCCESS)
          return weft_last_error();
        for (size_t i = 0; i < count; i++)
          if (out[i] != 3.0f)
            return "element " + std::to_string(i) + " = " + std::to_string(out[i]);
        // Blocking host calls and async requests queue behind enqueued device calls.
        if (weft_barrier(comm, nullptr) != WEFT_SUCCESS) return weft_last_error();
        dev.e->ops->release(dev.e, buf, 0);
        weft_comm_destroy(comm);
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

// Device buffers with a NULL stream run before the call returns; send and recv work too.
TEST(DeviceStream, NullStreamAndPointToPoint) {
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        Device dev;
        weft_comm_t* comm;
        std::string err = dev.open_and_join(rank, n, port, &comm);
        if (!err.empty()) return err;
        const size_t count = 100003;
        std::vector<int32_t> host(count), out(count, 0);
        for (size_t i = 0; i < count; i++) host[i] = (int32_t)(i * 7 + (size_t)rank);
        void* buf = nullptr;
        if (dev.e->ops->alloc(dev.e, count * 4, 0, &buf) != WEFT_SUCCESS) return weft_last_error();
        if (dev.upload(buf, host.data(), count * 4) != WEFT_SUCCESS) return weft_last_error();
        if (weft_all_reduce(buf, buf, count, WEFT_INT32, WEFT_MAX, comm, nullptr) != WEFT_SUCCESS)
          return std::string("all_reduce: ") + weft_last_error();
        if (dev.upload(out.data(), buf, count * 4) != WEFT_SUCCESS) return weft_last_error();
        for (size_t i = 0; i < count; i++)
          if (out[i] != (int32_t)(i * 7 + 1)) return "max element " + std::to_string(i);
        weft_result_t r = rank == 0 ? weft_send(buf, count, WEFT_INT32, 1, comm, dev.stream)
                                    : weft_recv(buf, count, WEFT_INT32, 0, comm, dev.stream);
        if (r != WEFT_SUCCESS) return std::string("p2p: ") + weft_last_error();
        if (dev.e->ops->stream_sync(dev.e, dev.stream, kTimeoutMs) != WEFT_SUCCESS)
          return weft_last_error();
        dev.e->ops->release(dev.e, buf, 0);
        weft_comm_destroy(comm);
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

// Mixed host and device buffers, and host buffers with a stream, are refused with a message
// that says what to pass; a communicator without an engine refuses streams.
TEST(DeviceErrors, MixedBuffersAndStreamsAreRefused) {
  auto results = mp_run(
      1,
      [](int rank, int n, int port) -> std::string {
        Device dev;
        weft_comm_t* comm;
        std::string err = dev.open_and_join(rank, n, port, &comm);
        if (!err.empty()) return err;
        float host[4] = {1, 2, 3, 4};
        void* buf = nullptr;
        if (dev.e->ops->alloc(dev.e, sizeof host, 0, &buf) != WEFT_SUCCESS)
          return weft_last_error();
        weft_result_t r = weft_all_reduce(host, buf, 4, WEFT_FLOAT32, WEFT_SUM, comm, dev.stream);
        std::string msg = weft_last_error();
        if (r != WEFT_ERR_INVALID_ARGUMENT || msg.find("sendbuf is host memory but recvbuf is "
                                                       "device memory") == std::string::npos)
          return "mixed buffers: " + std::to_string(r) + " " + msg;
        r = weft_all_reduce(host, host, 4, WEFT_FLOAT32, WEFT_SUM, comm, dev.stream);
        msg = weft_last_error();
        if (r != WEFT_ERR_INVALID_ARGUMENT || msg.find("with host buffers") == std::string::npos)
          return "host buffers on a stream: " + std::to_string(r) + " " + msg;
        // Argument errors are returned at once and leave the communicator usable.
        if (weft_all_reduce(buf, buf, 4, WEFT_FLOAT32, WEFT_SUM, comm, dev.stream) != WEFT_SUCCESS)
          return std::string("after the refusals: ") + weft_last_error();
        if (dev.e->ops->stream_sync(dev.e, dev.stream, kTimeoutMs) != WEFT_SUCCESS)
          return weft_last_error();
        dev.e->ops->release(dev.e, buf, 0);
        weft_comm_destroy(comm);

        setenv("WEFT_DEVICE", "none", 1);
        err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        r = weft_all_reduce(host, host, 4, WEFT_FLOAT32, WEFT_SUM, comm, dev.stream);
        msg = weft_last_error();
        if (r != WEFT_ERR_UNSUPPORTED || msg.find("no device engine") == std::string::npos)
          return "no engine: " + std::to_string(r) + " " + msg;
        weft_comm_destroy(comm);
        return "";
      },
      30000);
  EXPECT_EQ(mp_summary(results), "");
}

// A peer that never makes the call: the enqueued operation times out on the progress thread, the
// stream is released (not blocked forever), and the failure is reported by
// weft_comm_get_async_error and by the next call, naming the peer.
TEST(DeviceErrors, DeadPeerFailsTheStreamNotHangsIt) {
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TIMEOUT_MS", "1000", 1);
        Device dev;
        weft_comm_t* comm;
        std::string err = dev.open_and_join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (rank == 1) {
          usleep(3000 * 1000);  // alive but silent, past rank 0's timeout
          weft_comm_abort(comm);
          return "";
        }
        void* buf = nullptr;
        if (dev.e->ops->alloc(dev.e, 4096, 0, &buf) != WEFT_SUCCESS) return weft_last_error();
        if (weft_all_reduce(buf, buf, 1024, WEFT_FLOAT32, WEFT_SUM, comm, dev.stream) !=
            WEFT_SUCCESS)
          return std::string("enqueue: ") + weft_last_error();
        if (dev.e->ops->stream_sync(dev.e, dev.stream, kTimeoutMs) != WEFT_SUCCESS)
          return std::string("the stream stayed blocked: ") + weft_last_error();
        weft_result_t async_err = WEFT_SUCCESS;
        if (weft_comm_get_async_error(comm, &async_err) != WEFT_SUCCESS) return weft_last_error();
        std::string msg = weft_last_error();
        if (async_err != WEFT_ERR_TIMEOUT || msg.find("rank 1") == std::string::npos)
          return "async error " + std::to_string(async_err) + ": " + msg;
        weft_result_t r = weft_barrier(comm, nullptr);
        if (r != WEFT_ERR_COMM_FAILED) return "next call returned " + std::to_string(r);
        dev.e->ops->release(dev.e, buf, 0);
        weft_comm_abort(comm);
        return "";
      },
      30000);
  EXPECT_EQ(mp_summary(results), "");
}

}  // namespace
