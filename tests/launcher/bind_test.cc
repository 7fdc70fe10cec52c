// bind_test.cc -- weft-run --bind: a core per local rank, hardware threads kept together, and
// more ranks than cores refused.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>

extern "C" {
#include "tools/weft_run.h"
}
#include "tests/launcher/launcher_util.h"

namespace {

// "0-2,5" -> {0, 1, 2, 5}
std::set<int> ParseCpuList(const std::string& list) {
  std::set<int> cpus;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    std::string part =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int lo = 0, hi = 0;
    if (sscanf(part.c_str(), "%d-%d", &lo, &hi) == 2) {
      for (int c = lo; c <= hi; c++) cpus.insert(c);
    } else if (sscanf(part.c_str(), "%d", &lo) == 1) {
      cpus.insert(lo);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return cpus;
}

int AllowedCpus() {
  cpu_set_t s;
  return sched_getaffinity(0, sizeof s, &s) == 0 ? CPU_COUNT(&s) : 0;
}

const char kPrintCpus[] = "grep Cpus_allowed_list /proc/self/status | cut -f2";

TEST(WeftRunBind, CoreGivesEachRankItsOwnCpus) {
  if (AllowedCpus() < 2) GTEST_SKIP() << "needs 2 CPUs";
  LaunchResult r = RunLauncher({"-n", "2", "--bind", "core", "--", "sh", "-c", kPrintCpus});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  std::map<int, std::set<int>> cpus;
  for (const auto& line : SplitLines(r.out)) {
    int rank = -1;
    char list[256] = {0};
    ASSERT_EQ(sscanf(line.c_str(), "[rank %d] %255s", &rank, list), 2) << line;
    cpus[rank] = ParseCpuList(list);
  }
  ASSERT_EQ(cpus.size(), 2u) << Describe(r);
  EXPECT_FALSE(cpus[0].empty());
  EXPECT_FALSE(cpus[1].empty());
  for (int c : cpus[0]) EXPECT_EQ(cpus[1].count(c), 0u) << "cpu " << c << " in both ranks' sets";
  EXPECT_LT(cpus[0].size() + cpus[1].size(), static_cast<size_t>(AllowedCpus()) + 1);
}

TEST(WeftRunBind, NoneLeavesTheLaunchersCpuSet) {
  LaunchResult r = RunLauncher({"-n", "2", "--bind", "none", "--", "sh", "-c", kPrintCpus});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  for (const auto& line : SplitLines(r.out)) {
    char list[256] = {0};
    int rank = -1;
    ASSERT_EQ(sscanf(line.c_str(), "[rank %d] %255s", &rank, list), 2) << line;
    EXPECT_EQ(ParseCpuList(list).size(), static_cast<size_t>(AllowedCpus())) << line;
  }
}

TEST(WeftRunBind, MoreRanksThanCoresIsRefused) {
  int n = AllowedCpus() + 1;
  LaunchResult r = RunLauncher({"-n", std::to_string(n), "--bind", "core", "--", "true"});
  ASSERT_TRUE(r.exited) << Describe(r);
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("--bind core: " + std::to_string(n) + " ranks but"), std::string::npos)
      << Describe(r);
}

TEST(WeftRunBind, UnknownPolicyIsRefused) {
  LaunchResult r = RunLauncher({"--bind", "socket", "--", "true"});
  ASSERT_TRUE(r.exited) << Describe(r);
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("'socket' is neither none nor core"), std::string::npos) << Describe(r);
}

// A made-up sysfs: CPUs 0-3 on package 0, cores by core_id as given (-1: no topology files).
std::string FakeSysfs(const std::string& name, const int (&core_id)[4]) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string root = std::string(tmp ? tmp : "/tmp") + "/" + name;
  mkdir(root.c_str(), 0700);
  for (int cpu = 0; cpu < 4; cpu++) {
    std::string dir = root + "/cpu" + std::to_string(cpu);
    mkdir(dir.c_str(), 0700);
    if (core_id[cpu] < 0) continue;
    mkdir((dir + "/topology").c_str(), 0700);
    std::ofstream(dir + "/topology/physical_package_id") << "0\n";
    std::ofstream(dir + "/topology/core_id") << core_id[cpu] << "\n";
  }
  return root;
}

std::set<int> Members(const cpu_set_t& s) {
  std::set<int> m;
  for (int c = 0; c < 8; c++)
    if (CPU_ISSET(c, &s)) m.insert(c);
  return m;
}

cpu_set_t Cpus(std::initializer_list<int> list) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int c : list) CPU_SET(c, &s);
  return s;
}

TEST(WeftRunBindCores, HardwareThreadsOfACoreGoTogether) {
  // Two cores of two threads each, numbered as Linux numbers them on x86: 0,2 and 1,3.
  std::string root = FakeSysfs("smt", {0, 1, 0, 1});
  cpu_set_t all = Cpus({0, 1, 2, 3}), cores[4];
  ASSERT_EQ(wr_bind_cores(&all, root.c_str(), cores, 4), 2);
  EXPECT_EQ(Members(cores[0]), (std::set<int>{0, 2}));
  EXPECT_EQ(Members(cores[1]), (std::set<int>{1, 3}));
  // Only the CPUs the launcher may use count: a taskset of 2,3 leaves one thread of each core.
  cpu_set_t some = Cpus({2, 3});
  ASSERT_EQ(wr_bind_cores(&some, root.c_str(), cores, 4), 2);
  EXPECT_EQ(Members(cores[0]), (std::set<int>{2}));
  EXPECT_EQ(Members(cores[1]), (std::set<int>{3}));
  // Asked for fewer than there are: says there are more.
  EXPECT_EQ(wr_bind_cores(&all, root.c_str(), cores, 1), 2);
}

TEST(WeftRunBindCores, WithoutTopologyEachCpuIsACore) {
  std::string root = FakeSysfs("flat", {-1, -1, -1, -1});
  cpu_set_t all = Cpus({0, 1, 2, 3}), cores[4];
  ASSERT_EQ(wr_bind_cores(&all, root.c_str(), cores, 4), 4);
  for (int k = 0; k < 4; k++) EXPECT_EQ(Members(cores[k]), (std::set<int>{k}));
}

}  // namespace
