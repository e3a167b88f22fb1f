/* ops_avx2.h: small AVX2/FMA building blocks shared by the ops_*_avx2.c files (and only them:
 * they need the AVX2 compile flags those files get).
 *
 * exp256: the algorithm of exp512 (ops_avx512.h) with 8 lanes; AVX2 has no vscalefps, so 2^n is
 * built in the exponent field, with x clamped to [-87, 88] so that n stays a normal exponent.
 * Below -87 the result is e^-87 (about 1.6e-38) instead of a subnormal or 0, above 88 it is e^88
 * instead of inf; the gates that use it (1/(1+e^-x), x/(1+e^-x)) then differ from the reference
 * by less than 1e-30 absolute there. */
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

#endif
