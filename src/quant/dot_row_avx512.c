/* dot_row_avx512.c: the AVX-512 level's kernels for the 32- and 64-element block types against
 * ONE activation row (decode, nx = 1), in 256-bit registers with VNNI's vpdpbusd. dot_avx512.c's
 * kernels call them for nx = 1 and keep every other row count.
 *
 * Why 256 bits for one row: the 512-bit forms unpack two blocks a zmm and spend mask moves, lane
 * permutes and scalar fp16 converts per pair that a prompt chunk shares over its rows but one row
 * pays alone; and one 512-bit integer instruction keeps the core's 512-bit mode on, which takes
 * port 1's vector units from everything else (measured on Q8_0: the row 30% slower). Here no zmm
 * is touched, 256-bit integer ops issue on three ports, and the fp16 scales are broadcast loads
 * from quant.h's table.
 *
 * Bits: each kernel gives the bits of its 512-bit form in dot_avx512.c for that row (the tile
 * kernels and a chunk of several rows must agree with a decode of one): where the zmm form holds
 * the even blocks in lanes 0-7 and the odd ones in lanes 8-15, here they are two accumulators,
 * added in the same order, and _mm512_reduce_add_ps is rebuilt from 256/128-bit adds in its exact
 * order (reduce256). Q4_1 and Q5_1 follow ggml's one 8-lane accumulator (see small81_nx). */
#include "quant/dot_row_avx512.h"

#include <immintrin.h>
#include <string.h>
#include "quant/dot.h"
#include "quant/fp4_simd.h"
#include "quant/quant.h"
#include "quant/ref.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* see dot_avx512.c: the lines st_dot_prefetch bytes ahead, into L2; bytes is a constant */
INLINE void prefetch_ahead(const void *p, size_t bytes) {
    const int dist = st_dot_prefetch;
    if (dist)
        UNROLL for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + dist + o, _MM_HINT_T1);
}
INLINE float hsum256_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
/* = _mm512_reduce_add_ps of [lo | hi] (GCC's: halves added, then 128-bit halves, then pairs 0+2
 * and 1+3, then those two) */
INLINE float reduce256(__m256 lo, __m256 hi) { return hsum256_ps(_mm256_add_ps(lo, hi)); }
INLINE __m256 fp16_bcast(uint16_t h) { return _mm256_broadcast_ss(&st_fp16_lut[h]); }
/* a block's unaligned fields */
INLINE uint16_t load_u16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
INLINE uint32_t load_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* ---------------- Q8_0 ---------------- */

/* vpsignb takes the signs (the zmm form: a mask move and a masked subtract) */
INLINE __m256 q8_0_block(const block_q8_0 *w, const block_q8_0 *x, __m256 acc) {
    __m256i q = _mm256_loadu_si256((const __m256i *)w->qs);
    __asm__("" : "+x"(q)); /* one load for |q| and the signs (GCC folds it into both: a third
                            * more loads, most of them across cache lines, 10% of the kernel) */
    const __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)x->qs), q);
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(q), a);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(fp16_bcast(w->d), fp16_bcast(x->d)), acc);
}
void st_dot_row_q8_0_avx512(int64_t k, const void *wv, const void *xv, float *out) {
    const block_q8_0 *w = wv, *x = xv;
    const int64_t nb = k / 32;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t b = 0;
    for (; b + 7 < nb; b += 8) { /* eight blocks a step: their prefetch is straight code */
        prefetch_ahead(&w[b], 8 * sizeof(block_q8_0));
        UNROLL for (int h = 0; h < 8; h++) acc[h & 1] = q8_0_block(&w[b + h], &x[b + h], acc[h & 1]);
    }
    for (; b + 1 < nb; b += 2) {
        acc[0] = q8_0_block(&w[b], &x[b], acc[0]);
        acc[1] = q8_0_block(&w[b + 1], &x[b + 1], acc[1]);
    }
    float tail = 0;
    if (b < nb) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)w[b].qs);
        const __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)x[b].qs), q);
        const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(q), a);
        tail = st_fp16_lut[w[b].d] * st_fp16_lut[x[b].d] * hsum256_ps(_mm256_cvtepi32_ps(p));
    }
    *out = reduce256(acc[0], acc[1]) + tail;
}

/* ---------------- the 4- and 5-bit 32-element types ----------------
 * Unsigned weight bytes u with value d * (u - offset) [+ m], as dot_avx512.c's small_nx: Q4_0
 * (offset 8), Q5_0 (16), IQ4_NL and MXFP4 (their levels + 128, offset 128), Q4_1 and Q5_1
 * (offset 0, the minimum m times Q8_1's s). The integer sums are its lanes, exactly. */

enum { ROW_Q4_0, ROW_Q5_0, ROW_IQ4_NL, ROW_MXFP4, ROW_Q4_1, ROW_Q5_1 };

static const int8_t iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

INLINE size_t row_block_size(int kind) {
    switch (kind) {
    case ROW_Q4_0: return sizeof(block_q4_0);
    case ROW_Q5_0: return sizeof(block_q5_0);
    case ROW_IQ4_NL: return sizeof(block_iq4_nl);
    case ROW_MXFP4: return sizeof(block_mxfp4);
    case ROW_Q4_1: return sizeof(block_q4_1);
    default: return sizeof(block_q5_1);
    }
}
/* 16 bytes of nibbles as 32 unsigned bytes in element order (low nibbles first) */
INLINE __m256i nibbles(const uint8_t *q) {
    const __m128i v = _mm_loadu_si128((const __m128i *)q);
    return _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1),
                            _mm256_set1_epi8(0x0F));
}
/* the block's weights as unsigned bytes (the levels' tables are + 128, built once a row) */
INLINE __m256i row_unpack(int kind, const uint8_t *blk, __m256i lut) {
    switch (kind) {
    case ROW_Q4_0: return nibbles(blk + 2);
    case ROW_Q4_1: return nibbles(blk + 4);
    case ROW_IQ4_NL: return _mm256_shuffle_epi8(lut, nibbles(blk + 2));
    case ROW_MXFP4: return _mm256_shuffle_epi8(lut, nibbles(blk + 1));
    case ROW_Q5_0: return _mm256_or_si256(nibbles(blk + 6), _mm256_maskz_mov_epi8(load_u32(blk + 2), _mm256_set1_epi8(0x10)));
    default: return _mm256_or_si256(nibbles(blk + 8), _mm256_maskz_mov_epi8(load_u32(blk + 4), _mm256_set1_epi8(0x10)));
    }
}
INLINE __m256 row_d(int kind, const uint8_t *blk) {
    return kind == ROW_MXFP4 ? _mm256_broadcast_ss(&st_e8m0_half_lut[blk[0]]) : fp16_bcast(load_u16(blk));
}
INLINE int row_offset(int kind) {
    return kind == ROW_Q4_0 ? 8 : kind == ROW_Q5_0 ? 16 : kind == ROW_IQ4_NL || kind == ROW_MXFP4 ? 128 : 0;
}
INLINE __m256i row_lut(int kind) {
    const int8_t *levels = kind == ROW_MXFP4 ? st_fp4_levels : iq4nl_levels;
    return _mm256_broadcastsi128_si256(_mm_add_epi8(_mm_loadu_si128((const __m128i *)levels), _mm_set1_epi8((char)0x80)));
}
/* the integer products of block blk with the activation bytes a, offset taken out */
INLINE __m256i row_products(int kind, const uint8_t *blk, const int8_t *a8, __m256i lut) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)a8);
    __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), row_unpack(kind, blk, lut), a);
    if (row_offset(kind)) p = _mm256_sub_epi32(p, _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)row_offset(kind)), a));
    return p;
}

/* Q4_0, Q5_0, IQ4_NL, MXFP4 against Q8_0: even blocks into acc[0], odd into acc[1] */
INLINE void row_q8_0_pairs(int kind, int64_t k, const void *wv, const void *xv, float *out) {
    const size_t bs = row_block_size(kind);
    const uint8_t *w = wv;
    const block_q8_0 *x = xv;
    const __m256i lut = row_lut(kind);
    const int64_t nb = k / 32;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t b = 0;
    for (; b + 7 < nb; b += 8) { /* eight blocks (144-176 bytes) a step: a straight prefetch */
        prefetch_ahead(w + (size_t)b * bs, 8 * bs);
        UNROLL for (int h = 0; h < 8; h++) {
            const uint8_t *blk = w + (size_t)(b + h) * bs;
            const __m256i p = row_products(kind, blk, x[b + h].qs, lut);
            const __m256 s = _mm256_mul_ps(row_d(kind, blk), fp16_bcast(x[b + h].d));
            acc[h & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, acc[h & 1]);
        }
    }
    for (; b + 1 < nb; b += 2) {
        UNROLL for (int h = 0; h < 2; h++) {
            const uint8_t *blk = w + (size_t)(b + h) * bs;
            const __m256i p = row_products(kind, blk, x[b + h].qs, lut);
            const __m256 s = _mm256_mul_ps(row_d(kind, blk), fp16_bcast(x[b + h].d));
            acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, acc[h]);
        }
    }
    float tail = 0;
    if (b < nb) {
        const uint8_t *blk = w + (size_t)b * bs;
        const __m256i p = row_products(kind, blk, x[b].qs, lut);
        tail = _mm256_cvtss_f32(row_d(kind, blk)) * st_fp16_lut[x[b].d] * hsum256_ps(_mm256_cvtepi32_ps(p));
    }
    *out = reduce256(acc[0], acc[1]) + tail;
}

/* Q4_1, Q5_1 against Q8_1 in ggml's order (dot_avx512.c's small81_nx): one accumulator taking
 * each block's products in block order, the m * s terms summed one by one in a float. The chain
 * of multiply-adds (one a block) is the bound, as it is ggml's. */
INLINE void row_q8_1_chain(int kind, int64_t k, const void *wv, const void *xv, float *out) {
    const size_t bs = row_block_size(kind);
    const uint8_t *w = wv;
    const block_q8_1 *x = xv;
    const __m256i none = _mm256_setzero_si256();
    const int64_t nb = k / 32;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    int64_t b = 0;
    for (; b + 7 < nb; b += 8) {
        prefetch_ahead(w + (size_t)b * bs, 8 * bs);
        UNROLL for (int h = 0; h < 8; h++) {
            const uint8_t *blk = w + (size_t)(b + h) * bs;
            const __m256 q = _mm256_cvtepi32_ps(row_products(kind, blk, x[b + h].qs, none));
            summs += st_fp16_lut[load_u16(blk + 2)] * st_fp16_lut[x[b + h].s];
            acc = _mm256_fmadd_ps(q, _mm256_set1_ps(st_fp16_lut[load_u16(blk)] * st_fp16_lut[x[b + h].d]), acc);
        }
    }
    for (; b < nb; b++) {
        const uint8_t *blk = w + (size_t)b * bs;
        const __m256 q = _mm256_cvtepi32_ps(row_products(kind, blk, x[b].qs, none));
        summs += st_fp16_lut[load_u16(blk + 2)] * st_fp16_lut[x[b].s];
        acc = _mm256_fmadd_ps(q, _mm256_set1_ps(st_fp16_lut[load_u16(blk)] * st_fp16_lut[x[b].d]), acc);
    }
    *out = hsum256_ps(acc) + summs;
}

void st_dot_row_q4_0_avx512(int64_t k, const void *w, const void *x, float *out) { row_q8_0_pairs(ROW_Q4_0, k, w, x, out); }
void st_dot_row_q5_0_avx512(int64_t k, const void *w, const void *x, float *out) { row_q8_0_pairs(ROW_Q5_0, k, w, x, out); }
void st_dot_row_iq4_nl_avx512(int64_t k, const void *w, const void *x, float *out) { row_q8_0_pairs(ROW_IQ4_NL, k, w, x, out); }
void st_dot_row_mxfp4_avx512(int64_t k, const void *w, const void *x, float *out) { row_q8_0_pairs(ROW_MXFP4, k, w, x, out); }
void st_dot_row_q4_1_avx512(int64_t k, const void *w, const void *x, float *out) { row_q8_1_chain(ROW_Q4_1, k, w, x, out); }
void st_dot_row_q5_1_avx512(int64_t k, const void *w, const void *x, float *out) { row_q8_1_chain(ROW_Q5_1, k, w, x, out); }

/* ---------------- NVFP4 ----------------
 * A block is 64 elements in four sub-blocks of 16 (bytes 8s..8s+7: element j the low nibble, j + 8
 * the high one), each with its own UE4M3 scale. Unpacked as sub-blocks 0|2 and 1|3 (the nibbles'
 * in-lane interleave, no lane crossing); the activation is loaded to match: its halves of 16 bytes
 * from blocks 0 and 1. The zmm form holds sub-block s in lanes 4s..4s+3; here acc[0] holds sub-
 * blocks 0|2 and acc[1] 1|3, put back in its order before the reduction. */
INLINE __m256 nvfp4_pair(__m256i v, const int8_t *a0, const int8_t *a1, __m256 s, __m256 acc, __m256i lut) {
    const __m256i lev = _mm256_shuffle_epi8(lut, v);
    const __m256i a = _mm256_sign_epi8(_mm256_loadu2_m128i((const __m128i *)a1, (const __m128i *)a0), lev);
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(lev), a);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, acc);
}
INLINE void nvfp4_block(const block_nvfp4 *w, const block_q8_0 *x, __m256 acc[2], __m256i lut) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i q = _mm256_loadu_si256((const __m256i *)w->qs);
    const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    const __m256 dx = _mm256_blend_ps(fp16_bcast(x[0].d), fp16_bcast(x[1].d), 0xF0);
    const __m256 s02 = _mm256_mul_ps(st_ue4m3_2x4_half(w->d[0], w->d[2]), dx);
    const __m256 s13 = _mm256_mul_ps(st_ue4m3_2x4_half(w->d[1], w->d[3]), dx);
    acc[0] = nvfp4_pair(_mm256_unpacklo_epi64(lo, hi), x[0].qs, x[1].qs, s02, acc[0], lut);
    acc[1] = nvfp4_pair(_mm256_unpackhi_epi64(lo, hi), x[0].qs + 16, x[1].qs + 16, s13, acc[1], lut);
}
void st_dot_row_nvfp4_avx512(int64_t k, const void *wv, const void *xv, float *out) {
    const block_nvfp4 *w = wv;
    const block_q8_0 *x = xv;
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)st_fp4_levels));
    const int64_t nb = k / 64;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t b = 0;
    for (; b + 3 < nb; b += 4) { /* four blocks (144 bytes) a step: a straight prefetch */
        prefetch_ahead(&w[b], 4 * sizeof(block_nvfp4));
        UNROLL for (int h = 0; h < 4; h++) nvfp4_block(&w[b + h], &x[2 * (b + h)], acc, lut);
    }
    for (; b < nb; b++) nvfp4_block(&w[b], &x[2 * b], acc, lut);
    /* [sub 0 | sub 1] and [sub 2 | sub 3]: the zmm form's lanes 0-7 and 8-15 */
    *out = reduce256(_mm256_permute2f128_ps(acc[0], acc[1], 0x20), _mm256_permute2f128_ps(acc[0], acc[1], 0x31));
}
