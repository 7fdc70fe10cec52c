/* peer_common.h -- shared by the all-reduce drivers in tools/peers: flags, data, median, one row format. */
#ifndef WEFT_TOOLS_PEERS_PEER_COMMON_H_
#define WEFT_TOOLS_PEERS_PEER_COMMON_H_

/* Header-only and valid C11 and C++17, so the C (weft, MPI) and C++ (Gloo) drivers measure and
 * print identically: same sizes, same data, same median, same columns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  size_t minbytes, maxbytes;
  int iters, warmup;
} peer_args_t;

static inline double peer_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline size_t peer_parse_size(const char *s) {
  char *end;
  size_t v = (size_t)strtoull(s, &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10;
  if (*end == 'M' || *end == 'm') v <<= 20;
  if (*end == 'G' || *end == 'g') v <<= 30;
  return v;
}

/* nccl-tests' flags that matter here: -b min -e max (factor 2), -n iters, -w warmup. */
static inline peer_args_t peer_parse_args(int argc, char **argv) {
  peer_args_t a = {4096, 64u << 20, 20, 3};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) a.minbytes = peer_parse_size(argv[i + 1]);
    if (!strcmp(argv[i], "-e")) a.maxbytes = peer_parse_size(argv[i + 1]);
    if (!strcmp(argv[i], "-n")) a.iters = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-w")) a.warmup = atoi(argv[i + 1]);
  }
  return a;
}

/* Fewer iterations for big buffers (at least 5): keeps a 64M sweep to seconds on 2 cores. More
 * for small ones (up to 16x below 64 KiB): a 4 KiB median over 20 iterations still holds the
 * ranks' first, unsettled rounds (4 ranks on 2 cores: 40-58 us over 20, 16-25 us over 200, for
 * weft and Open MPI alike), and they cost little. */
#define PEER_SMALL_BOOST 16

static inline int peer_iters(const peer_args_t *a, size_t bytes) {
  size_t cap = ((size_t)512 << 20) / bytes;
  size_t boost = bytes < ((size_t)64 << 10) ? ((size_t)64 << 10) / bytes : 1;
  size_t want = (size_t)a->iters * (boost < PEER_SMALL_BOOST ? boost : PEER_SMALL_BOOST);
  int n = want < cap ? (int)want : (int)cap;
  return n < 5 ? 5 : n;
}

/* The most iterations any size runs: what the drivers size their timing arrays for. */
static inline size_t peer_max_iters(const peer_args_t *a) {
  size_t n = (size_t)a->iters * PEER_SMALL_BOOST;
  return n < 5 ? 5 : n;
}

/* Small integers, so every partial sum is exact in float32 whatever the reduction order. */
static inline float peer_value(int rank, size_t i) { return (float)((rank + i) % 8); }

static inline void peer_fill(float *buf, size_t count, int rank) {
  for (size_t i = 0; i < count; i++) buf[i] = peer_value(rank, i);
}

/* Number of elements that differ from the sum over ranks. */
static inline long peer_check(const float *buf, size_t count, int nranks) {
  long wrong = 0;
  for (size_t i = 0; i < count; i++) {
    float want = 0;
    for (int r = 0; r < nranks; r++) want += peer_value(r, i);
    wrong += buf[i] != want;
  }
  return wrong;
}

static inline int peer_cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Median in place (sorts t). */
static inline double peer_median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, peer_cmp_double);
  return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static inline void peer_header(const char *lib, const char *variant, int nranks) {
  printf("# %s %s all_reduce float32 sum, nRanks %d, in place, time = median over iterations of\n"
         "# the slowest rank's time (barrier before each), busbw = algbw * 2(n-1)/n\n",
         lib, variant, nranks);
  printf("# %10s  %6s  %10s  %7s  %7s  %6s\n", "size(B)", "iters", "time(us)", "algbw", "busbw",
         "#wrong");
}

static inline void peer_row(size_t bytes, int iters, double us, int nranks, long wrong) {
  double algbw = bytes / us / 1e3; /* GB/s */
  printf("  %10zu  %6d  %10.1f  %7.3f  %7.3f  %6ld\n", bytes, iters, us, algbw,
         algbw * 2.0 * (nranks - 1) / nranks, wrong);
  fflush(stdout);
}

#endif /* WEFT_TOOLS_PEERS_PEER_COMMON_H_ */
