/* test_matmul.c: st_matmul and st_matmul_batch against a plain loop over the scalar reference kernel, for every type,
 * odd shapes (M and n in 1, 3, 7, 33; n past the kernel's group of rows), strided X and Y, every
 * CPU level and 1 to 3 threads. The loop applies the reference activation quantizer to each row
 * and the reference dot to each (row, weight row) pair, so it checks the conversion into scratch,
 * the split of rows across threads, the tiling and the grouping of activation rows. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/matmul.h"
#include "base/cpu.h"
#include "quant/dot.h"
#include "quant/quant.h"
#include "quant/random_iq.h"
#include "test.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)(rng_state >> 40) / 16777216.0f * 2 - 1;
}

static const uint32_t types[] = {ST_TYPE_F32,  ST_TYPE_F16,  ST_TYPE_BF16, ST_TYPE_Q8_0,   ST_TYPE_Q4_0,
                                 ST_TYPE_Q4_1, ST_TYPE_Q5_0, ST_TYPE_Q5_1, ST_TYPE_Q2_K,   ST_TYPE_Q3_K,
                                 ST_TYPE_Q4_K, ST_TYPE_Q5_K, ST_TYPE_Q6_K, ST_TYPE_IQ4_NL, ST_TYPE_IQ4_XS,
                                 ST_TYPE_IQ2_XXS, ST_TYPE_IQ2_XS, ST_TYPE_IQ2_S, ST_TYPE_IQ3_XXS, ST_TYPE_IQ3_S,
                                 ST_TYPE_IQ1_S, ST_TYPE_IQ1_M};

/* A weight row from floats in [-1, 1): the reference quantizer, or random blocks of about that
 * spread for the types without one (the grid i-quants). */
static void make_row(uint32_t type, const float *f, void *w, int64_t K) {
    if (!st_quantize_row(type, f, w, K)) CHECK(st_random_iq_blocks(type, 0.577f, &rng_state, w, K));
}

static void act_ref(uint32_t act, const float *x, void *y, int64_t k) {
    switch (act) {
    case ST_TYPE_F32: st_act_f32_ref(x, y, k); break;
    case ST_TYPE_F16: st_act_f16_ref(x, y, k); break;
    case ST_ACT_F16X: st_act_f16x_ref(x, y, k); break;
    case ST_TYPE_BF16: st_act_bf16_ref(x, y, k); break;
    case ST_TYPE_Q8_0: st_quantize_row_q8_0_ref(x, y, k); break;
    case ST_TYPE_Q8_1: st_quantize_row_q8_1_ref(x, y, k); break;
    case ST_TYPE_Q8_K: st_quantize_row_q8_K_ref(x, y, k); break;
    }
}

static void test_shape(st_pool *pool, uint32_t type, int64_t M, int64_t K, int64_t n) {
    const st_type_info *t = st_type_get(type);
    uint32_t act = st_dot_act_type(type);
    const int64_t ldx = K + 3, ldy = M + 2;
    size_t wrow = st_row_size(t, K), xrow = st_dot_act_row_size(act, K);
    char *W = malloc(wrow * (size_t)M);
    float *wf = malloc(sizeof(float) * (size_t)(M * K));
    float *X = malloc(sizeof(float) * (size_t)(n * ldx));
    float *Y = malloc(sizeof(float) * (size_t)(n * ldy));
    float *Yref = malloc(sizeof(float) * (size_t)(n * M));
    double *mag = calloc((size_t)(n * M), sizeof(double));
    char *xq = malloc(xrow);
    float *xf = malloc(sizeof(float) * (size_t)K);
    void *scratch = malloc(st_matmul_scratch_size(type, K, n) + 1);
    for (int64_t m = 0; m < M; m++) {
        for (int64_t i = 0; i < K; i++) wf[m * K + i] = frand();
        make_row(type, wf + m * K, W + (size_t)m * wrow, K);
        st_dequantize_row(type, W + (size_t)m * wrow, wf + m * K, K);
    }
    for (int64_t r = 0; r < n * ldx; r++) X[r] = frand() * 2;
    for (int64_t r = 0; r < n; r++) {
        act_ref(act, X + r * ldx, xq, K);
        for (int64_t m = 0; m < M; m++) {
            st_dot_ref[type](K, W + (size_t)m * wrow, xq, xrow, 1, &Yref[r * M + m]);
            for (int64_t i = 0; i < K; i++) mag[r * M + m] += fabs((double)wf[m * K + i] * X[r * ldx + i]);
        }
    }
    for (int level = 0; level <= 3; level += 1) {
        st_cpu_limit(level);
        for (int64_t r = 0; r < n * ldy; r++) Y[r] = NAN;
        st_matmul(pool, type, K, &(st_matmul_part){W, M, X, ldx, n, Y, ldy}, scratch);
        int bad = 0;
        for (int64_t r = 0; r < n && !bad; r++)
            for (int64_t m = 0; m < M && !bad; m++) {
                float got = Y[r * ldy + m], want = Yref[r * M + m];
                /* activation rounding differs from X by < 1% of sum|w x|; kernels add f32 order */
                if (!(fabs(got - want) <= 1e-5 * mag[r * M + m] + 1e-30)) {
                    bad = 1;
                    CHECKF(0, "%s M=%lld K=%lld n=%lld threads=%d level %d: Y[%lld][%lld] = %g, reference %g",
                           t->name, (long long)M, (long long)K, (long long)n, st_pool_size(pool), level,
                           (long long)r, (long long)m, got, want);
                }
            }
        if (!bad) CHECK(1);
        /* the padding between Y rows is never written */
        for (int64_t r = 0; r < n; r++) CHECK(isnan(Y[r * ldy + M]) && isnan(Y[r * ldy + M + 1]));
    }
    st_cpu_limit(3);
    free(W); free(wf); free(X); free(Y); free(Yref); free(mag); free(xq); free(xf); free(scratch);
}

/* Y[r][m] of the reference loop and sum |w x| for the tolerance. */
static void reference(uint32_t type, const char *W, int64_t M, int64_t K, const float *X, int64_t ldx, int64_t n,
                      float *Yref, double *mag) {
    const st_type_info *t = st_type_get(type);
    uint32_t act = st_dot_act_type(type);
    size_t wrow = st_row_size(t, K), xrow = st_dot_act_row_size(act, K);
    char *xq = malloc(xrow);
    float *wf = malloc(sizeof(float) * (size_t)K);
    for (int64_t r = 0; r < n; r++) {
        act_ref(act, X + r * ldx, xq, K);
        for (int64_t m = 0; m < M; m++) {
            st_dot_ref[type](K, W + (size_t)m * wrow, xq, xrow, 1, &Yref[r * M + m]);
            st_dequantize_row(type, W + (size_t)m * wrow, wf, K);
            mag[r * M + m] = 0;
            for (int64_t i = 0; i < K; i++) mag[r * M + m] += fabs((double)wf[i] * X[r * ldx + i]);
        }
    }
    free(xq);
    free(wf);
}

/* st_matmul_batch: parts sharing X (converted once), a part with the same X pointer but fewer
 * rows (its own conversion), a part with no rows (writes nothing), different M per part. */
static void test_batch(st_pool *pool, uint32_t type) {
    const st_type_info *t = st_type_get(type);
    const int64_t K = t->block_size == 1 ? 40 : t->block_size == 32 ? 64 : 256, ldx = K + 1;
    const int64_t Ms[5] = {7, 33, 1, 12, 9}, ns[5] = {3, 3, 5, 2, 0};
    float *Xa = malloc(sizeof(float) * (size_t)(3 * ldx)), *Xb = malloc(sizeof(float) * (size_t)(5 * ldx));
    for (int64_t i = 0; i < 3 * ldx; i++) Xa[i] = frand();
    for (int64_t i = 0; i < 5 * ldx; i++) Xb[i] = frand() * 3;
    const float *Xs[5] = {Xa, Xa, Xb, Xa, Xb};
    st_matmul_part parts[5];
    char *W[5];
    float *Y[5], *Yref[5];
    double *mag[5];
    size_t wrow = st_row_size(t, K);
    float *f = malloc(sizeof(float) * (size_t)K);
    for (int p = 0; p < 5; p++) {
        W[p] = malloc(wrow * (size_t)Ms[p]);
        for (int64_t m = 0; m < Ms[p]; m++) {
            for (int64_t i = 0; i < K; i++) f[i] = frand();
            make_row(type, f, W[p] + (size_t)m * wrow, K);
        }
        Y[p] = malloc(sizeof(float) * (size_t)((ns[p] + 1) * Ms[p]));
        for (int64_t i = 0; i < (ns[p] + 1) * Ms[p]; i++) Y[p][i] = NAN;
        Yref[p] = malloc(sizeof(float) * (size_t)((ns[p] + 1) * Ms[p]));
        mag[p] = malloc(sizeof(double) * (size_t)((ns[p] + 1) * Ms[p]));
        reference(type, W[p], Ms[p], K, Xs[p], ldx, ns[p], Yref[p], mag[p]);
        parts[p] = (st_matmul_part){W[p], Ms[p], Xs[p], ldx, ns[p], Y[p], Ms[p]};
    }
    void *scratch = malloc(st_matmul_batch_scratch_size(type, K, 3 + 5 + 2) + 1);
    st_matmul_batch(pool, type, K, parts, 5, scratch);
    for (int p = 0; p < 5; p++) {
        int bad = 0;
        for (int64_t i = 0; i < ns[p] * Ms[p] && !bad; i++)
            if (!(fabs(Y[p][i] - Yref[p][i]) <= 1e-5 * mag[p][i] + 1e-30)) {
                bad = 1;
                CHECKF(0, "%s batch part %d: Y[%lld] = %g, reference %g", t->name, p, (long long)i, Y[p][i], Yref[p][i]);
            }
        if (!bad) CHECK(1);
        for (int64_t i = ns[p] * Ms[p]; i < (ns[p] + 1) * Ms[p]; i++) bad |= !isnan(Y[p][i]);
        CHECKF(!bad, "%s batch part %d wrote past its %lld rows", t->name, p, (long long)ns[p]);
        free(W[p]); free(Y[p]); free(Yref[p]); free(mag[p]);
    }
    free(Xa); free(Xb); free(f); free(scratch);
}

int main(void) {
    st_pool *pools[3];
    for (int p = 0; p < 3; p++)
        if (st_pool_create(p + 1, &pools[p]) != ST_OK) SKIP("cannot create a pool of %d threads", p + 1);
    const int64_t sizes[] = {1, 3, 7, 33};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        int64_t bs = st_type_get(types[ti])->block_size;
        int64_t K = bs == 1 ? 45 : bs == 32 ? 96 : 512;
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) test_shape(pools[(a + b) % 3], types[ti], sizes[a], K, sizes[b]);
        /* a row count that leaves each thread several tiles of weight rows, and a wide K */
        test_shape(pools[1], types[ti], 150, 4096, 5);
        for (int p = 0; p < 3; p++) test_batch(pools[p], types[ti]);
    }
    for (int p = 0; p < 3; p++) st_pool_destroy(pools[p]);
    return test_report("test_matmul");
}
