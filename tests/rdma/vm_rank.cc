// vm_rank.cc -- one rank of the RDMA VM tier (tests/rdma/vm_checks.sh runs it inside
// scripts/rdma-vm.sh's VMs): joins through the launcher's environment and runs one check.
//
//   vm_rank matrix SAME OTHER [--large]  every collective x algorithm (weft_algo_supported) x
//                             dtype at counts 1, 7 and 1001, every op, in place and not, and count
//                             0; --large adds a few calls of 1 Mi + 7 elements (TCG moves 5-20
//                             MB/s); then every peer carried by SAME on this host, OTHER elsewhere
//   vm_rank devmatrix SAME OTHER  the matrix's rows on device buffers of the emulated engine
//                             (WEFT_DEVICE=emulated), enqueued on a stream, at fewer dtypes, plus a
//                             few calls of many device slices; then every peer's device transport:
//                             SAME on this host, OTHER elsewhere (ib with WEFT_IB_GDR=1, staged
//                             without)
//   vm_rank hier              hierarchical all-reduce (forced and chosen); every peer on this
//                             host carried by shm, every peer on another by ib
//   vm_rank carried SAME OTHER  a small all-reduce, then every peer touched; each carried by
//                             SAME (on this host) or OTHER (elsewhere): e.g. shm tcp after a
//                             fallback
//   vm_rank init-fails TEXT... init must fail, its message holding every TEXT
//   vm_rank kill VICTIM SECONDS  every rank exchanges 4 MiB with VICTIM, which SIGKILLs itself
//                             during its second receive; every survivor must fail within SECONDS
//                             naming VICTIM
//   vm_rank vanish SLACK IFNAME  two ranks: after a barrier rank 1 takes IFNAME down (no FIN, no
//                             RST reach rank 0), rank 0 waits 2 s and all-reduces 4 MiB; it must
//                             fail naming rank 1 and "transport retry counter exceeded" within
//                             2 s + (WEFT_IB_RETRY_CNT + 1) x 4.096 us x 2^WEFT_IB_TIMEOUT + SLACK
//                             of the barrier
//
// Which host a rank is on comes from HOST_INDEX (rdma-vm.sh). Success prints one line
// "vm_rank OK <check> rank R ..."; a failure prints "vm_rank FAIL <check> rank R: ..." and exits 1
// (after weft_comm_abort, so that the other ranks fail at once instead of waiting).
#include <errno.h>
#include <math.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/device_mp/device_runner.h"

extern "C" {
// Internal (comm/comm.h, which is C only): the transport carrying this rank's traffic with peer;
// NULL until the connection exists.
const char* comm_transport_name(const weft_comm_t* comm, int peer);
// The same for device buffers: "cuda_ipc", "staged", "ib" (GPUDirect RDMA).
const char* comm_device_transport_name(const weft_comm_t* comm, int peer);
}

namespace {

std::string check_name = "?";
int my_rank = -1;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int Fail(weft_comm_t* comm, const std::string& why) {
  printf("vm_rank FAIL %s rank %d: %s\n", check_name.c_str(), my_rank, why.c_str());
  fflush(stdout);
  if (comm) weft_comm_abort(comm);
  return 1;
}

int Ok(weft_comm_t* comm, const std::string& what) {
  printf("vm_rank OK %s rank %d %s\n", check_name.c_str(), my_rank, what.c_str());
  fflush(stdout);
  if (comm && weft_comm_destroy(comm) != WEFT_SUCCESS) {
    printf("vm_rank FAIL %s rank %d: destroy: %s\n", check_name.c_str(), my_rank,
           weft_last_error());
    return 1;
  }
  return 0;
}

std::string Join(weft_comm_t** comm) {
  *comm = nullptr;
  if (weft_comm_init_env(comm) != WEFT_SUCCESS) {
    *comm = nullptr;
    return std::string("init: ") + weft_last_error();
  }
  weft_comm_rank(*comm, &my_rank);
  return "";
}

bool Reduces(weft_coll_t c) {
  return c == WEFT_COLL_ALL_REDUCE || c == WEFT_COLL_REDUCE || c == WEFT_COLL_REDUCE_SCATTER;
}

std::string TouchEveryPeer(weft_comm_t* comm);
std::string TouchEveryPeerOnDevice(weft_comm_t* comm, CallRunner* runner);
std::string HostsOf(weft_comm_t* comm, std::vector<int>* hosts);
using CarrierFn = const char* (*)(const weft_comm_t*, int);
std::string CheckCarried(weft_comm_t* comm, const std::vector<int>& hosts, const char* same,
                         const char* other, std::string* seen,
                         CarrierFn carrier = comm_transport_name);

const weft_coll_t kColls[] = {WEFT_COLL_ALL_REDUCE, WEFT_COLL_BROADCAST,      WEFT_COLL_REDUCE,
                              WEFT_COLL_ALL_GATHER, WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_BARRIER,
                              WEFT_COLL_GATHER,     WEFT_COLL_SCATTER};

// The matrix: for each collective and algorithm, every dtype at counts 1, 7 and 1001 and one
// call of count 0; the op moves on with every call and the buffers alternate between in place
// and not, so that each row sees every dtype and op, without the full product (which TCG would
// take the better part of an hour on).
int Matrix(const char* same, const char* other, bool large) {
  weft_comm_t* comm;
  std::string err = Join(&comm);
  if (!err.empty()) return Fail(comm, err);
  int n;
  weft_comm_size(comm, &n);
  int calls = 0, k = 0;
  double t0 = Now();
  for (weft_coll_t coll : kColls)
    for (int a = 1; a < WEFT_NUM_ALGOS; a++) {
      weft_algo_t algo = (weft_algo_t)a;
      if (!weft_algo_supported(coll, algo)) continue;
      for (size_t count : {0, 1, 7, 1001})
        for (int d = 0; d < WEFT_NUM_DTYPES; d++) {
          weft_op_t op = Reduces(coll) ? (weft_op_t)(k % WEFT_NUM_OPS) : WEFT_SUM;
          int root = (k / 3) % n;
          bool in_place = k % 2 == 1;
          k++;
          err = check_call(comm, coll, algo, (weft_dtype_t)d, op, count, in_place, root);
          if (!err.empty()) return Fail(comm, err);
          calls++;
          if (count == 0 || coll == WEFT_COLL_BARRIER) break;  // one call is enough
        }
    }
  double small_s = Now() - t0;
  if (large) {
    // A few calls with many slices: several rounds of every ring, both directions busy.
    const size_t big = (1 << 20) + 7;
    struct Big {
      weft_coll_t coll;
      weft_algo_t algo;
      weft_dtype_t d;
      weft_op_t op;
      size_t count;
    };
    const Big bigs[] = {
        {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, WEFT_FLOAT32, WEFT_SUM, big},
        {WEFT_COLL_BROADCAST, WEFT_ALGO_TREE, WEFT_INT32, WEFT_SUM, big},
        {WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RING, WEFT_BFLOAT16, WEFT_MAX, (big - 7) / 4 + 3},
    };
    for (const Big& b : bigs) {
      err = check_call(comm, b.coll, b.algo, b.d, b.op, b.count, my_rank % 2 == 0, n - 1);
      if (!err.empty()) return Fail(comm, err);
      calls++;
    }
  }
  double took = Now() - t0;
  std::vector<int> hosts;
  std::string seen;
  err = HostsOf(comm, &hosts);
  if (err.empty()) err = TouchEveryPeer(comm);
  if (err.empty()) err = CheckCarried(comm, hosts, same, other, &seen);
  if (!err.empty()) return Fail(comm, err);
  char what[200];
  snprintf(what, sizeof what, "world %d: %d calls in %.1f s (%.1f s the small ones); peers %s", n,
           calls, took, small_s, seen.c_str());
  return Ok(comm, what);
}

int DeviceMatrix(const char* same, const char* other) {
  Device dev;
  std::string err = dev.open();
  weft_comm_t* comm = nullptr;
  if (!err.empty()) return Fail(comm, err);
  err = Join(&comm);
  if (!err.empty()) return Fail(comm, err);
  int n;
  weft_comm_size(comm, &n);
  CallRunner runner = dev.runner();
  const weft_dtype_t dtypes[] = {WEFT_FLOAT32, WEFT_BFLOAT16, WEFT_INT64, WEFT_UINT8};
  int calls = 0, k = 0;
  double t0 = Now();
  for (weft_coll_t coll : kColls)
    for (int a = 1; a < WEFT_NUM_ALGOS; a++) {
      weft_algo_t algo = (weft_algo_t)a;
      if (!weft_algo_supported(coll, algo)) continue;
      for (size_t count : {0, 1, 1001})
        for (weft_dtype_t d : dtypes) {
          weft_op_t op = Reduces(coll) ? (weft_op_t)(k % WEFT_NUM_OPS) : WEFT_SUM;
          int root = (k / 3) % n;
          bool in_place = k % 2 == 1;
          k++;
          err = check_call(comm, coll, algo, d, op, count, in_place, root, &runner);
          if (!err.empty()) return Fail(comm, err);
          calls++;
          if (count == 0 || coll == WEFT_COLL_BARRIER) break;
        }
    }
  // Many device slices (vm_checks.sh makes them small): the device slots wrap many times.
  const size_t big = (1 << 18) + 7;
  err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, WEFT_FLOAT32, WEFT_SUM, big,
                   my_rank % 2 == 0, 0, &runner);
  if (err.empty())
    err = check_call(comm, WEFT_COLL_ALL_GATHER, WEFT_ALGO_RING, WEFT_INT32, WEFT_SUM, big / n,
                     false, 0, &runner);
  if (!err.empty()) return Fail(comm, err);
  calls += 2;
  double took = Now() - t0;
  std::vector<int> hosts;
  std::string seen;
  err = HostsOf(comm, &hosts);
  if (err.empty()) err = TouchEveryPeerOnDevice(comm, &runner);
  if (err.empty())
    err = CheckCarried(comm, hosts, same, other, &seen, comm_device_transport_name);
  if (!err.empty()) return Fail(comm, err);
  char what[200];
  snprintf(what, sizeof what, "world %d: %d device calls in %.1f s; device peers %s", n, calls,
           took, seen.c_str());
  return Ok(comm, what);
}

// Touches every peer once with device buffers (pairs by distance, the lower rank sending first),
// so that every device connection exists and comm_device_transport_name can tell what carries it.
std::string TouchEveryPeerOnDevice(weft_comm_t* comm, CallRunner* runner) {
  int n;
  weft_comm_size(comm, &n);
  for (int s = 1; s < n; s++) {
    int to = (my_rank + s) % n, from = (my_rank - s + n) % n;
    int32_t out = my_rank, in = -1;
    weft_call_t send = {WEFT_COLL_SEND, &out, nullptr, 1, WEFT_INT32, WEFT_SUM, to,
                        WEFT_ALGO_AUTO};
    weft_call_t recv = {WEFT_COLL_RECV, nullptr, &in, 1, WEFT_INT32, WEFT_SUM, from,
                        WEFT_ALGO_AUTO};
    // One element fits any slot, so a send completes before its receive is posted.
    weft_result_t r = (*runner)(comm, send, {{(char*)&out, sizeof out}});
    if (r == WEFT_SUCCESS) r = (*runner)(comm, recv, {{(char*)&in, sizeof in}});
    if (r != WEFT_SUCCESS) return std::string("touching peers on device: ") + weft_last_error();
    if (in != from) return "from rank " + std::to_string(from) + " came " + std::to_string(in);
  }
  return "";
}

// Touches every peer once (one element each way, in pairs that cannot deadlock), so that every
// connection exists and comm_transport_name can tell what carries it.
std::string TouchEveryPeer(weft_comm_t* comm) {
  int n;
  weft_comm_size(comm, &n);
  for (int s = 1; s < n; s++) {
    int to = (my_rank + s) % n, from = (my_rank - s + n) % n;
    int out = my_rank, in = -1;
    // Every rank sends first: one element fits any transport's slot, so a send completes
    // before its receive is posted.
    if (weft_send(&out, 1, WEFT_INT32, to, comm, nullptr) != WEFT_SUCCESS ||
        weft_recv(&in, 1, WEFT_INT32, from, comm, nullptr) != WEFT_SUCCESS)
      return std::string("touching peers: ") + weft_last_error();
    if (in != from) return "from rank " + std::to_string(from) + " came " + std::to_string(in);
  }
  return "";
}

// Which rank is on which host: HOST_INDEX of every rank, gathered.
std::string HostsOf(weft_comm_t* comm, std::vector<int>* hosts) {
  int n;
  weft_comm_size(comm, &n);
  const char* h = getenv("HOST_INDEX");
  if (!h) return "HOST_INDEX is not set (run under scripts/rdma-vm.sh)";
  hosts->assign((size_t)n, -1);
  int mine = atoi(h);
  if (weft_all_gather(&mine, hosts->data(), 1, WEFT_INT32, comm, nullptr) != WEFT_SUCCESS)
    return std::string("gathering host indices: ") + weft_last_error();
  return "";
}

// "" if every peer is carried by `same` (on this host) or `other` (elsewhere), and at least one
// peer elsewhere exists; `seen` lists them as "1:shm 2:ib ...".
std::string CheckCarried(weft_comm_t* comm, const std::vector<int>& hosts, const char* same,
                         const char* other, std::string* seen, CarrierFn carrier) {
  int others = 0;
  for (int p = 0; p < (int)hosts.size(); p++) {
    if (p == my_rank) continue;
    const char* name = carrier(comm, p);
    std::string got = name ? name : "(not connected)";
    *seen += (seen->empty() ? "" : " ") + std::to_string(p) + ":" + got;
    bool here = hosts[p] == hosts[my_rank];
    others += !here;
    if (got != (here ? same : other))
      return "rank " + std::to_string(p) + " (host " + std::to_string(hosts[p]) +
             ", this rank on " + std::to_string(hosts[my_rank]) + ") is carried by " + got +
             ", expected " + (here ? same : other);
  }
  return others ? "" : "no peer on another host";
}

int Hier() {
  weft_comm_t* comm;
  std::string err = Join(&comm);
  if (!err.empty()) return Fail(comm, err);
  std::vector<int> hosts;
  err = HostsOf(comm, &hosts);
  if (!err.empty()) return Fail(comm, err);
  int local = 0;
  weft_comm_local_size(comm, &local);
  if (local < 2) return Fail(comm, "local size " + std::to_string(local) + ": want 2 or more");
  double t0 = Now();
  int k = 0;
  for (weft_algo_t algo : {WEFT_ALGO_HIERARCHICAL, WEFT_ALGO_AUTO})
    for (size_t count : {0, 1, 7, 1001, 65536 + 3, (1 << 20) + 7}) {
      bool big = count > 65536;
      weft_dtype_t d = big ? WEFT_FLOAT32 : (weft_dtype_t)(k % WEFT_NUM_DTYPES);
      weft_op_t op = big ? WEFT_SUM : (weft_op_t)(k % WEFT_NUM_OPS);
      k += 3;
      err = check_call(comm, WEFT_COLL_ALL_REDUCE, algo, d, op, count, k % 2 == 0, 0);
      if (!err.empty()) return Fail(comm, err);
    }
  double took = Now() - t0;
  // The hierarchy connects each rank to its host's ring and its counterpart elsewhere; the
  // check covers those it used, then every peer.
  std::string seen;
  err = CheckCarried(comm, hosts, "shm", "ib", &seen);
  if (err.empty()) err = TouchEveryPeer(comm);
  seen.clear();
  if (err.empty()) err = CheckCarried(comm, hosts, "shm", "ib", &seen);
  if (!err.empty()) return Fail(comm, err);
  char what[200];
  snprintf(what, sizeof what, "all_reduce x%d in %.1f s; peers %s", k / 3, took, seen.c_str());
  return Ok(comm, what);
}

int Carried(const char* same, const char* other) {
  weft_comm_t* comm;
  std::string err = Join(&comm);
  if (!err.empty()) return Fail(comm, err);
  std::vector<int> hosts;
  err = HostsOf(comm, &hosts);
  if (err.empty())
    err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, WEFT_INT64, WEFT_SUM, 1001, false,
                     0);
  if (err.empty()) err = TouchEveryPeer(comm);
  std::string seen;
  if (err.empty()) err = CheckCarried(comm, hosts, same, other, &seen);
  if (!err.empty()) return Fail(comm, err);
  return Ok(comm, "peers " + seen);
}

int InitFails(int argc, char** argv) {
  weft_comm_t* comm = nullptr;
  const char* r = getenv("RANK");
  my_rank = r ? atoi(r) : -1;
  if (weft_comm_init_env(&comm) == WEFT_SUCCESS) return Fail(comm, "init succeeded");
  std::string msg = weft_last_error();
  for (int i = 0; i < argc; i++)
    if (msg.find(argv[i]) == std::string::npos)
      return Fail(nullptr, "the message lacks \"" + std::string(argv[i]) + "\": " + msg);
  return Ok(nullptr, "init failed: " + msg);
}

// The victim receives 4 MiB from every other rank in turn and would send 4 MiB back to each;
// 20 ms into its second receive it SIGKILLs itself (a 4 MiB send needs more than the 2 MiB a
// connection holds unreceived, so that sender is still sending). Every survivor is then sending to
// it, waiting to, or waiting to receive from it: each must fail naming it.
int Kill(int victim, double bound) {
  weft_comm_t* comm;
  std::string err = Join(&comm);
  if (!err.empty()) return Fail(comm, err);
  int n;
  weft_comm_size(comm, &n);
  const size_t count = 1 << 20;
  std::vector<float> buf(count, (float)my_rank);
  if (weft_barrier(comm, nullptr) != WEFT_SUCCESS)
    return Fail(comm, std::string("barrier: ") + weft_last_error());
  double t0 = Now();
  if (my_rank == victim) {
    for (int p = 0, got = 0; p < n; p++) {
      if (p == victim) continue;
      if (++got == 2)
        std::thread([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          kill(getpid(), SIGKILL);
        }).detach();
      if (weft_recv(buf.data(), count, WEFT_FLOAT32, p, comm, nullptr) != WEFT_SUCCESS)
        return Fail(comm, std::string("receiving before being killed: ") + weft_last_error());
    }
    for (;;) pause();  // the kill is on its way
  }
  weft_result_t res = weft_send(buf.data(), count, WEFT_FLOAT32, victim, comm, nullptr);
  if (res == WEFT_SUCCESS) res = weft_recv(buf.data(), count, WEFT_FLOAT32, victim, comm, nullptr);
  double took = Now() - t0;
  std::string msg = weft_last_error();
  if (res == WEFT_SUCCESS) return Fail(comm, "exchanging with the killed rank succeeded");
  weft_comm_abort(comm);
  std::string name = "rank " + std::to_string(victim);
  if (msg.find(name) == std::string::npos)
    return Fail(nullptr, "the message does not name " + name + ": " + msg);
  if (took > bound)
    return Fail(nullptr, "failed only after " + std::to_string(took) + " s (bound " +
                             std::to_string(bound) + " s): " + msg);
  char what[64];
  snprintf(what, sizeof what, "failed after %.2f s: ", took);
  return Ok(nullptr, what + msg);
}

// Takes the interface down from inside (an ioctl: no fork or exec under TCG, so it is down
// within microseconds of the barrier).
std::string LinkDown(const char* ifname) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return std::string("socket: ") + strerror(errno);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
  std::string err;
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
    err = std::string("SIOCGIFFLAGS ") + ifname + ": " + strerror(errno);
  } else {
    ifr.ifr_flags = (short)(ifr.ifr_flags & ~IFF_UP);
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0)
      err = std::string("SIOCSIFFLAGS ") + ifname + " down: " + strerror(errno);
  }
  close(fd);
  return err;
}

double EnvNum(const char* name, double dflt) {
  const char* v = getenv(name);
  return v && *v ? atof(v) : dflt;
}

int Vanish(double slack, const char* ifname) {
  weft_comm_t* comm;
  std::string err = Join(&comm);
  if (!err.empty()) return Fail(comm, err);
  int n;
  weft_comm_size(comm, &n);
  if (n != 2) return Fail(comm, "vanish wants 2 ranks, not " + std::to_string(n));
  // Rank 0 waits this long after the barrier, so that rank 1's interface is down before it
  // writes anything more (else its first writes could be acknowledged and it would only wait).
  const double settle = 2;
  // Every write is retried WEFT_IB_RETRY_CNT times after the first, each try waiting
  // 4.096 us * 2^WEFT_IB_TIMEOUT for its acknowledgement.
  double tries = EnvNum("WEFT_IB_RETRY_CNT", 7) + 1;
  double ack_s = 4.096e-6 * pow(2, EnvNum("WEFT_IB_TIMEOUT", 18));
  double bound = settle + tries * ack_s + slack;
  std::vector<float> buf(1 << 20, 1.0f);  // 4 MiB: more than the peer's slots take unacked
  if (weft_barrier(comm, nullptr) != WEFT_SUCCESS)
    return Fail(comm, std::string("barrier: ") + weft_last_error());
  double t0 = Now();
  if (my_rank == 1) {
    err = LinkDown(ifname);
    if (!err.empty()) return Fail(comm, err);
    // Gone as far as rank 0 can tell; stay until it has given up, then leave quietly.
    std::this_thread::sleep_for(std::chrono::duration<double>(bound + 2));
    weft_comm_abort(comm);
    return Ok(nullptr, std::string(ifname) + " taken down after the barrier");
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(settle));
  double t1 = Now();
  weft_result_t res =
      weft_all_reduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32, WEFT_SUM, comm, nullptr);
  double t2 = Now();
  std::string msg = weft_last_error();
  if (res == WEFT_SUCCESS) return Fail(comm, "all_reduce with a vanished host succeeded");
  weft_comm_abort(comm);
  char took[200];
  snprintf(took, sizeof took,
           "failed %.2f s after the barrier, %.2f s into the all_reduce (bound %.2f s: %.0f s "
           "settling + %.0f tries x %.3f s + %.0f s)",
           t2 - t0, t2 - t1, bound, settle, tries, ack_s, slack);
  for (const char* want : {"rank 1", "transport retry counter exceeded"})
    if (msg.find(want) == std::string::npos)
      return Fail(nullptr, std::string("the message lacks \"") + want + "\": " + msg + "; " + took);
  if (t2 - t0 > bound) return Fail(nullptr, std::string(took) + ": " + msg);
  return Ok(nullptr, std::string(took) + ": " + msg);
}

int Usage() {
  fprintf(stderr,
          "usage: vm_rank matrix SAME OTHER [--large] | devmatrix SAME OTHER | hier |\n"
          "       carried SAME OTHER |\n"
          "       init-fails TEXT... | kill VICTIM SECONDS | vanish SLACK IFNAME\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  check_name = argv[1];
  const char* r = getenv("RANK");
  my_rank = r ? atoi(r) : -1;
  if (check_name == "matrix" && (argc == 4 || argc == 5))
    return Matrix(argv[2], argv[3], argc == 5 && strcmp(argv[4], "--large") == 0);
  if (check_name == "devmatrix" && argc == 4) return DeviceMatrix(argv[2], argv[3]);
  if (check_name == "hier" && argc == 2) return Hier();
  if (check_name == "carried" && argc == 4) return Carried(argv[2], argv[3]);
  if (check_name == "init-fails" && argc >= 3) return InitFails(argc - 2, argv + 2);
  if (check_name == "kill" && argc == 4) return Kill(atoi(argv[2]), atof(argv[3]));
  if (check_name == "vanish" && argc == 4) return Vanish(atof(argv[2]), argv[3]);
  return Usage();
}
