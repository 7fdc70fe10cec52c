// launcher_util.cc -- runs the weft-run binary from a test and captures its exit, stdout and
// stderr.
#include "tests/launcher/launcher_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool Exists(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

}  // namespace

std::string LauncherPath() {
  // Bazel runs a test in its runfiles tree, <TEST_SRCDIR>/<workspace>; try both spellings.
  std::vector<std::string> candidates;
  if (const char* srcdir = getenv("TEST_SRCDIR")) {
    candidates.push_back(std::string(srcdir) + "/weft/tools/weft-run");
  }
  candidates.push_back("tools/weft-run");
  for (const auto& c : candidates) {
    if (Exists(c)) return c;
  }
  return candidates.front();  // exec fails and the test reports the path it tried
}

LaunchResult RunLauncher(const std::vector<std::string>& args, const LaunchOptions& opts) {
  LaunchResult r;
  std::string path = LauncherPath();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) {
    r.err = std::string("test: pipe: ") + strerror(errno);
    return r;
  }
  double start = Now();
  pid_t pid = fork();
  if (pid == 0) {
    // Own group, so a hung launcher is killed together with its ranks.
    setpgid(0, 0);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    for (const auto& e : opts.env) putenv(const_cast<char*>(e.c_str()));
    execv(argv[0], argv.data());
    dprintf(STDERR_FILENO, "test: cannot exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    r.err = std::string("test: fork: ") + strerror(errno);
    return r;
  }
  setpgid(pid, pid);

  int fds[2] = {out[0], err[0]};
  std::string* bufs[2] = {&r.out, &r.err};
  bool signalled = false;
  double deadline = start + opts.timeout_s;
  while (fds[0] >= 0 || fds[1] >= 0) {
    if (opts.send_signal && !signalled &&
        std::count(r.out.begin(), r.out.end(), '\n') >= opts.signal_after_lines) {
      kill(pid, opts.send_signal);
      signalled = true;
    }
    double left = deadline - Now();
    if (left <= 0 && !r.timed_out) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
    }
    pollfd p[2];
    int n = 0;
    for (int fd : fds) {
      if (fd >= 0) p[n++] = {fd, POLLIN, 0};
    }
    // After a timeout kill, grandchildren outside the group could hold the pipes: stop soon.
    int wait_ms = r.timed_out ? 1000 : static_cast<int>(left * 1000) + 1;
    if (poll(p, n, wait_ms) == 0 && r.timed_out) break;
    for (int k = 0; k < 2; k++) {
      if (fds[k] < 0) continue;
      pollfd* q = nullptr;
      for (int i = 0; i < n; i++) {
        if (p[i].fd == fds[k]) q = &p[i];
      }
      if (q == nullptr || !(q->revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t got = read(fds[k], buf, sizeof(buf));
      if (got > 0) {
        bufs[k]->append(buf, got);
      } else if (got == 0 || errno != EINTR) {
        close(fds[k]);
        fds[k] = -1;
      }
    }
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.seconds = Now() - start;
  r.exited = WIFEXITED(status);
  r.exit_code = r.exited ? WEXITSTATUS(status) : -1;
  r.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return r;
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string Describe(const LaunchResult& r) {
  std::ostringstream s;
  s << "weft-run " << (r.timed_out ? "timed out (killed by the test), " : "");
  if (r.exited) {
    s << "exited with " << r.exit_code;
  } else {
    s << "killed by signal " << r.term_signal;
  }
  s << " after " << r.seconds << " s\n--- stdout ---\n" << r.out << "--- stderr ---\n" << r.err;
  return s.str();
}
