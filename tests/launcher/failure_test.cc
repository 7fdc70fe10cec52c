// failure_test.cc -- weft-run stopping the job: a failing or killed rank, --timeout, signals.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "tests/launcher/launcher_util.h"

namespace {

// The grace between SIGTERM and SIGKILL is 3 s; anything near the ranks' 30 s sleep means the
// launcher waited for them instead of stopping them.
const double kQuick = 15;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(WeftRunFailure, AllRanksSucceed) {
  LaunchResult r = RunLauncher({"-n", "4", "true"});
  EXPECT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(r.err, "");
}

TEST(WeftRunFailure, FailingRankStopsTheOthers) {
  LaunchResult r =
      RunLauncher({"-n", "4", "sh", "-c", "if [ $RANK = 1 ]; then exit 3; fi; sleep 30"});
  EXPECT_TRUE(r.exited && r.exit_code == 1) << Describe(r);
  EXPECT_LT(r.seconds, kQuick) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "weft-run: rank 1 (pid ")) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "failed: exited with status 3")) << Describe(r);
}

TEST(WeftRunFailure, RankKilledBySignal) {
  LaunchResult r =
      RunLauncher({"-n", "3", "sh", "-c", "if [ $RANK = 2 ]; then kill -9 $$; fi; sleep 30"});
  EXPECT_TRUE(r.exited && r.exit_code == 1) << Describe(r);
  EXPECT_LT(r.seconds, kQuick) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "rank 2 (pid ")) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "killed by signal 9 (Killed)")) << Describe(r);
}

TEST(WeftRunFailure, RankIgnoringSigtermGetsSigkill) {
  LaunchResult r =
      RunLauncher({"-n", "2", "sh", "-c",
                   "if [ $RANK = 1 ]; then sleep 0.3; exit 5; fi; trap '' TERM; sleep 30"});
  EXPECT_TRUE(r.exited && r.exit_code == 1) << Describe(r);
  EXPECT_LT(r.seconds, kQuick) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "rank 1 (pid ")) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "exited with status 5")) << Describe(r);
}

TEST(WeftRunFailure, OutputIsDrainedBeforeTheVerdict) {
  LaunchResult r = RunLauncher({"-n", "2", "sh", "-c",
                                "echo last words $RANK; echo to stderr >&2; "
                                "if [ $RANK = 0 ]; then exit 4; fi; sleep 30"});
  EXPECT_TRUE(r.exited && r.exit_code == 1) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "[rank 0] last words 0\n")) << Describe(r);
  auto err_lines = SplitLines(r.err);
  ASSERT_FALSE(err_lines.empty()) << Describe(r);
  EXPECT_TRUE(Contains(err_lines.back(), "rank 0 (pid ")) << "verdict is not the last line\n"
                                                          << Describe(r);
  EXPECT_TRUE(Contains(r.err, "[rank 0] to stderr\n")) << Describe(r);
}

// Whatever a failed job's ranks started in the background goes down with them.
TEST(WeftRunFailure, DescendantsOfRanksAreKilled) {
  char dir[] = "/tmp/weft_run_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string pidfile = std::string(dir) + "/bg.pid";
  LaunchResult r = RunLauncher(
      {"-n", "2", "sh", "-c",
       "if [ $RANK = 1 ]; then sleep 0.5; exit 3; fi; sleep 60 & echo $! > " + pidfile + "; wait"});
  EXPECT_TRUE(r.exited && r.exit_code == 1) << Describe(r);
  EXPECT_LT(r.seconds, kQuick) << Describe(r);
  long pid = 0;
  std::ifstream(pidfile) >> pid;
  unlink(pidfile.c_str());
  rmdir(dir);
  ASSERT_GT(pid, 0) << "rank 0 did not record its background pid\n" << Describe(r);
  // Killed, it is reparented and reaped by init within moments.
  bool gone = false;
  for (int i = 0; i < 300 && !gone; i++) {
    gone = kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!gone) kill(static_cast<pid_t>(pid), SIGKILL);
  EXPECT_TRUE(gone) << "background process " << pid << " of rank 0 outlived the job";
}

TEST(WeftRunFailure, TimeoutStopsEverything) {
  LaunchResult r = RunLauncher({"-n", "2", "--timeout", "1", "sleep", "30"});
  EXPECT_TRUE(r.exited && r.exit_code == 124) << Describe(r);
  EXPECT_GE(r.seconds, 0.9) << Describe(r);
  EXPECT_LT(r.seconds, kQuick) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "timed out after 1 s")) << Describe(r);
}

TEST(WeftRunFailure, TimeoutNotReachedExitsZero) {
  LaunchResult r = RunLauncher({"-n", "2", "--timeout", "20", "true"});
  EXPECT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
}

TEST(WeftRunFailure, SigintIsForwardedToRanks) {
  LaunchOptions opts;
  opts.send_signal = SIGINT;
  opts.signal_after_lines = 2;  // both ranks have set their trap
  LaunchResult r = RunLauncher({"-n", "2", "sh", "-c",
                                "trap 'echo got INT; exit 0' INT; echo ready; "
                                "while :; do sleep 0.1; done"},
                               opts);
  EXPECT_TRUE(r.exited && r.exit_code == 130) << Describe(r);
  EXPECT_LT(r.seconds, kQuick) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "[rank 0] got INT\n")) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "[rank 1] got INT\n")) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "got signal 2")) << Describe(r);
}

TEST(WeftRunFailure, SigtermIsForwardedToRanks) {
  LaunchOptions opts;
  opts.send_signal = SIGTERM;
  opts.signal_after_lines = 3;
  LaunchResult r = RunLauncher({"-n", "3", "sh", "-c", "echo ready; exec sleep 30"}, opts);
  EXPECT_TRUE(r.exited && r.exit_code == 128 + SIGTERM) << Describe(r);
  EXPECT_LT(r.seconds, kQuick) << Describe(r);
}

TEST(WeftRunFailure, ProgramThatCannotRun) {
  LaunchResult r = RunLauncher({"-n", "2", "/nonexistent/weft-program"});
  EXPECT_TRUE(r.exited && r.exit_code == 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "cannot run '/nonexistent/weft-program'")) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "exited with status 127")) << Describe(r);
}

}  // namespace
