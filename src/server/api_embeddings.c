/* api_embeddings.c: POST /v1/embeddings, OpenAI's shape, behind `serve --embeddings`. The input is
 * a string, an array of strings, an array of token ids, or an array of those; each becomes one
 * embedding: the engine's pooled final hidden state (engine_port.h embed: the last position's,
 * unit length). It runs on the engine thread, queued like a generation, because it uses the one
 * session: the conversation the session held is gone after it (the next chat reads its prompt
 * afresh). encoding_format "float" gives numbers, "base64" the little-endian float32 bytes (what
 * the openai SDK asks for by default and decodes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "server/internal.h"

typedef struct embed_op {
    char model[128];
    int base64;
} embed_op;

static char *base64(const unsigned char *p, size_t n) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc(4 * ((n + 2) / 3) + 1), *w = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *w++ = abc[v >> 18 & 63];
        *w++ = abc[v >> 12 & 63];
        *w++ = i + 1 < n ? abc[v >> 6 & 63] : '=';
        *w++ = i + 2 < n ? abc[v & 63] : '=';
    }
    *w = 0;
    return out;
}

static void run_embed(sv_server *s, sv_job *j) {
    embed_op *op = j->api;
    json_t *data = json_array();
    float *vec = malloc(65536 * sizeof *vec);
    long long tokens = 0;
    const char *failed = NULL;
    for (int i = 0; vec && i < j->n_choices && !failed; i++) {
        size_t dim = 0;
        if (s->engine->ops->embed(s->engine, j->choice_ids[i], j->choice_n[i], vec, 65536, &dim) != ST_OK) {
            failed = st_last_error();
            break;
        }
        tokens += (long long)j->choice_n[i];
        json_t *e;
        if (op->base64) {
            char *b = base64((const unsigned char *)vec, dim * sizeof *vec); /* the host is little-endian (x86-64) */
            e = json_string(b ? b : "");
            free(b);
        } else {
            e = json_array();
            for (size_t k = 0; k < dim; k++) json_array_append_new(e, json_real(vec[k]));
        }
        json_array_append_new(data, json_pack("{s:s,s:i,s:o}", "object", "embedding", "index", i, "embedding", e));
    }
    char *body;
    if (failed || !vec) {
        sv_error e;
        sv_error_set(&e, 500, "server_error", NULL, NULL, "embeddings: %s", failed ? failed : "out of memory");
        body = sv_error_openai(&e);
        j->http_status = 500;
        json_decref(data);
    } else {
        body = sv_dump(json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data, "model", op->model, "usage",
                                 "prompt_tokens", (json_int_t)tokens, "total_tokens", (json_int_t)tokens));
    }
    free(vec);
    if (body) sv_job_write(j, body, strlen(body));
    free(body);
}

void sv_api_embeddings(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e) {
    if (!s->cfg.embeddings || !s->engine->ops->embed) {
        sv_error_set(e, 501, "invalid_request_error", "embeddings_disabled", NULL,
                     "this server does not compute embeddings: start it with --embeddings");
        return;
    }
    const char *format = "float", *model = NULL;
    if (sv_get_string(req, "encoding_format", &format, e) < 0 || sv_get_string(req, "model", &model, e) < 0) return;
    if (strcmp(format, "float") && strcmp(format, "base64")) {
        sv_error_set(e, 400, "invalid_request_error", "invalid_value", "encoding_format", "'encoding_format' must be float or base64");
        return;
    }
    if (json_object_get(req, "dimensions") && !json_is_null(json_object_get(req, "dimensions"))) {
        sv_error_set(e, 400, "invalid_request_error", "invalid_value", "dimensions",
                     "'dimensions' cannot be chosen: the embedding is the model's hidden state, of its width");
        return;
    }
    sv_job *j = sv_job_new();
    embed_op *op = calloc(1, sizeof *op);
    snprintf(op->model, sizeof op->model, "%s", model && *model ? model : s->info.name);
    op->base64 = !strcmp(format, "base64");
    j->api = op;
    j->control = run_embed;
    j->n_choices = 1;
    snprintf(j->endpoint, sizeof j->endpoint, "embeddings");
    /* the same forms as /v1/completions' prompt, one embedding each */
    json_t *input = json_object_get(req, "input");
    json_t *as_prompt = json_pack("{s:O*}", "prompt", input);
    int bad = sv_prepare_prompts(s, j, input ? json_object_get(as_prompt, "prompt") : NULL, 1, e);
    json_decref(as_prompt);
    if (bad) {
        /* the prompt's checks name 'prompt': here the field is 'input' */
        if (!strncmp(e->param, "prompt", 6)) {
            char p[128];
            snprintf(p, sizeof p, "input%s", e->param + 6);
            snprintf(e->param, sizeof e->param, "%s", p);
        }
        sv_job_release(j);
        return;
    }
    sv_enqueue(s, j, out, e);
}
