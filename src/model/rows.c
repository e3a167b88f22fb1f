/* rows.c: the rows of a forward taken apart per sequence (rows.h): which rows of a sequence go on
 * past the last mixer and into the head, each sequence of a pass as a pass of its own, a block run
 * on each one's rows, and the rows that go on moved to the front. */
#include "model/rows.h"

#include "model/forward.h"

int64_t st_seq_out_rows(const st_seq_rows *q) { return q->logits_all || q->h_out ? q->n : 1; }
int64_t st_seq_head_rows(const st_seq_rows *q) { return q->logits_all ? q->n : 1; }

int fwd_n_seqs(const st_fwd *f) { return f->seqs ? f->n_seqs : 1; }

st_fwd fwd_seq(const st_fwd *f, int k, int64_t *r0) {
    st_fwd g = *f;
    *r0 = 0;
    if (!f->seqs) return g;
    *r0 = f->seq_row0[k];
    g.s = f->seqs[k].s;
    g.n = f->seqs[k].n;
    g.pos0 = g.s->n_past;
    g.pos = f->pos + *r0;
    g.seqs = NULL;
    g.n_seqs = 0;
    g.keep_steps = f->seqs[k].keep_steps && st_hp_is_hybrid(f->hp);
    return g;
}

void fwd_per_seq(st_fwd *f, int il, const float *h, int64_t w_in, float *out, int64_t w_out, fwd_mixer_fn mixer) {
    for (int k = 0; k < fwd_n_seqs(f); k++) {
        int64_t r0;
        st_fwd g = fwd_seq(f, k, &r0);
        mixer(&g, il, h + r0 * w_in, out + r0 * w_out);
    }
}

int64_t fwd_keep_last_rows(const st_fwd *f, float *x, int64_t w) {
    if (!f->seqs) {
        if (f->n > 1) FWD_OP(f, copy_rows, x, w, x + (f->n - 1) * w, w, w, 1);
        return 1;
    }
    /* Each sequence's rows that go on land at or before where they are: in order, nothing is
     * overwritten before it moves. */
    int64_t n_out = 0;
    for (int k = 0; k < f->n_seqs; k++) {
        int64_t rows = st_seq_out_rows(&f->seqs[k]), from = f->seq_row0[k] + f->seqs[k].n - rows;
        if (from != n_out) FWD_OP(f, copy_rows, x + n_out * w, w, x + from * w, w, w, rows);
        n_out += rows;
    }
    return n_out;
}

st_status fwd_seqs_layout(const st_hparams *hp, const st_seq_rows *seqs, int n_seqs, int64_t *row0, int64_t *out0,
                          int64_t *n, int64_t *n_out) {
    if (n_seqs <= 0 || n_seqs > ST_FORWARD_MAX_SEQS)
        return st_fail(ST_ERR_INVALID, "forward: %d sequences (1..%d)", n_seqs, ST_FORWARD_MAX_SEQS);
    int hybrid = st_hp_is_hybrid(hp);
    *n = *n_out = 0;
    for (int k = 0; k < n_seqs; k++) {
        const st_seq_rows *q = &seqs[k];
        const st_state *s = q->s;
        if (q->n <= 0) return st_fail(ST_ERR_INVALID, "forward: sequence %d has %lld rows", k, (long long)q->n);
        if (s->n_past + q->n > s->n_ctx)
            return st_fail(ST_ERR_RANGE, "context is full: %lld positions + %lld new tokens exceed the context size %lld",
                           (long long)s->n_past, (long long)q->n, (long long)s->n_ctx);
        if (!q->logits) return st_fail(ST_ERR_INVALID, "forward: sequence %d has no logits destination", k);
        if (q->keep_steps && hybrid && q->n > s->n_steps)
            return st_fail(ST_ERR_INVALID, "forward: %lld rows of sequence %d keep their states, the state has %d step planes",
                           (long long)q->n, k, s->n_steps);
        if (hp->arch == ST_ARCH_QWEN4EXP) {
            if (hp->ple_layer >= 0 && !s->ids) return st_fail(ST_ERR_INVALID, "forward: the PLE hash needs the sequence's ids");
            if (q->h_out) return st_fail(ST_ERR_UNSUPPORTED, "forward: qwen4exp has no hidden-state output");
        }
        row0[k] = *n;
        out0[k] = *n_out;
        *n += q->n;
        *n_out += st_seq_out_rows(q);
    }
    return ST_OK;
}

int64_t fwd_seqs_pack_head(st_fwd *f, float *h, int64_t w, const int64_t *out0) {
    /* as fwd_keep_last_rows: each moves to or before where it is, in order */
    int64_t n_head = 0;
    for (int k = 0; k < f->n_seqs; k++) {
        const st_seq_rows *q = &f->seqs[k];
        int64_t rows = st_seq_head_rows(q), from = out0[k] + st_seq_out_rows(q) - rows;
        if (from != n_head) FWD_OP(f, copy_rows, h + n_head * w, w, h + from * w, w, w, rows);
        n_head += rows;
    }
    return n_head;
}
