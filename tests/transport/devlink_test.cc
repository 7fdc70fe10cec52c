// devlink_test.cc -- device-resident links (transport.h's device_link, cuda_ipc's implementation)
// driven by the device loop (device.h's launch) between real processes on the emulated engine
// (WEFT_TEST_DEVICE=cuda: the CUDA one, which skips while its kernel is not built).
//
// Each rank builds the ring all_reduce schedule as comm/collectives_api.c does, compiles it
// (dp_compile) for the connection's device slots, binds every program link to device_link's view
// and launches it on an engine queue with device buffers; the result is checked exactly. Three
// calls run in a row on the same links (counters only grow). float32 and int32 sums, counts that
// span many slices and rounds, 2, 3 and 4 ranks. Then a run where one rank never launches: every
// other rank ends DL_TIMEOUT within the timeout, each queue's error names the peer its run waited
// for, and the rank that receives from the absent one names it.
#include <gtest/gtest.h>
#include <stdio.h>
#include <string.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/devcompile.h"
#include "common/error.h"
#include "device/device.h"
#include "kernels/devloop.h"
#include "tests/harness/mp_harness.h"
#include "tests/transport/device_xport_util.h"

namespace {

const size_t kSlot = 4096;  // bytes of a slot: 1024 elements of 4 bytes
const int kSlots = 4;
const int kWaitMs = 20000;

std::string Where(int rank, const std::string& what) {
  return "rank " + std::to_string(rank) + ": " + what;
}

// What a rank returns where the engine cannot launch device programs (the CUDA engine, until its
// kernel is built): the test skips instead of failing.
const char kUnsupported[] = "unsupported: ";

bool AllUnsupported(const std::vector<RankResult>& results, std::string* why) {
  for (const RankResult& r : results) {
    if (r.message.compare(0, strlen(kUnsupported), kUnsupported) != 0) return false;
    *why = r.message;
  }
  return !results.empty();
}

std::string StatusStr(const dl_status_t& s) {
  return "code " + std::to_string(s.code) + " step " + std::to_string(s.step) + " link " +
         std::to_string(s.link) + " waiting_for " + std::to_string(s.waiting_for) + " round " +
         std::to_string(s.round);
}

// Rank r's input element i of call `call`: float32 small integers (sums exact in any order),
// int32 any bit pattern (sums wrap, as the reduction's do).
uint32_t IntInput(int call, int r, size_t i) {
  return (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503u + call * 977u) ^ 0x9e3779b9u;
}
float FloatInput(int call, int r, size_t i) {
  return (float)((int)((i * 7 + (size_t)r * 13 + (size_t)call * 5) % 1001) - 500);
}

// One rank's ring all_reduce as a device program, bound to its links and device buffers.
struct DevAllReduce {
  dev_engine_t* dev = nullptr;
  dp_program_t prog;
  std::vector<dl_link_view_t> views;
  char* bufs[DP_NUM_BUFS] = {nullptr, nullptr, nullptr};
  dl_run_t run;

  DevAllReduce() {
    memset(&prog, 0, sizeof prog);
    memset(&run, 0, sizeof run);
  }
  ~DevAllReduce() {
    for (char* b : bufs)
      if (b) dev->ops->release(dev, b, 0);
    dp_free(&prog);
  }

  // Builds the schedule as comm/collectives_api.c fills sched_args_t, compiles it for the
  // connections' slots, and binds the links through device_link.
  std::string Setup(dev_engine_t* d, const std::vector<conn_t*>& conns, int rank, int n,
                    weft_dtype_t dtype, size_t count, uint64_t timeout_ns) {
    dev = d;
    size_t es = weft_dtype_size(dtype);
    size_t slice_elems = kSlot / es;
    sched_args_t a;
    memset(&a, 0, sizeof a);
    a.coll = WEFT_COLL_ALL_REDUCE;
    a.rank = rank;
    a.nranks = n;
    a.count = count;
    a.root = 0;
    a.in_place = 0;
    a.round_count = sched_round_count(slice_elems, kSlots);
    const algo_entry_t* algo = algo_lookup(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING);
    if (!algo) return Where(rank, "no ring all_reduce in this build");
    schedule_t s;
    if (algo->build(&s, &a) != WEFT_SUCCESS)
      return Where(rank, "build: " + std::string(err_last()));
    weft_result_t res = dp_compile(&s, dtype, WEFT_SUM, n, kSlot, &prog);
    sched_free(&s);
    if (res != WEFT_SUCCESS) return Where(rank, "dp_compile: " + std::string(err_last()));
    views.resize((size_t)prog.nlinks);
    for (int l = 0; l < prog.nlinks; l++) {
      int peer = prog.links[l].peer;
      if (peer < 0 || peer >= n || peer == rank || !conns[(size_t)peer])
        return Where(rank,
                     "program link " + std::to_string(l) + " names peer " + std::to_string(peer));
      conn_t* c = conns[(size_t)peer];
      if (!c->ops->device_link) return Where(rank, "the transport has no device_link");
      if (c->ops->device_link(c, prog.links[l].dir, &views[(size_t)l]) != WEFT_SUCCESS)
        return Where(rank, "device_link to rank " + std::to_string(peer) + ": " + err_last());
    }
    for (int b = 0; b < DP_NUM_BUFS; b++) {
      size_t bytes = prog.buf_count[b] * es;
      if (!bytes) continue;
      void* p = nullptr;
      if (dev->ops->alloc(dev, bytes, 0, &p) != WEFT_SUCCESS)
        return Where(rank, "alloc: " + std::string(err_last()));
      bufs[b] = (char*)p;
    }
    run.prog = &prog;
    run.links = views.data();
    for (int b = 0; b < DP_NUM_BUFS; b++) run.bufs[b] = bufs[b];
    run.abort = nullptr;
    run.timeout_ns = timeout_ns;
    return "";
  }
};

// One call: input in, launch, output out, drain; checks status and every element.
std::string OneCall(DevAllReduce& ar, dev_queue_t* q, int rank, int n, weft_dtype_t dtype,
                    size_t count, int call) {
  dev_engine_t* dev = ar.dev;
  std::vector<uint32_t> in(count), out(count, 0), want(count);
  for (size_t i = 0; i < count; i++) {
    if (dtype == WEFT_FLOAT32) {
      float v = FloatInput(call, rank, i), w = 0;
      for (int r = 0; r < n; r++) w += FloatInput(call, r, i);
      memcpy(&in[i], &v, 4);
      memcpy(&want[i], &w, 4);
    } else {
      uint32_t w = 0;
      for (int r = 0; r < n; r++) w += IntInput(call, r, i);
      in[i] = IntInput(call, rank, i);
      want[i] = w;
    }
  }
  size_t bytes = count * 4;
  dl_status_t st = {-1, -2, -2, -2, 0};
  if (dev->ops->copy(q, ar.bufs[DP_SENDBUF], in.data(), bytes) != WEFT_SUCCESS)
    return Where(rank, "copy in: " + std::string(err_last()));
  if (!dev->ops->launch) return kUnsupported + std::string(dev->ops->name);
  weft_result_t res = dev->ops->launch(q, &ar.run, &st);
  if (res != WEFT_SUCCESS) return Where(rank, "launch: " + std::string(err_last()));
  if (dev->ops->copy(q, out.data(), ar.bufs[DP_RECVBUF], bytes) != WEFT_SUCCESS)
    return Where(rank, "copy out: " + std::string(err_last()));
  if (dev->ops->drain(q, kWaitMs) != WEFT_SUCCESS)
    return Where(rank, "call " + std::to_string(call) + ": drain: " + err_last() + " (status " +
                           StatusStr(st) + ")");
  if (st.code != DL_DONE)
    return Where(rank, "call " + std::to_string(call) + ": status " + StatusStr(st));
  for (size_t i = 0; i < count; i++) {
    if (out[i] != want[i]) {
      char buf[160];
      snprintf(buf, sizeof buf, "call %d: element %zu of %zu is %08x, expected %08x", call, i,
               count, out[i], want[i]);
      return Where(rank, buf);
    }
  }
  return "";
}

struct Case {
  int nranks;
  weft_dtype_t dtype;
  size_t count;
};

std::string CaseName(const testing::TestParamInfo<Case>& info) {
  return std::to_string(info.param.nranks) + "ranks_" +
         (info.param.dtype == WEFT_FLOAT32 ? "float32" : "int32") + "_" +
         std::to_string(info.param.count);
}

class DevLinkAllReduce : public testing::TestWithParam<Case> {};

// Three ring all_reduce calls in a row over the same device-resident links; with 2 ranks, then
// scripted host-path traffic on the same connection and a fourth call.
TEST_P(DevLinkAllReduce, RingThreeCallsInARow) {
  Case c = GetParam();
  uint64_t id = TestCommId();
  BlobExchange ex(c.nranks);
  auto results = mp_run(
      c.nranks,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, kSlots, 4);
        RankXport x;
        std::string err = OpenCudaIpc(rank, n, id, &cfg, dev, &ex, &x);
        dev_queue_t* q = nullptr;
        if (err.empty() && dev->ops->queue_create(dev, &q) != WEFT_SUCCESS)
          err = Where(rank, "queue_create: " + std::string(err_last()));
        {
          DevAllReduce ar;
          if (err.empty())
            err = ar.Setup(dev, x.conns, rank, n, c.dtype, c.count, 10ull * 1000 * 1000 * 1000);
          for (int call = 0; call < 3 && err.empty(); call++)
            err = OneCall(ar, q, rank, n, c.dtype, c.count, call);
          // The host-driven ring of the same connection still carries its own traffic, and the
          // device-resident links go on after it: the two never share memory or counters.
          if (err.empty() && n == 2) {
            int peer = 1 - rank;
            err = Drive(x.conns[(size_t)peer], dev, rank, Script(rank, 40, kSlot, 256, 11),
                        Script(peer, 40, kSlot, 256, 11), Windows{4, 4}, kWaitMs);
            if (err.empty()) err = OneCall(ar, q, rank, n, c.dtype, c.count, 3);
          }
          if (err.empty()) {
            conn_t* any = x.conns[(size_t)((rank + 1) % n)];
            dl_link_view_t v;
            err_clear();
            if (any->ops->device_link(any, 7, &v) != WEFT_ERR_INVALID_ARGUMENT ||
                !strstr(err_last(), ("rank " + std::to_string((rank + 1) % n)).c_str()))
              err = Where(rank, "device_link with direction 7: " + std::string(err_last()));
          }
          if (q) dev->ops->queue_destroy(q);  // runs end before their links and buffers go
          // The device-resident traffic never touched the host-driven ring: its counters rest.
        }
        x.Close(false);
        dev_engine_close(dev);
        if (err.empty()) err = LeakCheck(rank);
        return err;
      },
      120000);
  std::string why;
  if (AllUnsupported(results, &why)) GTEST_SKIP() << why;
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

INSTANTIATE_TEST_SUITE_P(RanksDtypesCounts, DevLinkAllReduce,
                         testing::Values(Case{2, WEFT_FLOAT32, 100003}, Case{2, WEFT_INT32, 7},
                                         Case{3, WEFT_INT32, 65537}, Case{3, WEFT_FLOAT32, 30001},
                                         Case{4, WEFT_FLOAT32, 200000},
                                         Case{4, WEFT_INT32, 123457}),
                         CaseName);

// One rank never launches: the others end DL_TIMEOUT within their timeout, each error names the
// peer its run waited for, and the rank after the absent one on the ring (which receives from
// it) names the absent rank.
TEST(DevLink, AbsentRankTimesOutTheOthers) {
  for (int nranks : {2, 3, 4}) {
    SCOPED_TRACE("nranks " + std::to_string(nranks));
    const int absent = nranks - 1;
    const uint64_t timeout_ms = 300;
    uint64_t id = TestCommId();
    BlobExchange ex(nranks);
    auto results = mp_run(
        nranks,
        [&](int rank, int n, int) -> std::string {
          dev_engine_t* dev;
          if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
          weft_config_t cfg = TestConfig(kSlot, kSlots, 4);
          RankXport x;
          std::string err = OpenCudaIpc(rank, n, id, &cfg, dev, &ex, &x);
          dev_queue_t* q = nullptr;
          if (err.empty() && dev->ops->queue_create(dev, &q) != WEFT_SUCCESS)
            err = Where(rank, "queue_create: " + std::string(err_last()));
          {
            DevAllReduce ar;
            const size_t count = 50000;
            if (err.empty())
              err = ar.Setup(dev, x.conns, rank, n, WEFT_FLOAT32, count, timeout_ms * 1000 * 1000);
            if (err.empty() && rank != absent) {
              dl_status_t st = {-1, -2, -2, -2, 0};
              auto t0 = std::chrono::steady_clock::now();
              weft_result_t lr = dev->ops->launch ? dev->ops->launch(q, &ar.run, &st)
                                                  : WEFT_ERR_UNSUPPORTED;
              if (lr == WEFT_ERR_UNSUPPORTED)
                err = kUnsupported + std::string(dev->ops->name);
              else if (lr != WEFT_SUCCESS)
                err = Where(rank, "launch: " + std::string(err_last()));
              weft_result_t res = err.empty() ? dev->ops->drain(q, kWaitMs) : WEFT_SUCCESS;
              std::string msg = err_last();
              double secs =
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
              if (!err.empty()) {
              } else if (res != WEFT_ERR_TIMEOUT) {
                err = Where(rank, "drain returned " + std::to_string(res) + " (" + msg +
                                      "), expected a timeout");
              } else if (st.code != DL_TIMEOUT || st.link < 0 || st.link >= ar.prog.nlinks) {
                err = Where(rank, "status " + StatusStr(st) + ", expected DL_TIMEOUT on a link");
              } else if (secs > 10.0) {
                err = Where(rank, "timed out after " + std::to_string(secs) + " s");
              } else {
                int peer = ar.prog.links[st.link].peer;
                std::string want = "rank " + std::to_string(peer);
                if (msg.find(want) == std::string::npos)
                  err = Where(rank, "the error does not name " + want + ": " + msg);
                if (err.empty() && rank == (absent + 1) % n &&
                    msg.find("rank " + std::to_string(absent)) == std::string::npos)
                  err = Where(rank, "the error does not name the absent rank " +
                                        std::to_string(absent) + ": " + msg);
              }
            }
            if (q) dev->ops->queue_destroy(q);
            q = nullptr;
          }
          // Everyone's run has ended before anyone unmaps the links it drove. (A second exchange
          // on the same pipes is safe here: the first ended long before, at connect.)
          std::vector<std::vector<char>> all;
          char token = 1;
          std::string bar = ex.Exchange(rank, &token, 1, &all, kWaitMs);
          if (err.empty() && !bar.empty()) err = Where(rank, "final exchange: " + bar);
          x.Close(false);
          dev_engine_close(dev);
          return err;
        },
        60000);
    std::string why;
    if (AllUnsupported(results, &why)) GTEST_SKIP() << why;
    EXPECT_EQ(mp_summary(results), "");
    EXPECT_EQ(Leftovers(id), "");
  }
}

}  // namespace
