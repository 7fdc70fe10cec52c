// sim_harness.cc -- the checks around the simulator: static checks of a world's schedules, each
// collective's buffer layout (in place included) and the result it must produce.
#include "tests/collectives/sim_harness.h"

#include <sstream>
#include <utility>

extern "C" {
#include "common/error.h"
}

namespace sim {
namespace {

// Kind and count of every op rank r sends to (or receives from) `peer`, in stream order.
std::vector<std::pair<bool, size_t>> StreamShape(const schedule_t& s, int peer, bool send) {
  std::vector<std::pair<bool, size_t>> v;
  for (int i = 0; i < s.nops; i++) {
    const sched_op_t& op = s.ops[i];
    if (sched_is_local(op.kind) || op.peer != peer || IsSend(op.kind) != send) continue;
    v.push_back({IsToken(op.kind), IsToken(op.kind) ? 0 : op.count});
  }
  return v;
}

}  // namespace

std::string CollName(weft_coll_t c) {
  static const char* names[] = {"all_reduce",     "broadcast", "reduce",     "all_gather",
                                "reduce_scatter", "barrier",   "send",       "recv",
                                "gather",         "scatter",   "all_to_all", "all_to_allv"};
  return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "?";
}

std::string Describe(const Call& c) {
  std::ostringstream s;
  s << CollName(c.coll) << " p=" << c.nranks << " count=" << c.count << " root=" << c.root
    << (c.in_place ? " in place" : " out of place");
  if (c.node_of) {
    s << " nodes";
    for (int r = 0; r < c.nranks; r++) s << (r ? "," : " ") << c.node_of[r];
  }
  return s.str();
}

std::string CheckStatic(const World& w, bool all_linked) {
  int p = (int)w.sched.size();
  std::vector<int> group(p);
  for (int r = 0; r < p; r++) group[r] = r;
  auto find = [&](int x) {
    while (group[x] != x) x = group[x] = group[group[x]];
    return x;
  };
  for (int r = 0; r < p; r++) {
    const schedule_t& s = w.sched[r];
    if (sched_validate(&s, p) != WEFT_SUCCESS)
      return "rank " + std::to_string(r) + ": " + err_last();
    for (int i = 0; i < s.nops; i++) {
      const sched_op_t& op = s.ops[i];
      if (Writes(op.kind) && op.buf == SCHED_SENDBUF)
        return OpName(s, r, i) + " writes into the caller's sendbuf";
      if (!sched_is_local(op.kind) && op.peer == r) return OpName(s, r, i) + " talks to itself";
    }
    if (s.hdr_to >= 0) {
      if (w.sched[s.hdr_to].hdr_from != r)
        return "rank " + std::to_string(r) + " sends its call description to rank " +
               std::to_string(s.hdr_to) + ", which does not expect it";
      group[find(r)] = find(s.hdr_to);
    }
    if (s.hdr_from >= 0 && w.sched[s.hdr_from].hdr_to != r)
      return "rank " + std::to_string(r) + " expects a call description from rank " +
             std::to_string(s.hdr_from) + ", which does not send one";
  }
  if (all_linked)
    for (int r = 1; r < p; r++)
      if (find(r) != find(0))
        return "rank " + std::to_string(r) +
               " is not linked to rank 0 by call-description checks: a mismatched call there "
               "would go unnoticed";
  for (int a = 0; a < p; a++)
    for (int b = 0; b < p; b++) {
      if (a == b) continue;
      auto out = StreamShape(w.sched[a], b, true), in = StreamShape(w.sched[b], a, false);
      if (out != in)
        return "rank " + std::to_string(a) + " sends " + std::to_string(out.size()) +
               " ops to rank " + std::to_string(b) + " that do not pair up with the " +
               std::to_string(in.size()) + " it receives from rank " + std::to_string(a) +
               " (kind and count, in order)";
    }
  return "";
}

size_t AllToAllvCount(const Call& c, int i, int j) {
  return c.count * (size_t)((i + 2 * j + (int)c.count) % 4) / 2;
}

Splits AllToAllvSplits(const Call& c, int rank) {
  Splits s;
  int p = c.nranks;
  for (int j = 0; j < p; j++) {
    s.send_counts.push_back(AllToAllvCount(c, rank, j));
    s.send_displs.push_back(s.send_size);
    s.send_size += s.send_counts.back() + 1;
  }
  s.recv_counts.resize(p);
  s.recv_displs.resize(p);
  for (int j = p - 1; j >= 0; j--) {
    s.recv_counts[j] = AllToAllvCount(c, j, rank);
    s.recv_displs[j] = s.recv_size;
    s.recv_size += s.recv_counts[j] + 1;
  }
  return s;
}

namespace {

size_t SendSize(const Call& c, int r) {
  if (c.coll == WEFT_COLL_ALL_TO_ALLV) {  // the extent the parts reach
    Splits s = AllToAllvSplits(c, r);
    size_t end = 0;
    for (int j = 0; j < c.nranks; j++)
      if (s.send_counts[j]) end = std::max(end, s.send_displs[j] + s.send_counts[j]);
    return end;
  }
  switch (c.coll) {
    case WEFT_COLL_REDUCE_SCATTER:
    case WEFT_COLL_SCATTER:  // the root's
    case WEFT_COLL_ALL_TO_ALL:
      return c.count * c.nranks;
    case WEFT_COLL_BARRIER:
      return 0;
    default:
      return c.count;
  }
}

size_t RecvSize(const Call& c, int r) {
  if (c.coll == WEFT_COLL_ALL_TO_ALLV) {
    Splits s = AllToAllvSplits(c, r);
    size_t end = 0;
    for (int j = 0; j < c.nranks; j++)
      if (s.recv_counts[j]) end = std::max(end, s.recv_displs[j] + s.recv_counts[j]);
    return end;
  }
  switch (c.coll) {
    case WEFT_COLL_ALL_GATHER:
    case WEFT_COLL_GATHER:  // the root's
    case WEFT_COLL_ALL_TO_ALL:
      return c.count * c.nranks;
    case WEFT_COLL_BARRIER:
      return 0;
    default:
      return c.count;
  }
}

Memory Layout(const Call& c, int r) {
  Memory m;
  int p = c.nranks;
  size_t n = c.count;
  bool scatters = c.coll == WEFT_COLL_BROADCAST || c.coll == WEFT_COLL_SCATTER;
  bool gathers = c.coll == WEFT_COLL_REDUCE || c.coll == WEFT_COLL_GATHER;
  m.has_send = !(scatters && r != c.root);
  m.has_recv = !(gathers && r != c.root);
  m.send.resize(SendSize(c, r));
  m.recv.resize(RecvSize(c, r));
  for (size_t i = 0; i < m.send.size(); i++) m.send[i] = {Input(r, i), 1u << r, 0, true};
  bool rooted = scatters || gathers;
  // All-to-all has no in-place form (weft.h): the flag does not apply.
  if (!c.in_place || (rooted && r != c.root) || c.coll == WEFT_COLL_ALL_TO_ALL ||
      c.coll == WEFT_COLL_ALL_TO_ALLV)
    return m;
  switch (c.coll) {
    case WEFT_COLL_ALL_GATHER:  // sendbuf == recvbuf + r n
    case WEFT_COLL_GATHER:      // (the root)
      for (size_t i = 0; i < n; i++) m.recv[r * n + i] = m.send[i];
      m.send.clear();
      m.store[SCHED_SENDBUF] = 1;
      m.base[SCHED_SENDBUF] = r * n;
      break;
    case WEFT_COLL_REDUCE_SCATTER:  // recvbuf == sendbuf + r n
    case WEFT_COLL_SCATTER:         // (the root)
      m.recv.clear();
      m.store[SCHED_RECVBUF] = 0;
      m.base[SCHED_RECVBUF] = r * n;
      break;
    case WEFT_COLL_BARRIER:
      break;
    default:  // sendbuf == recvbuf
      m.recv = m.send;
      m.send.clear();
      m.store[SCHED_SENDBUF] = 1;
      break;
  }
  (void)p;
  return m;
}

// recvbuf as the caller sees it.
const Cell& Out(const Memory& m, size_t i) {
  int st = m.store[SCHED_RECVBUF];
  const std::vector<Cell>& v = st == 0 ? m.send : st == 1 ? m.recv : m.scratch;
  return v[m.base[SCHED_RECVBUF] + i];
}

std::string CheckOutput(const Call& c, const World& w) {
  int p = c.nranks;
  size_t n = c.count;
  uint32_t all = p >= 32 ? ~0u : (1u << p) - 1;
  bool reduces = c.coll == WEFT_COLL_ALL_REDUCE || c.coll == WEFT_COLL_REDUCE ||
                 c.coll == WEFT_COLL_REDUCE_SCATTER;
  for (int r = 0; r < p; r++) {
    const Memory& m = w.mem[r];
    if (c.coll == WEFT_COLL_BARRIER) {
      if (w.heard[r] != all)
        return "rank " + std::to_string(r) +
               " leaves the barrier without having heard from every "
               "rank (heard mask " +
               std::to_string(w.heard[r]) + ")";
      continue;
    }
    if (!m.has_recv) continue;
    size_t len = RecvSize(c, r);
    if (c.coll == WEFT_COLL_ALL_TO_ALLV) {  // part q at recv_displs[q]; the gaps stay unwritten
      Splits mine = AllToAllvSplits(c, r);
      for (int q = 0; q < p; q++) {
        Splits theirs = AllToAllvSplits(c, q);
        for (size_t i = 0; i < mine.recv_counts[q]; i++) {
          const Cell& got = Out(m, mine.recv_displs[q] + i);
          int64_t want = Input(q, theirs.send_displs[r] + i);
          std::string where = "rank " + std::to_string(r) + " part from rank " + std::to_string(q) +
                              " [" + std::to_string(i) + "]";
          if (!got.init) return where + " was never written";
          if (got.v != want)
            return where + " = " + std::to_string(got.v) + ", want " + std::to_string(want);
        }
        size_t gap = mine.recv_displs[q] + mine.recv_counts[q];
        if (gap < len && Out(m, gap).init)
          return "rank " + std::to_string(r) + " recvbuf[" + std::to_string(gap) +
                 "], a gap between parts, was written";
      }
      continue;
    }
    for (size_t i = 0; i < len; i++) {
      int64_t want = 0;
      switch (c.coll) {
        case WEFT_COLL_BROADCAST:
          want = Input(c.root, i);
          break;
        case WEFT_COLL_ALL_GATHER:
        case WEFT_COLL_GATHER:
          want = Input((int)(i / n), i % n);
          break;
        case WEFT_COLL_SCATTER:
          want = Input(c.root, r * n + i);
          break;
        case WEFT_COLL_ALL_TO_ALL:  // block q came from rank q, which held it at block r
          want = Input((int)(i / n), r * n + i % n);
          break;
        case WEFT_COLL_REDUCE_SCATTER:
          for (int q = 0; q < p; q++) want += Input(q, r * n + i);
          break;
        default:
          for (int q = 0; q < p; q++) want += Input(q, i);
      }
      const Cell& got = Out(m, i);
      std::string where = "rank " + std::to_string(r) + " recvbuf[" + std::to_string(i) + "]";
      if (!got.init) return where + " was never written";
      if (got.v != want)
        return where + " = " + std::to_string(got.v) + ", want " + std::to_string(want);
      if (!reduces) continue;
      if (got.ranks != all) return where + " misses some rank's input";
      if (got.finals != (p > 1 ? 1 : 0))
        return where + " went through " + std::to_string(got.finals) +
               " final folds (WEFT_AVG would divide that often), want exactly one";
    }
  }
  return "";
}

}  // namespace

::testing::AssertionResult RunCall(sched_build_fn build, const Call& c, const Options& o) {
  World w;
  std::string err;
  for (int r = 0; r < c.nranks && err.empty(); r++) {
    sched_args_t a = {c.coll,    r,        c.nranks, c.count,      c.root, c.in_place ? 1 : 0,
                      c.node_of, c.nnodes, c.round_count};
    Splits sp = AllToAllvSplits(c, r);
    if (c.coll == WEFT_COLL_ALL_TO_ALLV) {
      a.send_counts = sp.send_counts.data();
      a.send_displs = sp.send_displs.data();
      a.recv_counts = sp.recv_counts.data();
      a.recv_displs = sp.recv_displs.data();
    }
    schedule_t s;
    if (build(&s, &a) != WEFT_SUCCESS) err = "rank " + std::to_string(r) + ": " + err_last();
    w.sched.push_back(s);
    w.mem.push_back(Layout(c, r));
    const Memory& m = w.mem.back();
    if (err.empty() && m.has_send && s.buf_count[SCHED_SENDBUF] != SendSize(c, r))
      err = "rank " + std::to_string(r) + " schedule's sendbuf has " +
            std::to_string(s.buf_count[SCHED_SENDBUF]) + " elements, want " +
            std::to_string(SendSize(c, r));
    if (err.empty() && m.has_recv && s.buf_count[SCHED_RECVBUF] != RecvSize(c, r))
      err = "rank " + std::to_string(r) + " schedule's recvbuf has " +
            std::to_string(s.buf_count[SCHED_RECVBUF]) + " elements, want " +
            std::to_string(RecvSize(c, r));
  }
  if (err.empty()) err = CheckStatic(w, true);
  if (err.empty()) err = Simulate(w, o);
  if (err.empty()) err = CheckOutput(c, w);
  for (schedule_t& s : w.sched) sched_free(&s);
  if (err.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << Describe(c) << " (" << Describe(o) << "): " << err;
}

}  // namespace sim
