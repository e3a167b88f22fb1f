/* dot_iq_decode.h: the SIMD decoding of the grid i-quants' blocks shared by dot_iq_avx2.c and
 * dot_iq_avx512.c (include it only from files compiled with AVX2 or more): 32 elements of a block
 * as two ymm of bytes, u (unsigned magnitudes) and s (bytes carrying the weights' signs), with the
 * (2s + 1) scale of each 16-element half; see dot_iq_avx2.c for how a kernel uses them. The bit
 * layouts are those of ref_iq.c, whose reference the kernels are tested against. */
#ifndef ST_QUANT_DOT_IQ_DECODE_H
#define ST_QUANT_DOT_IQ_DECODE_H

#include <immintrin.h>
#include <string.h>

#include "quant/dot.h"
#include "quant/iq_grids.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

INLINE float h2f(uint16_t h) { return _cvtsh_ss(h); }
INLINE uint32_t load_u32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
INLINE uint16_t load_u16(const void *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
INLINE float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
INLINE void prefetch_ahead(const void *p, size_t bytes) {
    const int dist = st_dot_prefetch;
    if (dist)
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + dist + o, _MM_HINT_T1);
}
/* [a x8 | b x8] as i16: the scales of two 16-element halves */
INLINE __m256i halves_i16(int a, int b) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)a)), _mm_set1_epi16((short)b), 1);
}
INLINE __m256i grid4x8(const uint64_t *g, unsigned i0, unsigned i1, unsigned i2, unsigned i3) {
    return _mm256_set_epi64x((long long)g[i3], (long long)g[i2], (long long)g[i1], (long long)g[i0]);
}
INLINE __m256i grid8x4(const uint32_t *g, const uint8_t *i, unsigned hi) { /* hi: bit t -> +256 */
    return _mm256_set_epi32((int)g[i[7] | (hi << 1 & 256)], (int)g[i[6] | (hi << 2 & 256)], (int)g[i[5] | (hi << 3 & 256)],
                            (int)g[i[4] | (hi << 4 & 256)], (int)g[i[3] | (hi << 5 & 256)], (int)g[i[2] | (hi << 6 & 256)],
                            (int)g[i[1] | (hi << 7 & 256)], (int)g[i[0] | (hi << 8 & 256)]);
}
/* +-1 bytes from four 7-bit sign indices at bits 0, 7, 14, 21 of aux */
INLINE __m256i signs_of_index(uint32_t aux) {
    return grid4x8(st_iq_sign_bytes, aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
}
/* +-1 bytes from 32 sign bits: byte i is -1 where bit i of m is set */
INLINE __m256i signs_of_bits(uint32_t m) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                            3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)m), spread);
    return _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(1));
}
/* iq1: 8 * grid + delta, the delta's sign per 8 values from bits 3 and 7 of two qh bytes (iq1_m)
 * or one sign for all 32 (iq1_s: dneg) */
INLINE void iq1_weights(__m256i g, __m256i delta, __m256i *u, __m256i *s) {
    __m256i w = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), delta);
    *u = _mm256_abs_epi8(w);
    *s = w;
}

/* The 32 elements ib of block blk: magnitudes u, signs s, per-half (2s + 1) scales sc. */
INLINE void decode32(const uint32_t type, const uint8_t *blk, int ib, __m256i *u, __m256i *s, __m256i *sc) {
    switch (type) {
    case ST_TYPE_IQ2_XXS: {
        uint32_t idx = load_u32(blk + 2 + 8 * ib), aux = load_u32(blk + 6 + 8 * ib);
        *u = grid4x8(st_iq2xxs_grid, idx & 255, (idx >> 8) & 255, (idx >> 16) & 255, idx >> 24);
        *s = signs_of_index(aux);
        *sc = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
        break;
    }
    case ST_TYPE_IQ2_XS: {
        uint64_t q;
        memcpy(&q, blk + 2 + 8 * ib, 8);
        *u = grid4x8(st_iq2xs_grid, q & 511, (q >> 16) & 511, (q >> 32) & 511, (q >> 48) & 511);
        *s = grid4x8(st_iq_sign_bytes, (q >> 9) & 127, (q >> 25) & 127, (q >> 41) & 127, q >> 57);
        unsigned sb = blk[66 + ib];
        *sc = halves_i16(2 * (sb & 15) + 1, 2 * (sb >> 4) + 1);
        break;
    }
    case ST_TYPE_IQ2_S: {
        const uint8_t *qs = blk + 2 + 4 * ib;
        unsigned qh = blk[66 + ib], sb = blk[74 + ib];
        *u = grid4x8(st_iq2s_grid, qs[0] | (qh << 8 & 0x300), qs[1] | (qh << 6 & 0x300), qs[2] | (qh << 4 & 0x300),
                     qs[3] | (qh << 2 & 0x300));
        *s = signs_of_bits(load_u32(blk + 34 + 4 * ib));
        *sc = halves_i16(2 * (sb & 15) + 1, 2 * (sb >> 4) + 1);
        break;
    }
    case ST_TYPE_IQ3_XXS: {
        uint32_t aux = load_u32(blk + 66 + 4 * ib);
        *u = grid8x4(st_iq3xxs_grid, blk + 2 + 8 * ib, 0);
        *s = signs_of_index(aux);
        *sc = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
        break;
    }
    case ST_TYPE_IQ3_S: {
        *u = grid8x4(st_iq3s_grid, blk + 2 + 8 * ib, blk[66 + ib]);
        *s = signs_of_bits(load_u32(blk + 74 + 4 * ib));
        *sc = _mm256_set1_epi16((short)(2 * ((blk[106 + ib / 2] >> (4 * (ib % 2))) & 15) + 1));
        break;
    }
    case ST_TYPE_IQ1_S: {
        const uint8_t *qs = blk + 2 + 4 * ib;
        unsigned qh = load_u16(blk + 34 + 2 * ib);
        __m256i g = grid4x8(st_iq1s_grid, qs[0] | (qh << 8 & 0x700), qs[1] | (qh << 5 & 0x700), qs[2] | (qh << 2 & 0x700),
                            qs[3] | (qh >> 1 & 0x700));
        iq1_weights(g, _mm256_set1_epi8(qh & 0x8000 ? -1 : 1), u, s);
        *sc = _mm256_set1_epi16((short)(2 * ((qh >> 12) & 7) + 1));
        break;
    }
    default: { /* ST_TYPE_IQ1_M */
        const uint8_t *qs = blk + 4 * ib;
        unsigned h0 = blk[32 + 2 * ib], h1 = blk[33 + 2 * ib], sw = load_u16(blk + 48 + 2 * (ib / 2)) >> (6 * (ib % 2));
        __m256i g = grid4x8(st_iq1s_grid, qs[0] | (h0 << 8 & 0x700), qs[1] | (h0 << 4 & 0x700), qs[2] | (h1 << 8 & 0x700),
                            qs[3] | (h1 << 4 & 0x700));
        const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                                1, 1, 1, 1, 1, 1);
        const __m256i bit = _mm256_set_epi64x((long long)0x8080808080808080ull, 0x0808080808080808ll,
                                              (long long)0x8080808080808080ull, 0x0808080808080808ll); /* bit 3, bit 7 per 8 */
        __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi16((short)(h0 | h1 << 8)), spread);
        __m256i delta = _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(1));
        iq1_weights(g, delta, u, s);
        *sc = halves_i16(2 * (sw & 7) + 1, 2 * ((sw >> 3) & 7) + 1);
        break;
    }
    }
}

INLINE size_t block_bytes(const uint32_t type) {
    switch (type) {
    case ST_TYPE_IQ2_XXS: return sizeof(block_iq2_xxs);
    case ST_TYPE_IQ2_XS: return sizeof(block_iq2_xs);
    case ST_TYPE_IQ2_S: return sizeof(block_iq2_s);
    case ST_TYPE_IQ3_XXS: return sizeof(block_iq3_xxs);
    case ST_TYPE_IQ3_S: return sizeof(block_iq3_s);
    case ST_TYPE_IQ1_S: return sizeof(block_iq1_s);
    default: return sizeof(block_iq1_m);
    }
}
INLINE uint16_t block_d(const uint32_t type, const uint8_t *blk) {
    if (type != ST_TYPE_IQ1_M) return load_u16(blk);
    uint16_t w[4];
    memcpy(w, blk + 48, 8);
    return (uint16_t)((w[0] >> 12) | ((w[1] >> 8) & 0x00f0) | ((w[2] >> 4) & 0x0f00) | (w[3] & 0xf000));
}
/* the 1/F of value = d * (2s + 1) / F * (what decode32 puts in u, s) */
INLINE float type_factor(const uint32_t type) {
    switch (type) {
    case ST_TYPE_IQ3_XXS: return 0.25f;
    case ST_TYPE_IQ3_S: return 1.0f;
    default: return 0.125f;   /* iq2 types; iq1 (8 * grid + delta) */
    }
}

#endif
