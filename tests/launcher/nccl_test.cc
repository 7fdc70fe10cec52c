// nccl_test.cc -- weft-run --nccl: which files it finds and the environment each rank gets
// (LD_AUDIT or LD_PRELOAD appended to, WEFT_NCCL_LIBRARY), and its refusals.
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "tests/launcher/launcher_util.h"

namespace {

const char kPrintEnv[] =
    "echo \"audit=$LD_AUDIT\"; echo \"preload=$LD_PRELOAD\"; echo \"lib=$WEFT_NCCL_LIBRARY\"";

std::string Real(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? buf : "(missing: " + path + ")";
}

// The built files, as the test's runfiles hold them.
std::string BuiltLib() { return Real("nccl/libnccl.so.2"); }
std::string BuiltAudit() { return Real("nccl/libweft_nccl_audit.so"); }

// The value rank 0 printed for `key` ("audit", "preload", "lib").
std::string Value(const LaunchResult& r, const std::string& key) {
  std::string want = "[rank 0] " + key + "=";
  for (const auto& line : SplitLines(r.out))
    if (line.rfind(want, 0) == 0) return line.substr(want.size());
  ADD_FAILURE() << "no " << key << " line\n" << Describe(r);
  return "";
}

// A folder holding copies of the files named (any of "libnccl.so.2", "libweft_nccl_audit.so").
std::string FolderWith(const std::string& name, bool lib, bool audit) {
  std::string dir =
      std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
  EXPECT_EQ(system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  if (lib) EXPECT_EQ(system(("cp nccl/libnccl.so.2 '" + dir + "/'").c_str()), 0);
  if (audit) EXPECT_EQ(system(("cp nccl/libweft_nccl_audit.so '" + dir + "/'").c_str()), 0);
  return Real(dir);
}

TEST(WeftRunNccl, WithoutTheOptionNothingIsSet) {
  LaunchResult r = RunLauncher({"sh", "-c", kPrintEnv});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(Value(r, "audit"), "");
  EXPECT_EQ(Value(r, "preload"), "");
  EXPECT_EQ(Value(r, "lib"), "");
}

// weft-run's binary is bazel-bin/tools/weft-run, so the files are found in bazel-bin/nccl.
TEST(WeftRunNccl, AuditByDefaultFindsTheFilesBesideWeftRun) {
  LaunchResult r = RunLauncher({"-n", "2", "--nccl", "--", "sh", "-c", kPrintEnv});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(Value(r, "audit"), BuiltAudit());
  EXPECT_EQ(Value(r, "preload"), "");
  EXPECT_EQ(Value(r, "lib"), BuiltLib());
  EXPECT_NE(r.out.find("[rank 1] audit=" + BuiltAudit()), std::string::npos) << Describe(r);
}

TEST(WeftRunNccl, AuditAppendsToLdAuditOnce) {
  LaunchOptions opts;
  // A module the loader cannot open only costs a line on the rank's stderr.
  opts.env = {"LD_AUDIT=/nonexistent/other_audit.so"};
  LaunchResult r = RunLauncher({"--nccl=audit", "sh", "-c", kPrintEnv}, opts);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(Value(r, "audit"), "/nonexistent/other_audit.so:" + BuiltAudit());

  opts.env = {"LD_AUDIT=" + BuiltAudit()};
  r = RunLauncher({"--nccl", "sh", "-c", kPrintEnv}, opts);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(Value(r, "audit"), BuiltAudit()) << "listed twice";
}

TEST(WeftRunNccl, PreloadAppendsLibncclToLdPreload) {
  LaunchOptions opts;
  opts.env = {"LD_PRELOAD=/nonexistent/other.so"};
  LaunchResult r = RunLauncher({"--nccl=preload", "sh", "-c", kPrintEnv}, opts);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(Value(r, "preload"), "/nonexistent/other.so:" + BuiltLib());
  EXPECT_EQ(Value(r, "audit"), "");
  EXPECT_EQ(Value(r, "lib"), BuiltLib());
}

TEST(WeftRunNccl, LibraryOptionImpliesAuditAndNamesTheFolder) {
  std::string dir = FolderWith("both", true, true);
  LaunchResult r = RunLauncher({"--nccl-library", dir + "/libnccl.so.2", "sh", "-c", kPrintEnv});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(Value(r, "audit"), dir + "/libweft_nccl_audit.so");
  EXPECT_EQ(Value(r, "lib"), dir + "/libnccl.so.2");
}

TEST(WeftRunNccl, EnvironmentNamesTheLibrary) {
  std::string dir = FolderWith("env", true, true);
  LaunchOptions opts;
  opts.env = {"WEFT_NCCL_LIBRARY=" + dir + "/libnccl.so.2"};
  LaunchResult r = RunLauncher({"--nccl", "sh", "-c", kPrintEnv}, opts);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(Value(r, "audit"), dir + "/libweft_nccl_audit.so");
  EXPECT_EQ(Value(r, "lib"), dir + "/libnccl.so.2");

  // The option wins over the environment.
  r = RunLauncher({"--nccl-library=nccl/libnccl.so.2", "sh", "-c", kPrintEnv}, opts);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(Value(r, "lib"), BuiltLib());
}

TEST(WeftRunNccl, AuditNeedsTheModuleBesideTheLibraryPreloadDoesNot) {
  std::string dir = FolderWith("lib_only", true, false);
  LaunchResult r = RunLauncher({"--nccl-library", dir + "/libnccl.so.2", "echo", "ran"});
  EXPECT_TRUE(r.exited && r.exit_code == 2) << Describe(r);
  EXPECT_NE(r.err.find("no libweft_nccl_audit.so beside " + dir + "/libnccl.so.2"),
            std::string::npos)
      << Describe(r);
  EXPECT_EQ(r.out, "");

  r = RunLauncher(
      {"--nccl=preload", "--nccl-library", dir + "/libnccl.so.2", "sh", "-c", kPrintEnv});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(r);
  EXPECT_EQ(Value(r, "preload"), dir + "/libnccl.so.2");
}

TEST(WeftRunNccl, Refusals) {
  LaunchResult r = RunLauncher({"--nccl=sideways", "echo", "ran"});
  EXPECT_TRUE(r.exited && r.exit_code == 2) << Describe(r);
  EXPECT_NE(r.err.find("--nccl: 'sideways' is neither audit nor preload"), std::string::npos)
      << Describe(r);

  r = RunLauncher({"--nccl-library", "/nonexistent/libnccl.so.2", "echo", "ran"});
  EXPECT_TRUE(r.exited && r.exit_code == 2) << Describe(r);
  EXPECT_NE(r.err.find("--nccl-library: '/nonexistent/libnccl.so.2': No such file"),
            std::string::npos)
      << Describe(r);

  LaunchOptions opts;
  opts.env = {"WEFT_NCCL_LIBRARY=/nonexistent/libnccl.so.2"};
  r = RunLauncher({"--nccl", "echo", "ran"}, opts);
  EXPECT_TRUE(r.exited && r.exit_code == 2) << Describe(r);
  EXPECT_NE(r.err.find("WEFT_NCCL_LIBRARY: '/nonexistent/libnccl.so.2'"), std::string::npos)
      << Describe(r);
  EXPECT_EQ(r.out, "");
}

}  // namespace
