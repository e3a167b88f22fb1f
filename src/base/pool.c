/* pool.c: the thread pool. A job is published by bumping `generation`; workers that are spinning
 * see it at once, sleeping ones are woken through the condition variable (only when some sleep).
 * Completion is a countdown the caller spins on. */
#include "base/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <immintrin.h>

#define SPIN_BEFORE_YIELD 2000
#define SPIN_BEFORE_SLEEP 200000

typedef struct worker_arg { st_pool *pool; int ith; } worker_arg;

struct st_pool {
    int nth;
    pthread_t *threads;
    worker_arg *args;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    _Atomic unsigned generation;
    _Atomic int sleepers;
    _Atomic int pending;
    _Atomic int stop;
    st_pool_fn fn;
    void *ctx;
    _Alignas(64) _Atomic int barrier_count;
    _Alignas(64) _Atomic unsigned barrier_phase;
};

static void spin_pause(long *spins) {
    if (++*spins < SPIN_BEFORE_YIELD) _mm_pause();
    else sched_yield();
}

static void *worker_main(void *p) {
    worker_arg *arg = p;
    st_pool *pool = arg->pool;
    unsigned seen = 0;
    for (;;) {
        long spins = 0;
        unsigned g;
        while ((g = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen) {
            if (atomic_load(&pool->stop)) return NULL;
            if (spins < SPIN_BEFORE_SLEEP) { spin_pause(&spins); continue; }
            pthread_mutex_lock(&pool->mutex);
            atomic_fetch_add(&pool->sleepers, 1);
            while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop))
                pthread_cond_wait(&pool->wake, &pool->mutex);
            atomic_fetch_sub(&pool->sleepers, 1);
            pthread_mutex_unlock(&pool->mutex);
        }
        seen = g;
        if (atomic_load(&pool->stop)) return NULL;
        pool->fn(pool->ctx, arg->ith, pool->nth);
        atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_release);
    }
}

st_status st_pool_create(int n_threads, st_pool **out) {
    *out = NULL;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    if (n_threads > 512) return st_fail(ST_ERR_INVALID, "thread count %d is more than 512", n_threads);
    st_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return st_fail(ST_ERR_NOMEM, "thread pool: out of memory");
    pool->nth = n_threads;
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pool->threads = calloc((size_t)n_threads, sizeof *pool->threads);
    pool->args = calloc((size_t)n_threads, sizeof *pool->args);
    if (!pool->threads || !pool->args) {
        st_pool_destroy(pool);
        return st_fail(ST_ERR_NOMEM, "thread pool: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        pool->args[i].pool = pool;
        pool->args[i].ith = i;
        if (pthread_create(&pool->threads[i], NULL, worker_main, &pool->args[i]) != 0) {
            pool->nth = i;
            st_pool_destroy(pool);
            return st_fail(ST_ERR_NOMEM, "thread pool: cannot start thread %d", i);
        }
    }
    *out = pool;
    return ST_OK;
}

void st_pool_destroy(st_pool *pool) {
    if (!pool) return;
    atomic_store(&pool->stop, 1);
    pthread_mutex_lock(&pool->mutex);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
    for (int i = 1; i < pool->nth; i++)
        if (pool->threads && pool->threads[i]) pthread_join(pool->threads[i], NULL);
    pthread_mutex_destroy(&pool->mutex);
    pthread_cond_destroy(&pool->wake);
    free(pool->threads);
    free(pool->args);
    free(pool);
}

int st_pool_size(const st_pool *pool) { return pool ? pool->nth : 1; }

void st_pool_run(st_pool *pool, st_pool_fn fn, void *ctx) {
    if (!pool || pool->nth == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store(&pool->pending, pool->nth - 1);
    atomic_fetch_add(&pool->generation, 1);
    if (atomic_load(&pool->sleepers) > 0) {
        pthread_mutex_lock(&pool->mutex);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->mutex);
    }
    fn(ctx, 0, pool->nth);
    long spins = 0;
    while (atomic_load_explicit(&pool->pending, memory_order_acquire) > 0) spin_pause(&spins);
}

void st_pool_barrier(st_pool *pool) {
    if (!pool || pool->nth == 1) return;
    unsigned phase = atomic_load(&pool->barrier_phase);
    if (atomic_fetch_add(&pool->barrier_count, 1) == pool->nth - 1) {
        atomic_store(&pool->barrier_count, 0);
        atomic_fetch_add(&pool->barrier_phase, 1);
    } else {
        long spins = 0;
        while (atomic_load(&pool->barrier_phase) == phase) spin_pause(&spins);
    }
}
