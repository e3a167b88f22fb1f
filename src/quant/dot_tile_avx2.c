/* dot_tile_avx2.c: the AVX2 (+FMA, F16C) Q4_K and Q5_K kernels against Q8_K activations: the tile
 * kernels of dot_tile.h and the one-row kernels of the AVX2 table (dot_avx2.c points here), which
 * share one arithmetic per type so that they agree bit for bit (Q5_K is Q4_K with a fifth bit per
 * element from its qh bytes; the same scales, minimums and sums). Called only after dot.c / dot_tile.c have
 * checked the level.
 *
 * The arithmetic, per super-block b of 256 elements of weight row r and activation row j: the
 * block's exact integers
 *
 *   I = sum_s sc_s sum_{i in s} u_i a_i        M = sum_s mn_s (bsum_2s + bsum_2s+1)
 *
 * (s < 8 sub-blocks of 32; no partial sum leaves int32, so any order gives the same I and M),
 * each converted to f32 once and accumulated in block order,
 *
 *   acc = fma(I, fl(d * d_x), acc)     accm = fma(M, fl(dmin * d_x), accm)     result acc - accm,
 *
 * with no horizontal float sum: the lanes of the tile's float registers are (weight row,
 * activation row) pairs; the one-row kernel runs the same two chains in two lanes of an xmm.
 * (Q4_K's and Q5_K's AVX2 results are not held to ggml's bits, unlike the types test_ops_ggml
 * lists.)
 *
 * A tile is 4 weight rows (a shorter one repeats its last row) by up to ST_DOT_MAX_NX activation
 * rows. Per pair of sub-blocks, the four rows' 32-byte nibble loads are transposed by qwords,
 * W_q = [r0.q r1.q | r2.q r3.q], so that against qword q of the activation (one broadcast load,
 * shared by the four rows) vpmaddubsw gives i16 lanes of one row each; the four qwords of a
 * sub-block then add up in i16 (8 products of at most 15 * 127 per lane) before one vpmaddwd
 * against the four rows' scales: 5 multiplies per 128 products where the one-row form needs 8
 * (a vpmaddubsw and a vpmaddwd per 32). The transposition, the nibble masks and the scales are
 * paid once per tile for all its activation rows. */
#include "quant/dot_tile.h"

#include <immintrin.h>
#include <string.h>

#include "quant/types.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

INLINE float h2f(uint16_t h) { return _cvtsh_ss(h); }
INLINE long long load_u64(const void *p) {
    long long v;
    memcpy(&v, p, 8);
    return v;
}
INLINE void prefetch_ahead(const void *p, size_t bytes) {
    const int dist = st_dot_prefetch;
    if (dist)
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + dist + o, _MM_HINT_T1);
}

/* The first 16 bytes of a Q4_K / Q5_K block, dwords [d|dmin, u0, u1, u2], in each 128-bit lane ->
 * bytes [scales 0-7, minimums 0-7] per lane: the file format's 6-bit unpacking (get_scale_min_k4:
 * scale j < 4 = u0 byte j & 63, minimum j < 4 = u1 byte j & 63; for j >= 4 the low 4 bits from u2,
 * the high 2 from the top of u0 / u1) */
INLINE __m256i header_scales2(__m256i v) {
    const __m256i u01 = _mm256_shuffle_epi32(v, 0xF9);                 /* [u0, u1, u2, u2] */
    const __m256i lo = _mm256_and_si256(u01, _mm256_set1_epi8(0x3f));  /* [scales 0-3, minimums 0-3] */
    const __m256i u22 = _mm256_srlv_epi32(_mm256_shuffle_epi32(v, 0xFF), _mm256_setr_epi32(0, 4, 0, 0, 0, 4, 0, 0));
    const __m256i hi = _mm256_or_si256(_mm256_and_si256(u22, _mm256_set1_epi8(0x0f)), /* [scales 4-7, minimums 4-7] */
                                       _mm256_and_si256(_mm256_srli_epi32(u01, 2), _mm256_set1_epi8(0x30)));
    return _mm256_unpacklo_epi32(lo, hi);
}

/* 32 bytes at byte offset o of 4 rows' blocks -> W_q = [r0.q r1.q | r2.q r3.q], q < 4: each
 * 16-byte half loaded beside its partner row's (in-lane unpacks only, no lane-crossing shuffle) */
INLINE void load_transposed(const uint8_t *const blk[4], size_t o, __m256i t[4]) {
    UNROLL for (int half = 0; half < 2; half++) {
        const __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(blk[0] + o + 16 * half))),
                                                  _mm_loadu_si128((const __m128i *)(blk[2] + o + 16 * half)), 1);
        const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(blk[1] + o + 16 * half))),
                                                  _mm_loadu_si128((const __m128i *)(blk[3] + o + 16 * half)), 1);
        t[2 * half] = _mm256_unpacklo_epi64(a, b);
        t[2 * half + 1] = _mm256_unpackhi_epi64(a, b);
    }
}

/* The first 16 bytes of 4 rows' Q4_K / Q5_K blocks (d, dmin, the 12 scale bytes) -> the rows'
 * scales as bytes [r0 x8 | r1 x8 | r2 x8 | r3 x8], their minimums as i16 [r0 | r2] and [r1 | r3],
 * and [d0 dmin0 d1 dmin1 d2 dmin2 d3 dmin3] as f32: header_scales2, two rows per lane. */
INLINE void tile_header(const uint8_t *const blk[4], __m256i *s8, __m256i *m02, __m256i *m13, __m256 *dd) {
    /* dwords per lane: [d|dmin, u0, u1, u2] */
    const __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)blk[0])),
                                              _mm_loadu_si128((const __m128i *)blk[2]), 1);
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)blk[1])),
                                              _mm_loadu_si128((const __m128i *)blk[3]), 1);
    const __m256i sm[2] = {header_scales2(a), header_scales2(b)}; /* per lane: scales, minimums */
    *s8 = _mm256_unpacklo_epi64(sm[0], sm[1]);
    const __m256i mn = _mm256_unpackhi_epi64(sm[0], sm[1]); /* [r0 mins | r1 mins || r2 mins | r3 mins] */
    *m02 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(_mm256_permute4x64_epi64(mn, 0x08)));
    *m13 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(_mm256_permute4x64_epi64(mn, 0x0D)));
    const __m256i dw = _mm256_unpacklo_epi32(a, b); /* per lane: [dd_0, dd_1, ..] of its two rows */
    *dd = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(dw, 0x08)));
}

/* A tile pair register's activation lanes from 2 activation values in lanes 0, 1
 * ([j j j+1 j+1 | j j j+1 j+1]). */
INLINE __m256 cols_ps(__m128 v) {
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), _mm256_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1));
}
/* Lanes [j r0, j r1, j+1 r0, j+1 r1 | j r2, j r3, j+1 r2, j+1 r3] of a tile's pair register to
 * out (rows ldo apart), rows m < mr, the second activation row only if it exists. */
INLINE void store_pair(__m256 v, int mr, int two, float *out, int64_t ldo) {
    float r[8];
    _mm256_storeu_ps(r, v);
    for (int m = 0; m < mr; m++) {
        const float *rm = r + (m / 2) * 4 + (m % 2);
        out[m * ldo] = rm[0];
        if (two) out[m * ldo + 1] = rm[2];
    }
}

/* ---- Q4_K and Q5_K: the one-row kernel ---- */

/* [I, J, I, J] as f32 from the 8-lane partial sums of I and J */
INLINE __m128 lane_sums2_ps(__m256i isum, __m256i msum) {
    __m256i h = _mm256_hadd_epi32(isum, msum);
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    return _mm_cvtepi32_ps(_mm_hadd_epi32(t, t));
}

/* Q5_K's fifth bits of sub-block s: bit s of each qh byte, moved to bit 4 (16-bit shifts carry
 * bits between the bytes of a word, but never into bit 4 of either) */
INLINE __m256i fifth_bit(__m256i qh, const int s) {
    const __m256i b4 = _mm256_set1_epi8(0x10);
    if (s > 4) return _mm256_and_si256(_mm256_srli_epi16(qh, s - 4), b4);
    if (s < 4) return _mm256_and_si256(_mm256_slli_epi16(qh, 4 - s), b4);
    return _mm256_and_si256(qh, b4);
}

/* Q4_K (five = 0) and Q5_K (five = 1) share everything but the block size and the fifth bits:
 * d, dmin, the 12 scale bytes, [Q5_K: qh, 32 bytes], qs, 128 bytes. */
#define KQ_BS(five) ((five) ? sizeof(block_q5_K) : sizeof(block_q4_K))
#define KQ_QS(five) ((five) ? 48 : 16)
#define KQ_QH 16

INLINE void qk_row_nx(const int five, int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m128 acc[ST_DOT_MAX_NX]; /* lane 0 acc, lane 1 accm */
    UNROLL for (int j = 0; j < nx; j++) acc[j] = _mm_setzero_ps();
    for (int64_t b = 0; b < k / QK_K; b++) {
        const uint8_t *w = (const uint8_t *)wv + (size_t)b * KQ_BS(five);
        prefetch_ahead(w, KQ_BS(five));
        const __m256i sm2 = header_scales2(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)w)));
        const __m128i sm = _mm256_castsi256_si128(sm2);
        __m256i u[8];
        const __m256i qh = five ? _mm256_loadu_si256((const __m256i *)(w + KQ_QH)) : _mm256_setzero_si256();
        UNROLL for (int g = 0; g < 4; g++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(w + KQ_QS(five) + 32 * g));
            u[2 * g] = _mm256_and_si256(q, m4);
            u[2 * g + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {
                u[2 * g] = _mm256_or_si256(u[2 * g], fifth_bit(qh, 2 * g));
                u[2 * g + 1] = _mm256_or_si256(u[2 * g + 1], fifth_bit(qh, 2 * g + 1));
            }
        }
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm)); /* mn_s at words 2s, 2s + 1 */
        uint32_t dh;
        memcpy(&dh, w, 4);
        const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128((int)dh)); /* [d, dmin, 0, 0] */
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_K *xb = (const block_q8_K *)((const char *)xv + (size_t)j * xs) + b;
            __m256i isum = _mm256_setzero_si256();
            UNROLL for (int s = 0; s < 8; s++) {
                __m256i p = _mm256_maddubs_epi16(u[s], _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * s)));
                /* scale byte s in every i16 lane */
                const __m256i sc = _mm256_shuffle_epi8(sm2, _mm256_set1_epi16((short)(0x8000 | s)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc));
            }
            __m256i msum = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsums), mins);
            acc[j] = _mm_fmadd_ps(lane_sums2_ps(isum, msum), _mm_mul_ps(dd, _mm_set1_ps(xb->d)), acc[j]);
        }
    }
    UNROLL for (int j = 0; j < nx; j++) out[j] = _mm_cvtss_f32(_mm_sub_ss(acc[j], _mm_movehdup_ps(acc[j])));
}

INLINE void qk_row(const int five, int64_t k, const void *w, const void *x, size_t xs, int nx, float *out) {
    for (; nx > 4; nx -= 4, x = (const char *)x + 4 * xs, out += 4) qk_row_nx(five, k, w, x, xs, 4, out);
    switch (nx) {
    case 1: qk_row_nx(five, k, w, x, xs, 1, out); break;
    case 2: qk_row_nx(five, k, w, x, xs, 2, out); break;
    case 3: qk_row_nx(five, k, w, x, xs, 3, out); break;
    default: qk_row_nx(five, k, w, x, xs, 4, out); break;
    }
}
void st_dot_q4_K_avx2(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out) {
    qk_row(0, k, w, x, xs, nx, out);
}
void st_dot_q5_K_avx2(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out) {
    qk_row(1, k, w, x, xs, nx, out);
}

/* ---- Q4_K and Q5_K: the tile kernel ---- */

/* The 8 i32 lanes [r0 r0 r1 r1 | r2 r2 r3 r3] of sum_s mn_s B_s for one activation block, from
 * its 16 bsums and the minimums as i16 [r0 | r2] and [r1 | r3]. */
INLINE __m256i tile_mins(const block_q8_K *xb, __m256i m02, __m256i m13) {
    __m256i bs = _mm256_loadu_si256((const __m256i *)xb->bsums);
    /* B_s = bsum_2s + bsum_2s+1 as [B0..B7 | B0..B7] */
    __m256i bv = _mm256_permute4x64_epi64(_mm256_hadd_epi16(bs, bs), 0x88);
    return _mm256_hadd_epi32(_mm256_madd_epi16(bv, m02), _mm256_madd_epi16(bv, m13));
}

INLINE void qk_tile(const int five, int64_t k, const char *w, size_t ws, const int mr, const char *x, size_t xs,
                    const int nx, float *out, int64_t ldo) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    /* vpshufb control: i16 lanes 0-3 of each half <- byte 0 (row 0 / 2), lanes 4-7 <- byte 8 (row 1 / 3); the
     * 0x80 bytes stay zero after adding s < 8 */
    const __m256i sc_ctrl = _mm256_setr_epi8(0, -128, 0, -128, 0, -128, 0, -128, 8, -128, 8, -128, 8, -128, 8, -128,
                                             0, -128, 0, -128, 0, -128, 0, -128, 8, -128, 8, -128, 8, -128, 8, -128);
    const char *rp[4];
    UNROLL for (int m = 0; m < 4; m++) rp[m] = w + (size_t)(m < mr ? m : mr - 1) * ws;
    const int np = (nx + 1) / 2; /* activation rows in pairs (j, j + 1), a lone last one with itself */
    __m256 acc[ST_DOT_MAX_NX / 2], accm[ST_DOT_MAX_NX / 2]; /* lanes [j r0, j r1, j+1 r0, j+1 r1 | .. r2, r3 ..] */
    UNROLL for (int t = 0; t < np; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / QK_K; b++) {
        const uint8_t *blk[4];
        UNROLL for (int m = 0; m < 4; m++) {
            blk[m] = (const uint8_t *)rp[m] + (size_t)b * KQ_BS(five);
            prefetch_ahead(blk[m], KQ_BS(five));
        }
        __m256i s8, m02, m13;
        __m256 dd;
        tile_header(blk, &s8, &m02, &m13, &dd);
        __m256i sc[8]; /* sub-block s's scales as i16 [r0 x4, r1 x4 | r2 x4, r3 x4] */
        UNROLL for (int s = 0; s < 8; s++) sc[s] = _mm256_shuffle_epi8(s8, _mm256_add_epi8(sc_ctrl, _mm256_set1_epi8((char)s)));
        __m256i th[4]; /* Q5_K: the rows' qh bytes, transposed as the nibbles are (the same element positions) */
        if (five) load_transposed(blk, KQ_QH, th);
        __m256i isum[ST_DOT_MAX_NX]; /* lanes [r0 r0 r1 r1 | r2 r2 r3 r3] */
        UNROLL for (int j = 0; j < nx; j++) isum[j] = _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) {
            __m256i tq[4];
            load_transposed(blk, KQ_QS(five) + 32 * g, tq);
            UNROLL for (int h = 0; h < 2; h++) { /* sub-block 2g + h: low nibbles, then high */
                const int s = 2 * g + h;
                __m256i wq[4];
                UNROLL for (int i = 0; i < 4; i++) {
                    wq[i] = _mm256_and_si256(h ? _mm256_srli_epi16(tq[i], 4) : tq[i], m4);
                    if (five) wq[i] = _mm256_or_si256(wq[i], fifth_bit(th[i], s));
                }
                /* four qwords' vpmaddubsw add up in i16: at most 4 x 2 x 31 x 128 = 31744 (Q5_K) */
                UNROLL for (int j = 0; j < nx; j++) {
                    const int8_t *xq = ((const block_q8_K *)(x + (size_t)j * xs) + b)->qs + 32 * s;
                    __m256i p = _mm256_maddubs_epi16(wq[0], _mm256_set1_epi64x(load_u64(xq)));
                    UNROLL for (int i = 1; i < 4; i++)
                        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(wq[i], _mm256_set1_epi64x(load_u64(xq + 8 * i))));
                    isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p, sc[s]));
                }
            }
        }
        if (nx == 1) {
            /* one activation row (decode): I and M share one register, [I0 I1 M0 M1 | I2 I3 M2 M3],
             * against [d0 d1 dmin0 dmin1 | d2 d3 dmin2 dmin3] d_x: the same products and sums */
            const block_q8_K *x0 = (const block_q8_K *)x + b;
            const __m256i im = _mm256_hadd_epi32(isum[0], tile_mins(x0, m02, m13));
            const __m256 ddx = _mm256_mul_ps(_mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(0, 2, 1, 3, 4, 6, 5, 7)),
                                             _mm256_broadcast_ss(&x0->d));
            acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(im), ddx, acc[0]);
            continue;
        }
        const __m256 dv = _mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(0, 2, 0, 2, 4, 6, 4, 6));
        const __m256 mv = _mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(1, 3, 1, 3, 5, 7, 5, 7));
        UNROLL for (int t = 0; t < np; t++) {
            const int j0 = 2 * t, j1 = 2 * t + 1 < nx ? 2 * t + 1 : 2 * t;
            const block_q8_K *x0 = (const block_q8_K *)(x + (size_t)j0 * xs) + b;
            const block_q8_K *x1 = (const block_q8_K *)(x + (size_t)j1 * xs) + b;
            const __m256 xd = cols_ps(_mm_unpacklo_ps(_mm_set_ss(x0->d), _mm_set_ss(x1->d)));
            const __m256i iv = _mm256_hadd_epi32(isum[j0], isum[j1]);
            const __m256i mn0 = tile_mins(x0, m02, m13), mn = _mm256_hadd_epi32(mn0, j1 == j0 ? mn0 : tile_mins(x1, m02, m13));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iv), _mm256_mul_ps(dv, xd), acc[t]);
            accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mn), _mm256_mul_ps(mv, xd), accm[t]);
        }
    }
    if (nx == 1) {
        /* lanes [I0 - M0, I1 - M1, .. | I2 - M2, I3 - M3, ..] */
        const __m256 r = _mm256_sub_ps(acc[0], _mm256_permute_ps(acc[0], 0x4E));
        float v[8];
        _mm256_storeu_ps(v, r);
        for (int m = 0; m < mr; m++) out[m * ldo] = v[(m / 2) * 4 + m % 2];
        return;
    }
    UNROLL for (int t = 0; t < np; t++) store_pair(_mm256_sub_ps(acc[t], accm[t]), mr, 2 * t + 1 < nx, out + 2 * t, ldo);
}

/* nx >= 2: one activation row goes to st_dot_rows_one_by_one (dot_tile.h) */
#define QK_TILE_BY_NX(five)                                                                        \
    switch (nx) {                                                                                  \
    case 2: qk_tile(five, k, w, ws, mr, x, xs, 2, out, ldo); break;                                \
    case 3: qk_tile(five, k, w, ws, mr, x, xs, 3, out, ldo); break;                                \
    case 4: qk_tile(five, k, w, ws, mr, x, xs, 4, out, ldo); break;                                \
    case 5: qk_tile(five, k, w, ws, mr, x, xs, 5, out, ldo); break;                                \
    case 6: qk_tile(five, k, w, ws, mr, x, xs, 6, out, ldo); break;                                \
    case 7: qk_tile(five, k, w, ws, mr, x, xs, 7, out, ldo); break;                                \
    default: qk_tile(five, k, w, ws, mr, x, xs, 8, out, ldo); break;                               \
    }
void st_dot_tile_q4_K_avx2(int64_t k, const void *w, size_t ws, int mr, const void *x, size_t xs, int nx, float *out,
                           int64_t ldo) {
    if (nx == 1) st_dot_rows_one_by_one(st_dot_q4_K_avx2, k, w, ws, mr, x, xs, out, ldo);
    else QK_TILE_BY_NX(0)
}
void st_dot_tile_q5_K_avx2(int64_t k, const void *w, size_t ws, int mr, const void *x, size_t xs, int nx, float *out,
                           int64_t ldo) {
    if (nx == 1) st_dot_rows_one_by_one(st_dot_q5_K_avx2, k, w, ws, mr, x, xs, out, ldo);
    else QK_TILE_BY_NX(1)
}

/* ---- Q8_0: a tile in ggml's arithmetic ----
 *
 * The AVX2 Q8_0 kernel follows ggml_vec_dot_q8_0_q8_0 bit for bit (test_ops_ggml): per block, the
 * 8 i32 lanes of sum q a over bytes 4L..4L+3 are converted and multiply-added into 8 f32 lanes
 * with fl(d * d_x); the row's result is dot_avx2.c's horizontal sum of those lanes. The tile keeps
 * that, lane for lane, for 4 weight rows x 2 activation rows at a time (8 accumulators across the
 * whole row): each weight block's load, |q| and scale serve both activation rows, each activation
 * block's load and scale all four weight rows, and with AVX-VNNI one vpdpbusd per pair (the
 * same integers) replaces the signs, vpmaddubsw and vpmaddwd. */

/* dot_avx2.c's hsum_ps: (lo + hi), then the pairs, then the last two */
INLINE float hsum8_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
/* The 8-lane tiles' results: rows m < mr of the activation row pair (j0, j0 + 1), the second one
 * only if it exists, each the horizontal sum of its accumulator */
INLINE void store_sums8(__m256 acc[4][2], const int mr, const int two, float *out, int64_t ldo) {
    for (int m = 0; m < mr; m++) {
        out[m * ldo] = hsum8_ps(acc[m][0]);
        if (two) out[m * ldo + 1] = hsum8_ps(acc[m][1]);
    }
}
/* AVX-VNNI's vpdpbusd (VEX), written out so that this file needs no -mavxvnni: only
 * st_dot_tile_q8_0_avxvnni runs it, after dot_tile.c has seen the CPU flag. */
INLINE __m256i dpbusd_vex(__m256i acc, __m256i u, __m256i s) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
    return acc;
}
/* The block's 8 lanes of sum q a (bytes 4L..4L+3). Without VNNI: |q| against a with q's signs,
 * vpmaddubsw (pair sums of 128 * 127 at most: no saturation) and vpmaddwd. With VNNI: q + 128
 * (unsigned) against a by vpdpbusd, starting from neg = -128 sum a per lane (made once per
 * activation block for all weight rows): the same integers. */
INLINE __m256i q8_0_dot(const int vnni, __m256i q, __m256i q_off, __m256i a, __m256i neg) {
    if (vnni) return dpbusd_vex(neg, q_off, a);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q)), _mm256_set1_epi16(1));
}

INLINE void q8_0_tile(const int vnni, int64_t k, const char *w, size_t ws, const int mr, const char *x, size_t xs,
                      const int nx, float *out, int64_t ldo) {
    const block_q8_0 *rp[4];
    UNROLL for (int m = 0; m < 4; m++) rp[m] = (const block_q8_0 *)(w + (size_t)(m < mr ? m : mr - 1) * ws);
    const int64_t nb = k / 32;
    const __m256i off = _mm256_set1_epi8((char)0x80);
    for (int j0 = 0; j0 < nx; j0 += 2) {
        const int two = j0 + 1 < nx;
        const block_q8_0 *x0 = (const block_q8_0 *)(x + (size_t)j0 * xs);
        const block_q8_0 *x1 = (const block_q8_0 *)(x + (size_t)(two ? j0 + 1 : j0) * xs);
        __m256 acc[4][2];
        UNROLL for (int m = 0; m < 4; m++) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)x0[b].qs), a1 = _mm256_loadu_si256((const __m256i *)x1[b].qs);
            __m256i n0 = _mm256_setzero_si256(), n1 = n0;
            if (vnni) {
                n0 = _mm256_sub_epi32(n0, dpbusd_vex(_mm256_setzero_si256(), off, a0));
                n1 = _mm256_sub_epi32(n1, dpbusd_vex(_mm256_setzero_si256(), off, a1));
            }
            /* fl(d_m * d_x) for the 4 rows and the 2 activation rows, each broadcast from here */
            float sp[8];
            uint64_t dh = 0;
            UNROLL for (int m = 0; m < 4; m++) dh |= (uint64_t)rp[m][b].d << (16 * m);
            const __m128 dw = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)dh));
            const __m128 dx = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)x0[b].d | (uint32_t)x1[b].d << 16)));
            _mm256_storeu_ps(sp, _mm256_mul_ps(_mm256_set_m128(dw, dw),
                                               _mm256_set_m128(_mm_shuffle_ps(dx, dx, 0x55), _mm_shuffle_ps(dx, dx, 0))));
            UNROLL for (int m = 0; m < 4; m++) {
                if (j0 == 0 && b % 2 == 0) prefetch_ahead(&rp[m][b], 2 * sizeof rp[m][b]);
                const __m256i q = _mm256_loadu_si256((const __m256i *)rp[m][b].qs);
                const __m256i qo = vnni ? _mm256_xor_si256(q, off) : q;
                acc[m][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q8_0_dot(vnni, q, qo, a0, n0)), _mm256_broadcast_ss(&sp[m]), acc[m][0]);
                if (two)
                    acc[m][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q8_0_dot(vnni, q, qo, a1, n1)), _mm256_broadcast_ss(&sp[4 + m]), acc[m][1]);
            }
        }
        store_sums8(acc, mr, two, out + j0, ldo);
    }
}

void st_dot_tile_q8_0_avx2(int64_t k, const void *w, size_t ws, int mr, const void *x, size_t xs, int nx, float *out,
                           int64_t ldo) {
    if (nx == 1) st_dot_rows_one_by_one(st_dot_avx2[ST_TYPE_Q8_0], k, w, ws, mr, x, xs, out, ldo);
    else q8_0_tile(0, k, w, ws, mr, x, xs, nx, out, ldo);
}
void st_dot_tile_q8_0_avxvnni(int64_t k, const void *w, size_t ws, int mr, const void *x, size_t xs, int nx,
                              float *out, int64_t ldo) {
    if (nx == 1) st_dot_rows_one_by_one(st_dot_avx2[ST_TYPE_Q8_0], k, w, ws, mr, x, xs, out, ldo);
    else q8_0_tile(1, k, w, ws, mr, x, xs, nx, out, ldo);
}

/* ---- Q6_K: a tile in ggml's arithmetic ----
 *
 * The AVX2 Q6_K kernel follows ggml_vec_dot_q6_K_q8_K bit for bit (test_ops_ggml): per
 * super-block, 8 i32 lanes of sum_t sc (q a) over bytes 4L..4L+3 of each 32 elements (vpmaddubsw,
 * vpmaddwd against the pair of 16-element scales), minus 32 sum_s sc_s bsum_s from the Q8_K block
 * sums, converted and multiply-added into 8 f32 lanes with fl(d * d_x); the result is the
 * horizontal sum of dot_avx2.c. The tile keeps that lane for lane for 4 weight rows x 2
 * activation rows (8 accumulators over the whole row): each weight block is unpacked once for
 * both activation rows and each activation block is loaded once for the four weight rows. With
 * AVX-VNNI, vpdpwssd fuses each vpmaddwd with its add (the same integers). */

INLINE __m256i dpwssd_vex(__m256i acc, __m256i a, __m256i b) {
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
    return acc;
}
INLINE __m256i madd_acc(const int vnni, __m256i acc, __m256i p, __m256i sc) {
    return vnni ? dpwssd_vex(acc, p, sc) : _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
}

INLINE void q6_K_tile(const int vnni, int64_t k, const char *w, size_t ws, const int mr, const char *x, size_t xs,
                      const int nx, float *out, int64_t ldo) {
    const block_q6_K *rp[4];
    UNROLL for (int m = 0; m < 4; m++) rp[m] = (const block_q6_K *)(w + (size_t)(m < mr ? m : mr - 1) * ws);
    const int64_t nb = k / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    /* vpshufb controls: for t % 4 = i, words [2i x8 | 2i + 1 x8] of a register of 8 scales per lane */
    const __m256i ctrl[4] = {
        _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3),
        _mm256_setr_epi8(4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7),
        _mm256_setr_epi8(8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11),
        _mm256_setr_epi8(12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15,
                         14, 15, 14, 15, 14, 15)};
    for (int j0 = 0; j0 < nx; j0 += 2) {
        const int two = j0 + 1 < nx;
        const block_q8_K *x0 = (const block_q8_K *)(x + (size_t)j0 * xs);
        const block_q8_K *x1 = (const block_q8_K *)(x + (size_t)(two ? j0 + 1 : j0) * xs);
        __m256 acc[4][2];
        UNROLL for (int m = 0; m < 4; m++) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const __m256i bs0 = _mm256_loadu_si256((const __m256i *)x0[b].bsums);
            const __m256i bs1 = _mm256_loadu_si256((const __m256i *)x1[b].bsums);
            UNROLL for (int m = 0; m < 4; m++) {
                const block_q6_K *wb = &rp[m][b];
                if (j0 == 0) prefetch_ahead(wb, sizeof *wb);
                const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wb->scales));
                __m256i i0 = _mm256_setzero_si256(), i1 = i0;
                UNROLL for (int h = 0; h < 2; h++) {
                    /* scales 8h..8h+7 in both lanes */
                    const __m256i sh = h ? _mm256_permute4x64_epi64(s16, 0xEE) : _mm256_permute4x64_epi64(s16, 0x44);
                    const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h));
                    const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h + 32));
                    const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
                    UNROLL for (int i = 0; i < 4; i++) {
                        const int t = 4 * h + i;
                        __m256i u;
                        switch (i) {
                        case 0: u = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)); break;
                        case 1: u = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)); break;
                        case 2: u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)); break;
                        default:
                            u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
                            break;
                        }
                        const __m256i sc = _mm256_shuffle_epi8(sh, ctrl[i]);
                        i0 = madd_acc(vnni, i0, _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(x0[b].qs + 32 * t))), sc);
                        if (two)
                            i1 = madd_acc(vnni, i1, _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(x1[b].qs + 32 * t))), sc);
                    }
                }
                const float d = h2f(wb->d);
                i0 = _mm256_sub_epi32(i0, _mm256_slli_epi32(_mm256_madd_epi16(bs0, s16), 5));
                acc[m][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_set1_ps(d * x0[b].d), acc[m][0]);
                if (two) {
                    i1 = _mm256_sub_epi32(i1, _mm256_slli_epi32(_mm256_madd_epi16(bs1, s16), 5));
                    acc[m][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_set1_ps(d * x1[b].d), acc[m][1]);
                }
            }
        }
        store_sums8(acc, mr, two, out + j0, ldo);
    }
}

void st_dot_tile_q6_K_avx2(int64_t k, const void *w, size_t ws, int mr, const void *x, size_t xs, int nx, float *out,
                           int64_t ldo) {
    if (nx == 1) st_dot_rows_one_by_one(st_dot_avx2[ST_TYPE_Q6_K], k, w, ws, mr, x, xs, out, ldo);
    else q6_K_tile(0, k, w, ws, mr, x, xs, nx, out, ldo);
}
void st_dot_tile_q6_K_avxvnni(int64_t k, const void *w, size_t ws, int mr, const void *x, size_t xs, int nx,
                              float *out, int64_t ldo) {
    if (nx == 1) st_dot_rows_one_by_one(st_dot_avx2[ST_TYPE_Q6_K], k, w, ws, mr, x, xs, out, ldo);
    else q6_K_tile(1, k, w, ws, mr, x, xs, nx, out, ldo);
}
