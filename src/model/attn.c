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
#include <string.h>

#include "backend/backend.h"
#include "model/blocks.h"
#include "model/forward_ws.h"
#include "model/fwd_matmul.h"
#include "model/rope.h"
#include "model/rows.h"
#include "model/state.h"

/* The projections: q (or q|gate) into WS_Q, k into WS_K, v into WS_V, separate or from a fused
 * attn_qkv whose rows are [q ; k ; v]. */
static void project_qkv(st_fwd *f, const st_layer *L, const float *h, int64_t nq, int64_t nkv) {
    int64_t n = f->n, d = f->hp->n_embd;
    float *q = st_workspace_f32(f->ws, WS_Q), *k = st_workspace_f32(f->ws, WS_K), *v = st_workspace_f32(f->ws, WS_V);
    if (L->wqkv.data) {
        int64_t w = nq + 2 * nkv;
        float *qkv = st_workspace_f32(f->ws, WS_QKV);
        fwd_matmul(f, &L->wqkv, h, d, n, qkv, w);
        fwd_add_bias(f, &L->bqkv, qkv, w, n);
        for (int64_t t = 0; t < n; t++) {
            memcpy(q + t * nq, qkv + t * w, (size_t)nq * sizeof(float));
            memcpy(k + t * nkv, qkv + t * w + nq, (size_t)nkv * sizeof(float));
            memcpy(v + t * nkv, qkv + t * w + nq + nkv, (size_t)nkv * sizeof(float));
        }
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
    st_op_rms_norm(f->pool, k, hd, L->k_norm.f32, k, hd, f->n * Hkv, hd, hp->eps);
    fwd_rope(f, k, nkv, hd, Hkv, rp);
    for (int q = 0; q < fwd_n_seqs(f); q++) {
        int64_t r0;
        st_fwd g = fwd_seq(f, q, &r0);
        const st_layer_state *S = &g.s->layers[il];
        st_op_kv_store(g.s->kv_type, S->k_cache, nkv, g.pos0, k + r0 * nkv, nkv, g.n);
        st_op_kv_store(g.s->kv_type, S->v_cache, nkv, g.pos0, v + r0 * nkv, nkv, g.n);
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

void fwd_attention(st_fwd *f, int il, const float *h, float *out) {
    const st_hparams *hp = f->hp;
    const st_layer *L = &f->m->layers[il];
    int gated = st_hp_is_hybrid(hp);
    int64_t n = f->n, hd = hp->head_dim, H = hp->n_head[il], Hkv = hp->n_head_kv[il];
    int64_t nq = hd * H * (gated ? 2 : 1), nkv = hd * Hkv;

    project_qkv(f, L, h, nq, nkv);
    float *qg = st_workspace_f32(f->ws, WS_Q);

    /* Per-head RMSNorm: q from its (possibly interleaved) slot into a dense [n][H][hd]. */
    float *q = st_workspace_f32(f->ws, WS_QN);
    st_op_rms_norm(f->pool, qg, gated ? 2 * hd : hd, L->q_norm.f32, q, hd, n * H, hd, hp->eps);

    st_rope_params rp = fwd_rope_params(hp);
    fwd_rope(f, q, hd * H, hd, H, &rp);
    kv_into_cache(f, il, &rp);

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
            .n_kv = g.pos0 + g.n, .scale = 1.0f / sqrtf((float)hd),
            .out = o + r0 * hd * H, .ldo_tok = hd * H,
        };
        if (st_hp_qsa(hp, il)) fwd_qsa_attention(&g, il, h + r0 * hp->n_embd, &a); /* qwen4exp: the cells its indexer selects */
        else st_op_attention(g.pool, &a);
    }

    /* o <- o * sigmoid(g), head j's gate being the second half of its q|g slot. */
    if (gated) st_op_mul_sigmoid(f->pool, o, hd, qg + hd, 2 * hd, o, hd, n * H, hd);

    fwd_matmul(f, &L->wo, o, hd * H, n, out, hp->n_embd);
}
