// pattern_colls_test.cc -- the check data of every collective in weft.h's layouts: each rank's
// send buffer run through a reference of the collective (reductions by the library's own kernels)
// checks out on every rank, and the typical mistakes (a block at the wrong place, the wrong peer,
// a missing rank, an untouched buffer) are counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/reduce.h"
#include "tools/bench/elem.h"
#include "tools/bench/pattern.h"
#include "tools/bench/types.h"

namespace {

const int kWorlds[] = {1, 2, 3, 4, 5, 8};
const size_t kCount = 200;

using Buf = std::vector<char>;

struct World {
  bench_pattern_t p;
  std::vector<Buf> send;  // per rank, bench_pattern_send_count elements (none: an empty Buf)
  size_t esize;
};

World Make(bench_coll_t coll, weft_dtype_t dt, weft_op_t op, int n, int root) {
  World w;
  bench_pattern_init(&w.p, coll, dt, op, n, root);
  w.esize = bench_dtype_size(dt);
  for (int r = 0; r < n; r++) {
    w.send.emplace_back(bench_pattern_send_count(&w.p, r, kCount) * w.esize);
    bench_pattern_fill_send(&w.p, r, w.send.back().data(), kCount);
  }
  return w;
}

// The reduction over ranks of the send buffers (leaving out `skip`), rank 0 first, in the dtype's
// arithmetic; avg divides by the world size in its last step, as the library does.
Buf Reduce(const World &w, int skip = -1) {
  size_t n = w.send[0].size() / w.esize;
  std::vector<int> ranks;
  for (int r = 0; r < w.p.nranks; r++) {
    if (r != skip) ranks.push_back(r);
  }
  Buf acc = w.send[ranks[0]];
  for (size_t k = 1; k < ranks.size(); k++) {
    const char *in = w.send[ranks[k]].data();
    if (w.p.op == WEFT_AVG && k + 1 == ranks.size()) {
      kern_reduce_avg_final(acc.data(), acc.data(), in, n, w.p.dtype, w.p.nranks);
    } else {
      EXPECT_EQ(kern_reduce(acc.data(), acc.data(), in, n, w.p.dtype, w.p.op), WEFT_SUCCESS);
    }
  }
  if (w.p.op == WEFT_AVG && ranks.size() == 1) {
    kern_scale_avg(acc.data(), acc.data(), n, w.p.dtype, w.p.nranks);
  }
  return acc;
}

Buf Slice(const Buf &b, size_t first, size_t count, size_t esize) {
  return Buf(b.begin() + first * esize, b.begin() + (first + count) * esize);
}

size_t Check(const World &w, int rank, const Buf &out) {
  EXPECT_EQ(out.size(), bench_pattern_recv_count(&w.p, rank, kCount) * w.esize);
  return bench_pattern_check_recv(&w.p, rank, out.data(), kCount);
}

std::string Name(bench_coll_t c, weft_dtype_t dt, weft_op_t op, int n) {
  return std::string(bench_coll_name(c)) + " " + bench_dtype_name(dt) + " " + bench_op_name(op) +
         " nranks " + std::to_string(n);
}

class CollPattern : public ::testing::TestWithParam<int> {};

TEST_P(CollPattern, Reductions) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (bench_coll_t c : {BENCH_ALL_REDUCE, BENCH_REDUCE, BENCH_REDUCE_SCATTER}) {
    for (int o = 0; o < WEFT_NUM_OPS; o++) {
      weft_op_t op = static_cast<weft_op_t>(o);
      for (int n : kWorlds) {
        int root = n / 2;
        World w = Make(c, dt, op, n, root);
        std::string name = Name(c, dt, op, n);
        Buf full = Reduce(w);
        for (int r = 0; r < n; r++) {
          Buf out;
          if (c == BENCH_ALL_REDUCE || (c == BENCH_REDUCE && r == root)) out = full;
          if (c == BENCH_REDUCE_SCATTER) out = Slice(full, r * kCount, kCount, w.esize);
          EXPECT_EQ(Check(w, r, out), 0u) << name << " rank " << r;
        }
        if (n == 1) continue;
        // A reduce_scatter block from the wrong place, a result missing the last rank.
        if (c == BENCH_REDUCE_SCATTER) {
          Buf other = Slice(full, ((root + 1) % n) * kCount, kCount, w.esize);
          EXPECT_GT(Check(w, root, other), kCount / 4) << name;
        }
        Buf partial = Reduce(w, n - 1);
        if (c == BENCH_REDUCE_SCATTER) partial = Slice(partial, root * kCount, kCount, w.esize);
        EXPECT_GT(Check(w, root, partial), kCount / 20) << name << " without the last rank";
      }
    }
  }
}

TEST_P(CollPattern, AllGather) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (int n : kWorlds) {
    World w = Make(BENCH_ALL_GATHER, dt, WEFT_SUM, n, 0);
    std::string name = Name(BENCH_ALL_GATHER, dt, WEFT_SUM, n);
    Buf gathered;
    for (int r = 0; r < n; r++) gathered.insert(gathered.end(), w.send[r].begin(), w.send[r].end());
    for (int r = 0; r < n; r++) EXPECT_EQ(Check(w, r, gathered), 0u) << name << " rank " << r;
    if (n == 1) continue;
    // Blocks 0 and 1 swapped: both are wrong, the rest right.
    Buf swapped = gathered;
    std::copy(w.send[1].begin(), w.send[1].end(), swapped.begin());
    std::copy(w.send[0].begin(), w.send[0].end(), swapped.begin() + kCount * w.esize);
    size_t wrong = Check(w, n - 1, swapped);
    EXPECT_GT(wrong, kCount);
    EXPECT_LE(wrong, 2 * kCount);
  }
}

// gather: the root's buffer is the ranks' send buffers end to end; the other ranks have nothing
// to check. scatter: rank r receives the root's block r; only the root's send buffer is filled.
TEST_P(CollPattern, GatherAndScatter) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (int n : kWorlds) {
    int root = n / 2;
    World g = Make(BENCH_GATHER, dt, WEFT_MAX, n, root);
    std::string name = Name(BENCH_GATHER, dt, WEFT_MAX, n);
    Buf gathered;
    for (int r = 0; r < n; r++) {
      ASSERT_EQ(g.send[r].size(), kCount * g.esize) << name;
      gathered.insert(gathered.end(), g.send[r].begin(), g.send[r].end());
    }
    EXPECT_EQ(Check(g, root, gathered), 0u) << name;
    for (int r = 0; r < n; r++) {
      if (r != root) EXPECT_EQ(Check(g, r, Buf()), 0u) << name << " rank " << r;
    }
    World s = Make(BENCH_SCATTER, dt, WEFT_SUM, n, root);
    name = Name(BENCH_SCATTER, dt, WEFT_SUM, n);
    ASSERT_EQ(s.send[root].size(), n * kCount * s.esize) << name;
    for (int r = 0; r < n; r++) {
      if (r != root) EXPECT_TRUE(s.send[r].empty()) << name << " rank " << r;
      Buf block = Slice(s.send[root], r * kCount, kCount, s.esize);
      EXPECT_EQ(Check(s, r, block), 0u) << name << " rank " << r;
    }
    if (n == 1) continue;
    // gather: blocks of the root and the next rank swapped; scatter: the wrong block.
    Buf swapped = gathered;
    int next = (root + 1) % n;
    std::copy(g.send[next].begin(), g.send[next].end(), swapped.begin() + root * kCount * g.esize);
    std::copy(g.send[root].begin(), g.send[root].end(), swapped.begin() + next * kCount * g.esize);
    size_t wrong = Check(g, root, swapped);
    EXPECT_GT(wrong, kCount) << name;
    EXPECT_LE(wrong, 2 * kCount) << name;
    Buf other = Slice(s.send[root], next * kCount, kCount, s.esize);
    EXPECT_GT(Check(s, root, other), kCount / 2) << name;
  }
}

// alltoall: block q of rank r's output is block r of rank q's send buffer; a transposed
// exchange (block q of rank r's own buffer, or rank q's block q) is caught.
TEST_P(CollPattern, AllToAll) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (int n : kWorlds) {
    World w = Make(BENCH_ALL_TO_ALL, dt, WEFT_SUM, n, 0);
    std::string name = Name(BENCH_ALL_TO_ALL, dt, WEFT_SUM, n);
    for (int r = 0; r < n; r++) {
      ASSERT_EQ(w.send[r].size(), n * kCount * w.esize) << name;
      Buf out, own, diag;
      for (int q = 0; q < n; q++) {
        Buf b = Slice(w.send[q], r * kCount, kCount, w.esize);
        out.insert(out.end(), b.begin(), b.end());
        b = Slice(w.send[r], q * kCount, kCount, w.esize);
        own.insert(own.end(), b.begin(), b.end());
        b = Slice(w.send[q], q * kCount, kCount, w.esize);
        diag.insert(diag.end(), b.begin(), b.end());
      }
      EXPECT_EQ(Check(w, r, out), 0u) << name << " rank " << r;
      for (size_t i = 0; i < 3; i++)
        EXPECT_TRUE(bench_elem_equals(dt, out.data(), i + kCount * (n - 1),
                                      bench_pattern_expected_recv(&w.p, r, kCount,
                                                                  i + kCount * (n - 1))))
            << name;
      if (n == 1) continue;
      EXPECT_GT(Check(w, r, own), kCount / 2) << name << " rank " << r;
      EXPECT_GT(Check(w, r, diag), kCount / 2) << name << " rank " << r;
    }
  }
}

TEST_P(CollPattern, BroadcastAndSendrecv) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (int n : kWorlds) {
    int root = n - 1;
    World b = Make(BENCH_BROADCAST, dt, WEFT_PROD, n, root);
    for (int r = 0; r < n; r++) EXPECT_EQ(Check(b, r, b.send[root]), 0u) << n << " rank " << r;
    if (n > 1) {
      EXPECT_GT(Check(b, 0, b.send[0]), kCount / 2) << n;
    }
    if (n == 1) continue;  // sendrecv needs a peer
    World s = Make(BENCH_SENDRECV, dt, WEFT_MAX, n, 0);
    std::string name = Name(BENCH_SENDRECV, dt, WEFT_MAX, n);
    for (int r = 0; r < n; r++) {
      int left = (r + n - 1) % n, right = (r + 1) % n;
      EXPECT_EQ(Check(s, r, s.send[left]), 0u) << name << " rank " << r;
      EXPECT_GT(Check(s, r, s.send[r]), kCount / 2) << name << " own data, rank " << r;
      if (n > 2) {
        EXPECT_GT(Check(s, r, s.send[right]), kCount / 2) << name << " from the right";
      }
    }
  }
}

// Poisoned receive buffers are wrong everywhere; reduce's and gather's non-root ranks and
// barrier have nothing to check, and scatter's non-root ranks nothing to send.
TEST_P(CollPattern, PoisonIsWrongEverywhere) {
  weft_dtype_t dt = static_cast<weft_dtype_t>(GetParam());
  for (int c = 0; c < BENCH_NUM_COLLS; c++) {
    for (int o = 0; o < WEFT_NUM_OPS; o++) {
      for (int n : {2, 3, 4}) {
        bench_pattern_t p;
        bench_pattern_init(&p, static_cast<bench_coll_t>(c), dt, static_cast<weft_op_t>(o), n, 1);
        for (int r = 0; r < n; r++) {
          size_t m = bench_pattern_recv_count(&p, r, kCount);
          Buf out(m * bench_dtype_size(dt));
          bench_pattern_poison_recv(&p, r, out.data(), kCount);
          EXPECT_EQ(bench_pattern_check_recv(&p, r, out.data(), kCount), m) << c << " " << r;
          for (size_t i = 0; i < m && i < 3; i++) {
            EXPECT_FALSE(bench_elem_equals(dt, out.data(), i,
                                           bench_pattern_expected_recv(&p, r, kCount, i)));
          }
        }
        // Rank 1 is the root.
        size_t expect_recv =
            c == BENCH_ALL_GATHER || c == BENCH_GATHER || c == BENCH_ALL_TO_ALL ? n * kCount
                                                                                : kCount;
        if (c == BENCH_BARRIER) expect_recv = 0;
        EXPECT_EQ(bench_pattern_recv_count(&p, 1, kCount), expect_recv) << c;
        if (c == BENCH_REDUCE || c == BENCH_GATHER) {
          EXPECT_EQ(bench_pattern_recv_count(&p, 0, kCount), 0u);
        }
        size_t expect_send =
            c == BENCH_REDUCE_SCATTER || c == BENCH_SCATTER || c == BENCH_ALL_TO_ALL ? n * kCount
                                                                                     : kCount;
        if (c == BENCH_BARRIER) expect_send = 0;
        EXPECT_EQ(bench_pattern_send_count(&p, 1, kCount), expect_send) << c;
        if (c == BENCH_SCATTER) {
          EXPECT_EQ(bench_pattern_send_count(&p, 0, kCount), 0u);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, CollPattern,
                         ::testing::Range(0, static_cast<int>(WEFT_NUM_DTYPES)),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(
                               bench_dtype_name(static_cast<weft_dtype_t>(info.param)));
                         });

}  // namespace
