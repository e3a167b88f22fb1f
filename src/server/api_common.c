/* api_common.c: what the OpenAI and Anthropic endpoints share: error bodies, typed field access
 * that names the field when its type or range is wrong, and the step from a chat (or a raw prompt)
 * to prompt ids checked against the context. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "engine/spec.h"
#include "engine/json_schema.h"
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

void sv_sampling_settle(sv_sampling *sp) {
    if (sp->top_p <= 0.0f) {
        sp->temperature = 0.0f;
        sp->top_p = 1.0f;
    }
}

int sv_set_schema(sv_job *j, json_t *schema, const char *field, sv_error *e) {
    if (!json_is_object(schema) && !json_is_boolean(schema))
        return sv_error_set(e, 400, "invalid_request_error", "invalid_type", field, "'%s' must be a JSON Schema object", field);
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    st_status st = text ? st_json_schema_compile(text, strlen(text), &j->schema) : ST_ERR_NOMEM;
    free(text);
    if (st == ST_OK) {
        j->gen.schema = j->schema;
        return 0;
    }
    /* the message starts with the path inside the schema: "properties.age.type: ..." */
    const char *msg = st_last_error();
    char param[128];
    const char *colon = strstr(msg, ": ");
    if (colon && strncmp(msg, "(root)", 6)) snprintf(param, sizeof param, "%s.%.*s", field, (int)(colon - msg), msg);
    else snprintf(param, sizeof param, "%s", field);
    return sv_error_set(e, st == ST_ERR_NOMEM ? 500 : 400, "invalid_request_error", "invalid_schema", param,
                        "'%s' cannot be enforced: %s", param, colon ? colon + 2 : msg);
}

int sv_set_tool_schema(sv_server *s, sv_job *j, const sv_chat *chat, int parallel, sv_error *e) {
    if (!chat->tools_json || chat->tool_choice < SV_TOOLS_REQUIRED) return 0;
    const char *only = chat->tool_choice == SV_TOOLS_NAMED ? chat->tool_name : NULL;
    st_status st = st_json_schema_compile_tools(chat->tools_json, strlen(chat->tools_json), only, parallel, s->info.tool_xml, &j->schema);
    if (st == ST_OK) {
        j->gen.schema = j->schema;
        return 0;
    }
    const char *msg = st_last_error();
    const char *colon = strstr(msg, ": ");
    char param[128];
    snprintf(param, sizeof param, "%.*s", colon ? (int)(colon - msg) : (int)strlen(msg), msg);
    return sv_error_set(e, st == ST_ERR_NOMEM ? 500 : 400, "invalid_request_error", "invalid_schema", param,
                        "the forced tool call cannot be enforced: %s", msg);
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

/* One prompt of /v1/completions: a string (tokenized as text) or an array of token ids. */
static int one_prompt(sv_server *s, json_t *p, const char *field, int32_t **ids, size_t *n, sv_error *e) {
    sv_engine *g = s->engine;
    if (json_is_string(p)) {
        if (g->ops->tokenize(g, json_string_value(p), json_string_length(p), 1, ids, n) != ST_OK)
            return sv_error_set(e, 500, "server_error", NULL, NULL, "tokenize: %s", st_last_error());
    } else {
        size_t k = json_array_size(p), i;
        json_t *v;
        *ids = malloc((k ? k : 1) * sizeof **ids);
        *n = k;
        json_array_foreach(p, i, v) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
                return sv_error_set(e, 400, "invalid_request_error", "invalid_type", field, "'%s[%zu]' must be a token id", field, i);
            (*ids)[i] = (int32_t)json_integer_value(v);
        }
        char *text = NULL;
        size_t len = 0;
        if (g->ops->detokenize(g, *ids, k, &text, &len) != ST_OK) /* checks every id against the vocabulary */
            return sv_error_set(e, 400, "invalid_request_error", "invalid_value", field, "'%s': %s", field, st_last_error());
        free(text);
    }
    if (!*n) return sv_error_set(e, 400, "invalid_request_error", NULL, field, "'%s' is empty", field);
    return 0;
}

int sv_prepare_prompts(sv_server *s, sv_job *j, json_t *prompt, long long max_tokens, sv_error *e) {
    if (!prompt) return sv_error_set(e, 400, "invalid_request_error", "missing_required_parameter", "prompt", "'prompt' is required");
    /* a string, an array of ids, or an array of those: one or more prompts */
    int many = json_is_array(prompt) && json_array_size(prompt) && !json_is_integer(json_array_get(prompt, 0));
    size_t n_prompts = many ? json_array_size(prompt) : 1;
    if (!json_is_string(prompt) && !json_is_array(prompt))
        return sv_error_set(e, 400, "invalid_request_error", "invalid_type", "prompt", "'prompt' must be a string, an array of strings, of token ids, or of arrays of token ids");
    if (n_prompts * (size_t)j->n_choices > 128)
        return sv_error_set(e, 400, "invalid_request_error", "invalid_value", "prompt", "%zu prompts times n = %d is more than 128 choices", n_prompts, j->n_choices);
    int n = j->n_choices;
    j->n_choices = (int)n_prompts * n;
    j->choice_ids = calloc((size_t)j->n_choices, sizeof *j->choice_ids);
    j->choice_n = calloc((size_t)j->n_choices, sizeof *j->choice_n);
    if (!j->choice_ids || !j->choice_n) return sv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    size_t longest = 0;
    for (size_t p = 0; p < n_prompts; p++) {
        char field[32];
        snprintf(field, sizeof field, many ? "prompt[%zu]" : "prompt", p);
        json_t *one = many ? json_array_get(prompt, p) : prompt;
        if (!json_is_string(one) && !json_is_array(one))
            return sv_error_set(e, 400, "invalid_request_error", "invalid_type", field, "'%s' must be a string or an array of token ids", field);
        int32_t *ids = NULL;
        size_t k = 0;
        int bad = one_prompt(s, one, field, &ids, &k, e);
        for (int c = 0; c < n; c++) {
            j->choice_ids[p * (size_t)n + (size_t)c] = ids;
            j->choice_n[p * (size_t)n + (size_t)c] = k;
        }
        if (bad) return -1;
        if (k > longest) longest = k;
    }
    /* the longest prompt decides the room (and the context check names it) */
    j->n_ids = longest;
    j->reply_prefix = strdup("");
    int r = fit_context(s, j, max_tokens, e, "prompt");
    j->n_ids = 0;
    return r;
}

int sv_prepare_text(sv_server *s, sv_job *j, const char *prompt, long long max_tokens, sv_error *e) {
    sv_engine *g = s->engine;
    if (g->ops->tokenize(g, prompt, strlen(prompt), 1, &j->ids, &j->n_ids) != ST_OK)
        return sv_error_set(e, 500, "server_error", NULL, NULL, "tokenize: %s", st_last_error());
    if (j->n_ids == 0) return sv_error_set(e, 400, "invalid_request_error", NULL, "prompt", "'prompt' is empty");
    j->reply_prefix = strdup("");
    return fit_context(s, j, max_tokens, e, "prompt");
}

const char *sv_pool_keep(sv_strpool *sp, char *s) {
    char **p = realloc(sp->p, (sp->n + 1) * sizeof *sp->p);
    if (!p) { free(s); return ""; }
    sp->p = p;
    sp->p[sp->n++] = s;
    return s;
}

void sv_pool_free(sv_strpool *sp) {
    for (size_t i = 0; i < sp->n; i++) free(sp->p[i]);
    free(sp->p);
    sp->p = NULL;
    sp->n = 0;
}

int sv_text_parts(json_t *c, const char *field, const char *const *types, sv_strpool *sp, const char **out, sv_error *e) {
    if (!c || json_is_null(c)) { *out = ""; return 0; }
    if (json_is_string(c)) { *out = json_string_value(c); return 0; }
    if (!json_is_array(c))
        return sv_error_set(e, 400, "invalid_request_error", "invalid_type", field, "'%s' must be a string or an array of content parts", field);
    size_t total = 0, i;
    json_t *part;
    json_array_foreach(c, i, part) {
        char f[160];
        snprintf(f, sizeof f, "%s[%zu]", field, i);
        const char *type = json_string_value(json_object_get(part, "type"));
        const char *text = json_string_value(json_object_get(part, "text"));
        if (!json_is_object(part) || !type)
            return sv_error_set(e, 400, "invalid_request_error", "invalid_type", f, "'%s' must be an object with a 'type'", f);
        int known = 0;
        for (const char *const *t = types; *t; t++) known |= !strcmp(type, *t);
        if (!known || !text)
            return sv_error_set(e, 400, "invalid_request_error", "invalid_value", f, "'%s' is of type '%s': only text parts are supported", f, type);
        total += strlen(text) + 1;
    }
    char *s = malloc(total + 1), *w = s;
    if (!s) return sv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    json_array_foreach(c, i, part) {
        const char *text = json_string_value(json_object_get(part, "text"));
        if (i) *w++ = '\n';
        size_t n = strlen(text);
        memcpy(w, text, n);
        w += n;
    }
    *w = 0;
    *out = sv_pool_keep(sp, s);
    return 0;
}

int sv_parse_sampling(sv_server *s, json_t *req, sv_job *j, sv_error *e) {
    sv_sampling *sp = &j->gen.sampling;
    double x;
    long long k;
    int r;
    *sp = s->defaults;
    if ((r = sv_get_number(req, "temperature", 0, 2, &x, e)) < 0) return -1;
    if (r) sp->temperature = (float)x;
    if ((r = sv_get_number(req, "top_p", 0, 1, &x, e)) < 0) return -1;
    if (r) sp->top_p = (float)x;
    if ((r = sv_get_int(req, "top_k", 0, 1 << 20, &k, e)) < 0) return -1;
    if (r) sp->top_k = (int)k;
    sv_sampling_settle(sp);
    if ((r = sv_get_number(req, "min_p", 0, 1, &x, e)) < 0) return -1;
    if (r) sp->min_p = (float)x;
    if ((r = sv_get_number(req, "presence_penalty", -2, 2, &x, e)) < 0) return -1;
    if (r) sp->presence_penalty = (float)x;
    if ((r = sv_get_number(req, "frequency_penalty", -2, 2, &x, e)) < 0) return -1;
    if (r) sp->frequency_penalty = (float)x;
    if ((r = sv_get_int(req, "seed", -(1LL << 62), 1LL << 62, &k, e)) < 0) return -1;
    if (r) { sp->seed = (uint64_t)k; sp->has_seed = 1; }
    j->gen.ignore_eos = 0;
    if (sv_get_bool(req, "ignore_eos", &j->gen.ignore_eos, e) < 0) return -1;
    return 0;
}

void sv_append(char **s, size_t *n, const char *t, size_t len) {
    char *p = realloc(*s, *n + len + 1);
    if (!p) return;
    *s = p;
    memcpy(*s + *n, t, len);
    *n += len;
    (*s)[*n] = 0;
}

char *sv_dump(json_t *v) {
    char *t = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return t;
}

char *sv_failure_openai(sv_job *j, const char *error) {
    sv_error e;
    sv_error_set(&e, j->fail_status, "server_error", j->fail_status == 503 ? "shutting_down" : NULL, NULL, "%s", error);
    j->http_status = j->fail_status;
    return sv_error_openai(&e);
}

int sv_force_tool_call(sv_server *s, sv_job *j, sv_chat *chat, int parallel, sv_error *e) {
    j->one_call = !parallel;
    if (!chat->tools_json || chat->tool_choice < SV_TOOLS_REQUIRED) return 0;
    /* the call is the constraint (its name and arguments that fit the tool), in place of a
     * response format: a forced call opens the reply with <tool_call> */
    chat->json_object = 0;
    st_json_schema_free(j->schema);
    j->schema = NULL;
    j->gen.schema = NULL;
    return sv_set_tool_schema(s, j, chat, parallel, e);
}
