// grid_test.cc -- every table row's simulated time stays within a stated band of its closed form.
//
// Over p = 2..16 and 1 KiB..64 MiB on one node; bands per algorithm, model and size regime.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

#include "tests/sim/sim_util.h"

extern "C" {
#include "tools/sim/report.h"
}

namespace {

// The two models the bands are measured on: the library's defaults (30 us, 1.5 GB/s, reduction
// 4 GB/s) and a fast network (5 us, 10 GB/s, reduction 5 GB/s); 64 KiB slices, window 4.
enum { kLibrary = 0, kFast = 1, kModels = 2 };
// Latency-bound sizes (at most one slice, 1..64 KiB) and bandwidth-bound ones (256 KiB..64 MiB)
// get separate bands: one band over both would be too wide to notice a wrong alpha or beta.
enum { kSmall = 0, kLarge = 1, kRegimes = 2 };

sim_model_t ModelAt(int i) {
  sim_model_t m;
  sim_model_defaults(&m);
  return i == kLibrary ? m : simtest::Model();
}

// lo * closed form <= sim <= hi * closed form + one call-description message (below).
struct Range {
  double lo, hi;
};

struct Band {
  weft_coll_t coll;
  weft_algo_t algo;
  Range r[kModels][kRegimes];
};

// Worst ratios measured, 1% wider (tools/sim/README.md explains them); rows that match their
// formula exactly (chain broadcast, barriers) tighter. Per row: {library {small, large}, fast
// {small, large}}.
// clang-format off
const Band kBands[] = {
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RING,
     {{{1.019, 1.011}, {1.002, 1.434}}, {{1.018, 1.011}, {0.793, 1.109}}}},
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_TREE,
     {{{0.494, 1.912}, {0.376, 1.223}}, {{0.401, 1.840}, {0.255, 0.780}}}},
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_DOUBLE_TREE,
     {{{0.525, 1.943}, {0.451, 1.552}}, {{0.445, 1.906}, {0.312, 1.003}}}},
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RECURSIVE_DOUBLING,
     {{{1.058, 1.010}, {0.890, 1.239}}, {{1.034, 1.011}, {0.566, 0.773}}}},
    {WEFT_COLL_ALL_REDUCE, WEFT_ALGO_RABENSEIFNER,
     {{{1.254, 5.026}, {1.142, 2.648}}, {{1.021, 5.010}, {0.766, 2.037}}}},
    {WEFT_COLL_BROADCAST, WEFT_ALGO_RING,
     {{{1.016, 1.0001}, {0.9999, 1.0001}}, {{1.018, 1.0001}, {0.9999, 1.0001}}}},
    {WEFT_COLL_BROADCAST, WEFT_ALGO_TREE,
     {{{0.874, 1.977}, {0.621, 1.269}}, {{0.905, 1.981}, {0.631, 1.289}}}},
    {WEFT_COLL_REDUCE, WEFT_ALGO_RING,
     {{{1.012, 1.011}, {0.810, 0.980}}, {{1.003, 1.011}, {0.526, 0.932}}}},
    {WEFT_COLL_REDUCE, WEFT_ALGO_TREE,
     {{{0.791, 1.961}, {0.486, 1.332}}, {{0.662, 1.910}, {0.293, 0.978}}}},
    {WEFT_COLL_ALL_GATHER, WEFT_ALGO_RING,
     {{{1.050, 1.011}, {1.016, 1.702}}, {{1.051, 1.011}, {1.018, 1.779}}}},
    {WEFT_COLL_ALL_GATHER, WEFT_ALGO_RECURSIVE_DOUBLING,
     {{{1.325, 5.818}, {1.301, 2.554}}, {{1.345, 5.822}, {1.323, 2.666}}}},
    {WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RING,
     {{{1.048, 1.011}, {1.012, 1.239}}, {{1.043, 1.011}, {0.633, 1.011}}}},
    {WEFT_COLL_REDUCE_SCATTER, WEFT_ALGO_RABENSEIFNER,
     {{{1.419, 7.600}, {1.169, 2.684}}, {{1.007, 7.516}, {0.661, 1.609}}}},
    {WEFT_COLL_BARRIER, WEFT_ALGO_RING,
     {{{0.9999, 0.9376}, {0.9999, 0.9376}}, {{0.9999, 0.9376}, {0.9999, 0.9376}}}},
    {WEFT_COLL_BARRIER, WEFT_ALGO_DISSEMINATION,
     {{{0.9999, 0.8001}, {0.9999, 0.8001}}, {{0.9999, 0.8001}, {0.9999, 0.8001}}}},
};
// clang-format on

const Band* BandFor(const algo_entry_t* e) {
  for (const Band& b : kBands)
    if (b.coll == e->coll && b.algo == e->algo) return &b;
  return nullptr;
}

// lo: the smallest sim / closed form. hi: the largest (sim - h) / closed form, where h is one
// call-description message (alpha + 40 beta): the executor sends it first on each ring stream;
// some cost functions count it (ring_barrier_cost), most do not, so the band forgives exactly
// that one message and nothing else.
struct Worst {
  double lo = 1e300, hi = -1e300;
  double raw_hi = -1e300;  // the largest sim / closed form, for the record
  std::string at_lo, at_hi;
};

// The simulation runs on `sim_m`, the closed form on `cost_m` (the same unless a test breaks
// one); w[regime].
void Ratios(const algo_entry_t* e, const sim_model_t& sim_m, const sim_model_t& cost_m, Worst* w) {
  cost_model_t cm = simrep_cost_model(&cost_m, 16);
  double h = sim_m.headers ? cost_m.alpha + SIM_HDR_BYTES * cost_m.beta : 0;
  for (int p = 2; p <= 16; p++) {
    for (size_t bytes = 1024; bytes <= (64u << 20); bytes *= 4) {
      simrep_shape_t sh = simrep_shape(e->coll, p, 4, bytes);
      double t = simtest::Time(sim_m, e->coll, e->algo, p, sh.sched_count);
      double model = e->cost(&cm, p, (double)sh.bytes);
      Worst& x = w[bytes <= 65536 ? kSmall : kLarge];
      std::string at = "p=" + std::to_string(p) + " bytes=" + std::to_string(sh.bytes);
      if (t / model < x.lo) x.lo = t / model, x.at_lo = at;
      if ((t - h) / model > x.hi) x.hi = (t - h) / model, x.at_hi = at;
      x.raw_hi = std::max(x.raw_hi, t / model);
    }
  }
}

std::string Name(const algo_entry_t* e) {
  return std::string(weft_coll_name(e->coll)) + " " + weft_algo_name(e->algo);
}

std::string Upper(const char* name) {
  std::string u = name;
  for (char& ch : u) ch = (char)std::toupper((unsigned char)ch);
  return u;
}

// A kBands line for what was measured, 1% wider on either side, to paste when a row is added or
// its schedule or cost function changes on purpose.
std::string Suggest(const algo_entry_t* e, Worst w[kModels][kRegimes]) {
  std::string out = "{WEFT_COLL_" + Upper(weft_coll_name(e->coll)) + ", WEFT_ALGO_" +
                    Upper(weft_algo_name(e->algo)) + ",\n     {";
  for (int k = 0; k < kModels; k++) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s{{%.3f, %.3f}, {%.3f, %.3f}}", k ? ", " : "",
                  std::floor(w[k][0].lo * 990) / 1000, std::ceil(w[k][0].hi * 1010) / 1000,
                  std::floor(w[k][1].lo * 990) / 1000, std::ceil(w[k][1].hi * 1010) / 1000);
    out += buf;
  }
  return out + "}},";
}

TEST(GridTest, EveryRowWithinItsBand) {
  for (int i = 0; i < algo_count(); i++) {
    const algo_entry_t* e = algo_at(i);
    if (!e->cost) continue;
    const Band* b = BandFor(e);
    Worst w[kModels][kRegimes];
    for (int k = 0; k < kModels; k++) {
      sim_model_t m = ModelAt(k);
      Ratios(e, m, m, w[k]);
      for (int g = 0; g < kRegimes; g++) {
        const Worst& x = w[k][g];
        std::printf(
            "%-30s %-7s %-5s sim/model >= %.4f (%s), (sim-hdr)/model <= %.4f (%s), "
            "sim/model <= %.4f\n",
            Name(e).c_str(), k == kLibrary ? "library" : "fast", g == kSmall ? "small" : "large",
            x.lo, x.at_lo.c_str(), x.hi, x.at_hi.c_str(), x.raw_hi);
        if (!b) continue;
        EXPECT_GE(x.lo, b->r[k][g].lo) << Name(e) << " at " << x.at_lo << ", model " << k;
        EXPECT_LE(x.hi, b->r[k][g].hi) << Name(e) << " at " << x.at_hi << ", model " << k;
      }
    }
    std::printf("  measured: %s\n", Suggest(e, w).c_str());
    if (!b) ADD_FAILURE() << Name(e) << " has no band in kBands; measured: " << Suggest(e, w);
  }
}

bool Outside(const Worst& w, const Range& r) { return w.lo < r.lo || w.hi > r.hi; }

// The bands are tight enough to catch a wrong simulator, the closed form unchanged: twice the
// beta leaves the large sizes' band, twice the alpha the small sizes' one, on both models.
TEST(GridTest, BandsCatchAWrongModel) {
  for (int i = 0; i < algo_count(); i++) {
    const algo_entry_t* e = algo_at(i);
    const Band* b = e->cost ? BandFor(e) : nullptr;
    if (!b) continue;  // EveryRowWithinItsBand reports a missing band
    for (int k = 0; k < kModels; k++) {
      sim_model_t m = ModelAt(k), twice_beta = m, twice_alpha = m;
      twice_beta.beta *= 2;
      twice_beta.inter_beta *= 2;
      twice_alpha.alpha *= 2;
      twice_alpha.inter_alpha *= 2;
      Worst wb[kRegimes], wa[kRegimes];
      Ratios(e, twice_beta, m, wb);
      Ratios(e, twice_alpha, m, wa);
      std::printf(
          "%-30s model %d: twice beta, large %.4f .. %.4f; twice alpha, small %.4f .. "
          "%.4f\n",
          Name(e).c_str(), k, wb[kLarge].lo, wb[kLarge].hi, wa[kSmall].lo, wa[kSmall].hi);
      if (e->coll != WEFT_COLL_BARRIER) {  // tokens barely have bytes
        EXPECT_TRUE(Outside(wb[kLarge], b->r[k][kLarge])) << Name(e) << ": twice beta";
      }
      EXPECT_TRUE(Outside(wa[kSmall], b->r[k][kSmall])) << Name(e) << ": twice alpha";
    }
  }
}

}  // namespace
