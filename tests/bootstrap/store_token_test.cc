// store_token_test.cc -- the store with a job token: strangers without it, with a wrong one or
// replaying a valid client's recorded bytes are refused with a line on the server's stderr,
// while the job's own clients keep working.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "bootstrap/store.h"
#include "bootstrap/store_wire.h"
#include "common/error.h"
#include "common/net.h"

namespace {

const uint64_t kJob = 0x70c;
const int kTimeoutMs = 5000;

bool Contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

net_addr_t Loopback(int port) {
  net_addr_t a;
  EXPECT_EQ(net_resolve("127.0.0.1", port, &a), WEFT_SUCCESS) << err_last();
  return a;
}

class StoreTokenTest : public ::testing::Test {
 protected:
  void Start(const char *token) {
    store_identity_t id = {kJob, 4, 0, token};
    ASSERT_EQ(store_server_start(0, &id, &server_), WEFT_SUCCESS) << err_last();
    port_ = store_server_port(server_);
  }
  void TearDown() override {
    store_close(member_);
    store_server_stop(server_);
  }
  weft_result_t Connect(int rank, const char *token, store_client_t **c, int port = 0) {
    store_identity_t id = {kJob, 4, rank, token};
    net_addr_t a = Loopback(port ? port : port_);
    err_clear();
    return store_connect(&a, &id, kTimeoutMs, c);
  }
  // A member of the job that joined first and must not notice the strangers.
  void JoinMember(const char *token) {
    ASSERT_EQ(Connect(1, token, &member_), WEFT_SUCCESS) << err_last();
    ASSERT_EQ(store_set(member_, "before", "1", 1), WEFT_SUCCESS) << err_last();
  }
  void ExpectMemberStillWorks() {
    ASSERT_EQ(store_set(member_, "after", "2", 1), WEFT_SUCCESS) << err_last();
    char buf[8];
    size_t len = 0;
    ASSERT_EQ(store_get(member_, "before", buf, sizeof buf, &len, 1000), WEFT_SUCCESS)
        << err_last();
    EXPECT_EQ(std::string(buf, len), "1");
  }
  // Refusal lines are written by the server thread; give it a moment after the client's error.
  std::string StopCapture() {
    usleep(200 * 1000);
    return testing::internal::GetCapturedStderr();
  }

  store_server_t *server_ = nullptr;
  store_client_t *member_ = nullptr;
  int port_ = 0;
};

TEST_F(StoreTokenTest, SameTokenJoins) {
  Start("the token");
  JoinMember("the token");
  ExpectMemberStillWorks();
}

TEST_F(StoreTokenTest, StrangerWithoutTokenIsRefused) {
  Start("the token");
  JoinMember("the token");
  testing::internal::CaptureStderr();
  store_client_t *c = nullptr;
  EXPECT_EQ(Connect(2, nullptr, &c), WEFT_ERR_MISMATCH);
  std::string err = err_last(), log = StopCapture();
  EXPECT_TRUE(Contains(err, "requires a job token and this rank has none")) << err;
  EXPECT_TRUE(Contains(log, "weft rank 0 (store on port " + std::to_string(port_) +
                                "): refused a connection from 127.0.0.1:"))
      << log;
  EXPECT_TRUE(Contains(log, "no job token (this job requires WEFT_JOB_TOKEN)")) << log;
  EXPECT_EQ(c, nullptr);
  ExpectMemberStillWorks();
}

TEST_F(StoreTokenTest, StrangerWithWrongTokenIsRefusedAndNeverSeesTheToken) {
  Start("the token");
  JoinMember("the token");
  testing::internal::CaptureStderr();
  store_client_t *c = nullptr;
  EXPECT_EQ(Connect(2, "a guess", &c), WEFT_ERR_MISMATCH);
  std::string err = err_last(), log = StopCapture();
  EXPECT_TRUE(Contains(err, "does not know this job's token")) << err;
  EXPECT_TRUE(Contains(log, "refused a connection from 127.0.0.1:")) << log;
  EXPECT_TRUE(Contains(log, "wrong job token")) << log;
  EXPECT_FALSE(Contains(log + err, "the token")) << log << err;
  EXPECT_FALSE(Contains(log + err, "a guess")) << log << err;
  ExpectMemberStillWorks();
}

TEST_F(StoreTokenTest, TokenOnOneSideOnlyFailsOnBothEnds) {
  Start(nullptr);
  testing::internal::CaptureStderr();
  store_client_t *c = nullptr;
  EXPECT_EQ(Connect(2, "the token", &c), WEFT_ERR_MISMATCH);
  std::string err = err_last(), log = StopCapture();
  EXPECT_TRUE(Contains(err, "this rank has a job token but the master at")) << err;
  EXPECT_TRUE(Contains(log, "it has a job token but this job has none")) << log;
  // And without a token on either side the store works as it always did.
  JoinMember(nullptr);
  ExpectMemberStillWorks();
}

// Relays one client's connection to the server and records what the client sent.
class RecordingProxy {
 public:
  explicit RecordingProxy(int server_port) {
    net_addr_t a = Loopback(0), bound;
    EXPECT_EQ(net_listen(&a, 1, &lfd_, &bound), WEFT_SUCCESS) << err_last();
    port_ = net_addr_port(&bound);
    thread_ = std::thread([this, server_port] {
      int cfd, sfd;
      if (net_accept(lfd_, kTimeoutMs, &cfd) != WEFT_SUCCESS) return;
      net_addr_t s = Loopback(server_port);
      if (net_connect(&s, kTimeoutMs, &sfd) != WEFT_SUCCESS) return;
      char buf[4096];
      for (;;) {
        struct pollfd p[2] = {{cfd, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(p, 2, kTimeoutMs) <= 0) break;
        if (p[0].revents) {
          ssize_t n = recv(cfd, buf, sizeof buf, 0);
          if (n <= 0) break;
          sent_.append(buf, (size_t)n);
          send(sfd, buf, (size_t)n, MSG_NOSIGNAL);
        }
        if (p[1].revents) {
          ssize_t n = recv(sfd, buf, sizeof buf, 0);
          if (n <= 0) break;
          send(cfd, buf, (size_t)n, MSG_NOSIGNAL);
        }
      }
      close(cfd);
      close(sfd);
    });
  }
  std::string Finish() {
    thread_.join();
    close(lfd_);
    return sent_;
  }
  int port_ = 0;

 private:
  int lfd_ = -1;
  std::thread thread_;
  std::string sent_;
};

TEST_F(StoreTokenTest, ReplayedHandshakeOfAValidClientIsRefused) {
  Start("the token");
  JoinMember("the token");
  // A valid client, overheard on the wire, sets a key and leaves.
  RecordingProxy proxy(port_);
  store_client_t *c = nullptr;
  ASSERT_EQ(Connect(2, "the token", &c, proxy.port_), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(store_set(c, "victim", "old", 3), WEFT_SUCCESS) << err_last();
  store_close(c);
  std::string recorded = proxy.Finish();
  ASSERT_GT(recorded.size(), (size_t)STORE_HDR_SIZE * 3);
  ASSERT_EQ(store_set(member_, "victim", "new", 3), WEFT_SUCCESS) << err_last();

  // The eavesdropper replays every byte the valid client sent.
  testing::internal::CaptureStderr();
  net_addr_t a = Loopback(port_);
  int fd = -1;
  ASSERT_EQ(net_connect(&a, kTimeoutMs, &fd), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(net_send_all(fd, recorded.data(), recorded.size(), kTimeoutMs), WEFT_SUCCESS);
  // The server challenges with a fresh nonce, then refuses the stale proof.
  uint8_t raw[STORE_HDR_SIZE];
  store_hdr_t h;
  ASSERT_EQ(net_recv_all(fd, raw, sizeof raw, kTimeoutMs), WEFT_SUCCESS) << err_last();
  store_hdr_decode(raw, &h);
  EXPECT_EQ(h.status, (uint32_t)STORE_PROVE);
  std::string skip(h.val_len, '\0');
  ASSERT_EQ(net_recv_all(fd, &skip[0], skip.size(), kTimeoutMs), WEFT_SUCCESS);
  ASSERT_EQ(net_recv_all(fd, raw, sizeof raw, kTimeoutMs), WEFT_SUCCESS) << err_last();
  store_hdr_decode(raw, &h);
  EXPECT_EQ(h.status, (uint32_t)STORE_BAD_TOKEN);
  // Then nothing but EOF: the replayed SET was never served.
  char b;
  weft_result_t res;
  do {
    res = net_recv_all(fd, &b, 1, 2000);
  } while (res == WEFT_SUCCESS);
  EXPECT_EQ(res, WEFT_ERR_REMOTE) << err_last();
  close(fd);
  std::string log = StopCapture();
  EXPECT_TRUE(Contains(log, "wrong job token")) << log;

  char buf[8];
  size_t len = 0;
  ASSERT_EQ(store_get(member_, "victim", buf, sizeof buf, &len, 1000), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(std::string(buf, len), "new");
  ExpectMemberStillWorks();
}

TEST_F(StoreTokenTest, NothingIsServedBeforeTheProof) {
  Start("the token");
  JoinMember("the token");
  net_addr_t a = Loopback(port_);
  int fd = -1;
  ASSERT_EQ(net_connect(&a, kTimeoutMs, &fd), WEFT_SUCCESS) << err_last();
  store_identity_t id = {kJob, 4, 2, nullptr};
  uint8_t hello[STORE_HELLO_SIZE + STORE_NONCE_SIZE] = {0};
  store_hello_encode(&id, hello);
  size_t total;
  uint8_t *msg = store_msg_build(STORE_HELLO, nullptr, 0, hello, sizeof hello, 0, 0, 0, &total);
  ASSERT_EQ(net_send_all(fd, msg, total, 1000), WEFT_SUCCESS);
  free(msg);
  msg = store_msg_build(STORE_SET, "before", 6, "X", 1, 0, 0, 0, &total);
  ASSERT_EQ(net_send_all(fd, msg, total, 1000), WEFT_SUCCESS);
  free(msg);
  uint8_t raw[STORE_HDR_SIZE];
  ASSERT_EQ(net_recv_all(fd, raw, sizeof raw, kTimeoutMs), WEFT_SUCCESS) << err_last();
  store_hdr_t h;
  store_hdr_decode(raw, &h);
  EXPECT_EQ(h.status, (uint32_t)STORE_PROVE);
  // The SET in place of AUTH drops the connection.
  char b[256];
  weft_result_t res;
  do {
    res = net_recv_all(fd, b, 1, 2000);
  } while (res == WEFT_SUCCESS);
  EXPECT_EQ(res, WEFT_ERR_REMOTE) << err_last();
  close(fd);
  ExpectMemberStillWorks();
}

// With a token, a hello is not yet proof of anything: a stranger's hello with another world size
// must not fail the job, while a member's (after AUTH) does.
TEST_F(StoreTokenTest, OnlyAnAuthenticatedWorldSizeMismatchFailsTheJob) {
  Start("the token");
  JoinMember("the token");
  testing::internal::CaptureStderr();
  store_identity_t forged = {kJob, 8, 2, "a guess"};
  net_addr_t a = Loopback(port_);
  store_client_t *c = nullptr;
  EXPECT_EQ(store_connect(&a, &forged, kTimeoutMs, &c), WEFT_ERR_MISMATCH);
  EXPECT_TRUE(Contains(err_last(), "does not know this job's token")) << err_last();
  StopCapture();
  ExpectMemberStillWorks();

  store_identity_t misfit = {kJob, 8, 2, "the token"};
  EXPECT_EQ(store_connect(&a, &misfit, kTimeoutMs, &c), WEFT_ERR_MISMATCH);
  EXPECT_TRUE(Contains(err_last(), "expects world size 4, this rank says 8")) << err_last();
  EXPECT_EQ(store_set(member_, "after", "2", 1), WEFT_ERR_MISMATCH);
  EXPECT_TRUE(
      Contains(err_last(), "rank 2 joined with a world size of 8, but rank 0 (the master) has 4"))
      << err_last();
}

}  // namespace
