/* ref.h: the per-type reference (de)quantizers behind st_dequantize_row / st_quantize_row
 * (quant.c dispatches on the type id). Each pair lives with its family: ref_legacy.c (q4_0 ..
 * q8_1), ref_k.c (q2_K .. q6_K, q8_K), ref_iq4.c (iq4_nl, iq4_xs). n is a multiple of the block
 * size. Private to src/quant and its tests; other code goes through quant.h. */
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

#endif
