// split_test.cc -- weft_comm_split and weft_comm_dup across 6 real processes: ranks and sizes,
// checked collectives on the new communicators, used alternately and at once (async), NOCOLOR,
// independence of a dup from its parent, and a split of a split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

std::string fail(int rank, const std::string& what, weft_result_t r) {
  return "rank " + std::to_string(rank) + ": " + what + ": " + weft_result_string(r) + ": " +
         weft_last_error();
}

// "" if comm has the rank and size wanted (local ones too: every rank runs on this host).
std::string check_shape(weft_comm_t* comm, const std::string& what, int rank, int size) {
  int r = -1, n = -1, lr = -1, ln = -1;
  weft_comm_rank(comm, &r);
  weft_comm_size(comm, &n);
  weft_comm_local_rank(comm, &lr);
  weft_comm_local_size(comm, &ln);
  if (r != rank || n != size || lr != rank || ln != size)
    return what + ": rank/size " + std::to_string(r) + "/" + std::to_string(n) + " local " +
           std::to_string(lr) + "/" + std::to_string(ln) + ", want " + std::to_string(rank) + "/" +
           std::to_string(size);
  return "";
}

// Checked all-reduces and broadcasts from every root, as the init tests run on a new world.
std::string check_collectives(weft_comm_t* comm, const std::string& what) {
  int n;
  weft_comm_size(comm, &n);
  std::string err = check_all_reduce(comm, WEFT_INT32, WEFT_SUM, 10000, false);
  if (err.empty()) err = check_all_reduce(comm, WEFT_FLOAT32, WEFT_MAX, 777, true);
  for (int root = 0; root < n && err.empty(); root++)
    err = check_broadcast(comm, WEFT_FLOAT64, root, 3000, root % 2);
  return err.empty() ? "" : what + ": " + err;
}

// parent ranks of the group, in new-rank order, for rank -> (color, key)
std::vector<int> group(int n, int me, int (*color)(int), int (*key)(int)) {
  std::vector<int> g;
  for (int r = 0; r < n; r++)
    if (color(r) == color(me)) g.push_back(r);
  std::stable_sort(g.begin(), g.end(), [&](int a, int b) { return key(a) < key(b); });
  return g;
}

int parity(int r) { return r % 2; }
int third(int r) { return r / 3; }
int reverse(int r) { return -r; }
int reverse2(int r) { return 100 - r; }

// An all-reduce on `comm` whose expected values come from the parent ranks in `g`.
struct Tagged {
  std::vector<int64_t> buf;
  int64_t want(size_t j, const std::vector<int>& g) const {
    int64_t s = 0;
    for (int r : g) s += (int64_t)r * 1000 + (int64_t)(j % 1000);
    return s;
  }
};

std::string check_tagged(int rank, const Tagged& t, const std::vector<int>& g, const char* what) {
  for (size_t j = 0; j < t.buf.size(); j += 97)
    if (t.buf[j] != t.want(j, g))
      return "rank " + std::to_string(rank) + ": " + what + " element " + std::to_string(j) +
             " is " + std::to_string(t.buf[j]) + ", want " + std::to_string(t.want(j, g));
  return "";
}

Tagged tagged(int parent_rank, size_t count) {
  Tagged t;
  t.buf.resize(count);
  for (size_t j = 0; j < count; j++) t.buf[j] = (int64_t)parent_rank * 1000 + (int64_t)(j % 1000);
  return t;
}

std::string split_body(int rank, int n, weft_comm_t* world) {
  weft_comm_t *odd_even, *halves;
  weft_result_t r = weft_comm_split(world, parity(rank), reverse(rank), &odd_even);
  if (r != WEFT_SUCCESS) return fail(rank, "split by rank%2", r);
  r = weft_comm_split(world, third(rank), reverse2(rank), &halves);
  if (r != WEFT_SUCCESS) return fail(rank, "split by rank/3", r);
  auto g1 = group(n, rank, parity, reverse), g2 = group(n, rank, third, reverse2);
  int r1 = (int)(std::find(g1.begin(), g1.end(), rank) - g1.begin());
  int r2 = (int)(std::find(g2.begin(), g2.end(), rank) - g2.begin());
  std::string err = check_shape(odd_even, "rank%2", r1, (int)g1.size());
  if (err.empty()) err = check_shape(halves, "rank/3", r2, (int)g2.size());
  if (err.empty()) err = check_collectives(odd_even, "rank%2");
  if (err.empty()) err = check_collectives(halves, "rank/3");
  // Alternately, blocking.
  for (int i = 0; i < 3 && err.empty(); i++) {
    err = check_all_reduce(i % 2 ? halves : odd_even, WEFT_INT64, WEFT_SUM, 5000, i == 1);
    if (err.empty())
      err = check_all_reduce(i % 2 ? odd_even : halves, WEFT_INT64, WEFT_PROD, 5000, false);
  }
  // At once: both progress threads move data at the same time.
  if (err.empty()) {
    Tagged a = tagged(rank, (size_t)1 << 20), b = tagged(rank, (size_t)1 << 20);
    weft_request_t *ra, *rb;
    if ((r = weft_iall_reduce(a.buf.data(), a.buf.data(), a.buf.size(), WEFT_INT64, WEFT_SUM,
                              odd_even, &ra)) != WEFT_SUCCESS ||
        (r = weft_iall_reduce(b.buf.data(), b.buf.data(), b.buf.size(), WEFT_INT64, WEFT_SUM,
                              halves, &rb)) != WEFT_SUCCESS)
      return fail(rank, "iall_reduce on the split communicators", r);
    if ((r = weft_wait(rb, -1)) != WEFT_SUCCESS || (r = weft_wait(ra, -1)) != WEFT_SUCCESS)
      return fail(rank, "waiting for both split communicators", r);
    err = check_tagged(rank, a, g1, "rank%2 async");
    if (err.empty()) err = check_tagged(rank, b, g2, "rank/3 async");
  }
  // A split of a split: the first two of each rank%2 group, and the rest alone.
  if (err.empty()) {
    weft_comm_t* sub;
    r = weft_comm_split(odd_even, r1 < 2 ? 0 : 1, r1, &sub);
    if (r != WEFT_SUCCESS) return fail(rank, "split of the rank%2 communicator", r);
    err = check_shape(sub, "split of rank%2", r1 < 2 ? r1 : 0, r1 < 2 ? 2 : 1);
    if (err.empty()) err = check_collectives(sub, "split of rank%2");
    weft_comm_destroy(sub);
  }
  weft_comm_destroy(halves);
  weft_comm_destroy(odd_even);
  // The parent is untouched by all this.
  if (err.empty()) err = check_collectives(world, "parent after the splits");
  return err;
}

std::string run_world(int rank, int n, int port,
                      std::string (*body)(int rank, int n, weft_comm_t* world)) {
  weft_comm_t* world;
  std::string err = join(rank, n, port, &world);
  if (!err.empty()) return err;
  err = body(rank, n, world);
  weft_comm_destroy(world);
  return err;
}

TEST(Split, ByParityAndThirdsWithReversedKeys) {
  auto res = mp_run(
      6, [](int rank, int n, int port) { return run_world(rank, n, port, split_body); }, 240000);
  EXPECT_EQ(mp_summary(res), "");
}

std::string nocolor_body(int rank, int n, weft_comm_t* world) {
  weft_comm_t* sub = reinterpret_cast<weft_comm_t*>(1);
  // Equal keys: parent order decides.
  weft_result_t r = weft_comm_split(world, rank == 2 ? WEFT_SPLIT_NOCOLOR : 7, 0, &sub);
  if (r != WEFT_SUCCESS) return fail(rank, "split", r);
  std::string err;
  if (rank == 2) {
    if (sub != nullptr) return "rank 2: NOCOLOR gave a communicator";
  } else {
    err = check_shape(sub, "without rank 2", rank < 2 ? rank : rank - 1, n - 1);
    if (err.empty()) err = check_collectives(sub, "without rank 2");
    weft_comm_destroy(sub);
  }
  if (err.empty()) err = check_collectives(world, "parent");
  return err;
}

TEST(Split, NoColorGivesNullAndStillTakesPart) {
  auto res = mp_run(
      6, [](int rank, int n, int port) { return run_world(rank, n, port, nocolor_body); }, 120000);
  EXPECT_EQ(mp_summary(res), "");
}

std::string dup_body(int rank, int n, weft_comm_t* world) {
  weft_comm_t *dup, *dup2;
  weft_result_t r = weft_comm_dup(world, &dup);
  if (r != WEFT_SUCCESS) return fail(rank, "dup", r);
  if ((r = weft_comm_dup(world, &dup2)) != WEFT_SUCCESS) return fail(rank, "second dup", r);
  std::string err = check_shape(dup, "dup", rank, n);
  // Interleaved, blocking.
  for (int i = 0; i < 3 && err.empty(); i++) {
    err = check_all_reduce(world, WEFT_INT32, WEFT_SUM, 3000, false);
    if (err.empty()) err = check_all_reduce(dup, WEFT_INT32, WEFT_SUM, 4000, true);
    if (err.empty()) err = check_broadcast(dup2, WEFT_UINT8, i, 5000, false);
  }
  // A large operation in flight on the dup while blocking ones run on the parent.
  if (err.empty()) {
    std::vector<int> all(n);
    for (int q = 0; q < n; q++) all[q] = q;
    Tagged a = tagged(rank, (size_t)1 << 20);
    weft_request_t* req;
    if ((r = weft_iall_reduce(a.buf.data(), a.buf.data(), a.buf.size(), WEFT_INT64, WEFT_SUM, dup,
                              &req)) != WEFT_SUCCESS)
      return fail(rank, "iall_reduce on the dup", r);
    for (int i = 0; i < 3 && err.empty(); i++)
      err = check_all_reduce(world, WEFT_FLOAT32, WEFT_SUM, 20000, i % 2);
    if ((r = weft_wait(req, -1)) != WEFT_SUCCESS) return fail(rank, "waiting on the dup", r);
    if (err.empty()) err = check_tagged(rank, a, all, "dup async");
  }
  weft_comm_destroy(dup);
  // The parent and the other dup outlive it.
  if (err.empty()) err = check_collectives(world, "parent after destroying a dup");
  if (err.empty()) err = check_collectives(dup2, "second dup");
  weft_comm_destroy(dup2);
  return err;
}

TEST(Dup, IsIndependentOfItsParent) {
  auto res = mp_run(
      4, [](int rank, int n, int port) { return run_world(rank, n, port, dup_body); }, 120000);
  EXPECT_EQ(mp_summary(res), "");
}

}  // namespace
