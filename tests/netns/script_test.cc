// script_test.cc -- scripts/netns-hosts.sh itself: per-host values, exit status, and that every
// namespace and process is gone after success, a failing host, a timeout and a signal.
#include <gtest/gtest.h>
#include <signal.h>

#include <set>

#include "tests/netns/netns_util.h"

namespace {

void ExpectNothingLeft(const RunResult& r, const std::string& marker) {
  EXPECT_TRUE(LeftoverNamespaces(r.pid).empty()) << "namespaces of run " << r.pid << " left";
  if (!marker.empty()) {
    EXPECT_TRUE(ProcessesWith(marker).empty()) << "processes left: " << marker;
  }
}

TEST(NetnsScript, UsageErrors) {
  EXPECT_EQ(RunHosts({"--hosts", "0", "--", "true"}).exit_code, 2);
  EXPECT_EQ(RunHosts({"--rate", "fast", "--", "true"}).exit_code, 2);
  EXPECT_EQ(RunHosts({"--hosts", "2"}).exit_code, 2);  // no command
  RunResult help = RunHosts({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("$HOST_INDEX"), std::string::npos) << help.out;
}

TEST(NetnsScript, PerHostValuesAndSubstitution) {
  SKIP_UNLESS_NETNS();
  RunResult r = RunHosts({"--hosts", "3", "--", "sh", "-c",
                          "echo sub $HOST_INDEX/$HOST_ADDR/$MASTER_ADDR/$NHOSTS env "
                          "\"$HOST_INDEX/$HOST_ADDR/$MASTER_ADDR/$NHOSTS\" "
                          "$(readlink /proc/self/ns/net) kept \\$HOST_ADDRESS",
                          "ignored"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::set<std::string> netns;
  int lines = 0;
  for (const auto& line : SplitLines(r.out)) {
    int host;
    char sub[128], env[128], ns[128], kept[128];
    if (sscanf(line.c_str(), "[host %d] sub %127s env %127s %127s kept %127s", &host, sub, env, ns,
               kept) != 5)
      continue;
    std::string want =
        std::to_string(host) + "/10.231.0." + std::to_string(host + 1) + "/10.231.0.1/3";
    EXPECT_EQ(sub, want) << line;  // substituted by the script
    EXPECT_EQ(env, want) << line;  // from the environment
    EXPECT_STREQ(kept, "$HOST_ADDRESS") << line;
    netns.insert(ns);
    lines++;
  }
  EXPECT_EQ(lines, 3) << r.out;
  EXPECT_EQ(netns.size(), 3u) << "every host must be its own network namespace\n" << r.out;
  ExpectNothingLeft(r, "");
}

TEST(NetnsScript, AddressesAndRoutes) {
  SKIP_UNLESS_NETNS();
  // Each host has its address on eth0 and reaches the others through it (hosts_test shows that
  // TCP gets through the bridge).
  RunResult r = RunHosts({"--hosts", "2", "--", "sh", "-c",
                          "ip -4 -o addr show dev eth0 | grep -q \"inet $HOST_ADDR/24\" && "
                          "echo addr-ok; ip route get 10.231.0.$((2 - HOST_INDEX)) | "
                          "grep -q 'dev eth0' && echo route-ok"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* want :
       {"[host 0] addr-ok", "[host 1] addr-ok", "[host 0] route-ok", "[host 1] route-ok"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  ExpectNothingLeft(r, "");
}

TEST(NetnsScript, FailingHostStopsTheOthersAndCleansUp) {
  SKIP_UNLESS_NETNS();
  const std::string marker = "sleep 47.5";  // unique, to find leftover processes
  RunResult r = RunHosts(
      {"--hosts", "3", "--", "sh", "-c", "if [ $HOST_INDEX = 1 ]; then exit 7; fi; " + marker});
  EXPECT_EQ(r.exit_code, 7) << r.out;
  EXPECT_LT(r.seconds, 20) << "the other hosts were not stopped";
  EXPECT_NE(r.out.find("host 1 exited with status 7"), std::string::npos) << r.out;
  ExpectNothingLeft(r, marker);
}

TEST(NetnsScript, TimeoutStopsEveryHost) {
  SKIP_UNLESS_NETNS();
  const std::string marker = "sleep 48.5";
  RunResult r = RunHosts({"--hosts", "2", "--timeout", "1", "--", "sh", "-c", marker});
  EXPECT_EQ(r.exit_code, 124) << r.out;
  ExpectNothingLeft(r, marker);
}

TEST(NetnsScript, SignalCleansUp) {
  SKIP_UNLESS_NETNS();
  // The command ignores SIGTERM, so the script must fall back to SIGKILL.
  const std::string marker = "sleep 49.5";
  RunOptions opts;
  opts.signal = SIGTERM;
  opts.signal_after = "started";
  opts.signal_after_count = 2;
  RunResult r =
      RunHosts({"--hosts", "2", "--", "sh", "-c", "trap '' TERM; echo started; " + marker}, opts);
  EXPECT_EQ(r.exit_code, 143) << r.out;
  ExpectNothingLeft(r, marker);
}

TEST(NetnsScript, RateLimitIsInstalledOnBothEnds) {
  SKIP_UNLESS_NETNS();
  RunResult r =
      RunHosts({"--hosts", "2", "--rate", "200mbit", "--", "sh", "-c", "tc qdisc show dev eth0"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("[host 1] qdisc tbf"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rate 200Mbit"), std::string::npos) << r.out;
  ExpectNothingLeft(r, "");
}

TEST(NetnsScript, CleanupStaleKeepsLiveRuns) {
  SKIP_UNLESS_NETNS();
  RunResult r = RunHosts({"--cleanup-stale"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("stale namespace(s) removed"), std::string::npos) << r.out;
}

}  // namespace
