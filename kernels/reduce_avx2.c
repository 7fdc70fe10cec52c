/* reduce_avx2.c -- the host reduction loops (reduce_loops.h) compiled for AVX2, which
 * kern_reduce_lookup takes where the CPU has it. Only these functions use AVX2: the library still
 * runs on any x86-64. Same C as the baseline copy, so the same bits; no FMA, so no contraction.
 *
 * Why: on cache-resident slices the baseline's 16-byte vectors are the limit. float32 sum, a
 * 2-core AMD EPYC VM (gcc 12.2 -O3), in place: 4 KiB 0.143 -> 0.038 us, 64 KiB 2.24 -> 1.11 us,
 * 1 MiB 36.0 -> 21.1 us; 256 MiB (memory-bound) level. AVX-512 measured no faster than AVX2
 * there, and can lower the clock on some CPUs, so it is not built. */
#include "kernels/reduce_isa.h"

#if KERN_HAVE_AVX2
#define REDUCE_ATTR __attribute__((target("avx2")))
#define REDUCE_TABLE kern_reduce_table_avx2
#define REDUCE_COPY_TABLE kern_reduce_copy_table_avx2
#include "kernels/reduce_loops.h"
#endif
