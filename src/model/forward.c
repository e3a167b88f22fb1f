/* forward.c: one chunk through the model: the token embedding, the per-architecture layer stack
 * (qwen3.c, qwen35.c), the final norm and the LM head for the rows that need logits. Also the
 * sizes of every workspace buffer, derived from the hyperparameters and the rows of the chunk, and
 * the matmul wrapper that applies a weight's `.scale` and bias (MODELS.md §2.1). */
#include <string.h>

#include "backend/cpu/matmul.h"
#include "model/forward.h"
#include "model/moe_exec.h"
#include "quant/types.h"

int64_t fwd_max_heads(const st_hparams *hp, int kv) {
    int64_t mx = 0;
    for (int64_t i = 0; i < hp->n_layer; i++) {
        if (hp->is_linear[i]) continue;
        int64_t h = kv ? hp->n_head_kv[i] : hp->n_head[i];
        if (h > mx) mx = h;
    }
    return mx;
}

static int64_t max_dense_ff(const st_hparams *hp) {
    int64_t mx = 0;
    if (st_hp_is_moe(hp)) return hp->n_ff_shexp > 0 && hp->arch != ST_ARCH_QWEN3MOE ? hp->n_ff_shexp : 0;
    for (int64_t i = 0; i < hp->n_layer; i++)
        if (hp->n_ff[i] > mx) mx = hp->n_ff[i];
    return mx;
}

int64_t fwd_max_experts_used(const st_hparams *hp) {
    int64_t mx = 0;
    for (int64_t i = 0; i < hp->n_layer; i++)
        if (hp->n_expert_used[i] > mx) mx = hp->n_expert_used[i];
    return mx;
}

static size_t mm_scratch_one(const st_tensor *t, int64_t rows, size_t cur) {
    if (!t->data || t->f32 == t->data) return cur;
    size_t s = st_matmul_scratch_size(t->type, t->ne[0], rows);
    return s > cur ? s : cur;
}

/* The largest matmul scratch any weight needs for `rows` rows. */
static size_t mm_scratch_size(const struct st_model *m, int64_t rows) {
    size_t s = mm_scratch_one(&m->output, rows, 0);
    for (int64_t i = 0; i < m->hp.n_layer; i++) {
        const st_layer *L = &m->layers[i];
        const st_tensor *all[] = {&L->wq, &L->wk, &L->wv, &L->wqkv, &L->wo, &L->ssm_qkv, &L->ssm_gate, &L->ssm_in,
                                  &L->ssm_beta, &L->ssm_alpha, &L->ssm_ba, &L->ssm_out, &L->ffn_gate, &L->ffn_up,
                                  &L->ffn_down, &L->gate_inp, &L->gate_exps, &L->up_exps, &L->gate_up_exps,
                                  &L->down_exps, &L->gate_shexp, &L->up_shexp, &L->down_shexp};
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++) s = mm_scratch_one(all[j], rows, s);
    }
    /* The shared-expert gate is an f32 {d} vector multiplied as a 1-row f32 matrix. */
    size_t f = st_matmul_scratch_size(ST_TYPE_F32, m->hp.n_embd, rows);
    return s > f ? s : f;
}

/* The activation row sizes of the fused expert job (moe_exec.c): K = d for gate/up, K = the
 * expert or shared width for down, over every layer's expert types. */
size_t fwd_moe_act_row(const struct st_model *m, int down) {
    size_t mx = 0;
    for (int64_t i = 0; i < m->hp.n_layer; i++) {
        const st_layer *L = &m->layers[i];
        size_t s;
        if (down) {
            const st_tensor *de[] = {&L->down_exps}, *ds[] = {&L->down_shexp};
            s = moe_act_row_max(de, 1, m->hp.n_ff_exp);
            size_t s2 = L->down_shexp.data ? moe_act_row_max(ds, 1, L->down_shexp.ne[0]) : 0;
            if (s2 > s) s = s2;
        } else {
            const st_tensor *g[] = {&L->gate_exps, &L->up_exps, &L->gate_up_exps, &L->gate_shexp, &L->up_shexp};
            s = moe_act_row_max(g, 5, m->hp.n_embd);
        }
        if (s > mx) mx = s;
    }
    return mx;
}

int64_t fwd_moe_gu_width(const st_hparams *hp) {
    int64_t sh = max_dense_ff(hp);
    return 2 * (hp->n_ff_exp > sh ? hp->n_ff_exp : sh);
}

size_t st_forward_ws_size(const void *ctx, int id, int64_t n) {
    const st_ws_plan *plan = ctx;
    const struct st_model *m = plan->m;
    const st_hparams *hp = &m->hp;
    const size_t F = sizeof(float);
    int64_t d = hp->n_embd, hd = hp->head_dim;
    int64_t H = fwd_max_heads(hp, 0), Hkv = fwd_max_heads(hp, 1);
    int hybrid = st_hp_is_hybrid(hp), moe = st_hp_is_moe(hp);
    int64_t qw = hd * H * (hybrid ? 2 : 1);
    int64_t kd = hybrid ? st_hp_key_dim(hp) : 0, vd = hybrid ? hp->ssm_inner : 0;
    int64_t C = hybrid ? st_hp_conv_channels(hp) : 0, n_v = hybrid ? hp->ssm_n_v : 0;
    int64_t k = moe ? fwd_max_experts_used(hp) : 0, E = moe ? hp->n_expert : 0, ffe = moe ? hp->n_ff_exp : 0;
    int64_t qkv = qw + 2 * hd * Hkv;
    if (2 * kd + 2 * vd > qkv) qkv = 2 * kd + 2 * vd;
    switch (id) {
    case WS_X: case WS_H: case WS_T: return (size_t)(n * d) * F;
    case WS_POS: return (size_t)n * sizeof(int32_t);
    case WS_Q: return (size_t)(n * qw) * F;
    case WS_QN: case WS_ATT: return (size_t)(n * hd * H) * F;
    case WS_K: case WS_V: return (size_t)(n * hd * Hkv) * F;
    case WS_QKV: return (size_t)(n * qkv) * F;
    case WS_CONV: /* also holds qwen3next's legacy ssm_in product before the conv */
        return (size_t)(n * (hp->arch == ST_ARCH_QWEN3NEXT ? C + vd : C)) * F;
    case WS_Z: case WS_GDN_OUT: return (size_t)(n * vd) * F;
    case WS_BA: return hp->arch == ST_ARCH_QWEN3NEXT ? (size_t)(n * 2 * n_v) * F : 0;
    case WS_A: case WS_B: case WS_GATE_G: case WS_GATE_BETA: return (size_t)(n * n_v) * F;
    case WS_GDN_SCRATCH: return hybrid ? st_gdn_chunked_scratch_size(plan->n_threads, hp->ssm_state) : 0;
    case WS_FF_A: case WS_FF_B: return (size_t)(n * max_dense_ff(hp)) * F;
    case WS_ROUTER: return (size_t)(n * E) * F;
    case WS_IDS: case WS_SLOT: return (size_t)(n * k) * sizeof(int32_t);
    case WS_ORDER: return (size_t)(n * (k + 1)) * sizeof(int32_t);
    case WS_W: return (size_t)(n * k) * F;
    case WS_COUNT: return moe ? (size_t)(2 * E + 2) * sizeof(int64_t) : 0;
    /* Gathered expert rows: n*k routed plus n shared (the fused expert job runs both). */
    case WS_XE: return (size_t)(n * k * d) * F; /* only the per-matmul fallback gathers */
    case WS_YE: return (size_t)(n * (k + 1) * d) * F;
    case WS_GE: return moe ? (size_t)(n * (k + 1) * fwd_moe_gu_width(hp)) * F : 0;
    case WS_ACT1: return moe ? (size_t)(n * (k + 1)) * fwd_moe_act_row(m, 0) : 0;
    case WS_ACT2: return moe ? (size_t)(n * (k + 1)) * fwd_moe_act_row(m, 1) : 0;
    case WS_ENT: return moe ? (size_t)(E + 1) * sizeof(moe_entry) : 0;
    case WS_UE: return (size_t)(n * k * ffe) * F;
    case WS_MOE: return moe ? (size_t)(n * d) * F : 0;
    case WS_SH_G: return moe ? (size_t)n * F : 0;
    case WS_SH_OUT: return moe && hp->arch != ST_ARCH_QWEN3MOE ? (size_t)(n * d) * F : 0;
    case WS_MM: return mm_scratch_size(m, n);
    case WS_LOGITS: return (size_t)hp->n_vocab * F;
    /* IMRoPE pairs kept unrotated (attn.c): at most every pair of every q head */
    case WS_ROPE_KEEP: return hp->rope_kind == ST_ROPE_IMROPE ? (size_t)(n * H * hp->n_rot) * F : 0;
    default: return 0;
    }
}

void fwd_matmul(st_fwd *f, const st_tensor *w, const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy) {
    int64_t M = w->ne[1];
    st_matmul(f->pool, w->type, w->data, M, w->ne[0], x, ldx, n, y, ldy, f->mm_scratch);
    if (w->scale != 1.0f)
        for (int64_t i = 0; i < n; i++) st_op_scale(y + i * ldy, M, y + i * ldy, w->scale);
}

void fwd_add_bias(st_fwd *f, const st_tensor *b, float *y, int64_t ldy, int64_t n) {
    if (!b->data) return;
    st_op_add(f->pool, y, ldy, b->f32, 0, y, ldy, n, b->ne[0]);
}

st_status st_forward(const struct st_model *m, st_state *s, st_workspace *ws, st_pool *pool, const st_chunk *c) {
    const st_hparams *hp = &m->hp;
    int64_t n = c->n, d = hp->n_embd, V = hp->n_vocab;
    if (n <= 0 || n > ws->rows)
        return st_fail(ST_ERR_INVALID, "forward: chunk of %lld rows, workspace holds %lld", (long long)n, (long long)ws->rows);
    if (s->n_past + n > s->n_ctx)
        return st_fail(ST_ERR_RANGE, "context is full: %lld positions + %lld new tokens exceed the context size %lld",
                       (long long)s->n_past, (long long)n, (long long)s->n_ctx);
    if (c->logits_all && !c->logits) return st_fail(ST_ERR_INVALID, "forward: logits for every row need a destination");

    st_fwd f = {.m = m, .hp = hp, .s = s, .ws = ws, .pool = pool, .n = n, .pos0 = s->n_past,
                .mm_scratch = st_workspace_get(ws, WS_MM)};
    int32_t *pos = st_workspace_get(ws, WS_POS);
    for (int64_t t = 0; t < n; t++) pos[t] = (int32_t)(s->n_past + t);
    f.pos = pos;

    /* x = token_embd[token] */
    float *x = st_workspace_f32(ws, WS_X);
    if (!st_op_get_rows(m->tok_embd.type, m->tok_embd.data, V, d, c->tokens, n, x, d))
        return st_fail(ST_ERR_RANGE, "forward: a token id is outside the vocabulary of %lld", (long long)V);

    /* The layers; with last_only the final layer's FFN runs on the last row alone, moved to row 0. */
    int last_only = !c->logits_all;
    if (st_hp_is_hybrid(hp)) fwd_layers_qwen35(&f, last_only);
    else fwd_layers_qwen3(&f, last_only);

    /* logits = W_out · RMSNorm(x; output_norm), for the rows that need them */
    int64_t n_out = last_only ? 1 : n;
    float *h = st_workspace_f32(ws, WS_H);
    st_op_rms_norm(pool, x, d, m->output_norm.f32, h, d, n_out, d, hp->eps);
    float *dst = c->logits ? c->logits : st_workspace_f32(ws, WS_LOGITS);
    int64_t ld = c->logits ? c->ld_logits : V;
    fwd_matmul(&f, &m->output, h, d, n_out, dst, ld);
    s->n_past += n;
    return ST_OK;
}
