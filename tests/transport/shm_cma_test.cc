// shm_cma_test.cc -- the shm transport's single-copy path (process_vm_readv) between real
// processes: a described send holds its buffer until the peer has read it, and arrives intact;
// scripted streams of every shape through it; a read refused at connect (seccomp) or in the middle
// of a transfer falls back to the slot path with one WEFT_DEBUG line and intact data; a peer killed
// during a transfer fails the other side naming it, leaving nothing in /dev/shm.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/harness/mp_harness.h"
#include "tests/transport/device_xport_util.h"

extern "C" {
#include "common/error.h"
}

namespace {

constexpr size_t kSlot = 4096;
constexpr size_t kLen = 5 * kSlot + 123;  // several slots and a short last one

unsigned char Pattern(size_t i) { return static_cast<unsigned char>(i * 131 + (i >> 9) + 7); }

// From here on process_vm_readv fails with EPERM in this process, as under Yama or a container's
// seccomp profile.
std::string RefuseProcessVmReadv() {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    return std::string("seccomp filter: ") + strerror(errno);
  return "";
}

// This rank's stderr goes to a file from now on (WEFT_DEBUG lines); its path.
std::string CaptureStderr(int rank) {
  const char* dir = getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/shm_cma_stderr." +
                     std::to_string(getpid()) + "." + std::to_string(rank);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) {
    dup2(fd, 2);
    close(fd);
  }
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Both ranks reach this point.
std::string Barrier(BlobExchange* ex, int rank) {
  std::vector<std::vector<char>> all;
  char b = 0;
  return ex->Exchange(rank, &b, 1, &all, 30000);
}

// Progress only (no wait: a wait about to sleep takes described slots back) for `ms`, or until
// x completes; whether it did.
bool ProgressFor(conn_t* c, xfer_t* x, int ms, std::string* err) {
  double end = NowSeconds() + ms / 1000.0;
  while (!x->complete && NowSeconds() < end) {
    int moved = 0;
    if (c->ops->progress(c, &moved) != WEFT_SUCCESS) {
      *err = err_last();
      return false;
    }
    usleep(100);
  }
  return x->complete;
}

// Progress and wait until x completes; "" or the error (or a timeout).
std::string Finish(conn_t* c, xfer_t* x, int timeout_ms) {
  double end = NowSeconds() + timeout_ms / 1000.0;
  while (!x->complete) {
    int moved = 0;
    if (c->ops->progress(c, &moved) != WEFT_SUCCESS) return err_last();
    if (x->complete) break;
    if (NowSeconds() > end) return "timed out";
    if (c->ops->wait(&c, 1, 200, kWaitSpinUs) != WEFT_SUCCESS) return err_last();
  }
  return "";
}

std::string CheckBytes(int rank, const std::vector<unsigned char>& got) {
  for (size_t i = 0; i < got.size(); i++)
    if (got[i] != Pattern(i))
      return "rank " + std::to_string(rank) + ": byte " + std::to_string(i) + " is " +
             std::to_string(got[i]) + ", not " + std::to_string(Pattern(i));
  return "";
}

// What happens to the reads of rank 1 (the receiver) in OneMessage.
enum class Refuse { kNever, kAtConnect, kMidTransfer };

// Rank 1 posts a plain receive of kLen bytes; rank 0 then sends them. Returns rank 0's view of
// whether its send completed before rank 1 started progressing (it must not where the path is
// taken: its buffer is still to be read), through *early.
std::string OneMessage(int rank, uint64_t id, BlobExchange* ex, Refuse refuse, bool* early) {
  weft_config_t cfg = TestConfig(kSlot, 8, 4);
  cfg.shm_single_copy_bytes = 1;
  cfg.debug = 1;
  if (rank == 1 && refuse == Refuse::kAtConnect) {
    std::string err = RefuseProcessVmReadv();
    if (!err.empty()) return err;
  }
  RankXport x;
  std::string err = OpenShm(rank, 2, id, &cfg, ex, &x);
  if (!err.empty()) return err;
  conn_t* c = x.conns[1 - rank];
  xfer_t xf;
  memset(&xf, 0, sizeof xf);
  std::vector<unsigned char> buf(kLen);
  if (rank == 1) {
    if (refuse == Refuse::kMidTransfer) err = RefuseProcessVmReadv();
    if (err.empty() && c->ops->post_recv(c, buf.data(), kLen, &xf) != WEFT_SUCCESS)
      err = err_last();
    if (err.empty()) err = Barrier(ex, rank);
    if (err.empty()) err = Barrier(ex, rank);  // rank 0 has looked whether its send completed
    if (err.empty()) err = Finish(c, &xf, 20000);
    if (err.empty()) err = CheckBytes(rank, buf);
  } else {
    for (size_t i = 0; i < kLen; i++) buf[i] = Pattern(i);
    err = Barrier(ex, rank);  // rank 1's receive is posted
    if (err.empty() && c->ops->post_send(c, buf.data(), kLen, &xf) != WEFT_SUCCESS)
      err = err_last();
    if (err.empty()) *early = ProgressFor(c, &xf, 300, &err);
    if (err.empty()) err = Barrier(ex, rank);
    // Progress only here too: a wait would copy the slots itself once the receiver is slow to
    // claim them, and the receiver's own read (or its refusal) is what is under test.
    if (err.empty() && !ProgressFor(c, &xf, 20000, &err) && err.empty())
      err = "the send never completed";
  }
  x.Close(false);
  if (!err.empty()) return "rank " + std::to_string(rank) + ": " + err;
  return "";
}

struct OneResult {
  std::string summary, debug_line;
  bool early;
};

OneResult RunOne(Refuse refuse) {
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  // Rank 0 reports through its message whether its send completed early.
  auto results = mp_run(
      2,
      [&](int rank, int, int) -> std::string {
        std::string path = CaptureStderr(rank);
        bool early = false;
        std::string err = OneMessage(rank, id, &ex, refuse, &early);
        if (!err.empty()) return err;
        if (rank == 0) return early ? "OK early" : "OK held";
        std::string log = ReadFile(path);
        size_t at = log.find("process_vm_readv");
        if (at == std::string::npos) return "OK no debug line";
        return "OK " +
               log.substr(log.rfind('\n', at) + 1, log.find('\n', at) - log.rfind('\n', at) - 1);
      },
      60000);
  OneResult r;
  r.early = results.size() == 2 && results[0].message == "OK early";
  for (auto& res : results)
    if (res.message.rfind("OK", 0) != 0 || !res.exited) r.summary += res.message + "; ";
  if (results.size() == 2) r.debug_line = results[1].message;
  EXPECT_EQ(Leftovers(id), "");
  return r;
}

// The path is taken: the send stays open until the receiver read it, and the bytes arrive.
TEST(ShmSingleCopy, SendHeldUntilReadAndIntact) {
  OneResult r = RunOne(Refuse::kNever);
  EXPECT_EQ(r.summary, "");
  EXPECT_FALSE(r.early) << "the send completed before the receiver ran: no slot was described";
  EXPECT_EQ(r.debug_line, "OK no debug line");
}

// Refused at connect (the probe): the slot path, at once, and one debug line naming the peer.
TEST(ShmSingleCopy, RefusedAtConnectFallsBack) {
  OneResult r = RunOne(Refuse::kAtConnect);
  EXPECT_EQ(r.summary, "");
  EXPECT_TRUE(r.early) << "the send waited for a receiver that cannot read it";
  EXPECT_NE(r.debug_line.find("process_vm_readv from rank 0 (pid"), std::string::npos)
      << r.debug_line;
  EXPECT_NE(r.debug_line.find("at connect: Operation not permitted"), std::string::npos)
      << r.debug_line;
}

// Refused after the probe passed: the sender copies the described slots itself (ASK).
TEST(ShmSingleCopy, RefusedMidTransferFallsBack) {
  OneResult r = RunOne(Refuse::kMidTransfer);
  EXPECT_EQ(r.summary, "");
  EXPECT_FALSE(r.early);
  EXPECT_NE(r.debug_line.find("mid-transfer: Operation not permitted"), std::string::npos)
      << r.debug_line;
}

// A peer killed while its described send is outstanding, or before reading ours: the other side
// fails within seconds naming it, and nothing is left in /dev/shm.
TEST(ShmSingleCopy, KilledPeerDuringTransfer) {
  for (int victim : {0, 1}) {
    uint64_t id = TestCommId();
    BlobExchange ex(2);
    auto results = mp_run(
        2,
        [&](int rank, int, int) -> std::string {
          weft_config_t cfg = TestConfig(kSlot, 8, 4);
          cfg.shm_single_copy_bytes = 1;
          cfg.timeout_ms = 3000;
          RankXport x;
          std::string err = OpenShm(rank, 2, id, &cfg, &ex, &x);
          if (!err.empty()) return err;
          conn_t* c = x.conns[1 - rank];
          xfer_t xf;
          memset(&xf, 0, sizeof xf);
          std::vector<unsigned char> buf(kLen, 1);
          if (rank == 1 && c->ops->post_recv(c, buf.data(), kLen, &xf) != WEFT_SUCCESS)
            return err_last();
          if (!(err = Barrier(&ex, rank)).empty()) return err;
          if (rank == 0 && c->ops->post_send(c, buf.data(), kLen, &xf) != WEFT_SUCCESS)
            return err_last();
          if (rank == 0) ProgressFor(c, &xf, 100, &err);  // described, not yet read
          if (!(err = Barrier(&ex, rank)).empty()) return err;
          if (rank == victim) kill(getpid(), SIGKILL);
          usleep(100000);  // the victim is gone (a zombie at most)
          double start = NowSeconds();
          err = Finish(c, &xf, 10000);
          // A send may complete without its reader, as one into a ring with room does (the
          // sender copies its described slots before it sleeps): what comes back must fail.
          xfer_t back;
          memset(&back, 0, sizeof back);
          if (err.empty() && c->ops->post_recv(c, buf.data(), kLen, &back) != WEFT_SUCCESS)
            err = err_last();
          else if (err.empty())
            err = Finish(c, &back, 10000);
          double took = NowSeconds() - start;
          x.Close(true);
          if (err.empty()) return "completed without its peer";
          if (took > 5) return "failed only after " + std::to_string(took) + " s: " + err;
          return "FAILED AS EXPECTED: " + err;
        },
        60000);
    ASSERT_EQ(results.size(), 2u);
    int other = 1 - victim;
    EXPECT_EQ(results[victim].term_signal, SIGKILL);
    EXPECT_EQ(results[other].message.rfind("FAILED AS EXPECTED: ", 0), 0u)
        << results[other].message;
    EXPECT_NE(results[other].message.find("rank " + std::to_string(victim) + " (pid"),
              std::string::npos)
        << results[other].message;
    printf("victim %d: rank %d: %s\n", victim, other, results[other].message.c_str());
    EXPECT_EQ(Leftovers(id), "");
  }
}

// Scripted streams both ways with every slot that a plain receive takes described: messages of
// every length, in place and lent ones between them, small rings and windows.
struct StreamCase {
  int shm_slots;
  Windows w;
};

class ShmSingleCopyStreams : public ::testing::TestWithParam<StreamCase> {};

TEST_P(ShmSingleCopyStreams, InOrderBothWays) {
  StreamCase k = GetParam();
  uint64_t id = TestCommId();
  BlobExchange ex(2);
  auto results = mp_run(
      2,
      [&](int rank, int n, int) -> std::string {
        dev_engine_t* dev;
        if (OpenTestEngine(&dev) != WEFT_SUCCESS) return err_last();
        weft_config_t cfg = TestConfig(kSlot, k.shm_slots, 4);
        cfg.shm_single_copy_bytes = 1;
        RankXport x;
        std::string err = OpenShm(rank, n, id, &cfg, &ex, &x);
        auto script = [](int from) {
          std::vector<Msg> s = LentScript(from, 200, kSlot, kSlot, true, 31);
          for (Msg& m : s) {
            m.device = false;
            m.inplace = m.inplace && m.len <= kSlot;
          }
          return s;
        };
        int peer = 1 - rank;
        if (err.empty())
          err = Drive(x.conns[peer], dev, rank, script(rank), script(peer), k.w, 60000);
        x.Close(false);
        dev_engine_close(dev);
        if (err.empty()) err = LeakCheck(rank);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
  EXPECT_EQ(Leftovers(id), "");
}

INSTANTIATE_TEST_SUITE_P(Rings, ShmSingleCopyStreams,
                         ::testing::Values(StreamCase{2, {1, 1}}, StreamCase{2, {16, 16}},
                                           StreamCase{8, {8, 2}}, StreamCase{8, {2, 8}}),
                         [](const ::testing::TestParamInfo<StreamCase>& info) {
                           return "slots" + std::to_string(info.param.shm_slots) + "_w" +
                                  std::to_string(info.param.w.send) + "_" +
                                  std::to_string(info.param.w.recv);
                         });

}  // namespace
