// devrun_test.cc -- real schedules through the device-resident loop: every (collective,
// algorithm) row of the table is built for every rank as comm/collectives_api.c builds it,
// compiled with dp_compile, and run with dl_run_host, one thread per rank, over links of small
// slots (many slices per step); every rank's output is compared with a host reference. Each
// call runs twice on the same links, so the second run starts from the counters the first left.
//
// Inputs are tests/collectives_mp/patterns.h's: small integers whose reduction is exact in any
// order, for every op (WEFT_AVG included); the non-reducing collectives get inputs that name
// their rank and element, so a block from the wrong rank or offset shows.
//
// Calls that some rank's compiler refuses are not run; Matrix prints them per row with the
// reason (tokens, dep_whole: see collectives/devcompile.h). A run that stops with DL_TIMEOUT
// fails the call with where each rank waited (step, link, round), except the calls KnownStuck
// lists (hierarchical all-reduce at p = 5 over two uneven hosts with 2 slots), which
// KnownStuckStops requires to stop, together with two larger shapes that stop with more slots.
//
// What runs correctly (p = 1..5, ring all-reduce also 8): all_reduce ring, tree, double_tree,
// recursive_doubling, rabenseifner, hierarchical (but KnownStuck); broadcast and reduce ring and
// tree; all_gather ring and recursive_doubling; reduce_scatter ring and rabenseifner; gather and
// scatter linear; gather tree at p <= 3 and scatter tree at p <= 2 (refused beyond: dep_whole);
// all_to_all pairwise; all_to_all bruck at p = 1 (refused beyond: dep_whole).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/collectives/sim_harness.h"
#include "tests/collectives_mp/patterns.h"
#include "tests/collectives_mp/typed.h"

extern "C" {
#include "collectives/devcompile.h"
#include "common/error.h"
#include "kernels/devloop.h"
}

namespace {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizer = true;  // the loop runs ~10x slower: a smaller matrix (Matrix below)
#else
constexpr bool kSanitizer = false;
#endif

const uint64_t kTimeoutNs = 5ull * 1000 * 1000 * 1000;

const char* AlgoName(weft_algo_t a) {
  static const char* names[] = {
      "auto",         "ring",          "tree",         "double_tree", "recursive_doubling",
      "rabenseifner", "dissemination", "hierarchical", "linear",      "pairwise",
      "bruck"};
  return (unsigned)a < sizeof names / sizeof names[0] ? names[a] : "unknown";
}

std::string RowName(const algo_entry_t* e) {
  std::string coll = e->coll == WEFT_COLL_P2P_GROUP ? "p2p_group" : sim::CollName(e->coll);
  return coll + " " + AlgoName(e->algo);
}

bool Rooted(weft_coll_t c) {
  return c == WEFT_COLL_BROADCAST || c == WEFT_COLL_REDUCE || c == WEFT_COLL_GATHER ||
         c == WEFT_COLL_SCATTER;
}

bool Reducing(weft_coll_t c) {
  return c == WEFT_COLL_ALL_REDUCE || c == WEFT_COLL_REDUCE || c == WEFT_COLL_REDUCE_SCATTER;
}

bool HasInPlace(weft_coll_t c) {
  return c != WEFT_COLL_ALL_TO_ALL && c != WEFT_COLL_ALL_TO_ALLV && c != WEFT_COLL_BARRIER;
}

const char* DtypeName(weft_dtype_t d) {
  switch (d) {
    case WEFT_FLOAT16:
      return "float16";
    case WEFT_FLOAT32:
      return "float32";
    case WEFT_FLOAT64:
      return "float64";
    case WEFT_INT32:
      return "int32";
    default:
      return "dtype?";
  }
}

const char* OpName(weft_op_t op) {
  static const char* names[] = {"sum", "prod", "min", "max", "avg"};
  return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "op?";
}

// One call as every rank makes it, and the links it runs over.
struct Case {
  const algo_entry_t* e;
  int p;
  size_t count;
  weft_dtype_t dtype;
  weft_op_t op;
  bool in_place;
  int root;
  size_t slot_bytes;
  int nslots;
};

std::string Describe(const Case& c) {
  std::ostringstream o;
  o << RowName(c.e) << " p=" << c.p << " count=" << c.count << " " << DtypeName(c.dtype);
  if (Reducing(c.e->coll)) o << " " << OpName(c.op);
  if (Rooted(c.e->coll)) o << " root=" << c.root;
  o << (c.in_place ? " in place" : " out of place") << " slot=" << c.slot_bytes
    << " nslots=" << c.nslots;
  return o.str();
}

// weft.h's buffer sizes for rank r (elements); 0 where the caller may pass NULL.
size_t SendSize(const Case& c, int r) {
  size_t n = c.count, p = (size_t)c.p;
  switch (c.e->coll) {
    case WEFT_COLL_BROADCAST:
      return r == c.root ? n : 0;
    case WEFT_COLL_REDUCE_SCATTER:
    case WEFT_COLL_ALL_TO_ALL:
      return n * p;
    case WEFT_COLL_SCATTER:
      return r == c.root ? n * p : 0;
    default:
      return n;
  }
}
size_t RecvSize(const Case& c, int r) {
  size_t n = c.count, p = (size_t)c.p;
  switch (c.e->coll) {
    case WEFT_COLL_REDUCE:
      return r == c.root ? n : 0;
    case WEFT_COLL_ALL_GATHER:
    case WEFT_COLL_ALL_TO_ALL:
      return n * p;
    case WEFT_COLL_GATHER:
      return r == c.root ? n * p : 0;
    default:
      return n;
  }
}
// The in-place layout applies on this rank (weft.h; rooted collectives: the root only).
bool InPlace(const Case& c, int r) {
  return c.in_place && HasInPlace(c.e->coll) && (!Rooted(c.e->coll) || r == c.root);
}

// Rank q's input element j.
int64_t Input(const Case& c, int q, size_t j) {
  if (Reducing(c.e->coll)) return pattern_input(c.dtype, c.op, q, c.p, j);
  return (int64_t)(q + 1) * 100000 + (int64_t)j;  // exact in float32 for every count here
}

// What rank r's recvbuf[i] must hold.
int64_t Expected(const Case& c, int r, size_t i) {
  size_t n = c.count;
  switch (c.e->coll) {
    case WEFT_COLL_ALL_REDUCE:
    case WEFT_COLL_REDUCE:
      return pattern_expected(c.dtype, c.op, c.p, i);
    case WEFT_COLL_REDUCE_SCATTER:
      return pattern_expected(c.dtype, c.op, c.p, r * n + i);
    case WEFT_COLL_BROADCAST:
      return Input(c, c.root, i);
    case WEFT_COLL_ALL_GATHER:
    case WEFT_COLL_GATHER:
      return Input(c, (int)(i / n), i % n);
    case WEFT_COLL_SCATTER:
      return Input(c, c.root, r * n + i);
    case WEFT_COLL_ALL_TO_ALL:
      return Input(c, (int)(i / n), r * n + i % n);
    default:
      return 0;
  }
}

// One direction of one pair: the receiver's slots and the counters, which both ends' programs
// name (the sender's link (peer b, SEND) and the receiver's (peer a, RECV) get this same view).
struct LinkMem {
  char* slots;
  dl_counters_t* ctr;
  LinkMem(size_t bytes) {
    slots = static_cast<char*>(aligned_alloc(64, (bytes + 63) / 64 * 64));
    ctr = static_cast<dl_counters_t*>(aligned_alloc(DL_COUNTER_ALIGN, sizeof(dl_counters_t)));
    memset(ctr, 0, sizeof *ctr);
  }
  ~LinkMem() {
    free(slots);
    free(ctr);
  }
  LinkMem(const LinkMem&) = delete;
  LinkMem& operator=(const LinkMem&) = delete;
};

// One rank: its schedule, program, memory and run.
struct Rank {
  schedule_t sched;
  dp_program_t prog;
  bool built = false, compiled = false;
  // Storage: the caller's two buffers (in place, one of them holds the other, weft.h) and scratch.
  std::vector<char> send, recv, scratch;
  std::vector<dl_link_view_t> views;
  dl_run_t run;
  dl_status_t status;
  Rank() {
    memset(&prog, 0, sizeof prog);
    memset(&run, 0, sizeof run);
    memset(&status, 0, sizeof status);
  }
};

enum class Result { kRan, kRefused, kStuck, kFailed };

struct Outcome {
  Result result = Result::kRan;
  std::string message;  // the refusal, or what failed
};

std::string StatusStr(const dl_status_t& s) {
  static const char* codes[] = {"done", "timeout", "aborted", "bad program"};
  std::ostringstream o;
  o << ((unsigned)s.code < 4 ? codes[s.code] : "code?");
  if (s.code != DL_DONE)
    o << " (step " << s.step << ", link " << s.link << ", round " << s.round
      << (s.waiting_for ? ", waiting for a free slot)" : ", waiting for a message)");
  return o.str();
}

// Fills rank r's inputs and poisons its outputs, in the layout its call uses.
void Fill(const Case& c, int r, Rank& k) {
  for (std::vector<char>* v : {&k.send, &k.recv, &k.scratch})  // data() of an empty one: NULL
    if (!v->empty()) memset(v->data(), 0xA5, v->size());
  char* in = k.run.bufs[DP_SENDBUF];
  if (!in) return;
  for (size_t j = 0; j < SendSize(c, r); j++) typed_store(c.dtype, in, j, Input(c, r, j));
}

std::string Check(const Case& c, int r, const Rank& k) {
  size_t len = RecvSize(c, r);
  if (len == 0) return "";
  std::vector<char> want(len * weft_dtype_size(c.dtype));
  for (size_t i = 0; i < len; i++) typed_store(c.dtype, want.data(), i, Expected(c, r, i));
  std::string bad = typed_compare(c.dtype, k.run.bufs[DP_RECVBUF], want.data(), len);
  return bad.empty() ? "" : "rank " + std::to_string(r) + " recvbuf " + bad;
}

// Builds, compiles and runs `c` twice; kRefused when some rank's compiler refuses it.
Outcome RunCase(const Case& c, uint64_t timeout_ns) {
  Outcome out;
  int p = c.p;
  size_t es = weft_dtype_size(c.dtype);
  std::vector<int> node_of(p);
  for (int i = 0; i < p; i++) node_of[i] = i >= p / 2;  // two hosts, uneven at odd p
  std::vector<Rank> ranks(p);
  auto fail = [&](Result res, const std::string& msg) {
    if (out.message.empty()) {
      out.result = res;
      out.message = msg;
    }
  };
  for (int r = 0; r < p && out.message.empty(); r++) {
    Rank& k = ranks[r];
    sched_args_t a = {};
    a.coll = c.e->coll;
    a.rank = r;
    a.nranks = p;
    a.count = c.count;
    a.root = Rooted(c.e->coll) ? c.root : -1;
    a.in_place = InPlace(c, r);
    a.node_of = p > 1 ? node_of.data() : nullptr;
    a.nnodes = p > 1 ? 2 : 0;
    // What comm/collectives_api.c passes: slices of one slot, rounds cut for the links' slots.
    a.round_count = sched_round_count(c.slot_bytes / es, c.nslots);
    sim::Call call = {c.e->coll, p, c.count, -1, false};
    sim::Splits sp = sim::AllToAllvSplits(call, r);
    if (c.e->coll == WEFT_COLL_ALL_TO_ALLV) {
      a.send_counts = sp.send_counts.data();
      a.send_displs = sp.send_displs.data();
      a.recv_counts = sp.recv_counts.data();
      a.recv_displs = sp.recv_displs.data();
    }
    if (c.e->build(&k.sched, &a) != WEFT_SUCCESS) {
      fail(Result::kFailed, "rank " + std::to_string(r) + " build: " + err_last());
      break;
    }
    k.built = true;
    weft_result_t res = dp_compile(&k.sched, c.dtype, c.op, p, c.slot_bytes, &k.prog);
    if (res == WEFT_ERR_UNSUPPORTED) {
      fail(Result::kRefused, "rank " + std::to_string(r) + ": " + err_last());
    } else if (res != WEFT_SUCCESS) {
      fail(Result::kFailed, "rank " + std::to_string(r) + " compile: " + err_last());
    } else {
      k.compiled = true;
    }
  }
  // Memory and buffers, in the caller's layout.
  for (int r = 0; r < p && out.message.empty(); r++) {
    Rank& k = ranks[r];
    size_t n = c.count, ns = SendSize(c, r), nr = RecvSize(c, r);
    // A buffer the caller may pass as NULL (0 here) the run gets as NULL: steps naming it are a
    // bad program (dl_validate).
    if ((ns && k.sched.buf_count[SCHED_SENDBUF] > ns) ||
        (nr && k.sched.buf_count[SCHED_RECVBUF] > nr)) {
      fail(Result::kFailed, "rank " + std::to_string(r) + " schedule's buffers exceed weft.h's");
      break;
    }
    k.send.resize(ns * es);
    k.recv.resize(nr * es);
    k.scratch.resize(k.prog.buf_count[DP_SCRATCH] * es);
    char* sb = ns ? k.send.data() : nullptr;
    char* rb = nr ? k.recv.data() : nullptr;
    if (InPlace(c, r)) {
      switch (c.e->coll) {
        case WEFT_COLL_ALL_GATHER:  // sendbuf == recvbuf + r n
        case WEFT_COLL_GATHER:
          sb = rb + (size_t)r * n * es;
          break;
        case WEFT_COLL_REDUCE_SCATTER:  // recvbuf == sendbuf + r n
        case WEFT_COLL_SCATTER:
          rb = sb + (size_t)r * n * es;
          break;
        default:
          rb = sb;
          break;  // sendbuf == recvbuf
      }
    }
    k.run.prog = &k.prog;
    k.run.bufs[DP_SENDBUF] = sb;
    k.run.bufs[DP_RECVBUF] = rb;
    k.run.bufs[DP_SCRATCH] = k.scratch.empty() ? nullptr : k.scratch.data();
    k.run.timeout_ns = timeout_ns;
  }
  // One link per directed pair, the same view at both ends.
  std::map<std::pair<int, int>, std::unique_ptr<LinkMem>> links;
  int abort_flag = 0;
  for (int r = 0; r < p && out.message.empty(); r++) {
    Rank& k = ranks[r];
    for (int l = 0; l < k.prog.nlinks; l++) {
      int peer = k.prog.links[l].peer;
      std::pair<int, int> key =
          k.prog.links[l].dir == DP_LINK_SEND ? std::make_pair(r, peer) : std::make_pair(peer, r);
      std::unique_ptr<LinkMem>& m = links[key];
      if (!m) m.reset(new LinkMem((size_t)c.nslots * c.slot_bytes));
      k.views.push_back({m->slots, (uint64_t)c.nslots, c.slot_bytes, m->ctr});
    }
    k.run.links = k.views.data();
    k.run.abort = &abort_flag;
  }
  for (int pass = 0; pass < 2 && out.message.empty(); pass++) {
    for (int r = 0; r < p; r++) Fill(c, r, ranks[r]);
    __atomic_store_n(&abort_flag, 0, __ATOMIC_RELAXED);
    std::vector<std::thread> threads;
    for (int r = 0; r < p; r++)
      threads.emplace_back([&ranks, &abort_flag, r] {
        ranks[r].status = dl_run_host(&ranks[r].run);
        // A stuck or broken rank ends the others' waits at once instead of after the timeout.
        if (ranks[r].status.code != DL_DONE) __atomic_store_n(&abort_flag, 1, __ATOMIC_RELAXED);
      });
    for (std::thread& t : threads) t.join();
    std::string where;
    bool stuck = false, bad = false;
    for (int r = 0; r < p; r++) {
      const dl_status_t& s = ranks[r].status;
      if (s.code == DL_DONE) continue;
      stuck |= s.code == DL_TIMEOUT;
      bad |= s.code == DL_BAD_PROGRAM;
      where += " rank " + std::to_string(r) + ": " + StatusStr(s) + ";";
    }
    std::string run = "run " + std::to_string(pass + 1) + ":";
    if (bad) fail(Result::kFailed, run + where);
    if (stuck) fail(Result::kStuck, run + where);
    for (int r = 0; r < p && out.message.empty(); r++) {
      std::string bad_data = Check(c, r, ranks[r]);
      if (!bad_data.empty()) fail(Result::kFailed, run + " " + bad_data);
    }
  }
  for (Rank& k : ranks) {
    if (k.compiled) dp_free(&k.prog);
    if (k.built) sched_free(&k.sched);
  }
  return out;
}

// Rows this test does not run: the p2p rows need a group's ops, not a collective's arguments,
// and all_to_allv its uneven splits; devcompile_test shows the compiler refuses them for p >= 2
// (tokens: tag and count checks), as it does barriers.
bool Runnable(const algo_entry_t* e) {
  return e->coll != WEFT_COLL_SEND && e->coll != WEFT_COLL_RECV && e->coll != WEFT_COLL_P2P_GROUP &&
         e->coll != WEFT_COLL_BARRIER && e->coll != WEFT_COLL_ALL_TO_ALLV;
}

// Calls known to stop (DL_TIMEOUT), skipped by Matrix and required to stop by KnownStuckStops,
// so that a fix shows. Hierarchical all-reduce over two uneven hosts (p = 5: ranks {0, 1} and
// {2, 3, 4}) with 2 slots per link, at every count that has cells to send (count >= 7): the
// finding devcompile_test's abstract simulation made, here on the real loop. Why: phase 1 on
// host B is a ring of 3 whose steps after the first are fused (recv-reduce-send: a slice is
// consumed only once it can be published). Each rank first sends its own chunk, which is cut
// into pieces and every piece into H = 2 cells, all in round 0: 2 messages ahead on its send
// link. With 2 slots that link is full, so every rank of the ring sits in its first fused step
// (step 2, waiting for a free slot) while its right neighbour, in the same step, cannot consume
// until its own link frees: a cycle. round_count (sched_round_count: slots / 2 slices) bounds
// the elements of a round, not its messages, and the cells multiply those. Beyond this matrix
// the same holds with more slots: p = 6 (3 + 3) stops with 2 slots, p = 7 (3 + 4) at count 1000
// with 4 (its chunks span more pieces); KnownStuckStops keeps both as evidence. So no fixed slot
// count makes every shape safe: the builder must bound the messages of a round (or the launcher
// count them and refuse).
bool KnownStuck(const Case& c) {
  return c.e->coll == WEFT_COLL_ALL_REDUCE && c.e->algo == WEFT_ALGO_HIERARCHICAL && c.p == 5 &&
         c.nslots == 2 && c.count >= 7;
}

// The calls of one row: every shape at float32 sum (roots: all of them at the smallest counts),
// then the dtypes and ops of reducing rows at a few shapes.
std::vector<Case> RowCases(const algo_entry_t* e) {
  std::vector<Case> v;
  bool ring_ar = e->coll == WEFT_COLL_ALL_REDUCE && e->algo == WEFT_ALGO_RING;
  std::vector<int> ps = {1, 2, 3, 4, 5};
  if (ring_ar) ps.push_back(8);
  std::vector<size_t> counts = {1, 7, 1000, 4099};
  for (int p : ps)
    for (size_t count : counts)
      for (size_t slot : {64, 256})
        for (int nslots : {2, 4, 8})
          for (bool in_place : {false, true}) {
            if (in_place && !HasInPlace(e->coll)) continue;
            // Large counts: one slot size and in place or not, by turns.
            if (count >= 1000 && (slot == 64) != (nslots == 4)) continue;
            if (kSanitizer && count >= 1000 && (in_place || nslots == 8)) continue;
            std::vector<int> roots = {p / 2};
            if (Rooted(e->coll) && count <= 7)
              for (int r = 0; r < p; r++)
                if (r != p / 2) roots.push_back(r);
            for (int root : roots)
              v.push_back({e, p, count, WEFT_FLOAT32, WEFT_SUM, in_place, root, slot, nslots});
          }
  std::vector<std::pair<weft_dtype_t, weft_op_t>> types;
  for (weft_dtype_t d : {WEFT_FLOAT32, WEFT_INT32})
    for (int op = 0; op < (Reducing(e->coll) ? WEFT_NUM_OPS : 1); op++)
      types.push_back({d, (weft_op_t)op});
  if (Reducing(e->coll)) {
    types.push_back({WEFT_FLOAT64, WEFT_AVG});
    types.push_back({WEFT_FLOAT16, WEFT_SUM});
  }
  int turn = 0;
  for (auto t : types)
    for (int p : {3, 5})
      for (size_t count : {7, 1000}) {
        if (kSanitizer && count == 1000 && p == 5) continue;
        int nslots = 2 << (turn % 3);
        bool in_place = HasInPlace(e->coll) && turn % 2;
        turn++;
        v.push_back({e, p, count, t.first, t.second, in_place, turn % p, 64, nslots});
      }
  return v;
}

TEST(DevRun, Matrix) {
  std::vector<std::string> report;
  for (int i = 0; i < algo_count(); i++) {
    const algo_entry_t* e = algo_at(i);
    std::string row = RowName(e);
    if (!Runnable(e)) {
      report.push_back(row + ": not run (tokens: refused by dp_compile for p >= 2)");
      continue;
    }
    int ran = 0, skipped = 0;
    std::set<int> refused_p;  // world sizes some rank refused
    std::string refusal;      // the first refusal
    std::set<std::string> stuck;
    for (const Case& c : RowCases(e)) {
      if (KnownStuck(c)) {
        skipped++;
        continue;
      }
      Outcome o = RunCase(c, kTimeoutNs);
      if (o.result == Result::kRefused) {
        refused_p.insert(c.p);
        if (refusal.empty()) refusal = o.message;
        continue;
      }
      if (o.result == Result::kStuck) {
        std::ostringstream s;
        s << "p=" << c.p << " nslots=" << c.nslots << " slot=" << c.slot_bytes;
        stuck.insert(s.str());
      }
      EXPECT_EQ(o.result, Result::kRan) << Describe(c) << ": " << o.message;
      ran++;
    }
    std::ostringstream line;
    line << row << ": " << ran << " calls ran";
    if (skipped) line << ", " << skipped << " skipped (known to stop)";
    for (auto& s : stuck) line << "\n    STUCK " << s;
    if (!refused_p.empty()) {
      line << "\n    refused at p =";
      for (int p : refused_p) line << " " << p;
      line << ", e.g. " << refusal;
    }
    report.push_back(line.str());
  }
  for (const std::string& s : report) printf("%s\n", s.c_str());
}

// The calls KnownStuck skips still stop: when this fails, the cause was fixed and KnownStuck
// should go. A short timeout: a stopped run never resumes, and the other ranks are aborted.
TEST(DevRun, KnownStuckStops) {
  const algo_entry_t* e = algo_lookup(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_HIERARCHICAL);
  ASSERT_NE(e, nullptr);
  // Beyond Matrix's world sizes, not skipped anywhere: more slots do not always help.
  for (int nslots : {2, 4}) {
    Case c = {e, nslots == 2 ? 6 : 7, 1000, WEFT_FLOAT32, WEFT_SUM, false, 0, 64, nslots};
    Outcome o = RunCase(c, 300ull * 1000 * 1000);
    EXPECT_EQ(o.result, Result::kStuck) << Describe(c) << ": " << o.message;
    printf("%s: %s\n", Describe(c).c_str(), o.message.c_str());
  }
  for (size_t count : {7, 1000}) {
    Case c = {e, 5, count, WEFT_FLOAT32, WEFT_SUM, false, 0, 64, 2};
    ASSERT_TRUE(KnownStuck(c));
    Outcome o = RunCase(c, 300ull * 1000 * 1000);
    EXPECT_EQ(o.result, Result::kStuck) << Describe(c) << ": " << o.message;
    printf("%s: %s\n", Describe(c).c_str(), o.message.c_str());
    c.nslots = 4;  // enough
    ASSERT_FALSE(KnownStuck(c));
    o = RunCase(c, kTimeoutNs);
    EXPECT_EQ(o.result, Result::kRan) << Describe(c) << ": " << o.message;
  }
}

}  // namespace
