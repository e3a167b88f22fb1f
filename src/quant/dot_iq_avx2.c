/* dot_iq_avx2.c: AVX2 (+FMA, F16C) dot products of the grid i-quants against Q8_K, for CPUs
 * without AVX-512 (dot.c checks st_cpu() first). Tested against dot_iq_ref.c (tests/unit/test_dot.c).
 *
 * Each 32 elements of a weight block become two ymm of bytes: u, the unsigned magnitudes, and s,
 * whose byte signs are the weights' (+-1, or the weight itself), so for an activation a,
 * maddubs(u, sign(a, s)) gives the products in i16 pairs, and madd with the sub-block's
 * (2s + 1) sums them into i32. The grid entries come from the tables of iq_grids.h, four 8-byte
 * (or eight 4-byte) lookups per 32 elements; sign masks from their 7-bit index through
 * st_iq_sign_bytes, or (iq2_s, iq3_s, whose masks are stored whole) by spreading the 32 bits of
 * the block's sign bytes over 32 bytes. The iq1 types fold their delta into the weight: 8 * grid
 * + delta is an integer in -9..9, looked up whole (st_iq1s_grid8, indexed with the delta's bit),
 * and the 1/8 is taken with the block's other factors.
 *
 * One weight block is decoded once per 32 elements for all nx activation rows (loop order: block,
 * 32 elements, rows), so a prompt's matrix product reads and decodes the weights once per group
 * of rows. */
#include "quant/dot_iq.h"
#include "quant/dot_iq_decode.h"

INLINE void iq_nx(const uint32_t type, int64_t k, const void *wv, const void *xv, size_t xs, const int nx, float *out) {
    const size_t bs = block_bytes(type);
    __m256 acc[4];
    UNROLL for (int j = 0; j < nx; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / QK_K; b++) {
        const uint8_t *blk = (const uint8_t *)wv + (size_t)b * bs;
        prefetch_ahead(blk, bs);
        __m256i isum[4];
        UNROLL for (int j = 0; j < nx; j++) isum[j] = _mm256_setzero_si256();
        const __m256i scales = block_scales(type, blk);
        UNROLL for (int ib = 0; ib < 8; ib++) {
            __m256i u, s, sc = scale16(scales, ib);
            decode32(type, blk, ib, &u, &s);
            UNROLL for (int j = 0; j < nx; j++) {
                const block_q8_K *xb = (const block_q8_K *)((const char *)xv + (size_t)j * xs) + b;
                __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(xb->qs + 32 * ib)), s);
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), sc));
            }
        }
        const float d = h2f(block_d(type, blk));
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_K *xb = (const block_q8_K *)((const char *)xv + (size_t)j * xs) + b;
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_set1_ps(d * xb->d), acc[j]);
        }
    }
    UNROLL for (int j = 0; j < nx; j++) out[j] = type_factor(type) * hsum_ps(acc[j]);
}

/* One exported kernel per type; groups past 4 rows run as 4 + the rest (16 ymm registers). */
#define IQ_KERNEL(name, TYPE)                                                                      \
    void st_dot_##name##_avx2(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out) { \
        for (; nx > 4; nx -= 4, x = (const char *)x + 4 * xs, out += 4) iq_nx(TYPE, k, w, x, xs, 4, out); \
        switch (nx) {                                                                              \
        case 1: iq_nx(TYPE, k, w, x, xs, 1, out); break;                                           \
        case 2: iq_nx(TYPE, k, w, x, xs, 2, out); break;                                           \
        case 3: iq_nx(TYPE, k, w, x, xs, 3, out); break;                                           \
        default: iq_nx(TYPE, k, w, x, xs, 4, out); break;                                          \
        }                                                                                          \
    }
IQ_KERNEL(iq2_xxs, ST_TYPE_IQ2_XXS)
IQ_KERNEL(iq2_xs, ST_TYPE_IQ2_XS)
IQ_KERNEL(iq2_s, ST_TYPE_IQ2_S)
IQ_KERNEL(iq3_xxs, ST_TYPE_IQ3_XXS)
IQ_KERNEL(iq3_s, ST_TYPE_IQ3_S)
IQ_KERNEL(iq1_s, ST_TYPE_IQ1_S)
IQ_KERNEL(iq1_m, ST_TYPE_IQ1_M)
