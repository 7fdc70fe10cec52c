// run_mp_test.cc -- imported MSCCL programs run across real processes on loopback: all-reduce
// (a ring on several channels; all-pairs with scratch and local reductions) and all-gather
// (direct, out of place; a program whose channels need the reference execution's order) at 2-8
// ranks over tcp and shm, host buffers and the emulated device engine, checked exactly as the
// built-in algorithms are (rank_body.h); and the errors of loading and calling.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "tests/device_mp/device_runner.h"
#include "tests/harness/mp_harness.h"
#include "tests/msccl/programs.h"

namespace {

using msccl_test::Program;

struct Case {
  Program p;
  weft_coll_t coll;
  std::vector<size_t> counts;  // each a multiple of the program's chunk unit
};

std::vector<Case> Cases(int n) {
  std::vector<Case> v;
  v.push_back({msccl_test::ring_all_reduce(n, 2),
               WEFT_COLL_ALL_REDUCE,
               {(size_t)(2 * n), (size_t)(2 * n) * 37, (size_t)(2 * n) * 20000}});
  v.push_back({msccl_test::all_pairs_all_reduce(n, 2),
               WEFT_COLL_ALL_REDUCE,
               {(size_t)(2 * n), (size_t)(2 * n) * 513}});
  v.push_back({msccl_test::direct_all_gather(n, 3), WEFT_COLL_ALL_GATHER, {3, 3 * 1001}});
  if (n == 2)
    v.push_back({msccl_test::cross_channel_all_gather(), WEFT_COLL_ALL_GATHER, {2, 2 * 4099}});
  return v;
}

// Each case's program, loaded on every rank, then its collective checked in place and not.
std::string RunCases(weft_comm_t* comm, const std::vector<Case>& cases,
                     const std::vector<std::string>& paths, const CallRunner* runner,
                     const std::vector<weft_dtype_t>& dtypes) {
  int rank;
  weft_comm_rank(comm, &rank);
  for (size_t i = 0; i < cases.size(); i++) {
    if (weft_comm_load_algo(comm, paths[i].c_str()) != WEFT_SUCCESS)
      return "rank " + std::to_string(rank) + ": load " + cases[i].p.name + ": " +
             weft_last_error();
    for (size_t count : cases[i].counts)
      for (weft_dtype_t d : dtypes)
        for (bool in_place : {false, true}) {
          weft_op_t op =
              cases[i].coll == WEFT_COLL_ALL_REDUCE && d == WEFT_INT32 ? WEFT_MAX : WEFT_SUM;
          std::string err =
              check_call(comm, cases[i].coll, WEFT_ALGO_AUTO, d, op, count, in_place, 0, runner);
          if (!err.empty()) return cases[i].p.name + ": " + err;
        }
  }
  return "";
}

std::vector<std::string> WritePrograms(const std::vector<Case>& cases, const std::string& tag) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < cases.size(); i++)
    paths.push_back(msccl_test::write_temp(cases[i].p.xml(), tag + std::to_string(i)));
  return paths;
}

struct Param {
  int n;
  const char* transport;
};

class MscclRun : public ::testing::TestWithParam<Param> {};

TEST_P(MscclRun, HostBuffers) {
  Param prm = GetParam();
  std::vector<Case> cases = Cases(prm.n);
  std::vector<std::string> paths = WritePrograms(cases, std::string("host_") + prm.transport);
  auto results = mp_run(
      prm.n,
      [&](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", prm.transport, 1);
        setenv("WEFT_TIMEOUT_MS", "20000", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        err = RunCases(comm, cases, paths, nullptr, {WEFT_FLOAT32, WEFT_INT32, WEFT_BFLOAT16});
        weft_comm_destroy(comm);
        return err;
      },
      240000);
  EXPECT_EQ(mp_summary(results), "");
}

TEST_P(MscclRun, EmulatedDeviceBuffers) {
  Param prm = GetParam();
  std::vector<Case> cases = Cases(prm.n);
  for (auto& c : cases) c.counts.resize(2);
  std::vector<std::string> paths = WritePrograms(cases, std::string("dev_") + prm.transport);
  auto results = mp_run(
      prm.n,
      [&](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", prm.transport, 1);
        setenv("WEFT_TIMEOUT_MS", "20000", 1);
        setenv("WEFT_DEVICE_SLICE_BYTES", "65536", 1);
        Device dev;
        weft_comm_t* comm;
        std::string err = dev.open_and_join(rank, n, port, &comm);
        if (!err.empty()) return err;
        CallRunner runner = dev.runner();
        err = RunCases(comm, cases, paths, &runner, {WEFT_FLOAT32});
        weft_comm_destroy(comm);
        return err;
      },
      240000);
  EXPECT_EQ(mp_summary(results), "");
}

INSTANTIATE_TEST_SUITE_P(Worlds, MscclRun,
                         ::testing::Values(Param{2, "tcp"}, Param{3, "shm"}, Param{4, "tcp"},
                                           Param{5, "shm"}, Param{8, "shm"}, Param{8, "tcp"}),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return std::to_string(i.param.n) + "_" + i.param.transport;
                         });

// Two of RCCL's bundled all-to-all programs (tests/msccl/data/README.md), 8 ranks over shm and
// tcp, every element checked.
TEST(MscclRunReal, RcclAllToAll) {
  for (const char* transport : {"shm", "tcp"}) {
    auto results = mp_run(
        8,
        [&](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", transport, 1);
          setenv("WEFT_TIMEOUT_MS", "20000", 1);
          weft_comm_t* comm;
          std::string err = join(rank, n, port, &comm);
          if (!err.empty()) return err;
          for (const char* f : {"tests/msccl/data/alltoall-8n-0-9kb.xml",
                                "tests/msccl/data/alltoall-8n-9kb-190kb.xml"}) {
            if (weft_comm_load_algo(comm, f) != WEFT_SUCCESS) return weft_last_error();
            for (size_t count : {2, 2 * 3001})
              for (weft_dtype_t d : {WEFT_FLOAT32, WEFT_UINT8}) {
                err = check_call(comm, WEFT_COLL_ALL_TO_ALL, WEFT_ALGO_AUTO, d, WEFT_SUM, count,
                                 false, 0);
                if (!err.empty()) return std::string(f) + ": " + err;
              }
          }
          weft_comm_destroy(comm);
          return "";
        },
        120000);
    EXPECT_EQ(mp_summary(results), "") << transport;
  }
}

// Chunks larger than a link holds (shm: 32 slots of 64 KiB): a ring step that waited for its own
// send to be taken before receiving would deadlock here, every rank waiting on the next.
TEST(MscclRunLarge, ChunksLargerThanTheLinkBuffers) {
  std::string ring = msccl_test::write_temp(msccl_test::ring_all_reduce(3, 1).xml(), "large");
  auto results = mp_run(
      3,
      [&](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "shm", 1);
        setenv("WEFT_TIMEOUT_MS", "20000", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (weft_comm_load_algo(comm, ring.c_str()) != WEFT_SUCCESS) return weft_last_error();
        err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, WEFT_FLOAT32, WEFT_SUM,
                         3 * 700000, false, 0);
        weft_comm_destroy(comm);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
}

// The program is what runs: one that only reduce-scatters leaves the other chunks wrong, so the
// all-reduce check fails; a call that names its algorithm, other collectives and counts that do
// not cut into its chunks do not use it, nor do calls after it was unloaded.
TEST(MscclRunErrors, TheLoadedProgramIsWhatRuns) {
  std::string partial =
      msccl_test::write_temp(msccl_test::all_pairs_all_reduce(3, 1, false).xml(), "partial");
  auto results = mp_run(
      3,
      [&](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (weft_comm_load_algo(comm, partial.c_str()) != WEFT_SUCCESS) return weft_last_error();
        err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, WEFT_FLOAT32, WEFT_SUM, 30,
                         false, 0);
        if (err.empty()) return "the reduce-only program gave a correct all-reduce";
        err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING, WEFT_FLOAT32, WEFT_SUM, 30,
                         false, 0);
        if (!err.empty()) return "a call's own algorithm: " + err;
        err = check_call(comm, WEFT_COLL_ALL_GATHER, WEFT_ALGO_AUTO, WEFT_FLOAT32, WEFT_SUM, 30,
                         false, 0);
        if (!err.empty()) return "another collective: " + err;
        // A count that does not cut into 3 chunks takes the normal choice (and is right).
        err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, WEFT_FLOAT32, WEFT_SUM, 31,
                         false, 0);
        if (!err.empty()) return "count 31: " + err;
        // Unloading restores the normal choice.
        if (weft_comm_load_algo(comm, nullptr) != WEFT_SUCCESS) return weft_last_error();
        err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, WEFT_FLOAT32, WEFT_SUM, 30,
                         false, 0);
        weft_comm_destroy(comm);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
}

// Loading errors fail every rank alike and leave the communicator as it was: a file for another
// rank count (naming both), ranks loading different programs, a rank that cannot read its file.
TEST(MscclRunErrors, LoadErrorsFailEveryRank) {
  std::string three = msccl_test::write_temp(msccl_test::ring_all_reduce(3, 1).xml(), "three");
  std::string two_a = msccl_test::write_temp(msccl_test::ring_all_reduce(2, 1).xml(), "two_a");
  std::string two_b = msccl_test::write_temp(msccl_test::ring_all_reduce(2, 2).xml(), "two_b");
  auto results = mp_run(
      2,
      [&](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        struct {
          std::string path;
          weft_result_t code;
          std::string expect;
        } cases[] = {
            {three, WEFT_ERR_INVALID_ARGUMENT,
             "program for 3 ranks (ngpus) but the communicator has 2"},
            {rank == 0 ? two_a : two_b, WEFT_ERR_MISMATCH, "every rank must load the same program"},
            {rank == 0 ? two_a : "/nonexistent/x.xml", WEFT_ERR_INVALID_ARGUMENT,
             rank == 0 ? "rank 1 could not load" : "cannot open"},
        };
        for (auto& c : cases) {
          weft_result_t r = weft_comm_load_algo(comm, c.path.c_str());
          std::string msg = weft_last_error();
          if (r != c.code || msg.find(c.expect) == std::string::npos)
            return "rank " + std::to_string(rank) + " loading " + c.path + ": got " +
                   weft_result_string(r) + " " + msg;
        }
        err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, WEFT_FLOAT32, WEFT_SUM, 7,
                         true, 0);
        weft_comm_destroy(comm);
        return err;
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
}

// WEFT_ALGO_FILE: read at init; a file for another size fails init, naming both sizes.
TEST(MscclRunErrors, AlgoFileKnob) {
  std::string four = msccl_test::write_temp(msccl_test::ring_all_reduce(4, 2).xml(), "four");
  std::string partial =
      msccl_test::write_temp(msccl_test::all_pairs_all_reduce(2, 1, false).xml(), "partial2");
  auto results = mp_run(
      2,
      [&](int rank, int n, int port) -> std::string {
        setenv("WEFT_ALGO_FILE", four.c_str(), 1);
        weft_comm_t* comm = nullptr;
        std::string err = join(rank, n, port, &comm);
        if (err.find("program for 4 ranks (ngpus) but the communicator has 2") == std::string::npos)
          return "init with a 4-rank file: " + (err.empty() ? std::string("succeeded") : err);
        if (comm) weft_comm_destroy(comm);
        setenv("WEFT_ALGO_FILE", partial.c_str(), 1);
        err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        err = check_call(comm, WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, WEFT_FLOAT32, WEFT_SUM, 20,
                         false, 0);
        weft_comm_destroy(comm);
        return err.empty() ? "WEFT_ALGO_FILE's reduce-only program was not run" : "";
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
}

}  // namespace
