/* test_qwen4exp.c: qwen4exp end to end against llama.cpp, and its state per sequence.
 *
 * The model is the one llama.cpp's own test-llama-archs writes for qwen4exp (2 layers: GDN with
 * PLE, then full attention with QSA; 4 hc streams), f32, plus copies patched in place: QSA
 * budgets of 4 and 6 tokens at ratio 4 (W = 7 and 9, so most rows of a 100-token prompt select
 * partial blocks, and 6 + 3 is not a multiple of 4) and PLE multipliers above 2^32 (the hash
 * wraps in uint64); the prompt holds the PLE EOS id (0) several times. Against the peer's logits
 * (logits_peer on its libllama, F32 K/V): the same argmax and max|diff|/max|logit| <= 1e-4 whole;
 * chunks of 7 and token by token equal our whole-prompt logits to 1e-5, and so do the weights
 * copied out of the mapping (the PLE table left in it) bit for bit. Then the session state:
 * save/load mid-prompt, checkpoint + cut + a different continuation, and reuse give the logits of
 * a fresh session bit for bit; a misshapen and a missing tensor are refused naming the tensor
 * and both shapes; the cache bytes a decode step reads stop growing with the context at the QSA
 * budget. Skips without the peer build (tools/peer-build.sh). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata.h"
#include "test.h"

enum { N_TOK = 100, V = 128 };
static int32_t tokens[N_TOK];
static char dir[256], lib[1024];

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    if (b && fread(b, 1, *n, f) != *n) { free(b); b = NULL; }
    fclose(f);
    return b;
}

static int spit(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(b, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The offset just past GGUF string `s` (u64 length + bytes) in b, or 0. */
static size_t find_str(const unsigned char *b, size_t n, const char *s) {
    size_t len = strlen(s);
    for (size_t i = 0; i + 8 + len <= n; i++) {
        uint64_t l;
        memcpy(&l, b + i, 8);
        if (l == len && !memcmp(b + i + 8, s, len)) return i + 8 + len;
    }
    return 0;
}

static int copy_weights = 0;

static float *ours(const char *path, int prefill, int kv_f32) {
    st_model_params mp = {.progress = 0, .prefault = 0, .copy_weights = copy_weights, .device = ST_DEVICE_CPU};
    st_model *m;
    if (st_model_load(path, &mp, &m) != ST_OK) return NULL;
    st_session_params sp = st_session_default_params();
    sp.n_threads = 2;
    sp.kv_f32 = kv_f32;
    sp.n_prefill = prefill;
    st_session *s;
    float *out = malloc(sizeof(float) * N_TOK * V);
    if (st_session_new(m, &sp, &s) != ST_OK || st_session_feed(s, tokens, N_TOK, out) != ST_OK) {
        free(out);
        out = NULL;
    } else {
        st_session_free(s);
    }
    st_model_free(m);
    return out;
}

static float *peer(const char *model) {
    char cmd[4096], ids[N_TOK * 8] = "", out[512];
    snprintf(out, sizeof out, "%s/peer.bin", dir);
    for (int i = 0; i < N_TOK; i++) snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", tokens[i]);
    snprintf(cmd, sizeof cmd, "./logits_peer --lib '%s' -m '%s' --tokens %s --prefill %d --logits '%s' -t 1 --no-repack >/dev/null 2>&1",
             lib, model, ids, N_TOK, out);
    if (system(cmd) != 0) return NULL;
    size_t n;
    float *p = (float *)slurp(out, &n);
    if (p && n != sizeof(float) * N_TOK * V) { free(p); p = NULL; }
    remove(out);
    return p;
}

/* max|a-b| / max|b|, and whether every row's argmax agrees. */
static double rel_diff(const float *a, const float *b, int *argmax_same) {
    double mx = 0, d = 0;
    *argmax_same = 1;
    for (int t = 0; t < N_TOK; t++) {
        int ia = 0, ib = 0;
        for (int v = 0; v < V; v++) {
            mx = fmax(mx, fabs(b[t * V + v]));
            d = fmax(d, fabs(a[t * V + v] - b[t * V + v]));
            if (a[t * V + v] > a[t * V + ia]) ia = v;
            if (b[t * V + v] > b[t * V + ib]) ib = v;
        }
        *argmax_same &= ia == ib;
    }
    return d / mx;
}

static void check_model(const char *label, const char *model) {
    float *p = peer(model), *whole = ours(model, N_TOK, 1);
    CHECKF(p && whole, "%s: no logits (%s)", label, whole ? "peer" : st_last_error());
    if (p && whole) {
        int same;
        double r = rel_diff(whole, p, &same);
        CHECKF(same && r <= 1e-4, "%s whole: %.3g, argmax %s", label, r, same ? "same" : "differs");
        fprintf(stderr, "%-36s whole vs llama.cpp %.2e\n", label, r);
        for (int prefill = 7; prefill >= 1; prefill -= 6) {
            float *c = ours(model, prefill, 1);
            CHECKF(c != NULL, "%s prefill %d: %s", label, prefill, st_last_error());
            if (!c) continue;
            double rc = rel_diff(c, whole, &same), rp = rel_diff(c, p, &same);
            CHECKF(rc <= 1e-5 && rp <= 1e-4 && same, "%s prefill %d: %.3g from ours whole, %.3g from llama.cpp", label,
                   prefill, rc, rp);
            fprintf(stderr, "%-36s prefill %d vs whole %.2e, vs llama.cpp %.2e\n", label, prefill, rc, rp);
            free(c);
        }
        /* the weights copied out of the mapping, the PLE table left in it: the same logits */
        copy_weights = 1;
        float *c = ours(model, N_TOK, 1);
        copy_weights = 0;
        CHECKF(c && !memcmp(c, whole, sizeof(float) * N_TOK * V), "%s: copied weights change the logits", label);
        free(c);
    }
    free(p);
    free(whole);
}

/* The session state: save/load, checkpoint + cut, reuse, each against a fresh session. */
static void check_state(const char *model) {
    st_model_params mp = {.progress = 0, .prefault = 0, .copy_weights = 0, .device = ST_DEVICE_CPU};
    st_model *m;
    CHECK(st_model_load(model, &mp, &m) == ST_OK);
    if (!m) return;
    st_session_params sp = st_session_default_params();
    sp.n_threads = 2;
    sp.n_prefill = 16;
    st_session *a, *b;
    CHECK(st_session_new(m, &sp, &a) == ST_OK && st_session_new(m, &sp, &b) == ST_OK);
    CHECK(st_session_is_recurrent(a));
    int32_t other[30];
    for (int i = 0; i < 30; i++) other[i] = (tokens[i] * 7 + 3) % V;
    float *la = malloc(sizeof(float) * 60 * V), *lb = malloc(sizeof(float) * 60 * V);

    /* save after 50 (QSA has pooled blocks by then), load into another session, go on */
    CHECK(st_session_feed(a, tokens, 50, NULL) == ST_OK);
    void *buf;
    size_t n;
    CHECK(st_session_state_save(a, &buf, &n) == ST_OK);
    CHECK(st_session_feed(b, other, 30, NULL) == ST_OK); /* something to overwrite */
    CHECK(st_session_state_load(b, buf, n) == ST_OK && st_session_n_past(b) == 50);
    CHECK(st_session_feed(a, tokens + 50, 50, la) == ST_OK);
    CHECK(st_session_feed(b, tokens + 50, 50, lb) == ST_OK);
    CHECKF(!memcmp(la, lb, sizeof(float) * 50 * V), "save/load changed the logits after it");
    free(buf);

    /* checkpoint at 50, a different continuation, cut back, the original continuation */
    st_session_reset(a);
    st_session_reset(b);
    CHECK(st_session_feed(a, tokens, 50, NULL) == ST_OK && st_session_checkpoint(a) == ST_OK);
    CHECK(st_session_feed(a, other, 30, NULL) == ST_OK);
    int64_t kept = -1;
    CHECK(st_session_cut(a, 50, &kept) == ST_OK && kept == 50);
    CHECK(st_session_feed(a, tokens + 50, 50, la) == ST_OK);
    CHECK(st_session_feed(b, tokens, 50, NULL) == ST_OK && st_session_feed(b, tokens + 50, 50, lb) == ST_OK);
    CHECKF(!memcmp(la, lb, sizeof(float) * 50 * V), "checkpoint + cut changed the logits after it");

    /* reuse: a session holding tokens[0..50) + other with a checkpoint at 50 keeps 50 */
    int32_t *prompt = malloc(sizeof(int32_t) * N_TOK);
    memcpy(prompt, tokens, sizeof(int32_t) * N_TOK);
    st_session_reset(a);
    CHECK(st_session_feed(a, tokens, 50, NULL) == ST_OK && st_session_checkpoint(a) == ST_OK);
    CHECK(st_session_feed(a, other, 30, NULL) == ST_OK);
    CHECK(st_session_reuse(a, prompt, N_TOK, &kept) == ST_OK && kept == 50);
    CHECK(st_session_feed(a, prompt + kept, N_TOK - kept, la) == ST_OK);
    CHECKF(!memcmp(la, lb, sizeof(float) * 50 * V), "reuse changed the logits");
    free(prompt);
    free(la);
    free(lb);
    st_session_free(a);
    st_session_free(b);
    st_model_free(m);
}

/* st_model_decode_kv_bytes (strata bench's KV share): a step reads every held position's K/V
 * until the QSA budget W = 7 is reached, then W cells and one pooled key per complete block. */
static void check_decode_bytes(const char *dense, const char *qsa) {
    st_model_params mp = {.progress = 0, .prefault = 0, .copy_weights = 0, .device = ST_DEVICE_CPU};
    st_model *d, *q;
    CHECK(st_model_load(dense, &mp, &d) == ST_OK && st_model_load(qsa, &mp, &q) == ST_OK);
    if (!d || !q) return;
    const uint64_t row = st_model_decode_kv_bytes(d, 1, 1) - st_model_decode_kv_bytes(d, 1, 0);
    CHECK(row > 0 && st_model_decode_kv_bytes(d, 1, 1000) - st_model_decode_kv_bytes(d, 1, 0) == 1000 * row);
    CHECK(st_model_decode_kv_bytes(q, 1, 6) - st_model_decode_kv_bytes(q, 1, 0) == 6 * row);
    const uint64_t at6 = st_model_decode_kv_bytes(q, 1, 6);
    const uint64_t key = st_model_decode_kv_bytes(q, 1, 11) - st_model_decode_kv_bytes(q, 1, 7);
    int ok = key > 0;
    for (int64_t n = 7; n < 5000 && ok; n++) ok = st_model_decode_kv_bytes(q, 1, n) == at6 + (uint64_t)((n + 1) / 4) * key;
    CHECKF(ok, "QSA decode bytes: a block key of %llu bytes", (unsigned long long)key);
    CHECK(st_model_decode_kv_bytes(q, 0, 100) < st_model_decode_kv_bytes(q, 1, 100)); /* f16 rows */
    st_model_free(d);
    st_model_free(q);
}

/* A copy of src with len bytes of val written `skip` bytes past GGUF string `name`; 0 if absent. */
static int patched(const char *src, const char *dst, const char *name, size_t skip, const void *val, size_t len) {
    size_t n;
    unsigned char *b = slurp(src, &n);
    if (!b) return 0;
    size_t at = find_str(b, n, name);
    if (at) memcpy(b + at + skip, val, len);
    int ok = at && spit(dst, b, n) == 0;
    free(b);
    return ok;
}

static void check_refused(const char *src) {
    char bad[512];
    snprintf(bad, sizeof bad, "%s/bad.gguf", dir);
    st_model_params mp = {.progress = 0, .prefault = 0, .copy_weights = 0, .device = ST_DEVICE_CPU};
    st_model *m;
    /* indexer.k_proj {256, 128} stored as {256, 64}: tensor info is n_dims u32, then ne u64s */
    uint64_t ne1 = 64;
    CHECK(patched(src, bad, "blk.1.indexer.k_proj.weight", 4 + 8, &ne1, 8));
    CHECK(st_model_load(bad, &mp, &m) != ST_OK);
    CHECKF(strstr(st_last_error(), "blk.1.indexer.k_proj.weight") && strstr(st_last_error(), "{256, 64}") &&
           strstr(st_last_error(), "{256, 128}"), "%s", st_last_error());
    /* ple_key renamed away (ple_kZy): missing, with its shape */
    size_t n;
    unsigned char *b = slurp(src, &n);
    size_t at = b ? find_str(b, n, "blk.0.ple_key.weight") : 0;
    if (at) {
        b[at - 9] = 'Z';
        CHECK(spit(bad, b, n) == 0);
        CHECK(st_model_load(bad, &mp, &m) != ST_OK);
        CHECKF(strstr(st_last_error(), "blk.0.ple_key.weight") && strstr(st_last_error(), "{256, 1024}"), "%s", st_last_error());
    }
    free(b);
    remove(bad);
}

int main(void) {
    const char *src = getenv("STRATA_SOURCE_DIR");
    const char *peer_dir = getenv("STRATA_PEER_DIR");
    char def_dir[700], archs[1024];
    snprintf(def_dir, sizeof def_dir, "%s/.peer", src ? src : ".");
    snprintf(lib, sizeof lib, "%s/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.5.0.so",
             peer_dir ? peer_dir : def_dir);
    if (getenv("STRATA_PEER_LIB")) snprintf(lib, sizeof lib, "%s", getenv("STRATA_PEER_LIB"));
    if (getenv("STRATA_LLAMA_BUILD")) snprintf(archs, sizeof archs, "%s/bin/test-llama-archs", getenv("STRATA_LLAMA_BUILD"));
    else snprintf(archs, sizeof archs, "%s/llama.cpp/build/bin/test-llama-archs", peer_dir ? peer_dir : def_dir);
    if (access(lib, R_OK) != 0) SKIP("the peer's libllama is not at %s", lib);
    if (access("./logits_peer", X_OK) != 0) SKIP("logits_peer was not built (llama.h not found at configure time)");
    if (access(archs, X_OK) != 0) SKIP("no %s (tools/peer-build.sh builds it)", archs);
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/strata-test-q4x-XXXXXX", tmp);
    if (!mkdtemp(dir)) SKIP("cannot create a temporary directory");
    char cmd[2048], model[512], qsa4[512], qsa6[512];
    snprintf(cmd, sizeof cmd, "'%s' -a qwen4exp -s 42 -o '%s' >/dev/null 2>&1", archs, dir);
    CHECK(system(cmd) == 0);
    snprintf(model, sizeof model, "%s/qwen4exp-moe.gguf", dir);
    snprintf(qsa4, sizeof qsa4, "%s/qsa4.gguf", dir);
    snprintf(qsa6, sizeof qsa6, "%s/qsa6.gguf", dir);
    /* the key's value follows its u32 type */
    uint32_t k4 = 4, k6 = 6;
    CHECK(patched(model, qsa4, "qwen4exp.attention.indexer.top_k", 4, &k4, 4));
    CHECK(patched(model, qsa6, "qwen4exp.attention.indexer.top_k", 4, &k6, 4));
    /* multipliers above 2^32: an array is u32 type, u32 element type, u64 count, then values */
    uint64_t mult[3] = {0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull};
    char qsa6big[512];
    snprintf(qsa6big, sizeof qsa6big, "%s/qsa6big.gguf", dir);
    CHECK(patched(qsa6, qsa6big, "qwen4exp.ple.layer_multipliers", 4 + 4 + 8, mult, sizeof mult));

    for (int i = 0; i < N_TOK; i++) tokens[i] = (int32_t)((i * 2654435761u) >> 7) % V;
    tokens[10] = tokens[11] = tokens[40] = tokens[77] = 0; /* the PLE EOS id */
    check_model("qwen4exp (dense)", model);
    check_model("qwen4exp QSA top_k 4 (W 7)", qsa4);
    check_model("qwen4exp QSA top_k 6, big mults", qsa6big);
    check_state(qsa4);
    check_decode_bytes(model, qsa4);
    check_refused(model);
    remove(model);
    remove(qsa4);
    remove(qsa6);
    remove(qsa6big);
    rmdir(dir);
    return test_report("test_qwen4exp");
}
