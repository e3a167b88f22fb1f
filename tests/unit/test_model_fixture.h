/* test_model_fixture.h: writes tiny f32 models of the five architectures with the GGUF writer, in
 * any of the optional tensor forms of MODELS.md §4, for the model and engine tests.
 *
 * Every logical weight's values come from a hash of its name and index, so two files that store
 * the same weights in different forms (fused gate_up vs separate, attn_qkv vs ssm_in, tied head,
 * W/s with a .scale s) compute the same function, and a test can demand equal logits. */
#ifndef TEST_MODEL_FIXTURE_H
#define TEST_MODEL_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "strata.h"

typedef struct fx_opts {
    const char *arch;       /* qwen35moe, qwen35, qwen3next, qwen3moe, qwen3 */
    int fused_gate_up;      /* ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps */
    int fused_attn_qkv;     /* attn_qkv on full-attention layers instead of attn_q/k/v */
    int legacy_ssm_in;      /* qwen3next: ssm_in instead of attn_qkv + attn_gate */
    int tied;               /* no output.weight */
    float scale;            /* != 0: store W/scale with a .scale = scale companion on the scaled set */
    int scale_raw;          /* with scale: store W unchanged (the scale must then be ignored) */
    const char *scale_only; /* with scale: only tensors whose name contains this get a scale */
    int biases;             /* 1: q/k/v biases of zero; 2: non-zero biases */
    const char *drop;       /* leave out this tensor */
    const char *bad_shape;  /* give this tensor one extra element in ne0 */
    const char *drop_key;   /* leave out this key (suffix after "{arch}.") */
    const char *f16;        /* store tensors whose name contains this as f16 */
    const char *typed;      /* store tensors whose name contains this as `type`, all bytes zero */
    uint32_t type;
    int yarn;               /* rope.scaling: yarn, factor 4, original context 64, attn_factor 0.9 */
    int mtp;                /* hybrids: an MTP block (blk.FX_LAYERS, nextn_predict_layers = 1); 2: also
                               its own shared_head_norm */
} fx_opts;

/* Sizes (small but with every ratio that matters: GQA 2, r = n_v/n_k = 2, partial rotary). */
enum { FX_D = 64, FX_LAYERS = 4, FX_H = 4, FX_HKV = 2, FX_HD = 16, FX_E = 8, FX_K = 2, FX_FFE = 32,
       FX_SH = 32, FX_FF = 64, FX_NK = 2, FX_NV = 4, FX_DK = 16, FX_CONV = 4, FX_V = 96 };

static uint64_t fx_hash(const char *s, uint64_t i) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    h ^= i * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return h;
}

/* Uniform in [-1, 1) from the name and index. */
static float fx_u(const char *name, uint64_t i) { return (float)((double)(fx_hash(name, i) >> 11) / 4503599627370496.0 - 1.0); }

typedef struct fx_tensor {
    char name[96];
    int n_dims;
    int64_t ne[3];
    float *data;
} fx_tensor;

typedef struct fx_model {
    fx_tensor t[512];
    int n;
} fx_model;

static int fx_is(const char *arch, const char *a) { return !strcmp(arch, a); }
static int fx_hybrid(const char *a) { return fx_is(a, "qwen35") || fx_is(a, "qwen35moe") || fx_is(a, "qwen3next"); }
static int fx_moe(const char *a) { return !fx_is(a, "qwen3") && !fx_is(a, "qwen35"); }
static int fx_linear(const char *a, int il) { return fx_hybrid(a) && il < FX_LAYERS && (il + 1) % 4 != 0; }

/* The value of logical weight `name` at flat index i, with its kind's magnitude. */
static float fx_value(const char *name, int64_t i, int64_t fan_in) {
    if (strstr(name, "norm")) return 1.0f + 0.1f * fx_u(name, (uint64_t)i);
    if (strstr(name, "ssm_a")) return -expf(0.5f * fx_u(name, (uint64_t)i));
    if (strstr(name, "ssm_dt")) return 0.5f * fx_u(name, (uint64_t)i);
    if (strstr(name, "conv1d")) return 0.5f * fx_u(name, (uint64_t)i);
    if (strstr(name, "bias")) return 0.1f * fx_u(name, (uint64_t)i);
    return fx_u(name, (uint64_t)i) / sqrtf((float)fan_in) * 1.5f;
}

static fx_tensor *fx_add(fx_model *m, const char *name, int n_dims, int64_t e0, int64_t e1, int64_t e2) {
    fx_tensor *t = &m->t[m->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    t->ne[0] = e0;
    t->ne[1] = e1;
    t->ne[2] = e2;
    t->data = malloc((size_t)(e0 * e1 * e2) * sizeof(float));
    return t;
}

/* A logical tensor filled from its own name. */
static fx_tensor *fx_plain(fx_model *m, const char *name, int n_dims, int64_t e0, int64_t e1, int64_t e2) {
    fx_tensor *t = fx_add(m, name, n_dims, e0, e1, e2);
    for (int64_t i = 0; i < e0 * e1 * e2; i++) t->data[i] = fx_value(name, i, e0);
    return t;
}

/* Rows [r0, r0+rows) of logical tensor `logical` {e0, *} copied into rows [dst_r0, ...) of t. */
static void fx_rows(fx_tensor *t, int64_t dst_r0, const char *logical, int64_t r0, int64_t rows, int64_t e0) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < e0; i++) t->data[(dst_r0 + r) * e0 + i] = fx_value(logical, (r0 + r) * e0 + i, e0);
}

static void fx_layer(fx_model *m, const fx_opts *o, int il) {
    const char *a = o->arch;
    char n[96], l1[96], l2[96], l3[96];
#define NAME(buf, fmt) snprintf(buf, sizeof buf, "blk.%d." fmt, il)
    NAME(n, "attn_norm.weight");
    fx_plain(m, n, 1, FX_D, 1, 1);
    snprintf(n, sizeof n, "blk.%d.%s", il, fx_hybrid(a) ? "post_attention_norm.weight" : "ffn_norm.weight");
    fx_plain(m, n, 1, FX_D, 1, 1);
    if (fx_linear(a, il)) {
        int64_t kd = FX_NK * FX_DK, vd = FX_NV * FX_DK, C = 2 * kd + vd, r = FX_NV / FX_NK;
        NAME(l1, "attn_qkv.weight");
        NAME(l2, "attn_gate.weight");
        if (o->legacy_ssm_in) {
            /* per k-head g: [q_g | k_g | v of heads g*r.. | z of the same heads] */
            NAME(n, "ssm_in.weight");
            fx_tensor *t = fx_add(m, n, 2, FX_D, 2 * kd + 2 * vd, 1);
            int64_t row = 0;
            for (int64_t g = 0; g < FX_NK; g++) {
                fx_rows(t, row, l1, g * FX_DK, FX_DK, FX_D), row += FX_DK;
                fx_rows(t, row, l1, kd + g * FX_DK, FX_DK, FX_D), row += FX_DK;
                fx_rows(t, row, l1, 2 * kd + g * r * FX_DK, r * FX_DK, FX_D), row += r * FX_DK;
                fx_rows(t, row, l2, g * r * FX_DK, r * FX_DK, FX_D), row += r * FX_DK;
            }
        } else {
            fx_plain(m, l1, 2, FX_D, C, 1);
            fx_plain(m, l2, 2, FX_D, vd, 1);
        }
        NAME(n, "ssm_conv1d.weight");
        fx_plain(m, n, 2, FX_CONV, C, 1);
        NAME(n, "ssm_dt.bias");
        fx_plain(m, n, 1, FX_NV, 1, 1);
        NAME(n, "ssm_a");
        fx_plain(m, n, 1, FX_NV, 1, 1);
        if (fx_is(a, "qwen3next")) {
            NAME(n, "ssm_ba.weight");
            fx_plain(m, n, 2, FX_D, 2 * FX_NV, 1);
        } else {
            NAME(n, "ssm_beta.weight");
            fx_plain(m, n, 2, FX_D, FX_NV, 1);
            NAME(n, "ssm_alpha.weight");
            fx_plain(m, n, 2, FX_D, FX_NV, 1);
        }
        NAME(n, "ssm_norm.weight");
        fx_plain(m, n, 1, FX_DK, 1, 1);
        NAME(n, "ssm_out.weight");
        fx_plain(m, n, 2, vd, FX_D, 1);
    } else {
        int64_t nq = FX_HD * FX_H * (fx_hybrid(a) ? 2 : 1), nkv = FX_HD * FX_HKV;
        NAME(l1, "attn_q.weight");
        NAME(l2, "attn_k.weight");
        NAME(l3, "attn_v.weight");
        if (o->fused_attn_qkv) {
            NAME(n, "attn_qkv.weight");
            fx_tensor *t = fx_add(m, n, 2, FX_D, nq + 2 * nkv, 1);
            fx_rows(t, 0, l1, 0, nq, FX_D);
            fx_rows(t, nq, l2, 0, nkv, FX_D);
            fx_rows(t, nq + nkv, l3, 0, nkv, FX_D);
        } else {
            fx_plain(m, l1, 2, FX_D, nq, 1);
            fx_plain(m, l2, 2, FX_D, nkv, 1);
            fx_plain(m, l3, 2, FX_D, nkv, 1);
        }
        if (o->biases) {
            const char *bn[3] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
            int64_t w[3] = {nq, nkv, nkv};
            for (int j = 0; j < 3; j++) {
                snprintf(n, sizeof n, "blk.%d.%s", il, bn[j]);
                fx_tensor *t = fx_plain(m, n, 1, w[j], 1, 1);
                if (o->biases == 1) memset(t->data, 0, (size_t)w[j] * sizeof(float));
            }
        }
        NAME(n, "attn_output.weight");
        fx_plain(m, n, 2, FX_HD * FX_H, FX_D, 1);
        NAME(n, "attn_q_norm.weight");
        fx_plain(m, n, 1, FX_HD, 1, 1);
        NAME(n, "attn_k_norm.weight");
        fx_plain(m, n, 1, FX_HD, 1, 1);
    }
    if (fx_moe(a)) {
        NAME(n, "ffn_gate_inp.weight");
        fx_plain(m, n, 2, FX_D, FX_E, 1);
        NAME(l1, "ffn_gate_exps.weight");
        NAME(l2, "ffn_up_exps.weight");
        if (o->fused_gate_up) {
            NAME(n, "ffn_gate_up_exps.weight");
            fx_tensor *t = fx_add(m, n, 3, FX_D, 2 * FX_FFE, FX_E);
            for (int64_t e = 0; e < FX_E; e++) {
                fx_rows(t, e * 2 * FX_FFE, l1, e * FX_FFE, FX_FFE, FX_D);
                fx_rows(t, e * 2 * FX_FFE + FX_FFE, l2, e * FX_FFE, FX_FFE, FX_D);
            }
        } else {
            fx_plain(m, l1, 3, FX_D, FX_FFE, FX_E);
            fx_plain(m, l2, 3, FX_D, FX_FFE, FX_E);
        }
        NAME(n, "ffn_down_exps.weight");
        fx_plain(m, n, 3, FX_FFE, FX_D, FX_E);
        if (!fx_is(a, "qwen3moe")) {
            NAME(n, "ffn_gate_inp_shexp.weight");
            fx_plain(m, n, 1, FX_D, 1, 1);
            NAME(n, "ffn_gate_shexp.weight");
            fx_plain(m, n, 2, FX_D, FX_SH, 1);
            NAME(n, "ffn_up_shexp.weight");
            fx_plain(m, n, 2, FX_D, FX_SH, 1);
            NAME(n, "ffn_down_shexp.weight");
            fx_plain(m, n, 2, FX_SH, FX_D, 1);
        }
    } else {
        NAME(n, "ffn_gate.weight");
        fx_plain(m, n, 2, FX_D, FX_FF, 1);
        NAME(n, "ffn_up.weight");
        fx_plain(m, n, 2, FX_D, FX_FF, 1);
        NAME(n, "ffn_down.weight");
        fx_plain(m, n, 2, FX_FF, FX_D, 1);
    }
#undef NAME
}

/* Weights that may carry a .scale (MODELS.md §2.1), by name suffix. */
static int fx_scalable(const char *name) {
    static const char *s[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_qkv.weight", "attn_gate.weight",
                              "attn_output.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                              "ffn_down_shexp.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
                              "ssm_out.weight", "ssm_alpha.weight", "ssm_beta.weight", "ffn_down_exps.weight",
                              "ffn_gate_exps.weight", "ffn_up_exps.weight", "ssm_in.weight"};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        size_t ln = strlen(name), ls = strlen(s[i]);
        if (ln >= ls && !strcmp(name + ln - ls, s[i]) && (ln == ls || name[ln - ls - 1] == '.')) return 1;
    }
    return 0;
}

static void fx_set_u32(st_gguf_writer *w, const fx_opts *o, const char *suffix, uint32_t v) {
    if (o->drop_key && !strcmp(o->drop_key, suffix)) return;
    char k[128];
    snprintf(k, sizeof k, "%s.%s", o->arch, suffix);
    st_gguf_set_u32(w, k, v);
}

/* Writes the model; returns 0 on success. */
static int fx_write(const char *path, const fx_opts *o) {
    fx_model *m = calloc(1, sizeof *m);
    const char *a = o->arch;
    fx_plain(m, "token_embd.weight", 2, FX_D, FX_V, 1);
    fx_plain(m, "output_norm.weight", 1, FX_D, 1, 1);
    if (!o->tied) fx_plain(m, "output.weight", 2, FX_D, FX_V, 1);
    for (int il = 0; il < FX_LAYERS; il++) fx_layer(m, o, il);
    if (o->mtp && fx_hybrid(a)) {
        /* The MTP block: a full-attention layer of the architecture, then the nextn tensors. */
        char n[96];
        fx_layer(m, o, FX_LAYERS);
        snprintf(n, sizeof n, "blk.%d.nextn.eh_proj.weight", FX_LAYERS);
        fx_plain(m, n, 2, 2 * FX_D, FX_D, 1);
        snprintf(n, sizeof n, "blk.%d.nextn.enorm.weight", FX_LAYERS);
        fx_plain(m, n, 1, FX_D, 1, 1);
        snprintf(n, sizeof n, "blk.%d.nextn.hnorm.weight", FX_LAYERS);
        fx_plain(m, n, 1, FX_D, 1, 1);
        if (o->mtp == 2) {
            snprintf(n, sizeof n, "blk.%d.nextn.shared_head_norm.weight", FX_LAYERS);
            fx_plain(m, n, 1, FX_D, 1, 1);
        }
    }

    st_gguf_writer *w;
    if (st_gguf_writer_new(&w) != ST_OK) return 1;
    st_gguf_set_str(w, "general.architecture", a);
    /* llama.cpp's test vocabulary ("test": tok_0 ...), so the peer can load the file too. */
    st_gguf_set_str(w, "tokenizer.ggml.model", "test");
    {
        char names[FX_V][16];
        const char *list[FX_V];
        float scores[FX_V];
        for (int i = 0; i < FX_V; i++) {
            snprintf(names[i], sizeof names[i], "tok_%d", i);
            list[i] = names[i];
            scores[i] = 0;
        }
        st_gguf_set_str_array(w, "tokenizer.ggml.tokens", list, FX_V);
        st_gguf_set_array(w, "tokenizer.ggml.scores", ST_GGUF_FLOAT32, scores, FX_V);
    }
    fx_set_u32(w, o, "context_length", 256);
    fx_set_u32(w, o, "embedding_length", FX_D);
    int mtp = o->mtp && fx_hybrid(a);
    fx_set_u32(w, o, "block_count", FX_LAYERS + (mtp ? 1 : 0));
    if (mtp) fx_set_u32(w, o, "nextn_predict_layers", 1);
    fx_set_u32(w, o, "feed_forward_length", FX_FF);
    fx_set_u32(w, o, "attention.head_count", FX_H);
    fx_set_u32(w, o, "attention.head_count_kv", FX_HKV);
    fx_set_u32(w, o, "attention.key_length", FX_HD);
    fx_set_u32(w, o, "attention.value_length", FX_HD);
    fx_set_u32(w, o, "rope.dimension_count", fx_hybrid(a) ? FX_HD / 2 : FX_HD);
    char k[128];
    snprintf(k, sizeof k, "%s.rope.freq_base", a);
    st_gguf_set_f32(w, k, 10000.0f);
    if (o->yarn) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", a);
        st_gguf_set_str(w, k, "yarn");
        snprintf(k, sizeof k, "%s.rope.scaling.factor", a);
        st_gguf_set_f32(w, k, 4.0f);
        snprintf(k, sizeof k, "%s.rope.scaling.attn_factor", a);
        st_gguf_set_f32(w, k, 0.9f);
        fx_set_u32(w, o, "rope.scaling.original_context_length", 64);
    }
    if (!(o->drop_key && !strcmp(o->drop_key, "attention.layer_norm_rms_epsilon"))) {
        snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", a);
        st_gguf_set_f32(w, k, 1e-6f);
    }
    if (fx_moe(a)) {
        fx_set_u32(w, o, "expert_count", FX_E);
        fx_set_u32(w, o, "expert_used_count", FX_K);
        fx_set_u32(w, o, "expert_feed_forward_length", FX_FFE);
        if (!fx_is(a, "qwen3moe")) fx_set_u32(w, o, "expert_shared_feed_forward_length", FX_SH);
    }
    if (fx_hybrid(a)) {
        fx_set_u32(w, o, "ssm.conv_kernel", FX_CONV);
        fx_set_u32(w, o, "ssm.inner_size", FX_NV * FX_DK);
        fx_set_u32(w, o, "ssm.state_size", FX_DK);
        fx_set_u32(w, o, "ssm.time_step_rank", FX_NV);
        fx_set_u32(w, o, "ssm.group_count", FX_NK);
        fx_set_u32(w, o, "full_attention_interval", 4);
        if (!fx_is(a, "qwen3next") && !(o->drop_key && !strcmp(o->drop_key, "rope.dimension_sections"))) {
            int32_t sec[4] = {2, 2, 0, 0};
            snprintf(k, sizeof k, "%s.rope.dimension_sections", a);
            st_gguf_set_array(w, k, ST_GGUF_INT32, sec, 4);
        }
    }

    /* Declare the tensors (and .scale companions), then write them in the same order. */
    int n_out = 0, n_logical = m->n;
    fx_tensor *out[512];
    for (int i = 0; i < n_logical; i++) {
        fx_tensor *t = &m->t[i];
        if (o->drop && !strcmp(o->drop, t->name)) continue;
        out[n_out++] = t;
        if (o->scale != 0 && fx_scalable(t->name) && (!o->scale_only || strstr(t->name, o->scale_only))) {
            int experts = t->n_dims == 3;
            fx_tensor *s = fx_add(m, "", 1, experts ? t->ne[2] : 1, 1, 1);
            snprintf(s->name, sizeof s->name, "%.*s.scale", (int)(strlen(t->name) - 7), t->name);
            for (int64_t e = 0; e < s->ne[0]; e++) s->data[e] = o->scale * (experts ? 1.0f + 0.25f * (float)e : 1.0f);
            if (!o->scale_raw) {
                int64_t per = t->ne[0] * t->ne[1];
                for (int64_t e = 0; e < t->ne[2]; e++)
                    for (int64_t j = 0; j < per; j++) t->data[e * per + j] /= s->data[experts ? e : 0];
            }
            out[n_out++] = s;
        }
    }
    for (int i = 0; i < n_out; i++) {
        int64_t ne[3] = {out[i]->ne[0], out[i]->ne[1], out[i]->ne[2]};
        if (o->bad_shape && !strcmp(o->bad_shape, out[i]->name)) ne[0] += 1;
        int half = o->f16 && strstr(out[i]->name, o->f16), typed = o->typed && strstr(out[i]->name, o->typed);
        st_gguf_add_tensor(w, out[i]->name, typed ? o->type : half ? ST_TYPE_F16 : ST_TYPE_F32, out[i]->n_dims, ne);
    }
    int rc = st_gguf_writer_begin(w, path) != ST_OK;
    for (int i = 0; i < n_out && !rc; i++) {
        size_t bytes = (size_t)(out[i]->ne[0] * out[i]->ne[1] * out[i]->ne[2]) * sizeof(float);
        if (o->bad_shape && !strcmp(o->bad_shape, out[i]->name)) {
            float *grown = calloc(1, bytes + (size_t)(out[i]->ne[1] * out[i]->ne[2]) * sizeof(float));
            rc = st_gguf_writer_tensor_data(w, grown, bytes + (size_t)(out[i]->ne[1] * out[i]->ne[2]) * sizeof(float)) != ST_OK;
            free(grown);
        } else if (o->typed && strstr(out[i]->name, o->typed)) {
            size_t n = st_row_size(st_type_get(o->type), out[i]->ne[0]) * (size_t)(out[i]->ne[1] * out[i]->ne[2]);
            void *z = calloc(1, n);
            rc = st_gguf_writer_tensor_data(w, z, n) != ST_OK;
            free(z);
        } else if (o->f16 && strstr(out[i]->name, o->f16)) {
            size_t n = bytes / sizeof(float);
            uint16_t *h = malloc(n * sizeof *h);
            for (size_t e = 0; e < n; e++) h[e] = st_fp32_to_fp16(out[i]->data[e]);
            rc = st_gguf_writer_tensor_data(w, h, n * sizeof *h) != ST_OK;
            free(h);
        } else {
            rc = st_gguf_writer_tensor_data(w, out[i]->data, bytes) != ST_OK;
        }
    }
    if (!rc) rc = st_gguf_writer_finish(w) != ST_OK;
    if (rc) fprintf(stderr, "fx_write %s: %s\n", path, st_last_error());
    st_gguf_writer_free(w);
    for (int i = 0; i < m->n; i++) free(m->t[i].data);
    free(m);
    return rc;
}

/* The logits of every position of tokens[0..n) fed in chunks of `prefill` rows through a fresh
 * one-thread session with an f32 KV cache: malloc'd [n][FX_V], or NULL (the reason on stderr, or
 * in st_last_error() when the model does not load). */
static inline float *fx_eval_file(const char *path, const st_model_params *mp, const int32_t *tokens, int n, int prefill) {
    st_model *m;
    if (st_model_load(path, mp, &m) != ST_OK) return NULL;
    st_session_params sp = st_session_default_params();
    sp.n_threads = 1;
    sp.n_prefill = prefill;
    sp.kv_f32 = 1;
    st_session *s = NULL;
    float *out = malloc(sizeof(float) * (size_t)n * FX_V);
    if (!out || st_session_new(m, &sp, &s) != ST_OK || st_session_feed(s, tokens, n, out) != ST_OK) {
        fprintf(stderr, "eval %s: %s\n", path, st_last_error());
        free(out);
        out = NULL;
    }
    st_session_free(s);
    st_model_free(m);
    return out;
}

/* A fresh folder for fixture files, /dev/shm when writable (the GGUF writer fsyncs every file);
 * 0 when none could be made. */
static inline int fx_tmpdir(char *dir, size_t size, const char *tag) {
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, size, "%s/strata-test-%s-XXXXXX", tmp, tag);
    return mkdtemp(dir) != NULL;
}

/* Writes fixture o as DIR/ARCH-TAG.gguf, loads it with mp and removes the file; NULL (the reason
 * on stderr) when either fails. */
static inline st_model *fx_load(const char *dir, const fx_opts *o, const char *tag, const st_model_params *mp) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%s.gguf", dir, o->arch, tag);
    st_model *m = NULL;
    if (fx_write(path, o) == 0 && st_model_load(path, mp, &m) != ST_OK) {
        fprintf(stderr, "%s %s: %s\n", o->arch, tag, st_last_error());
        m = NULL;
    }
    remove(path);
    return m;
}

/* The index of the largest of n logits (the first of equals): a greedy token. */
static inline int32_t fx_argmax(const float *l, int n) {
    int32_t b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

/* The demo model of the tree (models/strata-demo-q8_0.gguf under STRATA_SOURCE_DIR), used in
 * place; NULL with a note on stderr when it cannot be loaded. */
static inline st_model *fx_load_demo(void) {
    const char *src = getenv("STRATA_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/strata-demo-q8_0.gguf", src ? src : ".");
    st_model_params mp = st_model_default_params();
    mp.copy_weights = 0;
    st_model *m = NULL;
    if (st_model_load(path, &mp, &m) != ST_OK) {
        fprintf(stderr, "note: %s: %s; the demo model's cases are skipped\n", path, st_last_error());
        m = NULL;
    }
    return m;
}

#endif
