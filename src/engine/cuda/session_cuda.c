/* session_cuda.c: engine/device.h on CUDA: sessions whose KV caches, recurrent states and
 * prompt workspace live on the GPU, over a model whose weights were uploaded there
 * (model/cuda/device_model.c).
 *
 * Decode: a step of one token is captured as a CUDA graph the first time a context bucket (256
 * cells) is reached, after one eager run of the same step has sized the backend's scratch; later
 * steps upload the token and its position (8 bytes), replay the graph and download the logits.
 * qwen4exp's steps also upload the PLE hash's window of ids (its rows read from a pinned copy of
 * the table: device_model.c), and a step pools the QSA block it completes on the device, so the host only
 * moves the block count on (st_state_qsa_step_done). Prompt chunks run eagerly.
 *
 * Workspace: the same st_workspace as on the CPU, its buffers taken with cudaMalloc and grown only
 * between chunks (every chunk ends with the logits' download, which waits for the GPU). */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "base/log.h"
#include "engine/device.h"
#include "model/cuda/device_model.h"
#include "model/cuda/forward_cuda.h"
#include "model/cuda/host_experts.h"
#include "model/forward_ws.h"
#include "model/state.h"
#include "quant/types.h"

#define GRAPH_BUCKET 256
/* the pinned io block: tokens and positions of a chunk, then a PLE window */
#define IO_WIN (2 * ST_DEV_VERIFY_ROWS)
#define IO_INTS (IO_WIN + ST_DEV_VERIFY_ROWS + ST_PLE_HASH_MAX_NGRAM)

_Static_assert(ST_DEVICE_VERIFY_ROWS == ST_DEV_VERIFY_ROWS, "engine/device.h and model/cuda/forward_cuda.h differ");

struct st_device_session {
    st_device_model *dm;
    const struct st_model *m;
    st_cuda *cu;
    int64_t n_ctx;
    uint32_t kv_type;
    st_dlayer_state *state;
    st_layer_state *lstate;      /* the forward's view of state (refresh_view) */
    st_state view;
    struct st_model view_m;      /* the model with the device's tensors (st_forward_cuda_view) */
    st_cuda_backend be;          /* the op table the forward runs on; its buffers outlive the graphs */
    st_ws_plan plan;             /* the workspace's sizes: the model and n_ctx */
    const int32_t *ids;          /* the engine session's ids (st_device_session_set_ids) */
    int be_ready;
    st_workspace ws;
    int32_t *io;                 /* pinned: tokens, then positions, ST_DEV_VERIFY_ROWS of each; then
                                    a step's PLE window (IO_WIN) */
    float *logits;               /* pinned: n_vocab, the last row's (st_session_logits reads it) */
    st_cuda_graph **graphs;      /* per row count (1: decode; 2 ..: verify chunks) and bucket of
                                    GRAPH_BUCKET cells: [rows - 1][n_graphs] */
    int64_t n_graphs;
    int no_graphs;               /* STRATA_CUDA_GRAPHS=0, or a capture failed */
    int no_chunk_graphs;         /* verify chunks run eagerly (qwen4exp) */
    int unfused;                 /* STRATA_CUDA_FUSED=0: the plain op sequence */
    int outs_unfused;            /* STRATA_CUDA_FUSED=1: without the fused block outputs (forward_cuda.h) */
    uint64_t graph_epoch;        /* the backend's scratch epoch the graphs were captured at */
    int n_steps;                 /* step planes per GDN layer (st_device_session_reserve_steps) */
    float *emit_dst;             /* logits_all while a chunk runs */
    st_dprofile *prof;           /* STRATA_CUDA_PROFILE=1: block times, printed at the end */
};

/* ---- sessions ---------------------------------------------------------------------------------- */

static void *dev_alloc(void *ctx, size_t bytes) {
    void *p = NULL;
    return st_cuda_alloc(ctx, bytes, &p) == ST_OK ? p : NULL;
}

static void dev_free(void *ctx, void *p) { st_cuda_free(ctx, p); }

/* The forward's st_state over the device buffers: the same pointers, the conv planes as one block
 * from conv_steps[0] (backend_cuda.c's conv1d_steps), the delta planes' device array as it is. */
static void refresh_view(st_device_session *ds) {
    const st_hparams *hp = &ds->m->hp;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        st_dlayer_state *L = &ds->state[il];
        int64_t n_blocks = ds->lstate[il].n_blocks; /* the pooled keys stay valid */
        ds->lstate[il] = (st_layer_state){.k_cache = L->k_cache, .v_cache = L->v_cache, .conv = L->conv, .ssm = L->ssm,
                                          .conv_steps = &L->conv_steps, .ssm_steps = L->ssm_steps,
                                          .idx_cache = L->idx_cache, .idx_blocks = L->idx_blocks, .n_blocks = n_blocks,
                                          .ple_hist = L->ple_hist};
    }
    ds->view = (st_state){.n_ctx = ds->n_ctx, .kv_type = ds->kv_type, .layers = ds->lstate, .n_steps = ds->n_steps,
                          .ids = ds->ids};
}

static size_t conv_bytes(const st_hparams *hp) {
    return (size_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1)) * sizeof(float);
}

static size_t ssm_bytes(const st_hparams *hp) {
    return (size_t)(hp->ssm_n_v * hp->ssm_state * hp->ssm_state) * sizeof(float);
}

static size_t kv_bytes(const st_device_session *ds, int64_t il) {
    const st_hparams *hp = &ds->m->hp;
    return (size_t)ds->n_ctx * st_kv_row_bytes(ds->kv_type, hp->n_head_kv[il] * hp->head_dim);
}

static int is_gdn(const st_hparams *hp, int64_t il) { return st_hp_is_hybrid(hp) && hp->is_linear[il]; }

/* qwen4exp's state: a QSA layer's raw indexer keys and pooled block keys, the PLE conv history. */
static size_t idx_bytes(const st_device_session *ds) {
    return (size_t)ds->n_ctx * st_kv_row_bytes(ds->kv_type, ds->m->hp.idx_dim);
}
static size_t blocks_bytes(const st_device_session *ds, int64_t il) {
    return (size_t)(ds->n_ctx / ds->m->hp.compress_ratio[il] + 1) * (size_t)ds->m->hp.idx_dim * sizeof(float);
}
static size_t ple_bytes(const st_hparams *hp) {
    return (size_t)(hp->n_hc * hp->n_embd * st_hp_ple_hist(hp)) * sizeof(float);
}
static int is_ple(const st_hparams *hp, int64_t il) { return hp->arch == ST_ARCH_QWEN4EXP && il == hp->ple_layer; }

void st_device_session_set_ids(st_device_session *ds, const int32_t *ids) {
    ds->ids = ids;
    ds->view.ids = ids;
}

st_status st_device_session_new(st_device_model *dm, const struct st_model *m, int64_t n_ctx, uint32_t kv_type,
                                st_device_session **out) {
    *out = NULL;
    const st_hparams *hp = &m->hp;
    st_device_session *ds = calloc(1, sizeof *ds);
    if (!ds) return st_fail(ST_ERR_NOMEM, "cuda session: out of memory");
    ds->dm = dm;
    ds->m = m;
    ds->cu = dm->cu;
    ds->n_ctx = n_ctx;
    ds->kv_type = kv_type;
    const char *env = getenv("STRATA_CUDA_GRAPHS");
    /* qwen4exp: a step hashes its PLE rows on the device from the window the session uploads, and
     * pools the QSA block it completes itself, so it can be a graph where the PLE table has its pinned
     * copy (device_model.c); its verify chunks pool on the host's count: eager */
    ds->no_graphs = (env && !strcmp(env, "0")) || (m->ple_table.data && !dm->w.ple_dev);
    ds->no_chunk_graphs = hp->arch == ST_ARCH_QWEN4EXP;
    const char *fenv = getenv("STRATA_CUDA_FUSED");
    ds->unfused = fenv && !strcmp(fenv, "0");
    ds->outs_unfused = fenv && !strcmp(fenv, "1");
    const char *penv = getenv("STRATA_CUDA_PROFILE");
    if (penv && strcmp(penv, "0")) {
        ds->prof = calloc(1, sizeof *ds->prof);
        ds->no_graphs = 1;   /* a replayed graph cannot be timed per block */
    }
    ds->n_graphs = (n_ctx + GRAPH_BUCKET - 1) / GRAPH_BUCKET;
    ds->graphs = calloc((size_t)(ds->n_graphs * ST_DEV_VERIFY_ROWS), sizeof *ds->graphs);
    ds->state = calloc((size_t)hp->n_layer, sizeof *ds->state);
    st_status s = ds->graphs && ds->state ? ST_OK : st_fail(ST_ERR_NOMEM, "cuda session: out of memory");
    for (int64_t il = 0; il < hp->n_layer && s == ST_OK; il++) {
        st_dlayer_state *L = &ds->state[il];
        if (is_gdn(hp, il)) {
            s = st_cuda_alloc(ds->cu, conv_bytes(hp) + sizeof(float), (void **)&L->conv);
            if (s == ST_OK) s = st_cuda_alloc(ds->cu, ssm_bytes(hp), (void **)&L->ssm);
        } else {
            s = st_cuda_alloc(ds->cu, kv_bytes(ds, il), &L->k_cache);
            if (s == ST_OK) s = st_cuda_alloc(ds->cu, kv_bytes(ds, il), &L->v_cache);
            if (s == ST_OK && st_hp_qsa(hp, il)) s = st_cuda_alloc(ds->cu, idx_bytes(ds), &L->idx_cache);
            if (s == ST_OK && st_hp_qsa(hp, il)) s = st_cuda_alloc(ds->cu, blocks_bytes(ds, il), (void **)&L->idx_blocks);
        }
        if (s == ST_OK && is_ple(hp, il)) s = st_cuda_alloc(ds->cu, ple_bytes(hp), (void **)&L->ple_hist);
    }
    if (s == ST_OK) s = (ds->lstate = calloc((size_t)hp->n_layer, sizeof *ds->lstate)) ? ST_OK
                                                                                        : st_fail(ST_ERR_NOMEM, "cuda session: out of memory");
    if (s == ST_OK && (s = st_cuda_backend_init(&ds->be, ds->cu, st_forward_cuda_prep_width(m))) == ST_OK) {
        ds->be_ready = 1;
        ds->be.ple_host = m->ple_table.data;
        ds->be.ple_dev = dm->w.ple_dev;
    }
    if (s == ST_OK) {
        st_forward_cuda_view(m, &dm->w, &ds->view_m);
        refresh_view(ds);
    }
    ds->plan = (st_ws_plan){.m = m, .n_ctx = n_ctx};
    if (s == ST_OK) s = st_workspace_init(&ds->ws, WS_N_BUFFERS, st_forward_cuda_ws_size, &ds->plan);
    if (s == ST_OK) st_workspace_set_allocator(&ds->ws, &(st_ws_allocator){dev_alloc, dev_free, ds->cu});
    if (s == ST_OK) s = st_cuda_host_alloc(IO_INTS * sizeof(int32_t), (void **)&ds->io);
    if (s == ST_OK) s = st_cuda_host_alloc((size_t)hp->n_vocab * sizeof(float), (void **)&ds->logits);
    if (s == ST_OK) memset(ds->logits, 0, (size_t)hp->n_vocab * sizeof(float));
    if (s == ST_OK) s = st_device_session_reset(ds);
    if (s != ST_OK) {
        st_device_session_free(ds);
        return s;
    }
    *out = ds;
    return ST_OK;
}

static void drop_graphs(st_device_session *ds) {
    for (int64_t i = 0; i < ds->n_graphs * ST_DEV_VERIFY_ROWS; i++) {
        st_cuda_graph_free(ds->graphs[i]);
        ds->graphs[i] = NULL;
    }
}

/* The profile: where a chunk's time went, per block kind. */
static void report_profile(const st_device_session *ds) {
    const st_dprofile *p = ds->prof;
    if (!p || p->chunks == 0) return;
    double total = 0;
    for (int i = 0; i < DPROF_COUNT; i++) total += p->ms[i];
    st_warn("cuda profile: %lld chunks, %lld rows, %.3f ms per chunk", (long long)p->chunks, (long long)p->rows,
            total / (double)p->chunks);
    for (int i = 0; i < DPROF_COUNT; i++)
        st_warn("  %-16s %9.3f ms per chunk  %5.1f%%", st_dprofile_names[i], p->ms[i] / (double)p->chunks,
                total > 0 ? 100 * p->ms[i] / total : 0.0);
}

void st_device_session_free(st_device_session *ds) {
    if (!ds) return;
    report_profile(ds);
    free(ds->prof);
    if (ds->graphs) drop_graphs(ds);
    free(ds->graphs);
    if (ds->state) {
        for (int64_t il = 0; il < ds->m->hp.n_layer; il++) {
            st_dlayer_state *L = &ds->state[il];
            st_cuda_free(ds->cu, L->k_cache);
            st_cuda_free(ds->cu, L->v_cache);
            st_cuda_free(ds->cu, L->conv);
            st_cuda_free(ds->cu, L->ssm);
            st_cuda_free(ds->cu, L->conv_steps);
            st_cuda_free(ds->cu, L->ssm_steps);
            st_cuda_free(ds->cu, L->ssm_planes);
            st_cuda_free(ds->cu, L->idx_cache);
            st_cuda_free(ds->cu, L->idx_blocks);
            st_cuda_free(ds->cu, L->ple_hist);
        }
        free(ds->state);
    }
    free(ds->lstate);
    if (ds->be_ready) st_cuda_backend_free(&ds->be);
    st_workspace_free(&ds->ws);
    st_cuda_host_free(ds->io);
    st_cuda_host_free(ds->logits);
    free(ds);
}

st_status st_device_session_reset(st_device_session *ds) {
    const st_hparams *hp = &ds->m->hp;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        st_dlayer_state *L = &ds->state[il];
        if (L->conv) ST_TRY(st_cuda_memset0(ds->cu, L->conv, conv_bytes(hp)));
        if (L->ssm) ST_TRY(st_cuda_memset0(ds->cu, L->ssm, ssm_bytes(hp)));
        if (L->ple_hist) ST_TRY(st_cuda_memset0(ds->cu, L->ple_hist, ple_bytes(hp)));
        if (ds->lstate) ds->lstate[il].n_blocks = 0;
    }
    return st_cuda_sync(ds->cu);
}

st_status st_device_session_reserve(st_device_session *ds, int64_t rows) {
    if (rows <= ds->ws.rows) return ST_OK;
    /* New buffers: graphs recorded the old addresses. */
    drop_graphs(ds);
    ST_TRY(st_cuda_sync(ds->cu));
    return st_workspace_reserve(&ds->ws, rows);
}

uint64_t st_device_session_state_bytes(const st_device_session *ds) {
    const st_hparams *hp = &ds->m->hp;
    uint64_t b = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        b += is_gdn(hp, il) ? conv_bytes(hp) + ssm_bytes(hp) : 2 * kv_bytes(ds, il);
        if (st_hp_qsa(hp, il)) b += idx_bytes(ds) + blocks_bytes(ds, il);
        if (is_ple(hp, il)) b += ple_bytes(hp);
    }
    return b;
}

uint64_t st_device_session_scratch_bytes(const st_device_session *ds) { return ds->ws.bytes; }

/* The device address and byte count of one part of layer il's state (device.h), or a refusal. */
static st_status state_part(st_device_session *ds, int64_t il, int part, int64_t n_cells, void **dev, size_t *bytes) {
    const st_hparams *hp = &ds->m->hp;
    if (il < 0 || il >= hp->n_layer)
        return st_fail(ST_ERR_RANGE, "cuda session state: layer %lld of %lld", (long long)il, (long long)hp->n_layer);
    st_dlayer_state *L = &ds->state[il];
    const int gdn = is_gdn(hp, il);
    const int ok = gdn ? part == ST_DSTATE_CONV || part == ST_DSTATE_SSM || (part == ST_DSTATE_PLE && is_ple(hp, il))
                       : part == ST_DSTATE_K || part == ST_DSTATE_V || (part == ST_DSTATE_IDX && st_hp_qsa(hp, il));
    if (!ok)
        return st_fail(ST_ERR_INVALID, "cuda session state: layer %lld is %s and has no part %d", (long long)il,
                       gdn ? "a Gated DeltaNet layer" : "an attention layer", part);
    if (gdn) {
        *dev = part == ST_DSTATE_CONV ? (void *)L->conv : part == ST_DSTATE_SSM ? (void *)L->ssm : (void *)L->ple_hist;
        *bytes = part == ST_DSTATE_CONV ? conv_bytes(hp) : part == ST_DSTATE_SSM ? ssm_bytes(hp) : ple_bytes(hp);
        return ST_OK;
    }
    if (n_cells < 0 || n_cells > ds->n_ctx)
        return st_fail(ST_ERR_RANGE, "cuda session state: %lld cells of layer %lld; the cache has %lld", (long long)n_cells,
                       (long long)il, (long long)ds->n_ctx);
    const int64_t width = part == ST_DSTATE_IDX ? hp->idx_dim : hp->n_head_kv[il] * hp->head_dim;
    *dev = part == ST_DSTATE_K ? L->k_cache : part == ST_DSTATE_V ? L->v_cache : L->idx_cache;
    *bytes = (size_t)n_cells * st_kv_row_bytes(ds->kv_type, width);
    return ST_OK;
}

st_status st_device_session_read_state(st_device_session *ds, int64_t il, int part, int64_t n_cells, void *host) {
    void *dev;
    size_t bytes;
    ST_TRY(state_part(ds, il, part, n_cells, &dev, &bytes));
    return bytes ? st_cuda_download(ds->cu, host, dev, bytes) : ST_OK;
}

st_status st_device_session_write_state(st_device_session *ds, int64_t il, int part, int64_t n_cells, const void *host) {
    void *dev;
    size_t bytes;
    ST_TRY(state_part(ds, il, part, n_cells, &dev, &bytes));
    /* the pooled QSA block keys belonged to the old indexer keys: pooled again from these */
    if (part == ST_DSTATE_IDX) ds->lstate[il].n_blocks = 0;
    /* The addresses stay the same, so the captured decode graphs stay valid. */
    return bytes ? st_cuda_upload(ds->cu, dev, host, bytes) : ST_OK;
}

st_status st_device_mem_info(const st_device_session *ds, size_t *free_bytes, size_t *total_bytes) {
    return st_cuda_mem_info(ds->cu, free_bytes, total_bytes);
}

/* logits_all: each block of rows straight to the caller's buffer. */
static st_status emit_rows(void *ctx, int64_t r0, int64_t nr) {
    st_device_session *ds = ctx;
    int64_t V = ds->m->hp.n_vocab;
    return st_cuda_download(ds->cu, ds->emit_dst + r0 * V, st_workspace_get(&ds->ws, WS_LOGITS),
                            (size_t)(nr * V) * sizeof(float));
}

/* The cells a decode step at position p sees: to the end of its bucket. */
static int64_t bucket_kv(const st_device_session *ds, int64_t p) {
    int64_t end = (p / GRAPH_BUCKET + 1) * GRAPH_BUCKET;
    return end < ds->n_ctx ? end : ds->n_ctx;
}

/* One decode step (n = 1), or a verify chunk of n rows within one bucket (every row's logits
 * into logits_all, every row's recurrent state into the step planes), through the graph of its
 * bucket and row count, capturing it after an eager run if new. */
static st_status graph_step(st_device_session *ds, const int32_t *tokens, int64_t n, int64_t n_past, float *logits_all) {
    int64_t V = ds->m->hp.n_vocab, b = n_past / GRAPH_BUCKET;
    int64_t row_n_kv[ST_DEV_VERIFY_ROWS];
    for (int64_t t = 0; t < n; t++) {
        row_n_kv[t] = bucket_kv(ds, n_past);
        ds->io[t] = tokens[t];
        ds->io[ST_DEV_VERIFY_ROWS + t] = (int32_t)(n_past + t);
    }
    st_dchunk c = {.n = n, .pos0 = n_past, .n_kv = bucket_kv(ds, n_past), .logits_all = n > 1, .tokens_host = NULL,
                   .unfused = ds->unfused, .outs_unfused = ds->outs_unfused, .keep_steps = n > 1, .row_n_kv = n > 1 ? row_n_kv : NULL};
    float *dst = n > 1 ? logits_all : ds->logits;
    const st_hparams *hp = &ds->m->hp;
    if (hp->ple_layer >= 0) {
        /* the PLE hash's window: the step's ids and the N-1 before them (the session wrote them) */
        int32_t *win = &ds->io[IO_WIN];
        st_state_ple_window(ds->m, &ds->view, n_past, n, win);
        ST_TRY(st_cuda_upload_async(ds->cu, st_workspace_get(&ds->ws, WS_PLE_IDS), win,
                                    (size_t)(n + hp->ple_ngram - 1) * sizeof(int32_t)));
        c.ple_win_given = 1;
    }
    ST_TRY(st_cuda_upload_async(ds->cu, st_workspace_get(&ds->ws, WS_TOK), &ds->io[0], (size_t)n * sizeof(int32_t)));
    ST_TRY(st_cuda_upload_async(ds->cu, st_workspace_get(&ds->ws, WS_POS), &ds->io[ST_DEV_VERIFY_ROWS],
                                (size_t)n * sizeof(int32_t)));
    /* A chunk since the capture may have grown the backend's scratch: the graphs read the old. */
    if (ds->graph_epoch != st_cuda_scratch_epoch(ds->cu)) {
        drop_graphs(ds);
        ds->graph_epoch = st_cuda_scratch_epoch(ds->cu);
    }
    st_cuda_graph **slot = &ds->graphs[(n - 1) * ds->n_graphs + b];
    if (*slot) {
        ST_TRY(st_cuda_graph_launch(ds->cu, *slot));
        ST_TRY(st_cuda_download(ds->cu, dst, st_workspace_get(&ds->ws, WS_LOGITS), (size_t)(n * V) * sizeof(float)));
    } else {
        /* Eager first (it also grows the backend's scratch to what the step needs), then record;
         * the logits (at most ST_DEV_VERIFY_ROWS rows) stay in WS_LOGITS. */
        c.tokens_host = tokens;
        ST_TRY(st_forward_cuda(&ds->be, &ds->view_m, &ds->dm->w, &ds->view, &ds->ws, &c, NULL, NULL));
        ST_TRY(st_cuda_download(ds->cu, dst, st_workspace_get(&ds->ws, WS_LOGITS), (size_t)(n * V) * sizeof(float)));
        c.tokens_host = NULL;
        st_cuda_graph *g = NULL;
        st_status s = st_cuda_capture_begin(ds->cu);
        if (s == ST_OK) {
            /* Nothing runs while capturing: the state is not touched twice. */
            st_status fs = st_forward_cuda(&ds->be, &ds->view_m, &ds->dm->w, &ds->view, &ds->ws, &c, NULL, NULL);
            s = st_cuda_capture_end(ds->cu, &g);
            if (fs != ST_OK) s = fs;
        }
        if (s == ST_OK && ds->graph_epoch != st_cuda_scratch_epoch(ds->cu)) {
            /* the eager run grew the scratch: the other graphs read the old */
            drop_graphs(ds);
            ds->graph_epoch = st_cuda_scratch_epoch(ds->cu);
        }
        if (s != ST_OK) {
            st_warn("cuda: decode runs without a CUDA graph: %s", st_last_error());
            st_clear_error();
            st_cuda_graph_free(g);
            ds->no_graphs = 1;
        } else {
            *slot = g;
        }
    }
    if (n > 1) memcpy(ds->logits, logits_all + (n - 1) * V, (size_t)V * sizeof(float));
    return ST_OK;
}

const float *st_device_session_logits(const st_device_session *ds) { return ds->logits; }

static st_status feed(st_device_session *ds, const int32_t *tokens, int64_t n, int64_t n_past, float *logits_all,
                      float *h_host) {
    int64_t V = ds->m->hp.n_vocab;
    ST_TRY(st_device_session_reserve(ds, n));
    if (n == 1 && !logits_all && !ds->no_graphs && st_state_qsa_step_ready(ds->m, &ds->view, n_past)) {
        ST_TRY(graph_step(ds, tokens, 1, n_past, NULL));
        st_state_qsa_step_done(ds->m, &ds->view, n_past);   /* a replay ran no forward on the host */
        return ST_OK;
    }

    /* An eager chunk: positions up, then the pass. */
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    if (!pos) return st_fail(ST_ERR_NOMEM, "cuda session: out of memory");
    for (int64_t t = 0; t < n; t++) pos[t] = (int32_t)(n_past + t);
    st_status s = st_cuda_upload(ds->cu, st_workspace_get(&ds->ws, WS_POS), pos, (size_t)n * sizeof *pos);
    free(pos);
    ST_TRY(s);
    st_dchunk c = {.n = n, .pos0 = n_past, .n_kv = n_past + n, .logits_all = logits_all != NULL, .tokens_host = tokens,
                   .prof = ds->prof, .unfused = ds->unfused, .outs_unfused = ds->outs_unfused, .h_host = logits_all || n == 1 ? NULL : h_host};
    ds->emit_dst = logits_all;
    ST_TRY(st_forward_cuda(&ds->be, &ds->view_m, &ds->dm->w, &ds->view, &ds->ws, &c, emit_rows, ds));
    if (logits_all) {
        memcpy(ds->logits, logits_all + (n - 1) * V, (size_t)V * sizeof(float));
        return ST_OK;
    }
    return st_cuda_download(ds->cu, ds->logits, st_workspace_get(&ds->ws, WS_LOGITS), (size_t)V * sizeof(float));
}

/* ---- the speculative verify chunk (engine/spec.c through session.c) ------------------------------ */

st_status st_device_session_reserve_steps(st_device_session *ds, int rows) {
    const st_hparams *hp = &ds->m->hp;
    if (rows > ST_DEV_VERIFY_ROWS)
        return st_fail(ST_ERR_INVALID, "cuda session: a verify chunk of %d rows, at most %d", rows, ST_DEV_VERIFY_ROWS);
    for (int64_t il = 0; il < hp->n_layer; il++)
        if (st_host_moe_k_cpu(ds->dm->host_moe, il) > 0)
            return st_fail(ST_ERR_UNSUPPORTED, "cuda session: no verify chunk while the CPU computes a share of the experts "
                           "(layer %lld): a decode step's logits would differ from a chunk row's", (long long)il);
    if (rows <= ds->n_steps || !st_hp_is_hybrid(hp)) return ST_OK;
    ST_TRY(st_device_session_reserve(ds, rows));
    /* new planes: the verify graphs recorded the old */
    drop_graphs(ds);
    ST_TRY(st_cuda_sync(ds->cu));
    ds->n_steps = 0;
    float *host[ST_DEV_VERIFY_ROWS];
    size_t ssm = ssm_bytes(hp);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        st_dlayer_state *L = &ds->state[il];
        if (!is_gdn(hp, il)) continue;
        st_cuda_free(ds->cu, L->conv_steps);
        st_cuda_free(ds->cu, L->ssm_steps);
        st_cuda_free(ds->cu, L->ssm_planes);
        L->conv_steps = L->ssm_planes = NULL;
        L->ssm_steps = NULL;
        ST_TRY(st_cuda_alloc(ds->cu, (size_t)rows * conv_bytes(hp), (void **)&L->conv_steps));
        ST_TRY(st_cuda_alloc(ds->cu, (size_t)rows * ssm, (void **)&L->ssm_planes));
        ST_TRY(st_cuda_alloc(ds->cu, (size_t)rows * sizeof(float *), (void **)&L->ssm_steps));
        for (int i = 0; i < rows; i++) host[i] = (float *)((char *)L->ssm_planes + (size_t)i * ssm);
        ST_TRY(st_cuda_upload(ds->cu, L->ssm_steps, host, (size_t)rows * sizeof(float *)));
    }
    ds->n_steps = rows;
    refresh_view(ds);
    return ST_OK;
}

/* Rows 0 .. n-1 at n_past, every row's logits into logits_all, every row's recurrent state into
 * the step planes; one row without a plane is a decode step (its graph). */
static st_status verify(st_device_session *ds, const int32_t *tokens, int64_t n, int64_t n_past, float *logits_all) {
    int64_t V = ds->m->hp.n_vocab;
    if (n > ST_DEV_VERIFY_ROWS || (st_hp_is_hybrid(&ds->m->hp) && n > ds->n_steps))
        return st_fail(ST_ERR_INVALID, "cuda session: a verify chunk of %lld rows, %d step planes", (long long)n, ds->n_steps);
    ST_TRY(st_device_session_reserve(ds, n));
    if (n > 1 && !ds->no_graphs && !ds->no_chunk_graphs && (n_past + n - 1) / GRAPH_BUCKET == n_past / GRAPH_BUCKET)
        return graph_step(ds, tokens, n, n_past, logits_all);
    /* across a bucket's end: eager, each row over its own bucket's cells */
    int32_t pos[ST_DEV_VERIFY_ROWS];
    int64_t n_kv[ST_DEV_VERIFY_ROWS];
    for (int64_t t = 0; t < n; t++) {
        pos[t] = (int32_t)(n_past + t);
        n_kv[t] = bucket_kv(ds, n_past + t); /* the cells the decode step at this position sees */
    }
    ST_TRY(st_cuda_upload(ds->cu, st_workspace_get(&ds->ws, WS_POS), pos, (size_t)n * sizeof *pos));
    st_dchunk c = {.n = n, .pos0 = n_past, .n_kv = n_kv[n - 1], .logits_all = 1, .tokens_host = tokens,
                   .prof = ds->prof, .unfused = ds->unfused, .outs_unfused = ds->outs_unfused, .keep_steps = 1, .row_n_kv = n_kv};
    ds->emit_dst = logits_all;
    ST_TRY(st_forward_cuda(&ds->be, &ds->view_m, &ds->dm->w, &ds->view, &ds->ws, &c, emit_rows, ds));
    memcpy(ds->logits, logits_all + (n - 1) * V, (size_t)V * sizeof(float));
    return ST_OK;
}

st_status st_device_session_verify(st_device_session *ds, const int32_t *tokens, int64_t n, int64_t n_past,
                                   float *logits_all, float *h_all, int keep_steps) {
    int64_t V = ds->m->hp.n_vocab, d = ds->m->hp.n_embd;
    if (keep_steps && !logits_all) return st_fail(ST_ERR_INVALID, "cuda session: a verify chunk without its logits");
    st_host_moe_step_begin(ds->dm->host_moe);
    st_status s;
    if (keep_steps) {
        s = verify(ds, tokens, n, n_past, logits_all);
    } else {
        s = feed(ds, tokens, n, n_past, n == 1 ? NULL : logits_all, h_all);
        if (s == ST_OK && n == 1 && logits_all) memcpy(logits_all, ds->logits, (size_t)V * sizeof(float));
    }
    /* the normed rows the chunk left in WS_H (a prompt chunk of several rows wrote h_all itself) */
    if (s == ST_OK && h_all && (keep_steps || n == 1 || logits_all))
        s = st_cuda_download(ds->cu, h_all, st_workspace_get(&ds->ws, WS_H), (size_t)(n * d) * sizeof(float));
    st_status e = st_host_moe_step_end(ds->dm->host_moe);
    return s != ST_OK ? s : e;
}

void st_device_session_keep_row(st_device_session *ds, int64_t k) {
    const st_hparams *hp = &ds->m->hp;
    if (k < 0 || k >= ds->n_steps) return;
    size_t conv = conv_bytes(hp), ssm = ssm_bytes(hp);
    /* copies on the stream, not swaps: the captured graphs hold the state's addresses */
    for (int64_t il = 0; il < hp->n_layer; il++) {
        st_dlayer_state *L = &ds->state[il];
        if (!L->ssm_planes) continue;
        st_status s = st_cuda_copy(ds->cu, L->ssm, (char *)L->ssm_planes + (size_t)k * ssm, ssm);
        if (s == ST_OK) s = st_cuda_copy(ds->cu, L->conv, (char *)L->conv_steps + (size_t)k * conv, conv);
        if (s != ST_OK) st_clear_error(); /* a launch failure is the next feed's error */
    }
}

void st_device_session_set_logits(st_device_session *ds, const float *row) {
    memcpy(ds->logits, row, (size_t)ds->m->hp.n_vocab * sizeof(float));
}

/* A tiered model's CPU share (model/cuda/host_experts.c): its poll server is woken before the
 * step, and a wait that gave up inside the step becomes the step's error (every path above ends
 * with a download, so the device is idle by then). */
st_status st_device_session_feed(st_device_session *ds, const int32_t *tokens, int64_t n, int64_t n_past,
                                 float *logits_all) {
    st_host_moe_step_begin(ds->dm->host_moe);
    st_status s = feed(ds, tokens, n, n_past, logits_all, NULL);
    st_status e = st_host_moe_step_end(ds->dm->host_moe);
    return s != ST_OK ? s : e;
}
