/* forward_cuda.c: one chunk through the model on the GPU (see forward_cuda.h). The layer stack
 * is the CPU's (qwen35.c, qwen3.c) and each block mirrors its CPU twin (attn.c, gdn.c, ffn.c);
 * where the CPU loops on the host (splitting fused projections, per-head norms) this uses strided
 * device copies and strided kernels instead, so nothing here waits on the GPU.
 *
 * Errors: the first failing op's status is kept in the pass (dfwd.err) and the ops after it are
 * skipped, so each block reads as the math. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/cuda/forward_cuda.h"
#include "model/cuda/host_experts.h"
#include "model/forward_ws.h"
#include "model/rope.h"
#include "quant/types.h"

typedef struct dfwd {
    st_cuda *cu;
    const struct st_model *m;
    const st_hparams *hp;
    const st_dweights *w;
    st_dlayer_state *s;
    uint32_t kv_type;
    st_workspace *ws;
    int64_t n, n_kv;
    const int32_t *pos;          /* device */
    int keep_steps;
    const int64_t *row_n_kv;     /* NULL, or per row: attention one row at a time (st_dchunk) */
    st_dprofile *prof;
    int unfused;
    int outs_unfused;            /* st_dchunk.outs_unfused */
    int plain;                   /* PLAIN_* bits: prompt-chunk paths left for the decode kernels */
    st_cuda_q8 q8;               /* the normed rows h in 8 bits (decode-sized chunks), q8.q NULL if not */
    st_status err;
} dfwd;

const char *const st_dprofile_names[DPROF_COUNT] = {"embed", "attention", "gated deltanet", "ffn/moe", "norms+adds", "head"};

/* Profiling: block boundaries wait for the GPU and add the time to prof->ms[kind]. */
static void prof_begin(dfwd *f) {
    if (f->prof && f->err == ST_OK) f->err = st_cuda_timer_start(f->cu);
}

static void prof_end(dfwd *f, int kind) {
    float ms = 0.0f;
    if (f->prof && f->err == ST_OK && (f->err = st_cuda_timer_stop(f->cu, &ms)) == ST_OK) f->prof->ms[kind] += ms;
}

/* STRATA_CUDA_PLAIN (diagnostics): a comma list of the prompt-chunk paths to run on the decode
 * kernels instead: "attn" (tensor-core attention), "moe" (grouped expert GEMMs), "gemm" (dense
 * GEMMs, then 8-row matvecs), "gdn" (the chunked delta rule), or "all". Read once. */
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

#define DO(expr) do { if (f->err == ST_OK) f->err = (expr); } while (0)
#define BUF(id) st_workspace_f32(f->ws, (id))

static const size_t F = sizeof(float);

/* ---- sizes ------------------------------------------------------------------------------------- */

/* The widest dense SwiGLU: the dense FFN's, or the shared expert's. */
static int64_t max_dense_ff(const struct st_model *m) {
    int64_t mx = 0;
    for (int64_t i = 0; i < m->hp.n_layer; i++) {
        const st_layer *L = &m->layers[i];
        if (L->ffn_gate.data && L->ffn_gate.ne[1] > mx) mx = L->ffn_gate.ne[1];
        if (L->gate_shexp.data && L->gate_shexp.ne[1] > mx) mx = L->gate_shexp.ne[1];
    }
    return mx;
}

size_t st_forward_cuda_ws_size(const void *model, int id, int64_t n) {
    const struct st_model *m = model;
    const st_hparams *hp = &m->hp;
    const fwd_widths w = fwd_widths_of(hp);
    int64_t ff = max_dense_ff(m);
    switch (id) {
    case WSD_X: case WSD_H: case WSD_T: return (size_t)(n * w.d) * F;
    case WSD_POS: case WSD_TOK: return (size_t)n * sizeof(int32_t);
    case WSD_Q: return (size_t)(n * w.qw) * F;
    case WSD_QN: case WSD_ATT: return (size_t)(n * w.hd * w.H) * F;
    case WSD_K: case WSD_V: return (size_t)(n * w.hd * w.Hkv) * F;
    case WSD_QKV: return (size_t)(n * w.qkv) * F;
    case WSD_CONV: return (size_t)(n * (hp->arch == ST_ARCH_QWEN3NEXT ? w.C + w.vd : w.C)) * F;
    case WSD_Z: case WSD_GDN_OUT: return (size_t)(n * w.vd) * F;
    case WSD_BA: return hp->arch == ST_ARCH_QWEN3NEXT ? (size_t)(n * 2 * w.n_v) * F : 0;
    case WSD_A: case WSD_B: case WSD_G: case WSD_BETA: return (size_t)(n * w.n_v) * F;
    case WSD_FF_A: case WSD_FF_B: case WSD_SH: return (size_t)(n * ff) * F;
    case WSD_ROUTER: return (size_t)(n * w.E) * F;
    case WSD_IDS: return (size_t)(n * w.k) * sizeof(int32_t);
    case WSD_W: return (size_t)(n * w.k) * F;
    case WSD_GE: return (size_t)(n * w.k * w.ffe) * F;
    case WSD_YE: return (size_t)(n * w.k * w.d) * F;
    case WSD_SH_Y: return w.moe ? (size_t)(n * w.d) * F : 0;
    case WSD_SH_G: return w.moe ? (size_t)n * F : 0;
    case WSD_LOGITS: return (size_t)((n < ST_DEV_LOGIT_ROWS ? n : ST_DEV_LOGIT_ROWS) * hp->n_vocab) * F;
    case WSD_Q8: return st_cuda_q8_bytes(w.d, n < 8 ? n : 8);
    /* the SwiGLU outputs in 8 bits (decode): routed slots, and the shared expert or dense FFN */
    case WSD_GEQ: return w.moe && w.ffe % 32 == 0 ? st_cuda_q8_bytes(w.ffe, (n < 8 ? n : 8) * w.k) : 0;
    case WSD_SHQ: return ff > 0 && ff % 32 == 0 ? st_cuda_q8_bytes(ff, n < 8 ? n : 8) : 0;
    case WSD_X2: return (size_t)(n * w.d) * F;
    /* the GDN's and attention's gated outputs in 8 bits (decode), the inputs of their out products */
    case WSD_OQ: {
        int64_t k = w.vd > w.hd * w.H ? w.vd : w.hd * w.H;
        return k > 0 && k % 32 == 0 ? st_cuda_q8_bytes(k, n < 8 ? n : 8) : 0;
    }
    default: return 0;
    }
}

/* ---- what the device runs ---------------------------------------------------------------------- */

static st_status check_tensor(const st_tensor *t) {
    if (!t->data) return ST_OK;
    if (!st_cuda_type_ok(t->type))
        return st_fail(ST_ERR_UNSUPPORTED, "cuda: tensor %s is %s, which the GPU does not run (cuda_backend.h: st_cuda_type_ok)",
                       t->name, st_type_get(t->type) ? st_type_get(t->type)->name : "an unknown type");
    if (t->escale)
        for (int64_t e = 0; e < t->ne[2]; e++)
            if (t->escale[e] != 1.0f)
                return st_fail(ST_ERR_UNSUPPORTED, "cuda: tensor %s has per-expert scales", t->name);
    return ST_OK;
}

st_status st_forward_cuda_check(const struct st_model *m) {
    const st_hparams *hp = &m->hp;
    if (hp->head_dim % 32 || hp->head_dim > 256)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda: head size %lld (a multiple of 32 up to 256)", (long long)hp->head_dim);
    if (st_hp_is_hybrid(hp) && (hp->ssm_state % 32 || hp->ssm_state > 256 || hp->ssm_conv_kernel > 16))
        return st_fail(ST_ERR_UNSUPPORTED, "cuda: Gated DeltaNet state %lld, conv kernel %lld", (long long)hp->ssm_state,
                       (long long)hp->ssm_conv_kernel);
    /* Sections whose 4th part is empty make IMRoPE NeoX for text (rope.c); others are CPU-only. */
    int64_t fixed[256];
    if (hp->n_rot / 2 <= 256 && fwd_imrope_fixed_pairs(hp, fixed) > 0)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda: IMRoPE sections [%d, %d, %d, %d] leave pairs unrotated",
                       hp->rope_sections[0], hp->rope_sections[1], hp->rope_sections[2], hp->rope_sections[3]);
    ST_TRY(check_tensor(&m->tok_embd));
    ST_TRY(check_tensor(&m->output));
    for (int64_t i = 0; i < hp->n_layer; i++) {
        const st_layer *L = &m->layers[i];
        for (int j = 0; j < ST_LAYER_N_TENSORS; j++) ST_TRY(check_tensor(st_layer_tensor_get(L, j)));
        if (L->gate_exps.data && L->up_exps.data && L->gate_exps.type != L->up_exps.type)
            return st_fail(ST_ERR_UNSUPPORTED, "cuda: %s and %s differ in type", L->gate_exps.name, L->up_exps.name);
        if (L->gate_shexp.data && L->gate_shexp.type != L->up_shexp.type)
            return st_fail(ST_ERR_UNSUPPORTED, "cuda: %s and %s differ in type", L->gate_shexp.name, L->up_shexp.name);
    }
    return ST_OK;
}

/* ---- products ---------------------------------------------------------------------------------- */

/* y = scale * (W x) for n rows. */
static void dmatmul(dfwd *f, const st_tensor *w, const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy) {
    int64_t M = w->ne[1];
    if (f->plain & PLAIN_GEMM)
        for (int64_t r0 = 0; r0 < n; r0 += 8)
            DO(st_cuda_matmul(f->cu, w->type, w->data, M, w->ne[0], x + r0 * ldx, ldx, n - r0 < 8 ? n - r0 : 8,
                              y + r0 * ldy, ldy));
    else
        DO(st_cuda_matmul(f->cu, w->type, w->data, M, w->ne[0], x, ldx, n, y, ldy));
    if (w->scale != 1.0f)
        for (int64_t i = 0; i < n; i++) DO(st_cuda_axpy(f->cu, y + i * ldy, M, y + i * ldy, w->scale, 0));
}

/* Products of the normed rows h: on a decode-sized chunk, the matrices of one quantized type share
 * one launch on the prepared 8-bit rows (the GDN's four projections, attention's q, k, v). */
typedef struct dmm {
    const st_tensor *w;
    float *y;
    int64_t ldy;
} dmm;

/* The most products of h one dmatmul_h call takes (a GDN layer has four, attention three). */
#define DMM_MAX_ITEMS 8

static void dmatmul_h(dfwd *f, const dmm *it, int n_it, const float *h, int64_t n) {
    int64_t d = f->hp->n_embd;
    if (n_it > DMM_MAX_ITEMS) {
        if (f->err == ST_OK)
            f->err = st_fail(ST_ERR_INVALID, "cuda forward: %d products of one input, at most %d (DMM_MAX_ITEMS)", n_it,
                             DMM_MAX_ITEMS);
        return;
    }
    int done[DMM_MAX_ITEMS] = {0};
    for (int i = 0; i < n_it; i++) {
        if (done[i]) continue;
        const st_tensor *w = it[i].w;
        if (!f->q8.q || f->q8.n != n || !st_cuda_type_q8(w->type) || w->ne[0] != d) {
            dmatmul(f, w, h, d, n, it[i].y, it[i].ldy);
            done[i] = 1;
            continue;
        }
        st_cuda_mv mv[ST_CUDA_MV_MULTI];
        const st_tensor *ws[ST_CUDA_MV_MULTI];
        int nm = 0;
        for (int j = i; j < n_it && nm < ST_CUDA_MV_MULTI; j++) {
            if (done[j] || it[j].w->type != w->type || it[j].w->ne[0] != d) continue;
            mv[nm] = (st_cuda_mv){it[j].w->data, it[j].w->ne[1], it[j].y, it[j].ldy};
            ws[nm++] = it[j].w;
            done[j] = 1;
        }
        DO(st_cuda_matvec_q8_multi(f->cu, w->type, mv, nm, f->q8));
        for (int k = 0; k < nm; k++)
            if (ws[k]->scale != 1.0f)
                for (int64_t r = 0; r < n; r++)
                    DO(st_cuda_axpy(f->cu, mv[k].Y + r * mv[k].ldy, mv[k].M, mv[k].Y + r * mv[k].ldy, ws[k]->scale, 0));
    }
}

/* A block's gated output goes straight into 8 bits for its out product W (K = W's row length) on a
 * decode-sized chunk: returns the prepared rows' view, or q.q NULL where the plain product runs
 * (prompt chunks, float or scaled weights, a width the 8-bit form does not take). */
static st_cuda_q8 out_q8(dfwd *f, const st_tensor *w, int64_t n) {
    int64_t K = w->ne[0];
    if (n > 8 || f->unfused || f->outs_unfused || K % 32 || !st_cuda_type_q8(w->type) || w->scale != 1.0f ||
        st_forward_cuda_ws_size(f->m, WSD_OQ, n) < st_cuda_q8_bytes(K, n))
        return (st_cuda_q8){0};
    return st_cuda_q8_at(st_workspace_get(f->ws, WSD_OQ), K, n);
}

/* out = W q for the prepared rows of out_q8: the one matrix's matvec_q8_id, the same kernel as
 * dmatmul's for these rows, so the same bits. */
static void dmatmul_q8(dfwd *f, const st_tensor *w, st_cuda_q8 q, int64_t n, float *out, int64_t ldo) {
    st_cuda_experts e = {.type = w->type, .W = w->data, .M = w->ne[1], .x_group = 1, .n_slots = n};
    DO(st_cuda_matvec_q8_id(f->cu, &e, q, out, ldo));
}

static void dbias(dfwd *f, const st_tensor *b, float *y, int64_t ldy, int64_t n) {
    if (b->data) DO(st_cuda_pointwise(f->cu, ST_CUDA_ADD, y, ldy, b->f32, 0, y, ldy, n, b->ne[0]));
}

/* Independent work of a decode step on the side stream (st_cuda_fork): side_begin moves the ops
 * that follow to it (returns 0, doing nothing, for prompt chunks, unfused runs or after an error),
 * side_end returns to the main stream, side_join makes the main stream wait for the side. The
 * unfork and the join run whatever happened, so the context never stays forked. */
static int side_begin(dfwd *f, int64_t n) {
    if (n > 8 || f->unfused || f->err != ST_OK) return 0;
    return (f->err = st_cuda_fork(f->cu)) == ST_OK;
}

static void side_end(dfwd *f, int side) {
    if (!side) return;
    st_status s = st_cuda_unfork(f->cu);
    if (f->err == ST_OK) f->err = s;
}

static void side_join(dfwd *f, int side) {
    if (!side) return;
    st_status s = st_cuda_join(f->cu);
    if (f->err == ST_OK) f->err = s;
}

/* out = W_down (silu(W_gate h) * (W_up h)), through `mid` [n][ff]. */
static void dswiglu_ffn(dfwd *f, const st_tensor *gate, const st_tensor *up, const st_tensor *down, const float *h,
                        int64_t n, float *mid, float *out) {
    int64_t d = f->hp->n_embd, ff = gate->ne[1];
    int fused = n <= 8 && gate->type != ST_TYPE_F32 && gate->type != ST_TYPE_F16 && gate->type != ST_TYPE_BF16 &&
                gate->scale == 1.0f && up->scale == 1.0f;
    /* one matrix each (no ids): gate and up of the fused forms */
    st_cuda_experts gu = {.type = gate->type, .W = gate->data, .W2 = up->data, .M = ff, .x_group = 1, .n_slots = n};
    if (fused && f->q8.q && f->q8.n == n && ff % 32 == 0 && st_cuda_type_q8(down->type)) {
        /* SwiGLU straight into 8 bits, read by the down product with no quantize launch */
        st_cuda_q8 mq = st_cuda_q8_at(st_workspace_get(f->ws, WSD_SHQ), ff, n);
        st_cuda_experts dn = {.type = down->type, .W = down->data, .M = d, .x_group = 1, .n_slots = n};
        DO(st_cuda_matvec_q8_swiglu_q8(f->cu, &gu, f->q8, mq));
        DO(st_cuda_matvec_q8_id(f->cu, &dn, mq, out, d));
        if (down->scale != 1.0f)
            for (int64_t r = 0; r < n; r++) DO(st_cuda_axpy(f->cu, out + r * d, d, out + r * d, down->scale, 0));
        return;
    }
    if (fused && f->q8.q && f->q8.n == n) {
        DO(st_cuda_matvec_q8_id(f->cu, &gu, f->q8, mid, ff));
    } else if (fused) {
        DO(st_cuda_matmul_id_swiglu(f->cu, &gu, d, h, d, mid, ff));
    } else {
        float *u = BUF(WSD_FF_B);
        dmatmul(f, gate, h, d, n, mid, ff);
        dmatmul(f, up, h, d, n, u, ff);
        DO(st_cuda_pointwise(f->cu, ST_CUDA_SWIGLU, mid, ff, u, ff, mid, ff, n, ff));
    }
    dmatmul(f, down, mid, ff, n, out, d);
}

/* ---- attention (attn.c) ------------------------------------------------------------------------ */

static void dattention(dfwd *f, int il, const float *h, float *out) {
    const st_hparams *hp = f->hp;
    const st_layer *L = st_dlayer(f->w, il);
    const st_dlayer_state *S = &f->s[il];
    int gated = st_hp_is_hybrid(hp);
    int64_t n = f->n, d = hp->n_embd, hd = hp->head_dim, H = hp->n_head[il], Hkv = hp->n_head_kv[il];
    int64_t nq = hd * H * (gated ? 2 : 1), nkv = hd * Hkv;
    float *qg = BUF(WSD_Q), *k = BUF(WSD_K), *v = BUF(WSD_V);

    /* q (or q|gate per head), k, v: separate, or split from a fused [q ; k ; v]. */
    if (L->wqkv.data) {
        int64_t wd = nq + 2 * nkv;
        float *qkv = BUF(WSD_QKV);
        dmatmul_h(f, &(dmm){&L->wqkv, qkv, wd}, 1, h, n);
        dbias(f, &L->bqkv, qkv, wd, n);
        DO(st_cuda_copy2d(f->cu, qg, (size_t)nq * F, qkv, (size_t)wd * F, (size_t)nq * F, (size_t)n));
        DO(st_cuda_copy2d(f->cu, k, (size_t)nkv * F, qkv + nq, (size_t)wd * F, (size_t)nkv * F, (size_t)n));
        DO(st_cuda_copy2d(f->cu, v, (size_t)nkv * F, qkv + nq + nkv, (size_t)wd * F, (size_t)nkv * F, (size_t)n));
    } else {
        dmm it[3] = {{&L->wq, qg, nq}, {&L->wk, k, nkv}, {&L->wv, v, nkv}};
        dmatmul_h(f, it, 3, h, n);
    }
    dbias(f, &L->bq, qg, nq, n);
    dbias(f, &L->bk, k, nkv, n);
    dbias(f, &L->bv, v, nkv, n);

    /* Per-head RMSNorm (q into a dense [n][H][hd]), RoPE, then K and V into the cache. */
    /* In decode the k and v half runs on the side stream beside the q half. */
    float *q = BUF(WSD_QN);
    st_rope_params rp = fwd_rope_params(hp);
    int side = side_begin(f, n);
    DO(st_cuda_rms_norm(f->cu, k, hd, L->k_norm.f32, k, hd, n * Hkv, hd, hp->eps));
    DO(st_cuda_rope_neox(f->cu, k, hd * Hkv, hd, n, Hkv, f->pos, &rp));
    DO(st_cuda_kv_store_pos(f->cu, f->kv_type, S->k_cache, nkv, f->pos, k, nkv, n));
    DO(st_cuda_kv_store_pos(f->cu, f->kv_type, S->v_cache, nkv, f->pos, v, nkv, n));
    side_end(f, side);
    DO(st_cuda_rms_norm(f->cu, qg, gated ? 2 * hd : hd, L->q_norm.f32, q, hd, n * H, hd, hp->eps));
    DO(st_cuda_rope_neox(f->cu, q, hd * H, hd, n, H, f->pos, &rp));
    side_join(f, side);

    float *o = BUF(WSD_ATT);
    st_attn_args a = {
        .q = q, .ldq_tok = hd * H, .ldq_head = hd,
        .k_cache = S->k_cache, .v_cache = S->v_cache, .kv_type = f->kv_type,
        .pos = f->pos, .n_tok = n, .n_head = H, .n_head_kv = Hkv, .head_dim = hd,
        .n_kv = f->n_kv, .scale = 1.0f / sqrtf((float)hd),
        .out = o, .ldo_tok = hd * H,
    };
    /* tensor-core GEMMs for a prompt chunk, flash-decoding for a few rows; a verify chunk's rows
     * one by one, each split over the context as its decode step is */
    if (f->row_n_kv) {
        for (int64_t t = 0; t < n; t++) {
            st_attn_args r = a;
            r.q = q + t * hd * H;
            r.pos = f->pos + t;
            r.n_tok = 1;
            r.n_kv = f->row_n_kv[t];
            r.out = o + t * hd * H;
            DO(st_cuda_attention(f->cu, &r));
        }
    } else if (f->plain & PLAIN_ATTN) {
        DO(st_cuda_attention(f->cu, &a));
    } else {
        DO(st_cuda_attention_prefill(f->cu, &a));
    }

    /* o <- o * sigmoid(g), head j's gate being the second half of its q|g slot. */
    st_cuda_q8 oq = gated && hd % 32 == 0 ? out_q8(f, &L->wo, n) : (st_cuda_q8){0};
    if (oq.q) {
        DO(st_cuda_mul_sigmoid_q8(f->cu, o, hd, qg + hd, 2 * hd, o, n * H, hd, oq));
        dmatmul_q8(f, &L->wo, oq, n, out, d);
        return;
    }
    if (gated) DO(st_cuda_pointwise(f->cu, ST_CUDA_MUL_SIGMOID, o, hd, qg + hd, 2 * hd, o, hd, n * H, hd));
    dmatmul(f, &L->wo, o, hd * H, n, out, d);
}

/* ---- Gated DeltaNet (gdn.c) -------------------------------------------------------------------- */

static void dgdn(dfwd *f, int il, const float *h, float *out) {
    const st_hparams *hp = f->hp;
    const st_layer *L = st_dlayer(f->w, il);
    const st_dlayer_state *S = &f->s[il];
    int64_t n = f->n, d = hp->n_embd, dk = hp->ssm_state, n_k = hp->ssm_n_k, n_v = hp->ssm_n_v;
    int64_t r = n_v / n_k, kd = n_k * dk, vd = hp->ssm_inner, C = 2 * kd + vd, K = hp->ssm_conv_kernel;
    float *m = BUF(WSD_QKV), *z = BUF(WSD_Z), *a = BUF(WSD_A), *b = BUF(WSD_B);

    /* Projections: m = [Q | K | V] conv channels, z, and the gate inputs a and b. */
    float *ba = BUF(WSD_BA);
    dmm it[4];
    int n_it = 0;
    if (L->ssm_qkv.data) {
        it[n_it++] = (dmm){&L->ssm_qkv, m, C};
        it[n_it++] = (dmm){&L->ssm_gate, z, vd};
    }
    if (L->ssm_ba.data) {
        it[n_it++] = (dmm){&L->ssm_ba, ba, 2 * n_v};
    } else {
        it[n_it++] = (dmm){&L->ssm_beta, b, n_v};
        it[n_it++] = (dmm){&L->ssm_alpha, a, n_v};
    }
    dmatmul_h(f, it, n_it, h, n);
    if (!L->ssm_qkv.data) {
        /* qwen3next's legacy ssm_in, per k-head g: [q_g | k_g | v of r heads | z of r heads]. */
        float *p = BUF(WSD_CONV);
        int64_t blk = 2 * dk + 2 * r * dk, ldp = n_k * blk;
        dmatmul_h(f, &(dmm){&L->ssm_in, p, ldp}, 1, h, n);
        for (int64_t g = 0; g < n_k; g++) {
            const float *src = p + g * blk;
            DO(st_cuda_copy2d(f->cu, m + g * dk, (size_t)C * F, src, (size_t)ldp * F, (size_t)dk * F, (size_t)n));
            DO(st_cuda_copy2d(f->cu, m + kd + g * dk, (size_t)C * F, src + dk, (size_t)ldp * F, (size_t)dk * F, (size_t)n));
            DO(st_cuda_copy2d(f->cu, m + 2 * kd + g * r * dk, (size_t)C * F, src + 2 * dk, (size_t)ldp * F,
                              (size_t)(r * dk) * F, (size_t)n));
            DO(st_cuda_copy2d(f->cu, z + g * r * dk, (size_t)vd * F, src + 2 * dk + r * dk, (size_t)ldp * F,
                              (size_t)(r * dk) * F, (size_t)n));
        }
    }
    if (L->ssm_ba.data) {
        /* ssm_ba per k-head g: [b of v-heads g*r .. g*r+r-1 | a of the same heads]. */
        for (int64_t g = 0; g < n_k; g++) {
            DO(st_cuda_copy2d(f->cu, b + g * r, (size_t)n_v * F, ba + 2 * r * g, (size_t)(2 * n_v) * F, (size_t)r * F, (size_t)n));
            DO(st_cuda_copy2d(f->cu, a + g * r, (size_t)n_v * F, ba + 2 * r * g + r, (size_t)(2 * n_v) * F, (size_t)r * F,
                              (size_t)n));
        }
    }

    /* beta = sigmoid(b), g = softplus(a + dt_bias) * ssm_a */
    /* (in decode on the side stream, beside the conv) */
    float *gg = BUF(WSD_G), *beta = BUF(WSD_BETA);
    int side = side_begin(f, n);
    DO(st_cuda_gdn_gates(f->cu, a, n_v, b, n_v, L->ssm_dt.f32, L->ssm_a.f32, n, n_v, gg, beta));
    side_end(f, side);

    /* u = silu(conv(m)) with the carried state; q and k heads L2-normalised */
    float *u = BUF(WSD_CONV);
    if (f->keep_steps)
        DO(st_cuda_conv1d_steps(f->cu, m, C, S->conv, S->conv_steps, C * (K - 1), n, C, K));
    if (n == 1 && !f->unfused && !f->outs_unfused && !f->keep_steps && dk % 32 == 0 && dk <= 256) {
        DO(st_cuda_conv1d_silu_l2(f->cu, m, L->ssm_conv1d.f32, S->conv, u, C, K, 2 * n_k, dk, hp->eps));
    } else {
        DO(st_cuda_conv1d(f->cu, m, C, L->ssm_conv1d.f32, S->conv, u, C, n, C, K, 1));
        DO(st_cuda_l2_norm_heads(f->cu, u, C, n, 2 * n_k, dk, hp->eps));
    }
    side_join(f, side);

    /* the delta rule, state carried on the device */
    float *o = BUF(WSD_GDN_OUT);
    st_gdn_args g = {
        .n_tok = n, .n_k = n_k, .n_v = n_v, .d = dk,
        .head_map = hp->gdn_grouped ? ST_GDN_GROUPED : ST_GDN_TILED,
        .q = u, .k = u + kd, .ld_q = C, .ld_k = C, .v = u + 2 * kd, .ld_v = C,
        .g = gg, .beta = beta, .state = S->ssm, .out = o, .ld_out = vd,
        .scale = 1.0f / sqrtf((float)dk),
        .state_steps = f->keep_steps ? S->ssm_steps : NULL,
    };
    /* long prompt chunks: the chunked form (tensor-free, f32); decode and short chunks: per token */
    if (n > 64 && dk <= 128 && !f->keep_steps && !(f->plain & PLAIN_GDN)) DO(st_cuda_gdn_chunked(f->cu, &g));
    else DO(st_cuda_gdn_step(f->cu, &g));

    /* o_h = RMSNorm(o_h; ssm_norm) * silu(z_h); out = W_out o */
    if (f->unfused) {
        DO(st_cuda_rms_norm(f->cu, o, dk, L->ssm_norm.f32, o, dk, n * n_v, dk, hp->eps));
        DO(st_cuda_pointwise(f->cu, ST_CUDA_MUL_SILU, o, vd, z, vd, o, vd, n, vd));
    } else {
        st_cuda_q8 oq = dk % 32 == 0 ? out_q8(f, &L->ssm_out, n) : (st_cuda_q8){0};
        if (oq.q) {
            DO(st_cuda_rms_norm_mul_silu_q8(f->cu, o, L->ssm_norm.f32, z, o, oq, n * n_v, dk, hp->eps));
            dmatmul_q8(f, &L->ssm_out, oq, n, out, d);
            return;
        }
        DO(st_cuda_rms_norm_mul_silu(f->cu, o, L->ssm_norm.f32, z, o, n * n_v, dk, hp->eps));
    }
    dmatmul(f, &L->ssm_out, o, vd, n, out, d);
}

/* ---- feed-forward (ffn.c) ---------------------------------------------------------------------- */

static void dffn_dense(dfwd *f, int il, const float *h, float *out, int64_t n) {
    const st_layer *L = st_dlayer(f->w, il);
    dswiglu_ffn(f, &L->ffn_gate, &L->ffn_up, &L->ffn_down, h, n, BUF(WSD_FF_A), out);
}

/* The shared expert before its add: SH_Y = SwiGLU_sh(h), SH_G = sigmoid(g . h). */
static void shared_expert(dfwd *f, const st_layer *L, const float *h, int64_t n) {
    int64_t d = f->hp->n_embd;
    float *sg = BUF(WSD_SH_G);
    dswiglu_ffn(f, &L->gate_shexp, &L->up_shexp, &L->down_shexp, h, n, BUF(WSD_SH), BUF(WSD_SH_Y));
    /* The gate is a {d} f32 vector: one output row, never scaled. */
    DO(st_cuda_matmul(f->cu, ST_TYPE_F32, L->gate_inp_shexp.f32, 1, d, h, d, n, sg, 1));
    DO(st_cuda_pointwise(f->cu, ST_CUDA_SIGMOID, sg, 1, NULL, 0, sg, 1, n, 1));
}

/* Routing (softmax, top-k, renormalised), the k experts' SwiGLU per (token, slot) with the expert
 * id read on the device, their weighted sum per token; then the shared expert gated by
 * sigmoid(g . h). */
static void dmoe(dfwd *f, int il, const float *h, float *out, int64_t n) {
    const st_hparams *hp = f->hp;
    const st_layer *L = st_dlayer(f->w, il);
    int64_t d = hp->n_embd, E = hp->n_expert, k = hp->n_expert_used[il], ff = hp->n_ff_exp;
    float *logits = BUF(WSD_ROUTER), *w = BUF(WSD_W), *ge = BUF(WSD_GE), *ye = BUF(WSD_YE);
    int32_t *ids = st_workspace_get(f->ws, WSD_IDS);

    /* Decode: the shared expert's product and gate on the side stream, beside the routed experts;
     * only its weighted add into out waits for both branches. On a layer whose experts are in host
     * memory the side stream also takes the host CPU's share of the selected experts (the last kc
     * in selection order), after the routing; the GPU computes the others over the bus. */
    st_host_moe *hm = f->w->host_moe;
    int kc = n == 1 && !f->unfused ? st_host_moe_k_cpu(hm, il) : 0;
    int side = L->gate_shexp.data && !kc ? side_begin(f, n) : 0;
    if (side) shared_expert(f, L, h, n);
    side_end(f, side);

    if (L->gate_inp.type == ST_TYPE_F32 && L->gate_inp.scale == 1.0f && !f->unfused) {
        DO(st_cuda_router_route(f->cu, (const float *)L->gate_inp.data, E, d, h, n, logits, k, ids, w));
    } else {
        dmatmul(f, &L->gate_inp, h, d, n, logits, E);
        DO(st_cuda_moe_route(f->cu, logits, E, n, E, k, ids, w));
    }
    if (kc && (side = side_begin(f, n))) {
        /* poll (v4) only posts the request, so it goes first; a host node holds its stream */
        int first = st_host_moe_posts_first(hm);
        if (first) DO(st_host_moe_enqueue(f->cu, hm, il, ids, w, h));
        if (L->gate_shexp.data) shared_expert(f, L, h, n);
        if (!first) DO(st_host_moe_enqueue(f->cu, hm, il, ids, w, h));
        side_end(f, side);
    }
    if (!side) kc = 0;
    int64_t kg = k - kc; /* the experts a token's slots take on the GPU */

    if (n > 8 && !L->gate_up_exps.data && !(f->plain & PLAIN_MOE)) {
        /* A prompt chunk: slots sorted by expert, grouped tensor-core GEMMs (waits once), on the
         * f16 copies of the experts when the device holds them. */
        st_cuda_moe_w mw = {.type_gate = L->gate_exps.type, .type_up = L->up_exps.type, .type_down = L->down_exps.type,
                            .gate = L->gate_exps.data, .up = L->up_exps.data, .down = L->down_exps.data,
                            .n_expert = E, .d = d, .ff = ff};
        st_cuda_moe_rows rows = {.ids = ids, .wts = w, .k = k, .X = h, .ldx = d, .n_tok = n, .out = out, .ld_out = d};
        if (f->w->moe_gu_f16 && f->w->moe_gu_f16[il])
            DO(st_cuda_moe_ffn_prefill_f16(f->cu, &mw, f->w->moe_gu_f16[il], f->w->moe_down_f16[il], &rows));
        else
            DO(st_cuda_moe_ffn_prefill(f->cu, &mw, &rows));
        goto shared;
    }

    /* gate and up: one stacked [2ff][d] matrix per expert, or two */
    const st_tensor *gt = L->gate_up_exps.data ? &L->gate_up_exps : &L->gate_exps;
    const void *wg = gt->data;
    const void *wu = L->gate_up_exps.data ? (const char *)gt->data + (size_t)ff * gt->row_bytes : L->up_exps.data;
    const st_tensor *dn = &L->down_exps;
    /* slot s = t*k + j: token t's j-th expert; gate and up read row t, down reads slot s */
    st_cuda_experts gu = {.type = gt->type, .W = wg, .W2 = wu, .expert_bytes = (size_t)gt->ne[1] * gt->row_bytes,
                          .n_expert = E, .M = ff, .ids = ids, .x_group = k, .n_slots = n * kg};
    st_cuda_experts down = {.type = dn->type, .W = dn->data, .expert_bytes = (size_t)dn->ne[1] * dn->row_bytes,
                            .n_expert = E, .M = d, .ids = ids, .x_group = 1, .n_slots = n * kg};
    if (gt->type == ST_TYPE_F32 || gt->type == ST_TYPE_F16 || gt->type == ST_TYPE_BF16) {
        float *up = ye; /* free until the down product */
        st_cuda_experts g1 = gu, u1 = gu;
        g1.W2 = u1.W2 = NULL;
        u1.W = wu;
        DO(st_cuda_matmul_id(f->cu, &g1, d, h, d, ge, ff));
        DO(st_cuda_matmul_id(f->cu, &u1, d, h, d, up, ff));
        DO(st_cuda_pointwise(f->cu, ST_CUDA_SWIGLU, ge, ff, up, ff, ge, ff, n * kg, ff));
    } else if (f->q8.q && f->q8.n == n && ff % 32 == 0 && st_cuda_type_q8(dn->type)) {
        /* decode: SwiGLU straight into 8 bits, then the down product on it */
        st_cuda_q8 gq = st_cuda_q8_at(st_workspace_get(f->ws, WSD_GEQ), ff, n * kg);
        DO(st_cuda_matvec_q8_swiglu_q8(f->cu, &gu, f->q8, gq));
        DO(st_cuda_matvec_q8_id(f->cu, &down, gq, ye, d));
        if (L->gate_shexp.data && side && !kc && !f->outs_unfused) {
            /* the shared expert (on the side stream, done by now) added in the same pass */
            side_join(f, side);
            DO(st_cuda_moe_combine_shared(f->cu, ye, d, w, n, kg, d, out, d, BUF(WSD_SH_Y), d, BUF(WSD_SH_G)));
            return;
        }
        DO(st_cuda_moe_combine(f->cu, ye, d, w, n, kg, d, out, d, 0));
        goto shared;
    } else if (f->q8.q && f->q8.n == n) {
        DO(st_cuda_matvec_q8_id(f->cu, &gu, f->q8, ge, ff));
    } else {
        DO(st_cuda_matmul_id_swiglu(f->cu, &gu, d, h, d, ge, ff));
    }
    DO(st_cuda_matmul_id(f->cu, &down, ff, ge, ff, ye, d));
    DO(st_cuda_moe_combine(f->cu, ye, d, w, n, kg, d, out, d, 0));

shared:
    side_join(f, side);
    if (L->gate_shexp.data) {
        if (!side) shared_expert(f, L, h, n);
        DO(st_cuda_moe_combine(f->cu, BUF(WSD_SH_Y), d, BUF(WSD_SH_G), n, 1, d, out, d, 1));
    }
    if (kc) DO(st_host_moe_finish(f->cu, hm, il, out));
}

/* ---- the pass ---------------------------------------------------------------------------------- */

/* x += r (when r is not NULL), h = RMSNorm(x; w) for `rows` rows, and h's 8-bit form for a
 * decode-sized chunk (f->q8), in one kernel; unfused: the plain ops. */
static void dnorm(dfwd *f, float *x, const float *r, const st_tensor *w, float *h, int64_t rows) {
    int64_t d = f->hp->n_embd;
    f->q8 = (st_cuda_q8){0};
    if (f->unfused) {
        if (r) DO(st_cuda_pointwise(f->cu, ST_CUDA_ADD, x, d, r, d, x, d, rows, d));
        DO(st_cuda_rms_norm(f->cu, x, d, w->f32, h, d, rows, d, f->hp->eps));
        return;
    }
    if (rows <= 8 && d % 32 == 0) f->q8 = st_cuda_q8_at(st_workspace_get(f->ws, WSD_Q8), d, rows);
    DO(st_cuda_add_rms_norm_q8(f->cu, x, r, w->f32, h, f->q8, rows, d, f->hp->eps));
}

/* The MTP head's inputs of a prompt chunk (st_dchunk.h_host): the last layer's FFN on every row
 * of x (the residual before it, left as it is) through WSD_X2, the output norm, down to h_host. */
static void hidden_rows(dfwd *f, int il, const float *x, float *h_host) {
    int64_t n = f->n, d = f->hp->n_embd;
    const st_layer *L = st_dlayer(f->w, il);
    float *x2 = BUF(WSD_X2), *h = BUF(WSD_H), *t = BUF(WSD_T);
    DO(st_cuda_copy(f->cu, x2, x, (size_t)(n * d) * F));
    dnorm(f, x2, NULL, &L->ffn_norm, h, n);
    if (st_hp_is_moe(f->hp)) dmoe(f, il, h, t, n);
    else dffn_dense(f, il, h, t, n);
    dnorm(f, x2, t, &f->w->output_norm, h, n);
    if (f->err == ST_OK) f->err = st_cuda_download(f->cu, h_host, h, (size_t)(n * d) * F);
}

st_status st_forward_cuda(st_cuda *cu, const struct st_model *m, const st_dweights *w, st_dlayer_state *state,
                          uint32_t kv_type, st_workspace *ws, const st_dchunk *c, st_dlogits_fn emit, void *emit_ctx) {
    const st_hparams *hp = &m->hp;
    int64_t n = c->n, d = hp->n_embd, V = hp->n_vocab;
    if (n <= 0 || n > ws->rows)
        return st_fail(ST_ERR_INVALID, "cuda forward: chunk of %lld rows, workspace holds %lld", (long long)n, (long long)ws->rows);
    if (c->keep_steps && (n > ST_DEV_VERIFY_ROWS || !c->logits_all))
        return st_fail(ST_ERR_INVALID, "cuda forward: a verify chunk of %lld rows (1..%d, every row's logits)", (long long)n,
                       ST_DEV_VERIFY_ROWS);
    dfwd fw = {.cu = cu, .m = m, .hp = hp, .w = w, .s = state, .kv_type = kv_type, .ws = ws, .n = n, .n_kv = c->n_kv,
               .pos = st_workspace_get(ws, WSD_POS), .prof = c->tokens_host ? c->prof : NULL, .unfused = c->unfused, .outs_unfused = c->outs_unfused, .plain = plain_paths(),
               .keep_steps = c->keep_steps && st_hp_is_hybrid(hp), .row_n_kv = c->row_n_kv, .err = ST_OK};
    dfwd *f = &fw;
    float *x = BUF(WSD_X), *h = BUF(WSD_H), *t = BUF(WSD_T);
    if (f->prof) {
        f->prof->chunks++;
        f->prof->rows += n;
    }

    /* x = token_embd[token] */
    prof_begin(f);
    if (c->tokens_host)
        DO(st_cuda_get_rows(cu, w->tok_embd.type, w->tok_embd.data, V, d, c->tokens_host, n, x, d));
    else
        DO(st_cuda_get_rows_dev(cu, w->tok_embd.type, w->tok_embd.data, V, d, st_workspace_get(ws, WSD_TOK), n, x, d));
    prof_end(f, DPROF_EMBED);

    /* Each sublayer's output is added to x by the norm that follows it. */
    int hybrid = st_hp_is_hybrid(hp), last_only = !c->logits_all;
    const float *pending = NULL;
    for (int il = 0; il < hp->n_layer; il++) {
        const st_layer *L = st_dlayer(w, il);
        /* x += Mixer(RMSNorm(x)) */
        prof_begin(f);
        dnorm(f, x, pending, &L->attn_norm, h, n);
        prof_end(f, DPROF_NORM_ADD);
        prof_begin(f);
        int linear = hybrid && hp->is_linear[il];
        if (linear) dgdn(f, il, h, t);
        else dattention(f, il, h, t);
        prof_end(f, linear ? DPROF_GDN : DPROF_ATTN);

        /* x += FFN(RMSNorm(x; ffn_norm or post_attention_norm)); only the rows that need logits go on
         * after the last mixer. */
        prof_begin(f);
        int64_t rows = n;
        if (last_only && il == hp->n_layer - 1 && n > 1) {
            DO(st_cuda_pointwise(cu, ST_CUDA_ADD, x, d, t, d, x, d, n, d));
            if (c->h_host) hidden_rows(f, il, x, c->h_host);
            DO(st_cuda_copy(cu, x, x + (n - 1) * d, (size_t)d * F));
            rows = 1;
            dnorm(f, x, NULL, &L->ffn_norm, h, rows);
        } else {
            if (last_only && il == hp->n_layer - 1) rows = 1;
            dnorm(f, x, t, &L->ffn_norm, h, rows);
        }
        prof_end(f, DPROF_NORM_ADD);
        prof_begin(f);
        if (st_hp_is_moe(hp)) dmoe(f, il, h, t, rows);
        else dffn_dense(f, il, h, t, rows);
        prof_end(f, DPROF_FFN);
        pending = t;
    }

    /* logits = W_out RMSNorm(x; output_norm), for the rows that need them */
    int64_t n_out = last_only ? 1 : n;
    prof_begin(f);
    dnorm(f, x, pending, &w->output_norm, h, n_out);
    float *lg = BUF(WSD_LOGITS);
    if (last_only) {
        dmatmul_h(f, &(dmm){&w->output, lg, V}, 1, h, 1);
        prof_end(f, DPROF_HEAD);
        return f->err;
    }
    if (f->row_n_kv) {
        /* a verify chunk: the head on the prepared rows, as a decode step's */
        dmatmul_h(f, &(dmm){&w->output, lg, V}, 1, h, n_out);
        if (f->err == ST_OK && emit) f->err = emit(emit_ctx, 0, n_out);
        prof_end(f, DPROF_HEAD);
        return f->err;
    }
    for (int64_t r0 = 0; r0 < n_out && f->err == ST_OK; r0 += ST_DEV_LOGIT_ROWS) {
        int64_t nr = n_out - r0 < ST_DEV_LOGIT_ROWS ? n_out - r0 : ST_DEV_LOGIT_ROWS;
        dmatmul(f, &w->output, h + r0 * d, d, nr, lg, V);
        if (f->err == ST_OK && emit) f->err = emit(emit_ctx, r0, nr);
    }
    prof_end(f, DPROF_HEAD);
    return f->err;
}
