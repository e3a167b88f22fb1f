/* test_pool.c: the thread pool runs every thread once per call, covers a split exactly, and its
 * barrier orders phases: after the barrier every thread sees every other thread's phase-1 write. */
#include <stdio.h>
#include <stdlib.h>
#include "base/pool.h"
#include "test.h"

typedef struct { st_pool *pool; int *marks; long n; int *phase1; int ok; } job;

static void fill(void *p, int ith, int nth) {
    job *j = p;
    long b, e;
    st_split(j->n, ith, nth, &b, &e);
    for (long i = b; i < e; i++) j->marks[i]++;
}

static void phased(void *p, int ith, int nth) {
    job *j = p;
    j->phase1[ith] = ith + 1;
    st_pool_barrier(j->pool);
    for (int t = 0; t < nth; t++)
        if (j->phase1[t] != t + 1) __atomic_store_n(&j->ok, 0, __ATOMIC_RELAXED);
    st_pool_barrier(j->pool);
    j->phase1[ith] = 0;
}

int main(void) {
    for (int nth = 1; nth <= 4; nth++) {
        st_pool *pool;
        CHECK(st_pool_create(nth, &pool) == ST_OK);
        CHECK(st_pool_size(pool) == nth);
        job j = {pool, calloc(1001, sizeof(int)), 1001, calloc(nth, sizeof(int)), 1};
        for (int rep = 0; rep < 200; rep++) st_pool_run(pool, fill, &j);
        for (long i = 0; i < j.n; i++) CHECK(j.marks[i] == 200);
        for (int rep = 0; rep < 200; rep++) st_pool_run(pool, phased, &j);
        CHECK(j.ok == 1);
        free(j.marks);
        free(j.phase1);
        st_pool_destroy(pool);
    }
    return test_report("pool");
}
