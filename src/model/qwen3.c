/* qwen3.c: the layer stack of qwen3 (dense) and qwen3moe (MODELS.md §5.1, §5.2).
 *
 *   for each layer:  x += W_o Attn(RMSNorm(x; attn_norm))          (q/k norm, NeoX RoPE, GQA)
 *                    x += FFN or MoE(RMSNorm(x; ffn_norm))         (SwiGLU; softmax top-k, no shared expert)
 * The embedding and the head are in forward.c. */
#include <string.h>

#include "model/forward.h"

void fwd_layers_qwen3(st_fwd *f, int last_only) {
    const st_hparams *hp = f->hp;
    int64_t d = hp->n_embd, n = f->n;
    float *x = st_workspace_f32(f->ws, WS_X), *h = st_workspace_f32(f->ws, WS_H), *t = st_workspace_f32(f->ws, WS_T);
    for (int il = 0; il < hp->n_layer; il++) {
        const st_layer *L = &f->m->layers[il];
        /* x += Attn(RMSNorm(x)) */
        st_op_rms_norm(f->pool, x, d, L->attn_norm.f32, h, d, n, d, hp->eps);
        fwd_attention(f, il, h, t);
        st_op_add(f->pool, x, d, t, d, x, d, n, d);

        /* Only the rows that need logits go on after the last mixer. */
        int64_t rows = n;
        if (last_only && il == hp->n_layer - 1) {
            if (n > 1) memmove(x, x + (n - 1) * d, (size_t)d * sizeof(float));
            rows = 1;
        }
        /* x += FFN(RMSNorm(x)) */
        st_op_rms_norm(f->pool, x, d, L->ffn_norm.f32, h, d, rows, d, hp->eps);
        if (hp->arch == ST_ARCH_QWEN3MOE) fwd_moe(f, il, h, t, rows);
        else fwd_ffn_dense(f, il, h, t, rows);
        st_op_add(f->pool, x, d, t, d, x, d, rows, d);
    }
}
