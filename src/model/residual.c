/* residual.c: the two residual steps every layer of the CPU forward takes (MODELS.md §5):
 *   x += Mixer(RMSNorm(x; attn_norm))      the mixer: attention (attn.c) or Gated DeltaNet (gdn.c)
 *   x += FFN(RMSNorm(x; ffn_norm))          dense SwiGLU or MoE (ffn.c); ffn_norm is
 *                                           post_attention_norm on the hybrids
 * on x = WS_X through WS_H (the normed rows) and WS_T (the block's output). The layer stacks
 * (qwen3.c, qwen35.c) choose the mixer of each layer. With the rows of several sequences
 * (st_forward_seqs) every block runs on all rows at once, the mixers taking each sequence's rows
 * apart only where they read its state (fwd_seq). */
#include <string.h>

#include "model/forward.h"

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

int fwd_n_seqs(const st_fwd *f) { return f->seqs ? f->n_seqs : 1; }

st_fwd fwd_seq(const st_fwd *f, int k, int64_t *r0) {
    st_fwd g = *f;
    *r0 = 0;
    if (!f->seqs) return g;
    *r0 = f->seq_row0[k];
    g.s = f->seqs[k].s;
    g.n = f->seqs[k].n;
    g.pos0 = g.s->n_past;
    g.pos = f->pos + *r0;
    g.seqs = NULL;
    g.n_seqs = 0;
    g.keep_steps = f->seqs[k].keep_steps && st_hp_is_hybrid(f->hp);
    return g;
}

void fwd_per_seq(st_fwd *f, int il, const float *h, int64_t w_in, float *out, int64_t w_out, fwd_mixer_fn mixer) {
    for (int k = 0; k < fwd_n_seqs(f); k++) {
        int64_t r0;
        st_fwd g = fwd_seq(f, k, &r0);
        mixer(&g, il, h + r0 * w_in, out + r0 * w_out);
    }
}

int64_t fwd_keep_last_rows(const st_fwd *f, float *x, int64_t w) {
    if (!f->seqs) {
        if (f->n > 1) memmove(x, x + (f->n - 1) * w, (size_t)w * sizeof(float));
        return 1;
    }
    /* Each sequence's rows that go on land at or before where they are: in order, nothing is
     * overwritten before it moves. */
    int64_t n_out = 0;
    for (int k = 0; k < f->n_seqs; k++) {
        int64_t rows = st_seq_out_rows(&f->seqs[k]), from = f->seq_row0[k] + f->seqs[k].n - rows;
        if (from != n_out) memmove(x + n_out * w, x + from * w, (size_t)(rows * w) * sizeof(float));
        n_out += rows;
    }
    return n_out;
}
