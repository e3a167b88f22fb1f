/* dot_tile_float_avx2.c: the F32 and F16 tile kernels of dot_tile_float.h with AVX2 + FMA + F16C,
 * against f32 activations (F32's rows, F16's form ST_ACT_F16X). Called only after
 * dot_tile_float.c has checked the level.
 *
 * The plan of dot_tile_float_avx512.c with 16 ymm registers: a block of up to 2 weight rows x 4
 * activation rows keeps one accumulator per pair (8 registers, beside 2 weights and 1
 * activation); each weight vector is widened once per block and used against its 4 activation
 * rows, each activation vector loaded once and used against both weight rows.
 *
 * Same bits as the one-row kernel (dot_avx2.c): its accumulator c (c < 4) of a row takes the
 * products of the elements 32 s + 8 c + lane in the order of s; here one pass per c runs that
 * chain, the four results go through the same reduction (reduce_avx2.h) and the k % 32
 * rest is added one by one in f32. */
#include "quant/dot_tile_float.h"

#include <immintrin.h>

#include "quant/reduce_avx2.h"
#include "quant/types.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")
#define BLOCK_MR 2
#define BLOCK_NX 4
/* one load into a register for both weight rows (see dot_tile_float_avx512.c) */
#define KEEP(v) __asm__("" : "+x"(v))
#define TYPE_f32 ST_TYPE_F32
#define TYPE_f16 ST_TYPE_F16

INLINE __m256 wide_f32(const float *p) { return _mm256_loadu_ps(p); }
INLINE __m256 wide_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
INLINE float one_f32(const float *p, int64_t i) { return p[i]; }
INLINE float one_f16(const uint16_t *p, int64_t i) { return _cvtsh_ss(p[i]); }
/* weight rows [0, mr) x activation rows [0, nx), both compile-time constants after inlining */
#define FLOAT_BLOCK(name, etype)                                                                   \
    INLINE void name##_block(int64_t k, const char *w, size_t ws, const int mr, const char *x, size_t xs, \
                             const int nx, float *out, int64_t ldo) {                              \
        const int64_t np = k & ~(int64_t)31;                                                       \
        __m256 part[4][BLOCK_MR][BLOCK_NX];                                                        \
        for (int c = 0; c < 4; c++) {                                                              \
            __m256 acc[BLOCK_MR][BLOCK_NX];                                                        \
            UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++) acc[m][j] = _mm256_setzero_ps(); \
            for (int64_t i = 8 * c; i < np; i += 32) {                                             \
                __m256 wv[BLOCK_MR];                                                               \
                UNROLL for (int m = 0; m < mr; m++) {                                              \
                    const etype *wr = (const etype *)(w + (size_t)m * ws) + i;                     \
                    wv[m] = wide_##name(wr);                                                       \
                }                                                                                  \
                UNROLL for (int j = 0; j < nx; j++) {                                              \
                    __m256 xv = _mm256_loadu_ps((const float *)(x + (size_t)j * xs) + i);          \
                    KEEP(xv);                                                                      \
                    UNROLL for (int m = 0; m < mr; m++) acc[m][j] = _mm256_fmadd_ps(wv[m], xv, acc[m][j]); \
                }                                                                                  \
            }                                                                                      \
            UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++) part[c][m][j] = acc[m][j]; \
        }                                                                                          \
        UNROLL for (int m = 0; m < mr; m++) UNROLL for (int j = 0; j < nx; j++) {                  \
            float s = ggml_reduce4(part[0][m][j], part[1][m][j], part[2][m][j], part[3][m][j]);         \
            const etype *wr = (const etype *)(w + (size_t)m * ws);                                 \
            const float *xr = (const float *)(x + (size_t)j * xs);                                 \
            for (int64_t t = np; t < k; t++) s += one_##name(wr, t) * xr[t];                       \
            out[m * ldo + j] = s;                                                                  \
        }                                                                                          \
    }
FLOAT_BLOCK(f32, float)
FLOAT_BLOCK(f16, uint16_t)

#define BLOCK_NX_CASES(name, MR)                                                                   \
    switch (n) {                                                                                   \
    case 1: name##_block(k, w, ws, MR, xj, xs, 1, o, ldo); break;                                  \
    case 2: name##_block(k, w, ws, MR, xj, xs, 2, o, ldo); break;                                  \
    case 3: name##_block(k, w, ws, MR, xj, xs, 3, o, ldo); break;                                  \
    default: name##_block(k, w, ws, MR, xj, xs, 4, o, ldo); break;                                 \
    }
#define FLOAT_TILE(name)                                                                           \
    void st_dot_tile_##name##_avx2(int64_t k, const void *wv, size_t ws, int mr, const void *xv, size_t xs, \
                                   int nx, float *out, int64_t ldo) {                              \
        if (nx == 1) { /* decode: nothing to share, the one-row kernel streams best */             \
            for (int m = 0; m < mr; m++) st_dot_avx2[TYPE_##name](k, (const char *)wv + (size_t)m * ws, xv, xs, 1, out + m * ldo); \
            return;                                                                                \
        }                                                                                          \
        for (int m0 = 0; m0 < mr; m0 += BLOCK_MR)                                                  \
            for (int j0 = 0; j0 < nx; j0 += BLOCK_NX) {                                            \
                const char *w = (const char *)wv + (size_t)m0 * ws;                                \
                const char *xj = (const char *)xv + (size_t)j0 * xs;                               \
                const int n = nx - j0 < BLOCK_NX ? nx - j0 : BLOCK_NX;                             \
                float *o = out + m0 * ldo + j0;                                                    \
                if (mr - m0 >= 2) BLOCK_NX_CASES(name, 2)                                          \
                else BLOCK_NX_CASES(name, 1)                                                       \
            }                                                                                      \
    }
FLOAT_TILE(f32)
FLOAT_TILE(f16)
