/* attn.c: full attention over the KV cache (MODELS.md §2.6, §2.9, §5.1).
 *
 * qwen3/qwen3moe: q = W_q h, k, v; per-head RMSNorm of q and k; NeoX RoPE over hd; softmax
 * attention with grouped GQA; out = W_o o.
 * Hybrids (gated): W_q h gives [q_j | g_j] interleaved per head; q is normed from the first half,
 * the gate g is the raw second half; after attention o <- o * sigmoid(g). RoPE over n_rot dims.
 * Biases and .scale as bound (build_qkv). K and V go into the cache (f16 by default) before
 * attention reads it, the current rows included.
 *
 * RoPE itself (NeoX, IMRoPE's unrotated pairs, YaRN settings) is in rope.c. */
#include <math.h>

#include "backend/backend.h"
#include "model/blocks.h"
#include "model/forward_ws.h"
#include "model/fwd_matmul.h"
#include "model/rope.h"
#include "model/rows.h"
#include "model/state.h"

/* The projections: q (or q|gate) into WS_Q, k into WS_K, v into WS_V, separate or split from a
 * fused attn_qkv whose rows are [q ; k ; v]. */
static void project_qkv(st_fwd *f, const st_layer *L, const float *h, int64_t nq, int64_t nkv) {
    int64_t n = f->n, d = f->hp->n_embd;
    float *q = st_workspace_f32(f->ws, WS_Q), *k = st_workspace_f32(f->ws, WS_K), *v = st_workspace_f32(f->ws, WS_V);
    if (L->wqkv.data) {
        int64_t w = nq + 2 * nkv;
        float *qkv = st_workspace_f32(f->ws, WS_QKV);
        fwd_matmul(f, &L->wqkv, h, d, n, qkv, w);
        fwd_add_bias(f, &L->bqkv, qkv, w, n);
        FWD_OP(f, copy_rows, q, nq, qkv, w, nq, n);
        FWD_OP(f, copy_rows, k, nkv, qkv + nq, w, nkv, n);
        FWD_OP(f, copy_rows, v, nkv, qkv + nq + nkv, w, nkv, n);
    } else {
        fwd_mm_item it[3] = {{&L->wq, q, nq}, {&L->wk, k, nkv}, {&L->wv, v, nkv}};
        fwd_matmul_many(f, h, d, n, it, 3);
    }
    /* Separate biases, also allowed beside a fused weight. */
    fwd_add_bias(f, &L->bq, q, nq, n);
    fwd_add_bias(f, &L->bk, k, nkv, n);
    fwd_add_bias(f, &L->bv, v, nkv, n);
}

/* k (WS_K): per-head RMSNorm and RoPE, then k and v (WS_V) into layer il's cache at the chunk's
 * cells (each sequence's into its own), before attention reads them (the current rows included). */
static void kv_into_cache(st_fwd *f, int il, const st_rope_params *rp) {
    const st_hparams *hp = f->hp;
    const st_layer *L = &f->m->layers[il];
    int64_t hd = hp->head_dim, Hkv = hp->n_head_kv[il], nkv = hd * Hkv;
    float *k = st_workspace_f32(f->ws, WS_K), *v = st_workspace_f32(f->ws, WS_V);
    FWD_OP(f, rms_norm, k, hd, L->k_norm.f32, k, hd, f->n * Hkv, hd, hp->eps);
    fwd_rope(f, k, nkv, hd, Hkv, rp);
    for (int q = 0; q < fwd_n_seqs(f); q++) {
        int64_t r0;
        st_fwd g = fwd_seq(f, q, &r0);
        const st_layer_state *S = &g.s->layers[il];
        FWD_OP(f, kv_store, g.s->kv_type, S->k_cache, nkv, g.pos0, g.pos, k + r0 * nkv, nkv, g.n);
        FWD_OP(f, kv_store, g.s->kv_type, S->v_cache, nkv, g.pos0, g.pos, v + r0 * nkv, nkv, g.n);
    }
}

void fwd_attention_kv(st_fwd *f, int il, const float *h) {
    const st_hparams *hp = f->hp;
    const st_layer *L = &f->m->layers[il];
    int64_t hd = hp->head_dim, nkv = hd * hp->n_head_kv[il];
    if (L->wqkv.data) {
        project_qkv(f, L, h, hd * hp->n_head[il] * (st_hp_is_hybrid(hp) ? 2 : 1), nkv);
    } else {
        float *k = st_workspace_f32(f->ws, WS_K), *v = st_workspace_f32(f->ws, WS_V);
        fwd_mm_item it[2] = {{&L->wk, k, nkv}, {&L->wv, v, nkv}};
        fwd_matmul_many(f, h, hp->n_embd, f->n, it, 2);
        fwd_add_bias(f, &L->bk, k, nkv, f->n);
        fwd_add_bias(f, &L->bv, v, nkv, f->n);
    }
    st_rope_params rp = fwd_rope_params(hp);
    kv_into_cache(f, il, &rp);
}

/* Softmax attention of one sequence's queries over its own cache: the cells its QSA indexer
 * selects (qwen4exp), else causal; with row_n_kv each row alone over its own bound. */
static void attend(st_fwd *g, int il, const float *h, const st_attn_args *a) {
    if (st_hp_qsa(g->hp, il)) {
        fwd_qsa_attention(g, il, h, a);
    } else if (g->row_n_kv) {
        int64_t w_q = a->ldq_tok, w_o = a->ldo_tok;
        for (int64_t t = 0; t < a->n_tok; t++) {
            st_attn_args r = *a;
            r.q = a->q + t * w_q;
            r.pos = a->pos + t;
            r.n_tok = 1;
            r.n_kv = g->row_n_kv[t];
            r.out = a->out + t * w_o;
            FWD_OP(g, attention, &r);
        }
    } else {
        FWD_OP(g, attention, a);
    }
}

void fwd_attention(st_fwd *f, int il, const float *h, float *out) {
    const st_hparams *hp = f->hp;
    const st_layer *L = &f->m->layers[il];
    int gated = st_hp_is_hybrid(hp);
    int64_t n = f->n, hd = hp->head_dim, H = hp->n_head[il], Hkv = hp->n_head_kv[il];
    int64_t nq = hd * H * (gated ? 2 : 1);

    project_qkv(f, L, h, nq, hd * Hkv);
    float *qg = st_workspace_f32(f->ws, WS_Q);

    /* k's norm and RoPE and the cache stores (a decode step's side branch), beside q's per-head
     * RMSNorm from its (possibly interleaved) slot into a dense [n][H][hd], and its RoPE. */
    st_rope_params rp = fwd_rope_params(hp);
    float *q = st_workspace_f32(f->ws, WS_QN);
    int side = FWD_OP(f, fork, n);
    kv_into_cache(f, il, &rp);
    FWD_OP(f, unfork, side);
    FWD_OP(f, rms_norm, qg, gated ? 2 * hd : hd, L->q_norm.f32, q, hd, n * H, hd, hp->eps);
    fwd_rope(f, q, hd * H, hd, H, &rp);
    FWD_OP(f, join, side);

    /* Each sequence's queries over its own cache. */
    float *o = st_workspace_f32(f->ws, WS_ATT);
    for (int sq = 0; sq < fwd_n_seqs(f); sq++) {
        int64_t r0;
        st_fwd g = fwd_seq(f, sq, &r0);
        const st_layer_state *S = &g.s->layers[il];
        st_attn_args a = {
            .q = q + r0 * hd * H, .ldq_tok = hd * H, .ldq_head = hd,
            .k_cache = S->k_cache, .v_cache = S->v_cache, .kv_type = g.s->kv_type,
            .pos = g.pos, .n_tok = g.n, .n_head = H, .n_head_kv = Hkv, .head_dim = hd,
            .n_kv = g.n_kv ? g.n_kv : g.pos0 + g.n, .scale = 1.0f / sqrtf((float)hd),
            .out = o + r0 * hd * H, .ldo_tok = hd * H,
        };
        attend(&g, il, h + r0 * hp->n_embd, &a);
    }

    /* o <- o * sigmoid(g), head j's gate being the second half of its q|g slot; then W_o o. */
    st_mat wo = fwd_mat(&L->wo);
    if (gated) FWD_OP(f, pointwise, ST_PW_MUL_SIGMOID, o, hd, qg + hd, 2 * hd, o, hd, n * H, hd, &wo);
    FWD_OP(f, matmul, &wo, o, hd * H, n, out, hp->n_embd);
}
