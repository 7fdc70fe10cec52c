// build_features_test.cc -- the CUDA switch: a build that found the toolkit links CUDA code that
// runs (or skips for lack of a device), a CPU-only build (--config=nocuda) links none.
#include <gtest/gtest.h>

extern "C" {
#include "include/weft.h"
#if WEFT_EXPECT_CUDA
#include "kernels/cuda/device_info.h"
#endif
}

TEST(BuildFeatures, CudaBitMatchesWhatTheBuildDetected) {
  // WEFT_EXPECT_CUDA comes from the repository rule that looked for the toolkit; the feature bit
  // comes from the library, set only when the CUDA objects were compiled and linked into it.
  EXPECT_EQ((weft_build_features() & WEFT_FEATURE_CUDA) != 0, WEFT_EXPECT_CUDA != 0);
}

TEST(BuildFeatures, VersionIsTheHeaders) { EXPECT_EQ(weft_version(), WEFT_VERSION_CODE); }

#if WEFT_EXPECT_CUDA
TEST(CudaBuild, KernelRunsOnADeviceWhenThereIsOne) {
  int n = kern_cuda_device_count();
  ASSERT_GE(n, 0);
  if (n == 0) GTEST_SKIP() << "no CUDA device on this machine: the kernel self-test cannot run";
  EXPECT_EQ(kern_cuda_selftest(), 0);
}
#else
TEST(CpuOnlyBuild, HasNoCudaFeature) { EXPECT_EQ(weft_build_features() & WEFT_FEATURE_CUDA, 0u); }
#endif
