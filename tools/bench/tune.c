/* tune.c -- least-squares fit of weft's alpha-beta-gamma cost model to measured times. */
#include "tools/bench/tune.h"

#include <stdio.h>

int bench_fit_line(const double *x, const double *y, size_t n, double *a, double *b) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; i++) {
    if (!(y[i] > 0)) return -1;
    double w = 1.0 / (y[i] * y[i]);
    sw += w;
    sx += w * x[i];
    sy += w * y[i];
    sxx += w * x[i] * x[i];
    sxy += w * x[i] * y[i];
  }
  double det = sw * sxx - sx * sx;
  /* det = sum over pairs of w_i w_j (x_i - x_j)^2: zero exactly when all x are equal. */
  if (n < 2 || !(det > 1e-12 * sw * sxx)) return -1;
  *b = (sw * sxy - sx * sy) / det;
  *a = (sy - *b * sx) / sw;
  return 0;
}

/* The weighted slope through the origin, for when the intercept is clamped to 0. */
static double slope_through_origin(const double *x, const double *y, size_t n) {
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; i++) {
    double w = 1.0 / (y[i] * y[i]);
    sxx += w * x[i] * x[i];
    sxy += w * x[i] * y[i];
  }
  return sxx > 0 ? sxy / sxx : 0;
}

int bench_tune_fit(const bench_samples_t *shifts, const bench_samples_t *all_reduce, int nranks,
                   bench_tune_t *out, int *gamma_fitted) {
  double a, b;
  if (bench_fit_line(shifts->bytes, shifts->seconds, shifts->n, &a, &b) != 0) return -1;
  if (a < 0) {
    a = 0;
    b = slope_through_origin(shifts->bytes, shifts->seconds, shifts->n);
  }
  if (b < 0) b = 0;
  out->alpha = a;
  out->beta = b;
  out->gamma = 0;
  *gamma_fitted = 0;
  double p = nranks > 1 ? nranks : 2;
  double sxr = 0, sxx = 0;
  for (size_t i = 0; i < all_reduce->n; i++) {
    double n = all_reduce->bytes[i];
    double comm = 2 * (p - 1) * a + 2 * (p - 1) / p * n * b;
    double x = (p - 1) / p * n;
    sxr += x * (all_reduce->seconds[i] - comm);
    sxx += x * x;
  }
  if (sxx > 0 && sxr > 0) {
    out->gamma = sxr / sxx;
    *gamma_fitted = 1;
  }
  return 0;
}

int bench_tune_format(char *buf, size_t len, const bench_tune_t *t) {
  return snprintf(buf, len, "alpha %.9g\nbeta %.9g\ngamma %.9g\n", t->alpha, t->beta, t->gamma);
}
