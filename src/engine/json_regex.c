/* json_regex.c: a JSON Schema pattern to a DFA over UTF-8 bytes (json_regex.h).
 *
 * Three steps. A recursive-descent parser turns the pattern into a small tree whose leaves are
 * sets of code points (a literal is a set of one; classes, '.', \d and the like are sets of
 * ranges, without the surrogates, which no UTF-8 text has). The tree becomes a Thompson NFA over
 * bytes: a set becomes the byte-range sequences of its code points' UTF-8 forms, a counted repeat
 * becomes copies, ^ and $ are epsilon edges that pass only at the start and at the end of the
 * string. The search JSON Schema asks for is a loop on any character before the pattern and
 * after its match. Subset construction then makes the DFA, its states being a set of NFA states
 * and the count of characters read (up to maxLength, or saturating at minLength; a character is
 * counted at its first byte), and the states that cannot reach an accepting one are dropped, so
 * the constraint never enters a string it cannot finish. Bytes that no edge tells apart share a
 * class, and the table has a column per class. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/json_regex.h"

#define NFA_MAX_STATES 8000
#define REPEAT_MAX 1000
#define NEST_MAX 64
#define END_CP 0xFFFFFFFFu
/* Edges the subset construction may look at before it gives up (a pattern whose DFA would be
 * huge is refused in bounded time). */
#define WORK_MAX 60000000ull

/* ---- sets of code points ---- */

typedef struct cprange { uint32_t lo, hi; } cprange;
typedef struct cset { cprange *r; uint32_t n, cap; } cset;

static int cset_add(cset *s, uint32_t lo, uint32_t hi) {
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 8;
        cprange *r = realloc(s->r, cap * sizeof *r);
        if (!r) return -1;
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n++] = (cprange){lo, hi};
    return 0;
}

static int cmp_range(const void *pa, const void *pb) {
    const cprange *a = pa, *b = pb;
    return (a->lo > b->lo) - (a->lo < b->lo);
}

/* Sorted, merged, without the surrogates. */
static int cset_norm(cset *s) {
    if (s->n) qsort(s->r, s->n, sizeof *s->r, cmp_range);
    cset o = {0};
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;
        if (o.n && lo <= o.r[o.n - 1].hi + 1) {
            if (hi > o.r[o.n - 1].hi) o.r[o.n - 1].hi = hi;
        } else if (cset_add(&o, lo, hi)) {
            free(o.r);
            return -1;
        }
    }
    cset t = {0};
    for (uint32_t i = 0; i < o.n; i++) {
        uint32_t lo = o.r[i].lo, hi = o.r[i].hi;
        int bad = 0;
        if (lo < 0xD800 && hi >= 0xD800) { bad |= cset_add(&t, lo, 0xD7FF); lo = 0xE000; }
        if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
        if (lo <= hi) bad |= cset_add(&t, lo, hi);
        if (bad) { free(o.r); free(t.r); return -1; }
    }
    free(o.r);
    free(s->r);
    *s = t;
    return 0;
}

/* The complement within the code points (s normalized). */
static int cset_negate(cset *s) {
    cset o = {0};
    uint32_t at = 0;
    int bad = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->r[i].lo > at) bad |= cset_add(&o, at, s->r[i].lo - 1);
        at = s->r[i].hi + 1;
    }
    if (at <= 0x10FFFF) bad |= cset_add(&o, at, 0x10FFFF);
    free(s->r);
    *s = o;
    return bad ? -1 : cset_norm(s);
}

/* \d \w \s (and their negations by the caller); '.' is the negation of the line terminators. */
static int cset_class(cset *s, int k) {
    static const cprange digit[] = {{'0', '9'}}, word[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
                         space[] = {{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                                    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}},
                         lines[] = {{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}};
    const cprange *r = k == 'd' ? digit : k == 'w' ? word : k == 's' ? space : lines;
    size_t n = k == 'd' ? 1 : k == 'w' ? 4 : k == 's' ? 10 : 3;
    for (size_t i = 0; i < n; i++)
        if (cset_add(s, r[i].lo, r[i].hi)) return -1;
    return 0;
}

/* ---- the parser: pattern to tree ---- */

enum { N_EMPTY, N_SET, N_CAT, N_ALT, N_REP, N_BOL, N_EOL };

typedef struct rnode {
    uint8_t kind;
    int a, b;          /* CAT, ALT: the parts; REP: a */
    int min, max;      /* REP; max -1: no bound */
    uint32_t first, n; /* SET: ranges in parser.ranges */
} rnode;

typedef struct parser {
    const unsigned char *p, *end;
    rnode *nodes;
    int n_nodes, cap_nodes;
    cset ranges;
    char *err;
    size_t n_err;
    int failed, depth;
} parser;

static int perr(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser *ps, const char *fmt, ...) {
    if (!ps->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->err, ps->n_err, fmt, ap);
        va_end(ap);
    }
    ps->failed = 1;
    return -1;
}

static int new_rnode(parser *ps, int kind, int a, int b) {
    if (ps->failed) return -1;
    if (ps->n_nodes == ps->cap_nodes) {
        int cap = ps->cap_nodes ? ps->cap_nodes * 2 : 32;
        rnode *n = realloc(ps->nodes, (size_t)cap * sizeof *n);
        if (!n) return perr(ps, "out of memory");
        ps->nodes = n;
        ps->cap_nodes = cap;
    }
    ps->nodes[ps->n_nodes] = (rnode){.kind = (uint8_t)kind, .a = a, .b = b};
    return ps->n_nodes++;
}

/* The code point at p (the pattern is valid UTF-8: it came from a JSON string), and its length. */
static uint32_t decode(const unsigned char *p, const unsigned char *end, int *len) {
    if (p >= end) { *len = 0; return END_CP; }
    unsigned c = p[0];
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (p + n > end) n = 1;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int i = 1; i < n; i++) cp = cp << 6 | (p[i] & 0x3F);
    *len = n;
    return cp;
}

static uint32_t peek(parser *ps) { int n; return decode(ps->p, ps->end, &n); }
static uint32_t take(parser *ps) { int n; uint32_t c = decode(ps->p, ps->end, &n); ps->p += n; return c; }

static int hexval(unsigned c) {
    return c >= '0' && c <= '9' ? (int)c - '0' : c >= 'a' && c <= 'f' ? (int)c - 'a' + 10 : c >= 'A' && c <= 'F' ? (int)c - 'A' + 10 : -1;
}

/* n hex digits at p, or -1 (nothing taken). */
static long take_hex(parser *ps, int n) {
    if (ps->end - ps->p < n) return -1;
    long v = 0;
    for (int i = 0; i < n; i++) {
        int h = hexval(ps->p[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    ps->p += n;
    return v;
}

/* A set node of the ranges of s (normalized; negated first when neg), s freed. */
static int set_node(parser *ps, cset *s, int neg) {
    int bad = cset_norm(s) || (neg && cset_negate(s));
    int node = bad ? perr(ps, "out of memory") : new_rnode(ps, N_SET, 0, 0);
    if (node >= 0) {
        ps->nodes[node].first = ps->ranges.n;
        ps->nodes[node].n = s->n;
        for (uint32_t i = 0; i < s->n; i++)
            if (cset_add(&ps->ranges, s->r[i].lo, s->r[i].hi)) { node = perr(ps, "out of memory"); break; }
    }
    free(s->r);
    return node;
}

/* An escape after '\': into out; *single is set when it stands for one code point (*cp). */
static int parse_escape(parser *ps, cset *out, int in_class, int *single, uint32_t *cp) {
    uint32_t c = take(ps);
    *single = 1;
    switch (c) {
    case END_CP: return perr(ps, "the pattern ends in a lone '\\'");
    case 'd': case 'w': case 's': case 'D': case 'W': case 'S': {
        *single = 0;
        cset t = {0};
        int bad = cset_class(&t, (int)(c | 0x20)) || cset_norm(&t) || ((c & 0x20) == 0 && cset_negate(&t));
        for (uint32_t i = 0; !bad && i < t.n; i++) bad |= cset_add(out, t.r[i].lo, t.r[i].hi);
        free(t.r);
        return bad ? perr(ps, "out of memory") : 0;
    }
    case 'b':
        if (in_class) { c = 0x08; break; }
        return perr(ps, "the word boundary '\\b' is not supported");
    case 'B': return perr(ps, "the word boundary '\\B' is not supported");
    case 'k': return perr(ps, "the named backreference '\\k' is not supported");
    case 'p': case 'P': return perr(ps, "the property escape '\\%c{...}' is not supported", (char)c);
    case 'n': c = '\n'; break;
    case 'r': c = '\r'; break;
    case 't': c = '\t'; break;
    case 'f': c = '\f'; break;
    case 'v': c = '\v'; break;
    case '0':
        if (peek(ps) >= '0' && peek(ps) <= '9') return perr(ps, "the octal escape '\\0%c' is not supported", (char)peek(ps));
        c = 0;
        break;
    case 'c': {
        uint32_t l = peek(ps);
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) return perr(ps, "'\\c' must be followed by a letter");
        take(ps);
        c = l % 32;
        break;
    }
    case 'x': {
        long v = take_hex(ps, 2);
        if (v >= 0) c = (uint32_t)v;
        break;
    }
    case 'u': {
        if (peek(ps) == '{') return perr(ps, "the escape '\\u{...}' (the u flag's form) is not supported");
        long v = take_hex(ps, 4);
        if (v < 0) break; /* a lone 'u', as ECMA-262 (Annex B) reads it */
        c = (uint32_t)v;
        if (c >= 0xD800 && c <= 0xDBFF && ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') {
            const unsigned char *at = ps->p;
            ps->p += 2;
            long lo = take_hex(ps, 4);
            if (lo >= 0xDC00 && lo <= 0xDFFF) c = 0x10000 + ((c - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            else ps->p = at;
        }
        break;
    }
    default:
        if (c >= '1' && c <= '9') return perr(ps, "the backreference '\\%c' is not supported", (char)c);
        break; /* an identity escape: \. \\ \/ \- ... */
    }
    *cp = c;
    return cset_add(out, c, c) ? perr(ps, "out of memory") : 0;
}

/* After '[': a class up to its ']'. */
static int parse_class(parser *ps) {
    cset s = {0};
    int neg = 0;
    if (peek(ps) == '^') { take(ps); neg = 1; }
    for (;;) {
        uint32_t c = take(ps);
        if (c == END_CP) { free(s.r); return perr(ps, "a '[' without its ']'"); }
        if (c == ']') break;
        int single = 1;
        uint32_t lo = c;
        if (c == '\\' && parse_escape(ps, &s, 1, &single, &lo)) { free(s.r); return -1; }
        if (c != '\\' && cset_add(&s, c, c)) { free(s.r); return perr(ps, "out of memory"); }
        /* a range, unless '-' is last or an end is a class escape (then '-' is itself) */
        if (peek(ps) != '-' || ps->p + 1 >= ps->end || ps->p[1] == ']') continue;
        take(ps);
        uint32_t d = take(ps), hi = d;
        int single2 = 1;
        if (d == '\\' && parse_escape(ps, &s, 1, &single2, &hi)) { free(s.r); return -1; }
        if (d != '\\' && cset_add(&s, d, d)) { free(s.r); return perr(ps, "out of memory"); }
        if (!single || !single2) {
            if (cset_add(&s, '-', '-')) { free(s.r); return perr(ps, "out of memory"); }
            continue;
        }
        if (lo > hi) { free(s.r); return perr(ps, "the class range is out of order"); }
        if (cset_add(&s, lo, hi)) { free(s.r); return perr(ps, "out of memory"); }
    }
    return set_node(ps, &s, neg);
}

static int parse_alt(parser *ps);

/* {n}, {n,} or {n,m} at p (after '{'); 1 when it is one (taken), 0 when not (nothing taken). */
static int parse_braces(parser *ps, int *min, int *max) {
    const unsigned char *q = ps->p;
    long a = -1, b = -1;
    int comma = 0;
    for (a = 0; q < ps->end && *q >= '0' && *q <= '9'; q++) a = a < 100000 ? a * 10 + (*q - '0') : a;
    if (q == ps->p) return 0;
    if (q < ps->end && *q == ',') {
        comma = 1;
        q++;
        const unsigned char *d = q;
        for (b = 0; q < ps->end && *q >= '0' && *q <= '9'; q++) b = b < 100000 ? b * 10 + (*q - '0') : b;
        if (q == d) b = -1;
    }
    if (q >= ps->end || *q != '}') return 0;
    ps->p = q + 1;
    *min = (int)a;
    *max = comma ? (int)b : (int)a;
    return 1;
}

static int parse_atom(parser *ps) {
    uint32_t c = take(ps);
    switch (c) {
    case '(': {
        if (peek(ps) == '?') {
            take(ps);
            uint32_t k = take(ps);
            if (k == '=' || k == '!') return perr(ps, "the lookahead '(?%c' is not supported", (char)k);
            if (k == '<' && (peek(ps) == '=' || peek(ps) == '!')) return perr(ps, "the lookbehind '(?<%c' is not supported", (char)peek(ps));
            if (k == '<') { /* a named group: the name is only a name here */
                while (peek(ps) != '>' && peek(ps) != END_CP) take(ps);
                if (take(ps) != '>') return perr(ps, "a group name without its '>'");
            } else if (k != ':') {
                return perr(ps, "the group '(?%c' is not supported", k < 0x80 && k > 0x20 ? (char)k : '?');
            }
        }
        if (++ps->depth > NEST_MAX) return perr(ps, "groups nested deeper than %d", NEST_MAX);
        int x = parse_alt(ps);
        ps->depth--;
        if (x < 0) return -1;
        if (take(ps) != ')') return perr(ps, "a '(' without its ')'");
        return x;
    }
    case '*': case '+': case '?': return perr(ps, "nothing to repeat before '%c'", (char)c);
    case '{': {
        int a, b;
        if (parse_braces(ps, &a, &b)) return perr(ps, "nothing to repeat before '{'");
        break;
    }
    case '^': return new_rnode(ps, N_BOL, 0, 0);
    case '$': return new_rnode(ps, N_EOL, 0, 0);
    case '[': return parse_class(ps);
    case '.': {
        cset s = {0};
        if (cset_class(&s, '.')) return perr(ps, "out of memory");
        return set_node(ps, &s, 1);
    }
    case '\\': {
        cset s = {0};
        int single;
        uint32_t cp;
        if (parse_escape(ps, &s, 0, &single, &cp)) { free(s.r); return -1; }
        return set_node(ps, &s, 0);
    }
    default: break;
    }
    cset s = {0};
    if (cset_add(&s, c, c)) return perr(ps, "out of memory");
    return set_node(ps, &s, 0);
}

static int parse_repeat(parser *ps) {
    int x = parse_atom(ps);
    if (x < 0) return -1;
    int min, max;
    uint32_t c = peek(ps);
    if (c == '*' || c == '+' || c == '?') {
        take(ps);
        min = c == '+';
        max = c == '?' ? 1 : -1;
    } else if (c == '{') {
        take(ps);
        if (!parse_braces(ps, &min, &max)) { ps->p--; return x; } /* a literal '{' follows */
        if (max >= 0 && min > max) return perr(ps, "the repeat {%d,%d} is out of order", min, max);
        if (min > REPEAT_MAX || max > REPEAT_MAX) return perr(ps, "a repeat count above %d", REPEAT_MAX);
    } else {
        return x;
    }
    if (ps->nodes[x].kind == N_BOL || ps->nodes[x].kind == N_EOL) return perr(ps, "a quantifier after an anchor ('^' or '$')");
    if (peek(ps) == '?') take(ps); /* lazy: the same strings match */
    c = peek(ps);
    if (c == '*' || c == '+' || c == '?') return perr(ps, "nothing to repeat before '%c'", (char)c);
    int r = new_rnode(ps, N_REP, x, 0);
    if (r >= 0) { ps->nodes[r].min = min; ps->nodes[r].max = max; }
    return r;
}

static int parse_cat(parser *ps) {
    int x = new_rnode(ps, N_EMPTY, 0, 0);
    while (x >= 0 && ps->p < ps->end && *ps->p != '|' && *ps->p != ')') {
        int y = parse_repeat(ps);
        x = y < 0 ? -1 : new_rnode(ps, N_CAT, x, y);
    }
    return x;
}

static int parse_alt(parser *ps) {
    int x = parse_cat(ps);
    while (x >= 0 && ps->p < ps->end && *ps->p == '|') {
        take(ps);
        int y = parse_cat(ps);
        x = y < 0 ? -1 : new_rnode(ps, N_ALT, x, y);
    }
    return x;
}

/* ---- the NFA ---- */

enum { E_BYTE, E_EPS, E_BOL, E_EOL };

typedef struct nedge { uint32_t from, to; uint8_t lo, hi, kind; } nedge;

typedef struct nfa {
    uint32_t n;
    nedge *e;
    uint32_t n_e, cap_e;
    uint32_t *first; /* edges of state s: e[first[s] .. first[s + 1]) once sorted */
    int failed;
} nfa;

static int nstate(nfa *a) {
    if (a->n >= NFA_MAX_STATES) { a->failed = 1; return 0; }
    return (int)a->n++;
}

static void nedge_add(nfa *a, uint32_t from, uint32_t to, unsigned lo, unsigned hi, int kind) {
    if (a->failed) return;
    if (a->n_e == a->cap_e) {
        uint32_t cap = a->cap_e ? a->cap_e * 2 : 64;
        nedge *e = realloc(a->e, cap * sizeof *e);
        if (!e) { a->failed = 1; return; }
        a->e = e;
        a->cap_e = cap;
    }
    a->e[a->n_e++] = (nedge){from, to, (uint8_t)lo, (uint8_t)hi, (uint8_t)kind};
}

static int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

static void utf8_bytes(uint32_t cp, unsigned char *b) {
    int n = utf8_len(cp);
    if (n == 1) { b[0] = (unsigned char)cp; return; }
    for (int i = n - 1; i > 0; i--) { b[i] = (unsigned char)(0x80 | (cp & 0x3F)); cp >>= 6; }
    b[0] = (unsigned char)((n == 2 ? 0xC0 : n == 3 ? 0xE0 : 0xF0) | cp);
}

/* The code points lo..hi (of one UTF-8 length) as byte-range sequences from `from` to `to`: split
 * until each piece is a product of one range per byte. */
static void utf8_seq(nfa *a, uint32_t from, uint32_t to, uint32_t lo, uint32_t hi) {
    int n = utf8_len(lo);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) == (hi & ~m)) continue;
        if (lo & m) { utf8_seq(a, from, to, lo, lo | m); utf8_seq(a, from, to, (lo | m) + 1, hi); return; }
        if ((hi & m) != m) { utf8_seq(a, from, to, lo, (hi & ~m) - 1); utf8_seq(a, from, to, hi & ~m, hi); return; }
    }
    unsigned char bl[4], bh[4];
    utf8_bytes(lo, bl);
    utf8_bytes(hi, bh);
    uint32_t s = from;
    for (int k = 0; k < n - 1; k++) {
        uint32_t t = (uint32_t)nstate(a);
        nedge_add(a, s, t, bl[k], bh[k], E_BYTE);
        s = t;
    }
    nedge_add(a, s, to, bl[n - 1], bh[n - 1], E_BYTE);
}

static void emit_ranges(nfa *a, uint32_t from, uint32_t to, const cprange *r, uint32_t n) {
    static const uint32_t tops[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    for (uint32_t i = 0; i < n && !a->failed; i++) {
        uint32_t lo = r[i].lo;
        for (int k = 0; k < 4 && lo <= r[i].hi; k++) {
            if (lo > tops[k]) continue;
            uint32_t hi = r[i].hi < tops[k] ? r[i].hi : tops[k];
            utf8_seq(a, from, to, lo, hi);
            lo = hi + 1;
        }
    }
}

/* Node x of the tree from state `from`; returns its end state. */
static uint32_t emit(nfa *a, const parser *ps, int x, uint32_t from) {
    if (a->failed) return from;
    const rnode *r = &ps->nodes[x];
    switch (r->kind) {
    case N_EMPTY: return from;
    case N_SET: {
        uint32_t to = (uint32_t)nstate(a);
        emit_ranges(a, from, to, ps->ranges.r + r->first, r->n);
        return to;
    }
    case N_CAT: return emit(a, ps, r->b, emit(a, ps, r->a, from));
    case N_ALT: {
        uint32_t end = (uint32_t)nstate(a);
        for (int side = 0; side < 2; side++) {
            uint32_t s = (uint32_t)nstate(a);
            nedge_add(a, from, s, 0, 0, E_EPS);
            nedge_add(a, emit(a, ps, side ? r->b : r->a, s), end, 0, 0, E_EPS);
        }
        return end;
    }
    case N_BOL: case N_EOL: {
        uint32_t to = (uint32_t)nstate(a);
        nedge_add(a, from, to, 0, 0, r->kind == N_BOL ? E_BOL : E_EOL);
        return to;
    }
    default: { /* N_REP */
        uint32_t cur = from;
        for (int i = 0; i < r->min && !a->failed; i++) cur = emit(a, ps, r->a, cur);
        if (r->max < 0) {
            uint32_t s = (uint32_t)nstate(a);
            nedge_add(a, cur, s, 0, 0, E_EPS);
            nedge_add(a, emit(a, ps, r->a, s), s, 0, 0, E_EPS);
            return s;
        }
        if (r->max == r->min) return cur;
        uint32_t end = (uint32_t)nstate(a);
        for (int i = r->min; i < r->max && !a->failed; i++) {
            nedge_add(a, cur, end, 0, 0, E_EPS);
            cur = emit(a, ps, r->a, cur);
        }
        nedge_add(a, cur, end, 0, 0, E_EPS);
        return end;
    }
    }
}

static int cmp_edge(const void *pa, const void *pb) {
    const nedge *a = pa, *b = pb;
    return (a->from > b->from) - (a->from < b->from);
}

static int nfa_index(nfa *a) {
    qsort(a->e, a->n_e, sizeof *a->e, cmp_edge);
    a->first = calloc((size_t)a->n + 1, sizeof *a->first);
    if (!a->first) return -1;
    for (uint32_t i = 0; i < a->n_e; i++) a->first[a->e[i].from + 1]++;
    for (uint32_t s = 0; s < a->n; s++) a->first[s + 1] += a->first[s];
    return 0;
}

/* ---- subset construction ---- */

typedef struct dfa_build {
    const nfa *a;
    uint32_t words;    /* uint64 words per set */
    uint64_t *sets;    /* [cap * words] */
    uint32_t *count;   /* characters read (capped) */
    uint8_t *start;    /* the start state: ^ passes */
    uint32_t n, cap;
    uint32_t *hash;    /* open addressing: state + 1, 0 empty */
    uint32_t hcap;
    uint32_t *stack;   /* [a->n] for closures */
} dfa_build;

static uint64_t set_hash(const uint64_t *s, uint32_t words, uint32_t count, uint8_t start) {
    uint64_t h = 1469598103934665603ull ^ count ^ ((uint64_t)start << 40);
    for (uint32_t i = 0; i < words; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* Adds every state reachable from set's by epsilon edges (and ^'s at the start, $'s at the end). */
static void closure(dfa_build *d, uint64_t *set, int bol, int eol) {
    const nfa *a = d->a;
    uint32_t top = 0;
    for (uint32_t w = 0; w < d->words; w++)
        for (uint64_t b = set[w]; b; b &= b - 1) d->stack[top++] = w * 64 + (uint32_t)__builtin_ctzll(b);
    while (top) {
        uint32_t s = d->stack[--top];
        for (uint32_t i = a->first[s]; i < a->first[s + 1]; i++) {
            const nedge *e = &a->e[i];
            if (e->kind == E_BYTE || (e->kind == E_BOL && !bol) || (e->kind == E_EOL && !eol)) continue;
            if ((set[e->to >> 6] >> (e->to & 63)) & 1) continue;
            set[e->to >> 6] |= 1ull << (e->to & 63);
            d->stack[top++] = e->to;
        }
    }
}

/* The state of (set, count, start), added when new; -1 when out of room. */
static int64_t intern(dfa_build *d, const uint64_t *set, uint32_t count, uint8_t start) {
    uint64_t h = set_hash(set, d->words, count, start);
    for (uint32_t i = (uint32_t)h & (d->hcap - 1);; i = (i + 1) & (d->hcap - 1)) {
        uint32_t k = d->hash[i];
        if (!k) {
            if (d->n >= ST_JSON_RE_MAX_STATES) return -1;
            if (d->n == d->cap) {
                uint32_t cap = d->cap * 2;
                uint64_t *sets = realloc(d->sets, (size_t)cap * d->words * sizeof *sets);
                if (sets) d->sets = sets;
                uint32_t *count2 = realloc(d->count, cap * sizeof *count2);
                if (count2) d->count = count2;
                uint8_t *st = realloc(d->start, cap);
                if (st) d->start = st;
                if (!sets || !count2 || !st) return -1;
                d->cap = cap;
            }
            memcpy(d->sets + (size_t)d->n * d->words, set, d->words * sizeof *set);
            d->count[d->n] = count;
            d->start[d->n] = start;
            d->hash[i] = d->n + 1;
            return d->n++;
        }
        k--;
        if (d->count[k] == count && d->start[k] == start && !memcmp(d->sets + (size_t)k * d->words, set, d->words * sizeof *set)) return k;
    }
}

static void fail_msg(char *err, size_t n_err, const char *msg) { snprintf(err, n_err, "%s", msg); }

int st_json_regex_compile(const char *pattern, size_t n, uint32_t min_len, uint32_t max_len, st_json_regex *out, char *err, size_t n_err) {
    memset(out, 0, sizeof *out);
    parser ps = {.p = (const unsigned char *)pattern, .end = (const unsigned char *)pattern + n, .err = err, .n_err = n_err};
    int root = parse_alt(&ps);
    if (root >= 0 && ps.p < ps.end) root = perr(&ps, "a ')' without its '('");
    if (root < 0) { free(ps.nodes); free(ps.ranges.r); return -1; }

    /* the search: any characters, the pattern, any characters */
    nfa a = {0};
    static const cprange any[] = {{0, 0xD7FF}, {0xE000, 0x10FFFF}};
    uint32_t s0 = (uint32_t)nstate(&a), r0 = (uint32_t)nstate(&a);
    emit_ranges(&a, s0, s0, any, 2);
    nedge_add(&a, s0, r0, 0, 0, E_EPS);
    uint32_t r1 = emit(&a, &ps, root, r0), fin = (uint32_t)nstate(&a);
    nedge_add(&a, r1, fin, 0, 0, E_EPS);
    emit_ranges(&a, fin, fin, any, 2);
    free(ps.nodes);
    free(ps.ranges.r);
    if (a.failed || nfa_index(&a)) {
        free(a.e);
        free(a.first);
        fail_msg(err, n_err, "too large to enforce (more than 8000 automaton states)");
        return -1;
    }

    /* byte classes: bytes that no edge, and no character count, tells apart */
    uint8_t cut[257] = {0};
    cut[0] = cut[0x80] = cut[0xC0] = cut[256] = 1;
    for (uint32_t i = 0; i < a.n_e; i++)
        if (a.e[i].kind == E_BYTE) { cut[a.e[i].lo] = 1; cut[a.e[i].hi + 1] = 1; }
    uint32_t nc = 0;
    unsigned char rep[256];
    for (int b = 0; b < 256; b++) {
        if (cut[b]) rep[nc++] = (unsigned char)b;
        out->cls[b] = (uint8_t)(nc - 1);
    }
    out->n_classes = nc;

    int has_max = max_len != UINT32_MAX;
    uint32_t cap_count = has_max ? max_len : min_len;
    dfa_build d = {.a = &a, .words = (a.n + 63) / 64, .cap = 64, .hcap = 2 * ST_JSON_RE_MAX_STATES};
    d.sets = malloc((size_t)d.cap * d.words * sizeof *d.sets);
    d.count = malloc(d.cap * sizeof *d.count);
    d.start = malloc(d.cap);
    d.hash = calloc(d.hcap, sizeof *d.hash);
    d.stack = malloc((size_t)a.n * sizeof *d.stack);
    uint64_t *set = calloc(d.words, sizeof *set);
    uint16_t *trans = NULL;
    uint8_t *acc = NULL;
    size_t cap_trans = 0;
    unsigned long long work = 0;
    int rc = -1;
    const char *why = "out of memory";
    if (!d.sets || !d.count || !d.start || !d.hash || !d.stack || !set) goto done;
    set[0] = 1; /* s0 */
    closure(&d, set, 1, 0);
    if (intern(&d, set, 0, 1) < 0) goto done;
    for (uint32_t q = 0; q < d.n; q++) {
        if ((size_t)(q + 1) * nc > cap_trans) {
            size_t cap = cap_trans ? cap_trans * 2 : (size_t)64 * nc;
            uint16_t *t = realloc(trans, cap * sizeof *t);
            if (!t) goto done;
            trans = t;
            cap_trans = cap;
        }
        for (uint32_t k = 0; k < nc; k++) {
            unsigned b = rep[k];
            uint16_t *to = &trans[(size_t)q * nc + k];
            *to = ST_JSON_RE_DEAD;
            int cont = b >= 0x80 && b <= 0xBF;
            uint32_t cnt = d.count[q] + !cont;
            if (has_max && cnt > max_len) continue;
            if (cnt > cap_count) cnt = cap_count;
            memset(set, 0, d.words * sizeof *set);
            const uint64_t *from = d.sets + (size_t)q * d.words;
            int any_state = 0;
            for (uint32_t w = 0; w < d.words; w++)
                for (uint64_t bits = from[w]; bits; bits &= bits - 1) {
                    uint32_t s = w * 64 + (uint32_t)__builtin_ctzll(bits);
                    work += a.first[s + 1] - a.first[s] + 1;
                    for (uint32_t i = a.first[s]; i < a.first[s + 1]; i++) {
                        const nedge *e = &a.e[i];
                        if (e->kind == E_BYTE && b >= e->lo && b <= e->hi) { set[e->to >> 6] |= 1ull << (e->to & 63); any_state = 1; }
                    }
                }
            if (work > WORK_MAX) { why = "too large to enforce (its automaton would be huge: a long repeat after an unanchored start?)"; goto done; }
            if (!any_state) continue;
            closure(&d, set, 0, 0);
            int64_t t = intern(&d, set, cnt, 0);
            if (t < 0) { why = "too large to enforce (more than 32768 automaton states: a long repeat, or a long minLength / maxLength beside the pattern)"; goto done; }
            *to = (uint16_t)t;
        }
    }
    /* accepting: the count within the bounds, and the match state reached with $ passing */
    acc = calloc(d.n, 1);
    if (!acc) goto done;
    for (uint32_t q = 0; q < d.n; q++) {
        if (d.count[q] < min_len) continue;
        memcpy(set, d.sets + (size_t)q * d.words, d.words * sizeof *set);
        closure(&d, set, d.start[q], 1);
        acc[q] = (set[fin >> 6] >> (fin & 63)) & 1;
    }
    /* live: can reach an accepting state (backwards from them over the reversed edges) */
    {
        uint32_t *rfirst = calloc((size_t)d.n + 1, sizeof *rfirst), *redge = malloc((size_t)d.n * nc * sizeof *redge);
        uint8_t *live = calloc(d.n, 1);
        uint32_t *queue = malloc((size_t)d.n * sizeof *queue), *map = malloc((size_t)d.n * sizeof *map);
        if (!rfirst || !redge || !live || !queue || !map) { free(rfirst); free(redge); free(live); free(queue); free(map); goto done; }
        for (size_t i = 0; i < (size_t)d.n * nc; i++)
            if (trans[i] != ST_JSON_RE_DEAD) rfirst[trans[i] + 1]++;
        for (uint32_t q = 0; q < d.n; q++) rfirst[q + 1] += rfirst[q];
        uint32_t *fill = malloc((size_t)d.n * sizeof *fill);
        if (!fill) { free(rfirst); free(redge); free(live); free(queue); free(map); goto done; }
        memcpy(fill, rfirst, (size_t)d.n * sizeof *fill);
        for (size_t i = 0; i < (size_t)d.n * nc; i++)
            if (trans[i] != ST_JSON_RE_DEAD) redge[fill[trans[i]]++] = (uint32_t)(i / nc);
        free(fill);
        uint32_t head = 0, tail = 0;
        for (uint32_t q = 0; q < d.n; q++)
            if (acc[q]) { live[q] = 1; queue[tail++] = q; }
        while (head < tail) {
            uint32_t q = queue[head++];
            for (uint32_t i = rfirst[q]; i < rfirst[q + 1]; i++)
                if (!live[redge[i]]) { live[redge[i]] = 1; queue[tail++] = redge[i]; }
        }
        uint32_t n_live = 0;
        for (uint32_t q = 0; q < d.n; q++) map[q] = live[q] ? n_live++ : ST_JSON_RE_DEAD;
        if (!live[0]) {
            why = "no string can match it (within minLength / maxLength, if given)";
        } else if ((out->next = malloc((size_t)n_live * nc * sizeof *out->next)) && (out->accept = malloc(n_live))) {
            for (uint32_t q = 0; q < d.n; q++) {
                if (!live[q]) continue;
                out->accept[map[q]] = acc[q];
                for (uint32_t k = 0; k < nc; k++) {
                    uint16_t t = trans[(size_t)q * nc + k];
                    out->next[(size_t)map[q] * nc + k] = t == ST_JSON_RE_DEAD ? ST_JSON_RE_DEAD : (uint16_t)map[t];
                }
            }
            out->n_states = n_live;
            rc = 0;
        }
        free(rfirst); free(redge); free(live); free(queue); free(map);
    }
done:
    if (rc) { st_json_regex_free(out); fail_msg(err, n_err, why); }
    free(d.sets); free(d.count); free(d.start); free(d.hash); free(d.stack); free(set);
    free(trans); free(acc);
    free(a.e); free(a.first);
    return rc;
}

void st_json_regex_free(st_json_regex *re) {
    if (!re) return;
    free(re->next);
    free(re->accept);
    re->next = NULL;
    re->accept = NULL;
    re->n_states = 0;
}

/* Whether a path from q reads some byte string of the product r[0] x ... x r[n-1]. */
static int product_live(const st_json_regex *re, uint16_t q, const unsigned char (*r)[2], int n) {
    uint16_t cur[64], nxt[64];
    int nc = 1;
    cur[0] = q;
    for (int k = 0; k < n; k++) {
        int nn = 0;
        for (int i = 0; i < nc; i++)
            for (unsigned b = r[k][0]; b <= r[k][1]; b++) {
                uint16_t t = st_json_regex_step(re, cur[i], b);
                if (t == ST_JSON_RE_DEAD) continue;
                int seen = 0;
                for (int j = 0; j < nn && !seen; j++) seen = nxt[j] == t;
                if (!seen) {
                    if (nn == 64) return 1; /* too many to follow: some live state is among them (every kept state is live) */
                    nxt[nn++] = t;
                }
            }
        if (!nn) return 0;
        memcpy(cur, nxt, (size_t)nn * sizeof *cur);
        nc = nn;
    }
    return 1;
}

/* lo..hi of one UTF-8 length, split as utf8_seq splits it, each product tried. */
static int seq_live(const st_json_regex *re, uint16_t q, uint32_t lo, uint32_t hi) {
    int n = utf8_len(lo);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) == (hi & ~m)) continue;
        if (lo & m) return seq_live(re, q, lo, lo | m) || seq_live(re, q, (lo | m) + 1, hi);
        if ((hi & m) != m) return seq_live(re, q, lo, (hi & ~m) - 1) || seq_live(re, q, hi & ~m, hi);
    }
    unsigned char bl[4], bh[4], r[4][2];
    utf8_bytes(lo, bl);
    utf8_bytes(hi, bh);
    for (int k = 0; k < n; k++) { r[k][0] = bl[k]; r[k][1] = bh[k]; }
    return product_live(re, q, (const unsigned char (*)[2])r, n);
}

int st_json_regex_range_live(const st_json_regex *re, uint16_t q, uint32_t lo, uint32_t hi) {
    static const uint32_t tops[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    for (int part = 0; part < 2; part++) { /* around the surrogates */
        uint32_t a = part ? (lo > 0xE000 ? lo : 0xE000) : lo, b = part ? hi : (hi < 0xD7FF ? hi : 0xD7FF);
        for (int k = 0; k < 4 && a <= b; k++) {
            if (a > tops[k]) continue;
            uint32_t e = b < tops[k] ? b : tops[k];
            if (seq_live(re, q, a, e)) return 1;
            a = e + 1;
        }
    }
    return 0;
}

int st_json_regex_matches(const st_json_regex *re, const char *text, size_t n) {
    uint16_t q = 0;
    for (size_t i = 0; i < n; i++) {
        q = st_json_regex_step(re, q, (unsigned char)text[i]);
        if (q == ST_JSON_RE_DEAD) return 0;
    }
    return re->accept[q];
}
