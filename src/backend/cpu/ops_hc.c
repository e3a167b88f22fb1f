/* ops_hc.c: the two elementwise halves of qwen4exp's hyper-connections (MODELS.md §6.1): the
 * mix's gated mean over the streams (st_op_hc_pre) and the combine that adds a block's output to
 * every stream with that stream's weight (st_op_hc_post). The norms and the low-rank products
 * around them are ordinary ops (RMSNorm, matmul), called by model/qwen4exp.c.
 *
 * The references follow ggml's fused CPU ops (ggml_compute_forward_dsv4_hc_pre_f32, _post_f32):
 * streams summed in order from 0.0f with sigmoid = 1/(1+expf(-g)), then one product by the scale;
 * the combine is a product then a sum per element. The AVX-512 and AVX2 kernels keep that order;
 * only their vector exp differs (a few ulp), so hc_post is bit-identical and hc_pre agrees to
 * rounding. Threads take tokens, or slices of the elements of a lone token (decode). */
#include <math.h>
#include "backend/cpu/ops_cpu.h"
#include "base/cpu.h"

void ops_hc_pre_ref(const float *x, const float *g, int64_t ls, float *m, int64_t hc, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) {
        float sum = 0.0f;
        for (int64_t c = 0; c < hc; c++) sum += x[c * ls + i] * (1.0f / (1.0f + expf(-g[c * ls + i])));
        m[i] = scale * sum;
    }
}

void ops_hc_post_ref(float *R, int64_t ls, const float *y, const float *w, int64_t hc, int64_t n) {
    for (int64_t c = 0; c < hc; c++)
        for (int64_t i = 0; i < n; i++) R[c * ls + i] = R[c * ls + i] + y[i] * w[c];
}

static ops_hc_pre_fn pre_pick(void) {
    const st_cpu_features *f = st_cpu();
    if (f->avx512f && f->avx512dq) return ops_hc_pre_avx512;
    if (f->avx2 && f->fma) return ops_hc_pre_avx2;
    return ops_hc_pre_ref;
}

static ops_hc_post_fn post_pick(void) {
    const st_cpu_features *f = st_cpu();
    if (f->avx512f) return ops_hc_post_avx512;
    if (f->avx2) return ops_hc_post_avx2;
    return ops_hc_post_ref;
}

#define HC_MAX 64

typedef struct hc_job {
    const float *x, *g, *y, *inj;
    float *out;
    int64_t ld_x, ld_g, ld_out, ld_y, ld_inj, n_tok, hc, d;
    float scale;
    ops_hc_pre_fn pre;     /* set for st_op_hc_pre, else post */
    ops_hc_post_fn post;
} hc_job;

/* Elements [e0, e1) of token t. */
static void hc_token(const hc_job *j, int64_t t, int64_t e0, int64_t e1) {
    if (j->pre) {
        j->pre(j->x + t * j->ld_x + e0, j->g + t * j->ld_g + e0, j->d, j->out + t * j->ld_out + e0, j->hc, e1 - e0,
               j->scale);
        return;
    }
    /* w_c = 2 sigmoid(inj_c * (1/hc)): ggml_scale, ggml_sigmoid, ggml_scale by 2 */
    float w[HC_MAX];
    const float *inj = j->inj + t * j->ld_inj, inv = 1.0f / (float)j->hc;
    for (int64_t c = 0; c < j->hc; c++) w[c] = 2.0f * (1.0f / (1.0f + expf(-(inj[c] * inv))));
    j->post(j->out + t * j->ld_out + e0, j->d, j->y + t * j->ld_y + e0, w, j->hc, e1 - e0);
}

static void hc_worker(void *ctx, int ith, int nth) {
    const hc_job *j = ctx;
    if (j->n_tok == 1) {
        long e0, e1;
        st_split((long)j->d, ith, nth, &e0, &e1);
        if (e1 > e0) hc_token(j, 0, e0, e1);
        return;
    }
    long t0, t1;
    st_split((long)j->n_tok, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) hc_token(j, t, 0, j->d);
}

void st_op_hc_pre(st_pool *pool, const float *xn, int64_t ld_x, const float *g, int64_t ld_g,
                  float *m, int64_t ld_m, int64_t n_tok, int64_t hc, int64_t d, float scale) {
    hc_job j = {.x = xn, .g = g, .out = m, .ld_x = ld_x, .ld_g = ld_g, .ld_out = ld_m, .n_tok = n_tok,
                .hc = hc, .d = d, .scale = scale, .pre = pre_pick()};
    ops_run(pool, n_tok * hc * d >= 16384, hc_worker, &j);
}

void st_op_hc_post(st_pool *pool, float *R, int64_t ld_r, const float *y, int64_t ld_y,
                   const float *inj, int64_t ld_inj, int64_t n_tok, int64_t hc, int64_t d) {
    if (hc > HC_MAX) return;
    hc_job j = {.y = y, .inj = inj, .out = R, .ld_out = ld_r, .ld_y = ld_y, .ld_inj = ld_inj, .n_tok = n_tok,
                .hc = hc, .d = d, .post = post_pick()};
    ops_run(pool, n_tok * hc * d >= 16384, hc_worker, &j);
}
