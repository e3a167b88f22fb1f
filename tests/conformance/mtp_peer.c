/* mtp_peer.c: the MTP head's draft logits against llama.cpp's (ctest conformance_mtp, label
 * conformance), on tiny f32 models with an MTP block of qwen35, qwen35moe and qwen3next
 * (tests/unit/test_model_fixture.h; qwen35moe also with its own shared_head_norm).
 *
 * The peer side is llama.cpp's MTP context as common/speculative.cpp drives it for --spec-type
 * draft-mtp (MODELS-ERRATA §2, F10): the model loaded with load_mtp; the target context fed the
 * tokens with the output-normed states of every row extracted (llama_set_embeddings_nextn, the
 * staging API of src/llama-ext.h, looked up by its C++ names); a context of type MTP on the same
 * model fed the catch-up batch, token x_p at position p with the target's h_{p-1} (0 at p = 0),
 * logits for every row. Strata's side: the same rows through st_forward_mtp one at a time (each
 * row's logits after the cache holds the rows before it). K/V in f32 on both. Every row must give
 * the same argmax and max|diff| <= 1e-4 of max|logit|.
 *
 * usage: mtp_peer --lib LIBLLAMA (the source build's, .peer/llama.cpp/build/bin/libllama.so, which
 * has the MTP context); exits 77 when it cannot be opened or lacks the staging API. */
#include <dlfcn.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llama.h"

#include "engine/session_spec.h"
#include "model/model.h"
#include "strata.h"
#include "test.h"
#include "unit/test_model_fixture.h"

#define API(name) static __typeof__(name) *p_##name
API(llama_backend_init);
API(llama_model_default_params);
API(llama_context_default_params);
API(llama_model_load_from_file);
API(llama_init_from_model);
API(llama_batch_init);
API(llama_batch_free);
API(llama_decode);
API(llama_get_logits_ith);
API(llama_free);
API(llama_model_free);
API(llama_log_set);
static void (*p_set_nextn)(struct llama_context *, bool, bool);
static float *(*p_get_nextn)(struct llama_context *);

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int load_api(const char *lib) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!h) return 0;
#define LOAD(name) if (!(p_##name = (__typeof__(p_##name))dlsym(h, #name))) return 0;
    LOAD(llama_backend_init) LOAD(llama_model_default_params) LOAD(llama_context_default_params)
    LOAD(llama_model_load_from_file) LOAD(llama_init_from_model) LOAD(llama_batch_init) LOAD(llama_batch_free)
    LOAD(llama_decode) LOAD(llama_get_logits_ith) LOAD(llama_free) LOAD(llama_model_free) LOAD(llama_log_set)
#undef LOAD
    /* llama-ext.h's C++ functions: (llama_context *, bool, bool) and (llama_context *) -> float * */
    p_set_nextn = (void (*)(struct llama_context *, bool, bool))dlsym(h, "_Z26llama_set_embeddings_nextnP13llama_contextbb");
    p_get_nextn = (float *(*)(struct llama_context *))dlsym(h, "_Z26llama_get_embeddings_nextnP13llama_context");
    if (!p_set_nextn || !p_get_nextn) return 0;
    p_llama_log_set(quiet_log, NULL);
    p_llama_backend_init();
    return 1;
}

enum { N = 24 };

/* llama.cpp: the MTP logits of every row, [N][V]. */
static int peer_logits(const char *path, const int32_t *tok, float *out) {
    struct llama_model_params mp = p_llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.load_mtp = true;
    struct llama_model *model = p_llama_model_load_from_file(path, mp);
    if (!model) return 0;
    struct llama_context_params cp = p_llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = cp.n_ubatch = N;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *tgt = p_llama_init_from_model(model, cp);
    cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    cp.n_rs_seq = 0;
    cp.ctx_other = tgt;
    struct llama_context *dft = tgt ? p_llama_init_from_model(model, cp) : NULL;
    int ok = tgt && dft;
    if (ok) {
        p_set_nextn(tgt, true, false);
        p_set_nextn(dft, true, true);
        struct llama_batch b = p_llama_batch_init(N, 0, 1);
        for (int i = 0; i < N; i++) {
            b.token[i] = tok[i];
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = i == N - 1;
        }
        b.n_tokens = N;
        ok = p_llama_decode(tgt, b) == 0;
        const float *h = ok ? p_get_nextn(tgt) : NULL;
        /* the draft batch carries both the ids and the h rows */
        struct llama_batch e = p_llama_batch_init(N, FX_D, 1);
        e.token = malloc(sizeof(llama_token) * N);
        for (int i = 0; ok && i < N; i++) {
            e.token[i] = tok[i];
            e.pos[i] = i;
            e.n_seq_id[i] = 1;
            e.seq_id[i][0] = 0;
            e.logits[i] = 1;
            for (int j = 0; j < FX_D; j++) e.embd[i * FX_D + j] = i ? h[(i - 1) * FX_D + j] : 0.0f;
        }
        e.n_tokens = N;
        ok = ok && h && p_llama_decode(dft, e) == 0;
        for (int i = 0; ok && i < N; i++) {
            const float *l = p_llama_get_logits_ith(dft, i);
            if (!l) ok = 0;
            else memcpy(out + i * FX_V, l, sizeof(float) * FX_V);
        }
        free(e.token);
        e.token = NULL;
        p_llama_batch_free(e);
        p_llama_batch_free(b);
    }
    if (dft) p_llama_free(dft);
    if (tgt) p_llama_free(tgt);
    p_llama_model_free(model);
    return ok;
}

/* Strata: the trunk's h rows, then the head one row at a time. */
static int strata_logits(const char *path, const int32_t *tok, float *out) {
    st_model_params mp = st_model_default_params();
    mp.device = ST_DEVICE_CPU;
    mp.copy_weights = 0;
    st_model *m = NULL;
    st_session *s = NULL;
    if (st_model_load(path, &mp, &m) != ST_OK) return 0;
    st_session_params sp = st_session_default_params();
    sp.n_ctx = 256;
    sp.n_threads = 1;
    sp.kv_f32 = 1;
    float *h = calloc((size_t)(N + 1) * FX_D, sizeof(float)), hout[FX_D];
    int ok = m->n_mtp && st_session_new(m, &sp, &s) == ST_OK && st_session_feed_rows(s, tok, N, NULL, h + FX_D, 0) == ST_OK;
    for (int i = 0; ok && i < N; i++) {
        st_mtp_chunk c = {.tokens = tok + i, .h_in = h + i * FX_D, .n = 1, .logits = out + i * FX_V, .h_out = hout};
        ok = st_session_mtp(s, &c) == ST_OK;
    }
    if (!ok) fprintf(stderr, "strata: %s\n", st_last_error());
    free(h);
    st_session_free(s);
    st_model_free(m);
    return ok;
}

int main(int argc, char **argv) {
    const char *lib = argc == 3 && !strcmp(argv[1], "--lib") ? argv[2] : NULL;
    if (!lib) {
        fprintf(stderr, "usage: mtp_peer --lib LIBLLAMA\n");
        return 2;
    }
    if (access(lib, R_OK) || !load_api(lib)) SKIP("%s cannot be opened or has no MTP staging API", lib);
    char dir[256];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/strata-mtp-peer-XXXXXX", tmp);
    if (!mkdtemp(dir)) SKIP("cannot create a temporary directory");
    int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 37 + 11) % FX_V);
    const char *archs[] = {"qwen35", "qwen35moe", "qwen35moe", "qwen3next"};
    float *a = malloc(sizeof(float) * N * FX_V), *b = malloc(sizeof(float) * N * FX_V);
    for (int k = 0; k < 4; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s-%d.gguf", dir, archs[k], k);
        fx_opts o = {.arch = archs[k], .mtp = k == 2 ? 2 : 1};
        if (fx_write(path, &o)) {
            CHECKF(0, "%s: the fixture could not be written", archs[k]);
            continue;
        }
        int pa = peer_logits(path, tok, a), sb = strata_logits(path, tok, b);
        CHECKF(pa, "%s: llama.cpp's MTP context gave no logits", archs[k]);
        CHECKF(sb, "%s: Strata's MTP head gave no logits", archs[k]);
        if (pa && sb) {
            float mx = 0, err = 0;
            int argmax_same = 1;
            for (int i = 0; i < N; i++) {
                int ia = 0, ib = 0;
                for (int v = 0; v < FX_V; v++) {
                    mx = fmaxf(mx, fabsf(a[i * FX_V + v]));
                    err = fmaxf(err, fabsf(a[i * FX_V + v] - b[i * FX_V + v]));
                    if (a[i * FX_V + v] > a[i * FX_V + ia]) ia = v;
                    if (b[i * FX_V + v] > b[i * FX_V + ib]) ib = v;
                }
                argmax_same &= ia == ib;
            }
            fprintf(stderr, "%s%s: max|diff| %.3g of max|logit| %.3g over %d rows\n", archs[k], k == 2 ? " (shared_head_norm)" : "",
                    (double)err, (double)mx, N);
            CHECKF(argmax_same && err <= 1e-4f * mx, "%s: the draft logits differ from llama.cpp's (%.3g of %.3g)", archs[k],
                   (double)err, (double)mx);
        }
        remove(path);
    }
    free(a);
    free(b);
    rmdir(dir);
    return test_report("mtp_peer");
}
