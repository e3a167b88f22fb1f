/* rows.c: the rows of a forward taken apart per sequence (rows.h): which rows of a sequence go on
 * past the last mixer and into the head, each sequence of a pass as a pass of its own, a block run
 * on each one's rows, and the rows that go on moved to the front. */
#include "model/rows.h"

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
