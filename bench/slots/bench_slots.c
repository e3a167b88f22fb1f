/* bench_slots.c: the decode step of parallel slots without the server: N sessions of one model
 * fed one token each per step through st_session_feed_batch (one forward for all N rows), against
 * the same session fed alone (st_session_feed), in turn, median of the rounds.
 *
 *   build/bench_slots MODEL.gguf [STEPS] [ROUNDS] [THREADS] [N...]     (default 32 5 all-cores 1 2 4 8)
 *
 * Prints, per N, the aggregate decode tok/s of the batched step, the single session's tok/s from
 * the same rounds, and the ratio. Each session first reads an 8-token prompt of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "strata.h"

enum { MAX_N = 64 };

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int run(st_model *m, int n, int steps, int rounds, int threads) {
    st_session *s[MAX_N];
    int32_t tok[MAX_N];
    const int32_t *tp[MAX_N];
    int64_t one[MAX_N];
    for (int k = 0; k < n; k++) {
        st_session_params p = st_session_default_params();
        p.n_ctx = 16 + 2 * (int64_t)steps * rounds; /* the first is fed alone too */
        p.n_threads = k ? 1 : threads; /* the steps run on the first session's threads */
        if (st_session_new(m, &p, &s[k]) != ST_OK) return fprintf(stderr, "session: %s\n", st_last_error()), 1;
        int32_t prompt[8];
        for (int i = 0; i < 8; i++) prompt[i] = (int32_t)((100 + 7 * k + i) % st_model_n_vocab(m));
        if (st_session_feed(s[k], prompt, 8, NULL) != ST_OK) return fprintf(stderr, "feed: %s\n", st_last_error()), 1;
        tok[k] = (int32_t)((5 + k) % st_model_n_vocab(m));
        tp[k] = &tok[k];
        one[k] = 1;
    }
    double batched[64], alone[64];
    for (int r = 0; r < rounds && r < 64; r++) {
        double t0 = st_now();
        for (int i = 0; i < steps; i++)
            if (st_session_feed_batch(s[0], s, n, tp, one) != ST_OK) return fprintf(stderr, "batch: %s\n", st_last_error()), 1;
        double t1 = st_now();
        for (int i = 0; i < steps; i++)
            if (st_session_feed(s[0], tok, 1, NULL) != ST_OK) return fprintf(stderr, "feed: %s\n", st_last_error()), 1;
        double t2 = st_now();
        batched[r] = n * steps / (t1 - t0);
        alone[r] = steps / (t2 - t1);
    }
    double b = median(batched, rounds), a = median(alone, rounds);
    printf("| %d | %.1f | %.1f | %.2f |\n", n, b, a, b / a);
    for (int k = 0; k < n; k++) st_session_free(s[k]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_slots MODEL.gguf [STEPS] [ROUNDS] [THREADS] [N...]\n");
        return 2;
    }
    int steps = argc > 2 ? atoi(argv[2]) : 32, rounds = argc > 3 ? atoi(argv[3]) : 5, threads = argc > 4 ? atoi(argv[4]) : 0;
    st_model_params mp = st_model_default_params();
    st_model *m = NULL;
    if (st_model_load(argv[1], &mp, &m) != ST_OK) return fprintf(stderr, "%s: %s\n", argv[1], st_last_error()), 1;
    printf("| sequences | batched tok/s | one session tok/s | ratio |\n|---|---|---|---|\n");
    int ns[MAX_N] = {1, 2, 4, 8}, count = 4, rc = 0;
    if (argc > 5)
        for (count = 0; count < argc - 5 && count < MAX_N; count++) ns[count] = atoi(argv[5 + count]);
    for (int i = 0; i < count; i++)
        if (ns[i] >= 1 && ns[i] <= MAX_N) rc |= run(m, ns[i], steps, rounds, threads);
    st_model_free(m);
    return rc;
}
