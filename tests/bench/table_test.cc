// table_test.cc -- weft-bench's text, column for column against nccl-tests' layout.
#include "tools/bench/table.h"

#include <gtest/gtest.h>

#include <string>

namespace {

bench_args_t Args(bench_coll_t coll, weft_dtype_t dtype, weft_op_t op, int root) {
  bench_args_t a;
  bench_args_defaults(&a);
  a.coll = coll;
  a.dtype = dtype;
  a.op = op;
  a.root = root;
  return a;
}

TEST(Table, HeaderMatchesNcclTests) {
  char buf[1024];
  bench_table_header(buf, sizeof buf);
  EXPECT_EQ(
      std::string(buf),
      "#                                                              out-of-place                "
      "       in-place          \n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
      "(us)  (GB/s)  (GB/s)       \n");
}

TEST(Table, AllReduceRow) {
  bench_args_t a = Args(BENCH_ALL_REDUCE, WEFT_FLOAT32, WEFT_SUM, 2);
  bench_result_t oop = {57.63, 0.07, 0.11, 0};
  bench_result_t ip = {12345.6, 21.2345, 31.85175, 3};
  char buf[512];
  bench_table_row(buf, sizeof buf, &a, 4096, 1024, &oop, &ip);
  EXPECT_EQ(std::string(buf),
            "        4096          1024     float     sum      -1    57.63    0.07    0.11      0"
            "    12346   21.23   31.85      3\n");
}

TEST(Table, RowColumnsLineUpWithHeader) {
  bench_args_t a = Args(BENCH_ALL_REDUCE, WEFT_FLOAT32, WEFT_SUM, 0);
  bench_result_t r = {1.0, 1.0, 1.0, 0};
  char row[512];
  char header[1024];
  bench_table_row(row, sizeof row, &a, 4, 1, &r, &r);
  bench_table_header(header, sizeof header);
  std::string second = std::string(header).substr(std::string(header).find('\n') + 1);
  second = second.substr(0, second.find('\n') + 1);
  EXPECT_EQ(std::string(row).size(), second.size());
}

TEST(Table, BroadcastRowShowsRootAndNoOp) {
  bench_args_t a = Args(BENCH_BROADCAST, WEFT_BFLOAT16, WEFT_MAX, 3);
  bench_result_t oop = {150.25, 1.5, 1.5, -1};
  bench_result_t ip = {9.999, 12.0, 12.0, -1};
  char buf[512];
  bench_table_row(buf, sizeof buf, &a, 1u << 20, 524288, &oop, &ip);
  EXPECT_EQ(std::string(buf),
            "     1048576        524288  bfloat16    none       3    150.2    1.50    1.50    N/A"
            "    10.00   12.00   12.00    N/A\n");
}

// nccl-tests' columns per collective: reduce prints its op and root; all_gather neither; the size
// and count columns are whatever shape.h computed (here all_gather's total and per-rank count).
TEST(Table, RedopAndRootPerCollective) {
  bench_result_t r = {10.0, 1.0, 0.75, 0};
  char buf[512];
  bench_args_t a = Args(BENCH_REDUCE, WEFT_INT32, WEFT_MIN, 2);
  bench_table_row(buf, sizeof buf, &a, 4096, 1024, &r, &r);
  EXPECT_EQ(std::string(buf).substr(0, 52), "        4096          1024     int32     min       2");
  a = Args(BENCH_ALL_GATHER, WEFT_FLOAT32, WEFT_MAX, 2);
  bench_table_row(buf, sizeof buf, &a, 4080, 340, &r, &r);
  EXPECT_EQ(std::string(buf).substr(0, 52), "        4080           340     float    none      -1");
  a = Args(BENCH_REDUCE_SCATTER, WEFT_FLOAT64, WEFT_PROD, 2);
  bench_table_row(buf, sizeof buf, &a, 8192, 256, &r, &r);
  EXPECT_EQ(std::string(buf).substr(0, 52), "        8192           256    double    prod      -1");
}

// sendrecv and barrier have no in-place form: their in-place columns say N/A, and the row keeps
// the header's width.
TEST(Table, NoInPlaceColumnsPrintNA) {
  bench_result_t r = {123.4, 0.5, 0.5, 0};
  char buf[512];
  bench_args_t a = Args(BENCH_SENDRECV, WEFT_FLOAT32, WEFT_SUM, 1);
  bench_table_row(buf, sizeof buf, &a, 65536, 16384, &r, nullptr);
  EXPECT_EQ(std::string(buf),
            "       65536         16384     float    none      -1    123.4    0.50    0.50      0"
            "      N/A     N/A     N/A    N/A\n");
  a = Args(BENCH_BARRIER, WEFT_FLOAT32, WEFT_SUM, 0);
  bench_result_t t = {88.5, 0.0, 0.0, -1};
  bench_table_row(buf, sizeof buf, &a, 0, 0, &t, nullptr);
  EXPECT_EQ(std::string(buf),
            "           0             0      none    none      -1    88.50    0.00    0.00    N/A"
            "      N/A     N/A     N/A    N/A\n");
  char header[1024];
  bench_table_header(header, sizeof header);
  std::string second = std::string(header).substr(std::string(header).find('\n') + 1);
  EXPECT_EQ(std::string(buf).size(), second.substr(0, second.find('\n') + 1).size());
}

TEST(Table, AlgorithmLine) {
  char buf[64];
  bench_table_algo(buf, sizeof buf, "recursive_doubling");
  EXPECT_STREQ(buf, "# Algorithm: recursive_doubling\n");
}

TEST(Table, TimePrecisionFollowsMagnitude) {
  char buf[32];
  bench_table_time(buf, sizeof buf, 9.876);
  EXPECT_STREQ(buf, "   9.88");
  bench_table_time(buf, sizeof buf, 99.994);
  EXPECT_STREQ(buf, "  99.99");
  bench_table_time(buf, sizeof buf, 100.0);
  EXPECT_STREQ(buf, "  100.0");
  bench_table_time(buf, sizeof buf, 9999.94);
  EXPECT_STREQ(buf, " 9999.9");
  bench_table_time(buf, sizeof buf, 10000.4);
  EXPECT_STREQ(buf, "  10000");
  bench_table_time(buf, sizeof buf, 123456789.0);
  EXPECT_STREQ(buf, "123456789");
}

TEST(Table, Footer) {
  char buf[256];
  bench_table_footer(buf, sizeof buf, 0, 12.3456789);
  EXPECT_STREQ(buf, "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 12.3457\n#\n");
  bench_table_footer(buf, sizeof buf, 42, 0.0);
  EXPECT_STREQ(buf, "# Out of bounds values : 42 FAILED\n# Avg bus bandwidth    : 0\n#\n");
}

TEST(Table, ParamsAndRanks) {
  bench_args_t a;
  bench_args_defaults(&a);
  a.minbytes = 4096;
  a.maxbytes = 256u << 20;
  a.stepfactor = 2;
  char buf[512];
  bench_table_params(buf, sizeof buf, &a, 4, 10203);
  EXPECT_STREQ(buf,
               "# weft-bench all_reduce, weft 1.2.3\n"
               "# nRanks 4 minBytes 4096 maxBytes 268435456 step: 2(factor) warmup iters: 5 "
               "iters: 20 validation: 1 average: 1\n");
  a.stepfactor = 0;
  a.coll = BENCH_BROADCAST;
  bench_table_params(buf, sizeof buf, &a, 2, 100);
  EXPECT_STREQ(buf,
               "# weft-bench broadcast, weft 0.1.0\n"
               "# nRanks 2 minBytes 4096 maxBytes 268435456 step: 1048576(bytes) warmup iters: 5 "
               "iters: 20 validation: 1 average: 1\n");
  bench_table_rank(buf, sizeof buf, 3, 12345, "node7");
  EXPECT_STREQ(buf, "#  Rank  3 Pid  12345 on      node7\n");
}

}  // namespace
