/* fp4_simd.h: NVFP4 scales for the SIMD dot products (dot_avx2.c, dot_avx512.c), read from
 * ref.h's table of st_ue4m3_to_fp32_half (one load a scale: building the four from their bits
 * took 15 instructions, a quarter of the AVX2 kernel). Included only by files compiled for AVX2
 * or AVX-512. */
#ifndef ST_QUANT_FP4_SIMD_H
#define ST_QUANT_FP4_SIMD_H

#include <immintrin.h>
#include <stdint.h>
#include "quant/ref.h"

/* the four scales of `codes` (its bytes, first in lane 0), halved */
static inline __attribute__((always_inline)) __m128 st_ue4m3x4_half(uint32_t codes) {
    return _mm_setr_ps(st_ue4m3_half_lut[codes & 0xFF], st_ue4m3_half_lut[(codes >> 8) & 0xFF],
                       st_ue4m3_half_lut[(codes >> 16) & 0xFF], st_ue4m3_half_lut[codes >> 24]);
}
/* [scale of code c0 x4 | scale of c1 x4], halved: two broadcast loads and a blend */
static inline __attribute__((always_inline)) __m256 st_ue4m3_2x4_half(uint8_t c0, uint8_t c1) {
    return _mm256_blend_ps(_mm256_broadcast_ss(&st_ue4m3_half_lut[c0]), _mm256_broadcast_ss(&st_ue4m3_half_lut[c1]), 0xF0);
}

#endif
