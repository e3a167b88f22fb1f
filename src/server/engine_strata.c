/* engine_strata.c: the engine port (engine_port.h) on the real engine: a model (include/strata.h),
 * one session, Qwen's chat template (text/chat.h) and the sampler (engine/sampler.h). The default
 * engine of `strata serve -m MODEL`.
 *
 * Reuse. The session's state always matches `held`, the ids fed into it. A new prompt keeps the
 * longest prefix the state can return to exactly:
 *   - if it extends all of `held`, only the rest is fed;
 *   - for models without recurrent layers (qwen3, qwen3moe) the KV cache is cut back to the
 *     common prefix (positions past it are simply overwritten by the next feed);
 *   - a hybrid model (Gated DeltaNet layers) cannot run its recurrent state backwards, so the
 *     prompt is fed in pieces that end at message boundaries (before each <|im_start|>), and
 *     after each piece the recurrent state (conv + delta state of every linear layer) is copied
 *     into a checkpoint; the newest SE_CHECKPOINTS are kept. A new prompt returns to the latest
 *     checkpoint at or before the divergence (KV cut back to it, recurrent state copied back);
 *     with none, the session starts over.
 * Checkpoints past the point returned to are dropped, so the state never stands for ids it did not
 * see, and a reused answer equals a fresh one.
 *
 * The prompt is fed in slices of the session's chunk size so that progress is reported and the
 * cancel flag checked between chunks; generation checks it between tokens. A token's bytes go to
 * the server as they are (a UTF-8 character split across tokens is joined by the server). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/clock.h"
#include "backend/backend.h"
#include "base/status.h"
#include "engine/sampler.h"
#include "engine/session_internal.h"
#include "model/model.h"
#include "server/engine_port.h"
#include "strata.h"
#include "text/chat.h"
#include "text/tokenizer.h"

#define SE_CHECKPOINTS 4

/* The recurrent state after the first `pos` held ids. */
typedef struct checkpoint {
    size_t pos;
    float *data; /* every linear layer's conv then ssm, in layer order */
} checkpoint;

typedef struct strata_engine {
    sv_engine base;
    checkpoint ckpt[SE_CHECKPOINTS];
    int n_ckpt;          /* sorted by pos, ascending */
    size_t ckpt_floats;  /* floats in one checkpoint */
    int32_t im_start;    /* the message boundary token, or -1 */
    st_model *model;
    st_session *session;
    st_chat_style style;
    int n_chunk;
    int32_t *held;
    size_t n_held, cap_held;
    sv_model_info info;
} strata_engine;

static void se_info(sv_engine *e, sv_model_info *out) { *out = ((strata_engine *)e)->info; }

/* The tools array as one JSON text per tool, as st_chat_render takes them. */
static char **split_tools(const char *tools_json, size_t *n) {
    json_t *a = json_loads(tools_json, 0, NULL);
    *n = json_array_size(a);
    char **out = calloc(*n + 1, sizeof *out);
    for (size_t i = 0; i < *n; i++) out[i] = json_dumps(json_array_get(a, i), JSON_COMPACT);
    json_decref(a);
    return out;
}

static st_chat_role role_of(const char *r) {
    if (!strcmp(r, "system")) return ST_ROLE_SYSTEM;
    if (!strcmp(r, "assistant")) return ST_ROLE_ASSISTANT;
    if (!strcmp(r, "tool")) return ST_ROLE_TOOL;
    return ST_ROLE_USER;
}

static char *concat(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 1);
    memcpy(s, a, na);
    memcpy(s + na, b, nb + 1);
    return s;
}

static st_status se_render(sv_engine *e, const sv_chat *chat, sv_prompt *out) {
    strata_engine *x = (strata_engine *)e;
    st_chat_message *msgs = calloc(chat->n_messages + 1, sizeof *msgs);
    st_chat_tool_call **calls = calloc(chat->n_messages + 1, sizeof *calls);
    for (size_t i = 0; i < chat->n_messages; i++) {
        const sv_message *m = &chat->messages[i];
        msgs[i].role = role_of(m->role);
        msgs[i].content = m->content;
        msgs[i].reasoning_content = m->reasoning ? m->reasoning : (msgs[i].role == ST_ROLE_ASSISTANT ? "" : NULL);
        if (m->n_tool_calls) {
            calls[i] = calloc(m->n_tool_calls, sizeof **calls);
            for (size_t k = 0; k < m->n_tool_calls; k++)
                calls[i][k] = (st_chat_tool_call){.name = m->tool_calls[k].name, .arguments = m->tool_calls[k].arguments};
            msgs[i].tool_calls = calls[i];
            msgs[i].n_tool_calls = m->n_tool_calls;
        }
    }
    int tools = chat->tools_json && chat->tool_choice != SV_TOOLS_NONE;
    size_t n_tools = 0;
    char **tool_texts = tools ? split_tools(chat->tools_json, &n_tools) : NULL;
    st_chat_options o = {
        .tools = (const char *const *)tool_texts,
        .n_tools = n_tools,
        .add_generation_prompt = 1,
        .enable_thinking = chat->enable_thinking,
        .style = x->style,
    };
    char *text = NULL;
    size_t len = 0;
    st_status st = st_chat_render(msgs, chat->n_messages, &o, &text, &len);
    for (size_t i = 0; i < chat->n_messages; i++) free(calls[i]);
    free(calls);
    free(msgs);
    for (size_t i = 0; i < n_tools; i++) free(tool_texts[i]);
    free(tool_texts);
    if (st != ST_OK) return st;

    /* What the reply starts with: an opened think block, a forced tool call, or a JSON object. */
    const char *prefix = "";
    char named[320] = "";
    if (tools && chat->tool_choice == SV_TOOLS_REQUIRED)
        prefix = x->style == ST_CHAT_QWEN35 ? "<tool_call>\n<function=" : "<tool_call>\n";
    else if (tools && chat->tool_choice == SV_TOOLS_NAMED) {
        snprintf(named, sizeof named, x->style == ST_CHAT_QWEN35 ? "<tool_call>\n<function=%s>\n" : "<tool_call>\n{\"name\": \"%s\", \"arguments\": ",
                 chat->tool_name);
        prefix = named;
    } else if (chat->json_object && !chat->enable_thinking)
        prefix = "{";
    size_t opened = len >= 8 && !strcmp(text + len - 8, "<think>\n") ? 8 : 0;
    out->text = concat(text, prefix);
    free(text);
    out->reply_prefix = concat(opened ? "<think>\n" : "", prefix);
    return ST_OK;
}

static st_status se_tokenize(sv_engine *e, const char *text, size_t len, int special, int32_t **ids, size_t *n) {
    return st_model_tokenize(((strata_engine *)e)->model, text, len, 0, special, ids, n);
}

static int hold(strata_engine *x, const int32_t *ids, size_t n) {
    if (x->n_held + n > x->cap_held) {
        size_t cap = x->cap_held ? x->cap_held * 2 : 4096;
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

/* Copies every linear layer's recurrent state to (save) or from (!save) buf. */
static void copy_recurrent(strata_engine *x, float *buf, int save) {
    const st_hparams *hp = &x->model->hp;
    st_state *st = st_session_state(x->session);
    size_t conv = (size_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1));
    size_t ssm = (size_t)(hp->ssm_n_v * hp->ssm_state * hp->ssm_state);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        st_layer_state *L = &st->layers[il];
        if (!L->ssm) continue;
        if (save) { memcpy(buf, L->conv, conv * sizeof *buf); memcpy(buf + conv, L->ssm, ssm * sizeof *buf); }
        else { memcpy(L->conv, buf, conv * sizeof *buf); memcpy(L->ssm, buf + conv, ssm * sizeof *buf); }
        buf += conv + ssm;
    }
}

/* Forgets the checkpoints after position pos (they stand for ids about to be overwritten). */
static void drop_checkpoints_after(strata_engine *x, size_t pos) {
    while (x->n_ckpt && x->ckpt[x->n_ckpt - 1].pos > pos) x->n_ckpt--;
}

/* A checkpoint of the current state (at n_held); the oldest goes when all are taken. */
static void take_checkpoint(strata_engine *x) {
    if (!x->ckpt_floats || x->im_start < 0) return;
    drop_checkpoints_after(x, x->n_held);
    if (x->n_ckpt && x->ckpt[x->n_ckpt - 1].pos == x->n_held) return;
    if (x->n_ckpt == SE_CHECKPOINTS) {
        float *oldest = x->ckpt[0].data;
        memmove(x->ckpt, x->ckpt + 1, (SE_CHECKPOINTS - 1) * sizeof *x->ckpt);
        x->n_ckpt--;
        x->ckpt[x->n_ckpt].data = oldest;
    }
    checkpoint *c = &x->ckpt[x->n_ckpt];
    if (!c->data && !(c->data = malloc(x->ckpt_floats * sizeof *c->data))) return;
    copy_recurrent(x, c->data, 1);
    c->pos = x->n_held;
    x->n_ckpt++;
}

/* Brings the state back to the longest prefix of the prompt it can stand for exactly; returns it. */
static size_t reuse_prefix(strata_engine *x, const int32_t *prompt, size_t n) {
    size_t p = 0;
    while (p < x->n_held && p < n && x->held[p] == prompt[p]) p++;
    if (p == n) p = n - 1; /* the last prompt token is fed again: its logits start the reply */
    if (p == x->n_held) return p;
    st_state *st = st_session_state(x->session);
    if (!st_hp_is_hybrid(&x->model->hp) && p > 0) {
        st->n_past = (int64_t)p;
        x->n_held = p;
        return p;
    }
    drop_checkpoints_after(x, p);
    if (x->n_ckpt) {
        checkpoint *c = &x->ckpt[x->n_ckpt - 1];
        copy_recurrent(x, c->data, 0);
        st->n_past = (int64_t)c->pos;
        x->n_held = c->pos;
        return c->pos;
    }
    st_session_reset(x->session);
    x->n_held = 0;
    return 0;
}

/* Where the next prompt piece ends: n_chunk tokens on, or earlier at a message boundary. */
static size_t piece_end(const strata_engine *x, const int32_t *prompt, size_t done, size_t n) {
    size_t end = n - done < (size_t)x->n_chunk ? n : done + (size_t)x->n_chunk;
    if (x->ckpt_floats && x->im_start >= 0)
        for (size_t i = done + 1; i < end; i++)
            if (prompt[i] == x->im_start) return i;
    return end;
}

static st_status se_generate(sv_engine *e, const sv_generate *req, sv_usage *usage, sv_finish *finish) {
    strata_engine *x = (strata_engine *)e;
    memset(usage, 0, sizeof *usage);
    *finish = SV_FINISH_EOS;
    if (!req->n_prompt) return st_fail(ST_ERR_INVALID, "generate: empty prompt");
    int64_t n_ctx = st_session_n_ctx(x->session);
    if ((int64_t)req->n_prompt >= n_ctx)
        return st_fail(ST_ERR_RANGE, "generate: a prompt of %zu tokens does not fit the context of %lld", req->n_prompt, (long long)n_ctx);

    const sv_sampling *sp = &req->sampling;
    st_sampler_params pp = st_sampler_default_params();
    pp.temperature = sp->temperature;
    pp.top_k = sp->top_k;
    pp.top_p = sp->top_p;
    pp.min_p = sp->min_p;
    pp.presence_penalty = sp->presence_penalty;
    pp.frequency_penalty = sp->frequency_penalty;
    pp.seed = sp->has_seed ? sp->seed : (uint64_t)time(NULL) ^ st_now_ns();
    st_sampler *smp = NULL;
    ST_TRY(st_sampler_new(&pp, st_model_n_vocab(x->model), &smp));
    for (size_t i = 0; i < req->n_prompt; i++) st_sampler_accept(smp, req->prompt[i]);

    double t0 = st_now();
    size_t done = reuse_prefix(x, req->prompt, req->n_prompt);
    usage->prompt_tokens = (int)req->n_prompt;
    usage->cached_tokens = (int)done;
    if (req->on_progress) req->on_progress(req->ctx, done, done, req->n_prompt);
    st_status st = ST_OK;
    while (done < req->n_prompt) {
        if (atomic_load(req->cancel)) { *finish = SV_FINISH_CANCELLED; goto out; }
        size_t k = piece_end(x, req->prompt, done, req->n_prompt) - done;
        st = st_session_feed(x->session, req->prompt + done, (int64_t)k, NULL);
        if (st != ST_OK) {
            /* A failed feed leaves the state unknown: start over next time. */
            st_session_reset(x->session);
            x->n_held = 0;
            x->n_ckpt = 0;
            goto out;
        }
        hold(x, req->prompt + done, k);
        done += k;
        if (done < req->n_prompt && req->prompt[done] == x->im_start) take_checkpoint(x);
        if (req->on_progress) req->on_progress(req->ctx, (size_t)usage->cached_tokens, done, req->n_prompt);
    }
    double t1 = st_now();
    usage->prompt_seconds = t1 - t0;

    for (;;) {
        if (atomic_load(req->cancel)) { *finish = SV_FINISH_CANCELLED; break; }
        int32_t tok;
        st = st_sampler_sample(smp, st_session_logits(x->session), &tok);
        if (st != ST_OK) break;
        if (st_model_is_eog(x->model, tok)) { *finish = SV_FINISH_EOS; break; }
        st_sampler_accept(smp, tok);
        usage->completion_tokens++;
        size_t len = 0;
        const char *piece = st_token_piece(x->model->tok, tok, 1, &len); /* with control tokens: <think> may be one */
        if (req->on_piece(req->ctx, piece ? piece : "", len, tok)) { *finish = SV_FINISH_STOP; break; }
        if (usage->completion_tokens >= req->max_tokens || st_session_n_past(x->session) + 1 >= n_ctx) {
            *finish = SV_FINISH_LENGTH;
            break;
        }
        st = st_session_feed(x->session, &tok, 1, NULL);
        if (st != ST_OK) {
            st_session_reset(x->session);
            x->n_held = 0;
            x->n_ckpt = 0;
            break;
        }
        hold(x, &tok, 1);
    }
    usage->decode_seconds = st_now() - t1;
out:
    st_sampler_free(smp);
    return st;
}

/* The saved state: a header, the held ids, then per layer the KV rows of the held positions
 * (attention) or the conv and delta state (linear layers), then the checkpoints (position and
 * recurrent state each), so a restored hybrid can return to a message boundary as before. */
typedef struct state_head {
    char magic[8];     /* "STRATAST" */
    uint32_t n_layer, kv_type;
    uint64_t n_held;
    uint64_t n_ckpt, ckpt_floats;
} state_head;

static size_t layer_bytes(strata_engine *x, int64_t il, uint64_t n_pos) {
    const st_hparams *hp = &x->model->hp;
    const st_layer_state *L = &st_session_state(x->session)->layers[il];
    if (L->ssm)
        return (size_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1) + hp->ssm_n_v * hp->ssm_state * hp->ssm_state) * sizeof(float);
    return 2 * (size_t)n_pos * st_kv_row_bytes(st_session_state(x->session)->kv_type, hp->n_head_kv[il] * hp->head_dim);
}

/* Copies one layer's state to (save) or from (!save) p; returns the bytes. */
static size_t layer_copy(strata_engine *x, int64_t il, uint64_t n_pos, unsigned char *p, int save) {
    const st_hparams *hp = &x->model->hp;
    st_layer_state *L = &st_session_state(x->session)->layers[il];
    if (L->ssm) {
        size_t conv = (size_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1)) * sizeof(float);
        size_t ssm = (size_t)(hp->ssm_n_v * hp->ssm_state * hp->ssm_state) * sizeof(float);
        if (save) { memcpy(p, L->conv, conv); memcpy(p + conv, L->ssm, ssm); }
        else { memcpy(L->conv, p, conv); memcpy(L->ssm, p + conv, ssm); }
        return conv + ssm;
    }
    size_t kv = (size_t)n_pos * st_kv_row_bytes(st_session_state(x->session)->kv_type, hp->n_head_kv[il] * hp->head_dim);
    if (save) { memcpy(p, L->k_cache, kv); memcpy(p + kv, L->v_cache, kv); }
    else { memcpy(L->k_cache, p, kv); memcpy(L->v_cache, p + kv, kv); }
    return 2 * kv;
}

static st_status se_state_save(sv_engine *e, void **blob, size_t *n, size_t *tokens) {
    strata_engine *x = (strata_engine *)e;
    const st_hparams *hp = &x->model->hp;
    size_t size = sizeof(state_head) + x->n_held * sizeof(int32_t);
    for (int64_t il = 0; il < hp->n_layer; il++) size += layer_bytes(x, il, x->n_held);
    size += (size_t)x->n_ckpt * (sizeof(uint64_t) + x->ckpt_floats * sizeof(float));
    unsigned char *b = malloc(size);
    if (!b) return st_fail(ST_ERR_NOMEM, "out of memory for a session state of %zu bytes", size);
    state_head h = {.magic = "STRATAST", .n_layer = (uint32_t)hp->n_layer, .kv_type = st_session_state(x->session)->kv_type,
                    .n_held = x->n_held, .n_ckpt = (uint64_t)x->n_ckpt, .ckpt_floats = x->ckpt_floats};
    memcpy(b, &h, sizeof h);
    size_t off = sizeof h;
    memcpy(b + off, x->held, x->n_held * sizeof(int32_t));
    off += x->n_held * sizeof(int32_t);
    for (int64_t il = 0; il < hp->n_layer; il++) off += layer_copy(x, il, x->n_held, b + off, 1);
    for (int i = 0; i < x->n_ckpt; i++) {
        uint64_t pos = x->ckpt[i].pos;
        memcpy(b + off, &pos, sizeof pos);
        memcpy(b + off + sizeof pos, x->ckpt[i].data, x->ckpt_floats * sizeof(float));
        off += sizeof pos + x->ckpt_floats * sizeof(float);
    }
    *blob = b;
    *n = size;
    *tokens = x->n_held;
    return ST_OK;
}

static st_status se_state_load(sv_engine *e, const void *blob, size_t n, size_t *tokens) {
    strata_engine *x = (strata_engine *)e;
    const st_hparams *hp = &x->model->hp;
    st_state *st = st_session_state(x->session);
    state_head h;
    if (n < sizeof h) return st_fail(ST_ERR_FORMAT, "the state is %zu bytes, shorter than its header", n);
    memcpy(&h, blob, sizeof h);
    if (memcmp(h.magic, "STRATAST", 8)) return st_fail(ST_ERR_FORMAT, "not a Strata engine state");
    if (h.n_layer != (uint32_t)hp->n_layer || h.kv_type != st->kv_type)
        return st_fail(ST_ERR_FORMAT, "the state has %u layers and KV type %u; this session has %lld and %u", h.n_layer, h.kv_type,
                       (long long)hp->n_layer, st->kv_type);
    if (h.n_held >= (uint64_t)st->n_ctx)
        return st_fail(ST_ERR_RANGE, "the state holds %llu tokens; this context has %lld", (unsigned long long)h.n_held, (long long)st->n_ctx);
    if (h.n_ckpt > SE_CHECKPOINTS || h.ckpt_floats != x->ckpt_floats || (h.n_ckpt && x->im_start < 0))
        return st_fail(ST_ERR_FORMAT, "the state has %llu checkpoints of %llu floats; this session keeps %d of %zu",
                       (unsigned long long)h.n_ckpt, (unsigned long long)h.ckpt_floats, SE_CHECKPOINTS, x->ckpt_floats);
    size_t want = sizeof h + (size_t)h.n_held * sizeof(int32_t);
    for (int64_t il = 0; il < hp->n_layer; il++) want += layer_bytes(x, il, h.n_held);
    size_t ckpt_off = want;
    want += (size_t)h.n_ckpt * (sizeof(uint64_t) + x->ckpt_floats * sizeof(float));
    if (want != n) return st_fail(ST_ERR_FORMAT, "the state is %zu bytes; %llu tokens need %zu", n, (unsigned long long)h.n_held, want);
    const unsigned char *b = blob;
    uint64_t last = 0;
    for (uint64_t i = 0; i < h.n_ckpt; i++) {
        uint64_t pos;
        memcpy(&pos, b + ckpt_off + i * (sizeof pos + x->ckpt_floats * sizeof(float)), sizeof pos);
        if (pos > h.n_held || (i && pos <= last))
            return st_fail(ST_ERR_FORMAT, "the state's checkpoint %llu is at %llu: not in order within %llu tokens",
                           (unsigned long long)i, (unsigned long long)pos, (unsigned long long)h.n_held);
        last = pos;
    }
    int32_t n_vocab = st_model_n_vocab(x->model);
    for (uint64_t i = 0; i < h.n_held; i++) {
        int32_t id;
        memcpy(&id, b + sizeof h + i * sizeof id, sizeof id);
        if (id < 0 || id >= n_vocab) return st_fail(ST_ERR_FORMAT, "the state's id %llu is %d, outside the vocabulary", (unsigned long long)i, id);
    }
    /* Everything checked: now the session changes. */
    x->n_held = 0;
    x->n_ckpt = 0;
    if (!hold(x, (const int32_t *)(const void *)(b + sizeof h), (size_t)h.n_held)) {
        st_session_reset(x->session);
        return st_fail(ST_ERR_NOMEM, "out of memory");
    }
    size_t off = sizeof h + (size_t)h.n_held * sizeof(int32_t);
    for (int64_t il = 0; il < hp->n_layer; il++) off += layer_copy(x, il, h.n_held, (unsigned char *)b + off, 0);
    st->n_past = (int64_t)h.n_held;
    for (uint64_t i = 0; i < h.n_ckpt; i++) {
        checkpoint *c = &x->ckpt[x->n_ckpt];
        if (!c->data && !(c->data = malloc(x->ckpt_floats * sizeof *c->data))) break;
        memcpy(&c->pos, b + off, sizeof(uint64_t));
        memcpy(c->data, b + off + sizeof(uint64_t), x->ckpt_floats * sizeof(float));
        off += sizeof(uint64_t) + x->ckpt_floats * sizeof(float);
        x->n_ckpt++;
    }
    *tokens = x->n_held;
    return ST_OK;
}

static size_t se_memory(sv_engine *e) { return (size_t)st_model_weight_bytes(((strata_engine *)e)->model); }

static void se_close(sv_engine *e) {
    strata_engine *x = (strata_engine *)e;
    if (!x) return;
    st_session_free(x->session);
    st_model_free(x->model);
    for (int i = 0; i < SE_CHECKPOINTS; i++) free(x->ckpt[i].data);
    free(x->held);
    free(x);
}

static const sv_engine_ops strata_ops = {
    .kind = "strata",
    .info = se_info,
    .render = se_render,
    .tokenize = se_tokenize,
    .generate = se_generate,
    .state_save = se_state_save,
    .state_load = se_state_load,
    .memory_bytes = se_memory,
    .close = se_close,
};

/* FNV-1a over what identifies the weights cheaply: architecture, shapes, sizes and name. */
static void fingerprint(const st_model *m, const char *name, char out[65]) {
    char desc[512];
    snprintf(desc, sizeof desc, "%s|%lld|%d|%llu|%s", st_model_arch(m), (long long)st_model_n_layer(m), st_model_n_vocab(m),
             (unsigned long long)st_model_weight_bytes(m), name);
    uint64_t h = 14695981039346656037ULL;
    for (const char *p = desc; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    snprintf(out, 65, "%016llx", (unsigned long long)h);
}

st_status sv_engine_strata_open(const char *model_path, int context_length, sv_engine **out) {
    *out = NULL;
    strata_engine *x = calloc(1, sizeof *x);
    if (!x) return st_fail(ST_ERR_NOMEM, "out of memory");
    x->base.ops = &strata_ops;
    st_model_params mp = st_model_default_params();
    st_status st = st_model_load(model_path, &mp, &x->model);
    if (st != ST_OK) { free(x); return st; }
    if (!st_model_has_tokenizer(x->model)) {
        st = st_fail(ST_ERR_UNSUPPORTED, "%s: the tokenizer is not supported (%s); the server needs text", model_path,
                     st_model_tokenizer_error(x->model));
        se_close(&x->base);
        return st;
    }
    st_session_params sp = st_session_default_params();
    if (context_length > 0) sp.n_ctx = context_length;
    st = st_session_new(x->model, &sp, &x->session);
    if (st != ST_OK) { se_close(&x->base); return st; }
    x->n_chunk = sp.n_prefill > 0 ? sp.n_prefill : 512;
    x->im_start = st_tokenizer_find(x->model->tok, "<|im_start|>", 12);
    const st_hparams *hp = &x->model->hp;
    if (st_hp_is_hybrid(hp))
        for (int64_t il = 0; il < hp->n_layer; il++)
            if (hp->is_linear[il])
                x->ckpt_floats += (size_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1) + hp->ssm_n_v * hp->ssm_state * hp->ssm_state);

    const char *tmpl = NULL, *name = NULL;
    size_t tlen = 0, nlen = 0;
    int known = 0;
    char *tmpl_z = NULL;
    if (st_gguf_get_str(x->model->gguf, "tokenizer.chat_template", &tmpl, &tlen) == ST_OK) tmpl_z = strndup(tmpl, tlen);
    x->style = st_chat_style_detect(tmpl_z ? tmpl_z : "", &known);
    free(tmpl_z);
    const char *base = strrchr(model_path, '/');
    if (st_gguf_get_str(x->model->gguf, "general.name", &name, &nlen) == ST_OK && nlen)
        snprintf(x->info.name, sizeof x->info.name, "%.*s", (int)nlen, name);
    else
        snprintf(x->info.name, sizeof x->info.name, "%s", base ? base + 1 : model_path);
    x->info.context_length = (int)st_session_n_ctx(x->session);
    fingerprint(x->model, x->info.name, x->info.fingerprint);
    *out = &x->base;
    return ST_OK;
}
