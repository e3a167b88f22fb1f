/* model.h: a loaded model: its hyperparameters (read from the GGUF keys, MODELS.md §3) and its
 * weights (bound by name and shape to the GGUF mapping, §4), for the six Qwen architectures.
 *
 * The model owns the GGUF mapping; every weight pointer lies inside it and is used in place, or
 * inside the model's one copy of the data section (copy_weights, model_api.c), or on a device
 * (model/device.h). The only other copies are small 1-D vectors (a norm, a bias, ssm_a, a .scale)
 * stored in a type other than f32: each is converted once into a model-owned f32 copy, because
 * the pointwise ops read f32. Nothing here knows about sessions, KV caches or scratch memory
 * (src/engine). */
#ifndef ST_MODEL_MODEL_H
#define ST_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"
#include "gguf/gguf.h"

#define ST_MAX_LAYERS 512

typedef enum st_arch {
    ST_ARCH_QWEN3,
    ST_ARCH_QWEN3MOE,
    ST_ARCH_QWEN35,
    ST_ARCH_QWEN35MOE,
    ST_ARCH_QWEN3NEXT,
    ST_ARCH_QWEN4EXP,
} st_arch;

#define ST_PLE_MAX_NGRAM 8   /* llama.cpp's LLAMA_MAX_PLE_NGRAM: entries of ple.layer_multipliers */
#define ST_PLE_MAX_HEADS 64  /* LLAMA_MAX_PLE_HEADS: entries of ple.head_offsets / head_vocab_sizes */

typedef enum st_rope_kind { ST_ROPE_NEOX, ST_ROPE_IMROPE } st_rope_kind;

typedef struct st_hparams {
    st_arch arch;
    const char *arch_name;        /* "qwen35moe" ... */
    int64_t n_vocab;              /* entries of tokenizer.ggml.tokens (else token_embd's ne1) */
    int64_t n_ctx_train;
    int64_t n_embd;               /* d */
    int64_t n_layer_all, n_nextn, n_layer; /* n_layer = trunk layers run by the main pass */
    float eps;                    /* attention.layer_norm_rms_epsilon */

    /* attention */
    int32_t n_head[ST_MAX_LAYERS];    /* H per layer */
    int32_t n_head_kv[ST_MAX_LAYERS]; /* H_kv per layer */
    int64_t head_dim;             /* hd = key_length (layer 0 value) */
    int64_t n_rot;                /* rope.dimension_count */
    st_rope_kind rope_kind;
    int32_t rope_sections[4];
    float rope_freq_base, rope_freq_scale, rope_attn_factor, rope_ext_factor;
    int64_t rope_n_ctx_orig;
    int rope_yarn;                /* rope.scaling.type == "yarn" */

    /* feed-forward */
    int32_t n_ff[ST_MAX_LAYERS];  /* dense width per layer */
    int64_t n_expert;             /* E, 0 for dense */
    int32_t n_expert_used[ST_MAX_LAYERS];
    int64_t n_ff_exp, n_ff_shexp;

    /* Gated DeltaNet (hybrids) */
    uint8_t is_linear[ST_MAX_LAYERS];
    int64_t ssm_conv_kernel;      /* K */
    int64_t ssm_inner;            /* value_dim */
    int64_t ssm_state;            /* dk = dv */
    int64_t ssm_n_v;              /* time_step_rank */
    int64_t ssm_n_k;              /* group_count */
    int gdn_grouped;              /* v-head h reads k-head h/r (qwen3next) instead of h mod n_k */

    /* qwen4exp (MODELS.md §3.2, §6): hyper-connections, QSA, PLE */
    int64_t n_hc;                 /* hyper_connection.count: residual streams (> 1) */
    int64_t hc_rank;              /* hyper_connection.low_rank */
    int64_t idx_n_head, idx_dim;  /* attention.indexer.head_count, key_length */
    int64_t idx_top_k;            /* attention.indexer.top_k: the QSA budget B in tokens */
    int32_t compress_ratio[ST_MAX_LAYERS]; /* block size r per layer; 0 = dense attention */
    int32_t ple_layer;            /* the PLE layer, -1 for none */
    int64_t ple_ngram;            /* N: n-grams of orders 2 .. N */
    int64_t ple_heads_per_ngram, ple_n_heads, ple_dim; /* h_per, n_ple = (N-1) h_per, d_ple */
    int64_t ple_conv_kernel;      /* K_ple; the conv's dilation is N */
    int32_t ple_eos, ple_image;   /* the reset token; the token hashed for an image position */
    uint64_t ple_mult[ST_PLE_MAX_NGRAM];
    uint32_t ple_offset[ST_PLE_MAX_HEADS], ple_size[ST_PLE_MAX_HEADS];
} st_hparams;

static inline int64_t st_hp_key_dim(const st_hparams *hp) { return hp->ssm_n_k * hp->ssm_state; }
static inline int64_t st_hp_conv_channels(const st_hparams *hp) { return 2 * st_hp_key_dim(hp) + hp->ssm_inner; }
static inline int st_hp_is_moe(const st_hparams *hp) { return hp->arch != ST_ARCH_QWEN3 && hp->arch != ST_ARCH_QWEN35; }
/* Gated attention and Gated DeltaNet layers (qwen4exp is one too, with its own stack). */
static inline int st_hp_is_hybrid(const st_hparams *hp) {
    return hp->arch == ST_ARCH_QWEN35 || hp->arch == ST_ARCH_QWEN35MOE || hp->arch == ST_ARCH_QWEN3NEXT ||
           hp->arch == ST_ARCH_QWEN4EXP;
}
/* QSA on layer il (qwen4exp full attention with a compress ratio), and its cell budget
 * W = B + r - 1 (MODELS.md §6.2 step 6). */
static inline int st_hp_qsa(const st_hparams *hp, int64_t il) {
    return hp->arch == ST_ARCH_QWEN4EXP && !hp->is_linear[il] && hp->compress_ratio[il] > 0;
}
static inline int64_t st_hp_qsa_width(const st_hparams *hp, int64_t il) {
    return hp->idx_top_k + hp->compress_ratio[il] - 1;
}
/* PLE conv history per sequence: (K_ple - 1) * N columns of hc * d channels. */
static inline int64_t st_hp_ple_hist(const st_hparams *hp) { return (hp->ple_conv_kernel - 1) * hp->ple_ngram; }

/* One bound weight. `data` is NULL when an optional tensor is absent. */
typedef struct st_tensor {
    const char *name;
    uint32_t type;
    int64_t ne[4];
    const void *data;
    size_t row_bytes;             /* bytes of one ne0 row */
    const float *f32;             /* 1-D vectors: f32 view (the mapping, or the model's copy) */
    float scale;                  /* .scale {1} applied to the product; 1 when absent or ignored */
    const float *escale;          /* per-expert .scale {E}, NULL when absent */
    int repacked;                 /* data is in a CPU layout of quant/repack.h (set at load, after
                                     the copy): type is then that layout's internal id, which only
                                     the CPU matrix products read; st_repack_file_type gives the file's */
} st_tensor;

/* One layer's weights: st_tensor fields only, each listed once in st_layer_tensors below. */
typedef struct st_layer {
    st_tensor attn_norm, ffn_norm; /* ffn_norm is post_attention_norm on the hybrids */
    /* attention */
    st_tensor wq, wk, wv, wqkv, wo;
    st_tensor bq, bk, bv, bqkv;
    st_tensor q_norm, k_norm;
    /* Gated DeltaNet */
    st_tensor ssm_qkv, ssm_gate, ssm_in;
    st_tensor ssm_conv1d, ssm_dt, ssm_a, ssm_beta, ssm_alpha, ssm_ba, ssm_norm, ssm_out;
    /* dense FFN */
    st_tensor ffn_gate, ffn_up, ffn_down;
    /* MoE */
    st_tensor gate_inp, gate_exps, up_exps, gate_up_exps, down_exps;
    st_tensor gate_inp_shexp, gate_shexp, up_shexp, down_shexp;
    /* qwen4exp hyper-connection mixers before the mixer (attn) and before the MoE (ffn) */
    st_tensor hc_attn_norm, hc_attn_down, hc_attn_up, hc_attn_inject;
    st_tensor hc_ffn_norm, hc_ffn_down, hc_ffn_up, hc_ffn_inject;
    /* qwen4exp QSA indexer (full-attention layers) */
    st_tensor idx_q, idx_k, idx_q_norm, idx_k_norm;
    /* qwen4exp PLE (the PLE layer only) */
    st_tensor ple_key, ple_value, ple_norm_key, ple_norm_query, ple_norm_conv, ple_conv1d;
    st_tensor ple_conv_wide;      /* ple_conv1d as an undilated f32 kernel {(K-1)N+1, hc*d} (bind.c); no data */
    /* The MTP (NextN) block only (layers[n_layer], MODELS.md §7): eh_proj {2d, d} over
     * [RMSNorm(token_embd(x); enorm) ; RMSNorm(h; hnorm)], and the optional own head norm and head
     * (absent: output_norm, output, resolved by st_mtp_*()). */
    st_tensor nextn_eh_proj, nextn_enorm, nextn_hnorm, nextn_head_norm, nextn_head;
} st_layer;

/* ---- the table of a layer's tensors (layer.c) ----
 *
 * Every walk over a layer's tensors goes through this table, never through casts or hand lists:
 * binding (every field starts unbound, and what binds as a vector must be a VECTOR row), the
 * matmul scratch (sized from every bound MATRIX and EXPERTS row), the bytes a decoded token reads
 * (EXPERTS rows count k/E), moving the pointers into the weight copy, the load-time repack, the
 * CUDA upload and its type check.
 *
 * To add a tensor (qwen4exp's, an MTP block's): add the st_tensor field to st_layer above, add its
 * row to the table in layer.c at the same place (the build fails while the table has fewer rows
 * than st_layer has fields, and test_layer_table while a row is out of order), and bind it in
 * bind.c. Nothing else needs to know the field exists, unless the forward uses it. */
typedef enum st_layer_tensor_kind {
    ST_LT_VECTOR,  /* read as f32 by pointwise code (norms, biases, conv and SSM parameters) */
    ST_LT_MATRIX,  /* a weight matrix of the matrix products, read whole by each token */
    ST_LT_EXPERTS, /* {K, M, E}: one matrix per expert, k of the E read by each token */
} st_layer_tensor_kind;

typedef struct st_layer_tensor {
    const char *field;  /* "wq" */
    size_t offset;      /* offsetof(st_layer, wq) */
    st_layer_tensor_kind kind;
} st_layer_tensor;

#define ST_LAYER_N_TENSORS ((int)(sizeof(st_layer) / sizeof(st_tensor)))
extern const st_layer_tensor st_layer_tensors[];

static inline st_tensor *st_layer_tensor_at(st_layer *L, int i) {
    return (st_tensor *)((char *)L + st_layer_tensors[i].offset);
}
static inline const st_tensor *st_layer_tensor_get(const st_layer *L, int i) {
    return (const st_tensor *)((const char *)L + st_layer_tensors[i].offset);
}

struct st_tokenizer;

/* The public st_model (strata.h). */
struct st_model {
    st_gguf *gguf;
    st_hparams hp;
    st_tensor tok_embd, output, output_norm;
    st_tensor hc_head_norm, hc_head_down, hc_head_up; /* qwen4exp: the head's mixer (no output_norm) */
    st_tensor ple_table;          /* qwen4exp per_layer_token_embd {d_ple, rows}: rows are gathered
                                     from the mapping per token; never copied, never prefaulted */
    st_layer *layers;             /* n_layer trunk entries, then n_mtp MTP blocks */
    int n_mtp;                    /* 1 when the file's MTP head is bound (a hybrid with
                                     nextn_predict_layers = 1 and blk.N.nextn.*), else 0 */
    float **owned;                /* f32 copies of non-f32 vectors; freed with the model */
    int n_owned, cap_owned;
    uint64_t weight_bytes;        /* bytes of every bound tensor but the PLE table */
    uint64_t ple_table_bytes;     /* bytes of the PLE table (0 without PLE) */
    uint64_t decode_bytes;        /* weight bytes one decoded token reads */
    void *weights_copy;           /* the tensor data, when copied out of the mapping (copy_weights) */
    struct st_device_model *dev;  /* the weights resident on a GPU (model/device.h), or NULL */
    struct st_tokenizer *tok;     /* NULL when the file's tokenizer is not supported */
    char tokenizer_error[512];    /* why tok is NULL */
};

/* Every tensor slot of the model (layer.c): tok_embd, output, output_norm, then each layer's in
 * table order; slots that are not bound have data == NULL. A tied head's output is a copy of
 * tok_embd (same data). */
int64_t st_model_n_tensor_slots(const struct st_model *m);
st_tensor *st_model_tensor_slot(struct st_model *m, int64_t i);
const st_tensor *st_model_tensor_slot_get(const struct st_model *m, int64_t i);
/* The slot's kind: a layer slot's table row, ST_LT_MATRIX for the embedding and the head, ST_LT_VECTOR
 * for output_norm. */
st_layer_tensor_kind st_model_tensor_slot_kind(const struct st_model *m, int64_t i);

/* model_api.c: the host's MemAvailable (/proc/meminfo) in bytes, 0 if unknown. */
size_t st_host_available_bytes(void);

/* hparams.c */
st_status st_hparams_load(const st_gguf *g, st_hparams *hp);

/* The layers bound: the trunk's and the MTP block's. */
static inline int64_t st_model_n_blocks(const struct st_model *m) { return m->hp.n_layer + m->n_mtp; }
/* The MTP head's final norm and LM head: its own, else the trunk's (§7 step 5). */
static inline const st_tensor *st_mtp_head_norm(const struct st_model *m) {
    const st_layer *L = &m->layers[m->hp.n_layer];
    return L->nextn_head_norm.data ? &L->nextn_head_norm : &m->output_norm;
}
static inline const st_tensor *st_mtp_head(const struct st_model *m) {
    const st_layer *L = &m->layers[m->hp.n_layer];
    return L->nextn_head.data ? &L->nextn_head : &m->output;
}

/* bind.c: binds every tensor of hp->arch, and the MTP block when the file has one; refuses a
 * missing required tensor or a wrong shape. */
st_status st_model_bind(struct st_model *m);
void st_model_unbind(struct st_model *m);

#endif
