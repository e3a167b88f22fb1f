/* blocks.h: the layer blocks of the forward (on the pass's backend), each run for one layer on a pass's rows (st_fwd,
 * rows.h): the mixers (full attention in attn.c, its QSA selection in qsa.c, Gated DeltaNet in
 * gdn.c, qwen4exp's PLE layer in ple.c), the FFNs (ffn.c) and the residual steps around them
 * (residual.c). The layer stacks put them in each architecture's order; their buffers are the
 * workspace's (forward_ws.h). */
#ifndef ST_MODEL_BLOCKS_H
#define ST_MODEL_BLOCKS_H

#include <stdint.h>
#include "backend/backend.h"
#include "model/rows.h"

/* The mixers and FFNs: each reads h [n][d] and writes its output [n][d] (no residual). */
void fwd_attention(st_fwd *f, int il, const float *h, float *out);   /* plain or gated (hybrids) */
void fwd_attention_kv(st_fwd *f, int il, const float *h);            /* only K and V into the cache */
void fwd_gdn(st_fwd *f, int il, const float *h, float *out);
void fwd_ffn_dense(st_fwd *f, int il, const float *h, float *out, int64_t n);
/* The CPU's MoE layer (+ the shared expert if bound); a pass runs its f->moe. */
void fwd_moe(st_fwd *f, int il, const float *h, float *out, int64_t n);
/* The residual steps of layer il in place on x (WS_X), through WS_H and WS_T (residual.c):
 * x += mixer(RMSNorm(x; attn_norm)) over all rows, and x += FFN or MoE(RMSNorm(x; ffn_norm)).
 * Each block's output is left in f->pending and added to x by the norm that follows (the next
 * step's, the head's: fwd_add_pending). last_row: only the last row goes on into the FFN (moved to
 * row 0), for the last layer when only the last row's logits are wanted. */
void fwd_mixer_residual(st_fwd *f, int il, fwd_mixer_fn mixer);
void fwd_ffn_residual(st_fwd *f, int il, int last_row);
/* x += f->pending, h = RMSNorm(x; w) over `rows` rows (h prepared for the products that follow). */
void fwd_add_norm(st_fwd *f, const st_tensor *w, int64_t rows);
/* The PLE layer on the streams R [n][hc*d] (ple.c). */
void fwd_ple(st_fwd *f, int il, float *R);
/* QSA on a full-attention layer (qsa.c): stores the chunk's raw indexer keys from the layer input
 * h, then runs the dense attention `a` (causal over the cache) over only the cells each query
 * selects. */
void fwd_qsa_attention(st_fwd *f, int il, const float *h, const st_attn_args *a);

#endif
