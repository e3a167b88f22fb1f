/* quant.c: st_dequantize_row / st_quantize_row, dispatching on the type id to the per-family
 * reference code (ref_legacy.c, ref_k.c, ref_iq4.c, ref_lowbit.c, ref_fp4.c), plus the plain f32 / f16 / bf16 rows.
 * Adding a computable type means a case in each switch here and its entry in types.c. */
#include <string.h>
#include "quant/quant.h"
#include "quant/ref.h"
#include "quant/ref_iq.h"

int st_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    switch (type) {
    /* the grid i-quants: ref_iq.c (dequantization only; st_quantize_row refuses them) */
    case ST_TYPE_IQ2_XXS: case ST_TYPE_IQ2_XS: case ST_TYPE_IQ2_S: case ST_TYPE_IQ3_XXS:
    case ST_TYPE_IQ3_S: case ST_TYPE_IQ1_S: case ST_TYPE_IQ1_M:
        st_dequantize_row_iq(type, src, dst, n);
        return 1;
    case ST_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return 1;
    case ST_TYPE_F16: {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = st_fp16_to_fp32(h[i]);
        return 1;
    }
    case ST_TYPE_BF16: {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = st_bf16_to_fp32(h[i]);
        return 1;
    }
    case ST_TYPE_Q4_0: st_dequantize_row_q4_0(src, dst, n); return 1;
    case ST_TYPE_Q4_1: st_dequantize_row_q4_1(src, dst, n); return 1;
    case ST_TYPE_Q5_0: st_dequantize_row_q5_0(src, dst, n); return 1;
    case ST_TYPE_Q5_1: st_dequantize_row_q5_1(src, dst, n); return 1;
    case ST_TYPE_Q8_0: st_dequantize_row_q8_0(src, dst, n); return 1;
    case ST_TYPE_Q2_K: st_dequantize_row_q2_K(src, dst, n); return 1;
    case ST_TYPE_Q3_K: st_dequantize_row_q3_K(src, dst, n); return 1;
    case ST_TYPE_Q4_K: st_dequantize_row_q4_K(src, dst, n); return 1;
    case ST_TYPE_Q5_K: st_dequantize_row_q5_K(src, dst, n); return 1;
    case ST_TYPE_Q6_K: st_dequantize_row_q6_K(src, dst, n); return 1;
    case ST_TYPE_IQ4_NL: st_dequantize_row_iq4_nl(src, dst, n); return 1;
    case ST_TYPE_IQ4_XS: st_dequantize_row_iq4_xs(src, dst, n); return 1;
    case ST_TYPE_Q1_0: st_dequantize_row_q1_0(src, dst, n); return 1;
    case ST_TYPE_Q2_0: st_dequantize_row_q2_0(src, dst, n); return 1;
    case ST_TYPE_TQ1_0: st_dequantize_row_tq1_0(src, dst, n); return 1;
    case ST_TYPE_TQ2_0: st_dequantize_row_tq2_0(src, dst, n); return 1;
    case ST_TYPE_MXFP4: st_dequantize_row_mxfp4(src, dst, n); return 1;
    case ST_TYPE_NVFP4: st_dequantize_row_nvfp4(src, dst, n); return 1;
    default: return 0;
    }
}

int st_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    switch (type) {
    case ST_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return 1;
    case ST_TYPE_F16: {
        uint16_t *h = dst;
        for (int64_t i = 0; i < n; i++) h[i] = st_fp32_to_fp16(src[i]);
        return 1;
    }
    case ST_TYPE_BF16: {
        uint16_t *h = dst;
        for (int64_t i = 0; i < n; i++) h[i] = st_fp32_to_bf16(src[i]);
        return 1;
    }
    case ST_TYPE_Q4_0: st_quantize_row_q4_0_ref(src, dst, n); return 1;
    case ST_TYPE_Q4_1: st_quantize_row_q4_1_ref(src, dst, n); return 1;
    case ST_TYPE_Q5_0: st_quantize_row_q5_0_ref(src, dst, n); return 1;
    case ST_TYPE_Q5_1: st_quantize_row_q5_1_ref(src, dst, n); return 1;
    case ST_TYPE_Q8_0: st_quantize_row_q8_0_ref(src, dst, n); return 1;
    case ST_TYPE_Q2_K: st_quantize_row_q2_K_ref(src, dst, n); return 1;
    case ST_TYPE_Q3_K: st_quantize_row_q3_K_ref(src, dst, n); return 1;
    case ST_TYPE_Q4_K: st_quantize_row_q4_K_ref(src, dst, n); return 1;
    case ST_TYPE_Q5_K: st_quantize_row_q5_K_ref(src, dst, n); return 1;
    case ST_TYPE_Q6_K: st_quantize_row_q6_K_ref(src, dst, n); return 1;
    case ST_TYPE_IQ4_NL: st_quantize_row_iq4_nl_ref(src, dst, n); return 1;
    case ST_TYPE_IQ4_XS: st_quantize_row_iq4_xs_ref(src, dst, n); return 1;
    case ST_TYPE_Q1_0: st_quantize_row_q1_0_ref(src, dst, n); return 1;
    case ST_TYPE_Q2_0: st_quantize_row_q2_0_ref(src, dst, n); return 1;
    case ST_TYPE_TQ1_0: st_quantize_row_tq1_0_ref(src, dst, n); return 1;
    case ST_TYPE_TQ2_0: st_quantize_row_tq2_0_ref(src, dst, n); return 1;
    case ST_TYPE_MXFP4: st_quantize_row_mxfp4_ref(src, dst, n); return 1;
    case ST_TYPE_NVFP4: st_quantize_row_nvfp4_ref(src, dst, n); return 1;
    default: return 0;
    }
}
