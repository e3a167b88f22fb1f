/* detok.c: token ids back to text: a whole sequence at once, or streamed so that no UTF-8
 * character is ever split between two outputs (a split one is held until its last byte; a
 * sequence that can never be valid becomes U+FFFD at once; a held tail becomes U+FFFD on flush). */
#include <stdlib.h>
#include <string.h>
#include "text/tokenizer.h"
#include "text/utf8.h"

/* ---- detokenizing ---- */

st_status st_detokenize(const st_tokenizer *t, const int32_t *ids, size_t n, int special, char **text, size_t *len) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= st_tokenizer_n_vocab(t))
            return st_fail(ST_ERR_RANGE, "detokenize: token id %d at position %zu is outside the vocabulary of %d",
                           ids[i], i, st_tokenizer_n_vocab(t));
        size_t k;
        st_token_piece(t, ids[i], special, &k);
        total += k;
    }
    char *o = malloc(total + 1);
    if (!o) return st_fail(ST_ERR_NOMEM, "detokenize: out of memory for %zu bytes", total);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        const char *p = st_token_piece(t, ids[i], special, &k);
        memcpy(o + at, p, k);
        at += k;
    }
    o[at] = 0;
    *text = o;
    if (len) *len = at;
    return ST_OK;
}

struct st_detok {
    const st_tokenizer *t;
    int special;
    uint8_t tail[4];  /* the held bytes of a split character */
    size_t tail_n;
    char *out;
    size_t out_n, out_cap;
};

st_status st_detok_new(const st_tokenizer *t, int special, st_detok **out) {
    st_detok *d = calloc(1, sizeof *d);
    if (!d) return st_fail(ST_ERR_NOMEM, "detok: out of memory");
    d->t = t;
    d->special = special;
    *out = d;
    return ST_OK;
}

void st_detok_free(st_detok *d) {
    if (!d) return;
    free(d->out);
    free(d);
}

void st_detok_reset(st_detok *d) {
    d->tail_n = 0;
    d->out_n = 0;
}

static st_status out_reserve(st_detok *d, size_t n) {
    if (n <= d->out_cap) return ST_OK;
    size_t cap = d->out_cap ? d->out_cap : 64;
    while (cap < n) cap *= 2;
    char *o = realloc(d->out, cap);
    if (!o) return st_fail(ST_ERR_NOMEM, "detok: out of memory");
    d->out = o;
    d->out_cap = cap;
    return ST_OK;
}

static void out_replacement(st_detok *d) {
    d->out[d->out_n++] = (char)0xEF;
    d->out[d->out_n++] = (char)0xBF;
    d->out[d->out_n++] = (char)0xBD;
}

st_status st_detok_push_bytes(st_detok *d, const char *bytes, size_t n, const char **text, size_t *len) {
    d->out_n = 0;
    /* Work on held tail + new bytes as one sequence. The output needs at most 3 bytes per input
     * byte (each invalid byte a U+FFFD); the work copy sits after that room in the same buffer. */
    size_t total = d->tail_n + n;
    ST_TRY(out_reserve(d, total * 4 + 4));
    uint8_t *w = (uint8_t *)d->out + total * 3 + 4;
    memcpy(w, d->tail, d->tail_n);
    if (n) memcpy(w + d->tail_n, bytes, n);
    d->tail_n = 0;
    size_t i = 0;
    while (i < total) {
        uint32_t cp;
        size_t k = st_utf8_decode(w + i, total - i, &cp);
        if (cp != UINT32_MAX) {
            memmove(d->out + d->out_n, w + i, k);
            d->out_n += k;
        } else if (i + k == total && st_utf8_incomplete_tail(w + i, k) == k) {
            memcpy(d->tail, w + i, k); /* a split character: wait for the rest */
            d->tail_n = k;
        } else {
            out_replacement(d);
        }
        i += k;
    }
    *text = d->out;
    *len = d->out_n;
    return ST_OK;
}

st_status st_detok_push(st_detok *d, int32_t id, const char **text, size_t *len) {
    if (id < 0 || id >= st_tokenizer_n_vocab(d->t))
        return st_fail(ST_ERR_RANGE, "detok: token id %d is outside the vocabulary of %d", id, st_tokenizer_n_vocab(d->t));
    size_t k;
    const char *p = st_token_piece(d->t, id, d->special, &k);
    return st_detok_push_bytes(d, p, k, text, len);
}

void st_detok_flush(st_detok *d, const char **text, size_t *len) {
    d->out_n = 0;
    if (d->tail_n > 0 && out_reserve(d, 4) == ST_OK) out_replacement(d);
    d->tail_n = 0;
    *text = d->out ? d->out : "";
    *len = d->out_n;
}
