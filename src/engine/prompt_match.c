/* prompt_match.c: how a new prompt lands on a held sequence, the comparison at the heart of
 * strata.h's "Prompts" (prompt.c feeds what it decides; prompt_cache.c ranks kept sequences by it).
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
 * match there. */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "engine/prompt_match.h"
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

int32_t st_prompt_im_start(const st_model *m) { return chatml_of(m).im_start; }

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

int64_t st_prompt_next_id(const int32_t *ids, int64_t from, int64_t n, int32_t id) {
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
        int64_t hend = st_prompt_next_id(h->ids, j, h->n, c.im_end), qend = st_prompt_next_id(prompt, i, n, c.im_end);
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
