// device_test.cc -- the NCCL API on device buffers and streams, as torch calls it: each rank
// allocates "device" memory and a stream from an engine of its own (the emulated engine, host
// memory standing in for a GPU, unless WEFT_TEST_DEVICE names another), enqueues collectives
// and a grouped send/recv ring on the stream, synchronizes it and checks the data. 4 processes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "nccl/nccl.h"
#include "tests/harness/mp_harness.h"

extern "C" {
#include "device/device.h"
}

namespace {

const int kTimeoutMs = 60000;

const char* engine_name() {
  const char* e = getenv("WEFT_TEST_DEVICE");
  return e && *e ? e : "emulated";
}

#define CHECK_NCCL(call)                                                                          \
  do {                                                                                            \
    ncclResult_t res_ = (call);                                                                   \
    if (res_ != ncclSuccess)                                                                      \
      return "rank " + std::to_string(rank) + ": " #call ": " + ncclGetErrorString(res_) + ": " + \
             ncclGetLastError(nullptr);                                                           \
  } while (0)

#define CHECK_WEFT(call)                                                           \
  do {                                                                             \
    if ((call) != WEFT_SUCCESS)                                                    \
      return "rank " + std::to_string(rank) + ": " #call ": " + weft_last_error(); \
  } while (0)

#define CHECK_TRUE(cond, what)                                          \
  do {                                                                  \
    if (!(cond)) return "rank " + std::to_string(rank) + ": " + (what); \
  } while (0)

TEST(NcclDevice, CollectivesAndAGroupOnAStream) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  auto results = mp_run(
      4,
      [&](int rank, int n, int) -> std::string {
        setenv("WEFT_DEVICE", engine_name(), 1);
        dev_engine_t* e = nullptr;
        dev_queue_t* q = nullptr;
        void* stream = nullptr;
        CHECK_WEFT(dev_engine_open(engine_name(), &e));
        CHECK_TRUE(e != nullptr, std::string("no engine ") + engine_name());
        CHECK_WEFT(e->ops->queue_create(e, &q));
        CHECK_WEFT(e->ops->stream_create(e, &stream));
        cudaStream_t s = static_cast<cudaStream_t>(stream);
        ncclComm_t comm = nullptr;
        CHECK_NCCL(ncclCommInitRank(&comm, n, id, rank));

        const size_t count = 4096;
        const size_t bytes = count * sizeof(float);
        void *a = nullptr, *g = nullptr, *ring = nullptr;
        CHECK_WEFT(e->ops->alloc(e, bytes, 0, &a));
        CHECK_WEFT(e->ops->alloc(e, bytes * n, 0, &g));
        CHECK_WEFT(e->ops->alloc(e, bytes, 0, &ring));
        std::vector<float> host(count);
        for (size_t i = 0; i < count; i++) host[i] = static_cast<float>(rank + i % 7);
        CHECK_WEFT(e->ops->copy(q, a, host.data(), bytes));
        CHECK_WEFT(e->ops->drain(q, kTimeoutMs));

        // Enqueued one after another on the stream; nothing is waited for until the end.
        CHECK_NCCL(ncclAllReduce(a, a, count, ncclFloat32, ncclSum, comm, s));
        CHECK_NCCL(ncclAllGather(a, g, count, ncclFloat32, comm, s));
        CHECK_NCCL(ncclGroupStart());
        CHECK_NCCL(ncclSend(a, count, ncclFloat32, (rank + 1) % n, comm, s));
        CHECK_NCCL(ncclRecv(ring, count, ncclFloat32, (rank + n - 1) % n, comm, s));
        CHECK_NCCL(ncclGroupEnd());
        CHECK_NCCL(ncclBcast(ring, count, ncclFloat32, 2, comm, s));
        CHECK_WEFT(e->ops->stream_sync(e, stream, kTimeoutMs));
        ncclResult_t async = ncclInternalError;
        CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
        CHECK_TRUE(async == ncclSuccess, "async error " + std::to_string(async));

        std::vector<float> got_a(count), got_g(count * n), got_ring(count);
        CHECK_WEFT(e->ops->copy(q, got_a.data(), a, bytes));
        CHECK_WEFT(e->ops->copy(q, got_g.data(), g, bytes * n));
        CHECK_WEFT(e->ops->copy(q, got_ring.data(), ring, bytes));
        CHECK_WEFT(e->ops->drain(q, kTimeoutMs));
        for (size_t i = 0; i < count; i++) {
          float want = static_cast<float>(n * (n - 1) / 2 + n * (i % 7));
          CHECK_TRUE(got_a[i] == want, "all-reduce at " + std::to_string(i));
          CHECK_TRUE(got_ring[i] == want, "ring then bcast at " + std::to_string(i));
          for (int r = 0; r < n; r++)
            CHECK_TRUE(got_g[r * count + i] == want, "all-gather at " + std::to_string(i));
        }

        // Host buffers with a stream are refused, as weft refuses them.
        CHECK_TRUE(ncclAllReduce(host.data(), host.data(), count, ncclFloat32, ncclSum, comm, s) ==
                       ncclInvalidArgument,
                   "host buffers with a stream were accepted");
        CHECK_NCCL(ncclCommDestroy(comm));
        e->ops->release(e, a, 0);
        e->ops->release(e, g, 0);
        e->ops->release(e, ring, 0);
        e->ops->stream_destroy(e, stream);
        e->ops->queue_destroy(q);
        dev_engine_close(e);
        return "";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

// ncclMemAlloc's memory as the buffers, and PreMulSum operators on them: a device factor is read
// when the call runs (it is changed after the operator was made), a host one at creation; a
// host-factor operator destroyed inside a group before ncclGroupEnd still applies to the call
// queued with it, as NCCL allows.
TEST(NcclDevice, PreMulSumOnMemAllocBuffers) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  auto results = mp_run(
      3,
      [&](int rank, int n, int) -> std::string {
        setenv("WEFT_DEVICE", engine_name(), 1);
        dev_engine_t* e = nullptr;
        dev_queue_t* q = nullptr;
        void* stream = nullptr;
        CHECK_WEFT(dev_engine_open(engine_name(), &e));
        CHECK_TRUE(e != nullptr, std::string("no engine ") + engine_name());
        CHECK_WEFT(e->ops->queue_create(e, &q));
        CHECK_WEFT(e->ops->stream_create(e, &stream));
        cudaStream_t s = static_cast<cudaStream_t>(stream);
        ncclComm_t comm = nullptr;
        CHECK_NCCL(ncclCommInitRank(&comm, n, id, rank));

        const size_t count = 3000;
        const size_t bytes = count * sizeof(double);
        void *a = nullptr, *b = nullptr, *dev_factor = nullptr;
        CHECK_NCCL(ncclMemAlloc(&a, bytes));
        CHECK_NCCL(ncclMemAlloc(&b, bytes));
        CHECK_NCCL(ncclMemAlloc(&dev_factor, sizeof(double)));
        std::vector<double> host(count);
        for (size_t i = 0; i < count; i++) host[i] = static_cast<double>(i % 5 + rank);
        CHECK_WEFT(e->ops->copy(q, a, host.data(), bytes));
        double f = -1;
        CHECK_WEFT(e->ops->copy(q, dev_factor, &f, sizeof f));
        CHECK_WEFT(e->ops->drain(q, kTimeoutMs));

        ncclRedOp_t on_device, on_host;
        CHECK_NCCL(ncclRedOpCreatePreMulSum(&on_device, dev_factor, ncclFloat64, ncclScalarDevice,
                                            comm));
        f = rank + 1.0;  // the device factor's value when the call runs
        CHECK_WEFT(e->ops->copy(q, dev_factor, &f, sizeof f));
        CHECK_WEFT(e->ops->drain(q, kTimeoutMs));
        double half = 0.5;
        CHECK_NCCL(ncclRedOpCreatePreMulSum(&on_host, &half, ncclFloat64, ncclScalarHostImmediate,
                                            comm));
        CHECK_NCCL(ncclAllReduce(a, b, count, ncclFloat64, on_device, comm, s));
        CHECK_NCCL(ncclGroupStart());
        CHECK_NCCL(ncclAllReduce(a, a, count, ncclFloat64, on_host, comm, s));
        CHECK_NCCL(ncclRedOpDestroy(on_host, comm));
        CHECK_NCCL(ncclGroupEnd());
        CHECK_WEFT(e->ops->stream_sync(e, stream, kTimeoutMs));
        CHECK_NCCL(ncclRedOpDestroy(on_device, comm));

        std::vector<double> got_a(count), got_b(count);
        CHECK_WEFT(e->ops->copy(q, got_a.data(), a, bytes));
        CHECK_WEFT(e->ops->copy(q, got_b.data(), b, bytes));
        CHECK_WEFT(e->ops->drain(q, kTimeoutMs));
        for (size_t i = 0; i < count; i++) {
          double scaled = 0, sum = 0;
          for (int r = 0; r < n; r++) {
            scaled += (r + 1.0) * static_cast<double>(i % 5 + r);
            sum += static_cast<double>(i % 5 + r);
          }
          CHECK_TRUE(got_b[i] == scaled, "device factor at " + std::to_string(i) + ": " +
                                             std::to_string(got_b[i]) + " != " +
                                             std::to_string(scaled));
          CHECK_TRUE(got_a[i] == 0.5 * sum, "host factor at " + std::to_string(i));
        }
        CHECK_NCCL(ncclCommDestroy(comm));
        CHECK_NCCL(ncclMemFree(a));
        CHECK_NCCL(ncclMemFree(b));
        CHECK_NCCL(ncclMemFree(dev_factor));
        CHECK_TRUE(ncclMemFree(host.data()) == ncclInvalidArgument,
                   "ncclMemFree took memory it did not allocate");
        CHECK_NCCL(ncclMemFree(nullptr));
        e->ops->stream_destroy(e, stream);
        e->ops->queue_destroy(q);
        dev_engine_close(e);
        return "";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

// Without a device (WEFT_DEVICE=none), ncclMemAlloc says so as NCCL reports a missing GPU.
TEST(NcclDevice, MemAllocWithoutADevice) {
  auto results = mp_run(
      1,
      [&](int rank, int, int) -> std::string {
        setenv("WEFT_DEVICE", "none", 1);
        void* p = reinterpret_cast<void*>(1);
        CHECK_TRUE(ncclMemAlloc(&p, 64) == ncclUnhandledCudaError, "ncclMemAlloc succeeded");
        CHECK_TRUE(p == nullptr, "ptr was not cleared");
        CHECK_TRUE(std::string(ncclGetLastError(nullptr)).find("no device") != std::string::npos,
                   ncclGetLastError(nullptr));
        return "";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

}  // namespace
