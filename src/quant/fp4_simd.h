/* fp4_simd.h: four NVFP4 scales at once for the SIMD dot products (dot_avx2.c, dot_avx512.c):
 * st_ue4m3_to_fp32_half (ref.h) on the four bytes of `codes`, built from bits the same way.
 * Needs SSE4.1; included only by files compiled for AVX2 or AVX-512. */
#ifndef ST_QUANT_FP4_SIMD_H
#define ST_QUANT_FP4_SIMD_H

#include <immintrin.h>
#include <stdint.h>

static inline __attribute__((always_inline)) __m128 st_ue4m3x4_half(uint32_t codes) {
    __m128i c = _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)codes));
    __m128i exp = _mm_and_si128(_mm_srli_epi32(c, 3), _mm_set1_epi32(15)), man = _mm_and_si128(c, _mm_set1_epi32(7));
    /* exponent bits E > 0: (1 + man/8) 2^(E-8); E = 0: man 2^-10; 0x7F: 0 */
    __m128 normal = _mm_castsi128_ps(_mm_or_si128(_mm_slli_epi32(_mm_add_epi32(exp, _mm_set1_epi32(119)), 23), _mm_slli_epi32(man, 20)));
    __m128 sub = _mm_mul_ps(_mm_cvtepi32_ps(man), _mm_set1_ps(1.0f / 1024));
    __m128 v = _mm_blendv_ps(normal, sub, _mm_castsi128_ps(_mm_cmpeq_epi32(exp, _mm_setzero_si128())));
    return _mm_andnot_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(c, _mm_set1_epi32(0x7F))), v);
}

#endif
