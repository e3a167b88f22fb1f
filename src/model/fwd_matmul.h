/* fwd_matmul.h: the forward's products of a bound weight on a pass's rows (fwd_matmul.c), on its
 * backend: one weight, its `.scale` applied (MODELS.md §2.1), a bias, and several weights on the
 * same rows at once. */
#ifndef ST_MODEL_FWD_MATMUL_H
#define ST_MODEL_FWD_MATMUL_H

#include <stdint.h>
#include "model/model.h"
#include "model/rows.h"

/* y = scale * (W x), for n rows; y += bias. */
void fwd_matmul(st_fwd *f, const st_tensor *w, const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy);
void fwd_add_bias(st_fwd *f, const st_tensor *b, float *y, int64_t ldy, int64_t n);

/* Several weights (at most FWD_MM_MAX_ITEMS) on the same input rows: the backend's matmul_many.
 * Scales as fwd_matmul; no biases. */
#define FWD_MM_MAX_ITEMS 8
typedef struct fwd_mm_item {
    const st_tensor *w;
    float *y;
    int64_t ldy;
} fwd_mm_item;
void fwd_matmul_many(st_fwd *f, const float *x, int64_t ldx, int64_t n, const fwd_mm_item *items, int n_items);

#endif
