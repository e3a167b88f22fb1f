/* test_model_peer.c: the optional tensor forms against llama.cpp itself.
 *
 * test_model_forms.c shows that equivalent forms agree with each other; this shows that each form
 * means what llama.cpp makes of it. Tiny f32 models from test_model_fixture.h (2 value heads per
 * key head, partial rotary with IMRoPE sections [2, 2, 0, 0] so one rotary pair takes the 4th,
 * zero, position) in every optional form: fused attn_qkv, fused ffn_gate_up_exps, qwen3next's
 * legacy ssm_in, tied head, q/k/v biases, raw .scale companions (applied, or ignored on
 * qwen3next's linear attention) and W/s with .scale s, YaRN rope scaling, f16 experts (and f16 up experts beside f32
 * gate experts, which takes the per-matmul expert path). The peer's logits come from logits_peer
 * (tests/conformance, built beside this test when llama.h is found) on the peer's libllama; ours
 * from the library: the same argmax at every position and max|diff| / max|logit| <= 1e-4 in f32
 * (2e-3 where f16 weights round activations). Skips when the peer library or logits_peer is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata.h"
#include "test.h"
#include "test_model_fixture.h"

enum { N_TOK = 30 };
static int32_t tokens[N_TOK];
static char dir[256], lib[1024];

static float *read_all(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *x = malloc(n * sizeof(float));
    size_t got = fread(x, sizeof(float), n, f);
    fclose(f);
    if (got != n) {
        free(x);
        return NULL;
    }
    return x;
}

static float *ours(const char *path) {
    st_model_params mp = {.progress = 0, .prefault = 0};
    return fx_eval_file(path, &mp, tokens, N_TOK, 512);
}

static void check_tol(const char *label, const fx_opts *o, double tol) {
    char model[512], peer[512], cmd[4096], ids[N_TOK * 8] = "";
    snprintf(model, sizeof model, "%s/m.gguf", dir);
    snprintf(peer, sizeof peer, "%s/peer.bin", dir);
    CHECKF(fx_write(model, o) == 0, "%s: write", label);
    for (int i = 0; i < N_TOK; i++) snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", tokens[i]);
    snprintf(cmd, sizeof cmd, "./logits_peer --lib '%s' -m '%s' --tokens %s --prefill %d --logits '%s' -t 1 >/dev/null 2>&1",
             lib, model, ids, N_TOK, peer);
    int rc = system(cmd);
    CHECKF(rc == 0, "%s: logits_peer failed (%d)", label, rc);
    float *p = rc == 0 ? read_all(peer, (size_t)N_TOK * FX_V) : NULL, *q = ours(model);
    CHECKF(p && q, "%s: no logits (%s)", label, q ? "peer" : st_last_error());
    if (p && q) {
        double mx = 0, d = 0;
        int argmax_same = 1;
        for (int t = 0; t < N_TOK; t++) {
            int ap = 0, aq = 0;
            for (int v = 0; v < FX_V; v++) {
                float a = p[t * FX_V + v], b = q[t * FX_V + v];
                if (fabs(a) > mx) mx = fabs(a);
                if (fabs(a - b) > d) d = fabs(a - b);
                if (a > p[t * FX_V + ap]) ap = v;
                if (b > q[t * FX_V + aq]) aq = v;
            }
            argmax_same &= ap == aq;
        }
        CHECKF(argmax_same && d / mx <= tol, "%s: max|diff|/max|logit| %.3g, argmax %s", label, d / mx,
               argmax_same ? "same" : "differs");
        fprintf(stderr, "%-40s max|diff|/max|logit| %.2e\n", label, d / mx);
    }
    free(p);
    free(q);
    remove(model);
    remove(peer);
}

static void check(const char *label, const fx_opts *o) { check_tol(label, o, 1e-4); }

int main(void) {
    const char *src = getenv("STRATA_SOURCE_DIR");
    const char *peer_dir = getenv("STRATA_PEER_DIR");
    char def_dir[700];
    snprintf(def_dir, sizeof def_dir, "%s/.peer", src ? src : ".");
    snprintf(lib, sizeof lib, "%s/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.5.0.so",
             peer_dir ? peer_dir : def_dir);
    if (getenv("STRATA_PEER_LIB")) snprintf(lib, sizeof lib, "%s", getenv("STRATA_PEER_LIB"));
    if (access(lib, R_OK) != 0) SKIP("the peer's libllama is not at %s", lib);
    if (access("./logits_peer", X_OK) != 0) SKIP("logits_peer was not built (llama.h not found at configure time)");
    for (int i = 0; i < N_TOK; i++) tokens[i] = (int32_t)(fx_hash("peer", (uint64_t)i) % FX_V);
    if (!fx_tmpdir(dir, sizeof dir, "peer")) SKIP("cannot create a temporary directory");

    const char *archs[] = {"qwen35moe", "qwen35", "qwen3next", "qwen3moe", "qwen3"};
    for (int i = 0; i < 5; i++) {
        fx_opts o = {.arch = archs[i]};
        check(archs[i], &o);
    }
    check("qwen3next legacy ssm_in", &(fx_opts){.arch = "qwen3next", .legacy_ssm_in = 1});
    check("qwen3next raw .scale (partly ignored)", &(fx_opts){.arch = "qwen3next", .scale = 3.0f, .scale_raw = 1});
    check("qwen3next fused qkv, biases, W/s", &(fx_opts){.arch = "qwen3next", .fused_attn_qkv = 1, .biases = 2, .scale = 0.5f});
    check("qwen35moe fused gate_up + attn_qkv", &(fx_opts){.arch = "qwen35moe", .fused_gate_up = 1, .fused_attn_qkv = 1});
    check("qwen35moe raw .scale", &(fx_opts){.arch = "qwen35moe", .scale = 3.0f, .scale_raw = 1});
    check("qwen35 tied head, biases", &(fx_opts){.arch = "qwen35", .tied = 1, .biases = 2});
    check("qwen3moe raw .scale", &(fx_opts){.arch = "qwen3moe", .scale = 3.0f, .scale_raw = 1});
    check("qwen3 fused attn_qkv, biases", &(fx_opts){.arch = "qwen3", .fused_attn_qkv = 1, .biases = 2});
    check("qwen3 YaRN", &(fx_opts){.arch = "qwen3", .yarn = 1});
    check("qwen35moe YaRN (IMRoPE)", &(fx_opts){.arch = "qwen35moe", .yarn = 1});
    check("qwen3next YaRN", &(fx_opts){.arch = "qwen3next", .yarn = 1});
    /* f16 weights round their activations to f16 (as ggml does): a difference of one f16 rounding
     * step (4.9e-4 relative) anywhere may carry to the logits, hence the looser bound. f16 up
     * experts beside f32 gate experts want two activation forms: the per-matmul expert path. */
    check_tol("qwen35moe f16 up experts (per-matmul path)", &(fx_opts){.arch = "qwen35moe", .f16 = "ffn_up_exps"}, 2e-3);
    check_tol("qwen3moe f16 experts, raw .scale", &(fx_opts){.arch = "qwen3moe", .f16 = "_exps", .scale = 3.0f, .scale_raw = 1}, 2e-3);
    rmdir(dir);
    return test_report("test_model_peer");
}
