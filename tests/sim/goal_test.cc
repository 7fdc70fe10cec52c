// goal_test.cc -- the GOAL text weft-sim-goal writes: every message sent is received once, with
// its bytes and tag; as many messages as weft-sim counts; one calc per reduced or copied slice;
// every dependency weft-sim's engine has, naming a label defined before it. No LogGOPSim needed.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "tests/sim/sim_util.h"

extern "C" {
#include "tools/sim/goal.h"
#include "tools/sim/report.h"
}

namespace {

const double kUnit = 1e-12;

// What the text says, counted while checking that it reads as GOAL.
struct Parsed {
  int num_ranks = -1;
  long sends = 0, recvs = 0, calcs = 0, requires = 0, irequires = 0;
  long calc_units = 0;
  // (from, to, tag) -> bytes, for each direction
  std::map<std::tuple<int, int, long>, long> sent, received;
  std::string error;  // the first line that does not fit, empty if all do
};

Parsed Parse(const std::string& text) {
  Parsed p;
  std::istringstream in(text);
  std::string ln;
  int rank = -1;
  std::set<std::string> labels;  // defined so far in this rank's block
  auto fail = [&](const std::string& why) {
    if (p.error.empty()) p.error = why + ": '" + ln + "'";
  };
  while (std::getline(in, ln)) {
    if (ln.empty() || ln.rfind("//", 0) == 0) continue;
    int n;
    long tag, bytes, units;
    char label[64], other[64], how[16];
    if (std::sscanf(ln.c_str(), "num_ranks %d", &n) == 1) {
      p.num_ranks = n;
    } else if (std::sscanf(ln.c_str(), "rank %d {", &n) == 1) {
      if (rank != -1) fail("rank inside rank");
      rank = n;
      labels.clear();
    } else if (ln == "}") {
      if (rank == -1) fail("} outside a rank");
      rank = -1;
    } else if (std::sscanf(ln.c_str(), "%63[^:]: send %ldb to %d tag %ld", label, &bytes, &n,
                           &tag) == 4) {
      p.sends++;
      if (!p.sent.emplace(std::make_tuple(rank, n, tag), bytes).second) fail("tag sent twice");
      if (!labels.insert(label).second) fail("label defined twice");
    } else if (std::sscanf(ln.c_str(), "%63[^:]: recv %ldb from %d tag %ld", label, &bytes, &n,
                           &tag) == 4) {
      p.recvs++;
      if (!p.received.emplace(std::make_tuple(n, rank, tag), bytes).second)
        fail("tag received twice");
      if (!labels.insert(label).second) fail("label defined twice");
    } else if (std::sscanf(ln.c_str(), "%63[^:]: calc %ld", label, &units) == 2) {
      p.calcs++;
      p.calc_units += units;
      if (!labels.insert(label).second) fail("label defined twice");
    } else if (std::sscanf(ln.c_str(), "%63s %15s %63s", label, how, other) == 3 &&
               (std::string(how) == "requires" || std::string(how) == "irequires")) {
      (how[0] == 'i' ? p.irequires : p.requires)++;
      // txt2bin resolves a label when it reads the line: both must be defined already.
      if (!labels.count(label) || !labels.count(other)) fail("dependency on an undefined label");
      if (std::string(label) == other) fail("op depends on itself");
    } else {
      fail("not GOAL");
    }
  }
  if (rank != -1) fail("unclosed rank");
  return p;
}

std::string Write(const sim_model_t& m, const sim_call_t& c, goal_stats_t* st) {
  std::vector<schedule_t> s(c.nranks);
  EXPECT_EQ(goal_build(&m, &c, s.data()), WEFT_SUCCESS) << err_last();
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  size_t esize = c.coll == WEFT_COLL_BARRIER ? 1 : weft_dtype_size(c.dtype);
  EXPECT_EQ(goal_write(f, &m, c.nranks, esize, s.data(), kUnit, st), WEFT_SUCCESS) << err_last();
  std::fclose(f);
  std::string text(buf, len);
  std::free(buf);
  goal_free(s.data(), c.nranks);
  return text;
}

// Counted from the schedules, independently of how goal.c walks them: slices with a dependency
// (one `requires` per slice, or every slice of the dependency for the first slice of a
// whole-op one and one `irequires` for the others), reduced and copied slices (a calc each, a
// reduction `requires` its receive), sends after the first of their stream (`irequires`).
struct Expected {
  long calcs = 0, requires = 0, irequires = 0, calc_units = 0;
};

Expected Count(const sim_model_t& m, const sim_call_t& c) {
  std::vector<schedule_t> s(c.nranks);
  EXPECT_EQ(goal_build(&m, &c, s.data()), WEFT_SUCCESS) << err_last();
  size_t esize = c.coll == WEFT_COLL_BARRIER ? 1 : weft_dtype_size(c.dtype);
  size_t se = m.slice_bytes / esize ? m.slice_bytes / esize : 1;
  Expected e;
  for (const schedule_t& r : s) {
    auto slices = [&](const sched_op_t& op) -> size_t {
      if (op.kind == SCHED_SEND_TOKEN || op.kind == SCHED_RECV_TOKEN) return 1;
      return (op.count + se - 1) / se;
    };
    std::map<int, long> stream_sends;  // peer -> messages so far
    if (m.headers && r.hdr_to >= 0) stream_sends[r.hdr_to]++;
    for (int i = 0; i < r.nops; i++) {
      const sched_op_t& op = r.ops[i];
      size_t k = slices(op);
      bool send = op.kind == SCHED_SEND || op.kind == SCHED_SEND_TOKEN;
      if (send) {
        e.irequires += (long)k - (stream_sends[op.peer] == 0 ? 1 : 0);
        stream_sends[op.peer] += (long)k;
      }
      if (sched_is_reduce(op.kind) || sched_is_local(op.kind)) {
        e.calcs += (long)k;
        double rate = op.kind == SCHED_COPY ? m.beta_mem : m.gamma;
        for (size_t j = 0; j < k; j++) {
          size_t elems = std::min(se, op.count - j * se);
          e.calc_units += std::lround(elems * esize * rate / kUnit);
        }
        if (!sched_is_local(op.kind)) e.requires += (long)k;  // waits for its message
      }
      if (op.dep < 0 || k == 0) continue;
      size_t dk = slices(r.ops[op.dep]);
      if (op.dep_whole) {
        e.requires += (long)dk;
        e.irequires += (long)k - 1;
      } else {
        e.requires += (long)std::min(k, dk);
      }
    }
  }
  goal_free(s.data(), c.nranks);
  return e;
}

struct Call {
  weft_coll_t coll;
  weft_algo_t algo;
  int p;
  size_t bytes;
};

// Every algorithm the exporter takes, powers of two or not, sliced or whole, with and without
// call descriptions.
TEST(GoalTest, StructureMatchesTheSchedules) {
  int checked = 0;
  for (int i = 0; i < algo_count(); i++) {
    const algo_entry_t* a = algo_at(i);
    if (a->coll == WEFT_COLL_SEND || a->coll == WEFT_COLL_RECV || a->coll == WEFT_COLL_P2P_GROUP ||
        a->coll == WEFT_COLL_ALL_TO_ALLV)
      continue;
    for (int p : {2, 5, 8}) {
      for (size_t slice : {(size_t)4096, (size_t)1 << 30}) {
        for (int headers : {0, 1}) {
          sim_model_t m = simtest::Model(slice, headers);
          m.beta_mem = 1e-11;  // copies cost something, so their calcs count
          simrep_shape_t sh = simrep_shape(a->coll, p, 4, 40000);
          sim_call_t c = {a->coll, a->algo, p, sh.sched_count, WEFT_FLOAT32, p - 1};
          std::string at = std::string(weft_coll_name(a->coll)) + " " + weft_algo_name(a->algo) +
                           " p=" + std::to_string(p) + " slice=" + std::to_string(slice) +
                           " headers=" + std::to_string(headers);
          goal_stats_t st;
          Parsed g = Parse(Write(m, c, &st));
          ASSERT_EQ(g.error, "") << at;
          EXPECT_EQ(g.num_ranks, p) << at;
          // Every message is received once, with as many bytes, under the same tag.
          EXPECT_EQ(g.sent, g.received) << at;
          EXPECT_EQ(g.sends, g.recvs) << at;
          // As many messages as weft-sim puts on the wire.
          sim_result_t r;
          ASSERT_EQ(sim_run(&m, &c, nullptr, nullptr, &r), WEFT_SUCCESS) << err_last();
          EXPECT_EQ(g.sends, r.messages) << at;
          Expected e = Count(m, c);
          EXPECT_EQ(g.calcs, e.calcs) << at;
          EXPECT_EQ(g.calc_units, e.calc_units) << at;
          EXPECT_EQ(g.requires, e.requires) << at;
          EXPECT_EQ(g.irequires, e.irequires) << at;
          // The stats say what the text says.
          EXPECT_EQ(st.sends, g.sends) << at;
          EXPECT_EQ(st.recvs, g.recvs) << at;
          EXPECT_EQ(st.calcs, g.calcs) << at;
          EXPECT_EQ(st.requires, g.requires) << at;
          EXPECT_EQ(st.irequires, g.irequires) << at;
          checked++;
        }
      }
    }
  }
  EXPECT_GE(checked, 20 * 12);
}

// Unsliced ring all-reduce without call descriptions, counted by hand: per rank 2(p-1) sends and
// receives, p-1 reductions of n/p bytes; every send but the first waits for the send before it
// on its stream (2(p-1) - 1 irequires).
TEST(GoalTest, RingAllReduceByHand) {
  const int p = 6;
  sim_model_t m = simtest::Model((size_t)1 << 30, /*headers=*/0);
  sim_call_t c = {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, p, 6000, WEFT_FLOAT32, 0};
  Parsed g = Parse(Write(m, c, nullptr));
  ASSERT_EQ(g.error, "");
  EXPECT_EQ(g.sends, p * 2 * (p - 1));
  EXPECT_EQ(g.recvs, p * 2 * (p - 1));
  EXPECT_EQ(g.calcs, p * (p - 1));
  EXPECT_EQ(g.calc_units, p * (p - 1) * std::lround(4000 * m.gamma / kUnit));
  EXPECT_EQ(g.irequires, p * (2 * (p - 1) - 1));
  // A reduction requires its receive (p-1), every send but the first the op of the step before
  // (2(p-1) - 1); the receives wait for nothing: each lands in memory of its own.
  EXPECT_EQ(g.requires, p * ((p - 1) + 2 * (p - 1) - 1));
  for (const auto& kv : g.sent) EXPECT_EQ(kv.second, 4000) << "every message is a chunk";
}

TEST(GoalTest, LogGPParameters) {
  sim_model_t m = simtest::Model();
  goal_loggp_t lp = goal_loggp(&m, kUnit);
  EXPECT_EQ(lp.L, 5000000);  // 5 us
  EXPECT_EQ(lp.g, lp.L);
  EXPECT_EQ(lp.G, 100);  // 1e-10 s/B
  EXPECT_EQ(lp.o, 0);
  EXPECT_EQ(lp.O, 0);
  EXPECT_GT(lp.S, 1L << 30);
}

TEST(GoalTest, Errors) {
  sim_model_t m = simtest::Model();
  std::vector<schedule_t> s(4);
  sim_call_t send = {WEFT_COLL_SEND, WEFT_ALGO_RING, 4, 10, WEFT_FLOAT32, 3};
  EXPECT_EQ(goal_build(&m, &send, s.data()), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("send is not exported"), std::string::npos) << err_last();
  sim_call_t bad = {WEFT_COLL_BROADCAST, WEFT_ALGO_RECURSIVE_DOUBLING, 4, 10, WEFT_FLOAT32, 0};
  EXPECT_EQ(goal_build(&m, &bad, s.data()), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err_last()).find("broadcast has no"), std::string::npos) << err_last();

  // Rank 0 sends two slices of 4 KiB to rank 1, which expects one: the tags could not pair.
  m.slice_bytes = 4096;
  std::vector<schedule_t> h(2);
  for (schedule_t& x : h) sched_init(&x, 8192, 8192);
  sched_op_t op{};
  op.kind = SCHED_SEND;
  op.peer = 1;
  op.count = 2048;
  op.dep = -1;
  ASSERT_GE(sched_add(&h[0], &op), 0);
  op.kind = SCHED_RECV_COPY;
  op.peer = 0;
  op.count = 1024;
  ASSERT_GE(sched_add(&h[1], &op), 0);
  FILE* f = std::tmpfile();
  EXPECT_EQ(goal_write(f, &m, 2, 4, h.data(), kUnit, nullptr), WEFT_ERR_INTERNAL);
  EXPECT_NE(std::string(err_last()).find("rank 0 sends 2 messages to rank 1, which receives 1"),
            std::string::npos)
      << err_last();
  EXPECT_EQ(goal_write(f, &m, 2, 4, h.data(), 0, nullptr), WEFT_ERR_INVALID_ARGUMENT);
  std::fclose(f);
  for (schedule_t& x : h) sched_free(&x);
}

}  // namespace
