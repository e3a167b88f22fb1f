/* tokenizer_internal.h (internal to src/text): the tokenizer's tables, shared by tokenizer.c
 * (building, BPE, detokenizing) and tokenizer_gguf.c (reading the GGUF keys). */
#ifndef ST_TEXT_TOKENIZER_INTERNAL_H
#define ST_TEXT_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "text/tokenizer.h"

typedef struct st_pretokenizer st_pretokenizer;

typedef struct st_merge { int32_t left, right, rank, result; } st_merge; /* rank < 0: empty slot */

struct st_tokenizer {
    int32_t n_tokens;
    st_pretok pre;
    char *arena;               /* every token's text (NUL-terminated) then every piece */
    size_t *tok_off, *tok_len; /* stored text */
    size_t *piece_off, *piece_len; /* detokenized bytes */
    uint8_t *type;             /* st_token_type, after llama.cpp's text-based overrides */
    uint8_t *eog;              /* 1 for end-of-generation tokens */
    int32_t *tok_table;        /* text -> id, open addressing, -1 empty */
    size_t tok_cap;
    st_merge *merge_table;     /* (left, right) -> rank, result */
    size_t merge_cap;
    int64_t n_merges_skipped;
    int32_t *special;          /* control/user-defined/unknown ids, longest text first */
    int32_t n_special;
    int32_t byte_id[256];      /* the single-character token of each byte, or -1 */
    uint32_t byte_to_cp[256];
    int16_t cp_to_byte[512];
    int32_t bos, eos, eot, eom, pad;
    int add_bos, add_eos;
    st_pretokenizer *pretok;
};

#endif
