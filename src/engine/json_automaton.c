/* json_automaton.c: the JSON object automaton under the constraint (json_automaton.h): a handful
 * of modes plus a stack of one bit per open container (object or array), so a state is 24 bytes,
 * copied and compared whole. One step reads one byte. A number has no closing byte: the byte after
 * it ends it and is then read again as what follows a value. Before the object, an optional
 * <think>...</think> block. The schema layer (json_schema_walk.c) runs over it, and the
 * constraint (json_grammar.c) walks tokens through either. */
#include <string.h>
#include "engine/json_automaton.h"

const char st_json_think_open[8] = "<think>", st_json_think_close[9] = "</think>";
static const char *const literals[3] = {"true", "false", "null"};

void st_json_init(st_json_state *s) { memset(s, 0, sizeof *s); }

int st_json_complete(const st_json_state *s) { return s->mode == M_DONE; }

static int is_hex(unsigned c) { return st_json_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }


/* A value ended: the next byte is what follows it in its container, or the object is done. */
static void value_done(st_json_state *s) { s->mode = s->depth ? M_AFTER : M_DONE; }

static int push(st_json_state *s, int array) {
    if (s->depth >= ST_JSON_MAX_DEPTH) return 0;
    uint64_t bit = 1ull << s->depth;
    s->stack = array ? s->stack | bit : s->stack & ~bit;
    s->depth++;
    s->mode = array ? M_ARR_FIRST : M_OBJ_FIRST;
    return 1;
}

static int close_container(st_json_state *s, int array) {
    if (!s->depth || st_json_top_is_array(s) != array) return 0;
    s->depth--;
    s->stack &= ~(1ull << s->depth);
    value_done(s);
    return 1;
}

/* The start of a value (not an object or array closing). At depth 0 only the object. */
static int value_start(st_json_state *s, unsigned c) {
    if (c == '{') return push(s, 0);
    if (!s->depth) return 0;
    switch (c) {
    case '[': return push(s, 1);
    case '"': s->mode = M_STR; s->flags = 0; return 1;
    case '-': s->mode = M_NUM_MINUS; return 1;
    case '0': s->mode = M_NUM_ZERO; return 1;
    case 't': case 'f': case 'n':
        s->mode = M_LIT;
        s->aux = c == 't' ? 0 : c == 'f' ? 1 : 2;
        s->sub = 1;
        return 1;
    default:
        if (c >= '1' && c <= '9') { s->mode = M_NUM_INT; return 1; }
        return 0;
    }
}

/* Whitespace between tokens of the grammar: bounded by depth, so indentation fits but endless
 * padding does not (a newline and four spaces per level, and some slack). */
static int take_ws(st_json_state *s) {
    unsigned cap = 8u + 4u * s->depth;
    if (s->ws >= cap) return 0;
    s->ws++;
    return 1;
}

/* Inside a string: one byte of content, an escape, a UTF-8 lead, or the closing quote. */
static int string_byte(st_json_state *s, unsigned c) {
    if (c == '"') {
        if (s->flags & F_KEY) s->mode = M_COLON;
        else value_done(s);
        s->flags = 0;
        return 1;
    }
    if (c == '\\') { s->mode = M_STR_ESC; return 1; }
    if (c < 0x20) return 0;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) { s->mode = M_STR_UTF8; s->sub = 1; s->aux = 0; return 1; }
    if (c >= 0xE0 && c <= 0xEF) { s->mode = M_STR_UTF8; s->sub = 2; s->aux = (uint8_t)c; return 1; }
    if (c >= 0xF0 && c <= 0xF4) { s->mode = M_STR_UTF8; s->sub = 3; s->aux = (uint8_t)c; return 1; }
    return 0;
}

/* Overlong forms, surrogates and values past U+10FFFF are decided by the second byte. */
static int utf8_second_ok(unsigned lead, unsigned b) {
    if (lead == 0xE0) return b >= 0xA0;
    if (lead == 0xED) return b < 0xA0;
    if (lead == 0xF0) return b >= 0x90;
    if (lead == 0xF4) return b < 0x90;
    return 1;
}

/* A hex digit of \uXXXX. The first two decide a surrogate: D800-DBFF must be followed by an
 * escaped DC00-DFFF, and a DC00-DFFF alone is refused (JSON parsers such as jansson refuse it). */
static int hex_byte(st_json_state *s, unsigned c) {
    if (!is_hex(c)) return 0;
    int low = (s->flags & F_LOW) != 0;
    int is_d = c == 'd' || c == 'D';
    if (s->sub == 0) {
        if (low && !is_d) return 0;
        s->aux = is_d ? HEX_D : HEX_PLAIN;
    } else if (s->sub == 1 && (low || s->aux == HEX_D)) {
        int hi8 = c == '8' || c == '9' || c == 'a' || c == 'b' || c == 'A' || c == 'B';
        int lo = (c >= 'c' && c <= 'f') || (c >= 'C' && c <= 'F');
        if (low ? !lo : lo) return 0;
        s->aux = !low && hi8 ? HEX_HIGH : HEX_PLAIN;
    }
    if (++s->sub < 4) return 1;
    if (s->aux == HEX_HIGH) {
        s->mode = M_STR_LOW_BS;
        s->flags |= F_LOW;
    } else {
        s->mode = M_STR;
        s->flags &= (uint8_t)~F_LOW;
    }
    s->sub = 0;
    s->aux = 0;
    return 1;
}

/* The byte after a number's last digit ends the number; it is then read as what follows a value. */
static int after_value_byte(st_json_state *s, unsigned c);

static int number_byte(st_json_state *s, unsigned c) {
    switch (s->mode) {
    case M_NUM_MINUS:
        if (c == '0') { s->mode = M_NUM_ZERO; return 1; }
        if (c >= '1' && c <= '9') { s->mode = M_NUM_INT; return 1; }
        return 0;
    case M_NUM_ZERO:
    case M_NUM_INT:
        if (st_json_is_digit(c) && s->mode == M_NUM_INT) return 1;
        if (c == '.') { s->mode = M_NUM_DOT; return 1; }
        if (c == 'e' || c == 'E') { s->mode = M_NUM_E; return 1; }
        break;
    case M_NUM_DOT:
        if (st_json_is_digit(c)) { s->mode = M_NUM_FRAC; return 1; }
        return 0;
    case M_NUM_FRAC:
        if (st_json_is_digit(c)) return 1;
        if (c == 'e' || c == 'E') { s->mode = M_NUM_E; return 1; }
        break;
    case M_NUM_E:
        if (c == '+' || c == '-') { s->mode = M_NUM_ESIGN; return 1; }
        if (st_json_is_digit(c)) { s->mode = M_NUM_EXP; return 1; }
        return 0;
    case M_NUM_ESIGN:
        if (st_json_is_digit(c)) { s->mode = M_NUM_EXP; return 1; }
        return 0;
    case M_NUM_EXP:
        if (st_json_is_digit(c)) return 1;
        break;
    }
    value_done(s); /* depth > 0: a number is never the top-level value */
    return after_value_byte(s, c);
}

static int after_value_byte(st_json_state *s, unsigned c) {
    if (st_json_is_ws(c)) return take_ws(s);
    s->ws = 0;
    if (c == ',') { s->mode = st_json_top_is_array(s) ? M_VALUE : M_KEY; return 1; }
    if (c == '}' || c == ']') return close_container(s, c == ']');
    return 0;
}

/* One byte; 1 if it continues a valid prefix (s advanced), 0 if not (s may be clobbered). */
static int step(st_json_state *s, unsigned c) {
    switch (s->mode) {
    case M_PRE:
        if (st_json_is_ws(c)) return take_ws(s);
        s->ws = 0;
        if (c == '<') { s->mode = M_THINK_OPEN; s->sub = 1; return 1; }
        return value_start(s, c);
    case M_THINK_OPEN:
        if (c != (unsigned char)st_json_think_open[s->sub]) return 0;
        if (++s->sub == sizeof st_json_think_open - 1) { s->mode = M_THINK; s->sub = 0; }
        return 1;
    case M_THINK:
        if (c == (unsigned char)st_json_think_close[s->sub]) {
            if (++s->sub == sizeof st_json_think_close - 1) { s->mode = M_VALUE; s->sub = 0; s->ws = 0; }
        } else {
            s->sub = c == '<'; /* '<' occurs only first in "</think>" */
        }
        return 1;
    case M_VALUE:
    case M_ARR_FIRST:
        if (st_json_is_ws(c)) return take_ws(s);
        s->ws = 0;
        if (c == ']' && s->mode == M_ARR_FIRST) return close_container(s, 1);
        return value_start(s, c);
    case M_OBJ_FIRST:
    case M_KEY:
        if (st_json_is_ws(c)) return take_ws(s);
        s->ws = 0;
        if (c == '"') { s->mode = M_STR; s->flags = F_KEY; return 1; }
        if (c == '}' && s->mode == M_OBJ_FIRST) return close_container(s, 0);
        return 0;
    case M_COLON:
        if (st_json_is_ws(c)) return take_ws(s);
        s->ws = 0;
        if (c == ':') { s->mode = M_VALUE; return 1; }
        return 0;
    case M_AFTER:
        return after_value_byte(s, c);
    case M_DONE:
        return st_json_is_ws(c) && take_ws(s);
    case M_STR:
        return string_byte(s, c);
    case M_STR_ESC:
        if (c == 'u') { s->mode = M_STR_HEX; s->sub = 0; return 1; }
        if (!strchr("\"\\/bfnrt", (int)c) || !c) return 0;
        s->mode = M_STR;
        return 1;
    case M_STR_HEX:
        return hex_byte(s, c);
    case M_STR_UTF8:
        if ((c & 0xC0) != 0x80 || (s->aux && !utf8_second_ok(s->aux, c))) return 0;
        s->aux = 0;
        if (--s->sub == 0) s->mode = M_STR;
        return 1;
    case M_STR_LOW_BS:
        if (c != '\\') return 0;
        s->mode = M_STR_LOW_U;
        return 1;
    case M_STR_LOW_U:
        if (c != 'u') return 0;
        s->mode = M_STR_HEX;
        s->sub = 0;
        return 1;
    case M_LIT: {
        const char *lit = literals[s->aux];
        if (c != (unsigned char)lit[s->sub]) return 0;
        if (!lit[++s->sub]) { s->sub = 0; s->aux = 0; value_done(s); }
        return 1;
    }
    default:
        return number_byte(s, c);
    }
}

int st_json_step(st_json_state *s, unsigned c) { return step(s, c); }

int st_json_feed(st_json_state *s, const char *bytes, size_t n) {
    st_json_state t = *s;
    for (size_t i = 0; i < n; i++)
        if (!step(&t, (unsigned char)bytes[i])) return 0;
    *s = t;
    return 1;
}

/* The length of one fixed way to finish from s ('"' to end a string, "0" for a missing value,
 * "\"\":0" for a missing member, then the closers). Every state but M_DONE has a byte that
 * lowers it by exactly one (the first byte of that way), so a reply with k tokens left and a cost
 * of at most k can always be finished with single-byte tokens. */
int st_json_close_cost(const st_json_state *s) {
    int d = s->depth, str = 1 + ((s->flags & F_KEY) ? 2 : 0); /* '"', and ":0" after a key */
    switch (s->mode) {
    case M_PRE: return 2;
    case M_THINK_OPEN: return (int)(sizeof st_json_think_open - 1 - s->sub) + (int)(sizeof st_json_think_close - 1) + 2;
    case M_THINK: return (int)(sizeof st_json_think_close - 1 - s->sub) + 2;
    case M_VALUE: return d ? 1 + d : 2;
    case M_ARR_FIRST: case M_OBJ_FIRST: case M_AFTER: return d;
    case M_KEY: return 4 + d;
    case M_COLON: return 2 + d;
    case M_DONE: return 0;
    case M_STR: return str + d;
    case M_STR_ESC: return 1 + str + d;
    case M_STR_HEX: return (4 - s->sub) + (s->aux == HEX_HIGH ? 6 : 0) + str + d;
    case M_STR_UTF8: return s->sub + str + d;
    case M_STR_LOW_BS: return 6 + str + d;
    case M_STR_LOW_U: return 5 + str + d;
    case M_LIT: return (int)strlen(literals[s->aux]) - s->sub + d;
    case M_NUM_MINUS: case M_NUM_DOT: case M_NUM_E: case M_NUM_ESIGN: return 1 + d;
    default: return d; /* a number that may end here */
    }
}
