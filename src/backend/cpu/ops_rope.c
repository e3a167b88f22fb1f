/* ops_rope.c: NeoX rotary embedding with llama.cpp's angle recurrence and YaRN blend
 * (MODELS.md §2.5; ggml_rope_cache_init / rope_yarn). For each token the cos/sin table of its
 * n_rot/2 pairs is built once and applied to every head. The angle of pair i is the float
 * product p * ts * ts * ... (i times), not p * ts^i: the last bits matter at long context.
 *
 * The rotation itself (ggml's rotate_pairs) is compiled by GCC with contraction on, so ggml's
 * builds for CPUs with FMA (haswell and every AVX-512 one alike) fuse one product of each output:
 * ops_rope_rotate_fma (ops_rope_avx2.c) does the same where this CPU level has FMA; the reference
 * below rounds every product, as ggml's builds without FMA do. */
#include <math.h>
#include "backend/cpu/ops_cpu.h"
#include "base/cpu.h"

#define ROPE_MAX_PAIRS 512

st_rope_params st_rope_plain(int64_t n_rot, float freq_base) {
    st_rope_params p = { n_rot, freq_base, 1.0f, 0.0f, 1.0f, { 0.0f, 0.0f } };
    return p;
}

static float yarn_corr_dim(int64_t n_rot, int64_t n_ctx_orig, float beta, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (beta * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

void st_rope_yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast,
                            float beta_slow, float dims[2]) {
    float start = floorf(yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
    float end = ceilf(yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
    dims[0] = start > 0.0f ? start : 0.0f;
    dims[1] = end < (float)(n_rot - 1) ? end : (float)(n_rot - 1);
}

/* 1 at low pair indices (extrapolate), 0 at high ones (interpolate), linear in between. */
static float yarn_ramp(const float dims[2], int64_t pair) {
    float span = dims[1] - dims[0];
    float y = ((float)pair - dims[0]) / (span > 0.001f ? span : 0.001f);
    y = y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
    return 1.0f - y;
}

static void rope_table(const st_rope_params *p, float pos, float *cs, float *sn) {
    const int64_t half = p->n_rot / 2;
    const float ts = powf(p->freq_base, -2.0f / (float)p->n_rot);
    float theta = pos;
    for (int64_t i = 0; i < half; i++) {
        float t = p->freq_scale * theta;
        float mscale = p->attn_factor;
        if (p->ext_factor != 0.0f) {
            float mix = yarn_ramp(p->corr_dims, i) * p->ext_factor;
            t = t * (1.0f - mix) + theta * mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / p->freq_scale);
        }
        cs[i] = cosf(t) * mscale;
        sn[i] = sinf(t) * mscale;
        theta *= ts;
    }
}

void ops_rope_rotate_ref(float *x, const float *cs, const float *sn, int64_t half) {
    for (int64_t i = 0; i < half; i++) {
        const float x0 = x[i], x1 = x[i + half];
        x[i] = x0 * cs[i] - x1 * sn[i];
        x[i + half] = x0 * sn[i] + x1 * cs[i];
    }
}

typedef struct rope_job {
    float *x;
    int64_t ld_tok, ld_head, n_tok, n_head;
    const int32_t *pos;
    const st_rope_params *p;
    ops_rope_rotate_fn rotate;
} rope_job;

static void rope_worker(void *ctx, int ith, int nth) {
    const rope_job *j = ctx;
    const int64_t half = j->p->n_rot / 2;
    float cs[ROPE_MAX_PAIRS], sn[ROPE_MAX_PAIRS];
    long t0, t1;
    st_split(j->n_tok, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        rope_table(j->p, (float)j->pos[t], cs, sn);
        for (int64_t h = 0; h < j->n_head; h++) j->rotate(j->x + t * j->ld_tok + h * j->ld_head, cs, sn, half);
    }
}

void st_op_rope_neox(st_pool *pool, float *x, int64_t ld_tok, int64_t ld_head, int64_t n_tok,
                     int64_t n_head, const int32_t *pos, const st_rope_params *p) {
    if (p->n_rot <= 0 || p->n_rot / 2 > ROPE_MAX_PAIRS) return;
    const st_cpu_features *f = st_cpu();
    rope_job j = { x, ld_tok, ld_head, n_tok, n_head, pos, p,
                   f->avx2 && f->fma ? ops_rope_rotate_fma : ops_rope_rotate_ref };
    ops_run(pool, n_tok >= 16, rope_worker, &j);
}
