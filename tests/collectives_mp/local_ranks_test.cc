// local_ranks_test.cc -- every transport of a communicator learns how many of its ranks share
// this host (transport_t.local_ranks, set in comm_connect): the TCP wait busy-polls only where the
// host has a CPU for each of them (common/spin.h, spin_host_fits). A communicator made by split
// counts its own ranks, not its parent's. The automatic choice's model charges a wait per
// dependent round where a host has more of the communicator's ranks than CPUs (cost_model.c),
// and so runs small all-reduces and barriers in one round there.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

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

// One rank more than the host has CPUs: the parent's model has the wake term and its 8-byte
// all-reduce and barrier run in one round; a child whose ranks fit the host has none.
TEST(LocalRanks, RanksSharingCpusMakeTheChoiceCountRounds) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1 || cpus > 7) GTEST_SKIP() << cpus << " CPUs: one rank each and one more is too many";
  int n = (int)cpus + 1;
  auto res = mp_run(
      n,
      [&](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "shm", 1);
        weft_comm_t* comm = nullptr;
        std::string err = join(rank, n, port, &comm);
        if (err.empty() && comm->model.wake != COST_WAKE)
          err = "parent of " + std::to_string(n) + " ranks on " + std::to_string(n - 1) +
                " CPUs: wake " + std::to_string(comm->model.wake);
        float x = (float)rank;
        if (err.empty() &&
            (weft_all_reduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm, nullptr) != WEFT_SUCCESS ||
             weft_barrier(comm, nullptr) != WEFT_SUCCESS))
          err = weft_last_error();
        if (err.empty() && x != (float)(n * (n - 1) / 2)) err = "wrong sum " + std::to_string(x);
        for (weft_coll_t coll : {WEFT_COLL_ALL_REDUCE, WEFT_COLL_BARRIER}) {
          const algo_entry_t* e = err.empty() ? comm->last_sched[coll].algo : nullptr;
          if (err.empty() && (!e || e->algo != WEFT_ALGO_LINEAR))
            err = std::string(weft_coll_name(coll)) + " ran " +
                  (e ? weft_algo_name(e->algo) : "nothing") + ", not linear";
        }
        weft_comm_t* child = nullptr;
        if (err.empty() && weft_comm_split(comm, rank < n - 1, rank, &child) != WEFT_SUCCESS)
          err = std::string("split: ") + weft_last_error();
        if (err.empty() && child->model.wake != 0)
          err = "child of " + std::to_string(child->nranks) + " ranks: wake " +
                std::to_string(child->model.wake);
        if (child) weft_comm_destroy(child);
        if (comm) weft_comm_destroy(comm);
        return err;
      },
      60000);
  for (int r = 0; r < n; r++) EXPECT_EQ(res[r].message, "") << "rank " << r;
}

}  // namespace
