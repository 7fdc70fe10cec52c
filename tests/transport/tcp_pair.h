// tcp_pair.h -- two TCP transports of one communicator on loopback, made directly through the
// transport's ops, and a message moved between their connections: what the TCP listener tests
// (tcp_token_test, tcp_flood_test) build their cases on.
#ifndef WEFT_TESTS_TRANSPORT_TCP_PAIR_H_
#define WEFT_TESTS_TRANSPORT_TCP_PAIR_H_

#include <cstdint>
#include <string>

extern "C" {
#include "common/config.h"
#include "common/net.h"
#include "transport/transport.h"
}

struct TcpRank {
  weft_config_t cfg;
  transport_t *t = nullptr;
  net_addr_t addr;
};

// Creates rank `rank` of 2 of communicator `comm_id`, listening on 127.0.0.1, with the job token
// `token` (NULL: none) and the connect timeout given; fails the calling test if it cannot.
void TcpCreate(TcpRank &r, int rank, uint64_t comm_id, const char *token, int connect_timeout_ms);

// Moves one message from `from` to `to` (progressing both) and returns what arrived.
std::string TcpDeliver(conn_t *from, conn_t *to, const std::string &msg);

#endif  // WEFT_TESTS_TRANSPORT_TCP_PAIR_H_
