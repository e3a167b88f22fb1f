/* ref_k.c: the 256-element super-block types q2_K, q3_K, q4_K, q5_K, q6_K and the activation
 * form q8_K: dequantization and the reference quantizers.
 *
 * A super-block holds 8 or 16 sub-blocks, each with its own small integer scale (and, for the
 * affine types q2_K/q4_K/q5_K, its own minimum), themselves quantized against one fp16 `d`
 * (and `dmin`). Quantizing is two passes: fit each sub-block on its own (a least-squares search
 * over candidate scales, below), quantize the sub-block scales, then re-quantize every element
 * against the scale it will actually be decoded with.
 *
 * Every expression keeps ggml's evaluation order (products left to right, sums in index order),
 * so the searches take the same branches and the output matches the peer bit for bit. */
#include <math.h>
#include <string.h>
#include "quant/quant.h"
#include "quant/ref.h"

/* A sub-block whose largest magnitude is below this is all zeros. */
#define TINY_GROUP 1e-15f

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Symmetric fit: levels l in [-nmax, nmax-1] (stored as l + nmax) and one scale s, minimising
 * sum x^2 (x - s l)^2. Starts from the scale that sends the largest |x| to -nmax, then tries
 * nmax +- 0.1k (k = 1..9) in its place and keeps whichever gives the best least-squares scale. */
static float fit_symmetric(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); max = x[i]; }
    if (amax < TINY_GROUP) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(st_round_even(iscale * x[i]), -nmax, nmax - 1);
        float w = x[i] * x[i];
        L[i] = (int8_t)(l + nmax);
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;   /* sumlx^2 / suml2: the error reduction this fit achieves */
    for (int k = -9; k <= 9; k++) {
        if (k == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)k) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(st_round_even(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(clamp_int(st_round_even(iscale * x[i]), -nmax, nmax - 1) + nmax);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric fit for q3_K: levels in [-nmax, nmax-1] (stored + nmax), weights x^2, improved by
 * coordinate descent: move one level at a time to its optimum given the others, keep the move
 * if the fit improves, for at most five sweeps. */
static float fit_symmetric_descent(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); max = x[i]; }
    if (amax < TINY_GROUP) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(st_round_even(iscale * x[i]), -nmax, nmax - 1);
        float w = x[i] * x[i];
        L[i] = (int8_t)l;
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int sweep = 0; sweep < 5; sweep++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            int l = clamp_int(st_round_even(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (l == L[i]) continue;
            slx += w * x[i] * (float)l;
            sl2 += w * (float)l * (float)l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)l;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Affine fit: levels l in [0, nmax] with x ~ scale*l + min (min <= 0), minimising the weighted
 * squared (or, with use_mad, absolute) error. Starts from [min, max] spread over the levels,
 * then for each of nstep+1 candidate level spacings (nmax + rmin + rdelta*k) rounds, solves
 * the 2x2 weighted least-squares problem for (scale, min) and keeps the best. Returns the scale
 * and stores -min in *neg_min. n <= 32. */
static float fit_affine(int n, int nmax, const float *x, const float *w, uint8_t *L,
                        float *neg_min, float rmin, float rdelta, int nstep, int use_mad) {
    uint8_t Lc[32];
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_err = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(st_round_even(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        best_err += w[i] * (use_mad ? fabsf(diff) : diff * diff);
    }
    if (nstep < 1) {
        *neg_min = -min;
        return scale;
    }
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * (float)k + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(st_round_even(iscale * (x[i] - min)), 0, nmax);
            Lc[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0)) continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / det;
        float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (m > 0) {   /* the minimum may not be positive: refit the scale alone */
            m = 0;
            s = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = s * (float)Lc[i] + m - x[i];
            err += w[i] * (use_mad ? fabsf(diff) : diff * diff);
        }
        if (err < best_err) {
            memcpy(L, Lc, (size_t)n);
            best_err = err;
            scale = s;
            min = m;
        }
    }
    *neg_min = -min;
    return scale;
}

/* q4_K / q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes: bytes 0-3 hold scales
 * 0-3, bytes 4-7 mins 0-3 (low six bits each); sub-blocks 4-7 keep their low nibbles in bytes
 * 8-11 and their top two bits in the spare top bits of bytes 0-7. */
static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}

static inline void set_scale_min_k4(int j, uint8_t *q, uint8_t sc, uint8_t m) {
    if (j < 4) {
        q[j] = sc;
        q[j + 4] = m;
    } else {
        q[j + 4] = (uint8_t)((sc & 0x0f) | (m & 0x0f) << 4);
        q[j - 4] |= (uint8_t)((sc >> 4) << 6);
        q[j] |= (uint8_t)((m >> 4) << 6);
    }
}

/* q3_K: sixteen 6-bit scales (biased by 32) in 12 bytes: low nibbles of 0-7 in bytes 0-7 low,
 * of 8-15 in bytes 0-7 high; the top two bits of scale j in byte 8 + j%4 at bit 2*(j/4). */
static inline int scale_q3_K(const uint8_t *s, int j) {
    int lo = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* ---- dequantization ---- */

void st_dequantize_row_q2_K(const block_q2_K *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = st_fp16_to_fp32(x[b].d), dmin = st_fp16_to_fp32(x[b].dmin);
        /* element 128h + 32s + 16t + l sits in qs[32h + 16t + l] bits 2s..2s+1, scale 8h+2s+t */
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int t = 0; t < 2; t++) {
                    uint8_t sc = x[b].scales[8 * h + 2 * s + t];
                    const float dl = d * (float)(sc & 0x0f), ml = dmin * (float)(sc >> 4);
                    const uint8_t *q = x[b].qs + 32 * h + 16 * t;
                    for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l] >> (2 * s)) & 3) - ml;
                }
    }
}

void st_dequantize_row_q3_K(const block_q3_K *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = st_fp16_to_fp32(x[b].d);
        /* like q2_K, plus a high bit per element in hmask[32t' + l] bit 4h + s, which when
         * clear subtracts 4: levels -4..3 */
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int t = 0; t < 2; t++) {
                    const float dl = d * (float)scale_q3_K(x[b].scales, 8 * h + 2 * s + t);
                    const uint8_t *q = x[b].qs + 32 * h + 16 * t, *hm = x[b].hmask + 16 * t;
                    const uint8_t bit = (uint8_t)(1u << (4 * h + s));
                    for (int l = 0; l < 16; l++) {
                        int v = ((q[l] >> (2 * s)) & 3) - ((hm[l] & bit) ? 0 : 4);
                        *y++ = dl * (float)v;
                    }
                }
    }
}

void st_dequantize_row_q4_K(const block_q4_K *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = st_fp16_to_fp32(x[b].d), dmin = st_fp16_to_fp32(x[b].dmin);
        /* 64 elements per 32 bytes of qs: low nibbles are sub-block 2p, high 2p+1 */
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            scale_min_k4(j, x[b].scales, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *q = x[b].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; l++) *y++ = dl * (float)((q[l] >> shift) & 0x0f) - ml;
        }
    }
}

void st_dequantize_row_q5_K(const block_q5_K *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = st_fp16_to_fp32(x[b].d), dmin = st_fp16_to_fp32(x[b].dmin);
        /* as q4_K, with the fifth bit of sub-block j's element l in qh[l] bit j */
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            scale_min_k4(j, x[b].scales, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *q = x[b].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; l++) {
                int v = ((q[l] >> shift) & 0x0f) + ((x[b].qh[l] >> j) & 1 ? 16 : 0);
                *y++ = dl * (float)v - ml;
            }
        }
    }
}

void st_dequantize_row_q6_K(const block_q6_K *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = st_fp16_to_fp32(x[b].d);
        /* per half h: element 128h + 32s + l has low nibble ql[64h + 32(s&1) + l] (high nibble
         * when s >= 2), top two bits qh[32h + l] bits 2s..2s+1, scale 8h + 2s + l/16 */
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int l = 0; l < 32; l++) {
                    const uint8_t *ql = x[b].ql + 64 * h + 32 * (s & 1);
                    int lo = (ql[l] >> (4 * (s >> 1))) & 0x0f;
                    int hi = (x[b].qh[32 * h + l] >> (2 * s)) & 3;
                    int v = (lo | hi << 4) - 32;
                    *y++ = d * (float)x[b].scales[8 * h + 2 * s + l / 16] * (float)v;
                }
    }
}

void st_dequantize_row_q8_K(const block_q8_K *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++)
        for (int j = 0; j < QK_K; j++) *y++ = x[b].d * (float)x[b].qs[j];
}

/* ---- quantization ---- */

/* Re-quantize sub-blocks of `len` elements against their decoded scale and minimum,
 * x ~ d*l - dm, l in [0, nmax]; sub-blocks whose scale decodes to zero keep their fit levels. */
static void requantize_affine(const float *x, uint8_t *L, int len, float d, float dm, int nmax) {
    if (d == 0) return;
    for (int i = 0; i < len; i++) L[i] = (uint8_t)clamp_int(st_round_even((x[i] + dm) / d), 0, nmax);
}

void st_quantize_row_q2_K_ref(const float *x, block_q2_K *y, int64_t n) {
    uint8_t L[QK_K];
    float w[16], scales[QK_K / 16], mins[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = fit_affine(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        /* 4-bit scales and mins against d = max/15 and dmin = max_min/15 */
        if (max_scale > 0) {
            const float iscale = 15.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) y[b].scales[j] = (uint8_t)st_round_even(iscale * scales[j]);
            y[b].d = st_fp32_to_fp16(max_scale / 15.f);
        } else {
            memset(y[b].scales, 0, sizeof y[b].scales);
            y[b].d = st_fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float imin = 15.f / max_min;
            for (int j = 0; j < QK_K / 16; j++) y[b].scales[j] |= (uint8_t)(st_round_even(imin * mins[j]) << 4);
            y[b].dmin = st_fp32_to_fp16(max_min / 15.f);
        } else {
            y[b].dmin = st_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = st_fp16_to_fp32(y[b].d) * (float)(y[b].scales[j] & 0x0f);
            const float dm = st_fp16_to_fp32(y[b].dmin) * (float)(y[b].scales[j] >> 4);
            requantize_affine(x + 16 * j, L + 16 * j, 16, d, dm, 3);
        }
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *Lh = L + 128 * h + l;
                y[b].qs[32 * h + l] = (uint8_t)(Lh[0] | Lh[32] << 2 | Lh[64] << 4 | Lh[96] << 6);
            }
    }
}

void st_quantize_row_q3_K_ref(const float *x, block_q3_K *y, int64_t n) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = fit_symmetric_descent(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) { amax = fabsf(scales[j]); max_scale = scales[j]; }
        }
        memset(y[b].scales, 0, sizeof y[b].scales);
        if (max_scale != 0) {
            /* 6-bit signed scales: the largest maps to -32 */
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) {
                int8_t l8 = (int8_t)st_round_even(iscale * scales[j]);
                int l = clamp_int(l8, -32, 31) + 32;
                if (j < 8) y[b].scales[j] = (uint8_t)(l & 0x0f);
                else y[b].scales[j - 8] |= (uint8_t)((l & 0x0f) << 4);
                y[b].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y[b].d = st_fp32_to_fp16(1 / iscale);
        } else {
            y[b].d = st_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = st_fp16_to_fp32(y[b].d) * (float)scale_q3_K(y[b].scales, j);
            if (d == 0) continue;
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (int8_t)(clamp_int(st_round_even(x[16 * j + i] / d), -4, 3) + 4);
        }
        /* level 0..7: bit 2 goes to hmask (element j -> byte j%32, bit j/32), the rest to qs */
        memset(y[b].hmask, 0, sizeof y[b].hmask);
        for (int j = 0; j < QK_K; j++)
            if (L[j] > 3) {
                y[b].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                L[j] -= 4;
            }
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const int8_t *Lh = L + 128 * h + l;
                y[b].qs[32 * h + l] = (uint8_t)(Lh[0] | Lh[32] << 2 | Lh[64] << 4 | Lh[96] << 6);
            }
    }
}

/* The common part of q4_K and q5_K: fit the eight 32-element sub-blocks with weights
 * rms(x) + |x|, quantize their scales and mins to 6 bits against d = max/63, dmin = max_min/63,
 * then re-quantize every element to [0, nmax] against what will be decoded. */
static void quantize_superblock_k4(const float *x, uint8_t L[QK_K], int nmax, float rmin, int nstep,
                                   uint8_t scales_out[K_SCALE_SIZE], uint16_t *d_out, uint16_t *dmin_out) {
    float w[32], scales[QK_K / 32], mins[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float rms = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = rms + fabsf(xs[l]);
        scales[j] = fit_affine(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t ls = (uint8_t)st_round_even(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)st_round_even(inv_min * mins[j]);
        set_scale_min_k4(j, scales_out, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *d_out = st_fp32_to_fp16(max_scale / 63.f);
    *dmin_out = st_fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        scale_min_k4(j, scales_out, &sc, &m);
        const float d = st_fp16_to_fp32(*d_out) * (float)sc;
        const float dm = st_fp16_to_fp32(*dmin_out) * (float)m;
        requantize_affine(x + 32 * j, L + 32 * j, 32, d, dm, nmax);
    }
}

void st_quantize_row_q4_K_ref(const float *x, block_q4_K *y, int64_t n) {
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        memset(y[b].scales, 0, K_SCALE_SIZE);
        quantize_superblock_k4(x, L, 15, -1.f, 20, y[b].scales, &y[b].d, &y[b].dmin);
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++)
                y[b].qs[32 * p + l] = (uint8_t)(L[64 * p + l] | L[64 * p + 32 + l] << 4);
    }
}

void st_quantize_row_q5_K_ref(const float *x, block_q5_K *y, int64_t n) {
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        memset(y[b].scales, 0, K_SCALE_SIZE);
        quantize_superblock_k4(x, L, 31, -0.5f, 15, y[b].scales, &y[b].d, &y[b].dmin);
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int j = 0; j < QK_K / 32; j++)
            for (int l = 0; l < 32; l++) {
                int v = L[32 * j + l];
                if (v > 15) y[b].qh[l] |= (uint8_t)(1u << j);
                if (j % 2 == 0) y[b].qs[32 * (j / 2) + l] = (uint8_t)(v & 0x0f);
                else y[b].qs[32 * (j / 2) + l] |= (uint8_t)((v & 0x0f) << 4);
            }
    }
}

void st_quantize_row_q6_K_ref(const float *x, block_q6_K *y, int64_t n) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = fit_symmetric(16, 32, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) { amax = fabsf(scales[j]); max_scale = scales[j]; }
        }
        if (amax < TINY_GROUP) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* 8-bit signed scales: the largest maps to -128 */
        const float iscale = -128.f / max_scale;
        y[b].d = st_fp32_to_fp16(1 / iscale);
        for (int j = 0; j < QK_K / 16; j++) {
            int l = st_round_even(iscale * scales[j]);
            y[b].scales[j] = (int8_t)(l < 127 ? l : 127);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = st_fp16_to_fp32(y[b].d) * (float)y[b].scales[j];
            if (d == 0) continue;
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (int8_t)(clamp_int(st_round_even(x[16 * j + i] / d), -32, 31) + 32);
        }
        /* inverse of the layout in st_dequantize_row_q6_K */
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const int8_t *Lh = L + 128 * h + l;
                y[b].ql[64 * h + l] = (uint8_t)((Lh[0] & 0x0f) | (Lh[64] & 0x0f) << 4);
                y[b].ql[64 * h + 32 + l] = (uint8_t)((Lh[32] & 0x0f) | (Lh[96] & 0x0f) << 4);
                y[b].qh[32 * h + l] = (uint8_t)((Lh[0] >> 4) | (Lh[32] >> 4) << 2 | (Lh[64] >> 4) << 4 | (Lh[96] >> 4) << 6);
            }
    }
}

void st_quantize_row_q8_K_ref(const float *x, block_q8_K *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK_K; j++)
            if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
        if (amax == 0) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* -127 rather than -128 keeps every level's negation representable (kernels rely on it) */
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = st_round_even(iscale * x[j]);
            y[b].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) sum += y[b].qs[16 * g + i];
            y[b].bsums[g] = (int16_t)sum;
        }
        y[b].d = 1 / iscale;
    }
}
