/* ops_avx2.h: small AVX2/FMA building blocks shared by the ops_*_avx2.c files (and only them:
 * they need the AVX2 compile flags those files get).
 *
 * exp256: the algorithm of exp512 (ops_avx512.h) with 8 lanes; AVX2 has no vscalefps, so 2^n is
 * built in the exponent field, with x clamped to [-87, 88] so that n stays a normal exponent.
 * Below -87 the result is e^-87 (about 1.6e-38) instead of a subnormal or 0, above 88 it is e^88
 * instead of inf; the gates that use it (1/(1+e^-x)) then differ from the reference by less than
 * 1e-30 absolute there.
 * exp256_ggml: e^x computed as llama.cpp's AVX2 build computes it for SiLU and SwiGLU (ggml's
 * vector expf, the Arm optimized-routines algorithm), so that those activations match it bit for
 * bit: they are rounded to 8 bits right after, and a last-bit difference sometimes rounds one
 * the other way (issue 12). The algorithm: n = round(x log2 e) by adding and removing 1.5 * 2^23,
 * b = x - n ln 2 with ln 2 in two parts, e^b - 1 ~ j = c1 b + c2 b^2 + ... + c5 b^5 (Horner in b^2
 * pairs), and e^x = 2^n (1 + j) as fma(j, k, k) with k = 2^n built in the exponent field. For
 * |n| > 126 the scale is split in two factors (s1 s2 = 2^n) so that results near the ends of the
 * range stay exact, and |n| > 192 gives inf or 0. At most 1.5 ulp from e^x. */
#ifndef ST_BACKEND_CPU_OPS_AVX2_H
#define ST_BACKEND_CPU_OPS_AVX2_H

#include <immintrin.h>
#include "backend/cpu/ops_cpu.h"

static inline __m256 exp256(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723e-6f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline __m256 exp256_ggml(__m256 x) {
    const __m256 shift = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
    const __m256 n = _mm256_sub_ps(z, shift);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    /* z's low mantissa bits hold n: shifted into the exponent field, plus 1.0f's bits, that is 2^n */
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
    const __m256 b2 = _mm256_mul_ps(b, b);
    const __m256 hi = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), b2,
                                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f)));
    const __m256 j = _mm256_fmadd_ps(hi, b2, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(abs_n, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    if (!_mm256_movemask_ps(big)) return _mm256_fmadd_ps(j, k, k);
    /* near the ends: 2^n = s1 * s2 with s1 = 2^127 (n > 0) or 2^-125 (n <= 0) */
    const __m256i neg = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                         _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(neg, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, neg));
    const __m256 out = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 edge = _mm256_blendv_ps(_mm256_fmadd_ps(k, j, k), _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1), big);
    return _mm256_blendv_ps(edge, _mm256_mul_ps(s1, s1), out);
}

#endif
