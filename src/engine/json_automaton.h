/* json_automaton.h: the byte automata behind the JSON constraint, as the files that make it up
 * share them (not a public API): the core automaton's modes and step (json_automaton.c) and the
 * schema layer around it (json_schema_walk.c), whose state the constraint keeps, walks and caches.
 * json_grammar.h says what the constraint does; json_schema.h what a schema enforces. */
#ifndef ST_ENGINE_JSON_AUTOMATON_H
#define ST_ENGINE_JSON_AUTOMATON_H

#include <stddef.h>
#include <stdint.h>
#include "engine/json_grammar.h"
#include "engine/json_schema.h"

/* st_json_state.mode */
enum mode {
    M_PRE,        /* before the reply: whitespace, "<think>" or "{" */
    M_THINK_OPEN, /* sub bytes of "<think>" read */
    M_THINK,      /* in the think block; sub bytes of "</think>" read */
    M_VALUE,      /* a value must come (at depth 0: the object) */
    M_ARR_FIRST,  /* after '[': a value or ']' */
    M_OBJ_FIRST,  /* after '{': a key or '}' */
    M_KEY,        /* after ',' in an object: a key */
    M_COLON,      /* after a key */
    M_AFTER,      /* after a value inside a container: ',' or the close */
    M_DONE,       /* the object is closed */
    M_STR,        /* in a string */
    M_STR_ESC,    /* after a backslash */
    M_STR_HEX,    /* sub hex digits of \uXXXX read; aux says what the first two were */
    M_STR_UTF8,   /* sub continuation bytes still due; aux the lead byte while the second is due */
    M_STR_LOW_BS, /* after a high surrogate escape: '\' must come */
    M_STR_LOW_U,  /* then 'u' */
    M_LIT,        /* aux which literal, sub bytes read */
    M_NUM_MINUS,  /* '-' read: a digit must come */
    M_NUM_ZERO,   /* a leading 0 */
    M_NUM_INT,    /* integer digits */
    M_NUM_DOT,    /* '.' read: a digit must come */
    M_NUM_FRAC,   /* fraction digits */
    M_NUM_E,      /* 'e' read: a sign or digit */
    M_NUM_ESIGN,  /* sign read: a digit */
    M_NUM_EXP,    /* exponent digits */
};

enum { F_KEY = 1, F_LOW = 2 };
enum { HEX_PLAIN = 0, HEX_D = 1, HEX_HIGH = 2 }; /* aux of M_STR_HEX */

/* One byte of the core automaton; 1 if it continues a valid prefix (s advanced), 0 if not (s may
 * be clobbered). */
int st_json_step(st_json_state *s, unsigned c);

/* The think block's tags, as the automaton reads them before the object. */
extern const char st_json_think_open[8], st_json_think_close[9];

static inline int st_json_is_ws(unsigned c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static inline int st_json_is_digit(unsigned c) { return c >= '0' && c <= '9'; }
static inline int st_json_top_is_array(const st_json_state *s) { return (s->stack >> (s->depth - 1)) & 1; }

/* ---- the schema layer (json_schema_walk.c) ---- */

#define ST_JSON_NO_CAND 0xFFFF
enum { M_ENUM = 64 }; /* a core mode only the schema layer reads: an enum value's text */
/* st_json_xstate.phase: P_ANSWER, the whole reply is the schema's object; the others are the parts
 * of a forced tool call */
enum st_json_phase {
    P_ANSWER, P_PRE, P_OPEN, P_NAME, P_MID, P_ARGS, P_CLOSE, P_END, P_NEXT,
    /* Qwen 3.5's XML form: the newline after the name, a tag (<parameter= or </function>), the rest
     * of <parameter=, a key, the newline after it, a value, </parameter>\n, the rest of the end */
    P_XNL, P_XTAG, P_XPOPEN, P_XKEY, P_XVNL, P_XVALUE, P_XVCLOSE, P_XFEND,
};

typedef struct st_json_xstate {
    st_json_state c;
    uint8_t phase;  /* enum st_json_phase; P_ANSWER: the whole reply is the schema's object */
    uint8_t neg;    /* the bounded integer being read is negative */
    uint16_t tool;  /* the call's tool, once its name is read */
    uint16_t pend;  /* the node the next value must meet */
    uint16_t cur;   /* the node of the number or enum value being read */
    uint16_t cand;  /* key, enum or tool name candidate; ST_JSON_NO_CAND: a key no property begins */
    uint16_t klen;  /* bytes of it matched; in a fixed text, bytes of the text */
    uint32_t slen;  /* characters of the bounded string being read (without a maximum, at most the minimum) */
    uint64_t num;   /* the magnitude of the bounded integer being read */
    uint16_t xlit;  /* bytes of an XML-form text matched */
    uint16_t rstate; /* the pattern's DFA state in a string that must match one (0 elsewhere) */
    uint32_t ucp;   /* there, a \u escape's value so far (a high surrogate's in the top half) */
    uint16_t node[ST_JSON_SCHEMA_DEPTH + 1]; /* by depth: the container's node */
    uint64_t seen[ST_JSON_SCHEMA_DEPTH + 1]; /* by depth: properties seen (bit = sorted index) */
} st_json_xstate;

void st_json_xinit(const st_json_schema *sc, st_json_xstate *x);
/* One byte under the schema; 1 if it continues what the schema allows (x advanced), else 0 (x may
 * be clobbered). */
int st_json_xstep(const st_json_schema *sc, st_json_xstate *x, unsigned c);
/* Feeds bytes; 1 and x advanced when all continue, else 0 with x unchanged. */
int st_json_xfeed(const st_json_schema *sc, st_json_xstate *x, const char *bytes, size_t n);
int st_json_xcomplete(const st_json_schema *sc, const st_json_xstate *x);

#endif
