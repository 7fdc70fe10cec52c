// shared_test.cc -- a program linked against the built libnccl.so.2 itself, as nccl-tests or
// libtorch_cuda.so are: the library is self-contained (weft inside it), its ncclX aliases run
// weft's code, and a communicator works through it (ncclCommInitAll's 2 ranks in one process).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "nccl/nccl.h"

TEST(NcclShared, TheLinkedLibraryIsWeft) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, 23007);
  Dl_info info;
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&ncclAllReduce), &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("libnccl.so.2"), std::string::npos) << info.dli_fname;
  // weft's own API stays inside the library.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "weft_comm_init"), nullptr);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "pncclAllReduce"), reinterpret_cast<void*>(&ncclAllReduce));
}

TEST(NcclShared, InitAllAndAllReduce) {
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  int32_t x[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++)
    ASSERT_EQ(ncclAllReduce(x[r], x[r], 4, ncclInt32, ncclSum, comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < 4; i++) EXPECT_EQ(x[r][i], 11 * (i + 1));
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}
