/* tq1_simd.h: TQ1_0's weights as bytes q in 0..2 (the trits), in element order, for the SIMD dot
 * products against Q8_K (dot_avx2.c, dot_avx512.c); the layout is ref_lowbit.c's. Needs AVX2;
 * included only by files compiled for AVX2 or AVX-512.
 *
 * A byte t of qs packs 5 trits; trit n is floor(3 t_n / 256) for t_n = (t 3^n) mod 256, which is 1
 * from t_n >= 86 and 2 from t_n >= 171. The bytes are kept biased by 128 (s = t ^ 0x80, the signed
 * byte t - 128) so the two thresholds are signed compares, which AVX2 has; the bias survives the
 * multiplications by 3, since 3 (t + 128) = 3 t + 128 (mod 256). Each 32 trits cost two compares
 * and two subtractions, plus two additions for the next power of 3. */
#ifndef ST_QUANT_TQ1_SIMD_H
#define ST_QUANT_TQ1_SIMD_H

#include <immintrin.h>
#include <string.h>

#include "quant/types.h"

static inline __attribute__((always_inline)) __m256i st_tq1_trits(__m256i s) {
    /* (t >= 86) + (t >= 171) as 1 - (t < 86) + (t >= 171): compares against constants GCC keeps
     * as one instruction each (it turns s > -43 into a min and an equality) */
    __m256i lt1 = _mm256_cmpgt_epi8(_mm256_set1_epi8(86 - 128), s);
    __m256i ge2 = _mm256_cmpgt_epi8(s, _mm256_set1_epi8(170 - 128));
    return _mm256_sub_epi8(_mm256_sub_epi8(lt1, ge2), _mm256_set1_epi8(-1));
}
static inline __attribute__((always_inline)) __m256i st_tq1_times3(__m256i t) {
    return _mm256_add_epi8(t, _mm256_add_epi8(t, t));
}
static inline __attribute__((always_inline)) __m128i st_tq1_times3_128(__m128i t) {
    return _mm_add_epi8(t, _mm_add_epi8(t, t));
}

/* u[i]: elements 32 i .. 32 i + 31 of the block */
static inline __attribute__((always_inline)) void st_tq1_0_unpack(const block_tq1_0 *w, __m256i u[8]) {
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    /* bytes 0-31: element 32n + m is trit n of byte m */
    __m256i t = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)w->qs), bias);
    _Pragma("GCC unroll 5") for (int n = 0; n < 5; n++) {
        u[n] = st_tq1_trits(t);
        if (n < 4) t = st_tq1_times3(t);
    }
    /* bytes 32-47 (element 160 + 16n + m is trit n of byte 32 + m) as the pairs of trits (0, 1),
     * (2, 3) and (4, qh): the lane beside trit 4 holds qh[j] 3^n in byte 4n + j, whose trit 0 is
     * element 240 + 4n + j */
    __m128i r = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(w->qs + 32)), _mm256_castsi256_si128(bias));
    __m256i p = _mm256_inserti128_si256(_mm256_castsi128_si256(r), st_tq1_times3_128(r), 1);
    u[5] = st_tq1_trits(p);
    p = st_tq1_times3(st_tq1_times3(p));
    u[6] = st_tq1_trits(p);
    /* qh[j] 3^n as the low bytes of 16-bit products of the zero-extended bytes */
    uint32_t qh;
    memcpy(&qh, w->qh, 4);
    __m256i hw = _mm256_cvtepu8_epi16(_mm_set1_epi32((int)qh));
    hw = _mm256_and_si256(_mm256_mullo_epi16(hw, _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27)),
                          _mm256_set1_epi16(0xff));
    __m128i h = _mm_xor_si128(_mm_packus_epi16(_mm256_castsi256_si128(hw), _mm256_extracti128_si256(hw, 1)),
                              _mm256_castsi256_si128(bias));
    __m128i r81 = st_tq1_times3_128(_mm256_extracti128_si256(p, 1));
    u[7] = st_tq1_trits(_mm256_inserti128_si256(_mm256_castsi128_si256(r81), h, 1));
}

#endif
