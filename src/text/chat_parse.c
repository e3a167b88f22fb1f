/* chat_parse.c: the incremental parser of generated text (chat.h): a three-state machine
 * (content, reasoning, tool call) that holds back any suffix that could be the start of a tag
 * until the next piece decides, so the events do not depend on how the text was split. Tool
 * calls are Qwen3's JSON body or Qwen3.5's <function=...><parameter=...> body. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "text/chat.h"
#include "text/chat_internal.h"

/* ---- parsing generated text ---- */
typedef enum pstate { P_CONTENT, P_REASONING, P_TOOL } pstate;

struct st_chat_parser {
    pstate state;
    st_sbuf pending;     /* text not yet decided (a possible tag start, held newlines) */
    st_sbuf tool;        /* the body of the open tool call */
    int at_start;     /* at the start of a reasoning or content block: leading newlines are dropped */
};

st_status st_chat_parser_new(int in_reasoning, st_chat_parser **out) {
    st_chat_parser *p = calloc(1, sizeof *p);
    if (!p) return st_fail(ST_ERR_NOMEM, "chat parser: out of memory");
    p->state = in_reasoning ? P_REASONING : P_CONTENT;
    p->at_start = 1;
    *out = p;
    return ST_OK;
}

void st_chat_parser_free(st_chat_parser *p) {
    if (!p) return;
    free(p->pending.p);
    free(p->tool.p);
    free(p);
}

static st_status emit_text(st_chat_parser *p, st_chat_part part, const char *s, size_t n, st_chat_event_fn fn, void *ctx) {
    if (p->at_start) {
        /* content after a closed block, and reasoning, start after their newlines */
        while (n && (s[0] == '\n' || (part == ST_CHAT_CONTENT && (s[0] == ' ' || s[0] == '\r' || s[0] == '\t')))) { s++; n--; }
        if (!n) return ST_OK;
        p->at_start = 0;
    }
    st_chat_event e = {part, s, n, NULL, NULL};
    return fn(ctx, &e);
}

/* Qwen3.5's <function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function> as the object
 * {"name": NAME, "arguments": {P: VALUE, ...}}. A value that reads as JSON (a number, true, an
 * object) is taken as such, anything else as a string. NULL if the form is broken. */
static json_t *xml_call_to_json(const char *body) {
    const char *name = body + 10, *gt = strchr(name, '>');
    if (!gt) return NULL;
    json_t *args = json_object(), *call = json_object();
    json_object_set_new(call, "name", json_stringn(name, (size_t)(gt - name)));
    const char *at = gt + 1;
    for (;;) {
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
        char *k = strndup(key, (size_t)(kend - key)), *v = strndup(val, (size_t)(vend - val));
        if (k && v) {
            json_t *j = json_loads(v, JSON_DECODE_ANY, NULL);
            json_object_set_new(args, k, j ? j : json_string(v));
        }
        free(k);
        free(v);
    }
    json_object_set_new(call, "arguments", args);
    return call;
}

static st_status emit_tool(st_chat_parser *p, st_chat_event_fn fn, void *ctx) {
    const char *body = p->tool.p ? p->tool.p : "";
    size_t n = p->tool.n;
    while (n && (body[0] == '\n' || body[0] == ' ')) { body++; n--; }
    while (n && (body[n - 1] == '\n' || body[n - 1] == ' ')) n--;
    char *copy = strndup(body, n);
    if (!copy) return st_fail(ST_ERR_NOMEM, "chat parser: out of memory");
    json_t *v = strncmp(copy, "<function=", 10) == 0 ? xml_call_to_json(copy) : json_loads(copy, 0, NULL);
    char *name = NULL, *args = NULL;
    if (json_is_object(v)) {
        json_t *nm = json_object_get(v, "name"), *ar = json_object_get(v, "arguments");
        if (json_is_string(nm)) name = strdup(json_string_value(nm));
        if (ar) {
            if (json_is_string(ar)) args = strdup(json_string_value(ar));
            else {
                st_sbuf b = {0};
                st_chat_json_out(&b, ar, 1);
                args = b.p;
            }
        }
    }
    st_chat_event e = {ST_CHAT_TOOL_CALL, copy, n, name, args};
    st_status s = fn(ctx, &e);
    json_decref(v);
    free(name);
    free(args);
    free(copy);
    p->tool.n = 0;
    return s;
}

/* The tags each state looks for. */
static const char *const content_tags[] = {"<think>", "<tool_call>"};
static const char *const reasoning_tags[] = {"</think>"};
static const char *const tool_tags[] = {"</tool_call>"};

/* The length of the longest suffix of s[0..n) that is a proper prefix of a tag. */
static size_t partial_tag(const char *s, size_t n, const char *const *tags, size_t n_tags) {
    size_t best = 0;
    for (size_t t = 0; t < n_tags; t++) {
        size_t tl = strlen(tags[t]);
        for (size_t k = tl - 1; k > best; k--)
            if (k <= n && memcmp(s + n - k, tags[t], k) == 0) { best = k; break; }
    }
    return best;
}

static const char *first_tag(const char *s, size_t n, const char *const *tags, size_t n_tags, size_t *which) {
    const char *best = NULL;
    for (size_t t = 0; t < n_tags; t++) {
        const char *h = memmem(s, n, tags[t], strlen(tags[t]));
        if (h && (!best || h < best)) { best = h; *which = t; }
    }
    return best;
}

/* Emits reasoning, holding back trailing newlines: they are dropped if </think> follows. */
static st_status emit_reasoning(st_chat_parser *p, const char *s, size_t n, size_t *held, st_chat_event_fn fn, void *ctx) {
    size_t keep = 0;
    while (keep < n && s[n - 1 - keep] == '\n') keep++;
    *held = keep;
    return emit_text(p, ST_CHAT_REASONING, s, n - keep, fn, ctx);
}

st_status st_chat_parser_feed(st_chat_parser *p, const char *text, size_t len, st_chat_event_fn fn, void *ctx) {
    st_sb_add(&p->pending, text, len);
    if (p->pending.oom) return st_fail(ST_ERR_NOMEM, "chat parser: out of memory");
    st_status s = ST_OK;
    for (;;) {
        const char *buf = p->pending.p ? p->pending.p : "";
        size_t n = p->pending.n, consumed = 0, which = 0;
        const char *const *tags = p->state == P_CONTENT ? content_tags : p->state == P_REASONING ? reasoning_tags : tool_tags;
        size_t n_tags = p->state == P_CONTENT ? 2 : 1;
        const char *hit = first_tag(buf, n, tags, n_tags, &which);
        if (hit) {
            size_t before = (size_t)(hit - buf);
            if (p->state == P_CONTENT) {
                s = emit_text(p, ST_CHAT_CONTENT, buf, before, fn, ctx);
                p->state = which == 0 ? P_REASONING : P_TOOL;
                p->at_start = which == 0;
            } else if (p->state == P_REASONING) {
                size_t held;
                s = emit_reasoning(p, buf, before, &held, fn, ctx);
                p->state = P_CONTENT;
                p->at_start = 1;
            } else {
                st_sb_add(&p->tool, buf, before);
                s = emit_tool(p, fn, ctx);
                p->state = P_CONTENT;
                p->at_start = 1;
            }
            consumed = before + strlen(tags[which]);
        } else {
            size_t hold = partial_tag(buf, n, tags, n_tags);
            size_t ready = n - hold;
            if (p->state == P_CONTENT) {
                s = emit_text(p, ST_CHAT_CONTENT, buf, ready, fn, ctx);
                consumed = ready;
            } else if (p->state == P_REASONING) {
                size_t held;
                s = emit_reasoning(p, buf, ready, &held, fn, ctx);
                consumed = ready - held;
            } else {
                st_sb_add(&p->tool, buf, ready);
                consumed = ready;
            }
        }
        if (p->pending.p) {
            memmove(p->pending.p, buf + consumed, n - consumed);
            p->pending.n = n - consumed;
            p->pending.p[p->pending.n] = 0;
        }
        if (s != ST_OK || !hit) break;
    }
    if (s == ST_OK && (p->pending.oom || p->tool.oom)) s = st_fail(ST_ERR_NOMEM, "chat parser: out of memory");
    return s;
}

st_status st_chat_parser_finish(st_chat_parser *p, st_chat_event_fn fn, void *ctx) {
    st_status s = ST_OK;
    const char *buf = p->pending.p ? p->pending.p : "";
    size_t n = p->pending.n;
    if (p->state == P_CONTENT) {
        s = emit_text(p, ST_CHAT_CONTENT, buf, n, fn, ctx);
    } else if (p->state == P_REASONING) {
        size_t held;
        s = emit_reasoning(p, buf, n, &held, fn, ctx);
    } else {
        st_sb_add(&p->tool, buf, n);
        char *copy = p->tool.p ? strndup(p->tool.p, p->tool.n) : strdup("");
        json_t *v = !copy ? NULL : strstr(copy, "<function=") ? (strstr(copy, "</function>") ? json_object() : NULL)
                                                               : json_loads(copy, 0, NULL);
        if (v) {
            s = emit_tool(p, fn, ctx);
        } else {
            /* an unfinished call is shown as the text it was */
            p->at_start = 0;
            s = emit_text(p, ST_CHAT_CONTENT, "<tool_call>", 11, fn, ctx);
            if (s == ST_OK && copy) s = emit_text(p, ST_CHAT_CONTENT, copy, strlen(copy), fn, ctx);
        }
        json_decref(v);
        free(copy);
    }
    p->pending.n = 0;
    p->tool.n = 0;
    p->state = P_CONTENT;
    p->at_start = 1;
    return s;
}
