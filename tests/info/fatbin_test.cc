// fatbin_test.cc -- fatbin_targets on weft-info itself (a CUDA build lists the SASS architecture
// kernels/cuda/BUILD compiles for, sm_90, and its PTX), on a program without GPU code (none), and
// on a file that is not ELF (an error that names it).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {
#include "tools/info/fatbin.h"
}

static const char *weft_info_path;

TEST(Fatbin, WeftInfoCarriesTheKernelsTargets) {
  char out[512];
  int n = fatbin_targets(weft_info_path, out, sizeof out);
#if WEFT_EXPECT_CUDA
  ASSERT_GE(n, 1) << out;
  EXPECT_NE(strstr(out, "sm_90"), nullptr) << out;
  EXPECT_NE(strstr(out, "compute_90"), nullptr) << out;
  EXPECT_EQ(strncmp(out, "sm_", 3), 0) << "SASS first: " << out;
#else
  EXPECT_EQ(n, 0) << out;
#endif
}

TEST(Fatbin, AProgramWithoutGpuCodeHasNone) {
  char out[512];
  EXPECT_EQ(fatbin_targets("/proc/self/exe", out, sizeof out), 0) << out;
  EXPECT_STREQ(out, "");
}

TEST(Fatbin, NotElfIsAnErrorNamingTheFile) {
  std::string path =
      std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/not-elf.txt";
  FILE *f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("plain text, long enough to hold an ELF header's worth of bytes........", f);
  fclose(f);
  char out[512];
  EXPECT_EQ(fatbin_targets(path.c_str(), out, sizeof out), -1);
  EXPECT_NE(strstr(out, "not a 64-bit ELF file"), nullptr) << out;
  EXPECT_EQ(fatbin_targets("/no/such/file", out, sizeof out), -1);
  EXPECT_NE(strstr(out, "/no/such/file"), nullptr) << out;
}

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    fprintf(stderr, "usage: fatbin_test PATH-OF-WEFT-INFO\n");
    return 2;
  }
  weft_info_path = argv[1];
  return RUN_ALL_TESTS();
}
