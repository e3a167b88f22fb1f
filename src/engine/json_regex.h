/* json_regex.h: a JSON Schema "pattern" compiled to a DFA over the UTF-8 bytes of a string's
 * characters, which the schema layer of the JSON constraint (json_schema_walk.c) steps as a
 * string value is written.
 *
 * The regex language is the ECMA-262 subset JSON Schema recommends, without flags: literals,
 * escapes (\n \r \t \f \v \0 \cX \xHH \uHHHH, a surrogate pair of them, and identity escapes),
 * \d \D \w \W \s \S, classes with ranges and negation, '.', the anchors ^ and $, groups ((...),
 * (?:...), (?<name>...)), alternation, and the quantifiers ? * + {n} {n,} {n,m} (lazy or not,
 * which cannot matter for a yes/no match). As JSON Schema says, the match is a search: an
 * unanchored pattern may match anywhere in the string. Anything else (backreferences,
 * lookaround, \b, \p{...}) is refused with a message naming it.
 *
 * The DFA reads the bytes of the string's characters (escapes decoded: the schema layer feeds
 * the UTF-8 of the code point an escape stands for), one at a time. A string's length bounds
 * (minLength / maxLength, in characters) are folded in, as a count in the DFA's states, so that
 * every state kept can still reach an accepting one: the constraint never leaves a string that
 * cannot be finished. State 0 is the start; ST_JSON_RE_DEAD is no state. */
#ifndef ST_ENGINE_JSON_REGEX_H
#define ST_ENGINE_JSON_REGEX_H

#include <stddef.h>
#include <stdint.h>

#define ST_JSON_RE_DEAD 0xFFFF
/* The most states a compiled pattern may have (a row of n_classes entries each). */
#define ST_JSON_RE_MAX_STATES 32768

typedef struct st_json_regex {
    uint8_t cls[256];  /* each byte's class: bytes no edge tells apart share one */
    uint32_t n_classes;
    uint16_t *next;    /* [n_states * n_classes]: the state after a byte, or ST_JSON_RE_DEAD */
    uint8_t *accept;   /* [n_states]: the string may end here */
    uint32_t n_states;
} st_json_regex;

/* Compiles pattern (n bytes of UTF-8) with the length bounds min_len..max_len characters
 * (max_len UINT32_MAX: none). Returns 0, or -1 with a message in err (the construct refused, or
 * why nothing can match). */
int st_json_regex_compile(const char *pattern, size_t n, uint32_t min_len, uint32_t max_len, st_json_regex *out, char *err, size_t n_err);
void st_json_regex_free(st_json_regex *re);
/* Whether the whole of text (UTF-8) is matched, for enum values and tests. */
int st_json_regex_matches(const st_json_regex *re, const char *text, size_t n);

/* Whether some character in lo..hi (code points; the surrogates in it skipped) can follow in
 * state q: what a \\u escape whose first digits are read may still become. */
int st_json_regex_range_live(const st_json_regex *re, uint16_t q, uint32_t lo, uint32_t hi);

static inline uint16_t st_json_regex_step(const st_json_regex *re, uint16_t state, unsigned byte) {
    return re->next[(size_t)state * re->n_classes + re->cls[byte]];
}

/* Whether some character can follow in state q (every state kept can reach an accepting one, so
 * any byte it goes on with begins a character that can be finished). */
static inline int st_json_regex_can_go_on(const st_json_regex *re, uint16_t q) {
    const uint16_t *row = re->next + (size_t)q * re->n_classes;
    for (uint32_t k = 0; k < re->n_classes; k++)
        if (row[k] != ST_JSON_RE_DEAD) return 1;
    return 0;
}

#endif
