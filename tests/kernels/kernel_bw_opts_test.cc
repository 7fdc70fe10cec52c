// kernel_bw_opts_test.cc -- tools/kernel_bw's flags and table arithmetic, without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/kernel_bw/opts.h"

namespace {

// Parses a command line given as words after the program name.
int Parse(std::vector<std::string> words, kbw_opts_t *o, std::string *err) {
  std::vector<char *> argv = {const_cast<char *>("kernel_bw")};
  for (auto &w : words) argv.push_back(&w[0]);
  char buf[256] = "";
  int r = kbw_parse((int)argv.size(), argv.data(), o, buf, sizeof buf);
  *err = buf;
  return r;
}

TEST(KernelBwOpts, DefaultsAreOneMiBToOneGiBFloatSum) {
  kbw_opts_t o;
  std::string err;
  ASSERT_EQ(Parse({}, &o, &err), 0) << err;
  EXPECT_EQ(o.minbytes, 1u << 20);
  EXPECT_EQ(o.maxbytes, 1u << 30);
  EXPECT_EQ(o.stepfactor, 2u);
  EXPECT_EQ(o.dtype, WEFT_FLOAT32);
  EXPECT_EQ(o.op, WEFT_SUM);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup, 5);
}

TEST(KernelBwOpts, NcclTestsFlags) {
  kbw_opts_t o;
  std::string err;
  ASSERT_EQ(Parse({"-b", "64M", "-e", "2G", "-f", "4", "-d", "half", "-o", "max", "-n", "7", "-w",
                   "0", "-r", "3"},
                  &o, &err),
            0)
      << err;
  EXPECT_EQ(o.minbytes, 64u << 20);
  EXPECT_EQ(o.maxbytes, (size_t)2 << 30);
  EXPECT_EQ(o.stepfactor, 4u);
  EXPECT_EQ(o.dtype, WEFT_FLOAT16);
  EXPECT_EQ(o.op, WEFT_MAX);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.avg_nranks, 3);
  ASSERT_EQ(Parse({"-d", "bfloat16", "-o", "avg", "-b", "1k"}, &o, &err), 0) << err;
  EXPECT_EQ(o.dtype, WEFT_BFLOAT16);
  EXPECT_EQ(o.op, WEFT_AVG);
  EXPECT_EQ(o.minbytes, 1024u);
  ASSERT_EQ(Parse({"-d", "float64"}, &o, &err), 0) << err;  // weft's names too
  EXPECT_EQ(o.dtype, WEFT_FLOAT64);
  ASSERT_EQ(Parse({"-d", "f8e4m3"}, &o, &err), 0) << err;  // nccl-tests' fp8 names
  EXPECT_EQ(o.dtype, WEFT_FLOAT8_E4M3);
  ASSERT_EQ(Parse({"-d", "float8_e5m2"}, &o, &err), 0) << err;
  EXPECT_EQ(o.dtype, WEFT_FLOAT8_E5M2);
}

TEST(KernelBwOpts, RejectsBadInputWithAMessage) {
  kbw_opts_t o;
  std::string err;
  EXPECT_EQ(Parse({"-d", "float128"}, &o, &err), -1);
  EXPECT_NE(err.find("float128"), std::string::npos) << err;
  EXPECT_EQ(Parse({"-o", "xor"}, &o, &err), -1);
  EXPECT_EQ(Parse({"-b", "1.5"}, &o, &err), -1);  // not a whole number of bytes
  EXPECT_EQ(Parse({"-b", "2M", "-e", "1M"}, &o, &err), -1);
  EXPECT_NE(err.find("below"), std::string::npos) << err;
  EXPECT_EQ(Parse({"-b", "2", "-d", "double"}, &o, &err), -1);  // less than one element
  EXPECT_EQ(Parse({"-f", "1"}, &o, &err), -1);
  EXPECT_EQ(Parse({"-n", "0"}, &o, &err), -1);
  EXPECT_EQ(Parse({"-n"}, &o, &err), -1);
  EXPECT_NE(err.find("needs a value"), std::string::npos) << err;
  EXPECT_EQ(Parse({"-x", "1"}, &o, &err), -1);
  EXPECT_NE(err.find("unknown option"), std::string::npos) << err;
}

TEST(KernelBwOpts, MedianIgnoresOneSlowLaunch) {
  double odd[] = {5, 1, 900, 3, 4};
  EXPECT_DOUBLE_EQ(kbw_median(odd, 5), 4);
  double even[] = {10, 2, 4, 1000};
  EXPECT_DOUBLE_EQ(kbw_median(even, 4), 7);
  double one[] = {2.5};
  EXPECT_DOUBLE_EQ(kbw_median(one, 1), 2.5);
}

TEST(KernelBwOpts, BytesMovedAndBandwidth) {
  EXPECT_EQ(kbw_bytes_moved(KBW_MEMCPY, 100), 200u);
  EXPECT_EQ(kbw_bytes_moved(KBW_COPY, 100), 200u);
  EXPECT_EQ(kbw_bytes_moved(KBW_REDUCE, 100), 300u);
  EXPECT_EQ(kbw_bytes_moved(KBW_REDUCE_COPY, 100), 400u);
  // 3 GiB in 1000 us: 3221.2 GB/s.
  EXPECT_NEAR(kbw_gbps(kbw_bytes_moved(KBW_REDUCE, (size_t)1 << 30), 1000.0), 3221.225, 1e-3);
}

}  // namespace
