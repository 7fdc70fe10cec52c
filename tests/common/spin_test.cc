// spin_test.cc -- the yielding poll phase of transport waits (common/spin.h).
#include <gtest/gtest.h>

extern "C" {
#include "common/clock.h"
#include "common/spin.h"
}

namespace {

struct Counter {
  int calls = 0;
  int ready_at = -1;  // the call that first reports ready; -1: never
};

int count_ready(void* arg) {
  auto* c = static_cast<Counter*>(arg);
  return ++c->calls == c->ready_at;
}

TEST(Spin, ReturnsAsSoonAsReady) {
  Counter c;
  c.ready_at = 3;
  EXPECT_EQ(spin_yield_until(count_ready, &c, 10 * 1000 * 1000), 1);
  EXPECT_EQ(c.calls, 3);
}

TEST(Spin, GivesUpAfterItsBudget) {
  Counter c;
  int64_t start = clock_now_ns();
  EXPECT_EQ(spin_yield_until(count_ready, &c, 2000), 0);
  int64_t took_us = (clock_now_ns() - start) / 1000;
  EXPECT_GE(took_us, 2000);
  EXPECT_LT(took_us, 2 * 1000 * 1000);  // generous: a loaded machine may not run us for a while
  EXPECT_GT(c.calls, 1);
}

TEST(Spin, ZeroBudgetDoesNotPoll) {
  Counter c;
  c.ready_at = 1;
  EXPECT_EQ(spin_yield_until(count_ready, &c, 0), 0);
  EXPECT_EQ(c.calls, 0);
}

TEST(Spin, BudgetIsTheKnobCappedByTheWaitsTimeout) {
  EXPECT_EQ(spin_budget_us(1000, 200), 1000);
  EXPECT_EQ(spin_budget_us(1000, 0), 0);
  EXPECT_EQ(spin_budget_us(5000000, 1), 1000);
  EXPECT_EQ(spin_budget_us(0, 200), 0);
}

TEST(Spin, BusyPollReturnsAsSoonAsReadyAndGivesUpAfterItsBudget) {
  Counter c;
  c.ready_at = 40;  // past the first batch of polls between clock reads
  EXPECT_EQ(spin_busy_until(count_ready, &c, 10 * 1000 * 1000), 1);
  EXPECT_EQ(c.calls, 40);
  Counter never;
  int64_t start = clock_now_ns();
  EXPECT_EQ(spin_busy_until(count_ready, &never, 1000), 0);
  EXPECT_GE((clock_now_ns() - start) / 1000, 1000);
  Counter none;
  EXPECT_EQ(spin_busy_until(count_ready, &none, 0), 0);
  EXPECT_EQ(none.calls, 0);
}

// Ranks that outnumber the cores, peers on this core or unknown: every wait yields, as before.
TEST(SpinChoose, BusyPollsOnlyWithACorePerRankAndThePeersOnOtherCores) {
  EXPECT_EQ(spin_choose(1, SPIN_PEERS_APART), SPIN_BUSY);
  EXPECT_EQ(spin_choose(0, SPIN_PEERS_APART), SPIN_YIELD);
  EXPECT_EQ(spin_choose(1, SPIN_PEERS_HERE), SPIN_YIELD);
  EXPECT_EQ(spin_choose(1, SPIN_PEERS_UNKNOWN), SPIN_YIELD);
  EXPECT_EQ(spin_choose(0, SPIN_PEERS_HERE), SPIN_YIELD);
}

// A bound rank busy-polls only where the host has a CPU for each of its ranks, or where either
// count is not known.
TEST(SpinHostFits, MoreRanksThanTheHostsCpusShareACore) {
  EXPECT_TRUE(spin_host_fits(2, 2));
  EXPECT_FALSE(spin_host_fits(4, 2));
  EXPECT_TRUE(spin_host_fits(0, 2));
  EXPECT_TRUE(spin_host_fits(4, 0));
  EXPECT_GE(spin_host_cpus(), 1);
}

// A rank on this core counts whether the wait waits for it or not (ranks bound two to a core);
// only a peer waited on whose core is unknown makes the answer unknown.
TEST(SpinPeersNote, ARankOnThisCoreCountsWaitedOnOrNot) {
  const int32_t mine = 2;  // core 1
  EXPECT_EQ(spin_peers_note(SPIN_PEERS_APART, 3, mine, 1), SPIN_PEERS_APART);
  EXPECT_EQ(spin_peers_note(SPIN_PEERS_APART, 2, mine, 1), SPIN_PEERS_HERE);
  EXPECT_EQ(spin_peers_note(SPIN_PEERS_APART, 2, mine, 0), SPIN_PEERS_HERE);
  EXPECT_EQ(spin_peers_note(SPIN_PEERS_APART, 0, mine, 1), SPIN_PEERS_UNKNOWN);
  EXPECT_EQ(spin_peers_note(SPIN_PEERS_APART, 0, mine, 0), SPIN_PEERS_APART);
  EXPECT_EQ(spin_peers_note(SPIN_PEERS_HERE, 3, mine, 1), SPIN_PEERS_HERE);
  EXPECT_EQ(spin_peers_note(SPIN_PEERS_UNKNOWN, 2, mine, 0), SPIN_PEERS_UNKNOWN);
  // Folded over a wait: peer 1 (waited on) elsewhere, rank 3 (not waited on) here.
  spin_peers_t where = SPIN_PEERS_APART;
  where = spin_peers_note(where, 1, mine, 1);
  where = spin_peers_note(where, 2, mine, 0);
  EXPECT_EQ(spin_choose(1, where), SPIN_YIELD);
}

}  // namespace
