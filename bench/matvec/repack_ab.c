/* repack_ab.c: Q4_K decode products, the file's layout against the load-time repacked one
 * (quant/repack.h), interleaved repeat by repeat in one process, so both see the same machine
 * load (the shared machine's load moves more between runs than the effect being measured).
 *
 *   bench_repack_ab [--threads N] [--repeats R] [--mib WORKING_SET]
 *
 * Shapes as bench_matvec's (K x M: 2048x512 expert, the same 8 experts per st_matmul_batch call,
 * 2048x8192, 1024x151936 head); each layout gets its own copies of the matrix (the working set
 * each, default 256 MiB), so every pass streams from DRAM. Prints the median GB/s of weights read
 * for each layout and the median of the per-repeat ratios. --mib 0.3 --threads 1 measures the
 * kernels from cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/matmul.h"
#include "base/clock.h"
#include "base/pool.h"
#include "quant/quant.h"
#include "quant/repack.h"
#include "sample.h"

static double median(double *v, int n) { return bench_median(v, n, 0); }

typedef struct shape { const char *name; int64_t K, M; int batch; } shape;

/* One pass over all copies; returns GB/s. */
static double pass(st_pool *pool, uint32_t type, const char *W, size_t bytes, int copies, const shape *sh,
                   const float *x, float *y, void *scratch) {
    st_matmul_part parts[8];
    double t0 = st_now();
    for (int c = 0; c < copies; c += sh->batch) {
        if (sh->batch == 1) {
            st_matmul(pool, type, sh->K, &(st_matmul_part){W + (size_t)c * bytes, sh->M, x, sh->K, 1, y, sh->M}, scratch);
            continue;
        }
        for (int e = 0; e < sh->batch; e++)
            parts[e] = (st_matmul_part){W + (size_t)(c + e) * bytes, sh->M, x, sh->K, 1, y + e * sh->M, sh->M};
        st_matmul_batch(pool, type, sh->K, parts, sh->batch, scratch);
    }
    return (double)bytes * copies / (st_now() - t0) / 1e9;
}

int main(int argc, char **argv) {
    int threads = 2, repeats = 21;
    double mib = 256;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--repeats R] [--mib MIB]\n", argv[0]);
            return 2;
        }
    }
    if (repeats < 1) repeats = 1;
    uint32_t rtype = st_repack_target(ST_TYPE_Q4_K);
    if (rtype == ST_TYPE_Q4_K) {
        fprintf(stderr, "no repacked Q4_K kernel on this CPU (or STRATA_REPACK=0)\n");
        return 1;
    }
    st_pool *pool;
    if (st_pool_create(threads, &pool) != ST_OK) return 1;
    const shape shapes[] = {{"2048x512 expert", 2048, 512, 1}, {"2048x512 x8 experts per call", 2048, 512, 8},
                            {"2048x8192", 2048, 8192, 1}, {"1024x151936 head", 1024, 151936, 1}};
    printf("threads %d, repeats %d (interleaved), working set %.1f MiB per layout\n\n", threads, repeats, mib);
    printf("| shape (K x M) | copies | file layout GB/s | repacked GB/s | repacked / file (median of pairs) |\n");
    printf("|---|---|---|---|---|\n");
    const st_type_info *t = st_type_get(ST_TYPE_Q4_K);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        size_t w_row = st_row_size(t, sh->K), bytes = w_row * (size_t)sh->M;
        int copies = (int)((mib * 1048576.0 + (double)bytes - 1) / (double)bytes);
        if (copies < 1) copies = 1;
        if (copies > 256) copies = 256;
        copies = (copies + sh->batch - 1) / sh->batch * sh->batch;
        const int64_t uniq = 64;
        char *rows = malloc(w_row * uniq), *rows_r = malloc(w_row * uniq);
        float *f = malloc(sizeof(float) * (size_t)sh->K);
        for (int64_t r = 0; r < uniq; r++) {
            for (int64_t i = 0; i < sh->K; i++) f[i] = frand();
            st_quantize_row(ST_TYPE_Q4_K, f, rows + (size_t)r * w_row, sh->K);
        }
        st_repack_blocks(rtype, rows_r, rows, uniq * (sh->K / QK_K));
        size_t total = bytes * (size_t)copies;
        char *W = aligned_alloc(64, (total + 63) / 64 * 64), *R = aligned_alloc(64, (total + 63) / 64 * 64);
        for (size_t r = 0; r < (size_t)sh->M * (size_t)copies; r++) {
            memcpy(W + r * w_row, rows + (r % uniq) * w_row, w_row);
            memcpy(R + r * w_row, rows_r + (r % uniq) * w_row, w_row);
        }
        float *x = malloc(sizeof(float) * (size_t)sh->K), *y = malloc(sizeof(float) * (size_t)(sh->M * sh->batch));
        for (int64_t i = 0; i < sh->K; i++) x[i] = frand();
        void *scratch = malloc(st_matmul_scratch_size(ST_TYPE_Q4_K, sh->K, 1) + 64);
        double *a = malloc(sizeof(double) * (size_t)repeats), *b = malloc(sizeof(double) * (size_t)repeats),
               *q = malloc(sizeof(double) * (size_t)repeats);
        pass(pool, ST_TYPE_Q4_K, W, bytes, copies, sh, x, y, scratch); /* warm-up */
        pass(pool, rtype, R, bytes, copies, sh, x, y, scratch);
        for (int r = 0; r < repeats; r++) {
            /* alternate which goes first, so neither always follows the other */
            if (r & 1) {
                b[r] = pass(pool, rtype, R, bytes, copies, sh, x, y, scratch);
                a[r] = pass(pool, ST_TYPE_Q4_K, W, bytes, copies, sh, x, y, scratch);
            } else {
                a[r] = pass(pool, ST_TYPE_Q4_K, W, bytes, copies, sh, x, y, scratch);
                b[r] = pass(pool, rtype, R, bytes, copies, sh, x, y, scratch);
            }
            q[r] = b[r] / a[r];
        }
        printf("| %s | %d | %.1f | %.1f | %.3fx |\n", sh->name, copies, median(a, repeats), median(b, repeats),
               median(q, repeats));
        fflush(stdout);
        free(rows); free(rows_r); free(f); free(W); free(R); free(x); free(y); free(scratch); free(a); free(b); free(q);
    }
    st_pool_destroy(pool);
    return 0;
}
