/* reply.c: generated pieces -> reasoning / content / tool-call events (see reply.h).
 *
 * Three stages, each holding back only what it cannot decide yet:
 *   1. UTF-8: a character split across pieces waits for its last byte; bytes that can never form a
 *      character become U+FFFD, so every event is valid UTF-8 (JSON needs it).
 *   2. Stop strings: the text after the longest suffix that is a prefix of a stop string is safe;
 *      at a match, the text before it goes on and generation stops.
 *   3. Tags: the chat parser of src/text (st_chat_parser, the one `strata chat` uses too) splits
 *      reasoning, content and tool calls; raw completions skip it (all of it is content). */
#include "server/reply.h"

#include <stdlib.h>
#include <string.h>

#include "text/chat.h"

typedef struct text {
    char *p;
    size_t n, cap;
} text;

struct sv_reply {
    char **stops;
    size_t n_stops;
    sv_reply_emit emit;
    void *ctx;
    unsigned char utf8[4];
    size_t n_utf8;
    text held;              /* stage 2: text that may start a stop string */
    st_chat_parser *parser; /* stage 3; NULL: everything is content */
    int tool_calls;         /* calls emitted so far */
    const char *matched;
};

static void text_add(text *t, const char *s, size_t n) {
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 128;
        while (cap < t->n + n + 1) cap *= 2;
        t->p = realloc(t->p, cap);
        t->cap = cap;
    }
    if (n) memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = 0;
}

static void text_drop(text *t, size_t n) {
    memmove(t->p, t->p + n, t->n - n);
    t->n -= n;
    t->p[t->n] = 0;
}

sv_reply *sv_reply_new(const char *const *stops, int flags, sv_reply_emit emit, void *ctx) {
    sv_reply *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    while (stops && stops[r->n_stops]) r->n_stops++;
    r->stops = calloc(r->n_stops + 1, sizeof *r->stops);
    for (size_t i = 0; i < r->n_stops; i++) r->stops[i] = strdup(stops[i]);
    r->emit = emit;
    r->ctx = ctx;
    text_add(&r->held, "", 0);
    st_chat_parser_options o = {.reasoning = (flags & SV_REPLY_REASONING) != 0, .tools = (flags & SV_REPLY_TOOLS) != 0};
    if (flags && st_chat_parser_new_with(&o, &r->parser) != ST_OK) {
        sv_reply_free(r);
        return NULL;
    }
    return r;
}

void sv_reply_free(sv_reply *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->stops);
    free(r->held.p);
    st_chat_parser_free(r->parser);
    free(r);
}

const char *sv_reply_stop_matched(const sv_reply *r) { return r->matched; }
int sv_reply_tool_calls(const sv_reply *r) { return r->tool_calls; }

/* The length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t partial_suffix(const char *s, size_t n, const char *tag) {
    size_t t = strlen(tag);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

/* Stage 3: the chat parser's events as the server's. */
static st_status on_chat_event(void *ctx, const st_chat_event *e) {
    sv_reply *r = ctx;
    if (e->part == ST_CHAT_TOOL_CALL) {
        sv_tool_call call = {.id = NULL, .name = e->name, .arguments = e->arguments};
        r->tool_calls++;
        r->emit(r->ctx, SV_EVENT_TOOL_CALL, NULL, 0, &call);
    } else if (e->len) {
        r->emit(r->ctx, e->part == ST_CHAT_REASONING ? SV_EVENT_REASONING : SV_EVENT_CONTENT, e->text, e->len, NULL);
    }
    return ST_OK;
}

static void parse_add(sv_reply *r, const char *s, size_t n) {
    if (!r->parser) {
        if (n) r->emit(r->ctx, SV_EVENT_CONTENT, s, n, NULL);
        return;
    }
    st_chat_parser_feed(r->parser, s, n, on_chat_event, r);
}

void sv_reply_prefix(sv_reply *r, const char *s) { parse_add(r, s, strlen(s)); }

/* Stage 1: appends the complete characters of s to out; keeps an incomplete tail in r->utf8. */
static size_t utf8_need(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Overlong forms, surrogates and values past U+10FFFF are decided by the second byte. */
static int utf8_second_ok(unsigned char lead, unsigned char b) {
    if ((b & 0xC0) != 0x80) return 0;
    if (lead == 0xE0) return b >= 0xA0;
    if (lead == 0xED) return b < 0xA0;
    if (lead == 0xF0) return b >= 0x90;
    if (lead == 0xF4) return b < 0x90;
    return 1;
}

static void utf8_push(sv_reply *r, unsigned char b, text *out) {
    if (r->n_utf8 == 0) {
        size_t need = utf8_need(b);
        if (need == 1) text_add(out, (const char *)&b, 1);
        else if (need == 0) text_add(out, "\xEF\xBF\xBD", 3);
        else r->utf8[r->n_utf8++] = b;
        return;
    }
    int ok = r->n_utf8 == 1 ? utf8_second_ok(r->utf8[0], b) : (b & 0xC0) == 0x80;
    if (!ok) {
        text_add(out, "\xEF\xBF\xBD", 3);
        r->n_utf8 = 0;
        utf8_push(r, b, out); /* b may start a new character */
        return;
    }
    r->utf8[r->n_utf8++] = b;
    if (r->n_utf8 == utf8_need(r->utf8[0])) {
        text_add(out, (const char *)r->utf8, r->n_utf8);
        r->n_utf8 = 0;
    }
}

static void utf8_take(sv_reply *r, const char *s, size_t n, text *out, int final) {
    for (size_t i = 0; i < n; i++) utf8_push(r, (unsigned char)s[i], out);
    if (final && r->n_utf8) {
        text_add(out, "\xEF\xBF\xBD", 3);
        r->n_utf8 = 0;
    }
}

static int stops_run(sv_reply *r, int final) {
    text *h = &r->held;
    size_t best = h->n;
    for (size_t i = 0; i < r->n_stops; i++) {
        char *m = *r->stops[i] ? strstr(h->p, r->stops[i]) : NULL;
        if (m && (size_t)(m - h->p) < best) {
            best = (size_t)(m - h->p);
            r->matched = r->stops[i];
        }
    }
    if (r->matched) {
        parse_add(r, h->p, best);
        text_drop(h, h->n);
        return 1;
    }
    size_t keep = 0;
    for (size_t i = 0; !final && i < r->n_stops; i++) {
        size_t k = *r->stops[i] ? partial_suffix(h->p, h->n, r->stops[i]) : 0;
        if (k > keep) keep = k;
    }
    parse_add(r, h->p, h->n - keep);
    text_drop(h, h->n - keep);
    return 0;
}

int sv_reply_feed(sv_reply *r, const char *piece, size_t len) {
    if (r->matched) return 1;
    utf8_take(r, piece, len, &r->held, 0);
    return stops_run(r, 0);
}

void sv_reply_finish(sv_reply *r) {
    if (!r->matched) {
        utf8_take(r, "", 0, &r->held, 1);
        stops_run(r, 1);
    }
    if (r->parser) st_chat_parser_finish(r->parser, on_chat_event, r);
}
