// cost_choice_test.cc -- the automatic algorithm choice is a pure function of the committed
// per-transport constants (collectives/cost_constants.c) and the transport mix: two
// communicators in one job, and two jobs, choose alike on every rank for a grid of (collective,
// size); the choice is the one the constants give; and WEFT_TUNE_FILE changes it where the model
// says it should, by a single constant or by a whole model (weft-bench --tune's form).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "include/weft.h"
#include "tests/harness/mp_harness.h"

extern "C" {
#include "collectives/algo_select.h"
#include "collectives/cost_constants.h"
}

namespace {

const int kRanks = 4;
const double kSlice = 65536;  // WEFT_SLICE_BYTES, set below for every rank
const weft_coll_t kColls[] = {WEFT_COLL_ALL_REDUCE, WEFT_COLL_BROADCAST,      WEFT_COLL_REDUCE,
                              WEFT_COLL_ALL_GATHER, WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_BARRIER,
                              WEFT_COLL_GATHER,     WEFT_COLL_SCATTER,        WEFT_COLL_ALL_TO_ALL};
// float32 elements per rank: 4 B .. 16 MiB in factors of 4.
std::vector<size_t> Counts() {
  std::vector<size_t> v;
  for (size_t n = 1; n <= (4u << 20); n *= 4) v.push_back(n);
  return v;
}

std::string TmpDir() { return getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp"; }

std::string Fail(int rank, const std::string& what, weft_result_t r) {
  return "rank " + std::to_string(rank) + ": " + what + ": " + weft_result_string(r) + ": " +
         weft_last_error();
}

// One line per (collective, count): "all_reduce 1024 ring".
std::string Choices(weft_comm_t* comm, int rank, std::string* err) {
  size_t max = Counts().back() * kRanks;
  std::vector<float> send(max), recv(max);
  std::ostringstream out;
  for (weft_coll_t coll : kColls)
    for (size_t n : Counts()) {
      weft_call_t k = {};
      k.coll = coll;
      k.sendbuf = send.data();
      k.recvbuf = recv.data();
      k.count = coll == WEFT_COLL_BARRIER ? 0 : n;
      k.dtype = WEFT_FLOAT32;
      k.op = WEFT_SUM;
      k.root = coll == WEFT_COLL_BROADCAST || coll == WEFT_COLL_REDUCE ||
                       coll == WEFT_COLL_GATHER || coll == WEFT_COLL_SCATTER
                   ? 0
                   : -1;
      k.algo = WEFT_ALGO_AUTO;
      weft_algo_t algo;
      double seconds;
      weft_result_t r = weft_call_estimate(&k, comm, &algo, &seconds);
      if (r != WEFT_SUCCESS) {
        *err = Fail(rank, std::string("estimate ") + weft_coll_name(coll), r);
        return "";
      }
      out << weft_coll_name(coll) << " " << n << " " << weft_algo_name(algo) << "\n";
    }
  return out.str();
}

// Runs one job of kRanks processes with `transport` (and `tune`, the WEFT_TUNE_FILE, unless
// empty): each rank initializes two communicators one after the other and writes both grids of
// choices to files; returns every rank's two grids, rank-major ("" entries if a rank failed).
std::vector<std::string> RunJob(const std::string& transport, const std::string& tune,
                                const std::string& tag) {
  int port2 = mp_free_port();
  auto results = mp_run(
      kRanks,
      [&](int rank, int nranks, int port) -> std::string {
        setenv("WEFT_TRANSPORT", transport.c_str(), 1);
        setenv("WEFT_SLICE_BYTES", "65536", 1);
        setenv("WEFT_TIMEOUT_MS", "30000", 1);
        unsetenv("WEFT_ALGO");
        unsetenv("WEFT_HIERARCHY");
        if (tune.empty())
          unsetenv("WEFT_TUNE_FILE");
        else
          setenv("WEFT_TUNE_FILE", tune.c_str(), 1);
        int ports[2] = {port, port2};
        for (int i = 0; i < 2; i++) {
          weft_comm_t* comm = nullptr;
          weft_result_t r = weft_comm_init(&comm, nranks, rank, "127.0.0.1", ports[i]);
          if (r != WEFT_SUCCESS) return Fail(rank, "init " + std::to_string(i), r);
          std::string err;
          std::string grid = Choices(comm, rank, &err);
          weft_comm_destroy(comm);
          if (!err.empty()) return err;
          std::ofstream f(TmpDir() + "/" + tag + "_" + std::to_string(rank) + "_" +
                          std::to_string(i));
          f << grid;
          if (!f) return "rank " + std::to_string(rank) + ": cannot write its choices";
        }
        return "";
      },
      120000);
  EXPECT_EQ(mp_summary(results), "");
  std::vector<std::string> grids;
  for (int rank = 0; rank < kRanks; rank++)
    for (int i = 0; i < 2; i++) {
      std::ifstream f(TmpDir() + "/" + tag + "_" + std::to_string(rank) + "_" + std::to_string(i));
      std::stringstream s;
      s << f.rdbuf();
      grids.push_back(s.str());
    }
  return grids;
}

// The choice the committed model gives (`table` with one host's `transport` links, and the wake
// term where the ranks outnumber this host's CPUs), for the
// collectives whose priced size is count * 4 on every path: all_reduce and broadcast.
// The model of `nranks` ranks on this host that all use `transport`: the job's ranks share this
// host's CPUs where it has fewer, and then pay a wake per dependent round (comm/cost_model.c).
cost_model_t Model(const cost_table_t& table, cost_transport_t transport, int nranks) {
  cost_links_t links = {};
  links.used[transport][COST_INTRA] = 1;
  cost_model_t m = cost_model_for(&table, &links, kSlice);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  m.wake = cpus > 0 && nranks > cpus ? COST_WAKE : 0;
  return m;
}

std::string Expected(const cost_table_t& table, cost_transport_t transport) {
  cost_model_t m = Model(table, transport, kRanks);
  algo_policy_t none;
  EXPECT_EQ(algo_policy_parse("", &none), WEFT_SUCCESS);
  std::ostringstream out;
  for (weft_coll_t coll : {WEFT_COLL_ALL_REDUCE, WEFT_COLL_BROADCAST})
    for (size_t n : Counts()) {
      const algo_entry_t* e = nullptr;
      EXPECT_EQ(algo_choose(coll, WEFT_ALGO_AUTO, &none, &m, kRanks, 4.0 * (double)n, nullptr, &e),
                WEFT_SUCCESS);
      out << weft_coll_name(coll) << " " << n << " " << (e ? weft_algo_name(e->algo) : "?") << "\n";
    }
  return out.str();
}

// The all_reduce and broadcast lines of a grid (they come first, in Expected's order).
std::string Head(const std::string& grid) {
  std::istringstream in(grid);
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind("all_reduce ", 0) == 0 || line.rfind("broadcast ", 0) == 0) out += line + "\n";
  return out;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = TmpDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CostChoiceTest, SameChoicesOnEveryRankCommunicatorAndJobFromTheConstants) {
  for (const char* transport : {"shm", "tcp"}) {
    SCOPED_TRACE(transport);
    std::vector<std::string> a = RunJob(transport, "", std::string("det_a_") + transport);
    std::vector<std::string> b = RunJob(transport, "", std::string("det_b_") + transport);
    ASSERT_FALSE(a[0].empty());
    for (size_t i = 0; i < a.size(); i++) {
      EXPECT_EQ(a[i], a[0]) << "job 1, rank " << i / 2 << ", communicator " << i % 2;
      EXPECT_EQ(b[i], a[0]) << "job 2, rank " << i / 2 << ", communicator " << i % 2;
    }
    EXPECT_EQ(Head(a[0]), Expected(*cost_constants(), cost_transport_from_name(transport)));
  }
}

// Finds a size where replacing shm's one-host alpha by `alpha` changes the model's all_reduce
// or broadcast choice, then checks that the library follows the file.
TEST(CostChoiceTest, TuneFileConstantChangesTheChoiceWhereTheModelSays) {
  cost_table_t changed = *cost_constants();
  const double alpha = 1e-3;  // a slow message: fewer steps win up to larger sizes
  changed.link[COST_SHM][COST_INTRA].alpha = alpha;
  std::string before = Expected(*cost_constants(), COST_SHM);
  std::string after = Expected(changed, COST_SHM);
  ASSERT_NE(before, after) << "the model should change some choice with alpha " << alpha;
  char line[64];
  snprintf(line, sizeof line, "shm.intra.alpha %.17g\n", alpha);
  std::string tune = WriteFile("tune_shm_alpha.txt", line);
  std::vector<std::string> got = RunJob("shm", tune, "tuned_const");
  for (size_t i = 0; i < got.size(); i++) EXPECT_EQ(Head(got[i]), after) << "grid " << i;
}

// The whole-model form that weft-bench --tune writes still replaces the host model.
TEST(CostChoiceTest, TuneFileModelReplacesTheConstants) {
  cost_table_t as_file = {};
  for (int t = 0; t < COST_NUM_TRANSPORTS; t++)
    as_file.link[t][COST_INTRA] = as_file.link[t][COST_INTER] = {2e-3, 1e-9, 1e-10};
  std::string want = Expected(as_file, COST_SHM);
  ASSERT_NE(want, Expected(*cost_constants(), COST_SHM));
  std::string tune = WriteFile("tune_model.txt", "alpha 2e-3\nbeta 1e-9\ngamma 1e-10\n");
  std::vector<std::string> got = RunJob("shm", tune, "tuned_model");
  for (size_t i = 0; i < got.size(); i++) EXPECT_EQ(Head(got[i]), want) << "grid " << i;
}

// weft_call_estimate reports the price the choice compared: with more ranks than this host has
// CPUs, the entry's closed form plus the wake of each dependent round, which at 4 bytes is most
// of a one-round all-reduce's advantage over recursive doubling.
TEST(CostChoiceTest, EstimateIncludesTheWakeOfRanksSharingCpus) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const int nranks = cpus > 0 && cpus < 32 ? (int)cpus + 1 : 4;
  auto results = mp_run(
      nranks,
      [&](int rank, int nranks, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "shm", 1);
        setenv("WEFT_SLICE_BYTES", "65536", 1);
        setenv("WEFT_TIMEOUT_MS", "30000", 1);
        unsetenv("WEFT_ALGO");
        unsetenv("WEFT_TUNE_FILE");
        weft_comm_t* comm = nullptr;
        weft_result_t r = weft_comm_init(&comm, nranks, rank, "127.0.0.1", port);
        if (r != WEFT_SUCCESS) return Fail(rank, "init", r);
        cost_model_t m = Model(*cost_constants(), COST_SHM, nranks);
        std::vector<float> send(1 << 16), recv(1 << 16);
        std::string err;
        for (size_t n : {1, 256, 1 << 16}) {
          weft_call_t k = {};
          k.coll = WEFT_COLL_ALL_REDUCE;
          k.sendbuf = send.data();
          k.recvbuf = recv.data();
          k.count = n;
          k.dtype = WEFT_FLOAT32;
          k.op = WEFT_SUM;
          k.root = -1;
          k.algo = WEFT_ALGO_AUTO;
          weft_algo_t algo;
          double seconds = 0;
          r = weft_call_estimate(&k, comm, &algo, &seconds);
          if (r != WEFT_SUCCESS) {
            err = Fail(rank, "estimate", r);
            break;
          }
          const algo_entry_t* e = algo_lookup(WEFT_COLL_ALL_REDUCE, algo);
          double bytes = 4.0 * (double)n;
          double want = e ? algo_predicted(e, &m, nranks, bytes) : -1;
          if (seconds != want) {
            char line[256];
            snprintf(line, sizeof line,
                     "rank %d: %zu floats by %s: estimated %.9g s, the choice "
                     "priced %.9g s (closed form alone %.9g s)",
                     rank, n, weft_algo_name(algo), seconds, want,
                     e ? e->cost(&m, nranks, bytes) : -1.0);
            err = line;
            break;
          }
          if (n == 1 && m.wake > 0 && !(seconds > e->cost(&m, nranks, bytes))) {
            err = "rank " + std::to_string(rank) + ": the model has no wake to check";
            break;
          }
        }
        weft_comm_destroy(comm);
        return err;
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

// A constant replaced on one rank only would make that rank choose alone: init fails on every
// rank, naming the setting.
TEST(CostChoiceTest, ConstantReplacedOnOneRankOnlyFailsInit) {
  std::string tune = WriteFile("tune_one_rank.txt", "shm.intra.alpha 1e-3\n");
  auto results = mp_run(
      2,
      [&](int rank, int nranks, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "shm", 1);
        setenv("WEFT_TIMEOUT_MS", "30000", 1);
        if (rank == 0)
          setenv("WEFT_TUNE_FILE", tune.c_str(), 1);
        else
          unsetenv("WEFT_TUNE_FILE");
        weft_comm_t* comm = nullptr;
        weft_result_t r = weft_comm_init(&comm, nranks, rank, "127.0.0.1", port);
        if (r == WEFT_SUCCESS) {
          weft_comm_destroy(comm);
          return "rank " + std::to_string(rank) + ": init succeeded";
        }
        std::string msg = weft_last_error();
        if (r != WEFT_ERR_MISMATCH ||
            msg.find("the cost model from WEFT_TUNE_FILE differs between ranks: \"constants "
                     "replaced, hash 0x") == std::string::npos ||
            msg.find("\"none (the committed constants)\" on rank 1") == std::string::npos)
          return Fail(rank, "init", r);
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(results), "");
}

}  // namespace
