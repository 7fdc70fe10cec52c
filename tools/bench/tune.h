/* tune.h -- private to weft-bench: --tune's fit of alpha, beta and gamma, and its file. */
#ifndef WEFT_TOOLS_BENCH_TUNE_H_
#define WEFT_TOOLS_BENCH_TUNE_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* weft's cost model (comm/cost_model.c): alpha seconds per message, beta seconds per byte on a
 * link, gamma seconds per byte reduced. */
typedef struct {
  double alpha, beta, gamma;
} bench_tune_t;

/* Measured times: seconds[i] for a message (or buffer) of bytes[i]. */
typedef struct {
  const double *bytes;
  const double *seconds;
  size_t n;
} bench_samples_t;

/* Weighted least squares y = a + b x with weights 1/y^2, i.e. relative errors, so that samples
 * from microseconds to milliseconds count alike (a plain fit would let the largest sizes decide
 * a alone). Returns 0, or -1 when there are fewer than two distinct x or a y <= 0. */
int bench_fit_line(const double *x, const double *y, size_t n, double *a, double *b);

/* Fits the model to one job's measurements on `nranks` ranks:
 *
 * - alpha, beta from ring shifts (every rank sends `bytes` to its right neighbour and receives as
 *   much from its left one, at once, as one step of a ring does): t = alpha + bytes beta, fitted
 *   by bench_fit_line. A negative intercept (noise around a tiny alpha) is clamped to 0 and beta
 *   refitted through the origin.
 * - gamma from ring all-reduce times of n bytes, whose model is
 *     t = 2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma
 *   (collectives/ring_allreduce.c): the part left once the alpha-beta part is taken off is the
 *   reduction's, r = (p-1)/p n gamma, and gamma = sum(r x) / sum(x^2) with x = (p-1)/p n, the least
 *   squares slope through the origin. That is the reduction's cost as the model sees it: what
 *   reducing adds to a ring step, after whatever overlap the executor's fused receive-reduce gets.
 *
 * Returns 0 and sets *out; *gamma_fitted = 0 when the residuals left no positive gamma (then
 * out->gamma = 0 and the caller should measure the reduction alone). -1 when the shifts cannot
 * give alpha and beta. */
int bench_tune_fit(const bench_samples_t *shifts, const bench_samples_t *all_reduce, int nranks,
                   bench_tune_t *out, int *gamma_fitted);

/* Writes the WEFT_TUNE_FILE text: "alpha <s>\nbeta <s/byte>\ngamma <s/byte>\n", nothing else
 * (cost_model.c reads key-value pairs and stops at the first line that is not one). Returns what
 * snprintf returns. */
int bench_tune_format(char *buf, size_t len, const bench_tune_t *t);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_TUNE_H_ */
