/* tokenizer_gguf.c: reads a GGUF's tokenizer.ggml.* keys (MODELS.md §9.1) into an st_vocab_desc
 * and builds the tokenizer. Only "gpt2" (byte-level BPE) with the qwen2/qwen35 pre-tokenizers is
 * supported; anything else is ST_ERR_UNSUPPORTED so the caller can go on with token ids. */
#include <stdlib.h>
#include <string.h>
#include "gguf/gguf.h"
#include "text/tokenizer.h"

static int name_is(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static st_status get_id(const st_gguf *g, const char *key, int32_t *out) {
    *out = -1;
    const st_gguf_value *v = st_gguf_find(g, key);
    if (!v) return ST_OK;
    int64_t x;
    ST_TRY(st_gguf_value_int(v, &x));
    if (x < -1 || x > INT32_MAX) return st_fail(ST_ERR_FORMAT, "tokenizer: key '%s' = %lld is not a token id", key, (long long)x);
    *out = (int32_t)x;
    return ST_OK;
}

static st_status get_flag(const st_gguf *g, const char *key, int *out) {
    *out = 0;
    const st_gguf_value *v = st_gguf_find(g, key);
    return v ? st_gguf_value_bool(v, out) : ST_OK;
}

static st_status string_array(const st_gguf_value *v, const char *key, uint64_t *n,
                              const char ***strs, size_t **lens) {
    if (st_gguf_value_type(v) != ST_GGUF_ARRAY || st_gguf_array_type(v) != ST_GGUF_STRING)
        return st_fail(ST_ERR_FORMAT, "tokenizer: key '%s' is not an array of strings", key);
    *n = st_gguf_array_len(v);
    *strs = malloc(sizeof **strs * (*n ? *n : 1));
    *lens = malloc(sizeof **lens * (*n ? *n : 1));
    if (!*strs || !*lens) return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory for '%s'", key);
    for (uint64_t i = 0; i < *n; i++) ST_TRY(st_gguf_array_str(v, i, &(*strs)[i], &(*lens)[i]));
    return ST_OK;
}

static st_status read_desc(const st_gguf *g, st_vocab_desc *d, const char ***toks, size_t **tlens,
                           int32_t **types, const char ***merges, size_t **mlens) {
    const char *model, *pre;
    size_t model_len, pre_len;
    ST_TRY(st_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len));
    if (!name_is(model, model_len, "gpt2"))
        return st_fail(ST_ERR_UNSUPPORTED, "tokenizer: tokenizer.ggml.model '%.*s' is not supported (only 'gpt2', byte-level BPE)",
                       (int)model_len, model);
    if (!st_gguf_find(g, "tokenizer.ggml.pre"))
        return st_fail(ST_ERR_UNSUPPORTED, "tokenizer: tokenizer.ggml.pre is absent (qwen2 or qwen35 is needed)");
    ST_TRY(st_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len));
    ST_TRY(st_pretok_from_name(pre, pre_len, &d->pre));

    const st_gguf_value *tv = st_gguf_find(g, "tokenizer.ggml.tokens");
    if (!tv) return st_fail(ST_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens is absent");
    uint64_t n;
    ST_TRY(string_array(tv, "tokenizer.ggml.tokens", &n, toks, tlens));
    if (n == 0 || n > INT32_MAX) return st_fail(ST_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens has %llu entries", (unsigned long long)n);
    d->n_tokens = (int32_t)n;
    d->tokens = *toks;
    d->token_lens = *tlens;

    const st_gguf_value *ty = st_gguf_find(g, "tokenizer.ggml.token_type");
    if (ty) {
        if (st_gguf_value_type(ty) != ST_GGUF_ARRAY || st_gguf_array_len(ty) != n)
            return st_fail(ST_ERR_FORMAT, "tokenizer: tokenizer.ggml.token_type has %llu entries, tokens has %llu",
                           (unsigned long long)(st_gguf_value_type(ty) == ST_GGUF_ARRAY ? st_gguf_array_len(ty) : 0),
                           (unsigned long long)n);
        *types = malloc(sizeof **types * n);
        if (!*types) return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory");
        for (uint64_t i = 0; i < n; i++) {
            int64_t x;
            ST_TRY(st_gguf_array_int(ty, i, &x));
            (*types)[i] = (int32_t)(x < 0 || x > 6 ? -1 : x);
        }
        d->token_types = *types;
    }

    const st_gguf_value *mv = st_gguf_find(g, "tokenizer.ggml.merges");
    if (!mv) return st_fail(ST_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges is absent (a BPE vocabulary needs it)");
    uint64_t nm;
    ST_TRY(string_array(mv, "tokenizer.ggml.merges", &nm, merges, mlens));
    d->n_merges = (int64_t)nm;
    d->merges = *merges;
    d->merge_lens = *mlens;

    ST_TRY(get_id(g, "tokenizer.ggml.bos_token_id", &d->bos));
    ST_TRY(get_id(g, "tokenizer.ggml.eos_token_id", &d->eos));
    ST_TRY(get_id(g, "tokenizer.ggml.eot_token_id", &d->eot));
    ST_TRY(get_id(g, "tokenizer.ggml.eom_token_id", &d->eom));
    ST_TRY(get_id(g, "tokenizer.ggml.padding_token_id", &d->pad));
    ST_TRY(get_id(g, "tokenizer.ggml.unknown_token_id", &d->unk));
    /* llama.cpp's BPE defaults when the keys are absent: bos = eos = 11 */
    if (!st_gguf_find(g, "tokenizer.ggml.bos_token_id") && n > 11) d->bos = 11;
    if (!st_gguf_find(g, "tokenizer.ggml.eos_token_id") && n > 11) d->eos = 11;
    ST_TRY(get_flag(g, "tokenizer.ggml.add_bos_token", &d->add_bos));
    ST_TRY(get_flag(g, "tokenizer.ggml.add_eos_token", &d->add_eos));
    return ST_OK;
}

st_status st_tokenizer_load(const st_gguf *g, st_tokenizer **out) {
    *out = NULL;
    st_vocab_desc d;
    memset(&d, 0, sizeof d);
    const char **toks = NULL, **merges = NULL;
    size_t *tlens = NULL, *mlens = NULL;
    int32_t *types = NULL;
    st_status s = read_desc(g, &d, &toks, &tlens, &types, &merges, &mlens);
    if (s == ST_OK) s = st_tokenizer_build(&d, out);
    free(toks); free(tlens); free(types); free(merges); free(mlens);
    if (s != ST_OK && st_gguf_path(g)) st_fail_context(s, "%s: ", st_gguf_path(g));
    return s;
}
