/* forward_ws.h: the CPU forward's workspace: the id of every buffer a chunk's activations live in
 * and the size of each for a given number of rows (st_forward_ws_size), derived from the
 * hyperparameters and the bound tensors; and the facts of the hyperparameters that both forwards
 * (this one and model/cuda/) size and run by (forward_ws.c). Nothing here runs the model. */
#ifndef ST_MODEL_FORWARD_WS_H
#define ST_MODEL_FORWARD_WS_H

#include <stddef.h>
#include <stdint.h>
#include "model/model.h"

/* Workspace buffer ids. WS_EXPERT_ROWS: each expert's row count and offset in a chunk (moe_exec.c's
 * counting sort). WS_CAT: the MTP head's [e ; h] rows. */
enum st_ws_id {
    WS_X, WS_H, WS_T, WS_POS,
    WS_Q, WS_QN, WS_K, WS_V, WS_ATT, WS_QKV,
    WS_CONV, WS_Z, WS_BA, WS_A, WS_B, WS_GATE_G, WS_GATE_BETA, WS_GDN_OUT, WS_GDN_SCRATCH,
    WS_FF_A, WS_FF_B,
    WS_ROUTER, WS_IDS, WS_W, WS_SLOT, WS_ORDER, WS_EXPERT_ROWS, WS_XE, WS_GE, WS_UE, WS_YE,
    WS_SH_G, WS_SH_OUT, WS_ACT1, WS_ACT2, WS_ENT,
    /* qwen4exp */
    WS_R, WS_XN, WS_HC_G, WS_HC_LO, WS_HC_INJ,
    WS_PLE_IDS, WS_PLE_ROWS, WS_PLE_E, WS_PLE_GV,
    WS_IDX_Q, WS_IDX_K, WS_QSA_CELLS, WS_QSA_N, WS_QSA_SCRATCH,
    WS_MM, WS_LOGITS, WS_ROPE_KEEP, WS_CAT,
    /* the GPU's alone: the token ids, the routed experts' SwiGLU in 8 bits, the hidden rows' x */
    WS_TOK, WS_GEQ, WS_X2,
    WS_N_BUFFERS /* the number of ids, not a buffer */
};

/* What the workspace sizes depend on besides the rows. */
typedef struct st_ws_plan {
    const struct st_model *m;
    int n_threads;
    int64_t n_ctx;             /* the session's cells (QSA's per-query scratch spans them) */
} st_ws_plan;

/* The workspace size function (ctx = an st_ws_plan). */
size_t st_forward_ws_size(const void *plan, int id, int64_t rows);
/* qwen4exp's buffers (0 for the other architectures and ids): the streams and the mixers, PLE, the
 * QSA indexer and selection; both workspaces take them. */
size_t fwd_q4_ws_size(const st_ws_plan *plan, int id, int64_t rows);

/* Activation row bytes of the fused expert job's inputs (down = 0) or down inputs (down = 1). */
size_t fwd_moe_act_row(const struct st_model *m, int down);
/* Floats per row of the fused job's gate|up buffer (WS_GE). */
int64_t fwd_moe_gu_width(const st_hparams *hp);

/* Facts of the hyperparameters both forwards (this one and model/cuda/) size and run by: the most
 * query (kv 0) or kv heads (kv 1) of any attention layer; the widths both workspace size tables
 * start from (d, head size, most q and kv heads, the q projection (twice for the gated hybrids),
 * GDN key/value widths, conv channels and v-heads (0 without GDN), experts used, experts and expert
 * width (0 without MoE), and the widest fused qkv row of either mixer); the most experts any layer
 * uses. */
int64_t fwd_max_heads(const st_hparams *hp, int kv);
typedef struct fwd_widths {
    int64_t d, hd, H, Hkv, qw, kd, vd, C, n_v, k, E, ffe, qkv;
    int hybrid, moe;
} fwd_widths;
fwd_widths fwd_widths_of(const st_hparams *hp);
int64_t fwd_max_experts_used(const st_hparams *hp);

#endif
