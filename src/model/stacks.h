/* stacks.h: the layer stack of each architecture family, the blocks (blocks.h) in its order on the
 * embedded rows in WS_X: qwen3 and qwen3moe (qwen3.c), the hybrids (qwen35.c), qwen4exp
 * (qwen4exp.c). The forward (forward.c) runs one over a chunk between the embedding and the head;
 * the MTP head (mtp.c) runs one hybrid layer. */
#ifndef ST_MODEL_STACKS_H
#define ST_MODEL_STACKS_H

#include "model/rows.h"

/* The per-architecture passes (qwen3.c, qwen35.c). */
void fwd_layers_qwen3(st_fwd *f, int last_only);
void fwd_layers_qwen35(st_fwd *f, int last_only);
/* One hybrid layer on WS_X (also the MTP block): x += Mixer(norm x); with last_only the FFN runs
 * on the last row alone, moved to row 0; x += FFN(norm x). */
void fwd_layer_qwen35(st_fwd *f, int il, int last_only);

/* qwen4exp (qwen4exp.c): the embedding widened to hc streams, the layers and the head's mixer;
 * leaves the rows that need logits (all, or the last at row 0) in WS_H. */
void fwd_qwen4exp(st_fwd *f, int last_only);

/* The stack of f's architecture on the embedded rows in WS_X, then the final norm (qwen4exp: its
 * head mixer) of n_out rows (all, or with last_only those fwd_keep_last_rows keeps) into WS_H:
 * the part of a forward every backend runs alike (forward.c; the GPU's driver in model/cuda/). */
void fwd_layers_and_norm(st_fwd *f, int last_only, int64_t n_out);

#endif
