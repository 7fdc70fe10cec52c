// env_test.cc -- the environment weft-run gives each rank: torchrun's variables and WEFT_JOB_ID.
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "tests/launcher/launcher_util.h"

namespace {

const char kPrintEnv[] =
    "echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $NODE_RANK $MASTER_ADDR "
    "$MASTER_PORT $WEFT_JOB_ID";

struct RankEnv {
  int rank, world_size, local_rank, local_world_size, group_rank, node_rank;
  std::string master_addr;
  int master_port;
  std::string job_id;
};

// Parses "[rank R] <kPrintEnv fields>" lines, keyed by the R of the prefix.
std::map<int, RankEnv> ParseEnv(const std::string& out) {
  std::map<int, RankEnv> env;
  for (const auto& line : SplitLines(out)) {
    int prefix_rank = -1;
    char rest[512] = {0};
    if (sscanf(line.c_str(), "[rank %d] %511[^\n]", &prefix_rank, rest) != 2) {
      ADD_FAILURE() << "unexpected line: " << line;
      continue;
    }
    std::istringstream in(rest);
    RankEnv e;
    in >> e.rank >> e.world_size >> e.local_rank >> e.local_world_size >> e.group_rank >>
        e.node_rank >> e.master_addr >> e.master_port >> e.job_id;
    EXPECT_FALSE(in.fail()) << "cannot parse: " << line;
    EXPECT_EQ(env.count(prefix_rank), 0u) << "two lines from rank " << prefix_rank;
    env[prefix_rank] = e;
  }
  return env;
}

bool IsHex16(const std::string& s) {
  if (s.size() != 16) return false;
  for (char c : s) {
    if (!isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

TEST(WeftRunEnv, SingleNodeSetsTorchrunVariables) {
  LaunchResult r = RunLauncher({"-n", "3", "--", "sh", "-c", kPrintEnv});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  auto env = ParseEnv(r.out);
  ASSERT_EQ(env.size(), 3u) << Describe(r);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(env.count(i), 1u) << "no line from rank " << i << "\n" << Describe(r);
    const RankEnv& e = env[i];
    EXPECT_EQ(e.rank, i);
    EXPECT_EQ(e.world_size, 3);
    EXPECT_EQ(e.local_rank, i);
    EXPECT_EQ(e.local_world_size, 3);
    EXPECT_EQ(e.group_rank, 0);
    EXPECT_EQ(e.node_rank, 0);
    EXPECT_EQ(e.master_addr, "127.0.0.1");
    EXPECT_GT(e.master_port, 0);
    EXPECT_LT(e.master_port, 65536);
    EXPECT_EQ(e.master_port, env[0].master_port) << "ranks disagree on the port";
    EXPECT_TRUE(IsHex16(e.job_id)) << e.job_id;
    EXPECT_EQ(e.job_id, env[0].job_id) << "ranks disagree on the job id";
  }
}

TEST(WeftRunEnv, MultiNodeArithmetic) {
  LaunchResult r = RunLauncher({"--nnodes", "3", "--node-rank", "2", "-n", "2", "--master-addr",
                                "10.1.2.3", "--master-port", "29500", "sh", "-c", kPrintEnv});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  auto env = ParseEnv(r.out);
  ASSERT_EQ(env.size(), 2u) << Describe(r);
  for (int local = 0; local < 2; local++) {
    int rank = 2 * 2 + local;
    ASSERT_EQ(env.count(rank), 1u) << "no line from rank " << rank << "\n" << Describe(r);
    const RankEnv& e = env[rank];
    EXPECT_EQ(e.rank, rank);
    EXPECT_EQ(e.world_size, 6);
    EXPECT_EQ(e.local_rank, local);
    EXPECT_EQ(e.local_world_size, 2);
    EXPECT_EQ(e.group_rank, 2);
    EXPECT_EQ(e.node_rank, 2);
    EXPECT_EQ(e.master_addr, "10.1.2.3");
    EXPECT_EQ(e.master_port, 29500);
  }
}

// Each node runs its own weft-run: they must arrive at the same id without talking.
TEST(WeftRunEnv, MultiNodeJobIdAgreesAcrossNodes) {
  std::set<std::string> ids;
  for (const char* node : {"0", "1"}) {
    LaunchResult r = RunLauncher({"--nnodes", "2", "--node-rank", node, "-n", "2", "--master-port",
                                  "29501", "sh", "-c", kPrintEnv});
    ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
    for (const auto& kv : ParseEnv(r.out)) ids.insert(kv.second.job_id);
  }
  EXPECT_EQ(ids.size(), 1u) << "nodes of one job got different ids";

  LaunchResult other = RunLauncher(
      {"--nnodes", "2", "--node-rank", "0", "--master-port", "29502", "sh", "-c", kPrintEnv});
  ASSERT_TRUE(other.exited && other.exit_code == 0) << Describe(other);
  auto env = ParseEnv(other.out);
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(ids.count(env.begin()->second.job_id), 0u) << "another port, same id";
}

TEST(WeftRunEnv, MultiNodeJobIdFromEnvironment) {
  LaunchOptions opts;
  opts.env = {"WEFT_JOB_ID=nightly-42"};
  LaunchResult r = RunLauncher({"--nnodes", "2", "--node-rank", "1", "-n", "2", "--master-port",
                                "29503", "sh", "-c", kPrintEnv},
                               opts);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  auto env = ParseEnv(r.out);
  ASSERT_EQ(env.size(), 2u) << Describe(r);
  for (const auto& kv : env) EXPECT_EQ(kv.second.job_id, "nightly-42");
}

TEST(WeftRunEnv, SingleNodeJobIdIsFreshEachLaunch) {
  LaunchResult a = RunLauncher({"--master-port", "29504", "sh", "-c", kPrintEnv});
  LaunchResult b = RunLauncher({"--master-port", "29504", "sh", "-c", kPrintEnv});
  ASSERT_TRUE(a.exited && a.exit_code == 0) << Describe(a);
  ASSERT_TRUE(b.exited && b.exit_code == 0) << Describe(b);
  auto ea = ParseEnv(a.out), eb = ParseEnv(b.out);
  ASSERT_EQ(ea.size(), 1u);
  ASSERT_EQ(eb.size(), 1u);
  EXPECT_EQ(ea[0].master_port, 29504);
  EXPECT_NE(ea[0].job_id, eb[0].job_id) << "two launches on one port must not share an id";
}

TEST(WeftRunEnv, AcceptsTorchrunSpellings) {
  LaunchResult r =
      RunLauncher({"--nproc_per_node", "2", "--nnodes", "2", "--node_rank", "1", "--master_addr",
                   "127.0.0.1", "--master_port", "29505", "sh", "-c", kPrintEnv});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  auto env = ParseEnv(r.out);
  ASSERT_EQ(env.size(), 2u) << Describe(r);
  EXPECT_EQ(env[2].rank, 2);
  EXPECT_EQ(env[3].world_size, 4);
  EXPECT_EQ(env[3].master_port, 29505);
}

}  // namespace
