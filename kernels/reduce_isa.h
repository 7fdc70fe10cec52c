/* reduce_isa.h -- internal: the instruction sets the host reduction loops are compiled for
 * (reduce_loops.h), and their tables. Callers outside kernels/ use kern_isa_best and the
 * *_lookup_isa functions of reduce.h; the tables are for reduce.c. */
#ifndef WEFT_KERNELS_REDUCE_ISA_H_
#define WEFT_KERNELS_REDUCE_ISA_H_

#include "kernels/reduce.h"

/* Whether this build has the AVX2 copy of the loops: x86-64 with gcc or clang (their target
 * attribute and __builtin_cpu_supports). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KERN_HAVE_AVX2 1
#else
#define KERN_HAVE_AVX2 0
#endif

extern const kern_reduce_fn kern_reduce_table_base[WEFT_NUM_DTYPES][WEFT_NUM_OPS];
extern const kern_reduce_copy_fn kern_reduce_copy_table_base[WEFT_NUM_DTYPES][WEFT_NUM_OPS];
#if KERN_HAVE_AVX2
extern const kern_reduce_fn kern_reduce_table_avx2[WEFT_NUM_DTYPES][WEFT_NUM_OPS];
extern const kern_reduce_copy_fn kern_reduce_copy_table_avx2[WEFT_NUM_DTYPES][WEFT_NUM_OPS];
#endif

#endif /* WEFT_KERNELS_REDUCE_ISA_H_ */
