// soak.cc -- weft-soak's randomized run: calls of every kind, blocking and asynchronous, on the
// world and on communicators split from it, each result checked against reference.cc.
//
// Agreement without talking: call #i is drawn from Rng(seed, kCallStream, i) on every rank, so
// all ranks issue the same sequence. Draws that depend on a communicator's size (the send/recv
// pairing) come from their own stream, so ranks of groups of different sizes stay in step. The
// only traffic the driver adds is the stop vote of a timed run: time differs between ranks, so
// every few batches they all-reduce "my time is up" and stop together.
//
// Ordering rules (weft.h) the driver relies on: one thread calls into every communicator, which
// is allowed since each is used by one thread at a time; operations on one communicator complete
// in issue order, blocking ones included, so blocking calls may be issued while requests are in
// flight, and requests may be waited for in any order. Requests on a split communicator are
// completed before it is destroyed.
//
// Not covered yet: all-to-all and grouped point-to-point, which are being added separately; they
// belong in pick_coll() and reference.cc's soak_prepare() once weft.h has them.
#include "tools/soak/soak.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

enum { kCallStream = 1, kPairStream = 2, kBatchStream = 3, kWaitStream = 4 };

namespace {

struct Comm {
  weft_comm_t* c = nullptr;
  int rank = 0, n = 1;
  std::string name;
};

double now_s() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct Driver {
  const SoakOptions& o;
  Comm world, child;
  bool has_child = false;  // child.c stays NULL on a rank a split left out
  std::vector<SoakOp*> inflight;
  Rng wait_rng;
  long calls = 0;
  long ops = 0;
  double bytes = 0;

  Driver(const SoakOptions& opt, weft_comm_t* w) : o(opt), wait_rng(opt.seed, kWaitStream, 0) {
    world.c = w;
    weft_comm_rank(w, &world.rank);
    weft_comm_size(w, &world.n);
    world.name = "world";
  }

  [[noreturn]] void fail(long index, const std::string& msg) {
    fprintf(stderr, "weft-soak FAIL seed=%llu call=#%ld %s\n", (unsigned long long)o.seed, index,
            msg.c_str());
    fflush(stderr);
    // The others then fail on their next call with this rank gone, instead of waiting for it.
    weft_comm_abort(world.c);
    _exit(1);
  }

  void finish(SoakOp* op) {
    if (op->async) {
      weft_result_t r;
      // Three ways to complete a request: an unbounded wait, polling, and short waits that
      // time out (the request stays valid then) until one does not.
      uint64_t how = wait_rng.below(3);
      if (how == 0) {
        r = weft_wait(op->req, -1);
      } else if (how == 1) {
        int done = 0;
        while ((r = weft_test(op->req, &done)) == WEFT_SUCCESS && !done) usleep(50);
      } else {
        while ((r = weft_wait(op->req, 1)) == WEFT_ERR_TIMEOUT) {
        }
      }
      if (r != WEFT_SUCCESS)
        fail(op->index, "rank " + std::to_string(world.rank) + ": " + op->what + ": " +
                            weft_result_string(r) + ": " + weft_last_error());
    }
    std::string diff = soak_verify(*op, world.rank);
    if (!diff.empty()) fail(op->index, diff);
    bytes += (double)op->bytes;
    ops++;
    delete op;
  }

  // Completes the requests in flight on `comm` (all of them: nullptr), in a random order.
  void drain(weft_comm_t* comm) {
    std::vector<SoakOp*> keep, go;
    for (SoakOp* op : inflight) (comm == nullptr || op->comm == comm ? go : keep).push_back(op);
    inflight = keep;
    while (!go.empty()) {
      size_t k = wait_rng.below(go.size());
      SoakOp* op = go[k];
      go.erase(go.begin() + (long)k);
      finish(op);
    }
  }

  void issue(SoakOp* op) {
    if (o.verbose && world.rank == 0) printf("call #%ld %s\n", op->index, op->what.c_str());
    if (!op->async) {
      weft_result_t r = weft_call(&op->call, op->comm, nullptr);
      if (r != WEFT_SUCCESS)
        fail(op->index, "rank " + std::to_string(world.rank) + ": " + op->what + ": " +
                            weft_result_string(r) + ": " + weft_last_error());
      finish(op);
      return;
    }
    weft_result_t r = weft_call_async(&op->call, op->comm, &op->req);
    if (r != WEFT_SUCCESS)
      fail(op->index, "rank " + std::to_string(world.rank) + ": issuing " + op->what + ": " +
                          weft_result_string(r) + ": " + weft_last_error());
    inflight.push_back(op);
    if ((int)inflight.size() > o.max_inflight) {
      size_t k = wait_rng.below(inflight.size());
      SoakOp* first = inflight[k];
      inflight.erase(inflight.begin() + (long)k);
      finish(first);
    }
  }

  static weft_coll_t pick_coll(Rng& r) {
    // Weights: the collectives users call most get the most calls; barrier is cheap.
    static const struct {
      weft_coll_t coll;
      int weight;
    } kTable[] = {{WEFT_COLL_ALL_REDUCE, 20},
                  {WEFT_COLL_BROADCAST, 12},
                  {WEFT_COLL_REDUCE, 10},
                  {WEFT_COLL_ALL_GATHER, 12},
                  {WEFT_COLL_REDUCE_SCATTER, 12},
                  {WEFT_COLL_GATHER, 8},
                  {WEFT_COLL_SCATTER, 8},
                  {WEFT_COLL_BARRIER, 5},
                  {WEFT_COLL_ALL_TO_ALL, 8},
                  {WEFT_COLL_ALL_TO_ALLV, 6},
                  {WEFT_COLL_P2P_GROUP, 6},
                  {WEFT_COLL_SEND, 10}};  // SEND: a send/recv exchange between pairs of ranks
    int total = 0;
    for (const auto& e : kTable) total += e.weight;
    int x = (int)r.below((uint64_t)total);
    for (const auto& e : kTable) {
      if (x < e.weight) return e.coll;
      x -= e.weight;
    }
    return WEFT_COLL_ALL_REDUCE;
  }

  // Log-uniform in [0, max], with 0, 1 and a few small counts drawn often: those are the edges
  // where schedules split work unevenly or not at all.
  static size_t pick_count(Rng& r, size_t max) {
    uint64_t u = r.below(10);
    if (u == 0 || max == 0) return 0;
    if (u == 1) return 1;
    if (u == 2) {
      size_t c = (size_t)(2 + r.below(15));
      return c < max ? c : max;
    }
    double x = std::exp((double)(r.next() >> 11) * 0x1.0p-53 * std::log((double)max + 1.0));
    size_t c = (size_t)x - 1;
    return c > max ? max : c;
  }

  std::string describe(const weft_call_t& k, const Comm& cm, bool in_place, bool async) {
    bool reducing = k.coll == WEFT_COLL_ALL_REDUCE || k.coll == WEFT_COLL_REDUCE ||
                    k.coll == WEFT_COLL_REDUCE_SCATTER;
    std::string s = std::string(weft_coll_name(k.coll)) + "/" + weft_algo_name(k.algo) + " " +
                    weft_dtype_name(k.dtype);
    if (reducing) s += std::string(" ") + weft_op_name(k.op);
    s += " count " + std::to_string(k.count);
    if (in_place) s += " in place";
    if (k.coll == WEFT_COLL_SEND || k.coll == WEFT_COLL_RECV)
      s += " peer " + std::to_string(k.root);
    else if (k.coll == WEFT_COLL_ALL_TO_ALLV || k.coll == WEFT_COLL_P2P_GROUP)
      s += " (at most, per pair)";
    else if (k.coll != WEFT_COLL_ALL_REDUCE && k.coll != WEFT_COLL_ALL_GATHER &&
             k.coll != WEFT_COLL_REDUCE_SCATTER && k.coll != WEFT_COLL_BARRIER &&
             k.coll != WEFT_COLL_ALL_TO_ALL)
      s += " root " + std::to_string(k.root);
    return s + " on " + cm.name + " (rank " + std::to_string(cm.rank) + " of " +
           std::to_string(cm.n) + ")" + (async ? " async" : " blocking");
  }

  SoakOp* make(long index, const Comm& cm, weft_call_t k, bool async, bool in_place,
               bool null_unused, uint64_t salt) {
    SoakOp* op = new SoakOp;
    op->index = index;
    op->comm = cm.c;
    op->async = async;
    op->call = k;
    op->what = describe(k, cm, in_place, async);
    soak_prepare(op, cm.rank, cm.n, salt, in_place, null_unused);
    return op;
  }

  void one_call(long index) {
    Rng r(o.seed, kCallStream, (uint64_t)index);
    const Comm& cm = has_child && r.chance(0.4) ? child : world;
    bool async = r.chance(0.5);
    weft_call_t k{};
    k.coll = pick_coll(r);
    k.dtype = (weft_dtype_t)r.below(WEFT_NUM_DTYPES);
    k.op = (weft_op_t)r.below(WEFT_NUM_OPS);
    weft_algo_t algos[WEFT_NUM_ALGOS];
    int na = 0;
    for (int a = 0; a < WEFT_NUM_ALGOS; a++)
      if (weft_algo_supported(k.coll, (weft_algo_t)a)) algos[na++] = (weft_algo_t)a;
    k.algo = algos[r.below((uint64_t)na)];
    bool gathers = k.coll == WEFT_COLL_ALL_GATHER || k.coll == WEFT_COLL_GATHER ||
                   k.coll == WEFT_COLL_REDUCE_SCATTER || k.coll == WEFT_COLL_SCATTER ||
                   k.coll == WEFT_COLL_ALL_TO_ALL || k.coll == WEFT_COLL_ALL_TO_ALLV ||
                   k.coll == WEFT_COLL_P2P_GROUP;
    // max_count bounds the largest buffer, which is n counts for the gathering ones.
    k.count = pick_count(r, gathers ? o.max_count / (size_t)cm.n : o.max_count);
    uint64_t root_draw = r.next();
    k.root = (int)(root_draw % (uint64_t)cm.n);
    bool in_place = r.chance(0.3);
    bool null_unused = r.chance(0.5);
    uint64_t salt = r.next();
    calls++;
    if (!cm.c) return;  // a call on a split that left this rank out
    // No in-place form of these (weft.h); a p2p group without ops would name no rank.
    if (k.coll == WEFT_COLL_ALL_TO_ALL || k.coll == WEFT_COLL_ALL_TO_ALLV ||
        k.coll == WEFT_COLL_P2P_GROUP)
      in_place = false;
    if (k.coll == WEFT_COLL_P2P_GROUP) {
      SoakOp* g = make(index, cm, k, async, false, false, salt);
      if (g->call.nops == 0) {
        delete g;
        return;
      }
      issue(g);
      return;
    }
    if (k.coll != WEFT_COLL_SEND) {
      issue(make(index, cm, k, async, in_place, null_unused, salt));
      return;
    }
    // Pairs from a random permutation of the group: position 2j exchanges with 2j+1, the first
    // of the pair sending first and the second receiving first, so blocking calls cannot wait on
    // each other in a cycle. With an odd size one rank sits the call out.
    Rng pr(o.seed, kPairStream, (uint64_t)index);
    std::vector<int> perm((size_t)cm.n);
    for (int j = 0; j < cm.n; j++) perm[(size_t)j] = j;
    for (int j = cm.n - 1; j > 0; j--) std::swap(perm[(size_t)j], perm[pr.below((uint64_t)j + 1)]);
    int pos = 0;
    while (perm[(size_t)pos] != cm.rank) pos++;
    int mate = pos ^ 1;
    if (mate >= cm.n) return;
    weft_call_t s = k, v = k;
    s.coll = WEFT_COLL_SEND;
    v.coll = WEFT_COLL_RECV;
    s.root = v.root = perm[(size_t)mate];
    s.algo = v.algo = WEFT_ALGO_AUTO;
    SoakOp* a = make(index, cm, s, async, false, false, salt);
    SoakOp* b = make(index, cm, v, async, false, false, salt);
    if (pos & 1) std::swap(a, b);
    issue(a);
    issue(b);
  }

  void new_child(Rng& b, long index) {
    int how = (int)b.below(4);
    weft_result_t r;
    has_child = true;
    if (how == 2) {
      r = weft_comm_dup(world.c, &child.c);
      child.name = "dup";
    } else if (how == 3) {
      // Rank 0 takes no part (WEFT_SPLIT_NOCOLOR): the others go on without it.
      r = weft_comm_split(world.c, world.rank == 0 ? WEFT_SPLIT_NOCOLOR : 0, world.rank, &child.c);
      child.name = "split without rank 0";
    } else {
      // Even and odd ranks, ordered by rank or against it: the new ranks then differ from the
      // old ones, and with an odd world the two groups differ in size.
      int key = how == 0 ? world.rank : -world.rank;
      r = weft_comm_split(world.c, world.rank % 2, key, &child.c);
      child.name = how == 0 ? "split by parity" : "split by parity, keys reversed";
    }
    if (r != WEFT_SUCCESS)
      fail(index, "rank " + std::to_string(world.rank) + ": creating a " + child.name + ": " +
                      weft_result_string(r) + ": " + weft_last_error());
    if ((child.c == nullptr) != (how == 3 && world.rank == 0))
      fail(index, "rank " + std::to_string(world.rank) + ": the " + child.name + " gave " +
                      (child.c ? "a communicator" : "none") + ", want the opposite");
    if (!child.c) return;
    weft_comm_rank(child.c, &child.rank);
    weft_comm_size(child.c, &child.n);
  }

  void drop_child(long index) {
    has_child = false;
    if (!child.c) return;
    drain(child.c);
    weft_result_t r = weft_comm_destroy(child.c);
    if (r != WEFT_SUCCESS)
      fail(index, "rank " + std::to_string(world.rank) + ": destroying the " + child.name + ": " +
                      weft_result_string(r) + ": " + weft_last_error());
    child.c = nullptr;
  }

  // Every rank votes on whether its time is up; all stop when any says so.
  bool time_up(long index, double t0) {
    int32_t mine = now_s() - t0 >= o.seconds, any = 0;
    weft_result_t r = weft_all_reduce(&mine, &any, 1, WEFT_INT32, WEFT_MAX, world.c, nullptr);
    if (r != WEFT_SUCCESS)
      fail(index, "rank " + std::to_string(world.rank) + ": the stop vote (all_reduce): " +
                      weft_result_string(r) + ": " + weft_last_error());
    return any != 0;
  }

  int run() {
    double t0 = now_s();
    long index = 0;
    long want = o.seconds > 0 ? 0 : (o.calls > 0 ? o.calls : 1000);
    for (long batch = 0;; batch++) {
      Rng b(o.seed, kBatchStream, (uint64_t)batch);
      if (!has_child && b.chance(0.08))
        new_child(b, index);
      else if (has_child && b.chance(0.1))
        drop_child(index);
      int k = 1 + (int)b.below(8);
      for (int j = 0; j < k && (want == 0 || index < want); j++) one_call(index++);
      if (b.chance(0.4)) drain(nullptr);
      if (want > 0 && index >= want) break;
      if (want == 0 && batch % 8 == 7 && time_up(index, t0)) break;
    }
    drain(nullptr);
    if (has_child) drop_child(index);
    double dt = now_s() - t0;
    if (world.rank == 0)
      printf(
          "weft-soak: seed=%llu ranks=%d calls=%ld operations=%ld in %.1f s: %.0f calls/s, "
          "%.1f MiB checked on rank 0\n",
          (unsigned long long)o.seed, world.n, calls, ops, dt, (double)calls / dt,
          bytes / (1 << 20));
    return 0;
  }
};

}  // namespace

int soak_run(const SoakOptions& o, weft_comm_t* world) {
  Driver d(o, world);
  return d.run();
}
