// tcp_partial_test.cc -- the TCP transport's batched sendmsg/recvmsg when the kernel takes only
// part of a batch: socket buffers of 16 KiB make every call move a fraction of what is queued (a
// write that ends inside a message, a read that ends inside another), over one lane and over three
// striped ones. (Not smaller: at 4 KiB the receive window stays below loopback's 64 KiB segment
// and the kernel stalls the stream on its persist timer, for seconds, whatever weft does.) Every
// byte must arrive where it belongs. And a peer that goes away in the middle of a batch fails the
// other side's progress with an error naming that peer, in bounded time, sending or receiving.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "common/config.h"
#include "common/error.h"
#include "common/net.h"
#include "transport/transport.h"
}

namespace {

double Now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Rank {
  weft_config_t cfg;
  transport_t *t = nullptr;
  net_addr_t addr;
  conn_t *c = nullptr;
};

// Rank `rank` of 2 on 127.0.0.1 with `nsocks` lanes and socket buffers of `sockbuf` bytes.
void Create(Rank &r, int rank, int nsocks, int sockbuf) {
  ASSERT_EQ(config_load(&r.cfg, nullptr, nullptr), WEFT_SUCCESS) << err_last();
  r.cfg.nsocks = nsocks;
  r.cfg.sockbuf_bytes = sockbuf;
  // A send staging pool (lend_send) below the socket buffer, which the transport would otherwise
  // raise the send side to.
  r.cfg.shm_slots = 2;
  r.cfg.slice_bytes = 4096;
  r.cfg.connect_timeout_ms = 10000;
  r.cfg.job_token[0] = '\0';
  net_addr_t lo;
  ASSERT_EQ(net_resolve("127.0.0.1", 0, &lo), WEFT_SUCCESS);
  transport_params_t p = {rank, 2, 0x9a27, &r.cfg, &lo, nullptr};
  ASSERT_EQ(tcp_transport_ops.create(&p, &r.t), WEFT_SUCCESS) << err_last();
  tcp_transport_ops.local_addr(r.t, &r.addr);
}

class TcpPartialTest : public ::testing::TestWithParam<int> {
 protected:
  void Connect(int nsocks, int sockbuf) {
    Create(r0_, 0, nsocks, sockbuf);
    Create(r1_, 1, nsocks, sockbuf);
    weft_result_t res1 = WEFT_ERR_INTERNAL;
    std::thread t1([&] { res1 = tcp_transport_ops.connect(r1_.t, 0, &r0_.addr, &r1_.c); });
    ASSERT_EQ(tcp_transport_ops.connect(r0_.t, 1, &r1_.addr, &r0_.c), WEFT_SUCCESS) << err_last();
    t1.join();
    ASSERT_EQ(res1, WEFT_SUCCESS);
  }
  void TearDown() override {
    for (Rank *r : {&r0_, &r1_}) {
      if (r->c) tcp_transport_ops.close(r->c, 0);
      if (r->t) tcp_transport_ops.destroy(r->t);
    }
  }
  // Progresses `a` and `b` until every xfer in `xs` completes or one of them fails; returns the
  // first failure, and counts the progress calls that moved bytes.
  weft_result_t Drive(conn_t *a, conn_t *b, const std::vector<xfer_t *> &xs, int *moves) {
    double end = Now() + 20;
    for (int i = 0; Now() < end; i++) {
      bool done = true;
      for (const xfer_t *x : xs) done = done && x->complete;
      if (done) return WEFT_SUCCESS;
      for (conn_t *c : {a, b}) {
        if (!c) continue;
        int progressed = 0;
        weft_result_t res = tcp_transport_ops.progress(c, &progressed);
        if (res != WEFT_SUCCESS) return res;
        *moves += progressed;
      }
      if (i % 64 == 63) usleep(50);
    }
    return WEFT_ERR_TIMEOUT;
  }
  Rank r0_, r1_;
};

// Sizes that end inside iovecs and across the striping threshold (64 KiB a lane).
const size_t kSizes[] = {1, 100, 4095, 65535, 65536 * 3 + 1, 200000, 1 << 20, 7, (1 << 20) + 7};

TEST_P(TcpPartialTest, BatchesSplitAnywhereArriveIntact) {
  int nsocks = GetParam();
  Connect(nsocks, 16384);  // the kernel doubles it: 32 KiB a socket, a few KiB per call
  size_t n = sizeof kSizes / sizeof kSizes[0];
  std::vector<std::string> out(n), in(n);
  std::vector<xfer_t> sx(n), rx(n);
  std::vector<xfer_t *> all;
  for (size_t i = 0; i < n; i++) {
    out[i].resize(kSizes[i]);
    for (size_t k = 0; k < kSizes[i]; k++) out[i][k] = (char)(k * 131 + i * 17 + k / 251);
    in[i].assign(kSizes[i], '\0');
  }
  // Every message posted before any progress: each sendmsg and recvmsg gathers several of them.
  for (size_t i = 0; i < n; i++) {
    ASSERT_EQ(tcp_transport_ops.post_send(r0_.c, out[i].data(), kSizes[i], &sx[i]), WEFT_SUCCESS);
    ASSERT_EQ(tcp_transport_ops.post_recv(r1_.c, &in[i][0], kSizes[i], &rx[i]), WEFT_SUCCESS);
    all.push_back(&sx[i]);
    all.push_back(&rx[i]);
  }
  int moves = 0;
  ASSERT_EQ(Drive(r0_.c, r1_.c, all, &moves), WEFT_SUCCESS) << err_last();
  for (size_t i = 0; i < n; i++) EXPECT_TRUE(in[i] == out[i]) << "message " << i << " of " << n;
  // 2.4 MiB through buffers of a few KiB: many partial calls, not a handful of whole ones.
  EXPECT_GT(moves, 20);
}

// Both directions at once with a full batch each way: neither side's partial sends stall the
// other's receives.
TEST_P(TcpPartialTest, BothDirectionsAtOnce) {
  Connect(GetParam(), 16384);
  const size_t len = (1 << 20) + 3;
  std::string a(len, '\0'), b(len, '\0'), at(len, '\0'), bt(len, '\0');
  for (size_t k = 0; k < len; k++) {
    a[k] = (char)(k * 7 + 1);
    b[k] = (char)(k * 13 + 5);
  }
  xfer_t s0{}, s1{}, q0{}, q1{};
  ASSERT_EQ(tcp_transport_ops.post_send(r0_.c, a.data(), len, &s0), WEFT_SUCCESS);
  ASSERT_EQ(tcp_transport_ops.post_send(r1_.c, b.data(), len, &s1), WEFT_SUCCESS);
  ASSERT_EQ(tcp_transport_ops.post_recv(r1_.c, &at[0], len, &q1), WEFT_SUCCESS);
  ASSERT_EQ(tcp_transport_ops.post_recv(r0_.c, &bt[0], len, &q0), WEFT_SUCCESS);
  int moves = 0;
  ASSERT_EQ(Drive(r0_.c, r1_.c, {&s0, &s1, &q0, &q1}, &moves), WEFT_SUCCESS) << err_last();
  EXPECT_TRUE(at == a);
  EXPECT_TRUE(bt == b);
}

// Rank 1 takes part of a batch and goes away (a reset, as when its process is killed with
// bytes unread): rank 0's sends fail naming rank 1 instead of waiting.
TEST_P(TcpPartialTest, PeerGoneMidBatchFailsTheSenderNamingIt) {
  Connect(GetParam(), 16384);
  const size_t len = 1 << 20;
  std::string a(len, 'x'), part(len, '\0');
  xfer_t s[4] = {}, q{};
  for (xfer_t &x : s)
    ASSERT_EQ(tcp_transport_ops.post_send(r0_.c, a.data(), len, &x), WEFT_SUCCESS);
  ASSERT_EQ(tcp_transport_ops.post_recv(r1_.c, &part[0], len, &q), WEFT_SUCCESS);
  int moves = 0;
  ASSERT_EQ(Drive(r0_.c, r1_.c, {&q}, &moves), WEFT_SUCCESS) << err_last();
  tcp_transport_ops.close(r1_.c, 1);
  r1_.c = nullptr;
  weft_result_t res = Drive(r0_.c, nullptr, {&s[0], &s[1], &s[2], &s[3]}, &moves);
  EXPECT_EQ(res, WEFT_ERR_REMOTE);
  EXPECT_NE(std::string(err_last()).find("rank 1"), std::string::npos) << err_last();
}

// Rank 0 sends part of what rank 1 waits for and goes away: rank 1's receive fails naming rank 0.
TEST_P(TcpPartialTest, PeerGoneMidBatchFailsTheReceiverNamingIt) {
  Connect(GetParam(), 16384);
  const size_t len = 1 << 20;
  std::string a(len, 'y'), got(2 * len, '\0');
  xfer_t s{}, q[2] = {};
  ASSERT_EQ(tcp_transport_ops.post_send(r0_.c, a.data(), len, &s), WEFT_SUCCESS);
  ASSERT_EQ(tcp_transport_ops.post_recv(r1_.c, &got[0], len, &q[0]), WEFT_SUCCESS);
  ASSERT_EQ(tcp_transport_ops.post_recv(r1_.c, &got[len], len, &q[1]), WEFT_SUCCESS);
  int moves = 0;
  ASSERT_EQ(Drive(r0_.c, r1_.c, {&s, &q[0]}, &moves), WEFT_SUCCESS) << err_last();
  tcp_transport_ops.close(r0_.c, 0);
  r0_.c = nullptr;
  weft_result_t res = Drive(r1_.c, nullptr, {&q[1]}, &moves);
  EXPECT_EQ(res, WEFT_ERR_REMOTE);
  EXPECT_NE(std::string(err_last()).find("rank 0"), std::string::npos) << err_last();
  EXPECT_FALSE(q[1].complete);
}

INSTANTIATE_TEST_SUITE_P(Lanes, TcpPartialTest, ::testing::Values(1, 3),
                         [](const ::testing::TestParamInfo<int> &i) {
                           return std::to_string(i.param) + "lanes";
                         });

}  // namespace
