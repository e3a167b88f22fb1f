/* backend_cuda.c: the op table on the GPU (backend_cuda.h). Which kernel each entry runs:
 *  - add_rms_norm: the residual add, the norm and (<= 8 rows, d % 32 == 0) the rows' 8-bit form
 *    in one kernel; the products of those rows then take the multi-matrix matvec on them.
 *  - pointwise MUL_SIGMOID and gated_norm (silu) with a quantized `next` on <= 8 token rows: the
 *    output straight into 8 bits for that product (attention's and the GDN's output gates).
 *  - swiglu_ffn on <= 8 prepared rows: gate, up and SwiGLU in one matvec into 8 bits, then down.
 *  - attention: the tensor-core form (it hands fewer than 16 rows to flash-decoding); gdn: the
 *    chunked form over 64 rows, else per token; conv1d_l2: one kernel for a decode row.
 *  - fork: a decode step's side stream.
 * STRATA_CUDA_PLAIN (diagnostics, read once): a comma list of the prompt-chunk paths to run on the
 * decode kernels instead: "attn", "gemm" (dense GEMMs as 8-row matvecs), "gdn", "moe" (read by
 * model/cuda/moe_cuda.c), or "all". */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/backend_cuda.h"
#include "quant/types.h"

enum { PLAIN_ATTN = 1, PLAIN_MOE = 2, PLAIN_GEMM = 4, PLAIN_GDN = 8 };

static int plain_paths(void) {
    static int bits = -1;
    if (bits >= 0) return bits;
    const char *e = getenv("STRATA_CUDA_PLAIN");
    int b = 0;
    if (e) {
        if (strstr(e, "attn")) b |= PLAIN_ATTN;
        if (strstr(e, "moe")) b |= PLAIN_MOE;
        if (strstr(e, "gemm")) b |= PLAIN_GEMM;
        if (strstr(e, "gdn")) b |= PLAIN_GDN;
        if (strstr(e, "all")) b = PLAIN_ATTN | PLAIN_MOE | PLAIN_GEMM | PLAIN_GDN;
    }
    return bits = b;
}

#define B(be) ((st_cuda_backend *)(be))
/* The op's kernels, skipped after an error. */
#define DO(expr) do { if (b->be.err == ST_OK) b->be.err = (expr); } while (0)
#define LIVE() do { if (b->be.err != ST_OK) return; } while (0)

static const size_t F = sizeof(float);

int st_cuda_backend_ok(st_cuda_backend *b, st_status s) {
    if (b->be.err == ST_OK) b->be.err = s;
    return b->be.err == ST_OK;
}

void st_cuda_backend_wrote(st_cuda_backend *b, const float *y, int64_t n) {
    for (int i = 0; i < ST_CUDA_PREP_SLOTS; i++) {
        st_cuda_prep *p = &b->prep[i];
        if (p->x && y < p->x + p->K * p->n && p->x < y + n) p->x = NULL;
    }
}

/* Writes of rows x n floats ld apart (the span they cover). */
static void wrote(st_cuda_backend *b, const float *y, int64_t ld, int64_t rows, int64_t n) {
    if (rows > 0) st_cuda_backend_wrote(b, y, (rows - 1) * ld + n);
}

const st_cuda_prep *st_cuda_backend_prepared(const st_cuda_backend *b, const float *x, int64_t n, int64_t K) {
    for (int i = 0; i < ST_CUDA_PREP_SLOTS; i++) {
        const st_cuda_prep *p = &b->prep[i];
        if (p->x == x && p->n == n && p->K == K) return p;
    }
    return NULL;
}

/* The output slot for a block output of rows*n floats read next by `next`, or NULL where the
 * plain product runs (prompt chunks, float or scaled weights, a width the 8-bit form does not take). */
static st_cuda_prep *out_slot(st_cuda_backend *b, const st_mat *next, int64_t rows, int64_t n) {
    if (!next || b->unfused || b->outs_unfused || n % 32) return NULL;
    int64_t K = next->K;
    if (K % 32 || (rows * n) % K || (rows * n) / K > 8 || K > b->max_k || !st_cuda_type_q8(next->type) ||
        next->scale != 1.0f)
        return NULL;
    st_cuda_prep *p = &b->prep[ST_CUDA_PREP_OUT];
    *p = (st_cuda_prep){.K = K, .n = (rows * n) / K, .q = st_cuda_q8_at(b->q8_buf[1], K, (rows * n) / K)};
    return p;
}

/* ---- norms, pointwise --------------------------------------------------------------------------- */

static void cu_rms_norm(st_backend *be, const float *x, int64_t ld_x, const float *w, float *y, int64_t ld_y,
                        int64_t rows, int64_t dim, float eps) {
    st_cuda_backend *b = B(be);
    wrote(b, y, ld_y, rows, dim);
    DO(st_cuda_rms_norm(b->cu, x, ld_x, w, y, ld_y, rows, dim, eps));
}

static void cu_add_rms_norm(st_backend *be, float *x, const float *r, const float *w, float *h, int64_t rows, int64_t d,
                            float eps) {
    st_cuda_backend *b = B(be);
    wrote(b, h, d, rows, d);
    if (r) wrote(b, x, d, rows, d);
    if (b->unfused) {
        if (r) DO(st_cuda_pointwise(b->cu, ST_CUDA_ADD, x, d, r, d, x, d, rows, d));
        DO(st_cuda_rms_norm(b->cu, x, d, w, h, d, rows, d, eps));
        return;
    }
    st_cuda_q8 q = {0};
    if (rows <= 8 && d % 32 == 0 && d <= b->max_k) q = st_cuda_q8_at(b->q8_buf[0], d, rows);
    DO(st_cuda_add_rms_norm_q8(b->cu, x, r, w, h, q, rows, d, eps));
    if (q.q && b->be.err == ST_OK) b->prep[ST_CUDA_PREP_NORM] = (st_cuda_prep){.x = h, .K = d, .n = rows, .q = q, .multi = 1};
}

static void cu_l2_norm_heads(st_backend *be, float *x, int64_t ld_tok, int64_t n_tok, int64_t n_head, int64_t dim,
                             float eps) {
    st_cuda_backend *b = B(be);
    wrote(b, x, ld_tok, n_tok, n_head * dim);
    DO(st_cuda_l2_norm_heads(b->cu, x, ld_tok, n_tok, n_head, dim, eps));
}

static int cuda_pw(st_pw op) {
    switch (op) {
    case ST_PW_ADD: return ST_CUDA_ADD;
    case ST_PW_MUL: return ST_CUDA_MUL;
    case ST_PW_SWIGLU: return ST_CUDA_SWIGLU;
    case ST_PW_MUL_SIGMOID: return ST_CUDA_MUL_SIGMOID;
    case ST_PW_MUL_SILU: return ST_CUDA_MUL_SILU;
    case ST_PW_SIGMOID: return ST_CUDA_SIGMOID;
    case ST_PW_SILU: return ST_CUDA_SILU;
    }
    return ST_CUDA_ADD;
}

static void cu_pointwise(st_backend *be, st_pw op, const float *a, int64_t ld_a, const float *bb, int64_t ld_b, float *y,
                         int64_t ld_y, int64_t rows, int64_t n, const st_mat *next) {
    st_cuda_backend *b = B(be);
    LIVE();
    wrote(b, y, ld_y, rows, n);
    st_cuda_prep *p = op == ST_PW_MUL_SIGMOID && ld_y == n ? out_slot(b, next, rows, n) : NULL;
    if (p) {
        DO(st_cuda_mul_sigmoid_q8(b->cu, a, ld_a, bb, ld_b, y, rows, n, p->q));
        if (b->be.err == ST_OK) p->x = y;
        return;
    }
    DO(st_cuda_pointwise(b->cu, cuda_pw(op), a, ld_a, bb, ld_b, y, ld_y, rows, n));
}

static void cu_scale(st_backend *be, float *x, int64_t ld, int64_t rows, int64_t n, float s) {
    st_cuda_backend *b = B(be);
    wrote(b, x, ld, rows, n);
    if (ld == n) {
        DO(st_cuda_axpy(b->cu, x, rows * n, x, s, 0));
        return;
    }
    for (int64_t r = 0; r < rows; r++) DO(st_cuda_axpy(b->cu, x + r * ld, n, x + r * ld, s, 0));
}

static void cu_gated_norm(st_backend *be, float *o, const float *w, const float *z, int64_t rows, int64_t dim, float eps,
                          int sigmoid, const st_mat *next) {
    st_cuda_backend *b = B(be);
    LIVE();
    wrote(b, o, dim, rows, dim);
    if (b->unfused || sigmoid) {
        DO(st_cuda_rms_norm(b->cu, o, dim, w, o, dim, rows, dim, eps));
        DO(st_cuda_pointwise(b->cu, sigmoid ? ST_CUDA_MUL_SIGMOID : ST_CUDA_MUL_SILU, o, dim, z, dim, o, dim, rows, dim));
        return;
    }
    st_cuda_prep *p = out_slot(b, next, rows, dim);
    if (p) {
        DO(st_cuda_rms_norm_mul_silu_q8(b->cu, o, w, z, o, p->q, rows, dim, eps));
        if (b->be.err == ST_OK) p->x = o;
        return;
    }
    DO(st_cuda_rms_norm_mul_silu(b->cu, o, w, z, o, rows, dim, eps));
}

/* ---- products ---------------------------------------------------------------------------------- */

/* y *= scale over n rows of M (a weight's .scale). */
static void apply_scale(st_cuda_backend *b, float scale, float *y, int64_t ldy, int64_t n, int64_t M) {
    if (scale != 1.0f)
        for (int64_t r = 0; r < n; r++) DO(st_cuda_axpy(b->cu, y + r * ldy, M, y + r * ldy, scale, 0));
}

/* The plain product: the 8-row matvec (quantizing x itself) or the tensor-core GEMM. */
static void plain_matmul(st_cuda_backend *b, const st_mat *w, const float *x, int64_t ldx, int64_t n, float *y,
                         int64_t ldy) {
    if (b->plain & PLAIN_GEMM)
        for (int64_t r0 = 0; r0 < n; r0 += 8)
            DO(st_cuda_matmul(b->cu, w->type, w->data, w->M, w->K, x + r0 * ldx, ldx, n - r0 < 8 ? n - r0 : 8,
                              y + r0 * ldy, ldy));
    else
        DO(st_cuda_matmul(b->cu, w->type, w->data, w->M, w->K, x, ldx, n, y, ldy));
    apply_scale(b, w->scale, y, ldy, n, w->M);
}

/* One matrix on prepared rows: the norm's take the multi-matrix matvec, a block output's the
 * one-matrix form (the same kernel as the plain matvec's for these rows, so the same bits). */
static void prepared_matmul(st_cuda_backend *b, const st_cuda_prep *p, const st_mat *w, float *y, int64_t ldy) {
    if (p->multi) {
        st_cuda_mv mv = {w->data, w->M, y, ldy};
        DO(st_cuda_matvec_q8_multi(b->cu, w->type, &mv, 1, p->q));
    } else {
        st_cuda_experts e = {.type = w->type, .W = w->data, .M = w->M, .x_group = 1, .n_slots = p->n};
        DO(st_cuda_matvec_q8_id(b->cu, &e, p->q, y, ldy));
    }
    apply_scale(b, w->scale, y, ldy, p->n, w->M);
}

static void cu_matmul(st_backend *be, const st_mat *w, const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy) {
    st_cuda_backend *b = B(be);
    LIVE();
    wrote(b, y, ldy, n, w->M);
    const st_cuda_prep *p = ldx == w->K && st_cuda_type_q8(w->type) ? st_cuda_backend_prepared(b, x, n, w->K) : NULL;
    if (p) prepared_matmul(b, p, w, y, ldy);
    else plain_matmul(b, w, x, ldx, n, y, ldy);
}

/* Matrices of one quantized type on the norm's prepared rows share a launch (the GDN's four
 * projections, attention's q, k, v); the rest one product each. */
static void cu_matmul_many(st_backend *be, const float *x, int64_t ldx, int64_t n, const st_mm_out *items, int n_items) {
    st_cuda_backend *b = B(be);
    LIVE();
    for (int i = 0; i < n_items; i++) wrote(b, items[i].y, items[i].ldy, n, items[i].w.M);
    const st_cuda_prep *p = st_cuda_backend_prepared(b, x, n, ldx);
    enum { MAX_ITEMS = 16 };
    if (!p || !p->multi || n_items > MAX_ITEMS) {
        for (int i = 0; i < n_items; i++) cu_matmul(be, &items[i].w, x, ldx, n, items[i].y, items[i].ldy);
        return;
    }
    int done[MAX_ITEMS] = {0};
    for (int i = 0; i < n_items; i++) {
        if (done[i]) continue;
        const st_mat *w = &items[i].w;
        if (!st_cuda_type_q8(w->type) || w->K != p->K) {
            plain_matmul(b, w, x, ldx, n, items[i].y, items[i].ldy);
            done[i] = 1;
            continue;
        }
        st_cuda_mv mv[ST_CUDA_MV_MULTI];
        int idx[ST_CUDA_MV_MULTI], nm = 0;
        for (int j = i; j < n_items && nm < ST_CUDA_MV_MULTI; j++) {
            if (done[j] || items[j].w.type != w->type || items[j].w.K != p->K) continue;
            mv[nm] = (st_cuda_mv){items[j].w.data, items[j].w.M, items[j].y, items[j].ldy};
            idx[nm++] = j;
            done[j] = 1;
        }
        DO(st_cuda_matvec_q8_multi(b->cu, w->type, mv, nm, p->q));
        for (int k = 0; k < nm; k++) apply_scale(b, items[idx[k]].w.scale, mv[k].Y, mv[k].ldy, n, mv[k].M);
    }
}

static void cu_swiglu_ffn(st_backend *be, const st_mat *gate, const st_mat *up, const st_mat *down, const float *x,
                          int64_t ldx, int64_t n, float *mid, float *tmp, float *out, int64_t ld_out) {
    st_cuda_backend *b = B(be);
    LIVE();
    int64_t K = gate->K, ff = gate->M;
    wrote(b, mid, ff, n, ff);
    wrote(b, tmp, ff, n, ff);
    wrote(b, out, ld_out, n, down->M);
    int fused = n <= 8 && gate->type != ST_TYPE_F32 && gate->type != ST_TYPE_F16 && gate->type != ST_TYPE_BF16 &&
                gate->scale == 1.0f && up->scale == 1.0f && gate->type == up->type;
    const st_cuda_prep *p = ldx == K ? st_cuda_backend_prepared(b, x, n, K) : NULL;
    /* one matrix each (no ids): gate and up of the fused forms */
    st_cuda_experts gu = {.type = gate->type, .W = gate->data, .W2 = up->data, .M = ff, .x_group = 1, .n_slots = n};
    if (fused && p && ff % 32 == 0 && ff <= b->max_k && st_cuda_type_q8(down->type)) {
        /* SwiGLU straight into 8 bits, read by the down product with no quantize launch */
        st_cuda_q8 mq = st_cuda_q8_at(b->q8_buf[2], ff, n);
        st_cuda_experts dn = {.type = down->type, .W = down->data, .M = down->M, .x_group = 1, .n_slots = n};
        DO(st_cuda_matvec_q8_swiglu_q8(b->cu, &gu, p->q, mq));
        DO(st_cuda_matvec_q8_id(b->cu, &dn, mq, out, ld_out));
        apply_scale(b, down->scale, out, ld_out, n, down->M);
        return;
    }
    if (fused && p) {
        DO(st_cuda_matvec_q8_id(b->cu, &gu, p->q, mid, ff));
    } else if (fused) {
        DO(st_cuda_matmul_id_swiglu(b->cu, &gu, K, x, ldx, mid, ff));
    } else {
        cu_matmul(be, gate, x, ldx, n, mid, ff);
        cu_matmul(be, up, x, ldx, n, tmp, ff);
        DO(st_cuda_pointwise(b->cu, ST_CUDA_SWIGLU, mid, ff, tmp, ff, mid, ff, n, ff));
    }
    plain_matmul(b, down, mid, ff, n, out, ld_out);
}

/* ---- rows -------------------------------------------------------------------------------------- */

static void cu_copy_rows(st_backend *be, float *dst, int64_t dpitch, const float *src, int64_t spitch, int64_t width,
                         int64_t rows) {
    st_cuda_backend *b = B(be);
    wrote(b, dst, dpitch, rows, width);
    if (dpitch == width && spitch == width) {
        /* a move to lower addresses of overlapping rows goes row by row (each row's source lies
         * past its destination, so no row reads what an earlier one wrote) */
        if (src < dst + rows * width && dst < src + rows * width && rows > 1 && src != dst)
            for (int64_t r = 0; r < rows; r++) DO(st_cuda_copy(b->cu, dst + r * width, src + r * width, (size_t)width * F));
        else if (src != dst)
            DO(st_cuda_copy(b->cu, dst, src, (size_t)(rows * width) * F));
        return;
    }
    DO(st_cuda_copy2d(b->cu, dst, (size_t)dpitch * F, src, (size_t)spitch * F, (size_t)width * F, (size_t)rows));
}

static void cu_get_rows(st_backend *be, uint32_t type, const void *table, int64_t n_rows, int64_t dim,
                        const int32_t *ids_host, int64_t n, float *out, int64_t ld_out) {
    st_cuda_backend *b = B(be);
    wrote(b, out, ld_out, n, dim);
    DO(st_cuda_get_rows(b->cu, type, table, n_rows, dim, ids_host, n, out, ld_out));
}

/* The PLE rows: hashed on the device and read from the table over the bus where the session mapped
 * it (ple_host, ple_dev: st_cuda_backend); else the window down, the hash and the gather on the
 * host, the rows up (waiting: an eager chunk only). */
static void cu_ple_rows(st_backend *be, const st_ple_hash *h, const int32_t *win, int64_t n, int32_t *rows,
                        uint32_t type, const void *table_host, int64_t n_rows, int64_t dim, float *out, int64_t ld_out) {
    st_cuda_backend *b = B(be);
    LIVE();
    const int64_t nr = n * h->n_heads, len = n + h->ngram - 1;
    wrote(b, out, ld_out, nr, dim);
    if (b->ple_dev && table_host == b->ple_host) {
        DO(st_cuda_ple_hash(b->cu, h, win, n, rows));
        DO(st_cuda_get_rows_dev(b->cu, type, b->ple_dev, n_rows, dim, rows, nr, out, ld_out));
        return;
    }
    size_t bytes = (size_t)(nr * dim) * F + (size_t)(len + nr) * sizeof(int32_t);
    if (bytes > b->stage_bytes) {
        float *p = realloc(b->stage, bytes);
        if (!p) {
            b->be.err = st_fail(ST_ERR_NOMEM, "cuda: out of memory for %zu bytes of gathered rows", bytes);
            return;
        }
        b->stage = p;
        b->stage_bytes = bytes;
    }
    int32_t *hwin = (int32_t *)(b->stage + nr * dim), *hrows = hwin + len;
    DO(st_cuda_download(b->cu, hwin, win, (size_t)len * sizeof(int32_t)));
    LIVE();
    st_op_ple_hash(h, hwin, n, hrows);
    if (!st_op_get_rows(type, table_host, n_rows, dim, hrows, nr, b->stage, dim)) {
        b->be.err = st_fail(ST_ERR_RANGE, "cuda: a PLE row outside the table's %lld rows", (long long)n_rows);
        return;
    }
    if (ld_out == dim) DO(st_cuda_upload(b->cu, out, b->stage, (size_t)(nr * dim) * F));
    else
        for (int64_t r = 0; r < nr; r++) DO(st_cuda_upload(b->cu, out + r * ld_out, b->stage + r * dim, (size_t)dim * F));
}

static void cu_upload(st_backend *be, void *dst, const void *src_host, size_t bytes) {
    st_cuda_backend *b = B(be);
    st_cuda_backend_wrote(b, dst, (int64_t)(bytes / F));
    DO(st_cuda_upload(b->cu, dst, src_host, bytes));
}

/* ---- attention, Gated DeltaNet ------------------------------------------------------------------ */

static void cu_rope(st_backend *be, float *x, int64_t ld_tok, int64_t ld_head, int64_t n_tok, int64_t n_head,
                    const int32_t *pos, const st_rope_params *p) {
    st_cuda_backend *b = B(be);
    wrote(b, x, ld_tok, n_tok, n_head * ld_head);
    DO(st_cuda_rope_neox(b->cu, x, ld_tok, ld_head, n_tok, n_head, pos, p));
}

static void cu_kv_store(st_backend *be, uint32_t type, void *cache, int64_t row, int64_t cell0, const int32_t *pos,
                        const float *src, int64_t ld_src, int64_t n_tok) {
    st_cuda_backend *b = B(be);
    (void)cell0;
    DO(st_cuda_kv_store_pos(b->cu, type, cache, row, pos, src, ld_src, n_tok));
}

static void cu_attention(st_backend *be, const st_attn_args *a) {
    st_cuda_backend *b = B(be);
    wrote(b, a->out, a->ldo_tok, a->n_tok, a->n_head * a->head_dim);
    /* tensor-core GEMMs for a prompt chunk (it hands a few rows to flash-decoding) */
    if (b->plain & PLAIN_ATTN) DO(st_cuda_attention(b->cu, a));
    else DO(st_cuda_attention_prefill(b->cu, a));
}

static void cu_conv1d(st_backend *be, const float *m, int64_t ld_m, const float *w, float *state, float *out,
                      int64_t ld_out, int64_t n_tok, int64_t C, int64_t K, int apply_silu) {
    st_cuda_backend *b = B(be);
    wrote(b, out, ld_out, n_tok, C);
    DO(st_cuda_conv1d(b->cu, m, ld_m, w, state, out, ld_out, n_tok, C, K, apply_silu));
}

static void cu_conv1d_l2(st_backend *be, const float *m, const float *w, float *state, float *out, int64_t n_tok,
                         int64_t C, int64_t K, int64_t n_norm, int64_t dim, float eps) {
    st_cuda_backend *b = B(be);
    wrote(b, out, C, n_tok, C);
    if (n_tok == 1 && !b->unfused && !b->outs_unfused && dim % 32 == 0 && dim <= 256) {
        DO(st_cuda_conv1d_silu_l2(b->cu, m, w, state, out, C, K, n_norm, dim, eps));
        return;
    }
    DO(st_cuda_conv1d(b->cu, m, C, w, state, out, C, n_tok, C, K, 1));
    DO(st_cuda_l2_norm_heads(b->cu, out, C, n_tok, n_norm, dim, eps));
}

/* The planes are one device block from steps[0] (the device session's layout), C*(K-1) apart. */
static void cu_conv1d_steps(st_backend *be, const float *m, int64_t ld_m, const float *state, float *const *steps,
                            int64_t n_tok, int64_t C, int64_t K) {
    st_cuda_backend *b = B(be);
    DO(st_cuda_conv1d_steps(b->cu, m, ld_m, state, steps[0], C * (K - 1), n_tok, C, K));
}

static void cu_gdn_gates(st_backend *be, const float *a, int64_t ld_a, const float *bb, int64_t ld_b,
                         const float *dt_bias, const float *ssm_a, int64_t n_tok, int64_t n_v, float *g_out,
                         float *beta_out) {
    st_cuda_backend *b = B(be);
    wrote(b, g_out, n_v, n_tok, n_v);
    wrote(b, beta_out, n_v, n_tok, n_v);
    DO(st_cuda_gdn_gates(b->cu, a, ld_a, bb, ld_b, dt_bias, ssm_a, n_tok, n_v, g_out, beta_out));
}

static void cu_gdn(st_backend *be, const st_gdn_args *a, void *scratch) {
    st_cuda_backend *b = B(be);
    (void)scratch;
    wrote(b, a->out, a->ld_out, a->n_tok, a->n_v * a->d);
    /* long prompt chunks: the chunked form (tensor-free, f32); decode and short chunks: per token */
    if (a->n_tok > 64 && a->d <= 128 && !a->state_steps && !(b->plain & PLAIN_GDN)) DO(st_cuda_gdn_chunked(b->cu, a));
    else DO(st_cuda_gdn_step(b->cu, a));
}

/* ---- qwen4exp (ops_qwen4exp.cu) --------------------------------------------------------------- */

static void cu_attention_cells(st_backend *be, const st_attn_cells_args *c) {
    st_cuda_backend *b = B(be);
    wrote(b, c->a.out, c->a.ldo_tok, c->a.n_tok, c->a.n_head * c->a.head_dim);
    DO(st_cuda_attention_cells(b->cu, c));
}

static void cu_hc_pre(st_backend *be, const float *xn, int64_t ld_x, const float *g, int64_t ld_g, float *m,
                      int64_t ld_m, int64_t n_tok, int64_t hc, int64_t d, float scale) {
    st_cuda_backend *b = B(be);
    wrote(b, m, ld_m, n_tok, d);
    DO(st_cuda_hc_pre(b->cu, xn, ld_x, g, ld_g, m, ld_m, n_tok, hc, d, scale));
}

static void cu_hc_post(st_backend *be, float *R, int64_t ld_r, const float *y, int64_t ld_y, const float *inj,
                       int64_t ld_inj, int64_t n_tok, int64_t hc, int64_t d) {
    st_cuda_backend *b = B(be);
    wrote(b, R, ld_r, n_tok, hc * d);
    DO(st_cuda_hc_post(b->cu, R, ld_r, y, ld_y, inj, ld_inj, n_tok, hc, d));
}

static void cu_ple_gate(st_backend *be, const float *k, const float *q, int64_t ld_kq, const float *val, int64_t ld_v,
                        float *gv, int64_t ld_gv, int64_t n_tok, int64_t hc, int64_t d) {
    st_cuda_backend *b = B(be);
    wrote(b, gv, ld_gv, n_tok, hc * d);
    DO(st_cuda_ple_gate(b->cu, k, q, ld_kq, val, ld_v, gv, ld_gv, n_tok, hc, d));
}

static void cu_qsa_blocks(st_backend *be, uint32_t kv_type, const void *cache, int64_t dim, int64_t r, int64_t b0,
                          int64_t b1, const int32_t *last, const float *norm_w, float eps, const st_rope_params *rp,
                          float *blocks) {
    st_cuda_backend *b = B(be);
    DO(st_cuda_qsa_blocks(b->cu, kv_type, cache, dim, r, b0, b1, last, norm_w, eps, rp, blocks));
}

/* The selection's scores live in the context's scratch (st_cuda_qsa_scratch_size). */
static void cu_qsa_select(st_backend *be, const st_qsa_args *a, void *scratch) {
    st_cuda_backend *b = B(be);
    (void)scratch;
    DO(st_cuda_qsa_select(b->cu, a));
}

/* ---- the side stream, timers -------------------------------------------------------------------- */

static int cu_fork(st_backend *be, int64_t n_rows) {
    st_cuda_backend *b = B(be);
    if (n_rows > 8 || b->unfused || b->be.err != ST_OK) return 0;
    return (b->be.err = st_cuda_fork(b->cu)) == ST_OK;
}

/* The unfork and the join run whatever happened, so the context never stays forked. */
static void cu_unfork(st_backend *be, int side) {
    st_cuda_backend *b = B(be);
    if (side) st_cuda_backend_ok(b, st_cuda_unfork(b->cu));
}

static void cu_join(st_backend *be, int side) {
    st_cuda_backend *b = B(be);
    if (side) st_cuda_backend_ok(b, st_cuda_join(b->cu));
}

static void cu_prof_begin(st_backend *be) {
    st_cuda_backend *b = B(be);
    if (b->prof_ms) DO(st_cuda_timer_start(b->cu));
}

static void cu_prof_end(st_backend *be, int kind) {
    st_cuda_backend *b = B(be);
    float ms = 0.0f;
    if (b->prof_ms && b->be.err == ST_OK && (b->be.err = st_cuda_timer_stop(b->cu, &ms)) == ST_OK) b->prof_ms[kind] += ms;
}

static const st_backend_ops cuda_ops = {
    .name = "cuda",
    .rms_norm = cu_rms_norm, .add_rms_norm = cu_add_rms_norm, .l2_norm_heads = cu_l2_norm_heads,
    .pointwise = cu_pointwise, .scale = cu_scale, .gated_norm = cu_gated_norm,
    .matmul = cu_matmul, .matmul_many = cu_matmul_many, .swiglu_ffn = cu_swiglu_ffn,
    .copy_rows = cu_copy_rows, .get_rows = cu_get_rows, .ple_rows = cu_ple_rows, .upload = cu_upload,
    .rope = cu_rope, .kv_store = cu_kv_store, .attention = cu_attention, .attention_cells = cu_attention_cells,
    .conv1d = cu_conv1d, .conv1d_l2 = cu_conv1d_l2, .conv1d_steps = cu_conv1d_steps,
    .gdn_gates = cu_gdn_gates, .gdn = cu_gdn,
    .hc_pre = cu_hc_pre, .hc_post = cu_hc_post, .ple_gate = cu_ple_gate, .qsa_blocks = cu_qsa_blocks,
    .qsa_select = cu_qsa_select,
    .fork = cu_fork, .unfork = cu_unfork, .join = cu_join,
    .prof_begin = cu_prof_begin, .prof_end = cu_prof_end,
};

st_status st_cuda_backend_init(st_cuda_backend *b, st_cuda *cu, int64_t max_k) {
    *b = (st_cuda_backend){.be = {.ops = &cuda_ops, .err = ST_OK}, .cu = cu, .max_k = max_k, .plain = plain_paths()};
    for (int i = 0; i < 3; i++) {
        st_status s = st_cuda_alloc(cu, st_cuda_q8_bytes(max_k, 8), &b->q8_buf[i]);
        if (s != ST_OK) {
            st_cuda_backend_free(b);
            return s;
        }
    }
    return ST_OK;
}

void st_cuda_backend_free(st_cuda_backend *b) {
    free(b->stage);
    b->stage = NULL;
    b->stage_bytes = 0;
    for (int i = 0; i < 3; i++) {
        if (b->q8_buf[i]) st_cuda_free(b->cu, b->q8_buf[i]);
        b->q8_buf[i] = NULL;
    }
}

void st_cuda_backend_begin(st_cuda_backend *b, int unfused, int outs_unfused, double *prof_ms) {
    b->be.err = ST_OK;
    memset(b->prep, 0, sizeof b->prep);
    b->unfused = unfused;
    b->outs_unfused = outs_unfused;
    b->prof_ms = prof_ms;
}
