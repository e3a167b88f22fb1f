/* chat_parse.c: the incremental parser of generated text (chat.h), the one both `strata chat` and
 * the server use: a four-state machine (start, reasoning, content, tool call) that holds back any
 * suffix that could be the start of a tag, and whitespace whose fate the next text decides, so the
 * events do not depend on how the text was split into pieces.
 *
 *   start      leading whitespace, then "<think>" opens reasoning (only here: a <think> later in
 *              the reply is text, so an answer may quote the tag); anything else is content.
 *   reasoning  until "</think>"; leading newlines and the whitespace before the tag are dropped.
 *   content    leading whitespace dropped; with tools, until "<tool_call>", and the whitespace
 *              before a tool call is dropped too (so the content reads "Sure." not "Sure.\n").
 *   tool call  until "</tool_call>": Qwen3's JSON body {"name", "arguments"} or Qwen3.5's
 *              <function=NAME><parameter=K>V</parameter>...</function>; a body that is neither (no
 *              name, arguments not an object) is given back as the content it was, tags and all. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "text/chat.h"
#include "text/chat_internal.h"

typedef enum pstate { P_START, P_REASONING, P_CONTENT, P_TOOL } pstate;

struct st_chat_parser {
    st_chat_parser_options o;
    pstate state;
    st_sbuf pending;  /* text not yet decided (a possible tag start, held whitespace) */
    st_sbuf tool;     /* the body of the open tool call */
    int at_start;     /* at the start of a reasoning or content block: leading whitespace is dropped */
};

static const char think_open[] = "<think>", think_close[] = "</think>";
static const char tool_open[] = "<tool_call>", tool_close[] = "</tool_call>";

st_status st_chat_parser_new_with(const st_chat_parser_options *o, st_chat_parser **out) {
    *out = NULL;
    st_chat_parser *p = calloc(1, sizeof *p);
    if (!p) return st_fail(ST_ERR_NOMEM, "chat parser: out of memory");
    p->o = *o;
    p->state = o->in_reasoning ? P_REASONING : o->reasoning ? P_START : P_CONTENT;
    p->at_start = 1;
    *out = p;
    return ST_OK;
}

st_status st_chat_parser_new(int in_reasoning, st_chat_parser **out) {
    st_chat_parser_options o = {.in_reasoning = in_reasoning, .reasoning = 1, .tools = 1};
    return st_chat_parser_new_with(&o, out);
}

void st_chat_parser_free(st_chat_parser *p) {
    if (!p) return;
    free(p->pending.p);
    free(p->tool.p);
    free(p);
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static size_t trailing_space(const char *s, size_t n) {
    size_t k = 0;
    while (k < n && is_space(s[n - 1 - k])) k++;
    return k;
}

static st_status emit_text(st_chat_parser *p, st_chat_part part, const char *s, size_t n, st_chat_event_fn fn, void *ctx) {
    if (p->at_start) {
        /* reasoning starts after its newlines, content after any whitespace */
        while (n && (s[0] == '\n' || s[0] == '\r' || (part == ST_CHAT_CONTENT && is_space(s[0])))) { s++; n--; }
        if (!n) return ST_OK;
        p->at_start = 0;
    }
    st_chat_event e = {part, s, n, NULL, NULL};
    return fn(ctx, &e);
}

/* Qwen3.5's <function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function> as its name and
 * arguments object. A value that reads as JSON (a number, true, an object) is taken as such,
 * anything else as a string. NULL if the form is broken. */
static json_t *xml_call_args(const char *body, char **name) {
    const char *nm = body + 10, *gt = strchr(nm, '>');
    if (!gt) return NULL;
    *name = strndup(nm, (size_t)(gt - nm));
    json_t *args = json_object();
    for (const char *at = gt + 1;;) {
        const char *open = strstr(at, "<parameter=");
        if (!open) break;
        const char *key = open + 11, *kend = strchr(key, '>');
        if (!kend) break;
        const char *val = kend + 1;
        if (*val == '\n') val++;
        const char *vend = strstr(val, "</parameter>");
        if (!vend) break;
        at = vend + 12;
        if (vend > val && vend[-1] == '\n') vend--;
        char *k = strndup(key, (size_t)(kend - key));
        json_t *j = json_loadb(val, (size_t)(vend - val), JSON_DECODE_ANY, NULL);
        if (k) json_object_set_new(args, k, j ? j : json_stringn(val, (size_t)(vend - val)));
        else json_decref(j);
        free(k);
    }
    return args;
}

/* Qwen3's {"name": NAME, "arguments": {...}} (arguments may also be JSON text of an object, or
 * absent for none). NULL unless it is that. */
static json_t *json_call_args(const char *body, char **name) {
    json_t *call = json_loads(body, 0, NULL), *args = NULL;
    const char *nm = json_string_value(json_object_get(call, "name"));
    json_t *a = json_object_get(call, "arguments");
    if (nm) {
        *name = strdup(nm);
        if (json_is_object(a)) args = json_incref(a);
        else if (json_is_string(a)) args = json_loads(json_string_value(a), 0, NULL);
        else if (!a) args = json_object();
    }
    json_decref(call);
    return args;
}

/* A tool call's body (between the tags). Emits the call and returns 1, or returns 0 when the body
 * is not a call (nothing emitted). */
static int emit_tool(const char *body, size_t n, st_chat_event_fn fn, void *ctx, st_status *s) {
    while (n && is_space(*body)) { body++; n--; }
    while (n && is_space(body[n - 1])) n--;
    char *text = strndup(body, n), *name = NULL;
    if (!text) { *s = st_fail(ST_ERR_NOMEM, "chat parser: out of memory"); return 1; }
    json_t *args = !strncmp(text, "<function=", 10) ? xml_call_args(text, &name) : *text == '{' ? json_call_args(text, &name) : NULL;
    int ok = name && *name && json_is_object(args);
    if (ok) {
        st_sbuf b = {0};
        st_chat_json_out(&b, args, 1);
        st_chat_event e = {ST_CHAT_TOOL_CALL, text, n, name, b.p ? b.p : "{}"};
        *s = b.oom ? st_fail(ST_ERR_NOMEM, "chat parser: out of memory") : fn(ctx, &e);
        free(b.p);
    }
    json_decref(args);
    free(name);
    free(text);
    return ok;
}

/* The length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t partial_tag(const char *s, size_t n, const char *tag) {
    size_t t = strlen(tag);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

/* One decision on the pending text; returns how much of it was consumed and sets *more when the
 * state changed (so the rest is looked at again). final: no more text will come. */
static size_t step(st_chat_parser *p, const char *buf, size_t n, int final, int *more, st_chat_event_fn fn, void *ctx, st_status *s) {
    *more = 0;
    switch (p->state) {
    case P_START: {
        size_t ws = 0;
        while (ws < n && is_space(buf[ws])) ws++;
        size_t rest = n - ws;
        if (rest >= 7 && !memcmp(buf + ws, think_open, 7)) {
            p->state = P_REASONING;
            p->at_start = 1;
            *more = 1;
            return ws + 7;
        }
        if (!final && (rest == 0 || (rest < 7 && !memcmp(think_open, buf + ws, rest)))) return 0;
        p->state = P_CONTENT;
        p->at_start = 1;
        *more = 1;
        return 0;
    }
    case P_REASONING: {
        const char *end = memmem(buf, n, think_close, 8);
        if (end) {
            size_t k = (size_t)(end - buf);
            *s = emit_text(p, ST_CHAT_REASONING, buf, k - trailing_space(buf, k), fn, ctx);
            p->state = P_CONTENT;
            p->at_start = 1;
            *more = 1;
            return k + 8;
        }
        size_t k = final ? n : n - partial_tag(buf, n, think_close);
        size_t ws = trailing_space(buf, k); /* the whitespace before </think> is not reasoning */
        *s = emit_text(p, ST_CHAT_REASONING, buf, k - ws, fn, ctx);
        return final ? n : k - ws;
    }
    case P_CONTENT: {
        if (!p->o.tools) {
            *s = emit_text(p, ST_CHAT_CONTENT, buf, n, fn, ctx);
            return n;
        }
        const char *tag = memmem(buf, n, tool_open, 11);
        if (tag) {
            size_t k = (size_t)(tag - buf);
            *s = emit_text(p, ST_CHAT_CONTENT, buf, k - trailing_space(buf, k), fn, ctx);
            p->state = P_TOOL;
            p->tool.n = 0;
            *more = 1;
            return k + 11;
        }
        size_t k = n;
        if (!final) {
            k -= partial_tag(buf, n, tool_open);
            k -= trailing_space(buf, k); /* dropped if a tool call follows */
        }
        *s = emit_text(p, ST_CHAT_CONTENT, buf, k, fn, ctx);
        return k;
    }
    case P_TOOL: {
        const char *end = memmem(buf, n, tool_close, 12);
        if (!end && !final) {
            /* keep only what may begin the closing tag pending; the rest is body */
            size_t k = n - partial_tag(buf, n, tool_close);
            st_sb_add(&p->tool, buf, k);
            return k;
        }
        size_t k = end ? (size_t)(end - buf) : n;
        st_sb_add(&p->tool, buf, k);
        if (p->tool.oom) { *s = st_fail(ST_ERR_NOMEM, "chat parser: out of memory"); return n; }
        const char *body = p->tool.p ? p->tool.p : "";
        if (!emit_tool(body, p->tool.n, fn, ctx, s)) {
            /* not a call: the text it was, tags included (an unclosed one without its close) */
            p->at_start = 0;
            *s = emit_text(p, ST_CHAT_CONTENT, tool_open, 11, fn, ctx);
            if (*s == ST_OK) *s = emit_text(p, ST_CHAT_CONTENT, body, p->tool.n, fn, ctx);
            if (*s == ST_OK && end) *s = emit_text(p, ST_CHAT_CONTENT, tool_close, 12, fn, ctx);
        }
        p->tool.n = 0;
        p->state = P_CONTENT;
        p->at_start = 1;
        *more = end != NULL;
        return end ? k + 12 : n;
    }
    }
    return n;
}

static st_status run(st_chat_parser *p, int final, st_chat_event_fn fn, void *ctx) {
    st_status s = ST_OK;
    int more = 1;
    while (more && s == ST_OK) {
        const char *buf = p->pending.p ? p->pending.p : "";
        size_t n = p->pending.n;
        size_t used = step(p, buf, n, final, &more, fn, ctx, &s);
        if (used && p->pending.p) {
            memmove(p->pending.p, buf + used, n - used);
            p->pending.n = n - used;
            p->pending.p[p->pending.n] = 0;
        }
    }
    if (s == ST_OK && (p->pending.oom || p->tool.oom)) s = st_fail(ST_ERR_NOMEM, "chat parser: out of memory");
    return s;
}

st_status st_chat_parser_feed(st_chat_parser *p, const char *text, size_t len, st_chat_event_fn fn, void *ctx) {
    st_sb_add(&p->pending, text, len);
    if (p->pending.oom) return st_fail(ST_ERR_NOMEM, "chat parser: out of memory");
    return run(p, 0, fn, ctx);
}

st_status st_chat_parser_finish(st_chat_parser *p, st_chat_event_fn fn, void *ctx) {
    st_status s = run(p, 1, fn, ctx);
    p->pending.n = 0;
    p->tool.n = 0;
    p->state = p->o.reasoning ? P_START : P_CONTENT;
    p->at_start = 1;
    return s;
}
