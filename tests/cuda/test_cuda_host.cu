/* test_cuda_host.cu: the CUDA matvec's per-type unit dot products and its dequantizer, run on
 * the HOST (they are __host__ __device__, with host shims for dp4a/vsubss4) against the CPU
 * reference: st_matmul and st_dequantize_row. This checks the block-layout arithmetic of the GPU
 * kernels (nibble order, 6-bit scales, Q6_K's quarters, Q5_K's high bits, the low-bit types' grids,
 * signs and levels of quant_lowbit.cuh) on machines without a GPU, CI included; the GPU itself is
 * checked by op_harness.c. Needs no device: no CUDA call is made. */
#include "../../src/backend/cuda/context.cu"
#include "../../src/backend/cuda/matmul.cu"
extern "C" {
#include "backend/cpu/matmul.h"
#include "quant/random.h"
}
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* the activation form quantize_q8_kernel writes, computed on the host */
static void quantize_q8_host(const float *x, int64_t K, int8_t *xq, float *xd, float *xs) {
    for (int64_t b = 0; b < K / 32; b++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            const int q = (int)roundf(x[b * 32 + i] * id);
            xq[b * 32 + i] = (int8_t)q;
            sum += q;
        }
        xd[b] = d;
        xs[b] = d * (float)sum;
    }
}

/* The low-bit types' weights are random blocks (src/quant/random*.c: every grid index, sign and
 * scale equally likely, and the types without a quantizer have no other source); the others are
 * quantized from uniform values. Besides st_matmul (whose activations are quantized otherwise,
 * hence the loose bound) the unit dot products are held to the exact sum over the dequantized
 * row times the same 8-bit activations, which any wrong bit of the decode breaks. */
template <class U> static void check_type(uint32_t type, const char *name) {
    const int64_t M = 9, K = 768;
    const size_t rb = st_row_size(st_type_get(type), K);
    float *w = (float *)malloc((size_t)(M * K) * sizeof(float));
    float *x = (float *)malloc((size_t)K * sizeof(float));
    uint8_t *W = (uint8_t *)aligned_alloc(64, (rb * M + 63) / 64 * 64);
    int8_t *xq = (int8_t *)aligned_alloc(64, (size_t)K);
    float *xd = (float *)malloc((size_t)(K / 32) * sizeof(float)), *xs = (float *)malloc((size_t)(K / 32) * sizeof(float));
    for (int64_t i = 0; i < M * K; i++) w[i] = frand();
    for (int64_t i = 0; i < K; i++) x[i] = frand();
    uint64_t state = 0x5EED0000u + type;
    for (int64_t m = 0; m < M; m++) {
        if (lb_type(type)) CHECKF(st_random_row(type, 1.0f, 1, &state, W + m * rb, K, w + m * K), "%s random row", name);
        else st_quantize_row(type, w + m * K, W + m * rb, K);
    }
    quantize_q8_host(x, K, xq, xd, xs);

    float y_cpu[9], y_unit[9];
    void *scratch = malloc(st_matmul_scratch_size(type, K, 1) + 64);
    st_matmul_part part = {W, M, x, K, 1, y_cpu, M};
    st_matmul(NULL, type, K, &part, scratch);
    free(scratch);
    double md = 0.0, mc = 0.0, dq_err = 0.0, xe = 0.0, xc = 0.0;
    float *ref_row = (float *)malloc((size_t)K * sizeof(float));
    for (int64_t m = 0; m < M; m++) {
        const uint8_t *row = W + m * rb;
        float acc = 0.0f;
        for (int64_t u = 0; u < K / U::ELEMS; u++) acc += unit_dot<U>(row, u, xq, xd, xs);
        y_unit[m] = acc;
        md = fmax(md, fabs((double)acc - y_cpu[m]));
        mc = fmax(mc, fabs((double)y_cpu[m]));
        st_dequantize_row(type, row, ref_row, K);
        double exact = 0.0;
        for (int64_t i = 0; i < K; i++) exact += (double)ref_row[i] * xq[i] * xd[i / 32];
        xe = fmax(xe, fabs((double)acc - exact));
        xc = fmax(xc, fabs(exact));
        for (int64_t i = 0; i < K; i++) {
            float g;
#define DQ_ONE(T) g = dequant_elem<T>(row, i)
            DQ_CASES(DQ_ONE)
#undef DQ_ONE
            dq_err = fmax(dq_err, fabs((double)g - ref_row[i]));
        }
        if (lb_type(type))   /* the MoE prefill's 8-wide form */
            for (int64_t i0 = 0; i0 < K; i0 += 8) {
                float v[8];
                switch (type) {
#define DQ_EIGHT(T) lb_dequant8<T>(row, i0, v)
                LB_CASES(DQ_EIGHT)
#undef DQ_EIGHT
                default: break;
                }
                for (int j = 0; j < 8; j++) dq_err = fmax(dq_err, fabs((double)v[j] - ref_row[i0 + j]));
            }
    }
    const double err = md / mc, exact_err = xe / xc;
    fprintf(stderr, "%s: unit dot vs st_matmul normalised error %.3e, vs the exact sum %.3e, dequant max error %.3e\n",
            name, err, exact_err, dq_err);
    CHECKF(err < 2e-2, "%s unit dot error %.3e", name, err);
    CHECKF(exact_err < 1e-5, "%s unit dot differs from the dequantized row's sum by %.3e", name, exact_err);
    CHECKF(dq_err == 0.0, "%s dequant differs from st_dequantize_row by %.3e", name, dq_err);
    (void)y_unit;
    free(w); free(x); free(W); free(xq); free(xd); free(xs); free(ref_row);
}

int main(void) {
    check_type<unit_q4_K>(ST_TYPE_Q4_K, "q4_K");
    check_type<unit_q5_K>(ST_TYPE_Q5_K, "q5_K");
    check_type<unit_q6_K>(ST_TYPE_Q6_K, "q6_K");
    check_type<unit_q8_0>(ST_TYPE_Q8_0, "q8_0");
    check_type<lb<ST_TYPE_IQ4_XS>>(ST_TYPE_IQ4_XS, "iq4_xs");
    check_type<lb<ST_TYPE_IQ3_XXS>>(ST_TYPE_IQ3_XXS, "iq3_xxs");
    check_type<lb<ST_TYPE_IQ3_S>>(ST_TYPE_IQ3_S, "iq3_s");
    check_type<lb<ST_TYPE_IQ2_XS>>(ST_TYPE_IQ2_XS, "iq2_xs");
    check_type<lb<ST_TYPE_IQ4_NL>>(ST_TYPE_IQ4_NL, "iq4_nl");
    check_type<lb<ST_TYPE_Q2_0>>(ST_TYPE_Q2_0, "q2_0");
    check_type<lb<ST_TYPE_Q2_K>>(ST_TYPE_Q2_K, "q2_K");
    check_type<lb<ST_TYPE_Q3_K>>(ST_TYPE_Q3_K, "q3_K");
    check_type<lb<ST_TYPE_Q4_0>>(ST_TYPE_Q4_0, "q4_0");
    check_type<lb<ST_TYPE_Q4_1>>(ST_TYPE_Q4_1, "q4_1");
    check_type<lb<ST_TYPE_Q5_0>>(ST_TYPE_Q5_0, "q5_0");
    check_type<lb<ST_TYPE_Q5_1>>(ST_TYPE_Q5_1, "q5_1");
    return test_report("test_cuda_host");
}
