/* qwen35.c: the layer stack of the hybrids: qwen35 (dense FFN), qwen35moe and qwen3next (MoE with
 * a shared expert) (MODELS.md §5.3 - §5.5).
 *
 *   for each layer:  h = RMSNorm(x; attn_norm)
 *                    x += GDN(h)  on linear-attention layers (gdn.c)
 *                    x += gated Attn(h)  on full-attention layers (attn.c)
 *                    x += FFN or MoE+shared(RMSNorm(x; post_attention_norm))
 * What differs between the three (head order, ssm_ba, legacy ssm_in, RoPE kind, unscaled
 * projections) was settled at binding time (bind.c, hparams.c). The residual steps: residual.c. */
#include "model/blocks.h"
#include "model/rows.h"
#include "model/stacks.h"

void fwd_layer_qwen35(st_fwd *f, int il, int last_only) {
    fwd_mixer_residual(f, il, f->hp->is_linear[il] ? fwd_gdn : fwd_attention);
    fwd_ffn_residual(f, il, last_only);
}

void fwd_layers_qwen35(st_fwd *f, int last_only) {
    for (int il = 0; il < f->hp->n_layer; il++) fwd_layer_qwen35(f, il, last_only && il == f->hp->n_layer - 1);
}
