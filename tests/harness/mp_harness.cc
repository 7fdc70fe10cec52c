// mp_harness.cc -- runs a test body as N real processes (ranks) and collects how each one ended.
//
// Each rank writes "R" + fn's message to its own pipe and _exit()s; the leading "R" tells a rank
// that returned from fn apart from one that exited (or crashed) half-way through. Pipes are read
// while the ranks run, so messages of any size get through.
#include "tests/harness/mp_harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <sstream>

namespace {

// After the last rank ends, how long to wait for pipes held open by processes that escaped its
// process group.
const double kDrainSeconds = 1.0;

struct Child {
  pid_t pid = -1;
  int fd = -1;  // read end of the rank's message pipe; -1 once closed
  bool reaped = false;
  std::string data;
};

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t w = write(fd, s.data() + off, s.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}

// The child's side: run fn, send its message, and leave without returning into gtest (which would
// go on to run the parent's remaining tests in this process).
[[noreturn]] void RunRank(int rank, int nranks, int port, pid_t parent,
                          const std::function<std::string(int, int, int)>& fn, int fd) {
#ifdef __linux__
  // Ranks sit in their own process groups, out of reach of whoever kills the test's group.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
#else
  (void)parent;
#endif
  bool had_failure = ::testing::Test::HasFailure();
  std::string msg;
  try {
    msg = fn(rank, nranks, port);
  } catch (const std::exception& e) {
    msg = std::string("uncaught exception: ") + e.what();
  } catch (...) {
    msg = "uncaught exception of unknown type";
  }
  if (!had_failure && ::testing::Test::HasFailure()) {
    msg += std::string(msg.empty() ? "" : "\n") +
           "a gtest assertion failed in this rank (its text is in the test log)";
  }
  WriteAll(fd, "R" + msg);
  // _exit() skips stdio's buffers; what fn printed must not be lost.
  std::cout.flush();
  std::cerr.flush();
  fflush(nullptr);
  _exit(0);
}

// Reaps each rank that has ended. The first waitid() leaves it a zombie, so its pid, and with it
// its process group id, cannot be reused while the group's leftovers are killed.
void Reap(std::vector<Child>& kids, std::vector<RankResult>& results, double start) {
  for (size_t i = 0; i < kids.size(); i++) {
    Child& c = kids[i];
    if (c.reaped || c.pid < 0) continue;
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, c.pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) continue;
    RankResult& r = results[i];
    r.exited = si.si_code == CLD_EXITED;
    r.exit_code = r.exited ? si.si_status : -1;
    r.term_signal = r.exited ? 0 : si.si_status;
    r.seconds = Now() - start;
    kill(-c.pid, SIGKILL);
    waitpid(c.pid, nullptr, 0);
    c.reaped = true;
  }
}

// Reads what the open pipes hold, waiting at most wait_ms.
void ReadPipes(std::vector<Child>& kids, int wait_ms) {
  std::vector<pollfd> pfd;
  std::vector<size_t> idx;
  for (size_t i = 0; i < kids.size(); i++) {
    if (kids[i].fd < 0) continue;
    pfd.push_back({kids[i].fd, POLLIN, 0});
    idx.push_back(i);
  }
  if (poll(pfd.data(), pfd.size(), wait_ms) <= 0) return;
  for (size_t k = 0; k < pfd.size(); k++) {
    if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Child& c = kids[idx[k]];
    char buf[16384];
    ssize_t got = read(c.fd, buf, sizeof(buf));
    if (got > 0) {
      c.data.append(buf, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      close(c.fd);
      c.fd = -1;
    }
  }
}

std::string Describe(const RankResult& r) {
  if (r.exited) return "exited with status " + std::to_string(r.exit_code);
  return "killed by signal " + std::to_string(r.term_signal) + " (" + strsignal(r.term_signal) +
         ")";
}

// Fills in the message of a rank that never returned from fn.
void Explain(const Child& c, RankResult& r, int timeout_ms) {
  bool returned = !c.data.empty() && c.data[0] == 'R';
  if (returned) {
    r.message = c.data.substr(1);
    if (!(r.exited && r.exit_code == 0))  // returned, then died on the way out
      r.message += std::string(r.message.empty() ? "" : "\n") + "then " + Describe(r);
  } else if (r.timed_out) {
    r.message = "did not finish within " + std::to_string(timeout_ms) + " ms; killed";
  } else if (c.pid < 0) {
    // message already says why it was never started
  } else {
    r.message = Describe(r) + " before fn returned";
  }
}

bool Succeeded(const RankResult& r) {
  return r.exited && r.exit_code == 0 && !r.timed_out && r.message.empty();
}

}  // namespace

// Ports are drawn below Linux's default ephemeral range (32768-60999): a port the kernel hands out
// for bind(0) can be taken again at once by a listening socket of a test running in parallel
// (weft's transports listen on ephemeral ports), but the kernel never allocates these.
int mp_free_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  unsigned seed = (unsigned)getpid() ^ (unsigned)time(nullptr) ^ (unsigned)clock();
  for (int tries = 0; tries < 64 && port < 0; tries++) {
    a.sin_port = htons(tries < 63 ? (uint16_t)(20000 + rand_r(&seed) % 12768) : 0);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  int saved = errno;
  close(fd);
  errno = saved;
  return port;
}

std::vector<RankResult> mp_run(int nranks, std::function<std::string(int, int, int)> fn,
                               int timeout_ms) {
  std::vector<RankResult> results(nranks > 0 ? nranks : 0);
  if (nranks < 1) return results;
  int port = mp_free_port();
  if (port < 0) {
    std::string why = std::string("harness: no free port on 127.0.0.1: ") + strerror(errno);
    for (auto& r : results) r.message = why;
    return results;
  }
  // Whatever sits in stdio's buffers now would otherwise be printed again by every child.
  std::cout.flush();
  std::cerr.flush();
  fflush(nullptr);

  double start = Now();
  double deadline = start + timeout_ms / 1000.0;
  pid_t parent = getpid();
  std::vector<Child> kids(nranks);
  for (int i = 0; i < nranks; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      results[i].message = std::string("harness: pipe for rank: ") + strerror(errno);
      break;
    }
    pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);  // its own group: a timeout kills it with everything it started
      close(p[0]);
      for (int j = 0; j < i; j++) close(kids[j].fd);
      RunRank(i, nranks, port, parent, fn, p[1]);
    }
    int fork_errno = errno;
    close(p[1]);
    if (pid < 0) {
      close(p[0]);
      results[i].message = std::string("harness: fork for rank: ") + strerror(fork_errno);
      break;
    }
    setpgid(pid, pid);  // also here, so the group exists before the harness may kill it
    kids[i].pid = pid;
    kids[i].fd = p[0];
  }
  for (int i = 0; i < nranks; i++) {
    if (kids[i].pid < 0 && results[i].message.empty())
      results[i].message = "harness: not started (an earlier rank could not be)";
  }

  bool killed = false;
  double drain_until = 0;
  for (;;) {
    Reap(kids, results, start);
    double now = Now();
    bool all_reaped = true, waiting_for_exit = false;
    for (const Child& c : kids) {
      if (c.pid >= 0 && !c.reaped) {
        all_reaped = false;
        if (c.fd < 0) waiting_for_exit = true;  // pipe closed, exit status due any moment
      }
    }
    if (all_reaped) {
      if (drain_until == 0) drain_until = now + kDrainSeconds;
      bool open = false;
      for (const Child& c : kids) open = open || c.fd >= 0;
      if (!open || now >= drain_until) break;
    }
    if (!killed && now >= deadline) {
      for (size_t i = 0; i < kids.size(); i++) {
        if (kids[i].pid < 0 || kids[i].reaped) continue;
        kill(-kids[i].pid, SIGKILL);
        results[i].timed_out = true;
      }
      killed = true;
    }
    // Pipes wake us when ranks finish; the tick catches those whose pipe is held by a descendant.
    int wait_ms = waiting_for_exit ? 1 : 20;
    if (!killed && deadline - now < wait_ms / 1000.0)
      wait_ms = static_cast<int>((deadline - now) * 1000) + 1;
    ReadPipes(kids, wait_ms);
  }
  for (size_t i = 0; i < kids.size(); i++) {
    if (kids[i].fd >= 0) close(kids[i].fd);
    Explain(kids[i], results[i], timeout_ms);
  }
  return results;
}

std::string mp_summary(const std::vector<RankResult>& results) {
  if (results.empty()) return "no ranks ran";
  std::ostringstream out;
  int failed = 0;
  for (size_t i = 0; i < results.size(); i++) {
    const RankResult& r = results[i];
    if (Succeeded(r)) continue;
    failed++;
    // Indent continuation lines so a multi-line message stays under its rank.
    std::string msg = r.message;
    for (size_t pos = 0; (pos = msg.find('\n', pos)) != std::string::npos; pos += 3)
      msg.replace(pos, 1, "\n  ");
    out << "rank " << i << " (" << r.seconds << " s): " << msg << "\n";
  }
  if (failed == 0) return "";
  return std::to_string(failed) + " of " + std::to_string(results.size()) + " ranks failed:\n" +
         out.str();
}
