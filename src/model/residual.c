/* residual.c: the two residual steps every layer of the forward takes (MODELS.md §5):
 *   x += Mixer(RMSNorm(x; attn_norm))      the mixer: attention (attn.c) or Gated DeltaNet (gdn.c)
 *   x += FFN(RMSNorm(x; ffn_norm))          dense SwiGLU or MoE (ffn.c, the backend's f->moe);
 *                                           ffn_norm is post_attention_norm on the hybrids
 * on x = WS_X through WS_H (the normed rows) and WS_T (the block's output). Each step leaves its
 * block's output pending and the next norm adds it (one fused op on the GPU; the add then the norm
 * on the CPU). The layer stacks (qwen3.c, qwen35.c) choose the mixer of each layer. With the rows
 * of several sequences (st_forward_seqs) every block runs on all rows at once, the mixers taking
 * each sequence's rows apart only where they read its state (fwd_seq). */
#include "backend/backend.h"
#include "model/blocks.h"
#include "model/forward_ws.h"
#include "model/rows.h"

void fwd_add_norm(st_fwd *f, const st_tensor *w, int64_t rows) {
    float *x = st_workspace_f32(f->ws, WS_X), *h = st_workspace_f32(f->ws, WS_H);
    fwd_prof_begin(f);
    FWD_OP(f, add_rms_norm, x, f->pending, w->f32, h, rows, f->hp->n_embd, f->hp->eps);
    fwd_prof_end(f, FWD_PROF_NORM_ADD);
    f->pending = NULL;
}

static void ffn(st_fwd *f, int il, const float *h, float *out, int64_t rows) {
    fwd_prof_begin(f);
    if (st_hp_is_moe(f->hp)) f->moe(f, il, h, out, rows);
    else fwd_ffn_dense(f, il, h, out, rows);
    fwd_prof_end(f, FWD_PROF_FFN);
}

void fwd_mixer_residual(st_fwd *f, int il, fwd_mixer_fn mixer) {
    const st_layer *L = &f->m->layers[il];
    float *h = st_workspace_f32(f->ws, WS_H), *t = st_workspace_f32(f->ws, WS_T);
    fwd_add_norm(f, &L->attn_norm, f->n);
    int linear = mixer == fwd_gdn;
    fwd_prof_begin(f);
    mixer(f, il, h, t);
    fwd_prof_end(f, linear ? FWD_PROF_GDN : FWD_PROF_ATTN);
    f->pending = t;
}

/* The output-normed rows of the last layer's FFN on every row (f->hidden), from x through WS_X2,
 * x left as it is. */
static void hidden_rows(st_fwd *f, int il, const float *x) {
    const int64_t n = f->n, d = f->hp->n_embd;
    float *x2 = st_workspace_f32(f->ws, WS_X2), *h = st_workspace_f32(f->ws, WS_H), *t = st_workspace_f32(f->ws, WS_T);
    FWD_OP(f, copy_rows, x2, d, x, d, d, n);
    FWD_OP(f, add_rms_norm, x2, NULL, f->m->layers[il].ffn_norm.f32, h, n, d, f->hp->eps);
    ffn(f, il, h, t, n);
    FWD_OP(f, add_rms_norm, x2, t, f->m->output_norm.f32, h, n, d, f->hp->eps);
    FWD_OP(f, copy_rows, f->hidden, d, h, d, d, n);
}

void fwd_ffn_residual(st_fwd *f, int il, int last_row) {
    const st_hparams *hp = f->hp;
    const st_layer *L = &f->m->layers[il];
    int64_t d = hp->n_embd, rows = f->n;
    float *x = st_workspace_f32(f->ws, WS_X), *h = st_workspace_f32(f->ws, WS_H), *t = st_workspace_f32(f->ws, WS_T);
    /* Only the rows that need logits go on after the last mixer. */
    if (last_row && f->n > 1) {
        FWD_OP(f, pointwise, ST_PW_ADD, x, d, f->pending, d, x, d, f->n, d, NULL);
        f->pending = NULL;
        if (f->hidden) hidden_rows(f, il, x);
        rows = fwd_keep_last_rows(f, x, d);
    }
    fwd_add_norm(f, &L->ffn_norm, rows);
    ffn(f, il, h, t, rows);
    f->pending = t;
}
