/* host_experts.c: the host CPU's share of a tiered layer's selected experts in a decode step
 * (memory tiers, v3: bench/cuda/NOTES.md).
 *
 * Under --gpu-mem the routed experts of some MoE layers stay in pinned host memory
 * (device_tiers.c), and the GPU reads the selected ones over the bus. The host's cores read the
 * same memory about as fast as the bus carries it, so a decode step splits each such layer's k
 * selected experts in two: the GPU computes the first k - k_cpu over the bus while the CPU pool
 * computes the last k_cpu from host RAM, with the CPU forward's own expert job (model/moe_exec.c),
 * and the device adds the CPU's partial sum. In the captured decode graph the CPU's part is a
 * branch on the side stream: the selection and the normed row copied to the host, a host node that
 * runs the pool, the partial sum copied back.
 *
 * Measured on the H200 (bench/cuda/NOTES.md, "v3"), this loses: the pool alone reads a host
 * layer's experts at 45-65 GB/s, but every CPU branch adds about 200 us to its layer (the copies and
 * the host node's round trip through the driver), more than the bus time it saves (8 experts of the
 * 35B-A3B are 280 us over the bus). Decode fell from 73.6 to 44-57 tok/s at --gpu-mem 8 and from
 * 135 to 82-110 at 16, for every share and pool size tried. So it is off unless asked for:
 * STRATA_CUDA_CPU_EXPERTS=N gives the CPU the last N of a token's k experts (the tests force it);
 * =auto chooses N at load from the two rates measured here and a fixed cost per layer
 * (STRATA_CUDA_CPU_OVERHEAD_US, default 200). The way on is a branch without the driver in it:
 * CPU threads polling a flag the GPU writes into mapped memory, and a kernel waiting on theirs.
 *
 * The CPU quantizes activations as the CPU forward does (per 32 or 256 values, f32 scales), so
 * with a share the logits are within the quantized limits of the CPU's, not the resident run's bit
 * for bit. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "model/cuda/host_experts.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/pool.h"
#include "model/forward.h"
#include "model/moe_exec.h"

/* One host layer: its expert tensors with host addresses (moe_entry_init reads them). */
typedef struct cpu_layer {
    struct st_host_moe *hm;
    st_tensor gate, up, gate_up, down;
    int on;                      /* the CPU takes a share of this layer */
} cpu_layer;

struct st_host_moe {
    st_pool *pool;
    int k_cpu;
    int64_t d, ff, k, E, n_layer;
    cpu_layer *layers;
    /* one step's inputs and the CPU's partial sum, pinned; the sum's device copy */
    void *pin;
    int32_t *ids;
    float *w, *h, *y;
    float *y_dev;
    /* moe_exec's buffers for k rows */
    moe_entry *ent;
    int32_t *x_row, *slot;
    char *act1, *act2;
    size_t act1_row, act2_row;
    float *gu, *ye;
    int64_t ld_gu;
};

static void *zalloc64(size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes ? bytes : 64);
    if (p) memset(p, 0, bytes ? bytes : 64);
    return p;
}

/* The host node: the last k_cpu selected experts of this step, summed with their weights into y. */
static void run_layer(void *arg) {
    cpu_layer *hl = arg;
    st_host_moe *hm = hl->hm;
    int64_t kc = hm->k_cpu, j0 = hm->k - kc;
    int n = 0;
    for (int64_t i = 0; i < kc; i++) {
        int32_t e = hm->ids[j0 + i];
        if (e < 0 || e >= hm->E) continue; /* the device's routing never gives one; skip, as its kernels zero it */
        if (!moe_entry_init(&hm->ent[n], &hl->gate, &hl->up, &hl->gate_up, &hl->down, e, hm->ff)) continue;
        hm->ent[n].p0 = i;
        hm->ent[n].rows = 1;
        n++;
    }
    moe_args a = {
        .ent = hm->ent, .n_ent = n, .d = hm->d, .P = kc, .x = hm->h, .x_row = hm->x_row,
        .act1 = hm->act1, .act1_row = hm->act1_row, .act2 = hm->act2, .act2_row = hm->act2_row,
        .gu = hm->gu, .ld_gu = hm->ld_gu, .y = hm->ye,
        .out = hm->y, .n_tok = 1, .k = kc, .w = hm->w + j0, .slot = hm->slot,
    };
    if (n == kc) moe_exec(hm->pool, &a);
    else memset(hm->y, 0, (size_t)hm->d * sizeof(float)); /* cannot happen for a layer marked on */
}

static int host_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    return 1;
}

/* A host copy of a device-table tensor whose data lies in the mapped block. */
static st_tensor rebase(const st_tensor *t, const char *dev_base, char *host_base) {
    st_tensor c = *t;
    if (t->data) c.data = host_base + ((const char *)t->data - dev_base);
    if (t->f32 && (const void *)t->f32 == t->data) c.f32 = (const float *)c.data;
    return c;
}

/* Seconds the pool takes for `kc` experts of layer hl (the median of 7 steps, each on other experts
 * so that none comes from the cache). */
static double time_cpu(st_host_moe *hm, cpu_layer *hl, int kc) {
    double t[7];
    int saved = hm->k_cpu;
    hm->k_cpu = kc;
    for (int64_t i = 0; i < hm->d; i++) hm->h[i] = 0.01f * (float)((i * 7) % 13 - 6);
    for (int r = -1; r < 7; r++) {
        for (int64_t j = 0; j < hm->k; j++) {
            hm->ids[j] = (int32_t)(((r + 1) * hm->k + j) % hm->E);
            hm->w[j] = 1.0f / (float)hm->k;
        }
        double t0 = st_now();
        run_layer(hl);
        if (r >= 0) t[r] = st_now() - t0;
    }
    hm->k_cpu = saved;
    for (int i = 1; i < 7; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[3];
}

void st_host_moe_free(st_cuda *cu, st_host_moe *hm) {
    if (!hm) return;
    st_pool_destroy(hm->pool);
    if (hm->y_dev) st_cuda_free(cu, hm->y_dev);
    st_cuda_host_free(hm->pin);
    free(hm->layers);
    free(hm->ent);
    free(hm->x_row);
    free(hm->slot);
    free(hm->act1);
    free(hm->act2);
    free(hm->gu);
    free(hm->ye);
    free(hm);
}

st_status st_host_moe_create(st_cuda *cu, const struct st_model *m, const st_layer *layers, const uint8_t *host_layer,
                             const char *dev_base, char *host_base, char *note, size_t note_len, st_host_moe **out) {
    *out = NULL;
    if (note_len) note[0] = 0;
    const st_hparams *hp = &m->hp;
    const char *env = getenv("STRATA_CUDA_CPU_EXPERTS");
    int forced = env && strcmp(env, "auto") ? atoi(env) : -1; /* -1: auto */
    int cores = host_cores();
    if (!env || forced == 0 || (forced < 0 && cores < 4)) return ST_OK;

    st_host_moe *hm = calloc(1, sizeof *hm);
    if (!hm) return st_fail(ST_ERR_NOMEM, "cuda: out of memory");
    int64_t k = 0;
    for (int64_t il = 0; il < hp->n_layer; il++)
        if (hp->n_expert_used[il] > k) k = hp->n_expert_used[il];
    hm->d = hp->n_embd;
    hm->ff = hp->n_ff_exp;
    hm->k = k;
    hm->E = hp->n_expert;
    hm->n_layer = hp->n_layer;
    hm->act1_row = fwd_moe_act_row(m, 0);
    hm->act2_row = fwd_moe_act_row(m, 1);
    hm->ld_gu = fwd_moe_gu_width(hp);
    /* the host node's thread is the pool's thread 0. Half the cores, at most 8: a few experts are
     * read at the memory's rate by that many, and a pool that fills every core stalls whenever one
     * of its threads loses its core to the thread waiting on the GPU or to the driver's
     * (STRATA_CUDA_CPU_THREADS sets it) */
    const char *tenv = getenv("STRATA_CUDA_CPU_THREADS");
    int nth = tenv && *tenv ? atoi(tenv) : (cores / 2 < 8 ? cores / 2 : 8);
    st_status s = st_pool_create(nth > 0 ? nth : 1, &hm->pool);
    size_t pin_bytes = (size_t)k * (sizeof(int32_t) + sizeof(float)) + (size_t)2 * hm->d * sizeof(float) + 256;
    void *pin_dev = NULL;
    if (s == ST_OK) s = st_cuda_host_alloc_mapped(pin_bytes, 0, &hm->pin, &pin_dev);
    if (s == ST_OK) s = st_cuda_alloc(cu, (size_t)hm->d * sizeof(float), (void **)&hm->y_dev);
    hm->layers = calloc((size_t)hp->n_layer, sizeof *hm->layers);
    hm->ent = calloc((size_t)k, sizeof *hm->ent);
    hm->x_row = calloc((size_t)k, sizeof *hm->x_row);
    hm->slot = calloc((size_t)k, sizeof *hm->slot);
    hm->act1 = zalloc64((size_t)k * hm->act1_row);
    hm->act2 = zalloc64((size_t)k * hm->act2_row);
    hm->gu = zalloc64((size_t)(k * hm->ld_gu) * sizeof(float));
    hm->ye = zalloc64((size_t)(k * hm->d) * sizeof(float));
    if (s == ST_OK && (!hm->layers || !hm->ent || !hm->x_row || !hm->slot || !hm->act1 || !hm->act2 || !hm->gu || !hm->ye))
        s = st_fail(ST_ERR_NOMEM, "cuda: out of memory");
    if (s != ST_OK) {
        st_host_moe_free(cu, hm);
        return s;
    }
    char *p = hm->pin;
    hm->h = (float *)p;
    hm->y = hm->h + hm->d;
    hm->w = hm->y + hm->d;
    hm->ids = (int32_t *)(hm->w + k);
    for (int64_t j = 0; j < k; j++) hm->slot[j] = (int32_t)j;

    /* the layers whose experts the CPU kernels can run in place */
    cpu_layer *first = NULL;
    int n_on = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        cpu_layer *hl = &hm->layers[il];
        const st_layer *L = &layers[il];
        hl->hm = hm;
        if (!host_layer[il] || hp->n_expert_used[il] != k) continue;
        hl->gate = rebase(&L->gate_exps, dev_base, host_base);
        hl->up = rebase(&L->up_exps, dev_base, host_base);
        hl->gate_up = rebase(&L->gate_up_exps, dev_base, host_base);
        hl->down = rebase(&L->down_exps, dev_base, host_base);
        moe_entry probe;
        hl->on = moe_entry_init(&probe, &hl->gate, &hl->up, &hl->gate_up, &hl->down, 0, hm->ff);
        if (hl->on && !first) first = hl;
        n_on += hl->on;
    }
    if (!first) {
        st_host_moe_free(cu, hm);
        return ST_OK;
    }

    /* the split: the GPU's k - kc experts at the bus rate against the pool's kc plus the fixed cost */
    const st_tensor *dn = &first->down, *gt = first->gate_up.data ? &first->gate_up : &first->gate;
    double expert_bytes = (double)(gt->ne[1] * gt->row_bytes + dn->ne[1] * dn->row_bytes);
    if (!first->gate_up.data) expert_bytes += (double)(first->up.ne[1] * first->up.row_bytes);
    double bus = 0, copy = 0;
    if (st_cuda_host_bandwidth(cu, (size_t)256 << 20, &bus, &copy) != ST_OK) st_clear_error();
    double t_cpu = time_cpu(hm, first, (int)k) / (double)k;
    const char *oenv = getenv("STRATA_CUDA_CPU_OVERHEAD_US");
    double over = (oenv && *oenv ? atof(oenv) : 200.0) * 1e-6;
    double t_gpu = bus > 0 ? expert_bytes / (bus * 1e9) : 1.0;
    int best = 0;
    double best_t = (double)k * t_gpu;
    for (int kc = 1; kc < k; kc++) {
        double g = (double)(k - kc) * t_gpu, c = (double)kc * t_cpu + over, t = g > c ? g : c;
        if (t < best_t) {
            best_t = t;
            best = kc;
        }
    }
    if (forced > 0) best = forced < k ? forced : (int)k - 1;
    hm->k_cpu = best;
    snprintf(note, note_len,
             "; the CPU (%d threads) computes %d of the %lld experts a token selects in each of %d such layers "
             "(measured: %.1f GB/s over the bus, %.1f GB/s on the CPU)",
             st_pool_size(hm->pool), best, (long long)k, n_on, bus, expert_bytes / t_cpu / 1e9);
    if (best == 0) {
        st_host_moe_free(cu, hm);
        return ST_OK;
    }
    *out = hm;
    return ST_OK;
}

int st_host_moe_k_cpu(const st_host_moe *hm, int64_t il) {
    return hm && il >= 0 && il < hm->n_layer && hm->layers[il].on ? hm->k_cpu : 0;
}

st_status st_host_moe_enqueue(st_cuda *cu, st_host_moe *hm, int64_t il, const int32_t *ids, const float *w,
                              const float *h, const float **y) {
    *y = hm->y_dev;
    ST_TRY(st_cuda_download_async(cu, hm->ids, ids, (size_t)hm->k * sizeof(int32_t)));
    ST_TRY(st_cuda_download_async(cu, hm->w, w, (size_t)hm->k * sizeof(float)));
    ST_TRY(st_cuda_download_async(cu, hm->h, h, (size_t)hm->d * sizeof(float)));
    ST_TRY(st_cuda_host_fn(cu, run_layer, &hm->layers[il]));
    return st_cuda_upload_async(cu, hm->y_dev, hm->y, (size_t)hm->d * sizeof(float));
}
