/* test_dot_tile_float.c: the F32 and F16 tile kernels of quant/dot_tile_float.h give, for every
 * weight row and activation row of the tile, bit for bit the one-row kernel's result at the same
 * level (st_dot_kernel), that result is within rounding of the scalar reference, and
 * st_dot_tile_kernel() hands them out at the AVX2 and AVX-512 levels only (scalar: none, callers
 * fall back to the one-row kernel).
 *
 * Sizes are odd (below one 64-element step, around it, long rows with a rest of every length
 * class), rows sit a stride apart that is not their size and not a multiple of 16 bytes, and
 * every mr from 1 to ST_DOT_TILE_MR and nx from 1 to ST_DOT_MAX_NX is run, with ldo not nx.
 * The activations include a row of zeros and a row of tiny values; the F16 weights include
 * subnormal halves (the widening must keep them). Activations for F16 are in its form
 * ST_ACT_F16X, made by the reference converter. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "quant/dot.h"
#include "quant/dot_tile.h"
#include "quant/quant.h"
#include "test.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float frand(void) { return (float)rnd() / 4294967296.0f * 2 - 1; }

#define PAD 36 /* bytes between rows beyond the row itself */

static void test_type(uint32_t type, int64_t k) {
    const int f16 = type == ST_TYPE_F16;
    const size_t esize = f16 ? 2 : 4, ws = (size_t)k * esize + PAD, xs = (size_t)k * sizeof(float) + PAD;
    char *w = calloc(ST_DOT_TILE_MR, ws), *x = calloc(ST_DOT_MAX_NX, xs);
    float *f = malloc((size_t)k * sizeof(float));
    for (int m = 0; m < ST_DOT_TILE_MR; m++) {
        char *row = w + (size_t)m * ws;
        for (int64_t i = 0; i < k; i++) f[i] = frand() * (m == 3 ? 1e-6f : (float)(m + 1)); /* row 3: f16 subnormals */
        if (f16) st_act_f16_ref(f, row, k); /* the f16 weight row, round to nearest even */
        else memcpy(row, f, (size_t)k * sizeof(float));
    }
    for (int j = 0; j < ST_DOT_MAX_NX; j++) {
        for (int64_t i = 0; i < k; i++) f[i] = j == 5 ? 0.0f : frand() * (j == 2 ? 1e-3f : (float)(j + 1));
        if (f16) st_act_f16x_ref(f, x + (size_t)j * xs, k);
        else memcpy(x + (size_t)j * xs, f, (size_t)k * sizeof(float));
    }
    /* the reference and the sum of |w x| per (m, j), its tolerance */
    float ref[ST_DOT_TILE_MR][ST_DOT_MAX_NX];
    double mag[ST_DOT_TILE_MR][ST_DOT_MAX_NX];
    for (int m = 0; m < ST_DOT_TILE_MR; m++) {
        st_dot_ref[type](k, w + (size_t)m * ws, x, xs, ST_DOT_MAX_NX, ref[m]);
        for (int j = 0; j < ST_DOT_MAX_NX; j++) {
            const float *xr = (const float *)(x + (size_t)j * xs);
            mag[m][j] = 0;
            for (int64_t i = 0; i < k; i++) {
                float wi;
                if (f16) {
                    uint16_t h;
                    memcpy(&h, w + (size_t)m * ws + 2 * (size_t)i, 2);
                    wi = st_fp16_to_fp32(h);
                } else {
                    memcpy(&wi, w + (size_t)m * ws + 4 * (size_t)i, 4);
                }
                mag[m][j] += fabs((double)wi * xr[i]);
            }
        }
    }
    for (int level = 0; level <= 3; level++) {
        st_cpu_limit(level);
        st_dot_tile_fn tile = st_dot_tile_kernel(type);
        if (st_dot_level(type) == 0) {
            CHECKF(tile == NULL, "%s level %d: a tile kernel at the scalar level", f16 ? "f16" : "f32", level);
            continue;
        }
        CHECKF(tile != NULL, "%s level %d: no tile kernel at variant %d", f16 ? "f16" : "f32", level, st_dot_level(type));
        if (!tile) continue;
        st_dot_fn one = st_dot_kernel(type);
        for (int mr = 1; mr <= ST_DOT_TILE_MR; mr++)
            for (int nx = 1; nx <= ST_DOT_MAX_NX; nx++) {
                float got[ST_DOT_TILE_MR * (ST_DOT_MAX_NX + 1)], want[ST_DOT_MAX_NX]; /* rows ldo = nx + 1 apart */
                const int64_t ldo = nx + 1;
                memset(got, 0x7f, sizeof got);
                tile(k, w, ws, mr, x, xs, nx, got, ldo);
                for (int m = 0; m < mr; m++) {
                    one(k, w + (size_t)m * ws, x, xs, nx, want);
                    for (int j = 0; j < nx; j++) {
                        const float g = got[m * ldo + j];
                        CHECKF(memcmp(&g, &want[j], sizeof g) == 0,
                               "%s k=%lld variant %d mr=%d nx=%d (%d, %d): tile %.9g, one-row kernel %.9g",
                               f16 ? "f16" : "f32", (long long)k, st_dot_level(type), mr, nx, m, j, g, want[j]);
                        CHECKF(fabs(g - ref[m][j]) <= 1e-5 * mag[m][j] + 1e-30,
                               "%s k=%lld variant %d mr=%d nx=%d (%d, %d): tile %.9g, reference %.9g",
                               f16 ? "f16" : "f32", (long long)k, st_dot_level(type), mr, nx, m, j, g, ref[m][j]);
                    }
                }
            }
    }
    st_cpu_limit(3);
    free(w);
    free(x);
    free(f);
}

int main(void) {
    const int64_t sizes[] = {1, 7, 16, 33, 63, 64, 65, 100, 127, 128, 200, 257, 321, 1000, 1031};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        test_type(ST_TYPE_F32, sizes[i]);
        test_type(ST_TYPE_F16, sizes[i]);
    }
    return test_report("test_dot_tile_float");
}
