/* reduce_avx2.h: llama.cpp's sum of four 8-lane f32 accumulators (the order of ggml_vec_dot_f32 /
 * _f16 on AVX2): (a0 + a2) + (a1 + a3), the halves folded, two horizontal adds. Shared by the
 * one-row kernels (dot_avx2.c) and the tile kernels (dot_tile_float_avx2.c), which must give the
 * same bits. Include only from files compiled for AVX2. */
#ifndef ST_QUANT_REDUCE_AVX2_H
#define ST_QUANT_REDUCE_AVX2_H

#include <immintrin.h>

static inline __attribute__((always_inline)) float ggml_reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

#endif
