/* ref_iq4.c: the non-linear 4-bit types iq4_nl (32-element blocks, one fp16 scale) and iq4_xs
 * (256-element super-blocks, eight 6-bit sub-block scales): dequantization and the reference
 * quantizers.
 *
 * Both map each element to one of 16 fixed levels (a grid denser near zero, fitted to the shape
 * of weight distributions) times a scale. The quantizers pick each element's nearest level for
 * a trial scale and then take the weighted (x^2) least-squares scale for those levels; iq4_xs
 * also tries 15 trial scales per sub-block and keeps the best. Evaluation order follows ggml's,
 * so results match the peer bit for bit. */
#include <math.h>
#include <string.h>
#include "quant/iq_grids.h"
#include "quant/quant.h"
#include "quant/ref.h"

#define TINY_GROUP 1e-15f

/* Index of the level nearest to v (the upper one of two equally near). */
static int nearest_level(float v) {
    if (v <= st_iq4nl_levels[0]) return 0;
    if (v >= st_iq4nl_levels[15]) return 15;
    int lo = 0, hi = 15;   /* levels[lo] < v < levels[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < st_iq4nl_levels[mid]) hi = mid; else lo = mid;
    }
    return v - (float)st_iq4nl_levels[lo] < (float)st_iq4nl_levels[hi] - v ? lo : hi;
}

/* ---- dequantization ---- */

static inline void decode_iq4_32(const uint8_t qs[16], float d, float *y) {
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)st_iq4nl_levels[qs[j] & 0x0f];
        y[j + 16] = d * (float)st_iq4nl_levels[qs[j] >> 4];
    }
}

void st_dequantize_row_iq4_nl(const block_iq4_nl *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, y += 32) decode_iq4_32(x[b].qs, st_fp16_to_fp32(x[b].d), y);
}

/* Sub-block j's 6-bit scale, biased by 32: low nibble in scales_l, top two bits in scales_h. */
static inline int scale_iq4_xs(const block_iq4_xs *x, int j) {
    int lo = (x->scales_l[j / 2] >> (4 * (j % 2))) & 0x0f;
    int hi = (x->scales_h >> (2 * j)) & 3;
    return (lo | hi << 4) - 32;
}

void st_dequantize_row_iq4_xs(const block_iq4_xs *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = st_fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK_K / 32; j++, y += 32)
            decode_iq4_32(x[b].qs + 16 * j, d * (float)scale_iq4_xs(&x[b], j), y);
    }
}

/* ---- quantization ---- */

/* Weighted sums for levels chosen at inverse scale id: sum w q x and sum w q^2, w = x^2. */
static void level_sums(const float *x, int n, float id, uint8_t *L, float *sumqx, float *sumq2) {
    float sqx = 0, sq2 = 0;
    for (int j = 0; j < n; j++) {
        int l = nearest_level(id * x[j]);
        float q = st_iq4nl_levels[l], w = x[j] * x[j];
        if (L) L[j] = (uint8_t)l;
        sqx += w * q * x[j];
        sq2 += w * q * q;
    }
    *sumqx = sqx;
    *sumq2 = sq2;
}

static float signed_absmax(const float *x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    return max;
}

static void pack_nibbles_32(const uint8_t L[32], uint8_t qs[16]) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
}

void st_quantize_row_iq4_nl_ref(const float *x, block_iq4_nl *y, int64_t n) {
    uint8_t L[32];
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        const float max = signed_absmax(x, 32);
        if (fabsf(max) < TINY_GROUP) {
            /* ggml leaves the levels of an all-zero block unset; any decode to zero with d = 0 */
            y[b].d = st_fp32_to_fp16(0.f);
            memset(y[b].qs, 0, sizeof y[b].qs);
            continue;
        }
        /* one pass: the largest element goes to the level -127, then the least-squares scale */
        float sumqx, sumq2;
        level_sums(x, 32, 1 / (max / st_iq4nl_levels[0]), L, &sumqx, &sumq2);
        y[b].d = st_fp32_to_fp16(sumq2 > 0 ? sumqx / sumq2 : 0.f);
        pack_nibbles_32(L, y[b].qs);
    }
}

/* Best scale for one 32-element sub-block: the least-squares scale over 15 trial assignments,
 * the largest element sent to level -127 + k, k = -7..7 (plus the plain one sent to 127). */
static float fit_iq4_subblock(const float *x) {
    const float max = signed_absmax(x, 32);
    if (fabsf(max) < TINY_GROUP) return 0;
    float sumqx, sumq2;
    level_sums(x, 32, 1 / (-max / st_iq4nl_levels[0]), 0, &sumqx, &sumq2);
    float d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int k = -7; k <= 7; k++) {
        level_sums(x, 32, (float)(k + st_iq4nl_levels[0]) / max, 0, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

void st_quantize_row_iq4_xs_ref(const float *x, block_iq4_xs *y, int64_t n) {
    uint8_t L[32];
    float scales[QK_K / 32];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            scales[j] = fit_iq4_subblock(x + 32 * j);
            if (fabsf(scales[j]) > amax) { amax = fabsf(scales[j]); max_scale = scales[j]; }
        }
        /* 6-bit signed sub-block scales against d = -max/32; levels re-chosen for the scale each
         * sub-block will have (taken from the unrounded d, as ggml does) */
        const float d = -max_scale / 32;
        const float id = d != 0 ? 1 / d : 0.f;
        y[b].d = st_fp32_to_fp16(d);
        y[b].scales_h = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            int l = st_round_even(id * scales[j]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * (float)l;
            const float idl = dl != 0 ? 1 / dl : 0.f;
            for (int i = 0; i < 32; i++) L[i] = (uint8_t)nearest_level(idl * x[32 * j + i]);
            pack_nibbles_32(L, y[b].qs + 16 * j);
            l += 32;
            if (j % 2 == 0) y[b].scales_l[j / 2] = (uint8_t)(l & 0x0f);
            else y[b].scales_l[j / 2] |= (uint8_t)((l & 0x0f) << 4);
            y[b].scales_h |= (uint16_t)((l >> 4) << (2 * j));
        }
    }
}
