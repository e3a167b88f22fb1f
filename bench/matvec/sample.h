/* sample.h: what the matvec benches (bench_matvec.c, repack_ab.c) share: the same pseudo-random
 * inputs in [-1, 1) on every run (xorshift), and the median of the repeats. */
#ifndef ST_BENCH_SAMPLE_H
#define ST_BENCH_SAMPLE_H

#include <stdint.h>
#include <stdlib.h>

static uint64_t bench_rng = 88172645463325252ull;

static inline float frand(void) {
    bench_rng ^= bench_rng << 13;
    bench_rng ^= bench_rng >> 7;
    bench_rng ^= bench_rng << 17;
    return (float)(bench_rng >> 40) / 16777216.0f * 2 - 1;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v; the median, or the largest value with best (the fastest repeat, for kernel tuning). */
static inline double bench_median(double *v, int n, int best) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    if (best) return v[n - 1];
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
