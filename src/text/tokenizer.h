/* tokenizer.h: byte-level BPE (GPT-2 style, as llama.cpp's "gpt2" tokenizer model) read from a
 * GGUF's tokenizer.ggml.* keys, with the "qwen2" and "qwen35" pre-tokenizers.
 *
 * Tokenizing text: (1) if parse_special, the text is cut at every occurrence of a control,
 * user-defined or unknown token's text, longest texts first (without parse_special only
 * user-defined tokens are cut out); (2) each remaining fragment is split by the pre-tokenizer
 * regex; (3) each piece's bytes are mapped to GPT-2's byte-to-unicode characters and merged by
 * rank (lowest rank first, leftmost on ties); (4) the resulting symbols are the ids.
 *
 * Invalid UTF-8 in the input never fails, and is read as llama.cpp reads it: a lead byte with
 * enough continuation bytes is decoded without further checks (an overlong form becomes its
 * short encoding, a surrogate stays as its 3 bytes), and every other byte becomes U+FFFD on its
 * own ("\xE4\xB8x" gives two U+FFFD, then x). A 4-byte form above U+10FFFF (F5..F7 leads), on which
 * llama.cpp's encoder throws, becomes one U+FFFD here.
 *
 * Detokenizing: st_token_piece gives a token's bytes (control tokens only when asked); an
 * st_detok streams ids to text and never emits a split UTF-8 character.
 *
 * A tokenizer is read-only once built: any number of threads may tokenize with it at once. */
#ifndef ST_TEXT_TOKENIZER_H
#define ST_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

typedef struct st_gguf st_gguf;
typedef struct st_tokenizer st_tokenizer;

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
typedef enum st_token_type {
    ST_TOKEN_UNDEFINED = 0, ST_TOKEN_NORMAL = 1, ST_TOKEN_UNKNOWN = 2, ST_TOKEN_CONTROL = 3,
    ST_TOKEN_USER_DEFINED = 4, ST_TOKEN_UNUSED = 5, ST_TOKEN_BYTE = 6,
} st_token_type;

typedef enum st_pretok {
    ST_PRETOK_QWEN2 = 0,  /* Qwen2/Qwen3/Qwen3-Next: letters, single digits, symbols, spaces */
    ST_PRETOK_QWEN35,     /* Qwen3.5/3.6: as qwen2, combining marks count as letters */
} st_pretok;

/* Everything a tokenizer is built from, as arrays (what the GGUF keys hold). Strings are not
 * NUL-terminated; the builder copies what it keeps. */
typedef struct st_vocab_desc {
    int32_t n_tokens;
    const char *const *tokens;  /* token text in byte-to-unicode form */
    const size_t *token_lens;
    const int32_t *token_types; /* may be NULL: all normal */
    int64_t n_merges;
    const char *const *merges;  /* "left right" */
    const size_t *merge_lens;
    st_pretok pre;
    int32_t bos, eos, eot, eom, pad, unk; /* -1 when unset */
    int add_bos, add_eos;
} st_vocab_desc;

/* Reads tokenizer.ggml.*. ST_ERR_UNSUPPORTED (with a message) for a model other than "gpt2" or a
 * pre other than "qwen2"/"qwen35" (and their aliases); the caller may go on with token ids only.
 * ST_ERR_FORMAT for malformed keys. */
st_status st_tokenizer_load(const st_gguf *g, st_tokenizer **out);
st_status st_tokenizer_build(const st_vocab_desc *d, st_tokenizer **out);
void st_tokenizer_free(st_tokenizer *t);

/* Maps a pre name from tokenizer.ggml.pre; ST_ERR_UNSUPPORTED for others. */
st_status st_pretok_from_name(const char *name, size_t len, st_pretok *out);

/* Tokenizes text[0..len) into a growing array *ids (malloc'd; caller frees) of *n ids. Adds BOS
 * first (EOS last) when the vocabulary says so and add_special is set. */
st_status st_tokenize(const st_tokenizer *t, const char *text, size_t len, int add_special,
                      int parse_special, int32_t **ids, size_t *n);

int32_t st_tokenizer_n_vocab(const st_tokenizer *t);
st_pretok st_tokenizer_pre(const st_tokenizer *t);
int32_t st_tokenizer_bos(const st_tokenizer *t);   /* -1 if none */
int32_t st_tokenizer_eos(const st_tokenizer *t);
/* End of generation: eos, eot, eom and the tokens llama.cpp recognises by text (<|im_end|>,
 * <|endoftext|>, <|fim_pad|>, <|repo_name|>, <|file_sep|>, ...). */
int st_tokenizer_is_eog(const st_tokenizer *t, int32_t id);
st_token_type st_tokenizer_token_type(const st_tokenizer *t, int32_t id);
/* The stored text of a token (byte-to-unicode form for normal tokens); NULL if out of range. */
const char *st_tokenizer_token_text(const st_tokenizer *t, int32_t id, size_t *len);
/* The id of a token by its exact stored text, or -1. */
int32_t st_tokenizer_find(const st_tokenizer *t, const char *text, size_t len);

/* A token's bytes: normal tokens decoded from byte-to-unicode form; user-defined tokens as
 * stored; control and unknown tokens only when `special` (else empty); unused tokens empty.
 * Returns the length; the bytes stay valid as long as the tokenizer. Out-of-range: NULL, 0. */
const char *st_token_piece(const st_tokenizer *t, int32_t id, int special, size_t *len);

/* Whole-sequence detokenization into a malloc'd NUL-terminated string (invalid UTF-8 in the
 * pieces is kept as bytes, as llama.cpp does). */
st_status st_detokenize(const st_tokenizer *t, const int32_t *ids, size_t n, int special,
                        char **text, size_t *len);

/* Streaming detokenizer: push ids, get back only complete UTF-8. A character split across
 * tokens is held until its last byte arrives; a sequence that can never be valid is emitted as
 * U+FFFD at once; on flush a held incomplete tail becomes U+FFFD. */
typedef struct st_detok st_detok;
st_status st_detok_new(const st_tokenizer *t, int special, st_detok **out);
void st_detok_free(st_detok *d);
/* The text this id completes: *text and *len point into the decoder's buffer, valid until the
 * next call (often empty while a character is still split). */
st_status st_detok_push(st_detok *d, int32_t id, const char **text, size_t *len);
st_status st_detok_push_bytes(st_detok *d, const char *bytes, size_t n, const char **text, size_t *len);
void st_detok_flush(st_detok *d, const char **text, size_t *len);
void st_detok_reset(st_detok *d);

#endif
