/* api_llama.c: llama-server's utility endpoints, in its request and response shapes, so its
 * clients work unchanged: POST /tokenize ({"content", "with_pieces"} to {"tokens"}), POST
 * /detokenize ({"tokens"} to {"content"}), GET /props (the defaults, the context, the template)
 * and GET /slots (the one slot: busy or not, its prompt progress). /apply-template renders a chat
 * and lives with the chat parsing (api_openai.c). These run on the HTTP thread: tokenizing and
 * detokenizing read the vocabulary only (engine_port.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "server/internal.h"
#include "text/utf8.h"

static void reply_json(sv_http_reply *out, json_t *r) {
    out->status = 200;
    out->body = json_dumps(r, JSON_COMPACT);
    out->content_type = "application/json";
    json_decref(r);
}

/* A piece as text when it is valid UTF-8 on its own, else its bytes (llama-server's choice). */
static json_t *piece_json(const char *p, size_t n) {
    json_t *s = json_stringn(p, n);
    if (s) return s;
    json_t *bytes = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(bytes, json_integer((unsigned char)p[i]));
    return bytes;
}

void sv_api_tokenize(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) {
    const char *content = NULL;
    int with_pieces = 0, add_special = 0, parse_special = 1;
    if (sv_get_string(req, "content", &content, e) < 0 || sv_get_bool(req, "with_pieces", &with_pieces, e) < 0 ||
        sv_get_bool(req, "add_special", &add_special, e) < 0 || sv_get_bool(req, "parse_special", &parse_special, e) < 0)
        return;
    if (!content) { sv_error_set(e, 400, "invalid_request_error", "missing_required_parameter", "content", "'content' is required"); return; }
    sv_engine *g = s->engine;
    int32_t *ids = NULL;
    size_t n = 0;
    if (g->ops->tokenize(g, content, strlen(content), parse_special, &ids, &n) != ST_OK) {
        sv_error_set(e, 500, "server_error", NULL, NULL, "tokenize: %s", st_last_error());
        return;
    }
    json_t *tokens = json_array();
    for (size_t i = 0; i < n; i++) {
        if (!with_pieces) { json_array_append_new(tokens, json_integer(ids[i])); continue; }
        char *text = NULL;
        size_t len = 0;
        json_t *piece = g->ops->detokenize(g, &ids[i], 1, &text, &len) == ST_OK ? piece_json(text, len) : json_string("");
        free(text);
        json_array_append_new(tokens, json_pack("{s:i,s:o}", "id", ids[i], "piece", piece));
    }
    free(ids);
    reply_json(out, json_pack("{s:o}", "tokens", tokens));
}

void sv_api_detokenize(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) {
    json_t *t = json_object_get(req, "tokens");
    if (!t) { sv_error_set(e, 400, "invalid_request_error", "missing_required_parameter", "tokens", "'tokens' is required"); return; }
    if (!json_is_array(t)) { sv_error_set(e, 400, "invalid_request_error", "invalid_type", "tokens", "'tokens' must be an array of ids"); return; }
    size_t n = json_array_size(t), i;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    json_t *v;
    json_array_foreach(t, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            free(ids);
            char f[48];
            snprintf(f, sizeof f, "tokens[%zu]", i);
            sv_error_set(e, 400, "invalid_request_error", "invalid_type", f, "'%s' must be a token id", f);
            return;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    char *text = NULL;
    size_t len = 0;
    st_status st = s->engine->ops->detokenize(s->engine, ids, n, &text, &len);
    free(ids);
    if (st != ST_OK) {
        sv_error_set(e, st == ST_ERR_RANGE ? 400 : 500, "invalid_request_error", "invalid_value", "tokens", "%s", st_last_error());
        return;
    }
    /* bytes that are not UTF-8 (a character cut between tokens) become U+FFFD */
    char *fixed = malloc(len * 3 + 1);
    size_t k = 0;
    for (size_t b = 0; fixed && b < len;) {
        uint32_t cp;
        size_t used = st_utf8_decode((const uint8_t *)text + b, len - b, &cp);
        if (cp == UINT32_MAX) { memcpy(fixed + k, "\xEF\xBF\xBD", 3); k += 3; }
        else { memcpy(fixed + k, text + b, used); k += used; }
        b += used;
    }
    free(text);
    if (!fixed) { sv_error_set(e, 500, "server_error", NULL, NULL, "out of memory"); return; }
    reply_json(out, json_pack("{s:s%}", "content", fixed, k));
    free(fixed);
}

static json_t *params_json(const sv_sampling *d) {
    return json_pack("{s:f,s:i,s:f,s:f,s:f,s:f}", "temperature", (double)d->temperature, "top_k", d->top_k, "top_p", (double)d->top_p,
                     "min_p", (double)d->min_p, "presence_penalty", (double)d->presence_penalty, "frequency_penalty",
                     (double)d->frequency_penalty);
}

char *sv_api_props(sv_server *s) {
    json_t *r = json_pack("{s:{s:i,s:o},s:i,s:s,s:s,s:{s:b,s:b},s:b}", "default_generation_settings", "n_ctx", s->info.context_length,
                          "params", params_json(&s->defaults), "total_slots", s->info.parallel > 0 ? s->info.parallel : 1, "model_alias", s->info.name, "build_info", "strata",
                          "modalities", "vision", 0, "audio", 0, "webui", s->cfg.webui);
    json_object_set_new(r, "chat_template", s->info.chat_template ? json_string(s->info.chat_template) : json_null());
    return sv_dump(r);
}

char *sv_api_slots(sv_server *s) {
    size_t waiting, done, total, cached;
    int busy;
    sv_queue_depth(s, &waiting, &busy, &done, &total, &cached);
    json_t *r = json_pack("[{s:i,s:i,s:b,s:o,s:{s:I,s:I,s:I},s:I}]", "id", 0, "n_ctx", s->info.context_length, "is_processing", busy,
                          "params", params_json(&s->defaults), "prompt_progress", "done", (json_int_t)done, "total", (json_int_t)total,
                          "cached", (json_int_t)cached, "queued", (json_int_t)waiting);
    return sv_dump(r);
}
