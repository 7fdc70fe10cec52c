// launcher_util.h -- runs the weft-run binary from a test and captures its exit, stdout and stderr.
#ifndef WEFT_TESTS_LAUNCHER_LAUNCHER_UTIL_H_
#define WEFT_TESTS_LAUNCHER_LAUNCHER_UTIL_H_

#include <string>
#include <vector>

struct LaunchOptions {
  double timeout_s = 20;  // the test kills weft-run (and its group) after this long
  int send_signal = 0;    // if set, sent to weft-run once stdout holds `signal_after_lines` lines
  int signal_after_lines = 0;
  std::vector<std::string> env;  // extra "NAME=value" entries for weft-run's environment
};

struct LaunchResult {
  bool exited = false;  // false: killed by a signal (term_signal) or by the test's timeout
  int exit_code = -1;
  int term_signal = 0;
  bool timed_out = false;
  std::string out, err;
  double seconds = 0;
};

// Path of the weft-run binary in this test's runfiles.
std::string LauncherPath();

// Runs `weft-run args...` to completion.
LaunchResult RunLauncher(const std::vector<std::string>& args, const LaunchOptions& opts = {});

// `text` split at '\n' (a last line without one is kept).
std::vector<std::string> SplitLines(const std::string& text);

// Everything about a launch, for failure messages.
std::string Describe(const LaunchResult& r);

#endif  // WEFT_TESTS_LAUNCHER_LAUNCHER_UTIL_H_
