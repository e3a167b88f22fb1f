/* bind.c: tensor binding (MODELS.md §4). Every weight of the trunk is looked up by its GGUF name,
 * its shape checked against the hyperparameters, and its pointer taken in place from the mapping.
 * The optional forms are resolved here, once, so the forward pass only asks "is it there":
 * biases, `.scale` companions (§2.1, with qwen3next's unscaled linear-attention projections),
 * fused attn_qkv, fused ffn_gate_up_exps, qwen3next's legacy ssm_in and its ssm_ba, and the tied
 * output head. MTP (NextN) blocks are never run by the main pass and are not bound. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "quant/quant.h"
#include "quant/types.h"

enum { REQUIRED = 0, OPTIONAL = 1 };
/* Flags for how the tensor is used. */
enum { MATRIX = 0, VECTOR = 2 /* read as f32 by pointwise code */ };

static void format_shape(char *buf, size_t size, const int64_t *ne, int n) {
    int off = snprintf(buf, size, "{");
    for (int i = 0; i < n && off < (int)size; i++)
        off += snprintf(buf + off, size - (size_t)off, "%s%lld", i ? ", " : "", (long long)ne[i]);
    if (off < (int)size) snprintf(buf + off, size - (size_t)off, "}");
}

static int shape_rank(const int64_t *ne) {
    int n = 4;
    while (n > 1 && ne[n - 1] == 1) n--;
    return n;
}

/* An f32 view of a small tensor: the mapping itself for f32, else a model-owned copy. */
static st_status f32_view(struct st_model *m, st_tensor *t) {
    if (t->type == ST_TYPE_F32) {
        t->f32 = t->data;
        return ST_OK;
    }
    const st_type_info *ti = st_type_get(t->type);
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (!ti || !ti->computable || n % ti->block_size)
        return st_fail(ST_ERR_UNSUPPORTED, "tensor '%s': type %s cannot be read as f32", t->name, ti && ti->name ? ti->name : "?");
    float *copy = malloc((size_t)n * sizeof(float));
    if (!copy) return st_fail(ST_ERR_NOMEM, "tensor '%s': out of memory", t->name);
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 16;
        float **grown = realloc(m->owned, (size_t)cap * sizeof *grown);
        if (!grown) {
            free(copy);
            return st_fail(ST_ERR_NOMEM, "tensor '%s': out of memory", t->name);
        }
        m->owned = grown;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = copy;
    if (!st_dequantize_row(t->type, t->data, copy, n))
        return st_fail(ST_ERR_UNSUPPORTED, "tensor '%s': type %s cannot be converted to f32", t->name, ti->name);
    t->f32 = copy;
    return ST_OK;
}

/* Binds tensor `name` with the expected shape {e0, e1, e2} (trailing 1s for lower ranks). */
static st_status bind_tensor(struct st_model *m, st_tensor *t, int flags, int64_t e0, int64_t e1, int64_t e2,
                             const char *name) {
    memset(t, 0, sizeof *t);
    t->scale = 1.0f;
    const st_gguf_tensor *g = st_gguf_find_tensor(m->gguf, name);
    if (!g) {
        if (flags & OPTIONAL) return ST_OK;
        char want[96];
        int64_t ne[4] = {e0, e1, e2, 1};
        format_shape(want, sizeof want, ne, shape_rank(ne));
        return st_fail(ST_ERR_FORMAT, "%s: required tensor '%s' %s is missing", st_gguf_path(m->gguf), name, want);
    }
    int64_t want[4] = {e0, e1, e2, 1};
    if (memcmp(g->ne, want, sizeof want)) {
        char have_s[96], want_s[96];
        format_shape(have_s, sizeof have_s, g->ne, shape_rank(g->ne));
        format_shape(want_s, sizeof want_s, want, shape_rank(want));
        return st_fail(ST_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected %s", st_gguf_path(m->gguf), name, have_s, want_s);
    }
    const st_type_info *ti = st_type_get(g->type);
    if (!ti || !ti->computable)
        return st_fail(ST_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which Strata cannot compute with",
                       st_gguf_path(m->gguf), name, ti && ti->name ? ti->name : "unknown");
    t->name = g->name;
    t->type = g->type;
    memcpy(t->ne, g->ne, sizeof t->ne);
    t->data = g->data;
    t->row_bytes = st_row_size(ti, g->ne[0]);
    m->weight_bytes += g->size;
    if (flags & VECTOR) ST_TRY(f32_view(m, t));
    return ST_OK;
}

static st_status bindf(struct st_model *m, st_tensor *t, int flags, int64_t e0, int64_t e1, int64_t e2,
                       const char *fmt, int il) {
    char name[128];
    snprintf(name, sizeof name, fmt, il);
    return bind_tensor(m, t, flags, e0, e1, e2, name);
}

/* The `.scale` companion of a bound weight (§2.1): {1} for a matrix, {n} per expert. */
static st_status bind_scale(struct st_model *m, st_tensor *w, int64_t n_expert) {
    if (!w->data) return ST_OK;
    char name[160];
    size_t len = strlen(w->name);
    const char *suffix = ".weight";
    size_t sl = strlen(suffix);
    if (len < sl || strcmp(w->name + len - sl, suffix)) return ST_OK;
    snprintf(name, sizeof name, "%.*s.scale", (int)(len - sl), w->name);
    st_tensor s;
    ST_TRY(bind_tensor(m, &s, OPTIONAL | VECTOR, n_expert ? n_expert : 1, 1, 1, name));
    if (!s.data) return ST_OK;
    if (n_expert) w->escale = s.f32;
    else w->scale = s.f32[0];
    return ST_OK;
}

/* Attention q/k/v: separate or fused, with optional biases (create_tensor_qkv). */
static st_status bind_qkv(struct st_model *m, st_layer *L, int il, int64_t nq, int64_t nk, int64_t nv) {
    int64_t d = m->hp.n_embd;
    ST_TRY(bindf(m, &L->wqkv, OPTIONAL, d, nq + nk + nv, 1, "blk.%d.attn_qkv.weight", il));
    if (L->wqkv.data) {
        ST_TRY(bindf(m, &L->bqkv, OPTIONAL | VECTOR, nq + nk + nv, 1, 1, "blk.%d.attn_qkv.bias", il));
        if (!L->bqkv.data) {
            ST_TRY(bindf(m, &L->bq, OPTIONAL | VECTOR, nq, 1, 1, "blk.%d.attn_q.bias", il));
            ST_TRY(bindf(m, &L->bk, OPTIONAL | VECTOR, nk, 1, 1, "blk.%d.attn_k.bias", il));
            ST_TRY(bindf(m, &L->bv, OPTIONAL | VECTOR, nv, 1, 1, "blk.%d.attn_v.bias", il));
        }
        ST_TRY(bind_scale(m, &L->wqkv, 0));
    } else {
        ST_TRY(bindf(m, &L->wq, REQUIRED, d, nq, 1, "blk.%d.attn_q.weight", il));
        ST_TRY(bindf(m, &L->wk, REQUIRED, d, nk, 1, "blk.%d.attn_k.weight", il));
        ST_TRY(bindf(m, &L->wv, REQUIRED, d, nv, 1, "blk.%d.attn_v.weight", il));
        ST_TRY(bindf(m, &L->bq, OPTIONAL | VECTOR, nq, 1, 1, "blk.%d.attn_q.bias", il));
        ST_TRY(bindf(m, &L->bk, OPTIONAL | VECTOR, nk, 1, 1, "blk.%d.attn_k.bias", il));
        ST_TRY(bindf(m, &L->bv, OPTIONAL | VECTOR, nv, 1, 1, "blk.%d.attn_v.bias", il));
        ST_TRY(bind_scale(m, &L->wq, 0));
        ST_TRY(bind_scale(m, &L->wk, 0));
        ST_TRY(bind_scale(m, &L->wv, 0));
    }
    return ST_OK;
}

/* Full attention: plain (qwen3, qwen3moe) or gated with interleaved q/gate rows (hybrids). */
static st_status bind_attention(struct st_model *m, st_layer *L, int il, int gated) {
    const st_hparams *hp = &m->hp;
    int64_t hd = hp->head_dim, H = hp->n_head[il], Hkv = hp->n_head_kv[il];
    ST_TRY(bind_qkv(m, L, il, hd * H * (gated ? 2 : 1), hd * Hkv, hd * Hkv));
    ST_TRY(bindf(m, &L->wo, REQUIRED, hd * H, hp->n_embd, 1, "blk.%d.attn_output.weight", il));
    ST_TRY(bind_scale(m, &L->wo, 0));
    ST_TRY(bindf(m, &L->q_norm, REQUIRED | VECTOR, hd, 1, 1, "blk.%d.attn_q_norm.weight", il));
    ST_TRY(bindf(m, &L->k_norm, REQUIRED | VECTOR, hd, 1, 1, "blk.%d.attn_k_norm.weight", il));
    return ST_OK;
}

/* Gated DeltaNet projections and parameters (§4.4, §4.6). */
static st_status bind_gdn(struct st_model *m, st_layer *L, int il) {
    const st_hparams *hp = &m->hp;
    int64_t d = hp->n_embd, key_dim = st_hp_key_dim(hp), value_dim = hp->ssm_inner;
    int64_t C = st_hp_conv_channels(hp), n_v = hp->ssm_n_v;
    int next = hp->arch == ST_ARCH_QWEN3NEXT;

    ST_TRY(bindf(m, &L->ssm_qkv, OPTIONAL, d, C, 1, "blk.%d.attn_qkv.weight", il));
    ST_TRY(bindf(m, &L->ssm_gate, OPTIONAL, d, value_dim, 1, "blk.%d.attn_gate.weight", il));
    if (next && !L->ssm_qkv.data)
        ST_TRY(bindf(m, &L->ssm_in, REQUIRED, d, 2 * key_dim + 2 * value_dim, 1, "blk.%d.ssm_in.weight", il));
    if (!L->ssm_qkv.data && !L->ssm_in.data)
        return st_fail(ST_ERR_FORMAT, "%s: required tensor 'blk.%d.attn_qkv.weight' {%lld, %lld} is missing",
                       st_gguf_path(m->gguf), il, (long long)d, (long long)C);
    if (L->ssm_qkv.data && !L->ssm_gate.data)
        return st_fail(ST_ERR_FORMAT, "%s: required tensor 'blk.%d.attn_gate.weight' {%lld, %lld} is missing",
                       st_gguf_path(m->gguf), il, (long long)d, (long long)value_dim);
    if (L->ssm_qkv.data) L->ssm_in.data = NULL; /* attn_qkv wins over a legacy ssm_in */
    ST_TRY(bindf(m, &L->ssm_conv1d, REQUIRED | VECTOR, hp->ssm_conv_kernel, C, 1, "blk.%d.ssm_conv1d.weight", il));
    ST_TRY(bindf(m, &L->ssm_dt, REQUIRED | VECTOR, n_v, 1, 1, "blk.%d.ssm_dt.bias", il));
    ST_TRY(bindf(m, &L->ssm_a, REQUIRED | VECTOR, n_v, 1, 1, "blk.%d.ssm_a", il));
    if (next) {
        ST_TRY(bindf(m, &L->ssm_ba, REQUIRED, d, 2 * n_v, 1, "blk.%d.ssm_ba.weight", il));
    } else {
        ST_TRY(bindf(m, &L->ssm_beta, REQUIRED, d, n_v, 1, "blk.%d.ssm_beta.weight", il));
        ST_TRY(bindf(m, &L->ssm_alpha, REQUIRED, d, n_v, 1, "blk.%d.ssm_alpha.weight", il));
    }
    ST_TRY(bindf(m, &L->ssm_norm, REQUIRED | VECTOR, hp->ssm_state, 1, 1, "blk.%d.ssm_norm.weight", il));
    ST_TRY(bindf(m, &L->ssm_out, REQUIRED, value_dim, d, 1, "blk.%d.ssm_out.weight", il));
    /* qwen3next multiplies its linear-attention projections without their scales (§2.1). */
    if (!next) {
        ST_TRY(bind_scale(m, &L->ssm_qkv, 0));
        ST_TRY(bind_scale(m, &L->ssm_gate, 0));
        ST_TRY(bind_scale(m, &L->ssm_beta, 0));
        ST_TRY(bind_scale(m, &L->ssm_alpha, 0));
        ST_TRY(bind_scale(m, &L->ssm_out, 0));
    }
    return ST_OK;
}

static st_status bind_dense_ffn(struct st_model *m, st_layer *L, int il) {
    int64_t d = m->hp.n_embd, ff = m->hp.n_ff[il];
    ST_TRY(bindf(m, &L->ffn_gate, REQUIRED, d, ff, 1, "blk.%d.ffn_gate.weight", il));
    ST_TRY(bindf(m, &L->ffn_up, REQUIRED, d, ff, 1, "blk.%d.ffn_up.weight", il));
    ST_TRY(bindf(m, &L->ffn_down, REQUIRED, ff, d, 1, "blk.%d.ffn_down.weight", il));
    ST_TRY(bind_scale(m, &L->ffn_gate, 0));
    ST_TRY(bind_scale(m, &L->ffn_up, 0));
    ST_TRY(bind_scale(m, &L->ffn_down, 0));
    return ST_OK;
}

/* Routed experts (fused gate_up allowed unless qwen3moe) and, if `shared`, the shared expert. */
static st_status bind_moe(struct st_model *m, st_layer *L, int il, int shared) {
    const st_hparams *hp = &m->hp;
    int64_t d = hp->n_embd, E = hp->n_expert, ff = hp->n_ff_exp;
    ST_TRY(bindf(m, &L->gate_inp, REQUIRED, d, E, 1, "blk.%d.ffn_gate_inp.weight", il));
    ST_TRY(bindf(m, &L->down_exps, REQUIRED, ff, d, E, "blk.%d.ffn_down_exps.weight", il));
    if (hp->arch != ST_ARCH_QWEN3MOE)
        ST_TRY(bindf(m, &L->gate_up_exps, OPTIONAL, d, 2 * ff, E, "blk.%d.ffn_gate_up_exps.weight", il));
    if (!L->gate_up_exps.data) {
        ST_TRY(bindf(m, &L->gate_exps, REQUIRED, d, ff, E, "blk.%d.ffn_gate_exps.weight", il));
        ST_TRY(bindf(m, &L->up_exps, REQUIRED, d, ff, E, "blk.%d.ffn_up_exps.weight", il));
        ST_TRY(bind_scale(m, &L->gate_exps, E));
        ST_TRY(bind_scale(m, &L->up_exps, E));
    }
    /* A fused gate_up has no scale of its own: only ffn_down_exps.scale can apply. */
    ST_TRY(bind_scale(m, &L->down_exps, E));
    if (!shared) return ST_OK;
    int64_t sh = hp->n_ff_shexp;
    if (hp->arch == ST_ARCH_QWEN3NEXT && sh == 0) sh = hp->n_ff[il];
    ST_TRY(bindf(m, &L->gate_inp_shexp, REQUIRED | VECTOR, d, 1, 1, "blk.%d.ffn_gate_inp_shexp.weight", il));
    ST_TRY(bindf(m, &L->gate_shexp, REQUIRED, d, sh, 1, "blk.%d.ffn_gate_shexp.weight", il));
    ST_TRY(bindf(m, &L->up_shexp, REQUIRED, d, sh, 1, "blk.%d.ffn_up_shexp.weight", il));
    ST_TRY(bindf(m, &L->down_shexp, REQUIRED, sh, d, 1, "blk.%d.ffn_down_shexp.weight", il));
    ST_TRY(bind_scale(m, &L->gate_shexp, 0));
    ST_TRY(bind_scale(m, &L->up_shexp, 0));
    ST_TRY(bind_scale(m, &L->down_shexp, 0));
    return ST_OK;
}

/* Every field of the layer unbound (data NULL, scale 1) before its tensors bind. */
static void layer_clear(st_layer *L) {
    for (int j = 0; j < ST_LAYER_N_TENSORS; j++) {
        st_tensor *t = st_layer_tensor_at(L, j);
        memset(t, 0, sizeof *t);
        t->scale = 1.0f;
    }
}

/* The table's kinds are what the binder did: a tensor has an f32 view exactly when its row is a
 * VECTOR, so the walks that skip vectors (the matmul scratch) see every matrix. */
static void check_kinds(const st_layer *L) {
    for (int j = 0; j < ST_LAYER_N_TENSORS; j++) {
        const st_tensor *t = st_layer_tensor_get(L, j);
        assert(!t->data || (t->f32 != NULL) == (st_layer_tensors[j].kind == ST_LT_VECTOR));
        (void)t;
    }
}

static st_status bind_layer(struct st_model *m, int il) {
    const st_hparams *hp = &m->hp;
    st_layer *L = &m->layers[il];
    int64_t d = hp->n_embd;
    layer_clear(L);
    ST_TRY(bindf(m, &L->attn_norm, REQUIRED | VECTOR, d, 1, 1, "blk.%d.attn_norm.weight", il));
    if (st_hp_is_hybrid(hp)) {
        ST_TRY(bindf(m, &L->ffn_norm, REQUIRED | VECTOR, d, 1, 1, "blk.%d.post_attention_norm.weight", il));
        if (hp->is_linear[il]) ST_TRY(bind_gdn(m, L, il));
        else ST_TRY(bind_attention(m, L, il, 1));
    } else {
        ST_TRY(bindf(m, &L->ffn_norm, REQUIRED | VECTOR, d, 1, 1, "blk.%d.ffn_norm.weight", il));
        ST_TRY(bind_attention(m, L, il, 0));
    }
    if (st_hp_is_moe(hp)) ST_TRY(bind_moe(m, L, il, hp->arch != ST_ARCH_QWEN3MOE));
    else ST_TRY(bind_dense_ffn(m, L, il));
    check_kinds(L);
    return ST_OK;
}

st_status st_model_bind(struct st_model *m) {
    st_hparams *hp = &m->hp;
    const st_gguf_tensor *emb = st_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (hp->n_vocab == 0 && emb) hp->n_vocab = emb->ne[1];
    if (hp->n_vocab <= 0)
        return st_fail(ST_ERR_FORMAT, "%s: required tensor 'token_embd.weight' is missing", st_gguf_path(m->gguf));
    int64_t d = hp->n_embd, V = hp->n_vocab;
    ST_TRY(bind_tensor(m, &m->tok_embd, REQUIRED, d, V, 1, "token_embd.weight"));
    ST_TRY(bind_tensor(m, &m->output_norm, REQUIRED | VECTOR, d, 1, 1, "output_norm.weight"));
    ST_TRY(bind_tensor(m, &m->output, OPTIONAL, d, V, 1, "output.weight"));
    if (!m->output.data) m->output = m->tok_embd; /* tied head */
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return st_fail(ST_ERR_NOMEM, "out of memory for %lld layers", (long long)hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++) ST_TRY(bind_layer(m, il));
    return ST_OK;
}

void st_model_unbind(struct st_model *m) {
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    m->owned = NULL;
    m->layers = NULL;
    m->n_owned = m->cap_owned = 0;
}
