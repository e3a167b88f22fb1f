/* ops_conv.c: the causal depthwise conv1d of Gated DeltaNet with its rolling state
 * (MODELS.md §2.10 step 3, ggml_compute_forward_ssm_conv_f32).
 *
 * Channels are taken in blocks of OPS_CONV_BLOCK; for a block the weights and the state are first
 * transposed to tap-major ([K][block]) so that the inner loop runs over contiguous channels. The
 * taps are summed per channel in order i = 0 .. K-1 from 0.0f with separate multiply and add, as
 * ggml does, so the AVX-512 and AVX2 blocks give the same sums bit for bit; only their silu uses
 * a vector exp. Threads take blocks. */
#include <math.h>
#include "backend/cpu/ops_cpu.h"
#include "base/cpu.h"

void ops_conv_block_ref(const ops_conv_job *j, int64_t c0, int64_t nc) {
    const int64_t K = j->K, K1 = K - 1;
    float wt[OPS_CONV_MAX_K][OPS_CONV_BLOCK], st[OPS_CONV_MAX_K][OPS_CONV_BLOCK];
    for (int64_t c = 0; c < nc; c++) {
        for (int64_t i = 0; i < K; i++) wt[i][c] = j->w[(c0 + c) * K + i];
        for (int64_t i = 0; i < K1; i++) st[i][c] = j->state[(c0 + c) * K1 + i];
    }
    for (int64_t t = 0; t < j->n_tok; t++) {
        float *o = j->out + t * j->ld_out + c0;
        const float *x[OPS_CONV_MAX_K];
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

typedef struct conv_run { const ops_conv_job *j; ops_conv_block_fn block; } conv_run;

static void conv_worker(void *ctx, int ith, int nth) {
    const conv_run *r = ctx;
    const ops_conv_job *j = r->j;
    const int64_t n_blocks = (j->C + OPS_CONV_BLOCK - 1) / OPS_CONV_BLOCK;
    long b0, b1;
    st_split(n_blocks, ith, nth, &b0, &b1);
    for (long b = b0; b < b1; b++) {
        const int64_t c0 = b * OPS_CONV_BLOCK;
        const int64_t nc = j->C - c0 < OPS_CONV_BLOCK ? j->C - c0 : OPS_CONV_BLOCK;
        r->block(j, c0, nc);
    }
}

void st_op_conv1d(st_pool *pool, const float *m, int64_t ld_m, const float *w, float *state,
                  float *out, int64_t ld_out, int64_t n_tok, int64_t C, int64_t K, int apply_silu) {
    if (K < 1 || K > OPS_CONV_MAX_K) return;
    ops_conv_job j = { m, w, state, out, ld_m, ld_out, n_tok, C, K, apply_silu };
    const st_cpu_features *f = st_cpu();
    conv_run r = { &j, f->avx512f && f->avx512dq ? ops_conv_block_avx512
                       : f->avx2 && f->fma ? ops_conv_block_avx2 : ops_conv_block_ref };
    ops_run(pool, n_tok * C >= 32768, conv_worker, &r);
}
