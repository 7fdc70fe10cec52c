// schedule_test.cc -- schedule building blocks, point-to-point through the simulator, and the
// simulator's own checks: each kind of broken schedule it must reject.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/collectives/sim_harness.h"

extern "C" {
#include "common/error.h"
}

namespace {

TEST(Schedule, ValidateRejectsBrokenSchedules) {
  schedule_t s;
  sched_init(&s, 10, 10);
  sched_op_t op = {SCHED_SEND, 5, SCHED_SENDBUF, 0, 4, SCHED_SENDBUF, 0, -1, 0, 0, -1};
  sched_add(&s, &op);
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("peer 5 out of range"), std::string::npos) << err_last();
  s.ops[0].peer = 1;
  s.ops[0].offset = 8;
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);
  s.ops[0].offset = 0;
  EXPECT_EQ(sched_validate(&s, 4), WEFT_SUCCESS);
  op.count = 3;
  op.dep = 0;
  sched_add(&s, &op);
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);  // dependency of another length
  sched_free(&s);
}

// A store-and-forward step (binomial gather and scatter) waits for the whole of a dependency of
// another size: sched_validate accepts it with dep_whole, still rejects it without, and keeps
// the other dependency checks; sched_dep_ready lets no slice start before all of it is done.
TEST(Schedule, ValidateAcceptsAWholeDependencyOfAnotherCount) {
  schedule_t s;
  sched_init(&s, 4, 12);
  // Receive 8 elements from rank 1, then forward 3 of them to rank 2 and the last 5 to rank 3.
  sched_op_t recv = {SCHED_RECV_COPY, 1, SCHED_RECVBUF, 4, 8, SCHED_SENDBUF, 0, -1, 0, 0, -1, 0};
  sched_op_t fwd = {SCHED_SEND, 2, SCHED_RECVBUF, 4, 3, SCHED_SENDBUF, 0, 0, 0, 1, -1, 1};
  sched_add(&s, &recv);
  sched_add(&s, &fwd);
  fwd.peer = 3;
  fwd.offset = 7;
  fwd.count = 5;
  sched_add(&s, &fwd);
  EXPECT_EQ(sched_validate(&s, 4), WEFT_SUCCESS) << err_last();
  s.ops[1].dep_whole = 0;  // slice-wise: the counts must match
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("op 1: dependency 0 has another count"), std::string::npos)
      << err_last();
  s.ops[1].dep_whole = 1;
  s.ops[1].dep = 2;  // whole or not, a dependency comes earlier
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("depends on later op 2"), std::string::npos) << err_last();
  s.ops[1].dep = 1;  // nor on itself
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);
  s.ops[1].dep = 0;
  s.ops[2].count = 6;  // the range still has to fit its buffer
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);
  s.ops[2].count = 5;
  EXPECT_EQ(sched_validate(&s, 4), WEFT_SUCCESS) << err_last();
  sched_free(&s);

  // 2 slices of the forward wait for all 4 of the receive; slice-wise they follow it one by one.
  EXPECT_EQ(sched_dep_ready(0, 1, 2, 0, 4), 0u);
  EXPECT_EQ(sched_dep_ready(0, 1, 2, 3, 4), 0u);
  EXPECT_EQ(sched_dep_ready(0, 1, 2, 4, 4), 2u);
  EXPECT_EQ(sched_dep_ready(0, 0, 2, 1, 2), 1u);
  EXPECT_EQ(sched_dep_ready(-1, 1, 2, 0, 4), 2u);  // no dependency: all may start
}

// A fused step must feed a later send that depends on it, one send per step, and the result of
// a recv-reduce-send (which writes only that send's slots) is read by nobody else.
TEST(Schedule, ValidateChecksFusedSteps) {
  schedule_t s;
  sched_init(&s, 8, 8);
  sched_op_t recv = {SCHED_RECV_REDUCE_SEND, 1, SCHED_RECVBUF, 0, 4, SCHED_SENDBUF, 0, -1, 0, 0, 1};
  sched_op_t send = {SCHED_SEND, 2, SCHED_RECVBUF, 0, 4, SCHED_SENDBUF, 0, 0, 0, 0, -1};
  sched_add(&s, &recv);
  sched_add(&s, &send);
  EXPECT_EQ(sched_validate(&s, 4), WEFT_SUCCESS) << err_last();
  s.ops[0].fwd = 0;  // itself
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);
  s.ops[0].fwd = 1;
  s.ops[1].dep = -1;  // the send does not wait for it
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);
  s.ops[1].dep = 0;
  sched_op_t other = {SCHED_SEND, 3, SCHED_RECVBUF, 0, 4, SCHED_SENDBUF, 0, 0, 0, 0, -1};
  sched_add(&s, &other);  // a second reader of what was never written locally
  EXPECT_EQ(sched_validate(&s, 4), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("recv-reduce-send"), std::string::npos) << err_last();
  s.ops[0].kind = SCHED_RECV_REDUCE_COPY_SEND;  // keeps its result: others may read it
  EXPECT_EQ(sched_validate(&s, 4), WEFT_SUCCESS) << err_last();
  sched_free(&s);
}

// Validation is linear in the ops: a rank of a 50,000-rank ring all-reduce has 200,000 ops,
// and a check that rescans earlier ops for each fused one takes minutes on such a schedule.
TEST(Schedule, ValidateIsLinearInOps) {
  const int pairs = 200000;
  schedule_t s;
  sched_init(&s, 4, 4);
  for (int i = 0; i < pairs; i++) {
    sched_op_t recv = {
        SCHED_RECV_REDUCE_SEND, 1, SCHED_RECVBUF, 0, 4, SCHED_SENDBUF, 0, -1, 0, 0, 2 * i + 1};
    sched_op_t send = {SCHED_SEND, 2, SCHED_RECVBUF, 0, 4, SCHED_SENDBUF, 0, 2 * i, 0, 0, -1};
    ASSERT_GE(sched_add(&s, &recv), 0);
    ASSERT_GE(sched_add(&s, &send), 0);
  }
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(sched_validate(&s, 4), WEFT_SUCCESS) << err_last();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 5.0) << "sched_validate took " << seconds << " s for " << 2 * pairs << " ops";
  sched_free(&s);
}

TEST(Schedule, ChunksCoverTheBufferInOrder) {
  for (int n = 1; n <= 13; n++)
    for (size_t count : {0, 1, 5, 12, 13, 1000}) {
      size_t next = 0;
      for (int c = 0; c < n; c++) {
        size_t off, len;
        sched_chunk(count, n, c, &off, &len);
        EXPECT_EQ(off, next);
        EXPECT_LE(len, count / n + 1);
        next = off + len;
      }
      EXPECT_EQ(next, count);
    }
}

// A world of p ranks with plain buffers of `count` elements and empty schedules.
sim::World Blank(int p, size_t count) {
  sim::World w;
  for (int r = 0; r < p; r++) {
    schedule_t s;
    sched_init(&s, count, count);
    w.sched.push_back(s);
    sim::Memory m;
    m.send.resize(count);
    for (size_t i = 0; i < count; i++) m.send[i] = {sim::Input(r, i), 1u << r, 0, true};
    m.recv.resize(count);
    w.mem.push_back(m);
  }
  return w;
}

void Add(sim::World& w, int r, sched_op_t op) { ASSERT_GE(sched_add(&w.sched[r], &op), 0); }

void Free(sim::World& w) {
  for (schedule_t& s : w.sched) sched_free(&s);
}

TEST(PointToPoint, SendMeetsRecv) {
  const algo_entry_t* send = algo_lookup(WEFT_COLL_SEND, WEFT_ALGO_RING);
  const algo_entry_t* recv = algo_lookup(WEFT_COLL_RECV, WEFT_ALGO_RING);
  ASSERT_TRUE(send && recv);
  for (size_t count : {0, 1, 100})
    for (const sim::Options& o : {sim::Options{4, 2, false, 1}, sim::Options{3, 1, true, 2}}) {
      sim::World w = Blank(4, count);
      Free(w);
      sched_args_t a = {WEFT_COLL_SEND, 3, 4, count, 1, 0, nullptr, 0, 0};
      ASSERT_EQ(send->build(&w.sched[3], &a), WEFT_SUCCESS);
      sched_args_t b = {WEFT_COLL_RECV, 1, 4, count, 3, 0, nullptr, 0, 0};
      ASSERT_EQ(recv->build(&w.sched[1], &b), WEFT_SUCCESS);
      for (int r : {0, 2}) sched_init(&w.sched[r], 0, 0);
      ASSERT_EQ(sim::CheckStatic(w, false), "");
      ASSERT_EQ(sim::Simulate(w, o), "");
      for (size_t i = 0; i < count; i++) EXPECT_EQ(w.mem[1].recv[i].v, sim::Input(3, i));
      Free(w);
    }
}

// The simulator's own checks: each of these schedules is wrong in one way.

TEST(Simulator, CatchesASendRacingAReceiveIntoTheSameMemory) {
  // Rank 0 sends recvbuf while receiving into it with no dependency between the two.
  for (uint64_t seed = 1; seed <= 20; seed++) {
    sim::World w = Blank(2, 4);
    for (auto& c : w.mem[0].recv) c = {7, 1, 0, true};
    Add(w, 0, {SCHED_SEND, 1, SCHED_RECVBUF, 0, 4, SCHED_SENDBUF, 0, -1, 0, 0, -1});
    Add(w, 0, {SCHED_RECV_COPY, 1, SCHED_RECVBUF, 0, 4, SCHED_SENDBUF, 0, -1, 0, 0, -1});
    Add(w, 1, {SCHED_SEND, 0, SCHED_SENDBUF, 0, 4, SCHED_SENDBUF, 0, -1, 0, 0, -1});
    Add(w, 1, {SCHED_RECV_COPY, 0, SCHED_RECVBUF, 0, 4, SCHED_SENDBUF, 0, -1, 0, 0, -1});
    std::string err = sim::Simulate(w, {4, 4, true, seed});
    Free(w);
    if (err.find("send may still be reading") != std::string::npos) return;
    EXPECT_EQ(err, "");
  }
  FAIL() << "no event order exposed the race";
}

TEST(Simulator, CatchesAReceiveThatWaitsOnItsOwnStepsSend) {
  // Each rank receives only once its send completed: fine while links buffer, a deadlock when
  // they do not.
  for (bool rendezvous : {false, true}) {
    sim::World w = Blank(2, 4);
    for (int r = 0; r < 2; r++) {
      Add(w, r, {SCHED_SEND, 1 - r, SCHED_SENDBUF, 0, 4, SCHED_SENDBUF, 0, -1, 0, 0, -1});
      Add(w, r, {SCHED_RECV_COPY, 1 - r, SCHED_RECVBUF, 0, 4, SCHED_SENDBUF, 0, 0, 0, 0, -1});
    }
    std::string err = sim::Simulate(w, {4, 4, rendezvous, 1});
    Free(w);
    if (rendezvous)
      EXPECT_NE(err.find("deadlock"), std::string::npos) << err;
    else
      EXPECT_EQ(err, "");
  }
}

TEST(Simulator, CatchesMismatchedStreamsAndHeaders) {
  sim::World w = Blank(2, 4);
  Add(w, 0, {SCHED_SEND, 1, SCHED_SENDBUF, 0, 4, SCHED_SENDBUF, 0, -1, 0, 0, -1});
  Add(w, 1, {SCHED_RECV_COPY, 0, SCHED_RECVBUF, 0, 3, SCHED_SENDBUF, 0, -1, 0, 0, -1});
  EXPECT_NE(sim::CheckStatic(w, false).find("do not pair up"), std::string::npos);
  w.sched[1].ops[0].count = 4;
  EXPECT_EQ(sim::CheckStatic(w, false), "");
  EXPECT_NE(sim::CheckStatic(w, true).find("not linked"), std::string::npos);
  w.sched[0].hdr_to = 1;
  EXPECT_NE(sim::CheckStatic(w, true).find("does not expect it"), std::string::npos);
  w.sched[1].hdr_from = 0;
  EXPECT_EQ(sim::CheckStatic(w, true), "");
  Free(w);
}

TEST(Simulator, CatchesAFinalFoldOfAPartialSumAndADoubleCount) {
  // Three ranks; rank 0 folds in rank 1's input and finalizes without rank 2's.
  sim::World w = Blank(3, 2);
  Add(w, 1, {SCHED_SEND, 0, SCHED_SENDBUF, 0, 2, SCHED_SENDBUF, 0, -1, 0, 0, -1});
  Add(w, 0, {SCHED_RECV_REDUCE, 1, SCHED_RECVBUF, 0, 2, SCHED_SENDBUF, 0, -1, 1, 0, -1});
  EXPECT_NE(sim::Simulate(w, {}).find("finalizes a partial sum"), std::string::npos);
  Free(w);
  w = Blank(2, 2);
  Add(w, 0, {SCHED_SEND, 1, SCHED_SENDBUF, 0, 2, SCHED_SENDBUF, 0, -1, 0, 0, -1});
  Add(w, 1, {SCHED_RECV_REDUCE, 0, SCHED_RECVBUF, 0, 2, SCHED_SENDBUF, 0, -1, 0, 0, -1});
  Add(w, 0, {SCHED_SEND, 1, SCHED_SENDBUF, 0, 2, SCHED_SENDBUF, 0, -1, 0, 0, -1});
  Add(w, 1, {SCHED_RECV_REDUCE, 0, SCHED_RECVBUF, 0, 2, SCHED_RECVBUF, 0, 0, 0, 0, -1});
  EXPECT_NE(sim::Simulate(w, {}).find("twice"), std::string::npos);
  Free(w);
}

TEST(Simulator, CatchesReadsOfUnwrittenMemoryAndNullBuffers) {
  sim::World w = Blank(2, 2);
  Add(w, 0, {SCHED_SEND, 1, SCHED_RECVBUF, 0, 2, SCHED_SENDBUF, 0, -1, 0, 0, -1});
  Add(w, 1, {SCHED_RECV_COPY, 0, SCHED_RECVBUF, 0, 2, SCHED_SENDBUF, 0, -1, 0, 0, -1});
  EXPECT_NE(sim::Simulate(w, {}).find("nothing has written"), std::string::npos);
  Free(w);
  w = Blank(2, 2);
  w.mem[1].has_recv = false;
  Add(w, 0, {SCHED_SEND, 1, SCHED_SENDBUF, 0, 2, SCHED_SENDBUF, 0, -1, 0, 0, -1});
  Add(w, 1, {SCHED_RECV_COPY, 0, SCHED_RECVBUF, 0, 2, SCHED_SENDBUF, 0, -1, 0, 0, -1});
  EXPECT_NE(sim::Simulate(w, {}).find("may pass as NULL"), std::string::npos);
  Free(w);
}

TEST(Simulator, CatchesAForwardThatDoesNotWaitForItsData) {
  // A chain 0 -> 1 -> 2 whose middle rank forwards without a dependency on its receive.
  bool caught = false;
  for (uint64_t seed = 1; seed <= 20 && !caught; seed++) {
    sim::World w = Blank(3, 8);
    Add(w, 0, {SCHED_SEND, 1, SCHED_SENDBUF, 0, 8, SCHED_SENDBUF, 0, -1, 0, 0, -1});
    Add(w, 1, {SCHED_RECV_COPY, 0, SCHED_RECVBUF, 0, 8, SCHED_SENDBUF, 0, -1, 0, 0, -1});
    Add(w, 1, {SCHED_SEND, 2, SCHED_RECVBUF, 0, 8, SCHED_SENDBUF, 0, -1, 0, 0, -1});
    Add(w, 2, {SCHED_RECV_COPY, 1, SCHED_RECVBUF, 0, 8, SCHED_SENDBUF, 0, -1, 0, 0, -1});
    std::string err = sim::Simulate(w, {2, 4, false, seed});
    caught = !err.empty();
    Free(w);
  }
  EXPECT_TRUE(caught);
}

}  // namespace
