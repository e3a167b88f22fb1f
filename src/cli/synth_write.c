/* synth_write.c: turns a synth plan into a GGUF file.
 *
 * Keys first (general.*, the architecture's hyperparameters as MODELS.md §3 lists them, the
 * tokenizer), then every tensor's data, streamed one tensor at a time through the GGUF writer.
 * Each tensor is filled by the thread pool, rows split across threads: row r of a tensor draws
 * from its own splitmix64 stream, seeded from (seed, tensor name, r), then is converted or
 * quantized (st_quantize_row) into the tensor's buffer. So the bytes depend only on the seed, and
 * memory stays bounded by the largest tensor in its file type plus one f32 row per thread.
 *
 * Matrices come from st_random_row (quant/random.h): normal deviates quantized with the reference
 * quantizers, or with --random-blocks (and for a type without a quantizer) blocks drawn directly.
 *
 * The reference Q4_K quantizer sets the pace: about 15 M parameters per CPU-second (measured:
 * `small` qwen35moe, 2.01 B parameters, took 132 CPU-s), so `a3b` (34.3 B, 18 GiB) takes about 38
 * CPU-minutes, 19 minutes on 2 cores; F32/F16/Q8_0 are several times faster.
 *
 * Normal deviates are Irwin-Hall sums of four 16-bit uniforms: exact integer arithmetic and one
 * float multiply, so they cost a few nanoseconds and are identical everywhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/pool.h"
#include "cli/synth.h"
#include "quant/quant.h"
#include "quant/random.h"
#include "quant/types.h"

#if defined(__has_include)
#if __has_include("text/hf_tokenizer.h")
#include "text/hf_tokenizer.h"
#define SYNTH_HAVE_HF_TOKENIZER 1
#endif
#endif

static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;    /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static float uniform01(uint64_t *state) { return (float)(st_random_next(state) >> 40) * (1.0f / 16777216.0f); }

static uint64_t row_state(uint64_t tensor_seed, int64_t row) {
    uint64_t state = tensor_seed ^ (uint64_t)row * 0xD1B54A32D192ED03ull;
    st_random_next(&state);
    return state;
}

/* The f32 values of the vector inits (norm gains, ssm_a, dt bias). */
static void draw_row(const synth_tensor *t, uint64_t *state, float *x) {
    int64_t n = t->ne[0];
    switch (t->init) {
    case SYNTH_INIT_NORMAL: case SYNTH_INIT_HEAD: break;   /* matrices: st_random_row */
    case SYNTH_INIT_NORM_GAIN:
        for (int64_t i = 0; i < n; i++) x[i] = 1.0f + t->std * st_random_normal(state);
        break;
    case SYNTH_INIT_SSM_A:
        for (int64_t i = 0; i < n; i++) x[i] = -expf(uniform01(state) * logf(16.0f));
        break;
    case SYNTH_INIT_DT_BIAS:
        for (int64_t i = 0; i < n; i++) {
            float dt = expf(logf(1e-3f) + uniform01(state) * (logf(1e-1f) - logf(1e-3f)));
            x[i] = dt + logf(-expm1f(-dt));     /* softplus^-1(dt) = log(e^dt - 1) */
        }
        break;
    }
}

typedef struct fill_job {
    const synth_tensor *t;
    int random_blocks;
    uint64_t tensor_seed;
    uint8_t *out;
    size_t row_bytes;
    int64_t n_rows;
    float **scratch;
    int failed;
} fill_job;

static void fill_rows(void *ctx, int ith, int nth) {
    fill_job *j = ctx;
    long begin, end;
    st_split((long)j->n_rows, ith, nth, &begin, &end);
    float *x = j->scratch[ith];
    int64_t n = j->t->ne[0];
    for (long r = begin; r < end; r++) {
        uint8_t *dst = j->out + (size_t)r * j->row_bytes;
        uint64_t state = row_state(j->tensor_seed, r);
        if (j->t->init == SYNTH_INIT_NORMAL || j->t->init == SYNTH_INIT_HEAD) {
            /* the head's rows each get their own scale: a heavy upper tail of logits */
            float std = j->t->init == SYNTH_INIT_HEAD ? j->t->std * expf(SYNTH_HEAD_SPREAD * st_random_normal(&state)) : j->t->std;
            if (j->t->init == SYNTH_INIT_NORMAL && j->t->spread > 0) std *= expf(j->t->spread * st_random_normal(&state));
            int blocks = j->random_blocks && j->t->init == SYNTH_INIT_NORMAL;
            if (!st_random_row(j->t->type, std, blocks, &state, dst, n, x)) j->failed = 1;
            continue;
        }
        draw_row(j->t, &state, x);
        if (!st_quantize_row(j->t->type, x, dst, n)) j->failed = 1;
    }
}

/* general.file_type: llama.cpp's LLAMA_FTYPE_MOSTLY_* for "every matrix in this type" (the
 * K-quants as their _S mixes, the plainest). 1024 (guessed) for a type llama.cpp names no file
 * type after. */
static uint32_t file_type_of(uint32_t type) {
    static const uint32_t ftype[ST_TYPE_COUNT] = {
        [ST_TYPE_F32] = 0,      [ST_TYPE_F16] = 1,      [ST_TYPE_Q4_0] = 2,     [ST_TYPE_Q4_1] = 3,
        [ST_TYPE_Q8_0] = 7,     [ST_TYPE_Q5_0] = 8,     [ST_TYPE_Q5_1] = 9,     [ST_TYPE_Q2_K] = 21,
        [ST_TYPE_Q3_K] = 11,    [ST_TYPE_Q4_K] = 14,    [ST_TYPE_Q5_K] = 16,    [ST_TYPE_Q6_K] = 18,
        [ST_TYPE_IQ2_XXS] = 19, [ST_TYPE_IQ2_XS] = 20,  [ST_TYPE_IQ3_XXS] = 23, [ST_TYPE_IQ1_S] = 24,
        [ST_TYPE_IQ4_NL] = 25,  [ST_TYPE_IQ3_S] = 26,   [ST_TYPE_IQ2_S] = 28,   [ST_TYPE_IQ4_XS] = 30,
        [ST_TYPE_IQ1_M] = 31,   [ST_TYPE_BF16] = 32,    [ST_TYPE_TQ1_0] = 36,   [ST_TYPE_TQ2_0] = 37,
        [ST_TYPE_MXFP4] = 38,   [ST_TYPE_NVFP4] = 39,   [ST_TYPE_Q1_0] = 40,    [ST_TYPE_Q2_0] = 41,
    };
    return type < ST_TYPE_COUNT && (type == ST_TYPE_F32 || ftype[type]) ? ftype[type] : 1024;
}

static st_status write_hparams(st_gguf_writer *w, const synth_hparams *hp) {
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, hp->arch), key)
    ST_TRY(st_gguf_set_u32(w, KEY("context_length"), (uint32_t)hp->n_ctx));
    ST_TRY(st_gguf_set_u32(w, KEY("embedding_length"), (uint32_t)hp->n_embd));
    ST_TRY(st_gguf_set_u32(w, KEY("block_count"), (uint32_t)hp->n_layer));
    ST_TRY(st_gguf_set_u32(w, KEY("feed_forward_length"), (uint32_t)hp->n_ff));
    ST_TRY(st_gguf_set_u32(w, KEY("attention.head_count"), (uint32_t)hp->n_head));
    ST_TRY(st_gguf_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)hp->n_head_kv));
    ST_TRY(st_gguf_set_u32(w, KEY("attention.key_length"), (uint32_t)hp->head_dim));
    ST_TRY(st_gguf_set_u32(w, KEY("attention.value_length"), (uint32_t)hp->head_dim));
    ST_TRY(st_gguf_set_u32(w, KEY("rope.dimension_count"), (uint32_t)hp->n_rot));
    ST_TRY(st_gguf_set_f32(w, KEY("rope.freq_base"), hp->rope_base));
    ST_TRY(st_gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), hp->eps));
    if (hp->rope_sections_key) ST_TRY(st_gguf_set_array(w, KEY("rope.dimension_sections"), ST_GGUF_INT32, hp->rope_sections, 4));
    if (hp->moe) {
        ST_TRY(st_gguf_set_u32(w, KEY("expert_count"), (uint32_t)hp->n_expert));
        ST_TRY(st_gguf_set_u32(w, KEY("expert_used_count"), (uint32_t)hp->n_expert_used));
        ST_TRY(st_gguf_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)hp->n_ff_exp));
        if (hp->shared_expert) ST_TRY(st_gguf_set_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)hp->n_ff_shexp));
    }
    if (hp->hybrid) {
        ST_TRY(st_gguf_set_u32(w, KEY("ssm.conv_kernel"), (uint32_t)hp->ssm_conv));
        ST_TRY(st_gguf_set_u32(w, KEY("ssm.state_size"), (uint32_t)hp->ssm_state));
        ST_TRY(st_gguf_set_u32(w, KEY("ssm.group_count"), (uint32_t)hp->ssm_group));
        ST_TRY(st_gguf_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)hp->ssm_dt_rank));
        ST_TRY(st_gguf_set_u32(w, KEY("ssm.inner_size"), (uint32_t)hp->ssm_inner));
        /* The converter writes both forms for checkpoints with layer_types; they agree. */
        uint8_t recurrent[256];
        for (int64_t il = 0; il < hp->n_layer && il < 256; il++) recurrent[il] = (uint8_t)synth_is_recurrent(hp, il);
        ST_TRY(st_gguf_set_array(w, KEY("attention.recurrent_layers"), ST_GGUF_BOOL, recurrent, (uint64_t)hp->n_layer));
        ST_TRY(st_gguf_set_u32(w, KEY("full_attention_interval"), (uint32_t)hp->full_attn_interval));
    }
    if (hp->hyper) {
        const synth_qwen4exp *q = &hp->q4;
        ST_TRY(st_gguf_set_u32(w, KEY("hyper_connection.count"), (uint32_t)q->hc));
        ST_TRY(st_gguf_set_u32(w, KEY("hyper_connection.low_rank"), (uint32_t)q->hc_rank));
        ST_TRY(st_gguf_set_u32(w, KEY("attention.indexer.head_count"), (uint32_t)q->idx_heads));
        ST_TRY(st_gguf_set_u32(w, KEY("attention.indexer.key_length"), (uint32_t)q->idx_dim));
        ST_TRY(st_gguf_set_u32(w, KEY("attention.indexer.top_k"), (uint32_t)q->qsa_budget));
        /* as the converter writes them: int32 arrays, the ratio on full-attention layers, else 0 */
        int32_t ratios[256];
        for (int64_t il = 0; il < hp->n_layer && il < 256; il++) ratios[il] = synth_is_recurrent(hp, il) ? 0 : (int32_t)q->qsa_ratio;
        ST_TRY(st_gguf_set_array(w, KEY("attention.compress_ratios"), ST_GGUF_INT32, ratios, (uint64_t)hp->n_layer));
        int32_t ple_layer = (int32_t)q->ple_layer;
        ST_TRY(st_gguf_set_array(w, KEY("ple.layers"), ST_GGUF_INT32, &ple_layer, 1));
        ST_TRY(st_gguf_set_u32(w, KEY("ple.ngram_size"), (uint32_t)q->ple_ngram));
        ST_TRY(st_gguf_set_u32(w, KEY("ple.heads_per_ngram"), (uint32_t)q->ple_heads_per_ngram));
        ST_TRY(st_gguf_set_u32(w, KEY("ple.conv_kernel"), (uint32_t)q->ple_conv));
        ST_TRY(st_gguf_set_u32(w, KEY("embedding_length_per_layer_input"), (uint32_t)q->ple_dim));
        /* the loader refuses these unless they are UINT64 (ERRATA F16) */
        uint64_t n_heads = (uint64_t)((q->ple_ngram - 1) * q->ple_heads_per_ngram);
        ST_TRY(st_gguf_set_array(w, KEY("ple.layer_multipliers"), ST_GGUF_UINT64, q->ple_mult, (uint64_t)q->ple_ngram));
        ST_TRY(st_gguf_set_array(w, KEY("ple.head_offsets"), ST_GGUF_UINT64, q->ple_offset, n_heads));
        ST_TRY(st_gguf_set_array(w, KEY("ple.head_vocab_sizes"), ST_GGUF_UINT64, q->ple_size, n_heads));
    }
#undef KEY
    return ST_OK;
}

static st_status write_data(st_gguf_writer *w, const synth_plan *p, const synth_options *o) {
    size_t max_bytes = 0;
    int64_t max_row = 0;
    uint64_t total = synth_plan_bytes(p), done = 0;
    for (int i = 0; i < p->n_tensors; i++) {
        const synth_tensor *t = &p->tensors[i];
        size_t bytes = st_row_size(st_type_get(t->type), t->ne[0]) * (size_t)(t->ne[1] * t->ne[2]);
        if (bytes > max_bytes) max_bytes = bytes;
        if (t->ne[0] > max_row) max_row = t->ne[0];
    }
    st_pool *pool = NULL;
    ST_TRY(st_pool_create(o->n_threads, &pool));
    int nth = st_pool_size(pool);
    uint8_t *buf = malloc(max_bytes);
    float **scratch = calloc((size_t)nth, sizeof *scratch);
    st_status s = ST_OK;
    if (!buf || !scratch) s = st_fail(ST_ERR_NOMEM, "synth: out of memory for a tensor of %zu bytes", max_bytes);
    for (int i = 0; s == ST_OK && i < nth; i++)
        if (!(scratch[i] = malloc((size_t)max_row * sizeof(float)))) s = st_fail(ST_ERR_NOMEM, "synth: out of memory");
    char label[160];
    snprintf(label, sizeof label, "synth %s", o->out);
    for (int i = 0; s == ST_OK && i < p->n_tensors; i++) {
        const synth_tensor *t = &p->tensors[i];
        fill_job job = {
            .t = t, .random_blocks = o->random_blocks, .tensor_seed = name_hash(t->name) ^ (o->seed * 0x9E3779B97F4A7C15ull), .out = buf,
            .row_bytes = st_row_size(st_type_get(t->type), t->ne[0]), .n_rows = t->ne[1] * t->ne[2], .scratch = scratch,
        };
        st_pool_run(pool, fill_rows, &job);
        if (job.failed) {
            s = st_fail(ST_ERR_UNSUPPORTED, "synth: no quantizer for %s (tensor '%s')", st_type_get(t->type)->name, t->name);
            break;
        }
        size_t bytes = job.row_bytes * (size_t)job.n_rows;
        s = st_gguf_writer_tensor_data(w, buf, bytes);
        done += bytes;
        if (o->progress) st_progress(label, (double)done, (double)total);
    }
    if (o->progress) st_progress_end();
    for (int i = 0; scratch && i < nth; i++) free(scratch[i]);
    free(scratch);
    free(buf);
    st_pool_destroy(pool);
    return s;
}

static st_status write_model(st_gguf_writer *w, const synth_options *o, synth_plan *p) {
    int is35 = !strcmp(o->arch, "qwen35") || !strcmp(o->arch, "qwen35moe") || !strcmp(o->arch, "qwen4exp");
    const char *pre = is35 ? "qwen35" : "qwen2";
    char name[128];
    snprintf(name, sizeof name, "strata-synth %s %s %s", o->arch, o->preset, st_type_get(o->type) ? st_type_get(o->type)->name : "?");
    ST_TRY(st_gguf_set_str(w, "general.architecture", o->arch));
    ST_TRY(st_gguf_set_str(w, "general.name", name));
    ST_TRY(st_gguf_set_u32(w, "general.alignment", 32));
    ST_TRY(st_gguf_set_u32(w, "general.file_type", file_type_of(o->type)));
    ST_TRY(st_gguf_set_u32(w, "general.quantization_version", 2));
    int64_t n_vocab = 0;
    /* qwen4exp's PLE resets on the vocabulary's EOS, which only the built-in vocabulary reports. */
    if (o->tokenizer && !strcmp(o->arch, "qwen4exp"))
        return st_fail(ST_ERR_UNSUPPORTED, "synth: qwen4exp takes the built-in vocabulary only (no --tokenizer)");
    if (o->tokenizer) {
#ifdef SYNTH_HAVE_HF_TOKENIZER
        /* tiny keeps the tokenizer's own size; small and a3b pad it to their 151,936 as Qwen3's
         * converter pads to vocab_size. */
        int64_t pad_to = strcmp(o->preset, "tiny") ? synth_preset_vocab(o->preset) : 0;
        ST_TRY(st_hf_tokenizer_to_gguf_padded(o->tokenizer, w, pre, pad_to, &n_vocab));
#else
        return st_fail(ST_ERR_UNSUPPORTED, "synth: --tokenizer needs src/text/hf_tokenizer.c, which this build lacks");
#endif
    }
    ST_TRY(synth_plan_build(o->arch, o->preset, o->type, n_vocab, p));
    if ((o->qsa_budget > 0 || o->qsa_ratio > 0) && !p->hp.hyper)
        return st_fail(ST_ERR_INVALID, "synth: --qsa-budget and --qsa-ratio are qwen4exp's, not %s's", o->arch);
    if (o->qsa_budget > 0) p->hp.q4.qsa_budget = o->qsa_budget;
    if (o->qsa_ratio > 0) p->hp.q4.qsa_ratio = o->qsa_ratio;
    /* Uneven routing (--route-skew S), as trained MoE models route: expert e's router row is drawn
     * with std * e^(S z_e), so its logit spreads wider and lands in the top k more often; with
     * S = 0.3 over 256 experts and k = 8 the top quarter of experts takes about 63% of the picks,
     * with S = 0.5 about 81% (a simulation of the draw; the memory tiers' expert cache measures it
     * on the file). */
    if (o->route_skew > 0) {
        if (!p->hp.moe) return st_fail(ST_ERR_INVALID, "synth: --route-skew needs a MoE architecture, not %s", o->arch);
        for (int i = 0; i < p->n_tensors; i++)
            if (strstr(p->tensors[i].name, ".ffn_gate_inp.weight")) p->tensors[i].spread = o->route_skew;
    }
    ST_TRY(write_hparams(w, &p->hp));
    if (!o->tokenizer) ST_TRY(synth_vocab_write(w, pre, p->hp.n_vocab, &p->hp.q4.ple_eos));
    /* qwen4exp's PLE reset token is the vocabulary's EOS, known once the vocabulary is written. */
    if (p->hp.hyper) ST_TRY(st_gguf_set_u32(w, "qwen4exp.ple.eos_token_id", (uint32_t)p->hp.q4.ple_eos));
    for (int i = 0; i < p->n_tensors; i++) {
        const synth_tensor *t = &p->tensors[i];
        ST_TRY(st_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne));
    }
    ST_TRY(st_gguf_writer_begin(w, o->out));
    ST_TRY(write_data(w, p, o));
    return st_gguf_writer_finish(w);
}

st_status synth_write(const synth_options *o, synth_plan *plan_out) {
    st_gguf_writer *w = NULL;
    ST_TRY(st_gguf_writer_new(&w));
    synth_plan plan = {0};
    st_status s = write_model(w, o, &plan);
    st_gguf_writer_free(w);
    if (s == ST_OK && plan_out) *plan_out = plan;
    else synth_plan_free(&plan);
    return s;
}
