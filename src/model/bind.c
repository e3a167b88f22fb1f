/* bind.c: tensor binding (MODELS.md §4). Every weight of the trunk is looked up by its GGUF name,
 * its shape checked against the hyperparameters, and its pointer taken in place from the mapping.
 * The optional forms are resolved here, once, so the forward pass only asks "is it there":
 * biases, `.scale` companions (§2.1, with qwen3next's unscaled linear-attention projections),
 * fused attn_qkv, fused ffn_gate_up_exps, qwen3next's legacy ssm_in and its ssm_ba, and the tied
 * output head. The MTP (NextN) block of a hybrid (MODELS.md §7) is bound as one more full-attention
 * layer, layers[n_layer], with its nextn.* tensors; the main pass never runs it.
 * qwen4exp (§4.7) has its own layer set: hyper-connection mixers instead of norms, separate
 * q/k/v (biases never read) with the QSA indexer, the PLE tensors on its layer, and the PLE table,
 * which stays in the mapping and is not counted among the weights. */
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

/* n floats owned by the model (freed with it), for tensor `name`. */
static st_status owned_floats(struct st_model *m, int64_t n, const char *name, float **out) {
    float *copy = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!copy) return st_fail(ST_ERR_NOMEM, "tensor '%s': out of memory", name);
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 16;
        float **grown = realloc(m->owned, (size_t)cap * sizeof *grown);
        if (!grown) {
            free(copy);
            return st_fail(ST_ERR_NOMEM, "tensor '%s': out of memory", name);
        }
        m->owned = grown;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = copy;
    *out = copy;
    return ST_OK;
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
        return st_fail(ST_ERR_UNSUPPORTED, "%s: type %s is not supported", t->name, ti && ti->name ? ti->name : "unknown");
    float *copy;
    ST_TRY(owned_floats(m, n, t->name, &copy));
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
        return st_fail(ST_ERR_UNSUPPORTED, "%s: %s: type %s is not supported", st_gguf_path(m->gguf), name,
                       ti && ti->name ? ti->name : "unknown");
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

/* A {d, hc} gain tensor, also accepted flat as {hc*d} (llama.cpp's TENSOR_ALLOW_RESHAPE). */
static st_status bind_gains(struct st_model *m, st_tensor *t, const char *fmt, int il) {
    int64_t d = m->hp.n_embd, hc = m->hp.n_hc;
    char name[128];
    snprintf(name, sizeof name, fmt, il);
    const st_gguf_tensor *g = st_gguf_find_tensor(m->gguf, name);
    if (g && g->ne[0] == d * hc && g->ne[1] == 1 && g->ne[2] == 1 && g->ne[3] == 1)
        return bind_tensor(m, t, REQUIRED | VECTOR, d * hc, 1, 1, name);
    return bind_tensor(m, t, REQUIRED | VECTOR, d, hc, 1, name);
}

/* One hyper-connection mixer: norm gains, down, up and (per layer) inject (§6.1). */
static st_status bind_hc(struct st_model *m, st_tensor *norm, st_tensor *down, st_tensor *up, st_tensor *inject,
                         const char *prefix, int il) {
    int64_t hcd = m->hp.n_hc * m->hp.n_embd, lr = m->hp.hc_rank;
    char fmt[96];
    snprintf(fmt, sizeof fmt, "%s_norm.weight", prefix);
    ST_TRY(bind_gains(m, norm, fmt, il));
    snprintf(fmt, sizeof fmt, "%s_down.weight", prefix);
    ST_TRY(bindf(m, down, REQUIRED, hcd, lr, 1, fmt, il));
    snprintf(fmt, sizeof fmt, "%s_up.weight", prefix);
    ST_TRY(bindf(m, up, REQUIRED, lr, hcd, 1, fmt, il));
    if (!inject) return ST_OK;
    snprintf(fmt, sizeof fmt, "%s_inject.weight", prefix);
    return bindf(m, inject, REQUIRED, hcd, m->hp.n_hc, 1, fmt, il);
}

/* qwen4exp gated attention: separate q (q|gate interleaved), k, v with their scales and no
 * biases, and the QSA indexer projections and norms. */
static st_status bind_attention_qwen4exp(struct st_model *m, st_layer *L, int il) {
    const st_hparams *hp = &m->hp;
    int64_t d = hp->n_embd, hd = hp->head_dim, H = hp->n_head[il], Hkv = hp->n_head_kv[il];
    ST_TRY(bindf(m, &L->wq, REQUIRED, d, 2 * hd * H, 1, "blk.%d.attn_q.weight", il));
    ST_TRY(bindf(m, &L->wk, REQUIRED, d, hd * Hkv, 1, "blk.%d.attn_k.weight", il));
    ST_TRY(bindf(m, &L->wv, REQUIRED, d, hd * Hkv, 1, "blk.%d.attn_v.weight", il));
    ST_TRY(bindf(m, &L->wo, REQUIRED, hd * H, d, 1, "blk.%d.attn_output.weight", il));
    ST_TRY(bind_scale(m, &L->wq, 0));
    ST_TRY(bind_scale(m, &L->wk, 0));
    ST_TRY(bind_scale(m, &L->wv, 0));
    ST_TRY(bind_scale(m, &L->wo, 0));
    ST_TRY(bindf(m, &L->q_norm, REQUIRED | VECTOR, hd, 1, 1, "blk.%d.attn_q_norm.weight", il));
    ST_TRY(bindf(m, &L->k_norm, REQUIRED | VECTOR, hd, 1, 1, "blk.%d.attn_k_norm.weight", il));
    int64_t di = hp->idx_dim;
    ST_TRY(bindf(m, &L->idx_q, REQUIRED, d, hp->idx_n_head * di, 1, "blk.%d.indexer.q_proj.weight", il));
    ST_TRY(bindf(m, &L->idx_k, REQUIRED, d, di, 1, "blk.%d.indexer.k_proj.weight", il));
    ST_TRY(bindf(m, &L->idx_q_norm, REQUIRED | VECTOR, di, 1, 1, "blk.%d.indexer.q_norm.weight", il));
    ST_TRY(bindf(m, &L->idx_k_norm, REQUIRED | VECTOR, di, 1, 1, "blk.%d.indexer.k_norm.weight", il));
    return ST_OK;
}

/* The PLE layer's tensors (§4.7). The key projection reads the n_ple heads of d_ple concatenated,
 * so n_ple * d_ple must be d (llama.cpp does not check it; its matmul would fail). */
static st_status bind_ple_layer(struct st_model *m, st_layer *L, int il) {
    const st_hparams *hp = &m->hp;
    int64_t d = hp->n_embd, hcd = hp->n_hc * d;
    if (hp->ple_n_heads * hp->ple_dim != d)
        return st_fail(ST_ERR_FORMAT, "%s: PLE embeddings are %lld heads x %lld = %lld wide, but ple_key reads d = %lld",
                       st_gguf_path(m->gguf), (long long)hp->ple_n_heads, (long long)hp->ple_dim,
                       (long long)(hp->ple_n_heads * hp->ple_dim), (long long)d);
    ST_TRY(bindf(m, &L->ple_key, REQUIRED, d, hcd, 1, "blk.%d.ple_key.weight", il));
    ST_TRY(bindf(m, &L->ple_value, REQUIRED, d, d, 1, "blk.%d.ple_value.weight", il));
    ST_TRY(bind_gains(m, &L->ple_norm_key, "blk.%d.ple_norm_key.weight", il));
    ST_TRY(bind_gains(m, &L->ple_norm_query, "blk.%d.ple_norm_query.weight", il));
    ST_TRY(bind_gains(m, &L->ple_norm_conv, "blk.%d.ple_norm_conv.weight", il));
    ST_TRY(bindf(m, &L->ple_conv1d, REQUIRED | VECTOR, hp->ple_conv_kernel, hcd, 1, "blk.%d.ple_conv1d.weight", il));
    /* The conv is dilated by N: tap k reads (K-1-k)*N columns back. As an undilated kernel of
     * (K-1)*N + 1 taps with tap k at k*N and zeros between, st_op_conv1d computes it with the
     * history as its state, and the sum is llama.cpp's own: the zero taps add exact zeros. */
    int64_t K = hp->ple_conv_kernel, Kw = st_hp_ple_hist(hp) + 1;
    if (Kw > 16)
        return st_fail(ST_ERR_UNSUPPORTED, "%s: PLE conv of %lld taps dilated by %lld spans %lld columns; at most 16 are supported",
                       st_gguf_path(m->gguf), (long long)K, (long long)hp->ple_ngram, (long long)Kw);
    float *wide;
    ST_TRY(owned_floats(m, Kw * hcd, L->ple_conv1d.name, &wide));
    for (int64_t ch = 0; ch < hcd; ch++)
        for (int64_t i = 0; i < Kw; i++)
            wide[ch * Kw + i] = i % hp->ple_ngram == 0 ? L->ple_conv1d.f32[ch * K + i / hp->ple_ngram] : 0.0f;
    L->ple_conv_wide = (st_tensor){.name = L->ple_conv1d.name, .type = ST_TYPE_F32, .ne = {Kw, hcd, 1, 1}, .f32 = wide,
                                   .scale = 1.0f};
    return ST_OK;
}

/* The PLE table {d_ple, rows}: at least max over heads of offset + size rows (the converter may
 * pad). Its bytes are the model's but not counted among the weights: they stay in the mapping. */
static st_status bind_ple_table(struct st_model *m) {
    const st_hparams *hp = &m->hp;
    int64_t rows = 0;
    for (int64_t h = 0; h < hp->ple_n_heads; h++)
        if ((int64_t)hp->ple_offset[h] + hp->ple_size[h] > rows) rows = (int64_t)hp->ple_offset[h] + hp->ple_size[h];
    const char *name = "per_layer_token_embd.weight";
    const st_gguf_tensor *g = st_gguf_find_tensor(m->gguf, name);
    if (g && g->ne[0] == hp->ple_dim && g->ne[1] >= rows && g->ne[2] == 1 && g->ne[3] == 1) rows = g->ne[1];
    else if (g) {
        char have_s[96], want_s[96];
        int64_t want[4] = {hp->ple_dim, rows, 1, 1};
        format_shape(have_s, sizeof have_s, g->ne, shape_rank(g->ne));
        format_shape(want_s, sizeof want_s, want, 2);
        return st_fail(ST_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected %s (at least %lld rows for the PLE head ranges)",
                       st_gguf_path(m->gguf), name, have_s, want_s, (long long)rows);
    }
    uint64_t before = m->weight_bytes;
    ST_TRY(bind_tensor(m, &m->ple_table, REQUIRED, hp->ple_dim, rows, 1, name));
    m->ple_table_bytes = m->weight_bytes - before;
    m->weight_bytes = before;
    return ST_OK;
}

static st_status bind_layer_qwen4exp(struct st_model *m, int il) {
    const st_hparams *hp = &m->hp;
    st_layer *L = &m->layers[il];
    layer_clear(L);
    ST_TRY(bind_hc(m, &L->hc_attn_norm, &L->hc_attn_down, &L->hc_attn_up, &L->hc_attn_inject, "blk.%d.hc_attn", il));
    ST_TRY(bind_hc(m, &L->hc_ffn_norm, &L->hc_ffn_down, &L->hc_ffn_up, &L->hc_ffn_inject, "blk.%d.hc_ffn", il));
    if (hp->is_linear[il]) ST_TRY(bind_gdn(m, L, il));
    else ST_TRY(bind_attention_qwen4exp(m, L, il));
    if (il == hp->ple_layer) ST_TRY(bind_ple_layer(m, L, il));
    ST_TRY(bind_moe(m, L, il, 1));
    check_kinds(L);
    return ST_OK;
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

/* The MTP block: a full-attention layer of the architecture plus the nextn tensors, bound when the
 * file keeps it (one block, as llama.cpp supports; its eh_proj present). A file whose
 * nextn_predict_layers counts a block it does not carry runs without a head, and so does one with
 * its own nextn.embed_tokens (Qwen's heads share token_embd; an embedding of the head's own would
 * need a table row that is never repacked). */
static st_status bind_mtp(struct st_model *m) {
    const st_hparams *hp = &m->hp;
    int il = (int)hp->n_layer;
    int64_t d = hp->n_embd, V = hp->n_vocab;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.nextn.eh_proj.weight", il);
    if (!st_hp_is_hybrid(hp) || hp->n_nextn != 1 || !st_gguf_find_tensor(m->gguf, name)) return ST_OK;
    snprintf(name, sizeof name, "blk.%d.nextn.embed_tokens.weight", il);
    if (st_gguf_find_tensor(m->gguf, name)) return ST_OK;
    st_layer *L = &m->layers[il];
    ST_TRY(bind_layer(m, il));
    ST_TRY(bindf(m, &L->nextn_eh_proj, REQUIRED, 2 * d, d, 1, "blk.%d.nextn.eh_proj.weight", il));
    ST_TRY(bind_scale(m, &L->nextn_eh_proj, 0));
    ST_TRY(bindf(m, &L->nextn_enorm, REQUIRED | VECTOR, d, 1, 1, "blk.%d.nextn.enorm.weight", il));
    ST_TRY(bindf(m, &L->nextn_hnorm, REQUIRED | VECTOR, d, 1, 1, "blk.%d.nextn.hnorm.weight", il));
    ST_TRY(bindf(m, &L->nextn_head_norm, OPTIONAL | VECTOR, d, 1, 1, "blk.%d.nextn.shared_head_norm.weight", il));
    ST_TRY(bindf(m, &L->nextn_head, OPTIONAL, d, V, 1, "blk.%d.nextn.shared_head_head.weight", il));
    ST_TRY(bind_scale(m, &L->nextn_head, 0));
    m->n_mtp = 1;
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
    if (hp->arch == ST_ARCH_QWEN4EXP) {
        /* no output_norm: the head's hyper-connection mixer replaces it */
        ST_TRY(bind_hc(m, &m->hc_head_norm, &m->hc_head_down, &m->hc_head_up, NULL, "output_hc", 0));
        if (hp->ple_layer >= 0) ST_TRY(bind_ple_table(m));
    } else {
        ST_TRY(bind_tensor(m, &m->output_norm, REQUIRED | VECTOR, d, 1, 1, "output_norm.weight"));
    }
    ST_TRY(bind_tensor(m, &m->output, OPTIONAL, d, V, 1, "output.weight"));
    if (!m->output.data) m->output = m->tok_embd; /* tied head */
    m->layers = calloc((size_t)hp->n_layer_all, sizeof *m->layers);
    if (!m->layers) return st_fail(ST_ERR_NOMEM, "out of memory for %lld layers", (long long)hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++)
        ST_TRY(hp->arch == ST_ARCH_QWEN4EXP ? bind_layer_qwen4exp(m, il) : bind_layer(m, il));
    return hp->arch == ST_ARCH_QWEN4EXP ? ST_OK : bind_mtp(m);
}

void st_model_unbind(struct st_model *m) {
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    m->owned = NULL;
    m->layers = NULL;
    m->n_owned = m->cap_owned = 0;
}
