// sim_engine.cc -- the in-memory executor of sim_harness.h: streams, slices, dependencies,
// windows, link behaviour, hazards and the provenance of every element.
#include <array>
#include <deque>
#include <map>
#include <random>
#include <sstream>
#include <utility>

#include "tests/collectives/sim_harness.h"

extern "C" {
#include "common/error.h"
}

namespace sim {

bool IsSend(sched_kind_t k) { return k == SCHED_SEND || k == SCHED_SEND_TOKEN; }
bool IsToken(sched_kind_t k) { return k == SCHED_SEND_TOKEN || k == SCHED_RECV_TOKEN; }
// The fused kinds run here as their unfused parts (schedule.h): the receive writes buf and the
// send it feeds reads buf. That is the path every fused schedule must also be correct on; the
// fused path itself is checked with real transports (tests/collectives_mp).
bool Writes(sched_kind_t k) {
  return k == SCHED_RECV_COPY || sched_is_reduce(k) || sched_is_local(k) ||
         k == SCHED_RECV_COPY_SEND;
}

const char* BufName(int b) {
  static const char* names[] = {"sendbuf", "recvbuf", "scratch"};
  return b >= 0 && b < SCHED_NUM_BUFS ? names[b] : "?";
}

std::string OpName(const schedule_t& s, int rank, int i) {
  std::ostringstream o;
  o << "rank " << rank;
  if (i < 0) return o.str() + " call description";
  const sched_op_t& op = s.ops[i];
  o << " op " << i << " (" << sched_kind_name(op.kind);
  if (!sched_is_local(op.kind)) o << (IsSend(op.kind) ? " to " : " from ") << op.peer;
  o << ", " << BufName(op.buf) << "[" << op.offset << ", +" << op.count << ")";
  if (sched_has_src(op.kind)) o << " src " << BufName(op.src_buf) << "[" << op.src_offset << "]";
  o << ", dep " << op.dep << ", step " << op.step << ")";
  return o.str();
}

namespace {

struct Lock {
  int readers = 0;       // sends in flight that may still read the element
  bool writing = false;  // a plain receive may write it any moment
};

// A contiguous run of one rank's storage.
struct Span {
  std::vector<Cell>* cells = nullptr;
  std::vector<Lock>* locks = nullptr;
  size_t first = 0, n = 0;
  Cell& cell(size_t i) const { return (*cells)[first + i]; }
  Lock& lock(size_t i) const { return (*locks)[first + i]; }
};

struct Msg {
  bool header = false, token = false;
  sched_agree_t agree{};  // a token's values (schedule.h)
  std::vector<Cell> data;
  uint32_t heard = 0;
  Span src;  // the sender's memory, read until delivery or send completion
  bool read_done = false;
};

struct Flight {
  int op = -1;  // -1: the call description
  size_t slice = 0;
  size_t seq = 0;  // position in the link's message order
  bool complete = false;
  Span dst;  // a plain receive's destination, write-locked from the match on
  bool locked = false;
  std::vector<Cell> staged;
  uint32_t heard = 0;
};

struct Stream {
  int peer = -1;
  bool is_send = false;
  std::vector<int> ops;
  bool hdr = false;  // the call description is still to be posted
  size_t cur = 0, next_slice = 0, posted = 0;
  std::deque<Flight> fifo;
  uint32_t heard = 0;  // what the ops posted or retired so far on this stream proved
};

struct Link {  // rank a -> rank b
  std::vector<Msg> msgs;
  std::vector<Flight*> recvs;
};

class Runner {
 public:
  Runner(World& w, const Options& o) : w_(w), o_(o), rng_(o.seed), p_((int)w.sched.size()) {}

  std::string Run() {
    Setup();
    while (fail_.empty()) {
      Enumerate();
      if (events_.empty()) break;
      const Event& e = events_[std::uniform_int_distribution<size_t>(0, events_.size() - 1)(rng_)];
      Fire(e);
    }
    if (!fail_.empty()) return fail_;
    std::string stuck = Stuck();
    if (!stuck.empty()) return "deadlock: nothing can run, but " + stuck;
    for (auto& kv : links_)
      if (kv.second.msgs.size() != kv.second.recvs.size())
        return "rank " + std::to_string(kv.first.first) + " sent " +
               std::to_string(kv.second.msgs.size()) + " messages to rank " +
               std::to_string(kv.first.second) + ", which received " +
               std::to_string(kv.second.recvs.size());
    w_.heard.assign(p_, 0);
    for (int r = 0; r < p_; r++) {
      w_.heard[r] = rank_heard_[r] | (1u << r);
      for (uint32_t h : know_[r]) w_.heard[r] |= h;
    }
    return "";
  }

 private:
  enum Type { kPost, kComplete, kRetire, kCopy };
  struct Event {
    Type type;
    int rank, stream;
    Flight* flight;
    int op;
  };

  void Fail(const std::string& what) {
    if (fail_.empty()) fail_ = what;
  }

  void Setup() {
    locks_.resize(p_);
    streams_.resize(p_);
    done_.resize(p_);
    know_.resize(p_);
    copies_.resize(p_);
    rank_heard_.assign(p_, 0);
    for (int r = 0; r < p_; r++) {
      const schedule_t& s = w_.sched[r];
      Memory& m = w_.mem[r];
      m.scratch.assign(s.buf_count[SCHED_SCRATCH], Cell());
      locks_[r][0].assign(m.send.size(), Lock());
      locks_[r][1].assign(m.recv.size(), Lock());
      locks_[r][2].assign(m.scratch.size(), Lock());
      done_[r].assign(s.nops, 0);
      know_[r].assign(s.nops, 0);
      if (s.hdr_to >= 0) StreamFor(r, s.hdr_to, true).hdr = true;
      if (s.hdr_from >= 0) StreamFor(r, s.hdr_from, false).hdr = true;
      for (int i = 0; i < s.nops; i++) {
        if (sched_is_local(s.ops[i].kind))
          copies_[r].push_back(i);
        else
          StreamFor(r, s.ops[i].peer, IsSend(s.ops[i].kind)).ops.push_back(i);
      }
    }
  }

  Stream& StreamFor(int r, int peer, bool is_send) {
    for (Stream& st : streams_[r])
      if (st.peer == peer && st.is_send == is_send) return st;
    streams_[r].emplace_back();
    streams_[r].back().peer = peer;
    streams_[r].back().is_send = is_send;
    return streams_[r].back();
  }

  size_t Slices(const sched_op_t& op) const {
    return IsToken(op.kind) ? 1 : (op.count + o_.slice_elems - 1) / o_.slice_elems;
  }

  void SliceRange(const sched_op_t& op, size_t j, size_t* first, size_t* n) const {
    *first = j * o_.slice_elems;
    size_t left = op.count - *first;
    *n = IsToken(op.kind) ? 0 : (left < o_.slice_elems ? left : o_.slice_elems);
  }

  // The storage behind buffer b of rank r, elements [off, off + n).
  Span Resolve(int r, int op, sched_buf_t b, size_t off, size_t n) {
    Span sp;
    Memory& m = w_.mem[r];
    int st = m.store[b];
    if ((st == 0 && !m.has_send) || (st == 1 && !m.has_recv)) {
      Fail(OpName(w_.sched[r], r, op) + " touches " + BufName(b) +
           ", which the caller may pass as NULL on this rank");
      return sp;
    }
    std::vector<Cell>* cells = st == 0 ? &m.send : st == 1 ? &m.recv : &m.scratch;
    size_t first = m.base[b] + off;
    if (first + n > cells->size()) {
      Fail(OpName(w_.sched[r], r, op) + " reaches past the end of " + BufName(b));
      return sp;
    }
    sp.cells = cells;
    sp.locks = &locks_[r][st];
    sp.first = first;
    sp.n = n;
    return sp;
  }

  bool DepReady(int r, const sched_op_t& op, size_t j) const {
    if (op.dep < 0) return true;
    const sched_op_t& d = w_.sched[r].ops[op.dep];
    return sched_dep_ready(op.dep, op.dep_whole, Slices(op), done_[r][op.dep], Slices(d)) > j;
  }

  bool HasNext(const Stream& st) const { return st.hdr || st.cur < st.ops.size(); }

  void Enumerate() {
    events_.clear();
    for (int r = 0; r < p_; r++) {
      const schedule_t& s = w_.sched[r];
      for (int si = 0; si < (int)streams_[r].size(); si++) {
        Stream& st = streams_[r][si];
        if (st.fifo.empty() && !HasNext(st)) continue;
        if ((int)st.fifo.size() < o_.window && HasNext(st) &&
            (st.hdr || DepReady(r, s.ops[st.ops[st.cur]], st.next_slice)))
          events_.push_back({kPost, r, si, nullptr, -1});
        for (Flight& f : st.fifo)
          if (!f.complete && CanComplete(r, st, f)) events_.push_back({kComplete, r, si, &f, -1});
        if (!st.fifo.empty() && st.fifo.front().complete)
          events_.push_back({kRetire, r, si, nullptr, -1});
      }
      for (int i : copies_[r]) {
        const sched_op_t& op = s.ops[i];
        if (done_[r][i] < Slices(op) && DepReady(r, op, done_[r][i]))
          events_.push_back({kCopy, r, -1, nullptr, i});
      }
    }
  }

  Link& LinkOf(int from, int to) { return links_[{from, to}]; }

  bool CanComplete(int r, const Stream& st, const Flight& f) {
    if (st.is_send) return !o_.rendezvous || LinkOf(r, st.peer).recvs.size() > f.seq;
    return LinkOf(st.peer, r).msgs.size() > f.seq;
  }

  void Fire(const Event& e) {
    switch (e.type) {
      case kPost:
        Post(e.rank, streams_[e.rank][e.stream]);
        break;
      case kComplete:
        Complete(e.rank, streams_[e.rank][e.stream], *e.flight);
        break;
      case kRetire:
        Retire(e.rank, streams_[e.rank][e.stream]);
        break;
      case kCopy:
        Copy(e.rank, e.op);
        break;
    }
  }

  void Post(int r, Stream& st) {
    const schedule_t& s = w_.sched[r];
    st.fifo.emplace_back();
    Flight& f = st.fifo.back();
    f.seq = st.posted++;
    const sched_op_t* op = nullptr;
    if (st.hdr) {
      st.hdr = false;
    } else {
      f.op = st.ops[st.cur];
      f.slice = st.next_slice;
      op = &s.ops[f.op];
      if (++st.next_slice == Slices(*op)) {
        st.cur++;
        st.next_slice = 0;
      }
    }
    if (st.is_send) {
      Msg m;
      m.header = op == nullptr;
      m.token = op && op->kind == SCHED_SEND_TOKEN;
      if (m.token) m.agree = op->agree;
      m.heard = (1u << r) | st.heard;
      if (op && op->dep >= 0) m.heard |= know_[r][op->dep];
      if (op) know_[r][f.op] |= m.heard;
      st.heard = m.heard;
      if (op && op->kind == SCHED_SEND) {
        size_t first, n;
        SliceRange(*op, f.slice, &first, &n);
        m.src = Resolve(r, f.op, op->buf, op->offset + first, n);
        if (!m.src.cells) return;
        for (size_t i = 0; i < n; i++) {
          if (!m.src.cell(i).init)
            Fail(OpName(s, r, f.op) + " sends element " + std::to_string(op->offset + first + i) +
                 " that nothing has written");
          if (m.src.lock(i).writing)
            Fail(OpName(s, r, f.op) + " sends memory that a receive is writing");
          m.src.lock(i).readers++;
          m.data.push_back(m.src.cell(i));
        }
      }
      Link& l = LinkOf(r, st.peer);
      l.msgs.push_back(std::move(m));
      if (l.recvs.size() > f.seq) Match(st.peer, *l.recvs[f.seq], l.msgs[f.seq]);
    } else {
      Link& l = LinkOf(st.peer, r);
      l.recvs.push_back(&f);
      if (op && (op->kind == SCHED_RECV_COPY || op->kind == SCHED_RECV_COPY_SEND)) {
        size_t first, n;
        SliceRange(*op, f.slice, &first, &n);
        f.dst = Resolve(r, f.op, op->buf, op->offset + first, n);
      }
      if (l.msgs.size() > f.seq) Match(r, f, l.msgs[f.seq]);
    }
  }

  // Both sides of one message have been posted: check they agree; a plain receive may now write.
  void Match(int r, Flight& f, const Msg& m) {
    const schedule_t& s = w_.sched[r];
    const sched_op_t* op = f.op >= 0 ? &s.ops[f.op] : nullptr;
    std::string what = OpName(s, r, f.op);
    if (m.header != (op == nullptr)) {
      Fail(what +
           (m.header ? " received a call description" : " got data for its call description"));
      return;
    }
    if (!op) return;
    if (m.token != (op->kind == SCHED_RECV_TOKEN)) {
      Fail(what + " matched a " + (m.token ? "token" : "data message"));
      return;
    }
    // Two schedules that the executor's token check would fail on are wrong whatever the data.
    const sched_agree_t &a = m.agree, &b = op->agree;
    if (m.token && (a.on != b.on || a.tag != b.tag || a.dtype != b.dtype || a.count != b.count ||
                    a.back != b.back)) {
      Fail(what + " got a token whose values disagree with its own (tag " + std::to_string(a.tag) +
           "/" + std::to_string(b.tag) + ", count " + std::to_string(a.count) + "/" +
           std::to_string(b.count) + ", back " + std::to_string(a.back) + "/" +
           std::to_string(b.back) + ")");
      return;
    }
    size_t first, n;
    SliceRange(*op, f.slice, &first, &n);
    if (m.data.size() != n) {
      Fail(what + " slice " + std::to_string(f.slice) + " expects " + std::to_string(n) +
           " elements but the message has " + std::to_string(m.data.size()));
      return;
    }
    if ((op->kind != SCHED_RECV_COPY && op->kind != SCHED_RECV_COPY_SEND) || !f.dst.cells) return;
    for (size_t i = 0; i < n; i++) {
      Lock& lk = f.dst.lock(i);
      if (lk.readers) Fail(what + " receives into memory that a send may still be reading");
      if (lk.writing) Fail(what + " receives into memory that another receive is writing");
      lk.writing = true;
    }
    f.locked = true;
  }

  void ReleaseRead(Msg& m) {
    if (m.read_done) return;
    m.read_done = true;
    for (size_t i = 0; i < m.src.n; i++) m.src.lock(i).readers--;
  }

  void Complete(int r, Stream& st, Flight& f) {
    f.complete = true;
    if (st.is_send) {
      ReleaseRead(LinkOf(r, st.peer).msgs[f.seq]);
      return;
    }
    Msg& m = LinkOf(st.peer, r).msgs[f.seq];
    ReleaseRead(m);  // delivered: the sender's memory has been read
    f.heard = m.heard;
    if (f.op < 0) return;
    const sched_op_t& op = w_.sched[r].ops[f.op];
    if (sched_is_reduce(op.kind)) f.staged = m.data;
    if ((op.kind != SCHED_RECV_COPY && op.kind != SCHED_RECV_COPY_SEND) || !f.locked) return;
    for (size_t i = 0; i < m.data.size(); i++) {
      f.dst.cell(i) = m.data[i];
      f.dst.lock(i).writing = false;
    }
  }

  // Checks that an atomic local access to sp is not racing with a transfer.
  void CheckAccess(const std::string& what, const Span& sp, bool write) {
    for (size_t i = 0; i < sp.n; i++) {
      if (sp.lock(i).writing) Fail(what + " touches memory that a receive is writing");
      if (write && sp.lock(i).readers) Fail(what + " writes memory that a send may still read");
      if (!write && !sp.cell(i).init) Fail(what + " reads an element that nothing has written");
    }
  }

  void Retire(int r, Stream& st) {
    Flight f = std::move(st.fifo.front());
    st.fifo.pop_front();
    if (f.op < 0) {
      if (!st.is_send) rank_heard_[r] |= f.heard;
      return;
    }
    const schedule_t& s = w_.sched[r];
    const sched_op_t& op = s.ops[f.op];
    if (!st.is_send) {
      uint32_t h = f.heard | st.heard;
      if (op.dep >= 0) h |= know_[r][op.dep];
      know_[r][f.op] |= h;
      st.heard = h;
    }
    if (sched_is_reduce(op.kind)) Fold(r, f, op);
    done_[r][f.op]++;
  }

  void Fold(int r, const Flight& f, const sched_op_t& op) {
    std::string what = OpName(w_.sched[r], r, f.op);
    size_t first, n;
    SliceRange(op, f.slice, &first, &n);
    Span src = Resolve(r, f.op, op.src_buf, op.src_offset + first, n);
    Span dst = Resolve(r, f.op, op.buf, op.offset + first, n);
    if (!src.cells || !dst.cells) return;
    CheckAccess(what, src, false);
    CheckAccess(what, dst, true);
    std::vector<Cell> out(n);
    for (size_t i = 0; i < n; i++) out[i] = Combine(what, src.cell(i), f.staged[i], op.final);
    for (size_t i = 0; i < n; i++) dst.cell(i) = out[i];
  }

  // a op b, checked: no rank's input twice, nothing folded after it was finalized, and a final
  // fold holds every rank's input.
  Cell Combine(const std::string& what, const Cell& a, const Cell& b, int final) {
    uint32_t all = p_ >= 32 ? ~0u : (1u << p_) - 1;
    if (a.ranks & b.ranks) Fail(what + " adds some rank's input twice");
    if (a.finals || b.finals) Fail(what + " folds a value that was already finalized");
    Cell out = {a.v + b.v, a.ranks | b.ranks, final ? 1 : 0, true};
    if (final && out.ranks != all) Fail(what + " finalizes a partial sum");
    return out;
  }

  void Copy(int r, int i) {
    const sched_op_t& op = w_.sched[r].ops[i];
    size_t first, n;
    SliceRange(op, done_[r][i], &first, &n);
    Span src = Resolve(r, i, op.src_buf, op.src_offset + first, n);
    Span dst = Resolve(r, i, op.buf, op.offset + first, n);
    if (!src.cells || !dst.cells) return;
    std::string what = OpName(w_.sched[r], r, i);
    CheckAccess(what, src, false);
    CheckAccess(what, dst, true);
    bool reduce = op.kind == SCHED_REDUCE;  // buf = buf op src
    if (reduce) CheckAccess(what, dst, false);
    std::vector<Cell> tmp(n);
    for (size_t k = 0; k < n; k++)
      tmp[k] = reduce ? Combine(what, dst.cell(k), src.cell(k), op.final) : src.cell(k);
    for (size_t k = 0; k < n; k++) dst.cell(k) = tmp[k];
    if (op.dep >= 0) know_[r][i] |= know_[r][op.dep];
    done_[r][i]++;
  }

  std::string Stuck() {
    for (int r = 0; r < p_; r++) {
      const schedule_t& s = w_.sched[r];
      for (const Stream& st : streams_[r]) {
        if (!st.fifo.empty()) {
          const Flight& f = st.fifo.front();
          return OpName(s, r, f.op) + " slice " + std::to_string(f.slice) + " waits to " +
                 (st.is_send ? "complete" : "arrive");
        }
        if (HasNext(st))
          return OpName(s, r, st.hdr ? -1 : st.ops[st.cur]) + " slice " +
                 std::to_string(st.next_slice) + " is never posted";
      }
      for (int i : copies_[r])
        if (done_[r][i] < Slices(s.ops[i])) return OpName(s, r, i) + " never runs";
    }
    return "";
  }

  World& w_;
  const Options& o_;
  std::mt19937_64 rng_;
  int p_;
  std::string fail_;
  std::vector<std::array<std::vector<Lock>, 3>> locks_;
  std::vector<std::deque<Stream>> streams_;
  std::vector<std::vector<size_t>> done_;
  std::vector<std::vector<uint32_t>> know_;
  std::vector<std::vector<int>> copies_;
  std::vector<uint32_t> rank_heard_;
  std::map<std::pair<int, int>, Link> links_;
  std::vector<Event> events_;
};

}  // namespace

std::string Simulate(World& w, const Options& o) { return Runner(w, o).Run(); }

std::string Describe(const Options& o) {
  std::ostringstream s;
  s << "slice " << o.slice_elems << " elems, window " << o.window << ", "
    << (o.rendezvous ? "rendezvous" : "buffered") << " links, seed " << o.seed;
  return s.str();
}

}  // namespace sim
