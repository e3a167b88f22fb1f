/* spec.c: the speculative decoder (spec.h): drafting, the verify chunk and the return to the
 * state after the last row the caller fed.
 *
 * Positions. The trunk holds x_0 .. x_{P-1}; its output-normed hidden state at position p is h_p.
 * The MTP head's cache at position p holds the K/V of the row (x_p, h_{p-1}), h_{-1} = 0
 * (MODELS-ERRATA F10: llama.cpp's catch-up), so the head's logits at p predict x_{p+1}.
 *
 * One step, after the caller feeds t at position P (not a draft row already verified):
 *   1. finish the previous chunk [t', d1..dN] at P': keep its rows 0..k that the caller fed
 *      (st_session_keep_row), and give the head the rows (d_i, h_{P'+i-1}) for i = 1..k (only
 *      their K/V); the head's row 0 was already written by the first draft step;
 *   2. draft: the head on (t, h_{P-1}) at P gives d1 (greedy) and h'; on (d1, h') at P+1 gives
 *      d2, ...; or the n-gram lookup; the head's cache is then cut back to P+1;
 *   3. verify: feed [t, d1..dN] as one chunk at P with every row's logits and hidden state, and
 *      every row's recurrent state kept.
 * The caller then samples from row 0; feeding d1 moves to row 1, and so on. The draft's stats
 * count how many drafts were fed as proposed, by position.
 *
 * Adapting (params.adapt): a draft at position i pays when the chance that it and the ones before
 * it are accepted beats its cost, about a quarter of a decode on the models measured (the head's
 * step, and the chunk's extra row: bench/results/2026-12-01-cpu-spec-demo.md). A running rate of
 * acceptance per position (the last ~10 drafts there) decides how far to draft; every 32nd chunk
 * drafts all n_draft, so the rates follow the text. Drafts never change the text, only the speed.
 *
 * The chunk's rows are one sequence at consecutive positions, with the step planes of its own
 * session; the halves (st_spec_feed_begin / _end) let a caller run them beside other sessions'
 * rows in one forward (st_session_feed_seqs: the server's parallel slots). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/session_internal.h"
#include "engine/session_spec.h"
#include "engine/session_state.h"
#include "engine/spec.h"
#include "model/forward_ws.h"

struct st_spec {
    st_session *s;
    const struct st_model *m;
    st_spec_params p;
    int64_t V, d;
    /* the chunk being verified */
    int pending;               /* a chunk whose rows the caller is feeding */
    int kept_steps;            /* it kept its rows' recurrent states (more than one row) */
    int32_t rows[ST_SPEC_MAX_DRAFT + 1];
    int64_t n_rows, confirmed, pos0;
    int tried;                 /* draft positions paid for: the rows, and MTP head steps whose
                                  token the gate then left out */
    float *logits;             /* [n_rows][V] */
    float *h;                  /* [1 + rows][d]: h[0] = the state before the chunk's first row, then
                                  the chunk's (or a prompt chunk's) rows */
    int64_t h_rows;
    const int32_t *piece;      /* the prompt piece being fed (st_spec_prompt_begin), at piece_at */
    int64_t piece_at;
    /* the MTP head's draft row */
    float *head_logits, *head_h, *head_hin;
    float *cand;               /* top-10 logits for p_min */
    double rate[ST_SPEC_MAX_DRAFT]; /* acceptance at each draft position, a running mean */
    int64_t chunks;
    st_spec_stats stats;
};

/* A draft at position i is made while rate[0] * .. * rate[i] stays above this: an MTP draft costs
 * its head step and its row of the chunk, an n-gram draft only its row. */
#define SPEC_PAYS_MTP 0.3
#define SPEC_PAYS_NGRAM 0.15
#define SPEC_PROBE 32
/* MTP, adapting: the draft ends where the head's own chance that every draft so far is right (the
 * product of its top tokens' probabilities) falls below this. */
#define SPEC_REACH_MTP 0.3
/* --spec-draft's defaults: an n-gram draft costs no head step, so a repeated text drafts further. */
#define SPEC_DRAFT_MTP 3
#define SPEC_DRAFT_NGRAM 8

st_spec_params st_spec_default_params(void) {
    return (st_spec_params){.mode = ST_SPEC_AUTO, .n_draft = 0, .p_min = 0.0f, .adapt = 1};
}

int st_spec_parse_mode(const char *s, int *mode) {
    static const char *names[] = {"none", "mtp", "ngram"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) return *mode = i, 1;
    if (!strcmp(s, "auto")) return *mode = ST_SPEC_AUTO, 1;
    return 0;
}

const char *st_spec_mode_name(int mode) {
    return mode == ST_SPEC_MTP ? "mtp" : mode == ST_SPEC_NGRAM ? "ngram" : mode == ST_SPEC_NONE ? "none" : "auto";
}

st_status st_spec_new(st_session *s, const st_spec_params *params, st_spec **out) {
    *out = NULL;
    st_spec_params p = params ? *params : st_spec_default_params();
    const struct st_model *m = st_session_model(s);
    if (p.n_draft < 0 || p.n_draft > ST_SPEC_MAX_DRAFT)
        return st_fail(ST_ERR_INVALID, "spec: --spec-draft %d is outside 1..%d", p.n_draft, ST_SPEC_MAX_DRAFT);
    if (!(p.p_min >= 0.0f && p.p_min <= 1.0f)) return st_fail(ST_ERR_INVALID, "spec: --spec-p-min %g is outside 0..1", (double)p.p_min);
    /* auto on a device: none, its head running on the CPU (below) costs a real model's decode step */
    if (p.mode == ST_SPEC_AUTO) p.mode = m->n_mtp && !st_session_on_device(s) ? ST_SPEC_MTP : ST_SPEC_NONE;
    if (p.mode == ST_SPEC_MTP && !m->n_mtp)
        return st_fail(ST_ERR_UNSUPPORTED, "spec: --spec mtp: this model has no MTP head (nextn_predict_layers = 1 and blk.%lld.nextn.*)",
                       (long long)m->hp.n_layer);
    if (m->hp.arch == ST_ARCH_QWEN4EXP && p.mode == ST_SPEC_NGRAM)
        return st_fail(ST_ERR_UNSUPPORTED, "spec: --spec ngram: qwen4exp's PLE history has no per-row rollback yet");
    if (!p.n_draft) p.n_draft = p.mode == ST_SPEC_NGRAM ? SPEC_DRAFT_NGRAM : SPEC_DRAFT_MTP;
    /* On a device the verify chunk runs there, the MTP head on the CPU from the copied rows. */
    if (st_session_on_device(s) && p.n_draft > ST_DEVICE_VERIFY_ROWS - 1) p.n_draft = ST_DEVICE_VERIFY_ROWS - 1;
    st_spec *d = calloc(1, sizeof *d);
    if (!d) return st_fail(ST_ERR_NOMEM, "spec: out of memory");
    d->s = s;
    d->m = m;
    d->p = p;
    d->V = m->hp.n_vocab;
    d->d = m->hp.n_embd;
    for (int i = 0; i < ST_SPEC_MAX_DRAFT; i++) d->rate[i] = 1.0;
    int64_t prefill = st_session_n_prefill(s);
    d->h_rows = 1 + (prefill > ST_SPEC_MAX_DRAFT + 1 ? prefill : ST_SPEC_MAX_DRAFT + 1);
    st_status st = ST_OK;
    if (p.mode != ST_SPEC_NONE) {
        d->logits = malloc((size_t)((p.n_draft + 1) * d->V) * sizeof(float));
        if (!d->logits) st = st_fail(ST_ERR_NOMEM, "spec: out of memory for %d rows of logits", p.n_draft + 1);
        if (st == ST_OK) st = st_session_reserve_steps(s, p.n_draft + 1);
        if (st == ST_ERR_UNSUPPORTED && st_session_on_device(s)) {
            /* a device session whose chunks cannot match its decode steps: no drafts */
            st_clear_error();
            st = ST_OK;
            d->p.mode = ST_SPEC_NONE;
        }
    }
    if (st == ST_OK && p.mode == ST_SPEC_MTP) {
        d->h = calloc((size_t)(d->h_rows * d->d), sizeof(float));
        d->head_logits = malloc((size_t)d->V * sizeof(float));
        d->head_h = malloc((size_t)d->d * sizeof(float));
        d->head_hin = malloc((size_t)d->d * sizeof(float));
        d->cand = malloc(10 * sizeof(float));
        if (!d->h || !d->head_logits || !d->head_h || !d->head_hin || !d->cand)
            st = st_fail(ST_ERR_NOMEM, "spec: out of memory for the MTP head's rows");
    }
    if (st != ST_OK) {
        st_spec_free(d);
        return st;
    }
    *out = d;
    return ST_OK;
}

void st_spec_free(st_spec *d) {
    if (!d) return;
    free(d->logits);
    free(d->h);
    free(d->head_logits);
    free(d->head_h);
    free(d->head_hin);
    free(d->cand);
    free(d);
}

int st_spec_mode(const st_spec *d) { return d->p.mode; }
int st_spec_n_draft(const st_spec *d) { return d->p.n_draft; }
const st_spec_stats *st_spec_stats_get(const st_spec *d) { return &d->stats; }
void st_spec_stats_reset(st_spec *d) { memset(&d->stats, 0, sizeof d->stats); }

int64_t st_spec_n_past(const st_spec *d) {
    return d->pending ? d->pos0 + d->confirmed : st_session_n_past(d->s);
}

const float *st_spec_logits(const st_spec *d) {
    return d->pending ? d->logits + (d->confirmed - 1) * d->V : st_session_logits(d->s);
}

/* The head's cache must reach the position the head runs at; the skipped cells of a gap move it. */
static void head_seek(st_spec *d, int64_t pos) {
    if (st_session_mtp_n_past(d->s) > pos) st_session_mtp_cut(d->s, pos);
    else if (st_session_mtp_n_past(d->s) < pos) {
        /* A gap: step over it (its cells keep stale rows). */
        st_state *st = st_session_state(d->s);
        st->mtp_n_past = pos;
    }
}

/* The head's K/V for positions [from, to) of rows whose tokens are tok[p - base] and whose h rows
 * are h[p - base] (h[0] = the state before `base`). A gap (the head's cache behind `from`, after
 * a load or a cut) is skipped: those cells keep what they held, which only makes drafts worse. */
static st_status head_catch_up(st_spec *d, const int32_t *tok, const float *h, int64_t base, int64_t to) {
    int64_t from = st_session_mtp_n_past(d->s);
    if (from < base) {
        head_seek(d, base);
        from = base;
    }
    if (from >= to) return ST_OK;
    st_mtp_chunk c = {.tokens = tok + (from - base), .h_in = h + (from - base) * d->d, .n = to - from, .kv_only = 1};
    d->stats.head_forwards++;
    return st_session_mtp(d->s, &c);
}

/* Ends the chunk being verified: the state after its last fed row, the head caught up with it,
 * and the h before the next row in d->h[0]. */
static st_status finish_chunk(st_spec *d) {
    if (!d->pending) return ST_OK;
    int64_t k = d->confirmed - 1;
    d->pending = 0;
    for (int64_t i = 0; i < d->tried; i++) d->rate[i] = 0.9 * d->rate[i] + (i < k ? 0.1 : 0.0);
    if (d->kept_steps) st_session_keep_row(d->s, d->pos0, k);
    /* the session's own logits are the last fed row's, as without drafts */
    st_session_set_logits(d->s, d->logits + k * d->V);
    if (d->p.mode != ST_SPEC_MTP) return ST_OK;
    st_status st = head_catch_up(d, d->rows, d->h, d->pos0, d->pos0 + k + 1);
    memmove(d->h, d->h + (k + 1) * d->d, (size_t)d->d * sizeof(float));
    return st;
}

void st_spec_finish(st_spec *d) {
    if (finish_chunk(d) != ST_OK) st_clear_error(); /* only the head's cache fell behind: drafts get worse */
}

/* Probability of the best of the head's logits among its 10 best (llama.cpp's draft sampler:
 * top-k 10, greedy, p of the pick). */
static int32_t head_pick(st_spec *d, float *p_best) {
    const float *l = d->head_logits;
    int32_t best = 0;
    float top[10];
    int n = 0;
    for (int64_t i = 0; i < d->V; i++) {
        if (l[i] > l[best]) best = (int32_t)i;
        if (n < 10) top[n++] = l[i];
        else {
            int w = 0;
            for (int j = 1; j < 10; j++) if (top[j] < top[w]) w = j;
            if (l[i] > top[w]) top[w] = l[i];
        }
    }
    double sum = 0.0;
    for (int j = 0; j < n; j++) sum += exp((double)top[j] - (double)l[best]);
    *p_best = (float)(1.0 / sum);
    return best;
}

/* Drafts after tok at position P into out; returns how many (at most n_max), and in *tried the
 * positions paid for: a head step whose token the gate left out counts as a draft not accepted,
 * so a head that is rarely sure stops being run. */
static int draft(st_spec *d, int32_t tok, int64_t P, int n_max, int32_t *out, int *tried) {
    *tried = 0;
    if (n_max <= 0) return 0;
    if (d->p.mode == ST_SPEC_NGRAM) {
        int32_t *ids = st_session_id_buffer(d->s);
        ids[P] = tok; /* the verify chunk holds it there next */
        return *tried = st_ngram_draft(ids, P + 1, n_max, out);
    }
    head_seek(d, P);
    int n = 0;
    int32_t x = tok;
    const float *h = d->h; /* h_{P-1} */
    double reach = 1.0;
    while (n < n_max) {
        memcpy(d->head_hin, h, (size_t)d->d * sizeof(float));
        st_mtp_chunk c = {.tokens = &x, .h_in = d->head_hin, .n = 1, .logits = d->head_logits, .h_out = d->head_h};
        d->stats.head_forwards++;
        if (st_session_mtp(d->s, &c) != ST_OK) {
            st_clear_error();
            break;
        }
        float p;
        x = head_pick(d, &p);
        *tried = n + 1;
        if (p < d->p.p_min || (d->p.adapt && (reach *= p) < SPEC_REACH_MTP)) break;
        out[n++] = x;
        h = d->head_h;
    }
    /* Only the first row (tok, h_{P-1}) is the catch-up row of P; the rest were the head's own. */
    if (st_session_mtp_n_past(d->s) > P + 1) st_session_mtp_cut(d->s, P + 1);
    return n;
}

st_status st_spec_feed_begin(st_spec *d, int32_t tok, st_feed_rows *r) {
    *r = (st_feed_rows){.s = d->s};
    d->stats.fed++;
    if (d->p.mode == ST_SPEC_NONE) {
        d->rows[0] = tok;
        r->tokens = d->rows;
        r->n = 1;
        return ST_OK;
    }
    if (d->pending && d->confirmed < d->n_rows && d->rows[d->confirmed] == tok) {
        d->stats.accepted++;
        d->stats.accepted_at[d->confirmed - 1]++;
        d->confirmed++;
        return ST_OK;
    }
    ST_TRY(finish_chunk(d));
    int64_t P = st_session_n_past(d->s), n_ctx = st_session_n_ctx(d->s);
    if (P >= n_ctx) return st_fail(ST_ERR_RANGE, "context is full: %lld positions + 1 new token exceed the context size %lld",
                                   (long long)P, (long long)n_ctx);
    int room = (int)(n_ctx - P - 1 < d->p.n_draft ? n_ctx - P - 1 : d->p.n_draft);
    if (d->p.adapt && d->chunks++ % SPEC_PROBE) {
        double reach = 1.0;
        int pays = 0;
        double bar = d->p.mode == ST_SPEC_MTP ? SPEC_PAYS_MTP : SPEC_PAYS_NGRAM;
        while (pays < room && (reach *= d->rate[pays]) >= bar) pays++;
        room = pays;
    }
    int n = draft(d, tok, P, room, d->rows + 1, &d->tried);
    d->rows[0] = tok;
    d->n_rows = 1 + n;
    d->pos0 = P;
    d->stats.drafted += n;
    for (int i = 0; i < n; i++) d->stats.drafted_at[i]++;
    d->stats.forwards++;
    *r = (st_feed_rows){.s = d->s, .tokens = d->rows, .n = d->n_rows, .logits_all = d->logits,
                        .h_all = d->p.mode == ST_SPEC_MTP ? d->h + d->d : NULL, .keep_steps = n > 0};
    return ST_OK;
}

st_status st_spec_feed_end(st_spec *d, st_status fed) {
    if (d->p.mode == ST_SPEC_NONE) return fed;
    if (fed != ST_OK) {
        st_session_mtp_cut(d->s, 0);
        return fed;
    }
    d->pending = 1;
    d->kept_steps = d->n_rows > 1;
    d->confirmed = 1;
    return ST_OK;
}

st_status st_spec_feed(st_spec *d, int32_t tok) {
    st_feed_rows r;
    ST_TRY(st_spec_feed_begin(d, tok, &r));
    return r.n ? st_spec_feed_end(d, st_session_feed_seqs(d->s, &r, 1)) : ST_OK;
}

st_status st_spec_prompt_begin(st_spec *d, const int32_t *ids, int64_t n, st_feed_rows *r) {
    ST_TRY(finish_chunk(d));
    *r = (st_feed_rows){.s = d->s, .tokens = ids, .n = n};
    if (d->p.mode != ST_SPEC_MTP) return ST_OK;
    if (n > d->h_rows - 1)
        return st_fail(ST_ERR_INVALID, "spec: a prompt piece of %lld rows, at most %lld at once", (long long)n, (long long)(d->h_rows - 1));
    d->piece = ids;
    d->piece_at = st_session_n_past(d->s);
    if (d->piece_at == 0) memset(d->h, 0, (size_t)d->d * sizeof(float)); /* h_{-1} = 0 */
    r->h_all = d->h + d->d;
    return ST_OK;
}

st_status st_spec_prompt_end(st_spec *d, const st_feed_rows *r, st_status fed) {
    if (d->p.mode != ST_SPEC_MTP) return fed;
    st_status st = fed == ST_OK ? head_catch_up(d, d->piece, d->h, d->piece_at, d->piece_at + r->n) : fed;
    if (st != ST_OK) {
        st_session_mtp_cut(d->s, 0);
        return st;
    }
    memmove(d->h, d->h + r->n * d->d, (size_t)d->d * sizeof(float));
    return ST_OK;
}

st_status st_spec_prompt(st_spec *d, const int32_t *ids, int64_t n) {
    int64_t step = d->p.mode == ST_SPEC_MTP ? d->h_rows - 1 : n;
    if (n <= 0) return st_session_feed(d->s, ids, n, NULL); /* its refusal */
    for (int64_t off = 0; off < n; off += step) {
        st_feed_rows r;
        ST_TRY(st_spec_prompt_begin(d, ids + off, n - off < step ? n - off : step, &r));
        ST_TRY(st_spec_prompt_end(d, &r, st_session_feed_seqs(d->s, &r, 1)));
    }
    return ST_OK;
}
