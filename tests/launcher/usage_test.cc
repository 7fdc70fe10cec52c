// usage_test.cc -- weft-run's answer to bad command lines: a clear message, status 2, no ranks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/launcher/launcher_util.h"

namespace {

struct UsageCase {
  std::vector<std::string> args;
  std::string message;  // expected in stderr
};

class WeftRunUsage : public ::testing::TestWithParam<UsageCase> {};

TEST_P(WeftRunUsage, ExitsTwoWithMessage) {
  LaunchResult r = RunLauncher(GetParam().args);
  EXPECT_TRUE(r.exited && r.exit_code == 2) << Describe(r);
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << Describe(r);
  EXPECT_NE(r.err.find("weft-run --help"), std::string::npos) << Describe(r);
  EXPECT_EQ(r.out, "") << "a rank ran despite the usage error";
}

INSTANTIATE_TEST_SUITE_P(
    BadCommandLines, WeftRunUsage,
    ::testing::Values(
        UsageCase{{}, "no program given"}, UsageCase{{"-n", "2"}, "no program given"},
        UsageCase{{"-n", "2", "--"}, "no program given"},
        UsageCase{{"-n"}, "option '-n' needs a value"},
        UsageCase{{"-n", "abc", "echo", "ran"}, "--nproc-per-node: 'abc' is not an integer"},
        UsageCase{{"-n", "0", "echo", "ran"}, "--nproc-per-node: '0'"},
        UsageCase{{"-n", "4x", "echo", "ran"}, "--nproc-per-node: '4x'"},
        UsageCase{{"--nnodes", "0", "echo", "ran"}, "--nnodes: '0'"},
        UsageCase{{"--nnodes", "2", "--node-rank", "2", "--master-port", "29500", "echo", "ran"},
                  "--node-rank 2 is out of range for --nnodes 2"},
        UsageCase{{"--node-rank", "1", "echo", "ran"}, "--node-rank 1 is out of range"},
        UsageCase{{"--node-rank", "-1", "echo", "ran"}, "--node-rank: '-1'"},
        UsageCase{{"--nnodes", "2", "--node-rank", "0", "echo", "ran"},
                  "--master-port is required with --nnodes 2"},
        UsageCase{{"--master-port", "70000", "echo", "ran"}, "--master-port: '70000'"},
        UsageCase{{"--timeout", "-1", "echo", "ran"}, "--timeout: '-1'"},
        UsageCase{{"--timeout", "soon", "echo", "ran"}, "--timeout: 'soon'"},
        UsageCase{{"--master-addr", "", "echo", "ran"}, "--master-addr: empty"},
        UsageCase{{"--master-addr", "no-such-host.invalid", "echo", "ran"},
                  "--master-addr 'no-such-host.invalid'"},
        UsageCase{{"--frobnicate", "echo", "ran"}, "unknown option '--frobnicate'"}));

TEST(WeftRunHelp, PrintsUsageAndExitsZero) {
  for (const char* flag : {"-h", "--help"}) {
    LaunchResult r = RunLauncher({flag});
    EXPECT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
    EXPECT_EQ(r.out.rfind("usage: weft-run", 0), 0u) << Describe(r);
  }
}

}  // namespace
