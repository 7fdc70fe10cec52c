/* reduce.c -- the host reduction loops, one per dtype x op, their two-destination reduce-copy
 * twins, the tables that pick one, and kern_copy2.
 *
 * Each loop is a plain counted loop over one dtype and one op so that gcc vectorizes it at -O3
 * (see kernels/BUILD). There is no `restrict` on a, b or the in-place output: dst (dst2 in the
 * reduce-copy loops) may be exactly a or b (in place), so gcc emits a runtime overlap check that
 * takes the vector path in both the in-place and the disjoint case.
 *
 * The loops themselves are in reduce_loops.h, compiled here for the baseline and in reduce_avx2.c
 * with AVX2, which the lookups below take where the CPU has it (kern_isa_best).
 *
 * Checked with kernels/vec_report.sh (gcc 12.2, -O3, -fopt-info-vec-optimized on the preprocessed
 * source so that each macro-generated loop gets its own line). With the SSE2 baseline, 42 of the
 * 48 loops vectorize: every int8/uint8/int32/uint32, fp16, bf16, fp8, float32 and float64 op, and
 * int64/uint64 sum. int64/uint64 prod, min and max stay scalar: SSE2 has no 64-bit lane multiply
 * and no 64-bit compare (pcmpgtq is SSE4.2); gcc vectorizes min/max with -msse4.2 and all three
 * with -mavx2, which we do not pass so that the library runs on any x86-64. fp16/bf16/fp8
 * vectorize because kernels/half.h and fp8.h convert with masks instead of branches (see half.h for
 * why `?:` failed).
 * kernels/avg.c: the float loops vectorize; the integer ones cannot (no SIMD integer division).
 *
 * The two-destination reduce-copy loops (reduce_copy_*, same report): 44 of 48 vectorize, the
 * same set plus int64/uint64 prod. Only int64/uint64 min and max stay scalar (no 64-bit compare in
 * SSE2, as above). 64-bit prod is emulated with three pmuludq per vector in both kinds of loop;
 * gcc's cost model rates that exactly break-even against two imulq for one store and profitable
 * once the second store is counted, and measured it is (8192 int64 on a 2-core AMD EPYC VM: 4.4 us
 * vectorized against 6.4 us scalar). The in-place case (dst2 == a or b) takes the vector path as
 * fast as the disjoint one. kernels/avg.c's avg_final_copy_*: 6 of 12, the float ones, as above.
 */
#include "kernels/reduce.h"

#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "common/error.h"

#define REDUCE_ATTR
#define REDUCE_TABLE kern_reduce_table_base
#define REDUCE_COPY_TABLE kern_reduce_copy_table_base
#include "kernels/reduce_loops.h"

/* What this CPU runs, asked of the CPU itself. */
static kern_isa_t isa_detect(void) {
#if KERN_HAVE_AVX2
  /* AVX2 from the compiler's CPU model (it also checks that the OS saves the registers), F16C from
   * CPUID leaf 1 (not every compiler's model names it). */
  unsigned eax, ebx, ecx, edx;
  if (__builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C))
    return KERN_ISA_AVX2;
#endif
  return KERN_ISA_BASE;
}

kern_isa_t kern_isa_best(void) {
  /* Asked once per process and remembered: the answer never changes, and a hypervisor traps CPUID
   * (about 30 us per call on the 2-core VM: every collective paid it while the lookups asked the
   * CPU each time). Threads that race here store the same value. */
  static _Atomic int found = -1;
  int isa = atomic_load_explicit(&found, memory_order_relaxed);
  if (isa < 0) {
    isa = (int)isa_detect();
    atomic_store_explicit(&found, isa, memory_order_relaxed);
  }
  return (kern_isa_t)isa;
}

const char *kern_isa_name(kern_isa_t isa) {
  switch (isa) {
    case KERN_ISA_BASE:
      return "baseline";
    case KERN_ISA_AVX2:
      return "avx2";
    case KERN_NUM_ISAS:
      break;
  }
  return "unknown";
}

/* Each instruction set's tables, by kern_isa_t: those this build has (kern_isa_best never names
 * another). */
static const kern_reduce_fn (*const reduce_tables[KERN_NUM_ISAS])[WEFT_NUM_OPS] = {
    [KERN_ISA_BASE] = kern_reduce_table_base,
#if KERN_HAVE_AVX2
    [KERN_ISA_AVX2] = kern_reduce_table_avx2,
#endif
};
static const kern_reduce_copy_fn (*const copy_tables[KERN_NUM_ISAS])[WEFT_NUM_OPS] = {
    [KERN_ISA_BASE] = kern_reduce_copy_table_base,
#if KERN_HAVE_AVX2
    [KERN_ISA_AVX2] = kern_reduce_copy_table_avx2,
#endif
};

/* Whether `isa` runs on this CPU and (dtype, op) is in range. Through unsigned so that a negative
 * value (a cast from a bad int) is out of range too. */
static int usable(kern_isa_t isa, weft_dtype_t dtype, weft_op_t op) {
  return (unsigned)isa <= (unsigned)kern_isa_best() && (unsigned)dtype < WEFT_NUM_DTYPES &&
         (unsigned)op < WEFT_NUM_OPS;
}

kern_reduce_fn kern_reduce_lookup_isa(kern_isa_t isa, weft_dtype_t dtype, weft_op_t op) {
  return usable(isa, dtype, op) ? reduce_tables[isa][dtype][op] : NULL;
}

kern_reduce_copy_fn kern_reduce_copy_lookup_isa(kern_isa_t isa, weft_dtype_t dtype, weft_op_t op) {
  return usable(isa, dtype, op) ? copy_tables[isa][dtype][op] : NULL;
}

kern_reduce_fn kern_reduce_lookup(weft_dtype_t dtype, weft_op_t op) {
  return kern_reduce_lookup_isa(kern_isa_best(), dtype, op);
}

kern_reduce_copy_fn kern_reduce_copy_lookup(weft_dtype_t dtype, weft_op_t op) {
  return kern_reduce_copy_lookup_isa(kern_isa_best(), dtype, op);
}

weft_result_t kern_reduce(void *dst, const void *a, const void *b, size_t n, weft_dtype_t dtype,
                          weft_op_t op) {
  if ((unsigned)dtype >= WEFT_NUM_DTYPES) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "reduce: unknown dtype %d (valid: 0..%d)",
                    (int)dtype, WEFT_NUM_DTYPES - 1);
  }
  if ((unsigned)op >= WEFT_NUM_OPS) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "reduce: unknown op %d (valid: 0..%d)", (int)op,
                    WEFT_NUM_OPS - 1);
  }
  if (n > 0 && (dst == NULL || a == NULL || b == NULL)) {
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "reduce: NULL buffer for %zu elements of dtype %d",
                    n, (int)dtype);
  }
  kern_reduce_lookup(dtype, op)(dst, a, b, n);
  return WEFT_SUCCESS;
}

/* Two memcpy calls per 8 KiB chunk: src into dst, then dst (still in L1) into dst2. glibc's memcpy
 * picks the widest moves the CPU has (AVX2, rep movsb) and aligns its stores, which a loop built
 * for the SSE2 baseline cannot. Measured on 64 KiB slices (AMD EPYC VM, gcc 12.2 -O3, glibc 2.36),
 * in GB/s of src, with src/dst/dst2 aligned / mutually misaligned: this 28-30 / 22-24; two whole
 * memcpy calls 24.6 / 21; a 16-byte-vectorized load-once-store-twice loop 22 / 7.9. Reading dst
 * back instead of src also keeps it correct when dst2 is src. */
void kern_copy2(void *dst, void *dst2, const void *src, size_t bytes) {
  enum { kChunk = 8192 };
  unsigned char *d = (unsigned char *)dst;
  unsigned char *d2 = (unsigned char *)dst2;
  const unsigned char *s = (const unsigned char *)src;
  for (size_t off = 0; off < bytes; off += kChunk) {
    size_t len = bytes - off < kChunk ? bytes - off : kChunk;
    memcpy(d + off, s + off, len);
    memcpy(d2 + off, d + off, len);
  }
}
