/* dot_avx2.c: AVX2 (+FMA, F16C) dot products for the common types and the activation
 * quantizers, for CPUs without AVX-512. Called only after dot.c has checked st_cpu().
 *
 * Same plan as dot_avx512.c with 32-byte registers: a weight block is unpacked once into
 * unsigned bytes in element order; each activation row goes through vpmaddubsw (u8 x s8 -> i16
 * pairs) and vpmaddwd against the sub-block scale; offsets and minimums use the Q8_K block sums.
 * Every computable type has a kernel here or, for the grid i-quants, in dot_iq_avx2.c. */
#include "quant/dot.h"
#include "quant/dot_iq.h"
#include "quant/dot_tile.h"

#include <immintrin.h>
#include "quant/fp4_simd.h"
#include "quant/tq1_simd.h"
#include "quant/reduce_avx2.h"
#include "quant/quant.h"
#include "quant/ref.h"
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* One exported kernel per type; with 16 ymm registers, groups past 4 rows run as 4 + the rest. */
#define DOT_BY_NX(name)                                                                            \
    static void avx2_##name(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out) { \
        for (; nx > 4; nx -= 4, x = (const char *)x + 4 * xs, out += 4) name##_nx(k, w, x, xs, 4, out); \
        switch (nx) {                                                                              \
        case 1: name##_nx(k, w, x, xs, 1, out); break;                                             \
        case 2: name##_nx(k, w, x, xs, 2, out); break;                                             \
        case 3: name##_nx(k, w, x, xs, 3, out); break;                                             \
        default: name##_nx(k, w, x, xs, 4, out); break;                                            \
        }                                                                                          \
    }

/* a scale's half widened through quant.h's table, as ggml's AVX2 build does (two loads; vcvtph2ps
 * from a scalar is an insert and a two-uop convert, and the small blocks widen 2-4 per block) */
INLINE float h2f(uint16_t h) { return st_fp16_to_fp32_inline(h); }
/* the cache lines st_dot_prefetch bytes past [p, p + bytes) (see dot.h), into L2 (see
 * dot_avx512.c); bytes is a constant at every call, and unrolled the prefetches cost one
 * instruction each (as a loop they were a tenth of Q6_K's one-row kernel from cache) */
INLINE void prefetch_ahead(const void *p, size_t bytes) {
    const int dist = st_dot_prefetch;
    if (dist)
        UNROLL for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + dist + o, _MM_HINT_T1);
}
static const int8_t iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};
INLINE const void *row(const void *x, size_t xs, int j) { return (const char *)x + (size_t)j * xs; }
INLINE float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
INLINE uint32_t load_u32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
/* [a x8 | b x8] as i16 */
INLINE __m256i halves_i16(int a, int b) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)a)), _mm_set1_epi16((short)b), 1);
}
/* Half h of the 16 i16 sub-block scales of s16 as sc[t] = halves_i16(s_8h+2t, s_8h+2t+1), t < 4,
 * by in-lane byte shuffles of that half broadcast to both lanes (no scalar round trip) */
INLINE void spread_scales_i16(__m256i s16, int h, __m256i sc[4]) {
    /* two literal immediates: at -O0 a folded "h ? 0xEE : 0x44" is not one */
    const __m256i half = h ? _mm256_permute4x64_epi64(s16, 0xEE) : _mm256_permute4x64_epi64(s16, 0x44);
    UNROLL for (int t = 0; t < 4; t++) {
        const char i = (char)(4 * t);
        const __m256i ctrl = _mm256_setr_epi8(i, i + 1, i, i + 1, i, i + 1, i, i + 1, i, i + 1, i, i + 1, i, i + 1, i, i + 1,
                                              i + 2, i + 3, i + 2, i + 3, i + 2, i + 3, i + 2, i + 3, i + 2, i + 3, i + 2,
                                              i + 3, i + 2, i + 3, i + 2, i + 3);
        sc[t] = _mm256_shuffle_epi8(half, ctrl);
    }
}

/* isum[j] += the products of half h of Q8_K block b of activation row j with the 4 weight ymm u
 * of that half (sub-blocks 8h + 2t, 8h + 2t + 1 in u[t]), each pair under its scales sc[t] */
INLINE void add_half_products(const __m256i u[4], const __m256i sc[4], const void *xv, size_t xs, const int nx,
                              int64_t b, int h, __m256i *isum) {
    UNROLL for (int j = 0; j < nx; j++) {
        const block_q8_K *xb = (const block_q8_K *)row(xv, xs, j) + b;
        UNROLL for (int t = 0; t < 4; t++) {
            __m256i p = _mm256_maddubs_epi16(u[t], _mm256_loadu_si256((const __m256i *)(xb->qs + 128 * h + 32 * t)));
            isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p, sc[t]));
        }
    }
}

/* ---- K-quants against Q8_K ---- */

/* Q4_K's and Q5_K's AVX2 kernels (one-row and tile, one arithmetic each) are in dot_tile_avx2.c */

/* One half of 128 at a time, as Q2_K/Q3_K: its 4 weight ymm and 4 scale ymm stay in registers
 * (all 8 of each at once spilled), and the scales are spread by byte shuffles, not built from
 * scalars. The integer sums are exact, so the bits are the same in any order (test_ops_ggml
 * holds them to ggml's). */
INLINE void q6_K_nx(int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const block_q6_K *w = wv;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[ST_DOT_MAX_NX];
    UNROLL for (int j = 0; j < nx; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / QK_K; b++) {
        prefetch_ahead(&w[b], sizeof w[b]);
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[b].scales));
        __m256i isum[ST_DOT_MAX_NX]; /* from -32 sum_s scale_s bsum_s: the weights are u - 32 */
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_K *xb = (const block_q8_K *)row(xv, xs, j) + b;
            __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsums), s16);
            isum[j] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
        }
        UNROLL for (int h = 0; h < 2; h++) {
            __m256i u[4], sc[4];
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(w[b].ql + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(w[b].ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(w[b].qh + 32 * h));
            u[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
            u[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
            u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
            u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
            spread_scales_i16(s16, h, sc);
            add_half_products(u, sc, xv, xs, nx, b, h, isum);
        }
        float d = h2f(w[b].d);
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_K *xb = (const block_q8_K *)row(xv, xs, j) + b;
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_set1_ps(d * xb->d), acc[j]);
        }
    }
    UNROLL for (int j = 0; j < nx; j++) out[j] = hsum_ps(acc[j]);
}
DOT_BY_NX(q6_K)

/* ---- the 32-element types: one block per ymm, unsigned weight bytes u with value
 * d * (u - offset) [+ m]; Q8_0, IQ4_NL and MXFP4 move their weights' signs onto the activation
 * instead ---- */

INLINE __m256i nibbles_1x16(const uint8_t *q) {
    __m128i v = _mm_loadu_si128((const __m128i *)q);
    return _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1),
                            _mm256_set1_epi8(0x0F));
}
/* bit j of the 32-bit qh as 0x10 in byte j */
INLINE __m256i fifth_bits(const uint8_t *qh) {
    __m256i v = _mm256_set1_epi32((int)load_u32(qh));
    v = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
}

enum { KIND_Q8_0, KIND_Q4_0, KIND_Q4_1, KIND_Q5_0, KIND_Q5_1, KIND_IQ4_NL, KIND_MXFP4 };

INLINE size_t small_block_size(int kind) {
    switch (kind) {
    case KIND_Q8_0: return sizeof(block_q8_0);
    case KIND_Q4_0: return sizeof(block_q4_0);
    case KIND_Q4_1: return sizeof(block_q4_1);
    case KIND_Q5_0: return sizeof(block_q5_0);
    case KIND_Q5_1: return sizeof(block_q5_1);
    case KIND_MXFP4: return sizeof(block_mxfp4);
    default: return sizeof(block_iq4_nl);
    }
}
/* block b of the row against block b of each activation row: acc[j] += its products times the
 * two scales, extra[j] += m * s (the Q8_1 types) */
INLINE void small_block(int kind, const void *wv, int64_t b, const void *xv, size_t xs, const int nx, __m256 *acc,
                        float *extra) {
    const int q81 = kind == KIND_Q4_1 || kind == KIND_Q5_1;
    const size_t xbs = q81 ? sizeof(block_q8_1) : sizeof(block_q8_0), xoff = q81 ? 4 : 2;
    const __m256i ones = _mm256_set1_epi16(1), offset = _mm256_set1_epi8(kind == KIND_Q4_0 ? 8 : 16);
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128((const __m128i *)(kind == KIND_MXFP4 ? st_fp4_levels : iq4nl_levels)));
    const uint8_t *blk = (const uint8_t *)wv + (size_t)b * small_block_size(kind);
    uint16_t dh = 0, mh = 0;
    if (kind != KIND_MXFP4) memcpy(&dh, blk, 2);
    if (q81) memcpy(&mh, blk + 2, 2);
    __m256i u, lev = _mm256_setzero_si256();
    switch (kind) {
    case KIND_Q8_0: /* |q| against the activation with q's sign */
        lev = _mm256_loadu_si256((const __m256i *)(blk + 2));
        u = _mm256_sign_epi8(lev, lev);
        break;
    case KIND_Q4_0: u = nibbles_1x16(blk + 2); break;
    case KIND_Q4_1: u = nibbles_1x16(blk + 4); break;
    case KIND_Q5_0: u = _mm256_or_si256(nibbles_1x16(blk + 6), fifth_bits(blk + 2)); break;
    case KIND_Q5_1: u = _mm256_or_si256(nibbles_1x16(blk + 8), fifth_bits(blk + 4)); break;
    default: /* IQ4_NL: d then 16 bytes; MXFP4: e then 16 bytes */
        lev = _mm256_shuffle_epi8(lut, nibbles_1x16(blk + (kind == KIND_MXFP4 ? 1 : 2)));
        u = _mm256_sign_epi8(lev, lev);
        break;
    }
    float d = kind == KIND_MXFP4 ? st_e8m0_half_lut[blk[0]] : h2f(dh), m = h2f(mh);
    UNROLL for (int j = 0; j < nx; j++) {
        const char *xb = (const char *)row(xv, xs, j) + (size_t)b * xbs;
        __m256i a = _mm256_loadu_si256((const __m256i *)(xb + xoff));
        __m256i p;
        if (kind == KIND_Q8_0 || kind == KIND_IQ4_NL || kind == KIND_MXFP4) p = _mm256_maddubs_epi16(u, _mm256_sign_epi8(a, lev));
        else if (kind == KIND_Q4_0 || kind == KIND_Q5_0) /* (u - o) . a = u . a - o sum(a) */
            p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, a), _mm256_maddubs_epi16(offset, a));
        else p = _mm256_maddubs_epi16(u, a);
        uint16_t dx, sx;
        memcpy(&dx, xb, 2);
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), _mm256_set1_ps(d * h2f(dx)), acc[j]);
        if (q81) {
            memcpy(&sx, xb + 2, 2);
            extra[j] += m * h2f(sx);
        }
    }
}

/* G blocks a step (G x bs >= 136: two cache lines or more), so their prefetch is straight code,
 * not a branch per block, and the loop's own work is spread over more blocks (one cache line a
 * step measured 5% slower on Q8_0 and Q4_0); the blocks still add up in order */
INLINE void small_nx(int kind, int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const size_t bs = small_block_size(kind);
    const int G = bs <= 24 ? 8 : 4;
    const int64_t nb = k / 32;
    __m256 acc[ST_DOT_MAX_NX];
    float extra[ST_DOT_MAX_NX];
    UNROLL for (int j = 0; j < nx; j++) { acc[j] = _mm256_setzero_ps(); extra[j] = 0; }
    int64_t b = 0;
    for (; b + G <= nb; b += G) {
        prefetch_ahead((const char *)wv + (size_t)b * bs, (size_t)G * bs);
        UNROLL for (int g = 0; g < G; g++) small_block(kind, wv, b + g, xv, xs, nx, acc, extra);
    }
    if (b < nb) prefetch_ahead((const char *)wv + (size_t)b * bs, (size_t)G * bs);
    for (; b < nb; b++) small_block(kind, wv, b, xv, xs, nx, acc, extra);
    UNROLL for (int j = 0; j < nx; j++) out[j] = hsum_ps(acc[j]) + extra[j];
}
INLINE void q8_0_nx(int64_t k, const void *w, const void *x, size_t xs, const int nx, float *out) { small_nx(KIND_Q8_0, k, w, x, xs, nx, out); }
INLINE void q4_0_nx(int64_t k, const void *w, const void *x, size_t xs, const int nx, float *out) { small_nx(KIND_Q4_0, k, w, x, xs, nx, out); }
INLINE void q4_1_nx(int64_t k, const void *w, const void *x, size_t xs, const int nx, float *out) { small_nx(KIND_Q4_1, k, w, x, xs, nx, out); }
INLINE void q5_0_nx(int64_t k, const void *w, const void *x, size_t xs, const int nx, float *out) { small_nx(KIND_Q5_0, k, w, x, xs, nx, out); }
INLINE void q5_1_nx(int64_t k, const void *w, const void *x, size_t xs, const int nx, float *out) { small_nx(KIND_Q5_1, k, w, x, xs, nx, out); }
INLINE void iq4_nl_nx(int64_t k, const void *w, const void *x, size_t xs, const int nx, float *out) { small_nx(KIND_IQ4_NL, k, w, x, xs, nx, out); }
INLINE void mxfp4_nx(int64_t k, const void *w, const void *x, size_t xs, const int nx, float *out) { small_nx(KIND_MXFP4, k, w, x, xs, nx, out); }
DOT_BY_NX(q8_0)
DOT_BY_NX(q4_0)
DOT_BY_NX(mxfp4)
DOT_BY_NX(q4_1)
DOT_BY_NX(q5_0)
DOT_BY_NX(q5_1)
DOT_BY_NX(iq4_nl)

/* ---- Q2_K / Q3_K: per half of 128, 32 bytes hold element 32j + l at bits 2j of byte l; each
 * ymm is one j: sub-blocks 8h + 2j and 8h + 2j + 1 ---- */

/* the 16 six-bit scales of Q3_K minus 32, as i16: the low nibbles of bytes 0-7, then their high
 * nibbles, each dword n of four with bits 2n, 2n + 1 of bytes 8-11 above them; built in
 * registers (through memory, the 16-byte load of the scalar halves missed store forwarding) */
INLINE __m256i q3_K_scales_i16(const uint8_t *p) {
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m128i x = _mm_loadl_epi64((const __m128i *)p);
    __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
    __m128i hi = _mm_srlv_epi32(_mm_set1_epi32((int)load_u32(p + 8)), _mm_setr_epi32(0, 2, 4, 6));
    hi = _mm_slli_epi32(_mm_and_si128(hi, _mm_set1_epi8(3)), 4);
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_or_si128(lo, hi)), _mm256_set1_epi16(32));
}

INLINE void q23_K_nx(int three, int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const size_t bs = three ? sizeof(block_q3_K) : sizeof(block_q2_K);
    const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    __m256 acc[ST_DOT_MAX_NX], accm[ST_DOT_MAX_NX];
    UNROLL for (int j = 0; j < nx; j++) acc[j] = accm[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = (const uint8_t *)wv + (size_t)b * bs;
        prefetch_ahead(blk, bs);
        const block_q2_K *w2 = (const block_q2_K *)blk;
        const block_q3_K *w3 = (const block_q3_K *)blk;
        const uint8_t *qs = three ? w3->qs : w2->qs;
        __m256i s16, m16 = _mm256_setzero_si256();
        if (three) {
            s16 = q3_K_scales_i16(w3->scales);
        } else {
            __m128i raw = _mm_loadu_si128((const __m128i *)w2->scales);
            s16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(0x0F)));
            m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
        }
        __m256i hm = three ? _mm256_loadu_si256((const __m256i *)w3->hmask) : _mm256_setzero_si256();
        __m256i isum[ST_DOT_MAX_NX];
        UNROLL for (int j = 0; j < nx; j++) isum[j] = _mm256_setzero_si256();
        /* one half of 128 at a time: its 4 ymm of weights and scales stay in registers */
        UNROLL for (int h = 0; h < 2; h++) {
            __m256i u[4], sc[4];
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
            UNROLL for (int j = 0; j < 4; j++) {
                __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                if (three) { /* hmask's bit 4h + j of each byte, moved to bit 2 (its 4) */
                    const int sh = 4 * h + j - 2;
                    __m256i hb = sh > 0 ? _mm256_srli_epi16(hm, sh) : sh < 0 ? _mm256_slli_epi16(hm, -sh) : hm;
                    v = _mm256_or_si256(v, _mm256_and_si256(hb, four));
                }
                u[j] = v;
            }
            spread_scales_i16(s16, h, sc);
            add_half_products(u, sc, xv, xs, nx, b, h, isum);
        }
        float d = h2f(three ? w3->d : w2->d), dmin = three ? 0 : h2f(w2->dmin);
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_K *xb = (const block_q8_K *)row(xv, xs, j) + b;
            __m256i bsums = _mm256_loadu_si256((const __m256i *)xb->bsums);
            if (three) /* values are u - 4: take 4 * sum_s scale_s * bsum_s back out */
                isum[j] = _mm256_sub_epi32(isum[j], _mm256_slli_epi32(_mm256_madd_epi16(bsums, s16), 2));
            else
                accm[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, m16)), _mm256_set1_ps(dmin * xb->d), accm[j]);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_set1_ps(d * xb->d), acc[j]);
        }
    }
    UNROLL for (int j = 0; j < nx; j++) out[j] = hsum_ps(acc[j]) - hsum_ps(accm[j]);
}
INLINE void q2_K_nx(int64_t k, const void *w, const void *x, size_t xs, const int nx, float *out) { q23_K_nx(0, k, w, x, xs, nx, out); }
INLINE void q3_K_nx(int64_t k, const void *w, const void *x, size_t xs, const int nx, float *out) { q23_K_nx(1, k, w, x, xs, nx, out); }
DOT_BY_NX(q2_K)
DOT_BY_NX(q3_K)

/* ---- IQ4_XS: per 32-element sub-block, |level| against the activation with the level's sign ---- */
INLINE void iq4_xs_nx(int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const block_iq4_xs *w = wv;
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4nl_levels));
    __m256 acc[ST_DOT_MAX_NX];
    UNROLL for (int j = 0; j < nx; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / QK_K; b++) {
        prefetch_ahead(&w[b], sizeof w[b]);
        __m256i lev[8], u[8], sc[8];
        UNROLL for (int s = 0; s < 8; s++) {
            lev[s] = _mm256_shuffle_epi8(lut, nibbles_1x16(w[b].qs + 16 * s));
            u[s] = _mm256_sign_epi8(lev[s], lev[s]);
            int ls = ((w[b].scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((w[b].scales_h >> (2 * s)) & 3) << 4);
            sc[s] = _mm256_set1_epi16((short)(ls - 32));
        }
        float d = h2f(w[b].d);
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_K *xb = (const block_q8_K *)row(xv, xs, j) + b;
            __m256i isum = _mm256_setzero_si256();
            UNROLL for (int s = 0; s < 8; s++) {
                __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(xb->qs + 32 * s)), lev[s]);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(u[s], a), sc[s]));
            }
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * xb->d), acc[j]);
        }
    }
    UNROLL for (int j = 0; j < nx; j++) out[j] = hsum_ps(acc[j]);
}
DOT_BY_NX(iq4_xs)

/* ---- NVFP4 against Q8_0: a block is two activation blocks; sub-block s (16 elements, bytes
 * 8s..8s+7: element j in the low nibble, j + 8 in the high one) has its own UE4M3 scale ---- */

INLINE void nvfp4_nx(int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const block_nvfp4 *w = wv;
    const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0F);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)st_fp4_levels));
    __m256 acc[ST_DOT_MAX_NX];
    UNROLL for (int j = 0; j < nx; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / 64; b++) {
        if (b % 2 == 0) prefetch_ahead(&w[b], 2 * sizeof w[b]);
        /* lanes: bytes 0-7, 16-23 | 8-15, 24-31; per lane, the low and high nibbles of one
         * qword are the 16 elements of one sub-block in order */
        __m256i q = _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i *)w[b].qs), 0xD8);
        __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        /* [sub-block 0 | 1] and [2 | 3]: the two activation blocks */
        __m256i lev[2] = {_mm256_shuffle_epi8(lut, _mm256_unpacklo_epi64(lo, hi)),
                          _mm256_shuffle_epi8(lut, _mm256_unpackhi_epi64(lo, hi))};
        __m256i u[2] = {_mm256_sign_epi8(lev[0], lev[0]), _mm256_sign_epi8(lev[1], lev[1])};
        __m256 sw01 = st_ue4m3_2x4_half(w[b].d[0], w[b].d[1]), sw23 = st_ue4m3_2x4_half(w[b].d[2], w[b].d[3]);
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_0 *xb = (const block_q8_0 *)row(xv, xs, j) + 2 * b;
            UNROLL for (int g = 0; g < 2; g++) {
                __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xb[g].qs), lev[g]);
                __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(u[g], a), ones);
                __m256 s = _mm256_mul_ps(g ? sw23 : sw01, _mm256_set1_ps(h2f(xb[g].d)));
                acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, acc[j]);
            }
        }
    }
    UNROLL for (int j = 0; j < nx; j++) out[j] = hsum_ps(acc[j]);
}
DOT_BY_NX(nvfp4)

/* ---- Q1_0: dot_tile_q1_avx2.c (st_dot_q1_0_avx2, the tile kernel with one weight row) ---- */

/* ---- Q2_0 against Q8_0: element j is bits 2(j%4) of byte j/4; sum (q - 1) a = sum q a - sum a ---- */

INLINE void q2_0_nx(int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const block_q2_0 *w = wv;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1), m3 = _mm256_set1_epi8(3);
    __m256 acc[ST_DOT_MAX_NX];
    UNROLL for (int j = 0; j < nx; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / 64; b++) {
        if (b % 4 == 0) prefetch_ahead(&w[b], 4 * sizeof w[b]);
        /* bytes 0-7 in lane 0, 8-15 in lane 1; the four bit pairs as planes, then interleaved
         * back to element order: plane s of byte i is element 4i + s */
        __m256i q = _mm256_permute4x64_epi64(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)w[b].qs)), 0x50);
        __m256i p0 = _mm256_and_si256(q, m3), p1 = _mm256_and_si256(_mm256_srli_epi16(q, 2), m3);
        __m256i p2 = _mm256_and_si256(_mm256_srli_epi16(q, 4), m3), p3 = _mm256_and_si256(_mm256_srli_epi16(q, 6), m3);
        __m256i e01 = _mm256_unpacklo_epi8(p0, p1), e23 = _mm256_unpacklo_epi8(p2, p3);
        __m256i lo = _mm256_unpacklo_epi16(e01, e23), hi = _mm256_unpackhi_epi16(e01, e23);
        /* lo: [elements 0-15 | 32-47], hi: [16-31 | 48-63] */
        __m256i u[2] = {_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31)};
        float d = h2f(w[b].d);
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_0 *xb = (const block_q8_0 *)row(xv, xs, j) + 2 * b;
            UNROLL for (int g = 0; g < 2; g++) {
                __m256i a = _mm256_loadu_si256((const __m256i *)xb[g].qs);
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u[g], a), _mm256_maddubs_epi16(ones8, a));
                p = _mm256_madd_epi16(p, ones16);
                acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * h2f(xb[g].d)), acc[j]);
            }
        }
    }
    UNROLL for (int j = 0; j < nx; j++) out[j] = hsum_ps(acc[j]);
}
DOT_BY_NX(q2_0)

/* ---- TQ1_0 / TQ2_0 against Q8_K: weights unpack to q in 0..2 in element order (8 ymm; TQ1_0's
 * in tq1_simd.h), and sum (q - 1) a = sum q a - sum a, the last from the Q8_K block sums. The i16 sums of vpmaddubsw
 * stay small (|q a| pairs <= 508, eight of them per lane), so they add up before widening. ---- */

INLINE void tq2_0_unpack(const block_tq2_0 *w, __m256i u[8]) {
    const __m256i m3 = _mm256_set1_epi8(3);
    UNROLL for (int h = 0; h < 2; h++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * h));
        UNROLL for (int l = 0; l < 4; l++) u[4 * h + l] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * l), m3);
    }
}

INLINE void tq_nx(int one, int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const size_t bs = one ? sizeof(block_tq1_0) : sizeof(block_tq2_0);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[ST_DOT_MAX_NX];
    UNROLL for (int j = 0; j < nx; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = (const uint8_t *)wv + (size_t)b * bs;
        prefetch_ahead(blk, bs);
        __m256i u[8];
        uint16_t dh;
        if (one) {
            st_tq1_0_unpack((const block_tq1_0 *)blk, u);
            dh = ((const block_tq1_0 *)blk)->d;
        } else {
            tq2_0_unpack((const block_tq2_0 *)blk, u);
            dh = ((const block_tq2_0 *)blk)->d;
        }
        float d = h2f(dh);
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_K *xb = (const block_q8_K *)row(xv, xs, j) + b;
            __m256i s16 = _mm256_setzero_si256();
            UNROLL for (int t = 0; t < 8; t++)
                s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(u[t], _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * t))));
            __m256i bsums = _mm256_loadu_si256((const __m256i *)xb->bsums);
            __m256i isum = _mm256_madd_epi16(_mm256_sub_epi16(s16, bsums), ones16);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * xb->d), acc[j]);
        }
    }
    UNROLL for (int j = 0; j < nx; j++) out[j] = hsum_ps(acc[j]);
}
INLINE void tq1_0_nx(int64_t k, const void *w, const void *x, size_t xs, const int nx, float *out) { tq_nx(1, k, w, x, xs, nx, out); }
INLINE void tq2_0_nx(int64_t k, const void *w, const void *x, size_t xs, const int nx, float *out) { tq_nx(0, k, w, x, xs, nx, out); }
DOT_BY_NX(tq1_0)
DOT_BY_NX(tq2_0)

/* ---- float types: whole vectors, the tail one by one ---- */

INLINE __m256 load8_f32(const void *p) { return _mm256_loadu_ps(p); }
INLINE __m256 load8_f16(const void *p) { return _mm256_cvtph_ps(_mm_loadu_si128(p)); }
INLINE float one_f32(const void *p, int64_t i) { return ((const float *)p)[i]; }
INLINE float one_f16(const void *p, int64_t i) { return h2f(((const uint16_t *)p)[i]); }
INLINE float one_bf16(const void *p, int64_t i) {
    uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* BF16: 16 values a load, widened without a shuffle: the even ones are the dwords shifted up 16,
 * the odd ones the dwords with their low half cleared (vpmovzxwd runs on the one shuffle port,
 * which bounded the kernel); weights and activations split alike, so even meets even. Four
 * accumulators a row up to 2 rows (the chains of one row's FMAs bounded it too), two past that. */
INLINE void bf16_nx(int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const char *w = wv;
    const int na = nx <= 2 ? 4 : 2;
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    __m256 acc[ST_DOT_MAX_NX][4];
    UNROLL for (int j = 0; j < nx; j++) UNROLL for (int c = 0; c < 4; c++) acc[j][c] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
        prefetch_ahead(w + 2 * i, 64);
        __m256 wc[4];
        UNROLL for (int h = 0; h < 2; h++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w + 2 * (i + 16 * h)));
            wc[2 * h] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
            wc[2 * h + 1] = _mm256_castsi256_ps(_mm256_and_si256(v, hi));
        }
        UNROLL for (int j = 0; j < nx; j++) {
            const char *x = (const char *)row(xv, xs, j) + 2 * i;
            UNROLL for (int h = 0; h < 2; h++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(x + 32 * h));
                const int c0 = (2 * h) % na, c1 = (2 * h + 1) % na;
                acc[j][c0] = _mm256_fmadd_ps(wc[2 * h], _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), acc[j][c0]);
                acc[j][c1] = _mm256_fmadd_ps(wc[2 * h + 1], _mm256_castsi256_ps(_mm256_and_si256(v, hi)), acc[j][c1]);
            }
        }
    }
    UNROLL for (int j = 0; j < nx; j++) {
        float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[j][0], acc[j][1]), _mm256_add_ps(acc[j][2], acc[j][3])));
        for (int64_t t = i; t < k; t++) s += one_bf16(w, t) * one_bf16(row(xv, xs, j), t);
        out[j] = s;
    }
}

/* F32 and F16 in llama.cpp's AVX2 order (ggml_vec_dot_f32 / _f16), so that a product such as the
 * MoE router's gives its bits: four accumulators of 8 lanes over 32-element steps, added as
 * (a0 + a2) + (a1 + a3), the halves folded, two horizontal adds (reduce_avx2.h); the k % 32 rest
 * one by one. The activations are f32 for both (F16's form ST_ACT_F16X holds f16 values); the
 * tile kernels of dot_tile_float_avx2.c keep this order. */
#define FLOAT_KERNEL_GGML(name, esize)                                                             \
    INLINE void name##_nx(int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) { \
        const char *w = wv;                                                                        \
        __m256 acc[ST_DOT_MAX_NX][4];                                                              \
        UNROLL for (int j = 0; j < nx; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = _mm256_setzero_ps(); \
        const int64_t np = k & ~(int64_t)31;                                                       \
        for (int64_t i = 0; i < np; i += 32) {                                                     \
            if (i % 64 == 0) prefetch_ahead(w + i * esize, 64 * esize);                            \
            __m256 wc[4];                                                                          \
            UNROLL for (int c = 0; c < 4; c++) wc[c] = load8_##name(w + (i + 8 * c) * esize);       \
            UNROLL for (int j = 0; j < nx; j++) {                                                  \
                const float *x = (const float *)row(xv, xs, j) + i;                                \
                UNROLL for (int c = 0; c < 4; c++)                                                 \
                    acc[j][c] = _mm256_fmadd_ps(wc[c], _mm256_loadu_ps(x + 8 * c), acc[j][c]);     \
            }                                                                                      \
        }                                                                                          \
        UNROLL for (int j = 0; j < nx; j++) {                                                      \
            float s = ggml_reduce4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);                    \
            const float *x = (const float *)row(xv, xs, j);                                        \
            for (int64_t t = np; t < k; t++) s += one_##name(w, t) * x[t];                         \
            out[j] = s;                                                                            \
        }                                                                                          \
    }
FLOAT_KERNEL_GGML(f32, 4)
FLOAT_KERNEL_GGML(f16, 2)
DOT_BY_NX(f32)
DOT_BY_NX(f16)
DOT_BY_NX(bf16)

const st_dot_fn st_dot_avx2[ST_TYPE_COUNT] = {
    ST_DOT_IQ_ENTRIES(avx2), /* the grid i-quants: dot_iq*.c */
    [ST_TYPE_F32] = avx2_f32,     [ST_TYPE_F16] = avx2_f16,       [ST_TYPE_BF16] = avx2_bf16,
    [ST_TYPE_Q4_0] = avx2_q4_0,   [ST_TYPE_Q4_1] = avx2_q4_1,     [ST_TYPE_Q5_0] = avx2_q5_0,
    [ST_TYPE_Q5_1] = avx2_q5_1,   [ST_TYPE_Q8_0] = avx2_q8_0,     [ST_TYPE_Q2_K] = avx2_q2_K,
    [ST_TYPE_Q3_K] = avx2_q3_K,   [ST_TYPE_Q4_K] = st_dot_q4_K_avx2,     [ST_TYPE_Q5_K] = st_dot_q5_K_avx2,
    [ST_TYPE_Q6_K] = avx2_q6_K,   [ST_TYPE_IQ4_NL] = avx2_iq4_nl, [ST_TYPE_IQ4_XS] = avx2_iq4_xs,
    [ST_TYPE_Q1_0] = st_dot_q1_0_avx2,  [ST_TYPE_Q2_0] = avx2_q2_0,     [ST_TYPE_MXFP4] = avx2_mxfp4,
    [ST_TYPE_NVFP4] = avx2_nvfp4, [ST_TYPE_TQ1_0] = avx2_tq1_0,   [ST_TYPE_TQ2_0] = avx2_tq2_0,
};

/* ---- activation converters ---- */

INLINE __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
INLINE float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
/* 32 i32 in four registers -> 32 bytes in element order */
INLINE __m256i pack_i32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    __m256i abcd = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void st_act_q8_0_avx2(const float *x, void *yv, int64_t k) {
    block_q8_0 *y = yv;
    for (int64_t b = 0; b < k / 32; b++, x += 32) {
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
        UNROLL for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(x + 8 * i);
            m = _mm256_max_ps(m, abs_ps(v[i]));
        }
        const float amax = hmax_ps(m), d = amax / 127;
        const float id = amax != 0 ? 127.0f / amax : 0.0f;
        y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        __m256i q[4]; /* to nearest, ties to even (llama.cpp's x86 activation rule) */
        UNROLL for (int i = 0; i < 4; i++)
            q[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], _mm256_set1_ps(id)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        _mm256_storeu_si256((__m256i *)y[b].qs, pack_i32_to_i8(q[0], q[1], q[2], q[3]));
    }
}

void st_act_q8_K_avx2(const float *x, void *yv, int64_t k) {
    block_q8_K *y = yv;
    for (int64_t b = 0; b < k / QK_K; b++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < QK_K; i += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + i)));
        float amax = hmax_ps(m);
        if (amax == 0) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* the reference keeps the sign of the FIRST element of largest magnitude: the first lane
         * whose |x| equals amax, 8 at a time */
        float max = 0;
        const __m256 am = _mm256_set1_ps(amax);
        for (int i = 0; i < QK_K; i += 8) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + i)), am, _CMP_EQ_OQ));
            if (hit) { max = x[i + __builtin_ctz((unsigned)hit)]; break; }
        }
        const float iscale = -127.f / max;
        const __m256 s = _mm256_set1_ps(iscale);
        for (int i = 0; i < QK_K; i += 32) {
            __m256i q[4];
            UNROLL for (int t = 0; t < 4; t++) {
                q[t] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * t), s)); /* ties to even */
                q[t] = _mm256_min_epi32(q[t], _mm256_set1_epi32(127));
            }
            __m256i q8 = pack_i32_to_i8(q[0], q[1], q[2], q[3]);
            _mm256_storeu_si256((__m256i *)(y[b].qs + i), q8);
            /* the two 16-element sums of these 32 bytes */
            __m256i s16 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q8), _mm256_set1_epi16(1));
            int sums[8];
            _mm256_storeu_si256((__m256i *)sums, s16);
            y[b].bsums[i / 16] = (int16_t)(sums[0] + sums[1] + sums[2] + sums[3]);
            y[b].bsums[i / 16 + 1] = (int16_t)(sums[4] + sums[5] + sums[6] + sums[7]);
        }
        y[b].d = 1 / iscale;
    }
}

void st_act_f16x_avx2(const float *x, void *yv, int64_t k) {
    float *y = yv;
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < k; i++) y[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

void st_act_f16_avx2(const float *x, void *yv, int64_t k) {
    uint16_t *y = yv;
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < k; i++) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
