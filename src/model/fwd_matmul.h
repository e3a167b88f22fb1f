/* fwd_matmul.h: the CPU forward's products of a bound weight on a pass's rows (fwd_matmul.c): one
 * weight, its `.scale` applied (MODELS.md §2.1), a bias, and several weights on the same few rows
 * in one pool job. */
#ifndef ST_MODEL_FWD_MATMUL_H
#define ST_MODEL_FWD_MATMUL_H

#include <stdint.h>
#include "model/model.h"
#include "model/rows.h"

/* y = scale * (W x), for n rows; y += bias. */
void fwd_matmul(st_fwd *f, const st_tensor *w, const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy);
void fwd_add_bias(st_fwd *f, const st_tensor *b, float *y, int64_t ldy, int64_t n);

/* Several weights on the same input rows: one pool job for few rows, else one fwd_matmul each.
 * Scales as fwd_matmul; no biases. */
typedef struct fwd_mm_item {
    const st_tensor *w;
    float *y;
    int64_t ldy;
} fwd_mm_item;
void fwd_matmul_many(st_fwd *f, const float *x, int64_t ldx, int64_t n, const fwd_mm_item *items, int n_items);

#endif
