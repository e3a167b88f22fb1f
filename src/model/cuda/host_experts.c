/* host_experts.c: the host CPU's share of a tiered layer's selected experts in a decode step
 * (memory tiers v3 and v4: bench/cuda/NOTES.md).
 *
 * Under --gpu-mem the routed experts of some MoE layers stay in pinned host memory
 * (device_tiers.c), and the GPU reads the selected ones over the bus. The host's cores read the
 * same memory about as fast as the bus carries it, so a decode step splits each such layer's k
 * selected experts in two: the GPU computes the first k - k_cpu over the bus while the CPU pool
 * computes the last k_cpu from host RAM, with the CPU forward's own expert job (model/moe_exec.c),
 * and the device adds the CPU's partial sum. N is chosen per layer at load from the bus rate and
 * the CPU's rate measured here, and a fixed cost per layer (STRATA_CUDA_CPU_OVERHEAD_US), on hosts
 * of 4 cores or more; STRATA_CUDA_CPU_EXPERTS=N forces N, =0 turns the share off (v2: the GPU
 * reads every selected expert over the bus). Two forms (STRATA_CUDA_CPU_EXPERTS_MODE):
 *
 *  - host-node (v3): in the captured graph a side-stream branch copies the selection and the
 *    normed row to the host, runs the pool in a host node, and copies the sum back. Measured on the
 *    H200 it loses: each branch costs about 185 us through the driver, more than the bus time it
 *    saves (decode at --gpu-mem 8 fell from 73.6 to 44-57 tok/s).
 *  - poll (v4, the default): no driver in the branch, measured faster than v2 in every pair on
 *    the H200 (+7-15% at --gpu-mem 8, +11-13% at 16; bench/cuda/NOTES.md, v4). A kernel posts the request into mapped
 *    host memory, a server thread polling that memory runs the pool and posts the sum back, and a
 *    one-block kernel on the main stream, after the GPU's own experts, waits for it and adds it
 *    (model/expert_mailbox.h has the sequence rules; backend/cuda/mailbox.cu the kernels). A wait
 *    gives up after STRATA_CUDA_CPU_WAIT_MS (default 1000), and the step then fails naming the layer
 *    (st_host_moe_step_end). The server spins through every forward of a session, and
 *    STRATA_CUDA_CPU_IDLE_MS (default 50) after it, then sleeps until the next one wakes it.
 *
 * The CPU quantizes activations as the CPU forward does (per 32 or 256 values, f32 scales), so
 * with a share the logits are within the quantized limits of the CPU's, not the resident run's bit
 * for bit. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "model/cuda/host_experts.h"

#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/pool.h"
#include "model/expert_mailbox.h"
#include "model/forward_ws.h"
#include "model/moe_exec.h"

/* One host layer: its expert tensors with host addresses (moe_entry_init reads them). */
typedef struct cpu_layer {
    struct st_host_moe *hm;
    st_tensor gate, up, gate_up, down;
    int on;                      /* the CPU kernels run this layer's experts */
    int k_cpu;                   /* the CPU's share of its k selected experts (0: none) */
    double t_cpu, t_gpu;         /* seconds per expert measured at load: the pool's, the bus's */
} cpu_layer;

struct st_host_moe {
    st_pool *pool;
    int poll;                    /* v4: the mailbox; 0: v3's host node */
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
    /* v4: the mailbox block (mapped, cached), its server, the kernels' view of it */
    void *mbox_host;
    st_mbox_layout ml;
    st_mbox *mbox;
    st_cuda_mbox dmb;
};

static void *zalloc64(size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes ? bytes : 64);
    if (p) memset(p, 0, bytes ? bytes : 64);
    return p;
}

/* The last kc of a token's k selected experts (ids, w: k each), on the row h, summed with their
 * weights into y (d floats). */
static void run_experts(st_host_moe *hm, cpu_layer *hl, int64_t kc, const int32_t *ids, const float *w,
                        const float *h, float *y) {
    int64_t j0 = hm->k - kc;
    int n = 0;
    for (int64_t i = 0; i < kc; i++) {
        int32_t e = ids[j0 + i];
        if (e < 0 || e >= hm->E) continue; /* the device's routing never gives one; skip, as its kernels zero it */
        if (!moe_entry_init(&hm->ent[n], &hl->gate, &hl->up, &hl->gate_up, &hl->down, e, hm->ff)) continue;
        hm->ent[n].p0 = i;
        hm->ent[n].rows = 1;
        n++;
    }
    moe_args a = {
        .ent = hm->ent, .n_ent = n, .d = hm->d, .P = kc, .x = h, .x_row = hm->x_row,
        .act1 = hm->act1, .act1_row = hm->act1_row, .act2 = hm->act2, .act2_row = hm->act2_row,
        .gu = hm->gu, .ld_gu = hm->ld_gu, .y = hm->ye,
        .out = y, .n_tok = 1, .k = kc, .w = w + j0, .slot = hm->slot,
    };
    if (n == kc) moe_exec(hm->pool, &a);
    else memset(y, 0, (size_t)hm->d * sizeof(float)); /* cannot happen for a layer marked on */
}

/* The host node (v3), and the timing at load: the layer's share from the pinned step buffers. */
static void run_layer(void *arg) {
    cpu_layer *hl = arg;
    st_host_moe *hm = hl->hm;
    run_experts(hm, hl, hl->k_cpu, hm->ids, hm->w, hm->h, hm->y);
}

/* The mailbox's server (v4): a request of layer il, read from its slot. */
static void serve_request(void *ctx, int64_t il, const int32_t *ids, const float *w, const float *h, float *y) {
    st_host_moe *hm = ctx;
    cpu_layer *hl = &hm->layers[il];
    if (hl->k_cpu > 0) run_experts(hm, hl, hl->k_cpu, ids, w, h, y);
    else memset(y, 0, (size_t)hm->d * sizeof(float));
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

/* Seconds the pool takes for `kc` experts of layer hl (the median of 15 steps, each on other
 * experts so that none comes from the cache; 15 rather than 7, since the rate measured at load
 * varied by 2x between runs on the H200 host and flipped the share chosen). */
static double time_cpu(st_host_moe *hm, cpu_layer *hl, int kc) {
    enum { RUNS = 15 };
    double t[RUNS];
    int saved = hl->k_cpu;
    hl->k_cpu = kc;
    for (int64_t i = 0; i < hm->d; i++) hm->h[i] = 0.01f * (float)((i * 7) % 13 - 6);
    for (int r = -1; r < RUNS; r++) {
        for (int64_t j = 0; j < hm->k; j++) {
            hm->ids[j] = (int32_t)(((r + 1) * hm->k + j) % hm->E);
            hm->w[j] = 1.0f / (float)hm->k;
        }
        double t0 = st_now();
        run_layer(hl);
        if (r >= 0) t[r] = st_now() - t0;
    }
    hl->k_cpu = saved;
    for (int i = 1; i < RUNS; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[RUNS / 2];
}

void st_host_moe_free(st_cuda *cu, st_host_moe *hm) {
    if (!hm) return;
    st_mbox_destroy(hm->mbox); /* the server first: it runs the pool */
    st_pool_destroy(hm->pool);
    if (hm->dmb.seq) st_cuda_free(cu, hm->dmb.seq);
    st_cuda_host_free(hm->mbox_host);
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

/* Bytes of one expert of layer hl (gate and up, or the stacked gate|up, and down). */
static double expert_bytes(const cpu_layer *hl) {
    const st_tensor *dn = &hl->down, *gt = hl->gate_up.data ? &hl->gate_up : &hl->gate;
    double b = (double)(gt->ne[1] * gt->row_bytes + dn->ne[1] * dn->row_bytes);
    if (!hl->gate_up.data) b += (double)(hl->up.ne[1] * hl->up.row_bytes);
    return b;
}

/* Whether two layers' experts have the same types and shapes (then the same rates). */
static int same_form(const cpu_layer *a, const cpu_layer *b) {
    const st_tensor *ta[4] = {&a->gate, &a->up, &a->gate_up, &a->down}, *tb[4] = {&b->gate, &b->up, &b->gate_up, &b->down};
    for (int i = 0; i < 4; i++)
        if (!ta[i]->data != !tb[i]->data || ta[i]->type != tb[i]->type || ta[i]->ne[0] != tb[i]->ne[0] ||
            ta[i]->ne[1] != tb[i]->ne[1])
            return 0;
    return 1;
}

/* The share that makes layer hl's time smallest: the GPU's k - kc experts at the bus rate against
 * the pool's kc plus the fixed cost of a branch. */
static int best_share(int64_t k, double t_gpu, double t_cpu, double over) {
    int best = 0;
    double best_t = (double)k * t_gpu;
    for (int kc = 1; kc < k; kc++) {
        double g = (double)(k - kc) * t_gpu, c = (double)kc * t_cpu + over, t = g > c ? g : c;
        if (t < best_t) {
            best_t = t;
            best = kc;
        }
    }
    return best;
}

static double env_num(const char *name, double dflt) {
    const char *e = getenv(name);
    return e && *e ? atof(e) : dflt;
}

/* v4: the mailbox block in mapped cached memory, the request numbers on the device, the server. */
static st_status mailbox_start(st_cuda *cu, st_host_moe *hm) {
    hm->ml = st_mbox_layout_of(hm->n_layer, hm->k, hm->d);
    void *dev = NULL;
    ST_TRY(st_cuda_host_alloc_mapped(hm->ml.bytes, 0, &hm->mbox_host, &dev));
    memset(hm->mbox_host, 0, hm->ml.bytes);
    uint64_t *seq = NULL;
    size_t seq_bytes = (size_t)(1 + hm->n_layer) * sizeof(uint64_t);
    ST_TRY(st_cuda_alloc(cu, seq_bytes, (void **)&seq));
    hm->dmb.seq = seq;
    ST_TRY(st_cuda_memset0(cu, seq, seq_bytes));
    ST_TRY(st_cuda_sync(cu));
    char *base = dev;
    double wait_ms = env_num("STRATA_CUDA_CPU_WAIT_MS", 1000.0), idle_ms = env_num("STRATA_CUDA_CPU_IDLE_MS", 50.0);
    hm->dmb = (st_cuda_mbox){
        .req = (uint64_t *)(base + offsetof(st_mbox_header, req)),
        .done = (uint64_t *)(base + offsetof(st_mbox_header, done)),
        .err = (uint64_t *)(base + offsetof(st_mbox_header, err)),
        .slot0 = st_mbox_slot(base, &hm->ml, 0),
        .slot_bytes = hm->ml.slot_bytes, .off_ids = hm->ml.off_ids, .off_w = hm->ml.off_w, .off_h = hm->ml.off_h,
        .off_y = hm->ml.off_y, .seq = seq, .k = hm->k, .d = hm->d,
        .timeout_ns = (uint64_t)((wait_ms > 0 ? wait_ms : 1000.0) * 1e6),
    };
    return st_mbox_create(hm->mbox_host, &hm->ml, serve_request, hm, idle_ms * 1e-3, hm->dmb.timeout_ns, &hm->mbox);
}

st_status st_host_moe_create(st_cuda *cu, const struct st_model *m, const st_layer *layers, const uint8_t *host_layer,
                             const char *dev_base, char *host_base, char *note, size_t note_len, st_host_moe **out) {
    *out = NULL;
    if (note_len) note[0] = 0;
    const st_hparams *hp = &m->hp;
    const char *env = getenv("STRATA_CUDA_CPU_EXPERTS");
    int forced = env && strcmp(env, "auto") ? atoi(env) : -1; /* -1: auto, the default */
    int cores = host_cores();
    if (forced == 0 || (forced < 0 && cores < 4)) return ST_OK;
    const char *menv = getenv("STRATA_CUDA_CPU_EXPERTS_MODE");
    int poll = !menv || !*menv || !strcmp(menv, "poll");
    if (!poll && strcmp(menv, "host-node"))
        return st_fail(ST_ERR_INVALID, "cuda: STRATA_CUDA_CPU_EXPERTS_MODE=%s (poll or host-node)", menv);

    st_host_moe *hm = calloc(1, sizeof *hm);
    if (!hm) return st_fail(ST_ERR_NOMEM, "cuda: out of memory");
    hm->poll = poll;
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
    /* the thread that runs a step's share (the host node's, or the mailbox's server) is the pool's
     * thread 0. Half the cores, at most 8: a few experts are read at the memory's rate by that many,
     * and a pool that fills every core stalls whenever one of its threads loses its core to the
     * thread waiting on the GPU or to the driver's (STRATA_CUDA_CPU_THREADS sets it) */
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
        n_on += hl->on;
    }
    if (!n_on) {
        st_host_moe_free(cu, hm);
        return ST_OK;
    }

    /* the split, per layer, from the rates measured here (a layer of a form already timed takes
     * its rates) */
    double bus = 0, copy = 0;
    if (st_cuda_host_bandwidth(cu, (size_t)256 << 20, &bus, &copy) != ST_OK) st_clear_error();
    double over = env_num("STRATA_CUDA_CPU_OVERHEAD_US", poll ? 10.0 : 200.0) * 1e-6;
    int n_share = 0, kc_min = (int)k, kc_max = 0;
    double cpu_gbs = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        cpu_layer *hl = &hm->layers[il];
        if (!hl->on) continue;
        const cpu_layer *twin = NULL;
        for (int64_t j = 0; j < il && !twin; j++)
            if (hm->layers[j].on && same_form(&hm->layers[j], hl)) twin = &hm->layers[j];
        double eb = expert_bytes(hl);
        if (twin) {
            hl->t_cpu = twin->t_cpu;
            hl->t_gpu = twin->t_gpu;
        } else {
            hl->t_cpu = time_cpu(hm, hl, (int)k) / (double)k;
            hl->t_gpu = bus > 0 ? eb / (bus * 1e9) : 1.0;
            if (cpu_gbs == 0) cpu_gbs = eb / hl->t_cpu / 1e9;
        }
        hl->k_cpu = forced > 0 ? (forced < k ? forced : (int)k - 1) : best_share(k, hl->t_gpu, hl->t_cpu, over);
        if (hl->k_cpu > 0) n_share++;
        if (hl->k_cpu < kc_min) kc_min = hl->k_cpu;
        if (hl->k_cpu > kc_max) kc_max = hl->k_cpu;
    }
    char shares[32];
    if (kc_min == kc_max) snprintf(shares, sizeof shares, "%d", kc_max);
    else snprintf(shares, sizeof shares, "%d-%d", kc_min, kc_max);
    snprintf(note, note_len,
             "; the CPU (%d threads, %s) computes %s of the %lld experts a token selects in %d of %d such layers "
             "(measured: %.1f GB/s over the bus, %.1f GB/s on the CPU)",
             st_pool_size(hm->pool), poll ? "polling mapped memory" : "host nodes", shares, (long long)k, n_share, n_on,
             bus, cpu_gbs);
    if (n_share == 0) {
        st_host_moe_free(cu, hm);
        return ST_OK;
    }
    if (poll && (s = mailbox_start(cu, hm)) != ST_OK) {
        st_host_moe_free(cu, hm);
        return s;
    }
    *out = hm;
    return ST_OK;
}

int st_host_moe_k_cpu(const st_host_moe *hm, int64_t il) {
    return hm && il >= 0 && il < hm->n_layer && hm->layers[il].on ? hm->layers[il].k_cpu : 0;
}

int st_host_moe_posts_first(const st_host_moe *hm) { return hm && hm->poll; }

st_status st_host_moe_enqueue(st_cuda *cu, st_host_moe *hm, int64_t il, const int32_t *ids, const float *w,
                              const float *h) {
    if (hm->poll) return st_cuda_mbox_publish(cu, &hm->dmb, il, ids, w, h);
    ST_TRY(st_cuda_download_async(cu, hm->ids, ids, (size_t)hm->k * sizeof(int32_t)));
    ST_TRY(st_cuda_download_async(cu, hm->w, w, (size_t)hm->k * sizeof(float)));
    ST_TRY(st_cuda_download_async(cu, hm->h, h, (size_t)hm->d * sizeof(float)));
    ST_TRY(st_cuda_host_fn(cu, run_layer, &hm->layers[il]));
    return st_cuda_upload_async(cu, hm->y_dev, hm->y, (size_t)hm->d * sizeof(float));
}

st_status st_host_moe_finish(st_cuda *cu, st_host_moe *hm, int64_t il, float *out) {
    if (hm->poll) return st_cuda_mbox_wait_add(cu, &hm->dmb, il, out);
    return st_cuda_axpy(cu, out, hm->d, hm->y_dev, 1.0f, 1);
}

void st_host_moe_step_begin(st_host_moe *hm) {
    if (hm) st_mbox_step_begin(hm->mbox);
}

st_status st_host_moe_step_end(st_host_moe *hm) { return hm ? st_mbox_step_end(hm->mbox) : ST_OK; }
