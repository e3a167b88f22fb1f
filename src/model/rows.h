/* rows.h: the rows a forward runs on, the vocabulary that the forward (forward.c), the layer
 * stacks and every block share: st_fwd, one pass over a chunk's rows, and st_seq_rows, the rows of
 * one sequence among several in one forward; and how a block takes them apart per sequence
 * (rows.c). It runs no layer and owns no buffer: the rows live in the workspace, the state in the
 * session. */
#ifndef ST_MODEL_ROWS_H
#define ST_MODEL_ROWS_H

#include "backend/backend.h"
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
struct st_fwd;
/* An FFN block: reads h [n][d] of layer il, writes its output [n][d] (no residual). */
typedef void (*fwd_ffn_fn)(struct st_fwd *f, int il, const float *h, float *out, int64_t n);

/* Profiling marks of the blocks (a backend's prof_begin/prof_end; the GPU's STRATA_CUDA_PROFILE). */
enum { FWD_PROF_EMBED, FWD_PROF_ATTN, FWD_PROF_GDN, FWD_PROF_FFN, FWD_PROF_NORM_ADD, FWD_PROF_HEAD, FWD_PROF_COUNT };

/* One pass over a chunk's rows, on one backend: every pointer below that the blocks hand to an op
 * (the model's tensors, the state's buffers, the workspace, pos) is in that backend's memory. */
typedef struct st_fwd {
    const struct st_model *m;  /* the hyperparameters, and the tensors as the backend holds them */
    const st_hparams *hp;
    st_state *s;
    st_workspace *ws;
    st_backend *be;            /* the op table every block runs on (backend.h) */
    fwd_ffn_fn moe;            /* the backend's MoE layer (routing, experts, shared expert) */
    const void *moe_ctx;       /* what that MoE layer reads besides the tensors (the GPU's: its
                                  st_dweights, with the experts' f16 copies and the memory tiers) */
    st_pool *pool;             /* the CPU's pool (the CPU's MoE job and its MTP head) */
    int64_t n;                 /* rows in this chunk */
    int64_t pos0;
    const int32_t *pos;        /* pos0 .. pos0+n-1 (with seqs: every row's own position) */
    void *mm_scratch;
    /* The residual still to be added into x (WS_X) by the next norm (add_rms_norm), or NULL. */
    const float *pending;
    /* Attention's cells: 0 for pos0 + n; else a bound (a GPU graph's bucket), the causal mask from
     * each row's position hiding the cells past it. row_n_kv: NULL, or each row's own bound, run
     * one row at a time (a GPU verify chunk, as its decode steps). */
    int64_t n_kv;
    const int64_t *row_n_kv;
    /* NULL, or where the last layer's FFN on every row leaves the output-normed rows [n][d] beside
     * the one-row FFN the logits come from (a GPU prompt chunk for the MTP head). */
    float *hidden;
    /* Several sequences (st_forward_seqs): s, pos0 and n stand for all rows together only where
     * nothing reads a state; fwd_per_seq runs a mixer on each sequence's rows with its own. */
    const st_seq_rows *seqs;
    int n_seqs;
    const int64_t *seq_row0;   /* each sequence's first row */
    int keep_steps;            /* GDN layers write every row's state into the step planes */
    int ple_win_given;         /* qwen4exp: the PLE hash's window is in WS_PLE_IDS already (a GPU's
                                  replayed step: the session uploads it with the token) */
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

/* A forward of several sequences, on any device: checks each sequence's rows (their count, the
 * context, a logits destination, step planes for kept states, what qwen4exp needs) and lays them
 * out: row0[k] sequence k's first row, out0[k] its first row past the last mixer (st_seq_out_rows
 * each); *n and *n_out the totals. */
st_status fwd_seqs_layout(const st_hparams *hp, const st_seq_rows *seqs, int n_seqs, int64_t *row0, int64_t *out0,
                          int64_t *n, int64_t *n_out);
/* The head's rows of each sequence (st_seq_head_rows), from where fwd_layers_and_norm left them in
 * h [..][w] (out0), moved to its front in order for one product; returns how many. */
int64_t fwd_seqs_pack_head(st_fwd *f, float *h, int64_t w, const int64_t *out0);

/* A call of the pass's op table: FWD_OP(f, rms_norm, x, ...) is f->be->ops->rms_norm(f->be, x, ...). */
#define FWD_OP(f, op, ...) ((f)->be->ops->op((f)->be, __VA_ARGS__))

/* The matrix view of a bound weight tensor. */
static inline st_mat fwd_mat(const st_tensor *t) {
    return (st_mat){.type = t->type, .data = t->data, .K = t->ne[0], .M = t->ne[1], .row_bytes = t->row_bytes,
                    .scale = t->scale};
}

/* Profiling marks, where the backend keeps them. */
static inline void fwd_prof_begin(struct st_fwd *f) {
    if (f->be->ops->prof_begin) f->be->ops->prof_begin(f->be);
}
static inline void fwd_prof_end(struct st_fwd *f, int kind) {
    if (f->be->ops->prof_end) f->be->ops->prof_end(f->be, kind);
}

#endif
