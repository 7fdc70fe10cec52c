// faults_test.cc -- the fault matrix: faults injected into a 2 hosts x 2 ranks job (TCP between
// the emulated hosts, shared memory inside each) while it runs checked collectives.
//
// Each case ends one of two ways, and the test asserts which:
//   ok     every rank finishes with correct data (packet loss, delay, reordering, a short link
//          blip, a /dev/shm too full for the shm transport, where weft falls back to TCP), or
//   error  every rank still alive returns an error within WEFT_TIMEOUT_MS (plus a margin for a
//          2-core machine) whose message names the operation and, where it can know it (a killed
//          or stopped rank), at least one survivor names the rank at fault.
// In both cases no rank hangs (the job has a deadline), no process of the job is left, and
// nothing is left in /dev/shm: each host's ranks get a private tmpfs on /dev/shm (a mount
// namespace per host, like a real machine's own /dev/shm), which the host lists after its ranks
// have exited, so the check does not see other jobs' segments on a shared machine.
//
// The faults are injected from this process, which runs as root in the root namespaces: signals
// by pid (READY lines carry them), and tc, ip link, nft, iptables and ss inside a host's namespace
// with `ip netns exec`. Rank 3 (host 1) is the rank at fault; host 1's link is the link at fault;
// rank 0 is the one whose process served the store. Without netem (a kernel without
// CONFIG_NET_SCH_NETEM) loss is an nftables random drop and delay goes through an NFQUEUE to
// tests/netns/queue_delay; a case that has no way to inject its fault here skips with the reason.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/netns/netns_util.h"

namespace {

constexpr int kHosts = 2, kPerHost = 2, kRanks = kHosts * kPerHost;
constexpr int kTimeoutMs = 4000;     // WEFT_TIMEOUT_MS of every job
constexpr int kConnectTimeoutMs = 15000;  // WEFT_CONNECT_TIMEOUT_MS: init's own bound
constexpr double kMarginS = 3.0;     // scheduling slack on a loaded 2-core machine
constexpr double kDeadlineS = 40.0;  // a job still running then has hung
constexpr int kFaultRank = 3;        // on host 1, with a shm peer (2) and TCP peers (0, 1)
// A stopped rank stays stopped well past the timeout (and the margin), so that a survivor that
// only fails once it runs again is caught, not let through by the margin.
constexpr const char* kLossTimeout = "WEFT_TIMEOUT_MS=15000";  // see the loss cases
constexpr const char* kLossRtoMax = "FAULT_RTO_MAX_MS=1000";   // see the loss cases
constexpr double kStopS = kTimeoutMs / 1000.0 + kMarginS + 3;

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// What the test saw of one rank.
struct RankSeen {
  int pid = 0;
  std::string status;  // "ok", "error", "wrong", or "" (no RESULT line)
  std::string op, msg, line;
  double at = 0;  // when its RESULT line arrived, seconds since the fault was injected
};

// A running job: netns-hosts.sh with 2 hosts, each starting its 2 ranks itself (no launcher in
// between that would stop the other ranks when one fails: weft's own error path is under test).
class Job {
 public:
  Job(const std::vector<std::string>& rank_args, const std::vector<std::string>& env) {
    // Per host: a private /dev/shm (FAULT_SHM_SIZE on host FAULT_SHM_HOST, to fill it), the two
    // ranks, then the host's leftovers in /dev/shm. The host always exits 0, so that
    // netns-hosts.sh does not stop the other host when a rank fails: every rank must end itself.
    // clang-format off
    static const char* const kHostScript =
        "size=64m; [ \"$HOST_INDEX\" = \"${FAULT_SHM_HOST:--1}\" ] && size=$FAULT_SHM_SIZE\n"
        "mount -t tmpfs -o size=$size weft-fault-shm /dev/shm || exit 1\n"
        "if [ -n \"$FAULT_RTO_MAX_MS\" ]; then\n"
        "  sysctl -qw net.ipv4.tcp_rto_max_ms=$FAULT_RTO_MAX_MS 2>/dev/null ||\n"
        "    echo \"NOTE host=$HOST_INDEX no tcp_rto_max_ms sysctl: TCP's backoff is unbounded\"\n"
        "fi\n"
        "if [ \"$size\" != 64m ] && [ -n \"$FAULT_SHM_FILL\" ]; then\n"
        "  cat /dev/zero > /dev/shm/fill 2>/dev/null\n"
        "fi\n"
        "export WEFT_WORLD_SIZE=$((NHOSTS * 2)) WEFT_LOCAL_WORLD_SIZE=2 MASTER_PORT=29500\n"
        "pids=\n"
        "for l in 0 1; do\n"
        "  WEFT_RANK=$((HOST_INDEX * 2 + l)) WEFT_LOCAL_RANK=$l \"$0\" \"$@\" &\n"
        "  pids=\"$pids $!\"\n"
        "done\n"
        "for p in $pids; do wait $p; echo \"EXIT host=$HOST_INDEX pid=$p status=$?\"; done\n"
        "rm -f /dev/shm/fill\n"
        "echo \"SHMLEFT host=$HOST_INDEX [$(ls /dev/shm | tr '\\n' ' ')]\"\n"
        "exit 0\n";
    // clang-format on
    std::vector<std::string> args = {Runfile("scripts/netns-hosts.sh"),
                                     "--hosts",
                                     std::to_string(kHosts),
                                     "--timeout",
                                     std::to_string(static_cast<int>(kDeadlineS) + 10),
                                     "--",
                                     "unshare",
                                     "-m",
                                     "sh",
                                     "-c",
                                     kHostScript,
                                     Runfile("tests/netns/fault_rank")};
    args.insert(args.end(), rank_args.begin(), rank_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int out[2];
    if (pipe(out) != 0) return;
    start_ = Now();
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);  // own group, so a hung job is killed with everything it started
      dup2(out[1], STDOUT_FILENO);
      dup2(out[1], STDERR_FILENO);
      close(out[0]);
      close(out[1]);
      setenv("WEFT_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
      setenv("WEFT_CONNECT_TIMEOUT_MS", std::to_string(kConnectTimeoutMs).c_str(), 1);
      for (const auto& e : env) putenv(strdup(e.c_str()));
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    fd_ = out[0];
    if (pid_ > 0) setpgid(pid_, pid_);
  }

  ~Job() {
    if (pid_ > 0 && !reaped_) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    EndInjectors();
    if (fd_ >= 0) close(fd_);
  }

  int pid() const { return pid_; }
  std::string ns(int host) const {
    return "weftns-" + std::to_string(pid_) + "-h" + std::to_string(host);
  }
  const std::string& out() const { return out_; }
  std::map<int, RankSeen>& ranks() { return ranks_; }

  // Reads output until `done` holds or `seconds` pass; false on timeout or end of output.
  bool PumpUntil(const std::function<bool()>& done, double seconds) {
    double until = Now() + seconds;
    while (!done()) {
      double left = until - Now();
      if (left <= 0 || !Pump(left)) return done();
    }
    return true;
  }
  void Sleep(double seconds) {
    PumpUntil([] { return false; }, seconds);
  }
  bool AllReady() {
    int n = 0;
    for (auto& [r, s] : ranks_) n += s.pid > 0;
    return n == kRanks;
  }

  void MarkFault() { fault_at_ = Now(); }
  // A process the fault needs (a packet delayer): ended with the job.
  void AddInjector(pid_t pid) { injectors_.push_back(pid); }

  // Waits for the job to end by itself within the deadline; else kills it and says so.
  bool Finish() {
    bool ended = PumpUntil([] { return false; }, start_ + kDeadlineS - Now()) || eof_;
    if (!eof_) {
      kill(-pid_, SIGKILL);
      ended = false;
    }
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    EndInjectors();
    return ended;
  }
  int exit_code() const { return exit_code_; }
  double seconds() const { return Now() - start_; }

 private:
  // `ip netns exec` execs the injector itself, so the pid is the injector's.
  void EndInjectors() {
    for (pid_t h : injectors_) {
      kill(h, SIGKILL);
      waitpid(h, nullptr, 0);
    }
    injectors_.clear();
  }

  // One read; false at the end of the output.
  bool Pump(double seconds) {
    if (eof_ || fd_ < 0) return false;
    pollfd p = {fd_, POLLIN, 0};
    int ms = static_cast<int>(seconds * 1000) + 1;
    if (poll(&p, 1, ms > 200 ? 200 : ms) <= 0) return true;
    char buf[4096];
    ssize_t got = read(fd_, buf, sizeof buf);
    if (got < 0 && errno == EINTR) return true;
    if (got <= 0) {
      eof_ = true;
      return false;
    }
    partial_.append(buf, got);
    out_.append(buf, got);
    for (size_t nl; (nl = partial_.find('\n')) != std::string::npos;) {
      Parse(partial_.substr(0, nl));
      partial_.erase(0, nl + 1);
    }
    return true;
  }

  void Parse(const std::string& line) {
    int rank = -1, pid = 0;
    size_t at = line.find("READY rank=");
    if (at != std::string::npos &&
        sscanf(line.c_str() + at, "READY rank=%d pid=%d", &rank, &pid) == 2) {
      ranks_[rank].pid = pid;
      return;
    }
    at = line.find("RESULT rank=");
    if (at == std::string::npos || sscanf(line.c_str() + at, "RESULT rank=%d", &rank) != 1) return;
    RankSeen& s = ranks_[rank];
    std::istringstream words(line.substr(at));
    std::string w;
    words >> w >> w >> s.status;
    size_t op = line.find(" op=", at);
    if (op != std::string::npos) s.op = line.substr(op + 4, line.find(' ', op + 4) - op - 4);
    size_t msg = line.find(" msg=", at);
    if (msg != std::string::npos) s.msg = line.substr(msg + 5);
    s.line = line;
    s.at = Now() - (fault_at_ > 0 ? fault_at_ : start_);
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  bool eof_ = false, reaped_ = false;
  int exit_code_ = -1;
  double start_ = 0, fault_at_ = 0;
  std::string out_, partial_;
  std::map<int, RankSeen> ranks_;
  std::vector<pid_t> injectors_;
};

// Runs a command in the root namespace (or in a host's with `ip netns exec`); its output.
int Shell(const std::string& cmd, std::string* out = nullptr) {
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  char buf[512];
  std::string text;
  while (fgets(buf, sizeof buf, p)) text += buf;
  int status = pclose(p);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string InHost(const Job& job, int host, const std::string& cmd) {
  return "ip netns exec " + job.ns(host) + " " + cmd;
}

enum class Expect { kOk, kError };

struct Case {
  std::string fault, workload;
  Expect expect;
  int fault_rank;    // the rank a survivor can name, or -1 where none can (a link, a socket)
  bool before_init;  // the fault is there from the start (no READY to wait for)
  std::vector<std::string> rank_args;
  std::vector<std::string> env;
  // Injects the fault once every rank is READY; an empty string, or why it cannot be done here
  // (then the case is skipped, never passed).
  std::function<std::string(Job&)> inject;
};

std::vector<std::string> Workload(const std::string& w, bool ok_case, const char* ok_secs = "3") {
  // An error case runs long enough that the fault lands in the middle of the stream; an ok case
  // runs a few seconds of collectives through the degraded network, with less data for the large
  // one, since TCP at 10% loss is slow.
  std::string secs = ok_case ? ok_secs : "10";
  if (w == "large")
    return {"--workload", "large", "--seconds", secs, "--count", ok_case ? "262144" : "2097152"};
  if (w == "split") return {"--workload", "split", "--seconds", secs, "--pause-ms", "1500"};
  return {"--workload", "small", "--seconds", secs};
}

std::string Signal(Job& job, int rank, int sig) {
  int pid = job.ranks()[rank].pid;
  if (pid <= 0 || kill(pid, sig) != 0) return std::string("kill: ") + strerror(errno);
  return "";
}

// Where the kernel has no netem: host 1's outgoing packets go through an NFQUEUE to
// tests/netns/queue_delay, which holds each one delay_ms +- jitter_ms and releases them by their
// due time (so a jitter wider than the gap between packets reorders them, as netem's does).
std::string QueueDelay(Job& job, double delay_ms, double jitter_ms, bool must_reorder) {
  int out[2];
  if (pipe(out) != 0) return std::string("pipe: ") + strerror(errno);
  std::string ns = job.ns(1), prog = Runfile("tests/netns/queue_delay");
  std::string delay = std::to_string(delay_ms), jitter = std::to_string(jitter_ms);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[0]);
    close(out[1]);
    execlp("ip", "ip", "netns", "exec", ns.c_str(), prog.c_str(), "--queue", "0", "--delay-ms",
           delay.c_str(), "--jitter-ms", jitter.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  job.AddInjector(pid);
  // Its output: "BOUND" before the rule goes in (else packets would bypass it), then counts.
  std::string said;
  auto read_for = [&](double seconds, const std::string& want, size_t from = 0) {
    double until = Now() + seconds;
    while (said.find(want, from) == std::string::npos && Now() < until) {
      pollfd p = {out[0], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[512];
      ssize_t got = read(out[0], buf, sizeof buf);
      if (got <= 0) break;
      said.append(buf, got);
    }
    return said.find(want, from) != std::string::npos;
  };
  std::string why;
  if (!read_for(5, "BOUND")) {
    why = "queue_delay did not start: " + said;
  } else if (Shell(InHost(job, 1,
                          "iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 0 --queue-bypass"),
                   &why) != 0) {
    why = "SKIP: neither tc netem nor iptables' NFQUEUE can delay packets here: " + why;
  } else {
    why.clear();
    // The rule must really send packets there (and reorder some, where that is the fault): counts
    // above 0 within 2 s.
    double until = Now() + 2;
    bool seen = false;
    while (!seen && Now() < until) {
      job.Sleep(0.2);
      size_t had = said.size();
      read_for(0.6, "\n", had);
      for (size_t at = said.find("delayed "); at != std::string::npos;
           at = said.find("delayed ", at + 1)) {
        long delayed = 0, reordered = 0;
        if (sscanf(said.c_str() + at, "delayed %ld reordered %ld", &delayed, &reordered) == 2)
          seen = seen || (delayed > 0 && (!must_reorder || reordered > 0));
      }
    }
    if (!seen) why = "queue_delay delayed (or reordered) no packet: " + said;
  }
  close(out[0]);  // its later counts go nowhere (it ignores SIGPIPE)
  return why;
}

// A netem qdisc on host 1's link where the kernel has netem, else the NFQUEUE delay above with
// the same delay and jitter.
std::string Netem(Job& job, const std::string& spec, double delay_ms, double jitter_ms,
                  bool must_reorder) {
  std::string out;
  if (Shell(InHost(job, 1, "tc qdisc add dev eth0 root netem " + spec), &out) == 0) return "";
  return QueueDelay(job, delay_ms, jitter_ms, must_reorder);
}

// Random loss of `permille` of host 1's packets each way: netem where the kernel has it, else an
// nftables rule drawing a random number per packet (the same loss, without netem's other knobs).
std::string Loss(Job& job, int permille) {
  char pct[32];
  snprintf(pct, sizeof pct, "%g%%", permille / 10.0);
  std::string out;
  if (Shell(InHost(job, 1, std::string("tc qdisc add dev eth0 root netem loss ") + pct), &out) ==
          0 &&
      Shell(InHost(job, 0, std::string("tc qdisc add dev eth0 root netem loss ") + pct), &out) == 0)
    return "";
  std::string rule = "numgen random mod 1000 < " + std::to_string(permille) + " counter drop";
  char path[] = "/tmp/weft-fault-nft-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return std::string("mkstemp: ") + strerror(errno);
  std::string rules =
      "table inet weft_fault {\n"
      "  chain in { type filter hook input priority 0; iifname \"eth0\" " +
      rule +
      "; }\n"
      "  chain out { type filter hook output priority 0; oifname \"eth0\" " +
      rule +
      "; }\n"
      "}\n";
  bool written = write(fd, rules.data(), rules.size()) == static_cast<ssize_t>(rules.size());
  close(fd);
  int rc = written ? Shell(InHost(job, 1, std::string("nft -f ") + path), &out) : -1;
  unlink(path);
  if (rc != 0) return "SKIP: neither tc netem nor nft can drop packets here: " + out;
  // The rule must really drop: a ruleset that loads but never matches would pass as "ok".
  job.Sleep(1.0);
  Shell(InHost(job, 1, "nft list table inet weft_fault"), &out);
  long dropped = 0;
  for (size_t at = out.find("packets "); at != std::string::npos; at = out.find("packets ", at + 1))
    dropped += atol(out.c_str() + at + 8);
  if (dropped == 0) return "nft dropped no packet in 1 s: " + out;
  return "";
}

std::string LinkDown(Job& job, double seconds) {
  std::string out;
  if (Shell(InHost(job, 1, "ip link set eth0 down"), &out) != 0) return "ip link: " + out;
  job.Sleep(seconds);
  // Down past the timeout, every rank may have failed and exited, and netns-hosts.sh removed the
  // namespaces with the link: then there is nothing left to bring back.
  if (Shell(InHost(job, 1, "ip link set eth0 up"), &out) != 0 &&
      access(("/run/netns/" + job.ns(1)).c_str(), F_OK) == 0)
    return "ip link: " + out;
  return "";
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (std::string w : {"large", "small"}) {
    cases.push_back(
        {"none", w, Expect::kOk, -1, false, Workload(w, true), {}, [](Job&) { return ""; }});
    cases.push_back(
        {"sigkill", w, Expect::kError, kFaultRank, false, Workload(w, false), {}, [](Job& j) {
           return Signal(j, kFaultRank, SIGKILL);
         }});
    cases.push_back(
        {"sigstop", w, Expect::kError, kFaultRank, false, Workload(w, false), {}, [](Job& j) {
           std::string e = Signal(j, kFaultRank, SIGSTOP);
           if (!e.empty()) return e;
           j.Sleep(kStopS);  // past the timeout, then resumed
           return Signal(j, kFaultRank, SIGCONT);
         }});
    cases.push_back({"link_down", w, Expect::kError, -1, false, Workload(w, false), {}, [](Job& j) {
                       return LinkDown(j, kTimeoutMs / 1000.0 + 2);
                     }});
    cases.push_back({"link_blip", w, Expect::kOk, -1, false, Workload(w, true), {}, [](Job& j) {
                       return LinkDown(j, 1.0);
                     }});
    // Loss stalls a TCP connection for TCP's retransmission timeout, which doubles with every
    // retransmission lost again: at 10% each way a stall past 4 s happens now and then, and weft
    // rightly calls 4 s without progress a failure. These cases test that lost packets are
    // recovered and the data is right, so they run with a timeout nearer the default (30 s), and
    // each host caps TCP's backoff at 1 s (net.ipv4.tcp_rto_max_ms, set in the host's namespace
    // before its ranks open a socket): with the kernel's default cap of 120 s, a few lost
    // retransmissions in a row on a loaded machine (whose RTO starts near 1 s) stalled a
    // connection past 15 s about once in a few dozen runs of the large case.
    cases.push_back({"loss_1pct",
                     w,
                     Expect::kOk,
                     -1,
                     false,
                     Workload(w, true, "5"),
                     {kLossTimeout, kLossRtoMax},
                     [](Job& j) { return Loss(j, 10); }});
    cases.push_back({"loss_10pct",
                     w,
                     Expect::kOk,
                     -1,
                     false,
                     Workload(w, true, "5"),
                     {kLossTimeout, kLossRtoMax},
                     [](Job& j) { return Loss(j, 100); }});
    cases.push_back(
        {"delay_50ms", w, Expect::kOk, -1, false, Workload(w, true, "5"), {}, [](Job& j) {
           return Netem(j, "delay 50ms 10ms", 50, 10, false);
         }});
    cases.push_back({"reorder", w, Expect::kOk, -1, false, Workload(w, true, "5"), {}, [](Job& j) {
                       return Netem(j, "delay 10ms reorder 25% 50%", 10, 10, true);
                     }});
    cases.push_back(
        {"conn_reset", w, Expect::kError, -1, false, Workload(w, false), {}, [](Job& j) {
           std::string out;
           int rc = Shell(InHost(j, 1, "ss -K -t dst 10.231.0.1"), &out);
           // ss lists what it destroyed; a kernel without socket destroy lists nothing.
           if (rc != 0 || out.find("10.231.0.1") == std::string::npos)
             return "SKIP: ss -K destroyed no socket (kernel without "
                    "CONFIG_INET_DIAG_DESTROY?): " +
                    out;
           return std::string();
         }});
    // Host 1's /dev/shm holds 64 KiB: the shm transport's doorbells fit, a pair's ring of 4 MiB
    // does not. Rings are made when the ranks connect, after the addresses were exchanged, which
    // is past the point where auto mode can still fall back to TCP (every peer already counts on
    // shm with that rank): init fails on every rank, the host's ranks naming the full /dev/shm.
    cases.push_back({"shm_full_ring",
                     w,
                     Expect::kError,
                     -1,
                     true,
                     Workload(w, false),
                     {"FAULT_SHM_HOST=1", "FAULT_SHM_SIZE=64k"},
                     [](Job&) { return ""; }});
    // Host 1's /dev/shm full to the last byte: the shm transport itself cannot be created, and
    // auto mode falls back to TCP before the exchange, so the job completes.
    cases.push_back({"shm_full_at_create",
                     w,
                     Expect::kOk,
                     -1,
                     true,
                     Workload(w, true),
                     {"FAULT_SHM_HOST=1", "FAULT_SHM_SIZE=64k", "FAULT_SHM_FILL=1", "WEFT_DEBUG=1"},
                     [](Job&) { return ""; }});
  }
  // A rank killed or stopped in the middle of a stream of dup and split.
  cases.push_back({"sigkill",
                   "split",
                   Expect::kError,
                   kFaultRank,
                   false,
                   {"--workload", "split", "--seconds", "10"},
                   {},
                   [](Job& j) { return Signal(j, kFaultRank, SIGKILL); }});
  cases.push_back({"sigstop",
                   "split",
                   Expect::kError,
                   kFaultRank,
                   false,
                   {"--workload", "split", "--seconds", "10"},
                   {},
                   [](Job& j) {
                     std::string e = Signal(j, kFaultRank, SIGSTOP);
                     if (!e.empty()) return e;
                     j.Sleep(kStopS);
                     return Signal(j, kFaultRank, SIGCONT);
                   }});
  // The store (the master) lives in rank 0's process and stops when init returns, so after init
  // there is no master to lose: split and dup must work without it ("none"). What can still go
  // is rank 0's process, the one that served it: killed before the survivors split and dup.
  cases.push_back({"none", "split", Expect::kOk, -1, false, Workload("split", true), {}, [](Job&) {
                     return "";
                   }});
  cases.push_back(
      {"master_gone", "split", Expect::kError, 0, false, Workload("split", false), {}, [](Job& j) {
         return Signal(j, 0, SIGKILL);
       }});
  return cases;
}

class Faults : public testing::TestWithParam<Case> {};

TEST_P(Faults, EndsCleanly) {
  SKIP_UNLESS_NETNS();
  const Case& c = GetParam();
  Job job(c.rank_args, c.env);
  ASSERT_GT(job.pid(), 0);
  if (!c.before_init) {
    bool ready = job.PumpUntil([&] { return job.AllReady(); }, 30);
    ASSERT_TRUE(ready) << "not every rank printed READY\n" << job.out();
    job.Sleep(0.5);  // into the stream of collectives (split: into rank 0's pause, before a split)
  }
  job.MarkFault();
  std::string why = c.inject(job);
  if (why.rfind("SKIP: ", 0) == 0) {
    job.Finish();
    GTEST_SKIP() << why;
  }
  EXPECT_EQ(why, "") << "injecting the fault failed";
  bool ended = job.Finish();
  std::cout << job.out();
  EXPECT_TRUE(ended) << "the job hung: still running after " << kDeadlineS << " s";

  // Every rank's end.
  double worst = 0, stopped_at = -1;  // the survivors' slowest error; the stopped rank's own
  bool named = false;
  std::string outcome;
  for (int r = 0; r < kRanks; r++) {
    RankSeen& s = job.ranks()[r];
    bool killed = (c.fault == "sigkill" && r == kFaultRank) || (c.fault == "master_gone" && r == 0);
    if (killed) {
      EXPECT_EQ(s.status, "") << "the killed rank printed a result: " << s.line;
      continue;
    }
    if (c.expect == Expect::kOk) {
      EXPECT_EQ(s.status, "ok") << "rank " << r << ": " << s.line;
      continue;
    }
    EXPECT_EQ(s.status, "error") << "rank " << r << ": " << s.line;
    if (s.status != "error") continue;
    // The message names the operation the rank called ...
    EXPECT_NE(s.msg.find(s.op), std::string::npos) << "rank " << r << ": " << s.line;
    named = named || (c.fault_rank >= 0 &&
                      s.msg.find("rank " + std::to_string(c.fault_rank)) != std::string::npos);
    // ... within the timeout of the fault (of its end, for the stopped rank itself, which sat
    // stopped past the timeout and only then ran again).
    double bound = kTimeoutMs / 1000.0 + kMarginS;
    if (c.fault == "sigstop" && r == kFaultRank) bound = kStopS + kMarginS;
    // A failure during init: a rank connecting to one that already gave up may retry for init's
    // own bound, since during init a refused connection can still mean "not listening yet".
    if (s.op == "init") bound = kConnectTimeoutMs / 1000.0 + kMarginS;
    EXPECT_LE(s.at, bound) << "rank " << r << " took " << s.at << " s to fail: " << s.line;
    if (c.fault == "sigstop" && r == kFaultRank)
      stopped_at = s.at;
    else if (s.at > worst)
      worst = s.at;
  }
  // ... and at least one survivor names the rank at fault, where one can know it.
  if (c.expect == Expect::kError && c.fault_rank >= 0) {
    EXPECT_TRUE(named) << "no rank names rank " << c.fault_rank << " in its error";
  }
  if (c.fault == "shm_full_ring") {
    // The rank that could not make the ring names the full /dev/shm; its host peer may instead
    // report that rank gone, whichever of the two came first to the ring.
    bool full = false;
    for (int r : {2, 3})
      full = full || job.ranks()[r].msg.find("No space left on device") != std::string::npos;
    EXPECT_TRUE(full) << "no rank of host 1 names the full /dev/shm: " << job.ranks()[2].line
                      << "\n" << job.ranks()[3].line;
  }
  if (c.fault == "shm_full_at_create") {
    // The host with the full /dev/shm says so in its WEFT_DEBUG=1 lines.
    EXPECT_NE(job.out().find("no shared memory, using tcp"), std::string::npos) << job.out();
  }

  // Each rank's exit status agrees with its RESULT line: 0 after ok, 1 after an error, killed by
  // SIGKILL where the test killed it; anything else (a crash in abort or destroy) is a failure.
  // The hosts always exit 0, so netns-hosts.sh does too unless a host's setup failed.
  if (ended) {
    EXPECT_EQ(job.exit_code(), 0) << "netns-hosts.sh failed";
  }
  std::map<int, int> rank_of_pid;
  for (auto& [r, s] : job.ranks()) rank_of_pid[s.pid] = r;
  int listed = 0;
  for (const auto& line : SplitLines(job.out())) {
    int host = -1, pid = 0, status = -1;
    size_t exit_at = line.find("EXIT host=");
    if (exit_at != std::string::npos &&
        sscanf(line.c_str() + exit_at, "EXIT host=%d pid=%d status=%d", &host, &pid, &status) ==
            3 &&
        rank_of_pid.count(pid)) {
      int r = rank_of_pid[pid];
      const std::string& st = job.ranks()[r].status;
      int want = st == "ok" ? 0 : st == "" ? 128 + SIGKILL : 1;
      EXPECT_EQ(status, want) << "rank " << r << " exit status, after '" << st << "': " << line;
    }
    size_t at = line.find("SHMLEFT host=");
    if (at == std::string::npos) continue;
    listed++;
    EXPECT_NE(line.find("[]"), std::string::npos) << "left in /dev/shm: " << line;
  }
  EXPECT_EQ(listed, kHosts) << "a host did not list its /dev/shm (did its ranks end?)";
  for (auto& [r, s] : job.ranks()) {
    if (s.pid > 0 && kill(s.pid, 0) == 0) {
      ADD_FAILURE() << "rank " << r << " (pid " << s.pid << ") still exists";
      kill(s.pid, SIGCONT);
      kill(s.pid, SIGKILL);
    }
  }
  EXPECT_TRUE(ProcessesWith(Runfile("tests/netns/fault_rank")).empty())
      << "a rank outlived its job";
  EXPECT_TRUE(LeftoverNamespaces(job.pid()).empty()) << "namespaces left after the job";

  char when[64] = "-";
  if (c.expect == Expect::kError) snprintf(when, sizeof when, "%.1f s", worst);
  if (stopped_at >= 0)
    snprintf(when + strlen(when), sizeof when - strlen(when), " (stopped rank: %.1f s)",
             stopped_at);
  std::cout << "FAULTROW | " << c.fault << " | " << c.workload << " | "
            << (c.expect == Expect::kOk ? "ok, data checked" : "error on every live rank") << " | "
            << when << " | " << job.seconds() << " s\n";
}

std::string CaseName(const testing::TestParamInfo<Case>& info) {
  return info.param.fault + "_" + info.param.workload;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Faults, testing::ValuesIn(Cases()), CaseName);

}  // namespace
