/* hf_tokenizer.c: a Hugging Face tokenizer.json -> GGUF tokenizer keys, the way llama.cpp's
 * convert_hf_to_gguf.py (get_vocab_base, gguf.SpecialVocab) does it for Qwen:
 *   - ids 0..n-1 in order; the model's vocab and the added tokens together, missing ids become
 *     "[PAD{i}]" of type unused;
 *   - added tokens: control if marked special or if their text looks special (<|...|>, <｜...｜>,
 *     <pad>, <mask>, <unused...>), else user-defined (with U+2581 turned into a space);
 *   - merges as "left right", a space inside a part written as U+0120 (new-style pair arrays);
 *   - special ids and the chat template from tokenizer_config.json beside the file, if any. */
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gguf/gguf.h"
#include "text/hf_tokenizer.h"
#include "text/tokenizer.h"

typedef struct vocab_build {
    int64_t n;
    const char **text;   /* borrowed from the JSON, or from `owned` */
    int32_t *type;
    char **owned;        /* strings this file allocated (PAD names, rewritten added tokens) */
} vocab_build;

static void vocab_free(vocab_build *v) {
    if (v->owned) for (int64_t i = 0; i < v->n; i++) free(v->owned[i]);
    free(v->owned);
    free(v->text);
    free(v->type);
}

static int starts_ends(const char *s, const char *pre, const char *suf) {
    size_t n = strlen(s), a = strlen(pre), b = strlen(suf);
    return n >= a + b && memcmp(s, pre, a) == 0 && memcmp(s + n - b, suf, b) == 0;
}

static int looks_special(const char *s) {
    return strcmp(s, "<pad>") == 0 || strcmp(s, "<mask>") == 0 || strcmp(s, "<2mass>") == 0 ||
           strcmp(s, "[@BOS@]") == 0 || starts_ends(s, "<|", "|>") ||
           starts_ends(s, "<\xef\xbd\x9c", "\xef\xbd\x9c>") || starts_ends(s, "<unused", ">");
}

/* U+2581 (the SentencePiece space) -> ' ', into a new string */
static char *unescape_spm_space(const char *s) {
    char *o = malloc(strlen(s) + 1);
    if (!o) return NULL;
    size_t j = 0;
    for (size_t i = 0; s[i];) {
        if ((unsigned char)s[i] == 0xE2 && (unsigned char)s[i + 1] == 0x96 && (unsigned char)s[i + 2] == 0x81) {
            o[j++] = ' ';
            i += 3;
        } else {
            o[j++] = s[i++];
        }
    }
    o[j] = 0;
    return o;
}

static st_status fail_json(const char *path, const char *what) {
    return st_fail(ST_ERR_FORMAT, "%s: %s", path, what);
}

static st_status collect_vocab(const char *path, json_t *root, int64_t n_vocab, vocab_build *v) {
    json_t *model = json_object_get(root, "model");
    json_t *type = json_object_get(model, "type");
    if (!json_is_object(model)) return fail_json(path, "no \"model\" object");
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "BPE") != 0))
        return st_fail(ST_ERR_UNSUPPORTED, "%s: model.type is '%s', only BPE is supported", path,
                       json_is_string(type) ? json_string_value(type) : "(not a string)");
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab)) return fail_json(path, "model.vocab is not an object");
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_array(added)) return fail_json(path, "added_tokens is not an array");

    int64_t max_id = -1;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) > INT32_MAX - 1)
            return st_fail(ST_ERR_FORMAT, "%s: model.vocab['%s'] is not a valid id", path, key);
        if (json_integer_value(val) > max_id) max_id = json_integer_value(val);
    }
    size_t i;
    json_array_foreach(added, i, val) {
        json_t *id = json_object_get(val, "id"), *content = json_object_get(val, "content");
        if (!json_is_integer(id) || !json_is_string(content) || json_integer_value(id) < 0 ||
            json_integer_value(id) > INT32_MAX - 1)
            return st_fail(ST_ERR_FORMAT, "%s: added_tokens[%zu] lacks a valid id or content", path, i);
        if (json_integer_value(id) > max_id) max_id = json_integer_value(id);
    }
    int64_t n = max_id + 1;
    if (n_vocab > 0 && n_vocab < n)
        return st_fail(ST_ERR_INVALID, "%s: the tokenizer has %lld ids, more than the requested vocabulary of %lld",
                       path, (long long)n, (long long)n_vocab);
    if (n_vocab > n) n = n_vocab;
    if (n <= 0) return fail_json(path, "the vocabulary is empty");

    v->n = n;
    v->text = calloc((size_t)n, sizeof *v->text);
    v->type = calloc((size_t)n, sizeof *v->type);
    v->owned = calloc((size_t)n, sizeof *v->owned);
    if (!v->text || !v->type || !v->owned) return st_fail(ST_ERR_NOMEM, "%s: out of memory for %lld tokens", path, (long long)n);
    json_object_foreach(vocab, key, val) {
        int64_t id = json_integer_value(val);
        v->text[id] = key;
        v->type[id] = ST_TOKEN_NORMAL;
    }
    json_array_foreach(added, i, val) {
        int64_t id = json_integer_value(json_object_get(val, "id"));
        const char *content = json_string_value(json_object_get(val, "content"));
        int special = json_is_true(json_object_get(val, "special"));
        free(v->owned[id]);
        v->owned[id] = NULL;
        if (special || looks_special(content)) {
            v->text[id] = content;
            v->type[id] = ST_TOKEN_CONTROL;
        } else {
            v->owned[id] = unescape_spm_space(content);
            if (!v->owned[id]) return st_fail(ST_ERR_NOMEM, "%s: out of memory", path);
            v->text[id] = v->owned[id];
            v->type[id] = ST_TOKEN_USER_DEFINED;
        }
    }
    for (int64_t k = 0; k < n; k++) {
        if (v->text[k]) continue;
        char buf[32];
        snprintf(buf, sizeof buf, "[PAD%lld]", (long long)k);
        v->owned[k] = strdup(buf);
        if (!v->owned[k]) return st_fail(ST_ERR_NOMEM, "%s: out of memory", path);
        v->text[k] = v->owned[k];
        v->type[k] = ST_TOKEN_UNUSED;
    }
    return ST_OK;
}

/* Appends s to o with each ' ' written as U+0120 (Ġ). */
static size_t put_part(char *o, const char *s) {
    size_t j = 0;
    for (; *s; s++) {
        if (*s == ' ') { o[j++] = (char)0xC4; o[j++] = (char)0xA0; }
        else o[j++] = *s;
    }
    return j;
}

static st_status add_merges(const char *path, json_t *root, st_gguf_writer *w) {
    json_t *merges = json_object_get(json_object_get(root, "model"), "merges");
    if (!json_is_array(merges)) return fail_json(path, "model.merges is not an array");
    size_t n = json_array_size(merges);
    const char **strs = calloc(n ? n : 1, sizeof *strs);
    char **owned = calloc(n ? n : 1, sizeof *owned);
    st_status s = strs && owned ? ST_OK : st_fail(ST_ERR_NOMEM, "%s: out of memory for %zu merges", path, n);
    for (size_t i = 0; i < n && s == ST_OK; i++) {
        json_t *m = json_array_get(merges, i);
        if (json_is_string(m)) {
            strs[i] = json_string_value(m);
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            const char *a = json_string_value(json_array_get(m, 0)), *b = json_string_value(json_array_get(m, 1));
            owned[i] = malloc(2 * (strlen(a) + strlen(b)) + 2);
            if (!owned[i]) { s = st_fail(ST_ERR_NOMEM, "%s: out of memory", path); break; }
            size_t k = put_part(owned[i], a);
            owned[i][k++] = ' ';
            k += put_part(owned[i] + k, b);
            owned[i][k] = 0;
            strs[i] = owned[i];
        } else {
            s = st_fail(ST_ERR_FORMAT, "%s: model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", path, i);
        }
    }
    if (s == ST_OK) s = st_gguf_set_str_array(w, "tokenizer.ggml.merges", strs, n);
    if (owned) for (size_t i = 0; i < n; i++) free(owned[i]);
    free(owned);
    free(strs);
    return s;
}

static int64_t find_text(const vocab_build *v, const char *text) {
    for (int64_t i = v->n - 1; i >= 0; i--)
        if (strcmp(v->text[i], text) == 0) return i;
    return -1;
}

/* tokenizer_config.json's "eos_token" etc. is a string, {"content": ...}, or null */
static const char *config_token(json_t *cfg, const char *key) {
    json_t *t = json_object_get(cfg, key);
    if (json_is_string(t)) return json_string_value(t);
    if (json_is_object(t) && json_is_string(json_object_get(t, "content"))) return json_string_value(json_object_get(t, "content"));
    return NULL;
}

static json_t *load_config_beside(const char *json_path) {
    char *dup = strdup(json_path);
    if (!dup) return NULL;
    char *dir = dirname(dup);
    size_t n = strlen(dir) + 32;
    char *p = malloc(n);
    json_t *cfg = NULL;
    if (p) {
        snprintf(p, n, "%s/tokenizer_config.json", dir);
        cfg = json_load_file(p, 0, NULL);
        free(p);
    }
    free(dup);
    return cfg;
}

static st_status set_id(st_gguf_writer *w, const char *key, int64_t id) {
    return id >= 0 ? st_gguf_set_u32(w, key, (uint32_t)id) : ST_OK;
}

static st_status add_specials(const vocab_build *v, json_t *cfg, st_gguf_writer *w) {
    int64_t eot = find_text(v, "<|endoftext|>"), im_end = find_text(v, "<|im_end|>");
    int64_t bos = eot, eos = im_end >= 0 ? im_end : eot, pad = eot;
    int add_bos = 0;
    if (cfg) {
        const char *t;
        if ((t = config_token(cfg, "bos_token"))) bos = find_text(v, t);
        if ((t = config_token(cfg, "eos_token"))) eos = find_text(v, t);
        if ((t = config_token(cfg, "pad_token"))) pad = find_text(v, t);
        add_bos = json_is_true(json_object_get(cfg, "add_bos_token"));
    }
    ST_TRY(set_id(w, "tokenizer.ggml.bos_token_id", bos));
    ST_TRY(set_id(w, "tokenizer.ggml.eos_token_id", eos));
    ST_TRY(set_id(w, "tokenizer.ggml.padding_token_id", pad));
    ST_TRY(st_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos));
    json_t *tmpl = cfg ? json_object_get(cfg, "chat_template") : NULL;
    if (json_is_string(tmpl)) ST_TRY(st_gguf_set_str(w, "tokenizer.chat_template", json_string_value(tmpl)));
    return ST_OK;
}

st_status st_hf_tokenizer_to_gguf_padded(const char *json_path, st_gguf_writer *w, const char *pre,
                                         int64_t n_vocab, int64_t *n_vocab_out) {
    if (!pre) pre = "qwen2";
    st_pretok pt;
    ST_TRY(st_pretok_from_name(pre, strlen(pre), &pt));
    json_error_t err;
    json_t *root = json_load_file(json_path, 0, &err);
    if (!root)
        return st_fail(ST_ERR_FORMAT, "%s: line %d column %d: %s", json_path, err.line, err.column, err.text);
    vocab_build v = {0};
    json_t *cfg = NULL;
    st_status s = collect_vocab(json_path, root, n_vocab, &v);
    if (s == ST_OK) s = st_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (s == ST_OK) s = st_gguf_set_str(w, "tokenizer.ggml.pre", pre);
    if (s == ST_OK) s = st_gguf_set_str_array(w, "tokenizer.ggml.tokens", v.text, (uint64_t)v.n);
    if (s == ST_OK) s = st_gguf_set_array(w, "tokenizer.ggml.token_type", ST_GGUF_INT32, v.type, (uint64_t)v.n);
    if (s == ST_OK) s = add_merges(json_path, root, w);
    if (s == ST_OK) {
        cfg = load_config_beside(json_path);
        s = add_specials(&v, cfg, w);
    }
    if (s == ST_OK && n_vocab_out) *n_vocab_out = v.n;
    vocab_free(&v);
    json_decref(cfg);
    json_decref(root);
    return s;
}

st_status st_hf_tokenizer_to_gguf(const char *json_path, st_gguf_writer *w, const char *pre, int64_t *n_vocab_out) {
    return st_hf_tokenizer_to_gguf_padded(json_path, w, pre, 0, n_vocab_out);
}
