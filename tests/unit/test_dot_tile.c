/* test_dot_tile.c: the tile kernels of quant/dot_tile.h (Q5_0 at AVX-512) give, for every weight
 * row and activation row of the tile, bit for bit the one-row kernel's result at the same level
 * (st_dot_kernel), and that result is within rounding of the scalar reference; below AVX-512
 * there is no tile kernel (callers fall back to the one-row kernel).
 *
 * Weights are quantized from random floats and random bytes (every qh and nibble pattern, sane
 * fp16 scales), rows sit a stride apart that is not their size, sizes have odd block counts (the
 * kernel pairs 32-element blocks and runs a lone last block apart), and every mr from 1 to
 * ST_DOT_TILE_MR and nx from 1 to ST_DOT_MAX_NX is run. The activations include a row of
 * zeros, whose products are exact zeros. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "quant/dot.h"
#include "quant/dot_tile.h"
#include "quant/quant.h"
#include "test.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float frand(void) { return (float)rnd() / 4294967296.0f * 2 - 1; }

#define PAD 40 /* bytes between weight rows beyond the row itself */

static void test_q5_0(int64_t k) {
    const size_t wrow = st_row_size(st_type_get(ST_TYPE_Q5_0), k), ws = wrow + PAD;
    const size_t xrow = st_dot_act_row_size(ST_TYPE_Q8_0, k);
    char *w = calloc(ST_DOT_TILE_MR, ws), *x = malloc(xrow * ST_DOT_MAX_NX);
    float *f = malloc((size_t)k * sizeof(float));
    for (int raw = 0; raw < 2; raw++) {
        for (int m = 0; m < ST_DOT_TILE_MR; m++) {
            char *row = w + (size_t)m * ws;
            if (!raw) {
                for (int64_t i = 0; i < k; i++) f[i] = frand() * (float)(m + 1);
                st_quantize_row(ST_TYPE_Q5_0, f, row, k);
            } else {
                for (size_t i = 0; i < wrow; i++) row[i] = (char)rnd();
                for (int64_t b = 0; b < k / 32; b++) {
                    uint16_t h = st_fp32_to_fp16(frand() * 0.01f);
                    memcpy(row + (size_t)b * sizeof(block_q5_0), &h, 2);
                }
            }
        }
        for (int j = 0; j < ST_DOT_MAX_NX; j++) {
            for (int64_t i = 0; i < k; i++) f[i] = j == 5 ? 0.0f : frand() * (j == 2 ? 1e-3f : (float)(j + 1));
            st_act_q8_0_ref(f, x + (size_t)j * xrow, k);
        }
        /* the reference and its tolerance per (m, j) */
        float ref[ST_DOT_TILE_MR][ST_DOT_MAX_NX];
        for (int m = 0; m < ST_DOT_TILE_MR; m++) st_dot_ref[ST_TYPE_Q5_0](k, w + (size_t)m * ws, x, xrow, ST_DOT_MAX_NX, ref[m]);
        for (int level = 0; level <= 3; level++) {
            st_cpu_limit(level);
            st_dot_tile_fn tile = st_dot_tile_kernel(ST_TYPE_Q5_0);
            if (st_dot_level(ST_TYPE_Q5_0) != 2) {
                CHECKF(tile == NULL, "level %d: a Q5_0 tile kernel below AVX-512", level);
                continue;
            }
            CHECKF(tile != NULL, "level %d: no Q5_0 tile kernel at AVX-512", level);
            if (!tile) continue;
            st_dot_fn one = st_dot_kernel(ST_TYPE_Q5_0);
            for (int mr = 1; mr <= ST_DOT_TILE_MR; mr++)
                for (int nx = 1; nx <= ST_DOT_MAX_NX; nx++) {
                    float got[ST_DOT_TILE_MR * (ST_DOT_MAX_NX + 1)], want[ST_DOT_MAX_NX]; /* rows ldo = nx + 1 apart */
                    const int64_t ldo = nx + 1;
                    tile(k, w, ws, mr, x, xrow, nx, got, ldo);
                    for (int m = 0; m < mr; m++) {
                        one(k, w + (size_t)m * ws, x, xrow, nx, want);
                        for (int j = 0; j < nx; j++) {
                            const float g = got[m * ldo + j];
                            CHECKF(memcmp(&g, &want[j], sizeof g) == 0,
                                   "k=%lld raw=%d mr=%d nx=%d (%d, %d): tile %.9g, one-row kernel %.9g", (long long)k,
                                   raw, mr, nx, m, j, g, want[j]);
                            CHECKF(fabsf(g - ref[m][j]) <= 1e-5f * (fabsf(ref[m][j]) + 1.0f),
                                   "k=%lld raw=%d mr=%d nx=%d (%d, %d): tile %.9g, reference %.9g", (long long)k, raw,
                                   mr, nx, m, j, g, ref[m][j]);
                        }
                    }
                }
        }
        st_cpu_limit(3);
    }
    free(w);
    free(x);
    free(f);
}

int main(void) {
    const int64_t blocks[] = {1, 2, 3, 5, 10, 11, 20};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) test_q5_0(blocks[i] * 32);
    return test_report("test_dot_tile");
}
