/* ref_legacy.c: the 32-element block types q4_0, q4_1, q5_0, q5_1, q8_0 and the activation form
 * q8_1: dequantization and the reference quantizers.
 *
 * Symmetric types (q4_0, q5_0) take the scale from the element of largest magnitude, signed so
 * that element maps to the most negative level (-8 or -16), which the asymmetric code range can
 * hold exactly. Affine types (q4_1, q5_1) spread [min, max] over the levels. q8_0 / q8_1 scale
 * by amax / 127 and round half away from zero. Every product and sum is written in the order
 * ggml evaluates it, so results match the peer bit for bit (tests/unit/test_quant_ggml.c). */
#include <float.h>
#include <math.h>
#include <string.h>
#include "quant/quant.h"
#include "quant/ref.h"

#define QK 32

/* ---- dequantization ---- */

void st_dequantize_row_q4_0(const block_q4_0 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++, y += QK) {
        const float d = st_fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = (float)((x[b].qs[j] & 0x0f) - 8) * d;
            y[j + QK / 2] = (float)((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

void st_dequantize_row_q4_1(const block_q4_1 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++, y += QK) {
        const float d = st_fp16_to_fp32(x[b].d), m = st_fp16_to_fp32(x[b].m);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = (float)(x[b].qs[j] & 0x0f) * d + m;
            y[j + QK / 2] = (float)(x[b].qs[j] >> 4) * d + m;
        }
    }
}

/* Bit j of qh is the fifth bit of element j (low nibbles are elements 0..15, high 16..31). */
static inline uint32_t load_qh(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static inline void unpack_q5(const uint8_t qs[16], uint32_t qh, int q[QK]) {
    for (int j = 0; j < QK / 2; j++) {
        q[j] = (qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
        q[j + QK / 2] = (qs[j] >> 4) | (int)((qh >> (j + QK / 2)) & 1) << 4;
    }
}

void st_dequantize_row_q5_0(const block_q5_0 *x, float *y, int64_t n) {
    int q[QK];
    for (int64_t b = 0; b < n / QK; b++, y += QK) {
        const float d = st_fp16_to_fp32(x[b].d);
        unpack_q5(x[b].qs, load_qh(x[b].qh), q);
        for (int j = 0; j < QK; j++) y[j] = (float)(q[j] - 16) * d;
    }
}

void st_dequantize_row_q5_1(const block_q5_1 *x, float *y, int64_t n) {
    int q[QK];
    for (int64_t b = 0; b < n / QK; b++, y += QK) {
        const float d = st_fp16_to_fp32(x[b].d), m = st_fp16_to_fp32(x[b].m);
        unpack_q5(x[b].qs, load_qh(x[b].qh), q);
        for (int j = 0; j < QK; j++) y[j] = (float)q[j] * d + m;
    }
}

void st_dequantize_row_q8_0(const block_q8_0 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++, y += QK) {
        const float d = st_fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK; j++) y[j] = (float)x[b].qs[j] * d;
    }
}

/* ---- quantization ---- */

/* The element of largest magnitude, with its sign (the first one on ties). */
static float signed_absmax(const float *x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    return max;
}

static void min_max(const float *x, int n, float *min, float *max) {
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

static inline int min_int(int a, int b) { return a < b ? a : b; }

void st_quantize_row_q4_0_ref(const float *x, block_q4_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++, x += QK) {
        const float d = signed_absmax(x, QK) / -8;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = st_fp32_to_fp16(d);
        for (int j = 0; j < QK / 2; j++) {
            /* x*id lies in [-8, 8]; +8.5 then truncation rounds half up onto 0..16, clamp to 15 */
            int lo = min_int(15, (int8_t)(x[j] * id + 8.5f));
            int hi = min_int(15, (int8_t)(x[j + QK / 2] * id + 8.5f));
            y[b].qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

void st_quantize_row_q4_1_ref(const float *x, block_q4_1 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++, x += QK) {
        float min, max;
        min_max(x, QK, &min, &max);
        const float d = (max - min) / 15;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = st_fp32_to_fp16(d);
        y[b].m = st_fp32_to_fp16(min);
        for (int j = 0; j < QK / 2; j++) {
            int lo = min_int(15, (int8_t)((x[j] - min) * id + 0.5f));
            int hi = min_int(15, (int8_t)((x[j + QK / 2] - min) * id + 0.5f));
            y[b].qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

static void pack_q5(const int q[QK], uint8_t qs[16], uint8_t qh_bytes[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < QK / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | (q[j + QK / 2] & 0x0f) << 4);
        qh |= (uint32_t)((q[j] >> 4) & 1) << j;
        qh |= (uint32_t)((q[j + QK / 2] >> 4) & 1) << (j + QK / 2);
    }
    for (int k = 0; k < 4; k++) qh_bytes[k] = (uint8_t)(qh >> (8 * k));
}

void st_quantize_row_q5_0_ref(const float *x, block_q5_0 *y, int64_t n) {
    int q[QK];
    for (int64_t b = 0; b < n / QK; b++, x += QK) {
        const float d = signed_absmax(x, QK) / -16;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = st_fp32_to_fp16(d);
        for (int j = 0; j < QK; j++) q[j] = min_int(31, (int8_t)(x[j] * id + 16.5f));
        pack_q5(q, y[b].qs, y[b].qh);
    }
}

void st_quantize_row_q5_1_ref(const float *x, block_q5_1 *y, int64_t n) {
    int q[QK];
    for (int64_t b = 0; b < n / QK; b++, x += QK) {
        float min, max;
        min_max(x, QK, &min, &max);
        const float d = (max - min) / 31;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = st_fp32_to_fp16(d);
        y[b].m = st_fp32_to_fp16(min);
        /* (x - min)*id is in [0, 31]: no clamp, as in ggml */
        for (int j = 0; j < QK; j++) q[j] = (uint8_t)((x[j] - min) * id + 0.5f);
        pack_q5(q, y[b].qs, y[b].qh);
    }
}

static float absmax(const float *x, int n) {
    float amax = 0;
    for (int j = 0; j < n; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    return amax;
}

void st_quantize_row_q8_0_ref(const float *x, block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++, x += QK) {
        const float d = absmax(x, QK) / 127;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = st_fp32_to_fp16(d);
        for (int j = 0; j < QK; j++) y[b].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

void st_quantize_row_q8_1_ref(const float *x, block_q8_1 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++, x += QK) {
        const float d = absmax(x, QK) / 127;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        int sum = 0;
        y[b].d = st_fp32_to_fp16(d);
        for (int j = 0; j < QK; j++) {
            y[b].qs[j] = (int8_t)roundf(x[j] * id);
            sum += y[b].qs[j];
        }
        /* s = d * sum(qs): the block's contribution of a q4_1/q5_1 minimum, precomputed */
        y[b].s = st_fp32_to_fp16((float)sum * d);
    }
}
