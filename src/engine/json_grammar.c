/* json_grammar.c: the per-model token table and the constraint (see json_grammar.h), over the
 * JSON object automaton (json_automaton.c) or, with a schema, the schema layer around it
 * (json_schema_walk.c).
 *
 * The mask. Walking every token's bytes from the current state is exact but costs the whole
 * vocabulary times the token length. Three things make it cheap:
 *   - the tokens are walked in byte order, as a trie: a token starts from the state its common
 *     prefix with the one before reached, and a refused prefix skips every token that starts with
 *     it (after '{' most of a vocabulary is refused at its first or second byte);
 *   - inside a string (no escape or character half read) a token made only of plain string bytes
 *     and whole UTF-8 characters leaves the state as it is, and inside a think block so does any
 *     token without '<'; those sets are precomputed, so only the other tokens are walked;
 *   - the last few masks are kept with the state they were made for (structure repeats: the same
 *     mask serves every "after a value at depth 2 in an object").
 * And the sampler asks for the mask only when the token it picked is refused.
 *
 * With a schema, the state is the schema layer's (json_schema_walk.c, over this automaton), and
 * the same walks, sets and cache serve it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine/json_automaton.h"
#include "engine/json_regex.h"
#include "text/tokenizer.h"

/* ---- the vocabulary ---- */

enum kind {
    K_TEXT,    /* normal and byte tokens: their bytes go through the automaton */
    K_THINK,   /* a control or user-defined token whose text is <think> or </think> */
    K_EOG,     /* end of generation: allowed only once the object is closed */
    K_TAG,     /* a control or user-defined token whose text is <tool_call> or </tool_call> */
    K_NEVER,   /* other special tokens, empty tokens, ids past the tokenizer */
};

/* Text tokens in byte order, so a walk shares the states of common prefixes and skips every token
 * that starts with a refused prefix (a trie walked over a sorted array). */
typedef struct walk_list {
    int32_t *ids;
    uint32_t *lcp;    /* bytes in common with the token before */
    int32_t *run_end; /* the end of the run of tokens with this one's first byte */
    int32_t n;
    char *packed;     /* for str_loop_list: the tokens' bytes one after another, in this order, */
    uint32_t *off;    /* token i's at packed + off[i] .. off[i + 1] (read in order, not scattered) */
} walk_list;

struct st_json_vocab {
    int32_t n;
    const char **bytes;
    uint32_t *len;
    uint8_t *kind;
    uint64_t *str_loop;   /* bit set: the token leaves a plain string state unchanged */
    uint64_t *think_loop; /* bit set: the token leaves a think block (nothing of </think> read) unchanged */
    walk_list all;        /* every text token */
    walk_list str_rest;   /* the text tokens a string state must walk (not in str_loop) */
    walk_list think_rest; /* the text tokens a think block must walk (not in think_loop) */
    walk_list str_loop_list; /* the str_loop tokens, with their bytes packed: a pattern's DFA walks them */
    int32_t *special;     /* think tags and end-of-generation tokens, checked one by one */
    int32_t n_special;
    uint32_t max_len;     /* the longest token's bytes */
};

static size_t bitset_words(int32_t n) { return ((size_t)n + 63) / 64; }
static void bit_set(uint64_t *b, int32_t i) { b[i >> 6] |= 1ull << (i & 63); }
static int bit_get(const uint64_t *b, int32_t i) { return (int)((b[i >> 6] >> (i & 63)) & 1); }

/* Whether bytes are plain string content: printable ASCII but '"' and '\', and whole UTF-8. */
static int plain_string(const char *p, size_t n) {
    st_json_state s = {.mode = M_STR, .depth = 1};
    for (size_t i = 0; i < n; i++) {
        unsigned c = (unsigned char)p[i];
        if (c == '"' || c == '\\' || !st_json_step(&s, c)) return 0;
    }
    return s.mode == M_STR;
}

static void list_free(walk_list *w) { free(w->ids); free(w->lcp); free(w->run_end); free(w->packed); free(w->off); }

void st_json_vocab_free(st_json_vocab *v) {
    if (!v) return;
    free(v->bytes); free(v->len); free(v->kind);
    free(v->str_loop); free(v->think_loop);
    list_free(&v->all); list_free(&v->str_rest); list_free(&v->think_rest); list_free(&v->str_loop_list);
    free(v->special);
    free(v);
}

typedef struct sort_key { const char *p; uint32_t len; int32_t id; } sort_key;

static int cmp_bytes(const void *pa, const void *pb) {
    const sort_key *a = pa, *b = pb;
    int c = memcmp(a->p, b->p, a->len < b->len ? a->len : b->len);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static int list_alloc(walk_list *w, int32_t n) {
    size_t m = (size_t)(n ? n : 1);
    w->ids = malloc(sizeof *w->ids * m);
    w->lcp = malloc(sizeof *w->lcp * m);
    w->run_end = malloc(sizeof *w->run_end * m);
    return w->ids && w->lcp && w->run_end;
}

static void list_runs(walk_list *w) {
    for (int32_t i = w->n - 1; i >= 0; i--) w->run_end[i] = i + 1 < w->n && w->lcp[i + 1] > 0 ? w->run_end[i + 1] : i + 1;
}

/* Every text token of v, sorted by bytes, with the common prefixes of neighbours. */
static int list_build_all(walk_list *w, const st_json_vocab *v) {
    int32_t n = 0;
    for (int32_t id = 0; id < v->n; id++) n += v->kind[id] == K_TEXT;
    sort_key *k = malloc(sizeof *k * (size_t)(n ? n : 1));
    if (!k || !list_alloc(w, n)) { free(k); return 0; }
    n = 0;
    for (int32_t id = 0; id < v->n; id++)
        if (v->kind[id] == K_TEXT) k[n++] = (sort_key){v->bytes[id], v->len[id], id};
    qsort(k, (size_t)n, sizeof *k, cmp_bytes);
    for (int32_t i = 0; i < n; i++) {
        w->ids[i] = k[i].id;
        uint32_t l = 0;
        if (i) {
            uint32_t m = k[i].len < k[i - 1].len ? k[i].len : k[i - 1].len;
            while (l < m && k[i].p[l] == k[i - 1].p[l]) l++;
        }
        w->lcp[i] = l;
    }
    w->n = n;
    list_runs(w);
    free(k);
    return 1;
}

/* The tokens of the sorted list all for which keep(v, id) holds, still sorted: the common prefix
 * of two tokens is the least of the neighbours' common prefixes between them. */
static int list_filter(walk_list *w, const walk_list *all, const st_json_vocab *v, int (*keep)(const st_json_vocab *, int32_t)) {
    if (!list_alloc(w, all->n)) return 0;
    int32_t n = 0;
    uint32_t run_min = 0;
    for (int32_t i = 0; i < all->n; i++) {
        if (i == 0 || all->lcp[i] < run_min) run_min = all->lcp[i];
        if (!keep(v, all->ids[i])) continue;
        w->ids[n] = all->ids[i];
        w->lcp[n] = n ? run_min : 0;
        n++;
        run_min = UINT32_MAX;
    }
    w->n = n;
    list_runs(w);
    return 1;
}

static int keep_str_rest(const st_json_vocab *v, int32_t id) { return !bit_get(v->str_loop, id); }
static int keep_str_loop(const st_json_vocab *v, int32_t id) { return bit_get(v->str_loop, id); }

/* The bytes of w's tokens packed in w's order. */
static int list_pack(walk_list *w, const st_json_vocab *v) {
    size_t total = 0;
    for (int32_t i = 0; i < w->n; i++) total += v->len[w->ids[i]];
    w->packed = malloc(total ? total : 1);
    w->off = malloc(sizeof *w->off * ((size_t)w->n + 1));
    if (!w->packed || !w->off || total >= UINT32_MAX) return 0;
    uint32_t at = 0;
    for (int32_t i = 0; i < w->n; i++) {
        w->off[i] = at;
        memcpy(w->packed + at, v->bytes[w->ids[i]], v->len[w->ids[i]]);
        at += v->len[w->ids[i]];
    }
    w->off[w->n] = at;
    return 1;
}
static int keep_think_rest(const st_json_vocab *v, int32_t id) { return !bit_get(v->think_loop, id); }

int32_t st_json_vocab_size(const st_json_vocab *v) { return v->n; }

st_status st_json_vocab_new(const st_tokenizer *tok, int32_t n_vocab, st_json_vocab **out) {
    *out = NULL;
    if (n_vocab <= 0) return st_fail(ST_ERR_INVALID, "json vocabulary: size %d", n_vocab);
    st_json_vocab *v = calloc(1, sizeof *v);
    size_t words = bitset_words(n_vocab);
    if (v) {
        v->n = n_vocab;
        v->bytes = calloc((size_t)n_vocab, sizeof *v->bytes);
        v->len = calloc((size_t)n_vocab, sizeof *v->len);
        v->kind = calloc((size_t)n_vocab, 1);
        v->str_loop = calloc(words, sizeof *v->str_loop);
        v->think_loop = calloc(words, sizeof *v->think_loop);
        v->special = malloc(sizeof *v->special * (size_t)n_vocab);
    }
    if (!v || !v->bytes || !v->len || !v->kind || !v->str_loop || !v->think_loop || !v->special) {
        st_json_vocab_free(v);
        return st_fail(ST_ERR_NOMEM, "json vocabulary: out of memory for %d tokens", n_vocab);
    }
    int32_t n_tok = st_tokenizer_n_vocab(tok);
    for (int32_t id = 0; id < n_vocab; id++) {
        size_t len = 0;
        const char *p = id < n_tok ? st_token_piece(tok, id, 1, &len) : NULL;
        st_token_type type = id < n_tok ? st_tokenizer_token_type(tok, id) : ST_TOKEN_UNUSED;
        enum kind k = K_NEVER;
        if (id < n_tok && st_tokenizer_is_eog(tok, id)) k = K_EOG;
        else if (p && len && (type == ST_TOKEN_NORMAL || type == ST_TOKEN_BYTE || type == ST_TOKEN_UNDEFINED)) k = K_TEXT;
        else if (p && ((len == 7 && !memcmp(p, st_json_think_open, 7)) || (len == 8 && !memcmp(p, st_json_think_close, 8)))) k = K_THINK;
        else if (p && ((len == 11 && !memcmp(p, "<tool_call>", 11)) || (len == 12 && !memcmp(p, "</tool_call>", 12)))) k = K_TAG;
        v->kind[id] = (uint8_t)k;
        v->bytes[id] = p ? p : "";
        v->len[id] = (uint32_t)len;
        if (len > v->max_len) v->max_len = (uint32_t)len;
        if (k == K_TEXT && plain_string(p, len)) bit_set(v->str_loop, id);
        if (k == K_TEXT && !memchr(p, '<', len)) bit_set(v->think_loop, id);
        if (k == K_THINK || k == K_EOG || k == K_TAG) v->special[v->n_special++] = id;
    }
    if (!list_build_all(&v->all, v) || !list_filter(&v->str_rest, &v->all, v, keep_str_rest) ||
        !list_filter(&v->think_rest, &v->all, v, keep_think_rest) || !list_filter(&v->str_loop_list, &v->all, v, keep_str_loop) ||
        !list_pack(&v->str_loop_list, v)) {
        st_json_vocab_free(v);
        return st_fail(ST_ERR_NOMEM, "json vocabulary: out of memory for %d tokens", n_vocab);
    }
    *out = v;
    return ST_OK;
}

/* ---- the constraint ---- */

#define MASK_CACHE 4

typedef struct mask_entry {
    st_json_state key;
    st_json_xstate xkey; /* with a schema */
    uint64_t *allowed;
    int32_t n_allowed;
    int valid;
} mask_entry;

struct st_json_constraint {
    const st_json_vocab *v;
    st_json_state s;
    st_json_state *path; /* a walk's states after each byte of the current token (max_len + 1) */
    int64_t left;  /* tokens the reply may still have, or -1: no bound */
    const st_json_schema *sc; /* NULL: any object (s); else x */
    st_json_xstate x;
    st_json_xstate *xpath; /* the walk's states with a schema (max_len + 1) */
    uint16_t *rpath;       /* a pattern's DFA states along a token (max_len + 1), when the schema has one */
    mask_entry cache[MASK_CACHE];
    int next_evict;
};

/* ---- the constraint with a schema ---- */

/* Whether a token may follow x; on 1, *after is the state after it. */
static int xtoken_step(const st_json_vocab *v, const st_json_schema *sc, const st_json_xstate *x, int32_t id, st_json_xstate *after) {
    if (id < 0 || id >= v->n) return 0;
    switch (v->kind[id]) {
    case K_EOG: return st_json_xcomplete(sc, x);
    case K_NEVER: return 0;
    case K_THINK:
        if (x->phase != P_ANSWER || (x->c.mode != M_PRE && x->c.mode != M_THINK)) return 0;
        break;
    case K_TAG:
        if (x->phase == P_ANSWER || x->phase == P_ARGS) return 0;
        break;
    default: break;
    }
    *after = *x;
    return st_json_xfeed(sc, after, v->bytes[id], v->len[id]);
}

/* Whether a token may follow state s; on 1, *after is the state after it. limit: the most the
 * closing cost may be after it (INT32_MAX: no bound). */
static int token_step(const st_json_vocab *v, const st_json_state *s, int32_t id, int32_t limit, st_json_state *after) {
    if (id < 0 || id >= v->n) return 0;
    *after = *s;
    switch (v->kind[id]) {
    case K_EOG: return st_json_complete(s);
    case K_NEVER: case K_TAG: return 0;
    case K_THINK: /* a tag, never text inside the answer */
        if (s->mode != M_PRE && s->mode != M_THINK) return 0;
        break;
    default: break;
    }
    return st_json_feed(after, v->bytes[id], v->len[id]) && (limit == INT32_MAX || st_json_close_cost(after) <= limit);
}

/* With k tokens left (this one included) the state after this token must cost at most k - 1 to
 * finish; when even that is out of reach, each token must at least come one byte closer. */
static int32_t close_limit(const st_json_constraint *c) {
    if (c->left < 0) return INT32_MAX;
    int64_t room = c->left - 1, progress = st_json_close_cost(&c->s) - 1;
    int64_t lim = room > progress ? room : progress;
    return lim < INT32_MAX ? (int32_t)lim : INT32_MAX - 1;
}

int st_json_constraint_allows(const st_json_constraint *c, int32_t token) {
    if (c->sc) {
        st_json_xstate after;
        return xtoken_step(c->v, c->sc, &c->x, token, &after);
    }
    st_json_state after;
    return token_step(c->v, &c->s, token, close_limit(c), &after);
}

st_status st_json_constraint_accept(st_json_constraint *c, int32_t token) {
    if (c->sc) {
        st_json_xstate after;
        if (!xtoken_step(c->v, c->sc, &c->x, token, &after))
            return st_fail(ST_ERR_INVALID, "json constraint: token %d cannot continue what the schema allows here", token);
        c->x = after;
        return ST_OK;
    }
    st_json_state after;
    if (!token_step(c->v, &c->s, token, close_limit(c), &after))
        return st_fail(ST_ERR_INVALID, "json constraint: token %d cannot continue the JSON object here", token);
    c->s = after;
    if (c->left > 0) c->left--;
    return ST_OK;
}

/* A schema's reply is not kept closable within a budget: cut by max_tokens, it is unfinished (as
 * OpenAI's structured outputs are, with finish_reason "length"). */
void st_json_constraint_set_budget(st_json_constraint *c, int64_t tokens) { c->left = tokens < 0 || c->sc ? -1 : tokens; }

int st_json_constraint_complete(const st_json_constraint *c) { return c->sc ? st_json_xcomplete(c->sc, &c->x) : st_json_complete(&c->s); }
const st_json_state *st_json_constraint_state(const st_json_constraint *c) { return c->sc ? &c->x.c : &c->s; }

/* How a walk moves either automaton's state: its size, one byte, and whether the state after a
 * whole token passes (the budget's limit; NULL: always). Walks are written once, below, and
 * specialised for each automaton by inlining with these constants. */
typedef struct walker {
    size_t size;
    int (*advance)(const void *ctx, void *state, unsigned c);
    int (*passes)(const void *state, int32_t limit);
    const void *ctx;
} walker;

static int plain_advance(const void *ctx, void *state, unsigned c) { (void)ctx; return st_json_step(state, c); }
static int plain_passes(const void *state, int32_t limit) { return limit == INT32_MAX || st_json_close_cost(state) <= limit; }
static int schema_advance(const void *ctx, void *state, unsigned c) { return st_json_xstep(ctx, state, c); }

/* The tokens of w allowed in state s under limit, set in allowed; returns how many. A token that
 * shares its first k bytes with the one before starts from the state after them, and a refused
 * prefix skips every token that starts with it. path: room for max_len + 1 states. */
static inline __attribute__((always_inline)) int32_t walk_with(const walker wk, const st_json_vocab *v, const walk_list *w,
                                                               const void *s, int32_t limit, uint64_t *allowed, unsigned char *path) {
    _Alignas(8) unsigned char st[sizeof(st_json_xstate)];
    int32_t n_ok = 0;
    uint32_t depth = 0; /* path[0..depth] hold for the token walked last */
    memcpy(path, s, wk.size);
    for (int32_t i = 0; i < w->n;) {
        int32_t id = w->ids[i];
        const unsigned char *b = (const unsigned char *)v->bytes[id];
        uint32_t len = v->len[id], k = w->lcp[i] < depth ? w->lcp[i] : depth;
        memcpy(st, path + (size_t)k * wk.size, wk.size);
        int ok = 1;
        for (; k < len; k++) {
            if (!wk.advance(wk.ctx, st, b[k])) { ok = 0; break; }
            memcpy(path + (size_t)(k + 1) * wk.size, st, wk.size);
        }
        depth = k;
        if (ok) {
            if (!wk.passes || wk.passes(st, limit)) { bit_set(allowed, id); n_ok++; }
            i++;
        } else if (k == 0) {
            i = w->run_end[i];
        } else {
            /* the tokens after this one that share its first k + 1 bytes are refused too */
            for (i++; i < w->n && w->lcp[i] > k; i++) {}
        }
    }
    return n_ok;
}

static int32_t walk(const st_json_vocab *v, const walk_list *w, const st_json_state *s, int32_t limit, uint64_t *allowed,
                    st_json_state *path) {
    return walk_with((walker){sizeof *s, plain_advance, plain_passes, NULL}, v, w, s, limit, allowed, (unsigned char *)path);
}

static int32_t xwalk(const st_json_vocab *v, const st_json_schema *sc, const walk_list *w, const st_json_xstate *x, uint64_t *allowed,
                     st_json_xstate *path) {
    return walk_with((walker){sizeof *x, schema_advance, NULL, sc}, v, w, x, INT32_MAX, allowed, (unsigned char *)path);
}

/* A precomputed set (str_loop, think_loop) as the start of a mask; returns its size. */
static int32_t take_set(const st_json_vocab *v, const uint64_t *set, uint64_t *allowed) {
    size_t words = bitset_words(v->n);
    int32_t n = 0;
    memcpy(allowed, set, words * sizeof *allowed);
    for (size_t w = 0; w < words; w++) n += __builtin_popcountll(set[w]);
    return n;
}

/* The set of tokens allowed in state s under limit, into a zeroed bitset; returns its size. */
static int32_t compute_mask(const st_json_vocab *v, const st_json_state *s, int32_t limit, uint64_t *allowed, st_json_state *path) {
    int32_t n = 0;
    const walk_list *list = &v->all;
    const uint64_t *loop = NULL;
    if (s->mode == M_STR) { loop = v->str_loop; list = &v->str_rest; }
    else if (s->mode == M_THINK && s->sub == 0) { loop = v->think_loop; list = &v->think_rest; }
    /* the loop tokens keep the state, so the limit takes all of them or none */
    if (loop && (limit == INT32_MAX || st_json_close_cost(s) <= limit)) n += take_set(v, loop, allowed);
    n += walk(v, list, s, limit, allowed, path);
    st_json_state after;
    for (int32_t i = 0; i < v->n_special; i++)
        if (token_step(v, s, v->special[i], limit, &after)) { bit_set(allowed, v->special[i]); n++; }
    return n;
}

/* A mask depends on the state alone while the token budget cannot bind: a byte raises the closing
 * cost by at most 7 (a byte that breaks a half-read "</think>"), or 14 for the '<' that opens
 * "<think>" at the very start, so with room for that after the longest token the limit refuses
 * nothing (test_json_grammar checks the bound on every byte of random walks). Such masks are cached; near the end of
 * the budget they are computed afresh (one slot, never matched). */
static mask_entry *cached_mask(st_json_constraint *c) {
    int32_t limit = close_limit(c);
    int loose = limit == INT32_MAX || (int64_t)limit >= (int64_t)st_json_close_cost(&c->s) + 14 + 7 * (int64_t)c->v->max_len;
    if (loose)
        for (int i = 0; i < MASK_CACHE; i++)
            if (c->cache[i].valid && !memcmp(&c->cache[i].key, &c->s, sizeof c->s)) return &c->cache[i];
    mask_entry *e = &c->cache[c->next_evict];
    c->next_evict = (c->next_evict + 1) % MASK_CACHE;
    memset(e->allowed, 0, bitset_words(c->v->n) * sizeof *e->allowed);
    e->key = c->s;
    e->n_allowed = compute_mask(c->v, &c->s, loose ? INT32_MAX : limit, e->allowed, c->path);
    e->valid = loose;
    return e;
}

/* In a string that must match a pattern (no escape or character half read): the tokens of plain
 * string bytes (str_loop), which leave the core automaton as it is, walked by the pattern's DFA
 * alone from state q, over their packed bytes in byte order (a token starts from the DFA state
 * its common prefix with the one before reached; a refused prefix skips the tokens that share it). */
static int32_t dfa_walk(const st_json_vocab *v, const st_json_regex *re, uint16_t q, uint64_t *allowed, uint16_t *path) {
    const walk_list *w = &v->str_loop_list;
    int32_t n_ok = 0;
    uint32_t depth = 0; /* path[0..depth] hold for the token walked last */
    path[0] = q;
    for (int32_t i = 0; i < w->n;) {
        const unsigned char *b = (const unsigned char *)w->packed + w->off[i];
        uint32_t len = w->off[i + 1] - w->off[i], k = w->lcp[i] < depth ? w->lcp[i] : depth;
        uint16_t s = path[k];
        for (; k < len; k++) {
            s = st_json_regex_step(re, s, b[k]);
            if (s == ST_JSON_RE_DEAD) break;
            path[k + 1] = s;
        }
        depth = k;
        if (k == len) { bit_set(allowed, w->ids[i]); n_ok++; i++; }
        else if (k == 0) i = w->run_end[i];
        else for (i++; i < w->n && w->lcp[i] > k; i++) {} /* they share the refused k + 1 bytes */
    }
    return n_ok;
}

/* The allowed tokens of x into a zeroed bitset; returns how many (the walk as for the plain
 * automaton, with the same precomputed sets where the schema leaves the state alone). */
static int32_t xcompute_mask(const st_json_vocab *v, const st_json_schema *sc, const st_json_xstate *x, uint64_t *allowed, st_json_xstate *path,
                             uint16_t *rpath) {
    int32_t n = 0;
    const walk_list *w = &v->all;
    const uint64_t *loop = NULL;
    int free_text = x->phase == P_ANSWER || x->phase == P_ARGS;
    const st_json_snode *cur = &sc->nodes[x->cur];
    if (free_text && x->c.mode == M_STR && !(x->c.flags & F_KEY) && (cur->bounds & ST_JB_RE)) {
        /* a pattern's string: the plain tokens by its DFA alone, the others by the whole walk */
        n += dfa_walk(v, &sc->res[cur->re - 1], x->rstate, allowed, rpath);
        w = &v->str_rest;
        n += xwalk(v, sc, w, x, allowed, path);
        st_json_xstate after;
        for (int32_t i = 0; i < v->n_special; i++)
            if (xtoken_step(v, sc, x, v->special[i], &after)) { bit_set(allowed, v->special[i]); n++; }
        return n;
    }
    /* a string's plain tokens keep its state, but for the count of a length with a maximum and
     * the DFA of a pattern */
    int loops = (x->c.flags & F_KEY) ? x->cand == ST_JSON_NO_CAND : !(sc->nodes[x->cur].bounds & (ST_JB_MAXLEN | ST_JB_RE));
    if (free_text && x->c.mode == M_STR && loops) { loop = v->str_loop; w = &v->str_rest; }
    else if (x->phase == P_ANSWER && x->c.mode == M_THINK && x->c.sub == 0) { loop = v->think_loop; w = &v->think_rest; }
    if (loop) n += take_set(v, loop, allowed);
    n += xwalk(v, sc, w, x, allowed, path);
    st_json_xstate after;
    for (int32_t i = 0; i < v->n_special; i++)
        if (xtoken_step(v, sc, x, v->special[i], &after)) { bit_set(allowed, v->special[i]); n++; }
    return n;
}

static mask_entry *xcached_mask(st_json_constraint *c) {
    for (int i = 0; i < MASK_CACHE; i++)
        if (c->cache[i].valid && !memcmp(&c->cache[i].xkey, &c->x, sizeof c->x)) return &c->cache[i];
    mask_entry *e = &c->cache[c->next_evict];
    c->next_evict = (c->next_evict + 1) % MASK_CACHE;
    memset(e->allowed, 0, bitset_words(c->v->n) * sizeof *e->allowed);
    e->xkey = c->x;
    e->n_allowed = xcompute_mask(c->v, c->sc, &c->x, e->allowed, c->xpath, c->rpath);
    e->valid = 1;
    return e;
}

int32_t st_json_constraint_mask(st_json_constraint *c, float *logits) {
    const mask_entry *e = c->sc ? xcached_mask(c) : cached_mask(c);
    for (int32_t w = 0; w < (int32_t)bitset_words(c->v->n); w++) {
        uint64_t bits = e->allowed[w];
        if (bits == ~0ull) continue;
        int32_t base = w * 64, end = base + 64 < c->v->n ? base + 64 : c->v->n;
        if (!bits) { /* the common word away from strings: all refused */
            for (int32_t id = base; id < end; id++) logits[id] = -INFINITY;
            continue;
        }
        uint64_t refused = ~bits;
        if (end - base < 64) refused &= (1ull << (end - base)) - 1;
        for (; refused; refused &= refused - 1) logits[base + __builtin_ctzll(refused)] = -INFINITY;
    }
    return e->n_allowed;
}

void st_json_constraint_free(st_json_constraint *c) {
    if (!c) return;
    for (int i = 0; i < MASK_CACHE; i++) free(c->cache[i].allowed);
    free(c->path);
    free(c->xpath);
    free(c->rpath);
    free(c);
}

/* The bytes after the last "<|im_start|>" and its role line: what the prompt already wrote of the
 * reply. Returns 0 with nothing to feed when there is no <|im_start|>. */
static int reply_start(const st_json_vocab *v, const int32_t *prompt, size_t n, size_t *from) {
    size_t i = n;
    while (i > 0) {
        int32_t id = prompt[i - 1];
        if (id >= 0 && id < v->n && v->len[id] == 12 && !memcmp(v->bytes[id], "<|im_start|>", 12)) break;
        i--;
    }
    if (i == 0) return 0;
    *from = i;
    return 1;
}

/* What the prompt already wrote of the reply: the bytes after the role line that follows the last
 * <|im_start|> (none without one), malloc'd (NULL only when out of memory). */
static char *reply_opening(const st_json_vocab *v, const int32_t *prompt, size_t n_prompt, size_t *n) {
    size_t from = 0, cap = 64;
    char *b = malloc(cap);
    *n = 0;
    if (!b || !prompt || !reply_start(v, prompt, n_prompt, &from)) return b;
    int in_role = 1; /* "assistant\n" is the role line, not the reply */
    for (size_t i = from; i < n_prompt; i++) {
        int32_t id = prompt[i];
        const char *p = id >= 0 && id < v->n ? v->bytes[id] : "";
        size_t len = id >= 0 && id < v->n ? v->len[id] : 0;
        if (in_role) {
            const char *nl = memchr(p, '\n', len);
            if (!nl) continue;
            in_role = 0;
            len -= (size_t)(nl + 1 - p);
            p = nl + 1;
        }
        if (*n + len > cap) {
            while (*n + len > cap) cap *= 2;
            char *q = realloc(b, cap);
            if (!q) { free(b); return NULL; }
            b = q;
        }
        memcpy(b + *n, p, len);
        *n += len;
    }
    return b;
}

/* Feeds the prompt's opening of the reply to the constraint. A tool call is forced with thinking
 * off, so the empty think block a template writes before it is not part of the call. */
static st_status feed_opening(st_json_constraint *c, const int32_t *prompt, size_t n_prompt) {
    size_t n = 0;
    char *b = reply_opening(c->v, prompt, n_prompt, &n);
    if (!b) return st_fail(ST_ERR_NOMEM, "json constraint: out of memory");
    const char *p = b;
    if (c->sc && c->sc->n_tools) {
        const char *end = n >= 8 ? memmem(b, n, st_json_think_close, 8) : NULL;
        if (end) p = end + 8;
    }
    size_t len = n - (size_t)(p - b);
    int ok = c->sc ? st_json_xfeed(c->sc, &c->x, p, len) : st_json_feed(&c->s, p, len);
    st_status st = ok ? ST_OK : st_fail(ST_ERR_INVALID, "json constraint: the reply the prompt opens ('%.*s') is not the start of %s",
                                        (int)(len < 40 ? len : 40), p, !c->sc ? "a JSON object" : c->sc->n_tools ? "the tool call" : "what the schema allows");
    free(b);
    return st;
}

st_status st_json_constraint_new(const st_json_vocab *v, const int32_t *prompt, size_t n_prompt, st_json_constraint **out) {
    return st_json_constraint_new_schema(v, NULL, prompt, n_prompt, out);
}

st_status st_json_constraint_new_schema(const st_json_vocab *v, const st_json_schema *schema, const int32_t *prompt, size_t n_prompt,
                                        st_json_constraint **out) {
    *out = NULL;
    st_json_constraint *c = calloc(1, sizeof *c);
    if (!c) return st_fail(ST_ERR_NOMEM, "json constraint: out of memory");
    c->v = v;
    c->left = -1;
    c->sc = schema;
    st_json_init(&c->s);
    if (schema) st_json_xinit(schema, &c->x);
    if (!(c->path = malloc(sizeof *c->path * ((size_t)v->max_len + 1))) ||
        (schema && !(c->xpath = malloc(sizeof *c->xpath * ((size_t)v->max_len + 1)))) ||
        (schema && schema->n_res && !(c->rpath = malloc(sizeof *c->rpath * ((size_t)v->max_len + 1))))) {
        st_json_constraint_free(c);
        return st_fail(ST_ERR_NOMEM, "json constraint: out of memory");
    }
    for (int i = 0; i < MASK_CACHE; i++)
        if (!(c->cache[i].allowed = malloc(bitset_words(v->n) * sizeof(uint64_t)))) {
            st_json_constraint_free(c);
            return st_fail(ST_ERR_NOMEM, "json constraint: out of memory for masks of %d tokens", v->n);
        }
    st_status st = feed_opening(c, prompt, n_prompt);
    if (st != ST_OK) {
        st_json_constraint_free(c);
        return st;
    }
    *out = c;
    return ST_OK;
}
