// tcp_flood_test.cc -- strangers on a rank's listening port: while rank 1 waits for rank 0, a
// helper holds 1,100 connections to rank 1's port that never finish a hello (idle, or dribbling a
// partial hello byte by byte), and this process (rank 1's) runs at a limit of 1024 descriptors.
// Rank 0's real connection still gets through within a few seconds, with and without a job
// token, and a message then crosses it intact.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <thread>

extern "C" {
#include "common/config.h"
#include "common/error.h"
#include "common/net.h"
#include "transport/tcp_wire.h"
#include "transport/transport.h"
}
#include "tests/harness/flood.h"
#include "tests/transport/tcp_pair.h"

namespace {

const uint64_t kComm = 0xf100d;
const int kStrangers = 1100;

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

class TcpFloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    getrlimit(RLIMIT_NOFILE, &saved_);
    struct rlimit rl = saved_;
    rl.rlim_cur = rl.rlim_max < 1024 ? rl.rlim_max : 1024;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
  }
  void TearDown() override {
    flood_stop(&flood_);
    if (c0_) tcp_transport_ops.close(c0_, 0);
    if (c1_) tcp_transport_ops.close(c1_, 0);
    if (r0_.t) tcp_transport_ops.destroy(r0_.t);
    if (r1_.t) tcp_transport_ops.destroy(r1_.t);
    setrlimit(RLIMIT_NOFILE, &saved_);
  }
  // Floods rank 1's port, then connects the ranks; returns rank 1's wait in seconds.
  double Run(FloodKind kind, const char *token) {
    TcpCreate(r0_, 0, kComm, token, 8000);
    TcpCreate(r1_, 1, kComm, token, 8000);
    // A hello's first bytes (magic and version) and a little more, never completed.
    tcp_hello_t h = {kComm, 0, 1, 0, 1, 0, {0}};
    unsigned char raw[TCP_HELLO_BYTES];
    tcp_hello_encode(raw, &h);
    flood_ = flood_start(net_addr_port(&r1_.addr), kStrangers, kind, raw, 12);
    EXPECT_GT(flood_.pid, 0);
    EXPECT_GE(flood_wait_ready(&flood_, 10000), 1000);
    if (kind == kFloodSlow) usleep(300 * 1000);  // a few bytes in on every connection
    double t0 = now_s();
    weft_result_t res1 = WEFT_ERR_INTERNAL;
    std::thread t1([&] { res1 = tcp_transport_ops.connect(r1_.t, 0, &r0_.addr, &c1_); });
    weft_result_t res0 = tcp_transport_ops.connect(r0_.t, 1, &r1_.addr, &c0_);
    EXPECT_EQ(res0, WEFT_SUCCESS) << err_last();
    t1.join();
    double took = now_s() - t0;
    EXPECT_EQ(res1, WEFT_SUCCESS);
    if (c0_ && c1_) {
      EXPECT_EQ(TcpDeliver(c0_, c1_, "through the flood"), "through the flood");
    }
    return took;
  }
  struct rlimit saved_;
  Flood flood_;
  TcpRank r0_, r1_;
  conn_t *c0_ = nullptr, *c1_ = nullptr;
};

TEST_F(TcpFloodTest, IdleStrangersDoNotHoldUpAPeer) { EXPECT_LT(Run(kFloodIdle, nullptr), 4.0); }

TEST_F(TcpFloodTest, IdleStrangersDoNotHoldUpAPeerWithAToken) {
  EXPECT_LT(Run(kFloodIdle, "flood token"), 4.0);
}

TEST_F(TcpFloodTest, SlowStrangersDoNotHoldUpAPeer) { EXPECT_LT(Run(kFloodSlow, nullptr), 4.0); }

TEST_F(TcpFloodTest, SlowStrangersDoNotHoldUpAPeerWithAToken) {
  EXPECT_LT(Run(kFloodSlow, "flood token"), 4.0);
}

}  // namespace
