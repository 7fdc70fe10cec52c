// after.c -- the writer (core 0) fills 1 MiB, then the reader (core 1) reads it: method 0 memcpy,
// 1 an AVX2 add into its own buffer, 2-4 the same with a prefetch 1, 4 or 16 KiB ahead, 5 a prefetch
// pass first. Usage: after METHOD ROUNDS; prints the median rate in GB/s. gcc -O2 -o after after.c
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sys/wait.h>
#include <stdint.h>
#define N (1 << 20)
static float *X, *Y;
static _Atomic int *turnp;
#define turn (*turnp) // 0 producer writes, 1 consumer reads
static int method;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void pin(int c) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s); sched_setaffinity(0, sizeof s, &s); }
static int rounds;
static void *producer(void *a) {
  (void)a; pin(0);
  for (int r = 0; r < rounds; r++) {
    while (atomic_load(&turn) != 0) ;
    for (size_t i = 0; i < N / 4; i++) X[i] = (float)(r + i);
    atomic_store(&turn, 1);
  }
  return 0;
}
__attribute__((target("avx2"))) static void add_loop(float *y, const float *x, size_t n, int pf) {
  for (size_t i = 0; i < n; i += 32) {
    if (pf) _mm_prefetch((const char *)(x + i) + pf, _MM_HINT_T0);
    for (int k = 0; k < 32; k += 8) {
      __m256 a = _mm256_loadu_ps(x + i + k), b = _mm256_loadu_ps(y + i + k);
      _mm256_storeu_ps(y + i + k, _mm256_add_ps(a, b));
    }
  }
}
int main(int argc, char **argv) {
  method = atoi(argv[1]); rounds = atoi(argv[2]);
  char *sh = mmap(0, N + 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  turnp = (_Atomic int *)sh; X = (float *)(sh + 4096); Y = aligned_alloc(4096, N); memset(Y, 0, N); memset(X, 0, N);
  pid_t pid = fork(); if (pid == 0) { producer(0); _exit(0); } pin(1);
  double tot = 0; double best = 1e9; double ts[10000];
  for (int r = 0; r < rounds; r++) {
    while (atomic_load(&turn) != 1) ;
    double t0 = now();
    switch (method) {
      case 0: memcpy(Y, X, N); break;
      case 1: add_loop(Y, X, N / 4, 0); break;
      case 2: add_loop(Y, X, N / 4, 1024); break;
      case 3: add_loop(Y, X, N / 4, 4096); break;
      case 4: add_loop(Y, X, N / 4, 16384); break;
      case 5: { // two passes: prefetch everything first in big strides then add
        for (size_t i = 0; i < N; i += 64) _mm_prefetch((const char *)X + i, _MM_HINT_T0);
        add_loop(Y, X, N / 4, 0); break; }
    }
    double dt = now() - t0; ts[r] = dt; tot += dt; if (dt < best) best = dt;
    atomic_store(&turn, 0);
  }
  waitpid(pid, 0, 0);
  // median
  for (int i = 0; i < rounds; i++) for (int j = i + 1; j < rounds; j++) if (ts[j] < ts[i]) { double q = ts[i]; ts[i] = ts[j]; ts[j] = q; }
  printf("%d %.2f\n", method, N / ts[rounds / 2] / 1e9);
  return 0;
}
