/* matmul.c: Y = X . W^T on quantized weights, split across the thread pool.
 *
 * Phase 1 converts the n activation rows to the weight type's vec_dot form in `scratch` (each
 * thread a share of the rows; F32 weights read X in place). Phase 2 splits the M weight rows
 * into one contiguous range per thread. Within a range, weight rows are taken in tiles small
 * enough to stay in the core's L2 cache, and each tile is run against the activation rows in
 * groups of ST_DOT_MAX_NX: a kernel call unpacks one weight row once for the whole group, and the
 * tile is read from memory once for all n rows, not once per row. Decode (n = 1) is the plain
 * streaming case: every weight byte read exactly once. */
#include "backend/cpu/matmul.h"

#include "quant/dot.h"
#include "quant/types.h"

/* bytes of weight rows per tile: well inside a 512 KiB - 2 MiB L2, beside the activations */
#define TILE_BYTES (96 * 1024)

typedef struct matmul_job {
    st_pool *pool;
    const char *W;
    size_t w_row;
    int64_t M, K, n;
    const float *X;
    int64_t ldx;
    float *Y;
    int64_t ldy;
    const char *act;   /* the activation rows the kernel reads */
    char *scratch;     /* where they are converted to (NULL when X is read in place) */
    size_t act_row;    /* stride between activation rows, in bytes */
    st_dot_fn dot;
    st_act_fn convert;
} matmul_job;

size_t st_matmul_scratch_size(uint32_t type, int64_t K, int64_t n) {
    uint32_t act = st_dot_act_type(type);
    if (act == ST_TYPE_COUNT || act == ST_TYPE_F32) return 0;
    return st_dot_act_row_size(act, K) * (size_t)n;
}

static void matmul_rows(const matmul_job *job, int64_t m0, int64_t m1) {
    int64_t tile = (int64_t)(TILE_BYTES / job->w_row);
    if (tile < 1) tile = 1;
    float out[ST_DOT_MAX_NX];
    for (int64_t t0 = m0; t0 < m1; t0 += tile) {
        int64_t t1 = t0 + tile < m1 ? t0 + tile : m1;
        for (int64_t i = 0; i < job->n; i += ST_DOT_MAX_NX) {
            int nx = job->n - i < ST_DOT_MAX_NX ? (int)(job->n - i) : ST_DOT_MAX_NX;
            const char *x = job->act + (size_t)i * job->act_row;
            for (int64_t m = t0; m < t1; m++) {
                job->dot(job->K, job->W + (size_t)m * job->w_row, x, job->act_row, nx, out);
                for (int j = 0; j < nx; j++) job->Y[(i + j) * job->ldy + m] = out[j];
            }
        }
    }
}

static void matmul_worker(void *ctx, int ith, int nth) {
    const matmul_job *job = ctx;
    if (job->scratch) {
        for (int64_t i = ith; i < job->n; i += nth)
            job->convert(job->X + i * job->ldx, job->scratch + (size_t)i * job->act_row, job->K);
        st_pool_barrier(job->pool);
    }
    long m0, m1;
    st_split((long)job->M, ith, nth, &m0, &m1);
    matmul_rows(job, m0, m1);
}

void st_matmul(st_pool *pool, uint32_t type, const void *W, int64_t M, int64_t K,
               const float *X, int64_t ldx, int64_t n, float *Y, int64_t ldy, void *scratch) {
    const st_type_info *info = st_type_get(type);
    uint32_t act = st_dot_act_type(type);
    if (!info || act == ST_TYPE_COUNT || M <= 0 || n <= 0) return;
    matmul_job job = {
        .pool = pool, .W = W, .w_row = st_row_size(info, K), .M = M, .K = K, .n = n,
        .X = X, .ldx = ldx, .Y = Y, .ldy = ldy, .dot = st_dot_kernel(type),
    };
    if (act == ST_TYPE_F32) {
        job.act = (const char *)X;
        job.act_row = (size_t)ldx * sizeof(float);
    } else {
        job.scratch = scratch;
        job.act = scratch;
        job.act_row = st_dot_act_row_size(act, K);
        job.convert = st_act_converter(act);
    }
    st_pool_run(pool, matmul_worker, &job);
}
