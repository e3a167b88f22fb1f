/* residual.c: the two residual steps every layer of the CPU forward takes (MODELS.md §5):
 *   x += Mixer(RMSNorm(x; attn_norm))      the mixer: attention (attn.c) or Gated DeltaNet (gdn.c)
 *   x += FFN(RMSNorm(x; ffn_norm))          dense SwiGLU or MoE (ffn.c); ffn_norm is
 *                                           post_attention_norm on the hybrids
 * on x = WS_X through WS_H (the normed rows) and WS_T (the block's output). The layer stacks
 * (qwen3.c, qwen35.c) choose the mixer of each layer. With the rows of several sequences
 * (st_forward_seqs) every block runs on all rows at once, the mixers taking each sequence's rows
 * apart only where they read its state (fwd_seq). */
#include "backend/backend.h"
#include "model/blocks.h"
#include "model/forward_ws.h"
#include "model/rows.h"

void fwd_mixer_residual(st_fwd *f, int il, fwd_mixer_fn mixer) {
    const st_hparams *hp = f->hp;
    const st_layer *L = &f->m->layers[il];
    int64_t d = hp->n_embd, n = f->n;
    float *x = st_workspace_f32(f->ws, WS_X), *h = st_workspace_f32(f->ws, WS_H), *t = st_workspace_f32(f->ws, WS_T);
    st_op_rms_norm(f->pool, x, d, L->attn_norm.f32, h, d, n, d, hp->eps);
    mixer(f, il, h, t);
    st_op_add(f->pool, x, d, t, d, x, d, n, d);
}

void fwd_ffn_residual(st_fwd *f, int il, int last_row) {
    const st_hparams *hp = f->hp;
    const st_layer *L = &f->m->layers[il];
    int64_t d = hp->n_embd, rows = f->n;
    float *x = st_workspace_f32(f->ws, WS_X), *h = st_workspace_f32(f->ws, WS_H), *t = st_workspace_f32(f->ws, WS_T);
    /* Only the rows that need logits go on after the last mixer. */
    if (last_row) rows = fwd_keep_last_rows(f, x, d);
    st_op_rms_norm(f->pool, x, d, L->ffn_norm.f32, h, d, rows, d, hp->eps);
    if (st_hp_is_moe(hp)) fwd_moe(f, il, h, t, rows);
    else fwd_ffn_dense(f, il, h, t, rows);
    st_op_add(f->pool, x, d, t, d, x, d, rows, d);
}
