/* device_model.c: model/device.h on CUDA: the model's weights resident on the GPU.
 *
 * The GGUF's data section is uploaded once, in its file types, into one device allocation through
 * a pinned staging buffer (all of it but qwen4exp's PLE table, whose rows the host gathers); each
 * bound tensor's pointer is rebased into it. The few vectors the binder converted to f32 on the
 * host (f16 norms) are uploaded one by one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/cuda/device_model.h"
#include "model/cuda/host_experts.h"
#include "quant/types.h"

int st_device_count(void) { return st_cuda_device_count(); }

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

/* The mapping's data section as the blob holds it: everything but a hole (qwen4exp's PLE table,
 * which the host reads a few rows of per token and which may be larger than the device), the
 * bytes after the hole moved down by hole_size: the table's size rounded down to 256 bytes, so
 * that every tensor keeps its alignment (the table's last few bytes are uploaded, unread). */
typedef struct blob_map {
    const char *base;
    size_t size, hole_off, hole_size;   /* hole_size 0: no hole */
} blob_map;

/* A host pointer of the mapping's data section moved into the blob; other vectors uploaded alone. */
static st_status rebase(st_device_model *dm, const blob_map *bm, const void *p, size_t bytes, const void **out) {
    if (!p) {
        *out = NULL;
        return ST_OK;
    }
    const char *c = p;
    if (c >= bm->base && c < bm->base + bm->size) {
        size_t off = (size_t)(c - bm->base);
        if (bm->hole_size && off >= bm->hole_off) off -= bm->hole_size;
        *out = (const char *)dm->blob + off;
        return ST_OK;
    }
    void *d;
    ST_TRY(st_cuda_alloc(dm->cu, bytes, &d));
    ST_TRY(own(dm, d));
    ST_TRY(st_cuda_upload(dm->cu, d, p, bytes));
    *out = d;
    return ST_OK;
}

static st_status rebase_tensor(st_device_model *dm, const blob_map *bm, st_tensor *t) {
    size_t bytes = t->row_bytes * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    ST_TRY(rebase(dm, bm, t->data, bytes, &t->data));
    const void *f32;
    size_t n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    ST_TRY(rebase(dm, bm, t->f32, n * sizeof(float), &f32));
    t->f32 = f32;
    t->escale = NULL; /* checked to be all ones */
    return ST_OK;
}

/* len bytes of the data section from src to the blob at dst, through a pinned double buffer (so
 * copies overlap the reads of the mapping); done and total: the progress over both pieces. */
static st_status upload_range(st_device_model *dm, void *stage[2], const char *src, size_t len, char *dst, size_t *done,
                              size_t total, int progress) {
    const size_t chunk = 64u << 20;
    st_status s = ST_OK;
    for (size_t off = 0, i = 0; off < len && s == ST_OK; off += chunk, i++) {
        size_t n = len - off < chunk ? len - off : chunk;
        /* the copy that last used this buffer must be done */
        if (i >= 2) s = st_cuda_sync(dm->cu);
        if (s != ST_OK) break;
        memcpy(stage[i % 2], src + off, n);
        s = st_cuda_upload_async(dm->cu, dst + off, stage[i % 2], n);
        *done += n;
        if (progress && i % 8 == 0) st_progress("uploading weights", (double)*done, (double)total);
    }
    if (s == ST_OK) s = st_cuda_sync(dm->cu);
    return s;
}

/* The data section but its hole into the blob. */
static st_status upload_blob(st_device_model *dm, const blob_map *bm, int progress) {
    void *stage[2] = {NULL, NULL};
    st_status s = st_cuda_host_alloc(64u << 20, &stage[0]);
    if (s == ST_OK) s = st_cuda_host_alloc(64u << 20, &stage[1]);
    const size_t head = bm->hole_size ? bm->hole_off : bm->size, tail = bm->size - head - bm->hole_size;
    size_t done = 0;
    if (s == ST_OK) s = upload_range(dm, stage, bm->base, head, dm->blob, &done, head + tail, progress);
    if (s == ST_OK && tail)
        s = upload_range(dm, stage, bm->base + head + bm->hole_size, tail, (char *)dm->blob + head, &done, head + tail,
                         progress);
    if (progress) st_progress_end();
    st_cuda_host_free(stage[0]);
    st_cuda_host_free(stage[1]);
    return s;
}

/* f16 copies of every MoE layer's experts, so prompt chunks run their expert GEMMs without
 * dequantizing (H200, 35B-A3B layer at 4096 tokens: 1.42 against 2.39 ms). They take 6*d*ff bytes
 * per expert (64 GB for the 35B-A3B), so they are made only when that leaves 16 GiB of the device
 * free; STRATA_CUDA_EXPERT_F16=0 never makes them, =1 always tries. */
static st_status make_expert_f16(st_device_model *dm, const struct st_model *m, uint64_t room, int progress) {
    const st_hparams *hp = &m->hp;
    const char *env = getenv("STRATA_CUDA_EXPERT_F16");
    if (!st_hp_is_moe(hp) || (env && !strcmp(env, "0"))) return ST_OK;
    size_t per_layer = (size_t)(hp->n_expert * 6 * hp->n_embd * hp->n_ff_exp), total = 0;
    for (int64_t il = 0; il < hp->n_layer; il++)
        if (dm->layers[il].gate_exps.data && dm->layers[il].up_exps.data) total += per_layer;
    /* room: what the budget leaves once the weights are in */
    if (total == 0 || (!(env && !strcmp(env, "1")) && room < total + ((size_t)16 << 30))) return ST_OK;
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

/* What a session needs beside the weights, counted against the budget: KV cells and recurrent
 * states for a context of 4096, the workspace for the default chunk of 512 rows, and the scratch of
 * the prompt path: the MoE path dequantizes up to 1 GiB of experts at once, beside attention's
 * score blocks and cuBLAS's workspace; 2.25 GiB in all, from the peak nvidia-smi showed on the
 * H200 (bench/cuda/runs/2026-12-01-h200-tiers-v2: 1.5 GiB left the peak 0.67 GiB past the
 * budget). A longer context or larger chunks take more (docs/cuda.md). */
static uint64_t session_reserve(const struct st_model *m) {
    const st_hparams *hp = &m->hp;
    uint64_t b = (uint64_t)9 << 28;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        if (st_hp_is_hybrid(hp) && hp->is_linear[il])
            b += (uint64_t)(st_hp_conv_channels(hp) * hp->ssm_conv_kernel + hp->ssm_n_v * hp->ssm_state * hp->ssm_state) * 4;
        else
            b += (uint64_t)4096 * 2 * 2 * (uint64_t)(hp->n_head_kv[il] * hp->head_dim);
    }
    st_ws_plan plan = {.m = m, .n_ctx = 4096};
    for (int id = 0; id < WS_N_BUFFERS; id++) b += st_forward_cuda_ws_size(&plan, id, 512);
    return b;
}

st_status st_device_model_load(const struct st_model *m, int progress, uint64_t budget, st_device_model **out) {
    *out = NULL;
    if (st_cuda_device_count() <= 0) return st_fail(ST_ERR_UNSUPPORTED, "cuda: no GPU found");
    ST_TRY(st_forward_cuda_check(m));
    st_device_model *dm = calloc(1, sizeof *dm);
    if (!dm) return st_fail(ST_ERR_NOMEM, "cuda: out of memory");
    st_status s = st_cuda_open(0, &dm->cu);
    size_t off = st_gguf_data_offset(m->gguf), size = st_gguf_file_size(m->gguf) - off;
    blob_map bm = {.size = size};
    if (st_gguf_n_tensors(m->gguf) > 0) {
        const st_gguf_tensor *t0 = st_gguf_tensor_at(m->gguf, 0);
        bm.base = (const char *)t0->data - t0->offset;
    }
    if (m->ple_table.data && bm.base) {
        bm.hole_off = (size_t)((const char *)m->ple_table.data - bm.base);
        /* whole 256-byte steps only, so every tensor after it keeps its alignment */
        bm.hole_size = (size_t)m->ple_table_bytes & ~(size_t)255;
    }
    const size_t kept = size - bm.hole_size;   /* the bytes the blob holds */
    /* The budget caps the device memory in use (the context's own share, and anything else on the
     * device, included): given, or all of it less 1 GiB. */
    size_t free_b = 0, total_b = 0;
    if (s == ST_OK) s = st_cuda_mem_info(dm->cu, &free_b, &total_b);
    uint64_t in_use = (uint64_t)(total_b - free_b), reserve = session_reserve(m), room = 0;
    if (s == ST_OK && budget == 0) budget = total_b > ((size_t)1 << 30) ? total_b - ((size_t)1 << 30) : 0;
    char bb[32], ub[32];
    snprintf(bb, sizeof bb, "%.1f GiB", (double)budget / (double)(1ull << 30));
    snprintf(ub, sizeof ub, "%.1f GiB", (double)(in_use + reserve) / (double)(1ull << 30));
    if (s == ST_OK && budget > total_b)
        s = st_fail(ST_ERR_NOMEM, "cuda: a device budget of %s, but the GPU has %.1f GiB", bb, (double)total_b / (double)(1ull << 30));
    if (s == ST_OK && budget < in_use + reserve)
        s = st_fail(ST_ERR_NOMEM, "cuda: a device budget of %s leaves nothing for weights: %s are in use or kept for a "
                    "session", bb, ub);
    if (s == ST_OK) room = budget - in_use - reserve;
    dm->budget = budget;
    const char *force = getenv("STRATA_CUDA_HOST_LAYERS");
    int tiered = s == ST_OK && (st_device_tiers_needed(m, room) || (force && *force && st_hp_is_moe(&m->hp)));
    if (s == ST_OK) {
        dm->layers = calloc((size_t)m->hp.n_layer, sizeof *dm->layers);
        dm->n_layers = m->hp.n_layer;
        if (!dm->layers) s = st_fail(ST_ERR_NOMEM, "cuda: out of memory");
    }
    if (s == ST_OK && tiered) {
        s = st_device_tiers_upload(dm, m, room, progress);
    } else if (s == ST_OK) {
        if (bm.base) {
            /* the model's pointers must still be the mapping's (no host copy) */
            s = st_cuda_alloc(dm->cu, kept, &dm->blob);
            if (s == ST_OK) s = upload_blob(dm, &bm, progress);
        }
        snprintf(dm->plan, sizeof dm->plan, "all %.1f GiB of weights on the GPU", (double)kept / (double)(1ull << 30));
        if (bm.hole_size) {
            size_t len = strlen(dm->plan);
            snprintf(dm->plan + len, sizeof dm->plan - len, " (the %.1f GiB PLE table stays on the host)",
                     (double)bm.hole_size / (double)(1ull << 30));
        }
    }
    if (s == ST_OK && !tiered) {
        dm->w.tok_embd = m->tok_embd;
        dm->w.output = m->output;
        dm->w.output_norm = m->output_norm;
        s = rebase_tensor(dm, &bm, &dm->w.tok_embd);
        if (s == ST_OK) s = rebase_tensor(dm, &bm, &dm->w.output);
        if (s == ST_OK) s = rebase_tensor(dm, &bm, &dm->w.output_norm);
        dm->w.hc_head_norm = m->hc_head_norm;
        dm->w.hc_head_down = m->hc_head_down;
        dm->w.hc_head_up = m->hc_head_up;
        if (s == ST_OK) s = rebase_tensor(dm, &bm, &dm->w.hc_head_norm);
        if (s == ST_OK) s = rebase_tensor(dm, &bm, &dm->w.hc_head_down);
        if (s == ST_OK) s = rebase_tensor(dm, &bm, &dm->w.hc_head_up);
        for (int64_t i = 0; i < m->hp.n_layer && s == ST_OK; i++) {
            dm->layers[i] = m->layers[i];
            for (int j = 0; j < ST_LAYER_N_TENSORS && s == ST_OK; j++)
                s = rebase_tensor(dm, &bm, st_layer_tensor_at(&dm->layers[i], j));
        }
        dm->w.layers = dm->layers;
    }
    if (s == ST_OK && !tiered) s = make_expert_f16(dm, m, room > kept ? room - kept : 0, progress);
    if (s == ST_OK && m->ple_table.data) {
        /* the PLE table copied into pinned mapped host memory, so a decode step hashes and gathers
         * its rows on the device over the bus (and can be a graph). The file mapping itself is not
         * registered: cudaHostRegister on the flash file's 1 GiB table ran past 80 s on the H200
         * (bench/cuda/runs/2026-12-04-h200-q4exp-flashdiag). Without the copy the host gathers the
         * rows (eager steps). */
        size_t len = strlen(dm->plan);
        void *dev = NULL;
        if (st_cuda_host_alloc_mapped((size_t)m->ple_table_bytes, 1, &dm->ple_pin, &dev) == ST_OK) {
            memcpy(dm->ple_pin, m->ple_table.data, (size_t)m->ple_table_bytes);
            dm->w.ple_dev = dev;
            snprintf(dm->plan + len, sizeof dm->plan - len, "; the GPU reads the PLE table's rows over the bus");
        } else {
            st_warn("cuda: no pinned host memory for the PLE table (%s): the host gathers its rows, and decode "
                    "steps run without CUDA graphs", st_last_error());
            st_clear_error();
        }
    }
    if (s == ST_OK && budget < total_b - ((size_t)1 << 30)) {
        size_t len = strlen(dm->plan);
        snprintf(dm->plan + len, sizeof dm->plan - len, " (budget %s, %s of it kept for the context and a session)", bb, ub);
    }
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
        st_host_moe_free(dm->cu, dm->host_moe);
        st_cuda_host_free(dm->host_blob);
        st_cuda_host_free(dm->ple_pin);
        st_cuda_close(dm->cu);
    }
    free(dm->host_layer);
    free(dm->owned);
    free(dm->layers);
    free(dm->f16_gu);
    free(dm->f16_down);
    free(dm);
}

const char *st_device_model_describe(const st_device_model *dm) { return st_cuda_describe(dm->cu); }

const char *st_device_model_plan(const st_device_model *dm) { return dm->plan; }

void st_device_model_bus_bandwidth(st_device_model *dm, size_t bytes, double *mapped, double *copy) {
    if (st_cuda_host_bandwidth(dm->cu, bytes, mapped, copy) != ST_OK) st_clear_error();
}

double st_device_model_bandwidth(st_device_model *dm) {
    double gbs = 0.0;
    if (st_cuda_read_bandwidth(dm->cu, (size_t)2 << 30, &gbs) != ST_OK) st_clear_error();
    return gbs;
}

uint64_t st_device_model_free_bytes(const st_device_model *dm) {
    size_t free_b = 0, total_b = 0;
    if (st_cuda_mem_info(dm->cu, &free_b, &total_b) != ST_OK) {
        st_clear_error();
        return 0;
    }
    /* what the budget leaves, if less */
    uint64_t in_use = (uint64_t)(total_b - free_b), left = dm->budget > in_use ? dm->budget - in_use : 0;
    return left < free_b ? left : free_b;
}
