/* tokenizer.c: byte-level BPE as llama.cpp's "gpt2" model does it (MODELS.md §9): the
 * vocabulary and merge tables, special-token partitioning, BPE merging, and each token's piece.
 * The pre-tokenizer regexes are in pretokenize.c; reading the GGUF keys is in tokenizer_gguf.c.
 *
 * Tables: token text -> id and (left id, right id) -> (rank, merged id) are open-addressing hash
 * tables, so one merge step is one probe. Every token's detokenized bytes are computed once at
 * build time (the "piece"), so detokenizing (detok.c) is a copy. */
#include <stdlib.h>
#include <string.h>
#include "text/tokenizer.h"
#include "text/tokenizer_internal.h"
#include "text/pretokenize.h"
#include "text/utf8.h"

/* ---- GPT-2 byte-to-unicode map ----
 * Printable bytes (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF) map to the code point of the same value;
 * the other 68 bytes map, in byte order, to U+0100 onwards, so every byte is a visible char. */
static void byte_map_init(uint32_t byte_to_cp[256], int16_t cp_to_byte[512]) {
    for (int i = 0; i < 512; i++) cp_to_byte[i] = -1;
    uint32_t next = 0x100;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        byte_to_cp[b] = printable ? (uint32_t)b : next++;
        cp_to_byte[byte_to_cp[b]] = (int16_t)b;
    }
}

/* ---- hashing ---- */
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h ^= (uint8_t)s[i]; h *= 1099511628211ull; }
    return h ^ (h >> 29);
}

static uint64_t hash_pair(int32_t a, int32_t b) {
    uint64_t x = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return x;
}

static size_t table_size_for(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    return cap;
}

int32_t st_tokenizer_find(const st_tokenizer *t, const char *text, size_t len) {
    size_t mask = t->tok_cap - 1;
    for (size_t i = hash_bytes(text, len) & mask;; i = (i + 1) & mask) {
        int32_t id = t->tok_table[i];
        if (id < 0) return -1;
        if (t->tok_len[id] == len && memcmp(t->arena + t->tok_off[id], text, len) == 0) return id;
    }
}

static void tok_insert(st_tokenizer *t, int32_t id) {
    size_t mask = t->tok_cap - 1;
    const char *s = t->arena + t->tok_off[id];
    size_t len = t->tok_len[id];
    for (size_t i = hash_bytes(s, len) & mask;; i = (i + 1) & mask) {
        int32_t cur = t->tok_table[i];
        if (cur < 0) { t->tok_table[i] = id; return; }
        /* A duplicate text keeps the first id, as a map insert that does not overwrite would. */
        if (t->tok_len[cur] == len && memcmp(t->arena + t->tok_off[cur], s, len) == 0) return;
    }
}

static const st_merge *merge_find(const st_tokenizer *t, int32_t a, int32_t b) {
    size_t mask = t->merge_cap - 1;
    for (size_t i = hash_pair(a, b) & mask;; i = (i + 1) & mask) {
        const st_merge *m = &t->merge_table[i];
        if (m->rank < 0) return NULL;
        if (m->left == a && m->right == b) return m;
    }
}

static void merge_insert(st_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t result) {
    size_t mask = t->merge_cap - 1;
    for (size_t i = hash_pair(a, b) & mask;; i = (i + 1) & mask) {
        st_merge *m = &t->merge_table[i];
        if (m->rank < 0) { m->left = a; m->right = b; m->rank = rank; m->result = result; return; }
        if (m->left == a && m->right == b) return; /* a repeated pair keeps its lowest rank */
    }
}

/* ---- building ---- */

/* Tokens llama.cpp recognises by their text: it forces them to control type, and the
 * end-of-generation ones stop generation (llama_vocab::impl::load). */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~[",
    /* FIM pad/repo/separator tokens end generation too */
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
};
static const char *const fim_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "<|code_middle|>", "<|middle|>",
};

static int text_in(const char *s, size_t n, const char *const *list, size_t count) {
    /* every listed text starts with one of these; most tokens are rejected here */
    if (n < 3 || (s[0] != '<' && s[0] != '[' && s[0] != '_')) return 0;
    for (size_t i = 0; i < count; i++)
        if (strlen(list[i]) == n && memcmp(list[i], s, n) == 0) return 1;
    return 0;
}

/* Decodes a normal token's byte-to-unicode text into raw bytes. A character outside the map
 * (not produced by the converter) is kept as its own UTF-8. Writes at most len bytes. */
static size_t decode_normal(const st_tokenizer *t, const char *s, size_t len, char *out) {
    size_t o = 0, i = 0;
    while (i < len) {
        uint32_t cp;
        size_t k = st_utf8_decode((const uint8_t *)s + i, len - i, &cp);
        if (cp != UINT32_MAX && cp < 512 && t->cp_to_byte[cp] >= 0) {
            out[o++] = (char)t->cp_to_byte[cp];
        } else {
            memcpy(out + o, s + i, k);
            o += k;
        }
        i += k;
    }
    return o;
}

static int cmp_special(const void *pa, const void *pb, void *ctx) {
    const st_tokenizer *t = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    if (t->tok_len[a] != t->tok_len[b]) return t->tok_len[a] > t->tok_len[b] ? -1 : 1;
    return (a > b) - (a < b);
}

static st_status build_tokens(st_tokenizer *t, const st_vocab_desc *d) {
    size_t total = 0;
    for (int32_t i = 0; i < d->n_tokens; i++) total += d->token_lens[i] + 1;
    /* pieces are never longer than the stored text */
    t->arena = malloc(2 * total + 1);
    t->tok_off = malloc(sizeof *t->tok_off * (size_t)d->n_tokens);
    t->tok_len = malloc(sizeof *t->tok_len * (size_t)d->n_tokens);
    t->piece_off = malloc(sizeof *t->piece_off * (size_t)d->n_tokens);
    t->piece_len = malloc(sizeof *t->piece_len * (size_t)d->n_tokens);
    t->type = malloc((size_t)d->n_tokens);
    t->eog = calloc((size_t)d->n_tokens, 1);
    t->tok_cap = table_size_for((size_t)d->n_tokens);
    t->tok_table = malloc(sizeof *t->tok_table * t->tok_cap);
    if (!t->arena || !t->tok_off || !t->tok_len || !t->piece_off || !t->piece_len || !t->type ||
        !t->eog || !t->tok_table)
        return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory for %d tokens", d->n_tokens);
    memset(t->tok_table, 0xFF, sizeof *t->tok_table * t->tok_cap);
    size_t at = 0;
    for (int32_t i = 0; i < d->n_tokens; i++) {
        t->tok_off[i] = at;
        t->tok_len[i] = d->token_lens[i];
        memcpy(t->arena + at, d->tokens[i], d->token_lens[i]);
        at += d->token_lens[i];
        t->arena[at++] = 0;
        int32_t ty = d->token_types ? d->token_types[i] : ST_TOKEN_NORMAL;
        if (ty < 0 || ty > ST_TOKEN_BYTE)
            return st_fail(ST_ERR_FORMAT, "tokenizer: token %d has type %d (expected 0..6)", i, ty);
        t->type[i] = (uint8_t)ty;
    }
    for (int32_t i = 0; i < d->n_tokens; i++) tok_insert(t, i);

    /* llama.cpp's text-based overrides: EOG/EOT/FIM-looking tokens become control tokens. */
    for (int32_t i = 0; i < d->n_tokens; i++) {
        const char *s = t->arena + t->tok_off[i];
        size_t n = t->tok_len[i];
        int is_eog = text_in(s, n, eog_texts, sizeof eog_texts / sizeof *eog_texts);
        if (is_eog || text_in(s, n, fim_texts, sizeof fim_texts / sizeof *fim_texts))
            if (t->type[i] != ST_TOKEN_CONTROL && t->type[i] != ST_TOKEN_UNUSED) t->type[i] = ST_TOKEN_CONTROL;
        t->eog[i] = (uint8_t)is_eog;
    }

    /* pieces, after the arena's token texts */
    for (int32_t i = 0; i < d->n_tokens; i++) {
        const char *s = t->arena + t->tok_off[i];
        size_t n = t->tok_len[i];
        t->piece_off[i] = at;
        switch (t->type[i]) {
        case ST_TOKEN_NORMAL:
            t->piece_len[i] = decode_normal(t, s, n, t->arena + at);
            break;
        case ST_TOKEN_BYTE: {
            /* "<0xAB>" form */
            unsigned v = 0;
            int ok = n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>';
            for (int k = 3; ok && k < 5; k++) {
                char c = s[k];
                v = v * 16 + (unsigned)(c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : c >= 'a' && c <= 'f' ? c - 'a' + 10 : (ok = 0));
            }
            if (ok) { t->arena[at] = (char)v; t->piece_len[i] = 1; }
            else t->piece_len[i] = 0;
            break;
        }
        case ST_TOKEN_UNUSED:
        case ST_TOKEN_UNDEFINED:
            t->piece_len[i] = 0;
            break;
        default: /* control, user-defined, unknown: the text itself */
            memcpy(t->arena + at, s, n);
            t->piece_len[i] = n;
            break;
        }
        at += t->piece_len[i];
    }

    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        size_t k = st_utf8_encode(t->byte_to_cp[b], u);
        t->byte_id[b] = st_tokenizer_find(t, (const char *)u, k);
    }

    /* special-token candidates, longest text first (ties by id, for a stable order) */
    int32_t n_special = 0;
    for (int32_t i = 0; i < d->n_tokens; i++)
        if ((t->type[i] == ST_TOKEN_CONTROL || t->type[i] == ST_TOKEN_USER_DEFINED ||
             t->type[i] == ST_TOKEN_UNKNOWN) && t->tok_len[i] > 0)
            n_special++;
    t->special = malloc(sizeof *t->special * (size_t)(n_special + 1));
    if (!t->special) return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory");
    t->n_special = 0;
    for (int32_t i = 0; i < d->n_tokens; i++)
        if ((t->type[i] == ST_TOKEN_CONTROL || t->type[i] == ST_TOKEN_USER_DEFINED ||
             t->type[i] == ST_TOKEN_UNKNOWN) && t->tok_len[i] > 0)
            t->special[t->n_special++] = i;
    qsort_r(t->special, (size_t)t->n_special, sizeof *t->special, cmp_special, t);
    return ST_OK;
}

static st_status build_merges(st_tokenizer *t, const st_vocab_desc *d) {
    /* a load factor up to 3/4: the table is probed once per merge step, but it is also the
     * largest allocation here (16 bytes a slot) */
    t->merge_cap = 16;
    while (t->merge_cap * 3 < (size_t)d->n_merges * 4) t->merge_cap <<= 1;
    t->merge_table = malloc(sizeof *t->merge_table * t->merge_cap);
    if (!t->merge_table) return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory for %lld merges", (long long)d->n_merges);
    for (size_t i = 0; i < t->merge_cap; i++) t->merge_table[i].rank = -1;
    char *buf = NULL;
    size_t buf_cap = 0;
    for (int64_t r = 0; r < d->n_merges; r++) {
        const char *m = d->merges[r];
        size_t n = d->merge_lens[r];
        /* split at the first space after position 0 */
        const char *sp = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
        if (!sp) { free(buf); return st_fail(ST_ERR_FORMAT, "tokenizer: merge %lld has no space separator", (long long)r); }
        size_t nl = (size_t)(sp - m), nr = n - nl - 1;
        int32_t a = st_tokenizer_find(t, m, nl), b = st_tokenizer_find(t, sp + 1, nr);
        if (nl + nr > buf_cap) {
            buf_cap = 2 * (nl + nr) + 16;
            char *nb = realloc(buf, buf_cap);
            if (!nb) { free(buf); return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory"); }
            buf = nb;
        }
        memcpy(buf, m, nl);
        memcpy(buf + nl, sp + 1, nr);
        int32_t res = st_tokenizer_find(t, buf, nl + nr);
        /* A merge whose parts or result are not tokens cannot produce a token; the converter never
         * writes one. Skipping it is the same as llama.cpp's outcome except for the byte fallback
         * of such a symbol. */
        if (a < 0 || b < 0 || res < 0) { t->n_merges_skipped++; continue; }
        merge_insert(t, a, b, (int32_t)(r > INT32_MAX ? INT32_MAX : r), res);
    }
    free(buf);
    return ST_OK;
}

st_status st_tokenizer_build(const st_vocab_desc *d, st_tokenizer **out) {
    *out = NULL;
    if (d->n_tokens <= 0) return st_fail(ST_ERR_FORMAT, "tokenizer: the vocabulary is empty");
    st_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory");
    t->n_tokens = d->n_tokens;
    t->pre = d->pre;
    byte_map_init(t->byte_to_cp, t->cp_to_byte);
    st_status s = build_tokens(t, d);
    if (s == ST_OK) s = build_merges(t, d);
    if (s == ST_OK) s = st_pretokenizer_new(d->pre, &t->pretok);
    if (s != ST_OK) { st_tokenizer_free(t); return s; }
    int32_t ids[6] = {d->bos, d->eos, d->eot, d->eom, d->pad, d->unk};
    for (int i = 0; i < 6; i++)
        if (ids[i] >= d->n_tokens) {
            st_tokenizer_free(t);
            return st_fail(ST_ERR_FORMAT, "tokenizer: special token id %d is outside the vocabulary of %d", ids[i], d->n_tokens);
        }
    t->bos = d->bos < 0 ? -1 : d->bos;
    t->eos = d->eos < 0 ? -1 : d->eos;
    t->eot = d->eot < 0 ? -1 : d->eot;
    t->eom = d->eom < 0 ? -1 : d->eom;
    t->pad = d->pad < 0 ? -1 : d->pad;
    t->add_bos = d->add_bos && t->bos >= 0;
    t->add_eos = d->add_eos && t->eos >= 0;
    if (t->eot < 0) t->eot = st_tokenizer_find(t, "<|im_end|>", 10);
    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->eot >= 0) t->eog[t->eot] = 1;
    if (t->eom >= 0) t->eog[t->eom] = 1;
    *out = t;
    return ST_OK;
}

void st_tokenizer_free(st_tokenizer *t) {
    if (!t) return;
    st_pretokenizer_free(t->pretok);
    free(t->arena); free(t->tok_off); free(t->tok_len); free(t->piece_off); free(t->piece_len);
    free(t->type); free(t->eog); free(t->tok_table); free(t->merge_table); free(t->special);
    free(t);
}

static int name_is(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

st_status st_pretok_from_name(const char *name, size_t len, st_pretok *out) {
    /* llama.cpp maps these names to its QWEN2 pre-type */
    static const char *const qwen2_names[] = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"};
    for (size_t i = 0; i < sizeof qwen2_names / sizeof *qwen2_names; i++)
        if (name_is(name, len, qwen2_names[i])) { *out = ST_PRETOK_QWEN2; return ST_OK; }
    if (name_is(name, len, "qwen35")) { *out = ST_PRETOK_QWEN35; return ST_OK; }
    return st_fail(ST_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%.*s' is not supported (qwen2 and qwen35 are)",
                   (int)len, name);
}

/* ---- accessors ---- */
int32_t st_tokenizer_n_vocab(const st_tokenizer *t) { return t->n_tokens; }
st_pretok st_tokenizer_pre(const st_tokenizer *t) { return t->pre; }
int32_t st_tokenizer_bos(const st_tokenizer *t) { return t->bos; }
int32_t st_tokenizer_eos(const st_tokenizer *t) { return t->eos; }
int st_tokenizer_is_eog(const st_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_tokens && t->eog[id];
}
st_token_type st_tokenizer_token_type(const st_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_tokens ? (st_token_type)t->type[id] : ST_TOKEN_UNDEFINED;
}
const char *st_tokenizer_token_text(const st_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_tokens) { if (len) *len = 0; return NULL; }
    if (len) *len = t->tok_len[id];
    return t->arena + t->tok_off[id];
}
const char *st_token_piece(const st_tokenizer *t, int32_t id, int special, size_t *len) {
    if (id < 0 || id >= t->n_tokens) { *len = 0; return NULL; }
    if (!special && (t->type[id] == ST_TOKEN_CONTROL || t->type[id] == ST_TOKEN_UNKNOWN)) {
        *len = 0;
        return t->arena + t->piece_off[id];
    }
    *len = t->piece_len[id];
    return t->arena + t->piece_off[id];
}

/* ---- tokenizing ---- */

typedef struct ids_buf {
    int32_t *v;
    size_t n, cap;
} ids_buf;

static st_status ids_push(ids_buf *b, int32_t id) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        int32_t *v = realloc(b->v, cap * sizeof *v);
        if (!v) return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory for %zu ids", cap);
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = id;
    return ST_OK;
}

/* One BPE symbol: the id of the token it spells (or -1 for a byte with no token), linked to its
 * neighbours; merged-away symbols are marked dead. */
typedef struct sym { int32_t id, prev, next; } sym;
/* A candidate merge of symbol `left` with its right neighbour, valid while both still have the
 * ids they had when it was queued. */
typedef struct cand { int32_t rank, left, right_pos, left_id, right_id, result; } cand;

typedef struct bpe_scratch {
    sym *syms;
    size_t syms_cap;
    cand *heap;
    size_t heap_n, heap_cap;
} bpe_scratch;

static int cand_less(const cand *a, const cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

static st_status heap_push(bpe_scratch *s, cand c) {
    if (s->heap_n == s->heap_cap) {
        size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
        cand *h = realloc(s->heap, cap * sizeof *h);
        if (!h) return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory");
        s->heap = h;
        s->heap_cap = cap;
    }
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = c;
    return ST_OK;
}

static cand heap_pop(bpe_scratch *s) {
    cand top = s->heap[0];
    cand last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const cand *best = &last;
        if (l < n && cand_less(&s->heap[l], best)) { m = l; best = &s->heap[l]; }
        if (r < n && cand_less(&s->heap[r], best)) { m = r; }
        if (m == i) break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (n > 0) s->heap[i] = last;
    return top;
}

static st_status queue_pair(const st_tokenizer *t, bpe_scratch *s, int32_t left) {
    if (left < 0) return ST_OK;
    int32_t right = s->syms[left].next;
    if (right < 0) return ST_OK;
    int32_t a = s->syms[left].id, b = s->syms[right].id;
    if (a < 0 || b < 0) return ST_OK;
    const st_merge *m = merge_find(t, a, b);
    if (!m) return ST_OK;
    cand c = {m->rank, left, right, a, b, m->result};
    return heap_push(s, c);
}

/* BPE over one pre-tokenized piece: one symbol per byte, then merges by rank. */
static st_status bpe_piece(const st_tokenizer *t, bpe_scratch *s, const char *piece, size_t n, ids_buf *out) {
    if (n == 1) {
        int32_t id = t->byte_id[(uint8_t)piece[0]];
        return id >= 0 ? ids_push(out, id) : ST_OK;
    }
    /* No shortcut for a piece that is itself a token: with ignore_merges off (qwen2, qwen35)
     * llama.cpp and HF build every piece by merging, which may end in a different split. */
    if (n > s->syms_cap) {
        size_t cap = n * 2;
        sym *v = realloc(s->syms, cap * sizeof *v);
        if (!v) return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory for a %zu-byte piece", n);
        s->syms = v;
        s->syms_cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        s->syms[i].id = t->byte_id[(uint8_t)piece[i]];
        s->syms[i].prev = (int32_t)i - 1;
        s->syms[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    s->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) ST_TRY(queue_pair(t, s, (int32_t)i));
    while (s->heap_n > 0) {
        cand c = heap_pop(s);
        sym *l = &s->syms[c.left];
        if (l->id != c.left_id || l->next != c.right_pos) continue;
        sym *r = &s->syms[c.right_pos];
        if (r->id != c.right_id) continue;
        l->id = c.result;
        l->next = r->next;
        if (r->next >= 0) s->syms[r->next].prev = c.left;
        r->id = -2; /* dead */
        r->next = r->prev = -1;
        ST_TRY(queue_pair(t, s, l->prev));
        ST_TRY(queue_pair(t, s, c.left));
    }
    for (int32_t i = 0; i >= 0; i = s->syms[i].next)
        if (s->syms[i].id >= 0) ST_TRY(ids_push(out, s->syms[i].id));
    return ST_OK;
}

typedef struct piece_ctx {
    const st_tokenizer *t;
    bpe_scratch *s;
    ids_buf *out;
    const char *matched;  /* the text the regex ran on */
    const char *bytes;    /* the text BPE encodes: the same offsets, maybe other bytes */
} piece_ctx;

static st_status on_piece(void *ctx, const char *piece, size_t len) {
    piece_ctx *c = ctx;
    return bpe_piece(c->t, c->s, c->bytes + (piece - c->matched), len, c->out);
}

/* llama.cpp's reading of bad UTF-8 (unicode_cpts_from_utf8): a lead byte followed by enough
 * continuation bytes is decoded without further checks (overlong forms and surrogates pass,
 * 4-byte leads up to F7); any other byte becomes U+FFFD on its own. Returns the code point and
 * sets *k to the bytes used. */
static uint32_t lenient_decode(const uint8_t *s, size_t n, size_t *k) {
    uint8_t b = s[0];
    size_t len = b < 0x80 ? 1 : (b & 0x40) == 0 ? 0 : (b & 0x20) == 0 ? 2 : (b & 0x10) == 0 ? 3 : (b & 0x08) == 0 ? 4 : 0;
    *k = 1;
    if (len == 1) return b;
    if (len == 0 || len > n) return ST_UTF8_REPLACEMENT;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return ST_UTF8_REPLACEMENT;
    uint32_t cp = b & (0x7F >> len);
    for (size_t i = 1; i < len; i++) cp = (cp << 6) | (s[i] & 0x3F);
    *k = len;
    return cp;
}

/* Re-encodes invalid text as llama.cpp does before pre-tokenizing: *bytes gets what BPE will
 * encode (overlong forms shortened, surrogates kept as 3 bytes, bad bytes as U+FFFD), and
 * *matched the same with each surrogate replaced by U+E000, a character of the same class for
 * the regex (neither letter, mark, digit nor space) and the same length, because PCRE2 refuses
 * surrogates. Both are NULL when the text is valid UTF-8 and can be used as it is. */
static st_status sanitize_utf8(const char *text, size_t len, char **bytes, char **matched, size_t *out_len) {
    *bytes = *matched = NULL;
    if (st_utf8_valid((const uint8_t *)text, len)) return ST_OK;
    char *o = malloc(len * 3 + 1), *m = malloc(len * 3 + 1);
    if (!o || !m) { free(o); free(m); return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory"); }
    size_t n = 0, i = 0;
    while (i < len) {
        size_t k;
        uint32_t cp = lenient_decode((const uint8_t *)text + i, len - i, &k);
        if (cp > 0x10FFFF) cp = ST_UTF8_REPLACEMENT;
        uint8_t u[4];
        size_t e;
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            u[0] = (uint8_t)(0xE0 | (cp >> 12)); u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (uint8_t)(0x80 | (cp & 0x3F));
            memcpy(o + n, u, 3);
            memcpy(m + n, "\xEE\x80\x80", 3);
            e = 3;
        } else {
            e = st_utf8_encode(cp, u);
            memcpy(o + n, u, e);
            memcpy(m + n, u, e);
        }
        n += e;
        i += k;
    }
    *bytes = o;
    *matched = m;
    *out_len = n;
    return ST_OK;
}

static st_status encode_text(const st_tokenizer *t, bpe_scratch *s, const char *text, size_t len, ids_buf *out) {
    if (len == 0) return ST_OK;
    char *bytes = NULL, *matched = NULL;
    size_t n = len;
    ST_TRY(sanitize_utf8(text, len, &bytes, &matched, &n));
    piece_ctx c = {t, s, out, matched ? matched : text, bytes ? bytes : text};
    st_status st = st_pretokenize(t->pretok, c.matched, n, on_piece, &c);
    free(bytes);
    free(matched);
    return st;
}

/* A fragment of the input: raw text [off, off+len), or a matched special token (id >= 0). */
typedef struct frag { size_t off, len; int32_t id; } frag;
typedef struct frag_list { frag *v; size_t n, cap; } frag_list;

static st_status frag_push(frag_list *l, frag f) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        frag *v = realloc(l->v, cap * sizeof *v);
        if (!v) return st_fail(ST_ERR_NOMEM, "tokenizer: out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = f;
    return ST_OK;
}

/* Cuts the text at every occurrence of each special token, longest tokens first, each token
 * splitting all raw fragments left by the ones before it (llama.cpp's tokenizer_st_partition). */
static st_status partition_special(const st_tokenizer *t, const char *text, size_t len, int parse_special, frag_list *out) {
    frag_list cur = {0}, next = {0};
    st_status s = frag_push(&cur, (frag){0, len, -1});
    for (int32_t k = 0; k < t->n_special && s == ST_OK; k++) {
        int32_t id = t->special[k];
        if (!parse_special && t->type[id] != ST_TOKEN_USER_DEFINED) continue;
        const char *tok = t->arena + t->tok_off[id];
        size_t tl = t->tok_len[id];
        next.n = 0;
        for (size_t f = 0; f < cur.n && s == ST_OK; f++) {
            frag fr = cur.v[f];
            if (fr.id >= 0 || fr.len < tl) { s = frag_push(&next, fr); continue; }
            size_t pos = fr.off, end = fr.off + fr.len;
            for (;;) {
                const char *hit = memmem(text + pos, end - pos, tok, tl);
                if (!hit) break;
                size_t h = (size_t)(hit - text);
                if (h > pos) s = frag_push(&next, (frag){pos, h - pos, -1});
                if (s == ST_OK) s = frag_push(&next, (frag){h, tl, id});
                if (s != ST_OK) break;
                pos = h + tl;
            }
            if (s == ST_OK && pos < end) s = frag_push(&next, (frag){pos, end - pos, -1});
        }
        frag_list tmp = cur; cur = next; next = tmp;
    }
    free(next.v);
    if (s != ST_OK) { free(cur.v); return s; }
    *out = cur;
    return ST_OK;
}

st_status st_tokenize(const st_tokenizer *t, const char *text, size_t len, int add_special,
                      int parse_special, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    if (!text && len) return st_fail(ST_ERR_INVALID, "tokenize: NULL text of length %zu", len);
    ids_buf out = {0};
    bpe_scratch scratch = {0};
    frag_list frags = {0};
    st_status s = ST_OK;
    if (add_special && t->add_bos) s = ids_push(&out, t->bos);
    if (s == ST_OK && len) s = partition_special(t, text, len, parse_special, &frags);
    for (size_t i = 0; i < frags.n && s == ST_OK; i++) {
        frag f = frags.v[i];
        s = f.id >= 0 ? ids_push(&out, f.id) : encode_text(t, &scratch, text + f.off, f.len, &out);
    }
    if (s == ST_OK && add_special && t->add_eos) s = ids_push(&out, t->eos);
    free(frags.v);
    free(scratch.syms);
    free(scratch.heap);
    if (s != ST_OK) { free(out.v); return s; }
    if (!out.v) out.v = malloc(sizeof *out.v); /* a valid pointer even for no ids */
    if (!out.v) return st_fail(ST_ERR_NOMEM, "tokenize: out of memory");
    *ids = out.v;
    *n = out.n;
    return ST_OK;
}
