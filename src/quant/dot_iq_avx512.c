/* dot_iq_avx512.c: AVX-512 (F, BW, VL, DQ, VNNI) dot products of the grid i-quants against Q8_K;
 * dot.c selects them at run time where the CPU has the set. Tested against dot_iq_ref.c.
 *
 * The AVX2 kernels' plan (dot_iq_avx2.c, on the same decoding: dot_iq_decode.h) with what AVX-512
 * adds: VNNI's vpdpwssd multiplies vpmaddubsw's i16 pairs by the sub-block scales and adds them
 * into the i32 sums in one instruction; iq2_s and iq3_s, which store their sign masks as plain
 * bits, apply them straight from the block as a mask register (a masked subtract from zero)
 * instead of spreading them into bytes; and with 32 registers all ST_DOT_MAX_NX activation rows
 * share one decoding of each weight block. The products stay 32 elements (ymm) wide: the grid
 * lookups, not the arithmetic, bound these kernels, and a zmm would need its halves joined. */
#include "quant/dot_iq.h"
#define ST_IQ_GATHER
#include "quant/dot_iq_decode.h"

/* iq2_s and iq3_s: the 32 sign bits of the 32 elements ib */
INLINE int sign_bits_at(const uint32_t type, int *off) {
    if (type == ST_TYPE_IQ2_S) { *off = 34; return 1; }
    if (type == ST_TYPE_IQ3_S) { *off = 74; return 1; }
    return 0;
}

INLINE void iq_nx512(const uint32_t type, int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const size_t bs = block_bytes(type);
    int soff = 0;
    const int bits = sign_bits_at(type, &soff);
    __m256 acc[ST_DOT_MAX_NX];
    UNROLL for (int j = 0; j < nx; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = (const uint8_t *)wv + (size_t)b * bs;
        prefetch_ahead(blk, bs);
        __m256i isum[ST_DOT_MAX_NX][2]; /* two chains: vpdpwssd's latency would serialise one */
        UNROLL for (int j = 0; j < nx; j++) isum[j][0] = isum[j][1] = _mm256_setzero_si256();
        const __m256i scales = block_scales(type, blk);
        UNROLL for (int ib = 0; ib < 8; ib++) {
            __m256i u, s, sc = scale16(scales, ib);
            decode32(type, blk, ib, &u, &s);   /* s unused (not computed) where bits */
            const __mmask32 neg = bits ? _cvtu32_mask32(load_u32(blk + soff + 4 * ib)) : 0;
            UNROLL for (int j = 0; j < nx; j++) {
                const block_q8_K *xb = (const block_q8_K *)((const char *)xv + (size_t)j * xs) + b;
                __m256i a = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * ib));
                a = bits ? _mm256_mask_sub_epi8(a, neg, _mm256_setzero_si256(), a) : _mm256_sign_epi8(a, s);
                isum[j][ib % 2] = _mm256_dpwssd_epi32(isum[j][ib % 2], _mm256_maddubs_epi16(u, a), sc);
            }
        }
        const float d = h2f(block_d(type, blk));
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_K *xb = (const block_q8_K *)((const char *)xv + (size_t)j * xs) + b;
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(isum[j][0], isum[j][1])), _mm256_set1_ps(d * xb->d), acc[j]);
        }
    }
    UNROLL for (int j = 0; j < nx; j++) out[j] = type_factor(type) * hsum_ps(acc[j]);
}

/* One exported kernel per type, for every nx up to ST_DOT_MAX_NX (32 registers). */
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
