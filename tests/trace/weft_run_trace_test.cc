// weft_run_trace_test.cc -- weft-run with WEFT_TRACE: the ranks' files are merged into one trace
// with every rank's track, the parts (and stale parts of an earlier run) are removed, and the
// help says so.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/trace/trace_check.h"

namespace {

std::string Runfile(const std::string& rel) {
  const char* srcdir = getenv("TEST_SRCDIR");
  return srcdir ? std::string(srcdir) + "/weft/" + rel : rel;
}

struct Launch {
  int status = -1;
  std::string out, err;
};

// weft-run args... with `env` added to its environment; output captured through files in `dir`.
Launch WeftRun(const std::string& dir, const std::vector<std::string>& args,
               const std::vector<std::string>& env) {
  Launch r;
  std::string launcher = Runfile("tools/weft-run");
  std::string out = dir + "/.out", err = dir + "/.err";
  pid_t pid = fork();
  if (pid == 0) {
    // In `dir`, so that a trace written under a relative name would show up there too.
    if (chdir(dir.c_str()) != 0) _exit(126);
    if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(126);
    for (const std::string& e : env) putenv(strdup(e.c_str()));
    std::vector<char*> argv = {const_cast<char*>(launcher.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  waitpid(pid, &r.status, 0);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  unlink(out.c_str());
  unlink(err.c_str());
  return r;
}

TEST(WeftRunTrace, MergesEveryRanksTrackAndRemovesTheParts) {
  std::string dir = MakeTempDir();
  ASSERT_NE(dir, "");
  std::string path = dir + "/job.json";
  // A part left by an earlier run must neither survive nor end up in this run's trace.
  FILE* stale = fopen((path + ".rank2-9.json").c_str(), "w");
  ASSERT_NE(stale, nullptr);
  fputs(
      "{\"traceEvents\":[{\"name\":\"stale\",\"ph\":\"X\",\"pid\":2,\"tid\":0,\"ts\":1,\"dur\":1}]"
      "}",
      stale);
  fclose(stale);

  Launch r = WeftRun(dir, {"-n", "3", "--timeout", "60", Runfile("tests/trace/trace_prog")},
                     {"WEFT_TRACE=" + path, "WEFT_ALGO=ring"});
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out << r.err;
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"job.json"}) << r.err;
  EXPECT_NE(r.err.find("3 trace file(s) merged into " + path), std::string::npos) << r.err;

  std::string text = ReadFile(path);
  ASSERT_EQ(JsonShapeError(text), "") << text.substr(0, 2000);
  auto evs = Events(text);
  EXPECT_EQ(text.find("stale"), std::string::npos);
  for (int rank = 0; rank < 3; rank++) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    std::string right = "\"peer\":" + std::to_string((rank + 1) % 3) + ",";
    std::string left = "\"peer\":" + std::to_string((rank + 2) % 3) + ",";
    EXPECT_EQ(
        Find(evs, "process_name", rank + 1, {"\"name\":\"rank " + std::to_string(rank) + "\""})
            .size(),
        1u);
    EXPECT_GE(Find(evs, "send", rank + 1, {"\"coll\":\"all_reduce\"", right}).size(), 4u);
    EXPECT_GE(Find(evs, "recv", rank + 1, {"\"coll\":\"all_reduce\"", left}).size(), 4u);
    // The ring's arriving slices go through fused steps (reduced into the next peer's slot).
    EXPECT_GE(Find(evs, "recv-reduce-send", rank + 1, {"\"coll\":\"all_reduce\""}).size() +
                  Find(evs, "recv-reduce-copy-send", rank + 1, {"\"coll\":\"all_reduce\""}).size(),
              2u);
  }
  EXPECT_EQ(OverlapError(evs), "");
}

TEST(WeftRunTrace, RanksThatLeaveNoTraceAreNamed) {
  std::string dir = MakeTempDir();
  std::string path = dir + "/none.json";
  // `true` never creates a communicator, so no rank writes a trace.
  Launch r = WeftRun(dir, {"-n", "2", "true"}, {"WEFT_TRACE=" + path});
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.err;
  EXPECT_NE(r.err.find("WEFT_TRACE=" + path + ": no rank wrote a trace"), std::string::npos)
      << r.err;
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{});
}

TEST(WeftRunTrace, WithoutTheVariableNothingIsWrittenOrSaid) {
  std::string dir = MakeTempDir();
  Launch r = WeftRun(dir, {"-n", "3", "--timeout", "60", Runfile("tests/trace/trace_prog")},
                     {"WEFT_ALGO=ring"});
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.err;
  EXPECT_EQ(r.err.find("WEFT_TRACE"), std::string::npos) << r.err;
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{});
}

TEST(WeftRunTrace, HelpDocumentsIt) {
  std::string dir = MakeTempDir();
  Launch r = WeftRun(dir, {"--help"}, {});
  EXPECT_NE(r.out.find("WEFT_TRACE=PATH"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("merges the files into PATH"), std::string::npos) << r.out;
}

}  // namespace
