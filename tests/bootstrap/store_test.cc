// store_test.cc -- the bootstrap store on loopback: data across threads and processes, waits,
// timeouts, and every way a client can be refused.
#include "bootstrap/store.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/store_wire.h"
#include "common/error.h"
#include "common/net.h"

namespace {

using Clock = std::chrono::steady_clock;

const uint64_t kJob = 0xabc;
const int kTimeoutMs = 5000;

long long MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

bool Contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

#define EXPECT_MSG_HAS(text) \
  EXPECT_TRUE(Contains(err_last(), text)) << "message: " << err_last() << "\nwanted: " << (text)

net_addr_t Addr(const char *host, int port) {
  net_addr_t a;
  EXPECT_EQ(net_resolve(host, port, &a), WEFT_SUCCESS) << err_last();
  return a;
}

bool HaveIpv6Loopback() {
  net_addr_t a = Addr("::1", 0), bound;
  int fd;
  if (net_listen(&a, 1, &fd, &bound) != WEFT_SUCCESS) return false;
  close(fd);
  return true;
}

std::string GetString(store_client_t *c, const char *key, int timeout_ms = kTimeoutMs) {
  char buf[256];
  size_t len = 0;
  weft_result_t res = store_get(c, key, buf, sizeof buf, &len, timeout_ms);
  EXPECT_EQ(res, WEFT_SUCCESS) << err_last();
  return res == WEFT_SUCCESS ? std::string(buf, len) : std::string();
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(4); }
  void TearDown() override { store_server_stop(server_); }

  void StartServer(int world_size) {
    store_identity_t id = {kJob, world_size, 0, nullptr};
    ASSERT_EQ(store_server_start(0, &id, &server_), WEFT_SUCCESS) << err_last();
    port_ = store_server_port(server_);
    ASSERT_GT(port_, 0);
  }

  weft_result_t Connect(int rank, store_client_t **c, uint64_t job = kJob, int world_size = 4,
                        const char *host = "127.0.0.1") {
    store_identity_t id = {job, world_size, rank, nullptr};
    net_addr_t a = Addr(host, port_);
    err_clear();
    return store_connect(&a, &id, kTimeoutMs, c);
  }

  // A raw TCP connection to the server, for speaking bad protocol on purpose.
  int RawConnect() {
    net_addr_t a = Addr("127.0.0.1", port_);
    int fd = -1;
    EXPECT_EQ(net_connect(&a, kTimeoutMs, &fd), WEFT_SUCCESS) << err_last();
    return fd;
  }

  // The server must drop the connection: EOF or reset, not silence.
  void ExpectDropped(int fd) {
    char b[64];
    weft_result_t res;
    do {
      res = net_recv_all(fd, b, 1, 2000);
    } while (res == WEFT_SUCCESS);
    EXPECT_EQ(res, WEFT_ERR_REMOTE) << err_last();
  }

  // A full, well-behaved round trip with a fresh client.
  void ExpectStoreWorks(const char *key) {
    store_client_t *c = nullptr;
    ASSERT_EQ(Connect(1, &c), WEFT_SUCCESS) << err_last();
    ASSERT_EQ(store_set(c, key, "ok", 2), WEFT_SUCCESS) << err_last();
    EXPECT_EQ(GetString(c, key), "ok");
    store_close(c);
  }

  store_server_t *server_ = nullptr;
  int port_ = 0;
};

// ---- Data ---------------------------------------------------------------------------------

TEST_F(StoreTest, SetGetAddWait) {
  store_client_t *c;
  ASSERT_EQ(Connect(0, &c), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(store_set(c, "a", "alpha", 5), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(GetString(c, "a"), "alpha");
  ASSERT_EQ(store_set(c, "a", "beta", 4), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(GetString(c, "a"), "beta");
  ASSERT_EQ(store_set(c, "empty", "", 0), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(GetString(c, "empty"), "");
  int64_t v = 0;
  ASSERT_EQ(store_add(c, "n", 5, &v), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(v, 5);
  ASSERT_EQ(store_add(c, "n", -7, &v), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(v, -2);
  EXPECT_EQ(GetString(c, "n"), "-2");  // counters read as decimal text
  const char *keys[] = {"a", "n", "empty"};
  EXPECT_EQ(store_wait(c, keys, 3, 1000), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(store_wait(c, keys, 0, 1000), WEFT_SUCCESS) << err_last();
  store_close(c);
}

TEST_F(StoreTest, LargeValueAndTooSmallBuffer) {
  store_client_t *c;
  ASSERT_EQ(Connect(0, &c), WEFT_SUCCESS) << err_last();
  std::vector<char> big(3 << 20);
  for (size_t i = 0; i < big.size(); i++) big[i] = (char)(i * 7);
  ASSERT_EQ(store_set(c, "big", big.data(), big.size()), WEFT_SUCCESS) << err_last();
  std::vector<char> back(big.size());
  size_t len = 0;
  ASSERT_EQ(store_get(c, "big", back.data(), back.size(), &len, 1000), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(len, big.size());
  EXPECT_TRUE(back == big);
  char small[10];
  EXPECT_EQ(store_get(c, "big", small, sizeof small, &len, 1000), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(len, big.size());
  EXPECT_MSG_HAS("store get 'big': the value has 3145728 bytes but the buffer holds 10");
  // The client stays usable: the rest of the value was drained.
  ASSERT_EQ(store_set(c, "after", "x", 1), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(GetString(c, "after"), "x");
  store_close(c);
}

TEST_F(StoreTest, AddOnNonIntegerFails) {
  store_client_t *c;
  ASSERT_EQ(Connect(0, &c), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(store_set(c, "word", "hello", 5), WEFT_SUCCESS);
  EXPECT_EQ(store_add(c, "word", 1, nullptr), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_MSG_HAS("store add 'word': the key holds a value that is not a decimal integer");
  ASSERT_EQ(store_set(c, "num", "41", 2), WEFT_SUCCESS);
  int64_t v;
  ASSERT_EQ(store_add(c, "num", 1, &v), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(v, 42);
  store_close(c);
}

// Every rank: publish its address, count itself in, wait for all, read everyone's address.
void Rendezvous(int port, int rank, int world, std::string *error) {
  store_identity_t id = {kJob, world, rank, nullptr};
  net_addr_t a;
  store_client_t *c = nullptr;
  char key[32], want[32], buf[32];
  size_t len;
  std::vector<std::string> names;
  std::vector<const char *> keys;
  if (net_resolve("127.0.0.1", port, &a) != WEFT_SUCCESS) goto fail;
  if (store_connect(&a, &id, kTimeoutMs, &c) != WEFT_SUCCESS) goto fail;
  snprintf(key, sizeof key, "addr/%d", rank);
  snprintf(want, sizeof want, "host-of-%d", rank);
  if (store_set(c, key, want, strlen(want)) != WEFT_SUCCESS) goto fail;
  if (store_add(c, "joined", 1, nullptr) != WEFT_SUCCESS) goto fail;
  for (int r = 0; r < world; r++) names.push_back("addr/" + std::to_string(r));
  for (auto &n : names) keys.push_back(n.c_str());
  if (store_wait(c, keys.data(), world, kTimeoutMs) != WEFT_SUCCESS) goto fail;
  for (int r = 0; r < world; r++) {
    snprintf(want, sizeof want, "host-of-%d", r);
    if (store_get(c, keys[r], buf, sizeof buf, &len, kTimeoutMs) != WEFT_SUCCESS) goto fail;
    if (std::string(buf, len) != want) {
      *error = "rank " + std::to_string(rank) + " read " + std::string(buf, len) + " for " + want;
      store_close(c);
      return;
    }
  }
  store_close(c);
  return;
fail:
  *error = "rank " + std::to_string(rank) + ": " + err_last();
  store_close(c);
}

class StoreWorldTest : public StoreTest, public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override { StartServer(GetParam()); }
};

TEST_P(StoreWorldTest, ThreadsRendezvous) {
  int world = GetParam();
  std::vector<std::string> errors(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; r++) ranks.emplace_back(Rendezvous, port_, r, world, &errors[r]);
  for (auto &t : ranks) t.join();
  for (const auto &e : errors) EXPECT_EQ(e, "");
  store_client_t *c;
  ASSERT_EQ(Connect(0, &c, kJob, world), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(GetString(c, "joined"), std::to_string(world));
  store_close(c);
}

TEST_P(StoreWorldTest, ForkedProcessesRendezvous) {
  int world = GetParam();
  std::vector<pid_t> kids;
  for (int r = 1; r < world; r++) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::string error;
      Rendezvous(port_, r, world, &error);
      if (!error.empty()) fprintf(stderr, "%s\n", error.c_str());
      _exit(error.empty() ? 0 : 1);  // no gtest teardown in the child
    }
    kids.push_back(pid);
  }
  std::string error;
  Rendezvous(port_, 0, world, &error);
  EXPECT_EQ(error, "");
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, StoreWorldTest, ::testing::Values(1, 2, 4, 16));

// ---- Waiting and timeouts -----------------------------------------------------------------

TEST_F(StoreTest, GetBlocksUntilLaterSet) {
  std::string got;
  long long waited = 0;
  std::thread getter([&] {
    store_client_t *c;
    ASSERT_EQ(Connect(1, &c), WEFT_SUCCESS) << err_last();
    auto start = Clock::now();
    got = GetString(c, "late", kTimeoutMs);
    waited = MsSince(start);
    store_close(c);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  store_client_t *c;
  ASSERT_EQ(Connect(0, &c), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(store_set(c, "late", "now", 3), WEFT_SUCCESS) << err_last();
  getter.join();
  EXPECT_EQ(got, "now");
  EXPECT_GE(waited, 200);
  EXPECT_LT(waited, kTimeoutMs);
  store_close(c);
}

TEST_F(StoreTest, WaitWakesOnAdd) {
  std::thread adder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    store_client_t *c;
    ASSERT_EQ(Connect(1, &c), WEFT_SUCCESS) << err_last();
    ASSERT_EQ(store_add(c, "counter", 1, nullptr), WEFT_SUCCESS) << err_last();
    store_close(c);
  });
  store_client_t *c;
  ASSERT_EQ(Connect(0, &c), WEFT_SUCCESS) << err_last();
  const char *keys[] = {"counter"};
  EXPECT_EQ(store_wait(c, keys, 1, kTimeoutMs), WEFT_SUCCESS) << err_last();
  adder.join();
  store_close(c);
}

TEST_F(StoreTest, GetTimeoutNamesKeyAndClientStaysUsable) {
  store_client_t *c;
  ASSERT_EQ(Connect(0, &c), WEFT_SUCCESS) << err_last();
  char buf[8];
  size_t len;
  auto start = Clock::now();
  EXPECT_EQ(store_get(c, "never/set", buf, sizeof buf, &len, 200), WEFT_ERR_TIMEOUT);
  long long ms = MsSince(start);
  EXPECT_GE(ms, 150);
  EXPECT_LT(ms, 2000);
  EXPECT_MSG_HAS("store get 'never/set' (master at 127.0.0.1:" + std::to_string(port_) +
                 "): key not set within 200 ms");
  ASSERT_EQ(store_set(c, "k", "v", 1), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(GetString(c, "k"), "v");
  store_close(c);
}

TEST_F(StoreTest, WaitTimeoutNamesMissingKeys) {
  store_client_t *c;
  ASSERT_EQ(Connect(0, &c), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(store_set(c, "here", "1", 1), WEFT_SUCCESS);
  const char *keys[] = {"here", "gone/1", "gone/2"};
  EXPECT_EQ(store_wait(c, keys, 3, 200), WEFT_ERR_TIMEOUT);
  EXPECT_MSG_HAS("2 of 3 keys not set within 200 ms: 'gone/1', 'gone/2'");
  EXPECT_FALSE(Contains(err_last(), "'here'"));
  EXPECT_EQ(store_wait(c, keys, 1, 200), WEFT_SUCCESS) << err_last();
  store_close(c);
}

TEST_F(StoreTest, UnreachableMasterFailsWithinTimeout) {
  store_server_stop(server_);
  server_ = nullptr;  // nobody listens on port_ any more
  store_identity_t id = {kJob, 4, 2, nullptr};
  net_addr_t a = Addr("127.0.0.1", port_);
  store_client_t *c = nullptr;
  auto start = Clock::now();
  EXPECT_EQ(store_connect(&a, &id, 500, &c), WEFT_ERR_TIMEOUT);
  long long ms = MsSince(start);
  EXPECT_GE(ms, 450);
  EXPECT_LT(ms, 2500);
  EXPECT_MSG_HAS("store: rank 2 cannot reach the master: connect to 127.0.0.1:" +
                 std::to_string(port_) + ": Connection refused (gave up after 500 ms)");
  EXPECT_EQ(c, nullptr);
}

TEST_F(StoreTest, StopWakesParkedClient) {
  weft_result_t res = WEFT_SUCCESS;
  long long waited = 0;
  store_client_t *c;
  ASSERT_EQ(Connect(0, &c), WEFT_SUCCESS) << err_last();
  std::thread getter([&] {
    char buf[8];
    size_t len;
    auto start = Clock::now();
    res = store_get(c, "never", buf, sizeof buf, &len, 30000);
    waited = MsSince(start);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  store_server_stop(server_);
  server_ = nullptr;
  getter.join();
  EXPECT_EQ(res, WEFT_ERR_REMOTE);
  EXPECT_LT(waited, 3000);
  // Broken clients say so instead of hanging.
  EXPECT_EQ(store_set(c, "k", "v", 1), WEFT_ERR_COMM_FAILED);
  EXPECT_MSG_HAS("unusable after an earlier error");
  store_close(c);
}

// ---- Refusals -----------------------------------------------------------------------------

TEST_F(StoreTest, ForeignJobIsRefused) {
  store_client_t *c = nullptr;
  EXPECT_EQ(Connect(1, &c, 0xdef), WEFT_ERR_MISMATCH);
  EXPECT_MSG_HAS("master at 127.0.0.1:" + std::to_string(port_) +
                 " serves job 0x0000000000000abc; this process belongs to job "
                 "0x0000000000000def: is another job using this MASTER_PORT?");
  EXPECT_EQ(c, nullptr);
  ExpectStoreWorks("after-foreign-job");
}

TEST_F(StoreTest, WrongWorldSizeIsRefused) {
  store_client_t *c = nullptr;
  EXPECT_EQ(Connect(1, &c, kJob, 8), WEFT_ERR_MISMATCH);
  EXPECT_MSG_HAS("master at 127.0.0.1:" + std::to_string(port_) +
                 " expects world size 4, this rank says 8");
}

// ---- Job failure ---------------------------------------------------------------------------

// Parks a GET of a key nobody sets on `c` in a thread; Join() returns its result and wait.
struct ParkedGet {
  weft_result_t res = WEFT_SUCCESS;
  std::string msg;
  long long waited = 0;
  std::thread t;
  explicit ParkedGet(store_client_t *c) {
    t = std::thread([this, c] {
      char buf[8];
      size_t len;
      auto start = Clock::now();
      res = store_get(c, "never", buf, sizeof buf, &len, 30000);
      msg = err_last();
      waited = MsSince(start);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  void Join() { t.join(); }
};

TEST_F(StoreTest, FailAnswersParkedAndLaterRequestsWithTheFirstMessage) {
  store_client_t *a, *b, *c;
  ASSERT_EQ(Connect(0, &a), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(Connect(1, &b), WEFT_SUCCESS) << err_last();
  ParkedGet parked(a);
  ASSERT_EQ(store_fail(b, WEFT_ERR_MISMATCH, "rank 1 is claimed twice"), WEFT_SUCCESS)
      << err_last();
  parked.Join();
  EXPECT_EQ(parked.res, WEFT_ERR_MISMATCH);
  EXPECT_LT(parked.waited, 2000);
  // The failure is the whole message: no key, no master, to read past.
  EXPECT_EQ(parked.msg.rfind("rank 1 is claimed twice", 0), 0u) << parked.msg;
  // Later requests, a second failure and a rank that joins late all hear the first one.
  EXPECT_EQ(store_set(b, "k", "v", 1), WEFT_ERR_MISMATCH);
  EXPECT_MSG_HAS("rank 1 is claimed twice");
  ASSERT_EQ(store_fail(a, WEFT_ERR_TIMEOUT, "something later"), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(Connect(2, &c), WEFT_SUCCESS) << err_last();
  int64_t n;
  EXPECT_EQ(store_add(c, "n", 1, &n), WEFT_ERR_MISMATCH);
  EXPECT_MSG_HAS("rank 1 is claimed twice");
  store_close(a);
  store_close(b);
  store_close(c);
}

TEST_F(StoreTest, WrongWorldSizeFailsTheJobForEveryRankWaiting) {
  store_client_t *a, *bad = nullptr;
  ASSERT_EQ(Connect(0, &a), WEFT_SUCCESS) << err_last();
  ParkedGet parked(a);
  EXPECT_EQ(Connect(2, &bad, kJob, 3), WEFT_ERR_MISMATCH);
  EXPECT_MSG_HAS("expects world size 4, this rank says 3");
  parked.Join();
  EXPECT_EQ(parked.res, WEFT_ERR_MISMATCH);
  EXPECT_LT(parked.waited, 2000);
  EXPECT_TRUE(
      Contains(parked.msg, "rank 2 joined with a world size of 3, but rank 0 (the master) has 4"))
      << parked.msg;
  store_close(a);
}

TEST_F(StoreTest, AnotherJobNeverFailsOurs) {
  store_client_t *a, *stranger = nullptr;
  ASSERT_EQ(Connect(0, &a), WEFT_SUCCESS) << err_last();
  // Another job on this port, with another world size too: refused for its job id alone.
  EXPECT_EQ(Connect(1, &stranger, 0xdef, 8), WEFT_ERR_MISMATCH);
  EXPECT_MSG_HAS("serves job 0x0000000000000abc");
  ASSERT_EQ(store_set(a, "still", "ok", 2), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(GetString(a, "still"), "ok");
  store_close(a);
}

TEST_F(StoreTest, RankOutOfRangeIsRefused) {
  store_client_t *c = nullptr;
  EXPECT_EQ(Connect(4, &c), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_MSG_HAS("refused rank 4: ranks of a world of size 4 are 0..3");
  EXPECT_EQ(Connect(-1, &c), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_MSG_HAS("refused rank -1");
}

TEST_F(StoreTest, GarbageBytesAreDroppedAndStoreKeepsServing) {
  // A connection that sends half a header and then sits there must not block anyone.
  int idle = RawConnect();
  ASSERT_EQ(net_send_all(idle, "WFST\x01", 5, 1000), WEFT_SUCCESS);
  std::mt19937 rng(12345);
  for (int round = 0; round < 5; round++) {
    std::vector<unsigned char> junk(40 + round * 300);
    for (auto &b : junk) b = (unsigned char)rng();
    junk[0] = 'G';  // never the magic
    int fd = RawConnect();
    ASSERT_EQ(net_send_all(fd, junk.data(), junk.size(), 1000), WEFT_SUCCESS);
    ExpectDropped(fd);
    close(fd);
  }
  ExpectStoreWorks("after-garbage");
  close(idle);
}

TEST_F(StoreTest, RequestBeforeHelloIsDropped) {
  int fd = RawConnect();
  size_t total;
  uint8_t *msg = store_msg_build(STORE_SET, "k", 1, "v", 1, 0, 0, 0, &total);
  ASSERT_EQ(net_send_all(fd, msg, total, 1000), WEFT_SUCCESS);
  free(msg);
  ExpectDropped(fd);
  close(fd);
  ExpectStoreWorks("after-no-hello");
}

TEST_F(StoreTest, OversizedLengthIsDropped) {
  int fd = RawConnect();
  store_identity_t id = {kJob, 4, 1, nullptr};
  uint8_t hello[STORE_HELLO_SIZE];
  store_hello_encode(&id, hello);
  size_t total;
  uint8_t *msg = store_msg_build(STORE_HELLO, nullptr, 0, hello, sizeof hello, 0, 0, 0, &total);
  ASSERT_EQ(net_send_all(fd, msg, total, 1000), WEFT_SUCCESS);
  free(msg);
  uint8_t reply[STORE_HDR_SIZE + STORE_HELLO_SIZE];
  ASSERT_EQ(net_recv_all(fd, reply, sizeof reply, 1000), WEFT_SUCCESS) << err_last();
  store_hdr_t h = {STORE_MAGIC, STORE_VERSION, STORE_SET, 1, 0xffffffffu, 0, 0, 0};
  uint8_t raw[STORE_HDR_SIZE];
  store_hdr_encode(&h, raw);
  ASSERT_EQ(net_send_all(fd, raw, sizeof raw, 1000), WEFT_SUCCESS);
  ExpectDropped(fd);
  close(fd);
  ExpectStoreWorks("after-oversized");
}

TEST_F(StoreTest, WrongVersionHelloGetsTheServersVersion) {
  int fd = RawConnect();
  store_identity_t id = {kJob, 4, 1, nullptr};
  uint8_t buf[STORE_HDR_SIZE + STORE_HELLO_SIZE];
  store_hdr_t h = {STORE_MAGIC, 99, STORE_HELLO, 0, STORE_HELLO_SIZE, 0, 0, 0};
  store_hdr_encode(&h, buf);
  store_hello_encode(&id, buf + STORE_HDR_SIZE);
  ASSERT_EQ(net_send_all(fd, buf, sizeof buf, 1000), WEFT_SUCCESS);
  uint8_t raw[STORE_HDR_SIZE];
  ASSERT_EQ(net_recv_all(fd, raw, sizeof raw, 2000), WEFT_SUCCESS) << err_last();
  store_hdr_decode(raw, &h);
  EXPECT_EQ(h.magic, STORE_MAGIC);
  EXPECT_EQ(h.version, STORE_VERSION);
  EXPECT_EQ(h.type, STORE_REPLY);
  EXPECT_EQ(h.status, (uint32_t)STORE_BAD_VERSION);
  EXPECT_EQ(h.arg, STORE_VERSION);
  ExpectDropped(fd);
  close(fd);
  ExpectStoreWorks("after-wrong-version");
}

// A stand-in master that answers the first request with `reply`.
class FakeMaster {
 public:
  explicit FakeMaster(std::string reply) {
    net_addr_t a = Addr("127.0.0.1", 0), bound;
    EXPECT_EQ(net_listen(&a, 1, &lfd_, &bound), WEFT_SUCCESS) << err_last();
    addr_ = bound;
    thread_ = std::thread([this, reply] {
      int fd;
      if (net_accept(lfd_, 5000, &fd) != WEFT_SUCCESS) return;
      uint8_t hello[STORE_HDR_SIZE + STORE_HELLO_SIZE];
      if (net_recv_all(fd, hello, sizeof hello, 5000) == WEFT_SUCCESS)
        net_send_all(fd, reply.data(), reply.size(), 5000);
      char b;
      net_recv_all(fd, &b, 1, 5000);  // until the client hangs up
      close(fd);
    });
  }
  ~FakeMaster() {
    thread_.join();
    close(lfd_);
  }
  net_addr_t addr_;

 private:
  int lfd_ = -1;
  std::thread thread_;
};

TEST(StoreClientTest, OtherProtocolVersionIsNamed) {
  store_hdr_t h = {STORE_MAGIC, 99, STORE_REPLY, 0, 0, 99, 0, STORE_BAD_VERSION};
  std::string reply(STORE_HDR_SIZE, '\0');
  store_hdr_encode(&h, (uint8_t *)&reply[0]);
  FakeMaster master(reply);
  store_identity_t id = {kJob, 4, 1, nullptr};
  store_client_t *c = nullptr;
  EXPECT_EQ(store_connect(&master.addr_, &id, 2000, &c), WEFT_ERR_MISMATCH);
  EXPECT_MSG_HAS("speaks store protocol version 99, this process speaks version " +
                 std::to_string(STORE_VERSION));
  EXPECT_EQ(c, nullptr);
}

TEST(StoreClientTest, SomethingElseOnMasterPortIsNamed) {
  FakeMaster master("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
  store_identity_t id = {kJob, 4, 1, nullptr};
  store_client_t *c = nullptr;
  EXPECT_EQ(store_connect(&master.addr_, &id, 2000, &c), WEFT_ERR_REMOTE);
  EXPECT_MSG_HAS("not the weft store protocol");
  EXPECT_MSG_HAS("is another service listening on MASTER_PORT?");
}

TEST_F(StoreTest, PortInUseNamesMasterPort) {
  store_identity_t id = {kJob, 4, 0, nullptr};
  store_server_t *second = nullptr;
  EXPECT_EQ(store_server_start(port_, &id, &second), WEFT_ERR_SYSTEM);
  EXPECT_MSG_HAS("store: cannot serve on MASTER_PORT " + std::to_string(port_));
  EXPECT_MSG_HAS("address already in use");
  EXPECT_EQ(second, nullptr);
}

// ---- Addresses ----------------------------------------------------------------------------

TEST_F(StoreTest, Ipv6Loopback) {
  if (!HaveIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback";
  store_client_t *c;
  ASSERT_EQ(Connect(1, &c, kJob, 4, "::1"), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(store_set(c, "v6", "yes", 3), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(GetString(c, "v6"), "yes");
  store_close(c);
}

TEST_F(StoreTest, Localhost) {
  store_client_t *c;
  ASSERT_EQ(Connect(1, &c, kJob, 4, "localhost"), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(store_set(c, "name", "localhost", 9), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(GetString(c, "name"), "localhost");
  store_close(c);
}

}  // namespace
