/* matmul.c: Y = X . W^T on quantized weights, split across the thread pool.
 *
 * Phase 1 converts the activation rows to the weight type's vec_dot form in `scratch` (each
 * thread a share of the rows; F32 weights read X in place). Phase 2 splits the weight rows into
 * one contiguous range per thread. Within a range, weight rows are taken in tiles small enough to
 * stay in the core's L2 cache, and each tile is run against the activation rows in groups of
 * ST_DOT_MAX_NX: a kernel call unpacks one weight row once for the whole group, and the tile is
 * read from memory once for all n rows, not once per row. Decode (n = 1) is the plain streaming
 * case: every weight byte read exactly once.
 *
 * st_matmul_batch runs several such products (same type and K) in one pass: the threads split
 * the concatenated rows of all the weight matrices, and activations shared between parts are
 * converted once. st_matmul is a batch of one. */
#include "backend/cpu/matmul.h"

#include "quant/dot.h"
#include "quant/dot_tile.h"
#include "quant/repack.h"
#include "quant/types.h"

/* bytes of weight rows per tile: well inside a 512 KiB - 2 MiB L2, beside the activations */
#define TILE_BYTES (96 * 1024)
/* parts whose conversion slots are planned on the stack; larger batches are cut into calls */
#define MAX_PARTS 64

typedef struct batch_job {
    st_pool *pool;
    const st_matmul_part *parts;
    int n_parts;
    int64_t K;
    size_t w_row, act_row;
    int in_place;                 /* F32: the kernels read X itself */
    char *scratch;
    int64_t slot[MAX_PARTS];      /* first scratch row of each part's converted activations */
    int owner[MAX_PARTS];         /* the part that converts them (itself, or an earlier twin) */
    int64_t total_rows;           /* weight rows of all parts */
    st_dot_fn dot;
    st_dot_tile_fn tile;          /* NULL where the type has none */
    st_act_fn convert;
} batch_job;

size_t st_matmul_batch_scratch_size(uint32_t type, int64_t K, int64_t rows) {
    uint32_t act = st_dot_act_type(type);
    if (act == ST_TYPE_COUNT || act == ST_TYPE_F32) return 0;
    return st_dot_act_row_size(act, K) * (size_t)rows;
}

size_t st_matmul_scratch_size(uint32_t type, int64_t K, int64_t n) {
    return st_matmul_batch_scratch_size(type, K, n);
}

/* Weight rows [m0, m1) of one part against all of its activation rows. */
static void part_rows(const batch_job *job, int p, int64_t m0, int64_t m1) {
    const st_matmul_part *pt = &job->parts[p];
    const char *W = pt->W;
    const char *act = job->in_place ? (const char *)pt->X : job->scratch + (size_t)job->slot[p] * job->act_row;
    size_t stride = job->in_place ? (size_t)pt->ldx * sizeof(float) : job->act_row;
    int64_t tile = (int64_t)(TILE_BYTES / job->w_row);
    if (tile < 1) tile = 1;
    float out[ST_DOT_TILE_MR * ST_DOT_MAX_NX];
    for (int64_t t0 = m0; t0 < m1; t0 += tile) {
        int64_t t1 = t0 + tile < m1 ? t0 + tile : m1;
        for (int64_t i = 0; i < pt->n; i += ST_DOT_MAX_NX) {
            int nx = pt->n - i < ST_DOT_MAX_NX ? (int)(pt->n - i) : ST_DOT_MAX_NX;
            const char *x = act + (size_t)i * stride;
            for (int64_t m = t0, mr = 1; m < t1; m += mr) {
                /* a tile kernel (quant/dot_tile.h) takes several weight rows at once, same bits */
                mr = job->tile ? (t1 - m < ST_DOT_TILE_MR ? t1 - m : ST_DOT_TILE_MR) : 1;
                if (job->tile) job->tile(job->K, W + (size_t)m * job->w_row, job->w_row, (int)mr, x, stride, nx, out, nx);
                else job->dot(job->K, W + (size_t)m * job->w_row, x, stride, nx, out);
                for (int64_t q = 0; q < mr; q++)
                    for (int j = 0; j < nx; j++) pt->Y[(i + j) * pt->ldy + m + q] = out[q * nx + j];
            }
        }
    }
}

static void batch_worker(void *ctx, int ith, int nth) {
    const batch_job *job = ctx;
    if (!job->in_place) {
        /* rows to convert, numbered across the parts that own a slot, dealt round-robin */
        int64_t unit = 0;
        for (int p = 0; p < job->n_parts; p++) {
            if (job->owner[p] != p) continue;
            const st_matmul_part *pt = &job->parts[p];
            for (int64_t i = 0; i < pt->n; i++, unit++)
                if (unit % nth == ith)
                    job->convert(pt->X + i * pt->ldx, job->scratch + (size_t)(job->slot[p] + i) * job->act_row, job->K);
        }
        st_pool_barrier(job->pool);
    }
    long r0, r1;
    st_split((long)job->total_rows, ith, nth, &r0, &r1);
    int64_t base = 0;
    for (int p = 0; p < job->n_parts && base < r1; p++) {
        int64_t M = job->parts[p].M;
        int64_t a = r0 > base ? r0 : base, b = r1 < base + M ? r1 : base + M;
        if (a < b && job->parts[p].n > 0) part_rows(job, p, a - base, b - base);
        base += M;
    }
}

void st_matmul_batch(st_pool *pool, uint32_t type, int64_t K, const st_matmul_part *parts, int n_parts,
                     void *scratch) {
    const st_type_info *info = st_layout_get(type); /* also the repacked layouts of quant/repack.h */
    uint32_t act = st_dot_act_type(type);
    if (!info || act == ST_TYPE_COUNT || n_parts <= 0) return;
    if (n_parts > MAX_PARTS) {
        /* the scratch layout below restarts at row 0 for each call, which the caller sized for */
        for (int p0 = 0; p0 < n_parts; p0 += MAX_PARTS)
            st_matmul_batch(pool, type, K, parts + p0, n_parts - p0 < MAX_PARTS ? n_parts - p0 : MAX_PARTS, scratch);
        return;
    }
    batch_job job = {
        .pool = pool, .parts = parts, .n_parts = n_parts, .K = K, .w_row = st_row_size(info, K),
        .in_place = act == ST_TYPE_F32, .scratch = scratch, .dot = st_dot_kernel(type),
        .tile = st_dot_tile_kernel(type),
    };
    if (!job.in_place) {
        job.act_row = st_dot_act_row_size(act, K);
        job.convert = st_act_converter(act);
    }
    int64_t next = 0;
    for (int p = 0; p < n_parts; p++) {
        job.total_rows += parts[p].M > 0 ? parts[p].M : 0;
        job.owner[p] = p;
        for (int q = 0; q < p; q++)
            if (job.owner[q] == q && parts[q].X == parts[p].X && parts[q].ldx == parts[p].ldx && parts[q].n == parts[p].n) {
                job.owner[p] = q;
                break;
            }
        if (job.owner[p] == p) {
            job.slot[p] = next;
            next += parts[p].n > 0 ? parts[p].n : 0;
        } else {
            job.slot[p] = job.slot[job.owner[p]];
        }
    }
    if (job.total_rows == 0) return;
    st_pool_run(pool, batch_worker, &job);
}

void st_matmul(st_pool *pool, uint32_t type, int64_t K, const st_matmul_part *p, void *scratch) {
    if (p->M <= 0 || p->n <= 0) return;
    st_matmul_batch(pool, type, K, p, 1, scratch);
}
