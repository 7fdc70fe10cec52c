// matrix_test.cc -- every NCCL collective x datatype x operator (PreMulSum included) x in place
// or not, through nccl/nccl.h on host buffers: 3 ranks as 3 processes, and as 3 threads of one
// process on the communicators of ncclCommInitAll (one thread per rank, as nccl-tests -t and
// XLA drive them).
//
// Inputs are small integers chosen so that every result and every partial result, in any order
// an algorithm combines them, is exact in every datatype (the 8-bit floats included): rank r
// holds v + r - 1 with v = 1 + j % 3, so sum = 3v, prod = (v-1)v(v+1), min = v-1, max = v+1,
// avg = v, and PreMulSum with factors 1, 2, 1 gives 4v.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl/nccl.h"
#include "tests/collectives_mp/typed.h"
#include "tests/harness/mp_harness.h"

namespace {

const int kRanks = 3;
const int kTimeoutMs = 120000;

// NCCL's datatype numbers are not weft's (fp16 is 6 in both, but float32 is 7 in NCCL and 8 in
// weft): written out here, independently of the front end's own table.
weft_dtype_t weft_of(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return WEFT_INT8;
    case ncclUint8:
      return WEFT_UINT8;
    case ncclInt32:
      return WEFT_INT32;
    case ncclUint32:
      return WEFT_UINT32;
    case ncclInt64:
      return WEFT_INT64;
    case ncclUint64:
      return WEFT_UINT64;
    case ncclFloat16:
      return WEFT_FLOAT16;
    case ncclFloat32:
      return WEFT_FLOAT32;
    case ncclFloat64:
      return WEFT_FLOAT64;
    case ncclBfloat16:
      return WEFT_BFLOAT16;
    case ncclFloat8e4m3:
      return WEFT_FLOAT8_E4M3;
    case ncclFloat8e5m2:
      return WEFT_FLOAT8_E5M2;
    default:
      return WEFT_NUM_DTYPES;
  }
}

enum Coll {
  kAllReduce,
  kReduce,
  kReduceScatter,
  kBroadcast,
  kBcast,
  kAllGather,
  kAlltoAll,
  kGather,
  kScatter,
  kNumColls
};
const char* const kCollNames[] = {"AllReduce", "Reduce",   "ReduceScatter", "Broadcast", "Bcast",
                                  "AllGather", "AlltoAll", "Gather",        "Scatter"};
bool reduces(int c) { return c == kAllReduce || c == kReduce || c == kReduceScatter; }

// ncclNumOps stands for PreMulSum here.
const int kPreMul = ncclNumOps;
const char* const kOpNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};

int64_t input(int r, size_t j) { return (int64_t)(1 + j % 3) + r - 1; }
int64_t factor(int r) { return r == 1 ? 2 : 1; }

int64_t reduced(int op, size_t j) {
  int64_t v = 1 + (int64_t)(j % 3);
  switch (op) {
    case ncclSum:
      return 3 * v;
    case ncclProd:
      return (v - 1) * v * (v + 1);
    case ncclMax:
      return v + 1;
    case ncclMin:
      return v - 1;
    case ncclAvg:
      return v;
    default:
      return 4 * v;  // PreMulSum
  }
}

const int kRoot = 1;

std::string run_one(ncclComm_t comm, int rank, int coll, ncclDataType_t t, int op, size_t count,
                    bool in_place) {
  weft_dtype_t d = weft_of(t);
  size_t es = weft_dtype_size(d), n = kRanks;
  std::vector<char> send(count * n * es + 8), recv(count * n * es + 8, 0x55), want(count * n * es);
  bool root = rank == kRoot;
  // The input this rank passes, and where.
  size_t in_elems = (coll == kReduceScatter || coll == kAlltoAll || (coll == kScatter && root))
                        ? count * n
                        : count;
  char* in = send.data();
  char* out = recv.data();
  if (in_place) {
    switch (coll) {
      case kAllGather:
        in = out + rank * count * es;
        break;
      case kGather:
        in = root ? out + rank * count * es : in;
        break;
      case kReduceScatter:
        out = in + rank * count * es;
        break;
      case kScatter:
        out = root ? in + rank * count * es : out;
        break;
      default:
        out = in;
        break;
    }
  }
  for (size_t j = 0; j < in_elems; j++) typed_store(d, in, j, input(rank, j));
  // What this rank must end with (and how many elements of it).
  size_t out_elems = count;
  for (size_t i = 0; i < count; i++) {
    switch (coll) {
      case kAllReduce:
      case kReduce:
        typed_store(d, want.data(), i, reduced(op, i));
        break;
      case kReduceScatter:
        typed_store(d, want.data(), i, reduced(op, rank * count + i));
        break;
      case kBroadcast:
      case kBcast:
        typed_store(d, want.data(), i, input(kRoot, i));
        break;
      case kScatter:
        typed_store(d, want.data(), i, input(kRoot, rank * count + i));
        break;
      default:
        out_elems = count * n;
        for (size_t r = 0; r < n; r++)
          typed_store(d, want.data(), r * count + i,
                      coll == kAlltoAll ? input((int)r, rank * count + i) : input((int)r, i));
    }
  }
  ncclRedOp_t nop = static_cast<ncclRedOp_t>(op);
  if (op == kPreMul) {
    std::vector<char> f(8);
    typed_store(d, f.data(), 0, factor(rank));
    ncclResult_t res = ncclRedOpCreatePreMulSum(&nop, f.data(), t, ncclScalarHostImmediate, comm);
    if (res != ncclSuccess) return std::string("PreMulSum: ") + ncclGetLastError(nullptr);
  }
  ncclResult_t res = ncclSuccess;
  switch (coll) {
    case kAllReduce:
      res = ncclAllReduce(in, out, count, t, nop, comm, nullptr);
      break;
    case kReduce:
      res = ncclReduce(in, out, count, t, nop, kRoot, comm, nullptr);
      break;
    case kReduceScatter:
      res = ncclReduceScatter(in, out, count, t, nop, comm, nullptr);
      break;
    case kBroadcast:
      res = ncclBroadcast(in, out, count, t, kRoot, comm, nullptr);
      break;
    case kBcast:
      if (root) memcpy(out, in, count * es);  // in place: the root's buffer is its input
      res = ncclBcast(out, count, t, kRoot, comm, nullptr);
      break;
    case kAllGather:
      res = ncclAllGather(in, out, count, t, comm, nullptr);
      break;
    case kAlltoAll:
      res = ncclAlltoAll(in, out, count, t, comm, nullptr);
      break;
    case kGather:
      res = ncclGather(in, out, count, t, kRoot, comm, nullptr);
      break;
    case kScatter:
      res = ncclScatter(in, out, count, t, kRoot, comm, nullptr);
      break;
  }
  if (op == kPreMul && ncclRedOpDestroy(nop, comm) != ncclSuccess)
    return std::string("ncclRedOpDestroy: ") + ncclGetLastError(nullptr);
  if (res != ncclSuccess)
    return std::string(ncclGetErrorString(res)) + ": " + ncclGetLastError(nullptr);
  if ((coll == kReduce || coll == kGather) && !root) return "";
  return typed_compare(d, out, want.data(), out_elems);
}

std::string run_matrix(ncclComm_t comm, int rank) {
  for (int coll = 0; coll < kNumColls; coll++)
    for (int t = 0; t < ncclNumTypes; t++)
      for (int op = 0; op <= (reduces(coll) ? kPreMul : 0); op++)
        for (size_t count : {1, 5, 1000})
          for (bool in_place : {false, true}) {
            if (in_place && coll == kAlltoAll) continue;  // NCCL has no in-place all-to-all
            if (in_place && coll == kBcast) continue;     // it is in place already
            std::string err = run_one(comm, rank, coll, (ncclDataType_t)t, op, count, in_place);
            if (!err.empty())
              return "rank " + std::to_string(rank) + ": " + kCollNames[coll] + " datatype " +
                     std::to_string(t) + (reduces(coll) ? std::string(" ") + kOpNames[op] : "") +
                     " count " + std::to_string(count) + (in_place ? " in place" : "") + ": " + err;
          }
  return "";
}

TEST(NcclMatrix, ThreeProcesses) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  auto results = mp_run(
      kRanks,
      [&](int rank, int n, int) -> std::string {
        ncclComm_t comm;
        if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess)
          return std::string("init: ") + ncclGetLastError(nullptr);
        std::string err = run_matrix(comm, rank);
        ncclCommDestroy(comm);
        return err;
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

TEST(NcclMatrix, ThreeThreadsOfOneProcess) {
  auto results = mp_run(
      1,
      [&](int, int, int) -> std::string {
        ncclComm_t comms[kRanks];
        if (ncclCommInitAll(comms, kRanks, nullptr) != ncclSuccess)
          return std::string("ncclCommInitAll: ") + ncclGetLastError(nullptr);
        std::string errs[kRanks];
        std::vector<std::thread> threads;
        for (int r = 0; r < kRanks; r++)
          threads.emplace_back([&, r] { errs[r] = run_matrix(comms[r], r); });
        for (auto& th : threads) th.join();
        std::string all;
        for (int r = 0; r < kRanks; r++) {
          ncclCommDestroy(comms[r]);
          all += errs[r].empty() ? "" : errs[r] + "\n";
        }
        return all;
      },
      kTimeoutMs);
  EXPECT_EQ(mp_summary(results), "");
}

}  // namespace
