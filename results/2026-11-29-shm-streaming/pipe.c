// pipe.c -- a writer process on core 0 streams slices into a ring of slots in shared memory while a
// reader on core 1 adds each into its own buffer as it lands (as weft's shm ring does), and the rate.
// Usage: pipe SLICE_KIB SLOTS MESSAGE_KIB ITERS NT LAG: NT 1 writes with non-temporal stores; LAG: the
// reader waits until the writer is that many slices ahead. gcc -O2 -o pipe pipe.c
#define _GNU_SOURCE
#include <immintrin.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void pin(int c) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s); sched_setaffinity(0, sizeof s, &s); }
__attribute__((target("avx2"))) static void add(float *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
}
__attribute__((target("avx2"))) static void put_nt(float *d, const float *s, size_t n) {
  for (size_t i = 0; i < n; i += 8) _mm256_stream_ps(d + i, _mm256_loadu_ps(s + i));
  _mm_sfence();
}
int main(int argc, char **argv) {
  size_t S = atoi(argv[1]) << 10, slots = atoi(argv[2]), msg = (size_t)atoi(argv[3]) << 10; int iters = atoi(argv[4]), nt = atoi(argv[5]), lag = atoi(argv[6]);
  char *sh = mmap(0, 8192 + S * slots, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  _Atomic long *head = (void *)sh, *tail = (void *)(sh + 4096); char *ring = sh + 8192;
  memset(ring, 0, S * slots);
  float *src = aligned_alloc(4096, msg), *dst = aligned_alloc(4096, msg); memset(src, 1, msg); memset(dst, 0, msg);
  long per = msg / S;
  pid_t p = fork();
  if (p == 0) { pin(0);
    long h = 0;
    for (int it = 0; it < iters; it++) for (long k = 0; k < per; k++, h++) {
      while (h - atomic_load_explicit(tail, memory_order_acquire) >= (long)slots) ;
      float *d = (float *)(ring + (h % slots) * S), *s = (float *)((char *)src + k * S);
      if (nt) put_nt(d, s, S / 4); else memcpy(d, s, S);
      atomic_store_explicit(head, h + 1, memory_order_release);
    }
    _exit(0); }
  pin(1);
  double ts[1000]; long t = 0;
  for (int it = 0; it < iters; it++) { double t0 = now();
    for (long k = 0; k < per; k++, t++) {
      long need = t + 1 + lag; if (need > (long)(it + 1) * per) need = (it + 1) * per;
      while (atomic_load_explicit(head, memory_order_acquire) < need) ;
      add((float *)((char *)dst + k * S), (float *)(ring + (t % slots) * S), S / 4);
      atomic_store_explicit(tail, t + 1, memory_order_release);
    }
    ts[it] = now() - t0; }
  waitpid(p, 0, 0);
  for (int i = 0; i < iters; i++) for (int j = i + 1; j < iters; j++) if (ts[j] < ts[i]) { double q = ts[i]; ts[i] = ts[j]; ts[j] = q; }
  printf("%.2f\n", msg / ts[iters / 2] / 1e9);
}
