// env_test.cc -- the NCCL_* variables weft honours (nccl/env.c): each sets its WEFT_* twin when
// the library loads, a WEFT_* variable the user set wins, values without a counterpart change
// nothing; and NCCL_SOCKET_IFNAME's syntax (^ to exclude, = for exact names) choosing the
// address in a unique id.
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {
#include "nccl/nccl_internal.h"
}

namespace {

std::string env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "(unset)";
}

void clear_all() {
  for (const char* v :
       {"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT",
        "NCCL_IB_GID_INDEX", "NCCL_DEBUG", "NCCL_ALGO", "NCCL_NSOCKS_PERTHREAD",
        "NCCL_SOCKET_NTHREADS", "WEFT_SOCKET_IFNAME", "WEFT_IB_HCA", "WEFT_IB_TIMEOUT",
        "WEFT_IB_RETRY_CNT", "WEFT_IB_GID_INDEX", "WEFT_DEBUG", "WEFT_ALGO", "WEFT_NSOCKS"})
    unsetenv(v);
}

TEST(NcclEnv, EachKnobSetsItsTwin) {
  clear_all();
  setenv("NCCL_SOCKET_IFNAME", "^docker,lo", 1);
  setenv("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1", 1);
  setenv("NCCL_IB_TIMEOUT", "20", 1);
  setenv("NCCL_IB_RETRY_CNT", "5", 1);
  setenv("NCCL_IB_GID_INDEX", "3", 1);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_ALGO", "Tree", 1);
  setenv("NCCL_NSOCKS_PERTHREAD", "4", 1);
  setenv("NCCL_SOCKET_NTHREADS", "2", 1);
  nccl_env_apply();
  EXPECT_EQ(env("WEFT_SOCKET_IFNAME"), "^docker,lo");
  EXPECT_EQ(env("WEFT_IB_HCA"), "=mlx5_0:1,mlx5_1");
  EXPECT_EQ(env("WEFT_IB_TIMEOUT"), "20");
  EXPECT_EQ(env("WEFT_IB_RETRY_CNT"), "5");
  EXPECT_EQ(env("WEFT_IB_GID_INDEX"), "3");
  EXPECT_EQ(env("WEFT_DEBUG"), "1");
  EXPECT_EQ(env("WEFT_ALGO"), "all_reduce=double_tree");
  EXPECT_EQ(env("WEFT_NSOCKS"), "8");
  clear_all();
  setenv("NCCL_DEBUG", "TRACE", 1);
  setenv("NCCL_ALGO", "ring", 1);
  setenv("NCCL_NSOCKS_PERTHREAD", "9", 1);
  setenv("NCCL_SOCKET_NTHREADS", "4", 1);
  nccl_env_apply();
  EXPECT_EQ(env("WEFT_DEBUG"), "2");
  EXPECT_EQ(env("WEFT_ALGO"), "ring");
  EXPECT_EQ(env("WEFT_NSOCKS"), "16");  // weft's most
}

TEST(NcclEnv, WeftSettingsWinAndUnknownValuesChangeNothing) {
  clear_all();
  setenv("NCCL_IB_TIMEOUT", "22", 1);
  setenv("WEFT_IB_TIMEOUT", "14", 1);
  setenv("NCCL_ALGO", "NVLS,CollnetDirect", 1);
  setenv("NCCL_DEBUG", "bogus", 1);
  nccl_env_apply();
  EXPECT_EQ(env("WEFT_IB_TIMEOUT"), "14");
  EXPECT_EQ(env("WEFT_ALGO"), "(unset)");
  EXPECT_EQ(env("WEFT_DEBUG"), "(unset)");
  clear_all();
}

// The mapping happens when the library loads, with no call into it: this test re-runs itself
// with NCCL_ALGO and NCCL_DEBUG set, and the child only reads its environment.
TEST(NcclEnv, AppliedWhenTheLibraryLoads) {
  if (getenv("WEFT_ENV_TEST_CHILD")) {
    EXPECT_EQ(env("WEFT_ALGO"), "ring");
    EXPECT_EQ(env("WEFT_DEBUG"), "2");
    return;
  }
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    clear_all();
    setenv("WEFT_ENV_TEST_CHILD", "1", 1);
    setenv("NCCL_ALGO", "Ring", 1);
    setenv("NCCL_DEBUG", "TRACE", 1);
    execl("/proc/self/exe", "env_test", "--gtest_filter=NcclEnv.AppliedWhenTheLibraryLoads",
          (char*)nullptr);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child saw other values (its log says which)";
}

// The unique id carries the address of the interface NCCL_SOCKET_IFNAME selects.
std::string id_text(const ncclUniqueId& id) { return std::string(id.internal, sizeof id.internal); }

TEST(NcclEnv, SocketIfnameSyntaxChoosesTheIdsAddress) {
  clear_all();
  ncclUniqueId id;
  setenv("WEFT_SOCKET_IFNAME", "=lo", 1);
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_NE(id_text(id).find("127.0.0.1"), std::string::npos);
  setenv("WEFT_SOCKET_IFNAME", "=l", 1);  // exact: no interface is called "l"
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_NE(id_text(id).find("127.0.0.1"), std::string::npos);  // the fallback
  // Excluding loopback picks another interface that is up, where the machine has one.
  bool other = false;
  struct ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  for (struct ifaddrs* i = list; i; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
        !(i->ifa_flags & IFF_LOOPBACK))
      other = true;
  freeifaddrs(list);
  setenv("WEFT_SOCKET_IFNAME", "^lo", 1);
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  if (other) EXPECT_EQ(id_text(id).find("127.0.0.1"), std::string::npos);
  clear_all();
}

}  // namespace
