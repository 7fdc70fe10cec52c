// trace_unit_test.cc -- common/trace.c on its own: the hooks the executor calls, the file they
// produce, the event cap and the errors, with no network.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/trace/trace_check.h"

extern "C" {
#include "common/config.h"
#include "common/error.h"
#include "common/trace.h"
}

namespace {

weft_config_t Config(const std::string& path, int max_events) {
  weft_config_t cfg;
  EXPECT_EQ(config_load(
                &cfg, [](void*, const char*) -> const char* { return nullptr; }, nullptr),
            WEFT_SUCCESS);
  snprintf(cfg.trace, sizeof cfg.trace, "%s", path.c_str());
  cfg.trace_max_events = max_events;
  return cfg;
}

TEST(Trace, OffMeansNoTraceObject) {
  weft_config_t cfg = Config("", 100);
  trace_t* t = reinterpret_cast<trace_t*>(1);
  ASSERT_EQ(trace_open(&t, &cfg, 0, 2), WEFT_SUCCESS);
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(trace_close(nullptr), WEFT_SUCCESS);
}

TEST(Trace, StreamEventsFollowEachOtherAndCarryTheirArgs) {
  std::string dir = MakeTempDir();
  weft_config_t cfg = Config(dir + "/t", 100);
  trace_t* t;
  int64_t before = RealtimeNs();
  ASSERT_EQ(trace_open(&t, &cfg, 1, 3), WEFT_SUCCESS) << err_last();
  std::string path = trace_path(t);
  // Two slices posted at once: the second can only move once the first has.
  trace_post(t, 2, 1, 0, "all_reduce", "ring", 7, 0, 0, 4096);
  trace_post(t, 2, 1, 1, "all_reduce", "ring", 7, 0, 1, 1024);
  trace_post(t, 0, 0, 0, "all_reduce", "ring", 7, 0, 0, 4096);
  trace_wait_begin(t);
  usleep(2000);
  trace_wait_end(t);
  trace_retire(t, 2, 1, 0);
  usleep(1000);
  trace_retire(t, 2, 1, 1);
  trace_retire(t, 0, 0, 0);
  trace_reduce(t, 0, 0);
  EXPECT_EQ(trace_event_count(t), 5u);
  ASSERT_EQ(trace_close(t), WEFT_SUCCESS) << err_last();
  int64_t after = RealtimeNs();

  // t.rank1.json, or t.rank1-<k>.json if this process traced before (test order).
  EXPECT_EQ(path.rfind(dir + "/t.rank1", 0), 0u) << path;
  std::string text = ReadFile(path);
  EXPECT_EQ(JsonShapeError(text), "") << text;
  EXPECT_FALSE(FileExists(path + ".tmp"));
  auto evs = Events(text);
  ASSERT_FALSE(evs.empty());
  const int pid = evs[0].pid;  // rank + 1, plus 1000000 per earlier trace of this process
  EXPECT_EQ(pid % 1000000, 2);
  EXPECT_EQ(Find(evs, "process_name", pid, {"\"name\":\"rank 1"}).size(), 1u) << text;
  EXPECT_EQ(Find(evs, "thread_name", pid, {"\"name\":\"send to 2\""}).size(), 1u) << text;
  EXPECT_EQ(Find(evs, "thread_name", pid, {"\"name\":\"recv from 0\""}).size(), 1u) << text;
  auto sends =
      Find(evs, "send", pid, {"\"coll\":\"all_reduce\"", "\"algo\":\"ring\"", "\"seq\":7,"});
  ASSERT_EQ(sends.size(), 2u) << text;
  EXPECT_EQ(sends[0].peer, 2);
  EXPECT_NE(sends[0].line.find("\"slice\":0,\"bytes\":4096"), std::string::npos) << text;
  EXPECT_NE(sends[1].line.find("\"slice\":1,\"bytes\":1024"), std::string::npos) << text;
  // The second slice starts where the first ended, not when it was posted.
  EXPECT_EQ(sends[1].ts_ns, sends[0].ts_ns + sends[0].dur_ns);
  EXPECT_GE(sends[1].dur_ns, 1000000);
  EXPECT_GE(sends[0].dur_ns, 2000000);
  EXPECT_EQ(Find(evs, "recv", pid, {"\"peer\":0,"}).size(), 1u) << text;
  auto reduce = Find(evs, "reduce", pid, {"\"peer\":0,", "\"bytes\":4096"});
  ASSERT_EQ(reduce.size(), 1u) << text;
  EXPECT_EQ(reduce[0].tid, 1);  // the executor's track
  auto wait = Find(evs, "wait", pid, {"\"coll\":\"all_reduce\""});
  ASSERT_EQ(wait.size(), 1u) << text;
  EXPECT_GE(wait[0].dur_ns, 2000000);
  // Wall-clock microseconds, so traces of different processes line up.
  for (const Event& e : evs)
    if (e.ph == "X") {
      EXPECT_GE(e.ts_ns, before - 1000);
      EXPECT_LE(e.ts_ns + e.dur_ns, after + 1000);
    }
  EXPECT_EQ(OverlapError(evs), "");
}

TEST(Trace, CapDropsEventsAndSaysSo) {
  std::string dir = MakeTempDir();
  weft_config_t cfg = Config(dir + "/t", 3);
  trace_t* t;
  ASSERT_EQ(trace_open(&t, &cfg, 0, 2), WEFT_SUCCESS) << err_last();
  for (int i = 0; i < 10; i++) {
    trace_post(t, 1, 1, i % 4, "broadcast", "ring", 0, 0, i, 8);
    trace_retire(t, 1, 1, i % 4);
  }
  EXPECT_EQ(trace_event_count(t), 3u);
  EXPECT_EQ(trace_dropped_count(t), 7u);
  std::string path = trace_path(t);
  ASSERT_EQ(trace_close(t), WEFT_SUCCESS);
  std::string text = ReadFile(path);
  EXPECT_EQ(JsonShapeError(text), "") << text;
  auto evs = Events(text);
  ASSERT_FALSE(evs.empty());
  const int pid = evs[0].pid;
  EXPECT_EQ(Find(evs, "send", pid).size(), 3u) << text;
  EXPECT_EQ(Find(evs, "process_labels", pid, {"3 events kept, 7 dropped"}).size(), 1u) << text;
  EXPECT_EQ(Find(evs, "trace truncated", pid, {"\"dropped\":7"}).size(), 1u) << text;
}

TEST(Trace, LaterTracesOfOneProcessGetTheirOwnFile) {
  std::string dir = MakeTempDir();
  weft_config_t cfg = Config(dir + "/t", 10);
  trace_t *a, *b;
  ASSERT_EQ(trace_open(&a, &cfg, 0, 2), WEFT_SUCCESS);
  ASSERT_EQ(trace_open(&b, &cfg, 0, 2), WEFT_SUCCESS);
  std::string pa = trace_path(a), pb = trace_path(b);
  EXPECT_NE(pa, pb);
  EXPECT_EQ(pb.rfind(dir + "/t.rank0-", 0), 0u) << pb;
  ASSERT_EQ(trace_close(a), WEFT_SUCCESS);
  ASSERT_EQ(trace_close(b), WEFT_SUCCESS);
  // Their tracks must not collide in a merged file either.
  auto ea = Events(ReadFile(pa)), eb = Events(ReadFile(pb));
  ASSERT_FALSE(ea.empty());
  ASSERT_FALSE(eb.empty());
  EXPECT_NE(ea[0].pid, eb[0].pid);
}

TEST(Trace, UnwritableFolderFailsAtOpenNamingIt) {
  weft_config_t cfg = Config("/nonexistent-weft-dir/sub/t", 10);
  trace_t* t = nullptr;
  EXPECT_EQ(trace_open(&t, &cfg, 2, 4), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t, nullptr);
  std::string msg = err_last();
  EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("WEFT_TRACE=/nonexistent-weft-dir/sub/t"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/nonexistent-weft-dir/sub"), std::string::npos) << msg;
}

}  // namespace
