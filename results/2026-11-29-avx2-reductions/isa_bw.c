/* isa_bw.c -- time of one host reduction loop per instruction set (kern_reduce_lookup_isa), in
 * place (dst = a), buffers 64-byte aligned, best of 7 repetitions of ~64 MiB of work each.
 * Sizes: 4 KiB, 64 KiB (a shm slice), 1 MiB, 256 MiB (beyond the caches).
 *   gcc -O3 -std=gnu11 -D_GNU_SOURCE -I../.. isa_bw.c ../../kernels/reduce.c \
 *       ../../kernels/reduce_avx2.c ../../common/error.c -o isa_bw && ./isa_bw [dtype]
 * dtype: float32 (default), float64, float16, bfloat16, float8_e4m3, int32, int64. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/reduce.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    weft_dtype_t dt;
    size_t es;
  } types[] = {{"float32", WEFT_FLOAT32, 4},
               {"float64", WEFT_FLOAT64, 8},
               {"float16", WEFT_FLOAT16, 2},
               {"bfloat16", WEFT_BFLOAT16, 2},
               {"float8_e4m3", WEFT_FLOAT8_E4M3, 1},
               {"int32", WEFT_INT32, 4},
               {"int64", WEFT_INT64, 8}};
  size_t k = 0;
  while (argc > 1 && k + 1 < sizeof types / sizeof types[0] && strcmp(argv[1], types[k].name)) k++;
  if (argc > 1 && strcmp(argv[1], types[k].name)) {
    fprintf(stderr, "isa_bw: unknown dtype %s\n", argv[1]);
    return 2;
  }
  weft_dtype_t dt = types[k].dt;
  size_t es = types[k].es;
  const size_t sizes[] = {4096, 65536, 1 << 20, 256u << 20};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t bytes = sizes[s], n = bytes / es;
    char *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
    memset(a, 0, bytes);
    memset(b, 0, bytes);
    for (int isa = 0; isa < KERN_NUM_ISAS; isa++) {
      kern_reduce_fn f = kern_reduce_lookup_isa((kern_isa_t)isa, dt, WEFT_SUM);
      if (!f) continue;
      size_t iters = (64u << 20) / bytes ? (64u << 20) / bytes : 1;
      double best = 1e9;
      for (int rep = 0; rep < 7; rep++) {
        double t0 = now();
        for (size_t i = 0; i < iters; i++) f(a, a, b, n);
        double t = (now() - t0) / (double)iters;
        if (t < best) best = t;
      }
      printf("%-11s %10zu B  %-8s %10.3f us  %6.2f GB/s of output\n", types[k].name, bytes,
             kern_isa_name((kern_isa_t)isa), best * 1e6, (double)bytes / best / 1e9);
    }
    free(a);
    free(b);
  }
  return 0;
}
