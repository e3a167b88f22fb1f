/* ops_ple.c: qwen4exp's PLE layer on the CPU: the n-gram hash of its table rows (MODELS.md §6.3
 * steps 1-2, ERRATA F6), and its gate (steps 4-6): per token and stream,
 * the scaled dot product of the normed key and the normed query, its signed square root through
 * a sigmoid, and the value times that gate. As llama.cpp's graph computes it: the elementwise
 * products summed in double (ggml_sum_rows), times 1/sqrtf(d) (ggml_scale), clamp, sqrt, sgn,
 * sigmoid, then the product. It runs on one layer, hc dot products of d per token, so it stays
 * scalar. (The dilated conv that follows is st_op_conv1d over a kernel widened with zero taps:
 * model/bind.c builds it.) */
#include <math.h>
#include "backend/cpu/ops_cpu.h"

typedef struct ple_job {
    const float *k, *q, *val;
    float *gv;
    int64_t ld_kq, ld_v, ld_gv, n_tok, hc, d;
} ple_job;

static void ple_gate_token(const ple_job *j, int64_t t) {
    const float inv = 1.0f / sqrtf((float)j->d);
    for (int64_t c = 0; c < j->hc; c++) {
        const float *k = j->k + t * j->ld_kq + c * j->d, *q = j->q + t * j->ld_kq + c * j->d;
        double dot = 0.0;
        for (int64_t i = 0; i < j->d; i++) dot += (double)(k[i] * q[i]);
        const float s = (float)dot * inv;
        const float a = fabsf(s), mag = sqrtf(a > 1e-6f ? a : 1e-6f);
        const float sgn = s > 0.0f ? 1.0f : s < 0.0f ? -1.0f : 0.0f;
        const float gate = 1.0f / (1.0f + expf(-(sgn * mag)));
        const float *v = j->val + t * j->ld_v;
        float *o = j->gv + t * j->ld_gv + c * j->d;
        for (int64_t i = 0; i < j->d; i++) o[i] = v[i] * gate;
    }
}

static void ple_worker(void *ctx, int ith, int nth) {
    const ple_job *j = ctx;
    long t0, t1;
    st_split((long)j->n_tok, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) ple_gate_token(j, t);
}

void st_op_ple_gate(st_pool *pool, const float *k, const float *q, int64_t ld_kq, const float *val,
                    int64_t ld_v, float *gv, int64_t ld_gv, int64_t n_tok, int64_t hc, int64_t d) {
    ple_job j = {k, q, val, gv, ld_kq, ld_v, ld_gv, n_tok, hc, d};
    ops_run(pool, n_tok > 1, ple_worker, &j);
}

void st_op_ple_hash(const st_ple_hash *h, const int32_t *win, int64_t n, int32_t *rows) {
    const int64_t N = h->ngram;
    for (int64_t t = 0; t < n; t++) {
        const int32_t *ids = win + t + N - 1;   /* ids[-s]: the s-th predecessor */
        int64_t ctx[ST_PLE_HASH_MAX_NGRAM];
        ctx[0] = ids[0]; /* the token itself is never replaced, even when it is EOS */
        int cut = 0;
        for (int64_t s = 1; s < N; s++) {
            cut = cut || ids[-s] < 0 || ids[-s] == h->eos;
            ctx[s] = cut ? h->eos : ids[-s];
        }
        for (int64_t order = 2; order <= N; order++) {
            uint64_t mix = (uint64_t)ctx[0] * h->mult[0];
            for (int64_t j = 1; j < order; j++) mix ^= (uint64_t)ctx[j] * h->mult[j];
            for (int64_t g = 0; g < h->per; g++) {
                const int64_t hd = (order - 2) * h->per + g;
                rows[t * h->n_heads + hd] = (int32_t)(mix % h->size[hd] + h->offset[hd]);
            }
        }
    }
}
