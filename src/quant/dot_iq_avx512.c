/* dot_iq_avx512.c: AVX-512 (F, BW, VL, DQ, VNNI) dot products of the grid i-quants against Q8_K;
 * dot.c selects them at run time where the CPU has the set. Tested against dot_iq_ref.c.
 *
 * The AVX2 kernels' plan (dot_iq_avx2.c) on 64 elements per step: two 32-element pieces decoded
 * by dot_iq_decode.h make one zmm of magnitudes u; the signs become a 64-bit mask (the top bit of
 * each sign byte), applied to the activation by a masked subtract from zero (AVX-512 has no byte
 * sign instruction); vpmaddubsw makes the i16 pairs and VNNI's vpdpwssd multiplies them by the
 * sub-block scales and adds them into the i32 sums in one instruction. */
#include "quant/dot_iq.h"
#include "quant/dot_iq_decode.h"

INLINE __m512i join256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
INLINE float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

INLINE void iq_nx512(const uint32_t type, int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const size_t bs = block_bytes(type);
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc[ST_DOT_MAX_NX];
    UNROLL for (int j = 0; j < nx; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = (const uint8_t *)wv + (size_t)b * bs;
        prefetch_ahead(blk, bs);
        __m512i isum[ST_DOT_MAX_NX];
        UNROLL for (int j = 0; j < nx; j++) isum[j] = _mm512_setzero_si512();
        const __m256i scales = block_scales(type, blk), dbits = iq1_delta_bits(type, blk);
        UNROLL for (int ib = 0; ib < 8; ib += 2) {
            __m256i u0, s0, u1, s1, sc0 = scale16(scales, ib), sc1 = scale16(scales, ib + 1);
            decode32(type, blk, dbits, ib, &u0, &s0);
            decode32(type, blk, dbits, ib + 1, &u1, &s1);
            const __m512i u = join256(u0, u1), sc = join256(sc0, sc1);
            const __mmask64 neg = _mm512_movepi8_mask(join256(s0, s1));
            UNROLL for (int j = 0; j < nx; j++) {
                const block_q8_K *xb = (const block_q8_K *)((const char *)xv + (size_t)j * xs) + b;
                __m512i a = _mm512_loadu_si512((const void *)(xb->qs + 32 * ib));
                a = _mm512_mask_sub_epi8(a, neg, zero, a);
                isum[j] = _mm512_dpwssd_epi32(isum[j], _mm512_maddubs_epi16(u, a), sc);
            }
        }
        const float d = h2f(block_d(type, blk));
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_K *xb = (const block_q8_K *)((const char *)xv + (size_t)j * xs) + b;
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_set1_ps(d * xb->d), acc[j]);
        }
    }
    UNROLL for (int j = 0; j < nx; j++) out[j] = type_factor(type) * hsum512(acc[j]);
}

/* One exported kernel per type, for every nx up to ST_DOT_MAX_NX (32 zmm registers). */
#define IQ_KERNEL(name, TYPE)                                                                      \
    void st_dot_##name##_avx512(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out) { \
        switch (nx) {                                                                              \
        case 1: iq_nx512(TYPE, k, w, x, xs, 1, out); break;                                        \
        case 2: iq_nx512(TYPE, k, w, x, xs, 2, out); break;                                        \
        case 3: iq_nx512(TYPE, k, w, x, xs, 3, out); break;                                        \
        case 4: iq_nx512(TYPE, k, w, x, xs, 4, out); break;                                        \
        case 5: iq_nx512(TYPE, k, w, x, xs, 5, out); break;                                        \
        case 6: iq_nx512(TYPE, k, w, x, xs, 6, out); break;                                        \
        case 7: iq_nx512(TYPE, k, w, x, xs, 7, out); break;                                        \
        default: iq_nx512(TYPE, k, w, x, xs, 8, out); break;                                       \
        }                                                                                          \
    }
IQ_KERNEL(iq2_xxs, ST_TYPE_IQ2_XXS)
IQ_KERNEL(iq2_xs, ST_TYPE_IQ2_XS)
IQ_KERNEL(iq2_s, ST_TYPE_IQ2_S)
IQ_KERNEL(iq3_xxs, ST_TYPE_IQ3_XXS)
IQ_KERNEL(iq3_s, ST_TYPE_IQ3_S)
IQ_KERNEL(iq1_s, ST_TYPE_IQ1_S)
IQ_KERNEL(iq1_m, ST_TYPE_IQ1_M)
