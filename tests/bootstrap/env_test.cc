// env_test.cc -- rank/size/master/job-id resolution from each launcher's variables, and its errors.
#include "bootstrap/env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>

#include "common/error.h"

namespace {

using Env = std::map<std::string, std::string>;

const char *FakeGetenv(void *ctx, const char *name) {
  const Env *env = static_cast<const Env *>(ctx);
  auto it = env->find(name);
  return it == env->end() ? nullptr : it->second.c_str();
}

weft_result_t Resolve(const Env &env, boot_env_t *out) {
  err_clear();
  return boot_env_resolve(FakeGetenv, const_cast<Env *>(&env), out);
}

// Asserts that resolving `env` fails with INVALID_ARGUMENT and a message containing `text`.
void ExpectError(const Env &env, const std::string &text) {
  boot_env_t out;
  EXPECT_EQ(Resolve(env, &out), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find(text), std::string::npos)
      << "message: " << err_last() << "\nexpected to contain: " << text;
}

const Env kMaster = {{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};

Env With(Env base, const Env &more) {
  for (const auto &kv : more) base[kv.first] = kv.second;
  return base;
}

TEST(EnvTest, WeftFamily) {
  Env env = {{"WEFT_RANK", "3"},
             {"WEFT_WORLD_SIZE", "8"},
             {"WEFT_LOCAL_RANK", "1"},
             {"WEFT_LOCAL_WORLD_SIZE", "2"},
             {"WEFT_MASTER_ADDR", "node0"},
             {"WEFT_MASTER_PORT", "1234"},
             {"WEFT_JOB_ID", "job-7"}};
  boot_env_t e;
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_STREQ(e.master_host, "node0");
  EXPECT_EQ(e.master_port, 1234);
  EXPECT_STREQ(e.job_id, "job-7");
  EXPECT_STREQ(e.source, "WEFT");
}

TEST(EnvTest, TorchrunFamily) {
  Env env = With(kMaster, {{"RANK", "5"},
                           {"WORLD_SIZE", "6"},
                           {"LOCAL_RANK", "2"},
                           {"LOCAL_WORLD_SIZE", "3"},
                           {"TORCHELASTIC_RUN_ID", "abc123"}});
  boot_env_t e;
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 6);
  EXPECT_EQ(e.local_rank, 2);
  EXPECT_EQ(e.local_size, 3);
  EXPECT_STREQ(e.master_host, "10.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_STREQ(e.job_id, "abc123");
  EXPECT_STREQ(e.source, "torchrun");
}

TEST(EnvTest, OpenMpiFamily) {
  Env env = With(kMaster, {{"OMPI_COMM_WORLD_RANK", "0"},
                           {"OMPI_COMM_WORLD_SIZE", "2"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                           {"OMPI_MCA_ess_base_jobid", "3735814145"}});
  boot_env_t e;
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_size, 1);
  EXPECT_STREQ(e.job_id, "3735814145");
  EXPECT_STREQ(e.source, "Open MPI");
}

TEST(EnvTest, SlurmFamily) {
  Env env = With(kMaster, {{"SLURM_PROCID", "7"},
                           {"SLURM_NTASKS", "8"},
                           {"SLURM_LOCALID", "3"},
                           {"SLURM_NTASKS_PER_NODE", "4"},
                           {"SLURM_JOB_ID", "99"}});
  boot_env_t e;
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(e.rank, 7);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 3);
  EXPECT_EQ(e.local_size, 4);
  EXPECT_STREQ(e.job_id, "99");
  EXPECT_STREQ(e.source, "Slurm");
}

TEST(EnvTest, SlurmHeterogeneousTasksPerNodeLeavesLocalSizeUnknown) {
  Env env = With(kMaster, {{"SLURM_PROCID", "1"},
                           {"SLURM_NTASKS", "6"},
                           {"SLURM_LOCALID", "1"},
                           {"SLURM_NTASKS_PER_NODE", "2(x3)"}});
  boot_env_t e;
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, -1);
}

TEST(EnvTest, LocalUnknownWhenLauncherDoesNotSay) {
  boot_env_t e;
  ASSERT_EQ(Resolve(With(kMaster, {{"RANK", "0"}, {"WORLD_SIZE", "1"}}), &e), WEFT_SUCCESS);
  EXPECT_EQ(e.local_rank, -1);
  EXPECT_EQ(e.local_size, -1);
  EXPECT_STREQ(e.job_id, "");
}

TEST(EnvTest, FamilyPrecedence) {
  Env env = With(kMaster, {{"WEFT_RANK", "1"},
                           {"WEFT_WORLD_SIZE", "10"},
                           {"RANK", "2"},
                           {"WORLD_SIZE", "20"},
                           {"OMPI_COMM_WORLD_RANK", "3"},
                           {"OMPI_COMM_WORLD_SIZE", "30"},
                           {"SLURM_PROCID", "4"},
                           {"SLURM_NTASKS", "40"}});
  const char *sources[] = {"WEFT", "torchrun", "Open MPI", "Slurm"};
  const char *drop[][2] = {{"WEFT_RANK", "WEFT_WORLD_SIZE"},
                           {"RANK", "WORLD_SIZE"},
                           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}};
  for (int i = 0; i < 4; i++) {
    boot_env_t e;
    ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
    EXPECT_STREQ(e.source, sources[i]);
    EXPECT_EQ(e.rank, i + 1);
    EXPECT_EQ(e.world_size, 10 * (i + 1));
    if (i < 3) {
      env.erase(drop[i][0]);
      env.erase(drop[i][1]);
    }
  }
}

TEST(EnvTest, LocalRankComesOnlyFromTheChosenFamily) {
  boot_env_t e;
  Env env = With(
      kMaster,
      {{"WEFT_RANK", "0"}, {"WEFT_WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"SLURM_LOCALID", "0"}});
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(e.local_rank, -1);
}

TEST(EnvTest, EmptyVariableCountsAsUnset) {
  boot_env_t e;
  Env env = With(kMaster,
                 {{"WEFT_RANK", ""}, {"WEFT_WORLD_SIZE", ""}, {"RANK", "1"}, {"WORLD_SIZE", "2"}});
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_STREQ(e.source, "torchrun");
}

TEST(EnvTest, MasterPrecedence) {
  Env env = {{"RANK", "0"},
             {"WORLD_SIZE", "1"},
             {"WEFT_INIT_URL", "tcp://[fe80::1]:4000"},
             {"WEFT_MASTER_ADDR", "weft-master"},
             {"WEFT_MASTER_PORT", "5000"},
             {"MASTER_ADDR", "torch-master"},
             {"MASTER_PORT", "6000"}};
  boot_env_t e;
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_STREQ(e.master_host, "fe80::1");
  EXPECT_EQ(e.master_port, 4000);
  env.erase("WEFT_INIT_URL");
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_STREQ(e.master_host, "weft-master");
  EXPECT_EQ(e.master_port, 5000);
  env.erase("WEFT_MASTER_ADDR");
  env.erase("WEFT_MASTER_PORT");
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_STREQ(e.master_host, "torch-master");
  EXPECT_EQ(e.master_port, 6000);
}

TEST(EnvTest, MasterIpv6LiteralsWithAndWithoutBrackets) {
  boot_env_t e;
  Env env = {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "[::1]"}, {"MASTER_PORT", "7"}};
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_STREQ(e.master_host, "::1");
  env["MASTER_ADDR"] = "fd00::2";
  ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
  EXPECT_STREQ(e.master_host, "fd00::2");
}

TEST(EnvTest, JobIdPrecedence) {
  Env env = With(kMaster, {{"RANK", "0"},
                           {"WORLD_SIZE", "1"},
                           {"WEFT_JOB_ID", "a"},
                           {"TORCHELASTIC_RUN_ID", "b"},
                           {"SLURM_JOB_ID", "c"},
                           {"OMPI_MCA_ess_base_jobid", "d"}});
  const char *want[] = {"a", "b", "c", "d", ""};
  const char *drop[] = {"WEFT_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
                        "OMPI_MCA_ess_base_jobid"};
  for (int i = 0; i < 5; i++) {
    boot_env_t e;
    ASSERT_EQ(Resolve(env, &e), WEFT_SUCCESS) << err_last();
    EXPECT_STREQ(e.job_id, want[i]);
    if (i < 4) env.erase(drop[i]);
  }
}

TEST(EnvTest, NothingSet) {
  ExpectError(kMaster,
              "no rank/world size in the environment: launch with weft-run or torchrun, or set "
              "RANK and WORLD_SIZE");
}

TEST(EnvTest, RankWithoutSize) {
  ExpectError(With(kMaster, {{"RANK", "1"}}), "RANK is set (1) but WORLD_SIZE is not");
  ExpectError(With(kMaster, {{"WEFT_WORLD_SIZE", "4"}}),
              "WEFT_WORLD_SIZE is set (4) but WEFT_RANK is not");
  // A lower family's size must not complete a higher family's rank.
  ExpectError(With(kMaster, {{"RANK", "1"}, {"SLURM_NTASKS", "4"}}),
              "RANK is set (1) but WORLD_SIZE is not");
}

TEST(EnvTest, NotAnInteger) {
  ExpectError(With(kMaster, {{"RANK", "one"}, {"WORLD_SIZE", "4"}}), "RANK=one is not an integer");
  ExpectError(With(kMaster, {{"RANK", "1"}, {"WORLD_SIZE", "4x"}}),
              "WORLD_SIZE=4x is not an integer");
  ExpectError(With(kMaster, {{"RANK", "1"}, {"WORLD_SIZE", " 4"}}),
              "WORLD_SIZE= 4 is not an integer");
  ExpectError(With(kMaster, {{"RANK", "1"}, {"WORLD_SIZE", "99999999999"}}),
              "WORLD_SIZE=99999999999 is out of range");
  ExpectError(With(kMaster, {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "x"}}),
              "LOCAL_RANK=x is not an integer");
}

TEST(EnvTest, Negative) {
  ExpectError(With(kMaster, {{"SLURM_PROCID", "-1"}, {"SLURM_NTASKS", "4"}}),
              "SLURM_PROCID=-1 is negative");
  ExpectError(With(kMaster, {{"RANK", "0"}, {"WORLD_SIZE", "-4"}}), "WORLD_SIZE=-4 is negative");
}

TEST(EnvTest, RankNotBelowWorldSize) {
  ExpectError(With(kMaster, {{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
              "RANK=4 but WORLD_SIZE=4: rank must be < world size");
  ExpectError(With(kMaster, {{"OMPI_COMM_WORLD_RANK", "9"}, {"OMPI_COMM_WORLD_SIZE", "2"}}),
              "OMPI_COMM_WORLD_RANK=9 but OMPI_COMM_WORLD_SIZE=2: rank must be < world size");
  ExpectError(With(kMaster, {{"RANK", "0"}, {"WORLD_SIZE", "0"}}),
              "WORLD_SIZE=0: world size must be at least 1");
}

TEST(EnvTest, LocalRankNotBelowLocalSize) {
  ExpectError(
      With(kMaster,
           {{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}),
      "LOCAL_RANK=2 but LOCAL_WORLD_SIZE=2: local rank must be < local size");
  ExpectError(With(kMaster, {{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "8"}}),
              "LOCAL_WORLD_SIZE=8 but WORLD_SIZE=4: local size must be in 1..4");
}

TEST(EnvTest, PortOutOfRange) {
  const Env ranks = {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "h"}};
  ExpectError(With(ranks, {{"MASTER_PORT", "0"}}), "MASTER_PORT=0 is out of range 1..65535");
  ExpectError(With(ranks, {{"MASTER_PORT", "65536"}}),
              "MASTER_PORT=65536 is out of range 1..65535");
  ExpectError(With(ranks, {{"MASTER_PORT", "http"}}), "MASTER_PORT=http is not an integer");
  ExpectError(
      {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"WEFT_MASTER_ADDR", "h"}, {"WEFT_MASTER_PORT", "-5"}},
      "WEFT_MASTER_PORT=-5 is out of range 1..65535");
}

TEST(EnvTest, MissingMaster) {
  ExpectError({{"RANK", "0"}, {"WORLD_SIZE", "2"}},
              "no master address: set MASTER_ADDR and MASTER_PORT, or "
              "WEFT_INIT_URL=tcp://host:port");
  ExpectError({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}},
              "MASTER_ADDR is set (h) but MASTER_PORT is not");
  ExpectError({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"WEFT_MASTER_PORT", "9"}},
              "WEFT_MASTER_PORT is set (9) but WEFT_MASTER_ADDR is not");
}

TEST(EnvTest, MasterAddrWithPortIsCaught) {
  ExpectError(
      {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h:29500"}, {"MASTER_PORT", "1"}},
      "MASTER_ADDR=h:29500 looks like host:port");
}

TEST(EnvTest, BadInitUrl) {
  ExpectError({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"WEFT_INIT_URL", "http://h:1"}},
              "WEFT_INIT_URL: 'http://h:1': unsupported scheme");
  ExpectError({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"WEFT_INIT_URL", "tcp://h"}},
              "WEFT_INIT_URL: 'tcp://h': missing ':port'");
}

TEST(EnvTest, JobIdTooLong) {
  ExpectError(
      With(kMaster, {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"WEFT_JOB_ID", std::string(200, 'j')}}),
      "WEFT_JOB_ID is longer than 127 characters");
}

TEST(EnvTest, ProcessEnvironment) {
  setenv("WEFT_RANK", "2", 1);
  setenv("WEFT_WORLD_SIZE", "3", 1);
  setenv("WEFT_INIT_URL", "tcp://127.0.0.1:29511", 1);
  boot_env_t e;
  weft_result_t res = boot_env_resolve_process(&e);
  unsetenv("WEFT_RANK");
  unsetenv("WEFT_WORLD_SIZE");
  unsetenv("WEFT_INIT_URL");
  ASSERT_EQ(res, WEFT_SUCCESS) << err_last();
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 3);
  EXPECT_STREQ(e.master_host, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29511);
}

TEST(EnvTest, JobHashIsFnv1a64AndNeverZero) {
  // Reference values of FNV-1a 64 (Fowler/Noll/Vo test vectors).
  EXPECT_EQ(boot_job_hash(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(boot_job_hash("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(boot_job_hash("foobar"), 0x85944171f73967e8ULL);
  EXPECT_NE(boot_job_hash("job-1"), boot_job_hash("job-2"));
}

}  // namespace
