/* dot_tile_avx512.c: the Q5_0 and Q8_0 tile kernels of dot_tile.h with AVX-512 (F/BW/VL/DQ +
 * VNNI), against Q8_0 activations. Called only after dot_tile.c has checked the level.
 *
 * The one-row kernels (dot_avx512.c) unpack a weight block once for all their activation rows but
 * pay, per block pair and per activation row, for two loads of the activation bytes, the signs or
 * the offset product, the f16 scale conversions and the scale product, around the one vpdpbusd
 * that carries the weight. Here up to ST_DOT_TILE_MR weight rows share them: per block pair, each
 * activation row's bytes, offset product and scales are made once and used against every weight
 * row of the tile. Lane for lane the integers are the same (exact int32 sums of the same four
 * products, however they are formed), the scale vector the same products (d_w * d_x, rounded to
 * f32), the accumulators take the same fused multiply-adds in block order and end in the same
 * _mm512_reduce_add_ps plus the odd block's term, so every result is bit for bit the one-row
 * kernel's. */
#include "quant/dot_tile.h"

#include <immintrin.h>
#include <string.h>

#include "quant/dot_tile_pass.h"
#include "quant/types.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")
#define TILE_NX 4 /* activation rows per pass: 4 x 4 accumulators beside the unpacked weights */

INLINE float h2f(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
INLINE __m512 halves_ps(float a, float b) { return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1); }
INLINE float hsum256_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Each kernel's accumulators: acc[m][j] over the block pairs, extra[m][j] the odd last block's
 * term; the result is their sum, as the one-row kernels end. */
#define TILE_ACCUMULATORS                                                                          \
    __m512 acc[ST_DOT_TILE_MR][TILE_NX];                                                           \
    float extra[ST_DOT_TILE_MR][TILE_NX];                                                          \
    UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++) {                      \
        acc[m][j] = _mm512_setzero_ps();                                                           \
        extra[m][j] = 0;                                                                           \
    }
#define TILE_STORE                                                                                 \
    UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++)                        \
        out[m * ldo + j] = _mm512_reduce_add_ps(acc[m][j]) + extra[m][j];

/* Blocks b and b+1 as 64 unsigned bytes (0..31) in element order: low nibbles, high nibbles, the
 * fifth bit from qh. */
INLINE __m512i unpack_pair(const block_q5_0 *w) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)w[0].qs)),
                                        _mm_loadu_si128((const __m128i *)w[1].qs), 1);
    __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, m4)),
                                   _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), 1);
    q = _mm512_shuffle_i64x2(q, q, 0xD8);
    uint32_t h0, h1;
    memcpy(&h0, w[0].qh, 4);
    memcpy(&h1, w[1].qh, 4);
    return _mm512_or_si512(q, _mm512_maskz_mov_epi8((__mmask64)h0 | ((__mmask64)h1 << 32), _mm512_set1_epi8(0x10)));
}
INLINE __m256i unpack_one(const block_q5_0 *w) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m128i v = _mm_loadu_si128((const __m128i *)w->qs);
    __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, m4)), _mm_and_si128(_mm_srli_epi16(v, 4), m4), 1);
    uint32_t h;
    memcpy(&h, w->qh, 4);
    return _mm256_or_si256(q, _mm256_maskz_mov_epi8(h, _mm256_set1_epi8(0x10)));
}

INLINE void tile_q5_0(int64_t k, const char *w, size_t ws, const int mr, const char *x, size_t xs, const int nx,
                      float *out, int64_t ldo) {
    const int64_t nb = k / 32;
    const __m512i off = _mm512_set1_epi8(16);
    const int dist = st_dot_prefetch;
    TILE_ACCUMULATORS
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        __m512i u[ST_DOT_TILE_MR];
        __m512 sw[ST_DOT_TILE_MR];
        UNROLL for (int m = 0; m < mr; m++) {
            const block_q5_0 *wb = (const block_q5_0 *)(w + (size_t)m * ws) + b;
            if (dist) _mm_prefetch((const char *)wb + dist, _MM_HINT_T1);
            u[m] = unpack_pair(wb);
            sw[m] = halves_ps(h2f(&wb[0].d), h2f(&wb[1].d));
        }
        UNROLL for (int j = 0; j < nx; j++) {
            const char *x0 = x + (size_t)j * xs + (size_t)b * sizeof(block_q8_0), *x1 = x0 + sizeof(block_q8_0);
            const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(x0 + 2))),
                                                 _mm256_loadu_si256((const __m256i *)(x1 + 2)), 1);
            /* -16 sum(a) per lane, the start of each weight row's sum (exact in int32) */
            const __m512i o = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, a));
            const __m512 sx = halves_ps(h2f(x0), h2f(x1));
            UNROLL for (int m = 0; m < mr; m++) {
                const __m512i p = _mm512_dpbusd_epi32(o, u[m], a);
                acc[m][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw[m], sx), acc[m][j]);
            }
        }
    }
    if (b < nb) {
        __m256i u[ST_DOT_TILE_MR];
        float d[ST_DOT_TILE_MR];
        UNROLL for (int m = 0; m < mr; m++) {
            const block_q5_0 *wb = (const block_q5_0 *)(w + (size_t)m * ws) + b;
            u[m] = unpack_one(wb);
            d[m] = h2f(&wb->d);
        }
        UNROLL for (int j = 0; j < nx; j++) {
            const char *x0 = x + (size_t)j * xs + (size_t)b * sizeof(block_q8_0);
            const __m256i a = _mm256_loadu_si256((const __m256i *)(x0 + 2));
            const __m256i o = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(16), a);
            const float dx = h2f(x0);
            UNROLL for (int m = 0; m < mr; m++) {
                const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u[m], a), o);
                extra[m][j] += d[m] * dx * hsum256_ps(_mm256_cvtepi32_ps(p));
            }
        }
    }
    TILE_STORE
}

static ST_TILE_PASS_DRIVER(tile_q5_0_pass, tile_q5_0)

void st_dot_tile_q5_0_avx512(int64_t k, const void *wv, size_t ws, int mr, const void *xv, size_t xs, int nx,
                             float *out, int64_t ldo) {
    if (nx > 1) tile_q5_0_pass(k, wv, ws, mr, xv, xs, nx, out, ldo);
    else st_dot_rows_one_by_one(st_dot_kernel(ST_TYPE_Q5_0), k, wv, ws, mr, xv, xs, out, ldo);
}

/* ---- Q8_0 ----
 * dot_avx512.c's q8_0_nx takes four blocks per step (their scales converted together) and
 * multiplies |w| by the activation with w's signs, so each activation row costs, per block pair,
 * its loads, the signs, the product and (per four blocks) its scale conversion. Here w + 128
 * (unsigned) meets the activation by vpdpbusd from -128 sum a per lane, made once per activation
 * block for all weight rows: per weight row and activation row only the product, its conversion
 * and the scale product remain; the activation's loads, offset and scales serve four weight rows,
 * the weight's loads, offset and scales all the activation rows of the pass. */

/* the f16 scales of blocks b..b+3 of a Q8_0 row (weights or activations: the same block) */
INLINE __m128 scales4(const block_q8_0 *r) {
    return _mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, (short)r[3].d, (short)r[2].d, (short)r[1].d, (short)r[0].d));
}
INLINE __m512i load_pair(const block_q8_0 *r) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)r[0].qs)),
                              _mm256_loadu_si256((const __m256i *)r[1].qs), 1);
}
/* -128 sum a over each lane's four bytes (exact in int32) */
INLINE __m512i neg128_sum(__m512i a) {
    return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), a));
}

/* Blocks B, B+1 of every weight row against every activation row (xb: its blocks): u[m] = w +
 * 128, sw[m] and SX the scales in the lanes of their block. */
#define Q8_0_PAIR(B, SX)                                                                           \
    UNROLL for (int j = 0; j < nx; j++) {                                                          \
        const block_q8_0 *xb = (const block_q8_0 *)(x + (size_t)j * xs);                          \
        const __m512i a = load_pair(xb + (B)), o = neg128_sum(a);                                  \
        const __m512 sx = SX;                                                                      \
        UNROLL for (int m = 0; m < mr; m++)                                                        \
            acc[m][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(o, u[m], a)),       \
                                        _mm512_mul_ps(sw[m], sx), acc[m][j]);                      \
    }

INLINE void tile_q8_0(int64_t k, const char *w, size_t ws, const int mr, const char *x, size_t xs, const int nx,
                      float *out, int64_t ldo) {
    const int64_t nb = k / 32;
    const __m512i off = _mm512_set1_epi8((char)0x80);
    const int dist = st_dot_prefetch;
    /* lanes 0-7 take scale 0 and 8-15 scale 1 (idx01), or scales 2 and 3 (idx23) */
    const __m512i idx01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
    const __m512i idx23 = _mm512_add_epi32(idx01, _mm512_set1_epi32(2));
    TILE_ACCUMULATORS
    int64_t b = 0;
    for (; b + 3 < nb; b += 4) {
        __m128 dw[ST_DOT_TILE_MR], dx[TILE_NX];
        UNROLL for (int j = 0; j < nx; j++) dx[j] = scales4((const block_q8_0 *)(x + (size_t)j * xs) + b);
        UNROLL for (int m = 0; m < mr; m++) {
            const block_q8_0 *wb = (const block_q8_0 *)(w + (size_t)m * ws) + b;
            if (dist)
                for (size_t c = 0; c < 4 * sizeof(block_q8_0); c += 64) _mm_prefetch((const char *)wb + dist + c, _MM_HINT_T1);
            dw[m] = scales4(wb);
        }
        /* blocks b, b+1, then b+2, b+3: each accumulator in the one-row kernel's order */
        UNROLL for (int h = 0; h < 2; h++) {
            const __m512i idx = h ? idx23 : idx01;
            __m512i u[ST_DOT_TILE_MR];
            __m512 sw[ST_DOT_TILE_MR];
            UNROLL for (int m = 0; m < mr; m++) {
                u[m] = _mm512_xor_si512(load_pair((const block_q8_0 *)(w + (size_t)m * ws) + b + 2 * h), off);
                sw[m] = _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(dw[m]));
            }
            Q8_0_PAIR(b + 2 * h, _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(dx[j])))
        }
    }
    for (; b + 1 < nb; b += 2) {
        __m512i u[ST_DOT_TILE_MR];
        __m512 sw[ST_DOT_TILE_MR];
        UNROLL for (int m = 0; m < mr; m++) {
            const block_q8_0 *wb = (const block_q8_0 *)(w + (size_t)m * ws) + b;
            u[m] = _mm512_xor_si512(load_pair(wb), off);
            sw[m] = halves_ps(h2f(&wb[0].d), h2f(&wb[1].d));
        }
        Q8_0_PAIR(b, halves_ps(h2f(&xb[b].d), h2f(&xb[b + 1].d)))
    }
    if (b < nb) {
        __m256i u[ST_DOT_TILE_MR];
        float d[ST_DOT_TILE_MR];
        UNROLL for (int m = 0; m < mr; m++) {
            const block_q8_0 *wb = (const block_q8_0 *)(w + (size_t)m * ws) + b;
            u[m] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)wb->qs), _mm512_castsi512_si256(off));
            d[m] = h2f(&wb->d);
        }
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_0 *xb = (const block_q8_0 *)(x + (size_t)j * xs) + b;
            const __m256i a = _mm256_loadu_si256((const __m256i *)xb->qs);
            const __m256i o = _mm256_sub_epi32(_mm256_setzero_si256(),
                                               _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm512_castsi512_si256(off), a));
            const float dx = h2f(&xb->d);
            UNROLL for (int m = 0; m < mr; m++)
                extra[m][j] = d[m] * dx * hsum256_ps(_mm256_cvtepi32_ps(_mm256_dpbusd_epi32(o, u[m], a)));
        }
    }
    TILE_STORE
}

static ST_TILE_PASS_DRIVER(tile_q8_0_pass, tile_q8_0)

/* one activation row: st_dot_rows_one_by_one (dot_tile.h) */
void st_dot_tile_q8_0_avx512(int64_t k, const void *wv, size_t ws, int mr, const void *xv, size_t xs, int nx,
                             float *out, int64_t ldo) {
    if (nx > 1) tile_q8_0_pass(k, wv, ws, mr, xv, xs, nx, out, ldo);
    else st_dot_rows_one_by_one(st_dot_kernel(ST_TYPE_Q8_0), k, wv, ws, mr, xv, xs, out, ldo);
}
