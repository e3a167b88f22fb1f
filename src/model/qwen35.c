/* qwen35.c: the layer stack of the hybrids: qwen35 (dense FFN), qwen35moe and qwen3next (MoE with
 * a shared expert) (MODELS.md §5.3 - §5.5).
 *
 *   for each layer:  h = RMSNorm(x; attn_norm)
 *                    x += GDN(h)  on linear-attention layers (gdn.c)
 *                    x += gated Attn(h)  on full-attention layers (attn.c)
 *                    x += FFN or MoE+shared(RMSNorm(x; post_attention_norm))
 * What differs between the three (head order, ssm_ba, legacy ssm_in, RoPE kind, unscaled
 * projections) was settled at binding time (bind.c, hparams.c). */
#include <string.h>

#include "model/forward.h"

void fwd_layers_qwen35(st_fwd *f, int last_only) {
    const st_hparams *hp = f->hp;
    int64_t d = hp->n_embd, n = f->n;
    float *x = st_workspace_f32(f->ws, WS_X), *h = st_workspace_f32(f->ws, WS_H), *t = st_workspace_f32(f->ws, WS_T);
    for (int il = 0; il < hp->n_layer; il++) {
        const st_layer *L = &f->m->layers[il];
        /* x += Mixer(RMSNorm(x)) */
        st_op_rms_norm(f->pool, x, d, L->attn_norm.f32, h, d, n, d, hp->eps);
        if (hp->is_linear[il]) fwd_gdn(f, il, h, t);
        else fwd_attention(f, il, h, t);
        st_op_add(f->pool, x, d, t, d, x, d, n, d);

        /* Only the rows that need logits go on after the last mixer. */
        int64_t rows = n;
        if (last_only && il == hp->n_layer - 1) {
            if (n > 1) memmove(x, x + (n - 1) * d, (size_t)d * sizeof(float));
            rows = 1;
        }
        /* x += FFN(RMSNorm(x; post_attention_norm)) */
        st_op_rms_norm(f->pool, x, d, L->ffn_norm.f32, h, d, rows, d, hp->eps);
        if (hp->arch == ST_ARCH_QWEN35) fwd_ffn_dense(f, il, h, t, rows);
        else fwd_moe(f, il, h, t, rows);
        st_op_add(f->pool, x, d, t, d, x, d, rows, d);
    }
}
