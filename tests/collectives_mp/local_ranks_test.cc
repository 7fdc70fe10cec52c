// local_ranks_test.cc -- every transport of a communicator learns how many of its ranks share
// this host (transport_t.local_ranks, set in comm_connect): the TCP wait busy-polls only where the
// host has a CPU for each of them (common/spin.h, spin_host_fits). A communicator made by split
// counts its own ranks, not its parent's.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

extern "C" {
#include "comm/comm.h"
}

namespace {

std::string check_local_ranks(const weft_comm_t* comm, int expected, const char* which) {
  int seen = 0;
  for (int k = 0; k < BOOT_NTRANSPORTS; k++) {
    const transport_t* t = comm->transports[k];
    if (!t) continue;
    seen++;
    if (t->local_ranks != expected)
      return std::string(which) + ": transport " + t->ops->name + " has local_ranks " +
             std::to_string(t->local_ranks) + ", expected " + std::to_string(expected);
  }
  return seen ? "" : std::string(which) + ": no transport";
}

TEST(LocalRanks, EveryTransportCountsTheRanksOnThisHost) {
  for (const char* transport : {"auto", "tcp", "shm"}) {
    auto res = mp_run(
        3,
        [&](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", transport, 1);
          weft_comm_t* comm = nullptr;
          std::string err = join(rank, n, port, &comm);
          if (err.empty()) err = check_local_ranks(comm, n, "parent");
          weft_comm_t* child = nullptr;
          // Ranks 0 and 2 in one child, rank 1 alone in the other.
          if (err.empty() && weft_comm_split(comm, rank % 2, rank, &child) != WEFT_SUCCESS)
            err = std::string("split: ") + weft_last_error();
          if (err.empty()) err = check_local_ranks(child, rank % 2 ? 1 : 2, "child");
          if (child) weft_comm_destroy(child);
          if (comm) weft_comm_destroy(comm);
          return err;
        },
        60000);
    for (int r = 0; r < 3; r++) EXPECT_EQ(res[r].message, "") << transport << ", rank " << r;
  }
}

}  // namespace
