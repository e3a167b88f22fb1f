/* ops_pointwise.c: elementwise activations and gates (MODELS.md §2.4), row softmax, MoE routing
 * (§2.8) and argmax.
 *
 * The references are ggml's scalar formulas (ops_pointwise_ref.c). The exp-heavy ones (silu,
 * sigmoid, swiglu and the gates) have AVX-512 and AVX2 row kernels with a vector exp
 * (ops_pointwise_avx512.c, ops_pointwise_avx2.c) that agree within a few ulp; ggml's own vector
 * path is an approximation too. softplus runs only where GDN gates are formed (n_v values per token) and stays scalar. */
#include <math.h>
#include <string.h>
#include "backend/cpu/ops_cpu.h"
#include "base/cpu.h"

typedef struct pw_job {
    int op;
    const float *a, *b;
    float *y;
    int64_t ld_a, ld_b, ld_y, rows, n;
    ops_pw_fn fn;
} pw_job;

static void pw_worker(void *ctx, int ith, int nth) {
    const pw_job *j = ctx;
    if (j->rows == 1) {         /* one long row: split the elements */
        long e0, e1;
        st_split(j->n, ith, nth, &e0, &e1);
        j->fn(j->op, j->a + e0, j->b ? j->b + e0 : NULL, j->y + e0, e1 - e0);
        return;
    }
    long r0, r1;
    st_split(j->rows, ith, nth, &r0, &r1);
    for (long r = r0; r < r1; r++)
        j->fn(j->op, j->a + r * j->ld_a, j->b ? j->b + r * j->ld_b : NULL, j->y + r * j->ld_y, j->n);
}

static ops_pw_fn pw_pick(int op) {
    const st_cpu_features *f = st_cpu();
    if (op == OPS_PW_SOFTPLUS) return ops_pw_ref;
    if (f->avx512f && f->avx512dq) return ops_pw_avx512;
    if (f->avx2 && f->fma) return ops_pw_avx2;
    return ops_pw_ref;
}

static void pw_run(st_pool *pool, int op, const float *a, int64_t ld_a, const float *b,
                   int64_t ld_b, float *y, int64_t ld_y, int64_t rows, int64_t n) {
    pw_job j = { op, a, b, y, ld_a, ld_b, ld_y, rows, n, pw_pick(op) };
    ops_run(pool, rows * n >= 16384, pw_worker, &j);
}

void st_op_silu(st_pool *pool, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                int64_t rows, int64_t n) {
    pw_run(pool, OPS_PW_SILU, x, ld_x, NULL, 0, y, ld_y, rows, n);
}
void st_op_sigmoid(st_pool *pool, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                   int64_t rows, int64_t n) {
    pw_run(pool, OPS_PW_SIGMOID, x, ld_x, NULL, 0, y, ld_y, rows, n);
}
void st_op_softplus(st_pool *pool, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                    int64_t rows, int64_t n) {
    pw_run(pool, OPS_PW_SOFTPLUS, x, ld_x, NULL, 0, y, ld_y, rows, n);
}
void st_op_swiglu(st_pool *pool, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                  float *y, int64_t ld_y, int64_t rows, int64_t n) {
    pw_run(pool, OPS_PW_SWIGLU, a, ld_a, b, ld_b, y, ld_y, rows, n);
}
void st_op_mul_sigmoid(st_pool *pool, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                       float *y, int64_t ld_y, int64_t rows, int64_t n) {
    pw_run(pool, OPS_PW_MUL_SIGMOID, a, ld_a, b, ld_b, y, ld_y, rows, n);
}
void st_op_mul_silu(st_pool *pool, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                    float *y, int64_t ld_y, int64_t rows, int64_t n) {
    pw_run(pool, OPS_PW_MUL_SILU, a, ld_a, b, ld_b, y, ld_y, rows, n);
}
void st_op_mul(st_pool *pool, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
               float *y, int64_t ld_y, int64_t rows, int64_t n) {
    pw_run(pool, OPS_PW_MUL, a, ld_a, b, ld_b, y, ld_y, rows, n);
}
void st_op_add(st_pool *pool, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
               float *y, int64_t ld_y, int64_t rows, int64_t n) {
    pw_run(pool, OPS_PW_ADD, a, ld_a, b, ld_b, y, ld_y, rows, n);
}

/* scale and axpy run per token in the MoE combine, so they take the AVX-512 loop when present
 * (the plain loops would stay scalar: the compiler cannot rule out overlap). Same results. */
void st_op_scale(float *y, int64_t n, const float *x, float s) {
    const st_cpu_features *f = st_cpu();
    if (f->avx512f) { ops_scale_avx512(y, n, x, s); return; }
    if (f->avx2) { ops_scale_avx2(y, n, x, s); return; }
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}

void st_op_axpy(float *y, int64_t n, const float *x, float s) {
    const st_cpu_features *f = st_cpu();
    if (f->avx512f) { ops_axpy_avx512(y, n, x, s); return; }
    if (f->avx2) { ops_axpy_avx2(y, n, x, s); return; }
    for (int64_t i = 0; i < n; i++) y[i] += x[i] * s;
}

/* ---- Softmax, routing, argmax ---- */

static void softmax_row(const float *x, float *y, int64_t n) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) { y[i] = expf(x[i] - max); sum += (double)y[i]; }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) y[i] *= inv;
}

void st_op_softmax(const float *x, int64_t ld_x, float *y, int64_t ld_y, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++) softmax_row(x + r * ld_x, y + r * ld_y, n);
}

#define MOE_MAX_EXPERTS 1024
#define MOE_WEIGHT_FLOOR 6.103515625e-5f

void st_op_moe_route(const float *logits, int64_t ld_logits, int64_t n_tok, int64_t E, int64_t k,
                     int32_t *ids, float *weights) {
    float p[MOE_MAX_EXPERTS];
    if (E > MOE_MAX_EXPERTS || k > E || k <= 0) return;
    for (int64_t t = 0; t < n_tok; t++) {
        softmax_row(logits + t * ld_logits, p, E);
        int32_t *id = ids + t * k;
        float *w = weights + t * k;
        /* insertion into a descending list of k; a later expert displaces an earlier one only if
         * strictly larger, so ties keep the lower index first */
        int64_t have = 0;
        for (int64_t e = 0; e < E; e++) {
            if (have == k && !(p[e] > w[k - 1])) continue;
            int64_t pos = have < k ? have++ : k - 1;
            while (pos > 0 && p[e] > w[pos - 1]) { w[pos] = w[pos - 1]; id[pos] = id[pos - 1]; pos--; }
            w[pos] = p[e];
            id[pos] = (int32_t)e;
        }
        double dsum = 0.0;     /* ggml_sum_rows: double accumulation, rounded to float */
        for (int64_t i = 0; i < k; i++) dsum += (double)w[i];
        float sum = (float)dsum;
        if (sum < MOE_WEIGHT_FLOOR) sum = MOE_WEIGHT_FLOOR;
        for (int64_t i = 0; i < k; i++) w[i] /= sum;
    }
}

int64_t st_op_argmax(const float *x, int64_t n) {
    int64_t best = 0;
    float bv = -INFINITY;
    int found = 0;
    for (int64_t i = 0; i < n; i++)
        if (!found ? !isnan(x[i]) : x[i] > bv) { best = i; bv = x[i]; found = 1; }
    return best;
}
