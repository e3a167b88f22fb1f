/* qwen3.c: the layer stack of qwen3 (dense) and qwen3moe (MODELS.md §5.1, §5.2).
 *
 *   for each layer:  x += W_o Attn(RMSNorm(x; attn_norm))          (q/k norm, NeoX RoPE, GQA)
 *                    x += FFN or MoE(RMSNorm(x; ffn_norm))         (SwiGLU; softmax top-k, no shared expert)
 * The embedding and the head are in forward.c, the residual steps in residual.c. */
#include "model/blocks.h"
#include "model/rows.h"
#include "model/stacks.h"

void fwd_layers_qwen3(st_fwd *f, int last_only) {
    for (int il = 0; il < f->hp->n_layer; il++) {
        fwd_mixer_residual(f, il, fwd_attention);
        fwd_ffn_residual(f, il, last_only && il == f->hp->n_layer - 1);
    }
}
