/* gguf_seeds.c: writes small, valid GGUF files with the writer: the fuzzer's seed corpus and the
 * fixtures of the `strata info` check. Each file is well under the fuzzer's 64 KiB input limit and
 * shaped like the real thing: a qwen35moe-style header (per-layer arrays, expert and SSM keys, a
 * tokenizer) with tensors of several quantized types, a dense qwen3 one, a file of every value
 * type with nested arrays, and the degenerate cases (no tensors, no keys, a wide alignment).
 *
 * usage: gguf_seeds DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/types.h"

static int failed;
static char dir[4096];

static void ok(st_status s) {
    if (s != ST_OK && !failed) {
        fprintf(stderr, "gguf_seeds: %s\n", st_last_error());
        failed = 1;
    }
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static unsigned char rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned char)(rng >> 32);
}

typedef struct decl { const char *name; uint32_t type; int n_dims; int64_t ne[4]; } decl;

/* Declares the tensors, begins the file, streams random bytes for each, finishes. */
static void write_tensors(st_gguf_writer *w, const char *file, const decl *d, int n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    for (int i = 0; i < n; i++) ok(st_gguf_add_tensor(w, d[i].name, d[i].type, d[i].n_dims, d[i].ne));
    ok(st_gguf_writer_begin(w, path));
    for (int i = 0; i < n && !failed; i++) {
        int64_t ne = d[i].ne[0] * (d[i].n_dims > 1 ? d[i].ne[1] : 1) * (d[i].n_dims > 2 ? d[i].ne[2] : 1) * (d[i].n_dims > 3 ? d[i].ne[3] : 1);
        size_t size = st_row_size(st_type_get(d[i].type), ne);
        unsigned char *buf = malloc(size);
        for (size_t k = 0; k < size; k++) buf[k] = rnd();
        ok(st_gguf_writer_tensor_data(w, buf, size));
        free(buf);
    }
    ok(st_gguf_writer_finish(w));
    st_gguf_writer_free(w);
}

static void tokenizer(st_gguf_writer *w, int n) {
    char (*text)[12] = malloc((size_t)n * 12);
    const char **toks = malloc((size_t)n * sizeof *toks);
    int32_t *types = malloc((size_t)n * sizeof *types);
    for (int i = 0; i < n; i++) {
        if (i < 256) snprintf(text[i], 12, "%c", i < 94 ? '!' + i : 'a' + i % 26);
        else snprintf(text[i], 12, "t%d", i);
        toks[i] = text[i];
        types[i] = i >= n - 3 ? 3 : 1;
    }
    const char *merges[] = {"Ġ t", "h e", "Ġt he"};
    ok(st_gguf_set_str(w, "tokenizer.ggml.model", "gpt2"));
    ok(st_gguf_set_str(w, "tokenizer.ggml.pre", "qwen35"));
    ok(st_gguf_set_str_array(w, "tokenizer.ggml.tokens", toks, (uint64_t)n));
    ok(st_gguf_set_array(w, "tokenizer.ggml.token_type", ST_GGUF_INT32, types, (uint64_t)n));
    ok(st_gguf_set_str_array(w, "tokenizer.ggml.merges", merges, 3));
    ok(st_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)n - 2));
    ok(st_gguf_set_str(w, "tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}"));
    free(text);
    free(toks);
    free(types);
}

static void qwen35moe(void) {
    st_gguf_writer *w;
    ok(st_gguf_writer_new(&w));
    ok(st_gguf_set_str(w, "general.architecture", "qwen35moe"));
    ok(st_gguf_set_str(w, "general.name", "Tiny Qwen3.5 MoE"));
    ok(st_gguf_set_u32(w, "qwen35moe.block_count", 8));
    ok(st_gguf_set_u32(w, "qwen35moe.context_length", 262144));
    ok(st_gguf_set_u32(w, "qwen35moe.embedding_length", 256));
    ok(st_gguf_set_u32(w, "qwen35moe.attention.head_count", 4));
    /* per layer: three Gated DeltaNet layers, then one attention layer */
    uint32_t kv[] = {0, 0, 0, 2, 0, 0, 0, 2};
    ok(st_gguf_set_array(w, "qwen35moe.attention.head_count_kv", ST_GGUF_UINT32, kv, 8));
    ok(st_gguf_set_u32(w, "qwen35moe.attention.key_length", 64));
    ok(st_gguf_set_u32(w, "qwen35moe.attention.value_length", 64));
    ok(st_gguf_set_f32(w, "qwen35moe.attention.layer_norm_rms_epsilon", 1e-6f));
    ok(st_gguf_set_u32(w, "qwen35moe.rope.dimension_count", 16));
    int32_t sections[] = {11, 11, 10, 0};
    ok(st_gguf_set_array(w, "qwen35moe.rope.dimension_sections", ST_GGUF_INT32, sections, 4));
    ok(st_gguf_set_f32(w, "qwen35moe.rope.freq_base", 1e7f));
    ok(st_gguf_set_u32(w, "qwen35moe.expert_count", 4));
    ok(st_gguf_set_u32(w, "qwen35moe.expert_used_count", 2));
    ok(st_gguf_set_u32(w, "qwen35moe.expert_feed_forward_length", 256));
    ok(st_gguf_set_u32(w, "qwen35moe.expert_shared_feed_forward_length", 256));
    ok(st_gguf_set_u32(w, "qwen35moe.full_attention_interval", 4));
    ok(st_gguf_set_u32(w, "qwen35moe.ssm.conv_kernel", 4));
    ok(st_gguf_set_u32(w, "qwen35moe.ssm.state_size", 32));
    ok(st_gguf_set_u32(w, "qwen35moe.ssm.group_count", 2));
    ok(st_gguf_set_u32(w, "qwen35moe.ssm.time_step_rank", 4));
    ok(st_gguf_set_u32(w, "qwen35moe.ssm.inner_size", 128));
    ok(st_gguf_set_u32(w, "general.quantization_version", 2));
    tokenizer(w, 300);
    const decl d[] = {
        {"token_embd.weight", ST_TYPE_Q8_0, 2, {256, 8}},
        {"blk.0.attn_norm.weight", ST_TYPE_F32, 1, {256}},
        {"blk.0.ssm_conv1d.weight", ST_TYPE_F32, 2, {4, 32}},
        {"blk.0.attn_qkv.weight", ST_TYPE_Q5_K, 2, {256, 4}},
        {"blk.0.ssm_a", ST_TYPE_F32, 1, {4}},
        {"blk.0.ffn_gate_inp.weight", ST_TYPE_F16, 2, {256, 4}},
        {"blk.0.ffn_gate_exps.weight", ST_TYPE_Q4_K, 3, {256, 2, 4}},
        {"blk.0.ffn_up_exps.weight", ST_TYPE_IQ4_XS, 3, {256, 2, 4}},
        {"blk.0.ffn_down_exps.weight", ST_TYPE_Q6_K, 3, {256, 2, 4}},
        {"blk.0.ffn_up_shexp.weight", ST_TYPE_Q4_0, 2, {256, 2}},
        {"blk.0.ffn_down_shexp.weight", ST_TYPE_BF16, 2, {32, 4}},
        {"output_norm.weight", ST_TYPE_F32, 1, {256}},
        {"output.weight", ST_TYPE_Q6_K, 2, {256, 8}},
    };
    write_tensors(w, "qwen35moe.gguf", d, (int)(sizeof d / sizeof d[0]));
}

static void qwen3_dense(void) {
    st_gguf_writer *w;
    ok(st_gguf_writer_new(&w));
    ok(st_gguf_set_str(w, "general.architecture", "qwen3"));
    ok(st_gguf_set_u32(w, "qwen3.block_count", 1));
    ok(st_gguf_set_u32(w, "qwen3.embedding_length", 64));
    ok(st_gguf_set_u32(w, "qwen3.feed_forward_length", 128));
    ok(st_gguf_set_u32(w, "qwen3.attention.head_count", 2));
    ok(st_gguf_set_u32(w, "qwen3.attention.head_count_kv", 1));
    ok(st_gguf_set_f32(w, "qwen3.rope.freq_base", 1e6f));
    ok(st_gguf_set_u32(w, "general.alignment", 64));
    tokenizer(w, 40);
    const decl d[] = {
        {"token_embd.weight", ST_TYPE_F16, 2, {64, 40}},
        {"blk.0.attn_q.weight", ST_TYPE_Q8_0, 2, {64, 64}},
        {"blk.0.attn_q_norm.weight", ST_TYPE_F32, 1, {32}},
        {"blk.0.ffn_up.weight", ST_TYPE_Q5_0, 2, {64, 128}},
        {"blk.0.ffn_down.weight", ST_TYPE_IQ4_NL, 2, {128, 64}},
    };
    write_tensors(w, "qwen3.gguf", d, (int)(sizeof d / sizeof d[0]));
}

static void every_value_type(void) {
    st_gguf_writer *w;
    ok(st_gguf_writer_new(&w));
    ok(st_gguf_set_u8(w, "v.u8", 200));
    ok(st_gguf_set_i8(w, "v.i8", -100));
    ok(st_gguf_set_u16(w, "v.u16", 60000));
    ok(st_gguf_set_i16(w, "v.i16", -30000));
    ok(st_gguf_set_u32(w, "v.u32", 4000000000u));
    ok(st_gguf_set_i32(w, "v.i32", -2000000000));
    ok(st_gguf_set_u64(w, "v.u64", 1ull << 63));
    ok(st_gguf_set_i64(w, "v.i64", -(1ll << 62)));
    ok(st_gguf_set_f32(w, "v.f32", 0.5f));
    ok(st_gguf_set_f64(w, "v.f64", -0.25));
    ok(st_gguf_set_bool(w, "v.bool", 0));
    ok(st_gguf_set_str(w, "v.str", "strata"));
    double f64s[] = {1, 2, 3};
    ok(st_gguf_set_array(w, "v.f64s", ST_GGUF_FLOAT64, f64s, 3));
    uint8_t bools[] = {0, 1};
    ok(st_gguf_set_array(w, "v.bools", ST_GGUF_BOOL, bools, 2));
    const char *strs[] = {"x", "", "zz"};
    int16_t i16s[] = {-1, 1};
    st_gguf_wvalue *deepest[] = {st_gguf_wvalue_array(ST_GGUF_INT16, i16s, 2)};
    st_gguf_wvalue *mid[] = {st_gguf_wvalue_str_array(strs, 3), st_gguf_wvalue_nested(deepest, 1), st_gguf_wvalue_array(ST_GGUF_UINT64, NULL, 0)};
    ok(st_gguf_set_value(w, "v.nested", st_gguf_wvalue_nested(mid, 3)));
    const decl d[] = {
        {"i8", ST_TYPE_I8, 1, {3}},
        {"i32", ST_TYPE_I32, 4, {2, 1, 2, 1}},
        {"q2k", ST_TYPE_Q2_K, 1, {256}},
        {"q3k", ST_TYPE_Q3_K, 1, {256}},
        {"q41", ST_TYPE_Q4_1, 1, {32}},
        {"q51", ST_TYPE_Q5_1, 1, {32}},
    };
    write_tensors(w, "values.gguf", d, (int)(sizeof d / sizeof d[0]));
}

static void degenerate(void) {
    st_gguf_writer *w;
    ok(st_gguf_writer_new(&w));
    write_tensors(w, "empty.gguf", NULL, 0);
    ok(st_gguf_writer_new(&w));
    ok(st_gguf_set_str(w, "general.architecture", "qwen3next"));
    tokenizer(w, 8);
    write_tensors(w, "vocab_only.gguf", NULL, 0);
    ok(st_gguf_writer_new(&w));
    ok(st_gguf_set_u32(w, "general.alignment", 256));
    const decl d[] = {{"a", ST_TYPE_F32, 1, {3}}, {"b", ST_TYPE_F32, 2, {5, 2}}};
    write_tensors(w, "aligned256.gguf", d, 2);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gguf_seeds DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    qwen35moe();
    qwen3_dense();
    every_value_type();
    degenerate();
    return failed;
}
