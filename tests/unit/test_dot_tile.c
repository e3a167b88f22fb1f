/* test_dot_tile.c: the tile kernels of quant/dot_tile.h (Q5_0 and Q8_0 at AVX-512; Q4_K, Q5_K, Q6_K and Q8_0
 * at AVX2, Q6_K and Q8_0 both with and without AVX-VNNI, Q1_0 at AVX2 and AVX-512) give,
 * for every weight row and activation row of the tile, bit for bit the one-row kernel's result at
 * the same level (st_dot_kernel), which is the one-row kernel's on that activation row alone (a
 * row's bits do not depend on the chunk it came in), and that result is within rounding of the
 * scalar reference; at
 * the other levels there is no tile kernel for the type (callers fall back to the one-row kernel).
 *
 * Weights are quantized from random floats and random bytes (every nibble, qh and scale pattern,
 * sane fp16 scales), rows sit a stride apart that is not their size, sizes have odd block counts
 * (the AVX-512 kernel pairs 32-element blocks and runs a lone last block apart), and every mr from
 * 1 to ST_DOT_TILE_MR (the AVX2 tiles repeat a short tile's last row) and nx from 1 to
 * ST_DOT_MAX_NX (they pair activation rows, a lone last one with itself) is run. The activations
 * include a row of zeros, whose products are exact zeros, and a row of small values. */
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

/* Whether `type` has a tile kernel at `level` (1 AVX2, 2 AVX-512): Q1_0 and Q8_0 at both. */
static int has_tile(uint32_t type, int level) {
    if (type == ST_TYPE_Q1_0 || type == ST_TYPE_Q8_0) return level >= 1;
    return level == (type == ST_TYPE_Q5_0 ? 2 : 1);
}

/* Offsets of the fp16 scale fields in one block, for random-byte rows. */
static int scale_fields(uint32_t type, int off[2]) {
    off[0] = type == ST_TYPE_Q6_K ? 208 : 0, off[1] = 2; /* Q6_K: d after ql, qh and the scales */
    return type == ST_TYPE_Q4_K || type == ST_TYPE_Q5_K ? 2 : 1;
}

/* The activation row's values, for sum |w x|. */
static void act_values(uint32_t act, const void *y, float *f, int64_t k) {
    if (act == ST_TYPE_Q8_K) {
        const block_q8_K *b = y;
        for (int64_t i = 0; i < k; i++) f[i] = b[i / QK_K].d * b[i / QK_K].qs[i % QK_K];
    } else {
        st_dequantize_row(ST_TYPE_Q8_0, y, f, k);
    }
}

typedef struct tile_data {
    uint32_t type;
    int64_t k;
    const char *w, *x;
    size_t ws, xs;
    float ref[ST_DOT_TILE_MR][ST_DOT_MAX_NX];
    double mag[ST_DOT_TILE_MR][ST_DOT_MAX_NX];
} tile_data;

/* Every mr and nx of one tile kernel against the one-row kernel (bits) and the reference. */
static void check_tile(const tile_data *t, st_dot_tile_fn tile, const char *what, int raw) {
    st_dot_fn one = st_dot_kernel(t->type);
    for (int mr = 1; mr <= ST_DOT_TILE_MR; mr++)
        for (int nx = 1; nx <= ST_DOT_MAX_NX; nx++) {
            float got[ST_DOT_TILE_MR * (ST_DOT_MAX_NX + 1)], want[ST_DOT_MAX_NX]; /* rows ldo = nx + 1 apart */
            const int64_t ldo = nx + 1;
            tile(t->k, t->w, t->ws, mr, t->x, t->xs, nx, got, ldo);
            for (int m = 0; m < mr; m++) {
                one(t->k, t->w + (size_t)m * t->ws, t->x, t->xs, nx, want);
                for (int j = 0; j < nx; j++) {
                    const float g = got[m * ldo + j];
                    /* a row's bits do not depend on the rows beside it: decode (one row, which
                     * AVX-512 Q8_0 runs in its own 256-bit form) gives what a chunk gives */
                    float alone;
                    one(t->k, t->w + (size_t)m * t->ws, t->x + (size_t)j * t->xs, t->xs, 1, &alone);
                    CHECKF(memcmp(&alone, &want[j], sizeof alone) == 0, "%s k=%lld raw=%d nx=%d (%d, %d): one-row kernel alone %.9g, among %d rows %.9g",
                           what, (long long)t->k, raw, nx, m, j, alone, nx, want[j]);
                    CHECKF(memcmp(&g, &want[j], sizeof g) == 0, "%s k=%lld raw=%d mr=%d nx=%d (%d, %d): tile %.9g, one-row kernel %.9g",
                           what, (long long)t->k, raw, mr, nx, m, j, g, want[j]);
                    CHECKF(fabs(g - t->ref[m][j]) <= 2e-6 * t->mag[m][j] + 1e-30,
                           "%s k=%lld raw=%d mr=%d nx=%d (%d, %d): tile %.9g, reference %.9g (sum|wx| %g)", what,
                           (long long)t->k, raw, mr, nx, m, j, g, t->ref[m][j], t->mag[m][j]);
                }
            }
        }
}

static void test_type(uint32_t type, int64_t k) {
    const st_type_info *info = st_type_get(type);
    const uint32_t act = st_dot_act_type(type);
    const size_t wrow = st_row_size(info, k), ws = wrow + PAD, bs = info->type_size;
    const size_t xrow = st_dot_act_row_size(act, k);
    char *w = calloc(ST_DOT_TILE_MR, ws), *x = malloc(xrow * ST_DOT_MAX_NX);
    float *f = malloc((size_t)k * sizeof(float)), *wf = malloc((size_t)k * ST_DOT_TILE_MR * sizeof(float));
    for (int raw = 0; raw < 2; raw++) {
        for (int m = 0; m < ST_DOT_TILE_MR; m++) {
            char *row = w + (size_t)m * ws;
            if (!raw) {
                for (int64_t i = 0; i < k; i++) f[i] = frand() * (float)(m + 1);
                st_quantize_row(type, f, row, k);
            } else {
                int off[2];
                const int n_off = scale_fields(type, off);
                for (size_t i = 0; i < wrow; i++) row[i] = (char)rnd();
                for (int64_t b = 0; b < k / info->block_size; b++)
                    for (int o = 0; o < n_off; o++) {
                        uint16_t h = st_fp32_to_fp16(frand() * 0.01f);
                        memcpy(row + (size_t)b * bs + off[o], &h, 2);
                    }
            }
            st_dequantize_row(type, row, wf + (size_t)m * k, k);
        }
        tile_data t = {.type = type, .k = k, .w = w, .x = x, .ws = ws, .xs = xrow};
        for (int j = 0; j < ST_DOT_MAX_NX; j++) {
            for (int64_t i = 0; i < k; i++) f[i] = j == 5 ? 0.0f : frand() * (j == 2 ? 1e-3f : (float)(j + 1));
            if (act == ST_TYPE_Q8_K) st_quantize_row_q8_K_ref(f, (block_q8_K *)(x + (size_t)j * xrow), k);
            else st_act_q8_0_ref(f, x + (size_t)j * xrow, k);
            act_values(act, x + (size_t)j * xrow, f, k);
            for (int m = 0; m < ST_DOT_TILE_MR; m++) {
                t.mag[m][j] = 0;
                for (int64_t i = 0; i < k; i++) t.mag[m][j] += fabs((double)wf[(size_t)m * k + i] * f[i]);
            }
        }
        for (int m = 0; m < ST_DOT_TILE_MR; m++) st_dot_ref[type](k, w + (size_t)m * ws, x, xrow, ST_DOT_MAX_NX, t.ref[m]);
        for (int level = 0; level <= 3; level++) {
            st_cpu_limit(level);
            st_dot_tile_fn tile = st_dot_tile_kernel(type);
            if (!has_tile(type, st_dot_level(type))) {
                CHECKF(tile == NULL, "level %d: a %s tile kernel at variant %d", level, info->name, st_dot_level(type));
                continue;
            }
            CHECKF(tile != NULL, "level %d: no %s tile kernel at variant %d", level, info->name, st_dot_level(type));
            if (tile) check_tile(&t, tile, info->name, raw);
            if (type == ST_TYPE_Q8_0 && st_dot_level(type) == 1) {
                /* both forms, whichever the CPU's flags pick */
                check_tile(&t, st_dot_tile_q8_0_avx2, "q8_0 avx2", raw);
                if (st_cpu()->avx_vnni) check_tile(&t, st_dot_tile_q8_0_avxvnni, "q8_0 avx-vnni", raw);
            }
            if (type == ST_TYPE_Q6_K) {
                check_tile(&t, st_dot_tile_q6_K_avx2, "q6_K avx2", raw);
                if (st_cpu()->avx_vnni) check_tile(&t, st_dot_tile_q6_K_avxvnni, "q6_K avx-vnni", raw);
            }
        }
        st_cpu_limit(3);
    }
    free(w);
    free(x);
    free(f);
    free(wf);
}

int main(void) {
    const int64_t blocks32[] = {1, 2, 3, 4, 5, 7, 10, 11, 20};
    for (size_t i = 0; i < sizeof blocks32 / sizeof blocks32[0]; i++) {
        test_type(ST_TYPE_Q5_0, blocks32[i] * 32);
        test_type(ST_TYPE_Q8_0, blocks32[i] * 32);
    }
    const int64_t blocks256[] = {1, 2, 3, 4, 7};
    for (size_t i = 0; i < sizeof blocks256 / sizeof blocks256[0]; i++) {
        test_type(ST_TYPE_Q4_K, blocks256[i] * QK_K);
        test_type(ST_TYPE_Q5_K, blocks256[i] * QK_K);
        test_type(ST_TYPE_Q6_K, blocks256[i] * QK_K);
    }
    const int64_t blocks128[] = {1, 2, 3, 5, 7, 16};
    for (size_t i = 0; i < sizeof blocks128 / sizeof blocks128[0]; i++) test_type(ST_TYPE_Q1_0, blocks128[i] * 128);
    return test_report("test_dot_tile");
}
