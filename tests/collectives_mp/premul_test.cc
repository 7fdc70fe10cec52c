// premul_test.cc -- WEFT_PREMUL_SUM: each rank's input times its own factor, summed, through
// all_reduce, reduce and reduce_scatter, on every dtype, in place and not, blocking and
// asynchronous (the factor's memory reused at once), at world sizes 1 to 3; and its argument
// errors. Host buffers; tests/nccl:device_test covers device buffers and device factors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/collectives_mp/typed.h"
#include "tests/harness/mp_harness.h"

namespace {

const int kTimeoutMs = 60000;

std::string R(int rank) { return "rank " + std::to_string(rank) + ": "; }

// Inputs 0 or 1 and factors 1..3: every partial sum is a small integer that every dtype,
// the 8-bit floats included, holds exactly, whatever order an algorithm adds in.
int64_t input(int rank, size_t i) { return (int64_t)((i + (size_t)rank) % 2); }
int64_t factor(int rank) { return rank + 1; }

std::string one_call(weft_comm_t* comm, weft_coll_t coll, weft_dtype_t d, size_t count,
                     bool in_place, bool async, int rank, int n) {
  size_t es = weft_dtype_size(d);
  bool scatter = coll == WEFT_COLL_REDUCE_SCATTER;
  size_t in_count = scatter ? count * (size_t)n : count;
  size_t out_count = count;
  std::vector<char> send(in_count * es + 1), recv(in_count * es + 1), want(out_count * es + 1);
  for (size_t i = 0; i < in_count; i++) typed_store(d, send.data(), i, input(rank, i));
  int root = n - 1;
  for (size_t i = 0; i < out_count; i++) {
    int64_t sum = 0;
    size_t at = scatter ? (size_t)rank * count + i : i;
    for (int r = 0; r < n; r++) sum += factor(r) * input(r, at);
    typed_store(d, want.data(), i, sum);
  }
  weft_call_t k = {};
  k.coll = coll;
  k.count = count;
  k.dtype = d;
  k.op = WEFT_PREMUL_SUM;
  k.root = coll == WEFT_COLL_REDUCE ? root : -1;
  k.algo = WEFT_ALGO_AUTO;
  std::vector<char> f(8);
  typed_store(d, f.data(), 0, factor(rank));
  k.scalar = f.data();
  char* out = recv.data();
  if (in_place) {
    out = send.data() + (scatter ? (size_t)rank * count * es : 0);
    k.sendbuf = send.data();
  } else {
    k.sendbuf = send.data();
  }
  k.recvbuf = out;
  weft_result_t res;
  if (async) {
    weft_request_t* req = nullptr;
    res = weft_call_async(&k, comm, &req);
    // weft.h: a host factor is read before the call returns.
    typed_store(d, f.data(), 0, 100);
    if (res == WEFT_SUCCESS) res = weft_wait(req, -1);
  } else {
    res = weft_call(&k, comm, nullptr);
  }
  std::string what = std::string(weft_coll_name(coll)) + " " + weft_dtype_name(d) + " count " +
                     std::to_string(count) + (in_place ? " in place" : "") +
                     (async ? " async" : "") + ": ";
  if (res != WEFT_SUCCESS) return R(rank) + what + weft_last_error();
  if (coll == WEFT_COLL_REDUCE && rank != root) return "";
  std::string diff = typed_compare(d, out, want.data(), out_count);
  return diff.empty() ? "" : R(rank) + what + diff;
}

std::string matrix_body(int rank, int n, int port) {
  setenv("WEFT_TIMEOUT_MS", "20000", 1);
  weft_comm_t* comm;
  if (weft_comm_init(&comm, n, rank, "127.0.0.1", port) != WEFT_SUCCESS)
    return R(rank) + "init: " + weft_last_error();
  std::string err;
  for (weft_coll_t coll : {WEFT_COLL_ALL_REDUCE, WEFT_COLL_REDUCE, WEFT_COLL_REDUCE_SCATTER})
    for (int d = 0; d < WEFT_NUM_DTYPES && err.empty(); d++)
      for (size_t count : {0, 1, 7, 3000})
        for (int mode = 0; mode < 4 && err.empty(); mode++)
          err = one_call(comm, coll, (weft_dtype_t)d, count, mode & 1, mode & 2, rank, n);
  weft_comm_destroy(comm);
  return err;
}

class PremulSum : public ::testing::TestWithParam<int> {};

TEST_P(PremulSum, EveryReductionDtypeAndLayout) {
  EXPECT_EQ(mp_summary(mp_run(GetParam(), matrix_body, kTimeoutMs)), "");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, PremulSum, ::testing::Values(1, 2, 3));

// Integers multiply wrapping, as WEFT_PROD does: 3 * 200 on two ranks is 1200 mod 256 = 176.
TEST(PremulSumArithmetic, IntegersWrap) {
  auto results = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        if (weft_comm_init(&comm, n, rank, "127.0.0.1", port) != WEFT_SUCCESS)
          return R(rank) + weft_last_error();
        uint8_t in = 3, out = 0, f = 200;
        weft_call_t k = {};
        k.coll = WEFT_COLL_ALL_REDUCE;
        k.sendbuf = &in;
        k.recvbuf = &out;
        k.count = 1;
        k.dtype = WEFT_UINT8;
        k.op = WEFT_PREMUL_SUM;
        k.scalar = &f;
        weft_result_t res = weft_call(&k, comm, nullptr);
        weft_comm_destroy(comm);
        if (res != WEFT_SUCCESS) return R(rank) + weft_last_error();
        return out == 176 ? "" : R(rank) + "got " + std::to_string(out) + ", want 176";
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

// A missing factor, and the op outside all_reduce, reduce and reduce_scatter: premul_sum is not
// an element-wise op, so weft_all_reduce's callers and the kernels never see it.
TEST(PremulSumArguments, MissingFactorIsRefused) {
  auto results = mp_run(
      1,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        if (weft_comm_init(&comm, n, rank, "127.0.0.1", port) != WEFT_SUCCESS)
          return weft_last_error();
        float x = 1;
        weft_call_t k = {};
        k.coll = WEFT_COLL_ALL_REDUCE;
        k.sendbuf = &x;
        k.recvbuf = &x;
        k.count = 1;
        k.dtype = WEFT_FLOAT32;
        k.op = WEFT_PREMUL_SUM;
        std::string err;
        if (weft_call(&k, comm, nullptr) != WEFT_ERR_INVALID_ARGUMENT ||
            std::string(weft_last_error()).find("scalar is NULL") == std::string::npos)
          err = std::string("NULL factor: ") + weft_last_error();
        k.op = (weft_op_t)(WEFT_PREMUL_SUM + 1);
        if (err.empty() && weft_call(&k, comm, nullptr) != WEFT_ERR_INVALID_ARGUMENT)
          err = "op 6 was accepted";
        if (err.empty() && std::string(weft_op_name(WEFT_PREMUL_SUM)) != "premul_sum")
          err = std::string("name: ") + weft_op_name(WEFT_PREMUL_SUM);
        weft_comm_destroy(comm);
        return err;
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

}  // namespace
