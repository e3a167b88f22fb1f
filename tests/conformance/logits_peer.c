/* logits_peer.c: the reference side of the conformance tests. Loads a GGUF with the peer's
 * libllama (llama.cpp, node-llama-cpp@3.22.1's prebuilt CPU library, opened with dlopen), evaluates
 * the given token ids in batches of --prefill N tokens, and writes the f32 logits of every
 * position, row-major [n_tokens][n_vocab], little-endian: the same file `strata eval --logits`
 * writes.
 *
 * Settings follow MODELS.md §2.6 so the comparison measures the model, not cache rounding: the
 * CPU only, K and V caches in F32, flash attention off. Batches of N tokens with n_batch =
 * n_ubatch = N make llama.cpp itself run the prompt in chunks, so its chunked path is tested too.
 *
 * Types come from llama.h (compiled with -I on the peer's source); functions are looked up with
 * dlsym, so this builds without the library and runs against any libllama of that release.
 *
 * --dump DIR writes every contiguous f32 tensor the graph names (attn_norm-0, l_out-3, ...) as
 * DIR/NAME.bin when it is computed, each batch's appended to the earlier ones' (so a per-token
 * tensor of --prefill 1 holds every position, as one batch's does; a name two tensors of the
 * graph share, such as Kcur-3, keeps the second of the first batch and both of later ones), to
 * find the first op where two engines part.
 *
 * --ngl N offloads N layers to the GPU of a CUDA build of libllama (default 0: the CPU), for the
 * GPU conformance runs (bench/cuda/).
 *
 * usage: logits_peer --lib LIBLLAMA -m MODEL --tokens ID,ID,... [--prefill N] --logits OUT
 *                    [-t THREADS] [--ngl N] [--dump DIR] [-v] */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define API(name) static __typeof__(name) *p_##name
API(llama_backend_init);
API(llama_model_default_params);
API(llama_context_default_params);
API(llama_model_load_from_file);
API(llama_init_from_model);
API(llama_model_get_vocab);
API(llama_vocab_n_tokens);
API(llama_batch_init);
API(llama_batch_free);
API(llama_decode);
API(llama_get_logits_ith);
API(llama_free);
API(llama_model_free);
API(llama_log_set);
static void (*p_ggml_backend_load_all_from_path)(const char *dir);
static size_t (*p_ggml_backend_dev_count)(void);

static int verbose;

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    if (verbose || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int load_api(const char *lib) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "logits_peer: cannot open %s: %s\n", lib, dlerror());
        return 0;
    }
#define LOAD(name) if (!(p_##name = (__typeof__(p_##name))dlsym(h, #name))) { \
        fprintf(stderr, "logits_peer: %s lacks %s\n", lib, #name); return 0; }
    LOAD(llama_backend_init) LOAD(llama_model_default_params) LOAD(llama_context_default_params)
    LOAD(llama_model_load_from_file) LOAD(llama_init_from_model) LOAD(llama_model_get_vocab)
    LOAD(llama_vocab_n_tokens) LOAD(llama_batch_init) LOAD(llama_batch_free) LOAD(llama_decode)
    LOAD(llama_get_logits_ith) LOAD(llama_free) LOAD(llama_model_free) LOAD(llama_log_set)
#undef LOAD
    /* A build with dynamically loaded backends (the npm one) has no CPU backend until it is
     * loaded from the library's own folder; a plain build has it linked in. */
    p_ggml_backend_dev_count = (size_t (*)(void))dlsym(RTLD_DEFAULT, "ggml_backend_dev_count");
    p_ggml_backend_load_all_from_path = (void (*)(const char *))dlsym(RTLD_DEFAULT, "ggml_backend_load_all_from_path");
    p_llama_log_set(quiet_log, NULL);
    if (p_ggml_backend_dev_count && p_ggml_backend_dev_count() == 0 && p_ggml_backend_load_all_from_path) {
        char *copy = strdup(lib);
        p_ggml_backend_load_all_from_path(dirname(copy));
        free(copy);
    }
    p_llama_backend_init();
    return 1;
}

static int parse_tokens(const char *s, llama_token **out) {
    int n = 0, cap = 64;
    llama_token *t = malloc((size_t)cap * sizeof *t);
    while (t && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0) { free(t); return -1; }
        if (n == cap) t = realloc(t, (size_t)(cap *= 2) * sizeof *t);
        if (!t) return -1;
        t[n++] = (llama_token)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') { free(t); return -1; }
    }
    *out = t;
    return n;
}

static const char *dump_dir;
static int dump_append;    /* after the first batch: add to the files instead of starting them */

/* ggml's scheduler callback: asked first whether we want a tensor, then given it computed */
static bool dump_tensor(struct ggml_tensor *t, bool ask, void *user) {
    (void)user;
    int contiguous = t->type == GGML_TYPE_F32 && t->nb[0] == 4 && t->nb[1] == 4 * (size_t)t->ne[0] &&
                     t->nb[2] == t->nb[1] * (size_t)t->ne[1] && t->nb[3] == t->nb[2] * (size_t)t->ne[2];
    if (ask) return contiguous && t->name[0];
    if (!contiguous || !t->data) return true;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dump_dir, t->name);
    for (char *c = path + strlen(dump_dir) + 1; *c; c++) if (*c == '/' || *c == ' ') *c = '_';
    FILE *f = fopen(path, dump_append ? "ab" : "wb");
    if (f) {
        fwrite(t->data, 4, (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]), f);
        fclose(f);
    }
    return true;
}

int main(int argc, char **argv) {
    const char *lib = NULL, *model_path = NULL, *tokens_arg = NULL, *out_path = NULL;
    int prefill = 0, n_threads = 2, repack = 1, ngl = 0;
    for (int i = 1; i < argc; i++) {
        int more = i + 1 < argc;
        if (!strcmp(argv[i], "--lib") && more) lib = argv[++i];
        else if (!strcmp(argv[i], "-m") && more) model_path = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && more) tokens_arg = argv[++i];
        else if (!strcmp(argv[i], "--prefill") && more) prefill = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--logits") && more) out_path = argv[++i];
        else if (!strcmp(argv[i], "-t") && more) n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-v")) verbose = 1;
        else if (!strcmp(argv[i], "--ngl") && more) ngl = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-repack")) repack = 0;
        else if (!strcmp(argv[i], "--dump") && more) dump_dir = argv[++i];
        else {
            fprintf(stderr, "usage: logits_peer --lib LIBLLAMA -m MODEL --tokens ID,ID,... [--prefill N] --logits OUT [-t THREADS] [--ngl N] [--dump DIR] [-v]\n");
            return 2;
        }
    }
    if (!lib || !model_path || !tokens_arg || !out_path) {
        fprintf(stderr, "logits_peer: --lib, -m, --tokens and --logits are required\n");
        return 2;
    }
    llama_token *tokens = NULL;
    int n_tok = parse_tokens(tokens_arg, &tokens);
    if (n_tok <= 0) {
        fprintf(stderr, "logits_peer: --tokens must be a comma-separated list of ids\n");
        return 2;
    }
    if (prefill <= 0 || prefill > n_tok) prefill = n_tok;
    if (!load_api(lib)) return 1;

    struct llama_model_params mp = p_llama_model_default_params();
    mp.n_gpu_layers = ngl;
    mp.use_extra_bufts = repack;
    struct llama_model *model = p_llama_model_load_from_file(model_path, mp);
    if (!model) {
        fprintf(stderr, "logits_peer: llama.cpp could not load %s\n", model_path);
        return 1;
    }
    int n_vocab = p_llama_vocab_n_tokens(p_llama_model_get_vocab(model));
    for (int i = 0; i < n_tok; i++)
        if (tokens[i] >= n_vocab) {
            fprintf(stderr, "logits_peer: token %d is past the vocabulary of %d\n", tokens[i], n_vocab);
            return 2;
        }

    struct llama_context_params cp = p_llama_context_default_params();
    cp.n_ctx = (uint32_t)((n_tok + 255) / 256 * 256);
    cp.n_batch = cp.n_ubatch = (uint32_t)prefill;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    if (dump_dir) {
        cp.cb_eval = dump_tensor;
        cp.cb_eval_user_data = NULL;
    }
    struct llama_context *ctx = p_llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "logits_peer: llama.cpp could not create a context for %s\n", model_path);
        return 1;
    }

    FILE *out = fopen(out_path, "wb");
    if (!out) {
        fprintf(stderr, "logits_peer: cannot write %s\n", out_path);
        return 1;
    }
    struct llama_batch batch = p_llama_batch_init(prefill, 0, 1);
    int status = 0;
    for (int start = 0; start < n_tok && !status; start += prefill) {
        int n = n_tok - start < prefill ? n_tok - start : prefill;
        batch.n_tokens = n;
        for (int i = 0; i < n; i++) {
            batch.token[i] = tokens[start + i];
            batch.pos[i] = start + i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        int rc = p_llama_decode(ctx, batch);
        dump_append = 1;
        if (rc != 0) {
            fprintf(stderr, "logits_peer: llama_decode failed (%d) at position %d\n", rc, start);
            status = 1;
            break;
        }
        for (int i = 0; i < n; i++) {
            const float *row = p_llama_get_logits_ith(ctx, i);
            if (!row || fwrite(row, sizeof(float), (size_t)n_vocab, out) != (size_t)n_vocab) {
                fprintf(stderr, "logits_peer: no logits for position %d (or a write failed)\n", start + i);
                status = 1;
                break;
            }
        }
    }
    if (fclose(out) != 0) status = 1;
    p_llama_batch_free(batch);
    p_llama_free(ctx);
    p_llama_model_free(model);
    free(tokens);
    if (!status) fprintf(stderr, "logits_peer: %d tokens x %d logits in chunks of %d -> %s\n", n_tok, n_vocab, prefill, out_path);
    return status;
}
