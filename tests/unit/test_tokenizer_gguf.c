/* test_tokenizer_gguf.c: tokenizer.json -> GGUF keys (hf_tokenizer) -> GGUF file -> tokenizer
 * (st_tokenizer_load), on the small tests/data/tokenizer/tiny_tokenizer.json: the token types the
 * converter would write, [PAD] fillers, merge strings, special ids, and the refusals of files
 * whose tokenizer we do not run (ST_ERR_UNSUPPORTED, so the caller can go on with ids). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "test.h"
#include "gguf/gguf.h"
#include "text/hf_tokenizer.h"
#include "text/tokenizer.h"

static char json_path[4096];

static st_status write_file(const char *path, const char *model, const char *pre, int with_tokens, int64_t pad_to) {
    st_gguf_writer *w;
    ST_TRY(st_gguf_writer_new(&w));
    st_status s = st_gguf_set_str(w, "general.architecture", "qwen3");
    if (s == ST_OK && model) {
        if (strcmp(model, "gpt2") == 0 && with_tokens) {
            s = st_hf_tokenizer_to_gguf_padded(json_path, w, pre ? pre : "qwen2", pad_to, NULL);
        } else {
            s = st_gguf_set_str(w, "tokenizer.ggml.model", model);
            if (s == ST_OK && pre) s = st_gguf_set_str(w, "tokenizer.ggml.pre", pre);
        }
    }
    if (s == ST_OK) s = st_gguf_writer_begin(w, path);
    if (s == ST_OK) s = st_gguf_writer_finish(w);
    st_gguf_writer_free(w);
    return s;
}

static st_status load(const char *path, st_tokenizer **t) {
    st_gguf *g = NULL;
    *t = NULL;
    ST_TRY(st_gguf_open(path, &g));
    st_status s = st_tokenizer_load(g, t);
    st_gguf_close(g);  /* the tokenizer keeps copies of what it needs */
    return s;
}

static const char *str_at(const st_gguf *g, const char *key, uint64_t i, size_t *len) {
    const char *s = NULL;
    st_gguf_array_str(st_gguf_find(g, key), i, &s, len);
    return s;
}

int main(void) {
    const char *src = getenv("STRATA_SOURCE_DIR");
    snprintf(json_path, sizeof json_path, "%s/tests/data/tokenizer/tiny_tokenizer.json", src ? src : ".");
    const char *path = "test_tokenizer_gguf.gguf";

    /* the keys as written */
    CHECKF(write_file(path, "gpt2", "qwen2", 1, 0) == ST_OK, "%s", st_last_error());
    st_gguf *g = NULL;
    CHECKF(st_gguf_open(path, &g) == ST_OK, "%s", st_last_error());
    if (!g) return test_report("test_tokenizer_gguf");
    const char *s;
    size_t n;
    CHECK(st_gguf_get_str(g, "tokenizer.ggml.model", &s, &n) == ST_OK && n == 4 && memcmp(s, "gpt2", 4) == 0);
    CHECK(st_gguf_get_str(g, "tokenizer.ggml.pre", &s, &n) == ST_OK && n == 5 && memcmp(s, "qwen2", 5) == 0);
    const st_gguf_value *types = st_gguf_find(g, "tokenizer.ggml.token_type");
    CHECK(st_gguf_array_len(st_gguf_find(g, "tokenizer.ggml.tokens")) == 269);
    CHECK(types && st_gguf_array_type(types) == ST_GGUF_INT32 && st_gguf_array_len(types) == 269);
    int64_t ty[269] = {0};
    for (int i = 0; i < 269 && types; i++) st_gguf_array_int(types, (uint64_t)i, &ty[i]);
    int normal = 1;
    for (int i = 0; i < 262; i++) normal &= ty[i] == ST_TOKEN_NORMAL;
    CHECK(normal);
    CHECK(ty[262] == ST_TOKEN_CONTROL && ty[263] == ST_TOKEN_CONTROL && ty[264] == ST_TOKEN_CONTROL);
    CHECK(ty[265] == ST_TOKEN_USER_DEFINED);                  /* <think>: added, not special */
    CHECK(ty[266] == ST_TOKEN_CONTROL);                       /* <|fim_prefix|>: looks special */
    CHECK(ty[267] == ST_TOKEN_UNUSED);                        /* the gap */
    CHECK(ty[268] == ST_TOKEN_USER_DEFINED);
    s = str_at(g, "tokenizer.ggml.tokens", 267, &n);
    CHECK(s && n == 8 && memcmp(s, "[PAD267]", 8) == 0);
    s = str_at(g, "tokenizer.ggml.tokens", 268, &n);
    CHECK(s && n == 2 && memcmp(s, " x", 2) == 0);            /* U+2581 became a space */
    s = str_at(g, "tokenizer.ggml.merges", 0, &n);
    CHECK(s && n == 3 && memcmp(s, "h e", 3) == 0);
    s = str_at(g, "tokenizer.ggml.merges", 5, &n);
    CHECK(s && n == 5 && memcmp(s, "a \xc4\xa0" "b", 5) == 0); /* a space inside a part is written as U+0120 */
    int64_t id;
    CHECK(st_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &id) == ST_OK && id == 264);
    CHECK(st_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &id) == ST_OK && id == 262);
    CHECK(st_gguf_get_int(g, "tokenizer.ggml.padding_token_id", &id) == ST_OK && id == 262);
    int flag = 1;
    CHECK(st_gguf_value_bool(st_gguf_find(g, "tokenizer.ggml.add_bos_token"), &flag) == ST_OK && flag == 0);
    st_gguf_close(g);

    /* the tokenizer read back */
    st_tokenizer *t = NULL;
    CHECKF(load(path, &t) == ST_OK, "%s", st_last_error());
    if (t) {
        CHECK(st_tokenizer_n_vocab(t) == 269 && st_tokenizer_eos(t) == 264 && st_tokenizer_bos(t) == 262);
        CHECK(st_tokenizer_pre(t) == ST_PRETOK_QWEN2);
        const char *text = "hello <think> hello<|im_end|>";
        int32_t *ids;
        size_t k;
        CHECK(st_tokenize(t, text, strlen(text), 1, 1, &ids, &k) == ST_OK);
        int32_t want[] = {259, 32, 265, 260, 264}; /* hello, " " (byte 32), <think>, " hello" (Ġhello), <|im_end|> */
        CHECKF(k == 5 && memcmp(ids, want, sizeof want) == 0, "got %zu ids", k);
        free(ids);
        CHECK(st_tokenizer_is_eog(t, 264) && st_tokenizer_is_eog(t, 262) && !st_tokenizer_is_eog(t, 265));
        st_tokenizer_free(t);
    }

    /* padded to a model's vocabulary */
    CHECK(write_file(path, "gpt2", "qwen35", 1, 300) == ST_OK);
    CHECK(load(path, &t) == ST_OK && t && st_tokenizer_n_vocab(t) == 300 && st_tokenizer_pre(t) == ST_PRETOK_QWEN35);
    if (t) {
        size_t len;
        const char *txt = st_tokenizer_token_text(t, 299, &len);
        CHECK(txt && len == 8 && memcmp(txt, "[PAD299]", 8) == 0 && st_tokenizer_token_type(t, 299) == ST_TOKEN_UNUSED);
        st_tokenizer_free(t);
    }
    st_gguf_writer *w;
    CHECK(st_gguf_writer_new(&w) == ST_OK);
    CHECK(st_hf_tokenizer_to_gguf_padded(json_path, w, "qwen2", 100, NULL) == ST_ERR_INVALID);
    CHECK(st_hf_tokenizer_to_gguf(json_path, w, "llama-bpe", NULL) == ST_ERR_UNSUPPORTED);
    CHECK(st_hf_tokenizer_to_gguf("/nonexistent/tokenizer.json", w, NULL, NULL) == ST_ERR_FORMAT);
    st_gguf_writer_free(w);

    /* tokenizers we do not run: unsupported, with the reason */
    CHECK(write_file(path, "llama", "default", 0, 0) == ST_OK);
    CHECK(load(path, &t) == ST_ERR_UNSUPPORTED && !t);
    CHECKF(strstr(st_last_error(), "'llama'") != NULL, "%s", st_last_error());
    CHECK(write_file(path, "gpt2", "llama-bpe", 0, 0) == ST_OK);
    CHECK(load(path, &t) == ST_ERR_UNSUPPORTED);
    CHECKF(strstr(st_last_error(), "llama-bpe") != NULL, "%s", st_last_error());
    CHECK(write_file(path, "gpt2", NULL, 0, 0) == ST_OK);
    CHECK(load(path, &t) == ST_ERR_UNSUPPORTED);
    /* a supported pair whose token list is missing is a format error */
    CHECK(write_file(path, "gpt2", "qwen2", 0, 0) == ST_OK);
    CHECK(load(path, &t) == ST_ERR_FORMAT);
    CHECKF(strstr(st_last_error(), "tokenizer.ggml.tokens") != NULL, "%s", st_last_error());
    /* no tokenizer at all */
    CHECK(write_file(path, NULL, NULL, 0, 0) == ST_OK);
    CHECK(load(path, &t) == ST_ERR_FORMAT);
    unlink(path);
    return test_report("test_tokenizer_gguf");
}
