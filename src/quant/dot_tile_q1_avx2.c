/* dot_tile_q1_avx2.c: the Q1_0 tile kernel of dot_tile.h with AVX2, against Q8_0 activations;
 * the one-row Q1_0 kernel of dot_avx2.c is this tile with one row, so the two give the same bits.
 * Called only after dot_tile.c / dot.c have checked the level.
 *
 * Per 32-element group a weight row's 32 sign bits become +-1 bytes (byte j of the group's word
 * spread to 8 bytes, one bit tested per byte), vpsignb moves them onto the activation bytes, and
 * vpmaddubsw / vpmaddwd with ones sum them into 8 int32 lanes. Per block of 128 and activation
 * row the four group sums take their Q8_0 scales in the block, then the weight's scale once:
 *
 *   acc += d_w * (((cvt(p0) * d_x0 + cvt(p1) * d_x1) + cvt(p2) * d_x2) + cvt(p3) * d_x3)
 *
 * (ggml's order for its AVX2 kernel), so the chain through the accumulator is one FMA per block
 * (four in the earlier one-row kernel, which bounded it at nx = 1). Every scale is a broadcast
 * load from quant.h's half table (building the four activation scales in one vector through
 * four inserts and a store cost a fifth of the one-row kernel). With more
 * than two activation rows (a prompt chunk) each weight row is run alone against all of them,
 * which expands its signs once for every row; the per-(row, activation) arithmetic is the same
 * either way. */
#include "quant/dot_tile.h"

#include <immintrin.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/types.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

INLINE float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE void tile_q1_0(int64_t k, const char *w, size_t ws, const int mr, const char *x, size_t xs, const int nx,
                      float *out, int64_t ldo) {
    const int64_t nb = k / 128;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    /* byte j of the 32-bit mask to bytes 8j..8j+7, then one bit of it per byte */
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const int dist = st_dot_prefetch;
    __m256 acc[ST_DOT_TILE_MR][ST_DOT_MAX_NX];
    UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++) acc[m][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        UNROLL for (int m = 0; m < mr; m++) {
            const block_q1_0 *wb = (const block_q1_0 *)(w + (size_t)m * ws) + b;
            if (dist && b % 4 == 0) {
                _mm_prefetch((const char *)wb + dist, _MM_HINT_T1);
                _mm_prefetch((const char *)wb + dist + 64, _MM_HINT_T1);
            }
            __m256i sgn[4]; /* +1 where the bit is set, -1 where clear */
            UNROLL for (int g = 0; g < 4; g++) {
                uint32_t q;
                memcpy(&q, wb->qs + 4 * g, 4);
                __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)q), spread);
                sgn[g] = _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), _mm256_setzero_si256()), ones8);
            }
            const __m256 d = _mm256_broadcast_ss(&st_fp16_lut[wb->d]);
            UNROLL for (int j = 0; j < nx; j++) {
                const block_q8_0 *xb = (const block_q8_0 *)(x + (size_t)j * xs) + 4 * b;
                __m256 f = _mm256_setzero_ps();
                UNROLL for (int g = 0; g < 4; g++) {
                    __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xb[g].qs), sgn[g]);
                    __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, a), ones16));
                    const __m256 dx = _mm256_broadcast_ss(&st_fp16_lut[xb[g].d]);
                    f = g ? _mm256_fmadd_ps(p, dx, f) : _mm256_mul_ps(p, dx);
                }
                acc[m][j] = _mm256_fmadd_ps(f, d, acc[m][j]);
            }
        }
    }
    UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++) out[m * ldo + j] = hsum_ps(acc[m][j]);
}

/* one weight row against up to ST_DOT_MAX_NX activation rows, nx a compile-time constant */
static void one_row(int64_t k, const char *w, const char *x, size_t xs, int nx, float *out) {
    switch (nx) {
    case 1: tile_q1_0(k, w, 0, 1, x, xs, 1, out, 1); break;
    case 2: tile_q1_0(k, w, 0, 1, x, xs, 2, out, 2); break;
    case 3: tile_q1_0(k, w, 0, 1, x, xs, 3, out, 3); break;
    case 4: tile_q1_0(k, w, 0, 1, x, xs, 4, out, 4); break;
    case 5: tile_q1_0(k, w, 0, 1, x, xs, 5, out, 5); break;
    case 6: tile_q1_0(k, w, 0, 1, x, xs, 6, out, 6); break;
    case 7: tile_q1_0(k, w, 0, 1, x, xs, 7, out, 7); break;
    default: tile_q1_0(k, w, 0, 1, x, xs, 8, out, 8); break;
    }
}

#define TILE_NX_CASES(MR)                                                                          \
    if (nx == 1) tile_q1_0(k, w, ws, MR, x, xs, 1, out, ldo);                                      \
    else tile_q1_0(k, w, ws, MR, x, xs, 2, out, ldo);

void st_dot_tile_q1_0_avx2(int64_t k, const void *wv, size_t ws, int mr, const void *xv, size_t xs, int nx, float *out,
                           int64_t ldo) {
    const char *w = wv, *x = xv;
    if (nx > 2 || mr == 1) {
        for (int m = 0; m < mr; m++) {
            float o[ST_DOT_MAX_NX];
            one_row(k, w + (size_t)m * ws, x, xs, nx, o);
            for (int j = 0; j < nx; j++) out[m * ldo + j] = o[j];
        }
        return;
    }
    switch (mr) {
    case 2: TILE_NX_CASES(2) break;
    case 3: TILE_NX_CASES(3) break;
    default: TILE_NX_CASES(4) break;
    }
}

void st_dot_q1_0_avx2(int64_t k, const void *w, const void *x, size_t x_stride, int nx, float *out) {
    one_row(k, w, x, x_stride, nx, out);
}
