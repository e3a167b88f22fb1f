/* session.c: a session (strata.h): the state of one sequence and the prompt chain that feeds it.
 *
 * State (owned here, alive across calls, never in the workspace): a KV cache per attention layer
 * (f16 by default, f32 on request), a conv state and a delta-rule state per Gated DeltaNet layer
 * (f32, zero for a fresh sequence), and the number of positions filled. qwen4exp adds, on a QSA
 * layer, the raw indexer keys (the KV type) and the pooled block keys derived from them, and on its
 * PLE layer the conv history (f32, zero for a fresh sequence); the PLE hash reads the fed ids.
 * Scratch: the workspace (workspace.h), grown only here, between completed chunks.
 * The prompt chain: tokens are fed in chunks of up to n_prefill rows through the same forward as
 * decode (a chunk of one row).
 * A model loaded for a device (model_api.c) gets a device session instead (engine/device.h): the
 * state and the workspace live there, and only the ids and the logits cross; the functions below
 * then dispatch to it. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/pool.h"
#include "base/workspace.h"
#include "engine/device.h"
#include "engine/session_spec.h"
#include "engine/session_state.h"
#include "model/forward.h"
#include "model/forward_ws.h"
#include "model/mtp.h"
#include "quant/types.h"

struct st_session {
    struct st_model *m;
    st_session_params p;
    st_pool *pool;
    st_state state;
    st_ws_plan plan;
    st_workspace ws;
    int32_t *ids;                 /* the ids fed: [n_ctx], the first n_past held (session_state.c) */
    struct st_checkpoints *ckpt;  /* recurrent-state checkpoints (session_state.c), NULL until one */
    st_device_session *dev;    /* the state on the model's device; NULL on the CPU */
    float *batch_logits;          /* st_session_feed_seqs led by this session: the head's rows */
    int64_t batch_cap;
};

st_session_params st_session_default_params(void) {
    return (st_session_params){.n_ctx = 0, .n_prefill = 512, .n_threads = 0, .kv_f32 = 0};
}

static st_status alloc_state(st_session *s) {
    const st_hparams *hp = &s->m->hp;
    st_state *st = &s->state;
    st->layers = calloc((size_t)st_model_n_blocks(s->m), sizeof *st->layers);
    if (!st->layers) return st_fail(ST_ERR_NOMEM, "session: out of memory");
    for (int64_t il = 0; il < st_model_n_blocks(s->m); il++) {
        st_layer_state *L = &st->layers[il];
        if (st_hp_is_hybrid(hp) && hp->is_linear[il]) {
            int64_t C = st_hp_conv_channels(hp), dk = hp->ssm_state;
            L->conv = calloc((size_t)(C * (hp->ssm_conv_kernel - 1)) + 1, sizeof(float));
            L->ssm = calloc((size_t)(hp->ssm_n_v * dk * dk), sizeof(float));
            if (!L->conv || !L->ssm) return st_fail(ST_ERR_NOMEM, "session: out of memory for the state of layer %lld", (long long)il);
            if (il == hp->ple_layer && hp->arch == ST_ARCH_QWEN4EXP &&
                !(L->ple_hist = calloc((size_t)(hp->n_hc * hp->n_embd * st_hp_ple_hist(hp)) + 1, sizeof(float))))
                return st_fail(ST_ERR_NOMEM, "session: out of memory for the PLE history (layer %lld)", (long long)il);
        } else {
            if (st_hp_qsa(hp, il)) {
                L->idx_cache = calloc((size_t)st->n_ctx, st_kv_row_bytes(st->kv_type, hp->idx_dim));
                L->idx_blocks = malloc((size_t)(st->n_ctx / hp->compress_ratio[il] + 1) * (size_t)hp->idx_dim * sizeof(float));
                if (!L->idx_cache || !L->idx_blocks)
                    return st_fail(ST_ERR_NOMEM, "session: out of memory for the indexer keys of %lld cells (layer %lld)",
                                   (long long)st->n_ctx, (long long)il);
            }
            size_t row = st_kv_row_bytes(st->kv_type, hp->n_head_kv[il] * hp->head_dim);
            L->k_cache = calloc((size_t)st->n_ctx, row);
            L->v_cache = calloc((size_t)st->n_ctx, row);
            if (!L->k_cache || !L->v_cache)
                return st_fail(ST_ERR_NOMEM, "session: out of memory for a KV cache of %lld cells (layer %lld)",
                               (long long)st->n_ctx, (long long)il);
        }
    }
    return ST_OK;
}

/* The MTP head of a device session runs on the CPU (st_session_mtp) from the hidden rows the
 * device's chunks copy back: its KV cache (the head's layer alone), threads and workspace here. */
static st_status device_mtp_head(st_session *s) {
    const st_hparams *hp = &s->m->hp;
    st_state *st = &s->state;
    ST_TRY(st_pool_create(s->p.n_threads, &s->pool));
    s->plan = (st_ws_plan){.m = s->m, .n_threads = st_pool_size(s->pool), .n_ctx = st->n_ctx};
    ST_TRY(st_workspace_init(&s->ws, WS_N_BUFFERS, st_forward_ws_size, &s->plan));
    ST_TRY(st_workspace_reserve(&s->ws, 1));
    if (!(st->layers = calloc((size_t)st_model_n_blocks(s->m), sizeof *st->layers)))
        return st_fail(ST_ERR_NOMEM, "session: out of memory");
    st_layer_state *L = &st->layers[hp->n_layer];
    size_t row = st_kv_row_bytes(st->kv_type, hp->n_head_kv[hp->n_layer] * hp->head_dim);
    L->k_cache = calloc((size_t)st->n_ctx, row);
    L->v_cache = calloc((size_t)st->n_ctx, row);
    if (!L->k_cache || !L->v_cache)
        return st_fail(ST_ERR_NOMEM, "session: out of memory for the MTP head's KV cache of %lld cells", (long long)st->n_ctx);
    return ST_OK;
}

/* The device half of st_session_new: state and workspace on the model's device. */
static st_status device_session_new(st_session *s, st_session **out) {
    st_status st = st_device_session_new(s->m->dev, s->m, s->state.n_ctx, s->state.kv_type, &s->dev);
    if (st == ST_OK) st_device_session_set_ids(s->dev, s->ids);
    if (st == ST_OK) st = st_device_session_reserve(s->dev, 1);
    if (st == ST_OK && s->m->n_mtp) st = device_mtp_head(s);
    if (st != ST_OK) {
        st_session_free(s);
        return st;
    }
    *out = s;
    return ST_OK;
}

st_status st_session_new(st_model *m, const st_session_params *params, st_session **out) {
    *out = NULL;
    st_session *s = calloc(1, sizeof *s);
    if (!s) return st_fail(ST_ERR_NOMEM, "session: out of memory");
    s->m = m;
    s->p = params ? *params : st_session_default_params();
    if (s->p.n_prefill <= 0) s->p.n_prefill = 512;
    if (s->p.n_ctx <= 0) s->p.n_ctx = m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    if (s->p.n_ctx <= 0) s->p.n_ctx = 4096;
    s->state.n_ctx = s->p.n_ctx;
    s->state.kv_type = s->p.kv_f32 ? ST_TYPE_F32 : ST_TYPE_F16;
    if (!(s->ids = malloc((size_t)s->p.n_ctx * sizeof *s->ids))) {
        int64_t n_ctx = s->p.n_ctx;
        st_session_free(s);
        return st_fail(ST_ERR_NOMEM, "session: out of memory for %lld ids", (long long)n_ctx);
    }
    s->state.ids = s->ids;
    if (m->dev) return device_session_new(s, out);
    st_status st = st_pool_create(s->p.n_threads, &s->pool);
    if (st == ST_OK) {
        s->plan = (st_ws_plan){.m = m, .n_threads = st_pool_size(s->pool), .n_ctx = s->state.n_ctx};
        st = st_workspace_init(&s->ws, WS_N_BUFFERS, st_forward_ws_size, &s->plan);
    }
    if (st == ST_OK) st = alloc_state(s);
    /* One row up front, so st_session_logits() has a buffer before the first feed. */
    if (st == ST_OK) st = st_workspace_reserve(&s->ws, 1);
    if (st != ST_OK) {
        st_session_free(s);
        return st;
    }
    memset(st_workspace_get(&s->ws, WS_LOGITS), 0, (size_t)m->hp.n_vocab * sizeof(float));
    *out = s;
    return ST_OK;
}

static void free_steps(st_session *s) {
    for (int64_t il = 0; il < s->m->hp.n_layer; il++) {
        st_layer_state *L = &s->state.layers[il];
        for (int i = 0; i < s->state.n_steps && L->ssm_steps; i++) {
            free(L->ssm_steps[i]);
            free(L->conv_steps[i]);
        }
        free(L->ssm_steps);
        free(L->conv_steps);
        L->ssm_steps = L->conv_steps = NULL;
    }
    s->state.n_steps = 0;
}

/* Step planes for chunks of up to `rows` rows that keep every row's recurrent state: per GDN
 * layer, `rows` delta and conv states beside the current ones. Allocated once, at the first
 * speculative decode; part of the state (never the workspace). */
st_status st_session_reserve_steps(st_session *s, int rows) {
    const st_hparams *hp = &s->m->hp;
    if (s->dev) return st_device_session_reserve_steps(s->dev, rows);
    if (rows <= s->state.n_steps || !st_hp_is_hybrid(hp)) return ST_OK;
    free_steps(s);
    int64_t dk = hp->ssm_state;
    size_t conv = (size_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1)) + 1, ssm = (size_t)(hp->ssm_n_v * dk * dk);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        st_layer_state *L = &s->state.layers[il];
        if (!L->ssm) continue;
        L->ssm_steps = calloc((size_t)rows, sizeof *L->ssm_steps);
        L->conv_steps = calloc((size_t)rows, sizeof *L->conv_steps);
        int ok = L->ssm_steps && L->conv_steps;
        for (int i = 0; i < rows && ok; i++)
            ok = (L->ssm_steps[i] = malloc(ssm * sizeof(float))) && (L->conv_steps[i] = malloc(conv * sizeof(float)));
        s->state.n_steps = rows; /* what free_steps walks (NULL entries are freed harmlessly) */
        if (!ok) {
            free_steps(s);
            return st_fail(ST_ERR_NOMEM, "session: out of memory for %d recurrent state planes (layer %lld)", rows, (long long)il);
        }
    }
    s->state.n_steps = rows;
    return ST_OK;
}

void st_session_free(st_session *s) {
    if (!s) return;
    free(s->ids);
    free(s->batch_logits);
    st_checkpoints_free(s->ckpt);
    st_device_session_free(s->dev);
    if (s->state.layers) {
        free_steps(s);
        for (int64_t il = 0; il < st_model_n_blocks(s->m); il++) {
            st_layer_state *L = &s->state.layers[il];
            free(L->k_cache);
            free(L->v_cache);
            free(L->conv);
            free(L->ssm);
            free(L->idx_cache);
            free(L->idx_blocks);
            free(L->ple_hist);
        }
        free(s->state.layers);
    }
    st_workspace_free(&s->ws);
    if (s->pool) st_pool_destroy(s->pool);
    free(s);
}

void st_session_reset(st_session *s) {
    const st_hparams *hp = &s->m->hp;
    st_checkpoints_clear(s->ckpt);
    if (s->dev) {
        st_device_session_reset(s->dev);
        s->state.n_past = 0;
        s->state.mtp_n_past = 0;
        return;
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        st_layer_state *L = &s->state.layers[il];
        if (L->conv) memset(L->conv, 0, (size_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1)) * sizeof(float));
        if (L->ssm) memset(L->ssm, 0, (size_t)(hp->ssm_n_v * hp->ssm_state * hp->ssm_state) * sizeof(float));
        if (L->ple_hist) memset(L->ple_hist, 0, (size_t)(hp->n_hc * hp->n_embd * st_hp_ple_hist(hp)) * sizeof(float));
        L->n_blocks = 0;
    }
    /* KV cells past n_past are never read (the attention sees cells < n_kv only). */
    s->state.n_past = 0;
    s->state.mtp_n_past = 0;
}

int64_t st_session_n_past(const st_session *s) { return s->state.n_past; }
int64_t st_session_n_ctx(const st_session *s) { return s->state.n_ctx; }
uint64_t st_session_scratch_bytes(const st_session *s) {
    return s->dev ? st_device_session_scratch_bytes(s->dev) : s->ws.bytes;
}

uint64_t st_session_state_bytes(const st_session *s) {
    const st_hparams *hp = &s->m->hp;
    if (s->dev) return st_device_session_state_bytes(s->dev);
    uint64_t b = 0;
    for (int64_t il = 0; il < st_model_n_blocks(s->m); il++) {
        const st_layer_state *L = &s->state.layers[il];
        if (L->k_cache) b += 2 * (uint64_t)s->state.n_ctx * st_kv_row_bytes(s->state.kv_type, hp->n_head_kv[il] * hp->head_dim);
        if (L->conv) b += (uint64_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1)) * sizeof(float);
        if (L->ssm) b += (uint64_t)(hp->ssm_n_v * hp->ssm_state * hp->ssm_state) * sizeof(float) * (uint64_t)(1 + s->state.n_steps);
        if (L->conv && s->state.n_steps)
            b += (uint64_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1)) * sizeof(float) * (uint64_t)s->state.n_steps;
        if (L->idx_cache) b += (uint64_t)s->state.n_ctx * st_kv_row_bytes(s->state.kv_type, hp->idx_dim);
        if (L->idx_blocks) b += (uint64_t)(s->state.n_ctx / hp->compress_ratio[il] + 1) * hp->idx_dim * sizeof(float);
        if (L->ple_hist) b += (uint64_t)(hp->n_hc * hp->n_embd * st_hp_ple_hist(hp)) * sizeof(float);
    }
    return b;
}
const float *st_session_logits(const st_session *s) {
    return s->dev ? st_device_session_logits(s->dev) : st_workspace_f32(&s->ws, WS_LOGITS);
}

/* What a feed refuses before anything changes: no tokens, an id outside the vocabulary, no room. */
static st_status check_feed(const st_session *s, const int32_t *tokens, int64_t n) {
    int64_t V = s->m->hp.n_vocab;
    if (n <= 0) return st_fail(ST_ERR_INVALID, "feed: %lld tokens", (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return st_fail(ST_ERR_RANGE, "token %lld (position %lld of the input) is outside the vocabulary 0..%lld",
                           (long long)tokens[i], (long long)i, (long long)(V - 1));
    if (s->state.n_past + n > s->state.n_ctx)
        return st_fail(ST_ERR_RANGE, "context is full: %lld positions + %lld new tokens exceed the context size %lld",
                       (long long)s->state.n_past, (long long)n, (long long)s->state.n_ctx);
    return ST_OK;
}

/* st_session_feed, and with hidden the last position's final hidden state (st_session_embed). */
static st_status feed(st_session *s, const int32_t *tokens, int64_t n, float *logits_all, float *hidden) {
    int64_t V = s->m->hp.n_vocab;
    ST_TRY(check_feed(s, tokens, n));
    /* Held once fed (n_past counts them); a failed feed resets, so none is held half-fed. */
    memcpy(s->ids + s->state.n_past, tokens, (size_t)n * sizeof *tokens);
    for (int64_t off = 0; off < n; off += s->p.n_prefill) {
        int64_t rows = n - off < s->p.n_prefill ? n - off : s->p.n_prefill;
        if (s->dev) {
            st_status st = st_device_session_feed(s->dev, tokens + off, rows, s->state.n_past,
                                                  logits_all ? logits_all + off * V : NULL);
            if (st != ST_OK) {
                st_session_reset(s);
                return st;
            }
            s->state.n_past += rows;
            continue;
        }
        /* Between chunks: the previous chunk has completed, so growing cannot free a buffer in use. */
        st_status st = st_workspace_reserve(&s->ws, rows);
        st_chunk c = {.tokens = tokens + off, .n = rows, .logits_all = logits_all != NULL,
                      .logits = logits_all ? logits_all + off * V : NULL, .ld_logits = V,
                      .hidden = off + rows == n ? hidden : NULL};
        if (st == ST_OK) st = st_forward(s->m, &s->state, &s->ws, s->pool, &c);
        if (st != ST_OK) {
            /* Never leave a half-fed sequence behind. */
            st_session_reset(s);
            return st;
        }
    }
    if (logits_all && !s->dev)
        memcpy(st_workspace_get(&s->ws, WS_LOGITS), logits_all + (n - 1) * V, (size_t)V * sizeof(float));
    return ST_OK;
}

st_status st_session_feed(st_session *s, const int32_t *tokens, int64_t n, float *logits_all) {
    return feed(s, tokens, n, logits_all, NULL);
}

st_status st_session_embed(st_session *s, const int32_t *tokens, int64_t n, float *out) {
    if (s->dev) return st_fail(ST_ERR_UNSUPPORTED, "embeddings are computed on the CPU only (this session is on a GPU)");
    st_session_reset(s);
    return feed(s, tokens, n, NULL, out);
}

int32_t st_session_n_embd(const st_session *s) { return (int32_t)s->m->hp.n_embd; }

#define FEED_BATCH_MAX ST_FORWARD_MAX_SEQS

st_status st_session_feed_batch(st_session *lead, st_session *const *s, int n_s, const int32_t *const *tokens, const int64_t *n) {
    if (n_s <= 0 || n_s > FEED_BATCH_MAX) return st_fail(ST_ERR_INVALID, "feed: a batch of %d sessions (1..%d)", n_s, FEED_BATCH_MAX);
    st_feed_rows rows[FEED_BATCH_MAX];
    for (int k = 0; k < n_s; k++) rows[k] = (st_feed_rows){.s = s[k], .tokens = tokens[k], .n = n[k]};
    return st_session_feed_seqs(lead, rows, n_s);
}

st_status st_session_feed_seqs(st_session *lead, const st_feed_rows *r, int n_s) {
    if (n_s <= 0 || n_s > FEED_BATCH_MAX) return st_fail(ST_ERR_INVALID, "feed: a batch of %d sessions (1..%d)", n_s, FEED_BATCH_MAX);
    int64_t rows = 0, head = 0;
    for (int k = 0; k < n_s; k++) {
        st_session *s = r[k].s;
        if (s->m != lead->m) return st_fail(ST_ERR_INVALID, "feed: session %d of the batch is of another model", k);
        for (int j = 0; j < k; j++)
            if (r[j].s == s) return st_fail(ST_ERR_INVALID, "feed: session %d is in the batch twice", k);
        ST_TRY(check_feed(s, r[k].tokens, r[k].n));
        rows += r[k].n;
        head += r[k].logits_all ? r[k].n : 1;
    }
    /* Alone (the session's own chunks, or the verify chunk), or on a device (whose forward of
     * several sequences is not written yet): one after the other. */
    if ((n_s == 1 && r[0].s == lead) || lead->dev) {
        for (int k = 0; k < n_s; k++) {
            const st_feed_rows *q = &r[k];
            if (q->logits_all || q->h_all || q->keep_steps)
                ST_TRY(st_session_feed_rows(q->s, q->tokens, q->n, q->logits_all, q->h_all, q->keep_steps));
            else
                ST_TRY(st_session_feed(q->s, q->tokens, q->n, NULL));
        }
        return ST_OK;
    }
    int64_t V = lead->m->hp.n_vocab;
    if (lead->batch_cap < head) {
        float *b = realloc(lead->batch_logits, (size_t)head * (size_t)V * sizeof *b);
        if (!b) return st_fail(ST_ERR_NOMEM, "feed: out of memory for %lld rows of logits", (long long)head);
        lead->batch_logits = b;
        lead->batch_cap = head;
    }
    /* Grown first: the lead's own logits are one of the destinations below. */
    ST_TRY(st_workspace_reserve(&lead->ws, rows));
    st_seq_rows seqs[FEED_BATCH_MAX];
    for (int k = 0; k < n_s; k++) {
        st_session *s = r[k].s;
        memcpy(s->ids + s->state.n_past, r[k].tokens, (size_t)r[k].n * sizeof *r[k].tokens);
        /* each sequence's logits straight into its own (the last row's: the session's) */
        seqs[k] = (st_seq_rows){.s = &s->state, .tokens = r[k].tokens, .n = r[k].n,
                                .logits = r[k].logits_all ? r[k].logits_all : st_workspace_f32(&s->ws, WS_LOGITS),
                                .logits_all = r[k].logits_all != NULL, .h_out = r[k].h_all, .keep_steps = r[k].keep_steps};
    }
    st_status st = st_forward_seqs(lead->m, &lead->ws, lead->pool, seqs, n_s, lead->batch_logits);
    if (st != ST_OK) {
        /* Never leave a half-fed sequence behind. */
        for (int k = 0; k < n_s; k++) st_session_reset(r[k].s);
        return st;
    }
    for (int k = 0; k < n_s; k++)
        if (r[k].logits_all)
            memcpy(st_workspace_get(&r[k].s->ws, WS_LOGITS), r[k].logits_all + (r[k].n - 1) * V, (size_t)V * sizeof(float));
    return ST_OK;
}

void st_checkpoints_clear(struct st_checkpoints *c) {
    if (c) c->n = 0;
}

void st_checkpoints_free(struct st_checkpoints *c) {
    if (!c) return;
    for (int i = 0; i < ST_SESSION_CHECKPOINTS; i++) free(c->data[i]);
    free(c);
}

/* ---- the insides (session_internal.h): for session_state.c and the tests ---- */
#include "engine/session_internal.h"

st_state *st_session_state(st_session *s) { return &s->state; }
st_workspace *st_session_workspace(st_session *s) { return &s->ws; }
st_status st_session_reserve_rows(st_session *s, int64_t rows) {
    return s->dev ? st_device_session_reserve(s->dev, rows) : st_workspace_reserve(&s->ws, rows);
}
st_device_session *st_session_device(st_session *s) { return s->dev; }

/* ---- for session_state.c (src/engine/session_state.h) ---- */
const struct st_model *st_session_model(const st_session *s) { return s->m; }
int32_t *st_session_id_buffer(st_session *s) { return s->ids; }
struct st_checkpoints **st_session_checkpoint_slot(st_session *s) { return &s->ckpt; }

/* ---- for spec.c and the server's steps (src/engine/session_spec.h) ---- */

st_status st_session_feed_rows(st_session *s, const int32_t *tokens, int64_t n, float *logits_all, float *h_all,
                               int keep_steps) {
    int64_t V = s->m->hp.n_vocab;
    ST_TRY(check_feed(s, tokens, n));
    memcpy(s->ids + s->state.n_past, tokens, (size_t)n * sizeof *tokens);
    if (s->dev) {
        st_status st = st_device_session_verify(s->dev, tokens, n, s->state.n_past, logits_all, h_all, keep_steps);
        if (st != ST_OK) {
            st_session_reset(s);
            return st;
        }
        s->state.n_past += n;
        return ST_OK;
    }
    st_status st = st_workspace_reserve(&s->ws, n);
    st_chunk c = {.tokens = tokens, .n = n, .logits_all = logits_all != NULL, .logits = logits_all, .ld_logits = V,
                  .h_out = h_all, .keep_steps = keep_steps};
    if (st == ST_OK) st = st_forward(s->m, &s->state, &s->ws, s->pool, &c);
    if (st != ST_OK) {
        st_session_reset(s);
        return st;
    }
    if (!logits_all) return ST_OK;
    memcpy(st_workspace_get(&s->ws, WS_LOGITS), logits_all + (n - 1) * V, (size_t)V * sizeof(float));
    return ST_OK;
}

void st_session_keep_row(st_session *s, int64_t pos0, int64_t k) {
    if (s->dev) {
        st_device_session_keep_row(s->dev, k);
        s->state.n_past = pos0 + k + 1;
    } else {
        st_state_keep_row(s->m, &s->state, pos0, k);
    }
    if (s->state.mtp_n_past > s->state.n_past) s->state.mtp_n_past = s->state.n_past;
}

void st_session_set_logits(st_session *s, const float *row) {
    if (s->dev) st_device_session_set_logits(s->dev, row);
    else memcpy(st_workspace_get(&s->ws, WS_LOGITS), row, (size_t)s->m->hp.n_vocab * sizeof(float));
}

st_status st_session_mtp(st_session *s, const st_mtp_chunk *c) {
    if (c->n > s->ws.rows) {
        /* Growing drops the scratch, and the session's logits with it: they are the last fed
         * row's (a prompt piece fed beside other sessions leaves this session's workspace small). */
        size_t bytes = (size_t)s->m->hp.n_vocab * sizeof(float);
        float *keep = malloc(bytes);
        if (!keep) return st_fail(ST_ERR_NOMEM, "session: out of memory for the logits");
        memcpy(keep, st_workspace_get(&s->ws, WS_LOGITS), bytes);
        st_status st = st_workspace_reserve(&s->ws, c->n);
        if (st == ST_OK) memcpy(st_workspace_get(&s->ws, WS_LOGITS), keep, bytes);
        free(keep);
        ST_TRY(st);
    }
    return st_forward_mtp(s->m, &s->state, &s->ws, s->pool, c);
}

int64_t st_session_mtp_n_past(const st_session *s) { return s->state.mtp_n_past; }
void st_session_mtp_cut(st_session *s, int64_t n) {
    if (s->state.mtp_n_past > n) s->state.mtp_n_past = n;
}
int st_session_on_device(const st_session *s) { return s->dev != NULL; }
int st_session_n_prefill(const st_session *s) { return s->p.n_prefill; }
