// engine_test.cc -- the simulator's rules, checked on hand-made schedules.
//
// One port each way per rank, one CPU per rank, the staging window, local copies, and schedules
// that disagree or deadlock.
#include <string>
#include <vector>

#include "tests/sim/sim_util.h"

namespace {

using simtest::Model;

// Schedules for p ranks over buffers of `count` elements, no call descriptions.
struct World {
  std::vector<schedule_t> s;
  World(int p, size_t count) : s(p) {
    for (schedule_t& x : s) sched_init(&x, count, count);
  }
  ~World() {
    for (schedule_t& x : s) sched_free(&x);
  }
  int Add(int rank, sched_kind_t kind, int peer, size_t count, int dep = -1) {
    sched_op_t op = {};
    op.kind = kind;
    op.peer = peer;
    op.buf = kind == SCHED_SEND ? SCHED_SENDBUF : SCHED_RECVBUF;
    op.src_buf = SCHED_SENDBUF;
    op.count = count;
    op.dep = dep;
    return sched_add(&s[rank], &op);
  }
  double Run(const sim_model_t& m, weft_result_t want = WEFT_SUCCESS) {
    sim_result_t r;
    weft_result_t res = sim_run_schedules(&m, (int)s.size(), 4, s.data(), nullptr, nullptr, &r);
    EXPECT_EQ(res, want) << err_last();
    return res == WEFT_SUCCESS ? r.time : -1;
  }
};

const size_t kN = 1 << 18;  // elements: 1 MiB of float32
sim_model_t Unsliced() { return Model(/*slice_bytes=*/1 << 30, /*headers=*/0); }

TEST(EngineTest, OneIncomingPortPerRank) {
  World w(4, kN);
  for (int r = 1; r < 4; r++) {
    w.Add(r, SCHED_SEND, 0, kN);
    w.Add(0, SCHED_RECV_COPY, r, kN);
  }
  sim_model_t m = Unsliced();
  EXPECT_SAME_TIME(w.Run(m), 3 * (m.alpha + 4.0 * kN * m.beta));
}

TEST(EngineTest, OneOutgoingPortPerRank) {
  World w(4, kN);
  for (int r = 1; r < 4; r++) {
    w.Add(0, SCHED_SEND, r, kN);
    w.Add(r, SCHED_RECV_COPY, 0, kN);
  }
  sim_model_t m = Unsliced();
  EXPECT_SAME_TIME(w.Run(m), 3 * (m.alpha + 4.0 * kN * m.beta));
}

TEST(EngineTest, PortsAreFullDuplex) {
  World w(2, kN);
  w.Add(0, SCHED_SEND, 1, kN);
  w.Add(0, SCHED_RECV_COPY, 1, kN);
  w.Add(1, SCHED_SEND, 0, kN);
  w.Add(1, SCHED_RECV_COPY, 0, kN);
  sim_model_t m = Unsliced();
  EXPECT_SAME_TIME(w.Run(m), m.alpha + 4.0 * kN * m.beta);
}

// Reductions run one at a time on the receiver's CPU, after their data arrived.
TEST(EngineTest, OneCpuPerRank) {
  World w(3, kN);
  for (int r = 1; r < 3; r++) {
    w.Add(r, SCHED_SEND, 0, kN);
    w.Add(0, SCHED_RECV_REDUCE, r, kN);
  }
  sim_model_t m = Unsliced();
  m.gamma = 1e-8;  // reducing is slower than receiving
  double msg = m.alpha + 4.0 * kN * m.beta, red = 4.0 * kN * m.gamma;
  EXPECT_SAME_TIME(w.Run(m), msg + 2 * red);
}

// A slice may arrive only into a free staging slot: with a window of 1 the sender waits for each
// reduction, with a window as deep as the op the transfers run ahead and the CPU is the limit.
TEST(EngineTest, WindowBoundsSlicesInFlight) {
  const size_t slice = 4096, k = 16;
  World w(2, k * slice / 4);
  w.Add(0, SCHED_SEND, 1, k * slice / 4);
  w.Add(1, SCHED_RECV_REDUCE, 0, k * slice / 4);
  sim_model_t m = Model(slice, 0);
  m.gamma = 1e-8;
  double msg = m.alpha + slice * m.beta, red = slice * m.gamma;
  m.window = 1;
  EXPECT_SAME_TIME(w.Run(m), k * (msg + red));
  m.window = 64;
  EXPECT_SAME_TIME(w.Run(m), msg + k * red);
}

TEST(EngineTest, LocalCopiesCostBetaMem) {
  World w(2, kN);
  int recv = w.Add(1, SCHED_RECV_COPY, 0, kN);
  w.Add(0, SCHED_SEND, 1, kN);
  sched_op_t copy = {};
  copy.kind = SCHED_COPY;
  copy.buf = SCHED_SENDBUF;
  copy.src_buf = SCHED_RECVBUF;
  copy.count = kN;
  copy.dep = recv;
  sched_add(&w.s[1], &copy);
  sim_model_t m = Unsliced();
  EXPECT_SAME_TIME(w.Run(m), m.alpha + 4.0 * kN * m.beta);  // beta_mem 0 by default
  m.beta_mem = 1e-11;
  EXPECT_SAME_TIME(w.Run(m), m.alpha + 4.0 * kN * (m.beta + m.beta_mem));
}

TEST(EngineTest, TraceSeesEveryMessageOnce) {
  World w(2, 10 * 1024);
  w.Add(0, SCHED_SEND, 1, 10 * 1024);
  w.Add(1, SCHED_RECV_COPY, 0, 10 * 1024);
  sim_model_t m = Model(4096, 0);
  int n = 0;
  sim_result_t r;
  auto count = [](void* arg, int, int, double, double, double, const char* step) {
    // Data messages name the receiving op's kind; none goes by without one.
    if (std::string(step) == "recv-copy") ++*static_cast<int*>(arg);
  };
  ASSERT_EQ(sim_run_schedules(&m, 2, 4, w.s.data(), count, &n, &r), WEFT_SUCCESS);
  EXPECT_EQ(n, 10);  // 40 KiB in 4 KiB slices
  EXPECT_EQ(r.messages, 10);
  EXPECT_EQ(r.bytes, 40960.0);
}

TEST(EngineTest, MessageCountsMustAgree) {
  World w(2, 1000);
  w.Add(0, SCHED_SEND, 1, 1000);
  w.Add(1, SCHED_RECV_COPY, 0, 500);
  w.Add(1, SCHED_RECV_COPY, 0, 500);
  w.Run(Unsliced(), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("rank 0 sends 1 messages to rank 1, which receives 2"),
            std::string::npos)
      << err_last();
}

TEST(EngineTest, MessageSizesMustAgree) {
  World w(2, 1000);
  w.Add(0, SCHED_SEND, 1, 600);
  w.Add(0, SCHED_SEND, 1, 400);
  w.Add(1, SCHED_RECV_COPY, 0, 500);
  w.Add(1, SCHED_RECV_COPY, 0, 500);
  w.Run(Unsliced(), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("rank 0 sends 2400 bytes"), std::string::npos)
      << err_last();
}

// Each rank forwards only what it received first: nobody starts.
TEST(EngineTest, DeadlockIsReported) {
  World w(2, 100);
  for (int r = 0; r < 2; r++) {
    int recv = w.Add(r, SCHED_RECV_COPY, 1 - r, 100);
    w.Add(r, SCHED_SEND, 1 - r, 100, recv);
  }
  w.Run(Unsliced(), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("deadlock"), std::string::npos) << err_last();
}

}  // namespace
