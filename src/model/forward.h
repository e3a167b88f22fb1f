/* forward.h: the forward pass of one chunk of rows, shared by every architecture, and the state it
 * reads and writes (state.h).
 *
 * A chunk is n consecutive tokens of one sequence at positions pos0 .. pos0+n-1; decode is a chunk
 * of one row. The forward appends to the KV cache of each attention layer, carries the conv and
 * delta-rule state of each Gated DeltaNet layer, and writes logits only for the rows that need
 * them (every row, or the last). All per-chunk activations live in the workspace (base/
 * workspace.h), sized by st_forward_ws_size (forward_ws.h); the state is allocated by the session
 * (src/engine) and never enters the workspace. */
#ifndef ST_MODEL_FORWARD_H
#define ST_MODEL_FORWARD_H

#include <stdint.h>
#include "base/pool.h"
#include "base/status.h"
#include "base/workspace.h"
#include "model/model.h"
#include "model/rows.h"
#include "model/state.h"

/* A chunk is n rows of one sequence at consecutive positions n_past .. n_past+n-1; the verify
 * chunk of speculative decoding is such a run of rows whose recurrent states are all kept. The
 * rows of several sequences, each kind of chunk among them, go through st_forward_seqs. */
typedef struct st_chunk {
    const int32_t *tokens;
    int64_t n;
    int logits_all;            /* 1: every row; 0: the last row only */
    float *logits;             /* destination, rows ld_logits floats apart */
    int64_t ld_logits;
    float *h_out;              /* NULL, or [n][d]: every row's output-normed hidden state (the
                                  MTP head's input, MODELS.md §7) */
    int keep_steps;            /* keep each row's recurrent state (n <= state n_steps) */
    float *hidden;             /* or NULL: the last row's final hidden state (what the LM head reads), n_embd floats */
} st_chunk;

/* Runs one chunk; the state advances by c->n positions. n_threads is the pool's size (for the
 * GDN scratch); the workspace must hold c->n rows. */
st_status st_forward(const struct st_model *m, st_state *s, st_workspace *ws, st_pool *pool, const st_chunk *c);

/* The rows of several sequences in one forward (st_seq_rows, rows.h), at most ST_FORWARD_MAX_SEQS
 * of them. */
#define ST_FORWARD_MAX_SEQS 256
/* The state of each sequence advances by its rows; the workspace must hold all of them. stage
 * [sum of st_seq_head_rows][n_vocab]: the head's rows before they go to each sequence's logits. */
st_status st_forward_seqs(const struct st_model *m, st_workspace *ws, st_pool *pool, const st_seq_rows *seqs, int n_seqs,
                          float *stage);

#endif
