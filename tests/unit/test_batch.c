/* test_batch.c: st_session_feed_batch, the rows of several sequences in one forward (parallel
 * slots), is batch invariant: on the tiny fixtures of qwen3, qwen3moe, qwen35, qwen35moe and
 * qwen3next, and on the demo model, four sequences with their own prompts, started at different
 * steps so that prompt pieces run in the same forward as the others' decode rows, read logits that
 * are bit for bit those of each sequence fed alone in the same pieces, and so decode the same
 * greedy tokens; one sequence alone through the batch call equals st_session_feed; a refused batch
 * (an id outside the vocabulary in one session) feeds none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "strata.h"
#include "test.h"
#include "test_model_fixture.h"

enum { SEQS = 4, PROMPT = 23, PIECE = 7, DECODE = 6, STEPS = 4 + 4 + DECODE + 3 };

static st_session *session(st_model *m, int threads) {
    st_session_params sp = st_session_default_params();
    sp.n_threads = threads;
    sp.n_ctx = 128;
    st_session *s = NULL;
    if (st_session_new(m, &sp, &s) != ST_OK) fprintf(stderr, "session: %s\n", st_last_error());
    return s;
}

/* A sequence's schedule: prompt pieces of PIECE (the last shorter), then DECODE greedy tokens. */
typedef struct seq {
    int32_t prompt[PROMPT], decoded[DECODE];
    int64_t fed;       /* prompt positions fed */
    int n_dec;
    int start;         /* the step it joins */
    float *ref;        /* [pieces + DECODE][V]: the logits after each piece alone */
    int n_ref;
} seq;

/* The next piece of q: prompt rows, or its last decoded token. */
static int64_t next_piece(const seq *q, const int32_t **tok) {
    if (q->fed < PROMPT) {
        *tok = q->prompt + q->fed;
        return PROMPT - q->fed < PIECE ? PROMPT - q->fed : PIECE;
    }
    *tok = q->decoded + q->n_dec - 1;
    return 1;
}

/* After a piece: the logits give the next greedy token once the prompt is in. */
static void advance(seq *q, int64_t rows, const float *logits, int V) {
    if (q->fed < PROMPT) q->fed += rows;
    if (q->fed == PROMPT && q->n_dec < DECODE) q->decoded[q->n_dec++] = fx_argmax(logits, V);
}

static int done(const seq *q) { return q->fed == PROMPT && q->n_dec == DECODE; }

static void run_case(st_model *m, const char *name, int threads) {
    int V = st_model_n_vocab(m);
    seq q[SEQS];
    for (int k = 0; k < SEQS; k++) {
        memset(&q[k], 0, sizeof q[k]);
        for (int i = 0; i < PROMPT; i++) q[k].prompt[i] = (int32_t)((17 * k + 5 * i + 3) % (V > 90 ? 90 : V));
        q[k].start = k == 0 ? 0 : 2 * k - 1;
        q[k].ref = malloc((size_t)(PROMPT / PIECE + 1 + DECODE) * (size_t)V * sizeof(float));
    }
    /* Alone: each sequence in its pieces, the logits after each. */
    for (int k = 0; k < SEQS; k++) {
        st_session *s = session(m, threads);
        seq r = q[k];
        while (!done(&r)) {
            const int32_t *tok;
            int64_t rows = next_piece(&r, &tok);
            if (st_session_feed(s, tok, rows, NULL) != ST_OK) break;
            memcpy(q[k].ref + (size_t)r.n_ref++ * (size_t)V, st_session_logits(s), (size_t)V * sizeof(float));
            advance(&r, rows, st_session_logits(s), V);
        }
        q[k].n_ref = r.n_ref;
        memcpy(q[k].decoded, r.decoded, sizeof r.decoded);
        st_session_free(s);
    }
    /* Together: at each step every sequence that has joined and is not done takes its next piece. */
    st_session *s[SEQS];
    for (int k = 0; k < SEQS; k++) s[k] = session(m, k == 0 ? threads : 1);
    seq b[SEQS];
    int32_t want[SEQS][DECODE];
    for (int k = 0; k < SEQS; k++) {
        memcpy(want[k], q[k].decoded, sizeof want[k]);
        b[k] = q[k];
        b[k].n_dec = 0;
        b[k].n_ref = 0;
    }
    int same = 1, mixed = 0;
    for (int step = 0; step < STEPS * 2; step++) {
        st_session *in[SEQS];
        const int32_t *tok[SEQS];
        int64_t rows[SEQS];
        int who[SEQS], n = 0, prompts = 0;
        for (int k = 0; k < SEQS; k++) {
            if (step < b[k].start || done(&b[k])) continue;
            in[n] = s[k];
            rows[n] = next_piece(&b[k], &tok[n]);
            prompts += b[k].fed < PROMPT;
            who[n++] = k;
        }
        if (!n) break;
        mixed += prompts && prompts < n;
        CHECKF(st_session_feed_batch(s[0], in, n, tok, rows) == ST_OK, "%s: %s", name, st_last_error());
        for (int i = 0; i < n; i++) {
            seq *x = &b[who[i]];
            const float *l = st_session_logits(s[who[i]]);
            if (memcmp(l, q[who[i]].ref + (size_t)x->n_ref++ * (size_t)V, (size_t)V * sizeof(float))) same = 0;
            advance(x, rows[i], l, V);
        }
    }
    CHECKF(same, "%s: every sequence's logits in the batch equal its logits alone", name);
    CHECKF(mixed > 0, "%s: prompt pieces ran beside decode rows (%d steps)", name, mixed);
    for (int k = 0; k < SEQS; k++)
        CHECKF(done(&b[k]) && !memcmp(b[k].decoded, want[k], sizeof want[k]), "%s: sequence %d decodes what it decodes alone", name, k);

    /* A refused batch feeds none. */
    int64_t held[SEQS];
    for (int k = 0; k < SEQS; k++) held[k] = st_session_n_past(s[k]);
    int32_t good = 1, bad = V + 5;
    const int32_t *tk[2] = {&good, &bad};
    int64_t one[2] = {1, 1};
    CHECK(st_session_feed_batch(s[0], s, 2, tk, one) == ST_ERR_RANGE);
    CHECK(st_session_n_past(s[0]) == held[0] && st_session_n_past(s[1]) == held[1]);
    for (int k = 0; k < SEQS; k++) {
        st_session_free(s[k]);
        free(q[k].ref);
    }
}

static void fixture_case(const char *arch) {
    fx_opts o = {.arch = arch};
    st_model_params mp = st_model_default_params();
    mp.copy_weights = 0;
    st_model *m = fx_load("/tmp", &o, "batch", &mp);
    CHECKF(m != NULL, "%s", arch);
    if (!m) return;
    run_case(m, arch, 2);
    st_model_free(m);
}

int main(void) {
    const char *archs[] = {"qwen3", "qwen3moe", "qwen35", "qwen35moe", "qwen3next"};
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) fixture_case(archs[i]);
    st_model *m = fx_load_demo();
    if (m) run_case(m, "demo", 2);
    st_model_free(m);
    return test_report("test_batch");
}
