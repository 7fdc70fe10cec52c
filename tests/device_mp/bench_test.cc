// bench_test.cc -- weft-bench -G: every collective on device buffers (the emulated engine), under
// weft-run, with its own check of every element.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/launcher/launcher_util.h"

namespace {

std::string BenchPath() {
  if (const char* srcdir = getenv("TEST_SRCDIR"))
    return std::string(srcdir) + "/weft/tools/bench/weft-bench";
  return "tools/bench/weft-bench";
}

TEST(DeviceBench, EveryCollectiveChecksOutOnDeviceBuffers) {
  for (const char* coll : {"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
                           "sendrecv", "gather", "scatter", "alltoall"}) {
    LaunchOptions opts;
    opts.timeout_s = 120;
    std::vector<std::string> args = {"-n", "3",  BenchPath(), "-G",   "emulated", "-C", coll,
                                     "-b", "8",  "-e",        "256K", "-f",       "8",  "-n",
                                     "2",  "-w", "1",         "-d",   "half"};
    // Gather and scatter: both algorithms, and a root whose non-root ranks pass NULL buffers on
    // both sides of it.
    if (std::string(coll) == "gather" || std::string(coll) == "scatter")
      args.insert(args.end(), {"-r", "1", "-A", "all"});
    if (std::string(coll) == "alltoall") args.insert(args.end(), {"-A", "all"});
    LaunchResult r = RunLauncher(args, opts);
    ASSERT_TRUE(r.exited && r.exit_code == 0) << coll << "\n" << Describe(r);
    EXPECT_NE(r.out.find("# Buffers: device memory (emulated engine"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("262144"), std::string::npos) << "largest row missing:\n" << r.out;
  }
}

TEST(DeviceBench, TuneIsRefusedOnDeviceBuffers) {
  LaunchResult r = RunLauncher({"-n", "1", BenchPath(), "-G", "emulated", "--tune", "t.txt"});
  EXPECT_TRUE(r.exited && r.exit_code != 0) << Describe(r);
  EXPECT_NE(r.err.find("exited with status 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("leave out -G"), std::string::npos) << r.err;
}

}  // namespace
