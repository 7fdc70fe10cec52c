// devcompile_test.cc -- dp_compile on every (collective, algorithm) row of the table, every rank,
// world sizes 1..6, a few counts and slot sizes: each call either compiles on every rank or is
// refused on every rank with a message (four rows excepted, below); compiled programs keep the
// schedule's per-link order, the two ends of every link agree on the messages, and fused ops fold
// where that keeps link order and deps. Hand-built schedules pin down where a fold goes (and that
// the checks below catch a fold in the wrong place), and the refusals (tokens, dep_whole, a slot
// smaller than an element).
//
// What compiles (EveryRowEveryRank prints the table; p = 1..6, every count and slot):
//   on every rank: all_reduce ring, tree, double_tree, recursive_doubling,
//     hierarchical (over two uneven hosts at p = 5 some fused ops run unfused: between the
//     receive and its send, uses of both links leave no place that keeps every order); broadcast
//     ring and tree; reduce ring and tree; all_gather ring and recursive_doubling; reduce_scatter
//     ring; gather and scatter linear; all_to_all pairwise;
//   refused on every rank (p >= 2): barrier ring, dissemination and linear, send, recv, p2p_group
//   and
//     all_to_allv pairwise (tokens: the barrier's, the tag and count checks); all_to_all bruck
//     (dep_whole: it forwards blocks gathered from several messages);
//   refused on some ranks only: gather tree (p >= 4) and scatter tree (p >= 3), whose inner
//     ranks wait whole (dep_whole) while the leaves do not: ranks of one call decide differently,
//     so the caller must combine their decisions (devcompile.c); all_reduce and reduce_scatter
//     rabenseifner, whose steps wait whole (store and forward): refused, but at tiny counts a
//     rank whose ranges are empty has nothing to wait for and compiles (comm/resident.c never
//     sends these rows to the device loop); all_reduce linear, whose ranks other than 0 fold
//     their own input in with a local reduction, which the device loop does not take, while rank
//     0's input starts the fold where it lies (comm/resident.c never sends it either). The test
//     allows that for these five rows only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/collectives/sim_harness.h"

extern "C" {
#include "collectives/devcompile.h"
#include "common/error.h"
}

namespace {

const weft_dtype_t kDtype = WEFT_FLOAT32;  // 4 bytes

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

bool IsP2p(weft_coll_t c) {
  return c == WEFT_COLL_SEND || c == WEFT_COLL_RECV || c == WEFT_COLL_P2P_GROUP;
}

bool Receives(sched_kind_t k) { return k != SCHED_SEND && k != SCHED_COPY && !sim::IsToken(k); }

// ---- Checks of one program against its schedule ----------------------------------------------

bool InBuf(const dp_program_t& p, int b, uint64_t off, uint64_t n) {
  return b >= 0 && b < DP_NUM_BUFS && off <= p.buf_count[b] && n <= p.buf_count[b] - off;
}

// The schedule's ops on (peer, dir) in stream order: SENDs for DP_LINK_SEND, receiving kinds
// (fused ones included) for DP_LINK_RECV.
std::vector<int> ScheduleStream(const schedule_t& s, int peer, int dir) {
  std::vector<int> v;
  for (int i = 0; i < s.nops; i++) {
    const sched_op_t& op = s.ops[i];
    if (op.kind == SCHED_COPY || op.peer != peer) continue;
    if (dir == DP_LINK_SEND ? op.kind == SCHED_SEND : Receives(op.kind)) v.push_back(i);
  }
  return v;
}

// The schedule op a step's use of `link` stands for: its receive, or the SEND it publishes (a
// folded step's is the receive's fwd).
int LinkOp(const schedule_t& s, const dp_step_t& st, int dir) {
  if (dir == DP_LINK_RECV || st.kind == DP_SEND) return st.op;
  return s.ops[st.op].fwd;
}

// Whether folding fused op i is legal at either place (independent restatement of devprog.h's
// "Fusing": a move must not cross a use of the same link, nor leave a dependent behind).
bool FoldPossible(const schedule_t& s, int i) {
  int j = s.ops[i].fwd, to = s.ops[j].peer, from = s.ops[i].peer;
  bool at_recv = true, at_send = true;
  for (int k = i + 1; k < j; k++) {
    const sched_op_t& op = s.ops[k];
    if (op.kind == SCHED_SEND && op.peer == to) at_recv = false;
    if ((Receives(op.kind) && op.peer == from) || op.dep == i) at_send = false;
  }
  return at_recv || at_send;
}

std::string StepName(const dp_program_t& p, int t) {
  const dp_step_t& st = p.steps[t];
  std::ostringstream o;
  o << "step " << t << " (" << dp_kind_name((dp_kind_t)st.kind) << ", op " << st.op << ", ["
    << st.offset << ", +" << st.count << "))";
  return o.str();
}

// "" or the first invariant the program breaks.
std::string CheckProgram(const schedule_t& s, const dp_program_t& p, int rank, int nranks,
                         size_t slot_bytes) {
  if (p.slice_elems != slot_bytes / weft_dtype_size(kDtype)) return "slice_elems";
  if (p.nranks != nranks || p.dtype != kDtype) return "nranks or dtype not stored";
  for (int b = 0; b < DP_NUM_BUFS; b++)
    if (p.buf_count[b] != s.buf_count[b]) return "buf_count differs from the schedule's";
  if (p.nlinks < 0 || p.nlinks > DP_MAX_LINKS) return "nlinks out of range";
  for (int l = 0; l < p.nlinks; l++) {
    if (p.links[l].peer < 0 || p.links[l].peer >= nranks || p.links[l].peer == rank)
      return "link " + std::to_string(l) + " has a bad peer";
    if (p.links[l].dir != DP_LINK_SEND && p.links[l].dir != DP_LINK_RECV) return "link dir";
    for (int m = 0; m < l; m++)
      if (p.links[m].peer == p.links[l].peer && p.links[m].dir == p.links[l].dir)
        return "links " + std::to_string(m) + " and " + std::to_string(l) + " are the same";
  }
  uint64_t rounds = 0;
  int next_new_link = 0;
  std::vector<int> steps_of_op(s.nops, 0);
  for (int t = 0; t < p.nsteps; t++) {
    const dp_step_t& st = p.steps[t];
    std::string name = StepName(p, t);
    if (st.kind >= DP_NUM_KINDS) return name + ": bad kind";
    if (st.op < 0 || st.op >= s.nops) return name + ": bad op";
    steps_of_op[st.op]++;
    if (!InBuf(p, st.buf, st.offset, st.count)) return name + ": range outside its buffer";
    if ((dp_kind_reduces(st.kind) || st.kind == DP_COPY) &&
        !InBuf(p, st.src_buf, st.src_offset, st.count))
      return name + ": source range outside its buffer";
    if (st.dep >= 0 && (st.dep >= t || p.steps[st.dep].count != st.count))
      return name + ": dep " + std::to_string(st.dep) + " is not earlier with the same count";
    if (st.dep < -1) return name + ": bad dep";
    if ((st.recv_link >= 0) != (dp_kind_receives(st.kind) != 0)) return name + ": recv_link";
    if ((st.send_link >= 0) != (dp_kind_sends(st.kind) != 0)) return name + ": send_link";
    for (int dir : {DP_LINK_RECV, DP_LINK_SEND}) {  // first-use order: recv link, then send
      int l = dir == DP_LINK_RECV ? st.recv_link : st.send_link;
      if (l < 0) continue;
      if (l >= p.nlinks || p.links[l].dir != dir) return name + ": link index or direction";
      if (l > next_new_link) return name + ": links not numbered in first-use order";
      if (l == next_new_link) next_new_link++;
    }
    uint64_t n = dp_step_slices(&p, &st);
    if (n > rounds) rounds = n;
  }
  if (next_new_link != p.nlinks) return "a link no step uses";
  if (rounds != p.nrounds) return "nrounds is not the most slices of any step";
  // Every op in exactly one step, except a SEND folded into its fused op's step; an unfused
  // fused op is legal only where no fold was.
  for (int i = 0; i < s.nops; i++) {
    const sched_op_t& op = s.ops[i];
    if (!sched_is_fused(op.kind)) continue;
    int fwd_steps = steps_of_op[op.fwd];
    int t = -1;
    for (int u = 0; u < p.nsteps; u++)
      if (p.steps[u].op == i) t = u;
    if (steps_of_op[i] != 1) return "fused op " + std::to_string(i) + " not in exactly one step";
    bool folded = p.steps[t].kind != DP_RECV_REDUCE && p.steps[t].kind != DP_RECV_COPY;
    if (folded && fwd_steps != 0) return "send op " + std::to_string(op.fwd) + " left after fold";
    if (!folded && fwd_steps != 1) return "unfused op " + std::to_string(i) + " lost its send";
    if (!folded && FoldPossible(s, i))
      return "op " + std::to_string(i) + " runs unfused although a fold keeps every order";
    steps_of_op[op.fwd] = 1;
  }
  for (int i = 0; i < s.nops; i++)
    if (steps_of_op[i] != 1) return "op " + std::to_string(i) + " is in no step or in several";
  // Per link, the schedule's stream order: the same ops, in the same order.
  for (int l = 0; l < p.nlinks; l++) {
    int dir = p.links[l].dir;
    std::vector<int> got;
    for (int t = 0; t < p.nsteps; t++)
      if ((dir == DP_LINK_RECV ? p.steps[t].recv_link : p.steps[t].send_link) == l)
        got.push_back(LinkOp(s, p.steps[t], dir));
    if (got != ScheduleStream(s, p.links[l].peer, dir))
      return "link " + std::to_string(l) + (dir == DP_LINK_SEND ? " to " : " from ") +
             std::to_string(p.links[l].peer) + " carries the ops in another order than the schedule";
  }
  return "";
}

// Counts of the messages rank `a`'s program moves on its link (peer, dir), in program order.
std::vector<uint64_t> LinkCounts(const dp_program_t& p, int peer, int dir) {
  std::vector<uint64_t> v;
  for (int t = 0; t < p.nsteps; t++) {
    int l = dir == DP_LINK_RECV ? p.steps[t].recv_link : p.steps[t].send_link;
    if (l >= 0 && p.links[l].peer == peer && p.links[l].dir == dir) v.push_back(p.steps[t].count);
  }
  return v;
}

// Both ends of every link list the same counts in the same order.
std::string CheckPairs(const std::vector<dp_program_t>& progs) {
  int n = (int)progs.size();
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      if (a == b) continue;
      if (LinkCounts(progs[a], b, DP_LINK_SEND) != LinkCounts(progs[b], a, DP_LINK_RECV))
        return "rank " + std::to_string(a) + " sends rank " + std::to_string(b) +
               " other messages than it expects";
    }
  return "";
}

// ---- Running compiled programs by devprog.h's order rules -------------------------------------

// Every rank's program, run as devprog.h says a loop may (one rank's round r: a step moves its
// slice r once its dep has and every earlier step on each of its links has; a receive needs the
// message, a send a free slot of `nslots`; the next round once all of round r is done), ranks
// interleaved. "" or where it stopped: a message of another size than expected, or no rank able
// to move while some have rounds left (a program waiting on itself or on a peer).
std::string RunPrograms(const std::vector<dp_program_t>& progs, size_t nslots) {
  int n = (int)progs.size();
  std::map<std::pair<int, int>, std::vector<uint64_t>> fifo;  // (from, to) -> slice sizes queued
  std::map<std::pair<int, int>, size_t> head;                 // consumed so far
  std::vector<uint64_t> round(n, 0);
  std::vector<std::vector<char>> done(n);
  for (int r = 0; r < n; r++) done[r].assign(progs[r].nsteps, 0);
  auto slice = [](const dp_program_t& p, const dp_step_t& st, uint64_t r) {
    uint64_t lo = r * p.slice_elems;
    return std::min(st.count, lo + p.slice_elems) - lo;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int me = 0; me < n; me++) {
      const dp_program_t& p = progs[me];
      if (round[me] >= p.nrounds) continue;
      uint64_t r = round[me];
      bool all = true;
      for (int t = 0; t < p.nsteps; t++) {
        const dp_step_t& st = p.steps[t];
        if (done[me][t] || dp_step_slices(&p, &st) <= r) continue;
        bool ready = st.dep < 0 || done[me][st.dep];
        for (int u = 0; u < t && ready; u++) {  // earlier steps on my links first
          const dp_step_t& e = p.steps[u];
          bool shares = (st.recv_link >= 0 && e.recv_link == st.recv_link) ||
                        (st.send_link >= 0 && e.send_link == st.send_link);
          if (shares && !done[me][u] && dp_step_slices(&p, &e) > r) ready = false;
        }
        std::pair<int, int> in, out;
        if (ready && st.recv_link >= 0) {
          in = {p.links[st.recv_link].peer, me};
          ready = head[in] < fifo[in].size();
        }
        if (ready && st.send_link >= 0) {
          out = {me, p.links[st.send_link].peer};
          ready = fifo[out].size() - head[out] < nslots;
        }
        if (!ready) {
          all = false;
          continue;
        }
        if (st.recv_link >= 0 && fifo[in][head[in]++] != slice(p, st, r))
          return "rank " + std::to_string(me) + " " + StepName(p, t) + " round " +
                 std::to_string(r) + ": the message has another size";
        if (st.send_link >= 0) fifo[out].push_back(slice(p, st, r));
        done[me][t] = 1;
        moved = true;
      }
      if (all) {
        round[me]++;
        done[me].assign(p.nsteps, 0);
        moved = true;
      }
    }
  }
  for (int me = 0; me < n; me++)
    if (round[me] < progs[me].nrounds)
      return "rank " + std::to_string(me) + " stuck in round " + std::to_string(round[me]) +
             " with " + std::to_string(nslots) + " slots per link";
  for (auto& [link, q] : fifo)
    if (head[link] != q.size()) return "messages left on a link";
  return "";
}

// ---- Building every rank's schedule of one call ----------------------------------------------

struct CallShape {
  const algo_entry_t* e;
  int p;
  size_t count;
  size_t round_count;
  bool two_nodes;
};

std::string Describe(const CallShape& c, size_t slot) {
  std::ostringstream o;
  o << RowName(c.e) << " p=" << c.p << " count=" << c.count << " slot=" << slot
    << " round_count=" << c.round_count << (c.two_nodes ? " two nodes" : "");
  return o.str();
}

// Rank r's schedule; false with the builder's message when it failed.
bool BuildRank(const CallShape& c, int r, schedule_t* s, std::string* err) {
  std::vector<int> node_of(c.p);
  for (int i = 0; i < c.p; i++) node_of[i] = c.two_nodes && i >= c.p / 2;
  sched_args_t a = {};
  a.coll = c.e->coll;
  a.rank = r;
  a.nranks = c.p;
  a.count = c.count;
  a.root = Rooted(c.e->coll) ? c.p / 2 : -1;
  a.node_of = c.two_nodes ? node_of.data() : nullptr;
  a.nnodes = c.two_nodes ? 2 : 0;
  a.round_count = c.round_count;
  sim::Call call = {c.e->coll, c.p, c.count, -1, false};
  sim::Splits sp = sim::AllToAllvSplits(call, r);
  if (c.e->coll == WEFT_COLL_ALL_TO_ALLV) {
    a.send_counts = sp.send_counts.data();
    a.send_displs = sp.send_displs.data();
    a.recv_counts = sp.recv_counts.data();
    a.recv_displs = sp.recv_displs.data();
  }
  // p2p: a ring of messages, each rank sending count elements right and receiving from the left
  // (a group), or rank 0 sending to rank 1 (send, recv).
  std::vector<sched_p2p_t> ops;
  size_t bytes = c.count * weft_dtype_size(kDtype);
  if (c.e->coll == WEFT_COLL_P2P_GROUP) {
    ops.push_back({1, (r + 1) % c.p, 0, kDtype, c.count, bytes, 0});
    ops.push_back({0, (r + c.p - 1) % c.p, 0, kDtype, c.count, bytes, 0});
    a.p2p = ops.data();
    a.np2p = 2;
    a.p2p_send_bytes = a.p2p_recv_bytes = bytes;
  } else if (c.e->coll == WEFT_COLL_SEND || c.e->coll == WEFT_COLL_RECV) {
    a.coll = r == 0 ? WEFT_COLL_SEND : WEFT_COLL_RECV;
    a.root = r == 0 ? 1 : 0;
  }
  if (c.e->build(s, &a) != WEFT_SUCCESS) {
    *err = std::string("build: ") + err_last();
    sched_init(s, 0, 0);
    return false;
  }
  return true;
}

// How one call went on all of its ranks.
struct Outcome {
  int compiled = 0, refused = 0;
  int folded = 0, unfused = 0;  // fused ops of the compiled programs, folded or not
  std::string reason;  // the first refusal's message
  std::string failure; // a broken invariant, or "" (also: a rank refused while another compiled)
};

Outcome CompileCall(const CallShape& c, size_t slot) {
  Outcome out;
  int ranks = IsP2p(c.e->coll) && c.e->coll != WEFT_COLL_P2P_GROUP ? 2 : c.p;
  std::vector<schedule_t> scheds(ranks);
  std::vector<dp_program_t> progs(ranks);
  for (int r = 0; r < ranks && out.failure.empty(); r++) {
    std::string err;
    if (!BuildRank(c, r, &scheds[r], &err)) {
      out.failure = "rank " + std::to_string(r) + ": " + err;
      continue;
    }
    weft_result_t res = dp_compile(&scheds[r], kDtype, WEFT_SUM, c.p, slot, &progs[r]);
    if (res == WEFT_SUCCESS) {
      out.compiled++;
      for (int t = 0; t < progs[r].nsteps; t++) {
        const dp_step_t& st = progs[r].steps[t];
        if (dp_kind_receives(st.kind) && dp_kind_sends(st.kind)) out.folded++;
        if (st.op >= 0 && st.op < scheds[r].nops && sched_is_fused(scheds[r].ops[st.op].kind) &&
            !dp_kind_sends(st.kind))
          out.unfused++;
      }
      std::string bad = CheckProgram(scheds[r], progs[r], r, c.p, slot);
      if (!bad.empty()) out.failure = "rank " + std::to_string(r) + ": " + bad;
    } else if (res == WEFT_ERR_UNSUPPORTED && std::string(err_last()).find("devcompile") == 0) {
      out.refused++;
      if (out.reason.empty()) out.reason = err_last();
      if (progs[r].steps != nullptr) out.failure = "a refused program keeps its steps";
    } else {
      out.failure = "rank " + std::to_string(r) + ": code " + std::to_string(res) + ": " + err_last();
    }
  }
  if (out.failure.empty() && out.compiled == ranks) out.failure = CheckPairs(progs);
  // Links of 8 slots (what the rings' rounds were cut for, sched_round_count's 8), and without
  // bound. (With 2 slots, fewer than the rounds assume, hierarchical over two nodes waits on
  // itself at p = 5: the caller must cut rounds for the slots its links have.)
  if (out.failure.empty() && out.compiled == ranks) out.failure = RunPrograms(progs, 8);
  if (out.failure.empty() && out.compiled == ranks) out.failure = RunPrograms(progs, SIZE_MAX);
  for (int r = 0; r < ranks; r++) {
    dp_free(&progs[r]);
    sched_free(&scheds[r]);
  }
  return out;
}

// The rows expected to compile for every shape, and to be refused for every shape.
bool MustCompile(const algo_entry_t* e) {
  return e->coll == WEFT_COLL_ALL_REDUCE && e->algo == WEFT_ALGO_RING;
}
bool MustRefuse(const algo_entry_t* e) {
  return e->coll == WEFT_COLL_BARRIER || IsP2p(e->coll);
}

TEST(DevCompile, EveryRowEveryRank) {
  std::map<std::string, std::set<std::string>> table;  // row -> "compiles" / refusal reasons
  std::map<std::string, std::pair<long, long>> folds;   // row -> fused ops folded, unfused
  for (int i = 0; i < algo_count(); i++) {
    const algo_entry_t* e = algo_at(i);
    std::string row = RowName(e);
    for (int p = 1; p <= 6; p++) {
      if (IsP2p(e->coll) && p < 2) continue;
      std::vector<size_t> counts = {1, 7, 1000, 100000};
      if (e->coll == WEFT_COLL_BARRIER) counts = {0};
      for (size_t count : counts)
        for (size_t slot : {4096, 65536})
          for (int variant = 0; variant < 3; variant++) {
            // 0: one round; 1: rings in rounds of 4 slots' worth; 2: also two nodes.
            if (variant == 2 && (e->algo != WEFT_ALGO_HIERARCHICAL || p < 4)) continue;
            size_t rc = variant ? sched_round_count(slot / weft_dtype_size(kDtype), 8) : 0;
            CallShape c = {e, p, count, rc, variant == 2};
            Outcome o = CompileCall(c, slot);
            ASSERT_EQ(o.failure, "") << Describe(c, slot);
            folds[row].first += o.folded;
            folds[row].second += o.unfused;
            // Ranks of one call decide alike, except where a binomial tree's leaves have no
            // dep_whole wait and its inner ranks do (devcompile.c): reported, and limited to
            // those rows so that a new one shows up here.
            if (o.compiled && o.refused) {
              table[row].insert("MIXED: some ranks compile, others are refused");
              EXPECT_TRUE(((e->coll == WEFT_COLL_GATHER || e->coll == WEFT_COLL_SCATTER) &&
                           e->algo == WEFT_ALGO_TREE) ||
                          e->algo == WEFT_ALGO_RABENSEIFNER ||
                          (e->coll == WEFT_COLL_ALL_REDUCE && e->algo == WEFT_ALGO_LINEAR))
                  << Describe(c, slot) << ": ranks decide differently: " << o.reason;
            }
            if (o.compiled) table[row].insert("compiles");
            if (o.refused) {
              // The reason without op indices and file:line, which vary with the shape.
              std::string why;
              for (char ch : o.reason.substr(0, o.reason.find(" ["))) {
                if (!isdigit((unsigned char)ch)) why += ch;
                else if (why.empty() || why.back() != 'N') why += 'N';
              }
              table[row].insert("refused: " + why);
            }
            if (MustCompile(e)) {
              EXPECT_GT(o.compiled, 0) << Describe(c, slot) << ": " << o.reason;
            }
            if (MustRefuse(e) && p > 1) {
              EXPECT_GT(o.refused, 0) << Describe(c, slot);
            }
          }
    }
  }
  for (auto& [row, what] : table) {
    std::printf("%-32s folded %ld, unfused %ld:", row.c_str(), folds[row].first,
                folds[row].second);
    for (const std::string& w : what) std::printf(" [%s]", w.c_str());
    std::printf("\n");
  }
}

// ---- Hand-built schedules ---------------------------------------------------------------------

struct Hand {
  schedule_t s;
  Hand() { sched_init(&s, 64, 64); }
  ~Hand() { sched_free(&s); }
  int Add(sched_kind_t k, int peer, int dep, int fwd = -1, sched_buf_t buf = SCHED_RECVBUF) {
    sched_op_t op = {};
    op.kind = k;
    op.peer = peer;
    op.buf = buf;
    op.offset = 0;
    op.count = 8;
    op.src_buf = SCHED_SENDBUF;
    op.dep = dep;
    op.fwd = fwd;
    return sched_add(&s, &op);
  }
};

struct Prog {
  dp_program_t p = {};
  ~Prog() { dp_free(&p); }
};

std::vector<int> Kinds(const dp_program_t& p) {
  std::vector<int> v;
  for (int t = 0; t < p.nsteps; t++) v.push_back(p.steps[t].kind);
  return v;
}

TEST(DevCompile, FoldsAtTheReceiveWhenNothingBetweenSendsOnItsLink) {
  Hand h;  // 0: recv-reduce-send from 1 -> op 2; 1: a copy; 2: the send to 2
  h.Add(SCHED_RECV_REDUCE_SEND, 1, -1, 2);
  h.Add(SCHED_COPY, 0, -1);
  h.Add(SCHED_SEND, 2, 0);
  ASSERT_EQ(sched_validate(&h.s, 3), WEFT_SUCCESS) << err_last();
  Prog g;
  ASSERT_EQ(dp_compile(&h.s, kDtype, WEFT_SUM, 3, 4096, &g.p), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(Kinds(g.p), (std::vector<int>{DP_RECV_REDUCE_SEND, DP_COPY}));
  EXPECT_EQ(g.p.nlinks, 2);
  EXPECT_EQ(g.p.links[0].peer, 1);
  EXPECT_EQ(g.p.links[0].dir, DP_LINK_RECV);
  EXPECT_EQ(g.p.links[1].peer, 2);
  EXPECT_EQ(g.p.links[1].dir, DP_LINK_SEND);
  EXPECT_EQ(g.p.steps[0].recv_link, 0);
  EXPECT_EQ(g.p.steps[0].send_link, 1);
  EXPECT_EQ(g.p.steps[0].op, 0);
  EXPECT_EQ(g.p.slice_elems, 1024u);
  EXPECT_EQ(g.p.nrounds, 1u);
  EXPECT_EQ(CheckProgram(h.s, g.p, 0, 3, 4096), "");
}

// An earlier send on the fused op's send link sits between the two: folding at the receive's
// place would put the forward ahead of it. The fold goes to the SEND's place.
TEST(DevCompile, FoldsAtTheSendWhenASendToTheSamePeerIsBetween) {
  Hand h;  // 0: recv-reduce-copy-send from 1 -> op 2; 1: another send to 2; 2: the send to 2
  h.Add(SCHED_RECV_REDUCE_COPY_SEND, 1, -1, 2);
  h.Add(SCHED_SEND, 2, -1, -1, SCHED_SENDBUF);
  h.Add(SCHED_SEND, 2, 0);
  ASSERT_EQ(sched_validate(&h.s, 3), WEFT_SUCCESS) << err_last();
  Prog g;
  ASSERT_EQ(dp_compile(&h.s, kDtype, WEFT_SUM, 3, 4096, &g.p), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(Kinds(g.p), (std::vector<int>{DP_SEND, DP_RECV_REDUCE_COPY_SEND}));
  EXPECT_EQ(g.p.steps[0].op, 1);
  EXPECT_EQ(g.p.steps[1].op, 0);
  EXPECT_EQ(CheckProgram(h.s, g.p, 0, 3, 4096), "");

  // The same program with the fold at the receive's place (the wrong one here): the checks see
  // the send link carry op 2 before op 1.
  Prog wrong;
  wrong.p = g.p;
  wrong.p.steps = (dp_step_t*)malloc(sizeof(dp_step_t) * 2);
  wrong.p.steps[0] = g.p.steps[1];
  wrong.p.steps[1] = g.p.steps[0];
  wrong.p.links[0] = {1, DP_LINK_RECV};  // links renumbered in first-use order
  wrong.p.links[1] = {2, DP_LINK_SEND};
  wrong.p.steps[0].recv_link = 0;
  wrong.p.steps[0].send_link = 1;
  wrong.p.steps[1].send_link = 1;
  EXPECT_NE(CheckProgram(h.s, wrong.p, 0, 3, 4096).find("another order"), std::string::npos)
      << CheckProgram(h.s, wrong.p, 0, 3, 4096);
}

// Both links are used between the receive and its send: no place keeps both orders.
TEST(DevCompile, UnfusedWhenBothLinksAreUsedBetween) {
  Hand h;  // 0: recv-reduce-send from 1 -> op 3; 1: send to 2; 2: recv-copy from 1; 3: send to 2
  h.Add(SCHED_RECV_REDUCE_SEND, 1, -1, 3, SCHED_SCRATCH);
  h.Add(SCHED_SEND, 2, -1, -1, SCHED_SENDBUF);
  h.Add(SCHED_RECV_COPY, 1, -1);
  h.Add(SCHED_SEND, 2, 0, -1, SCHED_SCRATCH);
  h.s.buf_count[SCHED_SCRATCH] = 8;
  ASSERT_EQ(sched_validate(&h.s, 3), WEFT_SUCCESS) << err_last();
  Prog g;
  ASSERT_EQ(dp_compile(&h.s, kDtype, WEFT_SUM, 3, 4096, &g.p), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(Kinds(g.p), (std::vector<int>{DP_RECV_REDUCE, DP_SEND, DP_RECV_COPY, DP_SEND}));
  EXPECT_EQ(g.p.steps[0].buf, DP_SCRATCH);  // recv-reduce-send's buf holds the unfused result
  EXPECT_EQ(g.p.steps[3].buf, DP_SCRATCH);
  EXPECT_EQ(g.p.steps[3].dep, 0);
  EXPECT_EQ(CheckProgram(h.s, g.p, 0, 3, 4096), "");
}

// A copy between the two depends on the receive (so the SEND's place would leave it waiting on a
// later step) and a send to the same peer blocks the receive's place: unfused.
TEST(DevCompile, UnfusedWhenADependentAndASendAreBetween) {
  Hand h;  // 0: recv-copy-send from 1 -> op 3; 1: send to 2; 2: copy after 0; 3: send to 2
  h.Add(SCHED_RECV_COPY_SEND, 1, -1, 3);
  h.Add(SCHED_SEND, 2, -1, -1, SCHED_SENDBUF);
  int c = h.Add(SCHED_COPY, 0, 0, -1, SCHED_RECVBUF);
  h.s.ops[c].offset = 8;
  h.s.ops[c].src_buf = SCHED_RECVBUF;
  h.Add(SCHED_SEND, 2, 0);
  ASSERT_EQ(sched_validate(&h.s, 3), WEFT_SUCCESS) << err_last();
  Prog g;
  ASSERT_EQ(dp_compile(&h.s, kDtype, WEFT_SUM, 3, 4096, &g.p), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(Kinds(g.p), (std::vector<int>{DP_RECV_COPY, DP_SEND, DP_COPY, DP_SEND}));
  EXPECT_EQ(g.p.steps[2].dep, 0);
  EXPECT_EQ(CheckProgram(h.s, g.p, 0, 3, 4096), "");

  // Folding at the SEND's place here (the wrong place) leaves the copy depending on a later
  // step: the checks catch it.
  Prog wrong;
  wrong.p = g.p;
  wrong.p.steps = (dp_step_t*)malloc(sizeof(dp_step_t) * 3);
  wrong.p.nsteps = 3;
  wrong.p.steps[0] = g.p.steps[1];  // send op 1
  wrong.p.steps[1] = g.p.steps[2];  // copy op 2, dep still "the receive"
  wrong.p.steps[2] = g.p.steps[0];  // the receive, folded
  wrong.p.steps[2].kind = DP_RECV_COPY_SEND;
  wrong.p.steps[2].send_link = g.p.steps[1].send_link;
  wrong.p.steps[1].dep = 2;
  wrong.p.links[0] = {2, DP_LINK_SEND};
  wrong.p.links[1] = {1, DP_LINK_RECV};
  wrong.p.steps[0].send_link = 0;
  wrong.p.steps[2].send_link = 0;
  wrong.p.steps[2].recv_link = 1;
  EXPECT_NE(CheckProgram(h.s, wrong.p, 0, 3, 4096).find("dep 2 is not earlier"),
            std::string::npos)
      << CheckProgram(h.s, wrong.p, 0, 3, 4096);
}

// A dependency on the SEND that a fold dropped lands on the folded step.
TEST(DevCompile, DepOnADroppedSendMapsToTheFoldedStep) {
  Hand h;  // 0: recv-reduce-copy-send from 1 -> op 1; 1: send to 2; 2: recv-reduce from 3 after 1
  h.Add(SCHED_RECV_REDUCE_COPY_SEND, 1, -1, 1);
  h.Add(SCHED_SEND, 2, 0);
  h.Add(SCHED_RECV_REDUCE, 3, 1);
  ASSERT_EQ(sched_validate(&h.s, 4), WEFT_SUCCESS) << err_last();
  Prog g;
  ASSERT_EQ(dp_compile(&h.s, kDtype, WEFT_SUM, 4, 16, &g.p), WEFT_SUCCESS) << err_last();
  ASSERT_EQ(Kinds(g.p), (std::vector<int>{DP_RECV_REDUCE_COPY_SEND, DP_RECV_REDUCE}));
  EXPECT_EQ(g.p.steps[1].dep, 0);
  EXPECT_EQ(g.p.slice_elems, 4u);
  EXPECT_EQ(g.p.nrounds, 2u);  // 8 elements in slices of 4
  EXPECT_EQ(CheckProgram(h.s, g.p, 0, 4, 16), "");
}

// The run above finds programs that wait on each other, and messages of another size.
TEST(DevCompile, RunProgramsFindsWaitsAndMismatches) {
  Hand a, b, c;  // a and b each forward what the other sends them: neither can start
  a.Add(SCHED_RECV_COPY, 1, -1);
  a.Add(SCHED_SEND, 1, 0);
  b.Add(SCHED_RECV_COPY, 0, -1);
  b.Add(SCHED_SEND, 0, 0);
  std::vector<dp_program_t> progs(2);
  ASSERT_EQ(dp_compile(&a.s, kDtype, WEFT_SUM, 2, 16, &progs[0]), WEFT_SUCCESS);
  ASSERT_EQ(dp_compile(&b.s, kDtype, WEFT_SUM, 2, 16, &progs[1]), WEFT_SUCCESS);
  EXPECT_NE(RunPrograms(progs, SIZE_MAX).find("stuck"), std::string::npos);
  // c sends its own data instead: that runs, with one slot per link too.
  c.Add(SCHED_RECV_COPY, 0, -1);
  c.Add(SCHED_SEND, 0, -1, -1, SCHED_SENDBUF);
  dp_free(&progs[1]);
  ASSERT_EQ(dp_compile(&c.s, kDtype, WEFT_SUM, 2, 16, &progs[1]), WEFT_SUCCESS);
  EXPECT_EQ(RunPrograms(progs, 1), "");
  EXPECT_EQ(CheckPairs(progs), "");
  progs[1].steps[1].count = 7;  // a send of 7 elements where 8 are expected
  EXPECT_NE(RunPrograms(progs, SIZE_MAX).find("another size"), std::string::npos);
  EXPECT_NE(CheckPairs(progs), "");
  for (dp_program_t& p : progs) dp_free(&p);
}

TEST(DevCompile, DepWholeIsUnsupported) {
  Hand h;
  h.Add(SCHED_RECV_COPY, 1, -1);
  int i = h.Add(SCHED_SEND, 2, 0);
  h.s.ops[i].dep_whole = 1;
  Prog g;
  ASSERT_EQ(dp_compile(&h.s, kDtype, WEFT_SUM, 3, 4096, &g.p), WEFT_ERR_UNSUPPORTED);
  std::string msg = err_last();
  EXPECT_NE(msg.find("op 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dep_whole"), std::string::npos) << msg;
  EXPECT_EQ(g.p.steps, nullptr);
}

TEST(DevCompile, TokensAreUnsupported) {
  for (sched_kind_t k : {SCHED_SEND_TOKEN, SCHED_RECV_TOKEN}) {
    Hand h;
    h.Add(SCHED_SEND, 2, -1, -1, SCHED_SENDBUF);
    int t = h.Add(k, 1, -1);
    h.s.ops[t].count = 0;
    Prog g;
    ASSERT_EQ(dp_compile(&h.s, kDtype, WEFT_SUM, 3, 4096, &g.p), WEFT_ERR_UNSUPPORTED);
    std::string msg = err_last();
    EXPECT_NE(msg.find("op 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("token"), std::string::npos) << msg;
  }
}

TEST(DevCompile, SlotSmallerThanAnElementIsUnsupported) {
  Hand h;
  h.Add(SCHED_SEND, 1, -1, -1, SCHED_SENDBUF);
  Prog g;
  EXPECT_EQ(dp_compile(&h.s, WEFT_FLOAT64, WEFT_SUM, 2, 7, &g.p), WEFT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(err_last()).find("7 bytes"), std::string::npos) << err_last();
  EXPECT_EQ(dp_compile(&h.s, WEFT_FLOAT64, WEFT_SUM, 2, 8, &g.p), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(g.p.slice_elems, 1u);
  EXPECT_EQ(g.p.nrounds, 8u);
}

TEST(DevCompile, MoreLinksThanAProgramHoldsIsUnsupported) {
  Hand h;
  for (int peer = 1; peer <= DP_MAX_LINKS + 1; peer++) h.Add(SCHED_SEND, peer, -1, -1, SCHED_SENDBUF);
  Prog g;
  EXPECT_EQ(dp_compile(&h.s, kDtype, WEFT_SUM, DP_MAX_LINKS + 2, 4096, &g.p), WEFT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(err_last()).find("at most 64"), std::string::npos) << err_last();
  h.s.nops--;  // exactly DP_MAX_LINKS
  EXPECT_EQ(dp_compile(&h.s, kDtype, WEFT_SUM, DP_MAX_LINKS + 2, 4096, &g.p), WEFT_SUCCESS);
  EXPECT_EQ(g.p.nlinks, DP_MAX_LINKS);
}

TEST(DevCompile, EmptyScheduleAndNames) {
  Hand h;
  Prog g;
  ASSERT_EQ(dp_compile(&h.s, kDtype, WEFT_AVG, 5, 4096, &g.p), WEFT_SUCCESS);
  EXPECT_EQ(g.p.nsteps, 0);
  EXPECT_EQ(g.p.nrounds, 0u);
  EXPECT_EQ(g.p.op, WEFT_AVG);
  EXPECT_EQ(g.p.nranks, 5);
  EXPECT_STREQ(dp_kind_name(DP_SEND), "send");
  EXPECT_STREQ(dp_kind_name(DP_RECV_REDUCE_COPY_SEND), "recv-reduce-copy-send");
  EXPECT_STREQ(dp_kind_name(DP_COPY), "copy");
  EXPECT_STREQ(dp_kind_name(DP_NUM_KINDS), "?");
}

}  // namespace
