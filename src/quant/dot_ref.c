/* dot_ref.c: the scalar reference dot products, one per weight type, and the plain activation
 * converters (f32, f16, f16 widened, bf16). Each sums integer products per (sub-)block exactly as the block
 * format defines the values, then scales in f32, the same order ggml's reference uses; every SIMD
 * variant is tested against these. Plain C only: no intrinsics, no tricks. */
#include "quant/dot.h"
#include "quant/dot_iq.h"

#include <math.h>
#include <string.h>
#include "quant/quant.h"
#include "quant/ref.h"

/* The 16 non-linear levels of IQ4_NL / IQ4_XS (a fact of the format). */
static const int8_t iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

static float h2f(uint16_t h) { return st_fp16_to_fp32(h); }

/* ---- 32-element block types against Q8_0 / Q8_1 ---- */

static float dot_q4_0_row(int64_t k, const block_q4_0 *w, const block_q8_0 *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / 32; b++) {
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += ((w[b].qs[j] & 0xF) - 8) * x[b].qs[j];
            isum += ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + 16];
        }
        sum += h2f(w[b].d) * h2f(x[b].d) * (float)isum;
    }
    return sum;
}

static float dot_q4_1_row(int64_t k, const block_q4_1 *w, const block_q8_1 *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / 32; b++) {
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += (w[b].qs[j] & 0xF) * x[b].qs[j];
            isum += (w[b].qs[j] >> 4) * x[b].qs[j + 16];
        }
        /* sum(d*q + m)(dx*qx) = d*dx*isum + m * (dx*sum qx); Q8_1's s holds dx*sum(qx) */
        sum += h2f(w[b].d) * h2f(x[b].d) * (float)isum + h2f(w[b].m) * h2f(x[b].s);
    }
    return sum;
}

static uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static float dot_q5_0_row(int64_t k, const block_q5_0 *w, const block_q8_0 *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / 32; b++) {
        uint32_t qh = load_u32(w[b].qh);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (w[b].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (w[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            isum += (lo - 16) * x[b].qs[j] + (hi - 16) * x[b].qs[j + 16];
        }
        sum += h2f(w[b].d) * h2f(x[b].d) * (float)isum;
    }
    return sum;
}

static float dot_q5_1_row(int64_t k, const block_q5_1 *w, const block_q8_1 *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / 32; b++) {
        uint32_t qh = load_u32(w[b].qh);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (w[b].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (w[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            isum += lo * x[b].qs[j] + hi * x[b].qs[j + 16];
        }
        sum += h2f(w[b].d) * h2f(x[b].d) * (float)isum + h2f(w[b].m) * h2f(x[b].s);
    }
    return sum;
}

static float dot_q8_0_row(int64_t k, const block_q8_0 *w, const block_q8_0 *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / 32; b++) {
        int isum = 0;
        for (int j = 0; j < 32; j++) isum += w[b].qs[j] * x[b].qs[j];
        sum += h2f(w[b].d) * h2f(x[b].d) * (float)isum;
    }
    return sum;
}

static float dot_iq4_nl_row(int64_t k, const block_iq4_nl *w, const block_q8_0 *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / 32; b++) {
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += iq4nl_levels[w[b].qs[j] & 0xF] * x[b].qs[j];
            isum += iq4nl_levels[w[b].qs[j] >> 4] * x[b].qs[j + 16];
        }
        sum += h2f(w[b].d) * h2f(x[b].d) * (float)isum;
    }
    return sum;
}

/* ---- the low-bit and FP4 types against Q8_0: one weight block spans 4 (Q1_0), 2 (Q2_0,
 * NVFP4) or 1 (MXFP4) activation blocks. Sums in ggml's order: per activation block an integer
 * sum, scaled by the activation's d, then by the weight's. ---- */

static float dot_q1_0_row(int64_t k, const block_q1_0 *w, const block_q8_0 *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / 128; b++) {
        float s = 0;
        for (int g = 0; g < 4; g++) {
            const block_q8_0 *xb = &x[4 * b + g];
            int isum = 0;
            for (int j = 0; j < 32; j++) isum += (w[b].qs[4 * g + j / 8] >> (j % 8)) & 1 ? xb->qs[j] : -xb->qs[j];
            s += h2f(xb->d) * (float)isum;
        }
        sum += h2f(w[b].d) * s;
    }
    return sum;
}

static float dot_q2_0_row(int64_t k, const block_q2_0 *w, const block_q8_0 *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / 64; b++) {
        float s = 0;
        for (int g = 0; g < 2; g++) {
            const block_q8_0 *xb = &x[2 * b + g];
            int isum = 0;
            for (int j = 0; j < 32; j++) isum += (((w[b].qs[8 * g + j / 4] >> (2 * (j % 4))) & 3) - 1) * xb->qs[j];
            s += h2f(xb->d) * (float)isum;
        }
        sum += h2f(w[b].d) * s;
    }
    return sum;
}

static float dot_mxfp4_row(int64_t k, const block_mxfp4 *w, const block_q8_0 *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / 32; b++) {
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += st_fp4_levels[w[b].qs[j] & 0xF] * x[b].qs[j] + st_fp4_levels[w[b].qs[j] >> 4] * x[b].qs[j + 16];
        sum += h2f(x[b].d) * st_e8m0_to_fp32_half(w[b].e) * (float)isum;
    }
    return sum;
}

static float dot_nvfp4_row(int64_t k, const block_nvfp4 *w, const block_q8_0 *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / 64; b++) {
        for (int s = 0; s < 4; s++) { /* sub-block s: elements 16(s%2).. of activation block 2b + s/2 */
            const block_q8_0 *xb = &x[2 * b + s / 2];
            const int8_t *a = xb->qs + 16 * (s % 2);
            const uint8_t *q = w[b].qs + 8 * s;
            int isum = 0;
            for (int j = 0; j < 8; j++) isum += st_fp4_levels[q[j] & 0xF] * a[j] + st_fp4_levels[q[j] >> 4] * a[j + 8];
            sum += h2f(xb->d) * st_ue4m3_to_fp32_half(w[b].d[s]) * (float)isum;
        }
    }
    return sum;
}

/* ---- K-quants and IQ4_XS against Q8_K ---- */

/* The 8 six-bit scales and mins of Q4_K / Q5_K, packed in 12 bytes. */
static void unpack_scale_min_k4(const uint8_t *q, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        mn[j] = q[j + 4] & 63;
        sc[j + 4] = (uint8_t)((q[j + 8] & 0xF) | ((q[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}

/* sum over the 32-element sub-block j of the activation, from Q8_K's 16-element sums */
static int bsum32(const block_q8_K *x, int j) { return x->bsums[2 * j] + x->bsums[2 * j + 1]; }

static float dot_q4_K_row(int64_t k, const block_q4_K *w, const block_q8_K *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / QK_K; b++) {
        uint8_t sc[8], mn[8];
        unpack_scale_min_k4(w[b].scales, sc, mn);
        int isum = 0, msum = 0;
        for (int g = 0; g < 4; g++) { /* 64 elements: low nibbles then high nibbles of 32 bytes */
            const uint8_t *q = w[b].qs + 32 * g;
            const int8_t *a = x[b].qs + 64 * g;
            int lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                lo += (q[l] & 0xF) * a[l];
                hi += (q[l] >> 4) * a[l + 32];
            }
            isum += sc[2 * g] * lo + sc[2 * g + 1] * hi;
        }
        for (int j = 0; j < 8; j++) msum += mn[j] * bsum32(&x[b], j);
        sum += x[b].d * (h2f(w[b].d) * (float)isum - h2f(w[b].dmin) * (float)msum);
    }
    return sum;
}

static float dot_q5_K_row(int64_t k, const block_q5_K *w, const block_q8_K *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / QK_K; b++) {
        uint8_t sc[8], mn[8];
        unpack_scale_min_k4(w[b].scales, sc, mn);
        int isum = 0, msum = 0;
        for (int g = 0; g < 4; g++) {
            const uint8_t *q = w[b].qs + 32 * g;
            const int8_t *a = x[b].qs + 64 * g;
            int lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                int hbit_lo = (w[b].qh[l] >> (2 * g)) & 1, hbit_hi = (w[b].qh[l] >> (2 * g + 1)) & 1;
                lo += ((q[l] & 0xF) | (hbit_lo << 4)) * a[l];
                hi += ((q[l] >> 4) | (hbit_hi << 4)) * a[l + 32];
            }
            isum += sc[2 * g] * lo + sc[2 * g + 1] * hi;
        }
        for (int j = 0; j < 8; j++) msum += mn[j] * bsum32(&x[b], j);
        sum += x[b].d * (h2f(w[b].d) * (float)isum - h2f(w[b].dmin) * (float)msum);
    }
    return sum;
}

static float dot_q6_K_row(int64_t k, const block_q6_K *w, const block_q8_K *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / QK_K; b++) {
        int isum = 0;
        for (int h = 0; h < 2; h++) { /* two halves of 128 elements */
            const uint8_t *ql = w[b].ql + 64 * h, *qh = w[b].qh + 32 * h;
            const int8_t *sc = w[b].scales + 8 * h;
            const int8_t *a = x[b].qs + 128 * h;
            for (int quarter = 0; quarter < 4; quarter++) { /* 32 elements each, two scales */
                for (int part = 0; part < 2; part++) {
                    int sub = 0;
                    for (int l = 16 * part; l < 16 * part + 16; l++) {
                        uint8_t byte = ql[l + 32 * (quarter & 1)];
                        int nib = quarter < 2 ? (byte & 0xF) : (byte >> 4);
                        int q = (nib | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
                        sub += q * a[32 * quarter + l];
                    }
                    isum += sc[2 * quarter + part] * sub;
                }
            }
        }
        sum += x[b].d * h2f(w[b].d) * (float)isum;
    }
    return sum;
}

static float dot_q2_K_row(int64_t k, const block_q2_K *w, const block_q8_K *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / QK_K; b++) {
        int isum = 0, msum = 0;
        for (int s = 0; s < 16; s++) { /* 16-element sub-block s: half s/8, shift (s%8)/2, part s%2 */
            int half = s / 8, shift = 2 * ((s % 8) / 2), part = s % 2, sub = 0;
            const uint8_t *q = w[b].qs + 32 * half + 16 * part;
            for (int l = 0; l < 16; l++) sub += ((q[l] >> shift) & 3) * x[b].qs[16 * s + l];
            isum += (w[b].scales[s] & 0xF) * sub;
            msum += (w[b].scales[s] >> 4) * x[b].bsums[s];
        }
        sum += x[b].d * (h2f(w[b].d) * (float)isum - h2f(w[b].dmin) * (float)msum);
    }
    return sum;
}

/* The 16 six-bit signed (offset 32) scales of Q3_K. */
static void unpack_scales_q3_K(const uint8_t *p, int sc[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? p[j] & 0xF : p[j - 8] >> 4;
        int hi = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (lo | (hi << 4)) - 32;
    }
}

static float dot_q3_K_row(int64_t k, const block_q3_K *w, const block_q8_K *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / QK_K; b++) {
        int sc[16], isum = 0;
        unpack_scales_q3_K(w[b].scales, sc);
        for (int s = 0; s < 16; s++) { /* layout as Q2_K; the high bit (hmask) clear means -4 */
            int half = s / 8, pair = (s % 8) / 2, shift = 2 * pair, part = s % 2, sub = 0;
            const uint8_t *q = w[b].qs + 32 * half + 16 * part;
            const uint8_t *hm = w[b].hmask + 16 * part;
            uint8_t bit = (uint8_t)(1u << (4 * half + pair));
            for (int l = 0; l < 16; l++) {
                int v = ((q[l] >> shift) & 3) - ((hm[l] & bit) ? 0 : 4);
                sub += v * x[b].qs[16 * s + l];
            }
            isum += sc[s] * sub;
        }
        sum += x[b].d * h2f(w[b].d) * (float)isum;
    }
    return sum;
}

static float dot_iq4_xs_row(int64_t k, const block_iq4_xs *w, const block_q8_K *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / QK_K; b++) {
        int isum = 0;
        for (int s = 0; s < 8; s++) {
            int ls = ((w[b].scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((w[b].scales_h >> (2 * s)) & 3) << 4);
            const uint8_t *q = w[b].qs + 16 * s;
            const int8_t *a = x[b].qs + 32 * s;
            int sub = 0;
            for (int j = 0; j < 16; j++) sub += iq4nl_levels[q[j] & 0xF] * a[j] + iq4nl_levels[q[j] >> 4] * a[j + 16];
            isum += (ls - 32) * sub;
        }
        sum += x[b].d * h2f(w[b].d) * (float)isum;
    }
    return sum;
}

/* ---- the ternary types against Q8_K: sum (q - 1) a over the block, q in 0..2 ---- */

static float dot_tq2_0_row(int64_t k, const block_tq2_0 *w, const block_q8_K *x) {
    float sum = 0;
    for (int64_t b = 0; b < k / QK_K; b++) {
        int isum = 0;
        for (int i = 0; i < QK_K; i++) {
            int h = i / 128, l = (i % 128) / 32, m = i % 32;
            isum += (((w[b].qs[32 * h + m] >> (2 * l)) & 3) - 1) * x[b].qs[i];
        }
        sum += (float)isum * (h2f(w[b].d) * x[b].d);
    }
    return sum;
}

static float dot_tq1_0_row(int64_t k, const block_tq1_0 *w, const block_q8_K *x) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    float sum = 0;
    for (int64_t b = 0; b < k / QK_K; b++) {
        int isum = 0;
        for (int i = 0; i < QK_K; i++) { /* byte and trit of element i: see ref_lowbit.c */
            int byte = i < 160 ? i % 32 : i < 240 ? 32 + (i - 160) % 16 : 48 + (i - 240) % 4;
            int n = i < 160 ? i / 32 : i < 240 ? (i - 160) / 16 : (i - 240) / 4;
            uint8_t q = byte < 48 ? w[b].qs[byte] : w[b].qh[byte - 48];
            isum += ((((uint8_t)(q * pow3[n])) * 3 >> 8) - 1) * x[b].qs[i];
        }
        sum += (float)isum * (h2f(w[b].d) * x[b].d);
    }
    return sum;
}

/* ---- float types ---- */

static float dot_f32_row(int64_t k, const float *w, const float *x) {
    float sum = 0;
    for (int64_t i = 0; i < k; i++) sum += w[i] * x[i];
    return sum;
}

/* x in F16's form, ST_ACT_F16X: f16 values held as f32 */
static float dot_f16_row(int64_t k, const uint16_t *w, const float *x) {
    float sum = 0;
    for (int64_t i = 0; i < k; i++) sum += h2f(w[i]) * x[i];
    return sum;
}

static float dot_bf16_row(int64_t k, const uint16_t *w, const uint16_t *x) {
    float sum = 0;
    for (int64_t i = 0; i < k; i++) sum += st_bf16_to_fp32(w[i]) * st_bf16_to_fp32(x[i]);
    return sum;
}

/* One kernel per type: the row function applied to each of the nx activation rows. */
#define REF_KERNEL(name, wtype, xtype)                                                             \
    static void ref_##name(int64_t k, const void *w, const void *x, size_t x_stride, int nx,      \
                           float *out) {                                                           \
        for (int j = 0; j < nx; j++)                                                               \
            out[j] = dot_##name##_row(k, (const wtype *)w, (const xtype *)((const char *)x + j * x_stride)); \
    }

REF_KERNEL(f32, float, float)
REF_KERNEL(f16, uint16_t, float)
REF_KERNEL(bf16, uint16_t, uint16_t)
REF_KERNEL(q4_0, block_q4_0, block_q8_0)
REF_KERNEL(q4_1, block_q4_1, block_q8_1)
REF_KERNEL(q5_0, block_q5_0, block_q8_0)
REF_KERNEL(q5_1, block_q5_1, block_q8_1)
REF_KERNEL(q8_0, block_q8_0, block_q8_0)
REF_KERNEL(q2_K, block_q2_K, block_q8_K)
REF_KERNEL(q3_K, block_q3_K, block_q8_K)
REF_KERNEL(q4_K, block_q4_K, block_q8_K)
REF_KERNEL(q5_K, block_q5_K, block_q8_K)
REF_KERNEL(q6_K, block_q6_K, block_q8_K)
REF_KERNEL(iq4_nl, block_iq4_nl, block_q8_0)
REF_KERNEL(iq4_xs, block_iq4_xs, block_q8_K)
REF_KERNEL(q1_0, block_q1_0, block_q8_0)
REF_KERNEL(q2_0, block_q2_0, block_q8_0)
REF_KERNEL(mxfp4, block_mxfp4, block_q8_0)
REF_KERNEL(nvfp4, block_nvfp4, block_q8_0)
REF_KERNEL(tq1_0, block_tq1_0, block_q8_K)
REF_KERNEL(tq2_0, block_tq2_0, block_q8_K)

const st_dot_fn st_dot_ref[ST_TYPE_COUNT] = {
    ST_DOT_IQ_ENTRIES(ref), /* the grid i-quants: dot_iq*.c */
    [ST_TYPE_F32] = ref_f32,      [ST_TYPE_F16] = ref_f16,       [ST_TYPE_BF16] = ref_bf16,
    [ST_TYPE_Q4_0] = ref_q4_0,    [ST_TYPE_Q4_1] = ref_q4_1,     [ST_TYPE_Q5_0] = ref_q5_0,
    [ST_TYPE_Q5_1] = ref_q5_1,    [ST_TYPE_Q8_0] = ref_q8_0,     [ST_TYPE_Q2_K] = ref_q2_K,
    [ST_TYPE_Q3_K] = ref_q3_K,    [ST_TYPE_Q4_K] = ref_q4_K,     [ST_TYPE_Q5_K] = ref_q5_K,
    [ST_TYPE_Q6_K] = ref_q6_K,    [ST_TYPE_IQ4_NL] = ref_iq4_nl, [ST_TYPE_IQ4_XS] = ref_iq4_xs,
    [ST_TYPE_Q1_0] = ref_q1_0,    [ST_TYPE_Q2_0] = ref_q2_0,     [ST_TYPE_MXFP4] = ref_mxfp4,
    [ST_TYPE_NVFP4] = ref_nvfp4,  [ST_TYPE_TQ1_0] = ref_tq1_0,   [ST_TYPE_TQ2_0] = ref_tq2_0,
};

void st_act_f32_ref(const float *x, void *y, int64_t k) { memcpy(y, x, (size_t)k * sizeof(float)); }

static float block_amax(const float *x, int n) {
    float m = 0;
    for (int j = 0; j < n; j++) m = fabsf(x[j]) > m ? fabsf(x[j]) : m;
    return m;
}

void st_act_q8_0_ref(const float *x, void *yv, int64_t k) {
    block_q8_0 *y = yv;
    for (int64_t b = 0; b < k / 32; b++, x += 32) {
        const float amax = block_amax(x, 32);
        const float id = amax != 0 ? 127.0f / amax : 0.0f;
        y[b].d = st_fp32_to_fp16(amax / 127);
        for (int j = 0; j < 32; j++) y[b].qs[j] = (int8_t)nearbyintf(x[j] * id);
    }
}

void st_act_q8_1_ref(const float *x, void *yv, int64_t k) {
    block_q8_1 *y = yv;
    for (int64_t b = 0; b < k / 32; b++, x += 32) {
        const float amax = block_amax(x, 32), d = amax / 127;
        const float id = amax != 0 ? 127.0f / amax : 0.0f;
        int sum = 0;
        y[b].d = st_fp32_to_fp16(d);
        for (int j = 0; j < 32; j++) sum += y[b].qs[j] = (int8_t)nearbyintf(x[j] * id);
        y[b].s = st_fp32_to_fp16(d * (float)sum);
    }
}

void st_act_f16_ref(const float *x, void *y, int64_t k) {
    uint16_t *h = y;
    for (int64_t i = 0; i < k; i++) h[i] = st_fp32_to_fp16(x[i]);
}

void st_act_f16x_ref(const float *x, void *y, int64_t k) {
    float *f = y;
    for (int64_t i = 0; i < k; i++) f[i] = st_fp16_to_fp32(st_fp32_to_fp16(x[i]));
}

void st_act_bf16_ref(const float *x, void *y, int64_t k) {
    uint16_t *h = y;
    for (int64_t i = 0; i < k; i++) h[i] = st_fp32_to_bf16(x[i]);
}
