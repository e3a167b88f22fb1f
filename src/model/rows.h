/* rows.h: the rows a forward runs on, the vocabulary that the forward (forward.c), the layer
 * stacks and every block share: st_fwd, one pass over a chunk's rows, and st_seq_rows, the rows of
 * one sequence among several in one forward; and how a block takes them apart per sequence
 * (rows.c). It runs no layer and owns no buffer: the rows live in the workspace, the state in the
 * session. */
#ifndef ST_MODEL_ROWS_H
#define ST_MODEL_ROWS_H

#include "base/pool.h"
#include "base/workspace.h"
#include "model/model.h"
#include "model/state.h"

/* The rows of several sequences in one forward (parallel slots): sequence k's n rows follow
 * sequence k-1's, each row at its sequence's next position, tagged by where it sits. Everything
 * that reads weights (the mixers' projections, the FFN, the MoE's experts, the head) runs over
 * all rows at once; what reads a sequence's state (the KV cache store and attention, the conv and
 * the Gated DeltaNet step, QSA's indexer, the PLE layer) runs per sequence on its rows (fwd_seq). Each row's arithmetic is that of its
 * sequence fed alone in the same pieces (the dot kernels keep one accumulator per row), so a
 * reply does not depend on what runs beside it.
 *
 * A sequence's rows are of one of the kinds st_chunk has: a decode row or a prompt piece (the last
 * row's logits), or the verify chunk of speculative decoding (every row's logits and hidden
 * state, every row's recurrent state kept in the sequence's step planes). */
typedef struct st_seq_rows {
    st_state *s;
    const int32_t *tokens;
    int64_t n;
    float *logits;             /* [n_vocab] the last row's logits, or with logits_all [n][n_vocab] */
    int logits_all;
    float *h_out;              /* NULL, or [n][d]: every row's output-normed hidden state */
    int keep_steps;            /* keep each row's recurrent state (n <= s->n_steps) */
} st_seq_rows;
/* The rows that go on past the last mixer (the last, or all with logits_all or h_out) and the
 * rows of the head (the last, or all with logits_all) of a sequence. */
int64_t st_seq_out_rows(const st_seq_rows *q);
int64_t st_seq_head_rows(const st_seq_rows *q);

/* ---- internal to src/model: the pass the layer blocks run in ---- */
typedef struct st_fwd {
    const struct st_model *m;
    const st_hparams *hp;
    st_state *s;
    st_workspace *ws;
    st_pool *pool;
    int64_t n;                 /* rows in this chunk */
    int64_t pos0;
    const int32_t *pos;        /* pos0 .. pos0+n-1 (with seqs: every row's own position) */
    void *mm_scratch;
    /* Several sequences (st_forward_seqs): s, pos0 and n stand for all rows together only where
     * nothing reads a state; fwd_per_seq runs a mixer on each sequence's rows with its own. */
    const st_seq_rows *seqs;
    int n_seqs;
    const int64_t *seq_row0;   /* each sequence's first row */
    int keep_steps;            /* GDN layers write every row's state into the step planes */
} st_fwd;

/* A mixer: reads h [n][d] of layer il and writes its output [n][d] (no residual). */
typedef void (*fwd_mixer_fn)(st_fwd *f, int il, const float *h, float *out);
/* The sequences of f's rows (1 without seqs), and sequence k as a chunk of its own: its state,
 * rows and positions, *r0 its first row in f's buffers. The mixers run everything row by row on
 * all rows at once and only what reads a state (the KV cache, the conv and delta states) on each
 * sequence's rows. */
int fwd_n_seqs(const st_fwd *f);
st_fwd fwd_seq(const st_fwd *f, int k, int64_t *r0);
/* mixer(h, out) on each sequence's rows apart (rows of width w_in in h, w_out in out): for a
 * block whose every step reads the state (qwen4exp's PLE layer). */
void fwd_per_seq(st_fwd *f, int il, const float *h, int64_t w_in, float *out, int64_t w_out, fwd_mixer_fn mixer);
/* The rows that go on past the last mixer (of each sequence its last, or all of a sequence that
 * wants every row's: st_seq_out_rows) moved to the front of a [n][w] buffer, in order; returns
 * how many. */
int64_t fwd_keep_last_rows(const st_fwd *f, float *x, int64_t w);

#endif
