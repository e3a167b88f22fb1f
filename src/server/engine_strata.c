/* engine_strata.c: the engine port (engine_port.h) on the real engine: a model (include/strata.h),
 * one session, Qwen's chat template (text/chat.h) and the sampler (engine/sampler.h). The default
 * engine of `strata serve -m MODEL`.
 *
 * Reuse goes through strata.h's session state: the session holds the ids it was fed, and
 * st_session_reuse keeps the longest prefix of a new prompt it can return to exactly (the KV cache
 * cut back; for a hybrid model, the recurrent state of the latest checkpoint at or before the
 * divergence), so a reused answer equals a fresh one. For a hybrid model the prompt is fed in
 * pieces that end at message boundaries (before each <|im_start|>), with a checkpoint after each.
 *
 * The prompt is fed in slices of the session's chunk size so that progress is reported and the
 * cancel flag checked between chunks; generation checks it between tokens. A token's bytes go to
 * the server as they are (a UTF-8 character split across tokens is joined by the server).
 *
 * Decoding goes through a speculative decoder (engine/spec.h): the server's setting (--spec), or
 * the request's ("speculative.type", "speculative.n_max"); the text is the same either way. After
 * each request its draft rows are dropped, so the session holds exactly the reply for reuse. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"
#include "engine/json_grammar.h"
#include "engine/json_schema.h"
#include "engine/sampler.h"
#include "engine/spec.h"
#include "model/model.h"
#include "server/engine_port.h"
#include "strata.h"
#include "text/chat.h"
#include "text/tokenizer.h"

typedef struct strata_engine {
    sv_engine base;
    int32_t im_start;    /* the message boundary token, or -1 */
    int recurrent;       /* checkpoints at message boundaries are taken (st_session_is_recurrent) */
    st_model *model;
    st_session *session;
    st_chat_style style;
    int n_chunk;
    st_json_vocab *json_vocab; /* response_format json_object: the token table, built on first use */
    st_spec_params spec_default; /* --spec, --spec-draft, --spec-p-min */
    st_spec_params spec_now;     /* what `spec` was made with */
    st_spec *spec;
    char *template_text;       /* the chat template (for /props) */
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

static st_status se_detokenize(sv_engine *e, const int32_t *ids, size_t n, char **text, size_t *len) {
    strata_engine *x = (strata_engine *)e;
    int32_t n_vocab = st_model_n_vocab(x->model);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) return st_fail(ST_ERR_RANGE, "token %zu is %d, outside the vocabulary of %d", i, ids[i], n_vocab);
    return st_detokenize(x->model->tok, ids, n, 1, text, len);
}

/* Last-token pooling (the hidden state that reads the whole input, as decoder embedding models
 * pool), scaled to unit length. */
static st_status se_embed(sv_engine *e, const int32_t *ids, size_t n, float *out, size_t cap, size_t *dim) {
    strata_engine *x = (strata_engine *)e;
    size_t d = (size_t)st_session_n_embd(x->session);
    if (d > cap) return st_fail(ST_ERR_INVALID, "embed: %zu dimensions, room for %zu", d, cap);
    if ((int64_t)n >= st_session_n_ctx(x->session))
        return st_fail(ST_ERR_RANGE, "embed: an input of %zu tokens does not fit the context of %lld", n, (long long)st_session_n_ctx(x->session));
    ST_TRY(st_session_embed(x->session, ids, (int64_t)n, out));
    double norm = 0;
    for (size_t i = 0; i < d; i++) norm += (double)out[i] * out[i];
    float scale = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
    for (size_t i = 0; i < d; i++) out[i] *= scale;
    *dim = d;
    return ST_OK;
}

static st_status se_tokenize(sv_engine *e, const char *text, size_t len, int special, int32_t **ids, size_t *n) {
    return st_model_tokenize(((strata_engine *)e)->model, text, len, 0, special, ids, n);
}

/* Where the next prompt piece ends: n_chunk tokens on, or earlier at a message boundary. */
static size_t piece_end(const strata_engine *x, const int32_t *prompt, size_t done, size_t n) {
    size_t end = n - done < (size_t)x->n_chunk ? n : done + (size_t)x->n_chunk;
    if (x->recurrent && x->im_start >= 0)
        for (size_t i = done + 1; i < end; i++)
            if (prompt[i] == x->im_start) return i;
    return end;
}

/* The decoder this request asks for: the server's setting, or its own mode / draft length. */
static st_status decoder_for(strata_engine *x, const sv_generate *req) {
    st_spec_params p = x->spec_default;
    if (req->spec_mode) p.mode = req->spec_mode - 1;
    if (req->spec_draft) p.n_draft = req->spec_draft;
    if (x->spec && p.mode == x->spec_now.mode && p.n_draft == x->spec_now.n_draft) return ST_OK;
    st_spec *d = NULL;
    ST_TRY(st_spec_new(x->session, &p, &d));
    st_spec_free(x->spec);
    x->spec = d;
    x->spec_now = p;
    return ST_OK;
}

/* log-softmax of the logits at tok, and the k best (one pass for the normaliser, one partial
 * insertion per candidate: k is at most 20). */
static void token_logprobs(const float *logits, int32_t n, int32_t tok, int k, sv_logprob *lp) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)(logits[i] - mx));
    float lse = mx + (float)log(sum);
    lp->logprob = logits[tok] - lse;
    lp->n_top = 0;
    if (k > SV_TOP_LOGPROBS) k = SV_TOP_LOGPROBS;
    for (int32_t i = 0; i < n && k > 0; i++) {
        if (lp->n_top == k && logits[i] <= lp->top_logprob[k - 1]) continue;
        int at = lp->n_top < k ? lp->n_top++ : k - 1;
        while (at > 0 && lp->top_logprob[at - 1] < logits[i]) {
            lp->top[at] = lp->top[at - 1];
            lp->top_logprob[at] = lp->top_logprob[at - 1];
            at--;
        }
        lp->top[at] = i;
        lp->top_logprob[at] = logits[i];
    }
    for (int i = 0; i < lp->n_top; i++) lp->top_logprob[i] -= lse;
}

static st_status se_generate(sv_engine *e, const sv_generate *req, sv_usage *usage, sv_finish *finish) {
    strata_engine *x = (strata_engine *)e;
    memset(usage, 0, sizeof *usage);
    *finish = SV_FINISH_EOS;
    if (!req->n_prompt) return st_fail(ST_ERR_INVALID, "generate: empty prompt");
    ST_TRY(decoder_for(x, req));
    st_spec *d = x->spec;
    st_spec_stats_reset(d);
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
    if (sp->repeat_penalty > 0) pp.repeat_penalty = sp->repeat_penalty;
    pp.seed = sp->has_seed ? sp->seed : (uint64_t)time(NULL) ^ st_now_ns();
    st_sampler *smp = NULL;
    ST_TRY(st_sampler_new(&pp, st_model_n_vocab(x->model), &smp));
    for (size_t i = 0; i < req->n_prompt; i++) st_sampler_accept(smp, req->prompt[i]);
    /* A tool call is enforced in Qwen's JSON form; Qwen 3.5's XML calls are not (yet). */
    const st_json_schema *schema = req->schema && (!req->schema->n_tools || x->style == ST_CHAT_QWEN3) ? req->schema : NULL;
    if (req->json_object || schema) {
        st_status js = x->json_vocab ? ST_OK : st_json_vocab_new(x->model->tok, st_model_n_vocab(x->model), &x->json_vocab);
        if (js == ST_OK)
            js = schema ? st_sampler_constrain_schema(smp, x->json_vocab, schema, req->prompt, req->n_prompt, req->max_tokens)
                        : st_sampler_constrain_json(smp, x->json_vocab, req->prompt, req->n_prompt, req->max_tokens);
        if (js != ST_OK) { st_sampler_free(smp); return js; }
    }

    double t0 = st_now();
    int64_t kept = 0;
    st_status st = st_session_reuse(x->session, req->prompt, (int64_t)req->n_prompt, &kept);
    if (st != ST_OK) goto out;
    size_t done = (size_t)kept;
    usage->prompt_tokens = (int)req->n_prompt;
    usage->cached_tokens = (int)done;
    if (req->on_progress) req->on_progress(req->ctx, done, done, req->n_prompt);
    while (done < req->n_prompt) {
        if (atomic_load(req->cancel)) { *finish = SV_FINISH_CANCELLED; goto out; }
        size_t k = piece_end(x, req->prompt, done, req->n_prompt) - done;
        /* A failed feed resets the session (a fresh sequence next time). */
        st = st_spec_prompt(d, req->prompt + done, (int64_t)k);
        if (st != ST_OK) goto out;
        done += k;
        /* Without a checkpoint (out of memory, or a device copy failed) only reuse is lost. */
        if (done < req->n_prompt && req->prompt[done] == x->im_start && x->recurrent && st_session_checkpoint(x->session) != ST_OK)
            st_clear_error();
        if (req->on_progress) req->on_progress(req->ctx, (size_t)usage->cached_tokens, done, req->n_prompt);
    }
    double t1 = st_now();
    usage->prompt_seconds = t1 - t0;

    for (;;) {
        if (atomic_load(req->cancel)) { *finish = SV_FINISH_CANCELLED; break; }
        int32_t tok;
        st = st_sampler_sample(smp, st_spec_logits(d), &tok);
        if (st != ST_OK) break;
        if (st_model_is_eog(x->model, tok)) { *finish = SV_FINISH_EOS; break; }
        st_sampler_accept(smp, tok);
        usage->completion_tokens++;
        size_t len = 0;
        const char *piece = st_token_piece(x->model->tok, tok, 1, &len); /* with control tokens: <think> may be one */
        sv_logprob lp;
        if (req->logprobs) token_logprobs(st_spec_logits(d), st_model_n_vocab(x->model), tok, req->top_logprobs, &lp);
        if (req->on_piece(req->ctx, piece ? piece : "", len, tok, req->logprobs ? &lp : NULL)) { *finish = SV_FINISH_STOP; break; }
        if (usage->completion_tokens >= req->max_tokens || st_spec_n_past(d) + 1 >= n_ctx) {
            *finish = SV_FINISH_LENGTH;
            break;
        }
        st = st_spec_feed(d, tok);
        if (st != ST_OK) break;
    }
    usage->decode_seconds = st_now() - t1;
out:
    st_spec_finish(d);
    usage->draft_tokens = (int)st_spec_stats_get(d)->drafted;
    usage->draft_accepted = (int)st_spec_stats_get(d)->accepted;
    st_sampler_free(smp);
    return st;
}

/* The saved state is the engine's own (strata.h, st_session_state_save): ids, KV rows, recurrent
 * state and checkpoints, so a restored hybrid can return to a message boundary as before. */
static st_status se_state_save(sv_engine *e, void **blob, size_t *n, size_t *tokens) {
    strata_engine *x = (strata_engine *)e;
    ST_TRY(st_session_state_save(x->session, blob, n));
    *tokens = (size_t)st_session_n_past(x->session);
    return ST_OK;
}

static st_status se_state_load(sv_engine *e, const void *blob, size_t n, size_t *tokens) {
    strata_engine *x = (strata_engine *)e;
    ST_TRY(st_session_state_load(x->session, blob, n));
    *tokens = (size_t)st_session_n_past(x->session);
    return ST_OK;
}

static size_t se_memory(sv_engine *e) { return (size_t)st_model_weight_bytes(((strata_engine *)e)->model); }

static void se_close(sv_engine *e) {
    strata_engine *x = (strata_engine *)e;
    if (!x) return;
    st_json_vocab_free(x->json_vocab);
    st_spec_free(x->spec);
    free(x->template_text);
    st_session_free(x->session);
    st_model_free(x->model);
    free(x);
}

static const sv_engine_ops strata_ops = {
    .kind = "strata",
    .info = se_info,
    .render = se_render,
    .tokenize = se_tokenize,
    .detokenize = se_detokenize,
    .embed = se_embed,
    .generate = se_generate,
    .state_save = se_state_save,
    .state_load = se_state_load,
    .memory_bytes = se_memory,
    .close = se_close,
};

/* The model's recommended sampling: GGUF general.sampling.* (llama.cpp's keys, from the model's
 * generation_config.json), where present. */
static void model_sampling(const st_gguf *g, sv_model_info *info) {
    static const struct { const char *key; unsigned bit; } keys[] = {
        {"general.sampling.temp", SV_SET_TEMPERATURE}, {"general.sampling.top_p", SV_SET_TOP_P},
        {"general.sampling.top_k", SV_SET_TOP_K}, {"general.sampling.min_p", SV_SET_MIN_P}};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        double f = 0;
        int64_t k = 0;
        int ok = st_gguf_get_float(g, keys[i].key, &f) == ST_OK;
        if (!ok && st_gguf_get_int(g, keys[i].key, &k) == ST_OK) { f = (double)k; ok = 1; }
        st_clear_error();
        if (!ok || !(f >= 0)) continue;
        if (keys[i].bit == SV_SET_TEMPERATURE) info->sampling.temperature = (float)f;
        else if (keys[i].bit == SV_SET_TOP_P && f <= 1) info->sampling.top_p = (float)f;
        else if (keys[i].bit == SV_SET_TOP_K && f < 1 << 20) info->sampling.top_k = (int)f;
        else if (keys[i].bit == SV_SET_MIN_P && f <= 1) info->sampling.min_p = (float)f;
        else continue;
        info->sampling_set |= keys[i].bit;
    }
}

st_status sv_engine_strata_open(const char *model_path, const st_model_params *mp, const st_session_params *session,
                                const st_spec_params *spec, const char *chat_template, sv_engine **out) {
    *out = NULL;
    strata_engine *x = calloc(1, sizeof *x);
    if (!x) return st_fail(ST_ERR_NOMEM, "out of memory");
    x->base.ops = &strata_ops;
    st_status st = st_model_load(model_path, mp, &x->model);
    if (st != ST_OK) { free(x); return st; }
    if (!st_model_has_tokenizer(x->model)) {
        st = st_fail(ST_ERR_UNSUPPORTED, "%s: the tokenizer is not supported (%s); the server needs text", model_path,
                     st_model_tokenizer_error(x->model));
        se_close(&x->base);
        return st;
    }
    st_session_params sp = *session;
    if (sp.n_ctx <= 0) {
        st_ctx_fit fit = st_model_ctx_fit(x->model, sp.kv_f32);
        sp.n_ctx = fit.n_ctx;
        if (fit.capped)
            st_warn("context %lld tokens, not the model's %lld: its KV cache (%.1f KiB a token) would take more than half "
                    "of the %.1f GiB free (--ctx N sets it)", (long long)fit.n_ctx, (long long)fit.n_ctx_train,
                    (double)fit.cell_bytes / 1024, (double)fit.free_bytes / (1 << 30));
    }
    st = st_session_new(x->model, &sp, &x->session);
    if (st != ST_OK) { se_close(&x->base); return st; }
    x->n_chunk = sp.n_prefill > 0 ? sp.n_prefill : 512;
    x->spec_default = spec ? *spec : st_spec_default_params();
    x->spec_now = x->spec_default;
    st = st_spec_new(x->session, &x->spec_default, &x->spec); /* refuses --spec mtp without a head */
    if (st != ST_OK) { se_close(&x->base); return st; }
    x->im_start = st_tokenizer_find(x->model->tok, "<|im_start|>", 12);
    x->recurrent = st_session_is_recurrent(x->session);

    const char *tmpl = NULL, *name = NULL;
    size_t tlen = 0, nlen = 0;
    int known = 0;
    char *tmpl_z = NULL;
    if (chat_template) {
        x->template_text = strdup(chat_template);
        x->style = st_chat_style_detect(chat_template, &known);
        if (!known) {
            se_close(&x->base);
            return st_fail(ST_ERR_UNSUPPORTED, "the chat template is not one Strata renders (Qwen3's or Qwen 3.5's ChatML forms)");
        }
    } else {
        if (st_gguf_get_str(x->model->gguf, "tokenizer.chat_template", &tmpl, &tlen) == ST_OK) tmpl_z = strndup(tmpl, tlen);
        x->style = st_chat_style_detect(tmpl_z ? tmpl_z : "", &known);
        x->template_text = tmpl_z;
    }
    model_sampling(x->model->gguf, &x->info);
    x->info.chat_template = x->template_text;
    const char *base = strrchr(model_path, '/');
    if (st_gguf_get_str(x->model->gguf, "general.name", &name, &nlen) == ST_OK && nlen)
        snprintf(x->info.name, sizeof x->info.name, "%.*s", (int)nlen, name);
    else
        snprintf(x->info.name, sizeof x->info.name, "%s", base ? base + 1 : model_path);
    x->info.context_length = (int)st_session_n_ctx(x->session);
    st_model_fingerprint(x->model, x->info.fingerprint);
    *out = &x->base;
    return ST_OK;
}
