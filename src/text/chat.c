/* chat.c: the Qwen3 and Qwen3.5 chat templates in C (chat.h); the parser of generated text is
 * in chat_parse.c.
 *
 * The renderer follows each Jinja template line by line (the templates are quoted in
 * tests/data/tokenizer/qwen3{,5}_chat_cases.json); the Python string methods they use are spelled out:
 * split('</think>')[-1] is the text after the last '</think>', lstrip('\n') strips newlines only,
 * |trim strips what Python's str.isspace() calls space, and so on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "text/chat.h"
#include "text/chat_internal.h"
#include "text/utf8.h"

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

static st_status render_tool_call(st_sbuf *b, const st_chat_tool_call *tc) {
    st_sb_str(b, "<tool_call>\n{\"name\": \"");
    st_sb_str(b, tc->name ? tc->name : "");
    st_sb_str(b, "\", \"arguments\": ");
    const char *args = tc->arguments ? tc->arguments : "{}";
    json_t *v = tc->raw_arguments ? NULL : st_chat_parse_json(args);
    if (v) { st_chat_json_out(b, v, 0); json_decref(v); }
    else st_sb_str(b, args);
    st_sb_str(b, "}\n</tool_call>");
    return ST_OK;
}

static st_status render_tools(st_sbuf *b, const st_chat_message *msgs, size_t n, const st_chat_options *o) {
    st_sb_str(b, "<|im_start|>system\n");
    if (n > 0 && msgs[0].role == ST_ROLE_SYSTEM) {
        st_sb_str(b, msgs[0].content ? msgs[0].content : "");
        st_sb_str(b, "\n\n");
    }
    st_sb_str(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
              "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    for (size_t i = 0; i < o->n_tools; i++) {
        json_t *v = st_chat_parse_json(o->tools[i]);
        if (!v) return st_fail(ST_ERR_INVALID, "chat: tool definition %zu is not JSON: %.60s", i, o->tools[i]);
        st_sb_str(b, "\n");
        st_chat_json_out(b, v, 0);
        json_decref(v);
    }
    st_sb_str(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
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

static void render_assistant(st_sbuf *b, const st_chat_message *msgs, size_t n, size_t i, size_t last_query) {
    const st_chat_message *m = &msgs[i];
    span content, reasoning;
    split_reasoning(m, &content, &reasoning);
    st_sb_str(b, "<|im_start|>assistant\n");
    if (i > last_query && (i == n - 1 || reasoning.n > 0)) {
        span r = rstrip_nl(lstrip_nl(reasoning));
        st_sb_str(b, "<think>\n");
        st_sb_add(b, r.p, r.n);
        st_sb_str(b, "\n</think>\n\n");
        content = lstrip_nl(content);
    }
    st_sb_add(b, content.p, content.n);
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        if ((k == 0 && content.n > 0) || k > 0) st_sb_str(b, "\n");
        render_tool_call(b, &m->tool_calls[k]);
    }
    st_sb_str(b, "<|im_end|>\n");
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
static void py_str_out(st_sbuf *b, const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_STRING: st_sb_add(b, json_string_value(v), json_string_length(v)); break;
    case JSON_TRUE: st_sb_str(b, "True"); break;
    case JSON_FALSE: st_sb_str(b, "False"); break;
    case JSON_NULL: st_sb_str(b, "None"); break;
    default: st_chat_json_out(b, v, 0); break;
    }
}

static void render_xml_call(st_sbuf *b, const st_chat_tool_call *tc, int first, int has_content) {
    st_sb_str(b, first ? (has_content ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=") : "\n<tool_call>\n<function=");
    st_sb_str(b, tc->name ? tc->name : "");
    st_sb_str(b, ">\n");
    json_t *args = tc->arguments ? st_chat_parse_json(tc->arguments) : NULL;
    if (json_is_object(args)) {
        const char *key;
        json_t *val;
        json_object_foreach(args, key, val) {
            st_sb_str(b, "<parameter=");
            st_sb_str(b, key);
            st_sb_str(b, ">\n");
            py_str_out(b, val);
            st_sb_str(b, "\n</parameter>\n");
        }
    }
    json_decref(args);
    st_sb_str(b, "</function>\n</tool_call>");
}

static st_status render_qwen35(st_sbuf *b, const st_chat_message *msgs, size_t n, const st_chat_options *o) {
    if (n == 0) return st_fail(ST_ERR_INVALID, "chat: no messages");
    if (o->n_tools > 0) {
        st_sb_str(b, "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
        for (size_t i = 0; i < o->n_tools; i++) {
            json_t *v = st_chat_parse_json(o->tools[i]);
            if (!v) return st_fail(ST_ERR_INVALID, "chat: tool definition %zu is not JSON: %.60s", i, o->tools[i]);
            st_sb_str(b, "\n");
            st_chat_json_out(b, v, 0);
            json_decref(v);
        }
        st_sb_str(b, "\n</tools>");
        st_sb_str(b, "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
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
            if (c.n) { st_sb_str(b, "\n\n"); st_sb_add(b, c.p, c.n); }
        }
        st_sb_str(b, "<|im_end|>\n");
    } else if (msgs[0].role == ST_ROLE_SYSTEM) {
        span c = trimmed(msgs[0].content);
        st_sb_str(b, "<|im_start|>system\n");
        st_sb_add(b, c.p, c.n);
        st_sb_str(b, "<|im_end|>\n");
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
            st_sb_str(b, "<|im_start|>user\n");
            st_sb_add(b, c.p, c.n);
            st_sb_str(b, "<|im_end|>\n");
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
            st_sb_str(b, "<|im_start|>assistant\n");
            if (i > last_query) {
                st_sb_str(b, "<think>\n");
                st_sb_add(b, reasoning.p, reasoning.n);
                st_sb_str(b, "\n</think>\n\n");
            }
            st_sb_add(b, c.p, c.n);
            for (size_t k = 0; k < m->n_tool_calls; k++) {
                if (m->tool_calls[k].raw_arguments)
                    return st_fail(ST_ERR_INVALID, "chat: message %zu: the Qwen3.5 template needs tool-call arguments as an object, not a string", i);
                render_xml_call(b, &m->tool_calls[k], k == 0, py_trim(c).n > 0);
            }
            st_sb_str(b, "<|im_end|>\n");
        } else {
            if (i > 0 && msgs[i - 1].role != ST_ROLE_TOOL) st_sb_str(b, "<|im_start|>user");
            st_sb_str(b, "\n<tool_response>\n");
            st_sb_add(b, c.p, c.n);
            st_sb_str(b, "\n</tool_response>");
            if (i == n - 1 || msgs[i + 1].role != ST_ROLE_TOOL) st_sb_str(b, "<|im_end|>\n");
        }
    }
    if (o->add_generation_prompt) {
        st_sb_str(b, "<|im_start|>assistant\n");
        st_sb_str(b, o->enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
    }
    return ST_OK;
}

int st_chat_opens_reasoning(const st_chat_options *o) {
    return o && o->style == ST_CHAT_QWEN35 && o->add_generation_prompt && o->enable_thinking;
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
    st_sbuf b = {0};
    st_status s = ST_OK;
    if (o->style == ST_CHAT_QWEN35) {
        s = render_qwen35(&b, msgs, n, o);
        n = 0; /* rendered */
    } else if (o->n_tools > 0) {
        s = render_tools(&b, msgs, n, o);
    } else if (n > 0 && msgs[0].role == ST_ROLE_SYSTEM) {
        st_sb_str(&b, "<|im_start|>system\n");
        st_sb_str(&b, msgs[0].content ? msgs[0].content : "");
        st_sb_str(&b, "<|im_end|>\n");
    }
    size_t last_query = n > 0 ? last_query_index(msgs, n) : 0;
    for (size_t i = 0; i < n && s == ST_OK; i++) {
        const st_chat_message *m = &msgs[i];
        const char *c = m->content ? m->content : "";
        if (m->role == ST_ROLE_USER || (m->role == ST_ROLE_SYSTEM && i > 0)) {
            st_sb_str(&b, "<|im_start|>");
            st_sb_str(&b, role_name(m->role));
            st_sb_str(&b, "\n");
            st_sb_str(&b, c);
            st_sb_str(&b, "<|im_end|>\n");
        } else if (m->role == ST_ROLE_ASSISTANT) {
            render_assistant(&b, msgs, n, i, last_query);
        } else if (m->role == ST_ROLE_TOOL) {
            if (i == 0 || msgs[i - 1].role != ST_ROLE_TOOL) st_sb_str(&b, "<|im_start|>user");
            st_sb_str(&b, "\n<tool_response>\n");
            st_sb_str(&b, c);
            st_sb_str(&b, "\n</tool_response>");
            if (i == n - 1 || msgs[i + 1].role != ST_ROLE_TOOL) st_sb_str(&b, "<|im_end|>\n");
        }
    }
    if (s == ST_OK && o->add_generation_prompt && o->style != ST_CHAT_QWEN35) {
        st_sb_str(&b, "<|im_start|>assistant\n");
        if (!o->enable_thinking) st_sb_str(&b, "<think>\n\n</think>\n\n");
    }
    if (s == ST_OK && !b.p) st_sb_add(&b, "", 0);
    if (s == ST_OK && b.oom) s = st_fail(ST_ERR_NOMEM, "chat: out of memory");
    if (s != ST_OK) { free(b.p); return s; }
    *out = b.p;
    if (len) *len = b.n;
    return ST_OK;
}
