/* api_anthropic.c: POST /v1/messages and POST /v1/messages/count_tokens, Anthropic's shapes.
 *
 * Requests map onto the same engine port as OpenAI's: system (string or text blocks), user and
 * assistant turns of text / tool_use / tool_result / thinking blocks become sv_messages (a user
 * turn's tool_result blocks become tool messages, as the template wants). Thinking is on only when
 * the request asks for it (thinking.type "enabled"), as in Anthropic's API.
 *
 * Streaming follows Anthropic's event sequence exactly: message_start, then per content block
 * content_block_start / content_block_delta... / content_block_stop, then message_delta (stop
 * reason, output tokens) and message_stop. usage.input_tokens counts the prompt tokens that were
 * not reused; cache_read_input_tokens the reused ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/internal.h"

typedef enum { BLOCK_NONE, BLOCK_THINKING, BLOCK_TEXT, BLOCK_TOOL } block_kind;

typedef struct an_state {
    char *id;
    char *model;
    int n_blocks;
    block_kind open;
    json_t *content; /* non-streaming: the blocks */
    int n_tools;
    const char *matched_stop;
} an_state;

static void an_free(void *p) {
    an_state *a = p;
    if (!a) return;
    free(a->id);
    free(a->model);
    json_decref(a->content);
    free(a);
}

static char *tool_id(sv_job *j) {
    an_state *a = j->api;
    char *id = NULL;
    if (asprintf(&id, "toolu_%s_%d", a->id + 4, a->n_tools) < 0) return NULL;
    return id;
}

static const char *stop_reason(const an_state *a, sv_job *j, sv_finish f) {
    if (f == SV_FINISH_LENGTH) return "max_tokens";
    if (a->n_tools) return "tool_use";
    if (j->reply && sv_reply_stop_matched(j->reply)) return "stop_sequence";
    return "end_turn";
}

static json_t *stop_sequence(sv_job *j) {
    const char *m = j->reply ? sv_reply_stop_matched(j->reply) : NULL;
    return m ? json_string(m) : json_null();
}

static json_t *usage_json(const sv_usage *u, int input, int output) {
    return json_pack("{s:i,s:i,s:i,s:i}", "input_tokens", input, "output_tokens", output, "cache_read_input_tokens",
                     u ? u->cached_tokens : 0, "cache_creation_input_tokens", 0);
}

/* --- streaming -------------------------------------------------------------------------------- */

static void close_block(sv_job *j) {
    an_state *a = j->api;
    if (a->open == BLOCK_NONE) return;
    if (a->open == BLOCK_THINKING)
        sv_job_sse(j, "content_block_delta", json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index",
                                                       a->n_blocks - 1, "delta", "type", "signature_delta", "signature", ""));
    sv_job_sse(j, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", a->n_blocks - 1));
    a->open = BLOCK_NONE;
}

static void open_block(sv_job *j, block_kind kind, json_t *block) {
    an_state *a = j->api;
    close_block(j);
    sv_job_sse(j, "content_block_start", json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", a->n_blocks,
                                                   "content_block", block));
    a->open = kind;
    a->n_blocks++;
}

static void stream_begin(sv_job *j) {
    an_state *a = j->api;
    sv_usage u = {.cached_tokens = (int)j->cached};
    json_t *msg = json_pack("{s:s,s:s,s:s,s:[],s:s,s:n,s:n,s:o}", "id", a->id, "type", "message", "role", "assistant",
                            "content", "model", a->model, "stop_reason", "stop_sequence", "usage",
                            usage_json(&u, (int)(j->n_ids - j->cached), 0));
    sv_job_sse(j, "message_start", json_pack("{s:s,s:o}", "type", "message_start", "message", msg));
    sv_job_sse(j, "ping", json_pack("{s:s}", "type", "ping"));
}

static void stream_event(sv_job *j, sv_event kind, const char *text, size_t len, const sv_tool_call *call) {
    an_state *a = j->api;
    if (kind == SV_EVENT_REASONING) {
        if (a->open != BLOCK_THINKING) open_block(j, BLOCK_THINKING, json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", "", "signature", ""));
        sv_job_sse(j, "content_block_delta", json_pack("{s:s,s:i,s:{s:s,s:s%}}", "type", "content_block_delta", "index",
                                                       a->n_blocks - 1, "delta", "type", "thinking_delta", "thinking", text, len));
    } else if (kind == SV_EVENT_CONTENT) {
        if (a->open != BLOCK_TEXT) open_block(j, BLOCK_TEXT, json_pack("{s:s,s:s}", "type", "text", "text", ""));
        sv_job_sse(j, "content_block_delta", json_pack("{s:s,s:i,s:{s:s,s:s%}}", "type", "content_block_delta", "index",
                                                       a->n_blocks - 1, "delta", "type", "text_delta", "text", text, len));
    } else {
        char *id = tool_id(j);
        open_block(j, BLOCK_TOOL, json_pack("{s:s,s:s,s:s,s:{}}", "type", "tool_use", "id", id, "name", call->name, "input"));
        sv_job_sse(j, "content_block_delta", json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index",
                                                       a->n_blocks - 1, "delta", "type", "input_json_delta", "partial_json",
                                                       call->arguments));
        close_block(j);
        free(id);
        a->n_tools++;
    }
}

static void stream_end(sv_job *j, st_status s, const char *error, sv_finish f, const sv_usage *u) {
    an_state *a = j->api;
    if (f == SV_FINISH_CANCELLED) return;
    if (s != ST_OK) {
        sv_error e;
        sv_error_set(&e, j->fail_status, "api_error", NULL, NULL, "%s", error);
        char *body = sv_error_anthropic(&e);
        sv_job_printf(j, "event: error\ndata: %s\n\n", body);
        free(body);
        return;
    }
    close_block(j);
    sv_job_sse(j, "message_delta", json_pack("{s:s,s:{s:s,s:o},s:o}", "type", "message_delta", "delta", "stop_reason",
                                             stop_reason(a, j, f), "stop_sequence", stop_sequence(j), "usage",
                                             usage_json(u, u->prompt_tokens - u->cached_tokens, u->completion_tokens)));
    sv_job_sse(j, "message_stop", json_pack("{s:s}", "type", "message_stop"));
}

/* --- one JSON body ---------------------------------------------------------------------------- */

static void whole_begin(sv_job *j) {}

static void whole_event(sv_job *j, sv_event kind, const char *text, size_t len, const sv_tool_call *call) {
    an_state *a = j->api;
    json_t *last = json_array_get(a->content, json_array_size(a->content) - 1);
    const char *last_type = json_string_value(json_object_get(last, "type"));
    if (kind == SV_EVENT_TOOL_CALL) {
        char *id = tool_id(j);
        json_array_append_new(a->content, json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use", "id", id, "name", call->name,
                                                    "input", json_loads(call->arguments, 0, NULL)));
        free(id);
        a->n_tools++;
        return;
    }
    const char *type = kind == SV_EVENT_REASONING ? "thinking" : "text";
    if (!last_type || strcmp(last_type, type)) {
        last = kind == SV_EVENT_REASONING ? json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", "", "signature", "")
                                          : json_pack("{s:s,s:s}", "type", "text", "text", "");
        json_array_append_new(a->content, last);
    }
    json_t *field = json_object_get(last, type);
    size_t n = json_string_length(field);
    char *joined = malloc(n + len + 1);
    memcpy(joined, json_string_value(field), n);
    memcpy(joined + n, text, len);
    json_object_set_new(last, type, json_stringn(joined, n + len));
    free(joined);
}

static void whole_end(sv_job *j, st_status s, const char *error, sv_finish f, const sv_usage *u) {
    an_state *a = j->api;
    if (f == SV_FINISH_CANCELLED) return;
    char *body;
    if (s != ST_OK) {
        sv_error e;
        sv_error_set(&e, j->fail_status, "api_error", NULL, NULL, "%s", error);
        body = sv_error_anthropic(&e);
        j->http_status = j->fail_status;
    } else {
        json_t *r = json_pack("{s:s,s:s,s:s,s:O,s:s,s:s,s:o,s:o}", "id", a->id, "type", "message", "role", "assistant",
                              "content", a->content, "model", a->model, "stop_reason", stop_reason(a, j, f),
                              "stop_sequence", stop_sequence(j), "usage",
                              usage_json(u, u->prompt_tokens - u->cached_tokens, u->completion_tokens));
        body = json_dumps(r, JSON_COMPACT);
        json_decref(r);
    }
    sv_job_write(j, body, strlen(body));
    free(body);
}

static const sv_job_format an_stream = {stream_begin, stream_event, stream_end, an_free, NULL};
static const sv_job_format an_whole = {whole_begin, whole_event, whole_end, an_free, NULL};

/* --- request parsing -------------------------------------------------------------------------- */

typedef struct msgs {
    sv_message *m;
    size_t n, cap;
    char **owned;
    size_t n_owned;
} msgs;

static sv_message *msg_add(msgs *ms, const char *role) {
    if (ms->n == ms->cap) {
        ms->cap = ms->cap ? ms->cap * 2 : 8;
        ms->m = realloc(ms->m, ms->cap * sizeof *ms->m);
    }
    sv_message *m = &ms->m[ms->n++];
    memset(m, 0, sizeof *m);
    m->role = role;
    m->content = "";
    return m;
}

static const char *own(msgs *ms, void *p) {
    ms->owned = realloc(ms->owned, (ms->n_owned + 1) * sizeof *ms->owned);
    ms->owned[ms->n_owned++] = p;
    return p;
}

static void msgs_free(msgs *ms) {
    for (size_t i = 0; i < ms->n_owned; i++) free(ms->owned[i]);
    free(ms->owned);
    free(ms->m);
}

static char *join(const char *a, const char *b) {
    char *s = NULL;
    if (asprintf(&s, "%s%s%s", a, *a && *b ? "\n" : "", b) < 0) return NULL;
    return s;
}

/* Text of a string or of an array of text blocks (system prompts, tool results). */
static int text_of(json_t *v, const char *field, msgs *ms, const char **out, sv_error *e) {
    if (json_is_string(v)) { *out = json_string_value(v); return 0; }
    if (!json_is_array(v)) return sv_error_set(e, 400, "invalid_request_error", NULL, field, "%s: must be a string or an array of text blocks", field);
    const char *acc = "";
    size_t i;
    json_t *b;
    json_array_foreach(v, i, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        const char *text = json_string_value(json_object_get(b, "text"));
        if (!type || strcmp(type, "text") || !text)
            return sv_error_set(e, 400, "invalid_request_error", NULL, field, "%s.%zu: only text blocks are supported here", field, i);
        acc = own(ms, join(acc, text));
    }
    *out = acc;
    return 0;
}

static int parse_turn(json_t *m, size_t i, msgs *ms, sv_error *e) {
    char f[96];
    snprintf(f, sizeof f, "messages.%zu.role", i);
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant")))
        return sv_error_set(e, 400, "invalid_request_error", NULL, f, "%s: must be \"user\" or \"assistant\"", f);
    json_t *c = json_object_get(m, "content");
    snprintf(f, sizeof f, "messages.%zu.content", i);
    if (json_is_string(c)) {
        msg_add(ms, role)->content = json_string_value(c);
        return 0;
    }
    if (!json_is_array(c)) return sv_error_set(e, 400, "invalid_request_error", NULL, f, "%s: must be a string or an array of content blocks", f);
    sv_message *turn = NULL;
    sv_tool_call *calls = NULL;
    size_t k;
    json_t *b;
    json_array_foreach(c, k, b) {
        char bf[128];
        snprintf(bf, sizeof bf, "messages.%zu.content.%zu", i, k);
        const char *type = json_string_value(json_object_get(b, "type"));
        if (!type) return sv_error_set(e, 400, "invalid_request_error", NULL, bf, "%s.type: Field required", bf);
        if (!strcmp(type, "tool_result")) {
            if (strcmp(role, "user")) return sv_error_set(e, 400, "invalid_request_error", NULL, bf, "%s: tool_result blocks belong in user turns", bf);
            sv_message *t = msg_add(ms, "tool");
            t->tool_call_id = json_string_value(json_object_get(b, "tool_use_id"));
            json_t *rc = json_object_get(b, "content");
            char rf[160];
            snprintf(rf, sizeof rf, "%s.content", bf);
            if (rc && text_of(rc, rf, ms, &t->content, e)) return -1;
            turn = NULL; /* text after tool results opens a new user turn */
            continue;
        }
        if (!turn) turn = msg_add(ms, role);
        if (!strcmp(type, "text")) {
            const char *text = json_string_value(json_object_get(b, "text"));
            if (!text) return sv_error_set(e, 400, "invalid_request_error", NULL, bf, "%s.text: must be a string", bf);
            turn->content = own(ms, join(turn->content, text));
        } else if (!strcmp(type, "thinking")) {
            const char *t = json_string_value(json_object_get(b, "thinking"));
            if (!t) return sv_error_set(e, 400, "invalid_request_error", NULL, bf, "%s.thinking: must be a string", bf);
            turn->reasoning = t;
        } else if (!strcmp(type, "redacted_thinking")) {
            continue;
        } else if (!strcmp(type, "tool_use")) {
            const char *name = json_string_value(json_object_get(b, "name"));
            json_t *input = json_object_get(b, "input");
            if (!name || !json_is_object(input))
                return sv_error_set(e, 400, "invalid_request_error", NULL, bf, "%s: tool_use needs a name and an input object", bf);
            calls = realloc(calls, (turn->n_tool_calls + 1) * sizeof *calls);
            calls[turn->n_tool_calls++] = (sv_tool_call){json_string_value(json_object_get(b, "id")), name,
                                                         own(ms, json_dumps(input, JSON_COMPACT))};
            turn->tool_calls = calls;
        } else {
            free(calls);
            return sv_error_set(e, 400, "invalid_request_error", NULL, bf, "%s: blocks of type '%s' are not supported", bf, type);
        }
    }
    if (calls) own(ms, calls);
    return 0;
}

static int parse_tools(json_t *req, sv_chat *chat, msgs *ms, int *parallel, sv_error *e) {
    json_t *tools = json_object_get(req, "tools");
    if (tools && json_is_null(tools)) tools = NULL;
    if (tools && !json_is_array(tools)) return sv_error_set(e, 400, "invalid_request_error", NULL, "tools", "tools: must be an array");
    json_t *fns = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        json_t *schema = json_object_get(t, "input_schema");
        if (!name || !json_is_object(schema)) {
            json_decref(fns);
            char f[64];
            snprintf(f, sizeof f, "tools.%zu", i);
            return sv_error_set(e, 400, "invalid_request_error", NULL, f, "%s: a tool needs a name and an input_schema object", f);
        }
        json_t *fn = json_pack("{s:s,s:O}", "name", name, "parameters", schema);
        const char *desc = json_string_value(json_object_get(t, "description"));
        if (desc) json_object_set_new(fn, "description", json_string(desc));
        json_array_append_new(fns, json_pack("{s:s,s:o}", "type", "function", "function", fn));
    }
    if (json_array_size(fns)) chat->tools_json = own(ms, json_dumps(fns, JSON_COMPACT));
    json_decref(fns);
    json_t *tc = json_object_get(req, "tool_choice");
    if (!tc || json_is_null(tc)) return 0;
    const char *type = json_string_value(json_object_get(tc, "type"));
    if (!type) return sv_error_set(e, 400, "invalid_request_error", NULL, "tool_choice", "tool_choice.type: Field required");
    json_t *dp = json_object_get(tc, "disable_parallel_tool_use");
    if (dp && !json_is_boolean(dp))
        return sv_error_set(e, 400, "invalid_request_error", NULL, "tool_choice.disable_parallel_tool_use",
                            "tool_choice.disable_parallel_tool_use: must be a boolean");
    *parallel = !json_is_true(dp);
    if (!strcmp(type, "auto")) chat->tool_choice = SV_TOOLS_AUTO;
    else if (!strcmp(type, "none")) chat->tool_choice = SV_TOOLS_NONE;
    else if (!strcmp(type, "any")) chat->tool_choice = SV_TOOLS_REQUIRED;
    else if (!strcmp(type, "tool") && json_string_value(json_object_get(tc, "name"))) {
        chat->tool_choice = SV_TOOLS_NAMED;
        chat->tool_name = json_string_value(json_object_get(tc, "name"));
        int found = 0;
        json_array_foreach(tools, i, t) found |= !strcmp(json_string_value(json_object_get(t, "name")), chat->tool_name);
        if (!found && chat->tools_json)
            return sv_error_set(e, 400, "invalid_request_error", NULL, "tool_choice.name",
                                "tool_choice.name: '%s' is not one of the tools", chat->tool_name);
    } else {
        return sv_error_set(e, 400, "invalid_request_error", NULL, "tool_choice.type", "tool_choice.type: must be auto, any, tool or none");
    }
    if (!chat->tools_json && chat->tool_choice >= SV_TOOLS_REQUIRED)
        return sv_error_set(e, 400, "invalid_request_error", NULL, "tool_choice",
                            "tool_choice: type '%s' needs a non-empty tools", type);
    return 0;
}

/* Everything but sampling: system, messages, tools, thinking. */
static int parse_chat(json_t *req, sv_chat *chat, msgs *ms, int *parallel, sv_error *e) {
    json_t *sys = json_object_get(req, "system");
    if (sys && !json_is_null(sys)) {
        const char *text;
        if (text_of(sys, "system", ms, &text, e)) return -1;
        msg_add(ms, "system")->content = text;
    }
    json_t *m = json_object_get(req, "messages");
    if (!m) return sv_error_set(e, 400, "invalid_request_error", NULL, "messages", "messages: Field required");
    if (!json_is_array(m) || !json_array_size(m))
        return sv_error_set(e, 400, "invalid_request_error", NULL, "messages", "messages: must be a non-empty array");
    size_t i;
    json_t *turn;
    json_array_foreach(m, i, turn) {
        if (!json_is_object(turn)) {
            char f[48];
            snprintf(f, sizeof f, "messages.%zu", i);
            return sv_error_set(e, 400, "invalid_request_error", NULL, f, "%s: must be an object", f);
        }
        if (parse_turn(turn, i, ms, e)) return -1;
    }
    json_t *th = json_object_get(req, "thinking");
    if (th && !json_is_null(th)) {
        const char *type = json_string_value(json_object_get(th, "type"));
        if (!json_is_object(th) || !type)
            return sv_error_set(e, 400, "invalid_request_error", NULL, "thinking", "thinking.type: Field required");
        chat->enable_thinking = !strcmp(type, "enabled") || !strcmp(type, "adaptive");
    }
    if (parse_tools(req, chat, ms, parallel, e)) return -1;
    chat->messages = ms->m;
    chat->n_messages = ms->n;
    return 0;
}

/* Anthropic's field errors read "field: message"; sv_get_* name the field in quotes. */
static int parse_sampling(sv_server *s, json_t *req, sv_job *j, long long *max_tokens, sv_error *e) {
    double x;
    json_t *mt = json_object_get(req, "max_tokens");
    if (!mt) return sv_error_set(e, 400, "invalid_request_error", NULL, "max_tokens", "max_tokens: Field required");
    if (sv_get_int(req, "max_tokens", 1, 1 << 30, max_tokens, e) < 0) return -1;
    if (sv_get_number(req, "temperature", 0, 1, &x, e) < 0) return -1; /* Anthropic's range */
    if (sv_parse_sampling(s, req, j, e)) return -1;
    if (sv_get_stops(req, "stop_sequences", j, e) < 0) return -1;
    if (sv_get_spec(req, j, e) < 0) return -1;
    if (sv_get_bool(req, "stream", &j->stream, e) < 0) return -1;
    return 0;
}

void sv_api_messages(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) {
    sv_job *j = sv_job_new();
    msgs ms = {0};
    sv_chat chat = {0};
    long long max_tokens = 0;
    an_state *a = calloc(1, sizeof *a);
    a->id = sv_make_id(s, "msg_");
    const char *model = json_string_value(json_object_get(req, "model"));
    a->model = strdup(model && *model ? model : s->info.name);
    a->content = json_array();
    j->api = a;
    j->fmt = &an_whole;
    snprintf(j->endpoint, sizeof j->endpoint, "messages");
    int parallel = 1;
    int bad = parse_sampling(s, req, j, &max_tokens, e) || parse_chat(req, &chat, &ms, &parallel, e);
    if (!bad) bad = sv_force_tool_call(s, j, &chat, parallel, e);
    if (!bad) bad = sv_prepare_chat(s, j, &chat, max_tokens, e, "messages");
    msgs_free(&ms);
    if (bad) { sv_job_release(j); return; }
    j->reply_flags = SV_REPLY_REASONING | (chat.tools_json && chat.tool_choice != SV_TOOLS_NONE ? SV_REPLY_TOOLS : 0);
    if (j->stream) j->fmt = &an_stream;
    sv_enqueue(s, j, out, e);
}

void sv_api_count_tokens(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) {
    sv_job *j = sv_job_new();
    msgs ms = {0};
    sv_chat chat = {0};
    int parallel = 1;
    int bad = parse_chat(req, &chat, &ms, &parallel, e);
    if (!bad) bad = sv_prepare_chat(s, j, &chat, 0, e, "messages");
    /* Counting is what a client does to find out that a prompt is too long: answer it anyway. */
    if (bad && !strcmp(e->code, "context_length_exceeded") && j->n_ids) bad = 0;
    msgs_free(&ms);
    if (!bad) {
        json_t *r = json_pack("{s:i}", "input_tokens", (int)j->n_ids);
        out->status = 200;
        out->body = json_dumps(r, JSON_COMPACT);
        out->content_type = "application/json";
        json_decref(r);
    }
    sv_job_release(j);
}
