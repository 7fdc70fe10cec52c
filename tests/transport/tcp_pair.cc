// tcp_pair.cc -- see tcp_pair.h.
#include "tests/transport/tcp_pair.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

extern "C" {
#include "common/error.h"
}

void TcpCreate(TcpRank &r, int rank, uint64_t comm_id, const char *token, int connect_timeout_ms) {
  ASSERT_EQ(config_load(&r.cfg, nullptr, nullptr), WEFT_SUCCESS) << err_last();
  r.cfg.connect_timeout_ms = connect_timeout_ms;
  snprintf(r.cfg.job_token, sizeof r.cfg.job_token, "%s", token ? token : "");
  net_addr_t lo;
  ASSERT_EQ(net_resolve("127.0.0.1", 0, &lo), WEFT_SUCCESS);
  transport_params_t p = {rank, 2, comm_id, &r.cfg, &lo, nullptr};
  ASSERT_EQ(tcp_transport_ops.create(&p, &r.t), WEFT_SUCCESS) << err_last();
  tcp_transport_ops.local_addr(r.t, &r.addr);
}

std::string TcpDeliver(conn_t *from, conn_t *to, const std::string &msg) {
  xfer_t sx{}, rx{};
  std::string got(msg.size(), '\0');
  EXPECT_EQ(tcp_transport_ops.post_send(from, msg.data(), msg.size(), &sx), WEFT_SUCCESS);
  EXPECT_EQ(tcp_transport_ops.post_recv(to, &got[0], got.size(), &rx), WEFT_SUCCESS);
  for (int i = 0; i < 5000 && !(sx.complete && rx.complete); i++) {
    int progressed = 0;
    if (tcp_transport_ops.progress(from, &progressed) != WEFT_SUCCESS) break;
    if (tcp_transport_ops.progress(to, &progressed) != WEFT_SUCCESS) break;
    if (!progressed) usleep(1000);
  }
  return got;
}
