/* chat.c: Qwen3's chat template in C, and the incremental parser of generated text (chat.h).
 *
 * The renderer follows the Jinja template line by line (the template is quoted in
 * tests/data/tokenizer/gen_chat_cases.py's output file); Python string methods it uses are
 * spelled out: split('</think>')[-1] is the text after the last '</think>', lstrip('\n') strips
 * newlines only, and so on. The parser is a three-state machine (content, reasoning, tool call)
 * that holds back any suffix that could be the start of a tag until the next piece decides. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "text/chat.h"
#include "text/utf8.h"

/* ---- a growing string ---- */
typedef struct sbuf { char *p; size_t n, cap; int oom; } sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

/* ---- tojson: Python's json.dumps(ensure_ascii=False) ---- */
static void json_string_out(sbuf *b, const char *s, size_t n) {
    sb_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        switch (c) {
        case '"': sb_add(b, "\\\"", 2); break;
        case '\\': sb_add(b, "\\\\", 2); break;
        case '\n': sb_add(b, "\\n", 2); break;
        case '\r': sb_add(b, "\\r", 2); break;
        case '\t': sb_add(b, "\\t", 2); break;
        case '\b': sb_add(b, "\\b", 2); break;
        case '\f': sb_add(b, "\\f", 2); break;
        default:
            if (c < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", c); sb_add(b, esc, 6); }
            else sb_add(b, (const char *)&c, 1);
        }
    }
    sb_add(b, "\"", 1);
}

/* Python's float repr: the shortest digits that read back, with ".0" on integral values. */
static void json_real_out(sbuf *b, double v) {
    char s[40];
    if (isnan(v)) { sb_str(b, "NaN"); return; }
    if (isinf(v)) { sb_str(b, v > 0 ? "Infinity" : "-Infinity"); return; }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v) break;
    }
    sb_str(b, s);
    if (!strpbrk(s, ".eEn")) sb_str(b, ".0");
}

static void json_out(sbuf *b, const json_t *v, int compact) {
    const char *comma = compact ? "," : ", ", *colon = compact ? ":" : ": ";
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        sb_add(b, "{", 1);
        const char *key;
        json_t *val;
        int first = 1;
        json_object_foreach((json_t *)v, key, val) {
            if (!first) sb_str(b, comma);
            first = 0;
            json_string_out(b, key, strlen(key));
            sb_str(b, colon);
            json_out(b, val, compact);
        }
        sb_add(b, "}", 1);
        break;
    }
    case JSON_ARRAY: {
        sb_add(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) sb_str(b, comma);
            json_out(b, json_array_get(v, i), compact);
        }
        sb_add(b, "]", 1);
        break;
    }
    case JSON_STRING: json_string_out(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: {
        char s[32];
        snprintf(s, sizeof s, "%lld", (long long)json_integer_value(v));
        sb_str(b, s);
        break;
    }
    case JSON_REAL: json_real_out(b, json_real_value(v)); break;
    case JSON_TRUE: sb_str(b, "true"); break;
    case JSON_FALSE: sb_str(b, "false"); break;
    case JSON_NULL: sb_str(b, "null"); break;
    }
}

static json_t *parse_json(const char *text) {
    return json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

st_status st_chat_tojson(const char *json_text, char **out) {
    *out = NULL;
    json_t *v = parse_json(json_text);
    if (!v) return st_fail(ST_ERR_INVALID, "chat: not JSON: %.60s", json_text);
    sbuf b = {0};
    json_out(&b, v, 0);
    json_decref(v);
    if (b.oom || !b.p) { free(b.p); return st_fail(ST_ERR_NOMEM, "chat: out of memory"); }
    *out = b.p;
    return ST_OK;
}

/* ---- rendering ---- */
static const char *role_name(st_chat_role r) {
    switch (r) {
    case ST_ROLE_SYSTEM: return "system";
    case ST_ROLE_USER: return "user";
    case ST_ROLE_ASSISTANT: return "assistant";
    case ST_ROLE_TOOL: return "tool";
    }
    return NULL;
}

static int starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static int ends_with(const char *s, const char *p) {
    size_t n = strlen(s), k = strlen(p);
    return n >= k && memcmp(s + n - k, p, k) == 0;
}

/* a span of a string */
typedef struct span { const char *p; size_t n; } span;

static span lstrip_nl(span s) { while (s.n && s.p[0] == '\n') { s.p++; s.n--; } return s; }
static span rstrip_nl(span s) { while (s.n && s.p[s.n - 1] == '\n') s.n--; return s; }

static const char *find_last(const char *s, const char *needle) {
    const char *last = NULL;
    for (const char *h = strstr(s, needle); h; h = strstr(h + 1, needle)) last = h;
    return last;
}

/* The assistant turn's (content, reasoning) as the template derives them. */
static void split_reasoning(const st_chat_message *m, span *content, span *reasoning) {
    const char *c = m->content ? m->content : "";
    *content = (span){c, strlen(c)};
    *reasoning = (span){"", 0};
    if (m->reasoning_content) {
        *reasoning = (span){m->reasoning_content, strlen(m->reasoning_content)};
        return;
    }
    const char *close = strstr(c, "</think>");
    if (!close) return;
    const char *last_close = find_last(c, "</think>");
    const char *after = last_close + 8;
    *content = lstrip_nl((span){after, strlen(after)});
    /* split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
    span before = rstrip_nl((span){c, (size_t)(close - c)});
    const char *open = NULL;
    for (const char *h = c; (h = strstr(h, "<think>")) && h + 7 <= before.p + before.n; h++) open = h;
    if (open) before = (span){open + 7, (size_t)(before.p + before.n - (open + 7))};
    *reasoning = lstrip_nl(before);
}

static st_status render_tool_call(sbuf *b, const st_chat_tool_call *tc) {
    sb_str(b, "<tool_call>\n{\"name\": \"");
    sb_str(b, tc->name ? tc->name : "");
    sb_str(b, "\", \"arguments\": ");
    const char *args = tc->arguments ? tc->arguments : "{}";
    json_t *v = tc->raw_arguments ? NULL : parse_json(args);
    if (v) { json_out(b, v, 0); json_decref(v); }
    else sb_str(b, args);
    sb_str(b, "}\n</tool_call>");
    return ST_OK;
}

static st_status render_tools(sbuf *b, const st_chat_message *msgs, size_t n, const st_chat_options *o) {
    sb_str(b, "<|im_start|>system\n");
    if (n > 0 && msgs[0].role == ST_ROLE_SYSTEM) {
        sb_str(b, msgs[0].content ? msgs[0].content : "");
        sb_str(b, "\n\n");
    }
    sb_str(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
              "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    for (size_t i = 0; i < o->n_tools; i++) {
        json_t *v = parse_json(o->tools[i]);
        if (!v) return st_fail(ST_ERR_INVALID, "chat: tool definition %zu is not JSON: %.60s", i, o->tools[i]);
        sb_str(b, "\n");
        json_out(b, v, 0);
        json_decref(v);
    }
    sb_str(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
              "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
              "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n");
    return ST_OK;
}

/* The index of the last user turn that is a real query, not a wrapped tool response. */
static size_t last_query_index(const st_chat_message *msgs, size_t n) {
    for (size_t k = n; k-- > 0;) {
        const char *c = msgs[k].content ? msgs[k].content : "";
        if (msgs[k].role == ST_ROLE_USER && !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>")))
            return k;
    }
    return n - 1;
}

static void render_assistant(sbuf *b, const st_chat_message *msgs, size_t n, size_t i, size_t last_query) {
    const st_chat_message *m = &msgs[i];
    span content, reasoning;
    split_reasoning(m, &content, &reasoning);
    sb_str(b, "<|im_start|>assistant\n");
    if (i > last_query && (i == n - 1 || reasoning.n > 0)) {
        span r = rstrip_nl(lstrip_nl(reasoning));
        sb_str(b, "<think>\n");
        sb_add(b, r.p, r.n);
        sb_str(b, "\n</think>\n\n");
        content = lstrip_nl(content);
    }
    sb_add(b, content.p, content.n);
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        if ((k == 0 && content.n > 0) || k > 0) sb_str(b, "\n");
        render_tool_call(b, &m->tool_calls[k]);
    }
    sb_str(b, "<|im_end|>\n");
}

/* ---- Qwen3.5 ---- */

/* Python's str.isspace() code points: what Jinja's |trim strips */
static int py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static span py_trim(span s) {
    while (s.n) {
        uint32_t cp;
        size_t k = st_utf8_decode((const uint8_t *)s.p, s.n, &cp);
        if (cp == UINT32_MAX || !py_space(cp)) break;
        s.p += k; s.n -= k;
    }
    while (s.n) {
        size_t start = s.n - 1;
        while (start > 0 && ((unsigned char)s.p[start] & 0xC0) == 0x80 && s.n - start < 4) start--;
        uint32_t cp;
        size_t k = st_utf8_decode((const uint8_t *)s.p + start, s.n - start, &cp);
        if (cp == UINT32_MAX || start + k != s.n || !py_space(cp)) break;
        s.n = start;
    }
    return s;
}

static span trimmed(const char *c) {
    c = c ? c : "";
    return py_trim((span){c, strlen(c)});
}

/* Python's str() of a JSON value, as the template's `args_value | string` prints a scalar;
 * objects and arrays go through tojson. */
static void py_str_out(sbuf *b, const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_STRING: sb_add(b, json_string_value(v), json_string_length(v)); break;
    case JSON_TRUE: sb_str(b, "True"); break;
    case JSON_FALSE: sb_str(b, "False"); break;
    case JSON_NULL: sb_str(b, "None"); break;
    default: json_out(b, v, 0); break;
    }
}

static void render_xml_call(sbuf *b, const st_chat_tool_call *tc, int first, int has_content) {
    sb_str(b, first ? (has_content ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=") : "\n<tool_call>\n<function=");
    sb_str(b, tc->name ? tc->name : "");
    sb_str(b, ">\n");
    json_t *args = tc->arguments ? parse_json(tc->arguments) : NULL;
    if (json_is_object(args)) {
        const char *key;
        json_t *val;
        json_object_foreach(args, key, val) {
            sb_str(b, "<parameter=");
            sb_str(b, key);
            sb_str(b, ">\n");
            py_str_out(b, val);
            sb_str(b, "\n</parameter>\n");
        }
    }
    json_decref(args);
    sb_str(b, "</function>\n</tool_call>");
}

static st_status render_qwen35(sbuf *b, const st_chat_message *msgs, size_t n, const st_chat_options *o) {
    if (n == 0) return st_fail(ST_ERR_INVALID, "chat: no messages");
    if (o->n_tools > 0) {
        sb_str(b, "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
        for (size_t i = 0; i < o->n_tools; i++) {
            json_t *v = parse_json(o->tools[i]);
            if (!v) return st_fail(ST_ERR_INVALID, "chat: tool definition %zu is not JSON: %.60s", i, o->tools[i]);
            sb_str(b, "\n");
            json_out(b, v, 0);
            json_decref(v);
        }
        sb_str(b, "\n</tools>");
        sb_str(b, "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
                  "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
                  "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
                  "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
                  "- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
                  "- Required parameters MUST be specified\n"
                  "- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n"
                  "- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n"
                  "</IMPORTANT>");
        if (msgs[0].role == ST_ROLE_SYSTEM) {
            span c = trimmed(msgs[0].content);
            if (c.n) { sb_str(b, "\n\n"); sb_add(b, c.p, c.n); }
        }
        sb_str(b, "<|im_end|>\n");
    } else if (msgs[0].role == ST_ROLE_SYSTEM) {
        span c = trimmed(msgs[0].content);
        sb_str(b, "<|im_start|>system\n");
        sb_add(b, c.p, c.n);
        sb_str(b, "<|im_end|>\n");
    }
    size_t last_query = n;
    for (size_t k = n; k-- > 0;) {
        if (msgs[k].role != ST_ROLE_USER) continue;
        span c = trimmed(msgs[k].content);
        int wrapped = c.n >= 31 && memcmp(c.p, "<tool_response>", 15) == 0 && memcmp(c.p + c.n - 16, "</tool_response>", 16) == 0;
        if (!wrapped) { last_query = k; break; }
    }
    if (last_query == n) return st_fail(ST_ERR_INVALID, "chat: no user query found in the messages (the Qwen3.5 template requires one)");
    for (size_t i = 0; i < n; i++) {
        const st_chat_message *m = &msgs[i];
        span c = trimmed(m->content);
        if (m->role == ST_ROLE_SYSTEM) {
            if (i > 0) return st_fail(ST_ERR_INVALID, "chat: message %zu is a system message; the Qwen3.5 template allows one only at the beginning", i);
        } else if (m->role == ST_ROLE_USER) {
            sb_str(b, "<|im_start|>user\n");
            sb_add(b, c.p, c.n);
            sb_str(b, "<|im_end|>\n");
        } else if (m->role == ST_ROLE_ASSISTANT) {
            span reasoning = {"", 0};
            if (m->reasoning_content) {
                reasoning = (span){m->reasoning_content, strlen(m->reasoning_content)};
            } else {
                char *cs = strndup(c.p, c.n);
                if (!cs) return st_fail(ST_ERR_NOMEM, "chat: out of memory");
                const char *close = strstr(cs, "</think>");
                if (close) {
                    st_chat_message tmp = *m;
                    tmp.content = cs;
                    span content2, r2;
                    split_reasoning(&tmp, &content2, &r2);
                    /* spans into cs: rebase them onto the trimmed content */
                    reasoning = (span){c.p + (r2.p - cs), r2.n};
                    c = (span){c.p + (content2.p - cs), content2.n};
                }
                free(cs);
            }
            reasoning = py_trim(reasoning);
            sb_str(b, "<|im_start|>assistant\n");
            if (i > last_query) {
                sb_str(b, "<think>\n");
                sb_add(b, reasoning.p, reasoning.n);
                sb_str(b, "\n</think>\n\n");
            }
            sb_add(b, c.p, c.n);
            for (size_t k = 0; k < m->n_tool_calls; k++) {
                if (m->tool_calls[k].raw_arguments)
                    return st_fail(ST_ERR_INVALID, "chat: message %zu: the Qwen3.5 template needs tool-call arguments as an object, not a string", i);
                render_xml_call(b, &m->tool_calls[k], k == 0, py_trim(c).n > 0);
            }
            sb_str(b, "<|im_end|>\n");
        } else {
            if (i > 0 && msgs[i - 1].role != ST_ROLE_TOOL) sb_str(b, "<|im_start|>user");
            sb_str(b, "\n<tool_response>\n");
            sb_add(b, c.p, c.n);
            sb_str(b, "\n</tool_response>");
            if (i == n - 1 || msgs[i + 1].role != ST_ROLE_TOOL) sb_str(b, "<|im_end|>\n");
        }
    }
    if (o->add_generation_prompt) {
        sb_str(b, "<|im_start|>assistant\n");
        sb_str(b, o->enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
    }
    return ST_OK;
}

st_chat_style st_chat_style_detect(const char *chat_template, int *known) {
    const char *t = chat_template ? chat_template : "";
    if (known) *known = strstr(t, "<|im_start|>") != NULL;
    return strstr(t, "<function=") && strstr(t, "<parameter=") ? ST_CHAT_QWEN35 : ST_CHAT_QWEN3;
}

st_status st_chat_render(const st_chat_message *msgs, size_t n, const st_chat_options *o, char **out, size_t *len) {
    *out = NULL;
    st_chat_options none = {0};
    if (!o) { none.enable_thinking = 1; o = &none; }
    for (size_t i = 0; i < n; i++)
        if (!role_name(msgs[i].role)) return st_fail(ST_ERR_INVALID, "chat: message %zu has role %d", i, (int)msgs[i].role);
    sbuf b = {0};
    st_status s = ST_OK;
    if (o->style == ST_CHAT_QWEN35) {
        s = render_qwen35(&b, msgs, n, o);
        n = 0; /* rendered */
    } else if (o->n_tools > 0) {
        s = render_tools(&b, msgs, n, o);
    } else if (n > 0 && msgs[0].role == ST_ROLE_SYSTEM) {
        sb_str(&b, "<|im_start|>system\n");
        sb_str(&b, msgs[0].content ? msgs[0].content : "");
        sb_str(&b, "<|im_end|>\n");
    }
    size_t last_query = n > 0 ? last_query_index(msgs, n) : 0;
    for (size_t i = 0; i < n && s == ST_OK; i++) {
        const st_chat_message *m = &msgs[i];
        const char *c = m->content ? m->content : "";
        if (m->role == ST_ROLE_USER || (m->role == ST_ROLE_SYSTEM && i > 0)) {
            sb_str(&b, "<|im_start|>");
            sb_str(&b, role_name(m->role));
            sb_str(&b, "\n");
            sb_str(&b, c);
            sb_str(&b, "<|im_end|>\n");
        } else if (m->role == ST_ROLE_ASSISTANT) {
            render_assistant(&b, msgs, n, i, last_query);
        } else if (m->role == ST_ROLE_TOOL) {
            if (i == 0 || msgs[i - 1].role != ST_ROLE_TOOL) sb_str(&b, "<|im_start|>user");
            sb_str(&b, "\n<tool_response>\n");
            sb_str(&b, c);
            sb_str(&b, "\n</tool_response>");
            if (i == n - 1 || msgs[i + 1].role != ST_ROLE_TOOL) sb_str(&b, "<|im_end|>\n");
        }
    }
    if (s == ST_OK && o->add_generation_prompt && o->style != ST_CHAT_QWEN35) {
        sb_str(&b, "<|im_start|>assistant\n");
        if (!o->enable_thinking) sb_str(&b, "<think>\n\n</think>\n\n");
    }
    if (s == ST_OK && !b.p) sb_add(&b, "", 0);
    if (s == ST_OK && b.oom) s = st_fail(ST_ERR_NOMEM, "chat: out of memory");
    if (s != ST_OK) { free(b.p); return s; }
    *out = b.p;
    if (len) *len = b.n;
    return ST_OK;
}

/* ---- parsing generated text ---- */
typedef enum pstate { P_CONTENT, P_REASONING, P_TOOL } pstate;

struct st_chat_parser {
    pstate state;
    sbuf pending;     /* text not yet decided (a possible tag start, held newlines) */
    sbuf tool;        /* the body of the open tool call */
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
                sbuf b = {0};
                json_out(&b, ar, 1);
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
    sb_add(&p->pending, text, len);
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
                sb_add(&p->tool, buf, before);
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
                sb_add(&p->tool, buf, ready);
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
        sb_add(&p->tool, buf, n);
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
