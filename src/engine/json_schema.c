/* json_schema.c: compiling a JSON Schema (or a tools array) into the node table of json_schema.h.
 *
 * One pass over the schema, depth first: each subschema becomes a node (a type mask, the sorted
 * properties with a bit per required one, the node of other keys, of items, the enum texts, the
 * bounds on a string's length, an array's items and an integer's value; an enum's values are
 * filtered by the bounds instead);
 * "any value" is node 0 and is shared. $ref is followed into the root's $defs / definitions, with
 * the references being compiled on a stack, so a recursive one is refused instead of looping.
 * Every refusal names the field by its path from the schema's root. Knows nothing of tokens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "engine/json_regex.h"
#include "engine/json_schema.h"

typedef struct compiler {
    st_json_schema *s;
    uint32_t cap_nodes, cap_props, cap_enums, cap_enum_len, cap_owned, cap_res;
    json_t *root;
    const char *refs[ST_JSON_SCHEMA_DEPTH * 2]; /* the $refs being compiled */
    int n_refs;
    int failed;
} compiler;

static int fail(compiler *c, const char *path, const char *what) {
    if (!c->failed) st_fail(ST_ERR_INVALID, "%s: %s", *path ? path : "(root)", what);
    c->failed = 1;
    return -1;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t size) {
    if (need <= *cap) return 0;
    uint32_t n = *cap ? *cap * 2 : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * size);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

static char *keep(compiler *c, char *str) {
    if (!str || grow((void **)&c->s->owned, &c->cap_owned, c->s->n_owned + 1, sizeof *c->s->owned)) {
        free(str);
        return NULL;
    }
    return c->s->owned[c->s->n_owned++] = str;
}

static int new_node(compiler *c, const char *path) {
    if (c->s->n_nodes >= 65535) return fail(c, path, "the schema has more than 65535 parts");
    if (grow((void **)&c->s->nodes, &c->cap_nodes, c->s->n_nodes + 1, sizeof *c->s->nodes)) return fail(c, path, "out of memory");
    memset(&c->s->nodes[c->s->n_nodes], 0, sizeof *c->s->nodes);
    return (int)c->s->n_nodes++;
}

static void sub_path(char *out, size_t cap, const char *path, const char *a, const char *b) {
    snprintf(out, cap, "%s%s%s%s%s", path, *path ? "." : "", a, b ? "." : "", b ? b : "");
}

/* Names a key may have here: written between quotes with no escape. */
static int plain_name(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == '"' || p[i] == '\\') return 0;
    return 1;
}

static int type_bit(const char *t) {
    static const char *const names[] = {"object", "array", "string", "number", "integer", "boolean", "null"};
    for (int i = 0; i < 7; i++)
        if (!strcmp(t, names[i])) return 1 << i;
    return 0;
}

/* The types a value is of (an integer is a number too). */
static int value_types(json_t *v) {
    if (json_is_object(v)) return ST_JT_OBJECT;
    if (json_is_array(v)) return ST_JT_ARRAY;
    if (json_is_string(v)) return ST_JT_STRING;
    if (json_is_integer(v)) return ST_JT_INTEGER | ST_JT_NUMBER;
    if (json_is_real(v)) return ST_JT_NUMBER;
    if (json_is_boolean(v)) return ST_JT_BOOL;
    return ST_JT_NULL;
}

static int cmp_text(const char *a, uint32_t na, const char *b, uint32_t nb) {
    int r = memcmp(a, b, na < nb ? na : nb);
    return r ? r : (na > nb) - (na < nb);
}

static int cmp_prop(const void *pa, const void *pb) {
    const st_json_sprop *a = pa, *b = pb;
    return cmp_text(a->name, a->len, b->name, b->len);
}

typedef struct text { const char *p; uint32_t n; } text;
static int cmp_tx(const void *pa, const void *pb) {
    const text *a = pa, *b = pb;
    return cmp_text(a->p, a->n, b->p, b->n);
}

typedef struct bounds bounds;
static int in_bounds(json_t *v, const bounds *b);

/* The enum texts of node, from values admitted by its types (and b, unless NULL); sorted, without
 * repeats. */
static int set_enum(compiler *c, int node, json_t *values, const bounds *b, const char *path) {
    size_t n = json_array_size(values), k = 0;
    text *t = calloc(n ? n : 1, sizeof *t);
    if (!t) return fail(c, path, "out of memory");
    uint8_t types = c->s->nodes[node].types;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(values, i);
        if (!(value_types(v) & types) || (b && !in_bounds(v, b))) continue;
        char *s = keep(c, json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY));
        if (!s) { free(t); return fail(c, path, "out of memory"); }
        t[k++] = (text){s, (uint32_t)strlen(s)};
    }
    if (!k) { free(t); return fail(c, path, "no value of the enum (or const) has an allowed type and meets the bounds: nothing can meet it"); }
    qsort(t, k, sizeof *t, cmp_tx);
    st_json_schema *s = c->s;
    if (grow((void **)&s->enums, &c->cap_enums, s->n_enums + (uint32_t)k, sizeof *s->enums)) { free(t); return fail(c, path, "out of memory"); }
    if (grow((void **)&s->enum_len, &c->cap_enum_len, s->n_enums + (uint32_t)k, sizeof *s->enum_len)) { free(t); return fail(c, path, "out of memory"); }
    s->nodes[node].first_enum = s->n_enums;
    for (size_t i = 0; i < k; i++) {
        if (i && !cmp_tx(&t[i], &t[i - 1])) continue;
        s->enums[s->n_enums] = t[i].p;
        s->enum_len[s->n_enums++] = t[i].n;
    }
    s->nodes[node].n_enum = s->n_enums - s->nodes[node].first_enum;
    free(t);
    return 0;
}

/* ---- bounds ---- */

/* A schema's bounds as written: lengths and counts (-1: none), the numeric range (+-INFINITY:
 * none) and whether its ends are exclusive. */
struct bounds {
    double min_len, max_len, min_items, max_items;
    double lo, hi;
    int lo_excl, hi_excl;
    const char *num_key; /* the first numeric bound present, to name it */
    const char *pattern; /* NULL: none */
    size_t pattern_len;
    const st_json_regex *re; /* the pattern compiled, while an enum's strings are filtered by it */
};

static const char *const bound_keys[] = {"minLength", "maxLength", "pattern", "minItems", "maxItems",
                                         "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

static const char *first_bound(json_t *sch) {
    for (size_t i = 0; i < sizeof bound_keys / sizeof *bound_keys; i++)
        if (json_object_get(sch, bound_keys[i])) return bound_keys[i];
    return NULL;
}

/* A count (minLength, maxItems, ...) into *out; -1 when absent. */
static int read_count(compiler *c, json_t *sch, const char *key, const char *path, double *out) {
    json_t *v = json_object_get(sch, key);
    *out = -1;
    if (!v) return 0;
    char p[512];
    sub_path(p, sizeof p, path, key, NULL);
    double x = json_is_number(v) ? json_number_value(v) : -1;
    if (x < 0 || x != floor(x)) return fail(c, p, "must be a non-negative integer");
    *out = x;
    return 0;
}

/* minimum / maximum, and exclusiveMinimum / exclusiveMaximum as numbers (or, as in draft 4, as
 * booleans that make minimum / maximum exclusive); the stricter end wins. */
static int read_end(compiler *c, json_t *sch, const char *key, const char *ex_key, int upper, const char *path, double *end, int *excl) {
    char p[512];
    json_t *v = json_object_get(sch, key), *ex = json_object_get(sch, ex_key);
    *end = upper ? INFINITY : -INFINITY;
    *excl = 0;
    if (v) {
        sub_path(p, sizeof p, path, key, NULL);
        if (!json_is_number(v)) return fail(c, p, "must be a number");
        *end = json_number_value(v);
    }
    if (ex && json_is_boolean(ex)) {
        *excl = json_is_true(ex) && v;
    } else if (ex) {
        sub_path(p, sizeof p, path, ex_key, NULL);
        if (!json_is_number(ex)) return fail(c, p, "must be a number");
        double x = json_number_value(ex);
        if (upper ? x <= *end : x >= *end) { *end = x; *excl = 1; }
    }
    return 0;
}

static int read_bounds(compiler *c, json_t *sch, const char *path, bounds *b) {
    memset(b, 0, sizeof *b);
    if (read_count(c, sch, "minLength", path, &b->min_len) || read_count(c, sch, "maxLength", path, &b->max_len) ||
        read_count(c, sch, "minItems", path, &b->min_items) || read_count(c, sch, "maxItems", path, &b->max_items) ||
        read_end(c, sch, "minimum", "exclusiveMinimum", 0, path, &b->lo, &b->lo_excl) ||
        read_end(c, sch, "maximum", "exclusiveMaximum", 1, path, &b->hi, &b->hi_excl))
        return -1;
    json_t *pat = json_object_get(sch, "pattern");
    if (pat && !json_is_string(pat)) {
        char p[512];
        sub_path(p, sizeof p, path, "pattern", NULL);
        return fail(c, p, "must be a string");
    }
    b->pattern = json_string_value(pat);
    b->pattern_len = json_string_length(pat);
    static const char *const num_keys[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
    b->num_key = NULL;
    for (int i = 0; i < 4 && !b->num_key; i++)
        if (json_object_get(sch, num_keys[i])) b->num_key = num_keys[i];
    return 0;
}

static size_t utf8_chars(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static int count_in(double n, double lo, double hi) { return (lo < 0 || n >= lo) && (hi < 0 || n <= hi); }

/* Whether an enum's value meets the bounds of its type. */
static int in_bounds(json_t *v, const bounds *b) {
    if (json_is_string(v) && b->re) return st_json_regex_matches(b->re, json_string_value(v), json_string_length(v));
    if (json_is_string(v)) return count_in((double)utf8_chars(json_string_value(v), json_string_length(v)), b->min_len, b->max_len);
    if (json_is_array(v)) return count_in((double)json_array_size(v), b->min_items, b->max_items);
    if (json_is_number(v)) {
        double x = json_number_value(v);
        return (b->lo_excl ? x > b->lo : x >= b->lo) && (b->hi_excl ? x < b->hi : x <= b->hi);
    }
    return 1;
}

static uint32_t count_of(double x, uint32_t none) { return x < 0 ? none : x >= (double)UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)x; }

/* The pattern of b with its length bounds, into re; a refusal names "PATH.pattern". */
static int compile_pattern(compiler *c, const bounds *b, const char *path, st_json_regex *re) {
    char p[512], err[256];
    sub_path(p, sizeof p, path, "pattern", NULL);
    uint32_t lo = count_of(b->min_len, 0), hi = count_of(b->max_len, UINT32_MAX);
    if (lo > hi) return fail(c, path, "minLength is more than maxLength: nothing can meet it");
    if (st_json_regex_compile(b->pattern, b->pattern_len, lo, hi, re, err, sizeof err)) return fail(c, p, err);
    return 0;
}

/* A string node's pattern (and length bounds, which its DFA counts) as the schema's next DFA. */
static int set_pattern(compiler *c, int node, const bounds *b, const char *path) {
    st_json_schema *s = c->s;
    if (s->n_res >= 65535) return fail(c, path, "more than 65535 patterns");
    if (grow((void **)&s->res, &c->cap_res, s->n_res + 1, sizeof *s->res)) return fail(c, path, "out of memory");
    if (compile_pattern(c, b, path, &s->res[s->n_res])) return -1;
    st_json_snode *n = &s->nodes[node];
    n->bounds = (uint8_t)((n->bounds & ~(ST_JB_LEN | ST_JB_MAXLEN)) | ST_JB_RE);
    n->re = (uint16_t)++s->n_res;
    return 0;
}

/* The bounds of node (no enum) for the automaton: a string's length, an array's items, an
 * integer's value; a type that admits fractions takes no numeric bound. */
static int set_bounds(compiler *c, int node, const bounds *b, const char *path) {
    char p[512];
    st_json_snode *n = &c->s->nodes[node];
    if ((n->types & ST_JT_STRING) && (b->min_len >= 0 || b->max_len >= 0)) {
        n->bounds |= ST_JB_LEN | (b->max_len >= 0 ? ST_JB_MAXLEN : 0);
        n->min_len = count_of(b->min_len, 0);
        n->max_len = count_of(b->max_len, UINT32_MAX);
        if (n->min_len > n->max_len) return fail(c, path, "minLength is more than maxLength: nothing can meet it");
    }
    if ((n->types & ST_JT_STRING) && b->pattern && set_pattern(c, node, b, path)) return -1;
    if ((n->types & ST_JT_ARRAY) && (b->min_items >= 0 || b->max_items >= 0)) {
        n->bounds |= ST_JB_ITEMS;
        n->min_items = count_of(b->min_items, 0);
        n->max_items = count_of(b->max_items, UINT32_MAX);
        if (n->min_items > n->max_items) return fail(c, path, "minItems is more than maxItems: nothing can meet it");
    }
    if (b->num_key && (n->types & ST_JT_INTEGER)) {
        sub_path(p, sizeof p, path, b->num_key, NULL);
        if (n->types & ST_JT_NUMBER)
            return fail(c, p, "is enforced on integers only: give the type integer (or an enum of the values)");
        /* the integers within: ceil / floor of the ends, one past an exclusive integral end */
        double lo = b->lo_excl ? floor(b->lo) + 1 : ceil(b->lo), hi = b->hi_excl ? ceil(b->hi) - 1 : floor(b->hi);
        const double two63 = 9223372036854775808.0;
        if (lo >= two63 || hi < -two63 || lo > hi) return fail(c, p, "no 64-bit integer is within the bounds: nothing can meet it");
        n->bounds |= ST_JB_INT;
        n->min_int = lo < -two63 ? INT64_MIN : (int64_t)lo;
        n->max_int = hi >= two63 ? INT64_MAX : (int64_t)hi;
    }
    return 0;
}

__extension__ typedef __int128 wide;

int st_json_schema_int_reachable(const st_json_snode *n, int neg, uint64_t mag, int more) {
    wide lo = n->min_int, hi = n->max_int;
    if (more < 0) return lo <= 0; /* "-": -0 and every negative integer are ahead */
    /* the values ahead: mag itself, then mag * 10^k + [0, 10^k) for k digits more */
    wide base = mag, span = 1;
    for (int k = 0; k < 21; k++) {
        wide a = base, b = base + span - 1;
        wide v_lo = neg ? -b : a, v_hi = neg ? -a : b;
        if (v_lo <= hi && v_hi >= lo) return 1;
        if (!more || mag == 0 || base > ((wide)1 << 64)) return 0;
        base *= 10;
        span *= 10;
    }
    return 0;
}

static int compile(compiler *c, json_t *sch, const char *path, int depth);

static json_t *resolve_ref(compiler *c, const char *ref) {
    const char *name = NULL;
    json_t *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) { defs = json_object_get(c->root, "$defs"); name = ref + 8; }
    else if (!strncmp(ref, "#/definitions/", 14)) { defs = json_object_get(c->root, "definitions"); name = ref + 14; }
    return name ? json_object_get(defs, name) : NULL;
}

/* One kind of bound over anyOf's branches that admit its type: none where a branch has none (the
 * union is then exact), else the intersection (a narrower union: a value within it meets every
 * such branch). */
typedef struct span { int on, seen; int64_t lo, hi; } span;

static void fold_span(span *s, int on, int64_t lo, int64_t hi) {
    if (!s->seen) *s = (span){on != 0, 1, lo, hi};
    else if (!on) s->on = 0;
    else if (s->on) { s->lo = lo > s->lo ? lo : s->lo; s->hi = hi < s->hi ? hi : s->hi; }
}

/* anyOf whose branches differ by type: their union, with the one branch that has an object or
 * array structure giving it; enum branches unite with enums, null and booleans; bounds as
 * fold_span says. */
static int compile_any_of(compiler *c, json_t *branches, const char *path, int depth) {
    char p[512];
    if (!json_is_array(branches) || !json_array_size(branches)) return fail(c, path, "anyOf: must be a non-empty array");
    int out = new_node(c, path);
    if (out < 0) return -1;
    size_t n = json_array_size(branches);
    int *b = calloc(n, sizeof *b), has_enum = 0;
    if (!b) return fail(c, path, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char idx[24];
        snprintf(idx, sizeof idx, "%zu", i);
        sub_path(p, sizeof p, path, "anyOf", idx);
        if ((b[i] = compile(c, json_array_get(branches, i), p, depth)) < 0) { free(b); return -1; }
        has_enum |= c->s->nodes[b[i]].n_enum > 0;
    }
    st_json_snode m = {0};
    json_t *values = has_enum ? json_array() : NULL;
    span len = {0}, items = {0}, ints = {0};
    int n_strings = 0; /* branches that admit strings: a pattern is kept only when it is the one */
    uint16_t re = 0;
    for (size_t i = 0; i < n && !c->failed; i++) {
        const st_json_snode *x = &c->s->nodes[b[i]];
        if (has_enum) {
            if (x->n_enum) {
                for (uint32_t k = 0; k < x->n_enum; k++) json_array_append_new(values, json_loads(c->s->enums[x->first_enum + k], JSON_DECODE_ANY, NULL));
            } else if (!(x->types & ~(ST_JT_NULL | ST_JT_BOOL))) {
                if (x->types & ST_JT_NULL) json_array_append_new(values, json_null());
                if (x->types & ST_JT_BOOL) { json_array_append_new(values, json_true()); json_array_append_new(values, json_false()); }
            } else {
                fail(c, path, "anyOf: a branch with an enum can only be joined with enums, null or boolean");
            }
            m.types |= x->types;
            continue;
        }
        if ((x->n_props || x->closed || x->extra) && (m.n_props || m.closed || m.extra)) fail(c, path, "anyOf: two object branches are not supported");
        if (x->items && m.items) fail(c, path, "anyOf: two array branches are not supported");
        m.types |= x->types;
        if (x->n_props || x->closed || x->extra) { m.n_props = x->n_props; m.first_prop = x->first_prop; m.required = x->required; m.closed = x->closed; m.extra = x->extra; }
        if (x->items) m.items = x->items;
        if (x->types & ST_JT_STRING) fold_span(&len, x->bounds & ST_JB_LEN, x->min_len, x->max_len);
        if (x->types & ST_JT_STRING) n_strings++;
        if (x->bounds & ST_JB_RE) re = x->re;
        if (x->types & ST_JT_ARRAY) fold_span(&items, x->bounds & ST_JB_ITEMS, x->min_items, x->max_items);
        if (x->types & ST_JT_INTEGER) fold_span(&ints, x->bounds & ST_JB_INT, x->min_int, x->max_int);
    }
    free(b);
    if (len.on && len.lo <= len.hi) {
        m.bounds |= ST_JB_LEN | (len.hi != UINT32_MAX ? ST_JB_MAXLEN : 0);
        m.min_len = (uint32_t)len.lo;
        m.max_len = (uint32_t)len.hi;
    }
    if (items.on && items.lo <= items.hi) { m.bounds |= ST_JB_ITEMS; m.min_items = (uint32_t)items.lo; m.max_items = (uint32_t)items.hi; }
    if (ints.on && ints.lo <= ints.hi) { m.bounds |= ST_JB_INT; m.min_int = ints.lo; m.max_int = ints.hi; }
    if (re && n_strings > 1) fail(c, path, "anyOf: a pattern in one of several branches that admit strings is not supported");
    if (re) { m.bounds = (uint8_t)((m.bounds & ~(ST_JB_LEN | ST_JB_MAXLEN)) | ST_JB_RE); m.re = re; }
    if ((len.on && len.lo > len.hi) || (items.on && items.lo > items.hi) || (ints.on && ints.lo > ints.hi))
        fail(c, path, "anyOf: branches of one type whose bounds leave nothing in common are not supported");
    if (c->failed) { json_decref(values); return -1; }
    m.types = has_enum ? ST_JT_ANY : m.types;
    c->s->nodes[out] = m;
    if (has_enum) {
        int r = set_enum(c, out, values, NULL, path);
        json_decref(values);
        if (r) return -1;
    }
    return out;
}

static int compile_object(compiler *c, json_t *sch, int node, const char *path, int depth) {
    char p[512];
    json_t *props = json_object_get(sch, "properties"), *req = json_object_get(sch, "required");
    json_t *extra = json_object_get(sch, "additionalProperties");
    if (props && !json_is_object(props)) return fail(c, path, "properties: must be an object");
    if (req && !json_is_array(req)) return fail(c, path, "required: must be an array of names");
    int closed = json_is_false(extra);
    uint16_t extra_node = 0;
    if (extra && json_is_object(extra)) {
        sub_path(p, sizeof p, path, "additionalProperties", NULL);
        int x = compile(c, extra, p, depth + 1);
        if (x < 0) return -1;
        extra_node = (uint16_t)x;
    } else if (extra && !json_is_boolean(extra)) {
        return fail(c, path, "additionalProperties: must be a boolean or a schema");
    }
    /* The required names that properties does not list are properties of any value. */
    size_t n = json_object_size(props), i;
    json_t *r;
    json_array_foreach(req, i, r) {
        if (!json_is_string(r)) return fail(c, path, "required: must be an array of names");
        if (!json_object_get(props, json_string_value(r))) {
            if (closed) {
                sub_path(p, sizeof p, path, "required", NULL);
                return fail(c, p, "names a key that additionalProperties false forbids: nothing can meet it");
            }
            n++;
        }
    }
    if (n > ST_JSON_SCHEMA_PROPS) return fail(c, path, "properties: more than 64 in one object");
    st_json_sprop *list = calloc(n ? n : 1, sizeof *list);
    if (!list) return fail(c, path, "out of memory");
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach(props, key, v) {
        if (!plain_name(key, strlen(key))) { free(list); sub_path(p, sizeof p, path, "properties", key); return fail(c, p, "a key with a quote, backslash or control character"); }
        sub_path(p, sizeof p, path, "properties", key);
        int x = compile(c, v, p, depth + 1);
        if (x < 0) { free(list); return -1; }
        list[k++] = (st_json_sprop){key, (uint32_t)strlen(key), (uint16_t)x};
    }
    json_array_foreach(req, i, r) {
        const char *name = json_string_value(r);
        if (json_object_get(props, name)) continue;
        if (!plain_name(name, strlen(name))) { free(list); return fail(c, path, "required: a key with a quote, backslash or control character"); }
        list[k++] = (st_json_sprop){name, (uint32_t)strlen(name), 0};
    }
    qsort(list, k, sizeof *list, cmp_prop);
    st_json_schema *s = c->s;
    if (grow((void **)&s->props, &c->cap_props, s->n_props + (uint32_t)k, sizeof *s->props)) { free(list); return fail(c, path, "out of memory"); }
    st_json_snode *nd = &s->nodes[node];
    nd->first_prop = s->n_props;
    nd->n_props = (uint16_t)k;
    nd->closed = (uint8_t)closed;
    nd->extra = extra_node;
    for (size_t a = 0; a < k; a++) {
        /* names are borrowed from the schema's JSON, which is freed: keep copies */
        char *name = keep(c, strndup(list[a].name, list[a].len));
        if (!name) { free(list); return fail(c, path, "out of memory"); }
        list[a].name = name;
        s->props[s->n_props++] = list[a];
        json_array_foreach(req, i, r)
            if (!strcmp(json_string_value(r), name)) nd->required |= 1ull << a;
    }
    free(list);
    return 0;
}

static int compile(compiler *c, json_t *sch, const char *path, int depth) {
    char p[512];
    if (c->failed) return -1;
    if (json_is_true(sch)) return 0;
    if (json_is_false(sch)) return fail(c, path, "the schema false: nothing can meet it");
    if (!json_is_object(sch)) return fail(c, path, "a schema must be an object or a boolean");
    static const char *const refused[] = {"oneOf", "allOf", "not", "if", "then", "else", "patternProperties", "prefixItems",
                                          "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
                                          "contains", "propertyNames", "$dynamicRef", "$recursiveRef", "format",
                                          "multipleOf", "minProperties", "maxProperties", "dependencies", "minContains",
                                          "maxContains", "contentSchema"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (json_object_get(sch, refused[i])) {
            sub_path(p, sizeof p, path, refused[i], NULL);
            return fail(c, p, "not supported by constrained decoding");
        }
    if (json_is_true(json_object_get(sch, "uniqueItems"))) {
        sub_path(p, sizeof p, path, "uniqueItems", NULL);
        return fail(c, p, "not supported by constrained decoding");
    }
    const char *bound = first_bound(sch);
    json_t *ref = json_object_get(sch, "$ref");
    if (ref && bound) {
        sub_path(p, sizeof p, path, bound, NULL);
        return fail(c, p, "beside $ref is not supported");
    }
    if (ref) {
        const char *r = json_string_value(ref);
        json_t *target = r ? resolve_ref(c, r) : NULL;
        sub_path(p, sizeof p, path, "$ref", NULL);
        if (!target) return fail(c, p, "must name a schema under #/$defs/ or #/definitions/");
        for (int i = 0; i < c->n_refs; i++)
            if (!strcmp(c->refs[i], r)) return fail(c, p, "a recursive reference cannot be enforced");
        if (c->n_refs == (int)(sizeof c->refs / sizeof *c->refs)) return fail(c, p, "references nested too deep");
        c->refs[c->n_refs++] = r;
        int x = compile(c, target, p, depth);
        c->n_refs--;
        return x;
    }
    json_t *any_of = json_object_get(sch, "anyOf");
    if (any_of && bound) {
        sub_path(p, sizeof p, path, bound, NULL);
        return fail(c, p, "beside anyOf is not supported: put it in the branches");
    }
    if (any_of) {
        if (json_object_get(sch, "type") || json_object_get(sch, "properties") || json_object_get(sch, "items") || json_object_get(sch, "enum"))
            return fail(c, path, "anyOf beside type, properties, items or enum is not supported");
        return compile_any_of(c, any_of, path, depth);
    }
    json_t *type = json_object_get(sch, "type"), *en = json_object_get(sch, "enum"), *cn = json_object_get(sch, "const");
    int types = 0;
    sub_path(p, sizeof p, path, "type", NULL);
    if (json_is_string(type)) {
        if (!(types = type_bit(json_string_value(type)))) return fail(c, p, "must be object, array, string, number, integer, boolean or null");
    } else if (json_is_array(type)) {
        size_t i;
        json_t *t;
        json_array_foreach(type, i, t) {
            int b = json_is_string(t) ? type_bit(json_string_value(t)) : 0;
            if (!b) return fail(c, p, "must list object, array, string, number, integer, boolean or null");
            types |= b;
        }
        if (!types) return fail(c, p, "an empty list of types: nothing can meet it");
    } else if (type) {
        return fail(c, p, "must be a string or an array of strings");
    } else if (json_object_get(sch, "properties") || json_object_get(sch, "required") || json_object_get(sch, "additionalProperties")) {
        types = ST_JT_OBJECT;
    } else if (json_object_get(sch, "items")) {
        types = ST_JT_ARRAY;
    } else {
        types = ST_JT_ANY;
    }
    if (types & ST_JT_NUMBER) types |= ST_JT_INTEGER;
    if (types == ST_JT_ANY && !en && !cn && !bound) return 0;
    bounds bd;
    if (read_bounds(c, sch, path, &bd)) return -1;
    if ((types & (ST_JT_OBJECT | ST_JT_ARRAY)) && depth >= ST_JSON_SCHEMA_DEPTH && !(types & ~(ST_JT_OBJECT | ST_JT_ARRAY)))
        return fail(c, path, "objects and arrays nested deeper than 16 levels");
    int node = new_node(c, path);
    if (node < 0) return -1;
    c->s->nodes[node].types = (uint8_t)types;
    if (en || cn) {
        json_t *values = cn ? json_pack("[O]", cn) : json_incref(en);
        st_json_regex re = {0};
        if (bd.pattern && compile_pattern(c, &bd, path, &re)) { json_decref(values); return -1; }
        bd.re = bd.pattern ? &re : NULL;
        sub_path(p, sizeof p, path, cn ? "const" : "enum", NULL);
        int bad = !json_is_array(values) ? fail(c, p, "must be an array of values") : set_enum(c, node, values, &bd, p);
        st_json_regex_free(&re);
        json_decref(values);
        return bad ? -1 : node;
    }
    if (set_bounds(c, node, &bd, path)) return -1;
    if ((types & ST_JT_OBJECT) && depth < ST_JSON_SCHEMA_DEPTH && compile_object(c, sch, node, path, depth)) return -1;
    json_t *items = json_object_get(sch, "items");
    if ((types & ST_JT_ARRAY) && items) {
        sub_path(p, sizeof p, path, "items", NULL);
        if (!json_is_object(items) && !json_is_boolean(items)) return fail(c, p, "must be a schema (tuples are not supported)");
        int x = compile(c, items, p, depth + 1);
        if (x < 0) return -1;
        c->s->nodes[node].items = (uint16_t)x;
    }
    return node;
}

static st_json_schema *schema_new(compiler *c) {
    memset(c, 0, sizeof *c);
    c->s = calloc(1, sizeof *c->s);
    if (!c->s) return NULL;
    new_node(c, ""); /* node 0: any value */
    if (c->failed) return NULL;
    c->s->nodes[0].types = ST_JT_ANY;
    return c->s;
}

/* The node of a reply's (or a call's arguments') object: one that admits only objects. */
static int object_root(compiler *c, json_t *sch, const char *path) {
    int node = compile(c, sch, path, 0);
    if (node < 0) return -1;
    st_json_snode *nd = &c->s->nodes[node];
    if (!(nd->types & ST_JT_OBJECT) || nd->n_enum) return fail(c, path, "the top level must be an object schema");
    if (node == 0) {
        if ((node = new_node(c, path)) < 0) return -1;
        c->s->nodes[node].types = ST_JT_OBJECT;
    }
    c->s->nodes[node].types = ST_JT_OBJECT;
    return node;
}

st_status st_json_schema_compile(const char *schema_json, size_t n, st_json_schema **out) {
    *out = NULL;
    json_error_t je;
    json_t *root = json_loadb(schema_json, n, JSON_DECODE_ANY, &je);
    if (!root) return st_fail(ST_ERR_INVALID, "(root): not valid JSON: %s", je.text);
    compiler c;
    if (!schema_new(&c)) { json_decref(root); return st_fail(ST_ERR_NOMEM, "json schema: out of memory"); }
    c.root = root;
    int node = object_root(&c, root, "");
    json_decref(root);
    if (node < 0) { st_json_schema_free(c.s); return ST_ERR_INVALID; }
    c.s->root = (uint16_t)node;
    *out = c.s;
    return ST_OK;
}

static int cmp_tool(const void *pa, const void *pb) {
    const st_json_stool *a = pa, *b = pb;
    return cmp_text(a->name, a->len, b->name, b->len);
}

/* In the XML form a '<' cannot be in a name or enum text (a value ends at "</parameter>"), nor a
 * '>' in a tool's or an argument's name (it ends the tag). */
static void check_xml(compiler *c) {
    st_json_schema *s = c->s;
    for (uint32_t i = 0; i < s->n_tools && !c->failed; i++)
        if (memchr(s->tools[i].name, '<', s->tools[i].len) || memchr(s->tools[i].name, '>', s->tools[i].len))
            fail(c, "tools", "a tool name with '<' or '>' cannot be called in Qwen 3.5's XML form");
    for (uint32_t i = 0; i < s->n_tools && !c->failed; i++) {
        const st_json_snode *a = &s->nodes[s->tools[i].args];
        for (uint32_t k = 0; k < a->n_props; k++)
            if (memchr(s->props[a->first_prop + k].name, '>', s->props[a->first_prop + k].len))
                fail(c, "tools", "an argument name with '>' cannot be written in Qwen 3.5's XML form");
    }
    for (uint32_t i = 0; i < s->n_props && !c->failed; i++)
        if (memchr(s->props[i].name, '<', s->props[i].len)) fail(c, "tools", "a property name with '<' cannot be written in Qwen 3.5's XML form");
    for (uint32_t i = 0; i < s->n_enums && !c->failed; i++)
        if (memchr(s->enums[i], '<', s->enum_len[i])) fail(c, "tools", "an enum value with '<' cannot be written in Qwen 3.5's XML form");
}

st_status st_json_schema_compile_tools(const char *tools_json, size_t n, const char *only, int parallel, int xml, st_json_schema **out) {
    *out = NULL;
    json_t *tools = json_loadb(tools_json, n, 0, NULL);
    if (!json_is_array(tools) || !json_array_size(tools)) { json_decref(tools); return st_fail(ST_ERR_INVALID, "tools: must be a non-empty array"); }
    compiler c;
    if (!schema_new(&c)) { json_decref(tools); return st_fail(ST_ERR_NOMEM, "json schema: out of memory"); }
    st_json_schema *s = c.s;
    s->tools = calloc(json_array_size(tools), sizeof *s->tools);
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        if (!s->tools) break;
        char p[64];
        json_t *fn = json_object_get(t, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        json_t *params = json_object_get(fn, "parameters");
        snprintf(p, sizeof p, "tools[%zu].function.name", i);
        if (!name || !plain_name(name, strlen(name))) { fail(&c, p, "must be a name with no quote, backslash or control character"); break; }
        if (only && strcmp(name, only)) continue;
        snprintf(p, sizeof p, "tools[%zu].function.parameters", i);
        c.root = params;
        int node = params ? object_root(&c, params, p) : object_root(&c, json_true(), p);
        if (node < 0) break;
        char *kept = keep(&c, strdup(name));
        if (!kept) { fail(&c, p, "out of memory"); break; }
        s->tools[s->n_tools++] = (st_json_stool){kept, (uint32_t)strlen(kept), (uint16_t)node};
    }
    json_decref(tools);
    if (!s->tools) { st_json_schema_free(s); return st_fail(ST_ERR_NOMEM, "json schema: out of memory"); }
    if (!c.failed && !s->n_tools) fail(&c, "tool_choice", "names no tool of tools");
    if (!c.failed && xml) check_xml(&c);
    if (c.failed) { st_json_schema_free(s); return ST_ERR_INVALID; }
    qsort(s->tools, s->n_tools, sizeof *s->tools, cmp_tool);
    s->parallel = parallel;
    s->xml = xml;
    *out = s;
    return ST_OK;
}

void st_json_schema_free(st_json_schema *s) {
    if (!s) return;
    for (uint32_t i = 0; i < s->n_owned; i++) free(s->owned[i]);
    free(s->owned);
    free(s->nodes);
    free(s->props);
    free(s->enums);
    free(s->enum_len);
    free(s->tools);
    for (uint32_t i = 0; i < s->n_res; i++) st_json_regex_free(&s->res[i]);
    free(s->res);
    free(s);
}
