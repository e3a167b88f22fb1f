/* synth_plan.c: what `strata synth` writes, on paper: each architecture's hyperparameters at each
 * preset size, and every tensor of MODELS.md §4 with the name, shape and type the HF converter
 * (conversion/base.py, qwen.py) gives it.
 *
 * Types follow the converter: 1-D tensors, `*_norm.weight`, the routers `ffn_gate_inp(_shexp)`,
 * `ssm_conv1d` and names not ending in ".weight" (`ssm_a`, `ssm_dt.bias`) stay F32; every other
 * matrix, token_embd and output included, takes the file's type. For Q4_K this is "every matrix
 * Q4_K" (issue 3's speed model), a little plainer than llama-quantize's Q4_K_M, which would put
 * output and some ffn_down/attn_v in Q6_K. A matrix whose rows the type cannot hold takes
 * llama-quantize's fallback (fallback_type); qwen4exp's indexer projections, which llama-quantize
 * never quantizes, stay F16 in quantized files.
 *
 * Presets (all with full attention every 4th layer for the hybrids):
 *   tiny   tests: d 256, 4 layers, 4 q / 2 kv heads of 64, 4 experts top-2 of 256, GDN 2 key /
 *          4 value heads of 64, vocabulary 512. Every row length is a multiple of 256 so one
 *          shape works for F32, F16, Q8_0 and Q4_K; value heads outnumber key heads so the head
 *          mapping (tiled or grouped) matters.
 *   small  issue 3's speed shape: d 1024, 16 layers, 8 q / 2 kv heads of 128, 32 rotary dims,
 *          64 experts top-8 of 512, shared expert 512, GDN 8 key / 16 value heads of 64,
 *          vocabulary 151,936 (qwen35moe: 2.01 B parameters, 1.06 GiB in Q4_K).
 *   a3b    issue 5's shape (Qwen3.5-35B-A3B): d 2048, 40 layers, 16 q / 2 kv heads of 256,
 *          64 rotary dims, 256 experts top-8 of 512, shared expert 512, GDN 16 key / 32 value
 *          heads of 128, vocabulary 151,936 (qwen35moe: 34.3 B parameters, 18.0 GiB in Q4_K).
 *   flash  qwen4exp only, issue 11's shape: the real Qwen3.8-Flash-Next's widths in 4 layers (3 GDN,
 *          then one QSA layer; PLE on layer 1): d 2560, 24 q / 2 kv heads of 256, 64 rotary
 *          dims, 512 experts top-10 of 640, shared expert 640, GDN 16 key / 48 value heads of
 *          128, 4 hyper-connection streams of low rank 320, indexer 4 heads of 128 with budget
 *          2048 and ratio 4, PLE 3-gram with 16 heads of 160 and a table of 9.76 M rows (1 GiB
 *          in Q5_0, the type its 160-wide rows take in a Q4_K file), vocabulary 248,320.
 * The dense architectures (qwen3, qwen35) use a dense FFN of 512 / 3072 / 6144; qwen3 and qwen3moe
 * rotate the whole head, as their loaders require.
 *
 * qwen4exp (tiny and flash) follows conversion/qwen4exp.py (MODELS.md §4.7, ERRATA §4.2): no
 * attn_norm, post_attention_norm or output_norm; hyper-connection mixers (hc_attn_*, hc_ffn_*)
 * on every layer and output_hc_* before the head; the indexer on the full-attention layers; the
 * PLE layer's tensors and per_layer_token_embd. Its tiny preset is the hard case for the
 * conformance tests: a QSA budget of 16 with ratio 3 (a ratio that does not divide the budget,
 * so rows take part of a block) that a 100-token prompt overruns, hyper-connections of low rank
 * 64 (rows of 64: the Q5_0 fallback in Q4_K files, as the real model's 320), and PLE hash
 * multipliers above 2^32 (45-bit, like the real ones), 2 heads per order of 64 over 4 tables
 * of prime sizes near 1000. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/synth.h"
#include "quant/random.h"
#include "quant/types.h"

const char *const synth_archs[] = {"qwen35moe", "qwen35", "qwen3next", "qwen3moe", "qwen3", "qwen4exp", NULL};
const char *const synth_presets[] = {"tiny", "small", "a3b", "flash", NULL};

typedef struct preset_shape {
    const char *name;
    int64_t n_vocab, n_ctx, n_embd, n_layer, n_head, n_head_kv, head_dim, n_rot_partial;
    int32_t sections[4];
    int64_t n_ff, n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    int64_t ssm_conv, ssm_state, ssm_group, ssm_dt_rank;
} preset_shape;

static const preset_shape presets[] = {
    {"tiny", 512, 4096, 256, 4, 4, 2, 64, 16, {3, 3, 2, 0}, 512, 4, 2, 256, 256, 4, 64, 2, 4},
    {"small", 151936, 262144, 1024, 16, 8, 2, 128, 32, {6, 5, 5, 0}, 3072, 64, 8, 512, 512, 4, 64, 8, 16},
    {"a3b", 151936, 262144, 2048, 40, 16, 2, 256, 64, {11, 11, 10, 0}, 6144, 256, 8, 512, 512, 4, 128, 16, 32},
    {"flash", 248320, 262144, 2560, 4, 24, 2, 256, 64, {11, 11, 10, 0}, 640, 512, 10, 640, 640, 4, 128, 16, 48},
};

/* qwen4exp's own hyperparameters per preset (the hash constants and the table's size are derived
 * in set_qwen4exp). ple_row_base: the PLE tables' sizes are the primes from there up, one per head. */
typedef struct qwen4exp_shape {
    const char *name;
    synth_qwen4exp q;
    int64_t ple_row_base;
} qwen4exp_shape;

static const qwen4exp_shape qwen4exp_shapes[] = {
    {"tiny", {.hc = 4, .hc_rank = 64, .idx_heads = 2, .idx_dim = 64, .qsa_budget = 16, .qsa_ratio = 3,
              .ple_layer = 1, .ple_ngram = 3, .ple_heads_per_ngram = 2, .ple_conv = 4}, 1000},
    {"flash", {.hc = 4, .hc_rank = 320, .idx_heads = 4, .idx_dim = 128, .qsa_budget = 2048, .qsa_ratio = 4,
               .ple_layer = 1, .ple_ngram = 3, .ple_heads_per_ngram = 8, .ple_conv = 4}, 610000},
};

/* Weight scales. Matrices are N(0, 0.02) as in trained Qwen checkpoints; the router is wider
 * (std 0.1) so top-k choices are fewer near-ties a rounding could flip, and the head is sized to
 * give logits of std ~2 at any width (with a heavy upper tail, see SYNTH_INIT_HEAD). */
#define STD_MATRIX 0.02f
/* The token embedding is wider (std 0.5), so the residual stream is a large vector that each
 * sublayer updates by 10-20%, as in a trained deep model, rather than the sum of a few random
 * sublayer outputs. Quantized activations flip a level now and then when two engines differ in
 * the last bit of an f32 input; with a 0.02 embedding each flip moved the logits by ~1e-2
 * relative and llama.cpp disagreed with itself (repacked vs plain kernels) on 5% of argmaxes.
 * With 0.5, Strata vs llama.cpp on tiny Q8_0/Q4_K models: KL <= 1e-4, top-1 >= 99%. */
#define STD_EMBD   0.5f
#define STD_ROUTER 0.1f
#define STD_NORM   0.02f
#define STD_CONV   0.3f

typedef struct plan_builder {
    synth_plan *p;
    uint32_t type;
} plan_builder;

/* How a tensor's type is chosen. */
enum { KEEP_F32, FILE_TYPE, NOT_QUANTIZED };

/* llama-quantize's answer to a row length the type cannot hold (tensor_type_fallback in
 * src/llama-quant.cpp): a 256-block type drops to a 32-block one, and what still does not fit
 * is F16. */
static uint32_t fallback_type(uint32_t type, int64_t ne0) {
    if (ne0 % st_type_get(type)->block_size == 0) return type;
    switch (type) {
    case ST_TYPE_Q4_K: type = ST_TYPE_Q5_0; break;
    case ST_TYPE_Q5_K: type = ST_TYPE_Q5_1; break;
    case ST_TYPE_Q6_K: type = ST_TYPE_Q8_0; break;
    case ST_TYPE_Q2_K: case ST_TYPE_Q3_K: case ST_TYPE_Q2_0: case ST_TYPE_TQ1_0: case ST_TYPE_TQ2_0:
        type = ST_TYPE_Q4_0;
        break;
    case ST_TYPE_IQ1_S: case ST_TYPE_IQ1_M: case ST_TYPE_IQ2_XXS: case ST_TYPE_IQ2_XS: case ST_TYPE_IQ2_S:
    case ST_TYPE_IQ3_XXS: case ST_TYPE_IQ3_S: case ST_TYPE_IQ4_XS:
        type = ST_TYPE_IQ4_NL;
        break;
    default: type = ST_TYPE_F16;
    }
    return ne0 % st_type_get(type)->block_size == 0 ? type : ST_TYPE_F16;
}

static int is_float_type(uint32_t type) { return type == ST_TYPE_F32 || type == ST_TYPE_F16 || type == ST_TYPE_BF16; }

static st_status add(plan_builder *b, synth_init init, float std, int kind, const char *name, int n_dims,
                     int64_t ne0, int64_t ne1, int64_t ne2) {
    if (b->p->n_tensors == b->p->cap_tensors) {
        int cap = b->p->cap_tensors ? 2 * b->p->cap_tensors : 64;
        synth_tensor *t = realloc(b->p->tensors, (size_t)cap * sizeof *t);
        if (!t) return st_fail(ST_ERR_NOMEM, "synth: out of memory for the tensor list");
        b->p->tensors = t;
        b->p->cap_tensors = cap;
    }
    synth_tensor *t = &b->p->tensors[b->p->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = kind == KEEP_F32 ? ST_TYPE_F32
              : kind == NOT_QUANTIZED && !is_float_type(b->type) ? ST_TYPE_F16 : fallback_type(b->type, ne0);
    t->n_dims = n_dims;
    t->ne[0] = ne0; t->ne[1] = ne1; t->ne[2] = ne2; t->ne[3] = 1;
    t->init = init;
    t->std = std;
    return ST_OK;
}

#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
#define MAT(nm_, ...) ST_TRY(add(b, SYNTH_INIT_NORMAL, STD_MATRIX, FILE_TYPE, nm_, __VA_ARGS__))
#define MAT_STD(std_, nm_, ...) ST_TRY(add(b, SYNTH_INIT_NORMAL, std_, FILE_TYPE, nm_, __VA_ARGS__))
#define F32(init_, std_, nm_, ...) ST_TRY(add(b, init_, std_, KEEP_F32, nm_, __VA_ARGS__))
#define NORM(nm_, n_) F32(SYNTH_INIT_NORM_GAIN, STD_NORM, nm_, 1, n_, 1, 1)
/* A gain per stream, {d, hc}, as the qwen4exp loader creates it. */
#define NORM_HC(nm_, d_, hc_) F32(SYNTH_INIT_NORM_GAIN, STD_NORM, nm_, 2, d_, hc_, 1)

int64_t synth_preset_vocab(const char *preset) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i].name, preset)) return presets[i].n_vocab;
    return 0;
}

int synth_is_recurrent(const synth_hparams *hp, int64_t il) {
    return hp->hybrid && (il + 1) % hp->full_attn_interval != 0;
}

static st_status add_attention(plan_builder *b, const synth_hparams *hp, int64_t il) {
    char nm[64];
    int64_t d = hp->n_embd, hd = hp->head_dim;
    /* The gated models' attn_q holds query and output gate interleaved per head (MODELS.md §2.9). */
    MAT(NAME("blk.%lld.attn_q.weight", (long long)il), 2, d, (hp->gated_attn ? 2 : 1) * hd * hp->n_head, 1);
    MAT(NAME("blk.%lld.attn_k.weight", (long long)il), 2, d, hd * hp->n_head_kv, 1);
    MAT(NAME("blk.%lld.attn_v.weight", (long long)il), 2, d, hd * hp->n_head_kv, 1);
    MAT(NAME("blk.%lld.attn_output.weight", (long long)il), 2, hd * hp->n_head, d, 1);
    NORM(NAME("blk.%lld.attn_q_norm.weight", (long long)il), hd);
    NORM(NAME("blk.%lld.attn_k_norm.weight", (long long)il), hd);
    return ST_OK;
}

static st_status add_delta_net(plan_builder *b, const synth_hparams *hp, int64_t il) {
    char nm[64];
    int64_t d = hp->n_embd, key_dim = hp->ssm_group * hp->ssm_state, value_dim = hp->ssm_inner;
    int64_t channels = 2 * key_dim + value_dim, n_v = hp->ssm_dt_rank;
    MAT(NAME("blk.%lld.attn_qkv.weight", (long long)il), 2, d, channels, 1);
    MAT(NAME("blk.%lld.attn_gate.weight", (long long)il), 2, d, value_dim, 1);
    F32(SYNTH_INIT_NORMAL, STD_CONV, NAME("blk.%lld.ssm_conv1d.weight", (long long)il), 2, hp->ssm_conv, channels, 1);
    F32(SYNTH_INIT_DT_BIAS, 0, NAME("blk.%lld.ssm_dt.bias", (long long)il), 1, n_v, 1, 1);
    F32(SYNTH_INIT_SSM_A, 0, NAME("blk.%lld.ssm_a", (long long)il), 1, n_v, 1, 1);
    if (hp->ssm_ba) {
        MAT(NAME("blk.%lld.ssm_ba.weight", (long long)il), 2, d, 2 * n_v, 1);
    } else {
        MAT(NAME("blk.%lld.ssm_beta.weight", (long long)il), 2, d, n_v, 1);
        MAT(NAME("blk.%lld.ssm_alpha.weight", (long long)il), 2, d, n_v, 1);
    }
    NORM(NAME("blk.%lld.ssm_norm.weight", (long long)il), hp->ssm_state);
    MAT(NAME("blk.%lld.ssm_out.weight", (long long)il), 2, value_dim, d, 1);
    return ST_OK;
}

static st_status add_ffn(plan_builder *b, const synth_hparams *hp, int64_t il) {
    char nm[64];
    int64_t d = hp->n_embd;
    if (!hp->moe) {
        MAT(NAME("blk.%lld.ffn_gate.weight", (long long)il), 2, d, hp->n_ff, 1);
        MAT(NAME("blk.%lld.ffn_up.weight", (long long)il), 2, d, hp->n_ff, 1);
        MAT(NAME("blk.%lld.ffn_down.weight", (long long)il), 2, hp->n_ff, d, 1);
        return ST_OK;
    }
    int64_t E = hp->n_expert, ff = hp->n_ff_exp;
    F32(SYNTH_INIT_NORMAL, STD_ROUTER, NAME("blk.%lld.ffn_gate_inp.weight", (long long)il), 2, d, E, 1);
    MAT(NAME("blk.%lld.ffn_gate_exps.weight", (long long)il), 3, d, ff, E);
    MAT(NAME("blk.%lld.ffn_up_exps.weight", (long long)il), 3, d, ff, E);
    MAT(NAME("blk.%lld.ffn_down_exps.weight", (long long)il), 3, ff, d, E);
    if (hp->shared_expert) {
        F32(SYNTH_INIT_NORMAL, STD_ROUTER, NAME("blk.%lld.ffn_gate_inp_shexp.weight", (long long)il), 1, d, 1, 1);
        MAT(NAME("blk.%lld.ffn_gate_shexp.weight", (long long)il), 2, d, hp->n_ff_shexp, 1);
        MAT(NAME("blk.%lld.ffn_up_shexp.weight", (long long)il), 2, d, hp->n_ff_shexp, 1);
        MAT(NAME("blk.%lld.ffn_down_shexp.weight", (long long)il), 2, hp->n_ff_shexp, d, 1);
    }
    return ST_OK;
}

/* A hyper-connection mixer (MODELS.md §6.1): per-stream gains, and down/up/inject projections
 * sized so that (W_dn·ξ)/hc, W_up·ℓ and inj/hc each come out about N(0, 1): the streams' gates
 * sigmoid(G_c) spread over (0.27, 0.73) and the combine weights 2·sigmoid(inj_c/hc) over
 * (0.5, 1.5), so the streams drift apart layer by layer and a stream mixed up shows. */
static st_status add_hc_mixer(plan_builder *b, const synth_hparams *hp, const char *prefix, int inject) {
    char nm[64];
    int64_t d = hp->n_embd, hc = hp->q4.hc, wide = hc * d, lr = hp->q4.hc_rank;
    float std_wide = (float)hc / sqrtf((float)wide);
    NORM_HC(NAME("%s_norm.weight", prefix), d, hc);
    MAT_STD(std_wide, NAME("%s_down.weight", prefix), 2, wide, lr, 1);
    MAT_STD(1.0f / (0.6f * sqrtf((float)lr)), NAME("%s_up.weight", prefix), 2, lr, wide, 1);   /* rms(silu(N(0,1))) ~ 0.6 */
    if (inject) MAT_STD(std_wide, NAME("%s_inject.weight", prefix), 2, wide, hc, 1);
    return ST_OK;
}

/* The QSA indexer of a full-attention layer. The projections feed RMSNorms, so their scale is
 * free; the block scores then have a spread of about sqrt(d_idx) per head. */
static st_status add_indexer(plan_builder *b, const synth_hparams *hp, int64_t il) {
    char nm[64];
    int64_t d = hp->n_embd, dim = hp->q4.idx_dim;
    ST_TRY(add(b, SYNTH_INIT_NORMAL, STD_MATRIX, NOT_QUANTIZED, NAME("blk.%lld.indexer.q_proj.weight", (long long)il), 2, d,
               hp->q4.idx_heads * dim, 1));
    ST_TRY(add(b, SYNTH_INIT_NORMAL, STD_MATRIX, NOT_QUANTIZED, NAME("blk.%lld.indexer.k_proj.weight", (long long)il), 2, d, dim, 1));
    NORM(NAME("blk.%lld.indexer.q_norm.weight", (long long)il), dim);
    NORM(NAME("blk.%lld.indexer.k_norm.weight", (long long)il), dim);
    return ST_OK;
}

/* The PLE layer (MODELS.md §6.3). The table rows are N(0, 0.5) like the token embedding; the value
 * projection gives a gated value of rms ~0.1 against the residual's 0.5, and the conv taps of
 * 0.05 keep silu(conv) about as small. */
static st_status add_ple(plan_builder *b, const synth_hparams *hp, int64_t il) {
    char nm[64];
    int64_t d = hp->n_embd, hc = hp->q4.hc;
    MAT(NAME("blk.%lld.ple_key.weight", (long long)il), 2, d, hc * d, 1);
    MAT_STD(0.2f / (STD_EMBD * sqrtf((float)d)), NAME("blk.%lld.ple_value.weight", (long long)il), 2, d, d, 1);
    NORM_HC(NAME("blk.%lld.ple_norm_key.weight", (long long)il), d, hc);
    NORM_HC(NAME("blk.%lld.ple_norm_query.weight", (long long)il), d, hc);
    NORM_HC(NAME("blk.%lld.ple_norm_conv.weight", (long long)il), d, hc);
    /* the converter squeezes it to {K_ple, hc·d}; its rows of K_ple fit no block, so quantized
     * files hold it in F16 (the converter's and llama-quantize's fallback) */
    MAT_STD(0.05f, NAME("blk.%lld.ple_conv1d.weight", (long long)il), 2, hp->q4.ple_conv, hc * d, 1);
    return ST_OK;
}

static st_status add_layer(plan_builder *b, const synth_hparams *hp, int64_t il) {
    char nm[64];
    if (hp->hyper) {
        /* qwen4exp: the mixers replace both norms; the PLE tensors sit on their (GDN) layer. */
        ST_TRY(add_hc_mixer(b, hp, NAME("blk.%lld.hc_attn", (long long)il), 1));
        ST_TRY(add_hc_mixer(b, hp, NAME("blk.%lld.hc_ffn", (long long)il), 1));
        if (synth_is_recurrent(hp, il)) {
            ST_TRY(add_delta_net(b, hp, il));
        } else {
            ST_TRY(add_attention(b, hp, il));
            ST_TRY(add_indexer(b, hp, il));
        }
        if (il == hp->q4.ple_layer) ST_TRY(add_ple(b, hp, il));
        return add_ffn(b, hp, il);
    }
    NORM(NAME("blk.%lld.attn_norm.weight", (long long)il), hp->n_embd);
    if (synth_is_recurrent(hp, il)) ST_TRY(add_delta_net(b, hp, il));
    else ST_TRY(add_attention(b, hp, il));
    /* qwen3/qwen3moe name the pre-FFN norm ffn_norm; the hybrids post_attention_norm. */
    NORM(NAME(hp->hybrid ? "blk.%lld.post_attention_norm.weight" : "blk.%lld.ffn_norm.weight", (long long)il), hp->n_embd);
    return add_ffn(b, hp, il);
}

static int64_t next_prime(int64_t n) {
    for (;; n++) {
        int prime = n >= 2;
        for (int64_t f = 2; prime && f * f <= n; f++) prime = n % f != 0;
        if (prime) return n;
    }
}

/* qwen4exp's own hyperparameters. The hash constants are the architecture's, not random draws:
 * multipliers of 45 bits (odd, top bit set) so that t·M wraps modulo 2^64 for large ids, and
 * tables of consecutive prime sizes laid end to end. */
static st_status set_qwen4exp(const char *preset, synth_hparams *hp) {
    const qwen4exp_shape *q = NULL;
    for (size_t i = 0; i < sizeof qwen4exp_shapes / sizeof qwen4exp_shapes[0]; i++)
        if (!strcmp(qwen4exp_shapes[i].name, preset)) q = &qwen4exp_shapes[i];
    if (!q) return st_fail(ST_ERR_INVALID, "synth: qwen4exp has the presets tiny and flash, not '%s'", preset);
    hp->q4 = q->q;
    synth_qwen4exp *x = &hp->q4;
    int64_t n_heads = (x->ple_ngram - 1) * x->ple_heads_per_ngram;
    assert(x->ple_ngram <= SYNTH_PLE_MAX_NGRAM && n_heads <= SYNTH_PLE_MAX_HEADS && hp->n_embd % n_heads == 0);
    x->ple_dim = hp->n_embd / n_heads;
    uint64_t state = 0x51A7A4E8ull;
    for (int64_t j = 0; j < x->ple_ngram; j++) {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        x->ple_mult[j] = (z >> 20) | (1ull << 44) | 1;
    }
    int64_t rows = 0, size = q->ple_row_base;
    for (int64_t h = 0; h < n_heads; h++) {
        size = next_prime(size + 1);
        x->ple_offset[h] = (uint64_t)rows;
        x->ple_size[h] = (uint64_t)size;
        rows += size;
    }
    x->ple_rows = rows;
    return ST_OK;
}

static st_status set_hparams(const char *arch, const char *preset, int64_t n_vocab, synth_hparams *hp) {
    const preset_shape *s = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i].name, preset)) s = &presets[i];
    if (!s) return st_fail(ST_ERR_INVALID, "synth: unknown preset '%s' (tiny, small, a3b, flash)", preset);
    memset(hp, 0, sizeof *hp);
    int a = -1;
    for (int i = 0; synth_archs[i]; i++)
        if (!strcmp(synth_archs[i], arch)) { a = i; hp->arch = synth_archs[i]; }
    if (a < 0)
        return st_fail(ST_ERR_INVALID, "synth: unknown architecture '%s' (qwen35moe, qwen35, qwen3next, qwen3moe, qwen3, qwen4exp)", arch);
    int is35 = !strcmp(arch, "qwen35") || !strcmp(arch, "qwen35moe");
    int isnext = !strcmp(arch, "qwen3next");
    hp->hyper = !strcmp(arch, "qwen4exp");
    if (!strcmp(preset, "flash") && !hp->hyper) return st_fail(ST_ERR_INVALID, "synth: the preset 'flash' is qwen4exp's");
    hp->hybrid = is35 || isnext || hp->hyper;
    hp->moe = strcmp(arch, "qwen3") && strcmp(arch, "qwen35");
    hp->shared_expert = hp->moe && hp->hybrid;
    hp->gated_attn = hp->hybrid;
    hp->rope_sections_key = is35 || hp->hyper;
    hp->ssm_ba = isnext;
    hp->n_vocab = n_vocab > 0 ? n_vocab : s->n_vocab;
    hp->n_ctx = s->n_ctx;
    hp->n_embd = s->n_embd;
    hp->n_layer = s->n_layer;
    hp->n_head = s->n_head;
    hp->n_head_kv = s->n_head_kv;
    hp->head_dim = s->head_dim;
    hp->n_rot = hp->hybrid ? s->n_rot_partial : s->head_dim;
    memcpy(hp->rope_sections, s->sections, sizeof hp->rope_sections);
    hp->n_ff = hp->moe ? s->n_ff_exp : s->n_ff;
    if (hp->moe) {
        hp->n_expert = s->n_expert;
        hp->n_expert_used = s->n_expert_used;
        hp->n_ff_exp = s->n_ff_exp;
        hp->n_ff_shexp = hp->shared_expert ? s->n_ff_shexp : 0;
    }
    if (hp->hybrid) {
        hp->ssm_conv = s->ssm_conv;
        hp->ssm_state = s->ssm_state;
        hp->ssm_group = s->ssm_group;
        hp->ssm_dt_rank = s->ssm_dt_rank;
        hp->ssm_inner = s->ssm_dt_rank * s->ssm_state;   /* dv = dk, as the loaders require */
        hp->full_attn_interval = 4;
    }
    hp->rope_base = hp->hybrid ? 1e7f : 1e6f;
    hp->eps = 1e-6f;
    return hp->hyper ? set_qwen4exp(preset, hp) : ST_OK;
}

st_status synth_plan_build(const char *arch, const char *preset, uint32_t type, int64_t n_vocab, synth_plan *out) {
    memset(out, 0, sizeof *out);
    const st_type_info *ti = st_type_get(type);
    if (!ti || !(ti->computable || st_random_has_blocks(type)))
        return st_fail(ST_ERR_INVALID, "synth: type %s cannot be written (no quantizer or block generator)",
                       ti ? ti->name : "?");
    ST_TRY(set_hparams(arch, preset, n_vocab, &out->hp));
    out->type = type;
    plan_builder pb = {out, type}, *b = &pb;
    const synth_hparams *hp = &out->hp;
    st_status s = ST_OK;
    float std_head = 2.0f / sqrtf((float)hp->n_embd);
#define TRY_OR_FREE(expr) do { if ((s = (expr)) != ST_OK) { synth_plan_free(out); return s; } } while (0)
    TRY_OR_FREE(add(b, SYNTH_INIT_NORMAL, STD_EMBD, FILE_TYPE, "token_embd.weight", 2, hp->n_embd, hp->n_vocab, 1));
    if (hp->hyper) {
        TRY_OR_FREE(add(b, SYNTH_INIT_NORMAL, STD_EMBD, FILE_TYPE, "per_layer_token_embd.weight", 2, hp->q4.ple_dim,
                        hp->q4.ple_rows, 1));
        TRY_OR_FREE(add_hc_mixer(b, hp, "output_hc", 0));
        /* The head mixer's output is a mean of gated normed streams, rms ~0.5, not an RMSNorm's 1. */
        std_head *= 2;
    }
    for (int64_t il = 0; il < hp->n_layer; il++) TRY_OR_FREE(add_layer(b, hp, il));
    if (!hp->hyper) TRY_OR_FREE(add(b, SYNTH_INIT_NORM_GAIN, STD_NORM, KEEP_F32, "output_norm.weight", 1, hp->n_embd, 1, 1));
    TRY_OR_FREE(add(b, SYNTH_INIT_HEAD, std_head, FILE_TYPE, "output.weight", 2, hp->n_embd, hp->n_vocab, 1));
#undef TRY_OR_FREE
    return s;
}

void synth_plan_free(synth_plan *p) {
    free(p->tensors);
    p->tensors = NULL;
    p->n_tensors = p->cap_tensors = 0;
}

int64_t synth_plan_params(const synth_plan *p) {
    int64_t n = 0;
    for (int i = 0; i < p->n_tensors; i++) n += p->tensors[i].ne[0] * p->tensors[i].ne[1] * p->tensors[i].ne[2];
    return n;
}

uint64_t synth_plan_bytes(const synth_plan *p) {
    uint64_t n = 0;
    for (int i = 0; i < p->n_tensors; i++) {
        const synth_tensor *t = &p->tensors[i];
        n += st_row_size(st_type_get(t->type), t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2]);
    }
    return n;
}
