/* reduce_avx2.c -- the host reduction loops (reduce_loops.h) compiled for AVX2, and float16's
 * written with F16C's conversions, which kern_reduce_lookup takes where the CPU has both (every
 * AVX2 CPU has F16C). Only these functions use them: the library still runs on any x86-64. The
 * generic loops are the baseline's C, so the same bits; no FMA, so no contraction. float16's own
 * loops compute what the generic ones do (exact conversions to float, the op in float, rounding to
 * nearest even, a quiet NaN keeping the top payload bits; min/max select an input's own bits),
 * which tests/kernels/reduce_test checks bit for bit against the baseline.
 *
 * Why (results/2026-11-29-avx2-reductions/, one core of a 2-core AMD EPYC VM, gcc 12.2 -O3, in
 * place, sum, baseline -> this file, GB/s of output): float32 at 64 KiB 52 -> 59, at 1 MiB 42 ->
 * 50; float64, int32 and int64 at 64 KiB 28-29 -> 58; bfloat16 5.1 -> 10.5 at every size; float16
 * 1.45 -> 2.7 with the generic loops, and with F16C 26; fp8 0.54 -> 0.96. At 256 MiB the 4- and
 * 8-byte types are memory-bound and level. AVX-512 measured no faster than AVX2 for float32, and
 * can lower the clock on some CPUs, so it is not built. */
#include "kernels/reduce_isa.h"

#if KERN_HAVE_AVX2
#include <immintrin.h>
#include <stdint.h>

#define F16C_ATTR __attribute__((target("avx2,f16c")))

/* 8 binary16 values widened to float (exact) and a float vector rounded back to nearest even
 * (overflow to inf, NaN quiet with its top payload bits), whatever the rounding mode. */
F16C_ATTR static inline __m256 f16c_widen(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
F16C_ATTR static inline __m128i f16c_narrow(__m256 v) {
  return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
}
F16C_ATTR static inline uint16_t f16c_narrow1(float v) {
  return (uint16_t)_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT);
}

/* Each op on 8 elements (VEC, from a and b) and on one (ONE, from x and y). */
#define F16C_SUM_VEC(a, b) f16c_narrow(_mm256_add_ps(f16c_widen(a), f16c_widen(b)))
#define F16C_SUM_ONE(x, y) f16c_narrow1(_cvtsh_ss(x) + _cvtsh_ss(y))
#define F16C_PROD_VEC(a, b) f16c_narrow(_mm256_mul_ps(f16c_widen(a), f16c_widen(b)))
#define F16C_PROD_ONE(x, y) f16c_narrow1(_cvtsh_ss(x) * _cvtsh_ss(y))
#define F16C_MIN_VEC(a, b) f16c_select(a, b, 1)
#define F16C_MIN_ONE(x, y) (_cvtsh_ss(x) < _cvtsh_ss(y) ? (x) : (y))
#define F16C_MAX_VEC(a, b) f16c_select(a, b, 0)
#define F16C_MAX_ONE(x, y) (_cvtsh_ss(x) > _cvtsh_ss(y) ? (x) : (y))

/* min (less) or max: a's element where it compares less (greater) than b's, else b's, as the
 * generic `x < y ? x : y` (a NaN on either side gives b). The input's own bits, not a conversion.
 */
F16C_ATTR static inline __m128i f16c_select(const uint16_t *a, const uint16_t *b, int less) {
  __m128i ah = _mm_loadu_si128((const __m128i *)a), bh = _mm_loadu_si128((const __m128i *)b);
  __m256 af = _mm256_cvtph_ps(ah), bf = _mm256_cvtph_ps(bh);
  __m256i m = _mm256_castps_si256(less ? _mm256_cmp_ps(af, bf, _CMP_LT_OQ)
                                       : _mm256_cmp_ps(af, bf, _CMP_GT_OQ));
  /* 8 lanes of 32-bit all-ones or zero, packed to 16 bits (saturation keeps them so). */
  __m128i m16 = _mm_packs_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  return _mm_blendv_epi8(bh, ah, m16);
}

/* dst (and dst2) = a op b, 8 at a time and the rest one by one. Each group is read whole before
 * it is written, so dst (dst2) may be exactly a or b. */
#define F16C_LOOPS(op, VEC, ONE)                                                             \
  F16C_ATTR static void reduce_float16_##op(void *dst_v, const void *a_v, const void *b_v,   \
                                            size_t n) {                                      \
    uint16_t *dst = (uint16_t *)dst_v;                                                       \
    const uint16_t *a = (const uint16_t *)a_v, *b = (const uint16_t *)b_v;                   \
    size_t i = 0;                                                                            \
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(dst + i), VEC(a + i, b + i));    \
    for (; i < n; i++) dst[i] = ONE(a[i], b[i]);                                             \
  }                                                                                          \
  F16C_ATTR static void reduce_copy_float16_##op(void *dst_v, void *dst2_v, const void *a_v, \
                                                 const void *b_v, size_t n) {                \
    uint16_t *dst = (uint16_t *)dst_v, *dst2 = (uint16_t *)dst2_v;                           \
    const uint16_t *a = (const uint16_t *)a_v, *b = (const uint16_t *)b_v;                   \
    size_t i = 0;                                                                            \
    for (; i + 8 <= n; i += 8) {                                                             \
      __m128i r = VEC(a + i, b + i);                                                         \
      _mm_storeu_si128((__m128i *)(dst + i), r);                                             \
      _mm_storeu_si128((__m128i *)(dst2 + i), r);                                            \
    }                                                                                        \
    for (; i < n; i++) {                                                                     \
      uint16_t r = ONE(a[i], b[i]);                                                          \
      dst[i] = r;                                                                            \
      dst2[i] = r;                                                                           \
    }                                                                                        \
  }

F16C_LOOPS(sum, F16C_SUM_VEC, F16C_SUM_ONE)
F16C_LOOPS(prod, F16C_PROD_VEC, F16C_PROD_ONE)
F16C_LOOPS(min, F16C_MIN_VEC, F16C_MIN_ONE)
F16C_LOOPS(max, F16C_MAX_VEC, F16C_MAX_ONE)

#define REDUCE_OWN_FLOAT16
#define REDUCE_ATTR __attribute__((target("avx2")))
#define REDUCE_TABLE kern_reduce_table_avx2
#define REDUCE_COPY_TABLE kern_reduce_copy_table_avx2
#include "kernels/reduce_loops.h"
#endif
