/* api_responses.c: POST /v1/responses, OpenAI's Responses API (what the Codex CLI and the openai
 * SDK's responses.create speak), on the same engine port as chat.
 *
 * The request: input as a string or as items (messages with text parts; function_call and
 * function_call_output; reasoning, whose text goes back to the turn it belongs to), instructions
 * and system/developer messages joined into the one system turn Qwen's templates take, function
 * tools (the flat {type, name, parameters} shape; hosted tool types are left out, since nothing
 * here runs them; a namespace's tools are offered by their names, and a call of one says its
 * namespace; a custom tool, whose input is free text, is offered as a function of one string
 * "input" and called back as a custom_tool_call), tool_choice, parallel_tool_calls,
 * reasoning.effort (thinking on or off),
 * text.format (json_object, json_schema by constrained decoding), max_output_tokens and sampling.
 * previous_response_id continues a kept response (response_store.c): its conversation (input and
 * output items, those of the responses before it first) goes before this request's input, and
 * instructions are not carried over, as OpenAI's are not. A finished response is kept unless the
 * request says store: false; GET and DELETE /v1/responses/ID reach a kept one.
 *
 * The reply is a list of output items: a reasoning item (the thinking, as reasoning_text), a
 * message with one output_text part, function_call items. Streamed, each item opens with
 * response.output_item.added (and content_part.added), grows with its delta events and closes
 * with the .done events, between response.created / response.in_progress and the final
 * response.completed (response.incomplete when max_output_tokens cut it, response.failed on an
 * error), every event numbered by sequence_number. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/json_schema.h"
#include "server/internal.h"

typedef enum { ITEM_NONE, ITEM_REASONING, ITEM_MESSAGE, ITEM_CALL } item_kind;

typedef struct rs_state {
    char *id;
    sv_server *srv;
    json_t *conv;     /* the conversation through this request's input (kept with the output) */
    int store;        /* keep the finished response */
    char *prev_id;    /* previous_response_id, or NULL */
    json_t *echo;     /* the request's fields the response repeats (model, tools, ...) */
    long long created;
    json_t *output;   /* the items so far */
    json_t *tool_kinds; /* name -> {namespace, custom}: the tools a call needs more than a name for */
    item_kind open;   /* the item being streamed */
    char *text;       /* its text so far */
    size_t n_text;
    int seq;          /* sequence_number of the next event */
    int n_items;
} rs_state;

static void rs_free(void *p) {
    rs_state *a = p;
    if (!a) return;
    free(a->id);
    free(a->prev_id);
    json_decref(a->conv);
    json_decref(a->echo);
    json_decref(a->output);
    json_decref(a->tool_kinds);
    free(a->text);
    free(a);
}

static char *item_id(sv_job *j, const char *prefix) {
    rs_state *a = j->api;
    char *id = NULL;
    if (asprintf(&id, "%s_%s_%d", prefix, a->id + 5, a->n_items) < 0) return NULL;
    return id;
}

static void event(sv_job *j, const char *type, json_t *body) {
    rs_state *a = j->api;
    json_object_set_new(body, "type", json_string(type));
    json_object_set_new(body, "sequence_number", json_integer(a->seq++));
    sv_job_sse(j, type, body);
}

static json_t *usage_json(const sv_usage *u) {
    return json_pack("{s:i,s:{s:i},s:i,s:{s:i},s:i}", "input_tokens", u->prompt_tokens, "input_tokens_details", "cached_tokens",
                     u->cached_tokens, "output_tokens", u->completion_tokens, "output_tokens_details", "reasoning_tokens", 0,
                     "total_tokens", u->prompt_tokens + u->completion_tokens);
}

/* The response object: status "in_progress", "completed", "incomplete" or "failed". */
static json_t *response_json(sv_job *j, const char *status, const sv_usage *u, const char *error) {
    rs_state *a = j->api;
    json_t *r = json_pack("{s:s,s:s,s:I,s:s,s:O,s:n,s:s?,s:b}", "id", a->id, "object", "response", "created_at", (json_int_t)a->created,
                          "status", status, "output", a->output, "error", "previous_response_id", a->prev_id, "store", a->store);
    json_object_update(r, a->echo);
    json_object_set_new(r, "usage", u ? usage_json(u) : json_null());
    json_object_set_new(r, "incomplete_details", !strcmp(status, "incomplete") ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null());
    if (error) json_object_set_new(r, "error", json_pack("{s:s,s:s}", "code", "server_error", "message", error));
    return r;
}


static json_t *reasoning_item(const char *id, const char *text) {
    return json_pack("{s:s,s:s,s:[],s:[{s:s,s:s}]}", "type", "reasoning", "id", id, "summary", "content", "type", "reasoning_text",
                     "text", text);
}

static json_t *text_part(const char *text) {
    return json_pack("{s:s,s:s,s:[],s:[]}", "type", "output_text", "text", text, "annotations", "logprobs");
}

static json_t *message_item(const char *id, const char *status, json_t *content) {
    return json_pack("{s:s,s:s,s:s,s:s,s:o}", "type", "message", "id", id, "status", status, "role", "assistant", "content", content);
}

/* --- items: the same in both forms; streamed, each step also sends its events ------------------ */

static void close_item(sv_job *j) {
    rs_state *a = j->api;
    if (a->open == ITEM_NONE) return;
    json_t *item = json_array_get(a->output, json_array_size(a->output) - 1);
    int index = (int)json_array_size(a->output) - 1;
    const char *id = json_string_value(json_object_get(item, "id"));
    const char *text = a->text ? a->text : "";
    json_t *done;
    if (a->open == ITEM_REASONING) {
        done = reasoning_item(id, text);
        if (j->stream) {
            event(j, "response.reasoning_text.done", json_pack("{s:s,s:i,s:i,s:s}", "item_id", id, "output_index", index, "content_index", 0, "text", text));
            event(j, "response.content_part.done", json_pack("{s:s,s:i,s:i,s:{s:s,s:s}}", "item_id", id, "output_index", index,
                                                             "content_index", 0, "part", "type", "reasoning_text", "text", text));
        }
    } else {
        done = message_item(id, "completed", json_pack("[o]", text_part(text)));
        if (j->stream) {
            event(j, "response.output_text.done", json_pack("{s:s,s:i,s:i,s:s,s:[]}", "item_id", id, "output_index", index, "content_index", 0,
                                                            "text", text, "logprobs"));
            event(j, "response.content_part.done", json_pack("{s:s,s:i,s:i,s:o}", "item_id", id, "output_index", index, "content_index", 0,
                                                             "part", text_part(text)));
        }
    }
    if (j->stream) event(j, "response.output_item.done", json_pack("{s:i,s:O}", "output_index", index, "item", done));
    json_array_set_new(a->output, (size_t)index, done);
    a->open = ITEM_NONE;
    free(a->text);
    a->text = NULL;
    a->n_text = 0;
}

static void open_item(sv_job *j, item_kind kind) {
    rs_state *a = j->api;
    close_item(j);
    char *id = item_id(j, kind == ITEM_REASONING ? "rs" : "msg");
    int index = (int)json_array_size(a->output);
    json_t *item = kind == ITEM_REASONING ? json_pack("{s:s,s:s,s:[],s:[]}", "type", "reasoning", "id", id, "summary", "content")
                                          : message_item(id, "in_progress", json_array());
    json_array_append(a->output, item);
    if (j->stream) {
        event(j, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", index, "item", item));
        json_t *part = kind == ITEM_REASONING ? json_pack("{s:s,s:s}", "type", "reasoning_text", "text", "") : text_part("");
        event(j, "response.content_part.added", json_pack("{s:s,s:i,s:i,s:o}", "item_id", id, "output_index", index, "content_index", 0,
                                                          "part", part));
    } else {
        json_decref(item);
    }
    free(id);
    a->open = kind;
    a->n_items++;
}

static void on_event(sv_job *j, sv_event kind, const char *text, size_t len, const sv_tool_call *call) {
    rs_state *a = j->api;
    if (kind == SV_EVENT_TOOL_CALL) {
        close_item(j);
        json_t *tk = json_object_get(a->tool_kinds, call->name);
        int custom = json_is_true(json_object_get(tk, "custom"));
        char *id = item_id(j, custom ? "ctc" : "fc"), *call_id = item_id(j, "call");
        int index = (int)json_array_size(a->output);
        /* a custom tool's input is the text of the one argument it was offered with */
        json_t *args = custom ? json_loads(call->arguments, 0, NULL) : NULL;
        const char *input = json_string_value(json_object_get(args, "input"));
        const char *body = custom ? (input ? input : call->arguments) : call->arguments;
        const char *field = custom ? "input" : "arguments";
        json_t *done = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", custom ? "custom_tool_call" : "function_call", "id", id, "call_id",
                                 call_id, "name", call->name, field, body, "status", "completed");
        json_t *ns = json_object_get(tk, "namespace");
        if (ns) json_object_set(done, "namespace", ns);
        if (j->stream) {
            json_t *added = json_deep_copy(done);
            json_object_set_new(added, field, json_string(""));
            json_object_set_new(added, "status", json_string("in_progress"));
            event(j, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", index, "item", added));
            event(j, custom ? "response.custom_tool_call_input.delta" : "response.function_call_arguments.delta",
                  json_pack("{s:s,s:i,s:s}", "item_id", id, "output_index", index, "delta", body));
            if (custom)
                event(j, "response.custom_tool_call_input.done", json_pack("{s:s,s:i,s:s}", "item_id", id, "output_index", index, "input", body));
            else
                event(j, "response.function_call_arguments.done", json_pack("{s:s,s:i,s:s,s:s}", "item_id", id, "output_index", index, "name",
                                                                            call->name, "arguments", body));
            event(j, "response.output_item.done", json_pack("{s:i,s:O}", "output_index", index, "item", done));
        }
        json_decref(args);
        json_array_append_new(a->output, done);
        a->n_items++;
        free(id);
        free(call_id);
        return;
    }
    item_kind want = kind == SV_EVENT_REASONING ? ITEM_REASONING : ITEM_MESSAGE;
    if (a->open != want) open_item(j, want);
    sv_append(&a->text, &a->n_text, text, len);
    if (!j->stream) return;
    json_t *item = json_array_get(a->output, json_array_size(a->output) - 1);
    event(j, want == ITEM_REASONING ? "response.reasoning_text.delta" : "response.output_text.delta",
          json_pack("{s:s,s:i,s:i,s:s%}", "item_id", json_string_value(json_object_get(item, "id")), "output_index",
                    (int)json_array_size(a->output) - 1, "content_index", 0, "delta", text, len));
}

/* A finished response, kept for previous_response_id (unless store is false): the response and the
 * conversation through its output. */
static void keep(sv_job *j, json_t *response) {
    rs_state *a = j->api;
    if (!a->store || !a->conv) return;
    json_array_extend(a->conv, a->output);
    sv_rstore_put(a->srv->responses, a->id, response, a->conv);
}

static void stream_begin(sv_job *j) {
    event(j, "response.created", json_pack("{s:o}", "response", response_json(j, "in_progress", NULL, NULL)));
    event(j, "response.in_progress", json_pack("{s:o}", "response", response_json(j, "in_progress", NULL, NULL)));
}

static void stream_end(sv_job *j, st_status s, const char *error, sv_finish f, const sv_usage *u) {
    if (f == SV_FINISH_CANCELLED) return;
    close_item(j);
    if (s != ST_OK) {
        if (!j->begun) stream_begin(j);
        event(j, "response.failed", json_pack("{s:o}", "response", response_json(j, "failed", u, error)));
        return;
    }
    json_t *r = response_json(j, f == SV_FINISH_LENGTH ? "incomplete" : "completed", u, NULL);
    keep(j, r);
    event(j, f == SV_FINISH_LENGTH ? "response.incomplete" : "response.completed", json_pack("{s:o}", "response", r));
}

static void whole_begin(sv_job *j) {}

static void whole_end(sv_job *j, st_status s, const char *error, sv_finish f, const sv_usage *u) {
    if (f == SV_FINISH_CANCELLED) return;
    close_item(j);
    char *body;
    if (s != ST_OK) {
        body = sv_failure_openai(j, error);
    } else {
        json_t *r = response_json(j, f == SV_FINISH_LENGTH ? "incomplete" : "completed", u, NULL);
        keep(j, r);
        body = json_dumps(r, JSON_COMPACT);
        json_decref(r);
    }
    if (body) sv_job_write(j, body, strlen(body));
    free(body);
}

static const sv_job_format rs_stream = {stream_begin, on_event, stream_end, rs_free, NULL};
static const sv_job_format rs_whole = {whole_begin, on_event, whole_end, rs_free, NULL};

/* --- the request ------------------------------------------------------------------------------ */

typedef struct turns {
    sv_message *m;
    size_t n, cap;
    sv_tool_call **calls; /* each assistant turn's calls (owned) */
    char *system;         /* instructions and every system/developer message, joined */
    const char *reasoning; /* a reasoning item's text, for the assistant turn that follows */
} turns;

static sv_message *turn_add(turns *t, const char *role) {
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 8;
        t->m = realloc(t->m, t->cap * sizeof *t->m);
        t->calls = realloc(t->calls, t->cap * sizeof *t->calls);
    }
    sv_message *m = &t->m[t->n];
    memset(m, 0, sizeof *m);
    t->calls[t->n] = NULL;
    t->n++;
    m->role = role;
    m->content = "";
    if (!strcmp(role, "assistant")) {
        m->reasoning = t->reasoning;
        t->reasoning = NULL;
    }
    return m;
}

static void turns_free(turns *t) {
    for (size_t i = 0; i < t->n; i++) free(t->calls[i]);
    free(t->calls);
    free(t->m);
    free(t->system);
}

static void system_add(turns *t, const char *text) {
    if (!*text) return;
    char *s = NULL;
    if (asprintf(&s, "%s%s%s", t->system ? t->system : "", t->system ? "\n\n" : "", text) < 0) return;
    free(t->system);
    t->system = s;
}

static const char *const input_parts[] = {"input_text", "output_text", "text", NULL};

/* One input item; f names it in errors ("input[2]"). */
static int parse_item(json_t *it, const char *f, turns *t, sv_strpool *sp, sv_error *e) {
    if (!json_is_object(it)) return sv_error_set(e, 400, "invalid_request_error", "invalid_type", f, "'%s' must be an object", f);
    const char *type = json_string_value(json_object_get(it, "type"));
    const char *role = json_string_value(json_object_get(it, "role"));
    if (!type && role) type = "message";
    if (!type) return sv_error_set(e, 400, "invalid_request_error", "missing_required_parameter", f, "'%s.type' is required", f);
    char cf[128];
    snprintf(cf, sizeof cf, "%s.content", f);
    if (!strcmp(type, "message")) {
        const char *text;
        if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") && strcmp(role, "developer"))) {
            snprintf(cf, sizeof cf, "%s.role", f);
            return sv_error_set(e, 400, "invalid_request_error", "invalid_value", cf, "'%s' must be user, assistant, system or developer", cf);
        }
        if (sv_text_parts(json_object_get(it, "content"), cf, input_parts, sp, &text, e)) return -1;
        if (!strcmp(role, "system") || !strcmp(role, "developer")) system_add(t, text);
        else turn_add(t, role)->content = text;
        return 0;
    }
    if (!strcmp(type, "function_call") || !strcmp(type, "custom_tool_call")) {
        int custom = type[0] == 'c';
        const char *name = json_string_value(json_object_get(it, "name"));
        const char *args = json_string_value(json_object_get(it, custom ? "input" : "arguments"));
        if (!name || !args)
            return sv_error_set(e, 400, "invalid_request_error", "invalid_type", f, "'%s' must have name and %s strings", f, custom ? "input" : "arguments");
        if (custom) args = sv_pool_keep(sp, sv_dump(json_pack("{s:s}", "input", args))); /* as the function it was offered as */
        sv_message *m = t->n && !strcmp(t->m[t->n - 1].role, "assistant") ? &t->m[t->n - 1] : turn_add(t, "assistant");
        size_t k = (size_t)(m - t->m);
        sv_tool_call *c = realloc(t->calls[k], (m->n_tool_calls + 1) * sizeof *c);
        if (!c) return sv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        c[m->n_tool_calls++] = (sv_tool_call){json_string_value(json_object_get(it, "call_id")), name, args};
        t->calls[k] = c;
        m->tool_calls = c;
        return 0;
    }
    if (!strcmp(type, "function_call_output") || !strcmp(type, "custom_tool_call_output")) {
        sv_message *m = turn_add(t, "tool");
        m->tool_call_id = json_string_value(json_object_get(it, "call_id"));
        snprintf(cf, sizeof cf, "%s.output", f);
        return sv_text_parts(json_object_get(it, "output"), cf, input_parts, sp, &m->content, e);
    }
    if (!strcmp(type, "reasoning")) {
        /* its text (content, else the summary) is the next assistant turn's thinking */
        json_t *parts = json_object_get(it, "content");
        if (!json_array_size(parts)) parts = json_object_get(it, "summary");
        static const char *const reasoning_parts[] = {"reasoning_text", "summary_text", NULL};
        snprintf(cf, sizeof cf, "%s.content", f);
        return sv_text_parts(parts, cf, reasoning_parts, sp, &t->reasoning, e);
    }
    snprintf(cf, sizeof cf, "%s.type", f);
    return sv_error_set(e, 400, "invalid_request_error", "invalid_value", cf,
                        "'%s' is '%s': message, function_call, function_call_output, custom_tool_call, custom_tool_call_output and "
                        "reasoning items are supported", cf, type);
}

/* instructions, the kept conversation previous_response_id names, and input, into t; a->conv
 * becomes the conversation through this input (the items of both). */
static int parse_input(sv_server *s, json_t *req, rs_state *a, turns *t, sv_strpool *sp, sv_error *e) {
    const char *instructions = NULL, *prev = NULL;
    if (sv_get_string(req, "instructions", &instructions, e) < 0) return -1;
    else if (instructions) system_add(t, instructions);
    if (sv_get_string(req, "previous_response_id", &prev, e) < 0) return -1;
    json_t *in = json_object_get(req, "input");
    if (!in) return sv_error_set(e, 400, "invalid_request_error", "missing_required_parameter", "input", "'input' is required");
    if (!json_is_string(in) && (!json_is_array(in) || !json_array_size(in)))
        return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "input", "'input' must be a string or a non-empty array of items");
    size_t i;
    json_t *it;
    if (prev) {
        a->prev_id = strdup(prev);
        a->conv = sv_rstore_conversation(s->responses, prev);
        if (!a->conv)
            return sv_error_set(e, 400, "invalid_request_error", "previous_response_not_found", "previous_response_id",
                                "Previous response with id '%s' not found (it was not kept: store false, or pushed out by newer ones).", prev);
        json_array_foreach(a->conv, i, it) {
            char f[64];
            snprintf(f, sizeof f, "previous_response_id's item %zu", i);
            if (parse_item(it, f, t, sp, e)) return -1;
        }
    } else {
        a->conv = json_array();
    }
    if (json_is_string(in)) {
        turn_add(t, "user")->content = json_string_value(in);
        json_array_append_new(a->conv, json_pack("{s:s,s:s,s:s}", "type", "message", "role", "user", "content", json_string_value(in)));
        return 0;
    }
    json_array_foreach(in, i, it) {
        char f[32];
        snprintf(f, sizeof f, "input[%zu]", i);
        if (parse_item(it, f, t, sp, e)) return -1;
        json_array_append_new(a->conv, json_deep_copy(it)); /* the request is freed on another thread */
    }
    return 0;
}

/* One function or custom tool as chat's function (a custom one takes its text as "input"),
 * noted in kinds when a call of it needs more than its name (ns: its namespace, or NULL). */
static void add_tool(json_t *fns, json_t *kinds, json_t *t, const char *ns) {
    const char *type = json_string_value(json_object_get(t, "type"));
    int custom = type && !strcmp(type, "custom");
    if (!type || (strcmp(type, "function") && !custom)) return;
    json_t *name = json_object_get(t, "name");
    json_t *params = custom ? json_pack("{s:s,s:{s:{s:s,s:s}},s:[s],s:b}", "type", "object", "properties", "input", "type", "string",
                                        "description", "the tool's input, as free text", "required", "input", "additionalProperties", 0)
                            : json_incref(json_object_get(t, "parameters"));
    json_t *fn = json_pack("{s:O*,s:o*}", "name", name, "parameters", params);
    json_t *desc = json_object_get(t, "description");
    if (json_is_string(desc)) json_object_set(fn, "description", desc);
    json_array_append_new(fns, json_pack("{s:s,s:o}", "type", "function", "function", fn));
    if (json_is_string(name) && (custom || ns)) {
        json_t *k = json_object();
        if (custom) json_object_set_new(k, "custom", json_true());
        if (ns) json_object_set_new(k, "namespace", json_string(ns));
        json_object_set_new(kinds, json_string_value(name), k);
    }
}

/* The function and custom tools (and those of namespaces) as chat's functions, and tool_choice as
 * chat's, for sv_parse_tools; the tool types nothing here runs (web_search, file_search, ...) are
 * left out. */
static int parse_tools(json_t *req, rs_state *a, sv_chat *chat, sv_strpool *sp, json_t *echo, sv_error *e) {
    json_t *tools = json_object_get(req, "tools"), *tc = json_object_get(req, "tool_choice");
    json_t *chat_req = json_object(), *fns = json_array();
    size_t i, k;
    json_t *t, *inner;
    if (tools && !json_is_null(tools) && !json_is_array(tools)) {
        json_decref(chat_req);
        json_decref(fns);
        return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "tools", "'tools' must be an array");
    }
    a->tool_kinds = json_object();
    json_array_foreach(tools, i, t) {
        const char *type = json_string_value(json_object_get(t, "type"));
        if (type && !strcmp(type, "namespace")) {
            const char *ns = json_string_value(json_object_get(t, "name"));
            json_array_foreach(json_object_get(t, "tools"), k, inner) add_tool(fns, a->tool_kinds, inner, ns ? ns : "");
        } else {
            add_tool(fns, a->tool_kinds, t, NULL);
        }
    }
    json_object_set_new(chat_req, "tools", fns);
    json_object_set_new(echo, "tools", json_is_array(tools) ? json_incref(tools) : json_array());
    if (tc && json_is_object(tc)) {
        const char *type = json_string_value(json_object_get(tc, "type"));
        if (type && (!strcmp(type, "function") || !strcmp(type, "custom")))
            json_object_set_new(chat_req, "tool_choice", json_pack("{s:s,s:{s:O*}}", "type", "function", "function", "name", json_object_get(tc, "name")));
        else
            json_object_set(chat_req, "tool_choice", tc);
    } else if (tc) {
        json_object_set(chat_req, "tool_choice", tc);
    }
    json_object_set_new(echo, "tool_choice", tc ? json_incref(tc) : json_string("auto"));
    int bad = sv_parse_tools(chat_req, chat, sp, e);
    json_decref(chat_req);
    return bad;
}

/* reasoning.effort: none and minimal answer directly; low, medium and high think first. */
static int parse_reasoning(json_t *req, sv_chat *chat, json_t *echo, sv_error *e) {
    json_t *r = json_object_get(req, "reasoning");
    chat->enable_thinking = 1;
    json_object_set_new(echo, "reasoning", json_pack("{s:n,s:n}", "effort", "summary"));
    if (!r || json_is_null(r)) return 0;
    if (!json_is_object(r)) return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "reasoning", "'reasoning' must be an object");
    json_t *summary = json_object_get(r, "summary"); /* echoed; the thinking comes whole, as reasoning_text */
    if (json_is_string(summary)) json_object_set(json_object_get(echo, "reasoning"), "summary", summary);
    json_t *ef = json_object_get(r, "effort");
    const char *effort = json_string_value(ef);
    if (ef && !json_is_null(ef)) {
        if (!effort || (strcmp(effort, "none") && strcmp(effort, "minimal") && strcmp(effort, "low") && strcmp(effort, "medium") && strcmp(effort, "high")))
            return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "reasoning.effort",
                                "'reasoning.effort' must be none, minimal, low, medium or high");
        chat->enable_thinking = strcmp(effort, "none") && strcmp(effort, "minimal");
        json_object_set(json_object_get(echo, "reasoning"), "effort", ef);
    }
    return 0;
}

/* text.format: text, json_object, or json_schema {name, schema, strict}. */
static int parse_format(json_t *req, sv_job *j, sv_chat *chat, json_t *echo, sv_error *e) {
    json_t *text = json_object_get(req, "text"), *fmt = json_object_get(text, "format");
    json_object_set_new(echo, "text", json_pack("{s:o}", "format", fmt ? json_incref(fmt) : json_pack("{s:s}", "type", "text")));
    if (!fmt) return 0;
    const char *type = json_string_value(json_object_get(fmt, "type"));
    if (!type) return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "text.format", "'text.format' must be an object with a 'type'");
    if (!strcmp(type, "text")) return 0;
    if (!strcmp(type, "json_object")) { chat->json_object = 1; return 0; }
    if (!strcmp(type, "json_schema")) {
        chat->json_object = 1;
        json_t *schema = json_object_get(fmt, "schema");
        return schema ? sv_set_schema(j, schema, "text.format.schema", e) : 0;
    }
    return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "text.format.type",
                        "'text.format.type' must be text, json_object or json_schema, got '%s'", type);
}

/* A float as the decimal a user wrote (0.8, not 0.800000011920929). */
static double shortest(float f) {
    char b[32];
    snprintf(b, sizeof b, "%g", (double)f);
    return strtod(b, NULL);
}

void sv_api_responses(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) {
    sv_job *j = sv_job_new();
    rs_state *a = calloc(1, sizeof *a);
    a->id = sv_make_id(s, "resp_");
    a->srv = s;
    a->store = 1;
    a->created = (long long)time(NULL);
    a->output = json_array();
    const char *model = json_string_value(json_object_get(req, "model"));
    a->echo = json_pack("{s:s,s:O*,s:o}", "model", model && *model ? model : s->info.name, "instructions",
                        json_object_get(req, "instructions"), "metadata", json_object());
    j->api = a;
    j->fmt = &rs_whole;
    snprintf(j->endpoint, sizeof j->endpoint, "responses");
    turns t = {0};
    sv_strpool sp = {0};
    sv_chat chat = {0};
    long long max_tokens = 0;
    int parallel = 1, bad = 0;
    bad = sv_get_bool(req, "store", &a->store, e) < 0 || parse_input(s, req, a, &t, &sp, e) || sv_parse_sampling(s, req, j, e) || parse_reasoning(req, &chat, a->echo, e) ||
                    parse_tools(req, a, &chat, &sp, a->echo, e) || sv_get_bool(req, "parallel_tool_calls", &parallel, e) < 0 ||
                    parse_format(req, j, &chat, a->echo, e) || sv_get_bool(req, "stream", &j->stream, e) < 0 ||
                    sv_get_int(req, "max_output_tokens", 1, 1 << 30, &max_tokens, e) < 0;
    if (!bad) bad = sv_force_tool_call(s, j, &chat, parallel, e);
    json_object_set_new(a->echo, "parallel_tool_calls", json_boolean(parallel));
    json_object_set_new(a->echo, "temperature", json_real(shortest(j->gen.sampling.temperature)));
    json_object_set_new(a->echo, "top_p", json_real(shortest(j->gen.sampling.top_p)));
    json_object_set_new(a->echo, "max_output_tokens", max_tokens ? json_integer(max_tokens) : json_null());
    json_object_set_new(a->echo, "truncation", json_string("disabled"));
    if (!bad) {
        /* the system turn first: Qwen's templates take one, at the start */
        sv_message *msgs = calloc(t.n + 1, sizeof *msgs);
        size_t n = 0;
        if (t.system) msgs[n++] = (sv_message){.role = "system", .content = t.system};
        for (size_t i = 0; i < t.n; i++) msgs[n++] = t.m[i];
        chat.messages = msgs;
        chat.n_messages = n;
        if (!n) bad = sv_error_set(e, 400, "invalid_request_error", "invalid_value", "input", "'input' has no message");
        if (!bad) bad = sv_prepare_chat(s, j, &chat, max_tokens, e, "input");
        free(msgs);
    }
    turns_free(&t);
    sv_pool_free(&sp);
    if (bad) { sv_job_release(j); return; }
    j->gen.json_object = chat.json_object;
    j->reply_flags = SV_REPLY_REASONING | (chat.tools_json && chat.tool_choice != SV_TOOLS_NONE ? SV_REPLY_TOOLS : 0);
    if (j->stream) j->fmt = &rs_stream;
    sv_enqueue(s, j, out, e);
}

/* GET /v1/responses/ID: the kept response as it was answered. */
char *sv_api_response_get(sv_server *s, const char *id, sv_error *e) {
    json_t *r = sv_rstore_response(s->responses, id);
    if (!r) {
        sv_error_set(e, 404, "invalid_request_error", "not_found", NULL, "Response with id '%s' not found.", id);
        return NULL;
    }
    return sv_dump(r);
}

/* DELETE /v1/responses/ID: forgets it. */
char *sv_api_response_delete(sv_server *s, const char *id, sv_error *e) {
    if (!sv_rstore_delete(s->responses, id)) {
        sv_error_set(e, 404, "invalid_request_error", "not_found", NULL, "Response with id '%s' not found.", id);
        return NULL;
    }
    return sv_dump(json_pack("{s:s,s:s,s:b}", "id", id, "object", "response", "deleted", 1));
}
