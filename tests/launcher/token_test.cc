// token_test.cc -- the job token weft-run gives its ranks: one fresh secret per job that every
// rank of it shares, a token it was given passed on unchanged, and ranks that authenticate with
// it end to end (while a rank with another token is refused).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "tests/launcher/launcher_util.h"

namespace {

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string Prog() {
  const char* srcdir = getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : ".") + "/weft/tests/launcher/allreduce_prog";
}

// "[rank R] value" lines to {R: value}.
std::map<int, std::string> PerRank(const std::string& out) {
  std::map<int, std::string> m;
  for (const auto& line : SplitLines(out)) {
    int r = -1;
    char rest[512] = {0};
    if (sscanf(line.c_str(), "[rank %d] %511[^\n]", &r, rest) >= 1) m[r] = rest;
  }
  return m;
}

bool IsHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

TEST(WeftRunToken, EachJobGetsOneFreshTokenAllItsRanksShare) {
  std::string first;
  for (int run = 0; run < 2; run++) {
    LaunchResult r = RunLauncher({"-n", "3", "--", "sh", "-c", "echo \"$WEFT_JOB_TOKEN\""});
    ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
    auto tok = PerRank(r.out);
    ASSERT_EQ(tok.size(), 3u) << Describe(r);
    EXPECT_TRUE(IsHex64(tok[0])) << tok[0];
    EXPECT_EQ(tok[1], tok[0]);
    EXPECT_EQ(tok[2], tok[0]);
    EXPECT_FALSE(Contains(r.err, tok[0])) << "weft-run printed the token";
    if (run == 0)
      first = tok[0];
    else
      EXPECT_NE(tok[0], first) << "two jobs got the same token";
  }
}

TEST(WeftRunToken, GivenTokenOrFileIsPassedOn) {
  LaunchOptions opts;
  opts.env = {"WEFT_JOB_TOKEN=given secret"};
  LaunchResult r = RunLauncher({"-n", "2", "--", "sh", "-c", "echo \"$WEFT_JOB_TOKEN\""}, opts);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  auto tok = PerRank(r.out);
  EXPECT_EQ(tok[0], "given secret");
  EXPECT_EQ(tok[1], "given secret");

  opts.env = {"WEFT_JOB_TOKEN_FILE=/some/file"};
  r = RunLauncher({"-n", "2", "--", "sh", "-c", "echo \"[$WEFT_JOB_TOKEN] $WEFT_JOB_TOKEN_FILE\""},
                  opts);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  tok = PerRank(r.out);
  EXPECT_EQ(tok[0], "[] /some/file");
  EXPECT_EQ(tok[1], "[] /some/file");
}

TEST(WeftRunToken, HelpSaysHowTheTokenTravels) {
  LaunchResult r = RunLauncher({"--help"});
  EXPECT_TRUE(Contains(r.out + r.err, "WEFT_JOB_TOKEN")) << Describe(r);
  EXPECT_TRUE(Contains(r.out + r.err, "never on a command line")) << Describe(r);
}

// The ranks authenticate to the store and (WEFT_TRANSPORT=tcp) to each other with weft-run's token.
TEST(WeftRunToken, RanksJoinWithTheirToken) {
  for (const char* transport : {"auto", "tcp"}) {
    LaunchOptions opts;
    opts.timeout_s = 60;
    opts.env = {std::string("WEFT_TRANSPORT=") + transport};
    LaunchResult r = RunLauncher({"-n", "3", "--timeout", "50", Prog()}, opts);
    ASSERT_TRUE(r.exited && r.exit_code == 0) << transport << "\n" << Describe(r);
    EXPECT_EQ(PerRank(r.out).size(), 3u) << Describe(r);
  }
}

// A rank with a token of its own is refused by the master, which says so, and the job fails
// instead of hanging.
TEST(WeftRunToken, RankWithAnotherTokenIsRefused) {
  LaunchOptions opts;
  opts.timeout_s = 60;
  std::string script =
      "if [ \"$RANK\" = 1 ]; then export WEFT_JOB_TOKEN=impostor; fi; exec " + Prog();
  LaunchResult r = RunLauncher({"-n", "2", "--timeout", "50", "sh", "-c", script}, opts);
  ASSERT_TRUE(r.exited) << Describe(r);
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(Contains(r.err, "does not know this job's token")) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "refused a connection from")) << Describe(r);
  EXPECT_FALSE(Contains(r.err, "impostor")) << Describe(r);
}

}  // namespace
