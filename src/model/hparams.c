/* hparams.c: the hyperparameters of a Qwen-family GGUF, read key by key as llama.cpp's loaders
 * read them (MODELS.md §3): which keys are required, which may be a scalar or a per-layer array,
 * the defaults, and the derived sizes and layer types. A missing required key or a malformed value
 * is refused with a message naming the key. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"

static const struct { const char *name; st_arch arch; } arch_names[] = {
    {"qwen3", ST_ARCH_QWEN3}, {"qwen3moe", ST_ARCH_QWEN3MOE}, {"qwen35", ST_ARCH_QWEN35},
    {"qwen35moe", ST_ARCH_QWEN35MOE}, {"qwen3next", ST_ARCH_QWEN3NEXT}, {"qwen4exp", ST_ARCH_QWEN4EXP},
};

typedef struct reader {
    const st_gguf *g;
    const char *arch;
    char key[160];
} reader;

static const st_gguf_value *find(reader *r, const char *suffix) {
    snprintf(r->key, sizeof r->key, "%s.%s", r->arch, suffix);
    return st_gguf_find(r->g, r->key);
}

static st_status missing(reader *r) {
    return st_fail(ST_ERR_FORMAT, "%s: key '%s' is required but absent", st_gguf_path(r->g), r->key);
}

/* An unsigned integer key; `*present` (optional) says whether it was there. */
static st_status get_uint(reader *r, const char *suffix, int required, int64_t def, int64_t *out, int *present) {
    const st_gguf_value *v = find(r, suffix);
    if (present) *present = v != NULL;
    if (!v) {
        if (required) return missing(r);
        *out = def;
        return ST_OK;
    }
    if (st_gguf_value_type(v) == ST_GGUF_ARRAY)
        return st_fail(ST_ERR_FORMAT, "%s: key '%s' is an array, expected a scalar", st_gguf_path(r->g), r->key);
    ST_TRY(st_gguf_value_int(v, out));
    if (*out < 0) return st_fail(ST_ERR_FORMAT, "%s: key '%s' is %lld, expected >= 0", st_gguf_path(r->g), r->key, (long long)*out);
    return ST_OK;
}

static st_status get_float(reader *r, const char *suffix, int required, double def, double *out) {
    const st_gguf_value *v = find(r, suffix);
    if (!v) {
        if (required) return missing(r);
        *out = def;
        return ST_OK;
    }
    return st_gguf_value_float(v, out);
}

/* A key that is either a scalar (applied to all n entries) or an array of exactly n entries
 * (llama_model_loader::get_key_or_arr). Absent: every entry keeps its current value. */
static st_status get_uint_or_arr(reader *r, const char *suffix, int required, int64_t n, int32_t *out, int *present) {
    const st_gguf_value *v = find(r, suffix);
    if (present) *present = v != NULL;
    if (!v) return required ? missing(r) : ST_OK;
    if (st_gguf_value_type(v) == ST_GGUF_ARRAY) {
        uint64_t len = st_gguf_array_len(v);
        if ((int64_t)len != n)
            return st_fail(ST_ERR_FORMAT, "%s: key '%s' has %llu entries, expected %lld",
                           st_gguf_path(r->g), r->key, (unsigned long long)len, (long long)n);
        for (int64_t i = 0; i < n; i++) {
            int64_t x;
            st_gguf_vtype et = st_gguf_array_type(v);
            if (et == ST_GGUF_BOOL) {
                const uint8_t *raw = st_gguf_array_data(v);
                x = raw ? raw[i] != 0 : 0;
            } else {
                ST_TRY(st_gguf_array_int(v, (uint64_t)i, &x));
            }
            if (x < 0 || x > INT32_MAX)
                return st_fail(ST_ERR_FORMAT, "%s: key '%s'[%lld] = %lld is out of range",
                               st_gguf_path(r->g), r->key, (long long)i, (long long)x);
            out[i] = (int32_t)x;
        }
        return ST_OK;
    }
    int64_t x;
    if (st_gguf_value_type(v) == ST_GGUF_BOOL) {
        int b;
        ST_TRY(st_gguf_value_bool(v, &b));
        x = b;
    } else {
        ST_TRY(st_gguf_value_int(v, &x));
    }
    if (x < 0 || x > INT32_MAX)
        return st_fail(ST_ERR_FORMAT, "%s: key '%s' = %lld is out of range", st_gguf_path(r->g), r->key, (long long)x);
    for (int64_t i = 0; i < n; i++) out[i] = (int32_t)x;
    return ST_OK;
}

static st_status require_positive(reader *r, const char *suffix, int64_t value) {
    if (value > 0) return ST_OK;
    snprintf(r->key, sizeof r->key, "%s.%s", r->arch, suffix);
    return st_fail(ST_ERR_FORMAT, "%s: key '%s' is %lld, must be > 0", st_gguf_path(r->g), r->key, (long long)value);
}

static st_status load_common(reader *r, st_hparams *hp) {
    const st_gguf *g = r->g;
    ST_TRY(get_uint(r, "context_length", 1, 0, &hp->n_ctx_train, NULL));
    ST_TRY(get_uint(r, "embedding_length", 1, 0, &hp->n_embd, NULL));
    ST_TRY(get_uint(r, "block_count", 1, 0, &hp->n_layer_all, NULL));
    ST_TRY(require_positive(r, "embedding_length", hp->n_embd));
    if (hp->n_layer_all <= 0 || hp->n_layer_all > ST_MAX_LAYERS)
        return st_fail(ST_ERR_FORMAT, "%s: key '%s.block_count' is %lld, expected 1..%d", st_gguf_path(g), r->arch,
                       (long long)hp->n_layer_all, ST_MAX_LAYERS);
    ST_TRY(get_uint(r, "nextn_predict_layers", 0, 0, &hp->n_nextn, NULL));
    if (hp->n_nextn >= hp->n_layer_all)
        return st_fail(ST_ERR_FORMAT, "%s: key '%s.nextn_predict_layers' is %lld, not below block_count %lld",
                       st_gguf_path(g), r->arch, (long long)hp->n_nextn, (long long)hp->n_layer_all);
    hp->n_layer = hp->n_layer_all - hp->n_nextn;
    int64_t n = hp->n_layer_all;

    ST_TRY(get_uint(r, "expert_count", 0, 0, &hp->n_expert, NULL));
    memset(hp->n_expert_used, 0, sizeof hp->n_expert_used);
    ST_TRY(get_uint_or_arr(r, "expert_used_count", 0, n, hp->n_expert_used, NULL));
    int64_t groups;
    ST_TRY(get_uint(r, "expert_group_count", 0, 0, &groups, NULL));
    if (groups > 1)
        return st_fail(ST_ERR_UNSUPPORTED, "%s: key '%s.expert_group_count' is %lld: grouped expert routing is not supported",
                       st_gguf_path(g), r->arch, (long long)groups);
    for (int64_t i = 0; i < n; i++)
        if (hp->n_expert_used[i] > hp->n_expert)
            return st_fail(ST_ERR_FORMAT, "%s: key '%s.expert_used_count' (%d) exceeds expert_count (%lld)",
                           st_gguf_path(g), r->arch, hp->n_expert_used[i], (long long)hp->n_expert);

    memset(hp->n_ff, 0, sizeof hp->n_ff);
    memset(hp->n_head, 0, sizeof hp->n_head);
    ST_TRY(get_uint_or_arr(r, "feed_forward_length", 0, n, hp->n_ff, NULL));
    ST_TRY(get_uint_or_arr(r, "attention.head_count", 0, n, hp->n_head, NULL));
    memcpy(hp->n_head_kv, hp->n_head, sizeof hp->n_head);
    ST_TRY(get_uint_or_arr(r, "attention.head_count_kv", 0, n, hp->n_head_kv, NULL));
    if (hp->n_head[0] <= 0) {
        snprintf(r->key, sizeof r->key, "%s.attention.head_count", r->arch);
        return st_fail(ST_ERR_FORMAT, "%s: key '%s' is absent or 0", st_gguf_path(g), r->key);
    }
    for (int64_t i = 0; i < n; i++)
        if (hp->n_head[i] > 0 && (hp->n_head_kv[i] <= 0 || hp->n_head[i] % hp->n_head_kv[i] != 0))
            return st_fail(ST_ERR_FORMAT, "%s: layer %lld: head_count %d is not a multiple of head_count_kv %d",
                           st_gguf_path(g), (long long)i, hp->n_head[i], hp->n_head_kv[i]);

    int64_t key_len, value_len;
    ST_TRY(get_uint(r, "attention.key_length", 0, hp->n_embd / hp->n_head[0], &key_len, NULL));
    ST_TRY(get_uint(r, "attention.value_length", 0, hp->n_embd / hp->n_head[0], &value_len, NULL));
    if (key_len != value_len)
        return st_fail(ST_ERR_UNSUPPORTED, "%s: key_length %lld differs from value_length %lld",
                       st_gguf_path(g), (long long)key_len, (long long)value_len);
    hp->head_dim = key_len;
    ST_TRY(require_positive(r, "attention.key_length", key_len));
    ST_TRY(get_uint(r, "rope.dimension_count", 0, key_len, &hp->n_rot, NULL));
    if (hp->n_rot > key_len || hp->n_rot % 2)
        return st_fail(ST_ERR_FORMAT, "%s: key '%s.rope.dimension_count' is %lld: must be even and <= head size %lld",
                       st_gguf_path(g), r->arch, (long long)hp->n_rot, (long long)key_len);

    ST_TRY(get_uint(r, "rope.scaling.original_context_length", 0, hp->n_ctx_train, &hp->rope_n_ctx_orig, NULL));
    double base, factor, attn_factor;
    ST_TRY(get_float(r, "rope.freq_base", 0, 10000.0, &base));
    const st_gguf_value *v = find(r, "rope.scaling.type");
    const char *type = "linear";
    size_t type_len = 6;
    if (v) ST_TRY(st_gguf_value_str(v, &type, &type_len));
    if (find(r, "rope.scaling.factor")) {
        ST_TRY(get_float(r, "rope.scaling.factor", 0, 0.0, &factor));
    } else {
        ST_TRY(get_float(r, "rope.scale_linear", 0, 0.0, &factor));
    }
    ST_TRY(get_float(r, "rope.scaling.attn_factor", 0, 1.0, &attn_factor));
    hp->rope_freq_base = (float)base;
    hp->rope_freq_scale = factor == 0.0 ? 1.0f : (float)(1.0 / factor);
    hp->rope_attn_factor = (float)attn_factor;
    hp->rope_ext_factor = 0.0f;
    hp->rope_yarn = 0;
    if (type_len == 4 && !memcmp(type, "yarn", 4)) {
        hp->rope_yarn = 1;
        hp->rope_ext_factor = 1.0f;
    } else if (type_len == 4 && !memcmp(type, "none", 4)) {
        hp->rope_freq_scale = 1.0f; /* never scaled (llama_context) */
    } else if (!(type_len == 6 && !memcmp(type, "linear", 6))) {
        return st_fail(ST_ERR_UNSUPPORTED, "%s: key '%s.rope.scaling.type' is '%.*s': only linear, none and yarn are supported",
                       st_gguf_path(g), r->arch, (int)type_len, type);
    }

    double eps;
    ST_TRY(get_float(r, "attention.layer_norm_rms_epsilon", 1, 0.0, &eps));
    hp->eps = (float)eps;
    return ST_OK;
}

/* The GDN keys and the layer-type rule of the hybrids (§3.2, §3.3). */
static st_status load_hybrid(reader *r, st_hparams *hp) {
    ST_TRY(get_uint(r, "ssm.conv_kernel", 1, 0, &hp->ssm_conv_kernel, NULL));
    ST_TRY(get_uint(r, "ssm.inner_size", 1, 0, &hp->ssm_inner, NULL));
    ST_TRY(get_uint(r, "ssm.state_size", 1, 0, &hp->ssm_state, NULL));
    ST_TRY(get_uint(r, "ssm.time_step_rank", 1, 0, &hp->ssm_n_v, NULL));
    ST_TRY(get_uint(r, "ssm.group_count", 1, 0, &hp->ssm_n_k, NULL));
    ST_TRY(require_positive(r, "ssm.conv_kernel", hp->ssm_conv_kernel));
    ST_TRY(require_positive(r, "ssm.state_size", hp->ssm_state));
    ST_TRY(require_positive(r, "ssm.time_step_rank", hp->ssm_n_v));
    ST_TRY(require_positive(r, "ssm.group_count", hp->ssm_n_k));
    if (hp->ssm_n_v % hp->ssm_n_k)
        return st_fail(ST_ERR_FORMAT, "%s: ssm.time_step_rank %lld is not a multiple of ssm.group_count %lld",
                       st_gguf_path(r->g), (long long)hp->ssm_n_v, (long long)hp->ssm_n_k);
    if (hp->ssm_inner != hp->ssm_n_v * hp->ssm_state)
        return st_fail(ST_ERR_FORMAT, "%s: ssm.inner_size %lld != time_step_rank %lld x state_size %lld (value head size must equal key head size)",
                       st_gguf_path(r->g), (long long)hp->ssm_inner, (long long)hp->ssm_n_v, (long long)hp->ssm_state);

    int32_t recr[ST_MAX_LAYERS];
    int present;
    ST_TRY(get_uint_or_arr(r, "attention.recurrent_layers", 0, hp->n_layer_all, recr, &present));
    if (present) {
        for (int64_t i = 0; i < hp->n_layer_all; i++) hp->is_linear[i] = recr[i] != 0;
    } else {
        int64_t interval;
        ST_TRY(get_uint(r, "full_attention_interval", 0, 4, &interval, NULL));
        ST_TRY(require_positive(r, "full_attention_interval", interval));
        for (int64_t i = 0; i < hp->n_layer_all; i++)
            hp->is_linear[i] = i < hp->n_layer && (i + 1) % interval != 0;
    }
    for (int64_t i = hp->n_layer; i < hp->n_layer_all; i++) hp->is_linear[i] = 0;
    return ST_OK;
}

/* A UINT64 array of at least n_min entries, at most cap read (llama_model_loader::get_arr and the
 * qwen4exp loader's length check: a short array would leave a zero tail the hash silently uses). */
static st_status get_u64_arr(reader *r, const char *suffix, uint64_t n_min, uint64_t cap, uint64_t *out) {
    const st_gguf_value *v = find(r, suffix);
    if (!v) return missing(r);
    if (st_gguf_value_type(v) != ST_GGUF_ARRAY || st_gguf_array_type(v) != ST_GGUF_UINT64)
        return st_fail(ST_ERR_FORMAT, "%s: key '%s' must be an array of uint64", st_gguf_path(r->g), r->key);
    uint64_t len = st_gguf_array_len(v);
    if (len < n_min)
        return st_fail(ST_ERR_FORMAT, "%s: key '%s' has %llu entries, but at least %llu are required", st_gguf_path(r->g),
                       r->key, (unsigned long long)len, (unsigned long long)n_min);
    if (len > cap)
        return st_fail(ST_ERR_FORMAT, "%s: key '%s' has %llu entries, at most %llu are supported", st_gguf_path(r->g),
                       r->key, (unsigned long long)len, (unsigned long long)cap);
    for (uint64_t i = 0; i < len; i++) ST_TRY(st_gguf_array_uint(v, i, &out[i]));
    return ST_OK;
}

/* The PLE keys (present when ple.layers is): one layer, a linear-attention one (§3.2, ERRATA F16). */
static st_status load_ple(reader *r, st_hparams *hp) {
    const char *path = st_gguf_path(r->g);
    hp->ple_layer = -1;
    const st_gguf_value *v = find(r, "ple.layers");
    if (!v) return ST_OK;
    if (st_gguf_value_type(v) != ST_GGUF_ARRAY)
        return st_fail(ST_ERR_FORMAT, "%s: key '%s' must be an array", path, r->key);
    uint64_t n = st_gguf_array_len(v);
    if (n == 0) return ST_OK;
    if (n != 1)
        return st_fail(ST_ERR_UNSUPPORTED, "%s: key '%s' lists %llu layers, but only one PLE layer is supported", path,
                       r->key, (unsigned long long)n);
    int64_t il;
    ST_TRY(st_gguf_array_int(v, 0, &il));
    if (il < 0 || il >= hp->n_layer_all)
        return st_fail(ST_ERR_FORMAT, "%s: PLE layer %lld is out of range (block_count %lld)", path, (long long)il,
                       (long long)hp->n_layer_all);
    hp->ple_layer = (int32_t)il;
    int64_t eos, image;
    ST_TRY(get_uint(r, "ple.ngram_size", 1, 0, &hp->ple_ngram, NULL));
    ST_TRY(get_uint(r, "ple.heads_per_ngram", 1, 0, &hp->ple_heads_per_ngram, NULL));
    ST_TRY(get_uint(r, "ple.conv_kernel", 1, 0, &hp->ple_conv_kernel, NULL));
    ST_TRY(get_uint(r, "ple.eos_token_id", 1, 0, &eos, NULL));
    ST_TRY(get_uint(r, "ple.image_token_id", 0, 0, &image, NULL));
    ST_TRY(get_uint(r, "embedding_length_per_layer_input", 1, 0, &hp->ple_dim, NULL));
    ST_TRY(require_positive(r, "ple.conv_kernel", hp->ple_conv_kernel));
    ST_TRY(require_positive(r, "embedding_length_per_layer_input", hp->ple_dim));
    if (eos > INT32_MAX || image > INT32_MAX)
        return st_fail(ST_ERR_FORMAT, "%s: the PLE eos/image token id does not fit a token id", path);
    hp->ple_eos = (int32_t)eos;
    hp->ple_image = (int32_t)image;
    if (hp->ple_ngram < 2 || hp->ple_ngram > ST_PLE_MAX_NGRAM)
        return st_fail(ST_ERR_FORMAT, "%s: PLE n-gram size %lld is out of range 2..%d", path, (long long)hp->ple_ngram,
                       ST_PLE_MAX_NGRAM);
    hp->ple_n_heads = (hp->ple_ngram - 1) * hp->ple_heads_per_ngram;
    if (hp->ple_n_heads <= 0 || hp->ple_n_heads > ST_PLE_MAX_HEADS)
        return st_fail(ST_ERR_FORMAT, "%s: PLE head count %lld is out of range 1..%d", path, (long long)hp->ple_n_heads,
                       ST_PLE_MAX_HEADS);
    uint64_t off[ST_PLE_MAX_HEADS] = {0}, size[ST_PLE_MAX_HEADS] = {0};
    ST_TRY(get_u64_arr(r, "ple.layer_multipliers", (uint64_t)hp->ple_ngram, ST_PLE_MAX_NGRAM, hp->ple_mult));
    ST_TRY(get_u64_arr(r, "ple.head_offsets", (uint64_t)hp->ple_n_heads, ST_PLE_MAX_HEADS, off));
    ST_TRY(get_u64_arr(r, "ple.head_vocab_sizes", (uint64_t)hp->ple_n_heads, ST_PLE_MAX_HEADS, size));
    for (int64_t h = 0; h < hp->ple_n_heads; h++) {
        if (size[h] == 0 || off[h] > INT32_MAX || size[h] > INT32_MAX || off[h] + size[h] > INT32_MAX)
            return st_fail(ST_ERR_FORMAT, "%s: PLE head %lld range (offset %llu, size %llu) does not fit the int32 row index",
                           path, (long long)h, (unsigned long long)off[h], (unsigned long long)size[h]);
        hp->ple_offset[h] = (uint32_t)off[h];
        hp->ple_size[h] = (uint32_t)size[h];
    }
    return ST_OK;
}

/* qwen4exp's own keys (§3.2): hyper-connections, the QSA indexer, compress ratios, PLE. */
static st_status load_qwen4exp(reader *r, st_hparams *hp) {
    ST_TRY(get_uint(r, "hyper_connection.count", 1, 0, &hp->n_hc, NULL));
    ST_TRY(get_uint(r, "hyper_connection.low_rank", 1, 0, &hp->hc_rank, NULL));
    if (hp->n_hc <= 1) {
        snprintf(r->key, sizeof r->key, "%s.hyper_connection.count", r->arch);
        return st_fail(ST_ERR_FORMAT, "%s: key '%s' is %lld, must be greater than one", st_gguf_path(r->g), r->key,
                       (long long)hp->n_hc);
    }
    ST_TRY(require_positive(r, "hyper_connection.low_rank", hp->hc_rank));
    ST_TRY(get_uint(r, "attention.indexer.head_count", 1, 0, &hp->idx_n_head, NULL));
    ST_TRY(get_uint(r, "attention.indexer.key_length", 1, 0, &hp->idx_dim, NULL));
    ST_TRY(get_uint(r, "attention.indexer.top_k", 1, 0, &hp->idx_top_k, NULL));
    ST_TRY(require_positive(r, "attention.indexer.head_count", hp->idx_n_head));
    ST_TRY(require_positive(r, "attention.indexer.key_length", hp->idx_dim));
    ST_TRY(require_positive(r, "attention.indexer.top_k", hp->idx_top_k));
    if (hp->idx_dim < hp->n_rot)
        return st_fail(ST_ERR_FORMAT, "%s: attention.indexer.key_length %lld is below the rotary width %lld (pooled keys rotate n_rot dims)",
                       st_gguf_path(r->g), (long long)hp->idx_dim, (long long)hp->n_rot);
    memset(hp->compress_ratio, 0, sizeof hp->compress_ratio);
    ST_TRY(get_uint_or_arr(r, "attention.compress_ratios", 0, hp->n_layer_all, hp->compress_ratio, NULL));
    for (int64_t i = 0; i < hp->n_layer_all; i++)
        if (hp->compress_ratio[i] > 64)
            return st_fail(ST_ERR_UNSUPPORTED, "%s: compress ratio %d of layer %lld exceeds 64", st_gguf_path(r->g),
                           hp->compress_ratio[i], (long long)i);
    ST_TRY(load_ple(r, hp));
    if (hp->ple_layer >= 0 && !hp->is_linear[hp->ple_layer])
        return st_fail(ST_ERR_FORMAT, "%s: PLE layer %d is not a linear attention layer", st_gguf_path(r->g), hp->ple_layer);
    return ST_OK;
}

static st_status load_moe_widths(reader *r, st_hparams *hp, int with_shared) {
    int32_t ff_exp[ST_MAX_LAYERS] = {0};
    ST_TRY(get_uint_or_arr(r, "expert_feed_forward_length", 0, hp->n_layer_all, ff_exp, NULL));
    if (hp->n_expert <= 0) {
        snprintf(r->key, sizeof r->key, "%s.expert_count", r->arch);
        return st_fail(ST_ERR_FORMAT, "%s: key '%s' is absent or 0", st_gguf_path(r->g), r->key);
    }
    if (hp->n_expert_used[0] <= 0) {
        snprintf(r->key, sizeof r->key, "%s.expert_used_count", r->arch);
        return st_fail(ST_ERR_FORMAT, "%s: key '%s' is absent or 0", st_gguf_path(r->g), r->key);
    }
    /* llama.cpp uses the layer-0 value everywhere. */
    hp->n_ff_exp = ff_exp[0] ? ff_exp[0] : hp->n_ff[0] / hp->n_expert_used[0];
    if (with_shared) {
        int64_t sh;
        ST_TRY(get_uint(r, "expert_shared_feed_forward_length", 0, 0, &sh, NULL));
        hp->n_ff_shexp = sh ? sh : hp->n_ff[0];
    }
    if (hp->n_ff_exp <= 0)
        return st_fail(ST_ERR_FORMAT, "%s: the expert width is 0 (expert_feed_forward_length and feed_forward_length absent)",
                       st_gguf_path(r->g));
    return ST_OK;
}

st_status st_hparams_load(const st_gguf *g, st_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    hp->ple_layer = -1;
    const char *arch;
    size_t arch_len;
    if (!st_gguf_find(g, "general.architecture"))
        return st_fail(ST_ERR_FORMAT, "%s: key 'general.architecture' is required but absent", st_gguf_path(g));
    ST_TRY(st_gguf_get_str(g, "general.architecture", &arch, &arch_len));
    int found = 0;
    for (size_t i = 0; i < sizeof arch_names / sizeof arch_names[0]; i++) {
        if (strlen(arch_names[i].name) == arch_len && !memcmp(arch_names[i].name, arch, arch_len)) {
            hp->arch = arch_names[i].arch;
            hp->arch_name = arch_names[i].name;
            found = 1;
        }
    }
    if (!found)
        return st_fail(ST_ERR_UNSUPPORTED, "%s: architecture '%.*s' is not supported (qwen3, qwen3moe, qwen35, qwen35moe, qwen3next, qwen4exp are)",
                       st_gguf_path(g), (int)arch_len, arch);

    reader r = {.g = g, .arch = hp->arch_name};
    ST_TRY(load_common(&r, hp));

    switch (hp->arch) {
    case ST_ARCH_QWEN3:
    case ST_ARCH_QWEN3MOE:
        hp->rope_kind = ST_ROPE_NEOX;
        if (hp->n_rot != hp->head_dim)
            return st_fail(ST_ERR_FORMAT, "%s: rope.dimension_count %lld must equal the head size %lld for %s",
                           st_gguf_path(g), (long long)hp->n_rot, (long long)hp->head_dim, hp->arch_name);
        if (hp->arch == ST_ARCH_QWEN3MOE) ST_TRY(load_moe_widths(&r, hp, 0));
        break;
    case ST_ARCH_QWEN35:
    case ST_ARCH_QWEN35MOE:
    case ST_ARCH_QWEN4EXP: {
        hp->rope_kind = ST_ROPE_IMROPE;
        int32_t sec[4];
        ST_TRY(get_uint_or_arr(&r, "rope.dimension_sections", 1, 4, sec, NULL));
        memcpy(hp->rope_sections, sec, sizeof sec);
        if (sec[0] + sec[1] + sec[2] <= 0)
            return st_fail(ST_ERR_FORMAT, "%s: key '%s.rope.dimension_sections' has no t, h or w section", st_gguf_path(g), hp->arch_name);
        ST_TRY(load_hybrid(&r, hp));
        if (hp->arch != ST_ARCH_QWEN35) ST_TRY(load_moe_widths(&r, hp, 1));
        if (hp->arch == ST_ARCH_QWEN4EXP) ST_TRY(load_qwen4exp(&r, hp));
        break;
    }
    case ST_ARCH_QWEN3NEXT:
        hp->rope_kind = ST_ROPE_NEOX;
        hp->gdn_grouped = 1;
        ST_TRY(load_hybrid(&r, hp));
        ST_TRY(load_moe_widths(&r, hp, 1));
        break;
    }
    if (!st_hp_is_moe(hp))
        for (int64_t i = 0; i < hp->n_layer; i++)
            if (hp->n_ff[i] <= 0)
                return st_fail(ST_ERR_FORMAT, "%s: key '%s.feed_forward_length' is absent or 0 for layer %lld",
                               st_gguf_path(g), hp->arch_name, (long long)i);

    const st_gguf_value *tokens = st_gguf_find(g, "tokenizer.ggml.tokens");
    if (tokens && st_gguf_value_type(tokens) == ST_GGUF_ARRAY) hp->n_vocab = (int64_t)st_gguf_array_len(tokens);
    return ST_OK;
}
