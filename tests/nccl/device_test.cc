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

}  // namespace
