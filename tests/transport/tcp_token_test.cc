// tcp_token_test.cc -- TCP peer connections with a job token: while rank 1 waits for rank 0 to
// connect, a stranger reaches its listening port with no token, a wrong token, or a valid
// connection's recorded bytes; rank 1 refuses it with a line on stderr and still gets rank 0's
// real connection, over which a message then arrives intact.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>

extern "C" {
#include "common/config.h"
#include "common/error.h"
#include "common/hmac.h"
#include "common/net.h"
#include "transport/tcp_wire.h"
#include "transport/transport.h"
}
#include "tests/transport/tcp_pair.h"

namespace {

const uint64_t kComm = 0x5eed;
const char kToken[] = "rank token";

bool Contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

// Rank 1 waits for rank 0 while `stranger` acts on rank 1's port; then rank 0 connects to
// `rank0_target` (rank 1, or a proxy in front of it). Returns rank 1's stderr.
std::string Round(TcpRank &r0, TcpRank &r1, const std::function<void()> &stranger,
                  const net_addr_t &rank0_target, conn_t **c0, conn_t **c1) {
  testing::internal::CaptureStderr();
  weft_result_t res1 = WEFT_ERR_INTERNAL;
  std::thread t1([&] { res1 = tcp_transport_ops.connect(r1.t, 0, &r0.addr, c1); });
  if (stranger) stranger();
  weft_result_t res0 = tcp_transport_ops.connect(r0.t, 1, &rank0_target, c0);
  EXPECT_EQ(res0, WEFT_SUCCESS) << err_last();
  t1.join();
  EXPECT_EQ(res1, WEFT_SUCCESS);
  return testing::internal::GetCapturedStderr();
}

int Dial(const net_addr_t &a) {
  int fd = -1;
  EXPECT_EQ(net_connect(&a, 5000, &fd), WEFT_SUCCESS) << err_last();
  return fd;
}

// Reads until EOF or 3 s: the refusing rank must close a stranger's connection.
bool ClosedByPeer(int fd) {
  char b[256];
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 3000) <= 0) return false;
    ssize_t n = recv(fd, b, sizeof b, 0);
    if (n <= 0) return true;
  }
}

class TcpTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TcpCreate(r0_, 0, kComm, kToken, 10000);
    TcpCreate(r1_, 1, kComm, kToken, 10000);
  }
  void TearDown() override {
    if (c0_) tcp_transport_ops.close(c0_, 0);
    if (c1_) tcp_transport_ops.close(c1_, 0);
    tcp_transport_ops.destroy(r0_.t);
    tcp_transport_ops.destroy(r1_.t);
  }
  void ExpectPeersTalk() {
    ASSERT_NE(c0_, nullptr);
    ASSERT_NE(c1_, nullptr);
    EXPECT_EQ(TcpDeliver(c0_, c1_, "from rank 0"), "from rank 0");
  }
  // A hello as rank 0 would send it, with or without a token flag and a nonce.
  std::string Hello(bool has_token) {
    tcp_hello_t h = {kComm, 0, 1, 0, 1, has_token ? 1 : 0, {0}};
    if (has_token) hmac_random(h.nonce, sizeof h.nonce);
    std::string raw(TCP_HELLO_BYTES, '\0');
    tcp_hello_encode((unsigned char *)&raw[0], &h);
    return raw;
  }
  TcpRank r0_, r1_;
  conn_t *c0_ = nullptr, *c1_ = nullptr;
};

TEST_F(TcpTokenTest, PeersWithTheSameTokenConnect) {
  Round(r0_, r1_, nullptr, r1_.addr, &c0_, &c1_);
  ExpectPeersTalk();
}

TEST_F(TcpTokenTest, StrangerWithoutTokenIsRefused) {
  int32_t status = -1;
  std::string log = Round(
      r0_, r1_,
      [&] {
        int fd = Dial(r1_.addr);
        std::string hello = Hello(false);
        ASSERT_EQ(net_send_all(fd, hello.data(), hello.size(), 5000), WEFT_SUCCESS);
        unsigned char ack[TCP_ACK_BYTES];
        if (net_recv_all(fd, ack, sizeof ack, 5000) == WEFT_SUCCESS) status = tcp_ack_decode(ack);
        EXPECT_TRUE(ClosedByPeer(fd));
        close(fd);
      },
      r1_.addr, &c0_, &c1_);
  EXPECT_EQ(status, TCP_ACK_NO_TOKEN);
  EXPECT_TRUE(Contains(log, "weft rank 1 (listening at 127.0.0.1:")) << log;
  EXPECT_TRUE(Contains(log, "refused a connection from 127.0.0.1:")) << log;
  EXPECT_TRUE(Contains(log, "no job token (this job requires WEFT_JOB_TOKEN)")) << log;
  ExpectPeersTalk();
}

TEST_F(TcpTokenTest, StrangerWithWrongTokenIsRefused) {
  int32_t status = -1;
  std::string log = Round(
      r0_, r1_,
      [&] {
        int fd = Dial(r1_.addr);
        std::string hello = Hello(true);
        ASSERT_EQ(net_send_all(fd, hello.data(), hello.size(), 5000), WEFT_SUCCESS);
        unsigned char ack[TCP_ACK_BYTES + TCP_PROVE_BYTES];
        ASSERT_EQ(net_recv_all(fd, ack, sizeof ack, 5000), WEFT_SUCCESS) << err_last();
        status = tcp_ack_decode(ack);
        // A stranger that ignores the acceptor's MAC and answers with its own guess.
        unsigned char proof[TCP_PROOF_BYTES];
        tcp_ack_encode(proof, TCP_ACK_OK);
        const unsigned char *nc = (const unsigned char *)hello.data() + TCP_HELLO_CONTEXT + 4;
        hmac_challenge("guessed", HMAC_LABEL_CONNECT, hello.data(), TCP_HELLO_CONTEXT, nc,
                       ack + TCP_ACK_BYTES, proof + 8);
        ASSERT_EQ(net_send_all(fd, proof, sizeof proof, 5000), WEFT_SUCCESS);
        EXPECT_TRUE(ClosedByPeer(fd));
        close(fd);
      },
      r1_.addr, &c0_, &c1_);
  EXPECT_EQ(status, TCP_ACK_PROVE);
  EXPECT_TRUE(Contains(log, "refused a connection from 127.0.0.1:")) << log;
  EXPECT_TRUE(Contains(log, ": wrong job token")) << log;
  EXPECT_FALSE(Contains(log, kToken)) << log;
  ExpectPeersTalk();
}

// Relays one connection to `to` and records the first `keep` bytes its client sent.
class RecordingProxy {
 public:
  RecordingProxy(const net_addr_t &to, size_t keep) {
    net_addr_t a, bound;
    EXPECT_EQ(net_resolve("127.0.0.1", 0, &a), WEFT_SUCCESS);
    EXPECT_EQ(net_listen(&a, 1, &lfd_, &bound), WEFT_SUCCESS) << err_last();
    addr_ = bound;
    thread_ = std::thread([this, to, keep] {
      int cfd, sfd;
      if (net_accept(lfd_, 10000, &cfd) != WEFT_SUCCESS) return;
      if (net_connect(&to, 5000, &sfd) != WEFT_SUCCESS) return;
      char buf[4096];
      for (;;) {
        struct pollfd p[2] = {{cfd, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(p, 2, 10000) <= 0) break;
        if (p[0].revents) {
          ssize_t n = recv(cfd, buf, sizeof buf, 0);
          if (n <= 0) break;
          if (sent_.size() < keep) sent_.append(buf, std::min((size_t)n, keep - sent_.size()));
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
  net_addr_t addr_;

 private:
  int lfd_ = -1;
  std::thread thread_;
  std::string sent_;
};

TEST_F(TcpTokenTest, ReplayedHandshakeIsRefused) {
  // Round 1: rank 0's real connection, overheard on the wire.
  RecordingProxy proxy(r1_.addr, TCP_HELLO_BYTES + TCP_PROOF_BYTES);
  Round(r0_, r1_, nullptr, proxy.addr_, &c0_, &c1_);
  ExpectPeersTalk();
  tcp_transport_ops.close(c0_, 0);
  tcp_transport_ops.close(c1_, 0);
  c0_ = c1_ = nullptr;
  std::string recorded = proxy.Finish();
  ASSERT_EQ(recorded.size(), (size_t)(TCP_HELLO_BYTES + TCP_PROOF_BYTES));

  // Round 2: rank 1 waits for a new connection from rank 0; the eavesdropper replays first.
  std::string log = Round(
      r0_, r1_,
      [&] {
        int fd = Dial(r1_.addr);
        ASSERT_EQ(net_send_all(fd, recorded.data(), recorded.size(), 5000), WEFT_SUCCESS);
        EXPECT_TRUE(ClosedByPeer(fd));
        close(fd);
      },
      r1_.addr, &c0_, &c1_);
  EXPECT_TRUE(Contains(log, "refused a connection from 127.0.0.1:")) << log;
  EXPECT_TRUE(Contains(log, ": wrong job token")) << log;
  ExpectPeersTalk();
}

TEST(TcpTokenMismatch, TokenOnOneSideOnlyFailsOnBothEnds) {
  for (int token_on = 0; token_on < 2; token_on++) {
    TcpRank r0, r1;
    TcpCreate(r0, 0, kComm, token_on == 0 ? kToken : nullptr, 10000);
    TcpCreate(r1, 1, kComm, token_on == 1 ? kToken : nullptr, 10000);
    r1.cfg.connect_timeout_ms = 1500;  // rank 1 never gets a peer: let it give up soon
    testing::internal::CaptureStderr();
    conn_t *c0 = nullptr, *c1 = nullptr;
    weft_result_t res1 = WEFT_SUCCESS;
    std::thread t1([&] { res1 = tcp_transport_ops.connect(r1.t, 0, &r0.addr, &c1); });
    err_clear();
    EXPECT_EQ(tcp_transport_ops.connect(r0.t, 1, &r1.addr, &c0), WEFT_ERR_MISMATCH);
    std::string err = err_last();
    t1.join();
    std::string log = testing::internal::GetCapturedStderr();
    EXPECT_EQ(res1, WEFT_ERR_TIMEOUT);
    if (token_on == 0) {
      EXPECT_TRUE(Contains(err, "this rank has a job token but it has none")) << err;
      EXPECT_TRUE(Contains(log, "it has a job token but this rank has none")) << log;
    } else {
      EXPECT_TRUE(Contains(err, "it requires a job token and this rank has none")) << err;
      EXPECT_TRUE(Contains(log, "no job token")) << log;
    }
    tcp_transport_ops.destroy(r0.t);
    tcp_transport_ops.destroy(r1.t);
  }
}

TEST(TcpTokenMismatch, DifferentTokensFailOnBothEnds) {
  TcpRank r0, r1;
  TcpCreate(r0, 0, kComm, "one token", 10000);
  TcpCreate(r1, 1, kComm, "another token", 10000);
  r1.cfg.connect_timeout_ms = 1500;
  testing::internal::CaptureStderr();
  conn_t *c0 = nullptr, *c1 = nullptr;
  weft_result_t res1 = WEFT_SUCCESS;
  std::thread t1([&] { res1 = tcp_transport_ops.connect(r1.t, 0, &r0.addr, &c1); });
  err_clear();
  EXPECT_EQ(tcp_transport_ops.connect(r0.t, 1, &r1.addr, &c0), WEFT_ERR_MISMATCH);
  std::string err = err_last();
  t1.join();
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(Contains(err, "rank 1 at 127.0.0.1:")) << err;
  EXPECT_TRUE(Contains(err, "does not know this job's token")) << err;
  EXPECT_TRUE(Contains(log, "wrong job token")) << log;
  EXPECT_FALSE(Contains(err + log, "one token") || Contains(err + log, "another token"));
  EXPECT_EQ(res1, WEFT_ERR_TIMEOUT);
  tcp_transport_ops.destroy(r0.t);
  tcp_transport_ops.destroy(r1.t);
}

}  // namespace
