/* expert_mailbox.c: the host side of the decode step's CPU share protocol (expert_mailbox.h): the
 * layout, the server thread that polls for requests, the check after a step, and the device's two
 * steps as plain C. The shared words are plain uint64_t (the device writes them too) accessed
 * through the compiler's atomic builtins. */
#include "model/expert_mailbox.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

/* How many spins between looks at the clock while idle. */
#define IDLE_CLOCK_EVERY 64

struct st_mbox {
    st_mbox_header *hdr;
    char *base;
    st_mbox_layout l;
    st_mbox_serve_fn fn;
    void *ctx;
    uint64_t idle_ns, timeout_ns;
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    _Atomic unsigned wake_gen;
    _Atomic int stop;
    _Atomic int sleeping;
    _Atomic int busy;            /* a step is under way: no sleeping, however long it takes */
    _Atomic uint64_t served;
    uint64_t last0;              /* req when the server was made: not a request for it */
};

static size_t up64(size_t n) { return (n + 63) & ~(size_t)63; }

st_mbox_layout st_mbox_layout_of(int64_t n_layer, int64_t k, int64_t d) {
    st_mbox_layout l = {.n_layer = n_layer, .k = k, .d = d};
    l.off_ids = 0;
    l.off_w = up64((size_t)k * sizeof(int32_t));
    l.off_h = l.off_w + up64((size_t)k * sizeof(float));
    l.off_y = l.off_h + up64((size_t)d * sizeof(float));
    l.slot_bytes = l.off_y + up64((size_t)d * sizeof(float));
    l.bytes = sizeof(st_mbox_header) + (size_t)n_layer * l.slot_bytes;
    return l;
}

static uint64_t load_acquire(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

static void store_release(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

/* One request: the payload was written before req (the acquire that read req orders it). */
static void serve(st_mbox *mb, uint64_t req) {
    int64_t layer = (int64_t)(req & (ST_MBOX_MAX_LAYERS - 1));
    uint64_t seq = req >> ST_MBOX_LAYER_BITS;
    if (layer >= mb->l.n_layer) return; /* not a request the device sends: no answer, its wait gives up */
    char *slot = st_mbox_slot(mb->base, &mb->l, layer);
    mb->fn(mb->ctx, layer, (const int32_t *)(slot + mb->l.off_ids), (const float *)(slot + mb->l.off_w),
           (const float *)(slot + mb->l.off_h), (float *)(slot + mb->l.off_y));
    store_release(&mb->hdr->done, seq);
    atomic_fetch_add(&mb->served, 1);
}

static void *server_main(void *arg) {
    st_mbox *mb = arg;
    uint64_t last = mb->last0;
    unsigned gen = atomic_load(&mb->wake_gen);
    uint64_t idle_since = st_now_ns();
    for (unsigned spins = 0;; spins++) {
        if (atomic_load_explicit(&mb->stop, memory_order_relaxed)) break;
        uint64_t r = load_acquire(&mb->hdr->req);
        if (r != last) {
            last = r;
            serve(mb, r);
            idle_since = st_now_ns();
            continue;
        }
        unsigned g = atomic_load_explicit(&mb->wake_gen, memory_order_relaxed);
        if (g != gen) {
            gen = g;
            idle_since = st_now_ns();
        }
        if (atomic_load_explicit(&mb->busy, memory_order_relaxed) || spins % IDLE_CLOCK_EVERY ||
            st_now_ns() - idle_since < mb->idle_ns) {
            _mm_pause();
            continue;
        }
        /* idle: sleep until a wake (st_mbox_wake bumps wake_gen under the mutex) or the stop */
        pthread_mutex_lock(&mb->mutex);
        atomic_store(&mb->sleeping, 1);
        while (atomic_load(&mb->wake_gen) == gen && !atomic_load(&mb->stop)) pthread_cond_wait(&mb->wake, &mb->mutex);
        atomic_store(&mb->sleeping, 0);
        pthread_mutex_unlock(&mb->mutex);
        gen = atomic_load(&mb->wake_gen);
        idle_since = st_now_ns();
    }
    return NULL;
}

st_status st_mbox_create(void *shared, const st_mbox_layout *l, st_mbox_serve_fn fn, void *ctx, double idle_s,
                         uint64_t timeout_ns, st_mbox **out) {
    *out = NULL;
    if (l->n_layer <= 0 || l->n_layer > ST_MBOX_MAX_LAYERS)
        return st_fail(ST_ERR_INVALID, "expert mailbox: %lld layers (1 to %d)", (long long)l->n_layer, ST_MBOX_MAX_LAYERS);
    st_mbox *mb = calloc(1, sizeof *mb);
    if (!mb) return st_fail(ST_ERR_NOMEM, "expert mailbox: out of memory");
    mb->hdr = shared;
    mb->base = shared;
    mb->l = *l;
    mb->fn = fn;
    mb->ctx = ctx;
    mb->idle_ns = idle_s > 0 ? (uint64_t)(idle_s * 1e9) : 0;
    mb->timeout_ns = timeout_ns;
    mb->last0 = load_acquire(&mb->hdr->req); /* here, not in the thread: a request sent while it starts is served */
    pthread_mutex_init(&mb->mutex, NULL);
    pthread_cond_init(&mb->wake, NULL);
    if (pthread_create(&mb->thread, NULL, server_main, mb) != 0) {
        pthread_mutex_destroy(&mb->mutex);
        pthread_cond_destroy(&mb->wake);
        free(mb);
        return st_fail(ST_ERR_NOMEM, "expert mailbox: cannot start the server thread");
    }
    *out = mb;
    return ST_OK;
}

void st_mbox_destroy(st_mbox *mb) {
    if (!mb) return;
    pthread_mutex_lock(&mb->mutex);
    atomic_store(&mb->stop, 1);
    pthread_cond_broadcast(&mb->wake);
    pthread_mutex_unlock(&mb->mutex);
    pthread_join(mb->thread, NULL);
    pthread_mutex_destroy(&mb->mutex);
    pthread_cond_destroy(&mb->wake);
    free(mb);
}

/* A new wake generation: a sleeping server wakes, a spinning one counts its idle time from now. */
static void bump(st_mbox *mb) {
    pthread_mutex_lock(&mb->mutex);
    atomic_fetch_add(&mb->wake_gen, 1);
    if (atomic_load(&mb->sleeping)) pthread_cond_broadcast(&mb->wake);
    pthread_mutex_unlock(&mb->mutex);
}

void st_mbox_step_begin(st_mbox *mb) {
    if (!mb) return;
    atomic_store(&mb->busy, 1);
    bump(mb);
}

st_status st_mbox_step_end(st_mbox *mb) {
    if (!mb) return ST_OK;
    atomic_store(&mb->busy, 0);
    bump(mb);
    return st_mbox_check(mb);
}

st_status st_mbox_check(st_mbox *mb) {
    if (!mb) return ST_OK;
    uint64_t e = load_acquire(&mb->hdr->err);
    if (!e) return ST_OK;
    uint64_t done = load_acquire(&mb->hdr->done);
    store_release(&mb->hdr->err, 0);
    return st_fail(ST_ERR_IO,
                   "cuda tiers: layer %lld: the CPU's share of its experts did not come back within %.1f ms "
                   "(request %llu; the CPU had answered up to %llu)",
                   (long long)(e & (ST_MBOX_MAX_LAYERS - 1)), (double)mb->timeout_ns * 1e-6,
                   (unsigned long long)(e >> ST_MBOX_LAYER_BITS), (unsigned long long)done);
}

int st_mbox_sleeping(const st_mbox *mb) { return atomic_load(&((st_mbox *)mb)->sleeping); }

uint64_t st_mbox_served(const st_mbox *mb) { return atomic_load(&((st_mbox *)mb)->served); }

uint64_t st_mbox_ref_publish(void *shared, const st_mbox_layout *l, uint64_t *counter, int64_t layer,
                             const int32_t *ids, const float *w, const float *h) {
    char *slot = st_mbox_slot(shared, l, layer);
    memcpy(slot + l->off_ids, ids, (size_t)l->k * sizeof(int32_t));
    memcpy(slot + l->off_w, w, (size_t)l->k * sizeof(float));
    memcpy(slot + l->off_h, h, (size_t)l->d * sizeof(float));
    uint64_t seq = ++*counter;
    store_release(&((st_mbox_header *)shared)->req, seq << ST_MBOX_LAYER_BITS | (uint64_t)layer);
    return seq;
}

int st_mbox_ref_wait(void *shared, const st_mbox_layout *l, int64_t layer, uint64_t seq, uint64_t timeout_ns,
                     float *out) {
    st_mbox_header *hdr = shared;
    if (load_acquire(&hdr->err)) return 0;
    uint64_t t0 = st_now_ns();
    while (load_acquire(&hdr->done) != seq) {
        if (st_now_ns() - t0 > timeout_ns) {
            uint64_t none = 0;
            __atomic_compare_exchange_n(&hdr->err, &none, seq << ST_MBOX_LAYER_BITS | (uint64_t)layer, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
            return 0;
        }
        _mm_pause();
    }
    const float *y = (const float *)(st_mbox_slot(shared, l, layer) + l->off_y);
    for (int64_t i = 0; i < l->d; i++) out[i] += y[i];
    return 1;
}
