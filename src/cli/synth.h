/* synth.h: `strata synth`, random-weight models in llama.cpp's converter layout.
 *
 * A plan is the whole model on paper: the hyperparameters of an architecture at a preset size, and
 * every tensor's GGUF name, type, shape and how its values are drawn. synth_write() turns a plan
 * into a file through the streaming GGUF writer, drawing each row from its own deterministic
 * stream (seed, tensor name, row), so the bytes depend on the seed only, never on the thread count.
 * The unit test (tests/unit/test_synth.c) builds the same plan to check what the reader sees. */
#ifndef ST_CLI_SYNTH_H
#define ST_CLI_SYNTH_H

#include <stdint.h>
#include "base/status.h"
#include "gguf/gguf.h"

typedef enum synth_init {
    SYNTH_INIT_NORMAL,      /* N(0, std) */
    SYNTH_INIT_NORM_GAIN,   /* 1 + N(0, std): RMSNorm gains, with the converter's +1 already in */
    SYNTH_INIT_SSM_A,       /* -exp(A_log), A in [1, 16] log-uniform: a negative log-decay rate */
    SYNTH_INIT_DT_BIAS,     /* softplus^-1(dt), dt in [1e-3, 1e-1] log-uniform, as Mamba inits it */
    SYNTH_INIT_HEAD,        /* row r: N(0, std * e^(s_r)), s_r ~ N(0, SYNTH_HEAD_SPREAD) */
} synth_init;

/* The LM head's rows get log-normal scales, so each position's logits have a heavy upper tail
 * like a trained model's rather than 512 Gaussian draws whose top two are often near-ties: a
 * near-tie turns rounding-level differences into argmax flips and makes top-1 agreement a
 * measure of luck. Measured on tiny qwen3 Q4_K, llama.cpp's repacked vs plain kernels: top-1
 * agreement 97.5% with Gaussian rows, 100% with this spread, KL unchanged. */
#define SYNTH_HEAD_SPREAD 0.5f

typedef struct synth_tensor {
    char name[64];
    uint32_t type;          /* st_type id */
    int n_dims;
    int64_t ne[ST_GGUF_MAX_DIMS];
    synth_init init;
    float std;
    float spread;           /* SYNTH_INIT_NORMAL, > 0: row r's std times e^(spread * z_r), z_r ~ N(0, 1)
                               (the routers under --route-skew); 0: every row std */
} synth_tensor;

/* qwen4exp's additions (MODELS.md §3.2, §6): hyper-connections, the QSA indexer, the PLE table. */
#define SYNTH_PLE_MAX_NGRAM 8
#define SYNTH_PLE_MAX_HEADS 64
typedef struct synth_qwen4exp {
    int64_t hc, hc_rank;                /* residual streams, the mixers' low rank */
    int64_t idx_heads, idx_dim;         /* indexer query heads, key length */
    int64_t qsa_budget, qsa_ratio;      /* indexer.top_k (B) and compress_ratio (r) on the full layers */
    int64_t ple_layer, ple_ngram, ple_heads_per_ngram, ple_dim, ple_conv, ple_rows;
    int64_t ple_eos;                    /* the reset token: the vocabulary's EOS, set when it is written */
    uint64_t ple_mult[SYNTH_PLE_MAX_NGRAM], ple_offset[SYNTH_PLE_MAX_HEADS], ple_size[SYNTH_PLE_MAX_HEADS];
} synth_qwen4exp;

typedef struct synth_hparams {
    const char *arch;
    int moe, shared_expert, hybrid, gated_attn, rope_sections_key, ssm_ba, hyper;
    int64_t n_vocab, n_ctx, n_embd, n_layer;
    int64_t n_head, n_head_kv, head_dim, n_rot;
    int64_t n_ff;                       /* dense FFN width */
    int64_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    int64_t ssm_conv, ssm_state, ssm_group, ssm_dt_rank, ssm_inner;
    int64_t full_attn_interval;
    int32_t rope_sections[4];
    float rope_base, eps;
    synth_qwen4exp q4;                  /* hyper (qwen4exp) only */
} synth_hparams;

typedef struct synth_plan {
    synth_hparams hp;
    uint32_t type;          /* the file's matrix type */
    synth_tensor *tensors;
    int n_tensors, cap_tensors;
} synth_plan;

/* The architectures and presets synth knows, NULL-terminated. */
extern const char *const synth_archs[];
extern const char *const synth_presets[];

/* n_vocab > 0 overrides the preset's vocabulary size (a real tokenizer's). A matrix whose rows
 * `type` cannot hold (Q4_K needs 256 | ne0) takes the type llama-quantize falls back to (Q4_K:
 * Q5_0; then F16), as the real qwen4exp files have it (ffn_down_exps of 640, PLE rows of 160). */
st_status synth_plan_build(const char *arch, const char *preset, uint32_t type, int64_t n_vocab, synth_plan *out);
void synth_plan_free(synth_plan *p);
/* True for layer il of a hybrid being a Gated DeltaNet (linear attention) layer. */
int synth_is_recurrent(const synth_hparams *hp, int64_t il);
/* The preset's own vocabulary size (0 for an unknown preset). */
int64_t synth_preset_vocab(const char *preset);
int64_t synth_plan_params(const synth_plan *p);
uint64_t synth_plan_bytes(const synth_plan *p);

/* The built-in byte-level vocabulary: 256 byte tokens, merges learned from a fixed text, [PADi]
 * fillers and Qwen's special tokens at the end, n_vocab entries in all. *eos_out (if not NULL)
 * receives the EOS id it writes. */
st_status synth_vocab_write(st_gguf_writer *w, const char *pre, int64_t n_vocab, int64_t *eos_out);

typedef struct synth_options {
    const char *out, *arch, *preset, *tokenizer;
    uint32_t type;
    uint64_t seed;
    int n_threads;          /* <= 0: one per core */
    int progress;           /* draw a progress line (on a terminal) */
    int random_blocks;      /* draw the matrices' blocks directly (same spread, zero mean) where the
                               type has a block generator (quant/random.h; q4_K: ~50x faster than
                               quantizing normal deviates, for speed runs on big shapes) */
    int64_t qsa_budget, qsa_ratio;  /* qwen4exp: > 0 overrides the preset's QSA budget B / ratio r
                                       (keys only; the tensors do not depend on them) */
    float route_skew;       /* > 0: the routers' rows get log-normal scales of this spread, so a few
                               experts per layer win most selections (0: the file is unchanged) */
} synth_options;

/* Writes the model; on success *plan_out (if not NULL) receives the plan that was written. */
st_status synth_write(const synth_options *o, synth_plan *plan_out);

#endif
