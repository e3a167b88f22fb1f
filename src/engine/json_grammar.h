/* json_grammar.h: response_format json_object as a constraint on the sampler.
 *
 * Three layers:
 *   st_json_state     a byte-level pushdown automaton: which byte strings are a prefix of
 *                     [ws] [<think> ... </think>] [ws] OBJECT [ws], where OBJECT is one JSON object
 *                     (RFC 8259: strings with escapes and surrogate pairs checked, UTF-8 checked,
 *                     numbers, literals, nesting up to ST_JSON_MAX_DEPTH). The optional think block
 *                     is the reasoning a Qwen model writes before its answer: the constraint
 *                     applies to the answer after it.
 *   st_json_vocab     per model, built once: every token's bytes (from the tokenizer), its kind
 *                     (text, a think tag, end of generation, or a token never allowed) and two
 *                     precomputed sets, the tokens that leave a plain string state as it is and
 *                     those that leave a think block as it is (most of a vocabulary, so the mask
 *                     in those states walks only the rest).
 *   st_json_constraint the automaton's current state over a vocabulary: whether one token may come
 *                     next (a walk of its bytes), the mask of every token (for when the sampler's
 *                     pick is refused), and accepting a token. End of generation is allowed only
 *                     when the object is complete. Given the tokens left (max_tokens), it also
 *                     keeps the object closable within them, so a reply cut short still parses.
 *
 * The automaton knows no tokens; the vocabulary knows no JSON. Neither allocates per byte. */
#ifndef ST_ENGINE_JSON_GRAMMAR_H
#define ST_ENGINE_JSON_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

/* Containers open at once; one more is refused (the server's request nesting limit is 64 too). */
#define ST_JSON_MAX_DEPTH 64

typedef struct st_json_state {
    uint8_t mode;   /* where in the grammar (json_grammar.c) */
    uint8_t sub;    /* progress inside a mode: literal or tag bytes matched, UTF-8 bytes left, hex digits */
    uint8_t aux;    /* which literal, the UTF-8 lead byte, the kind of a \u escape */
    uint8_t flags;  /* the string is a key; a low surrogate must follow */
    uint8_t depth;  /* open containers */
    uint8_t pad[3]; /* zero, so two states compare with memcmp */
    uint16_t ws;    /* consecutive whitespace bytes (bounded, so a model cannot pad forever) */
    uint16_t pad2;
    uint64_t stack; /* bit i set: the container at depth i+1 is an array */
} st_json_state;

/* The state before any reply byte. */
void st_json_init(st_json_state *s);
/* Feeds bytes; returns 1 and advances when all are a valid continuation, else 0 with *s unchanged. */
int st_json_feed(st_json_state *s, const char *bytes, size_t n);
/* Whether the reply may end here: the object is closed. */
int st_json_complete(const st_json_state *s);
/* The bytes one fixed way of finishing from s takes (0 when complete): each state has a byte that
 * lowers it by exactly one, so it bounds the single-byte tokens needed to close the object. */
int st_json_close_cost(const st_json_state *s);

typedef struct st_tokenizer st_tokenizer;
typedef struct st_json_vocab st_json_vocab;

/* Builds the table of n_vocab tokens (ids past the tokenizer's are never allowed). The tokenizer
 * must outlive the table (the bytes are its pieces). */
st_status st_json_vocab_new(const st_tokenizer *tok, int32_t n_vocab, st_json_vocab **out);
void st_json_vocab_free(st_json_vocab *v);
int32_t st_json_vocab_size(const st_json_vocab *v);

typedef struct st_json_constraint st_json_constraint;

/* A constraint at the start of a reply whose first bytes (forced by the prompt) are prefix: the
 * text after the last "<|im_start|>ROLE\n" of prompt (ChatML), e.g. "<think>\n" or an empty think
 * block and "{". With no <|im_start|> in the prompt the reply starts empty. ST_ERR_INVALID when
 * that text is not a valid start. */
st_status st_json_constraint_new(const st_json_vocab *v, const int32_t *prompt, size_t n_prompt, st_json_constraint **out);
/* The same with a schema (json_schema.h; NULL: any object): the reply must be the schema's object,
 * or in tool-call mode the call. The schema must outlive the constraint. No budget applies. */
typedef struct st_json_schema st_json_schema;
st_status st_json_constraint_new_schema(const st_json_vocab *v, const st_json_schema *schema, const int32_t *prompt, size_t n_prompt,
                                        st_json_constraint **out);
void st_json_constraint_free(st_json_constraint *c);
/* Whether token may come next. */
int st_json_constraint_allows(const st_json_constraint *c, int32_t token);
/* Sets logits[t] = -INFINITY for every token t that may not come next. Returns the number allowed
 * (0: nothing can continue; the vocabulary lacks the bytes the grammar needs). */
int32_t st_json_constraint_mask(st_json_constraint *c, float *logits);
/* A bound on the tokens the reply may still have (max_tokens; -1: none, the default). With one,
 * a token is allowed only if the object can still be closed in the tokens left after it (by
 * st_json_close_cost), so a reply cut by max_tokens still ends in a complete object when the
 * bound leaves room to close it; with too little room each token must come closer to the end.
 * Accepting a token counts it. */
void st_json_constraint_set_budget(st_json_constraint *c, int64_t tokens);
/* Advances past token; ST_ERR_INVALID (state unchanged) if it may not come next. */
st_status st_json_constraint_accept(st_json_constraint *c, int32_t token);
int st_json_constraint_complete(const st_json_constraint *c);
const st_json_state *st_json_constraint_state(const st_json_constraint *c);

#endif
