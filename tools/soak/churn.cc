// churn.cc -- weft-soak --churn: communicators created and destroyed in a loop, failing if the
// process keeps anything of them: file descriptors, threads, memory, shared-memory segments.
//
// Each round creates a communicator by rendezvous (weft_comm_init, on a port rank 0 picks and
// announces over the world communicator, so that no round reuses the world's or another round's
// rendezvous), splits it by parity, dups it, runs a checked all-reduce on each (an asynchronous
// one on the dup, so that its progress thread starts too) and destroys all three (the dup is
// aborted instead in odd rounds). The process is sampled after a warm-up (allocator pools,
// lazily started library state) and again at the end, each time after a world barrier, so that
// every rank's communicators of the rounds are gone.
//
// Shared-memory segments are counted by name: weft names each after the pids of the ranks that
// use it ("/weft-<id>-pair-<rank>.<pid>-..."), so the entries of this process are told apart from
// those of other jobs on the machine.
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tools/soak/soak.h"

namespace {

struct Sample {
  long fds = 0, threads = 0, shm = 0, maps = 0;
  double rss_mib = 0;
};

long count_dir(const char* path) {
  DIR* d = opendir(path);
  if (!d) return -1;
  long n = 0;
  while (struct dirent* e = readdir(d))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

// True if `name` has ".<pid>" followed by '-' or its end: a rank.pid part naming this process.
bool names_pid(const char* name, const std::string& dot_pid) {
  for (const char* p = strstr(name, dot_pid.c_str()); p; p = strstr(p + 1, dot_pid.c_str())) {
    char next = p[dot_pid.size()];
    if (next == '\0' || next == '-') return true;
  }
  return false;
}

Sample sample() {
  Sample s;
  s.fds = count_dir("/proc/self/fd");
  s.threads = count_dir("/proc/self/task");
  long size = 0, resident = 0;
  if (FILE* f = fopen("/proc/self/statm", "r")) {
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
    fclose(f);
  }
  s.rss_mib = (double)resident * (double)sysconf(_SC_PAGESIZE) / (1 << 20);
  std::string dot_pid = "." + std::to_string(getpid());
  if (DIR* d = opendir("/dev/shm")) {
    while (struct dirent* e = readdir(d))
      if (strncmp(e->d_name, "weft-", 5) == 0 && names_pid(e->d_name, dot_pid)) s.shm++;
    closedir(d);
  }
  // Segments unlinked but still mapped do not show in /dev/shm; they do here.
  if (FILE* f = fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (fgets(line, sizeof line, f))
      if (strstr(line, "/dev/shm/weft-")) s.maps++;
    fclose(f);
  }
  return s;
}

bool bindable(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  bool ok = bind(fd, (struct sockaddr*)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

// A port for a round's rendezvous, below the kernel's range of ephemeral ports: a port the
// kernel handed out as free (bind to port 0) is just as likely to be handed to one of the many
// connections the rounds open before rank 0 listens on it again.
int free_port(uint64_t draw) {
  int lo = 32768, hi = 60999;
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768;
    fclose(f);
  }
  int base = lo - 16384 > 1024 ? lo - 16384 : 1024;
  for (int tries = 0; tries < 64 && lo > base; tries++) {
    int port = base + (int)((draw + (uint64_t)tries * 7919) % (uint64_t)(lo - base));
    if (bindable(port)) return port;
  }
  return -1;
}

struct Churn {
  const SoakOptions& o;
  weft_comm_t* world;
  int rank = 0, n = 1;
  std::string host;

  [[noreturn]] void fail(long round, const std::string& msg) {
    fprintf(stderr, "weft-soak FAIL churn round %ld: rank %d: %s\n", round, rank, msg.c_str());
    fflush(stderr);
    weft_comm_abort(world);
    _exit(1);
  }

  void check(long round, weft_result_t r, const char* what) {
    if (r != WEFT_SUCCESS)
      fail(round, std::string(what) + ": " + weft_result_string(r) + ": " + weft_last_error());
  }

  // A checked all-reduce (sum of int64, rank + round + 1 from each rank).
  void sum_check(long round, weft_comm_t* c, bool async, const char* what) {
    int cr, cn;
    weft_comm_rank(c, &cr);
    weft_comm_size(c, &cn);
    int64_t mine = cr + round + 1, got = -1;
    weft_result_t r;
    if (async) {
      weft_request_t* req = nullptr;
      r = weft_iall_reduce(&mine, &got, 1, WEFT_INT64, WEFT_SUM, c, &req);
      if (r == WEFT_SUCCESS) r = weft_wait(req, -1);
    } else {
      r = weft_all_reduce(&mine, &got, 1, WEFT_INT64, WEFT_SUM, c, nullptr);
    }
    check(round, r, what);
    int64_t want = (int64_t)cn * (cn - 1) / 2 + (int64_t)cn * (round + 1);
    if (got != want)
      fail(round,
           std::string(what) + ": got " + std::to_string(got) + ", want " + std::to_string(want));
  }

  void round(long i) {
    int32_t port = rank == 0 ? free_port(soak_mix((uint64_t)getpid() * 1000003u + (uint64_t)i)) : 0;
    check(i, weft_broadcast(&port, &port, 1, WEFT_INT32, 0, world, nullptr),
          "announcing the round's port (broadcast on the world)");
    if (port <= 0) fail(i, "rank 0 found no free port for the round's rendezvous");
    weft_comm_t *c = nullptr, *s = nullptr, *d = nullptr;
    check(i, weft_comm_init(&c, n, rank, host.c_str(), port), "weft_comm_init");
    sum_check(i, c, false, "all_reduce on the new communicator");
    check(i, weft_comm_split(c, rank % 2, rank, &s), "weft_comm_split");
    sum_check(i, s, false, "all_reduce on the split");
    check(i, weft_comm_dup(c, &d), "weft_comm_dup");
    sum_check(i, d, true, "async all_reduce on the dup");
    // Every other round the dup is aborted instead, on every rank: abort frees at once without
    // talking to peers, and must leave nothing behind either.
    if (i % 2)
      check(i, weft_comm_abort(d), "aborting the dup");
    else
      check(i, weft_comm_destroy(d), "destroying the dup");
    check(i, weft_comm_destroy(s), "destroying the split");
    check(i, weft_comm_destroy(c), "destroying the communicator");
  }

  Sample settled(long i) {
    check(i, weft_barrier(world, nullptr), "barrier on the world");
    return sample();
  }

  int run() {
    weft_comm_rank(world, &rank);
    weft_comm_size(world, &n);
    const char* h = getenv("WEFT_MASTER_ADDR");
    if (!h || !*h) h = getenv("MASTER_ADDR");
    host = h && *h ? h : "127.0.0.1";
    long warm = o.churn / 10 < 10 ? o.churn / 10 : 10;
    if (warm < 1) warm = 1;
    for (long i = 0; i < warm; i++) round(i);
    Sample a = settled(warm);
    for (long i = 0; i < o.churn; i++) round(warm + i);
    Sample b = settled(warm + o.churn);
    // Allocator pools and fragmentation move RSS a little; a leak of even one small buffer per
    // round over hundreds of rounds does not fit in this.
    const double rss_slack_mib = 4.0;
    std::string grew;
    auto grow = [&](const char* what, long x, long y) {
      if (y > x)
        grew += std::string(grew.empty() ? "" : "; ") + what + " " + std::to_string(x) + " -> " +
                std::to_string(y);
    };
    grow("open fds", a.fds, b.fds);
    grow("threads", a.threads, b.threads);
    grow("/dev/shm/weft-* entries of this process", a.shm, b.shm);
    grow("mappings of /dev/shm/weft-*", a.maps, b.maps);
    if (b.rss_mib > a.rss_mib + rss_slack_mib) {
      char buf[160];
      snprintf(buf, sizeof buf, "RSS %.1f MiB -> %.1f MiB (more than %.0f MiB)", a.rss_mib,
               b.rss_mib, rss_slack_mib);
      grew += std::string(grew.empty() ? "" : "; ") + buf;
    }
    int32_t bad = !grew.empty(), any = 0;
    check(o.churn, weft_all_reduce(&bad, &any, 1, WEFT_INT32, WEFT_MAX, world, nullptr),
          "the verdict (all_reduce on the world)");
    if (bad)
      fail(warm + o.churn, "after " + std::to_string(o.churn) + " rounds (sampled after " +
                               std::to_string(warm) + " warm-up rounds): " + grew);
    if (any) {  // another rank failed and says why; this one only leaves with it
      weft_comm_abort(world);
      _exit(1);
    }
    printf(
        "weft-soak churn: rank %d: %ld rounds of init, split, dup, destroy and abort: fds %ld, "
        "threads %ld, weft shm entries %ld, shm mappings %ld, RSS %.1f -> %.1f MiB\n",
        rank, o.churn, b.fds, b.threads, b.shm, b.maps, a.rss_mib, b.rss_mib);
    return 0;
  }
};

}  // namespace

int soak_churn(const SoakOptions& o, weft_comm_t* world) {
  Churn c{o, world, 0, 1, ""};
  return c.run();
}
