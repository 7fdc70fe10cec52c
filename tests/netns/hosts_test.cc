// hosts_test.cc -- weft across emulated hosts (network namespaces from scripts/netns-hosts.sh):
// locality from the host identities, and checked all_reduce and broadcast over veth links.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "tests/netns/netns_util.h"

namespace {

struct Job {
  int hosts;
  int ranks_per_host;
  bool derive_locality;  // drop weft-run's LOCAL_RANK/LOCAL_WORLD_SIZE: weft must find them
};

// One rank's WEFT_DEBUG=1 setup line: "weft rank R/N: local rank l/L, [transport per rank:
// 0:self 1:shm 2:tcp ...; ]tcp at ADDR:PORT ...". The per-rank transports are checked where the
// line has them (builds with the shared-memory transport), the tcp address always.
struct Setup {
  int local_rank = -1, local_size = -1;
  std::string tcp_addr;                     // without the port
  std::map<int, std::string> transport_of;  // peer rank -> "self", "shm", "tcp"; may be empty
  std::string line;
};

std::map<int, Setup> ParseSetup(const std::string& out) {
  std::map<int, Setup> setups;
  for (const auto& line : SplitLines(out)) {
    size_t at = line.find("weft rank ");
    if (at == std::string::npos) continue;
    Setup s;
    int rank = -1, size = 0;
    if (sscanf(line.c_str() + at, "weft rank %d/%d: local rank %d/%d", &rank, &size, &s.local_rank,
               &s.local_size) != 4)
      continue;
    size_t tcp = line.find("tcp at ");
    if (tcp != std::string::npos) {
      char addr[128] = {0};
      sscanf(line.c_str() + tcp, "tcp at %127s", addr);
      std::string a = addr;
      s.tcp_addr = a.substr(0, a.rfind(':'));
    }
    size_t list = line.find("transport per rank:");
    if (list != std::string::npos) {
      std::istringstream in(line.substr(list + 19, line.find(';', list) - list - 19));
      std::string item;
      while (in >> item) {
        size_t colon = item.find(':');
        if (colon != std::string::npos) s.transport_of[atoi(item.c_str())] = item.substr(colon + 1);
      }
    }
    s.line = line;
    setups[rank] = s;
  }
  return setups;
}

// Rank r runs on host r / ranks_per_host (weft-run numbers node K's ranks K*n .. K*n+n-1).
void CheckTransports(const Job& job, const std::map<int, Setup>& setups) {
  int nranks = job.hosts * job.ranks_per_host;
  for (const auto& [rank, s] : setups) {
    int host = rank / job.ranks_per_host;
    // Every rank listens on its own host's veth address, so traffic between hosts crosses the
    // emulated links (not loopback).
    EXPECT_EQ(s.tcp_addr, "10.231.0." + std::to_string(host + 1)) << s.line;
    if (s.transport_of.empty()) continue;  // a build without per-peer transports in the line
    // Shared memory within a host, TCP between hosts: a netns is a host of its own to weft even
    // though /dev/shm is shared by all of them.
    for (int peer = 0; peer < nranks; peer++) {
      std::string want = peer == rank ? "self" : peer / job.ranks_per_host == host ? "shm" : "tcp";
      auto it = s.transport_of.find(peer);
      ASSERT_NE(it, s.transport_of.end()) << "no transport for peer " << peer << ": " << s.line;
      EXPECT_EQ(it->second, want) << "rank " << rank << " to peer " << peer << ": " << s.line;
    }
  }
}

void RunJob(const Job& job) {
  SKIP_UNLESS_NETNS();
  std::string nproc = std::to_string(job.ranks_per_host);
  std::vector<std::string> args = {"--hosts",
                                   std::to_string(job.hosts),
                                   "--timeout",
                                   "100",
                                   "--",
                                   Runfile("tools/weft-run"),
                                   "-n",
                                   nproc,
                                   "--nnodes",
                                   "$NHOSTS",
                                   "--node-rank",
                                   "$HOST_INDEX",
                                   "--master-addr",
                                   "$MASTER_ADDR",
                                   "--master-port",
                                   "29500",
                                   "--timeout",
                                   "90",
                                   Runfile("tests/netns/netns_rank"),
                                   "--hosts",
                                   std::to_string(job.hosts),
                                   "--local-size",
                                   nproc};
  if (job.derive_locality) args.push_back("--derive-locality");
  RunResult r = RunHosts(args, RunOptions{120, {"WEFT_DEBUG=1"}, 0, "", 1});
  std::cout << r.out;
  ASSERT_FALSE(r.timed_out) << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;

  int nranks = job.hosts * job.ranks_per_host;
  std::set<int> ok;
  for (const auto& line : SplitLines(r.out)) {
    size_t at = line.find("netns_rank OK rank ");
    int rank, size, host, local_rank, local_size, nodes;
    if (at == std::string::npos ||
        sscanf(line.c_str() + at, "netns_rank OK rank %d/%d host %d local %d/%d nodes %d", &rank,
               &size, &host, &local_rank, &local_size, &nodes) != 6)
      continue;
    EXPECT_EQ(size, nranks) << line;
    EXPECT_EQ(host, rank / job.ranks_per_host) << line;
    EXPECT_EQ(local_rank, rank % job.ranks_per_host) << line;
    EXPECT_EQ(local_size, job.ranks_per_host) << line;
    EXPECT_EQ(nodes, job.hosts) << line;
    ok.insert(rank);
  }
  EXPECT_EQ(ok.size(), static_cast<size_t>(nranks)) << r.out;

  auto setups = ParseSetup(r.out);
  EXPECT_EQ(setups.size(), static_cast<size_t>(nranks)) << "WEFT_DEBUG=1 setup lines\n" << r.out;
  CheckTransports(job, setups);
  EXPECT_TRUE(LeftoverNamespaces(r.pid).empty()) << "namespaces left after the run";
}

TEST(NetnsHosts, TwoHostsTwoRanks) { RunJob({2, 2, false}); }
TEST(NetnsHosts, TwoHostsTwoRanksDerivedLocality) { RunJob({2, 2, true}); }
TEST(NetnsHosts, ThreeHostsOneRank) { RunJob({3, 1, true}); }

}  // namespace
