// bw_test.cc -- all_reduce between two emulated hosts whose links tc limits to 200 Mbit/s: the
// bus bandwidth weft-bench measures must be at most the link rate (else the limit or the
// arithmetic is wrong) and at least half of it (else weft wastes the link).
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "tests/netns/netns_util.h"

namespace {

constexpr double kRateBitsPerSec = 200e6;  // --rate 200mbit
constexpr long kBytes = 16 << 20;

// From weft-bench's row for `bytes` (nccl-tests' columns: size count type redop root, then time
// algbw busbw #wrong out of place, the same in place), the out-of-place and in-place times in us.
// The GB/s columns have two decimals, too coarse at 0.025 GB/s, so busbw is computed from time.
bool ParseRow(const std::string& out, long bytes, double* oop_us, double* ip_us, long* wrong) {
  for (const auto& line : SplitLines(out)) {
    size_t at = line.find("] ");
    std::string body = line;
    while (at != std::string::npos && body.rfind("[", 0) == 0) {  // strip "[host i] [rank r] "
      body = body.substr(at + 2);
      at = body.find("] ");
    }
    std::istringstream in(body);
    long size, count, root, wrong_oop, wrong_ip;
    std::string type, op;
    double t1, algbw1, busbw1, t2, algbw2, busbw2;
    if (!(in >> size >> count >> type >> op >> root >> t1 >> algbw1 >> busbw1 >> wrong_oop >> t2 >>
          algbw2 >> busbw2 >> wrong_ip))
      continue;
    if (size != bytes) continue;
    *oop_us = t1;
    *ip_us = t2;
    *wrong = wrong_oop + wrong_ip;
    return true;
  }
  return false;
}

TEST(NetnsBandwidth, AllReduceBusBwWithinLinkRate) {
  SKIP_UNLESS_NETNS();
  const int nranks = 2;
  RunResult r = RunHosts({"--hosts",
                          "2",
                          "--rate",
                          "200mbit",
                          "--timeout",
                          "200",
                          "--",
                          Runfile("tools/weft-run"),
                          "-n",
                          "1",
                          "--nnodes",
                          "$NHOSTS",
                          "--node-rank",
                          "$HOST_INDEX",
                          "--master-addr",
                          "$MASTER_ADDR",
                          "--master-port",
                          "29500",
                          "--timeout",
                          "180",
                          Runfile("tools/bench/weft-bench"),
                          "-b",
                          "16M",
                          "-e",
                          "16M",
                          "-w",
                          "1",
                          "-n",
                          "4",
                          "-c",
                          "1",
                          "-A",
                          "ring"},
                         RunOptions{240, {}, 0, "", 1});
  std::cout << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  double oop_us = 0, ip_us = 0;
  long wrong = -1;
  ASSERT_TRUE(ParseRow(r.out, kBytes, &oop_us, &ip_us, &wrong)) << "no 16 MiB row\n" << r.out;
  EXPECT_EQ(wrong, 0) << "weft-bench -c 1 found wrong values";

  const double factor = 2.0 * (nranks - 1) / nranks;  // all_reduce busbw = algbw * 2(n-1)/n
  for (auto [name, us] :
       {std::pair<const char*, double>{"out of place", oop_us}, {"in place", ip_us}}) {
    double busbw = kBytes * 8 / (us * 1e-6) * factor;  // bit/s
    printf(
        "netns bw: all_reduce 16 MiB %s: %.0f us, busbw %.1f Mbit/s = %.1f%% of the %.0f Mbit/s "
        "link\n",
        name, us, busbw / 1e6, 100 * busbw / kRateBitsPerSec, kRateBitsPerSec / 1e6);
    RecordProperty(std::string("busbw_mbit_") + (name[0] == 'o' ? "oop" : "ip"),
                   std::to_string(busbw / 1e6));
    // tbf lets a burst of 10 ms (250 KB here) through at full speed after each idle gap, about
    // 1.5% of 16 MiB: hence 3% slack on the upper bound.
    EXPECT_LE(busbw, 1.03 * kRateBitsPerSec) << name << ": faster than the link";
    EXPECT_GE(busbw, 0.5 * kRateBitsPerSec) << name << ": less than half the link";
  }
  EXPECT_TRUE(LeftoverNamespaces(r.pid).empty());
}

}  // namespace
