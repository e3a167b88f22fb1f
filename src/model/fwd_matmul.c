/* fwd_matmul.c: the forward's products of a bound weight, on the pass's backend: fwd_matmul
 * (y = scale * (W x), the weight's `.scale` applied, MODELS.md §2.1), fwd_add_bias, and
 * fwd_matmul_many: several weight matrices on the same input rows (one pool job on the CPU for a
 * few rows, one launch of the 8-bit matvec on the GPU). */
#include "backend/backend.h"
#include "model/fwd_matmul.h"
#include "model/rows.h"

void fwd_matmul(st_fwd *f, const st_tensor *w, const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy) {
    st_mat mw = fwd_mat(w);
    FWD_OP(f, matmul, &mw, x, ldx, n, y, ldy);
}

void fwd_add_bias(st_fwd *f, const st_tensor *b, float *y, int64_t ldy, int64_t n) {
    if (!b->data) return;
    FWD_OP(f, pointwise, ST_PW_ADD, y, ldy, b->f32, 0, y, ldy, n, b->ne[0], 0);
}

void fwd_matmul_many(st_fwd *f, const float *x, int64_t ldx, int64_t n, const fwd_mm_item *items, int n_items) {
    st_mm_out out[FWD_MM_MAX_ITEMS];
    if (n_items > FWD_MM_MAX_ITEMS) {
        if (f->be->err == ST_OK)
            f->be->err = st_fail(ST_ERR_INVALID, "forward: %d products of one input, at most %d (FWD_MM_MAX_ITEMS)",
                                 n_items, FWD_MM_MAX_ITEMS);
        return;
    }
    for (int i = 0; i < n_items; i++) out[i] = (st_mm_out){fwd_mat(items[i].w), items[i].y, items[i].ldy};
    FWD_OP(f, matmul_many, x, ldx, n, out, n_items);
}
