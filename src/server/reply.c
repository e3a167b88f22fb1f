/* reply.c: generated pieces -> reasoning / content / tool-call events (see reply.h).
 *
 * Three stages, each holding back only what it cannot decide yet:
 *   1. UTF-8: a character split across pieces waits for its last byte; bytes that can never form a
 *      character become U+FFFD, so every event is valid UTF-8 (JSON needs it).
 *   2. Stop strings: the text after the longest suffix that is a prefix of a stop string is safe;
 *      at a match, the text before it goes on and generation stops.
 *   3. Tags: a small state machine over <think>, </think>, <tool_call>, </tool_call>. */
#include "server/reply.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

typedef enum { P_START, P_REASONING, P_CONTENT_START, P_CONTENT, P_TOOL } parse_state;

typedef struct text {
    char *p;
    size_t n, cap;
} text;

struct sv_reply {
    char **stops;
    size_t n_stops;
    int parse_tools;
    sv_reply_emit emit;
    void *ctx;
    unsigned char utf8[4];
    size_t n_utf8;
    text held;   /* stage 2: text that may start a stop string */
    text parse;  /* stage 3: text not yet emitted */
    parse_state state;
    int reasoning_fresh; /* no reasoning emitted since <think>: leading newlines are dropped */
    int tool_calls;
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
    r->parse_tools = (flags & SV_REPLY_TOOLS) != 0;
    r->state = (flags & SV_REPLY_REASONING) ? P_START : P_CONTENT;
    r->emit = emit;
    r->ctx = ctx;
    text_add(&r->held, "", 0);
    text_add(&r->parse, "", 0);
    return r;
}

void sv_reply_free(sv_reply *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->stops);
    free(r->held.p);
    free(r->parse.p);
    free(r);
}

int sv_reply_tool_calls(const sv_reply *r) { return r->tool_calls; }
const char *sv_reply_stop_matched(const sv_reply *r) { return r->matched; }

/* The length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t partial_suffix(const char *s, size_t n, const char *tag) {
    size_t t = strlen(tag);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static size_t trailing_space(const char *s, size_t n) {
    size_t k = 0;
    while (k < n && is_space(s[n - 1 - k])) k++;
    return k;
}

static void emit_text(sv_reply *r, sv_event kind, const char *s, size_t n) {
    if (n) r->emit(r->ctx, kind, s, n, NULL);
}

static void emit_reasoning(sv_reply *r, const char *s, size_t n) {
    if (r->reasoning_fresh) {
        while (n && (*s == '\n' || *s == '\r')) { s++; n--; }
        if (n) r->reasoning_fresh = 0;
    }
    emit_text(r, SV_EVENT_REASONING, s, n);
}

/* Qwen 3.5's form: <function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>...</function>. */
static json_t *parse_xml_call(const char *body, char **name) {
    const char *p = body + 10, *e = strchr(p, '>');
    if (!e) return NULL;
    *name = strndup(p, (size_t)(e - p));
    json_t *args = json_object();
    for (p = e + 1; (p = strstr(p, "<parameter=")); ) {
        p += 11;
        const char *ke = strchr(p, '>');
        if (!ke) break;
        char *key = strndup(p, (size_t)(ke - p));
        const char *v = ke + 1, *ve = strstr(v, "</parameter>");
        if (!ve) { free(key); break; }
        if (*v == '\n') v++;
        size_t vn = (size_t)(ve - v);
        if (vn && v[vn - 1] == '\n') vn--;
        json_t *val = json_loadb(v, vn, JSON_DECODE_ANY, NULL);
        if (!val) val = json_stringn(v, vn);
        json_object_set_new(args, key, val);
        free(key);
        p = ve + 12;
    }
    return args;
}

/* A tool call's body (between the tags). Returns 1 and emits the call, or 0 when it is malformed. */
static int emit_tool_call(sv_reply *r, const char *body, size_t n) {
    while (n && is_space(*body)) { body++; n--; }
    while (n && is_space(body[n - 1])) n--;
    char *s = strndup(body, n), *name = NULL;
    json_t *args = NULL;
    if (*s == '{') {
        json_t *call = json_loads(s, 0, NULL);
        const char *nm = call ? json_string_value(json_object_get(call, "name")) : NULL;
        json_t *a = call ? json_object_get(call, "arguments") : NULL;
        if (nm) {
            name = strdup(nm);
            if (json_is_object(a)) args = json_incref(a);
            else if (json_is_string(a)) args = json_loads(json_string_value(a), 0, NULL);
            else if (!a) args = json_object();
        }
        json_decref(call);
    } else if (!strncmp(s, "<function=", 10)) {
        args = parse_xml_call(s, &name);
    }
    free(s);
    int ok = name && *name && json_is_object(args);
    if (ok) {
        char *arguments = json_dumps(args, JSON_COMPACT);
        sv_tool_call call = {.id = NULL, .name = name, .arguments = arguments};
        r->tool_calls++;
        r->emit(r->ctx, SV_EVENT_TOOL_CALL, NULL, 0, &call);
        free(arguments);
    }
    free(name);
    json_decref(args);
    return ok;
}

/* Stage 3: consumes what it can decide from r->parse. final: no more text will come. */
static void parse_run(sv_reply *r, int final) {
    text *t = &r->parse;
    for (;;) {
        switch (r->state) {
        case P_START: {
            size_t ws = 0;
            while (ws < t->n && is_space(t->p[ws])) ws++;
            size_t rest = t->n - ws;
            if (rest >= 7 && !memcmp(t->p + ws, "<think>", 7)) {
                text_drop(t, ws + 7);
                r->state = P_REASONING;
                r->reasoning_fresh = 1;
                continue;
            }
            if (!final && (rest == 0 || (rest < 7 && !memcmp("<think>", t->p + ws, rest)))) return;
            r->state = P_CONTENT;
            continue;
        }
        case P_REASONING: {
            char *end = strstr(t->p, "</think>");
            if (end) {
                size_t k = (size_t)(end - t->p);
                emit_reasoning(r, t->p, k - trailing_space(t->p, k));
                text_drop(t, k + 8);
                r->state = P_CONTENT_START;
                continue;
            }
            size_t keep = final ? 0 : partial_suffix(t->p, t->n, "</think>");
            size_t k = t->n - keep;
            k -= trailing_space(t->p, k); /* the newline before </think> is not reasoning */
            if (final) k = t->n - trailing_space(t->p, t->n);
            emit_reasoning(r, t->p, k);
            text_drop(t, final ? t->n : k);
            return;
        }
        case P_CONTENT_START: {
            size_t ws = 0;
            while (ws < t->n && is_space(t->p[ws])) ws++;
            text_drop(t, ws);
            if (!t->n) return;
            r->state = P_CONTENT;
            continue;
        }
        case P_CONTENT: {
            if (!r->parse_tools) {
                emit_text(r, SV_EVENT_CONTENT, t->p, t->n);
                text_drop(t, t->n);
                return;
            }
            char *tag = strstr(t->p, "<tool_call>");
            if (tag) {
                size_t k = (size_t)(tag - t->p);
                emit_text(r, SV_EVENT_CONTENT, t->p, k - trailing_space(t->p, k));
                text_drop(t, k + 11);
                r->state = P_TOOL;
                continue;
            }
            size_t k = t->n;
            if (!final) {
                k -= partial_suffix(t->p, t->n, "<tool_call>");
                k -= trailing_space(t->p, k); /* whitespace before a tool call is dropped */
            }
            emit_text(r, SV_EVENT_CONTENT, t->p, k);
            text_drop(t, k);
            return;
        }
        case P_TOOL: {
            char *end = strstr(t->p, "</tool_call>");
            if (end) {
                size_t k = (size_t)(end - t->p);
                if (!emit_tool_call(r, t->p, k)) {
                    emit_text(r, SV_EVENT_CONTENT, "<tool_call>", 11);
                    emit_text(r, SV_EVENT_CONTENT, t->p, k + 12);
                }
                text_drop(t, k + 12);
                r->state = P_CONTENT_START;
                continue;
            }
            if (final) {
                /* Unclosed: a complete call still counts (the model may stop right after it). */
                if (!t->n || !emit_tool_call(r, t->p, t->n)) {
                    emit_text(r, SV_EVENT_CONTENT, "<tool_call>", 11);
                    emit_text(r, SV_EVENT_CONTENT, t->p, t->n);
                }
                text_drop(t, t->n);
            }
            return;
        }
        }
    }
}

static void parse_add(sv_reply *r, const char *s, size_t n, int final) {
    text_add(&r->parse, s, n);
    parse_run(r, final);
}

void sv_reply_prefix(sv_reply *r, const char *s) { parse_add(r, s, strlen(s), 0); }

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
        parse_add(r, h->p, best, 0);
        text_drop(h, h->n);
        return 1;
    }
    size_t keep = 0;
    for (size_t i = 0; !final && i < r->n_stops; i++) {
        size_t k = *r->stops[i] ? partial_suffix(h->p, h->n, r->stops[i]) : 0;
        if (k > keep) keep = k;
    }
    parse_add(r, h->p, h->n - keep, 0);
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
    parse_run(r, 1);
}
