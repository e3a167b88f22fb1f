/* device_tiers.c: memory tiers for a model larger than its device budget (model/device.h).
 *
 * The dense weights (mixers, norms, routers, shared experts, the embedding and the head) go to the
 * device, and so do the routed experts of as many MoE layers as fit; the other layers' routed
 * experts go to pinned, mapped host memory, where the same kernels read them in place over the bus.
 * A decoded token then moves k/E of those layers' expert bytes across the bus; a prompt chunk
 * dequantizes its used experts from there. Nothing in the forward knows: a tensor's pointer is a
 * device pointer or a mapped host one, and the logits are the resident run's bit for bit.
 *
 * The plan is by whole layers. With the routing spread evenly, as in random-weight files, a
 * per-expert cache would serve the same share of reads; one filled from routing statistics (real
 * models route unevenly) is a next step (bench/cuda/NOTES.md). The host CPU computing a share of
 * each host layer's selected experts beside the GPU (host_experts.c: v3 through host nodes, v4
 * through a mailbox in mapped memory, the default) is chosen per layer at load; =0 turns it off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/cuda/device_model.h"
#include "model/cuda/host_experts.h"

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static size_t tensor_bytes(const st_tensor *t) {
    return t->data ? t->row_bytes * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]) : 0;
}

/* Bytes a tensor takes in a tier's block: its data, and its f32 view when that is a copy. */
static size_t placed_bytes(const st_tensor *t) {
    size_t n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    return align256(tensor_bytes(t)) + (t->f32 && (const void *)t->f32 != t->data ? align256(n * sizeof(float)) : 0);
}

static void gib_str(char *buf, size_t len, uint64_t bytes) {
    snprintf(buf, len, "%.1f GiB", (double)bytes / (double)(1ull << 30));
}

/* A bump allocator over one block (device, or mapped host), and the tensors already placed, so a
 * tensor bound twice (a tied head) is copied once. */
typedef struct tier_block {
    char *base;                  /* the pointer kernels use */
    char *host;                  /* the host side of a mapped block (memcpy's target); NULL: device */
    size_t used, size;
} tier_block;

typedef struct tier_placed {
    const void *src, *dst;
} tier_placed;

typedef struct tier_upload {
    st_cuda *cu;
    tier_block dev, host;
    tier_placed *placed;
    size_t n_placed, cap_placed;
    size_t done, total;
    int progress;
} tier_upload;

static st_status place(tier_upload *u, const void *src, size_t bytes, int on_host, const void **out) {
    for (size_t i = 0; i < u->n_placed; i++)
        if (u->placed[i].src == src) {
            *out = u->placed[i].dst;
            return ST_OK;
        }
    tier_block *b = on_host ? &u->host : &u->dev;
    if (b->used + align256(bytes) > b->size)
        return st_fail(ST_ERR_INVALID, "cuda: tier plan: %zu bytes past the %s block", bytes, on_host ? "host" : "device");
    char *dst = b->base + b->used;
    if (on_host) memcpy(b->host + b->used, src, bytes);
    else ST_TRY(st_cuda_upload(u->cu, dst, src, bytes));
    b->used += align256(bytes);
    if (u->n_placed == u->cap_placed) {
        size_t cap = u->cap_placed ? 2 * u->cap_placed : 256;
        tier_placed *p = realloc(u->placed, cap * sizeof *p);
        if (!p) return st_fail(ST_ERR_NOMEM, "cuda: out of memory");
        u->placed = p;
        u->cap_placed = cap;
    }
    u->placed[u->n_placed++] = (tier_placed){src, dst};
    u->done += bytes;
    if (u->progress) st_progress("placing weights", (double)u->done, (double)u->total);
    *out = dst;
    return ST_OK;
}

/* A tensor's data, and its f32 view (some have only that: qwen4exp's widened PLE conv). */
static st_status place_tensor(tier_upload *u, st_tensor *t, int on_host) {
    const void *f32_src = t->f32, *f32;
    if (t->data) ST_TRY(place(u, t->data, tensor_bytes(t), on_host, &t->data));
    if (f32_src) {
        size_t n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        ST_TRY(place(u, f32_src, n * sizeof(float), 0, &f32));
        t->f32 = f32;
    }
    t->escale = NULL; /* checked to be all ones */
    return ST_OK;
}

/* qwen4exp's PLE table stays in host memory, tiered or not: the host gathers its rows. */
static int on_device_slot(const struct st_model *m, int64_t i) {
    return st_model_tensor_slot_get(m, i) != &m->ple_table;
}

int st_device_tiers_needed(const struct st_model *m, uint64_t room) {
    uint64_t all = 0;
    for (int64_t i = 0; i < st_model_n_tensor_slots(m); i++)
        if (on_device_slot(m, i)) all += placed_bytes(st_model_tensor_slot_get(m, i));
    return all > room;
}

st_status st_device_tiers_upload(st_device_model *dm, const struct st_model *m, uint64_t room, int progress) {
    const st_hparams *hp = &m->hp;
    uint64_t dense = 0, experts = 0;
    for (int64_t i = 0; i < st_model_n_tensor_slots(m); i++) {
        const st_tensor *t = st_model_tensor_slot_get(m, i);
        /* a tied head is placed once; the PLE table not at all */
        if ((i == 1 && m->output.data == m->tok_embd.data) || !on_device_slot(m, i)) continue;
        if (st_model_tensor_slot_kind(m, i) == ST_LT_EXPERTS) experts += placed_bytes(t);
        else dense += placed_bytes(t);
    }
    char rb[32], db[32], hb[32], vb[32];
    gib_str(rb, sizeof rb, room);
    gib_str(db, sizeof db, dense);
    if (dense > room)
        return st_fail(ST_ERR_NOMEM, "cuda: the weights other than the routed experts take %s, more than the %s the "
                       "device budget leaves for weights (--gpu-mem)", db, rb);
    dm->host_layer = calloc((size_t)hp->n_layer, 1);
    if (!dm->host_layer) return st_fail(ST_ERR_NOMEM, "cuda: out of memory");
    /* the first layers whose experts fit stay on the device; STRATA_CUDA_HOST_LAYERS=N (tests, on
     * models that fit) keeps at most N layers' experts there and tiers the model even so */
    const char *force = getenv("STRATA_CUDA_HOST_LAYERS");
    int64_t max_dev = force && *force ? atoll(force) : -1;
    uint64_t left = room - dense, on_dev = 0, on_host = 0;
    int64_t n_moe = 0, n_dev = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        uint64_t b = 0;
        for (int j = 0; j < ST_LAYER_N_TENSORS; j++)
            if (st_layer_tensors[j].kind == ST_LT_EXPERTS) b += placed_bytes(st_layer_tensor_get(&m->layers[il], j));
        if (b == 0) continue;
        n_moe++;
        if (b <= left && (max_dev < 0 || n_dev < max_dev)) {
            left -= b;
            on_dev += b;
            n_dev++;
        } else {
            dm->host_layer[il] = 1;
            on_host += b;
        }
    }
    tier_upload u = {.cu = dm->cu, .progress = progress, .total = dense + experts};
    st_status s = st_cuda_alloc(dm->cu, dense + on_dev + 256, &dm->blob);
    u.dev = (tier_block){.base = dm->blob, .size = dense + on_dev + 256};
    void *mapped = NULL;
    /* cached, since the CPU reads its share of the experts from here too (host_experts.c);
     * write-combined (the host writes it once) when that share is off, STRATA_CUDA_CPU_EXPERTS=0.
     * The bus carries both alike (bench/cuda/NOTES.md, v3). */
    const char *cpu = getenv("STRATA_CUDA_CPU_EXPERTS");
    int wc = cpu && !strcmp(cpu, "0");
    if (s == ST_OK && on_host) s = st_cuda_host_alloc_mapped(on_host + 256, wc, &dm->host_blob, &mapped);
    u.host = (tier_block){.base = mapped, .host = dm->host_blob, .size = on_host + 256};
    if (s == ST_OK) {
        dm->w.tok_embd = m->tok_embd;
        dm->w.output = m->output;
        dm->w.output_norm = m->output_norm;
        s = place_tensor(&u, &dm->w.tok_embd, 0);
        if (s == ST_OK) s = place_tensor(&u, &dm->w.output, 0);
        if (s == ST_OK) s = place_tensor(&u, &dm->w.output_norm, 0);
        dm->w.hc_head_norm = m->hc_head_norm;
        dm->w.hc_head_down = m->hc_head_down;
        dm->w.hc_head_up = m->hc_head_up;
        if (s == ST_OK) s = place_tensor(&u, &dm->w.hc_head_norm, 0);
        if (s == ST_OK) s = place_tensor(&u, &dm->w.hc_head_down, 0);
        if (s == ST_OK) s = place_tensor(&u, &dm->w.hc_head_up, 0);
    }
    for (int64_t il = 0; il < hp->n_layer && s == ST_OK; il++) {
        dm->layers[il] = m->layers[il];
        for (int j = 0; j < ST_LAYER_N_TENSORS && s == ST_OK; j++)
            s = place_tensor(&u, st_layer_tensor_at(&dm->layers[il], j),
                             dm->host_layer[il] && st_layer_tensors[j].kind == ST_LT_EXPERTS);
    }
    dm->w.layers = dm->layers;
    if (progress) st_progress_end();
    free(u.placed);
    if (s != ST_OK) return s;
    gib_str(hb, sizeof hb, on_host);
    gib_str(vb, sizeof vb, dense + on_dev);
    double share = on_dev + on_host ? (double)on_dev / (double)(on_dev + on_host) : 1.0;
    char note[256] = "";
    if (on_host) {
        s = st_host_moe_create(dm->cu, m, dm->layers, dm->host_layer, mapped, dm->host_blob, note, sizeof note,
                               &dm->host_moe);
        if (s != ST_OK) return s;
        dm->w.host_layer = dm->host_layer;
        dm->w.host_moe = dm->host_moe;
    }
    snprintf(dm->plan, sizeof dm->plan,
             "%s of weights on the GPU (the dense weights and the experts of %lld of %lld MoE layers), %s of experts in "
             "pinned host memory read over the bus; the GPU serves %.0f%% of expert reads%s",
             vb, (long long)n_dev, (long long)n_moe, hb, 100.0 * share, note);
    return ST_OK;
}
