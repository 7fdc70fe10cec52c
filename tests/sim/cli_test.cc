// cli_test.cc -- weft-sim's command line, size walk, bandwidth factors and rows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

extern "C" {
#include "collectives/cost_constants.h"
#include "tools/sim/cli.h"
#include "tools/sim/report.h"
}

namespace {

struct Parsed {
  simcli_t o;
  int rc;
  std::string err;
};

Parsed Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "weft-sim");
  Parsed p;
  char err[512];
  p.rc = simcli_parse((int)args.size(), args.data(), &p.o, err, sizeof err);
  p.err = err;
  return p;
}

TEST(CliTest, Defaults) {
  Parsed p = Parse({});
  ASSERT_EQ(p.rc, SIMCLI_OK) << p.err;
  EXPECT_EQ(p.o.coll, WEFT_COLL_ALL_REDUCE);
  EXPECT_EQ(p.o.algo, SIMCLI_ALL_ALGOS);
  EXPECT_EQ(p.o.nranks, 8);
  EXPECT_EQ(p.o.dtype, WEFT_FLOAT32);
  EXPECT_EQ(p.o.model.slice_bytes, 65536u);
  EXPECT_EQ(p.o.model.headers, 1);
  EXPECT_EQ(p.o.model.inter_alpha, p.o.model.alpha);
  EXPECT_EQ(p.o.model.skip, 1);
}

TEST(CliTest, Skip) {
  Parsed off = Parse({"--skip", "off"});
  ASSERT_EQ(off.rc, SIMCLI_OK) << off.err;
  EXPECT_EQ(off.o.model.skip, 0);
  Parsed on = Parse({"--skip=off", "--skip=on"});
  ASSERT_EQ(on.rc, SIMCLI_OK) << on.err;
  EXPECT_EQ(on.o.model.skip, 1);
  Parsed bad = Parse({"--skip", "maybe"});
  EXPECT_EQ(bad.rc, SIMCLI_ERROR);
  EXPECT_NE(bad.err.find("--skip: 'maybe' is neither on nor off"), std::string::npos) << bad.err;
}

TEST(CliTest, EveryFlag) {
  Parsed p = Parse({"-C",
                    "broadcast",
                    "-A",
                    "ring",
                    "-p",
                    "16",
                    "--ranks-per-node",
                    "4",
                    "-b",
                    "8",
                    "-e",
                    "1G",
                    "-f",
                    "2",
                    "-d",
                    "half",
                    "-r",
                    "3",
                    "--alpha=5e-6",
                    "--beta",
                    "1e-10",
                    "--gamma",
                    "2e-10",
                    "--inter-alpha",
                    "2e-5",
                    "--inter-beta",
                    "1e-9",
                    "--beta-mem",
                    "1e-11",
                    "--slice",
                    "1M",
                    "--window",
                    "8",
                    "--no-header"});
  ASSERT_EQ(p.rc, SIMCLI_OK) << p.err;
  EXPECT_EQ(p.o.coll, WEFT_COLL_BROADCAST);
  EXPECT_EQ(p.o.algo, WEFT_ALGO_RING);
  EXPECT_EQ(p.o.nranks, 16);
  EXPECT_EQ(p.o.model.ranks_per_node, 4);
  EXPECT_EQ(p.o.minbytes, 8u);
  EXPECT_EQ(p.o.maxbytes, 1u << 30);
  EXPECT_EQ(p.o.stepfactor, 2u);
  EXPECT_EQ(p.o.dtype, WEFT_FLOAT16);
  EXPECT_EQ(simcli_root(&p.o), 3);
  EXPECT_EQ(p.o.model.alpha, 5e-6);
  EXPECT_EQ(p.o.model.beta, 1e-10);
  EXPECT_EQ(p.o.model.gamma, 2e-10);
  EXPECT_EQ(p.o.model.inter_alpha, 2e-5);
  EXPECT_EQ(p.o.model.inter_beta, 1e-9);
  EXPECT_EQ(p.o.model.beta_mem, 1e-11);
  EXPECT_EQ(p.o.model.slice_bytes, 1u << 20);
  EXPECT_EQ(p.o.model.window, 8);
  EXPECT_EQ(p.o.model.headers, 0);
}

// --replay: the symmetric replay unless told otherwise; a wrong value is named.
TEST(CliTest, Replay) {
  EXPECT_EQ(Parse({}).o.model.replay, SIM_REPLAY_AUTO);
  EXPECT_EQ(Parse({"--replay", "full"}).o.model.replay, SIM_REPLAY_FULL);
  EXPECT_EQ(Parse({"--replay=auto"}).o.model.replay, SIM_REPLAY_AUTO);
  EXPECT_EQ(Parse({"--replay", "estimate"}).o.model.replay, SIM_REPLAY_ESTIMATE);
  Parsed p = Parse({"--replay", "half"});
  EXPECT_EQ(p.rc, SIMCLI_ERROR);
  EXPECT_NE(p.err.find("--replay: unknown replay 'half' (full auto estimate)"), std::string::npos)
      << p.err;
}

// --estimate-slices (K of the estimate, default 128) and -j (rows at once; 0: the cores online).
TEST(CliTest, EstimateSlicesAndJobs) {
  Parsed d = Parse({});
  EXPECT_EQ(d.o.model.estimate_slices, 128);
  EXPECT_EQ(d.o.jobs, 0);
  Parsed p = Parse({"--estimate-slices", "32", "-j", "3"});
  ASSERT_EQ(p.rc, SIMCLI_OK) << p.err;
  EXPECT_EQ(p.o.model.estimate_slices, 32);
  EXPECT_EQ(p.o.jobs, 3);
  EXPECT_EQ(Parse({"--jobs=2"}).o.jobs, 2);
  EXPECT_EQ(Parse({"-j", "0"}).rc, SIMCLI_ERROR);
  EXPECT_EQ(Parse({"--estimate-slices", "0"}).rc, SIMCLI_ERROR);
}

TEST(CliTest, InterNodeValuesDefaultToIntraNode) {
  Parsed p = Parse({"--alpha", "1e-6", "--beta", "2e-10", "--ranks-per-node", "2"});
  ASSERT_EQ(p.rc, SIMCLI_OK) << p.err;
  EXPECT_EQ(p.o.model.inter_alpha, 1e-6);
  EXPECT_EQ(p.o.model.inter_beta, 2e-10);
}

TEST(CliTest, TransportTakesTheLibrarysConstants) {
  for (int t = 0; t < COST_NUM_TRANSPORTS; t++) {
    const char* name = cost_transport_name((cost_transport_t)t);
    const cost_link_t& in = cost_constants()->link[t][COST_INTRA];
    const cost_link_t& out = cost_constants()->link[t][COST_INTER];
    Parsed p = Parse({"--transport", name});
    ASSERT_EQ(p.rc, SIMCLI_OK) << p.err;
    EXPECT_EQ(p.o.model.alpha, in.alpha) << name;
    EXPECT_EQ(p.o.model.beta, in.beta) << name;
    EXPECT_EQ(p.o.model.gamma, in.gamma) << name;
    EXPECT_EQ(p.o.model.inter_alpha, out.alpha) << name;
    EXPECT_EQ(p.o.model.inter_beta, out.beta) << name;
    // A flag of its own wins, before or after --transport.
    for (auto args : {std::vector<const char*>{"--alpha", "1", "--transport", name},
                      std::vector<const char*>{"--transport", name, "--alpha", "1"}}) {
      p = Parse(args);
      ASSERT_EQ(p.rc, SIMCLI_OK) << p.err;
      EXPECT_EQ(p.o.model.alpha, 1.0) << name;
      EXPECT_EQ(p.o.model.beta, in.beta) << name;
      EXPECT_EQ(p.o.model.inter_alpha, out.alpha) << name;
    }
  }
  Parsed p = Parse({"--transport", "ib"});
  EXPECT_EQ(p.rc, SIMCLI_ERROR);
  EXPECT_NE(p.err.find("--transport: unknown transport 'ib' (tcp shm cuda_ipc staged rdma)"),
            std::string::npos)
      << p.err;
}

TEST(CliTest, UnsupportedPairListsWhatExists) {
  Parsed p = Parse({"-C", "all_reduce", "-A", "dissemination"});
  EXPECT_EQ(p.rc, SIMCLI_ERROR);
  EXPECT_NE(p.err.find("all_reduce has no 'dissemination' algorithm"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("supported: ring"), std::string::npos) << p.err;
}

TEST(CliTest, BadInputsAreNamed) {
  EXPECT_NE(Parse({"-C", "alltoall"}).err.find("unknown collective 'alltoall'"), std::string::npos);
  EXPECT_NE(Parse({"-A", "fast"}).err.find("unknown algorithm 'fast'"), std::string::npos);
  EXPECT_NE(Parse({"-d", "float128"}).err.find("unknown dtype"), std::string::npos);
  EXPECT_EQ(Parse({"-d", "f8e4m3"}).o.dtype, WEFT_FLOAT8_E4M3);       // nccl-tests' fp8 names
  EXPECT_EQ(Parse({"-d", "float8_e5m2"}).o.dtype, WEFT_FLOAT8_E5M2);  // and weft's
  EXPECT_NE(Parse({"--alpha", "-1"}).err.find("--alpha: bad value '-1'"), std::string::npos);
  EXPECT_NE(Parse({"-e", "1X"}).err.find("bad value '1X'"), std::string::npos);
  EXPECT_NE(Parse({"-p"}).err.find("-p needs a value"), std::string::npos);
  EXPECT_NE(Parse({"--bogus"}).err.find("unknown option '--bogus'"), std::string::npos);
  EXPECT_NE(Parse({"-b", "2M", "-e", "1M"}).err.find("larger than"), std::string::npos);
  EXPECT_NE(Parse({"-p", "4", "-r", "4"}).err.find("only 4 ranks"), std::string::npos);
  EXPECT_EQ(Parse({"-h"}).rc, SIMCLI_HELP);
}

TEST(CliTest, SendGoesToTheLastRankByDefault) {
  Parsed p = Parse({"-C", "send", "-p", "8"});
  ASSERT_EQ(p.rc, SIMCLI_OK) << p.err;
  EXPECT_EQ(simcli_root(&p.o), 7);
  EXPECT_EQ(Parse({"-C", "send", "-p", "8", "-r", "0"}).rc, SIMCLI_ERROR);
}

TEST(CliTest, Sizes) {
  size_t b;
  EXPECT_EQ(simcli_parse_size("64K", &b), 0);
  EXPECT_EQ(b, 65536u);
  EXPECT_EQ(simcli_parse_size("1.5M", &b), 0);
  EXPECT_EQ(b, 1572864u);
  EXPECT_EQ(simcli_parse_size("1G", &b), 0);
  EXPECT_EQ(b, 1u << 30);
  EXPECT_EQ(simcli_parse_size("0.3", &b), -1);
  EXPECT_EQ(simcli_parse_size("", &b), -1);
}

std::vector<size_t> Walk(weft_coll_t coll, int p, size_t esize, size_t lo, size_t hi, size_t factor,
                         size_t step) {
  simrep_sizes_t it;
  simrep_shape_t sh;
  std::vector<size_t> out;
  simrep_sizes_begin(&it, lo, hi, factor, step);
  while (simrep_sizes_next(&it, coll, p, esize, &sh)) out.push_back(sh.bytes);
  return out;
}

TEST(ReportTest, SizeWalk) {
  EXPECT_EQ(Walk(WEFT_COLL_ALL_REDUCE, 8, 4, 8, 1u << 30, 2, 0).size(), 28u);  // 8 B .. 1 GiB
  EXPECT_EQ(Walk(WEFT_COLL_ALL_REDUCE, 8, 4, 0, 16, 2, 0), (std::vector<size_t>{0, 4, 8, 16}));
  EXPECT_EQ(Walk(WEFT_COLL_ALL_REDUCE, 8, 4, 1024, 4096, 0, 1024),
            (std::vector<size_t>{1024, 2048, 3072, 4096}));
  // all_gather rounds to whole elements per rank: 3 ranks of float32 move multiples of 12 B.
  EXPECT_EQ(Walk(WEFT_COLL_ALL_GATHER, 3, 4, 8, 64, 2, 0), (std::vector<size_t>{12, 24, 60}));
  EXPECT_EQ(Walk(WEFT_COLL_GATHER, 3, 4, 8, 64, 2, 0), (std::vector<size_t>{12, 24, 60}));
  EXPECT_EQ(Walk(WEFT_COLL_SCATTER, 3, 4, 8, 64, 2, 0), (std::vector<size_t>{12, 24, 60}));
  EXPECT_EQ(Walk(WEFT_COLL_ALL_TO_ALL, 3, 4, 8, 64, 2, 0), (std::vector<size_t>{12, 24, 60}));
  EXPECT_EQ(Walk(WEFT_COLL_BARRIER, 8, 1, 8, 1024, 2, 0), (std::vector<size_t>{0}));
}

TEST(ReportTest, ShapePerCollective) {
  simrep_shape_t s = simrep_shape(WEFT_COLL_REDUCE_SCATTER, 4, 4, 1000);
  EXPECT_EQ(s.bytes, 992u);
  EXPECT_EQ(s.count, 248u);
  EXPECT_EQ(s.sched_count, 62u);
  s = simrep_shape(WEFT_COLL_ALL_REDUCE, 4, 4, 1000);
  EXPECT_EQ(s.sched_count, 250u);
}

TEST(ReportTest, BusFactorsAsNcclTests) {
  EXPECT_DOUBLE_EQ(simrep_bus_factor(WEFT_COLL_ALL_REDUCE, 8), 1.75);
  EXPECT_DOUBLE_EQ(simrep_bus_factor(WEFT_COLL_ALL_GATHER, 8), 0.875);
  EXPECT_DOUBLE_EQ(simrep_bus_factor(WEFT_COLL_REDUCE_SCATTER, 8), 0.875);
  EXPECT_DOUBLE_EQ(simrep_bus_factor(WEFT_COLL_BROADCAST, 8), 1.0);
  EXPECT_DOUBLE_EQ(simrep_bus_factor(WEFT_COLL_GATHER, 8), 0.875);
  EXPECT_DOUBLE_EQ(simrep_bus_factor(WEFT_COLL_SCATTER, 8), 0.875);
  EXPECT_DOUBLE_EQ(simrep_bus_factor(WEFT_COLL_ALL_TO_ALL, 8), 0.875);
  EXPECT_DOUBLE_EQ(simrep_bus_factor(WEFT_COLL_REDUCE, 8), 1.0);
  EXPECT_DOUBLE_EQ(simrep_bus_factor(WEFT_COLL_BARRIER, 8), 0.0);
}

TEST(ReportTest, Row) {
  simrep_shape_t sh = {1000000000, 250000000, 250000000};
  char buf[256];
  simrep_row(buf, sizeof buf, &sh, WEFT_FLOAT32, WEFT_ALGO_RING, WEFT_COLL_ALL_REDUCE, 8, 1.0, 0.5);
  std::string row = buf;
  EXPECT_NE(row.find("1000000000    250000000   float32"), std::string::npos) << row;
  EXPECT_NE(row.find("1000000.00     1.00     1.75   500000.00     2.000\n"), std::string::npos)
      << row;
  simrep_row(buf, sizeof buf, &sh, WEFT_FLOAT32, WEFT_ALGO_RING, WEFT_COLL_SEND, 2, 1.0, -1);
  EXPECT_NE(std::string(buf).find("N/A       N/A\n"), std::string::npos) << buf;
}

TEST(ReportTest, ClosedFormUsesInterNodeLinksAcrossNodes) {
  sim_model_t m;
  sim_model_defaults(&m);
  m.inter_alpha = 1;
  m.inter_beta = 2;
  EXPECT_EQ(simrep_cost_model(&m, 8).alpha, m.alpha);
  m.ranks_per_node = 4;
  EXPECT_EQ(simrep_cost_model(&m, 8).alpha, 1.0);
  EXPECT_EQ(simrep_cost_model(&m, 8).beta, 2.0);
}

}  // namespace
