/* qsa.c: QSA, qwen4exp's sparse attention on its full-attention layers (MODELS.md §6.2, ERRATA
 * F1-F5), the model's half: the indexer's projections and the block-key cache; the selection and
 * the attention over the selected cells are backend ops (qsa_blocks, qsa_select, attention_cells).
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

/* A decode step at pos pools the one block it completes (qsa_blocks with last) when the blocks
 * before it are pooled: the form a GPU's replayed step takes, the position read on the device
 * (st_state_qsa_step_ready and _done keep the count for it). */
static int step_form(const st_layer_state *S, int64_t n, int64_t pos0, int64_t r) {
    return n == 1 && S->n_blocks == pos0 / r;
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
    const st_rope_params rp = fwd_rope_params(hp);
    const float *kw = L->idx_k_norm.f32;
    if (step_form(S, n, f->pos0, r))
        FWD_OP(f, qsa_blocks, f->s->kv_type, S->idx_cache, dim, r, 0, 0, f->pos, kw, hp->eps, &rp, S->idx_blocks);
    else if ((p_last + 1) / r > S->n_blocks)
        FWD_OP(f, qsa_blocks, f->s->kv_type, S->idx_cache, dim, r, S->n_blocks, (p_last + 1) / r, NULL, kw, hp->eps,
               &rp, S->idx_blocks);
    S->n_blocks = (p_last + 1) / r;

    /* The indexer query: per head RMSNorm, then RoPE at the token's position. */
    float *qi = st_workspace_f32(f->ws, WS_IDX_Q);
    fwd_matmul(f, &L->idx_q, h, d, n, qi, Hi * dim);
    FWD_OP(f, rms_norm, qi, dim, L->idx_q_norm.f32, qi, dim, n * Hi, dim, hp->eps);
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
