/* dot_tile_float.h: the tile kernels (dot_tile.h's form) of the float weight types F32 and F16,
 * against f32 activations: F32's own rows, F16's form ST_ACT_F16X (dot.h). A prompt chunk's
 * products on these types are bound by arithmetic, not by memory, so the kernels hold a block of
 * weight rows x activation rows in registers (dot_tile_float_avx512.c, dot_tile_float_avx2.c);
 * each result is bit for bit the one-row kernel's at the same level. A call with one activation
 * row (decode) runs the one-row kernel per weight row: nothing to share, and it streams best.
 * dot_tile.c asks st_dot_tile_float_kernel() for these two types. */
#ifndef ST_QUANT_DOT_TILE_FLOAT_H
#define ST_QUANT_DOT_TILE_FLOAT_H

#include "quant/dot_tile.h"

/* The tile kernel for F32 or F16 at st_dot_kernel(type)'s level now; NULL for other types and
 * at the scalar level. */
st_dot_tile_fn st_dot_tile_float_kernel(uint32_t type);

void st_dot_tile_f32_avx512(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride, int nx,
                            float *out, int64_t ldo);
void st_dot_tile_f16_avx512(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride, int nx,
                            float *out, int64_t ldo);
void st_dot_tile_f32_avx2(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride, int nx,
                          float *out, int64_t ldo);
void st_dot_tile_f16_avx2(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride, int nx,
                          float *out, int64_t ldo);

#endif
