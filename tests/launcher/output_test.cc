// output_test.cc -- how weft-run passes each rank's stdout and stderr on: prefixed, whole lines.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/launcher/launcher_util.h"

namespace {

TEST(WeftRunOutput, PrefixesEachStreamWithTheRank) {
  LaunchResult r = RunLauncher({"-n", "2", "sh", "-c", "echo out$RANK; echo err$RANK >&2"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  for (const char* want : {"[rank 0] out0\n", "[rank 1] out1\n"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << Describe(r);
  }
  for (const char* want : {"[rank 0] err0\n", "[rank 1] err1\n"}) {
    EXPECT_NE(r.err.find(want), std::string::npos) << want << "\n" << Describe(r);
  }
  EXPECT_EQ(r.out.find("err"), std::string::npos) << "stderr leaked into stdout";
  EXPECT_EQ(r.err.find("out"), std::string::npos) << "stdout leaked into stderr";
}

TEST(WeftRunOutput, FlushesUnfinishedLastLine) {
  LaunchResult r = RunLauncher({"-n", "2", "sh", "-c", "echo first; printf last$RANK"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_NE(r.out.find("[rank 0] last0\n"), std::string::npos) << Describe(r);
  EXPECT_NE(r.out.find("[rank 1] last1\n"), std::string::npos) << Describe(r);
}

TEST(WeftRunOutput, NoPrefixPassesBytesThrough) {
  LaunchResult r = RunLauncher({"--no-prefix", "sh", "-c", "printf 'a\\nb b\\n\\nend'"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(r.out, "a\nb b\n\nend");
}

TEST(WeftRunOutput, ProgramOptionsAreLeftToTheProgram) {
  // "-n" after the program name belongs to echo, not to weft-run.
  LaunchResult r = RunLauncher({"-n", "1", "echo", "-n", "hi"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(r.out, "[rank 0] hi\n");
}

// Ranks writing fast at once: every line arrives whole, after its own rank's prefix.
TEST(WeftRunOutput, LinesOfRanksNeverInterleave) {
  const int kRanks = 4, kLines = 400;
  std::string body(300, 'x');
  std::string script = "i=0; while [ $i -lt " + std::to_string(kLines) +
                       " ]; do echo \"$RANK:" + body + ":$RANK\"; i=$((i+1)); done";
  LaunchResult r = RunLauncher({"-n", std::to_string(kRanks), "sh", "-c", script});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  std::map<int, int> count;
  for (const auto& line : SplitLines(r.out)) {
    int rank = -1;
    ASSERT_EQ(sscanf(line.c_str(), "[rank %d] ", &rank), 1) << "bad line: " << line;
    std::string want = "[rank " + std::to_string(rank) + "] " + std::to_string(rank) + ":" + body +
                       ":" + std::to_string(rank);
    ASSERT_EQ(line, want);
    count[rank]++;
  }
  ASSERT_EQ(count.size(), static_cast<size_t>(kRanks));
  for (const auto& kv : count) EXPECT_EQ(kv.second, kLines) << "rank " << kv.first;
}

// A rank that never ends its line is written in bounded pieces, each one prefixed.
TEST(WeftRunOutput, VeryLongLineIsSplitIntoPrefixedPieces) {
  const size_t kLen = 200000;
  LaunchResult r = RunLauncher(
      {"sh", "-c", "head -c " + std::to_string(kLen) + " /dev/zero | tr '\\0' x; echo"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  size_t xs = 0;
  auto lines = SplitLines(r.out);
  EXPECT_GT(lines.size(), 1u);
  for (const auto& line : lines) {
    ASSERT_EQ(line.rfind("[rank 0] ", 0), 0u) << "piece without prefix";
    xs += line.size() - 9;
  }
  EXPECT_EQ(xs, kLen);
}

}  // namespace
