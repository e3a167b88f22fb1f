/* ops_conv.c: the causal depthwise conv1d of Gated DeltaNet with its rolling state
 * (MODELS.md §2.10 step 3, ggml_compute_forward_ssm_conv_f32).
 *
 * Channels are taken in blocks of CONV_BLOCK; for a block the weights and the state are first
 * transposed to tap-major ([K][block]) so that the inner loop runs over contiguous channels and
 * vectorizes. The taps are still summed per channel in order i = 0 .. K-1 from 0.0f, as ggml
 * does, so the result is the same bit for bit whatever the vector width. Threads take blocks. */
#include <math.h>
#include "backend/cpu/ops_cpu.h"

#define CONV_BLOCK 256
#define CONV_MAX_K 16

typedef struct conv_job {
    const float *m, *w;
    float *state, *out;
    int64_t ld_m, ld_out, n_tok, C, K;
    int apply_silu;
} conv_job;

static void conv_block(const conv_job *j, int64_t c0, int64_t nc) {
    const int64_t K = j->K, K1 = K - 1;
    float wt[CONV_MAX_K][CONV_BLOCK], st[CONV_MAX_K][CONV_BLOCK];
    for (int64_t c = 0; c < nc; c++) {
        for (int64_t i = 0; i < K; i++) wt[i][c] = j->w[(c0 + c) * K + i];
        for (int64_t i = 0; i < K1; i++) st[i][c] = j->state[(c0 + c) * K1 + i];
    }
    for (int64_t t = 0; t < j->n_tok; t++) {
        float *o = j->out + t * j->ld_out + c0;
        const float *x[CONV_MAX_K];
        for (int64_t i = 0; i < K; i++) {
            const int64_t s = t - K1 + i;     /* the input column tap i reads */
            x[i] = s < 0 ? st[K1 + s] : j->m + s * j->ld_m + c0;
        }
        for (int64_t c = 0; c < nc; c++) o[c] = 0.0f;
        for (int64_t i = 0; i < K; i++)
            for (int64_t c = 0; c < nc; c++) o[c] += x[i][c] * wt[i][c];
        if (j->apply_silu)
            for (int64_t c = 0; c < nc; c++) o[c] = o[c] / (1.0f + expf(-o[c]));
    }
    /* new state: the last K-1 columns of [old state | m] */
    for (int64_t i = 0; i < K1; i++) {
        const int64_t s = j->n_tok - K1 + i;
        const float *src = s < 0 ? st[K1 + s] : j->m + s * j->ld_m + c0;
        for (int64_t c = 0; c < nc; c++) j->state[(c0 + c) * K1 + i] = src[c];
    }
}

static void conv_worker(void *ctx, int ith, int nth) {
    const conv_job *j = ctx;
    const int64_t n_blocks = (j->C + CONV_BLOCK - 1) / CONV_BLOCK;
    long b0, b1;
    st_split(n_blocks, ith, nth, &b0, &b1);
    for (long b = b0; b < b1; b++) {
        const int64_t c0 = b * CONV_BLOCK;
        const int64_t nc = j->C - c0 < CONV_BLOCK ? j->C - c0 : CONV_BLOCK;
        conv_block(j, c0, nc);
    }
}

void st_op_conv1d(st_pool *pool, const float *m, int64_t ld_m, const float *w, float *state,
                  float *out, int64_t ld_out, int64_t n_tok, int64_t C, int64_t K, int apply_silu) {
    if (K < 1 || K > CONV_MAX_K) return;
    conv_job j = { m, w, state, out, ld_m, ld_out, n_tok, C, K, apply_silu };
    ops_run(pool, n_tok * C >= 32768, conv_worker, &j);
}
