// netns_util.cc -- runs scripts/netns-hosts.sh from a test and captures what it printed.
#include "tests/netns/netns_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

}  // namespace

std::string Runfile(const std::string& path) {
  // Bazel runs a test in its runfiles tree, <TEST_SRCDIR>/<workspace>.
  if (const char* srcdir = getenv("TEST_SRCDIR")) {
    std::string p = std::string(srcdir) + "/weft/" + path;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return path;
}

RunResult RunHosts(const std::vector<std::string>& args, const RunOptions& opts) {
  RunResult r;
  std::string script = Runfile("scripts/netns-hosts.sh");
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(script.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  int out[2];
  if (pipe(out) != 0) {
    r.out = std::string("test: pipe: ") + strerror(errno);
    return r;
  }
  double start = Now();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // own group, so a hung run is killed with everything it started
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[0]);
    close(out[1]);
    for (const auto& e : opts.env) putenv(const_cast<char*>(e.c_str()));
    execv(argv[0], argv.data());
    dprintf(STDERR_FILENO, "test: cannot exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(out[1]);
  if (pid < 0) {
    close(out[0]);
    r.out = std::string("test: fork: ") + strerror(errno);
    return r;
  }
  r.pid = pid;
  setpgid(pid, pid);
  bool signalled = false;
  double deadline = start + opts.timeout_s;
  for (;;) {
    if (opts.signal && !signalled &&
        Count(r.out, opts.signal_after) >= static_cast<size_t>(opts.signal_after_count)) {
      kill(pid, opts.signal);
      signalled = true;
    }
    double left = deadline - Now();
    if (left <= 0 && !r.timed_out) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
    }
    pollfd p = {out[0], POLLIN, 0};
    int wait_ms = r.timed_out ? 1000 : static_cast<int>(left * 1000) + 1;
    if (wait_ms > 200) wait_ms = 200;  // re-check the signal condition now and then
    int ready = poll(&p, 1, wait_ms);
    if (ready == 0) {
      if (r.timed_out && Now() > deadline + 5) break;  // grandchildren may hold the pipe
      continue;
    }
    char buf[4096];
    ssize_t got = read(out[0], buf, sizeof buf);
    if (got > 0) {
      r.out.append(buf, got);
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.seconds = Now() - start;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string CannotRunReason() {
  RunResult r = RunHosts({"--check"}, RunOptions{30, {}, 0, "", 1});
  if (r.exit_code == 0) return "";
  if (r.exit_code == 77) return r.out;
  return "netns-hosts.sh --check failed (exit " + std::to_string(r.exit_code) + "): " + r.out;
}

std::vector<std::string> LeftoverNamespaces(int pid) {
  std::vector<std::string> left;
  std::string prefix = "weftns-" + std::to_string(pid) + "-";
  DIR* d = opendir("/run/netns");  // where `ip netns add` mounts named namespaces
  if (!d) return left;
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) left.push_back(e->d_name);
  }
  closedir(d);
  return left;
}

std::vector<int> ProcessesWith(const std::string& marker) {
  std::vector<int> pids;
  DIR* d = opendir("/proc");
  if (!d) return pids;
  while (dirent* e = readdir(d)) {
    int pid = atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::ifstream f("/proc/" + std::string(e->d_name) + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (auto& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    if (cmdline.find(marker) != std::string::npos) pids.push_back(pid);
  }
  closedir(d);
  return pids;
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}
