// shm_stream_test.cc -- the choice between plain and non-temporal slot writes
// (transport/shm_stream.h): the fastest of each block of timings becomes a kind's measure, the
// writer takes the kind whose write and read add up to clearly less and keeps its choice between
// kinds about as costly, probes the other kind once in SHM_STREAM_PROBE_SLOTS (every other slot
// while a new connection explores, for a bounded time), and WEFT_SHM_STREAM's 0 and 1 override
// all of it.
#include <gtest/gtest.h>

#include <cstdint>

extern "C" {
#include "transport/shm_stream.h"
}

namespace {

// A block of SHM_STREAM_BLOCK timings of 64 KiB, all `ns` but one 10x slower (a descheduling).
int block(shm_stream_timer_t* t, int streamed, int64_t ns) {
  int renewed = 0;
  for (int i = 0; i < SHM_STREAM_BLOCK; i++)
    renewed += shm_stream_note(t, streamed, 65536, i == 3 ? 10 * ns : ns);
  return renewed;
}

TEST(ShmStream, TheFastestOfABlockIsTheMeasure) {
  shm_stream_timer_t t = {};
  for (int i = 0; i < SHM_STREAM_BLOCK - 1; i++)
    EXPECT_EQ(shm_stream_note(&t, 0, 65536, 5000 + i), 0);
  EXPECT_EQ(t.measure[0], 0);
  EXPECT_EQ(shm_stream_note(&t, 0, 65536, 9000), 1);
  EXPECT_EQ(t.measure[0], 5000);
  EXPECT_EQ(block(&t, 1, 3000), 1);
  EXPECT_EQ(t.measure[1], 3000);
  EXPECT_EQ(t.measure[0], 5000);  // the other kind's stays
  // Per 64 KiB: 16 KiB in 1 us counts as 4 us.
  shm_stream_timer_t q = {};
  for (int i = 0; i < SHM_STREAM_BLOCK; i++) shm_stream_note(&q, 1, 16384, 1000);
  EXPECT_EQ(q.measure[1], 4000);
  // The next block starts afresh: a slower phase shows at once.
  EXPECT_EQ(block(&t, 1, 30000), 1);
  EXPECT_EQ(t.measure[1], 30000);
}

TEST(ShmStream, TheWriterTakesTheKindThatCostsLessAllTold) {
  // Cores sharing a cache: plain slots cost less to write and about the same to read.
  int64_t read[2] = {1500, 1400}, write[2] = {3000, 9000};
  EXPECT_EQ(shm_stream_better(read, write, 0), 0);
  EXPECT_EQ(shm_stream_better(read, write, 1), 0);
  // Lines crossing slowly: a plain slot takes 10x longer to read.
  int64_t slow_read[2] = {30000, 2500}, slow_write[2] = {6000, 5000};
  EXPECT_EQ(shm_stream_better(slow_read, slow_write, 0), 1);
  EXPECT_EQ(shm_stream_better(slow_read, slow_write, 1), 1);
  // Within a fifth of each other: the choice stays.
  int64_t near_read[2] = {2000, 2100}, near_write[2] = {4000, 4300};
  EXPECT_EQ(shm_stream_better(near_read, near_write, 0), 0);
  EXPECT_EQ(shm_stream_better(near_read, near_write, 1), 1);
  // A measure missing (the reader has not timed a streamed slot yet): the choice stays.
  int64_t half_read[2] = {30000, 0};
  EXPECT_EQ(shm_stream_better(half_read, slow_write, 0), 0);
  EXPECT_EQ(shm_stream_better(half_read, slow_write, 1), 1);
}

TEST(ShmStream, TheOtherKindGoesOnceAPeriod) {
  for (int period : {SHM_STREAM_PROBE_SLOTS, SHM_STREAM_EXPLORE_SLOTS}) {
    uint64_t large = 0;
    for (int preferred : {0, 1})
      for (int i = 1; i <= 3 * period; i++)
        EXPECT_EQ(shm_stream_pick(SHM_STREAM_AUTO, preferred, 65536, period, &large),
                  i % period == 0 ? !preferred : preferred)
            << "slot " << i << " of period " << period;
    // Small slots: always plain, and not counted.
    uint64_t before = large;
    EXPECT_EQ(shm_stream_pick(SHM_STREAM_AUTO, 1, SHM_STREAM_MIN_BYTES - 1, period, &large), 0);
    EXPECT_EQ(large, before);
  }
}

TEST(ShmStream, ExploresUntilTheMeasuresAreInOrForAtMostAProbePeriod) {
  EXPECT_EQ(shm_stream_period(0, 0), SHM_STREAM_EXPLORE_SLOTS);
  EXPECT_EQ(shm_stream_period(0, SHM_STREAM_PROBE_SLOTS - 1), SHM_STREAM_EXPLORE_SLOTS);
  EXPECT_EQ(shm_stream_period(1, 3), SHM_STREAM_PROBE_SLOTS);
  // A receiver that never reports (its WEFT_SHM_STREAM is 0) ends the exploring all the same.
  EXPECT_EQ(shm_stream_period(0, SHM_STREAM_PROBE_SLOTS), SHM_STREAM_PROBE_SLOTS);
  EXPECT_EQ(shm_stream_period(0, 1000000), SHM_STREAM_PROBE_SLOTS);
}

TEST(ShmStream, ZeroAndOneOverrideTheChoice) {
  uint64_t large = SHM_STREAM_PROBE_SLOTS - 1;  // the next auto pick would be a probe
  for (int i = 0; i < 2; i++) {
    EXPECT_EQ(shm_stream_pick(SHM_STREAM_NEVER, 1, 65536, SHM_STREAM_PROBE_SLOTS, &large), 0);
    EXPECT_EQ(shm_stream_pick(SHM_STREAM_ALWAYS, 0, 65536, SHM_STREAM_PROBE_SLOTS, &large), 1);
    EXPECT_EQ(shm_stream_pick(SHM_STREAM_ALWAYS, 0, 8, SHM_STREAM_PROBE_SLOTS, &large), 1);
  }
}

}  // namespace
