// rank_body.cc -- the checked collectives each rank of a multi-process test runs.
#include "tests/collectives_mp/rank_body.h"

#include <cstdlib>
#include <cstring>

#include "tests/collectives_mp/patterns.h"
#include "tests/collectives_mp/typed.h"

std::string join(int rank, int nranks, int port, weft_comm_t** comm) {
  weft_result_t r = weft_comm_init(comm, nranks, rank, "127.0.0.1", port);
  if (r != WEFT_SUCCESS)
    return "rank " + std::to_string(rank) + ": init failed: " + weft_last_error();
  return "";
}

static std::string describe(const char* what, weft_dtype_t d, const char* op, size_t count,
                            bool in_place) {
  return std::string(what) + " " + weft_dtype_name(d) + " " + op + " count " +
         std::to_string(count) + (in_place ? " in place" : " out of place");
}

std::string check_all_reduce(weft_comm_t* comm, weft_dtype_t d, weft_op_t op, size_t count,
                             bool in_place) {
  int rank, n;
  weft_comm_rank(comm, &rank);
  weft_comm_size(comm, &n);
  size_t es = weft_dtype_size(d);
  std::vector<char> send(count * es + 1), recv(count * es + 1, 0x5a), want(count * es + 1);
  for (size_t i = 0; i < count; i++) {
    typed_store(d, send.data(), i, pattern_input(d, op, rank, n, i));
    typed_store(d, want.data(), i, pattern_expected(d, op, n, i));
  }
  void* out = in_place ? send.data() : recv.data();
  weft_result_t r = weft_all_reduce(send.data(), out, count, d, op, comm, nullptr);
  std::string what = describe("all_reduce", d, weft_op_name(op), count, in_place);
  if (r != WEFT_SUCCESS) return what + ": " + weft_last_error();
  std::string diff = typed_compare(d, out, want.data(), count);
  if (!diff.empty()) return "rank " + std::to_string(rank) + ": " + what + ": " + diff;
  return "";
}

std::string check_broadcast(weft_comm_t* comm, weft_dtype_t d, int root, size_t count,
                            bool in_place) {
  int rank;
  weft_comm_rank(comm, &rank);
  size_t es = weft_dtype_size(d);
  std::vector<char> send(count * es + 1), recv(count * es + 1, 0x5a), want(count * es + 1);
  for (size_t i = 0; i < count; i++) {
    int64_t v = (int64_t)((i * 13 + (size_t)root * 5) % 50);
    typed_store(d, want.data(), i, v);
    if (rank == root) typed_store(d, send.data(), i, v);
  }
  void* out = in_place ? send.data() : recv.data();
  weft_result_t r = weft_broadcast(send.data(), out, count, d, root, comm, nullptr);
  std::string what =
      describe("broadcast", d, ("root " + std::to_string(root)).c_str(), count, in_place);
  if (r != WEFT_SUCCESS) return what + ": " + weft_last_error();
  std::string diff = typed_compare(d, out, want.data(), count);
  if (!diff.empty()) return "rank " + std::to_string(rank) + ": " + what + ": " + diff;
  return "";
}

std::string check_call(weft_comm_t* comm, weft_coll_t coll, weft_algo_t algo, weft_dtype_t d,
                       weft_op_t op, size_t count, bool in_place, int root,
                       const CallRunner* runner) {
  int rank, n;
  weft_comm_rank(comm, &rank);
  weft_comm_size(comm, &n);
  size_t es = weft_dtype_size(d), p = (size_t)n;
  size_t send_n = count, recv_n = count;
  // Gather and scatter: the root's whole buffer is allocated on every rank, and the others pass
  // NULL for it below.
  if (coll == WEFT_COLL_ALL_GATHER || coll == WEFT_COLL_GATHER) recv_n = count * p;
  if (coll == WEFT_COLL_REDUCE_SCATTER || coll == WEFT_COLL_SCATTER) send_n = count * p;
  if (coll == WEFT_COLL_ALL_TO_ALL) send_n = recv_n = count * p;
  bool is_root = rank == root;
  // One allocation big enough for either layout; in place, both buffers live in it.
  std::vector<char> a((send_n + recv_n) * es + 1, 0x5a), b(recv_n * es + 1, 0x5a),
      want(recv_n * es + 1);
  char* send = a.data();
  char* recv = b.data();
  if (in_place) {
    if (coll == WEFT_COLL_ALL_GATHER || (coll == WEFT_COLL_GATHER && is_root)) {
      recv = a.data();
      send = recv + (size_t)rank * count * es;
    } else if (coll == WEFT_COLL_REDUCE_SCATTER || (coll == WEFT_COLL_SCATTER && is_root)) {
      recv = send + (size_t)rank * count * es;
    } else if (coll == WEFT_COLL_GATHER || coll == WEFT_COLL_SCATTER ||
               coll == WEFT_COLL_ALL_TO_ALL) {
      // Only the root has an in-place layout; all_to_all has none.
    } else {
      recv = send;
    }
  }
  bool reducing = coll == WEFT_COLL_ALL_REDUCE || coll == WEFT_COLL_REDUCE ||
                  coll == WEFT_COLL_REDUCE_SCATTER;
  weft_op_t pat_op = reducing ? op : WEFT_SUM;
  for (size_t i = 0; i < send_n; i++) {
    int64_t v = pattern_input(d, pat_op, rank, n, i);
    // Only the root holds the broadcast's data; the others hold something else, so that an
    // in-place broadcast that leaves a rank's buffer alone fails the check.
    if (coll == WEFT_COLL_BROADCAST)
      v = (int64_t)((i * 13 + (size_t)root * 5 + (is_root ? 0 : 1)) % 50);
    if (coll == WEFT_COLL_SCATTER) v = pattern_input(d, WEFT_SUM, root, n, i);
    typed_store(d, send, i, v);
  }
  for (size_t i = 0; i < recv_n; i++) {
    int64_t v = 0;
    switch (coll) {
      case WEFT_COLL_ALL_GATHER:
      case WEFT_COLL_GATHER: v = pattern_input(d, WEFT_SUM, (int)(i / count), n, i % count); break;
      case WEFT_COLL_SCATTER: v = pattern_input(d, WEFT_SUM, root, n, (size_t)rank * count + i); break;
      // Block q came from rank q, which held it as its block `rank`.
      case WEFT_COLL_ALL_TO_ALL:
        v = pattern_input(d, WEFT_SUM, (int)(i / count), n, (size_t)rank * count + i % count);
        break;
      case WEFT_COLL_REDUCE_SCATTER: v = pattern_expected(d, op, n, (size_t)rank * count + i); break;
      case WEFT_COLL_BROADCAST: v = (int64_t)((i * 13 + (size_t)root * 5) % 50); break;
      default: v = pattern_expected(d, op, n, i);
    }
    typed_store(d, want.data(), i, v);
  }
  // Non-root ranks of a reduce may pass no output at all.
  if (coll == WEFT_COLL_REDUCE && rank != root && !in_place) recv = nullptr;
  // Nor non-root ranks of a gather, or of a scatter an input: any touch of them would crash.
  if (coll == WEFT_COLL_GATHER && !is_root) recv = nullptr;
  if (coll == WEFT_COLL_SCATTER && !is_root) send = nullptr;
  weft_call_t k = {coll, send, recv, count, d, op, root, algo};
  weft_result_t r = runner ? (*runner)(comm, k, {{a.data(), a.size()}, {b.data(), b.size()}})
                           : weft_call(&k, comm, nullptr);
  std::string what = std::string(weft_coll_name(coll)) + "/" + weft_algo_name(algo) + " " +
                     weft_dtype_name(d) + " " + (reducing ? weft_op_name(op) : "") + " count " +
                     std::to_string(count) + (in_place ? " in place" : "") + " root " +
                     std::to_string(root);
  if (r != WEFT_SUCCESS) return "rank " + std::to_string(rank) + ": " + what + ": " + weft_last_error();
  if (coll == WEFT_COLL_BARRIER || (coll == WEFT_COLL_REDUCE && rank != root) ||
      (coll == WEFT_COLL_GATHER && !is_root))
    return "";
  std::string diff = typed_compare(d, recv, want.data(), recv_n);
  if (!diff.empty()) return "rank " + std::to_string(rank) + ": " + what + ": " + diff;
  return "";
}
