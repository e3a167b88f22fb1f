/* ffn.c: the feed-forward blocks (MODELS.md §2.7, §2.8): the dense SwiGLU on any backend, and the
 * CPU's MoE layer (the GPU's is model/cuda/moe_cuda.c; the pass runs the one its driver set).
 *
 * Dense SwiGLU: out = W_down (silu(W_gate h) * (W_up h)).
 * MoE: router logits r = W_router h; softmax over E; the k most probable experts with weights
 * renormalised over the selection; expert e: y_e = W_down[e] (silu(W_gate[e] h) * (W_up[e] h)),
 * each product times the expert's .scale when present; out = sum over the selection, in selection
 * order, of w_e y_e. Shared expert (qwen35moe, qwen3next): out += sigmoid(g . h) * SwiGLU_sh(h).
 *
 * For a chunk the routed rows are grouped by expert (a counting sort), so each expert's weights
 * are read once per chunk; the shared expert follows as one more block of all n rows. All of
 * them run as one pool job (moe_exec.c), which also sums the outputs back per token in selection
 * order. A layout that job cannot run (gate and up wanting different activation forms) takes the
 * per-matmul path below. */
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "model/blocks.h"
#include "model/forward_ws.h"
#include "model/fwd_matmul.h"
#include "model/moe_exec.h"
#include "model/rows.h"
#include "quant/types.h"

void fwd_ffn_dense(st_fwd *f, int il, const float *h, float *out, int64_t n) {
    const st_layer *L = &f->m->layers[il];
    int64_t d = f->hp->n_embd;
    st_mat gate = fwd_mat(&L->ffn_gate), up = fwd_mat(&L->ffn_up), down = fwd_mat(&L->ffn_down);
    FWD_OP(f, swiglu_ffn, &gate, &up, &down, h, d, n, st_workspace_f32(f->ws, WS_FF_A), st_workspace_f32(f->ws, WS_FF_B),
           out, d);
}

/* Expert e's slice of a {K, M, E} expert tensor. */
static const void *expert_matrix(const st_tensor *t, int64_t e) {
    return (const char *)t->data + (size_t)e * (size_t)t->ne[1] * t->row_bytes;
}

static void expert_matmul(st_fwd *f, const st_tensor *t, int64_t e, const float *x, int64_t ldx, int64_t n,
                          float *y, int64_t ldy) {
    int64_t M = t->ne[1];
    st_matmul(f->pool, t->type, t->ne[0],
              &(st_matmul_part){.W = expert_matrix(t, e), .M = M, .X = x, .ldx = ldx, .n = n, .Y = y, .ldy = ldy}, f->mm_scratch);
    if (t->escale && t->escale[e] != 1.0f)
        for (int64_t i = 0; i < n; i++) st_op_scale(y + i * ldy, M, y + i * ldy, t->escale[e]);
}

/* SwiGLU of the shared expert, gated by sigmoid(g . h), added into out. */
static void shared_expert(st_fwd *f, const st_layer *L, const float *h, float *out, int64_t n) {
    int64_t d = f->hp->n_embd, sh = L->gate_shexp.ne[1];
    float *g = st_workspace_f32(f->ws, WS_FF_A), *u = st_workspace_f32(f->ws, WS_FF_B);
    float *y = st_workspace_f32(f->ws, WS_SH_OUT), *gate = st_workspace_f32(f->ws, WS_SH_G);
    fwd_matmul(f, &L->gate_shexp, h, d, n, g, sh);
    fwd_matmul(f, &L->up_shexp, h, d, n, u, sh);
    st_op_swiglu(f->pool, g, sh, u, sh, g, sh, n, sh);
    fwd_matmul(f, &L->down_shexp, g, sh, n, y, d);
    /* The gate is a {d} f32 vector: one output row, never scaled. */
    st_matmul(f->pool, ST_TYPE_F32, d,
              &(st_matmul_part){.W = L->gate_inp_shexp.f32, .M = 1, .X = h, .ldx = d, .n = n, .Y = gate, .ldy = 1}, f->mm_scratch);
    st_op_sigmoid(NULL, gate, n, gate, n, 1, n);
    for (int64_t t = 0; t < n; t++) st_op_scale(y + t * d, d, y + t * d, gate[t]);
    st_op_add(f->pool, out, d, y, d, out, d, n, d);
}

/* The per-matmul path: each used expert's rows through three st_matmul calls. */
static void routed_experts_each(st_fwd *f, const st_layer *L, const int64_t *offset, const float *xe, float *ye) {
    int64_t d = f->hp->n_embd, E = f->hp->n_expert, ff = f->hp->n_ff_exp;
    float *ge = st_workspace_f32(f->ws, WS_GE), *ue = st_workspace_f32(f->ws, WS_UE);
    for (int64_t e = 0; e < E; e++) {
        int64_t p0 = offset[e], rows = offset[e + 1] - p0;
        if (rows == 0) continue;
        const float *x = xe + p0 * d;
        if (L->gate_up_exps.data) {
            /* Fused: rows 0..ff-1 of the expert's matrix are the gate, ff..2ff-1 the up. */
            float *gu = ge + p0 * 2 * ff;
            expert_matmul(f, &L->gate_up_exps, e, x, d, rows, gu, 2 * ff);
            st_op_swiglu(f->pool, gu, 2 * ff, gu + ff, 2 * ff, gu, 2 * ff, rows, ff);
            expert_matmul(f, &L->down_exps, e, gu, 2 * ff, rows, ye + p0 * d, d);
        } else {
            float *g = ge + p0 * ff, *u = ue + p0 * ff;
            expert_matmul(f, &L->gate_exps, e, x, d, rows, g, ff);
            expert_matmul(f, &L->up_exps, e, x, d, rows, u, ff);
            st_op_swiglu(f->pool, g, ff, u, ff, g, ff, rows, ff);
            expert_matmul(f, &L->down_exps, e, g, ff, rows, ye + p0 * d, d);
        }
    }
}

void fwd_moe(st_fwd *f, int il, const float *h, float *out, int64_t n) {
    const st_hparams *hp = f->hp;
    const st_layer *L = &f->m->layers[il];
    st_workspace *ws = f->ws;
    int64_t d = hp->n_embd, E = hp->n_expert, k = hp->n_expert_used[il], ff = hp->n_ff_exp;

    /* Routing. */
    float *logits = st_workspace_f32(ws, WS_ROUTER), *w = st_workspace_f32(ws, WS_W);
    int32_t *ids = st_workspace_get(ws, WS_IDS);
    /* The router and the shared expert's gate read the same rows: one job for both in decode. */
    int has_shared = L->gate_shexp.data != NULL;
    float *gate = st_workspace_f32(ws, WS_SH_G);
    st_tensor gate_vec = {.name = L->gate_inp_shexp.name, .type = ST_TYPE_F32, .ne = {d, 1, 1, 1},
                          .data = L->gate_inp_shexp.f32, .row_bytes = (size_t)d * sizeof(float), .scale = 1.0f};
    fwd_mm_item it[2] = {{&L->gate_inp, logits, E}, {&gate_vec, gate, 1}};
    fwd_matmul_many(f, h, d, n, it, has_shared ? 2 : 1);
    st_op_moe_route(logits, E, n, E, k, ids, w);

    /* Group the n*k (token, slot) pairs by expert: offset[e] .. offset[e+1] in `order`, and
     * slot_pos[t*k+j] = where pair (t, j) landed. */
    int64_t *count = st_workspace_get(ws, WS_EXPERT_ROWS), *offset = count + E + 1;
    int32_t *order = st_workspace_get(ws, WS_ORDER), *slot_pos = st_workspace_get(ws, WS_SLOT);
    memset(count, 0, (size_t)(E + 1) * sizeof *count);
    for (int64_t i = 0; i < n * k; i++) count[ids[i]]++;
    offset[0] = 0;
    for (int64_t e = 0; e < E; e++) offset[e + 1] = offset[e] + count[e];
    for (int64_t e = 0; e < E; e++) count[e] = offset[e];
    for (int64_t i = 0; i < n * k; i++) {
        int64_t p = count[ids[i]]++;
        order[p] = (int32_t)(i / k);
        slot_pos[i] = (int32_t)p;
    }

    /* The shared expert's rows follow the routed ones: gathered row n*k + t is token t. */
    float *ye = st_workspace_f32(ws, WS_YE);
    int64_t nk = n * k, P = nk + (has_shared ? n : 0);
    for (int64_t t = nk; t < P; t++) order[t] = (int32_t)(t - nk);

    /* One pool job for every expert of the layer; the per-matmul path for layouts it cannot run. */
    moe_entry *ent = st_workspace_get(ws, WS_ENT);
    int n_ent = 0, fused_ok = 1;
    for (int64_t e = 0; e < E && fused_ok; e++) {
        if (offset[e + 1] == offset[e]) continue;
        fused_ok = moe_entry_init(&ent[n_ent], &L->gate_exps, &L->up_exps, &L->gate_up_exps, &L->down_exps, e, ff);
        ent[n_ent].p0 = offset[e];
        ent[n_ent++].rows = offset[e + 1] - offset[e];
    }
    if (has_shared && fused_ok) {
        fused_ok = moe_entry_init(&ent[n_ent], &L->gate_shexp, &L->up_shexp, NULL, &L->down_shexp, 0, L->gate_shexp.ne[1]);
        ent[n_ent].p0 = nk;
        ent[n_ent++].rows = n;
    }
    /* sigmoid(g . h): the gate is a {d} f32 vector, one output row, never scaled. */
    if (has_shared) st_op_sigmoid(NULL, gate, n, gate, n, 1, n);
    if (fused_ok) {
        moe_args a = {
            .ent = ent, .n_ent = n_ent, .d = d, .P = P, .x = h, .x_row = order,
            .act1 = st_workspace_get(ws, WS_ACT1), .act1_row = fwd_moe_act_row(f->m, 0),
            .act2 = st_workspace_get(ws, WS_ACT2), .act2_row = fwd_moe_act_row(f->m, 1),
            .gu = st_workspace_f32(ws, WS_GE), .ld_gu = fwd_moe_gu_width(hp), .y = ye,
            .out = out, .n_tok = n, .k = k, .w = w, .slot = slot_pos,
            .shared_gate = has_shared ? gate : NULL, .shared_p0 = nk,
        };
        moe_exec(f->pool, &a);
        return;
    }

    /* The per-matmul path: gather, multiply expert by expert, combine. */
    float *xe = st_workspace_f32(ws, WS_XE);
    for (int64_t p = 0; p < nk; p++) memcpy(xe + p * d, h + (int64_t)order[p] * d, (size_t)d * sizeof(float));
    routed_experts_each(f, L, offset, xe, ye);
    for (int64_t t = 0; t < n; t++) {
        float *o = out + t * d;
        st_op_scale(o, d, ye + (int64_t)slot_pos[t * k] * d, w[t * k]);
        for (int64_t j = 1; j < k; j++) st_op_axpy(o, d, ye + (int64_t)slot_pos[t * k + j] * d, w[t * k + j]);
    }
    if (has_shared) shared_expert(f, L, h, out, n);
}
