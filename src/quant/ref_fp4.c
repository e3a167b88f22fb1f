/* ref_fp4.c: reference (de)quantizers of the 4-bit floating-point types, whose elements are
 * E2M1 codes (sign, 2 exponent bits, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives),
 * stored doubled as the integers of st_fp4_levels so the dot products stay in integers.
 *
 *   MXFP4  32 per block: e (E8M0, the power of two 2^(e-127)), 16 bytes of codes; byte j holds
 *          element j (low nibble) and j + 16 (high). Value = level * 2^(e-128) (the half
 *          undoes the doubling).
 *   NVFP4  64 per block: 4 UE4M3 scales (unsigned, 4 exponent bits with bias 7, 3 mantissa bits),
 *          one per 16 elements, then 32 bytes; sub-block s's bytes 8s..8s+7 hold its element j
 *          (low nibble) and j + 8 (high). Value = level * ue4m3(d[s]) / 2.
 * Quantizers follow ggml's reference ones byte for byte: the scale from the block's largest |x|,
 * each element the nearest level (the first of equals). */
#include <math.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/ref.h"

const int8_t st_fp4_levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float st_e8m0_half_lut[256], st_ue4m3_half_lut[256];

/* the SIMD kernels read the scales from these tables (fp4_simd.h), filled from the functions of
 * ref.h when the library loads */
__attribute__((constructor)) static void fp4_scale_luts_fill(void) {
    for (int c = 0; c < 256; c++) {
        st_e8m0_half_lut[c] = st_e8m0_to_fp32_half((uint8_t)c);
        st_ue4m3_half_lut[c] = st_ue4m3_to_fp32_half((uint8_t)c);
    }
}

/* The UE4M3 code nearest x (ggml's rounding: the bit below the mantissa rounds up; subnormals
 * round half up; saturates at 448; x <= 0 or NaN gives 0). */
static uint8_t fp32_to_ue4m3(float x) {
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    uint32_t bits;
    memcpy(&bits, &x, 4);
    int exp = (int)((bits >> 23) & 0xFF) - 127 + 7, man = (int)((bits >> 20) & 7);
    if (exp <= 0) {
        int m = (int)(x * 512.0f + 0.5f);
        return m > 7 ? 7 : m < 1 ? 0 : (uint8_t)m;
    }
    if (exp >= 15) return 0x7E;
    man += (bits >> 19) & 1;
    if (man > 7) {
        man = 0;
        if (++exp >= 15) return 0x7E;
    }
    return (uint8_t)(exp << 3 | man);
}

static uint8_t nearest_level(float x, float d) {
    int best = 0;
    float best_err = fabsf(st_fp4_levels[0] * d - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf(st_fp4_levels[i] * d - x);
        if (err < best_err) { best = i; best_err = err; }
    }
    return (uint8_t)best;
}

void st_dequantize_row_mxfp4(const block_mxfp4 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        const float d = st_e8m0_to_fp32_half(x[b].e);
        for (int j = 0; j < 16; j++) {
            y[j] = st_fp4_levels[x[b].qs[j] & 0xF] * d;
            y[j + 16] = st_fp4_levels[x[b].qs[j] >> 4] * d;
        }
    }
}

void st_quantize_row_mxfp4_ref(const float *x, block_mxfp4 *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = amax < fabsf(x[j]) ? fabsf(x[j]) : amax;
        /* the largest level (6 = 12 / 2) times 2^(e-127) just covers amax's octave */
        const uint8_t e = amax > 0 ? (uint8_t)(int)(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = st_e8m0_to_fp32_half(e);
        y[b].e = e;
        for (int j = 0; j < 16; j++) y[b].qs[j] = (uint8_t)(nearest_level(x[j], d) | nearest_level(x[j + 16], d) << 4);
    }
}

void st_dequantize_row_nvfp4(const block_nvfp4 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 64; b++) {
        for (int s = 0; s < 4; s++, y += 16) {
            const float d = st_ue4m3_to_fp32_half(x[b].d[s]);
            const uint8_t *q = x[b].qs + 8 * s;
            for (int j = 0; j < 8; j++) {
                y[j] = st_fp4_levels[q[j] & 0xF] * d;
                y[j + 8] = st_fp4_levels[q[j] >> 4] * d;
            }
        }
    }
}

void st_quantize_row_nvfp4_ref(const float *x, block_nvfp4 *y, int64_t n) {
    for (int64_t b = 0; b < n / 64; b++) {
        for (int s = 0; s < 4; s++, x += 16) {
            float amax = 0;
            for (int j = 0; j < 16; j++) amax = amax < fabsf(x[j]) ? fabsf(x[j]) : amax;
            const uint8_t code = fp32_to_ue4m3(amax / 6.0f);    /* 6: the largest E2M1 value */
            const float d = st_ue4m3_to_fp32_half(code);
            y[b].d[s] = code;
            for (int j = 0; j < 8; j++)
                y[b].qs[8 * s + j] = (uint8_t)(nearest_level(x[j], d) | nearest_level(x[j + 8], d) << 4);
        }
    }
}
