/* engine_echo.c: the deterministic stand-in engine used by the server's own tests.
 *
 * Selected with `strata serve --engine echo` (never the default). It runs no model: it renders chats
 * in Qwen's ChatML shape, tokenizes one byte per token (plus two special ids for <|im_start|> and
 * <|im_end|>), and "generates" a reply computed from the last user message, one byte per token, so
 * every path of the server (streaming, UTF-8 split across pieces, reasoning, tool calls, stop strings,
 * max_tokens, cancel, prompt progress, reuse counts) can be tested without weights.
 *
 * What it answers (the last user message decides):
 *   (thinking on)         a reasoning block first: "The user wrote N bytes.\n</think>\n\n"
 *   <tool_response>X...   "The tool returned: X"
 *   /tool NAME {ARGS}     a JSON tool call:  <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>
 *   /xmltool NAME K=V     Qwen 3.5's XML tool call with one parameter
 *   /repeat N WORD        "WORD " N times
 *   /forever              "tick " until cancelled or out of tokens, 1000 tokens a second (as a fast
 *                         model: an unpaced flood would only measure how fast a client can parse)
 *   /params               the sampling parameters it was given, as "key=value" pairs
 *   /json (or json mode)  {"echo": "<message>"}
 *   anything else         "Echo: <message>"
 * A forced tool call (tool_choice required or named) is completed with the first (or named) tool
 * and empty arguments. Reuse: the ids of the last prompt and reply are held, and the common prefix
 * with the next prompt (at most all but one token) is reported as cached_tokens. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/clock.h"
#include "base/status.h"
#include "server/engine_port.h"

enum { ECHO_IM_START = 256, ECHO_IM_END = 257, ECHO_CHUNK = 64 };

typedef struct echo_engine {
    sv_engine base;
    int context_length;
    int32_t *held; /* the ids of the last prompt and reply */
    size_t n_held, cap_held;
} echo_engine;

/* A growable string for rendering. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1) cap *= 2;
        b->p = realloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void echo_info(sv_engine *e, sv_model_info *out) {
    echo_engine *x = (echo_engine *)e;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "echo");
    out->context_length = x->context_length;
    snprintf(out->fingerprint, sizeof out->fingerprint, "echo-engine-v1");
    out->chat_template = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}";
}

static void render_tools(sbuf *b, const char *tools_json) {
    sb_str(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
              "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    json_t *tools = json_loads(tools_json, 0, NULL);
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        char *s = json_dumps(t, JSON_COMPACT);
        sb_str(b, "\n");
        if (s) sb_str(b, s);
        free(s);
    }
    json_decref(tools);
    sb_str(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
              "within <tool_call></tool_call> XML tags.");
}

static st_status echo_render(sv_engine *e, const sv_chat *chat, sv_prompt *out) {
    sbuf b = {0};
    int tools = chat->tools_json && chat->tool_choice != SV_TOOLS_NONE;
    size_t first = 0;
    if (tools || (chat->n_messages && !strcmp(chat->messages[0].role, "system"))) {
        sb_str(&b, "<|im_start|>system\n");
        if (chat->n_messages && !strcmp(chat->messages[0].role, "system")) {
            sb_str(&b, chat->messages[0].content);
            first = 1;
            if (tools) sb_str(&b, "\n\n");
        }
        if (tools) render_tools(&b, chat->tools_json);
        sb_str(&b, "<|im_end|>\n");
    }
    for (size_t i = first; i < chat->n_messages; i++) {
        const sv_message *m = &chat->messages[i];
        if (!strcmp(m->role, "tool")) {
            /* Consecutive tool results share one user turn, as in Qwen's template. */
            if (i == first || strcmp(chat->messages[i - 1].role, "tool")) sb_str(&b, "<|im_start|>user");
            sb_str(&b, "\n<tool_response>\n");
            sb_str(&b, m->content);
            sb_str(&b, "\n</tool_response>");
            if (i + 1 == chat->n_messages || strcmp(chat->messages[i + 1].role, "tool")) sb_str(&b, "<|im_end|>\n");
            continue;
        }
        sb_str(&b, "<|im_start|>");
        sb_str(&b, m->role);
        sb_str(&b, "\n");
        if (!strcmp(m->role, "assistant") && m->reasoning && *m->reasoning) {
            sb_str(&b, "<think>\n");
            sb_str(&b, m->reasoning);
            sb_str(&b, "\n</think>\n\n");
        }
        sb_str(&b, m->content);
        for (size_t k = 0; k < m->n_tool_calls; k++) {
            if (k || *m->content) sb_str(&b, "\n");
            sb_str(&b, "<tool_call>\n{\"name\": \"");
            sb_str(&b, m->tool_calls[k].name);
            sb_str(&b, "\", \"arguments\": ");
            sb_str(&b, m->tool_calls[k].arguments);
            sb_str(&b, "}\n</tool_call>");
        }
        sb_str(&b, "<|im_end|>\n");
    }
    sb_str(&b, "<|im_start|>assistant\n");
    size_t reply_start = b.n;
    sb_str(&b, chat->enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
    /* The empty think block of "thinking off" is part of the prompt, not of the reply. */
    if (!chat->enable_thinking) reply_start = b.n;
    if (tools && chat->tool_choice == SV_TOOLS_REQUIRED) sb_str(&b, "<tool_call>\n");
    if (tools && chat->tool_choice == SV_TOOLS_NAMED) {
        sb_str(&b, "<tool_call>\n{\"name\": \"");
        sb_str(&b, chat->tool_name);
        sb_str(&b, "\", \"arguments\": ");
    }
    out->text = b.p;
    out->reply_prefix = strdup(b.p + reply_start);
    return ST_OK;
}

static st_status echo_tokenize(sv_engine *e, const char *text, size_t len, int special, int32_t **ids, size_t *n) {
    int32_t *v = malloc((len + 1) * sizeof *v);
    if (!v) return st_fail(ST_ERR_NOMEM, "echo: tokenize: out of memory for %zu bytes", len);
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        if (special && len - i >= 12 && !memcmp(text + i, "<|im_start|>", 12)) {
            v[k++] = ECHO_IM_START;
            i += 12;
        } else if (special && len - i >= 10 && !memcmp(text + i, "<|im_end|>", 10)) {
            v[k++] = ECHO_IM_END;
            i += 10;
        } else {
            v[k++] = (unsigned char)text[i++];
        }
    }
    *ids = v;
    *n = k;
    return ST_OK;
}

static char *echo_text(const int32_t *ids, size_t n) {
    sbuf b = {0};
    sb_add(&b, "", 0);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == ECHO_IM_START) sb_str(&b, "<|im_start|>");
        else if (ids[i] == ECHO_IM_END) sb_str(&b, "<|im_end|>");
        else { char c = (char)ids[i]; sb_add(&b, &c, 1); }
    }
    return b.p;
}

static st_status echo_detokenize(sv_engine *e, const int32_t *ids, size_t n, char **text, size_t *len) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] > ECHO_IM_END) return st_fail(ST_ERR_RANGE, "token %zu is %d, outside the vocabulary of %d", i, ids[i], ECHO_IM_END + 1);
    *text = echo_text(ids, n);
    *len = strlen(*text);
    return ST_OK;
}

/* A deterministic stand-in: 16 dimensions from the byte counts, unit length. */
static st_status echo_embed(sv_engine *e, const int32_t *ids, size_t n, float *out, size_t cap, size_t *dim) {
    if (cap < 16) return st_fail(ST_ERR_INVALID, "echo: embed needs 16 floats");
    double norm = 0;
    for (int k = 0; k < 16; k++) out[k] = 0;
    for (size_t i = 0; i < n; i++) out[ids[i] % 16] += 1.0f;
    for (int k = 0; k < 16; k++) norm += (double)out[k] * out[k];
    for (int k = 0; k < 16; k++) out[k] = norm > 0 ? (float)(out[k] / sqrt(norm)) : 0.0f;
    *dim = 16;
    return ST_OK;
}

/* The text of the last user turn and what follows the last "assistant\n" header. */
static void last_turns(const char *prompt, char **user, const char **gen_prefix) {
    const char *u = NULL, *p = prompt, *q;
    while ((q = strstr(p, "<|im_start|>user\n"))) { u = q + 17; p = q + 1; }
    *user = strdup(prompt); /* a raw completion prompt has no turns: all of it is the message */
    if (u) {
        const char *end = strstr(u, "<|im_end|>");
        free(*user);
        *user = strndup(u, end ? (size_t)(end - u) : strlen(u));
    }
    const char *a = NULL;
    p = prompt;
    while ((q = strstr(p, "<|im_start|>assistant\n"))) { a = q + 22; p = q + 1; }
    *gen_prefix = a ? a : "";
}

/* The first tool's name in the rendered <tools> list. */
static void first_tool_name(const char *prompt, sbuf *b) {
    const char *t = strstr(prompt, "<tools>\n");
    const char *n = t ? strstr(t, "\"name\":\"") : NULL;
    if (!n) { sb_str(b, "none"); return; }
    n += 8;
    const char *e = strchr(n, '"');
    sb_add(b, n, e ? (size_t)(e - n) : 0);
}

static void json_quote(sbuf *b, const char *s) {
    json_t *j = json_string(s);
    char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    sb_str(b, q ? q : "\"\"");
    free(q);
    json_decref(j);
}

/* The reply for a prompt; *forever is set when its text from *loop on repeats without end. */
static char *compose_reply(const char *prompt, const sv_generate *req, int *forever, size_t *loop) {
    char *user;
    const char *gen;
    last_turns(prompt, &user, &gen);
    sbuf b = {0};
    sb_add(&b, "", 0);
    *forever = 0;
    int thinking = strlen(gen) >= 8 && !strcmp(gen + strlen(gen) - 8, "<think>\n");
    const char *forced = strstr(gen, "<tool_call>\n");
    if (thinking) {
        char line[96];
        snprintf(line, sizeof line, "The user wrote %zu bytes.\n</think>\n\n", strlen(user));
        sb_str(&b, line);
    }
    if (forced && strstr(forced, "\"arguments\": ")) {
        sb_str(&b, "{}}\n</tool_call>");
    } else if (forced) {
        sb_str(&b, "{\"name\": \"");
        first_tool_name(prompt, &b);
        sb_str(&b, "\", \"arguments\": {}}\n</tool_call>");
    } else if (!strncmp(user, "<tool_response>\n", 16)) {
        const char *end = strstr(user + 16, "\n</tool_response>");
        sb_str(&b, "The tool returned: ");
        sb_add(&b, user + 16, end ? (size_t)(end - user - 16) : strlen(user + 16));
    } else if (!strncmp(user, "/tool ", 6)) {
        char name[64] = "";
        int used = 0;
        sscanf(user + 6, "%63s %n", name, &used);
        sb_str(&b, "<tool_call>\n{\"name\": \"");
        sb_str(&b, name);
        sb_str(&b, "\", \"arguments\": ");
        sb_str(&b, used && user[6 + used] ? user + 6 + used : "{}");
        sb_str(&b, "}\n</tool_call>");
    } else if (!strncmp(user, "/xmltool ", 9)) {
        char name[64] = "", key[64] = "", value[256] = "";
        sscanf(user + 9, "%63s %63[^=]=%255[^\n]", name, key, value);
        sb_str(&b, "<tool_call>\n<function=");
        sb_str(&b, name);
        sb_str(&b, ">\n<parameter=");
        sb_str(&b, key);
        sb_str(&b, ">\n");
        sb_str(&b, value);
        sb_str(&b, "\n</parameter>\n</function>\n</tool_call>");
    } else if (!strncmp(user, "/repeat ", 8)) {
        int count = 0, used = 0;
        sscanf(user + 8, "%d %n", &count, &used);
        for (int i = 0; i < count && i < 100000; i++) {
            sb_str(&b, user + 8 + used);
            sb_str(&b, " ");
        }
    } else if (!strncmp(user, "/forever", 8)) {
        *loop = b.n;
        sb_str(&b, "tick ");
        *forever = 1;
    } else if (!strncmp(user, "/params", 7)) {
        const sv_sampling *s = &req->sampling;
        char line[512];
        snprintf(line, sizeof line,
                 "temperature=%g top_p=%g top_k=%d min_p=%g presence_penalty=%g frequency_penalty=%g "
                 "seed=%s%" PRIu64 " max_tokens=%d",
                 s->temperature, s->top_p, s->top_k, s->min_p, s->presence_penalty, s->frequency_penalty,
                 s->has_seed ? "" : "none/", s->seed, req->max_tokens);
        sb_str(&b, line);
    } else if (req->json_object || !strncmp(user, "/json", 5)) {
        sb_str(&b, "{\"echo\": ");
        json_quote(&b, user);
        sb_str(&b, "}");
    } else {
        sb_str(&b, "Echo: ");
        sb_str(&b, user);
    }
    free(user);
    return b.p;
}

/* Appends ids to the held ones; 0 when out of memory. */
static int hold(echo_engine *x, const int32_t *ids, size_t n) {
    if (x->n_held + n > x->cap_held) {
        size_t cap = x->cap_held ? x->cap_held : 1024;
        while (cap < x->n_held + n) cap *= 2;
        int32_t *p = realloc(x->held, cap * sizeof *p);
        if (!p) return 0;
        x->held = p;
        x->cap_held = cap;
    }
    memcpy(x->held + x->n_held, ids, n * sizeof *ids);
    x->n_held += n;
    return 1;
}

static st_status echo_generate(sv_engine *e, const sv_generate *req, sv_usage *usage, sv_finish *finish) {
    echo_engine *x = (echo_engine *)e;
    memset(usage, 0, sizeof *usage);
    if (req->n_prompt == 0) return st_fail(ST_ERR_INVALID, "echo: generate: empty prompt");
    if ((int)req->n_prompt >= x->context_length)
        return st_fail(ST_ERR_RANGE, "echo: prompt of %zu tokens does not fit the context of %d",
                       req->n_prompt, x->context_length);
    double t0 = st_now();
    /* Reuse: the common prefix with the held ids, keeping at least one token to compute. */
    size_t cached = 0;
    while (cached < x->n_held && cached + 1 < req->n_prompt && x->held[cached] == req->prompt[cached]) cached++;
    usage->prompt_tokens = (int)req->n_prompt;
    usage->cached_tokens = (int)cached;
    if (req->on_progress) req->on_progress(req->ctx, cached, cached, req->n_prompt);
    for (size_t done = cached; done < req->n_prompt;) {
        if (atomic_load(req->cancel)) {
            *finish = SV_FINISH_CANCELLED;
            x->n_held = done;
            return ST_OK;
        }
        done = done + ECHO_CHUNK < req->n_prompt ? done + ECHO_CHUNK : req->n_prompt;
        if (req->on_progress) req->on_progress(req->ctx, cached, done, req->n_prompt);
    }
    double t1 = st_now();
    usage->prompt_seconds = t1 - t0;

    x->n_held = 0;
    if (!hold(x, req->prompt, req->n_prompt)) return st_fail(ST_ERR_NOMEM, "echo: out of memory for %zu held ids", req->n_prompt);

    char *prompt = echo_text(req->prompt, req->n_prompt);
    int forever = 0;
    size_t loop = 0;
    char *reply = compose_reply(prompt, req, &forever, &loop);
    free(prompt);
    size_t len = strlen(reply), i = 0;
    *finish = SV_FINISH_EOS;
    for (;;) {
        if (i == len) {
            if (!forever || len == loop) break;
            i = loop;
        }
        if (atomic_load(req->cancel)) { *finish = SV_FINISH_CANCELLED; break; }
        if (usage->completion_tokens >= req->max_tokens || (int)x->n_held >= x->context_length) {
            *finish = SV_FINISH_LENGTH;
            break;
        }
        if (forever && i >= loop) {
            struct timespec pace = {0, 1000000};
            nanosleep(&pace, NULL);
        }
        int32_t tok = (unsigned char)reply[i];
        if (!hold(x, &tok, 1)) break;
        usage->completion_tokens++;
        /* its one reply has probability 1: log 0, and the other bytes far below */
        sv_logprob lp = {.logprob = 0.0f, .n_top = req->top_logprobs};
        for (int k = 0; k < lp.n_top; k++) {
            lp.top[k] = k ? (tok + k) % 256 : tok;
            lp.top_logprob[k] = k ? -20.0f - (float)k : 0.0f;
        }
        if (req->on_piece(req->ctx, reply + i, 1, tok, req->logprobs ? &lp : NULL)) { *finish = SV_FINISH_STOP; break; }
        i++;
    }
    free(reply);
    usage->decode_seconds = st_now() - t1;
    return ST_OK;
}

/* The state is the held ids: "ECHO", a count, the ids. */
static st_status echo_state_save(sv_engine *e, void **blob, size_t *n, size_t *tokens) {
    echo_engine *x = (echo_engine *)e;
    uint64_t count = x->n_held;
    *n = 4 + sizeof count + x->n_held * sizeof *x->held;
    unsigned char *b = malloc(*n);
    if (!b) return st_fail(ST_ERR_NOMEM, "echo: out of memory for a state of %zu bytes", *n);
    memcpy(b, "ECHO", 4);
    memcpy(b + 4, &count, sizeof count);
    if (count) memcpy(b + 4 + sizeof count, x->held, x->n_held * sizeof *x->held);
    *blob = b;
    *tokens = x->n_held;
    return ST_OK;
}

static st_status echo_state_load(sv_engine *e, const void *blob, size_t n, size_t *tokens) {
    echo_engine *x = (echo_engine *)e;
    const unsigned char *b = blob;
    uint64_t count;
    if (n < 12 || memcmp(b, "ECHO", 4)) return st_fail(ST_ERR_FORMAT, "not an echo engine state");
    memcpy(&count, b + 4, sizeof count);
    if (count > (uint64_t)x->context_length || n != 12 + count * sizeof(int32_t))
        return st_fail(ST_ERR_FORMAT, "the state holds %llu ids in %zu bytes: does not fit a context of %d",
                       (unsigned long long)count, n, x->context_length);
    const int32_t *ids = (const int32_t *)(b + 12);
    for (uint64_t i = 0; i < count; i++)
        if (ids[i] < 0 || ids[i] > ECHO_IM_END) return st_fail(ST_ERR_FORMAT, "the state's id %llu is %d, out of the vocabulary", (unsigned long long)i, ids[i]);
    x->n_held = 0;
    if (!hold(x, ids, (size_t)count)) return st_fail(ST_ERR_NOMEM, "echo: out of memory");
    *tokens = x->n_held;
    return ST_OK;
}

static size_t echo_memory(sv_engine *e) {
    echo_engine *x = (echo_engine *)e;
    return sizeof *x + x->n_held * sizeof *x->held;
}

static void echo_close(sv_engine *e) {
    echo_engine *x = (echo_engine *)e;
    if (!x) return;
    free(x->held);
    free(x);
}

static const sv_engine_ops echo_ops = {
    .kind = "echo",
    .info = echo_info,
    .render = echo_render,
    .tokenize = echo_tokenize,
    .detokenize = echo_detokenize,
    .embed = echo_embed,
    .generate = echo_generate,
    .state_save = echo_state_save,
    .state_load = echo_state_load,
    .memory_bytes = echo_memory,
    .close = echo_close,
};

st_status sv_engine_echo_open(int context_length, sv_engine **out) {
    echo_engine *x = calloc(1, sizeof *x);
    if (!x) return st_fail(ST_ERR_NOMEM, "echo: out of memory");
    x->base.ops = &echo_ops;
    x->context_length = context_length > 0 ? context_length : 4096;
    *out = &x->base;
    return ST_OK;
}

void sv_prompt_free(sv_prompt *p) {
    free(p->text);
    free(p->reply_prefix);
    p->text = p->reply_prefix = NULL;
}
