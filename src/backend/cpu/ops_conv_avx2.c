/* ops_conv_avx2.c: one channel block of the conv1d with AVX2: the tap-major layout and summation
 * order of ops_conv_block_ref (identical sums), 8 channels per vector, silu with llama.cpp's
 * vector exp (exp256_ggml); the channel tail goes through the scalar formula. */
#include <math.h>
#include "backend/cpu/ops_avx2.h"

void ops_conv_block_avx2(const ops_conv_job *j, int64_t c0, int64_t nc) {
    const int64_t K = j->K, K1 = K - 1;
    float wt[OPS_CONV_MAX_K][OPS_CONV_BLOCK], st[OPS_CONV_MAX_K][OPS_CONV_BLOCK];
    for (int64_t c = 0; c < nc; c++) {
        for (int64_t i = 0; i < K; i++) wt[i][c] = j->w[(c0 + c) * K + i];
        for (int64_t i = 0; i < K1; i++) st[i][c] = j->state[(c0 + c) * K1 + i];
    }
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    const int64_t nc8 = nc & ~(int64_t)7;
    for (int64_t t = 0; t < j->n_tok; t++) {
        float *o = j->out + t * j->ld_out + c0;
        const float *x[OPS_CONV_MAX_K];
        for (int64_t i = 0; i < K; i++) {
            const int64_t s = t - K1 + i;
            x[i] = s < 0 ? st[K1 + s] : j->m + s * j->ld_m + c0;
        }
        for (int64_t c = 0; c < nc8; c += 8) {
            __m256 acc = zero;
            for (int64_t i = 0; i < K; i++)
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(x[i] + c), _mm256_loadu_ps(wt[i] + c)));
            if (j->apply_silu)
                acc = _mm256_div_ps(acc, _mm256_add_ps(one, exp256_ggml(_mm256_sub_ps(zero, acc))));
            _mm256_storeu_ps(o + c, acc);
        }
        for (int64_t c = nc8; c < nc; c++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < K; i++) acc += x[i][c] * wt[i][c];
            o[c] = j->apply_silu ? acc / (1.0f + expf(-acc)) : acc;
        }
    }
    for (int64_t i = 0; i < K1; i++) {
        const int64_t s = j->n_tok - K1 + i;
        const float *src = s < 0 ? st[K1 + s] : j->m + s * j->ld_m + c0;
        for (int64_t c = 0; c < nc; c++) j->state[(c0 + c) * K1 + i] = src[c];
    }
}
