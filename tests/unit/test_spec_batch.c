/* test_spec_batch.c: speculative decoding beside other sequences in one forward (parallel slots,
 * engine/spec.h's halves and st_session_feed_seqs) changes no text. On tiny models of the hybrids
 * with an MTP block (qwen35, qwen35moe, qwen3next), qwen3 (n-gram drafts only) and the demo model
 * with its head, four sequences, each with its own prompt, decoder (MTP or n-gram drafts of
 * several lengths, or none) and sampler (greedy, or 0.8 with its own seed), joining at different
 * steps, are driven together as the server drives its slots: every step, each sequence that needs
 * the trunk posts its rows (a prompt piece, a decode row, or a verify chunk of its token and its
 * drafts) and one forward runs them all. Each one's text equals the text it gives alone without
 * drafts, token for token, and after st_spec_finish its session holds the same ids and logits;
 * verify chunks ran beside other sequences' rows and drafts were accepted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/sampler.h"
#include "engine/session_spec.h"
#include "engine/spec.h"
#include "model/model.h"
#include "strata.h"
#include "test.h"
#include "test_model_fixture.h"

enum { SEQS = 4, PROMPT = 21, PIECE = 7, GEN = 64 };

static st_session *session(st_model *m, int threads) {
    st_session_params sp = st_session_default_params();
    sp.n_threads = threads;
    sp.n_ctx = 128;
    sp.n_prefill = PIECE;
    st_session *s = NULL;
    if (st_session_new(m, &sp, &s) != ST_OK) fprintf(stderr, "session: %s\n", st_last_error());
    return s;
}

typedef struct seq {
    int32_t prompt[PROMPT], out[GEN];
    st_session *s;
    st_spec *d;
    st_sampler *smp;
    int64_t fed;               /* prompt rows fed */
    int n_out, start;
    st_feed_rows rows;         /* posted for this step */
    int posted, prompt_piece;
} seq;

static st_sampler *sampler(st_model *m, const seq *q, int k) {
    st_sampler_params sp = st_sampler_default_params();
    sp.temperature = k % 2 ? 0.8f : 0.0f;
    sp.seed = 100 + (uint64_t)k;
    st_sampler *smp = NULL;
    st_sampler_new(&sp, st_model_n_vocab(m), &smp);
    for (int i = 0; i < PROMPT; i++) st_sampler_accept(smp, q->prompt[i]);
    return smp;
}

/* Alone, without drafts: the reference text, ids and logits. */
static void alone(st_model *m, seq *q, int k, int32_t *ids, float *logits) {
    st_session *s = session(m, 2);
    st_sampler *smp = sampler(m, q, k);
    CHECK(st_session_feed(s, q->prompt, PROMPT, NULL) == ST_OK);
    for (int n = 0; n < GEN; n++) {
        CHECK(st_sampler_sample(smp, st_session_logits(s), &q->out[n]) == ST_OK);
        st_sampler_accept(smp, q->out[n]);
        CHECK(st_session_feed(s, &q->out[n], 1, NULL) == ST_OK);
    }
    memcpy(ids, st_session_ids(s), sizeof(int32_t) * (PROMPT + GEN));
    memcpy(logits, st_session_logits(s), sizeof(float) * (size_t)st_model_n_vocab(m));
    st_sampler_free(smp);
    st_session_free(s);
}

/* Until the sequence needs the trunk: a prompt piece, or sampling tokens its last verify chunk
 * already holds; then its rows are posted (posted = 0 once it is done). */
static void prepare(seq *q) {
    q->posted = 0;
    if (q->fed < PROMPT) {
        int64_t n = PROMPT - q->fed < PIECE ? PROMPT - q->fed : PIECE;
        CHECK(st_spec_prompt_begin(q->d, q->prompt + q->fed, n, &q->rows) == ST_OK);
        q->posted = q->prompt_piece = 1;
        return;
    }
    q->prompt_piece = 0;
    while (q->n_out < GEN) {
        int32_t tok;
        CHECK(st_sampler_sample(q->smp, st_spec_logits(q->d), &tok) == ST_OK);
        st_sampler_accept(q->smp, tok);
        q->out[q->n_out++] = tok;
        CHECK(st_spec_feed_begin(q->d, tok, &q->rows) == ST_OK);
        if (q->rows.n) {
            q->posted = 1;
            return;
        }
    }
}

static void run_case(st_model *m, const char *name) {
    int V = st_model_n_vocab(m);
    int mtp = m->n_mtp > 0;
    /* (mode, drafts) of each sequence */
    const int mode[SEQS] = {mtp ? ST_SPEC_MTP : ST_SPEC_NGRAM, ST_SPEC_NGRAM, ST_SPEC_NGRAM, ST_SPEC_NONE};
    const int drafts[SEQS] = {3, 4, 2, 1};
    seq q[SEQS];
    int32_t want[SEQS][GEN], want_ids[SEQS][PROMPT + GEN];
    float *want_l = malloc(sizeof(float) * (size_t)V * SEQS);
    for (int k = 0; k < SEQS; k++) {
        memset(&q[k], 0, sizeof q[k]);
        /* prompts that repeat themselves, so the n-gram lookup finds matches */
        for (int i = 0; i < PROMPT; i++) q[k].prompt[i] = (int32_t)(((i % 9) * 7 + 3 * k + 2) % (V > 60 ? 60 : V));
        q[k].start = k;
        alone(m, &q[k], k, want_ids[k], want_l + (size_t)k * V);
        memcpy(want[k], q[k].out, sizeof want[k]);
        q[k].s = session(m, k == 0 ? 2 : 1);
        st_spec_params p = st_spec_default_params();
        p.mode = mode[k];
        p.n_draft = drafts[k];
        p.adapt = k == 1;
        CHECKF(st_spec_new(q[k].s, &p, &q[k].d) == ST_OK, "%s: %s", name, st_last_error());
        q[k].smp = sampler(m, &q[k], k);
        q[k].n_out = 0;
    }
    int mixed = 0;
    for (int step = 0; step < 4 * (PROMPT + GEN); step++) {
        st_feed_rows in[SEQS];
        int who[SEQS], n = 0, verify = 0;
        for (int k = 0; k < SEQS; k++) {
            if (step < q[k].start) continue;
            if (!q[k].posted) prepare(&q[k]);
            if (!q[k].posted) continue;
            in[n] = q[k].rows;
            verify += q[k].rows.keep_steps;
            who[n++] = k;
        }
        if (!n) break;
        mixed += verify && n > 1;
        st_status st = st_session_feed_seqs(q[0].s, in, n);
        CHECKF(st == ST_OK, "%s: %s", name, st_last_error());
        for (int i = 0; i < n; i++) {
            seq *x = &q[who[i]];
            if (x->prompt_piece) {
                CHECK(st_spec_prompt_end(x->d, &x->rows, st) == ST_OK);
                x->fed += x->rows.n;
            } else {
                CHECK(st_spec_feed_end(x->d, st) == ST_OK);
            }
            x->posted = 0;
        }
    }
    int64_t accepted = 0;
    for (int k = 0; k < SEQS; k++) {
        st_spec_finish(q[k].d);
        CHECKF(q[k].n_out == GEN && !memcmp(q[k].out, want[k], sizeof want[k]),
               "%s: sequence %d (%s, %d drafts, temp %.1f) beside the others writes what it writes alone", name, k,
               st_spec_mode_name(mode[k]), drafts[k], k % 2 ? 0.8 : 0.0);
        CHECKF(st_session_n_past(q[k].s) == PROMPT + GEN && !memcmp(st_session_ids(q[k].s), want_ids[k], sizeof want_ids[k]) &&
                   !memcmp(st_session_logits(q[k].s), want_l + (size_t)k * V, sizeof(float) * (size_t)V),
               "%s: sequence %d's session after the reply is the one it holds alone", name, k);
        accepted += st_spec_stats_get(q[k].d)->accepted;
    }
    CHECKF(mixed > 0, "%s: verify chunks ran beside other sequences' rows (%d steps)", name, mixed);
    CHECKF(accepted > 0, "%s: drafts were accepted (%lld)", name, (long long)accepted);
    for (int k = 0; k < SEQS; k++) {
        st_spec_free(q[k].d);
        st_sampler_free(q[k].smp);
        st_session_free(q[k].s);
    }
    free(want_l);
}

int main(void) {
    char dir[256];
    if (!fx_tmpdir(dir, sizeof dir, "spec-batch")) SKIP("cannot create a temporary directory");
    const char *archs[] = {"qwen35", "qwen35moe", "qwen3next", "qwen3"};
    for (int a = 0; a < 4; a++) {
        fx_opts o = {.arch = archs[a], .mtp = a < 3};
        st_model_params mp = st_model_default_params();
        mp.copy_weights = 0;
        st_model *m = fx_load(dir, &o, "specbatch", &mp);
        CHECKF(m != NULL, "%s", archs[a]);
        if (!m) continue;
        run_case(m, archs[a]);
        st_model_free(m);
    }
    rmdir(dir);
    st_model *m = fx_load_demo();
    if (m) run_case(m, "demo");
    st_model_free(m);
    return test_report("test_spec_batch");
}
