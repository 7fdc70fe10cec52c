// store_flood_test.cc -- the store's server out of descriptors: it runs in a child process at a
// limit of 48, strangers flood its port, and it neither spins (its CPU time over the flood stays
// small) nor lets the strangers keep a rank out. Two ways to run out: the strangers themselves
// (the server drops the oldest un-greeted connection to take the next), and ranks holding every
// descriptor (the server sheds strangers through its reserve descriptor, and a rank gets in as
// soon as a slot is free).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "bootstrap/store.h"
#include "common/error.h"
#include "common/net.h"
}
#include "tests/harness/flood.h"

namespace {

const int kWorld = 64;

double cpu_s() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// The server in a child at 48 descriptors. It sends its port, then, on each byte from the
// parent, the CPU seconds it has spent since the previous one (as a double), until EOF.
struct Server {
  pid_t pid = -1;
  int to = -1, from = -1;
  int port = -1;

  void Start() {
    int down[2], up[2];
    ASSERT_EQ(pipe(down), 0);
    ASSERT_EQ(pipe(up), 0);
    pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(down[1]);
      close(up[0]);
      struct rlimit rl;
      getrlimit(RLIMIT_NOFILE, &rl);
      rl.rlim_cur = 48;
      if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(2);
      store_identity_t id = {0xf100d, kWorld, 0, nullptr};
      store_server_t *s = nullptr;
      if (store_server_start(0, &id, &s) != WEFT_SUCCESS) _exit(3);
      int p = store_server_port(s);
      if (write(up[1], &p, sizeof p) != sizeof p) _exit(4);
      double last = cpu_s();
      char b;
      while (read(down[0], &b, 1) == 1) {
        double now = cpu_s(), used = now - last;
        last = now;
        if (write(up[1], &used, sizeof used) != sizeof used) break;
      }
      store_server_stop(s);
      _exit(0);
    }
    close(down[0]);
    close(up[1]);
    to = down[1];
    from = up[0];
    ASSERT_EQ(read(from, &port, sizeof port), (ssize_t)sizeof port);
  }
  // CPU seconds the server spent since the previous call (or its start).
  double Cpu() {
    char b = 1;
    double used = -1;
    if (write(to, &b, 1) != 1) return -1;
    if (read(from, &used, sizeof used) != (ssize_t)sizeof used) return -1;
    return used;
  }
  void Stop() {
    if (pid <= 0) return;
    close(to);
    close(from);
    int st = 0;
    for (int i = 0; i < 50 && waitpid(pid, &st, WNOHANG) == 0; i++) usleep(100 * 1000);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    pid = -1;
  }
};

weft_result_t Join(int port, int rank, int timeout_ms, store_client_t **c) {
  net_addr_t a;
  EXPECT_EQ(net_resolve("127.0.0.1", port, &a), WEFT_SUCCESS);
  store_identity_t id = {0xf100d, kWorld, rank, nullptr};
  return store_connect(&a, &id, timeout_ms, c);
}

TEST(StoreFlood, StrangersPastTheDescriptorLimitMakeRoomForARank) {
  Server srv;
  srv.Start();
  ASSERT_GT(srv.port, 0);
  Flood f = flood_start(srv.port, 300, kFloodIdle);
  EXPECT_GE(flood_wait_ready(&f, 10000), 250);
  usleep(500 * 1000);  // the strangers sit idle on a server that has no descriptor left
  double idle_cpu = srv.Cpu();
  fprintf(stderr, "server cpu while flooded: %.3f s\n", idle_cpu);
  store_client_t *c = nullptr;
  EXPECT_EQ(Join(srv.port, 1, 3000, &c), WEFT_SUCCESS) << err_last();
  if (c) {
    EXPECT_EQ(store_set(c, "k", "v", 1), WEFT_SUCCESS) << err_last();
    store_close(c);
  }
  flood_stop(&f);
  srv.Stop();
  EXPECT_LT(idle_cpu, 0.3) << "the server spun while out of descriptors";
}

TEST(StoreFlood, RanksHoldingEveryDescriptorShedStrangersAndLetTheNextRankIn) {
  Server srv;
  srv.Start();
  ASSERT_GT(srv.port, 0);
  // Ranks until the server has no descriptor left for another.
  std::vector<store_client_t *> ranks;
  for (int r = 0; r < kWorld; r++) {
    store_client_t *c = nullptr;
    if (Join(srv.port, r, 500, &c) != WEFT_SUCCESS) break;
    ranks.push_back(c);
  }
  ASSERT_GE(ranks.size(), 20u);
  ASSERT_LT(ranks.size(), (size_t)kWorld) << "the server never ran out of descriptors";
  srv.Cpu();
  Flood f = flood_start(srv.port, 300, kFloodIdle);
  EXPECT_GE(flood_wait_ready(&f, 10000), 250);
  usleep(500 * 1000);
  double idle_cpu = srv.Cpu();
  fprintf(stderr, "server cpu while flooded: %.3f s\n", idle_cpu);
  // Every rank is still served.
  for (store_client_t *c : ranks) EXPECT_EQ(store_add(c, "n", 1, nullptr), WEFT_SUCCESS);
  // One rank leaves; the next one gets its slot.
  int next = (int)ranks.size();
  store_close(ranks.back());
  ranks.pop_back();
  store_client_t *c = nullptr;
  EXPECT_EQ(Join(srv.port, next, 3000, &c), WEFT_SUCCESS) << err_last();
  store_close(c);
  for (store_client_t *r : ranks) store_close(r);
  flood_stop(&f);
  srv.Stop();
  EXPECT_LT(idle_cpu, 0.3) << "the server spun while out of descriptors";
}

// A master out of descriptors resets a rank's connection before it answers the hello; the rank
// connects again within its connect timeout instead of giving up. Here a stand-in listener resets
// the first connection, then the real store takes over the port.
TEST(StoreFlood, ARankWhoseHelloIsResetTriesAgain) {
  int lfd = -1;
  ASSERT_EQ(net_listen_any(0, AF_INET, 16, &lfd), WEFT_SUCCESS) << err_last();
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  ASSERT_EQ(getsockname(lfd, (struct sockaddr *)&ss, &len), 0);
  net_addr_t bound = {ss, len};
  int port = net_addr_port(&bound);
  weft_result_t joined = WEFT_ERR_INTERNAL;
  std::string why;
  std::thread rank([&] {
    store_client_t *c = nullptr;
    joined = Join(port, 1, 5000, &c);
    if (joined != WEFT_SUCCESS) why = err_last();
    store_close(c);
  });
  int fd = -1;
  ASSERT_EQ(net_accept(lfd, 5000, &fd), WEFT_SUCCESS) << err_last();
  char hello[8];
  EXPECT_EQ(net_recv_all(fd, hello, sizeof hello, 5000), WEFT_SUCCESS);  // the hello is under way
  struct linger lg = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close(fd);
  close(lfd);
  store_identity_t id = {0xf100d, kWorld, 0, nullptr};
  store_server_t *s = nullptr;
  ASSERT_EQ(store_server_start(port, &id, &s), WEFT_SUCCESS) << err_last();
  rank.join();
  EXPECT_EQ(joined, WEFT_SUCCESS) << why;
  store_server_stop(s);
}

}  // namespace
