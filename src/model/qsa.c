/* qsa.c: QSA, qwen4exp's sparse attention on its full-attention layers (MODELS.md §6.2, ERRATA
 * F1-F5), the model's half: the indexer's projections and the block-key cache; the selection and
 * the attention over the selected cells are backend ops (qsa_select, attention_cells).
 *
 *   kappa_t = W_idxk m_t                 raw indexer key, stored per cell beside the KV cache
 *   Kbar_b = RoPE_{b r}(RMSNorm(mean of kappa over block b; k_norm))   per complete block
 *   Q_t = RoPE_p(RMSNorm(W_idxq m_t; q_norm)) per indexer head
 *   sigma_b = sum_h relu(Q_{t,h} . Kbar_b); the tail is always read; W = B + r - 1 cells win
 *   o = softmax attention of q over the selected cells only
 *
 * Pooling precedes norm and rotation, which is why the raw keys are the state; llama.cpp pools
 * every complete block again each ubatch. Here a block's key, a function of r raw keys that never
 * change while those cells are held, is computed once and kept (st_layer_state.idx_blocks, only
 * the first n_blocks valid; fewer after a cut, none after a load), so a decode step scores
 * n/r cached keys and reads W cells: at 32k context it costs little more than at 2k. The pooled
 * keys rotate at position b r in all four IMRoPE sections (set_input_qsa's blk_pos), so for them
 * IMRoPE is plain NeoX; the query rotates like attention's q (text positions (p, p, p, 0)).
 * Rows whose query sees at most W cells read them all (dense), through the same cells path as
 * the others: the ordinary attention op sums a prompt chunk in its tiled kernel's order and a lone
 * row in another, so a chunk of only such rows going there gave other bits than the same rows
 * inside a longer chunk (a prompt fed in chunks of 7 differed from one chunk). */
#include <stdlib.h>

#include "backend/backend.h"
#include "model/blocks.h"
#include "model/forward_ws.h"
#include "model/fwd_matmul.h"
#include "model/rope.h"
#include "model/rows.h"
#include "model/state.h"

/* Pools, norms and rotates blocks n_blocks .. upto-1 of layer il from its raw key cache. */
static void pool_blocks(st_fwd *f, int il, int64_t upto) {
    const st_hparams *hp = f->hp;
    st_layer_state *S = &f->s->layers[il];
    const int64_t r = hp->compress_ratio[il], dim = hp->idx_dim, b0 = S->n_blocks, nb = upto - b0;
    if (nb <= 0) return;
    float *blk = S->idx_blocks + b0 * dim;
    FWD_OP(f, qsa_pool, f->s->kv_type, S->idx_cache, dim, r, b0, upto, blk);
    FWD_OP(f, rms_norm, blk, dim, f->m->layers[il].idx_k_norm.f32, blk, dim, nb, dim, hp->eps);
    /* the blocks' positions, written on the host */
    int32_t small[64], *pos = st_workspace_get(f->ws, WS_QSA_POS);
    int32_t *host = nb <= 64 ? small : malloc((size_t)nb * sizeof *host); /* decode: a block at a time, no malloc */
    if (!host) {
        if (f->be->err == ST_OK) f->be->err = st_fail(ST_ERR_NOMEM, "forward: out of memory for %lld QSA block positions", (long long)nb);
        return;
    }
    for (int64_t b = 0; b < nb; b++) host[b] = (int32_t)((b0 + b) * r);
    FWD_OP(f, upload, pos, host, (size_t)nb * sizeof *host);
    if (host != small) free(host);
    st_rope_params rp = fwd_rope_params(hp);
    FWD_OP(f, rope, blk, dim, dim, nb, 1, pos, &rp);
    S->n_blocks = upto;
}

void fwd_qsa_attention(st_fwd *f, int il, const float *h, const st_attn_args *a) {
    const st_hparams *hp = f->hp;
    const st_layer *L = &f->m->layers[il];
    st_layer_state *S = &f->s->layers[il];
    const int64_t n = f->n, d = hp->n_embd, dim = hp->idx_dim, Hi = hp->idx_n_head, r = hp->compress_ratio[il];
    const int64_t W = st_hp_qsa_width(hp, il);

    /* Blocks reaching past the held positions were cut back since they were pooled. */
    if (S->n_blocks > f->pos0 / r) S->n_blocks = f->pos0 / r;

    /* The raw keys of the chunk go into the cache first: its own later rows pool them. */
    float *kraw = st_workspace_f32(f->ws, WS_IDX_K);
    fwd_matmul(f, &L->idx_k, h, d, n, kraw, dim);
    FWD_OP(f, kv_store, f->s->kv_type, S->idx_cache, dim, f->pos0, f->pos, kraw, dim, n);

    const int64_t p_last = f->pos0 + n - 1;

    /* Blocks before the last row's tail, cached from earlier chunks or pooled now. */
    pool_blocks(f, il, (p_last + 1) / r);

    /* The indexer query: per head RMSNorm, then RoPE at the token's position. */
    float *qi = st_workspace_f32(f->ws, WS_IDX_Q);
    fwd_matmul(f, &L->idx_q, h, d, n, qi, Hi * dim);
    FWD_OP(f, rms_norm, qi, dim, L->idx_q_norm.f32, qi, dim, n * Hi, dim, hp->eps);
    st_rope_params rp = fwd_rope_params(hp);
    fwd_rope(f, qi, Hi * dim, dim, Hi, &rp);

    int32_t *cells = st_workspace_get(f->ws, WS_QSA_CELLS), *n_cells = st_workspace_get(f->ws, WS_QSA_N);
    st_qsa_args sa = {
        .q = qi, .ld_q = Hi * dim, .n_head = Hi, .dim = dim, .blocks = S->idx_blocks, .pos = f->pos,
        .n_tok = n, .r = r, .width = W, .n_ctx = f->s->n_ctx, .cells = cells, .ld_cells = W, .n_cells = n_cells,
    };
    FWD_OP(f, qsa_select, &sa, st_workspace_get(f->ws, WS_QSA_SCRATCH));
    st_attn_cells_args ca = {.a = *a, .cells = cells, .ld_cells = W, .n_cells = n_cells};
    FWD_OP(f, attention_cells, &ca);
}
