/* ops_norm.c: RMSNorm and the Gated DeltaNet L2 norm (MODELS.md §2.2, §2.3), threaded over rows.
 * The RMSNorm reference keeps ggml's numerics: squares of floats summed in double, mean and
 * 1/sqrtf in float, then scale and weight as two float products. The AVX-512 and AVX2 row
 * kernels sum in double too, in a different order, so they agree within rounding. */
#include <math.h>
#include "backend/cpu/ops_cpu.h"
#include "base/cpu.h"

void ops_rms_row_ref(const float *x, const float *w, float *y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)sum / (float)n;
    const float s = 1.0f / sqrtf(mean + eps);
    if (w) for (int64_t i = 0; i < n; i++) y[i] = (x[i] * s) * w[i];
    else   for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}

typedef struct norm_job {
    const float *x, *w;
    float *y;
    int64_t ld_x, ld_y, rows, dim;
    float eps;
    ops_rms_row_fn row;
    int l2;
} norm_job;

/* llama.cpp's build_gdn_l2_norm: rms_norm(x, eps/n) then a scale by 1/sqrt(n), so the rounding
 * follows that two-step form rather than x / sqrtf(sum + eps) directly. */
static void l2_row(const float *x, float *y, int64_t n, float eps, ops_rms_row_fn row) {
    row(x, NULL, y, n, eps / (float)n);
    const float s = 1.0f / sqrtf((float)n);
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}

static void norm_worker(void *ctx, int ith, int nth) {
    const norm_job *j = ctx;
    long r0, r1;
    st_split(j->rows, ith, nth, &r0, &r1);
    for (long r = r0; r < r1; r++) {
        if (j->l2) l2_row(j->x + r * j->ld_x, j->y + r * j->ld_y, j->dim, j->eps, j->row);
        else j->row(j->x + r * j->ld_x, j->w, j->y + r * j->ld_y, j->dim, j->eps);
    }
}

static ops_rms_row_fn rms_row_pick(void) {
    const st_cpu_features *f = st_cpu();
    if (f->avx512f && f->avx512dq) return ops_rms_row_avx512;
    if (f->avx2) return ops_rms_row_avx2;
    return ops_rms_row_ref;
}

void st_op_rms_norm(st_pool *pool, const float *x, int64_t ld_x, const float *w, float *y,
                    int64_t ld_y, int64_t rows, int64_t dim, float eps) {
    norm_job j = { x, w, y, ld_x, ld_y, rows, dim, eps, rms_row_pick(), 0 };
    ops_run(pool, rows * dim >= 16384, norm_worker, &j);
}

void st_op_l2_norm(st_pool *pool, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                   int64_t rows, int64_t dim, float eps) {
    norm_job j = { x, NULL, y, ld_x, ld_y, rows, dim, eps, rms_row_pick(), 1 };
    ops_run(pool, rows * dim >= 16384, norm_worker, &j);
}
