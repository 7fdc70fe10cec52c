// args_test.cc -- weft-bench's command line: every flag, its defaults and its error messages.
#include "tools/bench/args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

struct Parsed {
  int rc;
  bench_args_t args;
  std::string err;
};

Parsed Parse(std::vector<const char *> argv) {
  argv.insert(argv.begin(), "weft-bench");
  Parsed p;
  char err[512];
  p.rc = bench_args_parse((int)argv.size(), argv.data(), &p.args, err, sizeof err);
  p.err = err;
  return p;
}

// Expects a parse error whose message contains `needle`.
void ExpectError(std::vector<const char *> argv, const std::string &needle) {
  Parsed p = Parse(argv);
  std::string line;
  for (const char *a : argv) line += std::string(a) + " ";
  EXPECT_EQ(p.rc, BENCH_ARGS_ERROR) << line;
  EXPECT_NE(p.err.find(needle), std::string::npos) << line << "-> '" << p.err << "'";
}

TEST(Args, Defaults) {
  Parsed p = Parse({});
  ASSERT_EQ(p.rc, BENCH_ARGS_OK) << p.err;
  EXPECT_EQ(p.args.minbytes, 32u << 20);
  EXPECT_EQ(p.args.maxbytes, 32u << 20);
  EXPECT_EQ(p.args.stepbytes, 1u << 20);
  EXPECT_EQ(p.args.stepfactor, 0u);
  EXPECT_EQ(p.args.iters, 20);
  EXPECT_EQ(p.args.warmup, 5);
  EXPECT_EQ(p.args.check, 1);
  EXPECT_EQ(p.args.root, 0);
  EXPECT_EQ(p.args.average, BENCH_TIME_AVG);
  EXPECT_EQ(p.args.dtype, WEFT_FLOAT32);
  EXPECT_EQ(p.args.op, WEFT_SUM);
  EXPECT_EQ(p.args.coll, BENCH_ALL_REDUCE);
}

TEST(Args, EveryFlag) {
  Parsed p =
      Parse({"-b", "4K", "-e", "256M",     "-f", "2",   "-i", "8", "-n", "7", "-w", "0",
             "-c", "0",  "-d", "bfloat16", "-o", "max", "-r", "3", "-a", "2", "-C", "broadcast"});
  ASSERT_EQ(p.rc, BENCH_ARGS_OK) << p.err;
  EXPECT_EQ(p.args.minbytes, 4096u);
  EXPECT_EQ(p.args.maxbytes, 256u << 20);
  EXPECT_EQ(p.args.stepfactor, 2u);
  EXPECT_EQ(p.args.stepbytes, 8u);
  EXPECT_EQ(p.args.iters, 7);
  EXPECT_EQ(p.args.warmup, 0);
  EXPECT_EQ(p.args.check, 0);
  EXPECT_EQ(p.args.dtype, WEFT_BFLOAT16);
  EXPECT_EQ(p.args.op, WEFT_MAX);
  EXPECT_EQ(p.args.root, 3);
  EXPECT_EQ(p.args.average, BENCH_TIME_MIN);
  EXPECT_EQ(p.args.coll, BENCH_BROADCAST);
}

TEST(Args, DeviceEngine) {
  Parsed p = Parse({"-G", "cuda"});
  ASSERT_EQ(p.rc, BENCH_ARGS_OK) << p.err;
  EXPECT_STREQ(p.args.device, "cuda");
  p = Parse({"--device=emulated"});
  ASSERT_EQ(p.rc, BENCH_ARGS_OK) << p.err;
  EXPECT_STREQ(p.args.device, "emulated");
  EXPECT_STREQ(Parse({}).args.device, "");
  ExpectError({"-G", "rocm"}, "unknown device engine 'rocm'");
  ExpectError({"-G", "cuda", "--tune", "t.txt"}, "leave out -G");
}

TEST(Args, LongAndAttachedForms) {
  Parsed p = Parse({"--minbytes=1K", "--maxbytes", "2K", "--stepfactor=4", "--iters=3",
                    "--warmup_iters", "1", "--check=0", "--datatype=double", "--op=prod",
                    "--root=1", "--average=3", "--coll=broadcast"});
  ASSERT_EQ(p.rc, BENCH_ARGS_OK) << p.err;
  EXPECT_EQ(p.args.minbytes, 1024u);
  EXPECT_EQ(p.args.maxbytes, 2048u);
  EXPECT_EQ(p.args.stepfactor, 4u);
  EXPECT_EQ(p.args.iters, 3);
  EXPECT_EQ(p.args.warmup, 1);
  EXPECT_EQ(p.args.check, 0);
  EXPECT_EQ(p.args.dtype, WEFT_FLOAT64);
  EXPECT_EQ(p.args.op, WEFT_PROD);
  EXPECT_EQ(p.args.root, 1);
  EXPECT_EQ(p.args.average, BENCH_TIME_MAX);
  EXPECT_EQ(p.args.coll, BENCH_BROADCAST);

  p = Parse({"-b1K", "-e64K", "-n5", "-Call_reduce"});
  ASSERT_EQ(p.rc, BENCH_ARGS_OK) << p.err;
  EXPECT_EQ(p.args.minbytes, 1024u);
  EXPECT_EQ(p.args.maxbytes, 65536u);
  EXPECT_EQ(p.args.iters, 5);
  EXPECT_EQ(p.args.coll, BENCH_ALL_REDUCE);
}

TEST(Args, LastOccurrenceWins) {
  Parsed p = Parse({"-n", "3", "-n", "9"});
  ASSERT_EQ(p.rc, BENCH_ARGS_OK);
  EXPECT_EQ(p.args.iters, 9);
}

TEST(Args, Help) {
  EXPECT_EQ(Parse({"-h"}).rc, BENCH_ARGS_HELP);
  EXPECT_EQ(Parse({"--help"}).rc, BENCH_ARGS_HELP);
  EXPECT_EQ(Parse({"-n", "3", "-h", "-n", "bogus"}).rc, BENCH_ARGS_HELP);
  ExpectError({"-hx"}, "-h takes no value");
}

TEST(Args, Sizes) {
  struct {
    const char *text;
    size_t bytes;
  } ok[] = {{"0", 0},          {"1", 1},           {"4096", 4096},      {"4K", 4096},
            {"4k", 4096},      {"3M", 3u << 20},   {"1G", 1u << 30},    {"1.5K", 1536},
            {"0.5M", 1 << 19}, {"2g", 2ull << 30}, {"256M", 256u << 20}};
  for (const auto &c : ok) {
    size_t bytes = 12345;
    EXPECT_EQ(bench_parse_size(c.text, &bytes), 0) << c.text;
    EXPECT_EQ(bytes, c.bytes) << c.text;
  }
  for (const char *bad : {"", "K", "-1", "1.5", "0.3K", "1KB", "1 K", "1T", "1.", ".5K", "0x10",
                          "1e3", "99999999999999999999", "17179869184G", "1.0000000001K"}) {
    size_t bytes = 0;
    EXPECT_EQ(bench_parse_size(bad, &bytes), -1) << bad;
  }
}

TEST(Args, DtypesAndAliases) {
  struct {
    const char *name;
    weft_dtype_t dtype;
  } cases[] = {{"int8", WEFT_INT8},
               {"uint8", WEFT_UINT8},
               {"int32", WEFT_INT32},
               {"uint32", WEFT_UINT32},
               {"int64", WEFT_INT64},
               {"uint64", WEFT_UINT64},
               {"half", WEFT_FLOAT16},
               {"float16", WEFT_FLOAT16},
               {"bfloat16", WEFT_BFLOAT16},
               {"float", WEFT_FLOAT32},
               {"float32", WEFT_FLOAT32},
               {"double", WEFT_FLOAT64},
               {"float64", WEFT_FLOAT64},
               {"f8e4m3", WEFT_FLOAT8_E4M3},
               {"float8_e4m3", WEFT_FLOAT8_E4M3},
               {"f8e5m2", WEFT_FLOAT8_E5M2},
               {"float8_e5m2", WEFT_FLOAT8_E5M2}};
  for (const auto &c : cases) {
    Parsed p = Parse({"-d", c.name});
    ASSERT_EQ(p.rc, BENCH_ARGS_OK) << c.name << ": " << p.err;
    EXPECT_EQ(p.args.dtype, c.dtype) << c.name;
  }
  ExpectError({"-d", "int16"}, "-d: unknown dtype 'int16'");
  ExpectError({"-d", "Float"}, "unknown dtype");
}

TEST(Args, Ops) {
  struct {
    const char *name;
    weft_op_t op;
  } cases[] = {{"sum", WEFT_SUM},
               {"prod", WEFT_PROD},
               {"min", WEFT_MIN},
               {"max", WEFT_MAX},
               {"avg", WEFT_AVG}};
  for (const auto &c : cases) {
    Parsed p = Parse({"-o", c.name});
    ASSERT_EQ(p.rc, BENCH_ARGS_OK) << c.name;
    EXPECT_EQ(p.args.op, c.op) << c.name;
  }
  ExpectError({"-o", "mean"}, "-o: unknown op 'mean'");
}

TEST(Args, Collectives) {
  EXPECT_EQ(Parse({"-C", "allreduce"}).args.coll, BENCH_ALL_REDUCE);
  EXPECT_EQ(Parse({"--coll", "bcast"}).args.coll, BENCH_BROADCAST);
  EXPECT_EQ(Parse({"-C", "reduce"}).args.coll, BENCH_REDUCE);
  EXPECT_EQ(Parse({"-C", "all_gather"}).args.coll, BENCH_ALL_GATHER);
  EXPECT_EQ(Parse({"-C", "allgather"}).args.coll, BENCH_ALL_GATHER);
  EXPECT_EQ(Parse({"-C", "reduce_scatter"}).args.coll, BENCH_REDUCE_SCATTER);
  EXPECT_EQ(Parse({"-C", "reducescatter"}).args.coll, BENCH_REDUCE_SCATTER);
  EXPECT_EQ(Parse({"-C", "sendrecv"}).args.coll, BENCH_SENDRECV);
  EXPECT_EQ(Parse({"-Cbarrier"}).args.coll, BENCH_BARRIER);
  EXPECT_EQ(Parse({"-C", "barrier"}).args.coll_given, 1);
  EXPECT_EQ(Parse({"-C", "gather"}).args.coll, BENCH_GATHER);
  EXPECT_EQ(Parse({"--coll=scatter"}).args.coll, BENCH_SCATTER);
  EXPECT_EQ(Parse({}).args.coll_given, 0);
  EXPECT_EQ(Parse({"-C", "alltoall"}).args.coll, BENCH_ALL_TO_ALL);
  EXPECT_EQ(Parse({"-C", "all_to_all"}).args.coll, BENCH_ALL_TO_ALL);
  ExpectError({"-C", "alltoallv"}, "-C: unknown collective 'alltoallv' (all_reduce broadcast");
  ExpectError({"-C", "gather_all"}, "sendrecv barrier gather scatter alltoall)");
  for (int c = 0; c < BENCH_NUM_COLLS; c++) {
    bench_coll_t parsed;
    const char *name = bench_coll_name(static_cast<bench_coll_t>(c));
    ASSERT_NE(name, nullptr);
    ASSERT_EQ(bench_coll_parse(name, &parsed), 0) << name;
    EXPECT_EQ(parsed, c) << name;
  }
}

// The names weft-bench prints are nccl-tests' and map onto weft's operations.
TEST(Args, CollectiveProperties) {
  EXPECT_EQ(bench_coll_weft(BENCH_ALL_GATHER), WEFT_COLL_ALL_GATHER);
  EXPECT_EQ(bench_coll_weft(BENCH_REDUCE_SCATTER), WEFT_COLL_REDUCE_SCATTER);
  EXPECT_EQ(bench_coll_weft(BENCH_SENDRECV), WEFT_COLL_SEND);
  EXPECT_EQ(bench_coll_weft(BENCH_BARRIER), WEFT_COLL_BARRIER);
  EXPECT_EQ(bench_coll_weft(BENCH_GATHER), WEFT_COLL_GATHER);
  EXPECT_EQ(bench_coll_weft(BENCH_SCATTER), WEFT_COLL_SCATTER);
  EXPECT_EQ(bench_coll_weft(BENCH_ALL_TO_ALL), WEFT_COLL_ALL_TO_ALL);
  EXPECT_STREQ(bench_coll_name(BENCH_ALL_TO_ALL), "alltoall");
  EXPECT_FALSE(bench_coll_rooted(BENCH_ALL_TO_ALL));
  EXPECT_FALSE(bench_coll_reduces(BENCH_ALL_TO_ALL));
  EXPECT_EQ(bench_coll_weft(BENCH_NUM_COLLS), WEFT_NUM_COLLS);
  int reducing = 0, rooted = 0;
  for (int c = 0; c < BENCH_NUM_COLLS; c++) {
    reducing += bench_coll_reduces(static_cast<bench_coll_t>(c));
    rooted += bench_coll_rooted(static_cast<bench_coll_t>(c));
  }
  EXPECT_EQ(reducing, 3);  // all_reduce, reduce, reduce_scatter
  EXPECT_EQ(rooted, 4);    // broadcast, reduce, gather, scatter
  EXPECT_TRUE(bench_coll_reduces(BENCH_REDUCE_SCATTER));
  EXPECT_TRUE(bench_coll_rooted(BENCH_REDUCE));
  EXPECT_TRUE(bench_coll_rooted(BENCH_GATHER));
  EXPECT_TRUE(bench_coll_rooted(BENCH_SCATTER));
  EXPECT_FALSE(bench_coll_reduces(BENCH_GATHER));
  EXPECT_FALSE(bench_coll_reduces(BENCH_SCATTER));
}

TEST(Args, Algo) {
  EXPECT_STREQ(Parse({}).args.algo, "auto");
  EXPECT_STREQ(Parse({"-A", "tree"}).args.algo, "tree");
  EXPECT_STREQ(Parse({"--algo=all"}).args.algo, "all");
  EXPECT_STREQ(Parse({"-Aring"}).args.algo, "ring");
  // The name is checked against the build later (algos.h); here only its form.
  ExpectError({"-A", ""}, "-A: '' is not an algorithm name");
  ExpectError({"-A", "a_name_far_too_long_for_any_algorithm"}, "-A:");
  ExpectError({"-A"}, "option -A (--algo) needs a value");
}

TEST(Args, Tune) {
  EXPECT_STREQ(Parse({}).args.tune_file, "");
  EXPECT_STREQ(Parse({"--tune", "/tmp/t.txt"}).args.tune_file, "/tmp/t.txt");
  EXPECT_STREQ(Parse({"--tune=t2"}).args.tune_file, "t2");
  EXPECT_EQ(Parse({"--tune", "t", "-C", "broadcast"}).rc, BENCH_ARGS_OK);
  ExpectError({"--tune"}, "option --tune needs a value");
  ExpectError({"--tune", "t", "-A", "ring"}, "--tune times every algorithm");
  ExpectError({"--tune", "t", "-C", "sendrecv"}, "sendrecv has one algorithm");
  char err[256];
  Parsed p = Parse({"--tune", "t"});
  EXPECT_EQ(bench_args_check_world(&p.args, 1, err, sizeof err), BENCH_ARGS_ERROR);
  EXPECT_STREQ(err, "--tune needs 2 ranks or more: one rank sends nothing to measure");
  EXPECT_EQ(bench_args_check_world(&p.args, 2, err, sizeof err), BENCH_ARGS_OK);
}

TEST(Args, IntegerRanges) {
  ExpectError({"-n", "0"}, "-n: expected an integer >= 1, got '0'");
  ExpectError({"-n", "-3"}, "-n: expected an integer >= 1");
  ExpectError({"-n", "3x"}, "-n: expected an integer >= 1, got '3x'");
  ExpectError({"-n", "99999999999"}, "-n:");
  ExpectError({"-w", "-1"}, "-w: expected an integer >= 0");
  ExpectError({"-c", "2"}, "-c: expected an integer from 0 to 1, got '2'");
  ExpectError({"-a", "4"}, "-a: expected an integer from 0 to 3, got '4'");
  ExpectError({"-a", "-1"}, "-a: expected an integer from 0 to 3");
  ExpectError({"-r", "-1"}, "-r: expected an integer >= 0");
  ExpectError({"-f", "1"}, "-f: expected an integer >= 2, got '1'");
  ExpectError({"-f", "1.5"}, "-f: expected an integer >= 2");
  EXPECT_EQ(Parse({"-w", "0", "-c", "1", "-a", "0", "-r", "0"}).rc, BENCH_ARGS_OK);
}

TEST(Args, SizeFlagErrors) {
  ExpectError({"-b", "abc"}, "-b: invalid size 'abc'");
  ExpectError({"-e", "1T"}, "-e: invalid size '1T'");
  ExpectError({"-i", "-4"}, "-i: invalid size '-4'");
}

TEST(Args, CrossChecks) {
  ExpectError({"-b", "8K", "-e", "4K"}, "-b (8192 bytes) must not exceed -e (4096 bytes)");
  ExpectError({"-b", "1K", "-e", "4K", "-i", "0"}, "-i 0 never gets from -b to -e");
  EXPECT_EQ(Parse({"-b", "1K", "-e", "4K", "-i", "0", "-f", "2"}).rc, BENCH_ARGS_OK);
  EXPECT_EQ(Parse({"-b", "4K", "-e", "4K", "-i", "0"}).rc, BENCH_ARGS_OK);
}

TEST(Args, SyntaxErrors) {
  ExpectError({"-x"}, "unknown option '-x'");
  ExpectError({"--bogus=3"}, "unknown option '--bogus'");
  ExpectError({"--min"}, "unknown option '--min'");
  ExpectError({"-b"}, "option -b (--minbytes) needs a value");
  ExpectError({"--datatype"}, "option -d (--datatype) needs a value");
  ExpectError({"8K"}, "unexpected argument '8K'");
  ExpectError({"-"}, "unexpected argument '-'");
  ExpectError({"--"}, "unexpected argument '--'");
}

TEST(Args, RootAgainstWorld) {
  char err[256];
  Parsed p = Parse({"-C", "broadcast", "-r", "3"});
  ASSERT_EQ(p.rc, BENCH_ARGS_OK);
  EXPECT_EQ(bench_args_check_world(&p.args, 4, err, sizeof err), BENCH_ARGS_OK);
  EXPECT_EQ(bench_args_check_world(&p.args, 3, err, sizeof err), BENCH_ARGS_ERROR);
  EXPECT_STREQ(err, "-r: root 3 is not a rank of this job of 3 ranks");
  // all_reduce has no root: nccl-tests ignores -r there, and so does weft-bench.
  p = Parse({"-r", "3"});
  EXPECT_EQ(bench_args_check_world(&p.args, 2, err, sizeof err), BENCH_ARGS_OK);
  p = Parse({"-C", "reduce", "-r", "2"});
  EXPECT_EQ(bench_args_check_world(&p.args, 2, err, sizeof err), BENCH_ARGS_ERROR);
  EXPECT_STREQ(err, "-r: root 2 is not a rank of this job of 2 ranks");
  p = Parse({"-C", "all_gather", "-r", "2"});
  EXPECT_EQ(bench_args_check_world(&p.args, 2, err, sizeof err), BENCH_ARGS_OK);
  for (const char *c : {"gather", "scatter"}) {
    p = Parse({"-C", c, "-r", "2"});
    ASSERT_EQ(p.rc, BENCH_ARGS_OK) << c;
    EXPECT_EQ(p.args.root, 2) << c;
    EXPECT_EQ(bench_args_check_world(&p.args, 3, err, sizeof err), BENCH_ARGS_OK) << c;
    EXPECT_EQ(bench_args_check_world(&p.args, 2, err, sizeof err), BENCH_ARGS_ERROR) << c;
    EXPECT_STREQ(err, "-r: root 2 is not a rank of this job of 2 ranks") << c;
  }
}

TEST(Args, SendrecvNeedsTwoRanks) {
  char err[256];
  Parsed p = Parse({"-C", "sendrecv"});
  EXPECT_EQ(bench_args_check_world(&p.args, 1, err, sizeof err), BENCH_ARGS_ERROR);
  EXPECT_STREQ(err, "-C sendrecv needs 2 ranks or more (weft has no send to self)");
  EXPECT_EQ(bench_args_check_world(&p.args, 2, err, sizeof err), BENCH_ARGS_OK);
}

}  // namespace
