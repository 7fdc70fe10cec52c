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
