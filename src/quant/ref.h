/* ref.h: the per-type reference (de)quantizers behind st_dequantize_row / st_quantize_row
 * (quant.c dispatches on the type id). Each pair lives with its family: ref_legacy.c (q4_0 ..
 * q8_1), ref_k.c (q2_K .. q6_K, q8_K), ref_iq4.c (iq4_nl, iq4_xs). n is a multiple of the block
 * size. ref_lowbit.c holds q1_0, q2_0, tq1_0, tq2_0; ref_fp4.c mxfp4, nvfp4. Private to src/quant and its tests; other code goes through quant.h. */
#ifndef ST_QUANT_REF_H
#define ST_QUANT_REF_H

#include <stdint.h>
#include "quant/types.h"

/* Round to the nearest integer, ties to even, for |x| < 2^22 (what every quantizer here assumes):
 * adding 1.5 * 2^23 pushes the fraction out of the mantissa, whose low 23 bits then hold
 * round(x) + 2^22. Outside that range it returns the same garbage as ggml's, which keeps the
 * quantizers bit-exact even on absurd inputs. */
static inline int st_round_even(float x) {
    union { float f; uint32_t u; } v = {x + 12582912.0f};
    return (int)(v.u & 0x7fffff) - 0x400000;
}

/* The FP4 types' scales (ref_fp4.c), as f32 halved (the levels below are doubled E2M1 values):
 * E8M0 e is 2^(e-127), so this is 2^(e-128), subnormal for e < 2; UE4M3 x is (1 + m/8) 2^(E-7)
 * for exponent bits E > 0, m 2^-9 for E = 0, and ggml reads 0x7F (the format's NaN) as 0. Both
 * are built from bits, exactly. */
extern const int8_t st_fp4_levels[16];
/* the two functions below on every byte, for the SIMD kernels (one load a scale) */
extern float st_e8m0_half_lut[256], st_ue4m3_half_lut[256];
static inline float st_f32_of_bits(uint32_t u) {
    union { uint32_t u; float f; } v = {u};
    return v.f;
}
static inline float st_e8m0_to_fp32_half(uint8_t e) {
    return st_f32_of_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}
static inline float st_ue4m3_to_fp32_half(uint8_t x) {
    unsigned exp = (x >> 3) & 0xF, man = x & 7;
    if (x == 0x7F) return 0.0f;
    if (exp == 0) return (float)man * (1.0f / 1024);
    return st_f32_of_bits((exp - 8 + 127) << 23 | man << 20);
}

void st_dequantize_row_q4_0(const block_q4_0 *x, float *y, int64_t n);
void st_dequantize_row_q4_1(const block_q4_1 *x, float *y, int64_t n);
void st_dequantize_row_q5_0(const block_q5_0 *x, float *y, int64_t n);
void st_dequantize_row_q5_1(const block_q5_1 *x, float *y, int64_t n);
void st_dequantize_row_q8_0(const block_q8_0 *x, float *y, int64_t n);
void st_dequantize_row_q2_K(const block_q2_K *x, float *y, int64_t n);
void st_dequantize_row_q3_K(const block_q3_K *x, float *y, int64_t n);
void st_dequantize_row_q4_K(const block_q4_K *x, float *y, int64_t n);
void st_dequantize_row_q5_K(const block_q5_K *x, float *y, int64_t n);
void st_dequantize_row_q6_K(const block_q6_K *x, float *y, int64_t n);
void st_dequantize_row_q8_K(const block_q8_K *x, float *y, int64_t n);
void st_dequantize_row_iq4_nl(const block_iq4_nl *x, float *y, int64_t n);
void st_dequantize_row_iq4_xs(const block_iq4_xs *x, float *y, int64_t n);
void st_dequantize_row_q1_0(const block_q1_0 *x, float *y, int64_t n);
void st_dequantize_row_q2_0(const block_q2_0 *x, float *y, int64_t n);
void st_dequantize_row_tq1_0(const block_tq1_0 *x, float *y, int64_t n);
void st_dequantize_row_tq2_0(const block_tq2_0 *x, float *y, int64_t n);
void st_dequantize_row_mxfp4(const block_mxfp4 *x, float *y, int64_t n);
void st_dequantize_row_nvfp4(const block_nvfp4 *x, float *y, int64_t n);

void st_quantize_row_q4_0_ref(const float *x, block_q4_0 *y, int64_t n);
void st_quantize_row_q4_1_ref(const float *x, block_q4_1 *y, int64_t n);
void st_quantize_row_q5_0_ref(const float *x, block_q5_0 *y, int64_t n);
void st_quantize_row_q5_1_ref(const float *x, block_q5_1 *y, int64_t n);
void st_quantize_row_q2_K_ref(const float *x, block_q2_K *y, int64_t n);
void st_quantize_row_q3_K_ref(const float *x, block_q3_K *y, int64_t n);
void st_quantize_row_q4_K_ref(const float *x, block_q4_K *y, int64_t n);
void st_quantize_row_q5_K_ref(const float *x, block_q5_K *y, int64_t n);
void st_quantize_row_q6_K_ref(const float *x, block_q6_K *y, int64_t n);
void st_quantize_row_iq4_nl_ref(const float *x, block_iq4_nl *y, int64_t n);
void st_quantize_row_iq4_xs_ref(const float *x, block_iq4_xs *y, int64_t n);
void st_quantize_row_q1_0_ref(const float *x, block_q1_0 *y, int64_t n);
void st_quantize_row_q2_0_ref(const float *x, block_q2_0 *y, int64_t n);
void st_quantize_row_tq1_0_ref(const float *x, block_tq1_0 *y, int64_t n);
void st_quantize_row_tq2_0_ref(const float *x, block_tq2_0 *y, int64_t n);
void st_quantize_row_mxfp4_ref(const float *x, block_mxfp4 *y, int64_t n);
void st_quantize_row_nvfp4_ref(const float *x, block_nvfp4 *y, int64_t n);

#endif
