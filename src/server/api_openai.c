/* api_openai.c: POST /v1/chat/completions and POST /v1/completions, OpenAI's shapes.
 *
 * Parsing checks every field it reads (type and range; the error names the field) and maps the
 * request onto the engine port: messages -> sv_chat, sampling -> sv_sampling, reasoning_effort and
 * chat_template_kwargs.enable_thinking -> enable_thinking. The formatters turn reply events into
 * chat.completion(.chunk) / text_completion JSON: reasoning as reasoning_content, tool calls as
 * tool_calls (streamed as an opening delta with id and name, then the arguments). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/internal.h"

/* Strings made while parsing (joined content parts), freed after the prompt is rendered. */
typedef struct strpool {
    char **p;
    size_t n;
} strpool;

static const char *pool_keep(strpool *sp, char *s) {
    sp->p = realloc(sp->p, (sp->n + 1) * sizeof *sp->p);
    sp->p[sp->n++] = s;
    return s;
}

static void pool_free(strpool *sp) {
    for (size_t i = 0; i < sp->n; i++) free(sp->p[i]);
    free(sp->p);
}

typedef struct oa_state {
    char *id;
    char *model;
    long long created;
    int chat;          /* chat.completion vs text_completion */
    int include_usage; /* stream_options.include_usage */
    char *content, *reasoning;
    size_t n_content, n_reasoning;
    json_t *tool_calls;
    int n_tools;
} oa_state;

static void oa_free(void *p) {
    oa_state *a = p;
    if (!a) return;
    free(a->id);
    free(a->model);
    free(a->content);
    free(a->reasoning);
    json_decref(a->tool_calls);
    free(a);
}

static void append(char **s, size_t *n, const char *t, size_t len) {
    *s = realloc(*s, *n + len + 1);
    memcpy(*s + *n, t, len);
    *n += len;
    (*s)[*n] = 0;
}

static const char *finish_reason(const oa_state *a, sv_finish f) {
    if (f == SV_FINISH_LENGTH) return "length";
    if (a->n_tools) return "tool_calls";
    return "stop";
}

/* Speculative decoding's drafts go in OpenAI's predicted-output fields: accepted_prediction_tokens
 * are drafts the model's own samples confirmed, rejected_prediction_tokens the others. */
static json_t *usage_json(const sv_usage *u) {
    return json_pack("{s:i,s:i,s:i,s:{s:i},s:{s:i,s:i}}", "prompt_tokens", u->prompt_tokens, "completion_tokens",
                     u->completion_tokens, "total_tokens", u->prompt_tokens + u->completion_tokens, "prompt_tokens_details",
                     "cached_tokens", u->cached_tokens, "completion_tokens_details", "accepted_prediction_tokens",
                     u->draft_accepted, "rejected_prediction_tokens", u->draft_tokens - u->draft_accepted);
}

/* llama.cpp's "timings" object: prompt and generation counts and milliseconds, drafts made and
 * accepted. */
static json_t *timings_json(const sv_usage *u) {
    int computed = u->prompt_tokens - u->cached_tokens;
    return json_pack("{s:i,s:i,s:f,s:i,s:f,s:i,s:i}", "cache_n", u->cached_tokens, "prompt_n", computed, "prompt_ms",
                     u->prompt_seconds * 1e3, "predicted_n", u->completion_tokens, "predicted_ms", u->decode_seconds * 1e3,
                     "draft_n", u->draft_tokens, "draft_n_accepted", u->draft_accepted);
}

/* A fresh tool call id, unique in this server's life. */
static char *call_id(sv_job *j) {
    char *id = NULL;
    oa_state *a = j->api;
    if (asprintf(&id, "call_%s_%d", a->id + (strchr(a->id, '-') ? strchr(a->id, '-') - a->id + 1 : 0), a->n_tools) < 0) return NULL;
    return id;
}

/* --- streaming ------------------------------------------------------------------------------ */

static json_t *chunk_base(const oa_state *a) {
    return json_pack("{s:s,s:s,s:I,s:s}", "id", a->id, "object", a->chat ? "chat.completion.chunk" : "text_completion",
                     "created", (json_int_t)a->created, "model", a->model);
}

static void send_delta(sv_job *j, json_t *delta, const char *finish) {
    oa_state *a = j->api;
    json_t *c = chunk_base(a);
    json_t *choice;
    if (a->chat) {
        choice = json_pack("{s:i,s:o,s:o}", "index", 0, "delta", delta, "finish_reason", finish ? json_string(finish) : json_null());
    } else {
        json_t *t = json_object_get(delta, "content");
        choice = json_pack("{s:i,s:s,s:n,s:o}", "index", 0, "text", t ? json_string_value(t) : "", "logprobs",
                           "finish_reason", finish ? json_string(finish) : json_null());
        json_decref(delta);
    }
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    sv_job_sse(j, NULL, c);
}

static void stream_begin(sv_job *j) {
    oa_state *a = j->api;
    if (a->chat) send_delta(j, json_pack("{s:s,s:s}", "role", "assistant", "content", ""), NULL);
}

static void stream_event(sv_job *j, sv_event kind, const char *text, size_t len, const sv_tool_call *call) {
    oa_state *a = j->api;
    if (kind == SV_EVENT_REASONING) {
        send_delta(j, json_pack("{s:s%}", "reasoning_content", text, len), NULL);
    } else if (kind == SV_EVENT_CONTENT) {
        send_delta(j, json_pack("{s:s%}", "content", text, len), NULL);
    } else {
        char *id = call_id(j);
        send_delta(j, json_pack("{s:[{s:i,s:s,s:s,s:{s:s,s:s}}]}", "tool_calls", "index", a->n_tools, "id", id, "type",
                                "function", "function", "name", call->name, "arguments", ""), NULL);
        send_delta(j, json_pack("{s:[{s:i,s:{s:s}}]}", "tool_calls", "index", a->n_tools, "function", "arguments",
                                call->arguments), NULL);
        free(id);
        a->n_tools++;
    }
}

static void stream_end(sv_job *j, st_status s, const char *error, sv_finish f, const sv_usage *u) {
    oa_state *a = j->api;
    if (f == SV_FINISH_CANCELLED) return;
    if (s != ST_OK) {
        sv_error e;
        sv_error_set(&e, 500, "server_error", NULL, NULL, "%s", error);
        char *body = sv_error_openai(&e);
        sv_job_printf(j, "data: %s\n\ndata: [DONE]\n\n", body);
        free(body);
        return;
    }
    send_delta(j, json_object(), finish_reason(a, f));
    if (a->include_usage) {
        json_t *c = chunk_base(a);
        json_object_set_new(c, "choices", json_array());
        json_object_set_new(c, "usage", usage_json(u));
        json_object_set_new(c, "timings", timings_json(u));
        sv_job_sse(j, NULL, c);
    }
    sv_job_printf(j, "data: [DONE]\n\n");
}

/* --- one JSON body ---------------------------------------------------------------------------- */

static void whole_begin(sv_job *j) {}

static void whole_event(sv_job *j, sv_event kind, const char *text, size_t len, const sv_tool_call *call) {
    oa_state *a = j->api;
    if (kind == SV_EVENT_REASONING) append(&a->reasoning, &a->n_reasoning, text, len);
    else if (kind == SV_EVENT_CONTENT) append(&a->content, &a->n_content, text, len);
    else {
        char *id = call_id(j);
        json_array_append_new(a->tool_calls, json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function", "function",
                                                       "name", call->name, "arguments", call->arguments));
        free(id);
        a->n_tools++;
    }
}

static void whole_end(sv_job *j, st_status s, const char *error, sv_finish f, const sv_usage *u) {
    oa_state *a = j->api;
    if (f == SV_FINISH_CANCELLED) return;
    char *body;
    if (s != ST_OK) {
        sv_error e;
        sv_error_set(&e, 500, "server_error", NULL, NULL, "%s", error);
        body = sv_error_openai(&e);
        j->http_status = 500;
    } else {
        json_t *r = json_pack("{s:s,s:s,s:I,s:s}", "id", a->id, "object", a->chat ? "chat.completion" : "text_completion",
                              "created", (json_int_t)a->created, "model", a->model);
        json_t *choice;
        if (a->chat) {
            json_t *msg = json_pack("{s:s,s:o}", "role", "assistant", "content",
                                    a->n_content || !a->n_tools ? json_string(a->content ? a->content : "") : json_null());
            if (a->n_reasoning) json_object_set_new(msg, "reasoning_content", json_string(a->reasoning));
            if (a->n_tools) json_object_set(msg, "tool_calls", a->tool_calls);
            choice = json_pack("{s:i,s:o,s:n,s:s}", "index", 0, "message", msg, "logprobs", "finish_reason", finish_reason(a, f));
        } else {
            choice = json_pack("{s:i,s:s,s:n,s:s}", "index", 0, "text", a->content ? a->content : "", "logprobs",
                               "finish_reason", finish_reason(a, f));
        }
        json_object_set_new(r, "choices", json_pack("[o]", choice));
        json_object_set_new(r, "usage", usage_json(u));
        json_object_set_new(r, "timings", timings_json(u));
        body = json_dumps(r, JSON_COMPACT);
        json_decref(r);
    }
    sv_job_write(j, body, strlen(body));
    free(body);
}

static const sv_job_format oa_stream = {stream_begin, stream_event, stream_end, oa_free};
static const sv_job_format oa_whole = {whole_begin, whole_event, whole_end, oa_free};

/* --- request parsing -------------------------------------------------------------------------- */

/* A message's content: a string, null, or an array of {"type":"text","text":...} parts. */
static int parse_content(json_t *c, const char *field, strpool *sp, const char **out, sv_error *e) {
    if (!c || json_is_null(c)) { *out = ""; return 0; }
    if (json_is_string(c)) { *out = json_string_value(c); return 0; }
    if (!json_is_array(c))
        return sv_error_set(e, 400, "invalid_request_error", "invalid_type", field, "'%s' must be a string or an array of content parts", field);
    char *s = NULL;
    size_t n = 0, i;
    json_t *part;
    json_array_foreach(c, i, part) {
        char f[160];
        snprintf(f, sizeof f, "%s[%zu]", field, i);
        const char *type = json_string_value(json_object_get(part, "type"));
        const char *text = json_string_value(json_object_get(part, "text"));
        if (!json_is_object(part) || !type) {
            free(s);
            return sv_error_set(e, 400, "invalid_request_error", "invalid_type", f, "'%s' must be an object with a 'type'", f);
        }
        if (strcmp(type, "text") || !text) {
            free(s);
            return sv_error_set(e, 400, "invalid_request_error", "invalid_value", f,
                                "'%s' is of type '%s': only text parts are supported", f, type);
        }
        if (n) append(&s, &n, "\n", 1);
        append(&s, &n, text, strlen(text));
    }
    *out = s ? pool_keep(sp, s) : "";
    return 0;
}

static int parse_tool_calls(json_t *tc, const char *field, sv_tool_call **out, size_t *n, sv_error *e) {
    if (!json_is_array(tc))
        return sv_error_set(e, 400, "invalid_request_error", "invalid_type", field, "'%s' must be an array", field);
    *n = json_array_size(tc);
    *out = calloc(*n + 1, sizeof **out);
    for (size_t i = 0; i < *n; i++) {
        json_t *c = json_array_get(tc, i), *fn = json_object_get(c, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        if (!name || !args)
            return sv_error_set(e, 400, "invalid_request_error", "invalid_type", field,
                                "'%s[%zu]' must have function.name and function.arguments strings", field, i);
        (*out)[i] = (sv_tool_call){json_string_value(json_object_get(c, "id")), name, args};
    }
    return 0;
}

static int parse_messages(json_t *req, sv_message **out, size_t *n, strpool *sp, sv_error *e) {
    json_t *ms = json_object_get(req, "messages");
    if (!ms) return sv_error_set(e, 400, "invalid_request_error", "missing_required_parameter", "messages", "'messages' is required");
    if (!json_is_array(ms) || !json_array_size(ms))
        return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "messages", "'messages' must be a non-empty array");
    *n = json_array_size(ms);
    *out = calloc(*n, sizeof **out);
    for (size_t i = 0; i < *n; i++) {
        json_t *m = json_array_get(ms, i);
        sv_message *sm = &(*out)[i];
        char f[96];
        snprintf(f, sizeof f, "messages[%zu]", i);
        if (!json_is_object(m)) return sv_error_set(e, 400, "invalid_request_error", "invalid_type", f, "'%s' must be an object", f);
        const char *role = json_string_value(json_object_get(m, "role"));
        snprintf(f, sizeof f, "messages[%zu].role", i);
        if (!role) return sv_error_set(e, 400, "invalid_request_error", "invalid_type", f, "'%s' must be a string", f);
        if (!strcmp(role, "developer")) role = "system";
        if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "tool"))
            return sv_error_set(e, 400, "invalid_request_error", "invalid_value", f,
                                "'%s' is '%s': expected system, developer, user, assistant or tool", f, role);
        sm->role = role;
        snprintf(f, sizeof f, "messages[%zu].content", i);
        if (parse_content(json_object_get(m, "content"), f, sp, &sm->content, e)) return -1;
        json_t *rc = json_object_get(m, "reasoning_content");
        if (rc && !json_is_null(rc)) {
            snprintf(f, sizeof f, "messages[%zu].reasoning_content", i);
            if (!json_is_string(rc)) return sv_error_set(e, 400, "invalid_request_error", "invalid_type", f, "'%s' must be a string", f);
            sm->reasoning = json_string_value(rc);
        }
        json_t *tc = json_object_get(m, "tool_calls");
        if (tc && !json_is_null(tc)) {
            snprintf(f, sizeof f, "messages[%zu].tool_calls", i);
            sv_tool_call *calls = NULL;
            int bad = parse_tool_calls(tc, f, &calls, &sm->n_tool_calls, e);
            pool_keep(sp, (char *)calls);
            sm->tool_calls = calls;
            if (bad) return -1;
        }
        sm->tool_call_id = json_string_value(json_object_get(m, "tool_call_id"));
        sm->name = json_string_value(json_object_get(m, "name"));
    }
    return 0;
}

static int parse_tools(json_t *req, sv_chat *chat, strpool *sp, sv_error *e) {
    json_t *tools = json_object_get(req, "tools");
    if (!tools || json_is_null(tools)) return 0;
    if (!json_is_array(tools)) return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "tools", "'tools' must be an array");
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *name = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!name || !type || strcmp(type, "function")) {
            char f[64];
            snprintf(f, sizeof f, "tools[%zu]", i);
            return sv_error_set(e, 400, "invalid_request_error", "invalid_value", f,
                                "'%s' must be {\"type\": \"function\", \"function\": {\"name\": ...}}", f);
        }
    }
    if (json_array_size(tools)) chat->tools_json = pool_keep(sp, json_dumps(tools, JSON_COMPACT));
    json_t *tc = json_object_get(req, "tool_choice");
    if (!tc || json_is_null(tc)) return 0;
    const char *s = json_string_value(tc);
    if (s && !strcmp(s, "none")) chat->tool_choice = SV_TOOLS_NONE;
    else if (s && !strcmp(s, "auto")) chat->tool_choice = SV_TOOLS_AUTO;
    else if (s && !strcmp(s, "required")) chat->tool_choice = SV_TOOLS_REQUIRED;
    else if (json_is_object(tc) && json_string_value(json_object_get(json_object_get(tc, "function"), "name"))) {
        chat->tool_choice = SV_TOOLS_NAMED;
        chat->tool_name = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
        int found = 0;
        json_array_foreach(tools, i, t)
            if (!strcmp(json_string_value(json_object_get(json_object_get(t, "function"), "name")), chat->tool_name)) found = 1;
        if (!found)
            return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "tool_choice",
                                "'tool_choice' names '%s', which is not in 'tools'", chat->tool_name);
    } else {
        return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "tool_choice",
                            "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (!chat->tools_json && chat->tool_choice >= SV_TOOLS_REQUIRED)
        return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "tool_choice", "'tool_choice' needs 'tools'");
    return 0;
}

/* The fields both endpoints share: sampling, stop, stream, n, max_tokens. */
static int parse_common(json_t *req, sv_job *j, long long *max_tokens, int *include_usage, sv_error *e) {
    sv_sampling *sp = &j->gen.sampling;
    double x;
    long long k;
    sp->temperature = 1.0f;
    sp->top_p = 1.0f;
    int r;
    if ((r = sv_get_number(req, "temperature", 0, 2, &x, e)) < 0) return -1;
    if (r) sp->temperature = (float)x;
    if ((r = sv_get_number(req, "top_p", 0, 1, &x, e)) < 0) return -1;
    if (r) sp->top_p = (float)x;
    if ((r = sv_get_int(req, "top_k", 0, 1 << 20, &k, e)) < 0) return -1;
    if (r) sp->top_k = (int)k;
    if ((r = sv_get_number(req, "min_p", 0, 1, &x, e)) < 0) return -1;
    if (r) sp->min_p = (float)x;
    if ((r = sv_get_number(req, "presence_penalty", -2, 2, &x, e)) < 0) return -1;
    if (r) sp->presence_penalty = (float)x;
    if ((r = sv_get_number(req, "frequency_penalty", -2, 2, &x, e)) < 0) return -1;
    if (r) sp->frequency_penalty = (float)x;
    if ((r = sv_get_int(req, "seed", -(1LL << 62), 1LL << 62, &k, e)) < 0) return -1;
    if (r) { sp->seed = (uint64_t)k; sp->has_seed = 1; }
    if ((r = sv_get_int(req, "n", 1, 1 << 20, &k, e)) < 0) return -1;
    if (r && k != 1) return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "n", "'n' must be 1, got %lld: one choice per request", k);
    if (sv_get_stops(req, "stop", j, e) < 0) return -1;
    if (sv_get_spec(req, j, e) < 0) return -1;
    if (sv_get_bool(req, "stream", &j->stream, e) < 0) return -1;
    *max_tokens = 0;
    if (sv_get_int(req, "max_tokens", 1, 1 << 30, max_tokens, e) < 0) return -1;
    if (sv_get_int(req, "max_completion_tokens", 1, 1 << 30, max_tokens, e) < 0) return -1;
    json_t *so = json_object_get(req, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "stream_options", "'stream_options' must be an object");
        json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_boolean(iu))
            return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
        *include_usage = json_is_true(iu);
    }
    json_t *lp = json_object_get(req, "logprobs");
    if (lp && json_is_true(lp))
        return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "logprobs", "'logprobs' is not supported");
    return 0;
}

static int parse_thinking(json_t *req, int *thinking, sv_error *e) {
    *thinking = 1; /* Qwen's templates think unless told not to */
    const char *effort;
    int r = sv_get_string(req, "reasoning_effort", &effort, e);
    if (r < 0) return -1;
    if (r) {
        if (!strcmp(effort, "none") || !strcmp(effort, "minimal")) *thinking = 0;
        else if (strcmp(effort, "low") && strcmp(effort, "medium") && strcmp(effort, "high"))
            return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "reasoning_effort",
                                "'reasoning_effort' must be none, minimal, low, medium or high, got '%s'", effort);
    }
    json_t *kw = json_object_get(req, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw))
            return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "chat_template_kwargs", "'chat_template_kwargs' must be an object");
        json_t *et = json_object_get(kw, "enable_thinking");
        if (et && !json_is_boolean(et))
            return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "chat_template_kwargs.enable_thinking",
                                "'chat_template_kwargs.enable_thinking' must be a boolean");
        if (et) *thinking = json_is_true(et);
    }
    return 0;
}

static int parse_response_format(json_t *req, int *json_object, sv_error *e) {
    json_t *rf = json_object_get(req, "response_format");
    if (!rf || json_is_null(rf)) return 0;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!json_is_object(rf) || !type)
        return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "response_format", "'response_format' must be an object with a 'type'");
    if (!strcmp(type, "json_object") || !strcmp(type, "json_schema")) *json_object = 1;
    else if (strcmp(type, "text"))
        return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "response_format.type",
                            "'response_format.type' must be text, json_object or json_schema, got '%s'", type);
    return 0;
}

static oa_state *new_state(sv_server *s, json_t *req, int chat) {
    oa_state *a = calloc(1, sizeof *a);
    a->id = sv_make_id(s, chat ? "chatcmpl-" : "cmpl-");
    const char *model = json_string_value(json_object_get(req, "model"));
    a->model = strdup(model && *model ? model : s->info.name);
    a->created = (long long)time(NULL);
    a->chat = chat;
    a->tool_calls = json_array();
    return a;
}

static void enqueue(sv_server *s, sv_job *j, sv_http_reply *out, sv_error *e) {
    if (sv_queue_push(s, j)) {
        atomic_fetch_add(&s->m.rejected_queue_full, 1);
        sv_error_set(e, 429, "rate_limit_error", "queue_full", NULL, "the request queue is full (%d waiting); retry later", s->cfg.queue_max);
        sv_job_release(j);
        return;
    }
    out->status = 200;
    out->job = j;
    out->content_type = j->stream ? "text/event-stream" : "application/json";
}

void sv_api_chat(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) {
    sv_job *j = sv_job_new();
    strpool sp = {0};
    sv_message *msgs = NULL;
    sv_chat chat = {0};
    long long max_tokens = 0;
    oa_state *a = new_state(s, req, 1);
    j->api = a;
    j->fmt = &oa_whole;
    snprintf(j->endpoint, sizeof j->endpoint, "chat");
    int bad = parse_messages(req, &msgs, &chat.n_messages, &sp, e) || parse_common(req, j, &max_tokens, &a->include_usage, e) ||
              parse_thinking(req, &chat.enable_thinking, e) || parse_tools(req, &chat, &sp, e) ||
              parse_response_format(req, &chat.json_object, e);
    chat.messages = msgs;
    /* A forced tool call opens the reply with <tool_call>: its arguments are JSON already, and the
     * JSON object constraint would have nothing to start from. */
    if (chat.tools_json && chat.tool_choice >= SV_TOOLS_REQUIRED) chat.json_object = 0;
    if (!bad) bad = sv_prepare_chat(s, j, &chat, max_tokens, e, "messages");
    free(msgs);
    pool_free(&sp);
    if (bad) { sv_job_release(j); return; }
    j->gen.json_object = chat.json_object;
    j->reply_flags = SV_REPLY_REASONING | (chat.tools_json && chat.tool_choice != SV_TOOLS_NONE ? SV_REPLY_TOOLS : 0);
    if (j->stream) j->fmt = &oa_stream;
    enqueue(s, j, out, e);
}

void sv_api_completions(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) {
    sv_job *j = sv_job_new();
    long long max_tokens = 0;
    oa_state *a = new_state(s, req, 0);
    j->api = a;
    j->fmt = &oa_whole;
    snprintf(j->endpoint, sizeof j->endpoint, "completions");
    json_t *p = json_object_get(req, "prompt");
    const char *prompt = json_string_value(p);
    if (json_is_array(p) && json_array_size(p) == 1) prompt = json_string_value(json_array_get(p, 0));
    int bad = 0;
    if (!p) bad = sv_error_set(e, 400, "invalid_request_error", "missing_required_parameter", "prompt", "'prompt' is required");
    else if (!prompt) bad = sv_error_set(e, 400, "invalid_request_error", "invalid_type", "prompt", "'prompt' must be a string (or an array of one string)");
    if (!bad) bad = parse_common(req, j, &max_tokens, &a->include_usage, e);
    /* OpenAI's default for this endpoint is 16 tokens. */
    if (!bad) bad = sv_prepare_text(s, j, prompt, max_tokens ? max_tokens : 16, e);
    if (bad) { sv_job_release(j); return; }
    j->reply_flags = 0;
    if (j->stream) j->fmt = &oa_stream;
    enqueue(s, j, out, e);
}
