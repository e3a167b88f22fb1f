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

#include "base/status.h"
#include "engine/json_schema.h"
#include "server/internal.h"

/* One choice's reply (n of them with n > 1, or one per prompt of /v1/completions). */
typedef struct oa_choice {
    char *content, *reasoning;
    size_t n_content, n_reasoning;
    json_t *tool_calls;
    json_t *logprobs; /* the content tokens' entries, when logprobs is asked */
    int n_tools;
    int started;      /* streamed: its role delta is out */
    sv_finish finish;
} oa_choice;

typedef struct oa_state {
    char *id;
    char *model;
    long long created;
    int chat;          /* chat.completion vs text_completion */
    int include_usage; /* stream_options.include_usage */
    int n;
    oa_choice *c;
} oa_state;

static void oa_free(void *p) {
    oa_state *a = p;
    if (!a) return;
    for (int i = 0; i < a->n; i++) {
        free(a->c[i].content);
        free(a->c[i].reasoning);
        json_decref(a->c[i].tool_calls);
        json_decref(a->c[i].logprobs);
    }
    free(a->c);
    free(a->id);
    free(a->model);
    free(a);
}

static const char *finish_reason(const oa_choice *c) {
    if (c->finish == SV_FINISH_LENGTH) return "length";
    if (c->n_tools) return "tool_calls";
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
    const char *tail = strchr(a->id, '-') ? strchr(a->id, '-') + 1 : a->id;
    if (asprintf(&id, "call_%s_%d_%d", tail, j->choice, a->c[j->choice].n_tools) < 0) return NULL;
    return id;
}

/* The logprobs of the tokens that made this content. They wait in j->pending_logprobs until the
 * text they made comes out of the reply parser; a content event of len bytes takes the latest
 * tokens that cover them (what came before, a closing </think> and its blank lines, or text of
 * reasoning or a tool call, has none). */
static json_t *take_logprobs(sv_job *j, sv_event kind, size_t len) {
    json_t *lp = j->pending_logprobs;
    j->pending_logprobs = NULL;
    if (kind != SV_EVENT_CONTENT || !lp) {
        json_decref(lp);
        return NULL;
    }
    size_t n = json_array_size(lp), from = n, covered = 0;
    while (from > 0 && covered < len) covered += json_array_size(json_object_get(json_array_get(lp, --from), "bytes"));
    json_t *out = json_array();
    for (size_t i = from; i < n; i++) json_array_append(out, json_array_get(lp, i));
    json_decref(lp);
    return out;
}

/* --- streaming ------------------------------------------------------------------------------ */

static json_t *chunk_base(const oa_state *a) {
    return json_pack("{s:s,s:s,s:I,s:s}", "id", a->id, "object", a->chat ? "chat.completion.chunk" : "text_completion",
                     "created", (json_int_t)a->created, "model", a->model);
}

static void send_delta(sv_job *j, json_t *delta, const char *finish, json_t *logprobs) {
    oa_state *a = j->api;
    json_t *c = chunk_base(a);
    json_t *lp = logprobs ? (a->chat ? json_pack("{s:o,s:n}", "content", logprobs, "refusal") : logprobs) : json_null();
    json_t *choice;
    if (a->chat) {
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", j->choice, "delta", delta, "logprobs", lp, "finish_reason",
                           finish ? json_string(finish) : json_null());
    } else {
        json_t *t = json_object_get(delta, "content");
        choice = json_pack("{s:i,s:s,s:o,s:o}", "index", j->choice, "text", t ? json_string_value(t) : "", "logprobs", lp,
                           "finish_reason", finish ? json_string(finish) : json_null());
        json_decref(delta);
    }
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    sv_job_sse(j, NULL, c);
}

static void start_choice(sv_job *j) {
    oa_state *a = j->api;
    if (a->c[j->choice].started) return;
    a->c[j->choice].started = 1;
    if (a->chat) send_delta(j, json_pack("{s:s,s:s}", "role", "assistant", "content", ""), NULL, NULL);
}

static void stream_begin(sv_job *j) { start_choice(j); }

static void stream_event(sv_job *j, sv_event kind, const char *text, size_t len, const sv_tool_call *call) {
    oa_state *a = j->api;
    oa_choice *c = &a->c[j->choice];
    start_choice(j);
    json_t *lp = take_logprobs(j, kind, len);
    if (kind == SV_EVENT_REASONING) {
        send_delta(j, json_pack("{s:s%}", "reasoning_content", text, len), NULL, NULL);
    } else if (kind == SV_EVENT_CONTENT) {
        send_delta(j, json_pack("{s:s%}", "content", text, len), NULL, lp);
    } else {
        char *id = call_id(j);
        send_delta(j, json_pack("{s:[{s:i,s:s,s:s,s:{s:s,s:s}}]}", "tool_calls", "index", c->n_tools, "id", id, "type",
                                "function", "function", "name", call->name, "arguments", ""), NULL, NULL);
        send_delta(j, json_pack("{s:[{s:i,s:{s:s}}]}", "tool_calls", "index", c->n_tools, "function", "arguments",
                                call->arguments), NULL, NULL);
        free(id);
        c->n_tools++;
    }
}

static void stream_choice_end(sv_job *j, sv_finish f) {
    oa_state *a = j->api;
    if (f == SV_FINISH_CANCELLED) return;
    start_choice(j);
    a->c[j->choice].finish = f;
    send_delta(j, json_object(), finish_reason(&a->c[j->choice]), NULL);
}

static void stream_end(sv_job *j, st_status s, const char *error, sv_finish f, const sv_usage *u) {
    oa_state *a = j->api;
    if (f == SV_FINISH_CANCELLED) return;
    if (s != ST_OK) {
        char *body = sv_failure_openai(j, error);
        sv_job_printf(j, "data: %s\n\ndata: [DONE]\n\n", body);
        free(body);
        return;
    }
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
    oa_choice *c = &a->c[j->choice];
    json_t *lp = take_logprobs(j, kind, len);
    if (lp) {
        if (!c->logprobs) c->logprobs = json_array();
        json_array_extend(c->logprobs, lp);
        json_decref(lp);
    }
    if (kind == SV_EVENT_REASONING) sv_append(&c->reasoning, &c->n_reasoning, text, len);
    else if (kind == SV_EVENT_CONTENT) sv_append(&c->content, &c->n_content, text, len);
    else {
        char *id = call_id(j);
        if (!c->tool_calls) c->tool_calls = json_array();
        json_array_append_new(c->tool_calls, json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function", "function",
                                                       "name", call->name, "arguments", call->arguments));
        free(id);
        c->n_tools++;
    }
}

static void whole_choice_end(sv_job *j, sv_finish f) {
    oa_state *a = j->api;
    a->c[j->choice].finish = f;
}

static json_t *choice_json(const oa_state *a, const oa_choice *c, int index, int logprobs) {
    json_t *lp = !logprobs ? json_null() : a->chat ? json_pack("{s:O,s:n}", "content", c->logprobs ? c->logprobs : json_array(), "refusal")
                                                   : json_incref(c->logprobs ? c->logprobs : json_array());
    if (!a->chat)
        return json_pack("{s:i,s:s,s:o,s:s}", "index", index, "text", c->content ? c->content : "", "logprobs", lp, "finish_reason",
                         finish_reason(c));
    json_t *msg = json_pack("{s:s,s:o}", "role", "assistant", "content",
                            c->n_content || !c->n_tools ? json_string(c->content ? c->content : "") : json_null());
    if (c->n_reasoning) json_object_set_new(msg, "reasoning_content", json_string(c->reasoning));
    if (c->n_tools) json_object_set(msg, "tool_calls", c->tool_calls);
    return json_pack("{s:i,s:o,s:o,s:s}", "index", index, "message", msg, "logprobs", lp, "finish_reason", finish_reason(c));
}

static void whole_end(sv_job *j, st_status s, const char *error, sv_finish f, const sv_usage *u) {
    oa_state *a = j->api;
    if (f == SV_FINISH_CANCELLED) return;
    char *body;
    if (s != ST_OK) {
        body = sv_failure_openai(j, error);
    } else {
        json_t *r = json_pack("{s:s,s:s,s:I,s:s}", "id", a->id, "object", a->chat ? "chat.completion" : "text_completion",
                              "created", (json_int_t)a->created, "model", a->model);
        json_t *choices = json_array();
        for (int i = 0; i < a->n; i++) json_array_append_new(choices, choice_json(a, &a->c[i], i, j->gen.logprobs));
        json_object_set_new(r, "choices", choices);
        json_object_set_new(r, "usage", usage_json(u));
        json_object_set_new(r, "timings", timings_json(u));
        body = json_dumps(r, JSON_COMPACT);
        json_decref(r);
    }
    sv_job_write(j, body, strlen(body));
    free(body);
}

static const sv_job_format oa_stream = {stream_begin, stream_event, stream_end, oa_free, stream_choice_end};
static const sv_job_format oa_whole = {whole_begin, whole_event, whole_end, oa_free, whole_choice_end};

/* --- request parsing -------------------------------------------------------------------------- */

static const char *const chat_parts[] = {"text", NULL};

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

static int parse_messages(json_t *req, sv_message **out, size_t *n, sv_strpool *sp, sv_error *e) {
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
        if (sv_text_parts(json_object_get(m, "content"), f, chat_parts, sp, &sm->content, e)) return -1;
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
            sv_pool_keep(sp, (char *)calls);
            sm->tool_calls = calls;
            if (bad) return -1;
        }
        sm->tool_call_id = json_string_value(json_object_get(m, "tool_call_id"));
        sm->name = json_string_value(json_object_get(m, "name"));
    }
    return 0;
}

int sv_parse_tools(json_t *req, sv_chat *chat, sv_strpool *sp, sv_error *e) {
    json_t *tools = json_object_get(req, "tools");
    if (tools && json_is_null(tools)) tools = NULL;
    if (tools && !json_is_array(tools)) return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "tools", "'tools' must be an array");
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
    if (tools && json_array_size(tools)) chat->tools_json = sv_pool_keep(sp, json_dumps(tools, JSON_COMPACT));
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
        return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "tool_choice",
                            "'tool_choice' is '%s', which needs a non-empty 'tools'", chat->tool_choice == SV_TOOLS_REQUIRED ? "required" : "a named function");
    return 0;
}

/* The fields both endpoints share: sampling, stop, stream, n, max_tokens. */
/* The fields both endpoints share: sampling, n, logprobs (chat's shape), stop, stream, max_tokens. */
static int parse_common(sv_server *s, json_t *req, sv_job *j, int chat, long long *max_tokens, int *include_usage, sv_error *e) {
    long long k = 1;
    if (sv_parse_sampling(s, req, j, e)) return -1;
    if (sv_get_int(req, "n", 1, 128, &k, e) < 0) return -1;
    j->n_choices = (int)k;
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
    if (!chat) {
        json_t *lp = json_object_get(req, "logprobs");
        if (lp && !json_is_null(lp) && !(json_is_integer(lp) && json_integer_value(lp) == 0))
            return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "logprobs",
                                "'logprobs' is not supported on /v1/completions: ask /v1/chat/completions");
        return 0;
    }
    long long top = 0;
    if (sv_get_bool(req, "logprobs", &j->gen.logprobs, e) < 0 || sv_get_int(req, "top_logprobs", 0, SV_TOP_LOGPROBS, &top, e) < 0) return -1;
    if (top && !j->gen.logprobs)
        return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    j->gen.top_logprobs = (int)top;
    return 0;
}

int sv_parse_thinking(json_t *req, int *thinking, sv_error *e) {
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

/* json_object: one JSON object; json_schema: one that meets json_schema.schema, by constrained
 * decoding (a schema that cannot be enforced is a 400 naming the field inside it). */
static int parse_response_format(json_t *req, sv_job *j, int *json_object, sv_error *e) {
    json_t *rf = json_object_get(req, "response_format");
    if (!rf || json_is_null(rf)) return 0;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!json_is_object(rf) || !type)
        return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "response_format", "'response_format' must be an object with a 'type'");
    if (!strcmp(type, "json_schema")) {
        json_t *js = json_object_get(rf, "json_schema");
        if (!json_is_object(js))
            return sv_error_set(e, 400, "invalid_request_error", "missing_required_parameter", "response_format.json_schema",
                                "'response_format.json_schema' must be an object with a 'schema'");
        json_t *schema = json_object_get(js, "schema");
        *json_object = 1;
        if (!schema) return 0; /* no schema: any object */
        return sv_set_schema(j, schema, "response_format.json_schema.schema", e);
    }
    if (!strcmp(type, "json_object")) *json_object = 1;
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
    return a;
}

/* The choices' state, once the request says how many. */
static int alloc_choices(oa_state *a, int n, sv_error *e) {
    a->c = calloc((size_t)n, sizeof *a->c);
    if (!a->c) return sv_error_set(e, 500, "server_error", NULL, NULL, "out of memory for %d choices", n);
    a->n = n;
    return 0;
}

void sv_api_chat(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) {
    sv_job *j = sv_job_new();
    sv_strpool sp = {0};
    sv_message *msgs = NULL;
    sv_chat chat = {0};
    long long max_tokens = 0;
    oa_state *a = new_state(s, req, 1);
    j->api = a;
    j->fmt = &oa_whole;
    snprintf(j->endpoint, sizeof j->endpoint, "chat");
    int parallel = 1;
    int bad = parse_messages(req, &msgs, &chat.n_messages, &sp, e) || parse_common(s, req, j, 1, &max_tokens, &a->include_usage, e) ||
              sv_parse_thinking(req, &chat.enable_thinking, e) || sv_parse_tools(req, &chat, &sp, e) ||
              sv_get_bool(req, "parallel_tool_calls", &parallel, e) < 0 || parse_response_format(req, j, &chat.json_object, e);
    chat.messages = msgs;
    if (!bad) bad = sv_force_tool_call(s, j, &chat, parallel, e);
    if (!bad) bad = sv_prepare_chat(s, j, &chat, max_tokens, e, "messages");
    if (!bad) bad = alloc_choices(a, j->n_choices, e);
    free(msgs);
    sv_pool_free(&sp);
    if (bad) { sv_job_release(j); return; }
    j->gen.json_object = chat.json_object;
    j->reply_flags = SV_REPLY_REASONING | (chat.tools_json && chat.tool_choice != SV_TOOLS_NONE ? SV_REPLY_TOOLS : 0);
    if (j->stream) j->fmt = &oa_stream;
    sv_enqueue(s, j, out, e);
}

void sv_api_completions(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) {
    sv_job *j = sv_job_new();
    long long max_tokens = 0;
    oa_state *a = new_state(s, req, 0);
    j->api = a;
    j->fmt = &oa_whole;
    snprintf(j->endpoint, sizeof j->endpoint, "completions");
    int bad = parse_common(s, req, j, 0, &max_tokens, &a->include_usage, e);
    /* OpenAI's default for this endpoint is 16 tokens. */
    if (!bad) bad = sv_prepare_prompts(s, j, json_object_get(req, "prompt"), max_tokens ? max_tokens : 16, e);
    if (!bad) bad = alloc_choices(a, j->n_choices, e);
    if (bad) { sv_job_release(j); return; }
    j->reply_flags = 0;
    if (j->stream) j->fmt = &oa_stream;
    sv_enqueue(s, j, out, e);
}

/* POST /apply-template (llama-server's): the chat rendered as the model will read it. */
void sv_api_apply_template(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) {
    sv_strpool sp = {0};
    sv_message *msgs = NULL;
    sv_chat chat = {0};
    int bad = parse_messages(req, &msgs, &chat.n_messages, &sp, e) || sv_parse_thinking(req, &chat.enable_thinking, e) ||
              sv_parse_tools(req, &chat, &sp, e);
    chat.messages = msgs;
    sv_prompt p = {0};
    if (!bad && s->engine->ops->render(s->engine, &chat, &p) != ST_OK)
        bad = sv_error_set(e, 400, "invalid_request_error", NULL, "messages", "the chat could not be rendered: %s", st_last_error());
    free(msgs);
    sv_pool_free(&sp);
    if (bad) return;
    json_t *r = json_pack("{s:s}", "prompt", p.text);
    sv_prompt_free(&p);
    out->status = 200;
    out->body = json_dumps(r, JSON_COMPACT);
    out->content_type = "application/json";
    json_decref(r);
}
