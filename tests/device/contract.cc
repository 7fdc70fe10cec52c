// contract.cc -- the engine contract of device/device.h, checked through the vtable only: memory
// kinds, copies and reductions against the host kernels, fence order, errors, stream gates, IPC
// with another process. Instantiated once per engine by emulated_engine_test.cc and
// cuda_engine_test.cc.
#include "tests/device/contract.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/fp8.h"
#include "kernels/half.h"
#include "kernels/reduce.h"

extern char **environ;

namespace {

const char kIpcChildEnv[] = "WEFT_DEVICE_TEST_IPC_CHILD";
const char kGateChildEnv[] = "WEFT_DEVICE_TEST_GATE_CHILD";

size_t DtypeSize(int d) {
  static const size_t sizes[WEFT_NUM_DTYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
  return sizes[d];
}

uint64_t Lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 17;
}

// Values for every dtype with no NaN (GPU arithmetic may change a NaN's payload) and small enough
// floats that products stay finite; integers take every bit pattern, so sums and products wrap.
// fp8 values are scaled up until products pass the largest finite value, so that saturation is
// part of what host and device must agree on.
void Fill(int dtype, void *buf, size_t n, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++) {
    uint64_t r = Lcg(&s);
    float f = (float)((int)(r % 2001) - 1000) / 128.0f;
    switch (dtype) {
      case WEFT_FLOAT16:
        ((uint16_t *)buf)[i] = kern_float_to_half(f / 32.0f);
        break;
      case WEFT_BFLOAT16:
        ((uint16_t *)buf)[i] = kern_float_to_bf16(f);
        break;
      case WEFT_FLOAT32:
        ((float *)buf)[i] = f;
        break;
      case WEFT_FLOAT64:
        ((double *)buf)[i] = (double)f / 3.0;
        break;
      case WEFT_FLOAT8_E4M3:
        ((uint8_t *)buf)[i] = kern_float_to_e4m3(f * 8.0f);
        break;
      case WEFT_FLOAT8_E5M2:
        ((uint8_t *)buf)[i] = kern_float_to_e5m2(f * 1024.0f);
        break;
      default:
        memcpy((char *)buf + i * DtypeSize(dtype), &r, DtypeSize(dtype));
        break;
    }
  }
}

std::vector<uint8_t> Pattern(size_t bytes, unsigned mul, unsigned add) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; i++) v[i] = (uint8_t)(i * mul + add + (i >> 12));
  return v;
}

}  // namespace

void EngineContract::SetUp() {
  weft_result_t res = dev_engine_open(GetParam().name, &e_);
  if (res == WEFT_ERR_UNSUPPORTED) GTEST_SKIP() << err_last();
  ASSERT_OK(res);
  ASSERT_NE(nullptr, e_);
  ops_ = e_->ops;
  ASSERT_STREQ(GetParam().name, ops_->name);
  ASSERT_OK(ops_->queue_create(e_, &q_));
}

void EngineContract::TearDown() {
  if (!e_) return;
  for (auto &a : allocs_) ops_->release(e_, a.first, a.second);
  if (q_) ops_->queue_destroy(q_);
  dev_engine_close(e_);
}

void *EngineContract::Alloc(size_t bytes, int host_pinned) {
  void *p = nullptr;
  EXPECT_OK(ops_->alloc(e_, bytes, host_pinned, &p));
  if (p) allocs_.push_back({p, host_pinned});
  return p;
}

void EngineContract::ToHost(void *host, const void *dev, size_t bytes) {
  ASSERT_OK(ops_->copy(q_, host, dev, bytes));
  ASSERT_OK(ops_->drain(q_, kWaitMs));
}

void EngineContract::FromHost(void *dev, const void *host, size_t bytes) {
  ASSERT_OK(ops_->copy(q_, dev, host, bytes));
  ASSERT_OK(ops_->drain(q_, kWaitMs));
}

// ---- memory ----

TEST_P(EngineContract, MemKindTellsDeviceFromHost) {
  const size_t bytes = 1 << 20;
  char *dev = (char *)Alloc(bytes, 0);
  char *pinned = (char *)Alloc(bytes, 1);
  ASSERT_TRUE(dev && pinned);
  std::vector<char> pageable(4096);
  int on_stack = 0;
  struct Case {
    const void *p;
    dev_mem_t want;
    const char *what;
  } cases[] = {
      {dev, DEV_MEM_DEVICE, "start of a device allocation"},
      {dev + 12345, DEV_MEM_DEVICE, "inside a device allocation"},
      {dev + bytes - 1, DEV_MEM_DEVICE, "last byte of a device allocation"},
      {pinned, DEV_MEM_HOST, "pinned host memory"},
      {pinned + 999, DEV_MEM_HOST, "inside pinned host memory"},
      {pageable.data(), DEV_MEM_HOST, "pageable heap memory"},
      {&on_stack, DEV_MEM_HOST, "the stack"},
      {nullptr, DEV_MEM_HOST, "NULL"},
  };
  for (const Case &c : cases) {
    dev_mem_t kind = c.want == DEV_MEM_HOST ? DEV_MEM_DEVICE : DEV_MEM_HOST;
    int device = -2;
    ASSERT_OK(ops_->mem_kind(e_, c.p, &kind, &device)) << c.what;
    EXPECT_EQ(c.want, kind) << c.what;
    if (c.want == DEV_MEM_DEVICE) {
      EXPECT_EQ(e_->device, device) << c.what;
    }
  }
}

TEST_P(EngineContract, AllocOfZeroBytesIsNull) {
  void *p = &p;
  ASSERT_OK(ops_->alloc(e_, 0, 0, &p));
  EXPECT_EQ(nullptr, p);
  ops_->release(e_, nullptr, 0);
  ops_->release(e_, nullptr, 1);
}

// ---- copies ----

TEST_P(EngineContract, CopiesBetweenEveryKindOfMemory) {
  const size_t bytes = 3 * 65536 + 17;
  std::vector<uint8_t> src = Pattern(bytes, 7, 1), out(bytes, 0);
  uint8_t *dev_a = (uint8_t *)Alloc(bytes, 0), *dev_b = (uint8_t *)Alloc(bytes, 0);
  uint8_t *pin_a = (uint8_t *)Alloc(bytes, 1), *pin_b = (uint8_t *)Alloc(bytes, 1);
  ASSERT_TRUE(dev_a && dev_b && pin_a && pin_b);
  memset(pin_b, 0, bytes);
  // pageable -> device -> device -> pinned -> pinned -> device -> pageable, all queued at once:
  // each copy reads what the one before wrote, so this also checks that they run in order.
  ASSERT_OK(ops_->copy(q_, dev_a, src.data(), bytes));
  ASSERT_OK(ops_->copy(q_, dev_b, dev_a, bytes));
  ASSERT_OK(ops_->copy(q_, pin_a, dev_b, bytes));
  ASSERT_OK(ops_->copy(q_, pin_b, pin_a, bytes));
  ASSERT_OK(ops_->copy(q_, dev_a + 1, pin_b, bytes - 1));  // unaligned
  ASSERT_OK(ops_->copy(q_, out.data(), dev_a, bytes));
  ASSERT_OK(ops_->copy(q_, dev_b, dev_a, 0));  // nothing to do, still fine
  ASSERT_OK(ops_->drain(q_, kWaitMs));
  EXPECT_EQ(0, memcmp(src.data(), pin_b, bytes));
  EXPECT_EQ(src[0], out[0]);
  EXPECT_EQ(0, memcmp(src.data(), out.data() + 1, bytes - 1));
}

// ---- reductions: bit for bit the host kernels ----

TEST_P(EngineContract, ReduceMatchesHostKernelsForEveryDtypeAndOp) {
  const size_t max_n = 1031;  // odd: every vector width leaves a tail
  const size_t max_bytes = (max_n + 1) * 8;
  char *a_dev = (char *)Alloc(max_bytes, 0), *dst = (char *)Alloc(max_bytes, 0);
  char *dst2 = (char *)Alloc(max_bytes, 0), *b_pin = (char *)Alloc(max_bytes, 1);
  ASSERT_TRUE(a_dev && dst && dst2 && b_pin);
  std::vector<char> a(max_bytes), b(max_bytes), want(max_bytes), got(max_bytes), got2(max_bytes);
  int cases = 0;
  for (int dtype = 0; dtype < WEFT_NUM_DTYPES; dtype++) {
    size_t es = DtypeSize(dtype);
    for (int op = 0; op < WEFT_NUM_OPS; op++) {
      for (int avg_nranks : {0, 3}) {
        if (avg_nranks && op != WEFT_AVG) continue;
        for (size_t n : {(size_t)1, max_n}) {
          // variant 0: out of place; 1: also into dst2; 2: in place (dst == local), shifted by
          // one element so that the pointers are not 16-byte aligned.
          for (int variant = 0; variant < 3; variant++) {
            SCOPED_TRACE(testing::Message() << "dtype " << dtype << " op " << op << " avg_nranks "
                                            << avg_nranks << " n " << n << " variant " << variant);
            size_t bytes = n * es, off = variant == 2 ? es : 0;
            Fill(dtype, a.data(), n, 1000 + dtype * 10 + op);
            Fill(dtype, b.data(), n, 2000 + dtype * 10 + op);
            if (op == WEFT_AVG && avg_nranks)
              kern_reduce_avg_final(want.data(), a.data(), b.data(), n, (weft_dtype_t)dtype,
                                    avg_nranks);
            else
              kern_reduce_lookup((weft_dtype_t)dtype, (weft_op_t)op)(want.data(), a.data(),
                                                                     b.data(), n);
            FromHost(a_dev + off, a.data(), bytes);
            memcpy(b_pin + off, b.data(), bytes);  // incoming: a pinned staging buffer
            char *out = variant == 2 ? a_dev + off : dst;
            ASSERT_OK(ops_->reduce(q_, out, variant == 1 ? dst2 : nullptr, a_dev + off, b_pin + off,
                                   n, (weft_dtype_t)dtype, (weft_op_t)op, avg_nranks));
            ASSERT_OK(ops_->drain(q_, kWaitMs));
            ToHost(got.data(), out, bytes);
            EXPECT_EQ(0, memcmp(want.data(), got.data(), bytes));
            if (variant == 1) {
              ToHost(got2.data(), dst2, bytes);
              EXPECT_EQ(0, memcmp(want.data(), got2.data(), bytes));
            }
            cases++;
          }
        }
      }
    }
  }
  EXPECT_EQ(WEFT_NUM_DTYPES * (WEFT_NUM_OPS + 1) * 2 * 3, cases);
}

// WEFT_PREMUL_SUM's scaling: bit for bit kern_premul, for every dtype, out of place and in place
// (shifted off 16-byte alignment), with the factor's host memory reused right after the call.
TEST_P(EngineContract, PremulMatchesHostKernelForEveryDtype) {
  const size_t n = 1031;
  const size_t max_bytes = (n + 1) * 8;
  char *src_dev = (char *)Alloc(max_bytes, 0), *dst = (char *)Alloc(max_bytes, 0);
  ASSERT_TRUE(src_dev && dst);
  std::vector<char> src(max_bytes), want(max_bytes), got(max_bytes), factor(8);
  for (int dtype = 0; dtype < WEFT_NUM_DTYPES; dtype++) {
    size_t es = DtypeSize(dtype);
    for (int in_place : {0, 1}) {
      SCOPED_TRACE(testing::Message() << "dtype " << dtype << " in place " << in_place);
      size_t bytes = n * es, off = in_place ? es : 0;
      Fill(dtype, src.data(), n, 3000 + dtype);
      Fill(dtype, factor.data(), 1, 4000 + dtype);
      kern_premul(want.data(), src.data(), n, (weft_dtype_t)dtype, factor.data());
      FromHost(src_dev + off, src.data(), bytes);
      char *out = in_place ? src_dev + off : dst;
      ASSERT_OK(ops_->premul(q_, out, src_dev + off, n, (weft_dtype_t)dtype, factor.data()));
      memset(factor.data(), 0x5a, factor.size());  // read before premul returned
      ASSERT_OK(ops_->drain(q_, kWaitMs));
      ToHost(got.data(), out, bytes);
      EXPECT_EQ(0, memcmp(want.data(), got.data(), bytes));
    }
  }
}

TEST_P(EngineContract, ReduceOfNothingIsFine) {
  ASSERT_OK(ops_->reduce(q_, nullptr, nullptr, nullptr, nullptr, 0, WEFT_FLOAT32, WEFT_SUM, 0));
  ASSERT_OK(ops_->drain(q_, kWaitMs));
}

// ---- fences ----

// Whenever a ticket reads as passed, everything enqueued before its fence has finished; tickets
// grow; after drain every ticket has passed.
TEST_P(EngineContract, FencesPassInOrderAndOnlyAfterTheirWork) {
  const int rounds = 32;
  const size_t bytes = 256 << 10;
  uint8_t *in = (uint8_t *)Alloc(rounds * bytes, 1), *out = (uint8_t *)Alloc(rounds * bytes, 1);
  uint8_t *dev = (uint8_t *)Alloc(rounds * bytes, 0);
  ASSERT_TRUE(in && out && dev);
  std::vector<uint8_t> pat = Pattern(rounds * bytes, 11, 3);
  memcpy(in, pat.data(), rounds * bytes);
  memset(out, 0, rounds * bytes);
  std::vector<uint64_t> ticket(rounds);
  for (int k = 0; k < rounds; k++) {
    ASSERT_OK(ops_->copy(q_, dev + k * bytes, in + k * bytes, bytes));
    ASSERT_OK(ops_->copy(q_, out + k * bytes, dev + k * bytes, bytes));
    ASSERT_OK(ops_->fence(q_, &ticket[k]));
    if (k > 0) {
      EXPECT_GT(ticket[k], ticket[k - 1]);
    }
  }
  std::vector<bool> seen(rounds, false);
  int observed_pending = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  for (int passed = 0; passed < rounds;) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "fences did not pass";
    passed = 0;
    for (int k = 0; k < rounds; k++) {
      int done = -1;
      ASSERT_OK(ops_->poll(q_, ticket[k], &done));
      ASSERT_TRUE(done == 0 || done == 1);
      if (!done) {
        observed_pending++;
        continue;
      }
      for (int j = 0; j < k; j++) {
        int earlier = 0;
        ASSERT_OK(ops_->poll(q_, ticket[j], &earlier));
        ASSERT_EQ(1, earlier) << "ticket " << k << " passed before ticket " << j;
      }
      if (!seen[k]) {
        ASSERT_EQ(0, memcmp(pat.data() + k * bytes, out + k * bytes, bytes))
            << "ticket " << k << " passed before its copies finished";
        seen[k] = true;
      }
      passed++;
    }
  }
  ASSERT_OK(ops_->drain(q_, kWaitMs));
  for (int k = 0; k < rounds; k++) {
    int done = 0;
    ASSERT_OK(ops_->poll(q_, ticket[k], &done));
    EXPECT_EQ(1, done);
  }
  RecordProperty("polls_that_saw_work_pending", observed_pending);
}

TEST_P(EngineContract, DrainOfAnEmptyQueueReturnsAtOnce) {
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_OK(ops_->drain(q_, kWaitMs));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

// ---- errors ----

// An invalid reduction is refused, either when it is enqueued or by the queue afterwards; never
// silently accepted.
TEST_P(EngineContract, InvalidReduceIsReported) {
  const size_t n = 64;
  char *a = (char *)Alloc(n * 8, 0), *d = (char *)Alloc(n * 8, 0);
  ASSERT_TRUE(a && d);
  struct Bad {
    int dtype, op, avg_nranks;
  } bad[] = {{99, WEFT_SUM, 0}, {WEFT_FLOAT32, 77, 0}, {WEFT_FLOAT32, WEFT_AVG, -1}};
  for (const Bad &c : bad) {
    dev_queue_t *q = nullptr;
    ASSERT_OK(ops_->queue_create(e_, &q));
    err_clear();
    weft_result_t res =
        ops_->reduce(q, d, nullptr, a, a, n, (weft_dtype_t)c.dtype, (weft_op_t)c.op, c.avg_nranks);
    if (res == WEFT_SUCCESS) res = ops_->drain(q, kWaitMs);
    EXPECT_EQ(WEFT_ERR_INVALID_ARGUMENT, res)
        << "dtype " << c.dtype << " op " << c.op << " avg_nranks " << c.avg_nranks;
    EXPECT_STRNE("", err_last());
    ops_->queue_destroy(q);
  }
}

// ---- device-resident programs (launch) ----

namespace {

dp_step_t Step(dp_kind_t kind, dp_buf_t buf, dp_buf_t src_buf, int recv_link, uint64_t count) {
  dp_step_t st;
  memset(&st, 0, sizeof st);
  st.kind = (uint8_t)kind;
  st.buf = (uint8_t)buf;
  st.src_buf = (uint8_t)src_buf;
  st.recv_link = (int16_t)recv_link;
  st.send_link = -1;
  st.dep = -1;
  st.count = count;
  return st;
}

dp_program_t Program(dp_step_t *steps, int nsteps, uint64_t slice_elems, size_t count) {
  dp_program_t p;
  memset(&p, 0, sizeof p);
  p.steps = steps;
  p.nsteps = nsteps;
  p.slice_elems = slice_elems;
  p.nrounds = (count + slice_elems - 1) / slice_elems;
  p.buf_count[DP_SENDBUF] = p.buf_count[DP_RECVBUF] = count;
  p.dtype = WEFT_INT32;
  p.op = WEFT_SUM;
  p.nranks = 1;
  return p;
}

}  // namespace

// One rank's program with no link (a DP_COPY of sendbuf into recvbuf, many slices) runs after
// the queue's earlier work and before its later work, and ends DL_DONE. An engine without the
// device loop says so (UNSUPPORTED), and callers fall back.
TEST_P(EngineContract, LaunchRunsAOneRankProgram) {
  const size_t n = 10007;
  const size_t bytes = n * 4;
  char *send = (char *)Alloc(bytes, 0), *recv = (char *)Alloc(bytes, 0);
  char *out = (char *)Alloc(bytes, 0);
  ASSERT_TRUE(send && recv && out);
  std::vector<int32_t> in(n), got(n, 0);
  for (size_t i = 0; i < n; i++) in[i] = (int32_t)(i * 2654435761u);
  dp_step_t step = Step(DP_COPY, DP_RECVBUF, DP_SENDBUF, -1, n);
  dp_program_t prog = Program(&step, 1, 256, n);
  dl_run_t run;
  memset(&run, 0, sizeof run);
  run.prog = &prog;
  run.bufs[DP_SENDBUF] = send;
  run.bufs[DP_RECVBUF] = recv;
  run.timeout_ns = 10ull * 1000 * 1000 * 1000;
  dl_status_t status = {-1, -2, -2, -2, 99};
  // Queued behind the copy that fills sendbuf, and ahead of the copy that reads recvbuf.
  ASSERT_OK(ops_->copy(q_, send, in.data(), bytes));
  if (!ops_->launch) GTEST_SKIP() << ops_->name << " engine runs no device programs";
  weft_result_t res = ops_->launch(q_, &run, &status);
  if (res == WEFT_ERR_UNSUPPORTED) {
    EXPECT_STRNE("", err_last());
    ASSERT_OK(ops_->drain(q_, kWaitMs));  // the queue is unharmed
    GTEST_SKIP() << err_last();
  }
  ASSERT_OK(res);
  ASSERT_OK(ops_->copy(q_, out, recv, bytes));
  ASSERT_OK(ops_->drain(q_, kWaitMs));
  EXPECT_EQ(DL_DONE, status.code);
  ToHost(got.data(), out, bytes);
  EXPECT_EQ(in, got);
}

// A run that waits on a link nobody sends on ends DL_TIMEOUT after its timeout, and fails the
// queue with a message that names the step, the link's peer and the round.
TEST_P(EngineContract, LaunchThatTimesOutFailsTheQueueNamingThePeer) {
  const size_t n = 100;
  const uint64_t slot_bytes = 64 * 4;
  const int nslots = 4, kPeer = 3;
  char *recv = (char *)Alloc(n * 4, 0);
  char *slots = (char *)Alloc(nslots * slot_bytes, 0);
  dl_counters_t *ctr = (dl_counters_t *)Alloc(sizeof(dl_counters_t), 0);
  ASSERT_TRUE(recv && slots && ctr);
  dl_counters_t zero;
  memset(&zero, 0, sizeof zero);
  FromHost(ctr, &zero, sizeof zero);
  dl_link_view_t view = {slots, (uint64_t)nslots, slot_bytes, ctr};
  dp_step_t step = Step(DP_RECV_COPY, DP_RECVBUF, DP_RECVBUF, 0, n);
  dp_program_t prog = Program(&step, 1, 64, n);
  prog.links[0].peer = kPeer;
  prog.links[0].dir = DP_LINK_RECV;
  prog.nlinks = 1;
  dl_run_t run;
  memset(&run, 0, sizeof run);
  run.prog = &prog;
  run.links = &view;
  run.bufs[DP_RECVBUF] = recv;
  run.timeout_ns = 50ull * 1000 * 1000;
  dl_status_t status = {-1, -2, -2, -2, 99};
  if (!ops_->launch) GTEST_SKIP() << ops_->name << " engine runs no device programs";
  weft_result_t res = ops_->launch(q_, &run, &status);
  if (res == WEFT_ERR_UNSUPPORTED) GTEST_SKIP() << err_last();
  ASSERT_OK(res);
  auto t0 = std::chrono::steady_clock::now();
  uint64_t ticket = 0;
  ASSERT_OK(ops_->fence(q_, &ticket));
  err_clear();
  EXPECT_EQ(WEFT_ERR_TIMEOUT, ops_->drain(q_, kWaitMs));
  std::string msg = err_last();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_NE(std::string::npos, msg.find("rank 3")) << msg;
  EXPECT_NE(std::string::npos, msg.find("step 0")) << msg;
  EXPECT_NE(std::string::npos, msg.find("round 0")) << msg;
  EXPECT_EQ(DL_TIMEOUT, status.code);
  EXPECT_EQ(0, status.step);
  EXPECT_EQ(0, status.link);
  EXPECT_EQ(0, status.waiting_for);
  // Sticky: poll reports it too.
  int done = 0;
  EXPECT_EQ(WEFT_ERR_TIMEOUT, ops_->poll(q_, ticket, &done));
}

// ---- the user's streams and gates ----

// Work the stream had before gate_enter is the call's input: gate_wait_inputs returns once it is
// done. Work after it waits until gate_open.
// The user's buffers are device memory, as a framework's are: CUDA runs a copy between two host
// buffers on the calling thread once the stream has reached it, so a host-to-host copy enqueued
// behind a closed gate would wait for the gate in the test itself.
TEST_P(EngineContract, GateHoldsLaterWorkUntilOpened) {
  const size_t bytes = 1 << 20;
  uint8_t *in = (uint8_t *)Alloc(bytes, 1), *mid = (uint8_t *)Alloc(bytes, 0);
  uint8_t *out = (uint8_t *)Alloc(bytes, 0);
  ASSERT_TRUE(in && mid && out);
  std::vector<uint8_t> pat = Pattern(bytes, 5, 9);
  std::vector<uint8_t> zeros(bytes, 0), got(bytes);
  memcpy(in, pat.data(), bytes);
  FromHost(mid, zeros.data(), bytes);
  FromHost(out, zeros.data(), bytes);
  void *s = nullptr;
  ASSERT_OK(ops_->stream_create(e_, &s));
  ASSERT_OK(GetParam().user_copy(e_, s, mid, in, bytes));  // the call's input
  dev_gate_t *g = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_OK(ops_->gate_enter(e_, s, &g));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1)) << "gate_enter blocked";
  ASSERT_OK(GetParam().user_copy(e_, s, out, mid, bytes));  // the user's work after the call
  ASSERT_OK(ops_->gate_wait_inputs(g, kWaitMs));
  ToHost(got.data(), mid, bytes);
  EXPECT_TRUE(got == pat) << "inputs not ready after gate_wait_inputs";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ToHost(got.data(), out, bytes);
  EXPECT_TRUE(got == zeros) << "the stream ran past a closed gate";
  ops_->gate_open(g);
  ASSERT_OK(ops_->stream_sync(e_, s, kWaitMs));
  ToHost(got.data(), out, bytes);
  EXPECT_TRUE(got == pat);
  ops_->stream_destroy(e_, s);
}

// A call whose inputs never come (the stream is held by an earlier call's gate) times out with
// WEFT_ERR_TIMEOUT, within a bounded time; once the earlier gate opens, it proceeds.
TEST_P(EngineContract, GateWaitInputsTimesOutWhenInputsNeverFinish) {
  void *s = nullptr;
  ASSERT_OK(ops_->stream_create(e_, &s));
  dev_gate_t *first = nullptr, *second = nullptr;
  ASSERT_OK(ops_->gate_enter(e_, s, &first));
  ASSERT_OK(ops_->gate_wait_inputs(first, kWaitMs));
  ASSERT_OK(ops_->gate_enter(e_, s, &second));
  auto t0 = std::chrono::steady_clock::now();
  err_clear();
  EXPECT_EQ(WEFT_ERR_TIMEOUT, ops_->gate_wait_inputs(second, 100));
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(90));
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_STRNE("", err_last());
  ops_->gate_open(first);
  EXPECT_OK(ops_->gate_wait_inputs(second, kWaitMs));
  ops_->gate_open(second);
  ASSERT_OK(ops_->stream_sync(e_, s, kWaitMs));
  ops_->stream_destroy(e_, s);
}

// stream_sync on a stream held by a closed gate is bounded and says why.
TEST_P(EngineContract, StreamSyncTimesOutOnAClosedGate) {
  void *s = nullptr;
  ASSERT_OK(ops_->stream_create(e_, &s));
  dev_gate_t *g = nullptr;
  ASSERT_OK(ops_->gate_enter(e_, s, &g));
  ASSERT_OK(ops_->gate_wait_inputs(g, kWaitMs));
  auto t0 = std::chrono::steady_clock::now();
  err_clear();
  EXPECT_EQ(WEFT_ERR_TIMEOUT, ops_->stream_sync(e_, s, 100));
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(90));
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_NE(nullptr, strstr(err_last(), "100 ms")) << err_last();
  ops_->gate_open(g);
  EXPECT_OK(ops_->stream_sync(e_, s, kWaitMs));
  ops_->stream_destroy(e_, s);
}

// The NULL stream (CUDA's default stream) takes gates too.
TEST_P(EngineContract, GateOnTheDefaultStream) {
  dev_gate_t *g = nullptr;
  ASSERT_OK(ops_->gate_enter(e_, nullptr, &g));
  ASSERT_OK(ops_->gate_wait_inputs(g, kWaitMs));
  ops_->gate_open(g);
  ASSERT_OK(ops_->stream_sync(e_, nullptr, kWaitMs));
}

// Many calls in a row on one stream, opened in order as a communicator does: nothing leaks (ASan)
// and the stream ends idle.
TEST_P(EngineContract, ManyGatesInARow) {
  void *s = nullptr;
  ASSERT_OK(ops_->stream_create(e_, &s));
  for (int i = 0; i < 200; i++) {
    dev_gate_t *g = nullptr;
    ASSERT_OK(ops_->gate_enter(e_, s, &g));
    if (i % 2) {
      ASSERT_OK(ops_->gate_wait_inputs(g, kWaitMs));
    }
    ops_->gate_open(g);  // before or after the stream reached the gate: both must be fine
  }
  ASSERT_OK(ops_->stream_sync(e_, s, kWaitMs));
  ops_->stream_destroy(e_, s);
}

// ---- IPC with another process ----

namespace {

std::string ToHex(const unsigned char *b, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; i++) {
    s += digits[b[i] >> 4];
    s += digits[b[i] & 15];
  }
  return s;
}

bool FromHex(const char *s, unsigned char *b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    if (sscanf(s + 2 * i, "%2x", &v) != 1) return false;
    b[i] = (unsigned char)v;
  }
  return true;
}

const size_t kIpcBytes = (1 << 20) + 100;

// Runs this test program again with `env` ("NAME=value") added: a new program, not a bare fork (a
// CUDA context does not survive fork(), and the emulation is held to the same rule). "" when it
// exits 0 within timeout_s, else what went wrong.
std::string RunSelf(const std::string &env, int timeout_s) {
  std::string name = env.substr(0, env.find('='));
  std::vector<char *> envp;
  for (char **v = environ; *v; v++)
    if (strncmp(*v, name.c_str(), name.size()) != 0 || (*v)[name.size()] != '=') envp.push_back(*v);
  std::string copy = env;
  envp.push_back(&copy[0]);
  envp.push_back(nullptr);
  char exe[] = "/proc/self/exe";
  char *argv[] = {exe, nullptr};
  pid_t pid;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()) != 0)
    return "posix_spawn failed";
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return "the child process did not finish in " + std::to_string(timeout_s) + " s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!WIFEXITED(status)) return "the child process ended with status " + std::to_string(status);
  if (WEXITSTATUS(status) != 0)
    return "the child process exited " + std::to_string(WEXITSTATUS(status)) +
           " (its stderr says where)";
  return "";
}

}  // namespace

// The child of WorkRunsWhileAGateHoldsAStream, in a fresh process, so that nothing has run on
// the device before: a gate holds a user stream, and meanwhile every reduction (each dtype and
// op, one output and two) and a copy run on a queue and finish, and memory is allocated and
// released. Under CUDA's lazy module loading
// a kernel's first launch waits for the device to go idle, which a held stream prevents: that
// launch must not be the first. Exit codes say which step failed.
int GateChildMain(const char *name) {
  dev_engine_t *e = nullptr;
  if (dev_engine_open(name, &e) != WEFT_SUCCESS) {
    fprintf(stderr, "gate child: open %s: %s\n", name, err_last());
    return 20;
  }
  const dev_ops_t *o = e->ops;
  const size_t n = 4099;
  void *a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr, *s = nullptr;
  dev_queue_t *q = nullptr;
  dev_gate_t *g = nullptr;
  int rc = 0;
  if (o->alloc(e, n * 8, 0, &a) || o->alloc(e, n * 8, 0, &b) || o->alloc(e, n * 8, 0, &c) ||
      o->alloc(e, n * 8, 0, &d) || o->queue_create(e, &q) || o->stream_create(e, &s)) {
    fprintf(stderr, "gate child: setup: %s\n", err_last());
    rc = 21;
  } else if (o->gate_enter(e, s, &g) || o->gate_wait_inputs(g, kWaitMs)) {
    fprintf(stderr, "gate child: gate: %s\n", err_last());
    rc = 22;
  }
  for (int dt = 0; rc == 0 && dt < WEFT_NUM_DTYPES; dt++)
    for (int op = 0; rc == 0 && op < WEFT_NUM_OPS; op++)
      for (int two = 0; rc == 0 && two < 2; two++)
        if (o->reduce(q, a, two ? d : nullptr, b, c, n, (weft_dtype_t)dt, (weft_op_t)op,
                      op == WEFT_AVG ? 3 : 0) != WEFT_SUCCESS) {
          fprintf(stderr, "gate child: reduce: %s\n", err_last());
          rc = 23;
        }
  if (rc == 0 && (o->copy(q, a, (char *)b + 1, n * 8 - 1) || o->copy(q, c, d, n * 8))) {
    fprintf(stderr, "gate child: copy: %s\n", err_last());
    rc = 24;
  }
  if (rc == 0 && o->drain(q, kWaitMs) != WEFT_SUCCESS) {
    fprintf(stderr, "gate child: the work did not finish behind a closed gate: %s\n", err_last());
    rc = 25;
  }
  // Memory released while the gate is closed (a connection torn down by a failed call): CUDA
  // frees memory only once the whole device is idle, so release must not free it now.
  void *pinned = nullptr;
  if (rc == 0 && o->alloc(e, 4096, 1, &pinned) != WEFT_SUCCESS) {
    fprintf(stderr, "gate child: alloc behind a closed gate: %s\n", err_last());
    rc = 27;
  }
  if (pinned) o->release(e, pinned, 1);
  if (c) o->release(e, c, 0);
  c = nullptr;
  fprintf(stderr, "gate child: released memory behind a closed gate\n");
  if (g) o->gate_open(g);
  if (s && o->stream_sync(e, s, kWaitMs) != WEFT_SUCCESS && rc == 0) rc = 26;
  if (s) o->stream_destroy(e, s);
  if (q) o->queue_destroy(q);
  for (void *p : {a, b, c, d})
    if (p) o->release(e, p, 0);
  dev_engine_close(e);
  return rc;
}

TEST_P(EngineContract, WorkRunsWhileAGateHoldsAStream) {
  EXPECT_EQ("", RunSelf(std::string(kGateChildEnv) + "=" + GetParam().name, 60));
}

// The child: imports the parent's allocation, checks what the parent wrote, writes its own
// pattern. Exit codes say which step failed.
int IpcChildMain(const char *spec) {
  char name[32];
  char hex[2 * DEV_IPC_HANDLE_BYTES + 1];
  dev_ipc_handle_t h;
  if (sscanf(spec, "%31s %192s", name, hex) != 2 || !FromHex(hex, h.bytes, sizeof h.bytes)) {
    fprintf(stderr, "ipc child: bad spec %s\n", spec);
    return 10;
  }
  dev_engine_t *e = nullptr;
  if (dev_engine_open(name, &e) != WEFT_SUCCESS) {
    fprintf(stderr, "ipc child: open %s: %s\n", name, err_last());
    return 11;
  }
  const dev_ops_t *o = e->ops;
  int rc = 0;
  void *p = nullptr;
  dev_queue_t *q = nullptr;
  dev_mem_t kind = DEV_MEM_HOST;
  std::vector<uint8_t> got(kIpcBytes), want = Pattern(kIpcBytes, 7, 1),
                                       mine = Pattern(kIpcBytes, 13, 5);
  if (o->ipc_import(e, &h, &p) != WEFT_SUCCESS || !p) {
    fprintf(stderr, "ipc child: import: %s\n", err_last());
    rc = 12;
  } else if (o->mem_kind(e, p, &kind, nullptr) != WEFT_SUCCESS || kind != DEV_MEM_DEVICE) {
    fprintf(stderr, "ipc child: imported memory is not device memory (%s)\n", err_last());
    rc = 13;
  } else if (o->queue_create(e, &q) != WEFT_SUCCESS ||
             o->copy(q, got.data(), p, kIpcBytes) != WEFT_SUCCESS ||
             o->drain(q, kWaitMs) != WEFT_SUCCESS) {
    fprintf(stderr, "ipc child: reading: %s\n", err_last());
    rc = 14;
  } else if (got != want) {
    fprintf(stderr, "ipc child: the parent's data differs\n");
    rc = 15;
  } else if (o->copy(q, p, mine.data(), kIpcBytes) != WEFT_SUCCESS ||
             o->drain(q, kWaitMs) != WEFT_SUCCESS) {
    fprintf(stderr, "ipc child: writing: %s\n", err_last());
    rc = 16;
  }
  if (q) o->queue_destroy(q);
  if (p) o->ipc_close(e, p);
  dev_engine_close(e);
  return rc;
}

TEST_P(EngineContract, IpcAcrossProcesses) {
  uint8_t *dev = (uint8_t *)Alloc(kIpcBytes, 0);
  ASSERT_TRUE(dev);
  std::vector<uint8_t> pat = Pattern(kIpcBytes, 7, 1);
  FromHost(dev, pat.data(), kIpcBytes);
  dev_ipc_handle_t h;
  ASSERT_OK(ops_->ipc_export(e_, dev, kIpcBytes, &h));

  ASSERT_EQ("", RunSelf(std::string(kIpcChildEnv) + "=" + GetParam().name + " " +
                           ToHex(h.bytes, sizeof h.bytes),
                       60))
      << "(the importing process)";
  std::vector<uint8_t> got(kIpcBytes);
  ToHost(got.data(), dev, kIpcBytes);
  EXPECT_TRUE(got == Pattern(kIpcBytes, 13, 5)) << "the child's writes are not visible here";
}

// ---- GPUDirect RDMA ----

// What the verbs transport registers for WEFT_IB_GDR: a dma-buf covering the whole range (CUDA),
// or memory an adapter can register by address (the emulated engine: host memory, so the bytes
// written by device work are there to read at that address).
TEST_P(EngineContract, RdmaExportDescribesDeviceMemory) {
  const size_t bytes = 2u << 20;
  uint8_t *dev = (uint8_t *)Alloc(bytes, 0);
  ASSERT_TRUE(dev);
  std::vector<uint8_t> pat = Pattern(bytes, 3, 9);
  FromHost(dev, pat.data(), bytes);
  int fd = -2;
  uint64_t offset = 1;
  weft_result_t res = ops_->rdma_export(e_, dev, bytes, &fd, &offset);
  if (res == WEFT_ERR_UNSUPPORTED) GTEST_SKIP() << err_last();
  ASSERT_OK(res);
  if (fd >= 0) {
    // A dma-buf's size is what lseek to its end says; the range must lie inside it.
    off_t size = lseek(fd, 0, SEEK_END);
    close(fd);
    ASSERT_GE(size, 0) << "the dma-buf does not say its size";
    EXPECT_GE((uint64_t)size, offset + bytes);
  } else {
    ASSERT_EQ(-1, fd);
    EXPECT_EQ(0u, offset);
    EXPECT_EQ(0, memcmp(dev, pat.data(), bytes)) << "registered by address, but not host memory";
  }
}

// ---- engine life ----

// close() frees what the engine made even when the caller did not (ASan's leak check).
TEST_P(EngineContract, CloseFreesWhatWasLeftOpen) {
  dev_engine_t *e = nullptr;
  ASSERT_OK(dev_engine_open(GetParam().name, &e));
  void *d = nullptr, *p = nullptr, *s = nullptr;
  dev_queue_t *q = nullptr;
  ASSERT_OK(e->ops->alloc(e, 4096, 0, &d));
  ASSERT_OK(e->ops->alloc(e, 4096, 1, &p));
  ASSERT_OK(e->ops->queue_create(e, &q));
  ASSERT_OK(e->ops->stream_create(e, &s));
  ASSERT_OK(e->ops->copy(q, d, p, 4096));
  uint64_t t;
  ASSERT_OK(e->ops->fence(q, &t));
  dev_gate_t *g = nullptr;
  ASSERT_OK(e->ops->gate_enter(e, s, &g));
  e->ops->gate_open(g);
  dev_engine_close(e);
}

int main(int argc, char **argv) {
  const char *spec = getenv(kIpcChildEnv);
  if (spec) return IpcChildMain(spec);
  const char *gate = getenv(kGateChildEnv);
  if (gate) return GateChildMain(gate);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
