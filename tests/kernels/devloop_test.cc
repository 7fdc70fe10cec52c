// devloop_test.cc -- the device-resident loop (kernels/devloop_steps.h via dl_run_host): ranks are
// threads of this process, links are slots and counters in plain memory, and the programs are
// written by hand in the shape the compiler gives (an exchange, ring all-reduce fused and not).
// Checks the data against a host reference, counters that carry over between runs, a listing of
// steps that would deadlock a loop that waits on each step in turn, timeout, abort, bad programs,
// and, in the chaos build, random delays at every wait and post.
#include "kernels/devloop.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/devprog.h"

namespace {

// The chaos hook's per-thread generator: NULL (no delays) unless a test turns chaos on for the
// rank this thread runs.
thread_local std::mt19937_64 *tl_chaos = nullptr;

}  // namespace

// Called by the chaos build of the loop (//kernels:devloop_chaos) at every DL_AT_* point: nothing,
// a yield, a short busy wait or a sleep of up to 50 us, at random, so that the other ranks' threads
// run in between every check of a counter, every slot access and every store.
extern "C" void dl_host_chaos(int where) {
  (void)where;
  if (!tl_chaos) return;
  uint64_t x = (*tl_chaos)();
  switch (x % 8) {
    case 0:
    case 1:
    case 2:
      break;
    case 3:
    case 4:
      sched_yield();
      break;
    case 5:
      for (volatile int i = 0; i < (int)((x >> 8) % 2000); i = i + 1) {
      }
      break;
    default: {
      struct timespec ts = {0, (long)((x >> 8) % 50000)};
      nanosleep(&ts, nullptr);
    }
  }
}

namespace {

#ifdef DL_TEST_NO_CHAOS
constexpr bool kChaosBuild = false;
#else
constexpr bool kChaosBuild = true;
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kSeeds = 30;  // sanitizers run the loop ~10x slower: keep the test well under 10 s
#else
constexpr int kSeeds = 60;
#endif

size_t ElemSize(weft_dtype_t d) {
  return d == WEFT_FLOAT64 || d == WEFT_INT64 || d == WEFT_UINT64 ? 8
         : d == WEFT_FLOAT16 || d == WEFT_BFLOAT16                ? 2
         : d <= WEFT_UINT8                                        ? 1
                                                                  : 4;
}

// Every directed link of k ranks: slots and counters, in memory every thread sees.
struct Net {
  int k;
  uint64_t nslots, slot_bytes;
  std::vector<char *> slots;
  std::vector<dl_counters_t *> ctrs;
  Net(int k_, uint64_t nslots_, uint64_t slot_bytes_)
      : k(k_), nslots(nslots_), slot_bytes(slot_bytes_) {
    for (int i = 0; i < k * k; i++) {
      size_t bytes = (nslots * slot_bytes + 63) / 64 * 64;
      slots.push_back(static_cast<char *>(aligned_alloc(64, bytes)));
      memset(slots.back(), 0xEE, bytes);
      auto *c =
          static_cast<dl_counters_t *>(aligned_alloc(DL_COUNTER_ALIGN, sizeof(dl_counters_t)));
      memset(c, 0, sizeof *c);
      ctrs.push_back(c);
    }
  }
  ~Net() {
    for (char *s : slots) free(s);
    for (dl_counters_t *c : ctrs) free(c);
  }
  Net(const Net &) = delete;
  Net &operator=(const Net &) = delete;
  dl_link_view_t View(int from, int to) const {
    return {slots[from * k + to], nslots, slot_bytes, ctrs[from * k + to]};
  }
  dl_counters_t *Ctr(int from, int to) const { return ctrs[from * k + to]; }
};

// One rank's program and what its run is given.
struct Rank {
  dp_program_t prog;
  std::vector<dp_step_t> steps;
  std::vector<dl_link_view_t> views;
  std::vector<char> sendbuf, recvbuf;
  bool in_place = false;
  int abort_flag = 0;
  dl_run_t run;

  Rank(uint64_t slice_elems, weft_dtype_t dtype, weft_op_t op, int nranks) {
    memset(&prog, 0, sizeof prog);
    prog.slice_elems = slice_elems;
    prog.dtype = dtype;
    prog.op = op;
    prog.nranks = nranks;
    memset(&run, 0, sizeof run);
  }
  int Link(const Net &net, int self, int peer, dp_link_dir_t dir) {
    int l = prog.nlinks++;
    prog.links[l].peer = peer;
    prog.links[l].dir = dir;
    views.push_back(dir == DP_LINK_SEND ? net.View(self, peer) : net.View(peer, self));
    return l;
  }
  int Add(dp_kind_t kind, dp_buf_t buf, dp_buf_t src_buf, int recv_link, int send_link, int dep,
          uint64_t offset, uint64_t count, int final = 0) {
    dp_step_t st;
    memset(&st, 0, sizeof st);
    st.kind = kind;
    st.buf = buf;
    st.src_buf = src_buf;
    st.final = (uint8_t) final;
    st.recv_link = (int16_t)recv_link;
    st.send_link = (int16_t)send_link;
    st.dep = dep;
    st.op = (int32_t)steps.size();
    st.offset = offset;
    st.src_offset = offset;
    st.count = count;
    steps.push_back(st);
    return (int)steps.size() - 1;
  }
  // Binds the program to its buffers (count elements each) and links.
  dl_run_t *Finish(size_t count, uint64_t timeout_ns = 10ull * 1000 * 1000 * 1000) {
    size_t es = ElemSize(prog.dtype);
    sendbuf.resize(count * es);
    if (!in_place) recvbuf.resize(count * es);
    prog.steps = steps.data();
    prog.nsteps = (int)steps.size();
    prog.nrounds = 0;
    for (const dp_step_t &st : steps)
      prog.nrounds = std::max(prog.nrounds, dp_step_slices(&prog, &st));
    prog.buf_count[DP_SENDBUF] = prog.buf_count[DP_RECVBUF] = count;
    run.prog = &prog;
    run.links = views.data();
    run.bufs[DP_SENDBUF] = sendbuf.data();
    run.bufs[DP_RECVBUF] = in_place ? sendbuf.data() : recvbuf.data();
    run.abort = &abort_flag;
    run.timeout_ns = timeout_ns;
    return &run;
  }
  char *Out() { return in_place ? sendbuf.data() : recvbuf.data(); }
};

// Runs every rank on a thread of its own; chaos_seed != 0 turns on the chaos hook's delays.
std::vector<dl_status_t> RunAll(std::vector<Rank> &ranks, uint64_t chaos_seed = 0) {
  std::vector<dl_status_t> st(ranks.size());
  std::vector<std::thread> threads;
  for (size_t q = 0; q < ranks.size(); q++) {
    threads.emplace_back([&, q] {
      std::mt19937_64 rng(chaos_seed * 1000 + q);
      if (chaos_seed) tl_chaos = &rng;
      st[q] = dl_run_host(&ranks[q].run);
      tl_chaos = nullptr;
    });
  }
  for (std::thread &t : threads) t.join();
  return st;
}

std::string Str(const dl_status_t &s) {
  return "code " + std::to_string(s.code) + " step " + std::to_string(s.step) + " link " +
         std::to_string(s.link) + " waiting_for " + std::to_string(s.waiting_for) + " round " +
         std::to_string(s.round);
}

// ---- Exchange: each of 2 ranks sends its sendbuf to the other, which receives it into recvbuf.

void BuildExchange(std::vector<Rank> &ranks, const Net &net, uint64_t slice, size_t count,
                   bool recv_first) {
  for (int q = 0; q < 2; q++) {
    ranks.emplace_back(slice, WEFT_INT32, WEFT_SUM, 2);
    Rank &r = ranks.back();
    int out = r.Link(net, q, 1 - q, DP_LINK_SEND), in = r.Link(net, q, 1 - q, DP_LINK_RECV);
    if (recv_first) r.Add(DP_RECV_COPY, DP_RECVBUF, DP_RECVBUF, in, -1, -1, 0, count);
    r.Add(DP_SEND, DP_SENDBUF, DP_SENDBUF, -1, out, -1, 0, count);
    if (!recv_first) r.Add(DP_RECV_COPY, DP_RECVBUF, DP_RECVBUF, in, -1, -1, 0, count);
  }
  for (int q = 0; q < 2; q++) {
    ranks[q].Finish(count);
    auto *v = reinterpret_cast<int32_t *>(ranks[q].sendbuf.data());
    for (size_t i = 0; i < count; i++) v[i] = (int32_t)(q * 1000003 + i * 7 + 1);
  }
}

void CheckExchange(std::vector<Rank> &ranks, size_t count, const std::string &what) {
  if (count == 0) return;  // empty vectors: data() may be NULL, which memcmp must not get
  for (int q = 0; q < 2; q++)
    ASSERT_EQ(0, memcmp(ranks[q].recvbuf.data(), ranks[1 - q].sendbuf.data(), count * 4))
        << what << " rank " << q;
}

struct ExchangeCase {
  uint64_t nslots;
  size_t count;
  bool recv_first;
};

class Exchange : public ::testing::TestWithParam<ExchangeCase> {};

TEST_P(Exchange, DataArrives) {
  const ExchangeCase c = GetParam();
  const uint64_t slice = 16;
  Net net(2, c.nslots, slice * 4);
  std::vector<Rank> ranks;
  BuildExchange(ranks, net, slice, c.count, c.recv_first);
  std::vector<dl_status_t> st = RunAll(ranks);
  for (int q = 0; q < 2; q++) ASSERT_EQ(DL_DONE, st[q].code) << Str(st[q]);
  CheckExchange(ranks, c.count, "exchange");
  // One message per slice went each way, and each was freed.
  uint64_t slices = (c.count + slice - 1) / slice;
  for (int q = 0; q < 2; q++) {
    EXPECT_EQ(slices, net.Ctr(q, 1 - q)->tail);
    EXPECT_EQ(slices, net.Ctr(q, 1 - q)->head);
  }
}

std::vector<ExchangeCase> ExchangeCases() {
  std::vector<ExchangeCase> v;
  for (uint64_t nslots : {1, 2, 8})
    for (size_t count : {0, 1, 15, 16, 17, 83, 200})
      for (bool recv_first : {false, true}) v.push_back({nslots, count, recv_first});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Counts, Exchange, ::testing::ValuesIn(ExchangeCases()),
                         [](const ::testing::TestParamInfo<ExchangeCase> &i) {
                           return "nslots" + std::to_string(i.param.nslots) + "_count" +
                                  std::to_string(i.param.count) +
                                  (i.param.recv_first ? "_recv_first" : "_send_first");
                         });

// Both ranks list their receive before their send, one slot, many slices: a loop that waited for
// each step in turn would have both ranks wait for a message neither sends. The polled loop sends
// slice r while the receive of slice r waits.
TEST(DevLoop, ReceiveListedFirstOnBothRanksCompletes) {
  Net net(2, 1, 8 * 4);
  std::vector<Rank> ranks;
  BuildExchange(ranks, net, 8, 8 * 9 + 3, true);
  std::vector<dl_status_t> st = RunAll(ranks);
  for (int q = 0; q < 2; q++) ASSERT_EQ(DL_DONE, st[q].code) << Str(st[q]);
  CheckExchange(ranks, 8 * 9 + 3, "recv first");
}

// A local copy, a send that depends on it and a final reduce into recvbuf, over scratch memory:
// each of 2 ranks copies its input to scratch slice by slice, sends scratch to the other (slice r
// once the copy of slice r is done), and averages what arrives with scratch into recvbuf.
TEST(DevLoop, CopyThenSendWithDepAndFinalAverage) {
  const size_t count = 8 * 5 + 2;
  Net net(2, 2, 8 * 8);
  std::vector<Rank> ranks;
  ranks.reserve(2);
  std::vector<double> scratch[2];
  for (int q = 0; q < 2; q++) {
    ranks.emplace_back(8, WEFT_FLOAT64, WEFT_AVG, 2);
    Rank &r = ranks.back();
    int out = r.Link(net, q, 1 - q, DP_LINK_SEND), in = r.Link(net, q, 1 - q, DP_LINK_RECV);
    int copy = r.Add(DP_COPY, DP_SCRATCH, DP_SENDBUF, -1, -1, -1, 0, count);
    r.Add(DP_SEND, DP_SCRATCH, DP_SCRATCH, -1, out, copy, 0, count);
    r.Add(DP_RECV_REDUCE, DP_RECVBUF, DP_SCRATCH, in, -1, -1, 0, count, 1);
    r.Finish(count);
    scratch[q].assign(count, -1.0);
    r.prog.buf_count[DP_SCRATCH] = count;
    r.run.bufs[DP_SCRATCH] = reinterpret_cast<char *>(scratch[q].data());
    for (size_t i = 0; i < count; i++)
      reinterpret_cast<double *>(r.sendbuf.data())[i] = (double)(q * 100 + (int)i);
  }
  std::vector<dl_status_t> st = RunAll(ranks);
  for (int q = 0; q < 2; q++) {
    ASSERT_EQ(DL_DONE, st[q].code) << Str(st[q]);
    for (size_t i = 0; i < count; i++)
      ASSERT_EQ((double)(100 + 2 * (int)i) / 2, reinterpret_cast<double *>(ranks[q].Out())[i])
          << "rank " << q << " element " << i;
  }
}

// ---- Ring all-reduce, written as the compiler writes collectives/ring_allreduce.c's schedule:
// step 0 sends chunk `rank`; then k-2 recv-reduce-send, one recv-reduce-copy-send (final), k-2
// recv-copy-send and one recv-copy, each forwarding what it received (fused). Unfused: each
// receive lands in recvbuf (recv-reduce, or recv-copy in the all-gather) and a send from recvbuf
// that depends on it forwards it.

int Mod(int a, int p) { return ((a % p) + p) % p; }

void Chunk(size_t count, int k, int c, uint64_t *off, uint64_t *len) {
  size_t base = count / k, rem = count % k;
  *len = base + ((size_t)c < rem);
  *off = c * base + std::min((size_t)c, rem);
}

void BuildRing(Rank &r, const Net &net, int rank, int k, size_t count, bool fused) {
  int right = r.Link(net, rank, Mod(rank + 1, k), DP_LINK_SEND);
  int left = r.Link(net, rank, Mod(rank - 1, k), DP_LINK_RECV);
  uint64_t off, len;
  Chunk(count, k, rank, &off, &len);
  r.Add(DP_SEND, DP_SENDBUF, DP_SENDBUF, -1, right, -1, off, len);
  for (int s = 0; s < 2 * (k - 1); s++) {
    bool reduce = s < k - 1, final = s == k - 2, last = s == 2 * k - 3;
    int chunk = reduce ? Mod(rank - s - 1, k) : Mod(rank - (s - (k - 1)), k);
    Chunk(count, k, chunk, &off, &len);
    if (fused) {
      dp_kind_t kind = reduce ? (final ? DP_RECV_REDUCE_COPY_SEND : DP_RECV_REDUCE_SEND)
                              : (last ? DP_RECV_COPY : DP_RECV_COPY_SEND);
      r.Add(kind, DP_RECVBUF, DP_SENDBUF, left, dp_kind_sends(kind) ? right : -1, -1, off, len,
            final);
    } else {
      int recv = r.Add(reduce ? DP_RECV_REDUCE : DP_RECV_COPY, DP_RECVBUF, DP_SENDBUF, left, -1, -1,
                       off, len, final);
      if (!last) r.Add(DP_SEND, DP_RECVBUF, DP_SENDBUF, -1, right, recv, off, len);
    }
  }
}

// Inputs whose sums are exact in every order (small integers in floats; integers wrap anyway),
// and the reference: the sum over ranks, divided by k for WEFT_AVG.
void FillInput(Rank &r, int rank, size_t count, uint64_t salt) {
  for (size_t i = 0; i < count; i++) {
    int64_t small = (int64_t)((rank * 31 + i * 7 + salt * 13) % 19) - 9;
    uint32_t big = (uint32_t)(rank * 2654435761u + i * 40503u + salt * 977u);
    switch (r.prog.dtype) {
      case WEFT_FLOAT32:
        reinterpret_cast<float *>(r.sendbuf.data())[i] = (float)small;
        break;
      case WEFT_FLOAT64:
        reinterpret_cast<double *>(r.sendbuf.data())[i] = (double)small;
        break;
      default:
        reinterpret_cast<uint32_t *>(r.sendbuf.data())[i] = big;
    }
  }
}

std::vector<char> Reference(std::vector<Rank> &ranks, size_t count) {
  weft_dtype_t dt = ranks[0].prog.dtype;
  int k = (int)ranks.size();
  std::vector<char> out(count * ElemSize(dt));
  for (size_t i = 0; i < count; i++) {
    if (dt == WEFT_INT32) {
      uint32_t s = 0;
      for (Rank &r : ranks) s += reinterpret_cast<uint32_t *>(r.sendbuf.data())[i];
      reinterpret_cast<uint32_t *>(out.data())[i] = s;
    } else {
      double s = 0;
      for (Rank &r : ranks)
        s += dt == WEFT_FLOAT32 ? reinterpret_cast<float *>(r.sendbuf.data())[i]
                                : reinterpret_cast<double *>(r.sendbuf.data())[i];
      if (ranks[0].prog.op == WEFT_AVG) s /= k;
      if (dt == WEFT_FLOAT32)
        reinterpret_cast<float *>(out.data())[i] = (float)s;
      else
        reinterpret_cast<double *>(out.data())[i] = s;
    }
  }
  return out;
}

struct RingCase {
  int k;
  weft_dtype_t dtype;
  weft_op_t op;
  bool fused, in_place;
  uint64_t nslots;
  size_t count;
};

std::string Name(const RingCase &c) {
  return std::to_string(c.k) + "ranks_" +
         (c.dtype == WEFT_FLOAT32   ? "f32"
          : c.dtype == WEFT_FLOAT64 ? "f64"
                                    : "i32") +
         (c.op == WEFT_AVG ? "_avg" : "_sum") + (c.fused ? "_fused" : "_unfused") +
         (c.in_place ? "_inplace" : "") + "_nslots" + std::to_string(c.nslots) + "_count" +
         std::to_string(c.count);
}

const uint64_t kSlice = 8;

// Builds a ring of c.k ranks on `net` and runs it `runs` times with fresh inputs; every run's
// output must equal the reference bit for bit.
void RunRing(const RingCase &c, Net &net, int runs, uint64_t chaos_seed) {
  std::vector<Rank> ranks;
  ranks.reserve(c.k);
  for (int q = 0; q < c.k; q++) {
    ranks.emplace_back(kSlice, c.dtype, c.op, c.k);
    ranks.back().in_place = c.in_place;
    BuildRing(ranks.back(), net, q, c.k, c.count, c.fused);
    ranks.back().Finish(c.count);
  }
  for (int t = 0; t < runs; t++) {
    for (int q = 0; q < c.k; q++) FillInput(ranks[q], q, c.count, t);
    std::vector<char> want = Reference(ranks, c.count);
    std::vector<dl_status_t> st = RunAll(ranks, chaos_seed ? chaos_seed + t : 0);
    for (int q = 0; q < c.k; q++) {
      ASSERT_EQ(DL_DONE, st[q].code)
          << Name(c) << " run " << t << " rank " << q << ": " << Str(st[q]);
      ASSERT_EQ(0, memcmp(want.data(), ranks[q].Out(), want.size()))
          << Name(c) << " run " << t << " rank " << q << " seed " << chaos_seed;
    }
  }
}

class Ring : public ::testing::TestWithParam<RingCase> {};

TEST_P(Ring, MatchesReference) {
  const RingCase c = GetParam();
  Net net(c.k, c.nslots, kSlice * ElemSize(c.dtype));
  RunRing(c, net, 1, 0);
}

std::vector<RingCase> RingCases() {
  std::vector<RingCase> v;
  for (int k = 2; k <= 5; k++)
    for (auto [dtype, op] : {std::pair{WEFT_FLOAT32, WEFT_SUM}, std::pair{WEFT_INT32, WEFT_SUM},
                             std::pair{WEFT_FLOAT64, WEFT_AVG}})
      for (bool fused : {true, false})
        for (uint64_t nslots : {1, 2, 4}) {
          if (fused && nslots == 1) continue;  // needs 2 (FusedRingNeedsTwoSlots)
          // 3 elements leave chunks empty from k = 4 on (steps with no slices); k * 3 slices + 5
          // gives chunks of several slices and a tail; 1000 many rounds.
          for (size_t count : {(size_t)3, (size_t)k * kSlice * 3 + 5, (size_t)1000})
            v.push_back({k, dtype, op, fused, nslots == 2 && count == 1000, nslots, count});
        }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, Ring, ::testing::ValuesIn(RingCases()),
                         [](const ::testing::TestParamInfo<RingCase> &i) { return Name(i.param); });

// The same program four times on the same links: each end starts from its own counter, where the
// last run left it, with no reset.
TEST(DevLoop, CountersCarryOverBetweenRuns) {
  for (bool fused : {true, false}) {
    RingCase c = {4, WEFT_FLOAT32, WEFT_SUM, fused, false, 2, 4 * kSlice * 2};
    Net net(4, 2, kSlice * 4);
    RunRing(c, net, 4, 0);
    // Each run, every link carried 2 (k - 1) chunks of 2 slices: 12 messages, 48 in four runs.
    for (int q = 0; q < 4; q++) {
      EXPECT_EQ(48u, net.Ctr(q, (q + 1) % 4)->tail);
      EXPECT_EQ(48u, net.Ctr(q, (q + 1) % 4)->head);
    }
  }
}

// A fused step holds its incoming message while it waits for a free slot to forward into, and
// step 0's message of the round already sits in the next link's slot: with one slot per link
// every rank's first fused step waits for its right neighbour's, round the ring. That is the
// program's limit, not the loop's (the compiler must give a fused ring 2 slots); the loop reports
// it as a timeout on the send side of the first fused step.
TEST(DevLoop, FusedRingNeedsTwoSlots) {
  Net net(3, 1, kSlice * 4);
  std::vector<Rank> ranks;
  ranks.reserve(3);
  for (int q = 0; q < 3; q++) {
    ranks.emplace_back(kSlice, WEFT_FLOAT32, WEFT_SUM, 3);
    BuildRing(ranks.back(), net, q, 3, 3 * kSlice, true);
    ranks.back().Finish(3 * kSlice, 50 * 1000 * 1000);
  }
  std::vector<dl_status_t> st = RunAll(ranks);
  for (int q = 0; q < 3; q++) {
    EXPECT_EQ(DL_TIMEOUT, st[q].code) << Str(st[q]);
    EXPECT_EQ(1, st[q].step);
    EXPECT_EQ(0, st[q].link);  // the link to the right
    EXPECT_EQ(1, st[q].waiting_for);
  }
}

// ---- Failures.

// Rank 1 never runs: rank 0 sends slice 0 into the free slot, then its receive waits for a message
// that never comes, and the run ends after about timeout_ns naming that step, link and wait.
TEST(DevLoop, TimeoutNamesTheWaitingReceive) {
  Net net(2, 1, 16 * 4);
  std::vector<Rank> ranks;
  BuildExchange(ranks, net, 16, 100, false);
  ranks[0].run.timeout_ns = 100 * 1000 * 1000;
  auto t0 = std::chrono::steady_clock::now();
  dl_status_t st = dl_run_host(&ranks[0].run);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(DL_TIMEOUT, st.code) << Str(st);
  EXPECT_EQ(1, st.step);         // the receive
  EXPECT_EQ(1, st.link);         // its link, from rank 1
  EXPECT_EQ(0, st.waiting_for);  // a message
  EXPECT_EQ(0u, st.round);
  EXPECT_GE(ms, 100);
  EXPECT_LT(ms, 3000);
  EXPECT_EQ(1u, net.Ctr(0, 1)->tail);  // slice 0 went out
}

// A send alone, one slot, three slices: slice 0 fills the slot, slice 1 waits for it to come free.
TEST(DevLoop, TimeoutNamesTheWaitingSend) {
  Net net(2, 1, 16 * 4);
  Rank r(16, WEFT_INT32, WEFT_SUM, 2);
  int out = r.Link(net, 0, 1, DP_LINK_SEND);
  r.Add(DP_SEND, DP_SENDBUF, DP_SENDBUF, -1, out, -1, 0, 40);
  r.Finish(40, 50 * 1000 * 1000);
  dl_status_t st = dl_run_host(&r.run);
  EXPECT_EQ(DL_TIMEOUT, st.code) << Str(st);
  EXPECT_EQ(0, st.step);
  EXPECT_EQ(0, st.link);
  EXPECT_EQ(1, st.waiting_for);  // a free slot
  EXPECT_EQ(1u, st.round);
}

TEST(DevLoop, AbortFromAnotherThread) {
  Net net(2, 1, 16 * 4);
  std::vector<Rank> ranks;
  BuildExchange(ranks, net, 16, 100, false);
  ranks[0].run.timeout_ns = 0;  // no timeout: only the abort ends it
  int *flag = &ranks[0].abort_flag;
  std::thread setter([flag] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    __atomic_store_n(flag, 1, __ATOMIC_RELAXED);
  });
  dl_status_t st = dl_run_host(&ranks[0].run);
  setter.join();
  EXPECT_EQ(DL_ABORTED, st.code) << Str(st);
  EXPECT_EQ(1, st.step);
  EXPECT_EQ(1, st.link);
}

// A bad step anywhere fails the run before anything moves: the good send listed before it has
// not published anything.
TEST(DevLoop, BadProgramFailsBeforeMoving) {
  Net net(2, 2, 16 * 4);
  {
    std::vector<Rank> ranks;
    BuildExchange(ranks, net, 16, 40, false);
    ranks[0].steps[1].recv_link = 2;  // only links 0 and 1 exist
    dl_status_t st = dl_run_host(&ranks[0].run);
    EXPECT_EQ(DL_BAD_PROGRAM, st.code) << Str(st);
    EXPECT_EQ(1, st.step);
  }
  {
    std::vector<Rank> ranks;
    BuildExchange(ranks, net, 16, 40, false);
    ranks[0].run.bufs[DP_RECVBUF] = nullptr;  // the receive's buffer
    dl_status_t st = dl_run_host(&ranks[0].run);
    EXPECT_EQ(DL_BAD_PROGRAM, st.code) << Str(st);
    EXPECT_EQ(1, st.step);
  }
  {
    std::vector<Rank> ranks;
    BuildExchange(ranks, net, 16, 40, false);
    ranks[0].steps[1].recv_link = 0;  // a send link used to receive
    EXPECT_EQ(DL_BAD_PROGRAM, dl_run_host(&ranks[0].run).code);
    ranks[0].steps[1].recv_link = 1;
    ranks[0].steps[1].offset = 1;  // past the end of recvbuf
    EXPECT_EQ(DL_BAD_PROGRAM, dl_run_host(&ranks[0].run).code);
    ranks[0].steps[1].offset = 0;
    ranks[0].steps[1].dep = 1;  // not an earlier step
    EXPECT_EQ(DL_BAD_PROGRAM, dl_run_host(&ranks[0].run).code);
    ranks[0].steps[1].dep = -1;
    ranks[0].prog.nrounds = 2;  // 40 elements are 3 slices
    EXPECT_EQ(DL_BAD_PROGRAM, dl_run_host(&ranks[0].run).code);
  }
  EXPECT_EQ(0u, net.Ctr(0, 1)->tail);
  EXPECT_EQ(0u, net.Ctr(1, 0)->head);
}

// ---- Chaos: random delays at every wait and post (the chaos build's hook), many seeds, random
// shapes; the data must still be exact.

TEST(DevLoopChaos, RingManySeeds) {
  if (!kChaosBuild) GTEST_SKIP() << "the loop was built without the chaos hook";
  for (int seed = 1; seed <= kSeeds; seed++) {
    std::mt19937_64 pick(seed);
    RingCase c;
    c.k = 2 + (int)(pick() % 4);
    int kind = (int)(pick() % 3);
    c.dtype = kind == 0 ? WEFT_FLOAT32 : kind == 1 ? WEFT_INT32 : WEFT_FLOAT64;
    c.op = kind == 2 ? WEFT_AVG : WEFT_SUM;
    c.fused = pick() % 2;
    c.in_place = pick() % 4 == 0;
    c.nslots = (c.fused ? 2 : 1) + pick() % 3;
    c.count = 1 + pick() % (c.k * kSlice * 4);
    Net net(c.k, c.nslots, kSlice * ElemSize(c.dtype));
    RunRing(c, net, 2, (uint64_t)seed * 7919);
    if (HasFatalFailure()) return;
  }
}

TEST(DevLoopChaos, ExchangeManySeeds) {
  if (!kChaosBuild) GTEST_SKIP() << "the loop was built without the chaos hook";
  for (int seed = 1; seed <= kSeeds; seed++) {
    std::mt19937_64 pick(seed);
    uint64_t nslots = 1 + pick() % 3;
    size_t count = pick() % 120;
    Net net(2, nslots, 8 * 4);
    std::vector<Rank> ranks;
    BuildExchange(ranks, net, 8, count, pick() % 2);
    std::vector<dl_status_t> st = RunAll(ranks, seed);
    for (int q = 0; q < 2; q++) ASSERT_EQ(DL_DONE, st[q].code) << Str(st[q]);
    CheckExchange(ranks, count, "seed " + std::to_string(seed));
  }
}

}  // namespace
