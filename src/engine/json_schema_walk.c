/* json_schema_walk.c: the schema layer of the JSON constraint (json_automaton.h): a schema's
 * rules (json_schema.h) over the core automaton of json_grammar.c, byte by byte.
 *
 * With a schema (json_schema.h) the core automaton still reads every byte; around it, a frame per
 * open container names the schema node it must meet and the properties already seen, `pend` the
 * node the next value must meet, and a candidate (the first name or enum text, in sorted order,
 * that the bytes so far begin) with how many bytes matched. A value's first byte is checked
 * against the node's types; a key's bytes against the property names (for a closed object, only
 * the unseen ones); '}' against required; ',' in a closed object needs an unseen property left;
 * an enum value is matched as its compact text, and ends where no text goes on. Every state kept
 * can still be finished, so a mask is never empty: names and texts are prefixes of something
 * allowed, and the compiler refused what nothing can meet. The bounds: a string whose node bounds
 * its length counts its characters (slen), an array its items (in seen, which arrays do not use
 * otherwise), a bounded integer its sign and digits (neg, num); each is refused at the first byte
 * past which no value can meet them (st_json_schema_int_reachable decides for integers).
 *
 * Tool-call mode wraps that in the call's fixed text: `<tool_call>\n{"name": "`, a tool's name,
 * `", "arguments": `, the arguments object on that tool's node, `}\n</tool_call>`, then the end
 * (or, with parallel calls, `\n<tool_call>\n{"name": "` again). In Qwen 3.5's XML form
 * (st_json_schema.xml) the call is `<tool_call>\n<function=NAME>\n`, then per argument
 * `<parameter=KEY>\nVALUE\n</parameter>\n`, then `</function>\n</tool_call>`: the arguments
 * object is still read by the JSON layer, which is handed the bytes the XML stands for ('{' after
 * the function line, ',' and '"' for a parameter tag, '"' and ':' for its '>', '}' for
 * </function>), each value being JSON text on its property's node (a string with its quotes, so
 * the chat parser, which reads a value as JSON first, gets the very value) without '<' (the
 * parser would end it at a "</parameter>" inside).
 *
 * A string whose node has a pattern steps the pattern's DFA (json_regex.h; its length bounds are
 * in it) with the characters the string stands for: a plain byte or a UTF-8 byte as it is, an
 * escape as the UTF-8 of what it means (\n as a newline, \u00e9 as C3 A9, a surrogate pair's
 * escapes as the one character), and the closing quote only in an accepting state. A backslash
 * and each hex digit of a \u escape are taken only while some character they may still become
 * can follow, so the string stays finishable inside an escape too. */
#include <string.h>
#include "engine/json_automaton.h"
#include "engine/json_regex.h"

static const char lit_open[] = "<tool_call>\n{\"name\": \"", lit_mid[] = ", \"arguments\": ",
                  lit_close[] = "}\n</tool_call>", lit_next[] = "\n<tool_call>\n{\"name\": \"";
static const char xlit_open[] = "<tool_call>\n<function=", xlit_next[] = "\n<tool_call>\n<function=", xlit_param[] = "<parameter=",
                  xlit_vclose[] = "</parameter>\n", xlit_fend[] = "</function>\n</tool_call>";

static int is_number_mode(unsigned m) { return m >= M_NUM_MINUS && m <= M_NUM_EXP; }
static int in_string(unsigned m) { return m >= M_STR && m <= M_STR_LOW_U; }

static const st_json_sprop *prop_of(const st_json_schema *sc, const st_json_snode *t, uint32_t i) {
    return &sc->props[t->first_prop + i];
}

/* The first of n sorted names (from index `from`, which begins the bytes read so far, k of them)
 * that goes on with byte c, skipping those `skip` has a bit for; n when none. The names and their
 * lengths are read with strides, from an array of structs or from two arrays. */
typedef struct name_list {
    const char *name0; /* &first name pointer */
    const char *len0;  /* &first length (uint32_t) */
    size_t name_stride, len_stride;
    uint32_t n;
} name_list;

static const char *nl_name(const name_list *l, uint32_t i) { return *(const char *const *)(l->name0 + (size_t)i * l->name_stride); }
static uint32_t nl_len(const name_list *l, uint32_t i) { return *(const uint32_t *)(l->len0 + (size_t)i * l->len_stride); }

static uint32_t next_candidate(const name_list *l, uint32_t from, uint32_t k, unsigned c, uint64_t skip) {
    for (uint32_t i = from; i < l->n; i++) {
        if (k && (nl_len(l, i) < k || memcmp(nl_name(l, i), nl_name(l, from), k))) break;
        if (nl_len(l, i) > k && (unsigned char)nl_name(l, i)[k] == c && !(i < 64 && ((skip >> i) & 1))) return i;
    }
    return l->n;
}

static name_list props_of(const st_json_schema *sc, const st_json_snode *t) {
    const st_json_sprop *p = &sc->props[t->first_prop];
    return (name_list){(const char *)&p->name, (const char *)&p->len, sizeof *p, sizeof *p, t->n_props};
}

static name_list enums_of(const st_json_schema *sc, const st_json_snode *v) {
    return (name_list){(const char *)&sc->enums[v->first_enum], (const char *)&sc->enum_len[v->first_enum], sizeof *sc->enums,
                       sizeof *sc->enum_len, v->n_enum};
}

static name_list tools_of(const st_json_schema *sc) {
    return (name_list){(const char *)&sc->tools->name, (const char *)&sc->tools->len, sizeof *sc->tools, sizeof *sc->tools, sc->n_tools};
}

static uint64_t all_props(const st_json_snode *t) { return t->n_props == 64 ? ~0ull : (1ull << t->n_props) - 1; }

/* ',', '}' or ']' after a value (or whitespace), with the container's rules. */
static int x_after(const st_json_schema *sc, st_json_xstate *x, unsigned c) {
    uint8_t d = x->c.depth;
    const st_json_snode *t = &sc->nodes[x->node[d]];
    if (c == ',' && d) {
        if (st_json_top_is_array(&x->c)) {
            if ((t->bounds & ST_JB_ITEMS) && x->seen[d] >= t->max_items) return 0;
            x->pend = t->items;
        } else if (t->closed && (x->seen[d] & all_props(t)) == all_props(t)) {
            return 0;
        }
    }
    if (c == '}' && (x->seen[d] & t->required) != t->required) return 0;
    if (c == ']' && (t->bounds & ST_JB_ITEMS) && x->seen[d] < t->min_items) return 0;
    if (!st_json_step(&x->c, c)) return 0;
    if (c == '}' || c == ']') { x->node[d] = 0; x->seen[d] = 0; }
    return 1;
}

static int x_value_start(const st_json_schema *sc, st_json_xstate *x, unsigned c) {
    const st_json_snode *v = &sc->nodes[x->pend];
    if (v->n_enum) {
        name_list texts = enums_of(sc, v);
        uint32_t i = next_candidate(&texts, 0, 0, c, 0);
        if (i == v->n_enum) return 0;
        x->c.mode = M_ENUM;
        x->c.ws = 0;
        x->cur = x->pend;
        x->pend = 0;
        x->cand = (uint16_t)i;
        x->klen = 1;
        return 1;
    }
    int need = c == '{' ? ST_JT_OBJECT : c == '[' ? ST_JT_ARRAY : c == '"' ? ST_JT_STRING : c == '-' || st_json_is_digit(c) ? ST_JT_NUMBER | ST_JT_INTEGER
             : c == 't' || c == 'f' ? ST_JT_BOOL : c == 'n' ? ST_JT_NULL : 0;
    if (!(v->types & need) || !st_json_step(&x->c, c)) return 0;
    if (c == '{' || c == '[') {
        if (x->c.depth > ST_JSON_SCHEMA_DEPTH) return 0;
        x->node[x->c.depth] = x->pend;
        x->seen[x->c.depth] = 0;
        x->pend = c == '[' ? v->items : 0;
    } else {
        x->cur = x->pend;
        x->pend = 0;
        x->slen = 0;
        x->num = 0;
        x->neg = 0;
        if ((v->bounds & ST_JB_INT) && (c == '-' || st_json_is_digit(c))) {
            x->neg = c == '-';
            x->num = c == '-' ? 0 : c - '0';
            return st_json_schema_int_reachable(v, x->neg, x->num, c == '-' ? -1 : c != '0');
        }
    }
    return 1;
}

static int re_byte(const st_json_regex *re, st_json_xstate *x, unsigned b) {
    uint16_t q = st_json_regex_step(re, x->rstate, b);
    if (q == ST_JSON_RE_DEAD) return 0;
    x->rstate = q;
    return 1;
}

static int re_char(const st_json_regex *re, st_json_xstate *x, uint32_t cp) {
    if (cp < 0x80) return re_byte(re, x, cp);
    if (cp < 0x800) return re_byte(re, x, 0xC0 | (cp >> 6)) && re_byte(re, x, 0x80 | (cp & 0x3F));
    if (cp < 0x10000)
        return re_byte(re, x, 0xE0 | (cp >> 12)) && re_byte(re, x, 0x80 | ((cp >> 6) & 0x3F)) && re_byte(re, x, 0x80 | (cp & 0x3F));
    return re_byte(re, x, 0xF0 | (cp >> 18)) && re_byte(re, x, 0x80 | ((cp >> 12) & 0x3F)) && re_byte(re, x, 0x80 | ((cp >> 6) & 0x3F)) &&
           re_byte(re, x, 0x80 | (cp & 0x3F));
}

static unsigned hex_digit(unsigned c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

/* Whether a \\u escape read so far (value u of its digits, rem digits due; hi: the high half of
 * a pair whose low half this is) can still become a character that may follow in state q. */
static int hex_live(const st_json_regex *re, uint16_t q, uint32_t hi, uint32_t u, int rem) {
    uint32_t lo = u << (4 * rem), top = lo | ((1u << (4 * rem)) - 1);
    if (hi) {
        uint32_t a = lo > 0xDC00 ? lo : 0xDC00, b = top < 0xDFFF ? top : 0xDFFF, base = 0x10000 + ((hi - 0xD800) << 10);
        return a <= b && st_json_regex_range_live(re, q, base + a - 0xDC00, base + b - 0xDC00);
    }
    uint32_t a = lo > 0xD800 ? lo : 0xD800, b = top < 0xDBFF ? top : 0xDBFF; /* high halves: the pairs they begin */
    if (a <= b && st_json_regex_range_live(re, q, 0x10000 + ((a - 0xD800) << 10), 0x10000 + ((b - 0xD800) << 10) + 0x3FF)) return 1;
    return st_json_regex_range_live(re, q, lo, top);
}

/* A byte of a string value that must match a pattern (see the top of the file). */
static int x_pattern_byte(const st_json_schema *sc, st_json_xstate *x, const st_json_snode *v, unsigned c) {
    const st_json_regex *re = &sc->res[v->re - 1];
    unsigned m = x->c.mode;
    if (!st_json_step(&x->c, c)) return 0;
    switch (m) {
    case M_STR:
        if (c == '"') {
            if (!re->accept[x->rstate]) return 0;
            x->rstate = 0;
            return 1;
        }
        /* a backslash: some character must still be able to follow (\\u can write any) */
        if (c == '\\') return st_json_regex_can_go_on(re, x->rstate);
        return re_byte(re, x, c);
    case M_STR_UTF8: return re_byte(re, x, c);
    case M_STR_ESC: {
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        if (c == 'u') { x->ucp = 0; return 1; }
        return re_byte(re, x, (unsigned char)to[strchr(from, (int)c) - from]);
    }
    case M_STR_HEX: {
        x->ucp = (x->ucp & 0xFFFF0000u) | (((x->ucp << 4) | hex_digit(c)) & 0xFFFFu);
        uint32_t u = x->ucp & 0xFFFF, hi = x->ucp >> 16;
        if (x->c.mode == M_STR_HEX) return hex_live(re, x->rstate, hi, u, 4 - x->c.sub);
        if (x->c.mode == M_STR_LOW_BS) { /* a high surrogate: its low half follows */
            x->ucp = u << 16;
            return hex_live(re, x->rstate, 0, u, 0);
        }
        x->ucp = 0;
        return re_char(re, x, hi ? 0x10000 + ((hi - 0xD800) << 10) + (u - 0xDC00) : u);
    }
    default: return 1; /* the "\u" of a surrogate pair's low half */
    }
}

/* A byte of a string value whose node bounds its length: a character starts with a plain byte,
 * a UTF-8 lead or a backslash (the low half of an escaped surrogate pair is the same one). */
static int x_string_byte(const st_json_schema *sc, st_json_xstate *x, unsigned c) {
    const st_json_snode *v = &sc->nodes[x->cur];
    if (!(v->bounds & (ST_JB_LEN | ST_JB_RE))) return st_json_step(&x->c, c);
    if (v->bounds & ST_JB_RE) return x_pattern_byte(sc, x, v, c);
    int starts = x->c.mode == M_STR && c != '"';
    if (starts && x->slen >= v->max_len) return 0;
    if (x->c.mode == M_STR && c == '"' && x->slen < v->min_len) return 0;
    if (!st_json_step(&x->c, c)) return 0;
    if (starts && ((v->bounds & ST_JB_MAXLEN) || x->slen < v->min_len)) x->slen++;
    if (!in_string(x->c.mode)) x->slen = 0;
    return 1;
}

/* A byte of a number whose node bounds it (an integer): digits so far must still reach the range,
 * and the byte after the last digit needs the value within it. t: the core state after c. */
static int x_int_byte(const st_json_schema *sc, st_json_xstate *x, const st_json_state *t, unsigned c) {
    const st_json_snode *v = &sc->nodes[x->cur];
    if (!is_number_mode(t->mode)) return st_json_schema_int_reachable(v, x->neg, x->num, 0);
    if (!st_json_is_digit(c)) return 1;
    if (x->num > (UINT64_MAX - 9) / 10) return 0;
    x->num = x->num * 10 + (c - '0');
    return st_json_schema_int_reachable(v, x->neg, x->num, t->mode == M_NUM_INT);
}

/* A byte of a key (the core is in a string with F_KEY). */
static int x_key_byte(const st_json_schema *sc, st_json_xstate *x, unsigned c) {
    uint8_t d = x->c.depth;
    const st_json_snode *t = &sc->nodes[x->node[d]];
    if (x->cand == ST_JSON_NO_CAND) { /* a key no property begins: any string, its value meets extra */
        if (!st_json_step(&x->c, c)) return 0;
        if (x->c.mode == M_COLON) { x->pend = t->extra; x->cand = 0; x->klen = 0; }
        return 1;
    }
    if (c == '\\') return 0;
    if (c == '"') {
        const st_json_sprop *p = prop_of(sc, t, x->cand);
        int exact = p->len == x->klen;
        if (exact && ((x->seen[d] >> x->cand) & 1)) return 0; /* each key once */
        if (!exact && t->closed) return 0;
        if (!st_json_step(&x->c, c)) return 0;
        if (exact) { x->seen[d] |= 1ull << x->cand; x->pend = p->node; }
        else x->pend = t->extra;
        x->cand = 0;
        x->klen = 0;
        return 1;
    }
    name_list names = props_of(sc, t);
    uint32_t i = next_candidate(&names, x->cand, x->klen, c, t->closed ? x->seen[d] : 0);
    if (!st_json_step(&x->c, c)) return 0;
    if (i == t->n_props) {
        if (t->closed) return 0;
        x->cand = ST_JSON_NO_CAND;
        x->klen = 0;
        return 1;
    }
    x->cand = (uint16_t)i;
    x->klen++;
    return 1;
}

static int x_enum_byte(const st_json_schema *sc, st_json_xstate *x, unsigned c) {
    const st_json_snode *v = &sc->nodes[x->cur];
    name_list texts = enums_of(sc, v);
    uint32_t i = next_candidate(&texts, x->cand, x->klen, c, 0);
    if (i < v->n_enum) {
        x->cand = (uint16_t)i;
        x->klen++;
        return 1;
    }
    if (nl_len(&texts, x->cand) != x->klen) return 0;
    x->c.mode = M_AFTER; /* an enum value is never the top level */
    x->cur = x->cand = x->klen = 0;
    return x_after(sc, x, c);
}

/* One byte of the schema's JSON value (the core plus the schema's rules). */
static int x_json_byte(const st_json_schema *sc, st_json_xstate *x, unsigned c) {
    unsigned m = x->c.mode;
    if (m == M_ENUM) return x_enum_byte(sc, x, c);
    if (in_string(m)) {
        if (x->c.flags & F_KEY) return x_key_byte(sc, x, c);
        return x_string_byte(sc, x, c);
    }
    if (is_number_mode(m)) {
        st_json_state t = x->c;
        if (!st_json_step(&t, c)) return 0;
        if ((sc->nodes[x->cur].bounds & ST_JB_INT) && !x_int_byte(sc, x, &t, c)) return 0;
        if (is_number_mode(t.mode)) {
            if (!(sc->nodes[x->cur].types & ST_JT_NUMBER) && (t.mode == M_NUM_DOT || t.mode == M_NUM_E)) return 0;
            x->c = t;
            return 1;
        }
        x->c.mode = M_AFTER; /* the byte ends the number: read it as what follows a value */
        x->cur = 0;
        x->num = 0;
        x->neg = 0;
        return x_after(sc, x, c);
    }
    if (st_json_is_ws(c) || m == M_COLON || m == M_DONE || m == M_THINK_OPEN || m == M_THINK || m == M_LIT) return st_json_step(&x->c, c);
    if (m == M_PRE && c == '<') return st_json_step(&x->c, c);
    if (m == M_AFTER) return x_after(sc, x, c);
    if (m == M_OBJ_FIRST || m == M_KEY) {
        const st_json_snode *t = &sc->nodes[x->node[x->c.depth]];
        if (c == '}') return x_after(sc, x, c);
        if (c != '"' || !st_json_step(&x->c, c)) return 0;
        uint64_t skip = t->closed ? x->seen[x->c.depth] : 0;
        if (t->closed && (skip & all_props(t)) == all_props(t)) return 0;
        /* the first candidate: the first name (unseen, for a closed object) */
        uint32_t i = 0;
        while (i < t->n_props && ((skip >> i) & 1)) i++;
        x->cand = t->n_props ? (uint16_t)i : ST_JSON_NO_CAND;
        x->klen = 0;
        return 1;
    }
    if (m == M_ARR_FIRST && c == ']') return x_after(sc, x, c);
    /* M_PRE, M_VALUE, M_ARR_FIRST: in an array, an item, counted against maxItems */
    uint8_t d = x->c.depth;
    int item = m != M_PRE && d && st_json_top_is_array(&x->c);
    const st_json_snode *t = &sc->nodes[x->node[d]];
    if (item && (t->bounds & ST_JB_ITEMS) && x->seen[d] >= t->max_items) return 0;
    if (!x_value_start(sc, x, c)) return 0;
    /* counted only as far as a bound reads it, so the states of an array's items stay alike */
    if (item && (t->bounds & ST_JB_ITEMS) && (t->max_items != UINT32_MAX || x->seen[d] < t->min_items)) x->seen[d]++;
    return 1;
}

/* A byte of a fixed text; at its end, the next phase. */
static int x_literal(st_json_xstate *x, const char *lit, size_t n, unsigned c, int next) {
    if (c != (unsigned char)lit[x->klen]) return 0;
    if (++x->klen == n) { x->phase = (uint8_t)next; x->klen = 0; }
    return 1;
}

/* A byte of the XML form's fixed texts, counted in xlit (klen is the JSON layer's meanwhile). */
static int x_xliteral(st_json_xstate *x, const char *lit, size_t n, unsigned c, int next) {
    if (c != (unsigned char)lit[x->xlit]) return 0;
    if (++x->xlit == n) { x->phase = (uint8_t)next; x->xlit = 0; }
    return 1;
}

/* The JSON bytes an XML tag stands for, handed to the JSON layer. */
static int x_json_text(const st_json_schema *sc, st_json_xstate *x, const char *b) {
    for (; *b; b++)
        if (!x_json_byte(sc, x, (unsigned char)*b)) return 0;
    return 1;
}

/* The XML form's phases after the function's name (see the top of the file). */
static int x_xml_step(const st_json_schema *sc, st_json_xstate *x, unsigned c) {
    switch (x->phase) {
    case P_XNL: /* the newline after <function=NAME>: the arguments object opens */
        if (c != '\n') return 0;
        st_json_init(&x->c);
        x->c.mode = M_VALUE;
        x->pend = sc->tools[x->tool].args;
        x->phase = P_XTAG;
        x->xlit = 0;
        return x_json_byte(sc, x, '{');
    case P_XTAG: /* <parameter= (another member) or </function> (the close), decided at the second byte */
        if (x->xlit == 0) {
            if (c != '<') return 0;
            x->xlit = 1;
            return 1;
        }
        if (c == 'p') {
            if (!x_json_text(sc, x, x->c.mode == M_AFTER ? ",\"" : "\"")) return 0;
            x->phase = P_XPOPEN;
            x->xlit = 2;
            return 1;
        }
        if (c != '/' || !x_json_byte(sc, x, '}')) return 0;
        x->phase = P_XFEND;
        x->xlit = 2;
        return 1;
    case P_XPOPEN: return x_xliteral(x, xlit_param, sizeof xlit_param - 1, c, P_XKEY);
    case P_XKEY:
        if (c == '>') {
            if (!x_json_text(sc, x, "\":")) return 0;
            x->phase = P_XVNL;
            return 1;
        }
        if (c == '"' || c == '\\' || c == '<') return 0;
        return x_json_byte(sc, x, c);
    case P_XVNL:
        if (c != '\n') return 0;
        x->phase = P_XVALUE;
        return 1;
    case P_XVALUE: /* a newline after the whole value ends it (past any whitespace bound) */
        if (c == '\n' && x->c.mode == M_AFTER && x->c.depth == 1) {
            x->phase = P_XVCLOSE;
            x->xlit = 0;
            return 1;
        }
        if (c == '<' || !x_json_byte(sc, x, c)) return 0;
        /* the arguments object's own ',' and '}' are the XML tags' to write, not a value's */
        if (x->c.depth == 0 || (x->c.depth == 1 && x->c.mode == M_KEY)) return 0;
        if (c == '\n' && x->c.mode == M_AFTER && x->c.depth == 1) { /* the newline ended a number */
            x->phase = P_XVCLOSE;
            x->xlit = 0;
        }
        return 1;
    case P_XVCLOSE: return x_xliteral(x, xlit_vclose, sizeof xlit_vclose - 1, c, P_XTAG);
    case P_XFEND:
        if (!x_xliteral(x, xlit_fend, sizeof xlit_fend - 1, c, P_END)) return 0;
        if (x->phase == P_END) {
            st_json_init(&x->c);
            x->pend = 0;
        }
        return 1;
    }
    return 0;
}

int st_json_xstep(const st_json_schema *sc, st_json_xstate *x, unsigned c) {
    const char *open = sc->xml ? xlit_open : lit_open, *next = sc->xml ? xlit_next : lit_next;
    size_t n_open = sc->xml ? sizeof xlit_open - 1 : sizeof lit_open - 1, n_next = sc->xml ? sizeof xlit_next - 1 : sizeof lit_next - 1;
    switch (x->phase) {
    case P_ANSWER: return x_json_byte(sc, x, c);
    case P_PRE:
        if (st_json_is_ws(c)) return x->klen++ < 8;
        x->phase = P_OPEN;
        x->klen = 0;
        return x_literal(x, open, n_open, c, P_NAME);
    case P_OPEN: return x_literal(x, open, n_open, c, P_NAME);
    case P_NEXT: return x_literal(x, next, n_next, c, P_NAME);
    case P_NAME: {
        const st_json_stool *t = sc->tools;
        if (c == (sc->xml ? '>' : '"')) {
            if (t[x->cand].len != x->klen) return 0;
            x->tool = x->cand;
            x->cand = x->klen = 0;
            x->phase = sc->xml ? P_XNL : P_MID;
            return 1;
        }
        name_list names = tools_of(sc);
        uint32_t i = next_candidate(&names, x->cand, x->klen, c, 0);
        if (i == sc->n_tools) return 0;
        x->cand = (uint16_t)i;
        x->klen++;
        return 1;
    }
    case P_MID:
        if (!x_literal(x, lit_mid, sizeof lit_mid - 1, c, P_ARGS)) return 0;
        if (x->phase == P_ARGS) {
            st_json_init(&x->c);
            x->c.mode = M_VALUE; /* the arguments object, no think block before it */
            x->pend = sc->tools[x->tool].args;
        }
        return 1;
    case P_ARGS:
        if (!x_json_byte(sc, x, c)) return 0;
        if (x->c.mode == M_DONE) { /* the call's '}' follows at once */
            st_json_init(&x->c);
            x->pend = 0;
            x->phase = P_CLOSE;
        }
        return 1;
    case P_CLOSE: return x_literal(x, lit_close, sizeof lit_close - 1, c, P_END);
    case P_END:
        if (!sc->parallel) return 0;
        x->phase = P_NEXT;
        x->klen = 0;
        return x_literal(x, next, n_next, c, P_NAME);
    default: return x_xml_step(sc, x, c);
    }
}

void st_json_xinit(const st_json_schema *sc, st_json_xstate *x) {
    memset(x, 0, sizeof *x);
    st_json_init(&x->c);
    if (sc->n_tools) x->phase = P_PRE;
    else x->pend = sc->root;
}

int st_json_xcomplete(const st_json_schema *sc, const st_json_xstate *x) {
    return sc->n_tools ? x->phase == P_END : x->c.mode == M_DONE;
}

int st_json_xfeed(const st_json_schema *sc, st_json_xstate *x, const char *bytes, size_t n) {
    st_json_xstate t = *x;
    for (size_t i = 0; i < n; i++)
        if (!st_json_xstep(sc, &t, (unsigned char)bytes[i])) return 0;
    *x = t;
    return 1;
}
