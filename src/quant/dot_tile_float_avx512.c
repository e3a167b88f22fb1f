/* dot_tile_float_avx512.c: the F32 and F16 tile kernels of dot_tile_float.h with AVX-512, against
 * f32 activations (F32's rows, F16's form ST_ACT_F16X). Called only after dot_tile_float.c has
 * checked the level.
 *
 * The one-row kernel (dot_avx512.c) keeps four accumulators per activation row: at 8 rows that
 * is 32 of them beside the weights, more than the 32 registers, and every weight vector it widens
 * feeds at most 8 multiply-adds. Here a block of up to BLOCK_MR weight rows x 8 activation rows
 * keeps one accumulator per pair (16 registers): each weight vector is widened once per call and
 * used against every activation row, each activation vector loaded once per block and used
 * against every weight row; F16 pays one conversion per 8 multiply-adds. No software prefetch:
 * a prompt's weight tile is read from L2 by all but its first group of rows.
 *
 * Same bits as the one-row kernel: its accumulator a (a < 4) of a row takes the products of the
 * elements 64 s + 16 a + lane in the order of s. Here one pass per a runs exactly that chain, the
 * four results are added as (a0 + a2) + (a1 + a3) and reduced by the same _mm512_reduce_add_ps,
 * and the k % 64 rest is added one by one in the same type (double for F16). */
#include "quant/dot_tile_float.h"

#include <immintrin.h>

#include "quant/types.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")
#define BLOCK_MR 2 /* weight rows per block: 2 x 8 accumulators, 2 weights, 1 activation */
/* one load into a register for all the block's weight rows: else the compiler folds the load
 * into every multiply-add, and the loads, not the multiply-adds, bound the loop */
#define KEEP(v) __asm__("" : "+v"(v))
#define TYPE_f32 ST_TYPE_F32
#define TYPE_f16 ST_TYPE_F16

INLINE __m512 wide_f32(const float *p) { return _mm512_loadu_ps(p); }
INLINE __m512 wide_f16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
INLINE float one_f32(const float *p, int64_t i) { return p[i]; }
INLINE float one_f16(const uint16_t *p, int64_t i) { return _cvtsh_ss(p[i]); }

/* weight rows [0, mr) x activation rows [0, nx), both compile-time constants after inlining */
#define FLOAT_BLOCK(name, etype, tail_t)                                                           \
    INLINE void name##_block(int64_t k, const char *w, size_t ws, const int mr, const char *x, size_t xs, \
                             const int nx, float *out, int64_t ldo) {                              \
        const int64_t np = k & ~(int64_t)63;                                                       \
        __m512 part[4][BLOCK_MR][ST_DOT_MAX_NX];                                                   \
        for (int a = 0; a < 4; a++) {                                                              \
            __m512 acc[BLOCK_MR][ST_DOT_MAX_NX];                                                   \
            UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++) acc[m][j] = _mm512_setzero_ps(); \
            for (int64_t i = 16 * a; i < np; i += 64) {                                            \
                __m512 wv[BLOCK_MR];                                                               \
                UNROLL for (int m = 0; m < mr; m++) {                                              \
                    const etype *wr = (const etype *)(w + (size_t)m * ws) + i;                     \
                    wv[m] = wide_##name(wr);                                                       \
                }                                                                                  \
                UNROLL for (int j = 0; j < nx; j++) {                                              \
                    __m512 xv = _mm512_loadu_ps((const float *)(x + (size_t)j * xs) + i);          \
                    KEEP(xv);                                                                      \
                    UNROLL for (int m = 0; m < mr; m++) acc[m][j] = _mm512_fmadd_ps(wv[m], xv, acc[m][j]); \
                }                                                                                  \
            }                                                                                      \
            UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++) part[a][m][j] = acc[m][j]; \
        }                                                                                          \
        UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++) {                  \
            tail_t s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(part[0][m][j], part[2][m][j]), \
                                                          _mm512_add_ps(part[1][m][j], part[3][m][j]))); \
            const etype *wr = (const etype *)(w + (size_t)m * ws);                                 \
            const float *xr = (const float *)(x + (size_t)j * xs);                                 \
            for (int64_t t = np; t < k; t++) s += (tail_t)(one_##name(wr, t) * xr[t]);             \
            out[m * ldo + j] = (float)s;                                                           \
        }                                                                                          \
    }
FLOAT_BLOCK(f32, float, float)
FLOAT_BLOCK(f16, uint16_t, double)

/* mr and nx as compile-time constants: one body per pair. */
#define BLOCK_NX_CASES(name, MR)                                                                   \
    switch (nx) {                                                                                  \
    case 2: name##_block(k, w, ws, MR, x, xs, 2, o, ldo); break;                                   \
    case 3: name##_block(k, w, ws, MR, x, xs, 3, o, ldo); break;                                   \
    case 4: name##_block(k, w, ws, MR, x, xs, 4, o, ldo); break;                                   \
    case 5: name##_block(k, w, ws, MR, x, xs, 5, o, ldo); break;                                   \
    case 6: name##_block(k, w, ws, MR, x, xs, 6, o, ldo); break;                                   \
    case 7: name##_block(k, w, ws, MR, x, xs, 7, o, ldo); break;                                   \
    default: name##_block(k, w, ws, MR, x, xs, 8, o, ldo); break;                                  \
    }
#define FLOAT_TILE(name)                                                                           \
    void st_dot_tile_##name##_avx512(int64_t k, const void *wv, size_t ws, int mr, const void *xv, size_t xs, \
                                     int nx, float *out, int64_t ldo) {                            \
        const char *x = xv;                                                                        \
        if (nx == 1) { /* decode: nothing to share, the one-row kernel streams best */             \
            for (int m = 0; m < mr; m++) st_dot_avx512[TYPE_##name](k, (const char *)wv + (size_t)m * ws, x, xs, 1, out + m * ldo); \
            return;                                                                                \
        }                                                                                          \
        for (int m0 = 0; m0 < mr; m0 += BLOCK_MR) {                                                \
            const char *w = (const char *)wv + (size_t)m0 * ws;                                    \
            float *o = out + m0 * ldo;                                                             \
            if (mr - m0 >= 2) BLOCK_NX_CASES(name, 2)                                              \
            else BLOCK_NX_CASES(name, 1)                                                           \
        }                                                                                          \
    }
FLOAT_TILE(f32)
FLOAT_TILE(f16)
