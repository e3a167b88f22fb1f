/* api_common.c: what the OpenAI and Anthropic endpoints share: error bodies, typed field access
 * that names the field when its type or range is wrong, and the step from a chat (or a raw prompt)
 * to prompt ids checked against the context. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "engine/spec.h"
#include "server/internal.h"

int sv_error_set(sv_error *e, int status, const char *type, const char *code, const char *param, const char *fmt, ...) {
    e->status = status;
    snprintf(e->type, sizeof e->type, "%s", type);
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

char *sv_error_openai(const sv_error *e) {
    json_t *err = json_object();
    json_object_set_new(err, "message", json_string(e->message));
    json_object_set_new(err, "type", json_string(e->type));
    json_object_set_new(err, "param", *e->param ? json_string(e->param) : json_null());
    json_object_set_new(err, "code", *e->code ? json_string(e->code) : json_null());
    json_t *body = json_pack("{s:o}", "error", err);
    char *s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return s;
}

char *sv_error_anthropic(const sv_error *e) {
    /* Anthropic's errors have no param field: the message names it. */
    char msg[700];
    if (*e->param && !strstr(e->message, e->param)) snprintf(msg, sizeof msg, "%s: %s", e->param, e->message);
    else snprintf(msg, sizeof msg, "%s", e->message);
    const char *type = e->type;
    if (e->status == 401) type = "authentication_error";
    else if (e->status == 403) type = "permission_error";
    else if (e->status == 404) type = "not_found_error";
    else if (e->status == 413) type = "request_too_large";
    else if (e->status == 429) type = "rate_limit_error";
    else if (e->status >= 500) type = "api_error";
    else type = "invalid_request_error";
    json_t *body = json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type", type, "message", msg);
    char *s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return s;
}

static int wrong_type(json_t *v, const char *key, const char *want, sv_error *e) {
    const char *got = json_is_string(v) ? "a string" : json_is_integer(v) ? "an integer" : json_is_real(v) ? "a number"
                    : json_is_boolean(v) ? "a boolean" : json_is_array(v) ? "an array" : json_is_object(v) ? "an object" : "null";
    return sv_error_set(e, 400, "invalid_request_error", "invalid_type", key, "'%s' must be %s, got %s", key, want, got);
}

int sv_get_number(json_t *o, const char *key, double lo, double hi, double *out, sv_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return wrong_type(v, key, "a number", e);
    double x = json_number_value(v);
    if (x < lo || x > hi)
        return sv_error_set(e, 400, "invalid_request_error", "invalid_value", key, "'%s' must be between %g and %g, got %g", key, lo, hi, x);
    *out = x;
    return 1;
}

int sv_get_int(json_t *o, const char *key, long long lo, long long hi, long long *out, sv_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) return wrong_type(v, key, "an integer", e);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return sv_error_set(e, 400, "invalid_request_error", "invalid_value", key, "'%s' must be between %lld and %lld, got %lld", key, lo, hi, x);
    *out = x;
    return 1;
}

int sv_get_bool(json_t *o, const char *key, int *out, sv_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return wrong_type(v, key, "a boolean", e);
    *out = json_is_true(v);
    return 1;
}

int sv_get_string(json_t *o, const char *key, const char **out, sv_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return wrong_type(v, key, "a string", e);
    *out = json_string_value(v);
    return 1;
}

int sv_get_spec(json_t *o, sv_job *j, sv_error *e) {
    const char *type = NULL;
    long long n = 0;
    int mode = ST_SPEC_AUTO;
    j->gen.spec_mode = 0;
    j->gen.spec_draft = 0;
    int r = sv_get_string(o, "speculative.type", &type, e);
    if (r < 0) return -1;
    if (r && (!st_spec_parse_mode(type, &mode) || mode == ST_SPEC_AUTO))
        return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "speculative.type",
                            "'speculative.type' must be \"mtp\", \"ngram\" or \"none\", got \"%s\"", type);
    if (r) j->gen.spec_mode = 1 + mode;
    if ((r = sv_get_int(o, "speculative.n_max", 1, ST_SPEC_MAX_DRAFT, &n, e)) < 0) return -1;
    if (r) j->gen.spec_draft = (int)n;
    return 0;
}

int sv_get_stops(json_t *o, const char *key, sv_job *j, sv_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v)) return wrong_type(v, key, "a string or an array of strings", e);
    if (n > 16) return sv_error_set(e, 400, "invalid_request_error", "invalid_value", key, "'%s' has %zu entries, at most 16", key, n);
    j->stops = calloc(n + 1, sizeof *j->stops);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s)) {
            char field[64];
            snprintf(field, sizeof field, "%s[%zu]", key, i);
            return wrong_type(s, field, "a string", e);
        }
        j->stops[i] = strdup(json_string_value(s));
    }
    return 1;
}

char *sv_make_id(sv_server *s, const char *prefix) {
    char *id = NULL;
    unsigned long long n = atomic_fetch_add(&s->ids, 1);
    if (asprintf(&id, "%s%llx%06llx", prefix, (unsigned long long)s->started ^ 0x5eed, n) < 0) return NULL;
    return id;
}

/* max_tokens defaults to, and is capped by, the room left in the context. */
static int fit_context(sv_server *s, sv_job *j, long long max_tokens, sv_error *e, const char *param) {
    long long room = (long long)s->info.context_length - (long long)j->n_ids;
    if (room < 1)
        return sv_error_set(e, 400, "invalid_request_error", "context_length_exceeded", param,
                            "This model's maximum context length is %d tokens. However, your messages resulted in "
                            "%zu tokens. Please reduce the length of the messages.", s->info.context_length, j->n_ids);
    j->gen.max_tokens = (int)(max_tokens > 0 && max_tokens < room ? max_tokens : room);
    return 0;
}

int sv_prepare_chat(sv_server *s, sv_job *j, const sv_chat *chat, long long max_tokens, sv_error *e, const char *param) {
    sv_prompt p = {0};
    sv_engine *g = s->engine;
    sv_chat c = *chat;
    /* A forced tool call opens the reply: there is no room for thinking before it. */
    if (c.tools_json && c.tool_choice >= SV_TOOLS_REQUIRED) c.enable_thinking = 0;
    chat = &c;
    if (g->ops->render(g, chat, &p) != ST_OK)
        return sv_error_set(e, 400, "invalid_request_error", NULL, "messages", "the chat could not be rendered: %s", st_last_error());
    st_status st = g->ops->tokenize(g, p.text, strlen(p.text), 1, &j->ids, &j->n_ids);
    j->reply_prefix = p.reply_prefix;
    p.reply_prefix = NULL;
    sv_prompt_free(&p);
    if (st != ST_OK) return sv_error_set(e, 500, "server_error", NULL, NULL, "tokenize: %s", st_last_error());
    return fit_context(s, j, max_tokens, e, param);
}

int sv_prepare_text(sv_server *s, sv_job *j, const char *prompt, long long max_tokens, sv_error *e) {
    sv_engine *g = s->engine;
    if (g->ops->tokenize(g, prompt, strlen(prompt), 1, &j->ids, &j->n_ids) != ST_OK)
        return sv_error_set(e, 500, "server_error", NULL, NULL, "tokenize: %s", st_last_error());
    if (j->n_ids == 0) return sv_error_set(e, 400, "invalid_request_error", NULL, "prompt", "'prompt' is empty");
    j->reply_prefix = strdup("");
    return fit_context(s, j, max_tokens, e, "prompt");
}
