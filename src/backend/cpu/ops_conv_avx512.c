/* ops_conv_avx512.c: one channel block of the conv1d with AVX-512: the same tap-major layout and
 * summation order as ops_conv_block_ref (so the sums are identical), 16 channels per vector, and
 * silu with llama.cpp's vector exp (exp512_ggml of ops_avx512.h). */
#include "backend/cpu/ops_avx512.h"

void ops_conv_block_avx512(const ops_conv_job *j, int64_t c0, int64_t nc) {
    const int64_t K = j->K, K1 = K - 1;
    float wt[OPS_CONV_MAX_K][OPS_CONV_BLOCK], st[OPS_CONV_MAX_K][OPS_CONV_BLOCK];
    for (int64_t c = 0; c < nc; c++) {
        for (int64_t i = 0; i < K; i++) wt[i][c] = j->w[(c0 + c) * K + i];
        for (int64_t i = 0; i < K1; i++) st[i][c] = j->state[(c0 + c) * K1 + i];
    }
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    for (int64_t t = 0; t < j->n_tok; t++) {
        float *o = j->out + t * j->ld_out + c0;
        const float *x[OPS_CONV_MAX_K];
        for (int64_t i = 0; i < K; i++) {
            const int64_t s = t - K1 + i;
            x[i] = s < 0 ? st[K1 + s] : j->m + s * j->ld_m + c0;
        }
        for (int64_t c = 0; c < nc; c += 16) {
            const __mmask16 mk = tail_mask16(nc - c);
            __m512 acc = zero;
            for (int64_t i = 0; i < K; i++)
                acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x[i] + c),
                                                       _mm512_maskz_loadu_ps(mk, wt[i] + c)));
            if (j->apply_silu)
                acc = _mm512_div_ps(acc, _mm512_add_ps(one, exp512_ggml(_mm512_sub_ps(zero, acc))));
            _mm512_mask_storeu_ps(o + c, mk, acc);
        }
    }
    for (int64_t i = 0; i < K1; i++) {
        const int64_t s = j->n_tok - K1 + i;
        const float *src = s < 0 ? st[K1 + s] : j->m + s * j->ld_m + c0;
        for (int64_t c = 0; c < nc; c++) j->state[(c0 + c) * K1 + i] = src[c];
    }
}
