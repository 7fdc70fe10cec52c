// device_runner.h -- one test rank's device for collectives on device buffers: an engine of its
// own, a queue, a stream, and a CallRunner that mirrors check_call's host regions in device memory
// (tests/device_mp, and the RDMA VM tier's device checks).
#ifndef WEFT_TESTS_DEVICE_MP_DEVICE_RUNNER_H_
#define WEFT_TESTS_DEVICE_MP_DEVICE_RUNNER_H_

#include <stdlib.h>

#include <string>
#include <vector>

#include "tests/collectives_mp/rank_body.h"

extern "C" {
#include "device/device.h"
}

// How long a rank waits for its stream and its copies.
const int kDeviceTimeoutMs = 20000;

// Which engine the ranks use: emulated unless the environment names another (a GPU run).
inline const char* engine_name() {
  const char* e = getenv("WEFT_TEST_DEVICE");
  return e && *e ? e : "emulated";
}

// One rank's device: its own engine (as an application has its own CUDA runtime next to weft's),
// a queue for uploads and downloads, and a stream the collectives are enqueued on.
struct Device {
  dev_engine_t* e = nullptr;
  dev_queue_t* q = nullptr;
  void* stream = nullptr;
  std::string open() {
    setenv("WEFT_DEVICE", engine_name(), 1);
    if (dev_engine_open(engine_name(), &e) != WEFT_SUCCESS || !e)
      return std::string("engine ") + engine_name() + ": " + weft_last_error();
    if (e->ops->queue_create(e, &q) != WEFT_SUCCESS) return weft_last_error();
    if (e->ops->stream_create(e, &stream) != WEFT_SUCCESS) return weft_last_error();
    return "";
  }
  // open(), then a communicator of n ranks on 127.0.0.1:port that uses the same engine.
  std::string open_and_join(int rank, int n, int port, weft_comm_t** comm) {
    std::string err = open();
    if (!err.empty()) return "rank " + std::to_string(rank) + ": " + err;
    return join(rank, n, port, comm);
  }
  // Runs check_call's calls through run().
  CallRunner runner() {
    return [this](weft_comm_t* c, weft_call_t k, std::vector<Region> regions) {
      return run(c, k, regions);
    };
  }
  ~Device() {
    if (!e) return;
    if (stream) e->ops->stream_destroy(e, stream);
    if (q) e->ops->queue_destroy(q);
    dev_engine_close(e);
  }
  weft_result_t upload(void* dst, const void* src, size_t n) {
    weft_result_t r = e->ops->copy(q, dst, src, n);
    return r != WEFT_SUCCESS ? r : e->ops->drain(q, kDeviceTimeoutMs);
  }
  // Mirrors each host region in device memory, runs the call on the stream with the pointers
  // moved into the mirrors, synchronizes the stream and copies the regions back.
  weft_result_t run(weft_comm_t* comm, weft_call_t k, const std::vector<Region>& regions) {
    std::vector<char*> mirror(regions.size(), nullptr);
    weft_result_t r = WEFT_SUCCESS;
    for (size_t i = 0; i < regions.size() && r == WEFT_SUCCESS; i++) {
      void* p = nullptr;
      r = e->ops->alloc(e, regions[i].second, 0, &p);
      mirror[i] = static_cast<char*>(p);
      if (r == WEFT_SUCCESS) r = upload(mirror[i], regions[i].first, regions[i].second);
    }
    auto move = [&](const void* p) -> char* {
      for (size_t i = 0; i < regions.size(); i++) {
        const char* base = regions[i].first;
        if (p >= base && p < base + regions[i].second) return mirror[i] + ((const char*)p - base);
      }
      return nullptr;  // NULL stays NULL (a non-root's reduce output)
    };
    k.sendbuf = move(k.sendbuf);
    k.recvbuf = move(k.recvbuf);
    if (r == WEFT_SUCCESS) r = weft_call(&k, comm, stream);
    if (r == WEFT_SUCCESS) {
      r = e->ops->stream_sync(e, stream, kDeviceTimeoutMs);
      weft_result_t async_err = WEFT_SUCCESS;
      if (r == WEFT_SUCCESS) r = weft_comm_get_async_error(comm, &async_err);
      if (r == WEFT_SUCCESS) r = async_err;
    }
    for (size_t i = 0; i < regions.size() && r == WEFT_SUCCESS; i++)
      r = upload(regions[i].first, mirror[i], regions[i].second);
    for (char* m : mirror)
      if (m) e->ops->release(e, m, 0);
    return r;
  }
};

#endif  // WEFT_TESTS_DEVICE_MP_DEVICE_RUNNER_H_
