/* dot_tile_pass.h: the outer loop the AVX-512 tile kernels share (dot_tile_avx512.c,
 * dot_tile_q1_avx512.c). KERNEL(k, w, ws, mr, x, xs, nx, out, ldo) is a static inline body of a
 * tile of mr <= 4 weight rows against nx <= 4 activation rows; the driver runs it over the
 * activation rows 4 at a time, with mr and nx as compile-time constants (one body per pair). */
#ifndef ST_QUANT_DOT_TILE_PASS_H
#define ST_QUANT_DOT_TILE_PASS_H

#include <stddef.h>
#include <stdint.h>

#define ST_TILE_PASS_NX(KERNEL, MR)                                                                \
    switch (n) {                                                                                   \
    case 1: KERNEL(k, w, ws, MR, xj, xs, 1, o, ldo); break;                                        \
    case 2: KERNEL(k, w, ws, MR, xj, xs, 2, o, ldo); break;                                        \
    case 3: KERNEL(k, w, ws, MR, xj, xs, 3, o, ldo); break;                                        \
    default: KERNEL(k, w, ws, MR, xj, xs, 4, o, ldo); break;                                       \
    }

/* Defines `void NAME(k, wv, ws, mr, xv, xs, nx, out, ldo)`, dot_tile.h's tile form. */
#define ST_TILE_PASS_DRIVER(NAME, KERNEL)                                                          \
    void NAME(int64_t k, const void *wv, size_t ws, int mr, const void *xv, size_t xs, int nx,     \
              float *out, int64_t ldo) {                                                           \
        const char *w = wv;                                                                        \
        for (int j0 = 0; j0 < nx; j0 += 4) {                                                       \
            const int n = nx - j0 < 4 ? nx - j0 : 4;                                               \
            const char *xj = (const char *)xv + (size_t)j0 * xs;                                   \
            float *o = out + j0;                                                                   \
            switch (mr) {                                                                          \
            case 1: ST_TILE_PASS_NX(KERNEL, 1) break;                                              \
            case 2: ST_TILE_PASS_NX(KERNEL, 2) break;                                              \
            case 3: ST_TILE_PASS_NX(KERNEL, 3) break;                                              \
            default: ST_TILE_PASS_NX(KERNEL, 4) break;                                             \
            }                                                                                      \
        }                                                                                          \
    }

#endif
