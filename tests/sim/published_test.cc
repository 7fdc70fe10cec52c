// published_test.cc -- weft-sim against published cost models: Thakur, Rabenseifner & Gropp,
// "Optimization of Collective Communication Operations in MPICH" (IJHPCA 19(1), 2005), and the
// ring terms of NCCL's tuning model (src/graph/tuning.cc in NVIDIA/nccl).
//
// The paper's model, and the settings that map onto it:
// - a message of m bytes takes a + m b between any two processes, and a process can send one
//   message and receive one at the same time (bidirectional links, no contention): weft-sim's one
//   outgoing and one incoming port per rank, all ranks on one node (alpha = a, beta = b);
// - reducing m bytes costs m g: weft-sim's gamma, on one CPU per rank;
// - a step sends its whole message at once (no pipelining): slices larger than any message
//   (slice_bytes = 2^40), so every op is one message;
// - nothing but the algorithm's messages: no call description (headers = 0).
// n is the paper's: the all-reduce's vector, the all-gather's gathered result, the
// reduce-scatter's input, in bytes.
#include <cmath>
#include <cstdio>
#include <vector>

#include "tests/sim/sim_util.h"

namespace {

const size_t kWhole = (size_t)1 << 40;  // one slice per op, whatever its size
const double kA = 5e-6, kB = 1e-10, kG = 2e-10;

sim_model_t Paper(double a = kA, double b = kB, double g = kG) {
  sim_model_t m = simtest::Model(kWhole, /*headers=*/0);
  m.alpha = m.inter_alpha = a;
  m.beta = m.inter_beta = b;
  m.gamma = g;
  return m;
}

int Pow2Below(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

double Lg(int p) { return std::log2((double)p); }

// The paper's closed forms (in its notation: a, b, g per message, byte, byte reduced). p' is the
// largest power of two
// <= p; MPICH folds the other p - p' ranks in first (whole vector in: a + n b + n g) and hands
// them the result last (a + n b), which is what weft's fold.h does too.
double RingAllGather(int p, double n) { return (p - 1) * kA + (p - 1.0) / p * n * kB; }
// Pairwise exchange: p-1 steps of n/p bytes, each reduced; a ring moves and reduces the same.
double PairwiseReduceScatter(int p, double n) {
  return (p - 1) * kA + (p - 1.0) / p * n * (kB + kG);
}
double RingAllReduce(int p, double n) {
  return 2 * (p - 1) * kA + 2 * (p - 1.0) / p * n * kB + (p - 1.0) / p * n * kG;
}
double Fold(int p, double n) { return Pow2Below(p) == p ? 0 : 2 * kA + 2 * n * kB + n * kG; }
double RecursiveDoublingAllReduce(int p, double n) {
  return Lg(Pow2Below(p)) * (kA + n * kB + n * kG) + Fold(p, n);
}
// Power-of-two p only (the paper's recursive doubling all-gather and halving reduce-scatter).
double RecursiveDoublingAllGather(int p, double n, double a = kA, double b = kB) {
  return Lg(p) * a + (p - 1.0) / p * n * b;
}
double HalvingReduceScatter(int p, double n, double a = kA, double b = kB, double g = kG) {
  return Lg(p) * a + (p - 1.0) / p * n * (b + g);
}
double RabenseifnerAllReduce(int p, double n, double a = kA, double b = kB, double g = kG) {
  return 2 * Lg(p) * a + 2 * (p - 1.0) / p * n * b + (p - 1.0) / p * n * g;
}

struct Case {
  weft_coll_t coll;
  weft_algo_t algo;
  int p;
  size_t count;  // weft.h's count: all_gather sendcount, reduce_scatter recvcount
};

double PaperBytes(const Case& c) {
  double n = (double)c.count * 4;
  return c.coll == WEFT_COLL_ALL_REDUCE ? n : n * c.p;
}

// Ring all-gather, ring reduce-scatter, ring all-reduce and recursive-doubling all-reduce send
// what MPICH's algorithms send, one message per step: the paper's forms hold term for term
// (1e-6: the simulator adds the same terms in another order), powers of two or not.
TEST(PublishedTest, MpichFormsWhereWeftSendsTheSameMessages) {
  std::vector<Case> cases;
  for (int p : {6, 8, 64, 100}) {
    for (size_t block : {1, 1000, 1 << 16}) {
      cases.push_back({WEFT_COLL_ALL_GATHER, WEFT_ALGO_RING, p, block});
      cases.push_back({WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RING, p, block});
      cases.push_back({WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, p, block * p});
      cases.push_back({WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING, p, block * p});
    }
  }
  // 1024 ranks: one size each (a ring there is 2 million messages).
  cases.push_back({WEFT_COLL_ALL_GATHER, WEFT_ALGO_RING, 1024, 256});
  cases.push_back({WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RING, 1024, 16});
  cases.push_back({WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, 1024, 1 << 18});
  for (int p : {1000, 1024})
    for (size_t count : {1, 1 << 10, 1 << 20})
      cases.push_back({WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING, p, count});
  sim_model_t m = Paper();
  for (const Case& c : cases) {
    double n = PaperBytes(c), want = 0;
    if (c.coll == WEFT_COLL_ALL_GATHER) want = RingAllGather(c.p, n);
    if (c.coll == WEFT_COLL_REDUCE_SCATTER) want = PairwiseReduceScatter(c.p, n);
    if (c.coll == WEFT_COLL_ALL_REDUCE)
      want = c.algo == WEFT_ALGO_RING ? RingAllReduce(c.p, n) : RecursiveDoublingAllReduce(c.p, n);
    double got = simtest::Time(m, c.coll, c.algo, c.p, c.count);
    EXPECT_NEAR(got / want, 1.0, 1e-6)
        << weft_coll_name(c.coll) << " " << weft_algo_name(c.algo) << " p=" << c.p << " n=" << n;
  }
}

// One op of the hand-made schedules below: every step waits for the whole of the one before.
sched_op_t Op(sched_kind_t kind, int peer, size_t offset, size_t count, int dep) {
  sched_op_t op{};
  op.kind = kind;
  op.peer = peer;
  op.buf = SCHED_RECVBUF;
  op.offset = offset;
  op.count = count;
  op.dep = dep;
  op.dep_whole = 1;
  return op;
}

// MPICH's recursive halving and doubling as the paper describes them, for p a power of two: one
// message per step, each step waiting for the whole of the one before (dep_whole), halving the
// range it reduces, then doubling the range it gathers. Built here, independently of weft's
// builders, so that the engine is checked on the paper's own schedules. halve: the
// reduce-scatter; gather: the all-gather.
std::vector<schedule_t> MpichHalvingDoubling(int p, size_t count, bool halve, bool gather) {
  std::vector<schedule_t> s(p);
  // Off powers of two (all-reduce only), MPICH's fold: even rank 2i < 2 rem hands its whole
  // vector to 2i+1, which reduces it and plays virtual rank i, and gets the result back last.
  int q = Pow2Below(p), rem = p - q, steps = (int)Lg(q);
  EXPECT_TRUE(q == p || (halve && gather)) << "folds only for the all-reduce";
  size_t block = count / q;
  for (int r = 0; r < p; r++) {
    sched_init(&s[r], count, count);
    int last = -1;  // the receive the next step waits for
    if (r < 2 * rem && r % 2 == 0) {
      sched_op_t give = Op(SCHED_SEND, r + 1, 0, count, -1);
      int i = sched_add(&s[r], &give);
      sched_op_t back = Op(SCHED_RECV_COPY, r + 1, 0, count, i);
      EXPECT_GE(sched_add(&s[r], &back), 0);
      continue;
    }
    int v = r < 2 * rem ? r / 2 : r - rem;
    auto real = [&](int w) { return w < rem ? 2 * w + 1 : w + rem; };
    if (r < 2 * rem) {
      sched_op_t in = Op(SCHED_RECV_REDUCE, r - 1, 0, count, -1);
      in.src_buf = SCHED_SENDBUF;
      last = sched_add(&s[r], &in);
    }
    size_t lo = 0, hi = count;  // the range this rank still reduces
    for (int k = 0; halve && k < steps; k++) {
      int d = q >> (k + 1), peer = real(v ^ d);
      size_t mid = lo + (hi - lo) / 2;
      bool upper = (v & d) != 0;
      size_t keep = upper ? mid : lo, give = upper ? lo : mid, len = (hi - lo) / 2;
      sched_op_t send = Op(SCHED_SEND, peer, give, len, last);
      sched_op_t recv = Op(SCHED_RECV_REDUCE, peer, keep, len, last);
      recv.src_buf = SCHED_RECVBUF;
      recv.src_offset = keep;
      EXPECT_GE(sched_add(&s[r], &send), 0);
      last = sched_add(&s[r], &recv);
      lo = keep;
      hi = keep + len;
    }
    if (!halve) lo = (size_t)v * block, hi = lo + block;
    for (int k = 0; gather && k < steps; k++) {
      int d = 1 << k, peer = real(v ^ d);
      size_t len = hi - lo, theirs = (v & d) ? lo - len : hi;
      sched_op_t send = Op(SCHED_SEND, peer, lo, len, last);
      sched_op_t recv = Op(SCHED_RECV_COPY, peer, theirs, len, last);
      EXPECT_GE(sched_add(&s[r], &send), 0);
      last = sched_add(&s[r], &recv);
      lo = lo < theirs ? lo : theirs;
      hi = lo + 2 * len;
    }
    if (r < 2 * rem) {
      sched_op_t out = Op(SCHED_SEND, r - 1, 0, count, last);
      EXPECT_GE(sched_add(&s[r], &out), 0);
    }
  }
  return s;
}

double RunSchedules(const sim_model_t& m, std::vector<schedule_t>& s) {
  sim_result_t r;
  weft_result_t res = sim_run_schedules(&m, (int)s.size(), 4, s.data(), nullptr, nullptr, &r);
  EXPECT_EQ(res, WEFT_SUCCESS) << err_last();
  for (schedule_t& x : s) sched_free(&x);
  return res == WEFT_SUCCESS ? r.time : NAN;
}

// The engine on the paper's own schedules: recursive-halving reduce-scatter, recursive-doubling
// all-gather and Rabenseifner all-reduce at 8, 64 and 1024 ranks, term for term; Rabenseifner
// folded from 6, 100 and 1000 ranks.
TEST(PublishedTest, MpichHalvingAndDoublingSchedules) {
  sim_model_t m = Paper();
  for (int p : {8, 64, 1024}) {
    for (size_t count : {(size_t)p, (size_t)p << 6, (size_t)p << 12}) {
      double n = (double)count * 4;
      std::vector<schedule_t> rs = MpichHalvingDoubling(p, count, true, false);
      EXPECT_NEAR(RunSchedules(m, rs) / HalvingReduceScatter(p, n), 1.0, 1e-6) << p << " " << n;
      std::vector<schedule_t> ag = MpichHalvingDoubling(p, count, false, true);
      EXPECT_NEAR(RunSchedules(m, ag) / RecursiveDoublingAllGather(p, n), 1.0, 1e-6) << p;
      std::vector<schedule_t> ar = MpichHalvingDoubling(p, count, true, true);
      EXPECT_NEAR(RunSchedules(m, ar) / RabenseifnerAllReduce(p, n), 1.0, 1e-6) << p;
    }
  }
  // Off powers of two: Rabenseifner on p' = 4, 64 and 512 ranks plus the fold.
  for (int p : {6, 100, 1000}) {
    int q = Pow2Below(p);
    for (size_t count : {(size_t)q, (size_t)q << 8}) {
      double n = (double)count * 4;
      std::vector<schedule_t> ar = MpichHalvingDoubling(p, count, true, true);
      EXPECT_NEAR(RunSchedules(m, ar) / (RabenseifnerAllReduce(q, n) + Fold(p, n)), 1.0, 1e-6) << p;
    }
  }
}

// weft's own Rabenseifner all-reduce and halving reduce-scatter send one message per step, as
// MPICH's, each step waiting for the whole of the one before: the paper's forms hold term for
// term (1e-6: the engine adds the same terms in another order) at 8, 64 and 1024 ranks, and for
// the all-reduce folded from 6, 100 and 1000 ranks (the fold's two extra steps, as MPICH's). The
// paper has no closed form for the halving reduce-scatter off powers of two (its blocks do not
// halve evenly there). weft's recursive-doubling all-gather still sends every block as its own
// op: at least one alpha per block, p-1 where the paper has lg p.
TEST(PublishedTest, WeftRabenseifnerIsThePaperForm) {
  sim_model_t m = Paper();
  for (int p : {8, 64, 1024}) {
    for (size_t block : {(size_t)1, (size_t)1 << 6, (size_t)1 << 12}) {
      Case ar = {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RABENSEIFNER, p, block * p};
      Case rs = {WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RABENSEIFNER, p, block};
      double got = simtest::Time(m, ar.coll, ar.algo, p, ar.count);
      EXPECT_NEAR(got / RabenseifnerAllReduce(p, PaperBytes(ar)), 1.0, 1e-6) << p << " " << block;
      got = simtest::Time(m, rs.coll, rs.algo, p, rs.count);
      EXPECT_NEAR(got / HalvingReduceScatter(p, PaperBytes(rs)), 1.0, 1e-6) << p << " " << block;
    }
  }
  for (int p : {6, 100, 1000}) {
    int q = Pow2Below(p);
    for (size_t count : {(size_t)q, (size_t)q << 8}) {
      double n = (double)count * 4;
      double got = simtest::Time(m, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RABENSEIFNER, p, count);
      EXPECT_NEAR(got / (RabenseifnerAllReduce(q, n) + Fold(p, n)), 1.0, 1e-6) << p << " " << n;
    }
  }
  for (int p : {4, 8, 64}) {
    Case c = {WEFT_COLL_ALL_GATHER, WEFT_ALGO_RECURSIVE_DOUBLING, p, 1 << 12};
    double lat = simtest::Time(Paper(kA, 0, 0), c.coll, c.algo, p, c.count) / kA;
    EXPECT_GE(lat, p - 1 - 1e-6) << p;
    double bw = simtest::Time(Paper(0, kB, 0), c.coll, c.algo, p, c.count) /
                RecursiveDoublingAllGather(p, PaperBytes(c), 0, kB);
    EXPECT_GE(bw, 1 - 1e-9) << p;
    if (p <= 8) EXPECT_NEAR(bw, 1.0, 1e-6) << p;
  }
}

// 16,384 ranks: weft's Rabenseifner is the same on every rank up to an XOR of its peers, so the
// symmetric replay checks every rank's schedule and replays a few: the paper's form, in seconds.
TEST(PublishedTest, WeftRabenseifner16384) {
  const int p = 16384;
  sim_model_t m = Paper();
  m.replay = SIM_REPLAY_AUTO;
  for (weft_coll_t coll : {WEFT_COLL_ALL_REDUCE, WEFT_COLL_REDUCE_SCATTER}) {
    bool ar = coll == WEFT_COLL_ALL_REDUCE;
    Case c = {coll, WEFT_ALGO_RABENSEIFNER, p, ar ? (size_t)64 * p : 64};
    sim_call_t call = {coll, WEFT_ALGO_RABENSEIFNER, p, c.count, WEFT_FLOAT32, 0};
    sim_result_t r;
    ASSERT_EQ(sim_run(&m, &call, nullptr, nullptr, &r), WEFT_SUCCESS) << err_last();
    EXPECT_LT(r.replayed, p) << weft_coll_name(coll) << ": replayed every rank";
    double want =
        ar ? RabenseifnerAllReduce(p, PaperBytes(c)) : HalvingReduceScatter(p, PaperBytes(c));
    EXPECT_NEAR(r.time / want, 1.0, 1e-6) << weft_coll_name(coll);
  }
}

// NCCL's tuning model (ncclTopoTuneModel and ncclTopoGetAlgoTime in src/graph/tuning.cc, NCCL
// 2.30.7), in our words: a ring collective takes nsteps hops, nsteps = 2(p-1) for all-reduce and
// p-1 for all-gather and reduce-scatter; its latency is a base latency plus nsteps times a
// per-hop hardware latency, and its time is latency + bytes / algbw, where the algorithm
// bandwidth is the bus bandwidth times p / nsteps. So a ring all-reduce of n bytes costs
// base + 2(p-1) lat + 2(p-1)/p n / busbw; all-gather and reduce-scatter p-1 hops and
// (p-1)/p n / busbw. Mapping: lat = alpha (one message per hop, unsliced), busbw = 1/beta,
// base = 0 (no call description), and no reduction term (NCCL's model has none: its reductions
// run at memory speed inside the pipeline), so gamma = 0. NCCL's own per-protocol factors (LL's
// half bandwidth, the tree's 0.92, the size-indexed tree correction) are about its protocols,
// not the ring's shape, and do not apply. Not compared: NCCL's pipelined ring charges one
// latency per hop whatever the size, where weft's slices cost one alpha each (with 64 KiB
// slices weft's latency term grows with n/(p S)); NCCL's tree is a chain inside a node and a
// tree across nodes, which no weft schedule builds.
double NcclRing(weft_coll_t coll, int p, double n) {
  int nsteps = coll == WEFT_COLL_ALL_REDUCE ? 2 * (p - 1) : p - 1;
  double busbw = 1 / kB;
  return nsteps * kA + n / (busbw * p / nsteps);
}

void CheckNcclRing(int p, size_t count, bool all_reduce = true) {
  sim_model_t m = Paper(kA, kB, 0);
  for (weft_coll_t coll : {WEFT_COLL_ALL_REDUCE, WEFT_COLL_ALL_GATHER, WEFT_COLL_REDUCE_SCATTER}) {
    if (coll == WEFT_COLL_ALL_REDUCE && !all_reduce) continue;
    Case c = {coll, WEFT_ALGO_RING, p, coll == WEFT_COLL_ALL_REDUCE ? count * p : count};
    double got = simtest::Time(m, coll, WEFT_ALGO_RING, p, c.count);
    EXPECT_NEAR(got / NcclRing(coll, p, PaperBytes(c)), 1.0, 1e-6)
        << weft_coll_name(coll) << " p=" << p;
  }
}

TEST(PublishedTest, NcclRingLatencyAndBandwidthTerms) {
  for (int p : {2, 8, 13, 64, 256})
    for (size_t count : {1, 1 << 8, 1 << 16}) CheckNcclRing(p, count);
  // 1024 ranks: the all-gather and the reduce-scatter, a million messages each (the all-reduce,
  // twice that, is the paper's test above with gamma).
  CheckNcclRing(1024, 1 << 10, /*all_reduce=*/false);
}

// 4096 ranks: a ring all-reduce there is 33 million messages, which a replay of every rank
// holds in ~3 GB of op records. The ring is symmetric (rank r's schedule is rank 0's rotated by
// r), so the symmetric replay checks every rank's schedule and replays one rank: the same
// result (symmetry_test), in seconds and a few MB. The all-reduce needs count % p == 0 for that
// (uneven chunks differ from rank to rank).
TEST(PublishedTest, NcclRing4096) {
  const int p = 4096;
  sim_model_t m = Paper(kA, kB, 0);
  m.replay = SIM_REPLAY_AUTO;
  for (weft_coll_t coll : {WEFT_COLL_ALL_REDUCE, WEFT_COLL_ALL_GATHER, WEFT_COLL_REDUCE_SCATTER}) {
    Case c = {coll, WEFT_ALGO_RING, p, coll == WEFT_COLL_ALL_REDUCE ? size_t{64} * p : 64};
    sim_call_t call = {coll, WEFT_ALGO_RING, p, c.count, WEFT_FLOAT32, 0};
    sim_result_t r;
    ASSERT_EQ(sim_run(&m, &call, nullptr, nullptr, &r), WEFT_SUCCESS) << err_last();
    EXPECT_LT(r.replayed, p) << weft_coll_name(coll) << ": replayed every rank";
    EXPECT_NEAR(r.time / NcclRing(coll, p, PaperBytes(c)), 1.0, 1e-6) << weft_coll_name(coll);
  }
}

}  // namespace
