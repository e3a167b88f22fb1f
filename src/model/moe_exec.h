/* moe_exec.h: one MoE layer's experts (routed and shared) as a single CPU pool job (moe_exec.c). */
#ifndef ST_MODEL_MOE_EXEC_H
#define ST_MODEL_MOE_EXEC_H

#include "base/pool.h"
#include "model/model.h"
#include "quant/dot.h"
#include "quant/dot_tile.h"

/* One expert and the block of gathered rows [p0, p0+rows) it runs on. */
typedef struct moe_entry {
    const char *wg, *wu, *wd;    /* the expert's gate, up and down matrices */
    uint32_t tg, tu, td;
    size_t rg, ru, rd;           /* row bytes */
    float sg, su, sd;            /* .scale of each product (1 if none) */
    int64_t ff;
    int64_t p0, rows;
    st_dot_fn dot_g, dot_u, dot_d;
    st_dot_tile_fn tile_g, tile_u, tile_d; /* NULL where the type has no tile kernel */
    st_act_fn act_g, act_d;
} moe_entry;

/* Expert e of 3-D expert tensors (fused gate_up, or gate + up), or a 2-D shared expert (e = 0).
 * Returns 0 if this layout cannot run here (gate and up wanting different activation forms, a
 * type without kernels): the caller then takes the per-matmul path. */
int moe_entry_init(moe_entry *en, const st_tensor *gate, const st_tensor *up, const st_tensor *gate_up,
                   const st_tensor *down, int64_t e, int64_t ff);
/* The largest activation row, 64-byte rounded, of K elements for the weights given. */
size_t moe_act_row_max(const st_tensor *const *ts, int n, int64_t K);
typedef struct moe_args {
    const moe_entry *ent;
    int n_ent;
    int64_t d, P;                /* model width; gathered rows over all entries */
    const float *x;              /* token rows [n_tok][d] */
    const int32_t *x_row;        /* gathered row p is token x_row[p] */
    char *act1, *act2;           /* [P] activation rows of act1_row / act2_row bytes */
    size_t act1_row, act2_row;
    float *gu;                   /* [P][ld_gu >= 2 ff]: gate | up */
    int64_t ld_gu;
    float *y;                    /* [P][d]: each gathered row's expert output */
    /* The combination: out[t] = sum over j < k of w[t][j] * y[slot[t][j]] (selection order),
     * + shared_gate[t] * y[shared_p0 + t] when shared_gate is not NULL. */
    float *out;
    int64_t n_tok, k, shared_p0;
    const float *w, *shared_gate;
    const int32_t *slot;
} moe_args;

/* y[p] = down(silu(gate x[p]) * up x[p]) for every entry's rows, then the weighted sum. */
void moe_exec(st_pool *pool, const moe_args *a);

#endif
