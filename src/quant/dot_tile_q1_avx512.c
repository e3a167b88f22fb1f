/* dot_tile_q1_avx512.c: the Q1_0 tile kernel of dot_tile.h with AVX-512 (F/BW/VL/DQ + VNNI),
 * against Q8_0 activations; the one-row Q1_0 kernel of dot_avx512.c is this tile with one row, so
 * the two give the same bits. Called only after dot_tile.c / dot.c have checked the level.
 *
 * A Q1_0 row reads 18 bytes of weights per 128 elements but 136 bytes of Q8_0 activations, so a
 * product is bound by the activation side: its loads, its four f16 scales and their spreading over
 * the lanes. Here up to ST_DOT_TILE_MR weight rows share that work: per 128-element block and
 * activation row, the two 64-byte halves and the scale vectors are made once and used against
 * every weight row of the tile. Per weight row, a clear bit negates the activation byte (a masked
 * subtract from zero, the bits as they stand are the mask), a dot with ones sums it into 16 int32
 * lanes (lanes 0-7 one Q8_0 block, 8-15 the next), and
 *
 *   acc += d_w * (cvt(p01) * d_x01 + cvt(p23) * d_x23)
 *
 * one fused multiply-add into the accumulator per block: the dependency chain through it is one
 * FMA per 128 elements (two per block in the earlier one-row kernel, which bounded it at nx = 1). */
#include "quant/dot_tile.h"

#include <immintrin.h>
#include <string.h>

#include "quant/dot_tile_pass.h"
#include "quant/types.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")
#define TILE_NX 4 /* activation rows per pass: 4 x 4 accumulators beside the shared vectors */

INLINE __m512i load_2x256(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(a)), _mm256_loadu_si256(b), 1);
}

INLINE void tile_q1_0(int64_t k, const char *w, size_t ws, const int mr, const char *x, size_t xs, const int nx,
                      float *out, int64_t ldo) {
    const int64_t nb = k / 128;
    const __m512i ones8 = _mm512_set1_epi8(1);
    /* lanes 0-7 take scale 2h, 8-15 scale 2h + 1, of the four converted at once */
    const __m512i idx01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
    const __m512i idx23 = _mm512_add_epi32(idx01, _mm512_set1_epi32(2));
    const int dist = st_dot_prefetch;
    __m512 acc[ST_DOT_TILE_MR][TILE_NX];
    UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++) acc[m][j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __mmask64 neg[ST_DOT_TILE_MR][2];
        __m512 d[ST_DOT_TILE_MR];
        UNROLL for (int m = 0; m < mr; m++) {
            const block_q1_0 *wb = (const block_q1_0 *)(w + (size_t)m * ws) + b;
            if (dist && b % 4 == 0) {
                _mm_prefetch((const char *)wb + dist, _MM_HINT_T1);
                _mm_prefetch((const char *)wb + dist + 64, _MM_HINT_T1);
            }
            uint64_t bits[2];
            memcpy(bits, wb->qs, 16);
            neg[m][0] = (__mmask64)~bits[0];
            neg[m][1] = (__mmask64)~bits[1];
            d[m] = _mm512_cvtph_ps(_mm256_set1_epi16((short)wb->d));
        }
        UNROLL for (int j = 0; j < nx; j++) {
            const block_q8_0 *xb = (const block_q8_0 *)(x + (size_t)j * xs) + 4 * b;
            const __m512 dx = _mm512_castps128_ps512(
                _mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, (short)xb[3].d, (short)xb[2].d, (short)xb[1].d, (short)xb[0].d)));
            const __m512 dx01 = _mm512_permutexvar_ps(idx01, dx), dx23 = _mm512_permutexvar_ps(idx23, dx);
            const __m512i a0 = load_2x256(xb[0].qs, xb[1].qs), a1 = load_2x256(xb[2].qs, xb[3].qs);
            UNROLL for (int m = 0; m < mr; m++) {
                const __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones8,
                                                       _mm512_mask_sub_epi8(a0, neg[m][0], _mm512_setzero_si512(), a0));
                const __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones8,
                                                       _mm512_mask_sub_epi8(a1, neg[m][1], _mm512_setzero_si512(), a1));
                const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), dx23, _mm512_mul_ps(_mm512_cvtepi32_ps(p0), dx01));
                acc[m][j] = _mm512_fmadd_ps(f, d[m], acc[m][j]);
            }
        }
    }
    UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++) out[m * ldo + j] = _mm512_reduce_add_ps(acc[m][j]);
}

ST_TILE_PASS_DRIVER(st_dot_tile_q1_0_avx512, tile_q1_0)

void st_dot_q1_0_avx512(int64_t k, const void *w, const void *x, size_t x_stride, int nx, float *out) {
    st_dot_tile_q1_0_avx512(k, w, 0, 1, x, x_stride, nx, out, nx);
}
