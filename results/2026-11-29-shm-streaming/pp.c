// pp.c -- round trip of one cache line between a process on core 0 and one on core 1, in us.
// Usage: pp ROUND_TRIPS. gcc -O2 -o pp pp.c
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void pin(int c) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s); sched_setaffinity(0, sizeof s, &s); }
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  _Atomic int *f = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  pid_t p = fork();
  if (p == 0) { pin(0); for (int i = 0; i < n; i++) { while (atomic_load(f) != 2 * i + 1) ; atomic_store(f, 2 * i + 2); } _exit(0); }
  pin(1);
  double t0 = now();
  for (int i = 0; i < n; i++) { atomic_store(f, 2 * i + 1); while (atomic_load(f) != 2 * i + 2) ; }
  double dt = now() - t0; waitpid(p, 0, 0);
  printf("pp %.3f\n", dt / n * 1e6);
}
