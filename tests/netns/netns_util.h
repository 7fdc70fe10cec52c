// netns_util.h -- runs scripts/netns-hosts.sh from a test: paths in the runfiles, a run with a
// timeout, the skip check, and the leftover check.
#ifndef WEFT_TESTS_NETNS_NETNS_UTIL_H_
#define WEFT_TESTS_NETNS_NETNS_UTIL_H_

#include <string>
#include <vector>

struct RunResult {
  int exit_code = -1;  // -1: killed by a signal or by the test's timeout
  bool timed_out = false;
  int pid = 0;      // the script's pid: its namespaces are named weftns-<pid>-*
  std::string out;  // stdout and stderr, interleaved
  double seconds = 0;
};

struct RunOptions {
  double timeout_s = 120;        // then the test kills the script's process group
  std::vector<std::string> env;  // extra NAME=value entries
  int signal = 0;                // sent to the script once `out` contains `signal_after` ...
  std::string signal_after;      // ... this many times:
  int signal_after_count = 1;
};

// A file of this test's runfiles, e.g. "scripts/netns-hosts.sh", "tools/weft-run".
std::string Runfile(const std::string& path);

// Runs netns-hosts.sh with `args` to completion (or to the timeout).
RunResult RunHosts(const std::vector<std::string>& args, const RunOptions& opts = {});

// Empty if emulated hosts can run here, else why not (netns-hosts.sh --check said 77).
std::string CannotRunReason();

// The namespaces named weftns-<pid>-* still present (should be none after a run).
std::vector<std::string> LeftoverNamespaces(int pid);

// Pids of processes whose command line contains `marker` (left-behind commands).
std::vector<int> ProcessesWith(const std::string& marker);

std::vector<std::string> SplitLines(const std::string& text);

// Skips the test, with the reason, where netns-hosts.sh cannot run (not root, no iproute2).
#define SKIP_UNLESS_NETNS()                              \
  do {                                                   \
    std::string why_ = CannotRunReason();                \
    if (!why_.empty()) GTEST_SKIP() << "SKIP: " << why_; \
  } while (0)

#endif  // WEFT_TESTS_NETNS_NETNS_UTIL_H_
