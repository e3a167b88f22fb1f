/* dot_tile.h: dot products of a few weight rows against a few activation rows in one call
 * ("tiles"), for the types whose one-row kernel (dot.h) spends more on per-row set-up than on the
 * products at short rows: the activation bytes, their scales and offsets are read once per tile
 * instead of once per weight row.
 *
 *   out[m * ldo + j] = sum_i w_m[i] * x_j[i]      m < mr <= ST_DOT_TILE_MR, j < nx <= ST_DOT_MAX_NX
 *   w_m = (char *)w + m * w_stride,  x_j = (char *)x + j * x_stride
 *
 * Each result is bit for bit what st_dot_kernel(type) returns for that weight row and activation
 * row at the same CPU level (the same integer lanes, the same float operations in the same order),
 * so a caller may use either for any row. The tiles:
 *   - Q5_0 at AVX-512 with VNNI (dot_tile_avx512.c): the qwen4exp rows K = 320 and 640 cannot hold
 *     Q4_K, so llama-quantize's fallback writes them in Q5_0 (hyper-connection up, the experts' down);
 *   - Q8_0 at AVX-512 with VNNI (dot_tile_avx512.c): a verify chunk or a batch of slots (2-8
 *     activation rows) on a Q8_0 file whose weights sit in cache pays for the per-row work, not
 *     the weight reads, and the tile shares that work across 4 weight rows;
 *   - Q4_K and Q5_K at AVX2 (dot_tile_avx2.c, which also holds the AVX2 one-row Q4_K and Q5_K
 *     kernels: each shares one arithmetic with its tile);
 *   - Q8_0 and Q6_K at AVX2 (dot_tile_avx2.c, in the one-row kernels' arithmetic, which is
 *     ggml's), with AVX-VNNI's vpdpbusd / vpdpwssd where the CPU has it (the same integers, so
 *     the same bits);
 *   - F32 and F16 at AVX2 and AVX-512 (dot_tile_float.h);
 *   - Q1_0 at AVX2 and AVX-512 (dot_tile_q1_avx2.c, dot_tile_q1_avx512.c): a row is bound by its
 *     136 bytes of Q8_0 activations per 18 bytes of weights, which the tile reads once for all
 *     its weight rows; the one-row kernels are the tiles with one row. */
#ifndef ST_QUANT_DOT_TILE_H
#define ST_QUANT_DOT_TILE_H

#include <stddef.h>
#include <stdint.h>
#include "quant/dot.h"

#define ST_DOT_TILE_MR 4

typedef void (*st_dot_tile_fn)(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride,
                               int nx, float *out, int64_t ldo);

/* The tile kernel for `type` at st_dot_kernel(type)'s level now; NULL where there is none (the
 * caller then runs the one-row kernel per weight row). */
st_dot_tile_fn st_dot_tile_kernel(uint32_t type);

/* One activation row (decode) through a tile entry: the one-row kernel `dot` a weight row at a
 * time, the same bits. A tile reads its weight rows side by side, streams that the prefetches and
 * the hardware prefetcher keep short of the memory bandwidth, and with one activation row there is
 * no activation work to share (from DRAM, 2 threads, bench/matvec/types.sh against the tiles:
 * AVX2 Q8_0 15-16 -> 21-27 GB/s, Q5_K 14-19 -> 19-22, Q6_K 19-21 -> 21-23, Q4_K 3-5% faster;
 * AVX-512 Q8_0 18-21 -> 22-24, Q5_0 14 -> 18-20). */
static inline void st_dot_rows_one_by_one(st_dot_fn dot, int64_t k, const void *w, size_t ws, int mr, const void *x,
                                          size_t xs, float *out, int64_t ldo) {
    for (int m = 0; m < mr; m++) dot(k, (const char *)w + (size_t)m * ws, x, xs, 1, out + m * ldo);
}

void st_dot_tile_q5_0_avx512(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride,
                             int nx, float *out, int64_t ldo);
void st_dot_tile_q8_0_avx512(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride,
                             int nx, float *out, int64_t ldo);
void st_dot_tile_q4_K_avx2(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride,
                           int nx, float *out, int64_t ldo);
void st_dot_tile_q5_K_avx2(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride,
                           int nx, float *out, int64_t ldo);
void st_dot_tile_q8_0_avx2(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride,
                           int nx, float *out, int64_t ldo);
void st_dot_tile_q8_0_avxvnni(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride,
                              int nx, float *out, int64_t ldo);
void st_dot_tile_q6_K_avx2(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride,
                           int nx, float *out, int64_t ldo);
void st_dot_tile_q6_K_avxvnni(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride,
                              int nx, float *out, int64_t ldo);
void st_dot_tile_q1_0_avx2(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride,
                           int nx, float *out, int64_t ldo);
void st_dot_tile_q1_0_avx512(int64_t k, const void *w, size_t w_stride, int mr, const void *x, size_t x_stride,
                             int nx, float *out, int64_t ldo);
/* The one-row Q1_0 kernels (entries of st_dot_avx2 / st_dot_avx512): the tiles with mr = 1. */
void st_dot_q1_0_avx2(int64_t k, const void *w, const void *x, size_t x_stride, int nx, float *out);
void st_dot_q1_0_avx512(int64_t k, const void *w, const void *x, size_t x_stride, int nx, float *out);
/* The AVX2 level's one-row Q4_K and Q5_K kernels (dot.h's form; entries of st_dot_avx2). */
void st_dot_q4_K_avx2(int64_t k, const void *w, const void *x, size_t x_stride, int nx, float *out);
void st_dot_q5_K_avx2(int64_t k, const void *w, const void *x, size_t x_stride, int nx, float *out);

#endif
