// probe_test.cc -- probe_run: an answer comes back; a probe that hangs is killed at its deadline
// and one that crashes is reported, both with a reason and a zeroed result.
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

extern "C" {
#include "tools/info/probe.h"
}

namespace {

struct Answer {
  int value;
  char text[32];
};

void answers(void *out, size_t, const void *arg) {
  auto *a = static_cast<Answer *>(out);
  a->value = *static_cast<const int *>(arg) * 2;
  strcpy(a->text, "from the child");
}

void hangs(void *, size_t, const void *) {
  for (;;) pause();
}

void crashes(void *, size_t, const void *) { raise(SIGSEGV); }

void exits(void *, size_t, const void *) { _exit(7); }

TEST(Probe, ReturnsTheChildsAnswer) {
  Answer a;
  int in = 21;
  char why[256] = "";
  ASSERT_EQ(probe_run(answers, &in, &a, sizeof a, 5000, why, sizeof why), 0) << why;
  EXPECT_EQ(a.value, 42);
  EXPECT_STREQ(a.text, "from the child");
}

TEST(Probe, AHungProbeIsKilledAtItsDeadline) {
  Answer a;
  memset(&a, 0xff, sizeof a);
  char why[256] = "";
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(probe_run(hangs, nullptr, &a, sizeof a, 200, why, sizeof why), -1);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 0.19);
  EXPECT_LT(s, 3.0);
  EXPECT_NE(strstr(why, "no answer within 200 ms"), nullptr) << why;
  EXPECT_EQ(a.value, 0);
}

TEST(Probe, ACrashIsAReason) {
  Answer a;
  char why[256] = "";
  EXPECT_EQ(probe_run(crashes, nullptr, &a, sizeof a, 5000, why, sizeof why), -1);
  EXPECT_NE(strstr(why, "crashed (signal 11)"), nullptr) << why;
  EXPECT_EQ(probe_run(exits, nullptr, &a, sizeof a, 5000, why, sizeof why), -1);
  EXPECT_NE(strstr(why, "exit status 7"), nullptr) << why;
}

}  // namespace
