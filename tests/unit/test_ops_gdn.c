/* test_ops_gdn.c: the Gated DeltaNet recurrence.
 *  - st_op_gdn_step (reference, then each SIMD level) against a direct float64 evaluation of
 *    MODELS.md §2.10 step 6, for both head mappings, with a non-zero state carried in;
 *  - st_op_gdn_chunked against st_op_gdn_step for lengths 1, 63, 64, 65, 200 (around the chunk
 *    size), with a state carried in, outputs and final state;
 *  - splitting a sequence into calls gives the same result as one call;
 *  - with state_steps, at every SIMD level: the plane of token t holds bit for bit the state one
 *    call over tokens 0..t leaves, the outputs are the in-place ones, the entering state is left
 *    as it was (a speculative verify's rollback, engine/spec.c);
 *  - the gates: beta = sigmoid(b), g = softplus(a + dt_bias) * ssm_a. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "base/cpu.h"
#include "test.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

typedef struct problem {
    int64_t T, n_k, n_v, d;
    int map;
    float *qkv;     /* [T][2*n_k*d + n_v*d] like the conv output: q | k | v */
    float *g, *beta, *state0;
} problem;

static void l2n(float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    for (int64_t i = 0; i < n; i++) x[i] = (float)(x[i] / sqrt(s + 1e-6));
}

static problem make(int64_t T, int64_t n_k, int64_t n_v, int64_t d, int map) {
    problem p = { T, n_k, n_v, d, map, NULL, NULL, NULL, NULL };
    const int64_t C = 2 * n_k * d + n_v * d;
    p.qkv = malloc(sizeof(float) * (size_t)(T * C));
    p.g = malloc(sizeof(float) * (size_t)(T * n_v));
    p.beta = malloc(sizeof(float) * (size_t)(T * n_v));
    p.state0 = malloc(sizeof(float) * (size_t)(n_v * d * d));
    for (int64_t i = 0; i < T * C; i++) p.qkv[i] = frand();
    for (int64_t t = 0; t < T; t++)
        for (int64_t g = 0; g < 2 * n_k; g++) l2n(p.qkv + t * C + g * d, d);
    for (int64_t i = 0; i < T * n_v; i++) {
        p.g[i] = -0.6f * (frand() + 1.0f);       /* log decay in (-1.2, 0] */
        p.beta[i] = 0.5f * (frand() + 1.0f);     /* beta in [0, 1) */
    }
    for (int64_t i = 0; i < n_v * d * d; i++) p.state0[i] = 0.3f * frand();
    return p;
}

static void drop(problem *p) { free(p->qkv); free(p->g); free(p->beta); free(p->state0); }

static st_gdn_args args(const problem *p, float *state, float *out, int64_t t0, int64_t n) {
    const int64_t C = 2 * p->n_k * p->d + p->n_v * p->d;
    st_gdn_args a = {
        .n_tok = n, .n_k = p->n_k, .n_v = p->n_v, .d = p->d, .head_map = p->map,
        .q = p->qkv + t0 * C, .k = p->qkv + t0 * C + p->n_k * p->d, .ld_q = C, .ld_k = C,
        .v = p->qkv + t0 * C + 2 * p->n_k * p->d, .ld_v = C,
        .g = p->g + t0 * p->n_v, .beta = p->beta + t0 * p->n_v,
        .state = state, .out = out + t0 * p->n_v * p->d, .ld_out = p->n_v * p->d,
        .scale = 1.0f / sqrtf((float)p->d),
    };
    return a;
}

/* MODELS.md §2.10 step 6 in double, S[i][j] stored as S[h][i][j] (a layout of its own). */
static void direct(const problem *p, double *out, double *S) {
    const int64_t d = p->d, C = 2 * p->n_k * d + p->n_v * d, r = p->n_v / p->n_k;
    for (int64_t h = 0; h < p->n_v; h++)
        for (int64_t i = 0; i < d; i++)
            for (int64_t j = 0; j < d; j++) S[(h * d + i) * d + j] = p->state0[h * d * d + j * d + i];
    double *delta = malloc(sizeof(double) * (size_t)d);
    for (int64_t t = 0; t < p->T; t++)
        for (int64_t h = 0; h < p->n_v; h++) {
            const int64_t kh = p->map == ST_GDN_GROUPED ? h / r : h % p->n_k;
            const float *q = p->qkv + t * C + kh * d, *k = p->qkv + t * C + p->n_k * d + kh * d;
            const float *v = p->qkv + t * C + 2 * p->n_k * d + h * d;
            double *Sh = S + h * d * d;
            const double eg = exp((double)p->g[t * p->n_v + h]), b = p->beta[t * p->n_v + h];
            for (int64_t i = 0; i < d * d; i++) Sh[i] *= eg;
            for (int64_t j = 0; j < d; j++) {
                double kv = 0;
                for (int64_t i = 0; i < d; i++) kv += Sh[i * d + j] * k[i];
                delta[j] = b * (v[j] - kv);
            }
            for (int64_t i = 0; i < d; i++)
                for (int64_t j = 0; j < d; j++) Sh[i * d + j] += k[i] * delta[j];
            for (int64_t j = 0; j < d; j++) {
                double o = 0;
                for (int64_t i = 0; i < d; i++) o += Sh[i * d + j] * q[i];
                out[(t * p->n_v + h) * d + j] = o / sqrt((double)d);
            }
        }
    free(delta);
}

static double max_abs(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void test_step_vs_direct(st_pool *pool, int64_t T, int64_t n_k, int64_t n_v, int64_t d, int map) {
    problem p = make(T, n_k, n_v, d, map);
    const int64_t no = T * n_v * d, ns = n_v * d * d;
    double *ro = malloc(sizeof(double) * (size_t)no), *rs = malloc(sizeof(double) * (size_t)ns);
    direct(&p, ro, rs);
    float *out = malloc(sizeof(float) * (size_t)no), *st = malloc(sizeof(float) * (size_t)ns);
    for (int lvl = 0; lvl < 3; lvl++) {
        st_cpu_limit(lvl == 0 ? 0 : lvl == 1 ? 1 : 3);
        memcpy(st, p.state0, sizeof(float) * (size_t)ns);
        st_gdn_args a = args(&p, st, out, 0, T);
        st_op_gdn_step(pool, &a);
        double eo = 0, es = 0;
        for (int64_t i = 0; i < no; i++) eo = fmax(eo, fabs(out[i] - ro[i]));
        for (int64_t h = 0; h < n_v; h++)
            for (int64_t i = 0; i < d; i++)
                for (int64_t j = 0; j < d; j++)
                    es = fmax(es, fabs(st[h * d * d + j * d + i] - rs[(h * d + i) * d + j]));
        CHECKF(eo < 2e-5 && es < 2e-5, "step lvl %d T=%ld map=%d d=%ld: out err %g, state err %g",
               lvl, (long)T, map, (long)d, eo, es);
    }
    st_cpu_limit(3);
    free(ro); free(rs); free(out); free(st);
    drop(&p);
}

static void test_chunked_vs_step(st_pool *pool, int64_t T, int64_t n_k, int64_t n_v, int64_t d, int map) {
    problem p = make(T, n_k, n_v, d, map);
    const int64_t no = T * n_v * d, ns = n_v * d * d;
    float *o0 = malloc(sizeof(float) * (size_t)no), *s0 = malloc(sizeof(float) * (size_t)ns);
    float *o1 = malloc(sizeof(float) * (size_t)no), *s1 = malloc(sizeof(float) * (size_t)ns);
    memcpy(s0, p.state0, sizeof(float) * (size_t)ns);
    memcpy(s1, p.state0, sizeof(float) * (size_t)ns);
    st_gdn_args a0 = args(&p, s0, o0, 0, T), a1 = args(&p, s1, o1, 0, T);
    st_op_gdn_step(pool, &a0);
    for (int lvl = 0; lvl < 2; lvl++) {
        st_cpu_limit(lvl ? 3 : 0);
        memcpy(s1, p.state0, sizeof(float) * (size_t)ns);
        st_op_gdn_chunked(pool, &a1, NULL);
        const double eo = max_abs(o1, o0, no), es = max_abs(s1, s0, ns);
        CHECKF(eo < 2e-5 && es < 2e-5, "chunked lvl %d T=%ld map=%d d=%ld: out err %g, state err %g",
               lvl, (long)T, map, (long)d, eo, es);
    }
    st_cpu_limit(3);
    /* the chosen form, with caller scratch, split at an odd point: same as one call */
    void *scratch = malloc(st_gdn_chunked_scratch_size(2, d));
    memcpy(s1, p.state0, sizeof(float) * (size_t)ns);
    const int64_t cut = T / 3;
    st_gdn_args b0 = args(&p, s1, o1, 0, cut), b1 = args(&p, s1, o1, cut, T - cut);
    st_op_gdn(pool, &b0, scratch);
    st_op_gdn(pool, &b1, scratch);
    CHECKF(max_abs(o1, o0, no) < 2e-5 && max_abs(s1, s0, ns) < 2e-5, "split T=%ld", (long)T);
    free(scratch);
    free(o0); free(s0); free(o1); free(s1);
    drop(&p);
}

static void test_gates(void) {
    const float a[2][3] = { { 0.0f, 25.0f, -1.0f }, { 1.0f, 2.0f, 3.0f } };
    const float b[2][4] = { { 0.0f, 1.0f, -2.0f, 9.0f }, { 3.0f, 0.0f, 0.0f, 9.0f } };
    const float dt[3] = { 0.0f, 0.0f, 0.5f }, ssm_a[3] = { -1.0f, -2.0f, -0.5f };
    float g[2][3], beta[2][3];
    st_op_gdn_gates(&a[0][0], 3, &b[0][0], 4, dt, ssm_a, 2, 3, &g[0][0], &beta[0][0]);
    CHECK(beta[0][0] == 0.5f && fabsf(beta[0][1] - 1.0f / (1.0f + expf(-1.0f))) < 1e-7f);
    CHECK(fabsf(g[0][0] + logf(2.0f)) < 1e-7f);          /* softplus(0) * -1 */
    CHECK(g[0][1] == -50.0f);                            /* softplus(25) = 25 (threshold) */
    CHECK(fabsf(g[1][2] + 0.5f * logf(1.0f + expf(3.5f))) < 1e-6f);
    CHECK(fabsf(beta[1][0] - 1.0f / (1.0f + expf(-3.0f))) < 1e-7f);
}

static void test_steps(st_pool *pool, int64_t T, int64_t n_k, int64_t n_v, int64_t d, int map) {
    problem p = make(T, n_k, n_v, d, map);
    const int64_t no = T * n_v * d, ns = n_v * d * d;
    float *out = malloc(sizeof(float) * (size_t)no), *out1 = malloc(sizeof(float) * (size_t)no);
    float *st = malloc(sizeof(float) * (size_t)ns), *st1 = malloc(sizeof(float) * (size_t)ns);
    float *planes[16];
    for (int64_t t = 0; t < T; t++) planes[t] = malloc(sizeof(float) * (size_t)ns);
    for (int lvl = 0; lvl < 3; lvl++) {
        st_cpu_limit(lvl == 0 ? 0 : lvl == 1 ? 1 : 3);
        memcpy(st, p.state0, sizeof(float) * (size_t)ns);
        st_gdn_args a = args(&p, st, out, 0, T);
        a.state_steps = planes;
        st_op_gdn_step(pool, &a);
        CHECKF(!memcmp(st, p.state0, sizeof(float) * (size_t)ns), "steps lvl %d: the entering state changed", lvl);
        for (int64_t t = 0; t < T; t++) {
            memcpy(st1, p.state0, sizeof(float) * (size_t)ns);
            st_gdn_args b = args(&p, st1, out1, 0, t + 1);
            st_op_gdn_step(pool, &b);
            CHECKF(!memcmp(st1, planes[t], sizeof(float) * (size_t)ns), "steps lvl %d d=%ld: plane %ld differs", lvl, (long)d, (long)t);
        }
        CHECKF(!memcmp(out, out1, sizeof(float) * (size_t)no), "steps lvl %d d=%ld: outputs differ", lvl, (long)d);
    }
    st_cpu_limit(3);
    for (int64_t t = 0; t < T; t++) free(planes[t]);
    free(out); free(out1); free(st); free(st1);
    drop(&p);
}

int main(void) {
    st_pool *pool = NULL;
    if (st_pool_create(2, &pool) != ST_OK) return 1;
    test_gates();
    test_step_vs_direct(pool, 7, 2, 4, 16, ST_GDN_TILED);
    test_step_vs_direct(pool, 5, 2, 6, 24, ST_GDN_GROUPED);
    test_step_vs_direct(pool, 9, 2, 4, 64, ST_GDN_TILED);
    test_step_vs_direct(pool, 3, 1, 2, 128, ST_GDN_GROUPED);
    const int64_t lens[] = { 1, 63, 64, 65, 200 };
    for (int i = 0; i < 5; i++) test_chunked_vs_step(pool, lens[i], 2, 4, 64, i % 2 ? ST_GDN_GROUPED : ST_GDN_TILED);
    test_chunked_vs_step(pool, 130, 1, 3, 40, ST_GDN_TILED);
    test_chunked_vs_step(pool, 70, 1, 2, 128, ST_GDN_GROUPED);
    test_steps(pool, 4, 2, 4, 64, ST_GDN_TILED);
    test_steps(pool, 5, 1, 2, 128, ST_GDN_GROUPED);
    test_steps(pool, 3, 2, 6, 24, ST_GDN_GROUPED);
    st_pool_destroy(pool);
    return test_report("test_ops_gdn");
}
