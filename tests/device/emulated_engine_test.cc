// emulated_engine_test.cc -- the engine contract on the emulated engine, plus what only the
// emulation promises: asynchrony that tests can count on, sticky errors from work that already
// ran, checks that stand in for a GPU's faults, the delay knob, and engine selection by name.
#include <dirent.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/device/contract.h"

namespace {

// In the emulation a user's stream is a queue like weft's own.
weft_result_t EmulatedUserCopy(dev_engine_t *e, void *stream, void *dst, const void *src,
                               size_t bytes) {
  return e->ops->copy((dev_queue_t *)stream, dst, src, bytes);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Engine, EngineContract,
                         testing::Values(EngineParam{"emulated", EmulatedUserCopy}),
                         EngineParamName);

namespace {

class Emulated : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(emulated_engine_open(&e_));
    ops_ = e_->ops;
  }
  void TearDown() override { dev_engine_close(e_); }
  dev_engine_t *e_ = nullptr;
  const dev_ops_t *ops_ = nullptr;
};

int OpenFds() {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

// Sets an environment variable for one scope (the tests run on one thread; the engine reads it
// at open only).
class ScopedEnv {
 public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    const char *old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char *name_;
  bool had_;
  std::string old_;
};

}  // namespace

// Deterministic asynchrony: work queued behind a closed gate has not run, and its fence has not
// passed, however long we look; both happen once the gate opens.
TEST_F(Emulated, FenceDoesNotPassBeforeItsWork) {
  void *s = nullptr;
  ASSERT_OK(ops_->stream_create(e_, &s));
  dev_queue_t *q = (dev_queue_t *)s;
  char *src = nullptr, *dst = nullptr;
  ASSERT_OK(ops_->alloc(e_, 4096, 1, (void **)&src));
  ASSERT_OK(ops_->alloc(e_, 4096, 0, (void **)&dst));
  memset(src, 7, 4096);
  memset(dst, 0, 4096);
  dev_gate_t *g = nullptr;
  ASSERT_OK(ops_->gate_enter(e_, s, &g));
  ASSERT_OK(ops_->copy(q, dst, src, 4096));
  uint64_t t = 0;
  ASSERT_OK(ops_->fence(q, &t));
  for (int i = 0; i < 20; i++) {
    int done = 1;
    ASSERT_OK(ops_->poll(q, t, &done));
    ASSERT_EQ(0, done);
    ASSERT_EQ(0, dst[4095]);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(WEFT_ERR_TIMEOUT, ops_->drain(q, 20));
  ops_->gate_open(g);
  ASSERT_OK(ops_->drain(q, kWaitMs));
  int done = 0;
  ASSERT_OK(ops_->poll(q, t, &done));
  EXPECT_EQ(1, done);
  EXPECT_EQ(7, dst[4095]);
  ops_->release(e_, src, 1);
  ops_->release(e_, dst, 0);
  ops_->stream_destroy(e_, s);
}

// With slow work (5 ms an operation) a fence that passed even one operation early is seen: the
// poll loop below looks far more often than that.
TEST(EmulatedEngine, FencesPassExactlyAfterTheirWork) {
  ScopedEnv env("WEFT_EMULATED_DELAY_US", "5000");
  dev_engine_t *e = nullptr;
  ASSERT_OK(emulated_engine_open(&e));
  const dev_ops_t *o = e->ops;
  dev_queue_t *q = nullptr;
  ASSERT_OK(o->queue_create(e, &q));
  const int rounds = 8;
  char *in = nullptr, *out = nullptr;
  ASSERT_OK(o->alloc(e, rounds, 1, (void **)&in));
  ASSERT_OK(o->alloc(e, rounds, 0, (void **)&out));
  memset(out, 0, rounds);
  std::vector<uint64_t> ticket(rounds);
  for (int k = 0; k < rounds; k++) {
    in[k] = (char)(k + 1);
    ASSERT_OK(o->copy(q, out + k, in + k, 1));
    ASSERT_OK(o->fence(q, &ticket[k]));
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  int passed = 0, polls = 0;
  while (passed < rounds) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    passed = 0;
    for (int k = 0; k < rounds; k++) {
      int done = 0;
      ASSERT_OK(o->poll(q, ticket[k], &done));
      polls++;
      if (!done) break;
      ASSERT_EQ(k + 1, out[k]) << "ticket " << k << " passed before its copy";
      passed++;
    }
  }
  EXPECT_GT(polls, 4 * rounds);
  o->queue_destroy(q);
  dev_engine_close(e);
}

TEST_F(Emulated, PollOfATicketNeverIssuedIsAnError) {
  dev_queue_t *q = nullptr;
  ASSERT_OK(ops_->queue_create(e_, &q));
  uint64_t t = 0;
  ASSERT_OK(ops_->fence(q, &t));
  int done = 0;
  EXPECT_EQ(WEFT_ERR_INTERNAL, ops_->poll(q, t + 5, &done));
  ops_->queue_destroy(q);
}

// A bad reduction is accepted when enqueued and fails when it runs, as a faulting kernel would;
// the failure sticks: later work is skipped and every poll and drain returns it.
TEST_F(Emulated, ErrorsAreStickyAndSkipLaterWork) {
  dev_queue_t *q = nullptr;
  ASSERT_OK(ops_->queue_create(e_, &q));
  char *a = nullptr, *d = nullptr;
  ASSERT_OK(ops_->alloc(e_, 4096, 0, (void **)&a));
  ASSERT_OK(ops_->alloc(e_, 4096, 0, (void **)&d));
  memset(a, 1, 4096);
  memset(d, 0, 4096);
  uint64_t before = 0, after = 0;
  ASSERT_OK(ops_->fence(q, &before));
  ASSERT_OK(ops_->reduce(q, d, nullptr, a, a, 16, (weft_dtype_t)99, WEFT_SUM, 0));
  ASSERT_OK(ops_->copy(q, d, a, 4096));  // skipped: the queue has failed
  ASSERT_OK(ops_->fence(q, &after));
  err_clear();
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->drain(q, kWaitMs));
  EXPECT_NE(nullptr, strstr(err_last(), "unknown dtype 99")) << err_last();
  int done = 0;
  err_clear();
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->poll(q, after, &done));
  EXPECT_EQ(1, done);  // passed, so a caller waiting on it sees the error instead of hanging
  EXPECT_NE(nullptr, strstr(err_last(), "unknown dtype 99")) << err_last();
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->poll(q, before, &done));
  EXPECT_EQ(0, d[0]);
  ops_->queue_destroy(q);
  ops_->release(e_, a, 0);
  ops_->release(e_, d, 0);
}

// A failure on the user's stream before a call reaches the call through gate_wait_inputs.
TEST_F(Emulated, GateReportsAFailedUserStream) {
  void *s = nullptr;
  ASSERT_OK(ops_->stream_create(e_, &s));
  char *a = nullptr;
  ASSERT_OK(ops_->alloc(e_, 64, 0, (void **)&a));
  ASSERT_OK(ops_->reduce((dev_queue_t *)s, a, nullptr, a, a, 4, WEFT_FLOAT32, (weft_op_t)42, 0));
  dev_gate_t *g = nullptr;
  ASSERT_OK(ops_->gate_enter(e_, s, &g));
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->gate_wait_inputs(g, kWaitMs));
  EXPECT_NE(nullptr, strstr(err_last(), "unknown op 42")) << err_last();
  ops_->gate_open(g);
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->stream_sync(e_, s, kWaitMs));
  ops_->release(e_, a, 0);
  ops_->stream_destroy(e_, s);
}

// What a GPU would fault on is refused at enqueue: kernels reading pageable memory, and ranges
// that run past their allocation.
TEST_F(Emulated, RefusesWhatAGpuCouldNotDo) {
  dev_queue_t *q = nullptr;
  ASSERT_OK(ops_->queue_create(e_, &q));
  float *d = nullptr, *pin = nullptr;
  ASSERT_OK(ops_->alloc(e_, 1024 * sizeof(float), 0, (void **)&d));
  ASSERT_OK(ops_->alloc(e_, 1024 * sizeof(float), 1, (void **)&pin));
  std::vector<float> pageable(1024, 1.0f);
  err_clear();
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT,
            ops_->reduce(q, d, nullptr, d, pageable.data(), 1024, WEFT_FLOAT32, WEFT_SUM, 0));
  EXPECT_NE(nullptr, strstr(err_last(), "pageable")) << err_last();
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT,
            ops_->reduce(q, d + 1, nullptr, d, pin, 1024, WEFT_FLOAT32, WEFT_SUM, 0));
  EXPECT_NE(nullptr, strstr(err_last(), "past the end")) << err_last();
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->copy(q, d, pageable.data(), 1025 * sizeof(float)));
  // Copies may use pageable memory; kernels may use pinned memory.
  EXPECT_OK(ops_->copy(q, d, pageable.data(), 1024 * sizeof(float)));
  EXPECT_OK(ops_->reduce(q, pin, nullptr, d, pin, 1024, WEFT_FLOAT32, WEFT_SUM, 0));
  ASSERT_OK(ops_->drain(q, kWaitMs));
  ops_->queue_destroy(q);
  ops_->release(e_, d, 0);
  ops_->release(e_, pin, 1);
}

TEST_F(Emulated, StreamsFromElsewhereAreRefused) {
  int not_a_stream = 0;
  dev_gate_t *g = nullptr;
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->gate_enter(e_, &not_a_stream, &g));
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->stream_sync(e_, &not_a_stream, 10));
}

// The allocation table is the process's, like CUDA's: another engine sees this one's memory as
// device memory, and a released allocation is host memory again (nothing is mapped there).
TEST_F(Emulated, MemoryKindsAreProcessWide) {
  dev_engine_t *other = nullptr;
  ASSERT_OK(emulated_engine_open(&other));
  char *d = nullptr;
  ASSERT_OK(ops_->alloc(e_, 1 << 16, 0, (void **)&d));
  dev_mem_t kind = DEV_MEM_HOST;
  ASSERT_OK(other->ops->mem_kind(other, d + 100, &kind, nullptr));
  EXPECT_EQ(DEV_MEM_DEVICE, kind);
  ops_->release(e_, d, 0);
  ASSERT_OK(other->ops->mem_kind(other, d + 100, &kind, nullptr));
  EXPECT_EQ(DEV_MEM_HOST, kind);
  dev_engine_close(other);
}

TEST_F(Emulated, IpcHandlesAreChecked) {
  char *d = nullptr, *pin = nullptr;
  ASSERT_OK(ops_->alloc(e_, 8192, 0, (void **)&d));
  ASSERT_OK(ops_->alloc(e_, 8192, 1, (void **)&pin));
  dev_ipc_handle_t h;
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->ipc_export(e_, d + 64, 64, &h));  // not the start
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->ipc_export(e_, pin, 64, &h));     // not device
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->ipc_export(e_, d, 8193, &h));     // too long
  ASSERT_OK(ops_->ipc_export(e_, d, 8192, &h));
  void *p = nullptr;
  err_clear();
  // CUDA cannot open a handle in the process that exported it; neither can the emulation.
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->ipc_import(e_, &h, &p));
  EXPECT_NE(nullptr, strstr(err_last(), "this process exported")) << err_last();
  dev_ipc_handle_t garbage;
  memset(&garbage, 0x5a, sizeof garbage);
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, ops_->ipc_import(e_, &garbage, &p));
  EXPECT_EQ(nullptr, p);
  ops_->release(e_, d, 0);
  ops_->release(e_, pin, 1);
}

// close() gives back every descriptor and mapping, whatever was left open.
TEST(EmulatedEngine, CloseReleasesDescriptorsAndMappings) {
  int fds = OpenFds();
  dev_engine_t *e = nullptr;
  ASSERT_OK(emulated_engine_open(&e));
  void *d[3] = {};
  for (void *&p : d) ASSERT_OK(e->ops->alloc(e, 1 << 16, 0, &p));
  void *s = nullptr;
  ASSERT_OK(e->ops->stream_create(e, &s));
  dev_gate_t *g = nullptr;
  ASSERT_OK(e->ops->gate_enter(e, nullptr, &g));  // makes the default stream
  e->ops->gate_open(g);
  EXPECT_EQ(fds + 3, OpenFds());
  dev_engine_close(e);
  EXPECT_EQ(fds, OpenFds());
  dev_engine_t *other = nullptr;
  ASSERT_OK(emulated_engine_open(&other));
  dev_mem_t kind = DEV_MEM_DEVICE;
  ASSERT_OK(other->ops->mem_kind(other, d[1], &kind, nullptr));
  EXPECT_EQ(DEV_MEM_HOST, kind);
  dev_engine_close(other);
}

TEST(EmulatedEngine, DelayKnob) {
  {
    ScopedEnv env("WEFT_EMULATED_DELAY_US", "soon");
    dev_engine_t *e = nullptr;
    EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, emulated_engine_open(&e));
    EXPECT_NE(nullptr, strstr(err_last(), "WEFT_EMULATED_DELAY_US=soon")) << err_last();
  }
  ScopedEnv env("WEFT_EMULATED_DELAY_US", "50000");
  dev_engine_t *e = nullptr;
  ASSERT_OK(emulated_engine_open(&e));
  dev_queue_t *q = nullptr;
  ASSERT_OK(e->ops->queue_create(e, &q));
  uint64_t t = 0;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_OK(e->ops->fence(q, &t));
  int done = 1;
  ASSERT_OK(e->ops->poll(q, t, &done));
  EXPECT_EQ(0, done);
  ASSERT_OK(e->ops->drain(q, kWaitMs));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  e->ops->queue_destroy(q);
  dev_engine_close(e);
}

// Queues driven from several threads at once, each polled from another thread, while memory is
// allocated, released and looked up: the case ThreadSanitizer checks.
TEST(EmulatedEngine, ConcurrentQueuesAndAllocations) {
  dev_engine_t *e = nullptr;
  ASSERT_OK(emulated_engine_open(&e));
  const dev_ops_t *o = e->ops;
  const int nthreads = 4, rounds = 200, n = 1024;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; t++) {
    threads.emplace_back([&, t] {
      dev_queue_t *q = nullptr;
      float *buf = nullptr, *acc = nullptr;
      if (o->queue_create(e, &q) || o->alloc(e, n * sizeof(float), 1, (void **)&buf) ||
          o->alloc(e, n * sizeof(float), 0, (void **)&acc)) {
        failures++;
        return;
      }
      for (int i = 0; i < n; i++) buf[i] = (float)(t + 1);
      std::atomic<uint64_t> last{0};
      std::atomic<bool> stop{false};
      std::thread poller([&] {  // polls from another thread than the one enqueuing
        while (!stop.load()) {
          int done = 0;
          uint64_t ticket = last.load();
          if (ticket && o->poll(q, ticket, &done) != WEFT_SUCCESS) failures++;
          std::this_thread::yield();
        }
      });
      if (o->copy(q, acc, buf, n * sizeof(float))) failures++;
      for (int r = 1; r < rounds; r++) {
        if (o->reduce(q, acc, nullptr, acc, buf, n, WEFT_FLOAT32, WEFT_SUM, 0)) failures++;
        uint64_t ticket = 0;
        if (o->fence(q, &ticket)) failures++;
        last.store(ticket);
      }
      if (o->drain(q, kWaitMs)) failures++;
      stop.store(true);
      poller.join();
      std::vector<float> out(n);
      if (o->copy(q, out.data(), acc, n * sizeof(float)) || o->drain(q, kWaitMs)) failures++;
      for (int i = 0; i < n; i++)
        if (out[i] != (float)((t + 1) * rounds)) failures++;
      o->queue_destroy(q);
      o->release(e, buf, 1);
      o->release(e, acc, 0);
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 100; i++) {
      void *p = nullptr;
      dev_mem_t kind = DEV_MEM_HOST;
      if (o->alloc(e, 4096, i % 2, &p) || o->mem_kind(e, p, &kind, nullptr)) failures++;
      if (kind != (i % 2 ? DEV_MEM_HOST : DEV_MEM_DEVICE)) failures++;
      o->release(e, p, i % 2);
    }
  });
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  dev_engine_close(e);
}

// ---- choosing an engine ----

TEST(EngineOpen, ByName) {
  dev_engine_t *e = nullptr;
  ASSERT_OK(dev_engine_open("emulated", &e));
  EXPECT_STREQ("emulated", e->ops->name);
  dev_engine_close(e);
  dev_engine_close(nullptr);

  err_clear();
  EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, dev_engine_open("opencl", &e));
  EXPECT_NE(nullptr, strstr(err_last(), "opencl")) << err_last();

  weft_result_t res = dev_engine_open("cuda", &e);
  if (!WEFT_EXPECT_CUDA) {
    EXPECT_EQ(WEFT_ERR_UNSUPPORTED, res);
    EXPECT_NE(nullptr, strstr(err_last(), "this build has no CUDA")) << err_last();
    EXPECT_EQ(nullptr, e);
  } else if (res == WEFT_SUCCESS) {
    EXPECT_STREQ("cuda", e->ops->name);
    dev_engine_close(e);
  } else {
    EXPECT_EQ(WEFT_ERR_UNSUPPORTED, res);
    EXPECT_NE(nullptr, strstr(err_last(), "no CUDA device")) << err_last();
  }

  // "auto": CUDA where there is a device, otherwise no engine (host buffers only), never an error.
  ASSERT_OK(dev_engine_open("auto", &e));
  if (!WEFT_EXPECT_CUDA) {
    EXPECT_EQ(nullptr, e);
  }
  if (e) {
    EXPECT_STREQ("cuda", e->ops->name);
    dev_engine_close(e);
  }
}
