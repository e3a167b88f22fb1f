/* ref_lowbit.c: reference (de)quantizers of the 1- and 2-bit types with one scale per block:
 * Q1_0, Q2_0 (Bonsai-style binary / 2-bit) and the ternary TQ1_0, TQ2_0 (BitNet b1.58, TriLM).
 *
 *   Q1_0   128 per block: d (half), 16 bytes of signs; bit j of byte j/8 set means +d, clear -d.
 *   Q2_0   64 per block: d (half), 16 bytes; element j is bits 2(j%4) of byte j/4, value
 *          (q - 1) * d for q in 0..3, i.e. -d, 0, d, 2d.
 *   TQ2_0  256 per block: 64 bytes then d; per half h of 128, byte m's bit pair l holds element
 *          128h + 32l + m as q in 0..2, value (q - 1) * d.
 *   TQ1_0  256 per block: 48 bytes qs, 4 bytes qh, then d. Each byte packs 5 (qs) or 4 (qh) trits
 *          as a base-3 number scaled to 0..255 (q = ceil(t * 256 / 243), t the base-3 value with
 *          the first trit most significant), so trit n of byte q is ((q * 3^n) mod 256) * 3 >> 8.
 *          Bytes 0-31 hold elements 32n + m (byte m, trit n < 5), bytes 32-47 elements
 *          160 + 16n + m, and qh[j] elements 240 + 4n + j (n < 4).
 * Quantizers follow ggml's reference ones byte for byte (scale = amax, or the mean |x| for Q1_0,
 * levels rounded half away from zero). */
#include <math.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/ref.h"

/* ---- Q1_0 ---- */

void st_dequantize_row_q1_0(const block_q1_0 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 128; b++, y += 128) {
        const float d = st_fp16_to_fp32(x[b].d);
        for (int j = 0; j < 128; j++) y[j] = (x[b].qs[j / 8] >> (j % 8)) & 1 ? d : -d;
    }
}

void st_quantize_row_q1_0_ref(const float *x, block_q1_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / 128; b++, x += 128) {
        float sum_abs = 0;
        for (int j = 0; j < 128; j++) sum_abs += fabsf(x[j]);
        y[b].d = st_fp32_to_fp16(sum_abs / 128);
        memset(y[b].qs, 0, sizeof y[b].qs);
        for (int j = 0; j < 128; j++)
            if (x[j] >= 0.0f) y[b].qs[j / 8] |= (uint8_t)(1u << (j % 8));
    }
}

/* ---- Q2_0 ---- */

void st_dequantize_row_q2_0(const block_q2_0 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 64; b++, y += 64) {
        const float d = st_fp16_to_fp32(x[b].d);
        for (int j = 0; j < 64; j++) y[j] = (float)(((x[b].qs[j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
    }
}

void st_quantize_row_q2_0_ref(const float *x, block_q2_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / 64; b++, x += 64) {
        float amax = 0;
        for (int j = 0; j < 64; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        const float id = amax > 0 ? 1.0f / amax : 0.0f;
        y[b].d = st_fp32_to_fp16(amax);
        memset(y[b].qs, 0, sizeof y[b].qs);
        for (int j = 0; j < 64; j++) {
            int q = (int)roundf(x[j] * id) + 1;
            q = q < 0 ? 0 : q > 3 ? 3 : q;
            y[b].qs[j / 4] |= (uint8_t)(q << (2 * (j % 4)));
        }
    }
}

/* ---- TQ2_0 ---- */

void st_dequantize_row_tq2_0(const block_tq2_0 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = st_fp16_to_fp32(x[b].d);
        for (int i = 0; i < QK_K; i++) {
            int h = i / 128, l = (i % 128) / 32, m = i % 32;
            y[i] = (float)(((x[b].qs[32 * h + m] >> (2 * l)) & 3) - 1) * d;
        }
    }
}

static float block_amax(const float *x, int n) {
    float m = 0;
    for (int j = 0; j < n; j++) m = fabsf(x[j]) > m ? fabsf(x[j]) : m;
    return m;
}

void st_quantize_row_tq2_0_ref(const float *x, block_tq2_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        const float d = block_amax(x, QK_K), id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = st_fp32_to_fp16(d);
        memset(y[b].qs, 0, sizeof y[b].qs);
        for (int i = 0; i < QK_K; i++) {
            int h = i / 128, l = (i % 128) / 32, m = i % 32;
            int q = (int)lroundf(x[i] * id) + 1;
            y[b].qs[32 * h + m] |= (uint8_t)((q & 3) << (2 * l));
        }
    }
}

/* ---- TQ1_0 ---- */

/* trit n (0 = most significant) of a byte packed as described at the top */
static int trit(uint8_t q, int n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    uint8_t t = (uint8_t)(q * pow3[n]);
    return (t * 3) >> 8;
}

/* Element i of a TQ1_0 block: which byte (0-47 qs, 48-51 qh) and which trit. */
static void tq1_0_place(int i, int *byte, int *n) {
    if (i < 160) { *byte = i % 32; *n = i / 32; }
    else if (i < 240) { *byte = 32 + (i - 160) % 16; *n = (i - 160) / 16; }
    else { *byte = 48 + (i - 240) % 4; *n = (i - 240) / 4; }
}

void st_dequantize_row_tq1_0(const block_tq1_0 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = st_fp16_to_fp32(x[b].d);
        for (int i = 0; i < QK_K; i++) {
            int byte, t;
            tq1_0_place(i, &byte, &t);
            uint8_t q = byte < 48 ? x[b].qs[byte] : x[b].qh[byte - 48];
            y[i] = (float)(trit(q, t) - 1) * d;
        }
    }
}

void st_quantize_row_tq1_0_ref(const float *x, block_tq1_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        const float d = block_amax(x, QK_K), id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = st_fp32_to_fp16(d);
        /* the base-3 value of each byte: a byte's elements come in trit order as i grows, so
         * the first one ends up most significant */
        int packed[52] = {0}, trits[52] = {0};
        for (int i = 0; i < QK_K; i++) {
            int byte, t;
            tq1_0_place(i, &byte, &t);
            packed[byte] = packed[byte] * 3 + (int)lroundf(x[i] * id) + 1;
            trits[byte]++;
        }
        uint8_t bytes[52];
        for (int j = 0; j < 52; j++) {
            int v = trits[j] == 4 ? packed[j] * 3 : packed[j];  /* qh: 4 trits, shifted to the top */
            bytes[j] = (uint8_t)(((uint16_t)(uint8_t)v * 256 + 242) / 243);
        }
        memcpy(y[b].qs, bytes, 48);
        memcpy(y[b].qh, bytes + 48, 4);
    }
}
