/* prompt.c: strata.h's "Prompts": the one reuse policy of the terminal chat and the server.
 *
 * A held sequence and a new prompt are compared id by id. Where they part, the policy looks at the
 * message the parting falls in: when it is an assistant message (the last <|im_start|> before the
 * parting opens "assistant"), it runs in the held ids to their next <|im_end|> (or their end: the
 * reply just generated) and in the prompt to its next <|im_end|>, and the two texts are equal once
 * the <think>...</think> block (or an unclosed <think> to the end), every white-space byte and what
 * a client cannot have received (bytes that are not UTF-8, and the U+FFFD written for them) are
 * left out, the held message replaces the rendered one and the comparison goes on after it. Chat
 * templates drop the reasoning of earlier turns, write an empty think block or none, and respace
 * tool calls; the model then reads its own reply as it wrote it, and the whole of the previous turn
 * is reused. Anything else that differs (a user message, a system prompt, an edited reply) ends the
 * match there.
 *
 * Feeding: pieces of at most a chunk; for a hybrid model a piece ends before each <|im_start|>
 * and a checkpoint is taken there, and one where the kept part ends (the end of the previous
 * reply, as a rule); an attention-only model can cut anywhere, so its pieces are whole chunks. Without a checkpoint (out of memory, a device copy failed) only reuse is lost.
 *
 * Nothing here touches the state directly: session_state.c cuts and checkpoints, prompt_cache.c
 * keeps other sequences. */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "engine/prompt.h"
#include "engine/session_spec.h"
#include "engine/session_state.h"
#include "model/model.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

typedef struct chatml {
    const st_tokenizer *tok;
    int32_t im_start, im_end;
} chatml;

static chatml chatml_of(const st_model *m) {
    chatml c = {m->tok, -1, -1};
    if (m->tok) {
        c.im_start = st_tokenizer_find(m->tok, "<|im_start|>", 12);
        c.im_end = st_tokenizer_find(m->tok, "<|im_end|>", 10);
    }
    return c;
}

/* A message's text as compared: the think block out, then every white-space byte, and what does
 * not reach a client as UTF-8 (a byte that is not, and U+FFFD, which the server writes for it).
 * In place. */
static size_t normalise(char *t, size_t n) {
    char *open = strstr(t, "<think>");
    if (open) {
        char *close = strstr(open, "</think>");
        char *after = close ? close + 8 : t + n;
        memmove(open, after, (size_t)(t + n - after) + 1);
        n -= (size_t)(after - open);
    }
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = st_utf8_decode((const uint8_t *)t + i, n - i, &cp);
        if (cp != UINT32_MAX && cp != ST_UTF8_REPLACEMENT && cp != ' ' && cp != '\n' && cp != '\t' && cp != '\r') {
            memmove(t + k, t + i, len);
            k += len;
        }
        i += len;
    }
    t[k] = 0;
    return k;
}

/* Whether held[0..nh) and rendered[0..nr) (each a message after its <|im_start|>, the role line
 * first) are one assistant message. */
static int same_reply(const chatml *c, const int32_t *held, int64_t nh, const int32_t *rendered, int64_t nr) {
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int same = 0;
    if (st_detokenize(c->tok, held, (size_t)nh, 1, &a, &na) == ST_OK &&
        st_detokenize(c->tok, rendered, (size_t)nr, 1, &b, &nb) == ST_OK) {
        na = normalise(a, na);
        nb = normalise(b, nb);
        same = na == nb && na >= 9 && !memcmp(a, "assistant", 9) && !memcmp(a, b, na);
    }
    st_clear_error(); /* a failed decode only means no splice */
    free(a);
    free(b);
    return same;
}

static int64_t next_of(const int32_t *ids, int64_t from, int64_t n, int32_t id) {
    while (from < n && ids[from] != id) from++;
    return from;
}

st_status st_prompt_match(const st_model *m, const st_held *h, const int32_t *prompt, int64_t n, int32_t **form,
                          int64_t *n_form, int64_t *reach) {
    *form = NULL;
    chatml c = chatml_of(m);
    /* The form is at most the held ids and the prompt together. */
    int32_t *out = malloc((size_t)(h->n + n) * sizeof *out);
    if (!out) return st_fail(ST_ERR_NOMEM, "prompt: out of memory for %lld ids", (long long)(h->n + n));
    int64_t i = 0, j = 0; /* prompt, held: out[0..j) == held[0..j) */
    int64_t spliced = 0;  /* held[0..spliced) may stand for other prompt ids: no message starts before */
    for (;;) {
        while (i < n && j < h->n && prompt[i] == h->ids[j]) out[j++] = prompt[i++];
        if (i == n || j == h->n || c.im_start < 0 || c.im_end < 0) break;
        int64_t a = j; /* just after the held message's <|im_start|> */
        while (a > 0 && h->ids[a - 1] != c.im_start) a--;
        if (a <= spliced) break;
        int64_t qa = i - (j - a);
        int64_t hend = next_of(h->ids, j, h->n, c.im_end), qend = next_of(prompt, i, n, c.im_end);
        if (qend == n || !same_reply(&c, h->ids + a, hend - a, prompt + qa, qend - qa)) break;
        memcpy(out + j, h->ids + j, (size_t)(hend - j) * sizeof *out);
        j = spliced = hend;
        i = qend;
    }
    memcpy(out + j, prompt + i, (size_t)(n - i) * sizeof *out);
    *n_form = j + (n - i);
    /* The last prompt token is fed again (its logits start the reply). */
    int64_t p = j < *n_form ? j : *n_form - 1;
    if (p < h->n && h->recurrent) {
        int64_t to = 0;
        for (int k = 0; k < h->n_ckpt; k++)
            if (h->ckpt[k] <= p && h->ckpt[k] > to) to = h->ckpt[k];
        p = to;
    }
    *reach = p;
    *form = out;
    return ST_OK;
}

/* The session as a held sequence; ckpt receives its checkpoint positions. */
static st_held held_of(const st_session *s, int64_t ckpt[ST_SESSION_CHECKPOINTS]) {
    st_held h = {.ids = st_session_ids(s), .n = st_session_n_past(s), .ckpt = ckpt, .recurrent = st_session_is_recurrent(s)};
    h.n_ckpt = st_session_checkpoints(s, ckpt, ST_SESSION_CHECKPOINTS);
    if (h.n_ckpt > ST_SESSION_CHECKPOINTS) h.n_ckpt = ST_SESSION_CHECKPOINTS;
    return h;
}

int64_t st_session_prompt_reach(const st_session *s, const int32_t *prompt, int64_t n) {
    int64_t ckpt[ST_SESSION_CHECKPOINTS], n_form, reach = 0;
    st_held live = held_of(s, ckpt);
    int32_t *form = NULL;
    if (n <= 0 || st_prompt_match(st_session_model(s), &live, prompt, n, &form, &n_form, &reach) != ST_OK) {
        st_clear_error();
        reach = 0;
    }
    free(form);
    return reach;
}

st_status st_session_prompt(st_session *s, st_prompt_cache *cache, const int32_t *prompt, int64_t n, st_prompt *p) {
    memset(p, 0, sizeof *p);
    if (n <= 0) return st_fail(ST_ERR_INVALID, "prompt: %lld tokens", (long long)n);
    const st_model *m = st_session_model(s);
    int64_t ckpt[ST_SESSION_CHECKPOINTS];
    st_held live = held_of(s, ckpt);
    int32_t *form = NULL, *other = NULL;
    int64_t n_form = 0, reach = 0, n_other = 0, reach_other = 0;
    ST_TRY(st_prompt_match(m, &live, prompt, n, &form, &n_form, &reach));
    /* The session's own sequence is kept aside before it loses positions: replaced by a cached
     * one that keeps more (which its storing never drops), or cut back. */
    int best = cache ? st_prompt_cache_best(cache, m, live.recurrent, prompt, n, reach, &other, &n_other, &reach_other) : -1;
    if (best >= 0) {
        const void *key = st_prompt_cache_key(cache, best);
        if (st_prompt_cache_store_keeping(cache, s, key) != ST_OK) st_clear_error();
        best = st_prompt_cache_find(cache, key);
        if (best >= 0 && st_prompt_cache_restore(cache, best, s) == ST_OK) {
            free(form);
            form = other;
            n_form = n_other;
        } else {
            /* The session is as it was, or reset: its own match (or none) stands. */
            st_clear_error();
            free(other);
        }
    } else if (cache && reach < live.n && st_prompt_cache_store(cache, s) != ST_OK) {
        st_clear_error();
    }
    int64_t kept = 0;
    st_status st = st_session_reuse(s, form, n_form, &kept);
    if (st != ST_OK) {
        free(form);
        return st;
    }
    /* Where the held sequence ends (a reply, as a rule) is a message boundary too: a later state of
     * this conversation returns here, so it stands for this one in the cache. */
    if (kept > 0 && st_session_checkpoint(s) != ST_OK) st_clear_error();
    *p = (st_prompt){.ids = form, .n = n_form, .cached = kept, .done = kept};
    return ST_OK;
}

int64_t st_session_prompt_piece(const st_session *s, const st_prompt *p, int64_t max_rows) {
    if (p->done >= p->n) return 0;
    if (max_rows <= 0) max_rows = st_session_n_prefill(s);
    int64_t end = p->n - p->done < max_rows ? p->n : p->done + max_rows;
    if (st_session_is_recurrent(s)) {
        int32_t im_start = chatml_of(st_session_model(s)).im_start;
        if (im_start >= 0) end = next_of(p->ids, p->done + 1, end, im_start);
    }
    return end - p->done;
}

void st_session_prompt_advance(st_session *s, st_prompt *p, int64_t rows) {
    p->done += rows;
    if (p->done < p->n && st_session_is_recurrent(s) && p->ids[p->done] == chatml_of(st_session_model(s)).im_start &&
        st_session_checkpoint(s) != ST_OK)
        st_clear_error();
}

st_status st_session_prompt_feed(st_session *s, st_prompt *p, int64_t max_rows) {
    int64_t rows = st_session_prompt_piece(s, p, max_rows);
    if (!rows) return ST_OK;
    ST_TRY(st_session_feed(s, p->ids + p->done, rows, NULL));
    st_session_prompt_advance(s, p, rows);
    return ST_OK;
}

void st_prompt_free(st_prompt *p) {
    if (!p) return;
    free(p->ids);
    memset(p, 0, sizeof *p);
}
