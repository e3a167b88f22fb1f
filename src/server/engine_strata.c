/* engine_strata.c: the engine port (engine_port.h) on the real engine: a model (include/strata.h),
 * one session, Qwen's chat template (text/chat.h) and the sampler (engine/sampler.h). The default
 * engine of `strata serve -m MODEL`.
 *
 * Reuse is strata.h's policy (st_session_prompt, the terminal chat's too): the session's own
 * sequence or one of the prompt cache's (--cache-ram) that keeps most of the prompt, earlier
 * replies held as the model wrote them, cut back to what it can return to exactly; the prompt is
 * fed in pieces that end at message boundaries with a checkpoint there. Every generated token is
 * fed, the last one too, so the next turn extends the whole reply.
 *
 * Parallel slots (--parallel N): N sessions of the model, each its own sequence (KV rows,
 * recurrent state, checkpoints). Up to N requests run at once, each on the free slot whose state
 * keeps most of its prompt (else the least recently used, whose state goes into the prompt
 * cache). They advance in steps: each request posts its next rows (a prompt piece, the token it
 * just sampled, or a verify chunk) and the request that completes the set runs one forward for
 * all of them (st_session_feed_seqs: the experts and the head read once for all rows), so a
 * waiting request's prompt pieces run beside the others' decode rows. A request that ends (done,
 * cancelled, its client gone) stops counting at once, so a step never waits for it. Each row's
 * arithmetic is that of its sequence alone: the replies do not depend on what runs beside them.
 *
 * The prompt pieces are at most the session's chunk, so that progress is reported and the cancel
 * flag checked between chunks; generation checks it between tokens.
 *
 * Every slot decodes through its own speculative decoder (engine/spec.h): the server's setting
 * (--spec), or the request's ("speculative.type", "speculative.n_max"); the text is the same
 * either way. Its verify chunk (the sampled token and its drafts, every row's logits and
 * recurrent state kept) is the slot's rows of a step, beside the other slots' decode rows and
 * prompt pieces; a token the chunk already verified costs no step. After each request its draft
 * rows are dropped, so the session holds exactly the reply for reuse. A token's bytes go to
 * the server as they are (a UTF-8 character split across tokens is joined by the server). */
#include <math.h>
#include <pthread.h>
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
#include "engine/session_spec.h"
#include "engine/spec.h"
#include "model/model.h"
#include "server/engine_port.h"
#include "strata.h"
#include "text/chat.h"
#include "text/tokenizer.h"

/* One parallel slot: a session, its decoder, and what it waits to have fed in the next step. */
typedef struct slot {
    st_session *session;
    st_spec *spec;             /* the decoder over the session (drafts, or none) */
    st_spec_params spec_now;   /* what it was made with */
    int busy;                  /* a request runs on it */
    uint64_t used;             /* the engine's clock when its last request began */
    st_feed_rows rows;         /* posted for the next step */
    int posted;
    st_status st;              /* how the step went for it */
} slot;

typedef struct strata_engine {
    sv_engine base;
    st_model *model;
    slot *slots;
    int n_slots;
    st_prompt_cache *cache;    /* the states of recent conversations; NULL with --cache-ram 0 */
    st_chat_style style;
    int n_chunk;
    st_json_vocab *json_vocab; /* response_format json_object: the token table, built on first use */
    st_spec_params spec_default; /* --spec, --spec-draft, --spec-p-min */
    char *template_text;         /* the chat template (for /props) */
    sv_model_info info;
    /* The steps: requests inside generate() (active) post their rows; the one that completes the
     * set runs the forward for all of them. Everything below and every slot's session under mu. */
    pthread_mutex_t mu;
    pthread_cond_t stepped;
    int active, posted;
    uint64_t steps, clock;
    char step_error[512];      /* why the last failed step failed */
} strata_engine;

static void se_info(sv_engine *e, sv_model_info *out) { *out = ((strata_engine *)e)->info; }

/* A free slot: the one whose request began last (latest), or the least recently used. */
static slot *free_slot(strata_engine *x, int latest) {
    slot *pick = NULL;
    for (int i = 0; i < x->n_slots; i++) {
        slot *sl = &x->slots[i];
        if (!sl->busy && (!pick || (latest ? sl->used > pick->used : sl->used < pick->used))) pick = sl;
    }
    return pick;
}

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
    st_session *ss = x->slots[0].session;
    size_t d = (size_t)st_session_n_embd(ss);
    if (d > cap) return st_fail(ST_ERR_INVALID, "embed: %zu dimensions, room for %zu", d, cap);
    if ((int64_t)n >= st_session_n_ctx(ss))
        return st_fail(ST_ERR_RANGE, "embed: an input of %zu tokens does not fit the context of %lld", n, (long long)st_session_n_ctx(ss));
    /* On the least recently used free slot, whose conversation goes into the prompt cache first. */
    pthread_mutex_lock(&x->mu);
    slot *sl = free_slot(x, 0);
    st_status st = sl ? ST_OK : st_fail(ST_ERR_INVALID, "embed: every slot is busy");
    if (st == ST_OK && x->cache && st_prompt_cache_store(x->cache, sl->session) != ST_OK) st_clear_error();
    if (st == ST_OK) st_spec_finish(sl->spec);
    if (st == ST_OK) st = st_session_embed(sl->session, ids, (int64_t)n, out);
    pthread_mutex_unlock(&x->mu);
    ST_TRY(st);
    double norm = 0;
    for (size_t i = 0; i < d; i++) norm += (double)out[i] * out[i];
    float scale = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
    for (size_t i = 0; i < d; i++) out[i] *= scale;
    *dim = d;
    return ST_OK;
}

/* One forward for every posted slot (mu held). */
static void run_step(strata_engine *x) {
    st_feed_rows in[SV_MAX_SLOTS];
    slot *who[SV_MAX_SLOTS];
    int k = 0;
    for (int i = 0; i < x->n_slots; i++) {
        slot *sl = &x->slots[i];
        if (!sl->posted) continue;
        in[k] = sl->rows, who[k++] = sl;
    }
    st_status st = k ? st_session_feed_seqs(x->slots[0].session, in, k) : ST_OK;
    /* Each thread of the step takes the message on its own (the message is per thread). */
    if (st != ST_OK) snprintf(x->step_error, sizeof x->step_error, "%s", st_last_error());
    for (int i = 0; i < k; i++) {
        who[i]->st = st;
        who[i]->posted = 0;
    }
    x->posted = 0;
    x->steps++;
    pthread_cond_broadcast(&x->stepped);
}

/* Feeds the slot's rows in the next step, beside the other requests' rows (mu held). */
static st_status step_feed(strata_engine *x, slot *sl, const st_feed_rows *rows) {
    sl->rows = *rows;
    sl->posted = 1;
    uint64_t step = x->steps;
    if (++x->posted == x->active) run_step(x);
    else
        while (x->steps == step) pthread_cond_wait(&x->stepped, &x->mu);
    if (sl->st != ST_OK) return st_fail(sl->st, "%s", x->step_error);
    return ST_OK;
}

/* The free slot whose state keeps most of the prompt; among equals the least recently used. */
static slot *take_slot(strata_engine *x, const int32_t *prompt, size_t n) {
    slot *best = NULL;
    int64_t best_reach = -1;
    for (int i = 0; i < x->n_slots; i++) {
        slot *sl = &x->slots[i];
        if (sl->busy) continue;
        int64_t r = st_session_prompt_reach(sl->session, prompt, (int64_t)n);
        if (r > best_reach || (r == best_reach && sl->used < best->used)) best = sl, best_reach = r;
    }
    if (best) {
        best->busy = 1;
        best->used = ++x->clock;
    }
    return best;
}

/* The request leaves its slot: a step the others wait for may now be complete (mu held). */
static void leave(strata_engine *x, slot *sl) {
    sl->busy = 0;
    x->active--;
    if (x->posted && x->posted == x->active) run_step(x);
}

/* The slot's decoder as this request asks for it (made again only when its setting changes). */
static st_status decoder_for(strata_engine *x, slot *sl, const sv_generate *req) {
    st_spec_params p = x->spec_default;
    if (req->spec_mode) p.mode = req->spec_mode - 1;
    if (req->spec_draft) p.n_draft = req->spec_draft;
    if (p.mode == sl->spec_now.mode && p.n_draft == sl->spec_now.n_draft) return ST_OK;
    st_spec *d = NULL;
    ST_TRY(st_spec_new(sl->session, &p, &d));
    st_spec_free(sl->spec);
    sl->spec = d;
    sl->spec_now = p;
    return ST_OK;
}

/* Prompt rows, and a sampled token, into the slot through its decoder, in the next shared step:
 * a decode row, a prompt piece or a verify chunk beside the other requests' rows. A token that
 * its last verify chunk already holds costs no step. */
static st_status feed_prompt_rows(strata_engine *x, slot *sl, const int32_t *tok, int64_t n) {
    st_feed_rows r;
    ST_TRY(st_spec_prompt_begin(sl->spec, tok, n, &r));
    return st_spec_prompt_end(sl->spec, &r, step_feed(x, sl, &r));
}

static st_status feed_token(strata_engine *x, slot *sl, int32_t tok) {
    st_feed_rows r;
    ST_TRY(st_spec_feed_begin(sl->spec, tok, &r));
    return r.n ? st_spec_feed_end(sl->spec, step_feed(x, sl, &r)) : ST_OK;
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
    int64_t n_ctx = st_session_n_ctx(x->slots[0].session);
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
    int32_t n_vocab = st_model_n_vocab(x->model), n_eog = 0, *eog_ids = NULL;
    float *masked = NULL;
    ST_TRY(st_sampler_new(&pp, n_vocab, &smp));
    if (req->ignore_eos) {
        masked = malloc((size_t)n_vocab * sizeof *masked);
        eog_ids = malloc((size_t)n_vocab * sizeof *eog_ids);
        if (!masked || !eog_ids) {
            free(masked);
            free(eog_ids);
            st_sampler_free(smp);
            return st_fail(ST_ERR_NOMEM, "generate: out of memory for ignore_eos");
        }
        for (int32_t i = 0; i < n_vocab; i++)
            if (st_model_is_eog(x->model, i)) eog_ids[n_eog++] = i;
    }

    pthread_mutex_lock(&x->mu);
    slot *sl = take_slot(x, req->prompt, req->n_prompt);
    if (!sl) {
        /* The server runs at most n_slots requests at once (sv_model_info.parallel). */
        pthread_mutex_unlock(&x->mu);
        st_sampler_free(smp);
        free(masked);
        free(eog_ids);
        return st_fail(ST_ERR_INVALID, "generate: every one of the %d slots is busy", x->n_slots);
    }
    x->active++;
    st_session *ss = sl->session;
    st_status st = decoder_for(x, sl, req);
    st_spec_stats_reset(sl->spec);
    /* A forced tool call's constraint is in the form the model writes (sv_model_info.tool_xml). */
    const st_json_schema *schema = req->schema;
    if (st == ST_OK && (req->json_object || schema) && !x->json_vocab)
        st = st_json_vocab_new(x->model->tok, st_model_n_vocab(x->model), &x->json_vocab);
    double t0 = st_now(), t1 = t0;
    /* The prompt as the session holds it: earlier replies as the model wrote them (strata.h). */
    st_prompt p = {0};
    if (st == ST_OK) st = st_session_prompt(ss, x->cache, req->prompt, (int64_t)req->n_prompt, &p);
    if (st != ST_OK) goto out;
    if (p.n >= n_ctx) {
        st = st_fail(ST_ERR_RANGE, "generate: the prompt with the earlier replies as held (%lld tokens) does not fit the context of %lld",
                     (long long)p.n, (long long)n_ctx);
        goto out;
    }
    for (int64_t i = 0; i < p.n; i++) st_sampler_accept(smp, p.ids[i]);
    if (schema) st = st_sampler_constrain_schema(smp, x->json_vocab, schema, p.ids, (size_t)p.n, req->max_tokens);
    else if (req->json_object) st = st_sampler_constrain_json(smp, x->json_vocab, p.ids, (size_t)p.n, req->max_tokens);
    if (st != ST_OK) goto out;
    usage->prompt_tokens = (int)p.n;
    usage->cached_tokens = (int)p.cached;
    if (req->on_progress) req->on_progress(req->ctx, (size_t)p.cached, (size_t)p.done, (size_t)p.n);
    /* The prompt in pieces, each in a step beside the other requests' decode rows. */
    while (p.done < p.n) {
        if (atomic_load(req->cancel)) { *finish = SV_FINISH_CANCELLED; goto out; }
        int64_t rows = st_session_prompt_piece(ss, &p, x->n_chunk);
        /* A failed feed resets the session (a fresh sequence next time). */
        if ((st = feed_prompt_rows(x, sl, p.ids + p.done, rows)) != ST_OK) goto out;
        st_session_prompt_advance(ss, &p, rows);
        if (req->on_progress) req->on_progress(req->ctx, (size_t)p.cached, (size_t)p.done, (size_t)p.n);
    }
    t1 = st_now();
    usage->prompt_seconds = t1 - t0;

    for (;;) {
        if (atomic_load(req->cancel)) { *finish = SV_FINISH_CANCELLED; break; }
        /* Sampling and the client's callback run beside the other requests' own: no step runs
         * while this request is active and has not posted, so its logits stay (with one slot
         * nothing else runs). A client that stops reading with a full channel (1 MiB) holds up the
         * steps until it reads or goes. */
        int32_t tok;
        pthread_mutex_unlock(&x->mu);
        const float *logits = st_spec_logits(sl->spec);
        if (masked) {
            /* ignore_eos: the end-of-generation tokens out of the draw */
            memcpy(masked, logits, (size_t)n_vocab * sizeof *masked);
            for (int32_t i = 0; i < n_eog; i++) masked[eog_ids[i]] = -INFINITY;
            logits = masked;
        }
        st = st_sampler_sample(smp, logits, &tok);
        int eog = st == ST_OK && st_model_is_eog(x->model, tok), stop = 0;
        if (st == ST_OK && !eog) {
            st_sampler_accept(smp, tok);
            usage->completion_tokens++;
            size_t len = 0;
            const char *piece = st_token_piece(x->model->tok, tok, 1, &len); /* with control tokens: <think> may be one */
            sv_logprob lp;
            if (req->logprobs) token_logprobs(st_spec_logits(sl->spec), n_vocab, tok, req->top_logprobs, &lp);
            stop = req->on_piece(req->ctx, piece ? piece : "", len, tok, req->logprobs ? &lp : NULL);
        }
        pthread_mutex_lock(&x->mu);
        if (st != ST_OK) break;
        if (eog) { *finish = SV_FINISH_EOS; break; }
        /* Every token is held, the last one too, so the next turn extends the whole reply. */
        int full = st_spec_n_past(sl->spec) + 1 >= n_ctx;
        if (!full && (st = feed_token(x, sl, tok)) != ST_OK) break;
        if (stop) { *finish = SV_FINISH_STOP; break; }
        if (usage->completion_tokens >= req->max_tokens || full) {
            *finish = SV_FINISH_LENGTH;
            break;
        }
    }
    usage->decode_seconds = st_now() - t1;
out:
    if (sl->spec) {
        st_spec_finish(sl->spec);
        usage->draft_tokens = (int)st_spec_stats_get(sl->spec)->drafted;
        usage->draft_accepted = (int)st_spec_stats_get(sl->spec)->accepted;
    }
    leave(x, sl);
    pthread_mutex_unlock(&x->mu);
    st_prompt_free(&p);
    st_sampler_free(smp);
    free(masked);
    free(eog_ids);
    return st;
}

/* The saved state is the engine's own (strata.h, st_session_state_save): ids, KV rows, recurrent
 * state and checkpoints, so a restored hybrid can return to a message boundary as before. Saving
 * takes the free slot that ran the latest request (the conversation just answered); loading
 * takes the least recently used free slot, its own state kept in the prompt cache first, and
 * marks it the latest, so the next request that extends the loaded conversation finds it. */
static st_status se_state_save(sv_engine *e, void **blob, size_t *n, size_t *tokens) {
    strata_engine *x = (strata_engine *)e;
    pthread_mutex_lock(&x->mu);
    slot *sl = free_slot(x, 1);
    st_status st = sl ? st_session_state_save(sl->session, blob, n) : st_fail(ST_ERR_INVALID, "save: every slot is busy");
    if (st == ST_OK) *tokens = (size_t)st_session_n_past(sl->session);
    pthread_mutex_unlock(&x->mu);
    return st;
}

static st_status se_state_load(sv_engine *e, const void *blob, size_t n, size_t *tokens) {
    strata_engine *x = (strata_engine *)e;
    pthread_mutex_lock(&x->mu);
    slot *sl = free_slot(x, 0);
    st_status st = sl ? ST_OK : st_fail(ST_ERR_INVALID, "restore: every slot is busy");
    if (st == ST_OK && x->cache && st_prompt_cache_store(x->cache, sl->session) != ST_OK) st_clear_error();
    if (st == ST_OK) st = st_session_state_load(sl->session, blob, n);
    if (st == ST_OK) {
        sl->used = ++x->clock;
        *tokens = (size_t)st_session_n_past(sl->session);
    }
    pthread_mutex_unlock(&x->mu);
    return st;
}

static size_t se_memory(sv_engine *e) { return (size_t)st_model_weight_bytes(((strata_engine *)e)->model); }

static void se_close(sv_engine *e) {
    strata_engine *x = (strata_engine *)e;
    if (!x) return;
    st_json_vocab_free(x->json_vocab);
    free(x->template_text);
    st_prompt_cache_free(x->cache);
    for (int i = 0; i < x->n_slots; i++) {
        st_spec_free(x->slots[i].spec);
        st_session_free(x->slots[i].session);
    }
    free(x->slots);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->stepped);
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
                                const sv_strata_options *o, sv_engine **out) {
    *out = NULL;
    strata_engine *x = calloc(1, sizeof *x);
    if (!x) return st_fail(ST_ERR_NOMEM, "out of memory");
    x->base.ops = &strata_ops;
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->stepped, NULL);
    st_status st = st_model_load(model_path, mp, &x->model);
    if (st != ST_OK) { free(x); return st; }
    if (!st_model_has_tokenizer(x->model)) {
        st = st_fail(ST_ERR_UNSUPPORTED, "%s: the tokenizer is not supported (%s); the server needs text", model_path,
                     st_model_tokenizer_error(x->model));
        se_close(&x->base);
        return st;
    }
    /* A model on a GPU runs one slot: its forward of several sequences is not written yet. */
    int parallel = o ? o->parallel : 1;
    int n_slots = parallel < 1 ? 1 : parallel > SV_MAX_SLOTS ? SV_MAX_SLOTS : parallel;
    if (strcmp(st_model_device(x->model), "cpu") && n_slots > 1) {
        st_warn("--parallel %d: one slot on %s (several sequences in one forward run on the CPU only)", n_slots,
                st_model_device(x->model));
        n_slots = 1;
    }
    st_session_params sp = *session;
    if (sp.n_ctx <= 0) {
        /* Each slot holds a context: the fit's memory is shared among them. */
        st_ctx_fit fit = st_model_ctx_fit(x->model, sp.kv_f32);
        sp.n_ctx = fit.n_ctx;
        int64_t per = fit.free_bytes ? (int64_t)(fit.free_bytes / 2 / fit.cell_bytes / (uint64_t)n_slots / 256 * 256) : sp.n_ctx;
        if (per < 256) per = 256;
        if (per < sp.n_ctx) sp.n_ctx = per;
        if (sp.n_ctx < fit.n_ctx_train)
            st_warn("context %lld tokens for each of %d slots, not the model's %lld: its KV cache (%.1f KiB a token) would "
                    "take more than half of the %.1f GiB free (--ctx N sets it)", (long long)sp.n_ctx, n_slots,
                    (long long)fit.n_ctx_train, (double)fit.cell_bytes / 1024, (double)fit.free_bytes / (1 << 30));
    }
    if (!(x->slots = calloc((size_t)n_slots, sizeof *x->slots))) { se_close(&x->base); return st_fail(ST_ERR_NOMEM, "out of memory"); }
    for (int i = 0; i < n_slots; i++) {
        /* The steps run on the first slot's threads and workspace; the others keep only a state. */
        st_session_params own = sp;
        if (i > 0) own.n_threads = 1;
        st = st_session_new(x->model, &own, &x->slots[i].session);
        if (st != ST_OK) { se_close(&x->base); return st; }
        x->n_slots = i + 1;
    }
    x->spec_default = o && o->spec ? *o->spec : st_spec_default_params();
    for (int i = 0; i < n_slots; i++) {
        slot *sl = &x->slots[i];
        sl->spec_now = x->spec_default;
        st = st_spec_new(sl->session, &x->spec_default, &sl->spec); /* refuses --spec mtp without a head */
        if (st != ST_OK) { se_close(&x->base); return st; }
    }
    x->n_chunk = sp.n_prefill > 0 ? sp.n_prefill : 512;
    if (o && o->cache_bytes && (st = st_prompt_cache_new(o->cache_bytes, &x->cache)) != ST_OK) { se_close(&x->base); return st; }

    const char *tmpl = NULL, *name = NULL;
    size_t tlen = 0, nlen = 0;
    int known = 0;
    const char *chat_template = o ? o->chat_template : NULL;
    if (chat_template) {
        x->template_text = strdup(chat_template);
        x->style = st_chat_style_detect(chat_template, &known);
        if (!known) {
            se_close(&x->base);
            return st_fail(ST_ERR_UNSUPPORTED, "the chat template is not one Strata renders (Qwen3's or Qwen 3.5's ChatML forms)");
        }
    } else {
        char *tmpl_z = NULL;
        if (st_gguf_get_str(x->model->gguf, "tokenizer.chat_template", &tmpl, &tlen) == ST_OK) tmpl_z = strndup(tmpl, tlen);
        x->style = st_chat_style_detect(tmpl_z ? tmpl_z : "", &known);
        x->template_text = tmpl_z;
    }
    model_sampling(x->model->gguf, &x->info);
    x->info.chat_template = x->template_text;
    x->info.tool_xml = x->style == ST_CHAT_QWEN35;
    const char *base = strrchr(model_path, '/');
    if (st_gguf_get_str(x->model->gguf, "general.name", &name, &nlen) == ST_OK && nlen)
        snprintf(x->info.name, sizeof x->info.name, "%.*s", (int)nlen, name);
    else
        snprintf(x->info.name, sizeof x->info.name, "%s", base ? base + 1 : model_path);
    x->info.context_length = (int)st_session_n_ctx(x->slots[0].session);
    x->info.parallel = x->n_slots;
    st_model_fingerprint(x->model, x->info.fingerprint);
    *out = &x->base;
    return ST_OK;
}
