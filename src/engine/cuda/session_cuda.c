/* session_cuda.c: engine/device.h on CUDA: the model's weights resident on the GPU, and sessions
 * whose KV caches, recurrent states and prompt workspace live there.
 *
 * Weights: the GGUF's whole data section is uploaded once, in its file types, into one device
 * allocation through a pinned staging buffer; each bound tensor's pointer is rebased into it. The
 * few vectors the binder converted to f32 on the host (f16 norms) are uploaded one by one.
 *
 * Decode: a step of one token is captured as a CUDA graph the first time a context bucket (256
 * cells) is reached, after one eager run of the same step has sized the backend's scratch; later
 * steps upload the token and its position (8 bytes), replay the graph and download the logits.
 * Prompt chunks run eagerly.
 *
 * Workspace: the same st_workspace as on the CPU, its buffers taken with cudaMalloc and grown only
 * between chunks (every chunk ends with the logits' download, which waits for the GPU). */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "base/log.h"
#include "engine/device.h"
#include "model/cuda/forward_cuda.h"
#include "quant/types.h"

#define GRAPH_BUCKET 256

struct st_device_model {
    st_cuda *cu;
    void *blob;                  /* the data section on the device */
    void **owned;                /* vectors uploaded on their own */
    int n_owned, cap_owned;
    st_dweights w;
    st_layer *layers;
    void **f16_gu, **f16_down;  /* per layer, when the experts' f16 copies are made */
    int64_t n_layers;
};

struct st_device_session {
    st_device_model *dm;
    const struct st_model *m;
    st_cuda *cu;
    int64_t n_ctx;
    uint32_t kv_type;
    st_dlayer_state *state;
    st_workspace ws;
    int32_t *io;                 /* pinned: token, position */
    float *logits;               /* pinned: n_vocab, the last row's (st_session_logits reads it) */
    st_cuda_graph **graphs;      /* per bucket of GRAPH_BUCKET cells */
    int64_t n_graphs;
    int no_graphs;               /* STRATA_CUDA_GRAPHS=0, or a capture failed */
    int unfused;                 /* STRATA_CUDA_FUSED=0: the plain op sequence */
    float *emit_dst;             /* logits_all while a chunk runs */
    st_dprofile *prof;           /* STRATA_CUDA_PROFILE=1: block times, printed at the end */
};

int st_device_count(void) { return st_cuda_device_count(); }

/* ---- weights ----------------------------------------------------------------------------------- */

static st_status own(st_device_model *dm, void *p) {
    if (dm->n_owned == dm->cap_owned) {
        int cap = dm->cap_owned ? 2 * dm->cap_owned : 64;
        void **o = realloc(dm->owned, (size_t)cap * sizeof *o);
        if (!o) return st_fail(ST_ERR_NOMEM, "cuda: out of memory");
        dm->owned = o;
        dm->cap_owned = cap;
    }
    dm->owned[dm->n_owned++] = p;
    return ST_OK;
}

/* A host pointer of the mapping's data section moved into the blob; other vectors uploaded alone. */
static st_status rebase(st_device_model *dm, const char *base, size_t size, const void *p, size_t bytes, const void **out) {
    if (!p) {
        *out = NULL;
        return ST_OK;
    }
    if ((const char *)p >= base && (const char *)p < base + size) {
        *out = (const char *)dm->blob + ((const char *)p - base);
        return ST_OK;
    }
    void *d;
    ST_TRY(st_cuda_alloc(dm->cu, bytes, &d));
    ST_TRY(own(dm, d));
    ST_TRY(st_cuda_upload(dm->cu, d, p, bytes));
    *out = d;
    return ST_OK;
}

static st_status rebase_tensor(st_device_model *dm, const char *base, size_t size, st_tensor *t) {
    size_t bytes = t->row_bytes * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    ST_TRY(rebase(dm, base, size, t->data, bytes, &t->data));
    const void *f32;
    size_t n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    ST_TRY(rebase(dm, base, size, t->f32, n * sizeof(float), &f32));
    t->f32 = f32;
    t->escale = NULL; /* checked to be all ones */
    return ST_OK;
}

/* The data section through a pinned double buffer (so copies overlap the reads of the mapping). */
static st_status upload_blob(st_device_model *dm, const char *base, size_t size, int progress) {
    const size_t chunk = 64u << 20;
    void *stage[2] = {NULL, NULL};
    st_status s = st_cuda_host_alloc(chunk, &stage[0]);
    if (s == ST_OK) s = st_cuda_host_alloc(chunk, &stage[1]);
    for (size_t off = 0, i = 0; off < size && s == ST_OK; off += chunk, i++) {
        size_t len = size - off < chunk ? size - off : chunk;
        /* the copy that last used this buffer must be done */
        if (i >= 2) s = st_cuda_sync(dm->cu);
        if (s != ST_OK) break;
        memcpy(stage[i % 2], base + off, len);
        s = st_cuda_upload_async(dm->cu, (char *)dm->blob + off, stage[i % 2], len);
        if (progress && i % 8 == 0) st_progress("uploading weights", (double)off, (double)size);
    }
    if (s == ST_OK) s = st_cuda_sync(dm->cu);
    if (progress) st_progress_end();
    st_cuda_host_free(stage[0]);
    st_cuda_host_free(stage[1]);
    return s;
}

/* f16 copies of every MoE layer's experts, so prompt chunks run their expert GEMMs without
 * dequantizing (H200, 35B-A3B layer at 4096 tokens: 1.42 against 2.39 ms). They take 6*d*ff bytes
 * per expert (64 GB for the 35B-A3B), so they are made only when that leaves 16 GiB of the device
 * free; STRATA_CUDA_EXPERT_F16=0 never makes them, =1 always tries. */
static st_status make_expert_f16(st_device_model *dm, const struct st_model *m, int progress) {
    const st_hparams *hp = &m->hp;
    const char *env = getenv("STRATA_CUDA_EXPERT_F16");
    if (!st_hp_is_moe(hp) || (env && !strcmp(env, "0"))) return ST_OK;
    size_t per_layer = (size_t)(hp->n_expert * 6 * hp->n_embd * hp->n_ff_exp), total = 0;
    for (int64_t il = 0; il < hp->n_layer; il++)
        if (dm->layers[il].gate_exps.data && dm->layers[il].up_exps.data) total += per_layer;
    size_t free_b = 0, total_b = 0;
    ST_TRY(st_cuda_mem_info(dm->cu, &free_b, &total_b));
    if (total == 0 || (!(env && !strcmp(env, "1")) && free_b < total + ((size_t)16 << 30))) return ST_OK;
    dm->f16_gu = calloc((size_t)hp->n_layer, sizeof *dm->f16_gu);
    dm->f16_down = calloc((size_t)hp->n_layer, sizeof *dm->f16_down);
    if (!dm->f16_gu || !dm->f16_down) return st_fail(ST_ERR_NOMEM, "cuda: out of memory");
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const st_layer *L = &dm->layers[il];
        if (!L->gate_exps.data || !L->up_exps.data) continue;
        st_cuda_moe_w mw = {.type_gate = L->gate_exps.type, .type_up = L->up_exps.type, .type_down = L->down_exps.type,
                            .gate = L->gate_exps.data, .up = L->up_exps.data, .down = L->down_exps.data,
                            .n_expert = hp->n_expert, .d = hp->n_embd, .ff = hp->n_ff_exp};
        ST_TRY(st_cuda_alloc(dm->cu, per_layer * 2 / 3, &dm->f16_gu[il]));
        ST_TRY(st_cuda_alloc(dm->cu, per_layer / 3, &dm->f16_down[il]));
        ST_TRY(st_cuda_moe_dequant_f16(dm->cu, &mw, dm->f16_gu[il], dm->f16_down[il]));
        if (progress) st_progress("expert f16 copies", (double)(il + 1), (double)hp->n_layer);
    }
    if (progress) st_progress_end();
    dm->w.moe_gu_f16 = dm->f16_gu;
    dm->w.moe_down_f16 = dm->f16_down;
    return ST_OK;
}

st_status st_device_model_load(const struct st_model *m, int progress, st_device_model **out) {
    *out = NULL;
    if (st_cuda_device_count() <= 0) return st_fail(ST_ERR_UNSUPPORTED, "cuda: no GPU found");
    ST_TRY(st_forward_cuda_check(m));
    st_device_model *dm = calloc(1, sizeof *dm);
    if (!dm) return st_fail(ST_ERR_NOMEM, "cuda: out of memory");
    st_status s = st_cuda_open(0, &dm->cu);
    size_t off = st_gguf_data_offset(m->gguf), size = st_gguf_file_size(m->gguf) - off;
    const char *base = NULL;
    if (s == ST_OK && st_gguf_n_tensors(m->gguf) > 0) {
        const st_gguf_tensor *t0 = st_gguf_tensor_at(m->gguf, 0);
        base = (const char *)t0->data - t0->offset;
        /* the model's pointers must still be the mapping's (no host copy) */
        s = st_cuda_alloc(dm->cu, size, &dm->blob);
        if (s == ST_OK) s = upload_blob(dm, base, size, progress);
    }
    if (s == ST_OK) {
        dm->layers = calloc((size_t)m->hp.n_layer, sizeof *dm->layers);
        dm->n_layers = m->hp.n_layer;
        if (!dm->layers) s = st_fail(ST_ERR_NOMEM, "cuda: out of memory");
    }
    if (s == ST_OK) {
        dm->w.tok_embd = m->tok_embd;
        dm->w.output = m->output;
        dm->w.output_norm = m->output_norm;
        s = rebase_tensor(dm, base, size, &dm->w.tok_embd);
        if (s == ST_OK) s = rebase_tensor(dm, base, size, &dm->w.output);
        if (s == ST_OK) s = rebase_tensor(dm, base, size, &dm->w.output_norm);
        for (int64_t i = 0; i < m->hp.n_layer && s == ST_OK; i++) {
            dm->layers[i] = m->layers[i];
            st_tensor *ts = (st_tensor *)&dm->layers[i];
            for (size_t j = 0; j < sizeof(st_layer) / sizeof(st_tensor) && s == ST_OK; j++)
                s = rebase_tensor(dm, base, size, &ts[j]);
        }
        dm->w.layers = (st_tensor *)dm->layers;
    }
    if (s == ST_OK) s = make_expert_f16(dm, m, progress);
    if (s != ST_OK) {
        st_device_model_free(dm);
        return s;
    }
    *out = dm;
    return ST_OK;
}

void st_device_model_free(st_device_model *dm) {
    if (!dm) return;
    if (dm->cu) {
        for (int64_t il = 0; dm->f16_gu && il < dm->n_layers; il++) {
            st_cuda_free(dm->cu, dm->f16_gu[il]);
            st_cuda_free(dm->cu, dm->f16_down[il]);
        }
        for (int i = 0; i < dm->n_owned; i++) st_cuda_free(dm->cu, dm->owned[i]);
        if (dm->blob) st_cuda_free(dm->cu, dm->blob);
        st_cuda_close(dm->cu);
    }
    free(dm->owned);
    free(dm->layers);
    free(dm->f16_gu);
    free(dm->f16_down);
    free(dm);
}

const char *st_device_model_describe(const st_device_model *dm) { return st_cuda_describe(dm->cu); }

double st_device_model_bandwidth(st_device_model *dm) {
    double gbs = 0.0;
    if (st_cuda_read_bandwidth(dm->cu, (size_t)2 << 30, &gbs) != ST_OK) st_clear_error();
    return gbs;
}

/* ---- sessions ---------------------------------------------------------------------------------- */

static void *dev_alloc(void *ctx, size_t bytes) {
    void *p = NULL;
    return st_cuda_alloc(ctx, bytes, &p) == ST_OK ? p : NULL;
}

static void dev_free(void *ctx, void *p) { st_cuda_free(ctx, p); }

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
    ds->no_graphs = env && !strcmp(env, "0");
    const char *fenv = getenv("STRATA_CUDA_FUSED");
    ds->unfused = fenv && !strcmp(fenv, "0");
    const char *penv = getenv("STRATA_CUDA_PROFILE");
    if (penv && strcmp(penv, "0")) {
        ds->prof = calloc(1, sizeof *ds->prof);
        ds->no_graphs = 1;   /* a replayed graph cannot be timed per block */
    }
    ds->n_graphs = (n_ctx + GRAPH_BUCKET - 1) / GRAPH_BUCKET;
    ds->graphs = calloc((size_t)ds->n_graphs, sizeof *ds->graphs);
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
        }
    }
    if (s == ST_OK) s = st_workspace_init(&ds->ws, WSD_COUNT, st_forward_cuda_ws_size, m);
    if (s == ST_OK) st_workspace_set_allocator(&ds->ws, &(st_ws_allocator){dev_alloc, dev_free, ds->cu});
    if (s == ST_OK) s = st_cuda_host_alloc(2 * sizeof(int32_t), (void **)&ds->io);
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
    for (int64_t i = 0; i < ds->n_graphs; i++) {
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
        }
        free(ds->state);
    }
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
    for (int64_t il = 0; il < hp->n_layer; il++) b += is_gdn(hp, il) ? conv_bytes(hp) + ssm_bytes(hp) : 2 * kv_bytes(ds, il);
    return b;
}

uint64_t st_device_session_scratch_bytes(const st_device_session *ds) { return ds->ws.bytes; }

/* The device address and byte count of one part of layer il's state (device.h), or a refusal. */
static st_status state_part(st_device_session *ds, int64_t il, int part, int64_t n_cells, void **dev, size_t *bytes) {
    const st_hparams *hp = &ds->m->hp;
    if (il < 0 || il >= hp->n_layer)
        return st_fail(ST_ERR_RANGE, "cuda session state: layer %lld of %lld", (long long)il, (long long)hp->n_layer);
    st_dlayer_state *L = &ds->state[il];
    int gdn = is_gdn(hp, il), rec = part == ST_DSTATE_CONV || part == ST_DSTATE_SSM;
    if (part < ST_DSTATE_CONV || part > ST_DSTATE_V || gdn != rec)
        return st_fail(ST_ERR_INVALID, "cuda session state: layer %lld is %s and has no part %d", (long long)il,
                       gdn ? "a Gated DeltaNet layer" : "an attention layer", part);
    if (rec) {
        *dev = part == ST_DSTATE_CONV ? (void *)L->conv : (void *)L->ssm;
        *bytes = part == ST_DSTATE_CONV ? conv_bytes(hp) : ssm_bytes(hp);
        return ST_OK;
    }
    if (n_cells < 0 || n_cells > ds->n_ctx)
        return st_fail(ST_ERR_RANGE, "cuda session state: %lld cells of layer %lld; the cache has %lld", (long long)n_cells,
                       (long long)il, (long long)ds->n_ctx);
    *dev = part == ST_DSTATE_K ? L->k_cache : L->v_cache;
    *bytes = (size_t)n_cells * st_kv_row_bytes(ds->kv_type, hp->n_head_kv[il] * hp->head_dim);
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
    return st_cuda_download(ds->cu, ds->emit_dst + r0 * V, st_workspace_get(&ds->ws, WSD_LOGITS),
                            (size_t)(nr * V) * sizeof(float));
}

/* One decode step through the graph of its bucket, capturing it after an eager run if new. */
static st_status decode_step(st_device_session *ds, const int32_t *token, int64_t n_past) {
    int64_t V = ds->m->hp.n_vocab, b = n_past / GRAPH_BUCKET;
    int64_t n_kv = (b + 1) * GRAPH_BUCKET < ds->n_ctx ? (b + 1) * GRAPH_BUCKET : ds->n_ctx;
    st_dchunk c = {.n = 1, .pos0 = n_past, .n_kv = n_kv, .logits_all = 0, .tokens_host = NULL, .unfused = ds->unfused};
    ds->io[0] = *token;
    ds->io[1] = (int32_t)n_past;
    ST_TRY(st_cuda_upload_async(ds->cu, st_workspace_get(&ds->ws, WSD_TOK), &ds->io[0], sizeof(int32_t)));
    ST_TRY(st_cuda_upload_async(ds->cu, st_workspace_get(&ds->ws, WSD_POS), &ds->io[1], sizeof(int32_t)));
    if (ds->graphs[b]) {
        ST_TRY(st_cuda_graph_launch(ds->cu, ds->graphs[b]));
    } else {
        /* Eager first (it also grows the backend's scratch to what the step needs), then record. */
        c.tokens_host = token;
        ST_TRY(st_forward_cuda(ds->cu, ds->m, &ds->dm->w, ds->state, ds->kv_type, &ds->ws, &c, NULL, NULL));
        ST_TRY(st_cuda_download(ds->cu, ds->logits, st_workspace_get(&ds->ws, WSD_LOGITS), (size_t)V * sizeof(float)));
        c.tokens_host = NULL;
        st_cuda_graph *g = NULL;
        st_status s = st_cuda_capture_begin(ds->cu);
        if (s == ST_OK) {
            /* Nothing runs while capturing: the state is not touched twice. */
            st_status fs = st_forward_cuda(ds->cu, ds->m, &ds->dm->w, ds->state, ds->kv_type, &ds->ws, &c, NULL, NULL);
            s = st_cuda_capture_end(ds->cu, &g);
            if (fs != ST_OK) s = fs;
        }
        if (s != ST_OK) {
            st_warn("cuda: decode runs without a CUDA graph: %s", st_last_error());
            st_clear_error();
            st_cuda_graph_free(g);
            ds->no_graphs = 1;
        } else {
            ds->graphs[b] = g;
        }
        return ST_OK;
    }
    return st_cuda_download(ds->cu, ds->logits, st_workspace_get(&ds->ws, WSD_LOGITS), (size_t)V * sizeof(float));
}

const float *st_device_session_logits(const st_device_session *ds) { return ds->logits; }

st_status st_device_session_feed(st_device_session *ds, const int32_t *tokens, int64_t n, int64_t n_past,
                                 float *logits_all) {
    int64_t V = ds->m->hp.n_vocab;
    ST_TRY(st_device_session_reserve(ds, n));
    if (n == 1 && !logits_all && !ds->no_graphs) return decode_step(ds, tokens, n_past);

    /* An eager chunk: positions up, then the pass. */
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    if (!pos) return st_fail(ST_ERR_NOMEM, "cuda session: out of memory");
    for (int64_t t = 0; t < n; t++) pos[t] = (int32_t)(n_past + t);
    st_status s = st_cuda_upload(ds->cu, st_workspace_get(&ds->ws, WSD_POS), pos, (size_t)n * sizeof *pos);
    free(pos);
    ST_TRY(s);
    st_dchunk c = {.n = n, .pos0 = n_past, .n_kv = n_past + n, .logits_all = logits_all != NULL, .tokens_host = tokens,
                   .prof = ds->prof, .unfused = ds->unfused};
    ds->emit_dst = logits_all;
    ST_TRY(st_forward_cuda(ds->cu, ds->m, &ds->dm->w, ds->state, ds->kv_type, &ds->ws, &c, emit_rows, ds));
    if (logits_all) {
        memcpy(ds->logits, logits_all + (n - 1) * V, (size_t)V * sizeof(float));
        return ST_OK;
    }
    return st_cuda_download(ds->cu, ds->logits, st_workspace_get(&ds->ws, WSD_LOGITS), (size_t)V * sizeof(float));
}
