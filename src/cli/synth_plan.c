/* synth_plan.c: what `strata synth` writes, on paper: each architecture's hyperparameters at each
 * preset size, and every tensor of MODELS.md §4 with the name, shape and type the HF converter
 * (conversion/base.py, qwen.py) gives it.
 *
 * Types follow the converter: 1-D tensors, `*_norm.weight`, the routers `ffn_gate_inp(_shexp)`,
 * `ssm_conv1d` and names not ending in ".weight" (`ssm_a`, `ssm_dt.bias`) stay F32; every other
 * matrix, token_embd and output included, takes the file's type. For Q4_K this is "every matrix
 * Q4_K" (issue 3's speed model), a little plainer than llama-quantize's Q4_K_M, which would put
 * output and some ffn_down/attn_v in Q6_K.
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
 * The dense architectures (qwen3, qwen35) use a dense FFN of 512 / 3072 / 6144; qwen3 and qwen3moe
 * rotate the whole head, as their loaders require. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/synth.h"
#include "quant/types.h"

const char *const synth_archs[] = {"qwen35moe", "qwen35", "qwen3next", "qwen3moe", "qwen3", NULL};
const char *const synth_presets[] = {"tiny", "small", "a3b", NULL};

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
    int cap;
    uint32_t type;
} plan_builder;

static st_status add(plan_builder *b, synth_init init, float std, int is_matrix, const char *name, int n_dims,
                     int64_t ne0, int64_t ne1, int64_t ne2) {
    if (b->p->n_tensors == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        synth_tensor *t = realloc(b->p->tensors, (size_t)cap * sizeof *t);
        if (!t) return st_fail(ST_ERR_NOMEM, "synth: out of memory for the tensor list");
        b->p->tensors = t;
        b->cap = cap;
    }
    synth_tensor *t = &b->p->tensors[b->p->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = is_matrix ? b->type : ST_TYPE_F32;
    t->n_dims = n_dims;
    t->ne[0] = ne0; t->ne[1] = ne1; t->ne[2] = ne2; t->ne[3] = 1;
    t->init = init;
    t->std = std;
    const st_type_info *ti = st_type_get(t->type);
    if (ne0 % ti->block_size)
        return st_fail(ST_ERR_INVALID, "synth: tensor '%s' has rows of %lld, not a multiple of %s's block of %d",
                       name, (long long)ne0, ti->name, ti->block_size);
    return ST_OK;
}

#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
#define MAT(nm_, ...) ST_TRY(add(b, SYNTH_INIT_NORMAL, STD_MATRIX, 1, nm_, __VA_ARGS__))
#define F32(init_, std_, nm_, ...) ST_TRY(add(b, init_, std_, 0, nm_, __VA_ARGS__))
#define NORM(nm_, n_) F32(SYNTH_INIT_NORM_GAIN, STD_NORM, nm_, 1, n_, 1, 1)

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

static st_status add_layer(plan_builder *b, const synth_hparams *hp, int64_t il) {
    char nm[64];
    NORM(NAME("blk.%lld.attn_norm.weight", (long long)il), hp->n_embd);
    if (synth_is_recurrent(hp, il)) ST_TRY(add_delta_net(b, hp, il));
    else ST_TRY(add_attention(b, hp, il));
    /* qwen3/qwen3moe name the pre-FFN norm ffn_norm; the hybrids post_attention_norm. */
    NORM(NAME(hp->hybrid ? "blk.%lld.post_attention_norm.weight" : "blk.%lld.ffn_norm.weight", (long long)il), hp->n_embd);
    return add_ffn(b, hp, il);
}

static st_status set_hparams(const char *arch, const char *preset, int64_t n_vocab, synth_hparams *hp) {
    const preset_shape *s = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i].name, preset)) s = &presets[i];
    if (!s) return st_fail(ST_ERR_INVALID, "synth: unknown preset '%s' (tiny, small, a3b)", preset);
    memset(hp, 0, sizeof *hp);
    int a = -1;
    for (int i = 0; synth_archs[i]; i++)
        if (!strcmp(synth_archs[i], arch)) { a = i; hp->arch = synth_archs[i]; }
    if (a < 0) return st_fail(ST_ERR_INVALID, "synth: unknown architecture '%s' (qwen35moe, qwen35, qwen3next, qwen3moe, qwen3)", arch);
    int is35 = !strcmp(arch, "qwen35") || !strcmp(arch, "qwen35moe");
    int isnext = !strcmp(arch, "qwen3next");
    hp->hybrid = is35 || isnext;
    hp->moe = strcmp(arch, "qwen3") && strcmp(arch, "qwen35");
    hp->shared_expert = hp->moe && hp->hybrid;
    hp->gated_attn = hp->hybrid;
    hp->rope_sections_key = is35;
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
    return ST_OK;
}

st_status synth_plan_build(const char *arch, const char *preset, uint32_t type, int64_t n_vocab, synth_plan *out) {
    memset(out, 0, sizeof *out);
    if (type != ST_TYPE_F32 && type != ST_TYPE_F16 && type != ST_TYPE_Q8_0 && type != ST_TYPE_Q4_K)
        return st_fail(ST_ERR_INVALID, "synth: type %u is not one of f32, f16, q8_0, q4_k", type);
    ST_TRY(set_hparams(arch, preset, n_vocab, &out->hp));
    out->type = type;
    plan_builder pb = {out, 0, type}, *b = &pb;
    const synth_hparams *hp = &out->hp;
    st_status s = ST_OK;
#define TRY_OR_FREE(expr) do { if ((s = (expr)) != ST_OK) { synth_plan_free(out); return s; } } while (0)
    TRY_OR_FREE(add(b, SYNTH_INIT_NORMAL, STD_EMBD, 1, "token_embd.weight", 2, hp->n_embd, hp->n_vocab, 1));
    for (int64_t il = 0; il < hp->n_layer; il++) TRY_OR_FREE(add_layer(b, hp, il));
    TRY_OR_FREE(add(b, SYNTH_INIT_NORM_GAIN, STD_NORM, 0, "output_norm.weight", 1, hp->n_embd, 1, 1));
    float std_head = 2.0f / sqrtf((float)hp->n_embd);
    TRY_OR_FREE(add(b, SYNTH_INIT_HEAD, std_head, 1, "output.weight", 2, hp->n_embd, hp->n_vocab, 1));
#undef TRY_OR_FREE
    return s;
}

void synth_plan_free(synth_plan *p) {
    free(p->tensors);
    p->tensors = NULL;
    p->n_tensors = 0;
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
