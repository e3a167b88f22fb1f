/* fwd_matmul.c: the forward's products of a bound weight: fwd_matmul (y = scale * (W x), the
 * weight's `.scale` applied, MODELS.md §2.1), fwd_add_bias, and fwd_matmul_many: several weight
 * matrices applied to the same few input rows in one pool job.
 *
 * Decode multiplies one row by many small matrices that share their input (q, k and v; a Gated
 * DeltaNet layer's qkv, gate, beta and alpha; the router and the shared-expert gate). One
 * st_matmul each costs a pool dispatch each, and the smallest ones (beta, alpha: a few rows) cannot
 * keep two threads busy. Here the input is converted once and the union of all the matrices' rows
 * is split into one contiguous range per thread: one dispatch, balanced, each thread streaming its
 * share of the weights. Results are the same dot products as st_matmul's, so bit-identical.
 * Used only for a few rows (decode); prompt chunks go through st_matmul, where a dispatch is
 * cheap next to the work. */
#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "model/fwd_matmul.h"
#include "model/rows.h"
#include "quant/dot.h"
#include "quant/dot_tile.h"
#include "quant/types.h"

void fwd_matmul(st_fwd *f, const st_tensor *w, const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy) {
    int64_t M = w->ne[1];
    st_matmul(f->pool, w->type, w->ne[0], &(st_matmul_part){.W = w->data, .M = M, .X = x, .ldx = ldx, .n = n, .Y = y, .ldy = ldy},
              f->mm_scratch);
    if (w->scale != 1.0f)
        for (int64_t i = 0; i < n; i++) st_op_scale(y + i * ldy, M, y + i * ldy, w->scale);
}

void fwd_add_bias(st_fwd *f, const st_tensor *b, float *y, int64_t ldy, int64_t n) {
    if (!b->data) return;
    st_op_add(f->pool, y, ldy, b->f32, 0, y, ldy, n, b->ne[0]);
}

enum { MANY_MAX_ROWS = ST_DOT_MAX_NX };

typedef struct many_job {
    const fwd_mm_item *items;
    int n_items;
    int64_t total;               /* rows over all items */
    const char *act;
    size_t act_row;
    int64_t n;
} many_job;

static void many_worker(void *ctx, int ith, int nth) {
    const many_job *j = ctx;
    long r0, r1;
    st_split((long)j->total, ith, nth, &r0, &r1);
    int64_t base = 0;
    float out[ST_DOT_TILE_MR * ST_DOT_MAX_NX];
    for (int i = 0; i < j->n_items && base < r1; i++) {
        const fwd_mm_item *it = &j->items[i];
        const st_tensor *w = it->w;
        int64_t M = w->ne[1];
        int64_t m0 = r0 > base ? r0 - base : 0, m1 = r1 - base < M ? r1 - base : M;
        st_dot_fn dot = st_dot_kernel(w->type);
        st_dot_tile_fn tile = st_dot_tile_kernel(w->type); /* several weight rows per call, same bits */
        const int n = (int)j->n;
        for (int64_t m = m0, mr = 1; m < m1; m += mr) {
            const char *row = (const char *)w->data + (size_t)m * w->row_bytes;
            mr = tile ? (m1 - m < ST_DOT_TILE_MR ? m1 - m : ST_DOT_TILE_MR) : 1;
            if (tile) tile(w->ne[0], row, w->row_bytes, (int)mr, j->act, j->act_row, n, out, n);
            else dot(w->ne[0], row, j->act, j->act_row, n, out);
            for (int64_t q = 0; q < mr; q++)
                for (int t = 0; t < n; t++)
                    it->y[t * it->ldy + m + q] = w->scale == 1.0f ? out[q * n + t] : out[q * n + t] * w->scale;
        }
        base += M;
    }
}

void fwd_matmul_many(st_fwd *f, const float *x, int64_t ldx, int64_t n, const fwd_mm_item *items, int n_items) {
    /* One activation form for all, few rows, a pool worth using: else one st_matmul each. */
    uint32_t act = st_dot_act_type(items[0].w->type);
    int64_t K = items[0].w->ne[0], total = 0;
    int same = n <= MANY_MAX_ROWS && f->pool && st_pool_size(f->pool) > 1;
    for (int i = 0; i < n_items && same; i++) {
        same = st_dot_act_type(items[i].w->type) == act && items[i].w->ne[0] == K && st_dot_kernel(items[i].w->type);
        total += items[i].w->ne[1];
    }
    st_act_fn convert = same ? st_act_converter(act) : NULL;
    if (!convert) {
        for (int i = 0; i < n_items; i++) fwd_matmul(f, items[i].w, x, ldx, n, items[i].y, items[i].ldy);
        return;
    }
    many_job j = {.items = items, .n_items = n_items, .total = total, .n = n};
    if (act == ST_TYPE_F32) {
        /* f32 weights read the rows in place, as st_matmul does */
        j.act = (const char *)x;
        j.act_row = (size_t)ldx * sizeof(float);
    } else {
        char *scratch = f->mm_scratch;
        j.act = scratch;
        j.act_row = st_dot_act_row_size(act, K);
        for (int64_t t = 0; t < n; t++) convert(x + t * ldx, scratch + (size_t)t * j.act_row, K);
    }
    st_pool_run(f->pool, many_worker, &j);
}
