/* test_repack.c: the repacked Q4_K layout (quant/repack.h). Repacking and converting back gives
 * the file's bytes for any block (every 6-bit scale and minimum, every nibble); the AVX-512 kernel
 * on repacked rows equals the plain AVX-512 Q4_K kernel bit for bit for 1..8 activation rows, on
 * quantized rows and on rows whose scales and minimums take every 6-bit value; st_matmul and
 * st_matmul_batch on ST_TYPE_Q4_K_R equal the Q4_K ones bit for bit at the AVX-512 level and agree
 * within rounding at forced lower levels (the kernel then converts back), for odd row counts and
 * 1 to 3 threads; st_repack_target picks the repacked form only where its kernel runs. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/matmul.h"
#include "base/cpu.h"
#include "base/pool.h"
#include "quant/dot.h"
#include "quant/quant.h"
#include "quant/repack.h"
#include "test.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
static float frand(void) { return (float)(rnd() >> 8) / 16777216.0f * 2 - 1; }

/* M rows of K: quantized from random floats; with `wild`, scale/min bytes then replaced by random
 * ones (all 96 bits random: every 6-bit scale and minimum value occurs), d and dmin kept. */
static char *make_rows(int64_t M, int64_t K, int wild) {
    size_t row = (size_t)(K / QK_K) * sizeof(block_q4_K);
    char *W = malloc(row * (size_t)M);
    float *f = malloc(sizeof(float) * (size_t)K);
    for (int64_t m = 0; m < M; m++) {
        for (int64_t i = 0; i < K; i++) f[i] = frand() * (1 + (float)(m % 3));
        st_quantize_row(ST_TYPE_Q4_K, f, W + (size_t)m * row, K);
        if (wild) {
            block_q4_K *b = (block_q4_K *)(W + (size_t)m * row);
            for (int64_t i = 0; i < K / QK_K; i++)
                for (int s = 0; s < K_SCALE_SIZE; s++) b[i].scales[s] = (uint8_t)rnd();
        }
    }
    free(f);
    return W;
}

static void test_round_trip(void) {
    enum { N = 64 };
    static block_q4_K a[N], b[N];
    static uint8_t r[N * sizeof(block_q4_K)];
    uint8_t *p = (uint8_t *)a;
    for (size_t i = 0; i < sizeof a; i++) p[i] = (uint8_t)rnd();
    CHECK(st_repack_blocks(ST_TYPE_Q4_K_R, r, a, N));
    CHECK(memcmp(r, a, sizeof a) != 0);
    CHECK(st_unrepack_blocks(ST_TYPE_Q4_K_R, b, r, N));
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* in place */
    memcpy(b, a, sizeof a);
    CHECK(st_repack_blocks(ST_TYPE_Q4_K_R, b, b, N));
    CHECK(memcmp(b, r, sizeof r) == 0);
    CHECK(st_unrepack_blocks(ST_TYPE_Q4_K_R, b, b, N));
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(!st_repack_blocks(ST_TYPE_Q6_K, r, a, 1));
    const st_type_info *t = st_layout_get(ST_TYPE_Q4_K_R), *f = st_type_get(ST_TYPE_Q4_K);
    CHECK(t && t->block_size == f->block_size && t->type_size == f->type_size);
    CHECK(st_type_get(ST_TYPE_Q4_K_R) == NULL);
    CHECK(st_repack_file_type(ST_TYPE_Q4_K_R) == ST_TYPE_Q4_K);
    CHECK(st_dot_act_type(ST_TYPE_Q4_K_R) == ST_TYPE_Q8_K);
}

/* The AVX-512 kernels, repacked against plain, every nx, bit for bit. */
static void test_kernel(int64_t K, int wild) {
    const int64_t M = 5;
    size_t row = (size_t)(K / QK_K) * sizeof(block_q4_K), xrow = st_dot_act_row_size(ST_TYPE_Q8_K, K);
    char *W = make_rows(M, K, wild), *R = malloc(row * (size_t)M), *xq = malloc(xrow * ST_DOT_MAX_NX);
    st_repack_blocks(ST_TYPE_Q4_K_R, R, W, M * (K / QK_K));
    float *x = malloc(sizeof(float) * (size_t)K);
    for (int j = 0; j < ST_DOT_MAX_NX; j++) {
        for (int64_t i = 0; i < K; i++) x[i] = frand() * 3;
        st_quantize_row_q8_K_ref(x, (block_q8_K *)(xq + (size_t)j * xrow), K);
    }
    st_dot_fn plain = st_dot_avx512[ST_TYPE_Q4_K];
    int bad = 0;
    for (int64_t m = 0; m < M; m++)
        for (int nx = 1; nx <= ST_DOT_MAX_NX; nx++) {
            float a[ST_DOT_MAX_NX], b[ST_DOT_MAX_NX];
            plain(K, W + (size_t)m * row, xq, xrow, nx, a);
            st_dot_q4_K_r_avx512(K, R + (size_t)m * row, xq, xrow, nx, b);
            if (!bad && memcmp(a, b, sizeof(float) * (size_t)nx)) {
                bad = 1;
                CHECKF(0, "K=%lld wild=%d row %lld nx=%d: plain %.9g, repacked %.9g", (long long)K, wild, (long long)m, nx,
                       a[0], b[0]);
            }
        }
    if (!bad) CHECK(1);
    free(W); free(R); free(xq); free(x);
}

/* st_matmul / st_matmul_batch on the repacked rows against the plain ones. */
static void test_matmul(st_pool *pool, int64_t M, int64_t K, int64_t n) {
    size_t row = (size_t)(K / QK_K) * sizeof(block_q4_K);
    const int64_t ldx = K + 5, ldy = M + 3;
    char *W = make_rows(M, K, 0), *R = malloc(row * (size_t)M);
    st_repack_blocks(ST_TYPE_Q4_K_R, R, W, M * (K / QK_K));
    float *X = malloc(sizeof(float) * (size_t)(n * ldx));
    float *Y = malloc(sizeof(float) * (size_t)(n * ldy)), *Yr = malloc(sizeof(float) * (size_t)(n * ldy));
    for (int64_t i = 0; i < n * ldx; i++) X[i] = frand() * 2;
    void *scratch = malloc(st_matmul_scratch_size(ST_TYPE_Q4_K_R, K, n) + 1);
    CHECK(st_matmul_scratch_size(ST_TYPE_Q4_K_R, K, n) == st_matmul_scratch_size(ST_TYPE_Q4_K, K, n));
    for (int level = 2; level >= 0; level--) {
        st_cpu_limit(level);
        int exact = level == 2 && st_dot_level(ST_TYPE_Q4_K_R) == 2;
        for (int64_t i = 0; i < n * ldy; i++) Y[i] = Yr[i] = NAN;
        st_matmul(pool, ST_TYPE_Q4_K, K, &(st_matmul_part){W, M, X, ldx, n, Y, ldy}, scratch);
        if (n > 1) {
            /* two parts over the same X: rows [0, h) and [h, M) */
            int64_t h = M / 2;
            st_matmul_part parts[2] = {{R, h, X, ldx, n, Yr, ldy}, {R + (size_t)h * row, M - h, X, ldx, n, Yr + h, ldy}};
            st_matmul_batch(pool, ST_TYPE_Q4_K_R, K, parts, 2, scratch);
        } else {
            st_matmul(pool, ST_TYPE_Q4_K_R, K, &(st_matmul_part){R, M, X, ldx, n, Yr, ldy}, scratch);
        }
        int bad = 0;
        for (int64_t r = 0; r < n && !bad; r++)
            for (int64_t m = 0; m < M && !bad; m++) {
                float a = Y[r * ldy + m], b = Yr[r * ldy + m];
                int ok = exact ? memcmp(&a, &b, sizeof a) == 0 : fabsf(a - b) <= 1e-5f * (fabsf(a) + 1e-3f);
                if (!ok) {
                    bad = 1;
                    CHECKF(0, "M=%lld K=%lld n=%lld threads=%d level %d: Y[%lld][%lld] plain %.9g, repacked %.9g",
                           (long long)M, (long long)K, (long long)n, st_pool_size(pool), level, (long long)r,
                           (long long)m, a, b);
                }
            }
        if (!bad) CHECK(1);
        for (int64_t r = 0; r < n; r++) CHECK(isnan(Yr[r * ldy + M]));
    }
    st_cpu_limit(3);
    free(W); free(R); free(X); free(Y); free(Yr); free(scratch);
}

int main(void) {
    test_round_trip();
    st_cpu_limit(1);
    CHECK(st_repack_target(ST_TYPE_Q4_K) == ST_TYPE_Q4_K);
    st_cpu_limit(3);
    CHECK(st_repack_target(ST_TYPE_Q6_K) == ST_TYPE_Q6_K);
    if (st_dot_level(ST_TYPE_Q4_K_R) == 2) {
        const char *e = getenv("STRATA_REPACK");
        if (!(e && e[0] == '0')) CHECK(st_repack_target(ST_TYPE_Q4_K) == ST_TYPE_Q4_K_R);
        const int64_t Ks[] = {256, 768, 2048 + 256};
        for (int i = 0; i < 3; i++) {
            test_kernel(Ks[i], 0);
            test_kernel(Ks[i], 1);
        }
    } else {
        fprintf(stderr, "no AVX-512 here: the repacked kernel is checked only through the conversion\n");
    }
    const int64_t Ms[] = {1, 3, 7, 33}, ns[] = {1, 3, 9};
    for (int threads = 1; threads <= 3; threads++) {
        st_pool *pool = NULL;
        if (st_pool_create(threads, &pool) != ST_OK) {
            CHECK(0);
            continue;
        }
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 3; b++) test_matmul(pool, Ms[a], threads == 2 ? 768 : 512, ns[b]);
        st_pool_destroy(pool);
    }
    return test_report("test_repack");
}
