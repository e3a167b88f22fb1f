/* backend_cpu.c: the op table (backend.h) on the CPU: each entry the st_op_* of this directory on
 * the backend's pool, host pointers; the fused entries as their reference decompositions, so the
 * forward written against the table gives the same bits as the ops called one by one. Nothing here
 * fails (be->err stays ST_OK) but get_rows on a bad id.
 *
 * matmul_many: decode multiplies one row by many small matrices that share their input (q, k and
 * v; a Gated DeltaNet layer's qkv, gate, beta and alpha; the router and the shared-expert gate).
 * One st_matmul each costs a pool dispatch each, and the smallest ones (beta, alpha: a few rows)
 * cannot keep two threads busy. Here the input is converted once and the union of all the
 * matrices' rows is split into one contiguous range per thread: one dispatch, balanced, each
 * thread streaming its share of the weights. Results are the same dot products as st_matmul's,
 * so bit-identical. Used only for a few rows; prompt chunks go through st_matmul, where a dispatch
 * is cheap next to the work. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "quant/dot.h"
#include "quant/dot_tile.h"
#include "quant/types.h"

#define CPU(be) ((st_cpu_backend *)(be))

static void cpu_rms_norm(st_backend *be, const float *x, int64_t ld_x, const float *w, float *y, int64_t ld_y,
                         int64_t rows, int64_t dim, float eps) {
    st_op_rms_norm(CPU(be)->pool, x, ld_x, w, y, ld_y, rows, dim, eps);
}

static void cpu_add_rms_norm(st_backend *be, float *x, const float *r, const float *w, float *h, int64_t rows,
                             int64_t d, float eps) {
    st_pool *pool = CPU(be)->pool;
    if (r) st_op_add(pool, x, d, r, d, x, d, rows, d);
    st_op_rms_norm(pool, x, d, w, h, d, rows, d, eps);
}

static void cpu_l2_norm_heads(st_backend *be, float *x, int64_t ld_tok, int64_t n_tok, int64_t n_head, int64_t dim,
                              float eps) {
    (void)be;
    for (int64_t t = 0; t < n_tok; t++) st_op_l2_norm(NULL, x + t * ld_tok, dim, x + t * ld_tok, dim, n_head, dim, eps);
}

static void cpu_pointwise(st_backend *be, st_pw op, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                          float *y, int64_t ld_y, int64_t rows, int64_t n, const st_mat *next) {
    (void)next;
    st_pool *pool = CPU(be)->pool;
    switch (op) {
    case ST_PW_ADD: st_op_add(pool, a, ld_a, b, ld_b, y, ld_y, rows, n); break;
    case ST_PW_MUL: st_op_mul(pool, a, ld_a, b, ld_b, y, ld_y, rows, n); break;
    case ST_PW_SWIGLU: st_op_swiglu(pool, a, ld_a, b, ld_b, y, ld_y, rows, n); break;
    case ST_PW_MUL_SIGMOID: st_op_mul_sigmoid(pool, a, ld_a, b, ld_b, y, ld_y, rows, n); break;
    case ST_PW_MUL_SILU: st_op_mul_silu(pool, a, ld_a, b, ld_b, y, ld_y, rows, n); break;
    case ST_PW_SIGMOID: st_op_sigmoid(pool, a, ld_a, y, ld_y, rows, n); break;
    case ST_PW_SILU: st_op_silu(pool, a, ld_a, y, ld_y, rows, n); break;
    }
}

static void cpu_scale(st_backend *be, float *x, int64_t ld, int64_t rows, int64_t n, float s) {
    (void)be;
    for (int64_t r = 0; r < rows; r++) st_op_scale(x + r * ld, n, x + r * ld, s);
}

static void cpu_gated_norm(st_backend *be, float *o, const float *w, const float *z, int64_t rows, int64_t dim,
                           float eps, int sigmoid, const st_mat *next) {
    (void)next;
    st_pool *pool = CPU(be)->pool;
    st_op_rms_norm(pool, o, dim, w, o, dim, rows, dim, eps);
    if (sigmoid) st_op_mul_sigmoid(pool, o, dim, z, dim, o, dim, rows, dim);
    else st_op_mul_silu(pool, o, dim, z, dim, o, dim, rows, dim);
}

/* ---- products ---------------------------------------------------------------------------------- */

static void cpu_matmul(st_backend *be, const st_mat *w, const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy) {
    st_cpu_backend *c = CPU(be);
    st_matmul(c->pool, w->type, w->K, &(st_matmul_part){.W = w->data, .M = w->M, .X = x, .ldx = ldx, .n = n, .Y = y, .ldy = ldy},
              c->mm_scratch);
    if (w->scale != 1.0f)
        for (int64_t i = 0; i < n; i++) st_op_scale(y + i * ldy, w->M, y + i * ldy, w->scale);
}

enum { MANY_MAX_ROWS = ST_DOT_MAX_NX };

typedef struct many_job {
    const st_mm_out *items;
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
        const st_mm_out *it = &j->items[i];
        const st_mat *w = &it->w;
        int64_t M = w->M;
        int64_t m0 = r0 > base ? r0 - base : 0, m1 = r1 - base < M ? r1 - base : M;
        st_dot_fn dot = st_dot_kernel(w->type);
        st_dot_tile_fn tile = st_dot_tile_kernel(w->type); /* several weight rows per call, same bits */
        const int n = (int)j->n;
        for (int64_t m = m0, mr = 1; m < m1; m += mr) {
            const char *row = (const char *)w->data + (size_t)m * w->row_bytes;
            mr = tile ? (m1 - m < ST_DOT_TILE_MR ? m1 - m : ST_DOT_TILE_MR) : 1;
            if (tile) tile(w->K, row, w->row_bytes, (int)mr, j->act, j->act_row, n, out, n);
            else dot(w->K, row, j->act, j->act_row, n, out);
            for (int64_t q = 0; q < mr; q++)
                for (int t = 0; t < n; t++)
                    it->y[t * it->ldy + m + q] = w->scale == 1.0f ? out[q * n + t] : out[q * n + t] * w->scale;
        }
        base += M;
    }
}

static void cpu_matmul_many(st_backend *be, const float *x, int64_t ldx, int64_t n, const st_mm_out *items, int n_items) {
    st_cpu_backend *c = CPU(be);
    /* One activation form for all, few rows, a pool worth using: else one st_matmul each. */
    uint32_t act = st_dot_act_type(items[0].w.type);
    int64_t K = items[0].w.K, total = 0;
    int same = n <= MANY_MAX_ROWS && c->pool && st_pool_size(c->pool) > 1;
    for (int i = 0; i < n_items && same; i++) {
        same = st_dot_act_type(items[i].w.type) == act && items[i].w.K == K && st_dot_kernel(items[i].w.type);
        total += items[i].w.M;
    }
    st_act_fn convert = same ? st_act_converter(act) : NULL;
    if (!convert) {
        for (int i = 0; i < n_items; i++) cpu_matmul(be, &items[i].w, x, ldx, n, items[i].y, items[i].ldy);
        return;
    }
    many_job j = {.items = items, .n_items = n_items, .total = total, .n = n};
    if (act == ST_TYPE_F32) {
        /* f32 weights read the rows in place, as st_matmul does */
        j.act = (const char *)x;
        j.act_row = (size_t)ldx * sizeof(float);
    } else {
        char *scratch = c->mm_scratch;
        j.act = scratch;
        j.act_row = st_dot_act_row_size(act, K);
        for (int64_t t = 0; t < n; t++) convert(x + t * ldx, scratch + (size_t)t * j.act_row, K);
    }
    st_pool_run(c->pool, many_worker, &j);
}

static void cpu_swiglu_ffn(st_backend *be, const st_mat *gate, const st_mat *up, const st_mat *down, const float *x,
                           int64_t ldx, int64_t n, float *mid, float *tmp, float *out, int64_t ld_out) {
    int64_t ff = gate->M;
    cpu_matmul(be, gate, x, ldx, n, mid, ff);
    cpu_matmul(be, up, x, ldx, n, tmp, ff);
    st_op_swiglu(CPU(be)->pool, mid, ff, tmp, ff, mid, ff, n, ff);
    cpu_matmul(be, down, mid, ff, n, out, ld_out);
}

/* ---- rows -------------------------------------------------------------------------------------- */

static void cpu_copy_rows(st_backend *be, float *dst, int64_t dpitch, const float *src, int64_t spitch, int64_t width,
                          int64_t rows) {
    (void)be;
    if (dpitch == width && spitch == width) {
        memmove(dst, src, (size_t)(rows * width) * sizeof(float));
        return;
    }
    for (int64_t r = 0; r < rows; r++) memmove(dst + r * dpitch, src + r * spitch, (size_t)width * sizeof(float));
}

static void cpu_get_rows(st_backend *be, uint32_t type, const void *table, int64_t n_rows, int64_t dim,
                         const int32_t *ids_host, int64_t n, float *out, int64_t ld_out) {
    if (be->err == ST_OK && !st_op_get_rows(type, table, n_rows, dim, ids_host, n, out, ld_out))
        be->err = st_fail(ST_ERR_RANGE, "forward: a token id is outside the vocabulary of %lld", (long long)n_rows);
}

static void cpu_ple_rows(st_backend *be, const st_ple_hash *h, const int32_t *win, int64_t n, int32_t *rows,
                         uint32_t type, const void *table, int64_t n_rows, int64_t dim, float *out, int64_t ld_out) {
    if (be->err != ST_OK) return;
    st_op_ple_hash(h, win, n, rows);
    if (!st_op_get_rows(type, table, n_rows, dim, rows, n * h->n_heads, out, ld_out))
        be->err = st_fail(ST_ERR_RANGE, "forward: a PLE row outside the table's %lld rows", (long long)n_rows);
}

static void cpu_upload(st_backend *be, void *dst, const void *src_host, size_t bytes) {
    (void)be;
    memcpy(dst, src_host, bytes);
}

/* ---- attention, Gated DeltaNet ------------------------------------------------------------------ */

static void cpu_rope(st_backend *be, float *x, int64_t ld_tok, int64_t ld_head, int64_t n_tok, int64_t n_head,
                     const int32_t *pos, const st_rope_params *p) {
    st_op_rope_neox(CPU(be)->pool, x, ld_tok, ld_head, n_tok, n_head, pos, p);
}

static void cpu_kv_store(st_backend *be, uint32_t type, void *cache, int64_t row, int64_t cell0, const int32_t *pos,
                         const float *src, int64_t ld_src, int64_t n_tok) {
    (void)be, (void)pos;
    st_op_kv_store(type, cache, row, cell0, src, ld_src, n_tok);
}

static void cpu_attention(st_backend *be, const st_attn_args *a) { st_op_attention(CPU(be)->pool, a); }

static void cpu_attention_cells(st_backend *be, const st_attn_cells_args *a) {
    st_op_attention_cells(CPU(be)->pool, a);
}

static void cpu_conv1d(st_backend *be, const float *m, int64_t ld_m, const float *w, float *state, float *out,
                       int64_t ld_out, int64_t n_tok, int64_t C, int64_t K, int apply_silu) {
    st_op_conv1d(CPU(be)->pool, m, ld_m, w, state, out, ld_out, n_tok, C, K, apply_silu);
}

static void cpu_conv1d_l2(st_backend *be, const float *m, const float *w, float *state, float *out, int64_t n_tok,
                          int64_t C, int64_t K, int64_t n_norm, int64_t dim, float eps) {
    st_op_conv1d(CPU(be)->pool, m, C, w, state, out, C, n_tok, C, K, 1);
    cpu_l2_norm_heads(be, out, C, n_tok, n_norm, dim, eps);
}

/* The conv state after each row t, into steps[t]: the last K-1 columns of [state | m rows 0..t],
 * per channel oldest first (st_op_conv1d's layout). */
static void cpu_conv1d_steps(st_backend *be, const float *m, int64_t ld_m, const float *state, float *const *steps,
                             int64_t n_tok, int64_t C, int64_t K) {
    (void)be;
    int64_t K1 = K - 1;
    for (int64_t t = 0; t < n_tok; t++) {
        float *dst = steps[t];
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < K1; j++) {
                int64_t col = t + 1 + j; /* in [state (K1 columns) | m rows] */
                dst[c * K1 + j] = col < K1 ? state[c * K1 + col] : m[(col - K1) * ld_m + c];
            }
    }
}

static void cpu_gdn_gates(st_backend *be, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                          const float *dt_bias, const float *ssm_a, int64_t n_tok, int64_t n_v, float *g_out,
                          float *beta_out) {
    (void)be;
    st_op_gdn_gates(a, ld_a, b, ld_b, dt_bias, ssm_a, n_tok, n_v, g_out, beta_out);
}

static void cpu_gdn(st_backend *be, const st_gdn_args *a, void *scratch) { st_op_gdn(CPU(be)->pool, a, scratch); }

/* ---- qwen4exp ----------------------------------------------------------------------------------- */

static void cpu_hc_pre(st_backend *be, const float *xn, int64_t ld_x, const float *g, int64_t ld_g, float *m,
                       int64_t ld_m, int64_t n_tok, int64_t hc, int64_t d, float scale) {
    st_op_hc_pre(CPU(be)->pool, xn, ld_x, g, ld_g, m, ld_m, n_tok, hc, d, scale);
}

static void cpu_hc_post(st_backend *be, float *R, int64_t ld_r, const float *y, int64_t ld_y, const float *inj,
                        int64_t ld_inj, int64_t n_tok, int64_t hc, int64_t d) {
    st_op_hc_post(CPU(be)->pool, R, ld_r, y, ld_y, inj, ld_inj, n_tok, hc, d);
}

static void cpu_ple_gate(st_backend *be, const float *k, const float *q, int64_t ld_kq, const float *val, int64_t ld_v,
                         float *gv, int64_t ld_gv, int64_t n_tok, int64_t hc, int64_t d) {
    st_op_ple_gate(CPU(be)->pool, k, q, ld_kq, val, ld_v, gv, ld_gv, n_tok, hc, d);
}

static void cpu_qsa_blocks(st_backend *be, uint32_t kv_type, const void *cache, int64_t dim, int64_t r, int64_t b0,
                           int64_t b1, const int32_t *last, const float *norm_w, float eps, const st_rope_params *rp,
                           float *blocks) {
    if (be->err != ST_OK) return;
    if (last) {
        if ((last[0] + 1) % r) return;
        b0 = (last[0] + 1) / r - 1;
        b1 = b0 + 1;
    }
    const int64_t nb = b1 - b0;
    if (nb <= 0) return;
    int32_t small[64], *pos = nb <= 64 ? small : malloc((size_t)nb * sizeof *pos); /* decode: no malloc */
    if (!pos) {
        be->err = st_fail(ST_ERR_NOMEM, "forward: out of memory for %lld QSA block positions", (long long)nb);
        return;
    }
    for (int64_t b = 0; b < nb; b++) pos[b] = (int32_t)((b0 + b) * r);
    float *blk = blocks + b0 * dim;
    st_op_qsa_pool(kv_type, cache, dim, r, b0, b1, blk);
    st_op_rms_norm(CPU(be)->pool, blk, dim, norm_w, blk, dim, nb, dim, eps);
    st_op_rope_neox(CPU(be)->pool, blk, dim, dim, nb, 1, pos, rp);
    if (pos != small) free(pos);
}

static void cpu_qsa_select(st_backend *be, const st_qsa_args *a, void *scratch) {
    st_op_qsa_select(CPU(be)->pool, a, scratch);
}

/* ---- no streams, no timers ---------------------------------------------------------------------- */

static int cpu_fork(st_backend *be, int64_t n_rows) {
    (void)be, (void)n_rows;
    return 0;
}

static void cpu_side(st_backend *be, int side) { (void)be, (void)side; }

static const st_backend_ops cpu_ops = {
    .name = "cpu",
    .rms_norm = cpu_rms_norm, .add_rms_norm = cpu_add_rms_norm, .l2_norm_heads = cpu_l2_norm_heads,
    .pointwise = cpu_pointwise, .scale = cpu_scale, .gated_norm = cpu_gated_norm,
    .matmul = cpu_matmul, .matmul_many = cpu_matmul_many, .swiglu_ffn = cpu_swiglu_ffn,
    .copy_rows = cpu_copy_rows, .get_rows = cpu_get_rows, .ple_rows = cpu_ple_rows, .upload = cpu_upload,
    .rope = cpu_rope, .kv_store = cpu_kv_store, .attention = cpu_attention, .attention_cells = cpu_attention_cells,
    .conv1d = cpu_conv1d, .conv1d_l2 = cpu_conv1d_l2, .conv1d_steps = cpu_conv1d_steps,
    .gdn_gates = cpu_gdn_gates, .gdn = cpu_gdn,
    .hc_pre = cpu_hc_pre, .hc_post = cpu_hc_post, .ple_gate = cpu_ple_gate, .qsa_blocks = cpu_qsa_blocks,
    .qsa_select = cpu_qsa_select,
    .fork = cpu_fork, .unfork = cpu_side, .join = cpu_side,
    .prof_begin = NULL, .prof_end = NULL,
};

st_backend *st_cpu_backend_init(st_cpu_backend *b, st_pool *pool, void *mm_scratch) {
    *b = (st_cpu_backend){.be = {.ops = &cpu_ops, .err = ST_OK}, .pool = pool, .mm_scratch = mm_scratch};
    return &b->be;
}
