/* test_model_forms.c: tensor binding and its optional forms (MODELS.md §2.1, §4), on tiny f32
 * models written by test_model_fixture.h.
 *
 *  - the same weights stored in another form give the same logits: fused ffn_gate_up_exps vs
 *    separate, fused attn_qkv vs attn_q/k/v, qwen3next's legacy ssm_in vs attn_qkv + attn_gate,
 *    a tied head vs an output.weight equal to token_embd;
 *  - .scale: W/s with a .scale s gives W's logits (every scalable weight, per-expert scales too);
 *    qwen3next ignores the scales of its linear-attention projections but applies those of its
 *    attention and experts;
 *  - zero biases change nothing, non-zero biases do;
 *  - st_model_params.copy_weights gives the same logits as the mapping;
 *  - refusals: a missing required tensor, a wrong shape and a missing required key are errors
 *    whose message names the tensor (and both shapes) or the key. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata.h"
#include "test.h"
#include "test_model_fixture.h"

static const int32_t tokens[] = {3, 17, 42, 5, 88, 1, 60, 23, 9, 71, 33, 2};
enum { N_TOK = sizeof tokens / sizeof tokens[0] };

static char dir[256];
static int copy_weights;

/* Logits of every position, or NULL (with the error in st_last_error()) if the model fails to load. */
static float *eval_file(const char *path, int prefill) {
    st_model_params mp = {.progress = 0, .prefault = 0, .copy_weights = copy_weights};
    return fx_eval_file(path, &mp, tokens, N_TOK, prefill);
}

static float *eval_opts(const fx_opts *o, const char *tag) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%s.gguf", dir, o->arch, tag);
    if (fx_write(path, o)) return NULL;
    float *l = eval_file(path, 512);
    remove(path);
    return l;
}

/* max |a-b| / max |a| over all logits. */
static double rel_diff(const float *a, const float *b) {
    double mx = 0, d = 0;
    for (int i = 0; i < N_TOK * FX_V; i++) {
        if (fabs(a[i]) > mx) mx = fabs(a[i]);
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
    }
    return d / mx;
}

static void expect_same(const char *what, const float *a, const float *b, double tol) {
    CHECKF(a && b, "%s: a model failed", what);
    if (!a || !b) return;
    double r = rel_diff(a, b);
    CHECKF(r <= tol, "%s: logits differ by %.3g (tolerance %.1g)", what, r, tol);
}

static void expect_differ(const char *what, const float *a, const float *b) {
    CHECKF(a && b, "%s: a model failed", what);
    if (!a || !b) return;
    double r = rel_diff(a, b);
    CHECKF(r > 1e-3, "%s: logits should differ, differ by %.3g", what, r);
}

static void test_forms(void) {
    const char *archs[] = {"qwen35moe", "qwen35", "qwen3next", "qwen3moe", "qwen3"};
    for (int i = 0; i < 5; i++) {
        const char *a = archs[i];
        char what[128];
        fx_opts base = {.arch = a};
        float *ref = eval_opts(&base, "base");
        CHECKF(ref != NULL, "%s: base model: %s", a, st_last_error());
        for (int j = 0; ref && j < N_TOK * FX_V; j++)
            if (!isfinite(ref[j])) {
                CHECKF(0, "%s: non-finite logit", a);
                break;
            }

        /* Weights copied out of the mapping compute exactly the same. */
        copy_weights = 1;
        float *cw = eval_opts(&base, "copy");
        copy_weights = 0;
        snprintf(what, sizeof what, "%s copy_weights", a);
        expect_same(what, ref, cw, 0);
        free(cw);

        fx_opts fq = {.arch = a, .fused_attn_qkv = 1};
        float *l = eval_opts(&fq, "fqkv");
        snprintf(what, sizeof what, "%s fused attn_qkv", a);
        expect_same(what, ref, l, 1e-6);
        free(l);

        fx_opts tied = {.arch = a, .tied = 1};
        l = eval_opts(&tied, "tied");
        /* The tied file's head is token_embd; compare with a file whose output.weight is a copy of
         * it: build that by evaluating the tied file against itself with output present is not
         * possible, so check against a direct rerun (determinism) and that it differs from base. */
        snprintf(what, sizeof what, "%s tied head", a);
        expect_differ(what, ref, l);
        free(l);

        fx_opts sc = {.arch = a, .scale = 0.5f, .fused_attn_qkv = 0};
        copy_weights = 1; /* the .scale pointers move with the copy too */
        l = eval_opts(&sc, "scaled");
        copy_weights = 0;
        snprintf(what, sizeof what, "%s W/s with .scale s", a);
        if (!strcmp(a, "qwen3next")) expect_differ(what, ref, l); /* its GDN scales are ignored */
        else expect_same(what, ref, l, 2e-5);
        free(l);

        if (strcmp(a, "qwen3") && strcmp(a, "qwen35")) {
            fx_opts fg = {.arch = a, .fused_gate_up = 1};
            l = eval_opts(&fg, "fgu");
            snprintf(what, sizeof what, "%s fused gate_up_exps", a);
            if (!strcmp(a, "qwen3moe")) CHECKF(l == NULL, "qwen3moe must not accept ffn_gate_up_exps alone");
            else expect_same(what, ref, l, 1e-6);
            free(l);
        }

        fx_opts b0 = {.arch = a, .biases = 1}, b1 = {.arch = a, .biases = 2};
        l = eval_opts(&b0, "bias0");
        snprintf(what, sizeof what, "%s zero q/k/v biases", a);
        expect_same(what, ref, l, 1e-7);
        free(l);
        l = eval_opts(&b1, "bias1");
        snprintf(what, sizeof what, "%s non-zero q/k/v biases", a);
        expect_differ(what, ref, l);
        free(l);
        free(ref);
    }
}

static void test_qwen3next(void) {
    fx_opts base = {.arch = "qwen3next"};
    float *ref = eval_opts(&base, "base");
    fx_opts legacy = {.arch = "qwen3next", .legacy_ssm_in = 1};
    float *l = eval_opts(&legacy, "ssm_in");
    expect_same("qwen3next legacy ssm_in", ref, l, 1e-6);
    free(l);

    /* Scales on the GDN projections, weights left as they are: ignored (§2.1). */
    const char *ignored[] = {"attn_qkv", "attn_gate", "ssm_out", "ssm_in"};
    for (int i = 0; i < 4; i++) {
        fx_opts o = {.arch = "qwen3next", .scale = 3.0f, .scale_raw = 1, .scale_only = ignored[i],
                     .legacy_ssm_in = !strcmp(ignored[i], "ssm_in")};
        l = eval_opts(&o, "ign");
        char what[96];
        snprintf(what, sizeof what, "qwen3next .scale on %s is ignored", ignored[i]);
        expect_same(what, ref, l, 1e-6);
        free(l);
    }
    /* ... but applied on attention and on the experts. */
    const char *applied[] = {"attn_output", "attn_q.", "ffn_down_exps", "ffn_up_shexp"};
    for (int i = 0; i < 4; i++) {
        fx_opts raw = {.arch = "qwen3next", .scale = 3.0f, .scale_raw = 1, .scale_only = applied[i]};
        fx_opts div = {.arch = "qwen3next", .scale = 3.0f, .scale_only = applied[i]};
        char what[96];
        l = eval_opts(&raw, "raw");
        snprintf(what, sizeof what, "qwen3next .scale on %s applies", applied[i]);
        expect_differ(what, ref, l);
        free(l);
        l = eval_opts(&div, "div");
        snprintf(what, sizeof what, "qwen3next W/s with .scale s on %s", applied[i]);
        expect_same(what, ref, l, 2e-5);
        free(l);
    }
    free(ref);
}

/* Tied head: a file without output.weight equals one whose output.weight is token_embd. */
static void test_tied_equals_copy(void) {
    fx_opts tied = {.arch = "qwen35moe", .tied = 1};
    char p1[512];
    snprintf(p1, sizeof p1, "%s/tied.gguf", dir);
    CHECK(fx_write(p1, &tied) == 0);
    float *a = eval_file(p1, 512);
    /* The same model with output.weight = a copy of token_embd: the fixture fills a tensor from its
     * name, so write it by hand through the GGUF reader/writer. */
    st_gguf *g;
    CHECK(st_gguf_open(p1, &g) == ST_OK);
    st_gguf_writer *w;
    st_gguf_writer_new(&w);
    for (int64_t i = 0; i < st_gguf_n_kv(g); i++) {
        const char *key = st_gguf_kv_key(g, i);
        const st_gguf_value *v = st_gguf_kv_value(g, i);
        if (st_gguf_value_type(v) == ST_GGUF_STRING) {
            const char *s;
            size_t n;
            st_gguf_value_str(v, &s, &n);
            char buf[64];
            snprintf(buf, sizeof buf, "%.*s", (int)n, s);
            st_gguf_set_str(w, key, buf);
        } else if (st_gguf_value_type(v) == ST_GGUF_FLOAT32) {
            double x;
            st_gguf_value_float(v, &x);
            st_gguf_set_f32(w, key, (float)x);
        } else if (st_gguf_value_type(v) == ST_GGUF_ARRAY) {
            st_gguf_set_array(w, key, st_gguf_array_type(v), st_gguf_array_data(v), st_gguf_array_len(v));
        } else {
            int64_t x;
            st_gguf_value_int(v, &x);
            st_gguf_set_u32(w, key, (uint32_t)x);
        }
    }
    const st_gguf_tensor *emb = st_gguf_find_tensor(g, "token_embd.weight");
    for (int64_t i = 0; i < st_gguf_n_tensors(g); i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
        st_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne);
    }
    st_gguf_add_tensor(w, "output.weight", emb->type, emb->n_dims, emb->ne);
    char p2[512];
    snprintf(p2, sizeof p2, "%s/untied.gguf", dir);
    CHECK(st_gguf_writer_begin(w, p2) == ST_OK);
    for (int64_t i = 0; i < st_gguf_n_tensors(g); i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
        st_gguf_writer_tensor_data(w, t->data, t->size);
    }
    st_gguf_writer_tensor_data(w, emb->data, emb->size);
    CHECK(st_gguf_writer_finish(w) == ST_OK);
    st_gguf_writer_free(w);
    st_gguf_close(g);
    float *b = eval_file(p2, 512);
    expect_same("tied head == output.weight copy of token_embd", a, b, 0);
    free(a);
    free(b);
    remove(p1);
    remove(p2);
}

static void expect_refusal_status(const fx_opts *o, st_status want, const char *tag, const char *n1, const char *n2,
                                  const char *n3) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, tag);
    CHECK(fx_write(path, o) == 0);
    st_model_params mp = {.progress = 0, .prefault = 0};
    st_model *m = NULL;
    st_status s = st_model_load(path, &mp, &m);
    CHECKF(s == want, "%s: status %d", tag, s);
    const char *msg = st_last_error();
    CHECKF(strstr(msg, n1) && (!n2 || strstr(msg, n2)) && (!n3 || strstr(msg, n3)), "%s: message '%s' lacks '%s' / '%s' / '%s'",
           tag, msg, n1, n2 ? n2 : "", n3 ? n3 : "");
    if (s == ST_OK) st_model_free(m);
    remove(path);
}

static void expect_refusal(const fx_opts *o, const char *tag, const char *n1, const char *n2, const char *n3) {
    expect_refusal_status(o, ST_ERR_FORMAT, tag, n1, n2, n3);
}

static void test_refusals(void) {
    fx_opts o1 = {.arch = "qwen35moe", .drop = "blk.1.ssm_a"};
    expect_refusal(&o1, "drop", "blk.1.ssm_a", "missing", NULL);
    fx_opts o2 = {.arch = "qwen35moe", .bad_shape = "blk.2.ssm_norm.weight"};
    expect_refusal(&o2, "shape", "blk.2.ssm_norm.weight", "{17}", "{16}");
    fx_opts o3 = {.arch = "qwen3moe", .bad_shape = "blk.0.ffn_down_exps.weight"};
    expect_refusal(&o3, "shape3", "blk.0.ffn_down_exps.weight", "{33, 64, 8}", "{32, 64, 8}");
    fx_opts o4 = {.arch = "qwen35", .drop_key = "ssm.conv_kernel"};
    expect_refusal(&o4, "key", "qwen35.ssm.conv_kernel", NULL, NULL);
    fx_opts o5 = {.arch = "qwen3", .drop_key = "attention.layer_norm_rms_epsilon"};
    expect_refusal(&o5, "eps", "qwen3.attention.layer_norm_rms_epsilon", NULL, NULL);
    fx_opts o6 = {.arch = "qwen35moe", .drop_key = "rope.dimension_sections"};
    expect_refusal(&o6, "sections", "qwen35moe.rope.dimension_sections", NULL, NULL);
    fx_opts o7 = {.arch = "qwen3", .drop = "blk.3.attn_k_norm.weight"};
    expect_refusal(&o7, "knorm", "blk.3.attn_k_norm.weight", NULL, NULL);
    /* a weight type without kernels: the message names the tensor and the type (q8_1 is an
     * activation form, a type no loader computes with; every other such type takes this path) */
    fx_opts o8 = {.arch = "qwen35moe", .typed = "blk.3.ffn_down_exps", .type = ST_TYPE_Q8_1};
    expect_refusal_status(&o8, ST_ERR_UNSUPPORTED, "type", "blk.3.ffn_down_exps.weight: type q8_1 is not supported", NULL, NULL);
}

/* A device budget that is not a size is refused before the file is read (the path need not exist). */
static void test_bad_gpu_mem(void) {
    const double bad[] = {-1.0, 1e9, (double)NAN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st_model_params mp = {.gpu_mem_gib = bad[i]};
        st_model *m = NULL;
        st_status s = st_model_load("/nonexistent.gguf", &mp, &m);
        CHECKF(s == ST_ERR_INVALID && m == NULL && strstr(st_last_error(), "gpu_mem_gib"), "gpu_mem_gib %g: status %d '%s'",
               bad[i], s, st_last_error());
    }
}

int main(void) {
    test_bad_gpu_mem();
    if (!fx_tmpdir(dir, sizeof dir, "model")) SKIP("cannot create a temporary directory");
    test_forms();
    test_qwen3next();
    test_tied_equals_copy();
    test_refusals();
    rmdir(dir);
    return test_report("test_model_forms");
}
