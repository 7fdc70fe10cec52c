// tune_test.cc -- --tune's fit on synthetic measurements, and its file read back by the library.
#include "tools/bench/tune.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// comm.h is C without an extern "C" guard of its own.
extern "C" {
#include "comm/comm.h"
}

namespace {

const std::vector<double> kShiftBytes = {8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20};
const std::vector<double> kReduceBytes = {1 << 20, 4 << 20, 16 << 20};

struct Synthetic {
  std::vector<double> shift_s, reduce_s;
};

// Times the model itself predicts, each scaled by noise[i % noise.size()].
Synthetic Make(const bench_tune_t &t, int p, const std::vector<double> &noise = {1.0}) {
  Synthetic s;
  size_t k = 0;
  for (double m : kShiftBytes)
    s.shift_s.push_back((t.alpha + m * t.beta) * noise[k++ % noise.size()]);
  for (double n : kReduceBytes) {
    double model =
        2.0 * (p - 1) * t.alpha + 2.0 * (p - 1) / p * n * t.beta + (p - 1.0) / p * n * t.gamma;
    s.reduce_s.push_back(model * noise[k++ % noise.size()]);
  }
  return s;
}

int Fit(const Synthetic &s, int p, bench_tune_t *out, int *gamma_fitted) {
  bench_samples_t shifts = {kShiftBytes.data(), s.shift_s.data(), kShiftBytes.size()};
  bench_samples_t reduces = {kReduceBytes.data(), s.reduce_s.data(), kReduceBytes.size()};
  return bench_tune_fit(&shifts, &reduces, p, out, gamma_fitted);
}

TEST(Tune, LineFitIsExactOnALine) {
  double x[] = {1, 2, 3, 10}, y[] = {5, 7, 9, 23}, a, b;
  ASSERT_EQ(bench_fit_line(x, y, 4, &a, &b), 0);
  EXPECT_NEAR(a, 3.0, 1e-12);
  EXPECT_NEAR(b, 2.0, 1e-12);
}

TEST(Tune, LineFitRejectsWhatCannotDetermineALine) {
  double x[] = {4, 4, 4}, y[] = {1, 2, 3}, a, b;
  EXPECT_EQ(bench_fit_line(x, y, 3, &a, &b), -1);  // one distinct size
  EXPECT_EQ(bench_fit_line(x, y, 1, &a, &b), -1);
  double x2[] = {1, 2}, y2[] = {1, 0};
  EXPECT_EQ(bench_fit_line(x2, y2, 2, &a, &b), -1);  // a time of 0
}

// Relative weights: a 1% error on the largest size must not swamp a small alpha.
TEST(Tune, LineFitWeighsRelativeErrors) {
  std::vector<double> y;
  for (double m : kShiftBytes) y.push_back(20e-6 + m * 1e-9);
  y.back() *= 1.01;
  double a, b;
  ASSERT_EQ(bench_fit_line(kShiftBytes.data(), y.data(), y.size(), &a, &b), 0);
  EXPECT_NEAR(a, 20e-6, 0.5e-6);
  EXPECT_NEAR(b, 1e-9, 0.02e-9);
}

TEST(Tune, RecoversExactModel) {
  for (int p : {2, 3, 4, 8}) {
    bench_tune_t truth = {25e-6, 1 / 1.2e9, 1 / 3e9}, got;
    int gamma_fitted = 0;
    ASSERT_EQ(Fit(Make(truth, p), p, &got, &gamma_fitted), 0);
    EXPECT_TRUE(gamma_fitted);
    EXPECT_NEAR(got.alpha / truth.alpha, 1.0, 1e-9) << p;
    EXPECT_NEAR(got.beta / truth.beta, 1.0, 1e-9) << p;
    EXPECT_NEAR(got.gamma / truth.gamma, 1.0, 1e-9) << p;
  }
}

TEST(Tune, NoisyDataStaysClose) {
  // gamma is what is left of a noisy total: it stays close only where reducing is a fair share
  // of the all-reduce's time (here about a fifth).
  bench_tune_t truth = {40e-6, 1 / 0.8e9, 1 / 2e9}, got;
  int gamma_fitted = 0;
  std::vector<double> noise = {1.03, 0.98, 1.01, 0.97, 1.02};
  ASSERT_EQ(Fit(Make(truth, 4, noise), 4, &got, &gamma_fitted), 0);
  EXPECT_NEAR(got.alpha / truth.alpha, 1.0, 0.1);
  EXPECT_NEAR(got.beta / truth.beta, 1.0, 0.05);
  EXPECT_TRUE(gamma_fitted);
  EXPECT_NEAR(got.gamma / truth.gamma, 1.0, 0.3);  // a difference of two noisy terms
}

// No latency and a little noise give a negative intercept: alpha is clamped to 0 and beta refitted
// through the origin.
TEST(Tune, NegativeAlphaIsClamped) {
  bench_tune_t truth = {0, 1e-9, 1e-10}, got;
  Synthetic s = Make(truth, 2);
  s.shift_s[0] *= 0.5;
  s.shift_s[1] *= 0.5;
  int gamma_fitted = 0;
  ASSERT_EQ(Fit(s, 2, &got, &gamma_fitted), 0);
  EXPECT_EQ(got.alpha, 0.0);
  EXPECT_GT(got.beta, 0.4e-9);
  EXPECT_LT(got.beta, 1.1e-9);
}

// An all-reduce no slower than its communication part leaves no gamma: reported, not invented.
TEST(Tune, GammaNotFittedWhenResidualIsNegative) {
  bench_tune_t truth = {10e-6, 1e-9, 0}, got;
  Synthetic s = Make(truth, 4);
  for (double &t : s.reduce_s) t *= 0.9;
  int gamma_fitted = 1;
  ASSERT_EQ(Fit(s, 4, &got, &gamma_fitted), 0);
  EXPECT_FALSE(gamma_fitted);
  EXPECT_EQ(got.gamma, 0.0);
  EXPECT_NEAR(got.beta, 1e-9, 1e-15);
}

TEST(Tune, ShiftsThatGiveNoLineFail) {
  std::vector<double> bytes = {4096, 4096}, secs = {1e-5, 2e-5};
  bench_samples_t shifts = {bytes.data(), secs.data(), 2}, none = {nullptr, nullptr, 0};
  bench_tune_t got;
  int gamma_fitted;
  EXPECT_EQ(bench_tune_fit(&shifts, &none, 4, &got, &gamma_fitted), -1);
}

TEST(Tune, FileFormat) {
  bench_tune_t t = {3e-05, 1 / 1.5e9, 2.5e-10};
  char buf[256];
  bench_tune_format(buf, sizeof buf, &t);
  EXPECT_STREQ(buf, "alpha 3e-05\nbeta 6.66666667e-10\ngamma 2.5e-10\n");
}

// What --tune writes, the library reads back (comm/cost_model.c, WEFT_TUNE_FILE) to 9 digits.
TEST(Tune, LibraryReadsTheFile) {
  bench_tune_t t = {31.25e-6, 1 / 1.37e9, 1 / 4.1e9};
  char buf[256];
  bench_tune_format(buf, sizeof buf, &t);
  const char *dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/weft_tune_test.txt";
  FILE *f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(buf, f);
  std::fclose(f);
  cost_model_t m = {0, 0, 0, 65536};
  ASSERT_EQ(cost_model_load(path.c_str(), &m), WEFT_SUCCESS) << weft_last_error();
  EXPECT_NEAR(m.alpha / t.alpha, 1.0, 1e-8);
  EXPECT_NEAR(m.beta / t.beta, 1.0, 1e-8);
  EXPECT_NEAR(m.gamma / t.gamma, 1.0, 1e-8);
  std::remove(path.c_str());
}

}  // namespace
