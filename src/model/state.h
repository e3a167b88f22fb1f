/* state.h: what a sequence carries from chunk to chunk through the CPU forward, per layer: the KV
 * cache of an attention layer, the conv and delta-rule state of a Gated DeltaNet layer, qwen4exp's
 * raw indexer keys and PLE history; and the return to the state after one row of a chunk
 * (state.c). The session (src/engine) allocates, saves and restores it; the forward (forward.h)
 * reads and advances it; it never enters the workspace. */
#ifndef ST_MODEL_STATE_H
#define ST_MODEL_STATE_H

#include "model/model.h"

/* Per-layer state: a KV cache on attention layers, conv + delta state on GDN layers; qwen4exp
 * adds the raw indexer keys beside the KV cache of a QSA layer (and the pooled block keys derived
 * from them) and the PLE conv history on the PLE layer. */
typedef struct st_layer_state {
    void *k_cache, *v_cache;   /* [n_ctx][H_kv*hd] of kv_type */
    float *conv;               /* [C][K-1] */
    float *ssm;                /* [n_v][dv][dk] */
    void *idx_cache;           /* QSA: [n_ctx][idx_dim] of kv_type, the raw W_idxk m of each cell */
    float *idx_blocks;         /* QSA: [n_ctx/r][idx_dim] pooled, normed, rotated block keys: a cache
                                  of what the raw keys give, rebuilt on demand, never saved */
    int64_t n_blocks;          /* QSA: leading blocks of idx_blocks that are valid */
    float *ple_hist;           /* PLE layer: [hc*d][(K_ple-1)*N], per channel oldest first */
    /* GDN layers, when the state has step planes (n_steps > 0): the conv and delta states after
     * each row of a chunk run with keep_steps, so a speculative verify returns to the state after
     * any of its rows without running anything again (st_state_keep_row). */
    float **conv_steps, **ssm_steps;
} st_layer_state;

typedef struct st_state {
    int64_t n_ctx;             /* cells of each KV cache */
    uint32_t kv_type;          /* ST_TYPE_F16 (default) or ST_TYPE_F32 */
    int64_t n_past;            /* positions already processed */
    st_layer_state *layers;    /* n_layer entries, then the MTP block's (its own KV cache) */
    const int32_t *ids;        /* the token of every position up to the chunk's last (the session
                                  writes a chunk's ids before its forward): the PLE hash's history */
    int n_steps;               /* step planes per GDN layer: the longest keep_steps chunk */
    int64_t mtp_n_past;        /* positions the MTP block's KV cache holds */
} st_state;

/* After a keep_steps chunk of rows starting at position pos0: the state after row k of it, as if
 * only rows 0..k had been fed (recurrent states by swapping in row k's planes, attention by
 * forgetting the later cells). */
void st_state_keep_row(const struct st_model *m, st_state *s, int64_t pos0, int64_t k);

/* QSA's pooled block keys around a decode step at pos that the forward does not run (a GPU's
 * replayed graph, in which the step pools the block it completes on its own): ready, whether
 * every QSA layer holds the blocks before pos (the forward then takes that form); done, the count
 * after the step. */
/* The PLE hash's window of n rows at pos0 (backend.h, st_op_ple_hash): the ids at positions
 * pos0-(N-1) .. pos0+n-1 from s->ids, -1 before position 0; n + N - 1 of them into win. */
void st_state_ple_window(const struct st_model *m, const st_state *s, int64_t pos0, int64_t n, int32_t *win);

int st_state_qsa_step_ready(const struct st_model *m, const st_state *s, int64_t pos);
void st_state_qsa_step_done(const struct st_model *m, st_state *s, int64_t pos);

#endif
