/* test_engine_chunks.c: the prompt chain and the session state, on tiny f32 models of every
 * architecture (test_model_fixture.h).
 *
 *  - any split of a prompt into chunks (--prefill 1, 3, 7, 16, whole; 1 or 2 threads) gives the
 *    logits of one chunk within f32 rounding (GDN's chunked form vs its per-token step), and decode (chunks of
 *    one row after a prompt) gives the same as the prompt's rows;
 *  - the last-row-only path (the last layer's FFN and the head on one row) equals the last row of
 *    the every-row path;
 *  - growing the workspace between chunks leaves the KV caches, the conv and delta-rule states
 *    and the weights byte-for-byte untouched, and the run continues to the same logits;
 *  - reset gives a fresh sequence (the same logits again); an out-of-range token is refused
 *    without touching the session; a full context is refused; the f16 KV cache is close to f32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/session_internal.h"
#include "model/model.h"
#include "strata.h"
#include "test.h"
#include "test_model_fixture.h"

enum { N = 40 };
static int32_t tokens[N];
static char dir[256];

static st_model *load(const char *arch) {
    st_model_params mp = {.progress = 0, .prefault = 0};
    return fx_load(dir, &(fx_opts){.arch = arch}, "chunks", &mp);
}

static int n_threads = 1;

static st_session *session(st_model *m, int prefill, int kv_f32) {
    st_session_params sp = st_session_default_params();
    sp.n_threads = n_threads;
    sp.n_prefill = prefill;
    sp.kv_f32 = kv_f32;
    sp.n_ctx = 64;
    st_session *s = NULL;
    if (st_session_new(m, &sp, &s) != ST_OK) fprintf(stderr, "session: %s\n", st_last_error());
    return s;
}

static float *run_all(st_model *m, int prefill, int kv_f32) {
    st_session *s = session(m, prefill, kv_f32);
    float *out = malloc(sizeof(float) * N * FX_V);
    if (!s || st_session_feed(s, tokens, N, out) != ST_OK) {
        free(out);
        out = NULL;
    }
    st_session_free(s);
    return out;
}

static double rel_diff(const float *a, const float *b, int64_t n) {
    double mx = 0, d = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(a[i]) > mx) mx = fabs(a[i]);
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
    }
    return d / mx;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* A checksum of the session's state (KV caches, conv and delta states, n_past) and of the weights. */
static uint64_t state_sum(st_model *m, st_session *s) {
    const st_hparams *hp = &m->hp;
    st_state *st = st_session_state(s);
    uint64_t h = fnv(1469598103934665603ull, &st->n_past, sizeof st->n_past);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        st_layer_state *L = &st->layers[il];
        if (L->k_cache) {
            size_t bytes = (size_t)st->n_ctx * (size_t)(hp->n_head_kv[il] * hp->head_dim) * (st->kv_type == ST_TYPE_F32 ? 4 : 2);
            h = fnv(h, L->k_cache, bytes);
            h = fnv(h, L->v_cache, bytes);
        }
        if (L->conv) h = fnv(h, L->conv, (size_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1)) * sizeof(float));
        if (L->ssm) h = fnv(h, L->ssm, (size_t)(hp->ssm_n_v * hp->ssm_state * hp->ssm_state) * sizeof(float));
    }
    return h;
}

static uint64_t weight_sum(st_model *m) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < st_gguf_n_tensors(m->gguf); i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(m->gguf, i);
        h = fnv(h, t->data, t->size);
    }
    return h;
}

static void test_arch(const char *arch) {
    st_model *m = load(arch);
    CHECKF(m != NULL, "%s: load", arch);
    if (!m) return;
    float *one = run_all(m, 512, 1);
    CHECKF(one != NULL, "%s: one chunk: %s", arch, st_last_error());
    if (!one) {
        st_model_free(m);
        return;
    }

    /* Any split gives the same logits. */
    const int splits[] = {1, 3, 7, 16};
    for (int i = 0; i < 4; i++) {
        n_threads = 1 + i % 2; /* the threaded paths too (static and dynamic expert tiles) */
        float *l = run_all(m, splits[i], 1);
        n_threads = 1;
        CHECKF(l != NULL, "%s: prefill %d", arch, splits[i]);
        if (l) {
            double r = rel_diff(one, l, (int64_t)N * FX_V);
            CHECKF(r <= 1e-5, "%s: prefill %d differs from one chunk by %.3g", arch, splits[i], r);
        }
        free(l);
    }

    /* Prompt of 30, then decode one row at a time; also the last-row-only path. */
    st_session *s = session(m, 512, 1);
    CHECK(st_session_feed(s, tokens, 30, NULL) == ST_OK);
    CHECKF(rel_diff(one + 29 * FX_V, st_session_logits(s), FX_V) <= 1e-5, "%s: last-row logits of the prompt", arch);
    for (int t = 30; t < N; t++) {
        CHECK(st_session_feed(s, tokens + t, 1, NULL) == ST_OK);
        double r = rel_diff(one + (int64_t)t * FX_V, st_session_logits(s), FX_V);
        CHECKF(r <= 1e-5, "%s: decode at position %d differs by %.3g", arch, t, r);
    }

    /* Reset: a fresh sequence again. */
    st_session_reset(s);
    CHECK(st_session_n_past(s) == 0);
    CHECK(st_session_feed(s, tokens, 30, NULL) == ST_OK);
    CHECKF(rel_diff(one + 29 * FX_V, st_session_logits(s), FX_V) <= 1e-5, "%s: after reset", arch);

    /* Refusals leave the session as it was. */
    int32_t bad[2] = {1, FX_V};
    int64_t past = st_session_n_past(s);
    uint64_t before = state_sum(m, s);
    CHECK(st_session_feed(s, bad, 2, NULL) == ST_ERR_RANGE);
    CHECK(st_session_n_past(s) == past && state_sum(m, s) == before);
    CHECK(st_session_feed(s, tokens, 64 - 30 + 1, NULL) == ST_ERR_RANGE);
    CHECK(st_session_n_past(s) == past && state_sum(m, s) == before);
    st_session_free(s);

    /* st_session_embed: the last position's final hidden state is what the LM head reads (its
     * logits are W_out . h); it starts a fresh sequence whatever the session held before. */
    s = session(m, 512, 1);
    CHECK(st_session_feed(s, tokens + 31, 9, NULL) == ST_OK);
    float hid[FX_D], again[FX_D];
    CHECK(st_session_n_embd(s) == FX_D);
    CHECK(st_session_embed(s, tokens, 30, hid) == ST_OK && st_session_n_past(s) == 30);
    const st_tensor *W = m->output.data ? &m->output : &m->tok_embd;
    CHECKF(W->type == ST_TYPE_F32 && W->scale == 1.0f, "%s: the fixture's head is plain f32", arch);
    if (W->type == ST_TYPE_F32 && W->scale == 1.0f) {
        float head[FX_V];
        for (int v = 0; v < FX_V; v++) {
            double acc = 0;
            for (int k = 0; k < FX_D; k++) acc += (double)((const float *)W->data)[(size_t)v * FX_D + (size_t)k] * hid[k];
            head[v] = (float)acc;
        }
        CHECKF(rel_diff(one + 29 * FX_V, head, FX_V) <= 1e-5, "%s: W_out . embed differs from the logits", arch);
    }
    CHECK(st_session_embed(s, tokens, 30, again) == ST_OK && !memcmp(hid, again, sizeof hid));
    st_session_free(s);

    /* Growth between chunks leaves state and weights untouched, and the run continues unchanged. */
    s = session(m, 4, 1);
    CHECK(st_session_feed(s, tokens, 8, NULL) == ST_OK);
    uint64_t st0 = state_sum(m, s), w0 = weight_sum(m);
    st_workspace *ws = st_session_workspace(s);
    int64_t growths = ws->n_growths;
    CHECK(st_session_reserve_rows(s, 64) == ST_OK);
    CHECK(st_session_reserve_rows(s, 128) == ST_OK);
    CHECK(ws->n_growths == growths + 2 && ws->rows == 128);
    CHECKF(state_sum(m, s) == st0, "%s: workspace growth changed the KV cache or the recurrent state", arch);
    CHECKF(weight_sum(m) == w0, "%s: workspace growth changed the weights", arch);
    float *rest = malloc(sizeof(float) * N * FX_V);
    CHECK(st_session_feed(s, tokens + 8, N - 8, rest) == ST_OK);
    double r = rel_diff(one + 8 * FX_V, rest, (int64_t)(N - 8) * FX_V);
    CHECKF(r <= 1e-5, "%s: logits after growth differ by %.3g", arch, r);
    free(rest);
    st_session_free(s);

    /* The f16 cache rounds K and V: close to f32, not identical. */
    float *h = run_all(m, 512, 0);
    double rh = h ? rel_diff(one, h, (int64_t)N * FX_V) : 1;
    CHECKF(rh > 0 && rh < 1e-2, "%s: f16 KV cache differs from f32 by %.3g", arch, rh);
    free(h);
    free(one);
    st_model_free(m);
}

int main(void) {
    for (int i = 0; i < N; i++) tokens[i] = (int32_t)(fx_hash("tokens", (uint64_t)i) % FX_V);
    if (!fx_tmpdir(dir, sizeof dir, "engine")) SKIP("cannot create a temporary directory");
    const char *archs[] = {"qwen35moe", "qwen35", "qwen3next", "qwen3moe", "qwen3"};
    for (int i = 0; i < 5; i++) test_arch(archs[i]);
    rmdir(dir);
    return test_report("test_engine_chunks");
}
