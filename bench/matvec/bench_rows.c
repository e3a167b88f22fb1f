/* bench_rows.c: one weight type's products at 1..8 activation rows (a verify chunk, a batch of
 * slots) from cache, on one thread: the one-row kernel (one weight row, all activation rows per
 * call) against the tile kernel (quant/dot_tile.h: 4 weight rows per call), in GMAC/s. Both give
 * the same bits; this is what each costs once the weights need not come from memory.
 *
 *   bench_rows [TYPE] [K] [M] [REPEATS]        (default q8_0 512 1024 31)
 *
 * The matrix (M x K, here 0.5 MiB in Q8_0) stays in L2. Each repeat times both forms in turn,
 * 20 passes over the matrix each; the medians are printed, and STRATA_CPU_LEVEL picks the level. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "quant/dot.h"
#include "quant/dot_tile.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "sample.h"

enum { MAX_REPEATS = 101, PASSES = 20 };

static double run(int tiled, uint32_t type, int64_t K, int64_t M, const char *w, size_t wr, const char *x,
                  size_t xr, int nx) {
    st_dot_fn one = st_dot_kernel(type);
    st_dot_tile_fn tile = st_dot_tile_kernel(type);
    float out[ST_DOT_TILE_MR * ST_DOT_MAX_NX];
    volatile float sink = 0;
    double t0 = st_now();
    for (int p = 0; p < PASSES; p++)
        for (int64_t m = 0; m < M; m += tiled ? ST_DOT_TILE_MR : 1) {
            if (tiled) tile(K, w + (size_t)m * wr, wr, ST_DOT_TILE_MR, x, xr, nx, out, nx);
            else one(K, w + (size_t)m * wr, x, xr, nx, out);
            sink += out[0];
        }
    (void)sink;
    return (double)PASSES * (double)M * (double)K * nx / (st_now() - t0) * 1e-9;
}

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "q8_0";
    int64_t K = argc > 2 ? atoll(argv[2]) : 512, M = argc > 3 ? atoll(argv[3]) : 1024;
    int reps = argc > 4 ? atoi(argv[4]) : 31;
    if (reps > MAX_REPEATS) reps = MAX_REPEATS;
    uint32_t type = ST_TYPE_COUNT;
    for (uint32_t t = 0; t < ST_TYPE_COUNT; t++)
        if (st_type_get(t) && strcmp(st_type_get(t)->name, name) == 0) type = t;
    if (type == ST_TYPE_COUNT || !st_dot_kernel(type) || !st_dot_tile_kernel(type) || M % ST_DOT_TILE_MR) {
        fprintf(stderr, "bench_rows: %s has no tile kernel at this level (or M is not a multiple of %d)\n", name,
                ST_DOT_TILE_MR);
        return 2;
    }
    const st_type_info *info = st_type_get(type);
    const uint32_t act = st_dot_act_type(type);
    const size_t wr = st_row_size(info, K), xr = st_dot_act_row_size(act, K);
    char *w = malloc(wr * (size_t)M), *x = malloc(xr * ST_DOT_MAX_NX);
    float *f = malloc(sizeof(float) * (size_t)K);
    for (int64_t m = 0; m < M; m++) {
        for (int64_t i = 0; i < K; i++) f[i] = frand();
        st_quantize_row(type, f, w + (size_t)m * wr, K);
    }
    st_act_fn convert = st_act_converter(act);
    for (int j = 0; j < ST_DOT_MAX_NX; j++) {
        for (int64_t i = 0; i < K; i++) f[i] = frand();
        if (convert) convert(f, x + (size_t)j * xr, K);
        else memcpy(x + (size_t)j * xr, f, xr);
    }
    printf("bench_rows %s K=%lld M=%lld, level %d, 1 thread, median of %d (GMAC/s)\n\n", name, (long long)K,
           (long long)M, st_dot_level(type), reps);
    printf("| rows | one-row kernel | tile | tile / one-row |\n|---|---|---|---|\n");
    for (int nx = 1; nx <= ST_DOT_MAX_NX; nx++) {
        double a[MAX_REPEATS], b[MAX_REPEATS];
        for (int r = 0; r < reps; r++) {
            a[r] = run(0, type, K, M, w, wr, x, xr, nx);
            b[r] = run(1, type, K, M, w, wr, x, xr, nx);
        }
        double ma = bench_median(a, reps, 0), mb = bench_median(b, reps, 0);
        printf("| %d | %.1f | %.1f | %.2f |\n", nx, ma, mb, mb / ma);
    }
    free(w);
    free(x);
    free(f);
    return 0;
}
