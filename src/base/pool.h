/* pool.h: a persistent thread pool with a barrier. One call runs a function on every thread
 * (the caller is thread 0) and returns when all have finished; inside it, st_pool_barrier()
 * separates phases of a multi-step op. Workers spin briefly between jobs, then sleep, so the
 * per-op cost in decode is a few hundred nanoseconds and an idle pool costs nothing. */
#ifndef ST_BASE_POOL_H
#define ST_BASE_POOL_H

#include "base/status.h"

typedef struct st_pool st_pool;
typedef void (*st_pool_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0 means one per online core. */
st_status st_pool_create(int n_threads, st_pool **out);
void st_pool_destroy(st_pool *pool);
int st_pool_size(const st_pool *pool);
/* Runs fn(ctx, ith, nth) on all nth threads. Not reentrant: fn must not call st_pool_run. */
void st_pool_run(st_pool *pool, st_pool_fn fn, void *ctx);
/* Inside fn only: waits until every thread of the pool has reached it. */
void st_pool_barrier(st_pool *pool);

/* The share [*begin, *end) of n items that thread ith of nth takes. */
static inline void st_split(long n, int ith, int nth, long *begin, long *end) {
    long per = n / nth, extra = n % nth;
    *begin = ith * per + (ith < extra ? ith : extra);
    *end = *begin + per + (ith < extra ? 1 : 0);
}

#endif
