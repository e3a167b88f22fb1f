/* dot_repack_avx512.c: AVX-512 (F/BW/VL/DQ + VNNI) dot products for the repacked layouts of
 * repack.h, against Q8_K activations. Called only after dot.c has checked st_cpu().
 *
 * Q4_K_R: per super-block, two 64-byte loads split by a mask and a shift into 4 zmm of 64
 * consecutive unsigned elements (the file's layout needs four more lane shuffles), the scales as
 * i16 pairs from one 16-byte load (mask, broadcast, four byte shuffles), the minimums from the
 * same 16 bytes (byte shuffle, two shifts, two masks). Products and sums are those of
 * dot_avx512.c's q4_K kernel lane for lane (vpmaddubsw, vpdpwssd against the scales, the
 * minimums against Q8_K's bsums, the same float accumulators in the same order), so the results
 * are bit-identical to it. */
#include "quant/repack.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")
#define R_BLOCK 144

INLINE void prefetch_ahead(const void *p, size_t bytes) {
    const int dist = st_dot_prefetch;
    if (dist)
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + dist + o, _MM_HINT_T1);
}
INLINE float hsum256_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE void q4_K_r_nx(int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const uint8_t *w = wv;
    __m512 acc[ST_DOT_MAX_NX];
    __m256 accm[ST_DOT_MAX_NX];
    UNROLL for (int j = 0; j < nx; j++) { acc[j] = _mm512_setzero_ps(); accm[j] = _mm256_setzero_ps(); }
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m128i m3f = _mm_set_epi64x(0, 0x3f3f3f3f3f3f3f3fLL);
    /* i16 lane l of 32: scale 2t for l < 16, 2t + 1 above (byte index in the low byte, zero high) */
    const __m512i sc_ctrl = _mm512_inserti64x4(_mm512_set1_epi16((short)0x8000), _mm256_set1_epi16((short)0x8001), 1);
    /* i16 lane l of 16 (minimum j = l / 2): low byte sm[j], high byte mh[j / 2] */
    const __m256i mn_ctrl = _mm256_set_epi8(11, 7, 11, 7, 11, 6, 11, 6, 10, 5, 10, 5, 10, 4, 10, 4,
                                            9, 3, 9, 3, 9, 2, 9, 2, 8, 1, 8, 1, 8, 0, 8, 0);
    /* even j: bits 0-5 of (word >> 6); odd j: bits 0-1 of it and bits 2-5 of (word >> 10) */
    const __m256i mask_a = _mm256_set_epi16(3, 3, 0x3f, 0x3f, 3, 3, 0x3f, 0x3f, 3, 3, 0x3f, 0x3f, 3, 3, 0x3f, 0x3f);
    const __m256i mask_c = _mm256_set_epi16(0x3c, 0x3c, 0, 0, 0x3c, 0x3c, 0, 0, 0x3c, 0x3c, 0, 0, 0x3c, 0x3c, 0, 0);
    const __m256i one = _mm256_set1_epi32(1);
    for (int64_t b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = w + b * R_BLOCK;
        prefetch_ahead(blk, R_BLOCK);
        __m128i meta = _mm_loadu_si128((const __m128i *)blk);
        __m512i q0 = _mm512_loadu_si512(blk + 16), q1 = _mm512_loadu_si512(blk + 80);
        __m512i u[4], sc[4];
        u[0] = _mm512_and_si512(q0, m4);
        u[1] = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4);
        u[2] = _mm512_and_si512(q1, m4);
        u[3] = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4);
        __m512i s8 = _mm512_broadcast_i32x4(_mm_and_si128(meta, m3f));
        UNROLL for (int t = 0; t < 4; t++) sc[t] = _mm512_shuffle_epi8(s8, _mm512_add_epi16(sc_ctrl, _mm512_set1_epi16((short)(2 * t))));
        __m256i mw = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(meta), mn_ctrl);
        __m256i mins = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(mw, 6), mask_a),
                                       _mm256_and_si256(_mm256_srli_epi16(mw, 10), mask_c));
        /* [d, dmin] from the header's last 4 bytes in one conversion; times x's d per row */
        const __m128 dd = _mm_cvtph_ps(_mm_bsrli_si128(meta, 12));
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_K *xb = (const block_q8_K *)((const char *)xv + (size_t)j * xs) + b;
            __m512i isum = _mm512_madd_epi16(_mm512_maddubs_epi16(u[0], _mm512_loadu_si512(xb->qs)), sc[0]);
            UNROLL for (int t = 1; t < 4; t++) {
                __m512i p = _mm512_maddubs_epi16(u[t], _mm512_loadu_si512(xb->qs + 64 * t));
                isum = _mm512_dpwssd_epi32(isum, p, sc[t]);
            }
            const __m128 s = _mm_mul_ps(dd, _mm_set1_ps(xb->d));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_broadcastss_ps(s), acc[j]);
            __m256i m = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsums), mins);
            accm[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_permutexvar_ps(one, _mm256_castps128_ps256(s)), accm[j]);
        }
    }
    UNROLL for (int j = 0; j < nx; j++) out[j] = _mm512_reduce_add_ps(acc[j]) - hsum256_ps(accm[j]);
}

void st_dot_q4_K_r_avx512(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out) {
    switch (nx) {
    case 1: q4_K_r_nx(k, w, x, xs, 1, out); break;
    case 2: q4_K_r_nx(k, w, x, xs, 2, out); break;
    case 3: q4_K_r_nx(k, w, x, xs, 3, out); break;
    case 4: q4_K_r_nx(k, w, x, xs, 4, out); break;
    case 5: q4_K_r_nx(k, w, x, xs, 5, out); break;
    case 6: q4_K_r_nx(k, w, x, xs, 6, out); break;
    case 7: q4_K_r_nx(k, w, x, xs, 7, out); break;
    default: q4_K_r_nx(k, w, x, xs, 8, out); break;
    }
}
