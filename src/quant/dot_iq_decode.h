/* dot_iq_decode.h: the SIMD decoding of the grid i-quants' blocks shared by dot_iq_avx2.c and
 * dot_iq_avx512.c (include it only from files compiled with AVX2 or more): 32 elements of a block
 * as two ymm of bytes, u (unsigned magnitudes) and s (bytes carrying the weights' signs), and the
 * (2s + 1) scales of a block's 16-element halves; see dot_iq_avx2.c for how a kernel uses them. The bit
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
/* Four 8-byte or eight 4-byte grid entries into a ymm, as the compiler builds it from scalar
 * loads (inserts; broadcast loads and blends, which avoid the shuffle port, measured slower on a
 * Sapphire Rapids Xeon, and so did gathers in ggml's iq3_s). */
INLINE __m256i grid4x8(const uint64_t *g, unsigned i0, unsigned i1, unsigned i2, unsigned i3) {
    return _mm256_set_epi64x((long long)g[i3], (long long)g[i2], (long long)g[i1], (long long)g[i0]);
}
INLINE __m256i grid8x4(const uint32_t *g, const uint8_t *i, unsigned hi) { /* hi: bit t -> +256 */
#ifdef ST_IQ_GATHER
    __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)i));
    if (hi) idx = _mm256_or_si256(idx, _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32((int)hi), _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1)), _mm256_set1_epi32(256)));
    return _mm256_i32gather_epi32((const int *)g, idx, 4);
#else
#define G(t) (int)g[i[t] | (hi << (8 - t) & 256)]
    return _mm256_set_epi32(G(7), G(6), G(5), G(4), G(3), G(2), G(1), G(0));
#undef G
#endif
}
/* +-1 bytes from four 7-bit sign indices at bits 0, 7, 14, 21 of aux */
INLINE __m256i signs_of_index(uint32_t aux) {
    return grid4x8(st_iq_sign_bytes, aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
}
/* +-1 bytes from 32 sign bits at p: byte i is -1 where bit i is set */
INLINE __m256i signs_of_bits(const uint8_t *p) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                            3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)load_u32(p)), spread);
    return _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(1));
}
/* The (2s + 1) of the 16 sub-blocks of 16 of a block, one byte each in element order, in both
 * lanes of a ymm; scale16(v, ib) then spreads those of the 32 elements ib over their i16 pairs. */
INLINE __m256i block_scales(const uint32_t type, const uint8_t *blk) {
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m128i v; /* the 16 scale fields s, one byte each */
    switch (type) {
    case ST_TYPE_IQ2_XS: case ST_TYPE_IQ2_S: { /* a byte per 32: two nibbles */
        __m128i x = _mm_loadl_epi64((const __m128i *)(blk + (type == ST_TYPE_IQ2_XS ? 66 : 74)));
        v = _mm_unpacklo_epi8(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
        break;
    }
    case ST_TYPE_IQ3_S: { /* a nibble per 32 */
        __m128i x = _mm_cvtsi32_si128((int)load_u32(blk + 106));
        x = _mm_unpacklo_epi8(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
        v = _mm_unpacklo_epi8(x, x);
        break;
    }
    case ST_TYPE_IQ1_S: { /* bits 12-14 of a u16 per 32 */
        __m128i x = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)(blk + 34)), 12), _mm_set1_epi16(7));
        x = _mm_packus_epi16(x, x);
        v = _mm_unpacklo_epi8(x, x);
        break;
    }
    case ST_TYPE_IQ1_M: { /* four u16 of four 3-bit fields: field t = bits 3(t%4) of word t/4 */
        __m128i w = _mm_loadl_epi64((const __m128i *)(blk + 48));
        __m128i a = _mm_shuffle_epi8(w, _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3));
        __m128i b = _mm_shuffle_epi8(w, _mm_setr_epi8(4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7));
        const __m128i up = _mm_setr_epi16(1 << 9, 1 << 6, 1 << 3, 1, 1 << 9, 1 << 6, 1 << 3, 1); /* bits 3k -> 9 */
        a = _mm_srli_epi16(_mm_mullo_epi16(a, up), 9);
        b = _mm_srli_epi16(_mm_mullo_epi16(b, up), 9);
        v = _mm_and_si128(_mm_packus_epi16(a, b), _mm_set1_epi8(7));
        break;
    }
    default: { /* iq2_xxs, iq3_xxs: the top nibble of a u32 per 32 */
        const uint8_t *p = blk + (type == ST_TYPE_IQ2_XXS ? 9 : 69);
        const int step = type == ST_TYPE_IQ2_XXS ? 8 : 4;
        uint64_t x = 0;
        UNROLL for (int ib = 0; ib < 8; ib++) x |= (uint64_t)(p[step * ib] >> 4) << (8 * ib);
        v = _mm_cvtsi64_si128((long long)x);
        v = _mm_unpacklo_epi8(v, v);
        break;
    }
    }
    v = _mm_add_epi8(_mm_add_epi8(v, v), _mm_set1_epi8(1));
    return _mm256_broadcastsi128_si256(v);
}
INLINE __m256i scale16(__m256i v, int ib) {
    const __m256i ctrl = _mm256_setr_epi8(2 * ib, -1, 2 * ib, -1, 2 * ib, -1, 2 * ib, -1, 2 * ib, -1, 2 * ib, -1, 2 * ib, -1,
                                          2 * ib, -1, 2 * ib + 1, -1, 2 * ib + 1, -1, 2 * ib + 1, -1, 2 * ib + 1, -1,
                                          2 * ib + 1, -1, 2 * ib + 1, -1, 2 * ib + 1, -1, 2 * ib + 1, -1);
    return _mm256_shuffle_epi8(v, ctrl);
}

/* The 32 elements ib of block blk: magnitudes u and signs s. */
INLINE void decode32(const uint32_t type, const uint8_t *blk, int ib, __m256i *u, __m256i *s) {
    switch (type) {
    case ST_TYPE_IQ2_XXS: {
        const uint8_t *q = blk + 2 + 8 * ib;
        *u = grid4x8(st_iq2xxs_grid, q[0], q[1], q[2], q[3]);
        *s = signs_of_index(load_u32(q + 4));
        break;
    }
    case ST_TYPE_IQ2_XS: {
        uint64_t q;
        memcpy(&q, blk + 2 + 8 * ib, 8);
        *u = grid4x8(st_iq2xs_grid, q & 511, (q >> 16) & 511, (q >> 32) & 511, (q >> 48) & 511);
        *s = grid4x8(st_iq_sign_bytes, (q >> 9) & 127, (q >> 25) & 127, (q >> 41) & 127, q >> 57);
        break;
    }
    case ST_TYPE_IQ2_S: {
        const uint8_t *qs = blk + 2 + 4 * ib;
        unsigned qh = blk[66 + ib];
        *u = grid4x8(st_iq2s_grid, qs[0] | (qh << 8 & 0x300), qs[1] | (qh << 6 & 0x300), qs[2] | (qh << 4 & 0x300),
                     qs[3] | (qh << 2 & 0x300));
        *s = signs_of_bits(blk + 34 + 4 * ib);
        break;
    }
    case ST_TYPE_IQ3_XXS:
        *u = grid8x4(st_iq3xxs_grid, blk + 2 + 8 * ib, 0);
        *s = signs_of_index(load_u32(blk + 66 + 4 * ib));
        break;
    case ST_TYPE_IQ3_S:
        *u = grid8x4(st_iq3s_grid, blk + 2 + 8 * ib, blk[66 + ib]);
        *s = signs_of_bits(blk + 74 + 4 * ib);
        break;
    case ST_TYPE_IQ1_S: { /* 8 * grid + delta straight from st_iq1s_grid8: index | delta bit << 11 */
        const uint8_t *qs = blk + 2 + 4 * ib;
        unsigned qh = load_u16(blk + 34 + 2 * ib);
        const uint64_t *g = st_iq1s_grid8 + ((qh >> 4) & 0x800); /* one delta sign for all 32 */
        __m256i w = grid4x8(g, qs[0] | (qh << 8 & 0x700), qs[1] | (qh << 5 & 0x700), qs[2] | (qh << 2 & 0x700), qs[3] | (qh >> 1 & 0x700));
        *u = _mm256_abs_epi8(w);
        *s = w;
        break;
    }
    default: { /* ST_TYPE_IQ1_M: qh's nibble per 8 is the index's top 3 bits and the delta bit */
        const uint8_t *qs = blk + 4 * ib;
        unsigned h0 = blk[32 + 2 * ib], h1 = blk[33 + 2 * ib];
        __m256i w = grid4x8(st_iq1s_grid8, qs[0] | (h0 << 8 & 0xf00), qs[1] | (h0 << 4 & 0xf00), qs[2] | (h1 << 8 & 0xf00),
                            qs[3] | (h1 << 4 & 0xf00));
        *u = _mm256_abs_epi8(w);
        *s = w;
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
