/* test_synth.c: `strata synth` writes, for every architecture and type, a file our reader accepts,
 * with exactly the planned tensors (names, types, shapes), the keys llama.cpp needs, values drawn
 * as promised (norm gains near 1, ssm_a negative), and the same bytes for the same seed whatever
 * the thread count. qwen4exp also: its keys as llama.cpp's loader demands them (UINT64 hash
 * arrays, PLE reset on the vocabulary's EOS, a table with a row for every head's range), the
 * llama-quantize fallback types, the flash preset's shape, and the --qsa-* overrides. The synth
 * sources are compiled into this test (cmake/parts/conformance.cmake). --route-skew changes the
 * routers alone and spreads their rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/synth.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/random.h"
#include "quant/types.h"
#include "test.h"

static const uint32_t types[] = {ST_TYPE_F32, ST_TYPE_F16, ST_TYPE_Q8_0, ST_TYPE_Q4_K};

/* The reference Q4_K quantizer is ~3 s per tiny model in a Debug ASan build (20x Release): there
 * one architecture covers the memory-safety question and keeps the test within its time. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static int64_t get_int(const st_gguf *g, const char *arch, const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v = -1;
    if (st_gguf_get_int(g, key, &v) != ST_OK) return -1;
    return v;
}

static void check_values(const st_gguf *g, const char *what, int hyper) {
    /* Norm gains are 1 + N(0, 0.02), stored f32. */
    const st_gguf_tensor *t = st_gguf_find_tensor(g, hyper ? "blk.0.hc_attn_norm.weight" : "blk.0.attn_norm.weight");
    CHECKF(t && t->type == ST_TYPE_F32, "%s: attn_norm", what);
    if (t && t->type == ST_TYPE_F32) {
        const float *x = t->data;
        double mean = 0;
        for (int64_t i = 0; i < t->n_elements; i++) mean += x[i];
        mean /= (double)t->n_elements;
        CHECKF(mean > 0.99 && mean < 1.01, "%s: attn_norm mean %f", what, mean);
    }
    t = st_gguf_find_tensor(g, "blk.0.ssm_a");
    if (t) {
        const float *x = t->data;
        int negative = 1;
        for (int64_t i = 0; i < t->n_elements; i++) negative &= x[i] < 0 && x[i] >= -16.001f;
        CHECKF(negative, "%s: ssm_a must lie in [-16, 0)", what);
    }
    /* The embedding dequantizes to about N(0, 0.5). */
    t = st_gguf_find_tensor(g, "token_embd.weight");
    if (t) {
        int64_t n = t->ne[0];
        float *row = malloc((size_t)n * sizeof *row);
        double ss = 0;
        if (row && st_dequantize_row(t->type, t->data, row, n)) {
            for (int64_t i = 0; i < n; i++) ss += (double)row[i] * row[i];
            double rms = sqrt(ss / (double)n);
            /* 0.3-0.7: the 1-bit Q1_0 stores the mean |x| (0.8 std) as its only level */
            CHECKF(rms > 0.3 && rms < 0.7, "%s: token_embd row 0 rms %f, want ~0.5", what, rms);
        }
        free(row);
    }
}

static void check_file(const char *path, const synth_plan *p, const char *what) {
    st_gguf *g = NULL;
    st_status s = st_gguf_open(path, &g);
    CHECKF(s == ST_OK, "%s: our reader refuses the file: %s", what, st_last_error());
    if (s != ST_OK) return;
    const char *arch;
    size_t len;
    CHECKF(st_gguf_get_str(g, "general.architecture", &arch, &len) == ST_OK && len == strlen(p->hp.arch) &&
           !memcmp(arch, p->hp.arch, len), "%s: general.architecture", what);
    CHECKF(get_int(g, p->hp.arch, "block_count") == p->hp.n_layer, "%s: block_count", what);
    CHECKF(get_int(g, p->hp.arch, "embedding_length") == p->hp.n_embd, "%s: embedding_length", what);
    CHECKF(get_int(g, p->hp.arch, "attention.head_count_kv") == p->hp.n_head_kv, "%s: head_count_kv", what);
    if (p->hp.moe) CHECKF(get_int(g, p->hp.arch, "expert_count") == p->hp.n_expert, "%s: expert_count", what);
    if (p->hp.hybrid) CHECKF(get_int(g, p->hp.arch, "ssm.inner_size") == p->hp.ssm_inner, "%s: ssm.inner_size", what);
    const st_gguf_value *tokens = st_gguf_find(g, "tokenizer.ggml.tokens");
    CHECKF(tokens && st_gguf_array_len(tokens) == (uint64_t)p->hp.n_vocab, "%s: tokenizer.ggml.tokens", what);
    CHECKF(st_gguf_n_tensors(g) == p->n_tensors, "%s: %lld tensors, planned %d", what, (long long)st_gguf_n_tensors(g), p->n_tensors);
    int all_match = 1;
    for (int i = 0; i < p->n_tensors; i++) {
        const synth_tensor *want = &p->tensors[i];
        const st_gguf_tensor *t = st_gguf_find_tensor(g, want->name);
        int ok = t && t->type == want->type && t->n_dims == want->n_dims;
        for (int d = 0; ok && d < ST_GGUF_MAX_DIMS; d++) ok = t->ne[d] == want->ne[d];
        if (!ok) {
            fprintf(stderr, "%s: tensor %s missing or of the wrong type/shape\n", what, want->name);
            all_match = 0;
        }
    }
    CHECKF(all_match, "%s: every planned tensor is in the file as planned", what);
    check_values(g, what, p->hp.hyper);
    st_gguf_close(g);
}

static const st_gguf_tensor *tensor_of(const st_gguf *g, const char *name, uint32_t type, const char *what) {
    const st_gguf_tensor *t = st_gguf_find_tensor(g, name);
    CHECKF(t && t->type == type, "%s: %s should be %s, is %s", what, name, st_type_get(type)->name,
           t ? st_type_get(t->type)->name : "missing");
    return t;
}

/* qwen4exp's keys and types, as llama.cpp's loader wants them (MODELS.md §3.2, ERRATA F16). */
static void check_qwen4exp(const char *path, uint32_t type, int64_t budget, int64_t ratio, const char *what) {
    st_gguf *g = NULL;
    if (st_gguf_open(path, &g) != ST_OK) {
        CHECKF(0, "%s: our reader refuses the file: %s", what, st_last_error());
        return;
    }
    CHECKF(get_int(g, "qwen4exp", "hyper_connection.count") == 4, "%s: hyper_connection.count", what);
    CHECKF(get_int(g, "qwen4exp", "attention.indexer.top_k") == budget, "%s: indexer.top_k", what);
    const st_gguf_value *ratios = st_gguf_find(g, "qwen4exp.attention.compress_ratios");
    int64_t r3 = -1, r0 = -1;
    CHECKF(ratios && st_gguf_array_len(ratios) == 4 && st_gguf_array_int(ratios, 3, &r3) == ST_OK &&
           st_gguf_array_int(ratios, 0, &r0) == ST_OK && r3 == ratio && r0 == 0,
           "%s: compress_ratios must be [0, 0, 0, %lld]", what, (long long)ratio);
    /* the hash arrays are UINT64 or the loader throws; the multipliers exceed 2^32 */
    const char *arrays[] = {"qwen4exp.ple.layer_multipliers", "qwen4exp.ple.head_offsets", "qwen4exp.ple.head_vocab_sizes"};
    for (int i = 0; i < 3; i++) {
        const st_gguf_value *v = st_gguf_find(g, arrays[i]);
        CHECKF(v && st_gguf_array_type(v) == ST_GGUF_UINT64, "%s: %s must be a UINT64 array", what, arrays[i]);
    }
    const st_gguf_value *mult = st_gguf_find(g, arrays[0]);
    uint64_t m0 = 0;
    CHECKF(mult && st_gguf_array_len(mult) == 3 && st_gguf_array_uint(mult, 0, &m0) == ST_OK && m0 > (1ull << 32),
           "%s: 3 PLE multipliers, above 2^32", what);
    /* every head's range lies inside the table */
    const st_gguf_value *off = st_gguf_find(g, arrays[1]), *size = st_gguf_find(g, arrays[2]);
    const st_gguf_tensor *table = st_gguf_find_tensor(g, "per_layer_token_embd.weight");
    uint64_t end = 0;
    for (uint64_t h = 0; off && size && h < st_gguf_array_len(off); h++) {
        uint64_t o = 0, n = 0;
        st_gguf_array_uint(off, h, &o);
        st_gguf_array_uint(size, h, &n);
        if (o + n > end) end = o + n;
    }
    CHECKF(table && end > 0 && (uint64_t)table->ne[1] >= end && table->ne[0] == get_int(g, "qwen4exp", "embedding_length_per_layer_input"),
           "%s: per_layer_token_embd must hold every head's rows", what);
    int64_t eos = -1;
    CHECKF(st_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &eos) == ST_OK && get_int(g, "qwen4exp", "ple.eos_token_id") == eos,
           "%s: ple.eos_token_id must be the vocabulary's EOS", what);
    CHECKF(!st_gguf_find_tensor(g, "output_norm.weight") && !st_gguf_find_tensor(g, "blk.0.attn_norm.weight"),
           "%s: qwen4exp has no output_norm or attn_norm", what);
    /* types: rows of 64 (hc up, PLE table) fall back in Q4_K files; ple_conv1d's rows of 4 fit no
     * block; llama-quantize leaves the indexer projections alone */
    int quant = type != ST_TYPE_F32 && type != ST_TYPE_F16;
    tensor_of(g, "blk.3.indexer.k_proj.weight", quant ? ST_TYPE_F16 : type, what);
    tensor_of(g, "blk.1.ple_conv1d.weight", quant ? ST_TYPE_F16 : type, what);
    tensor_of(g, "blk.0.hc_attn_up.weight", type == ST_TYPE_Q4_K ? ST_TYPE_Q5_0 : type, what);
    tensor_of(g, "per_layer_token_embd.weight", type == ST_TYPE_Q4_K ? ST_TYPE_Q5_0 : type, what);
    tensor_of(g, "blk.0.hc_attn_down.weight", type, what);
    tensor_of(g, "blk.1.ple_norm_key.weight", ST_TYPE_F32, what);
    st_gguf_close(g);
}

static int write_model(const char *path, const char *arch, uint32_t type, uint64_t seed, int threads, synth_plan *plan) {
    synth_options o = {.out = path, .arch = arch, .preset = "tiny", .type = type, .seed = seed, .n_threads = threads};
    st_status s = synth_write(&o, plan);
    CHECKF(s == ST_OK, "synth %s %s: %s", arch, st_type_get(type)->name, st_last_error());
    return s == ST_OK;
}

static int same_bytes(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* The spread of the router rows' norms (largest over smallest) of every MoE layer, the largest. */
static double router_spread(const st_gguf *g) {
    double worst = 1.0;
    for (int64_t i = 0; i < st_gguf_n_tensors(g); i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
        if (!strstr(t->name, ".ffn_gate_inp.weight") || t->type != ST_TYPE_F32) continue;
        double lo = INFINITY, hi = 0;
        for (int64_t r = 0; r < t->ne[1]; r++) {
            double n2 = 0;
            for (int64_t c = 0; c < t->ne[0]; c++) {
                double v = ((const float *)t->data)[r * t->ne[0] + c];
                n2 += v * v;
            }
            lo = fmin(lo, sqrt(n2));
            hi = fmax(hi, sqrt(n2));
        }
        if (hi / lo > worst) worst = hi / lo;
    }
    return worst;
}

/* --route-skew: only the routers change, and their rows' norms spread out (the cache's benchmark
 * relies on a few experts winning most picks); without it the rows are alike. */
static void check_route_skew(const char *dir) {
    char p0[256], p1[256];
    snprintf(p0, sizeof p0, "%s/skew0.gguf", dir);
    snprintf(p1, sizeof p1, "%s/skew1.gguf", dir);
    synth_options o = {.out = p0, .arch = "qwen35moe", .preset = "tiny", .type = ST_TYPE_Q8_0, .seed = 5, .n_threads = 2};
    CHECK(synth_write(&o, NULL) == ST_OK);
    o.out = p1;
    o.route_skew = 1.0f;
    CHECK(synth_write(&o, NULL) == ST_OK);
    st_gguf *g0 = NULL, *g1 = NULL;
    CHECK(st_gguf_open(p0, &g0) == ST_OK && st_gguf_open(p1, &g1) == ST_OK);
    if (g0 && g1) {
        int routers = 0, others_same = 1, routers_differ = 1;
        for (int64_t i = 0; i < st_gguf_n_tensors(g0); i++) {
            const st_gguf_tensor *a = st_gguf_tensor_at(g0, i), *b = st_gguf_find_tensor(g1, a->name);
            if (!b || a->size != b->size) {
                others_same = 0;
                continue;
            }
            int same = !memcmp(a->data, b->data, a->size);
            if (strstr(a->name, ".ffn_gate_inp.weight")) {
                routers++;
                routers_differ &= !same;
            } else {
                others_same &= same;
            }
        }
        CHECK(routers > 0 && routers_differ && others_same);
        double s0 = router_spread(g0), s1 = router_spread(g1);
        CHECKF(s0 < 1.6 && s1 > 3.0, "router row norms spread %.2f without skew, %.2f with 1.0", s0, s1);
    }
    st_gguf_close(g0);
    st_gguf_close(g1);
    /* a dense architecture has no router to skew */
    o.arch = "qwen3";
    CHECK(synth_write(&o, NULL) != ST_OK && strstr(st_last_error(), "route-skew"));
    remove(p0);
    remove(p1);
}

int main(void) {
    char dir[] = "/tmp/strata_test_synth_XXXXXX";
    if (!mkdtemp(dir)) SKIP("cannot make a temporary folder");
    char path[256], path2[256];
    for (int a = 0; synth_archs[a]; a++)
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            if (SANITIZED && types[t] == ST_TYPE_Q4_K && strcmp(synth_archs[a], "qwen35moe")) continue;
            char what[64];
            snprintf(what, sizeof what, "%s %s", synth_archs[a], st_type_get(types[t])->name);
            snprintf(path, sizeof path, "%s/%s-%s.gguf", dir, synth_archs[a], st_type_get(types[t])->name);
            synth_plan plan;
            if (write_model(path, synth_archs[a], types[t], 1, 2, &plan)) {
                check_file(path, &plan, what);
                if (plan.hp.hyper) check_qwen4exp(path, types[t], 16, 3, what);
                synth_plan_free(&plan);
            }
            remove(path);
        }

    /* Every type synth can write (st_random_row: quantized deviates or drawn blocks), on one
     * architecture: the file reads back as planned and its embedding decodes to ~N(0, 0.5). */
    for (uint32_t t = 0; t < ST_TYPE_COUNT; t++) {
        const st_type_info *ti = st_type_get(t);
        if (!ti || !(ti->computable || st_random_has_blocks(t))) continue;
        for (int blocks = 0; blocks <= st_random_has_blocks(t); blocks++) {
            if (SANITIZED && (t == ST_TYPE_Q4_K || t == ST_TYPE_Q5_K || t == ST_TYPE_Q3_K || t == ST_TYPE_Q2_K ||
                              t == ST_TYPE_Q6_K || t == ST_TYPE_IQ4_XS))
                continue;
            char what[64];
            snprintf(what, sizeof what, "qwen35moe %s%s", ti->name, blocks ? " random blocks" : "");
            snprintf(path, sizeof path, "%s/any-%s.gguf", dir, ti->name);
            synth_options o = {.out = path, .arch = "qwen35moe", .preset = "tiny", .type = t, .seed = 3, .n_threads = 2,
                               .random_blocks = blocks};
            synth_plan plan;
            st_status s = synth_write(&o, &plan);
            CHECKF(s == ST_OK, "synth %s: %s", what, st_last_error());
            if (s == ST_OK) {
                check_file(path, &plan, what);
                synth_plan_free(&plan);
            }
            remove(path);
        }
    }

    /* Same seed, different thread counts: the same bytes. Another seed: different bytes. */
    snprintf(path, sizeof path, "%s/a.gguf", dir);
    snprintf(path2, sizeof path2, "%s/b.gguf", dir);
    synth_plan plan;
    if (write_model(path, "qwen3next", ST_TYPE_Q8_0, 7, 1, &plan)) synth_plan_free(&plan);
    if (write_model(path2, "qwen3next", ST_TYPE_Q8_0, 7, 3, &plan)) synth_plan_free(&plan);
    CHECKF(same_bytes(path, path2), "the same seed must give the same bytes with 1 and 3 threads");
    if (write_model(path2, "qwen3next", ST_TYPE_Q8_0, 8, 2, &plan)) synth_plan_free(&plan);
    CHECKF(!same_bytes(path, path2), "another seed must give other bytes");
    remove(path);
    remove(path2);

    /* qwen4exp: the QSA overrides reach the keys; flash has issue 11's shape (on paper only:
     * the file is 8 GiB). */
    synth_options q = {.out = path, .arch = "qwen4exp", .preset = "tiny", .type = ST_TYPE_F32, .seed = 1, .n_threads = 2,
                       .qsa_budget = 40, .qsa_ratio = 5};
    CHECKF(synth_write(&q, NULL) == ST_OK, "qwen4exp --qsa-budget 40 --qsa-ratio 5: %s", st_last_error());
    check_qwen4exp(path, ST_TYPE_F32, 40, 5, "qwen4exp tiny budget 40 ratio 5");
    remove(path);
    if (synth_plan_build("qwen4exp", "flash", ST_TYPE_Q4_K, 0, &plan) == ST_OK) {
        const synth_hparams *hp = &plan.hp;
        CHECK(hp->n_embd == 2560 && hp->n_layer == 4 && hp->n_vocab == 248320);
        CHECK(hp->n_expert == 512 && hp->n_expert_used == 10 && hp->n_ff_exp == 640 && hp->n_ff_shexp == 640);
        CHECK(hp->ssm_group == 16 && hp->ssm_dt_rank == 48 && hp->ssm_state == 128);
        CHECK(hp->n_head == 24 && hp->n_head_kv == 2 && hp->head_dim == 256 && hp->n_rot == 64);
        CHECK(hp->q4.hc == 4 && hp->q4.hc_rank == 320 && hp->q4.idx_heads == 4 && hp->q4.idx_dim == 128);
        CHECK(hp->q4.qsa_budget == 2048 && hp->q4.qsa_ratio == 4 && hp->q4.ple_ngram == 3 && hp->q4.ple_dim == 160);
        CHECK(synth_is_recurrent(hp, 0) && synth_is_recurrent(hp, 1) && synth_is_recurrent(hp, 2) && !synth_is_recurrent(hp, 3));
        CHECK(hp->q4.ple_layer == 1 && (hp->q4.ple_ngram - 1) * hp->q4.ple_heads_per_ngram == 16);
        for (int i = 0; i < plan.n_tensors; i++)
            if (!strcmp(plan.tensors[i].name, "per_layer_token_embd.weight")) {
                const synth_tensor *t = &plan.tensors[i];
                double gib = (double)st_row_size(st_type_get(t->type), t->ne[0]) * (double)t->ne[1] / (1 << 30);
                CHECKF(t->type == ST_TYPE_Q5_0 && gib > 0.95 && gib < 1.05, "flash: the PLE table is %.3f GiB of %s, want ~1 GiB",
                       gib, st_type_get(t->type)->name);
            }
        synth_plan_free(&plan);
    } else {
        CHECKF(0, "qwen4exp flash: %s", st_last_error());
    }
    CHECK(synth_plan_build("qwen35moe", "flash", ST_TYPE_F32, 0, &plan) != ST_OK && strstr(st_last_error(), "flash"));
    synth_options qb = {.out = path, .arch = "qwen35", .preset = "tiny", .type = ST_TYPE_F32, .seed = 1, .qsa_budget = 8};
    CHECK(synth_write(&qb, NULL) != ST_OK && strstr(st_last_error(), "qsa"));
    CHECK(synth_plan_build("qwen4exp", "small", ST_TYPE_F32, 0, &plan) != ST_OK && strstr(st_last_error(), "small"));

    check_route_skew(dir);

    /* Refusals name what is wrong. */
    synth_options bad = {.out = path, .arch = "llama", .preset = "tiny", .type = ST_TYPE_F32, .seed = 1};
    CHECK(synth_write(&bad, NULL) != ST_OK && strstr(st_last_error(), "llama"));
    bad.arch = "qwen3";
    bad.preset = "huge";
    CHECK(synth_write(&bad, NULL) != ST_OK && strstr(st_last_error(), "huge"));
    CHECK(access(path, F_OK) != 0);
    rmdir(dir);
    return test_report("test_synth");
}
