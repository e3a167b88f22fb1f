/* bench_verify.c: what one step of speculative decoding costs, in units of a one-row decode, on a
 * model with an MTP head: the verify chunk of n rows (every row's logits and hidden state, every
 * row's recurrent state kept, then the return to row 0: engine/spec.c's chunk), the head's draft
 * step (one row with logits) and its catch-up row (K/V only).
 *
 *   build/bench_verify MODEL.gguf [STEPS] [ROUNDS] [THREADS] [MAX_ROWS] [ONLY]   (default 48 5 2 8)
 *
 * ONLY (a row count) times that chunk alone, for a profiler.
 *
 * The rows are real text: the model's greedy continuation of a chat prompt, so the experts a chunk
 * reaches are those a draft that matches the text reaches. Each round times STEPS of each kind in
 * turn from the same position; the median of the rounds is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "engine/session_spec.h"
#include "engine/session_state.h"
#include "model/model.h"
#include "strata.h"
#include "../matvec/sample.h"

enum { MAX_ROWS = 16, MAX_ROUNDS = 64, TEXT = 256 };

static int argmax(const float *l, int64_t V) {
    int b = 0;
    for (int64_t i = 1; i < V; i++)
        if (l[i] > l[b]) b = (int)i;
    return b;
}

#define TRY(x)                                                                                                          \
    do {                                                                                                                \
        if ((x) != ST_OK) return fprintf(stderr, "bench_verify: %s: %s\n", #x, st_last_error()), 1;                    \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_verify MODEL.gguf [STEPS] [ROUNDS] [THREADS] [MAX_ROWS]\n");
        return 2;
    }
    int steps = argc > 2 ? atoi(argv[2]) : 48, rounds = argc > 3 ? atoi(argv[3]) : 5;
    int threads = argc > 4 ? atoi(argv[4]) : 2, max_rows = argc > 5 ? atoi(argv[5]) : 8;
    int only = argc > 6 ? atoi(argv[6]) : 0;
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    if (max_rows > MAX_ROWS) max_rows = MAX_ROWS;
    st_model_params mp = st_model_default_params();
    st_model *m = NULL;
    TRY(st_model_load(argv[1], &mp, &m));
    const char *prompt = "<|im_start|>user\nWhat does ocean mean?<|im_end|>\n<|im_start|>assistant\n";
    int32_t *pids = NULL;
    size_t n_prompt = 0;
    TRY(st_model_tokenize(m, prompt, strlen(prompt), 1, 1, &pids, &n_prompt));
    int64_t V = st_model_n_vocab(m);
    st_session_params sp = st_session_default_params();
    sp.n_threads = threads;
    sp.n_ctx = (int64_t)n_prompt + TEXT + 2 * MAX_ROWS + 8;
    st_session *s = NULL;
    TRY(st_session_new(m, &sp, &s));
    TRY(st_session_reserve_steps(s, MAX_ROWS));
    int d = st_session_n_embd(s), has_head = st_session_model(s)->n_mtp > 0;
    float *logits = malloc(sizeof(float) * (size_t)(MAX_ROWS * V)), *h = NULL, *hl = malloc(sizeof(float) * (size_t)V);
    int32_t text[TEXT + MAX_ROWS];
    /* the text: the greedy continuation, past an end of generation too */
    TRY(st_session_feed(s, pids, (int64_t)n_prompt, NULL));
    for (int i = 0; i < TEXT + MAX_ROWS; i++) {
        text[i] = argmax(st_session_logits(s), V);
        if (i + 1 < TEXT + MAX_ROWS) TRY(st_session_feed(s, &text[i], 1, NULL));
    }
    char info[256];
    h = calloc((size_t)(MAX_ROWS + 1) * (size_t)d, sizeof(float));
    snprintf(info, sizeof info, "%zu prompt tokens, %d steps x %d rounds, %d threads", n_prompt, steps, rounds, threads);
    printf("bench_verify %s: %s\n", argv[1], info);

    double t_dec[MAX_ROUNDS], t_rows[MAX_ROWS + 1][MAX_ROUNDS], t_draft[MAX_ROUNDS], t_catch[MAX_ROUNDS];
    const int64_t start = (int64_t)n_prompt;
    for (int r = 0; r < rounds; r++) {
        /* plain decode */
        st_session_reset(s);
        TRY(st_session_feed(s, pids, (int64_t)n_prompt, NULL));
        double t0 = st_now();
        for (int i = 0; i < steps; i++) TRY(st_session_feed(s, &text[i], 1, NULL));
        t_dec[r] = (st_now() - t0) / steps;
        /* the verify chunk of n rows, keeping row 0 (the position moves by one, as decode's) */
        for (int n = 1; n <= max_rows; n++) {
            t_rows[n][r] = 0;
            if (only && n != only) continue;
            st_session_reset(s);
            TRY(st_session_feed(s, pids, (int64_t)n_prompt, NULL));
            t0 = st_now();
            for (int i = 0; i < steps; i++) {
                int64_t pos0 = start + i;
                TRY(st_session_feed_rows(s, &text[i], n, logits, h + d, n > 1));
                if (n > 1) st_session_keep_row(s, pos0, 0);
            }
            t_rows[n][r] = (st_now() - t0) / steps;
        }
        /* the head: a draft row (logits and h') and a catch-up row (K/V), at the trunk's position */
        t_draft[r] = t_catch[r] = 0;
        if (has_head && !only) {
            st_session_reset(s);
            TRY(st_session_feed(s, pids, (int64_t)n_prompt, NULL));
            st_session_mtp_cut(s, 0);
            float *hout = malloc(sizeof(float) * (size_t)d);
            t0 = st_now();
            for (int i = 0; i < steps; i++) {
                st_mtp_chunk c = {.tokens = &text[i], .h_in = h, .n = 1, .kv_only = 1};
                TRY(st_session_mtp(s, &c));
            }
            t_catch[r] = (st_now() - t0) / steps;
            t0 = st_now();
            for (int i = 0; i < steps; i++) {
                st_mtp_chunk c = {.tokens = &text[i], .h_in = h, .n = 1, .logits = hl, .h_out = hout};
                TRY(st_session_mtp(s, &c));
                st_session_mtp_cut(s, st_session_mtp_n_past(s) - 1);
            }
            t_draft[r] = (st_now() - t0) / steps;
            free(hout);
        }
    }
    double dec = bench_median(t_dec, rounds, 0);
    printf("| rows | ms | x decode |\n|---|---|---|\n| decode | %.3f | 1.00 |\n", 1e3 * dec);
    for (int n = 1; n <= max_rows; n++) {
        double t = bench_median(t_rows[n], rounds, 0);
        printf("| %d | %.3f | %.2f |\n", n, 1e3 * t, t / dec);
    }
    double dr = bench_median(t_draft, rounds, 0), ca = bench_median(t_catch, rounds, 0);
    if (dr > 0) printf("| head draft | %.3f | %.2f |\n| head catch-up | %.3f | %.2f |\n", 1e3 * dr, dr / dec, 1e3 * ca, ca / dec);
    free(logits);
    free(h);
    free(hl);
    st_session_free(s);
    free(pids);
    st_model_free(m);
    return 0;
}
