// net_test.cc -- address parsing, listen/connect/accept with timeouts, and full send/recv on
// loopback.
#include "common/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"

namespace {

using Clock = std::chrono::steady_clock;

long long MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

bool Contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

#define EXPECT_MSG_HAS(text) \
  EXPECT_TRUE(Contains(err_last(), text)) << "message: " << err_last() << "\nwanted: " << (text)

bool HaveIpv6Loopback() {
  net_addr_t a, bound;
  int fd;
  if (net_resolve("::1", 0, &a) != WEFT_SUCCESS) return false;
  if (net_listen(&a, 1, &fd, &bound) != WEFT_SUCCESS) return false;
  close(fd);
  return true;
}

// A port that nobody listens on (there is a small race, acceptable on a test host).
int FreePort() {
  net_addr_t a, bound;
  int fd;
  EXPECT_EQ(net_resolve("127.0.0.1", 0, &a), WEFT_SUCCESS);
  EXPECT_EQ(net_listen(&a, 1, &fd, &bound), WEFT_SUCCESS) << err_last();
  close(fd);
  return net_addr_port(&bound);
}

std::string Str(const net_addr_t &a) {
  char buf[NET_ADDR_STRLEN];
  net_addr_str(&a, buf, sizeof buf);
  return buf;
}

// A connected pair of blocking sockets over `host`.
void MakePair(const char *host, int *client, int *server) {
  net_addr_t a, bound;
  int lfd;
  ASSERT_EQ(net_resolve(host, 0, &a), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(net_listen(&a, 4, &lfd, &bound), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(net_connect(&bound, 2000, client), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(net_accept(lfd, 2000, server), WEFT_SUCCESS) << err_last();
  close(lfd);
}

// ---- Parsing ------------------------------------------------------------------------------

TEST(NetParseTest, GoodUrls) {
  struct {
    const char *url, *host;
    int port;
  } cases[] = {{"tcp://127.0.0.1:29500", "127.0.0.1", 29500},
               {"tcp://node-1.example.com:1", "node-1.example.com", 1},
               {"tcp://[::1]:65535", "::1", 65535},
               {"tcp://[fe80::1%eth0]:5", "fe80::1%eth0", 5},
               {"tcp://localhost:80", "localhost", 80}};
  for (const auto &c : cases) {
    char host[256];
    int port = 0;
    ASSERT_EQ(net_parse_url(c.url, host, sizeof host, &port), WEFT_SUCCESS)
        << c.url << ": " << err_last();
    EXPECT_STREQ(host, c.host);
    EXPECT_EQ(port, c.port);
  }
}

TEST(NetParseTest, BadUrls) {
  struct {
    const char *url, *why;
  } cases[] = {{"", "empty URL"},
               {"127.0.0.1:5", "'127.0.0.1:5': expected tcp://host:port"},
               {"http://h:1", "unsupported scheme"},
               {"tcp://", "missing host:port"},
               {"tcp://h", "missing ':port'"},
               {"tcp://h:", "port '' is not a number in 1..65535"},
               {"tcp://h:0", "port '0' is not a number"},
               {"tcp://h:65536", "port '65536' is not a number"},
               {"tcp://h:12ab", "port '12ab'"},
               {"tcp://h:5/path", "port '5/path'"},
               {"tcp://:5", "empty host"},
               {"tcp://::1:5", "write an IPv6 address in brackets"},
               {"tcp://[::1:5", "missing ']'"},
               {"tcp://[::1]5", "expected ':port' after ']'"},
               {"tcp://a b:5", "invalid character ' '"},
               {"tcp://[]:5", "empty host"},
               {"tcp://[%]:5", "brackets are for IPv6 addresses"},
               {"tcp://[node1]:5", "brackets are for IPv6 addresses"}};
  for (const auto &c : cases) {
    char host[256];
    int port = 0;
    err_clear();
    EXPECT_EQ(net_parse_url(c.url, host, sizeof host, &port), WEFT_ERR_INVALID_ARGUMENT) << c.url;
    EXPECT_MSG_HAS(c.why);
  }
}

TEST(NetParseTest, HostLongerThanBuffer) {
  char host[4];
  int port;
  EXPECT_EQ(net_parse_url("tcp://hostname:5", host, sizeof host, &port), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_MSG_HAS("host is longer than 3 characters");
}

TEST(NetParseTest, HostPort) {
  char host[64];
  int port;
  ASSERT_EQ(net_parse_hostport("localhost:80", host, sizeof host, &port), WEFT_SUCCESS);
  EXPECT_STREQ(host, "localhost");
  EXPECT_EQ(port, 80);
  ASSERT_EQ(net_parse_hostport("[::1]:29500", host, sizeof host, &port), WEFT_SUCCESS);
  EXPECT_STREQ(host, "::1");
  EXPECT_EQ(port, 29500);
  const char *bad[] = {"", "localhost", "::1", "[::1]", ":80", "h:-1", "h:99999", "tcp://h:1"};
  for (const char *s : bad) {
    EXPECT_EQ(net_parse_hostport(s, host, sizeof host, &port), WEFT_ERR_INVALID_ARGUMENT) << s;
  }
}

// ---- Addresses ----------------------------------------------------------------------------

TEST(NetAddrTest, ResolveLiteralsAndFormat) {
  net_addr_t a;
  ASSERT_EQ(net_resolve("127.0.0.1", 5, &a), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(Str(a), "127.0.0.1:5");
  EXPECT_EQ(net_addr_port(&a), 5);
  net_addr_set_port(&a, 29500);
  EXPECT_EQ(Str(a), "127.0.0.1:29500");
  ASSERT_EQ(net_resolve("::1", 7, &a), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(Str(a), "[::1]:7");
  ASSERT_EQ(net_resolve("[::1]", 8, &a), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(Str(a), "[::1]:8");
  EXPECT_EQ(net_addr_port(&a), 8);
}

TEST(NetAddrTest, ResolveLocalhost) {
  net_addr_t a;
  ASSERT_EQ(net_resolve("localhost", 80, &a), WEFT_SUCCESS) << err_last();
  std::string s = Str(a);
  EXPECT_TRUE(s == "127.0.0.1:80" || s == "[::1]:80") << s;
}

TEST(NetAddrTest, ResolveFailureNamesHost) {
  net_addr_t a;
  EXPECT_NE(net_resolve("no-such-host.invalid", 80, &a), WEFT_SUCCESS);
  EXPECT_MSG_HAS("cannot resolve host 'no-such-host.invalid'");
  EXPECT_EQ(net_resolve("", 80, &a), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(net_resolve("127.0.0.1", 70000, &a), WEFT_ERR_INVALID_ARGUMENT);
}

TEST(NetAddrTest, LocalAddrRoutesToLoopback) {
  net_addr_t remote, local;
  ASSERT_EQ(net_resolve("127.0.0.1", 29500, &remote), WEFT_SUCCESS);
  ASSERT_EQ(net_local_addr_for(&remote, "", &local), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(Str(local), "127.0.0.1:0");
  ASSERT_EQ(net_local_addr_for(&remote, nullptr, &local), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(Str(local), "127.0.0.1:0");
}

TEST(NetAddrTest, LocalAddrFromIfname) {
  net_addr_t remote, local;
  ASSERT_EQ(net_resolve("127.0.0.1", 1, &remote), WEFT_SUCCESS);
  for (const char *spec : {"lo", "=lo", "l", "nosuch,lo"}) {
    ASSERT_EQ(net_local_addr_for(&remote, spec, &local), WEFT_SUCCESS)
        << spec << ": " << err_last();
    EXPECT_EQ(Str(local), "127.0.0.1:0") << spec;
  }
  // No remote: any family will do, but it must be lo's.
  ASSERT_EQ(net_local_addr_for(nullptr, "=lo", &local), WEFT_SUCCESS) << err_last();
  std::string s = Str(local);
  EXPECT_TRUE(s == "127.0.0.1:0" || s == "[::1]:0") << s;
  if (HaveIpv6Loopback()) {
    ASSERT_EQ(net_resolve("::1", 1, &remote), WEFT_SUCCESS);
    ASSERT_EQ(net_local_addr_for(&remote, "lo", &local), WEFT_SUCCESS) << err_last();
    EXPECT_EQ(Str(local), "[::1]:0");
  }
}

TEST(NetAddrTest, IfnameMatchingNothingListsInterfaces) {
  net_addr_t local;
  EXPECT_EQ(net_local_addr_for(nullptr, "nosuchif0", &local), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_MSG_HAS("no network interface matches 'nosuchif0'");
  EXPECT_MSG_HAS("lo");
  // "=l" is an exact name, so it must not match "lo".
  EXPECT_EQ(net_local_addr_for(nullptr, "=l", &local), WEFT_ERR_INVALID_ARGUMENT);
}

TEST(NetAddrTest, IfnameExcludeList) {
  net_addr_t local;
  weft_result_t res = net_local_addr_for(nullptr, "^lo", &local);
  if (res == WEFT_SUCCESS) {
    std::string s = Str(local);
    EXPECT_NE(s, "127.0.0.1:0");
    EXPECT_NE(s, "[::1]:0");
  } else {
    EXPECT_MSG_HAS("'^lo'");  // a host with only loopback
  }
}

// ---- Listen, connect, accept --------------------------------------------------------------

class NetLoopbackTest : public ::testing::TestWithParam<const char *> {};

TEST_P(NetLoopbackTest, RoundTrip) {
  if (std::string(GetParam()) == "::1" && !HaveIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback";
  int c, s;
  MakePair(GetParam(), &c, &s);
  const char msg[] = "hello weft";
  char buf[sizeof msg];
  ASSERT_EQ(net_send_all(c, msg, sizeof msg, 1000), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(net_recv_all(s, buf, sizeof buf, 1000), WEFT_SUCCESS) << err_last();
  EXPECT_STREQ(buf, msg);
  // Both ends come back blocking.
  EXPECT_EQ(fcntl(c, F_GETFL) & O_NONBLOCK, 0);
  EXPECT_EQ(fcntl(s, F_GETFL) & O_NONBLOCK, 0);
  close(c);
  close(s);
}

INSTANTIATE_TEST_SUITE_P(Families, NetLoopbackTest, ::testing::Values("127.0.0.1", "::1"));

TEST(NetListenTest, AnyIsDualStack) {
  int lfd;
  ASSERT_EQ(net_listen_any(0, AF_UNSPEC, 8, &lfd), WEFT_SUCCESS) << err_last();
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  ASSERT_EQ(getsockname(lfd, (struct sockaddr *)&ss, &len), 0);
  net_addr_t bound = {ss, len};
  int port = net_addr_port(&bound);
  std::vector<const char *> hosts = {"127.0.0.1"};
  if (HaveIpv6Loopback()) hosts.push_back("::1");
  for (const char *h : hosts) {
    net_addr_t a;
    int c, s;
    ASSERT_EQ(net_resolve(h, port, &a), WEFT_SUCCESS);
    ASSERT_EQ(net_connect(&a, 2000, &c), WEFT_SUCCESS) << h << ": " << err_last();
    ASSERT_EQ(net_accept(lfd, 2000, &s), WEFT_SUCCESS) << err_last();
    close(c);
    close(s);
  }
  close(lfd);
}

TEST(NetListenTest, AddressInUseNamesAddress) {
  net_addr_t a, bound;
  int lfd, other;
  ASSERT_EQ(net_resolve("127.0.0.1", 0, &a), WEFT_SUCCESS);
  ASSERT_EQ(net_listen(&a, 1, &lfd, &bound), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(net_listen(&bound, 1, &other, nullptr), WEFT_ERR_SYSTEM);
  EXPECT_MSG_HAS("listen on " + Str(bound) + ": address already in use");
  EXPECT_EQ(net_listen_any(net_addr_port(&bound), AF_UNSPEC, 1, &other), WEFT_ERR_SYSTEM);
  EXPECT_MSG_HAS(":" + std::to_string(net_addr_port(&bound)) + ": address already in use");
  close(lfd);
}

TEST(NetConnectTest, RefusedGivesUpAfterTimeout) {
  net_addr_t a;
  int port = FreePort();
  ASSERT_EQ(net_resolve("127.0.0.1", port, &a), WEFT_SUCCESS);
  int fd = -1;
  auto start = Clock::now();
  EXPECT_EQ(net_connect(&a, 300, &fd), WEFT_ERR_TIMEOUT);
  long long ms = MsSince(start);
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 2000);
  EXPECT_MSG_HAS("connect to 127.0.0.1:" + std::to_string(port) +
                 ": Connection refused (gave up after 300 ms)");
}

TEST(NetConnectTest, WaitsForLateListener) {
  int port = FreePort();
  std::thread late([port] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    net_addr_t a;
    int lfd, s;
    ASSERT_EQ(net_resolve("127.0.0.1", port, &a), WEFT_SUCCESS);
    ASSERT_EQ(net_listen(&a, 1, &lfd, nullptr), WEFT_SUCCESS) << err_last();
    ASSERT_EQ(net_accept(lfd, 5000, &s), WEFT_SUCCESS) << err_last();
    close(s);
    close(lfd);
  });
  net_addr_t a;
  int fd;
  ASSERT_EQ(net_resolve("127.0.0.1", port, &a), WEFT_SUCCESS);
  auto start = Clock::now();
  EXPECT_EQ(net_connect(&a, 5000, &fd), WEFT_SUCCESS) << err_last();
  EXPECT_GE(MsSince(start), 250);
  late.join();
  close(fd);
}

TEST(NetConnectTest, AcceptTimesOut) {
  net_addr_t a, bound;
  int lfd, fd;
  ASSERT_EQ(net_resolve("127.0.0.1", 0, &a), WEFT_SUCCESS);
  ASSERT_EQ(net_listen(&a, 1, &lfd, &bound), WEFT_SUCCESS);
  auto start = Clock::now();
  EXPECT_EQ(net_accept(lfd, 200, &fd), WEFT_ERR_TIMEOUT);
  EXPECT_GE(MsSince(start), 150);
  EXPECT_MSG_HAS("accept on " + Str(bound) + ": no connection within 200 ms");
  close(lfd);
}

// ---- Transfers ----------------------------------------------------------------------------

TEST(NetTransferTest, RecvOfClosedPeerIsRemote) {
  int c, s;
  MakePair("127.0.0.1", &c, &s);
  ASSERT_EQ(net_send_all(c, "abc", 3, 1000), WEFT_SUCCESS);
  close(c);
  char buf[8];
  EXPECT_EQ(net_recv_all(s, buf, sizeof buf, 1000), WEFT_ERR_REMOTE);
  EXPECT_MSG_HAS("connection closed by peer (3 of 8 bytes)");
  close(s);
}

TEST(NetTransferTest, RecvTimesOut) {
  int c, s;
  MakePair("127.0.0.1", &c, &s);
  char buf[8];
  auto start = Clock::now();
  EXPECT_EQ(net_recv_all(s, buf, sizeof buf, 200), WEFT_ERR_TIMEOUT);
  long long ms = MsSince(start);
  EXPECT_GE(ms, 150);
  EXPECT_LT(ms, 2000);
  EXPECT_MSG_HAS("timed out after 200 ms (0 of 8 bytes received)");
  close(c);
  close(s);
}

TEST(NetTransferTest, SendTimesOutWhenPeerDoesNotRead) {
  int c, s;
  MakePair("127.0.0.1", &c, &s);
  ASSERT_EQ(net_tune_stream(c, 64 * 1024), WEFT_SUCCESS);
  std::vector<char> big(64 << 20);
  EXPECT_EQ(net_send_all(c, big.data(), big.size(), 200), WEFT_ERR_TIMEOUT);
  EXPECT_MSG_HAS("send to");
  EXPECT_MSG_HAS("timed out after 200 ms");
  close(c);
  close(s);
}

TEST(NetTransferTest, SendToResetPeerIsRemote) {
  int c, s;
  MakePair("127.0.0.1", &c, &s);
  // Unread data makes close() send a reset, so the sender fails promptly.
  ASSERT_EQ(net_send_all(c, "x", 1, 1000), WEFT_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  close(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<char> chunk(1 << 20);
  weft_result_t res = WEFT_SUCCESS;
  for (int i = 0; i < 100 && res == WEFT_SUCCESS; i++)
    res = net_send_all(c, chunk.data(), chunk.size(), 1000);
  EXPECT_EQ(res, WEFT_ERR_REMOTE) << err_last();
  close(c);
}

TEST(NetTransferTest, LargeTransferAcrossNonblockingAndBlockingFds) {
  int c, s;
  MakePair("127.0.0.1", &c, &s);
  ASSERT_EQ(net_set_nonblocking(c, 1), WEFT_SUCCESS);
  EXPECT_NE(fcntl(c, F_GETFL) & O_NONBLOCK, 0);
  const size_t n = 16 << 20;
  std::vector<unsigned char> out(n), in(n);
  for (size_t i = 0; i < n; i++) out[i] = (unsigned char)(i * 131 + 7);
  std::thread sender([&] { EXPECT_EQ(net_send_all(c, out.data(), n, 10000), WEFT_SUCCESS); });
  EXPECT_EQ(net_recv_all(s, in.data(), n, 10000), WEFT_SUCCESS) << err_last();
  sender.join();
  EXPECT_TRUE(in == out);
  close(c);
  close(s);
}

TEST(NetTransferTest, TuneStreamSetsOptions) {
  int c, s;
  MakePair("127.0.0.1", &c, &s);
  ASSERT_EQ(net_tune_stream(c, 1 << 20), WEFT_SUCCESS) << err_last();
  int v = 0;
  socklen_t len = sizeof v;
  ASSERT_EQ(getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, &len), 0);
  EXPECT_NE(v, 0);
  ASSERT_EQ(getsockopt(c, SOL_SOCKET, SO_SNDBUF, &v, &len), 0);
  EXPECT_GE(v, 1 << 20);  // Linux reports twice the request
  close(c);
  close(s);
}

}  // namespace
