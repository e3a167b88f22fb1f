/* forward_cuda.c: one chunk through the model on the GPU (see forward_cuda.h): the driver around
 * the forward every backend shares (model/stacks.h: the layer stacks and blocks, written once
 * against the op table), run on the GPU's table (backend/cuda/backend_cuda.c); and the GPU's MoE
 * layer (routing, the experts' products over the bus for the layers in host memory, the shared
 * expert on the side stream), which the pass runs as its f->moe.
 *
 * Errors: the first failing op's status is kept in the backend (be->err) and the ops after it are
 * skipped, so each block reads as the math. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/backend_cuda.h"
#include "model/blocks.h"
#include "model/cuda/forward_cuda.h"
#include "model/cuda/host_experts.h"
#include "model/forward_ws.h"
#include "model/fwd_matmul.h"
#include "model/rope.h"
#include "model/rows.h"
#include "model/stacks.h"
#include "quant/types.h"

_Static_assert((int)DPROF_EMBED == FWD_PROF_EMBED && (int)DPROF_ATTN == FWD_PROF_ATTN && (int)DPROF_GDN == FWD_PROF_GDN &&
                   (int)DPROF_FFN == FWD_PROF_FFN && (int)DPROF_NORM_ADD == FWD_PROF_NORM_ADD &&
                   (int)DPROF_HEAD == FWD_PROF_HEAD && (int)DPROF_COUNT == FWD_PROF_COUNT,
               "forward_cuda.h's profile kinds are the forward's (rows.h)");

const char *const st_dprofile_names[DPROF_COUNT] = {"embed", "attention", "gated deltanet", "ffn/moe", "norms+adds", "head"};

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

size_t st_forward_cuda_ws_size(const void *ctx, int id, int64_t n) {
    const st_ws_plan *plan = ctx;
    const struct st_model *m = plan->m;
    const st_hparams *hp = &m->hp;
    const fwd_widths w = fwd_widths_of(hp);
    int64_t ff = max_dense_ff(m);
    switch (id) {
    case WS_X: case WS_H: case WS_T: return (size_t)(n * w.d) * F;
    case WS_POS: case WS_TOK: return (size_t)n * sizeof(int32_t);
    case WS_Q: return (size_t)(n * w.qw) * F;
    case WS_QN: case WS_ATT: return (size_t)(n * w.hd * w.H) * F;
    case WS_K: case WS_V: return (size_t)(n * w.hd * w.Hkv) * F;
    case WS_QKV: return (size_t)(n * w.qkv) * F;
    case WS_CONV: return (size_t)(n * (hp->arch == ST_ARCH_QWEN3NEXT ? w.C + w.vd : w.C)) * F;
    case WS_Z: case WS_GDN_OUT: return (size_t)(n * w.vd) * F;
    case WS_BA: return hp->arch == ST_ARCH_QWEN3NEXT ? (size_t)(n * 2 * w.n_v) * F : 0;
    case WS_A: case WS_B: case WS_GATE_G: case WS_GATE_BETA: return (size_t)(n * w.n_v) * F;
    case WS_FF_A: case WS_FF_B: return (size_t)(n * ff) * F;
    case WS_ROUTER: return (size_t)(n * w.E) * F;
    case WS_IDS: return (size_t)(n * w.k) * sizeof(int32_t);
    case WS_W: return (size_t)(n * w.k) * F;
    case WS_GE: return (size_t)(n * w.k * w.ffe) * F;
    case WS_YE: return (size_t)(n * w.k * w.d) * F;
    case WS_SH_OUT: return w.moe ? (size_t)(n * w.d) * F : 0;
    case WS_SH_G: return w.moe ? (size_t)n * F : 0;
    case WS_LOGITS: return (size_t)((n < ST_DEV_LOGIT_ROWS ? n : ST_DEV_LOGIT_ROWS) * hp->n_vocab) * F;
    /* the routed slots' SwiGLU outputs in 8 bits (decode) */
    case WS_GEQ: return w.moe && w.ffe % 32 == 0 ? st_cuda_q8_bytes(w.ffe, (n < 8 ? n : 8) * w.k) : 0;
    case WS_X2: return (size_t)(n * w.d) * F;
    /* qwen4exp: the CPU's sizes; the selection's scratch is the context's (st_cuda_qsa_select) */
    case WS_QSA_SCRATCH: return 0;
    default: return fwd_q4_ws_size(plan, id, n);
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

/* ---- the MoE layer -------------------------------------------------------------------------- */

#define CB(f) ((st_cuda_backend *)(f)->be)
#define DO(expr) do { if (CB(f)->be.err == ST_OK) CB(f)->be.err = (expr); } while (0)

/* The shared expert before its add: SH_OUT = SwiGLU_sh(h), SH_G = sigmoid(g . h). */
static void shared_expert(st_fwd *f, const st_layer *L, const float *h, int64_t n) {
    int64_t d = f->hp->n_embd;
    float *sg = BUF(WS_SH_G);
    st_mat gate = fwd_mat(&L->gate_shexp), up = fwd_mat(&L->up_shexp), down = fwd_mat(&L->down_shexp);
    FWD_OP(f, swiglu_ffn, &gate, &up, &down, h, d, n, BUF(WS_FF_A), BUF(WS_FF_B), BUF(WS_SH_OUT), d);
    /* The gate is a {d} f32 vector: one output row, never scaled. */
    st_mat g = {.type = ST_TYPE_F32, .data = L->gate_inp_shexp.f32, .K = d, .M = 1, .row_bytes = (size_t)d * F, .scale = 1.0f};
    FWD_OP(f, matmul, &g, h, d, n, sg, 1);
    FWD_OP(f, pointwise, ST_PW_SIGMOID, sg, 1, NULL, 0, sg, 1, n, 1, NULL);
}

/* Routing (softmax, top-k, renormalised), the k experts' SwiGLU per (token, slot) with the expert
 * id read on the device, their weighted sum per token; then the shared expert gated by
 * sigmoid(g . h). */
static void moe_cuda(st_fwd *f, int il, const float *h, float *out, int64_t n) {
    st_cuda_backend *cb = CB(f);
    st_cuda *cu = cb->cu;
    const st_dweights *dw = f->moe_ctx;
    const st_hparams *hp = f->hp;
    const st_layer *L = &f->m->layers[il];
    int64_t d = hp->n_embd, E = hp->n_expert, k = hp->n_expert_used[il], ff = hp->n_ff_exp;
    float *logits = BUF(WS_ROUTER), *w = BUF(WS_W), *ge = BUF(WS_GE), *ye = BUF(WS_YE);
    int32_t *ids = st_workspace_get(f->ws, WS_IDS);
    if (cb->be.err != ST_OK) return;
    st_cuda_backend_wrote(cb, out, n * d);
    const st_cuda_prep *p = st_cuda_backend_prepared(cb, h, n, d);
    st_cuda_q8 q8 = p ? p->q : (st_cuda_q8){0};

    /* Decode: the shared expert's product and gate on the side stream, beside the routed experts;
     * only its weighted add into out waits for both branches. On a layer whose experts are in host
     * memory the side stream also takes the host CPU's share of the selected experts (the last kc
     * in selection order), after the routing; the GPU computes the others over the bus. */
    st_host_moe *hm = dw->host_moe;
    int kc = n == 1 && !cb->unfused ? st_host_moe_k_cpu(hm, il) : 0;
    int side = L->gate_shexp.data && !kc ? FWD_OP(f, fork, n) : 0;
    if (side) shared_expert(f, L, h, n);
    FWD_OP(f, unfork, side);

    if (L->gate_inp.type == ST_TYPE_F32 && L->gate_inp.scale == 1.0f && !cb->unfused) {
        DO(st_cuda_router_route(cu, (const float *)L->gate_inp.data, E, d, h, n, logits, k, ids, w));
    } else {
        fwd_matmul(f, &L->gate_inp, h, d, n, logits, E);
        DO(st_cuda_moe_route(cu, logits, E, n, E, k, ids, w));
    }
    if (kc && (side = FWD_OP(f, fork, n))) {
        /* poll (v4) only posts the request, so it goes first; a host node holds its stream */
        int first = st_host_moe_posts_first(hm);
        if (first) DO(st_host_moe_enqueue(cu, hm, il, ids, w, h));
        if (L->gate_shexp.data) shared_expert(f, L, h, n);
        if (!first) DO(st_host_moe_enqueue(cu, hm, il, ids, w, h));
        FWD_OP(f, unfork, side);
    }
    if (!side) kc = 0;
    int64_t kg = k - kc; /* the experts a token's slots take on the GPU */

    if (n > 8 && !L->gate_up_exps.data && !(cb->plain & 2 /* PLAIN_MOE */)) {
        /* A prompt chunk: slots sorted by expert, grouped tensor-core GEMMs (waits once), on the
         * f16 copies of the experts when the device holds them. */
        st_cuda_moe_w mw = {.type_gate = L->gate_exps.type, .type_up = L->up_exps.type, .type_down = L->down_exps.type,
                            .gate = L->gate_exps.data, .up = L->up_exps.data, .down = L->down_exps.data,
                            .n_expert = E, .d = d, .ff = ff};
        st_cuda_moe_rows rows = {.ids = ids, .wts = w, .k = k, .X = h, .ldx = d, .n_tok = n, .out = out, .ld_out = d};
        if (dw->moe_gu_f16 && dw->moe_gu_f16[il])
            DO(st_cuda_moe_ffn_prefill_f16(cu, &mw, dw->moe_gu_f16[il], dw->moe_down_f16[il], &rows));
        else
            DO(st_cuda_moe_ffn_prefill(cu, &mw, &rows));
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
        DO(st_cuda_matmul_id(cu, &g1, d, h, d, ge, ff));
        DO(st_cuda_matmul_id(cu, &u1, d, h, d, up, ff));
        DO(st_cuda_pointwise(cu, ST_CUDA_SWIGLU, ge, ff, up, ff, ge, ff, n * kg, ff));
    } else if (q8.q && ff % 32 == 0 && st_cuda_type_q8(dn->type)) {
        /* decode: SwiGLU straight into 8 bits, then the down product on it */
        st_cuda_q8 gq = st_cuda_q8_at(st_workspace_get(f->ws, WS_GEQ), ff, n * kg);
        DO(st_cuda_matvec_q8_swiglu_q8(cu, &gu, q8, gq));
        DO(st_cuda_matvec_q8_id(cu, &down, gq, ye, d));
        if (L->gate_shexp.data && side && !kc && !cb->outs_unfused) {
            /* the shared expert (on the side stream, done by now) added in the same pass */
            FWD_OP(f, join, side);
            DO(st_cuda_moe_combine_shared(cu, ye, d, w, n, kg, d, out, d, BUF(WS_SH_OUT), d, BUF(WS_SH_G)));
            return;
        }
        DO(st_cuda_moe_combine(cu, ye, d, w, n, kg, d, out, d, 0));
        goto shared;
    } else if (q8.q) {
        DO(st_cuda_matvec_q8_id(cu, &gu, q8, ge, ff));
    } else {
        DO(st_cuda_matmul_id_swiglu(cu, &gu, d, h, d, ge, ff));
    }
    DO(st_cuda_matmul_id(cu, &down, ff, ge, ff, ye, d));
    DO(st_cuda_moe_combine(cu, ye, d, w, n, kg, d, out, d, 0));

shared:
    FWD_OP(f, join, side);
    if (L->gate_shexp.data) {
        if (!side) shared_expert(f, L, h, n);
        DO(st_cuda_moe_combine(cu, BUF(WS_SH_OUT), d, BUF(WS_SH_G), n, 1, d, out, d, 1));
    }
    if (kc) DO(st_host_moe_finish(cu, hm, il, out));
}

/* ---- the pass ---------------------------------------------------------------------------------- */

void st_forward_cuda_view(const struct st_model *m, const st_dweights *w, struct st_model *view) {
    *view = *m;
    view->tok_embd = w->tok_embd;
    view->output = w->output;
    view->output_norm = w->output_norm;
    view->hc_head_norm = w->hc_head_norm;
    view->hc_head_down = w->hc_head_down;
    view->hc_head_up = w->hc_head_up;
    view->layers = w->layers;     /* the PLE table stays m's: its rows are gathered on the host */
}

int64_t st_forward_cuda_prep_width(const struct st_model *m) {
    const fwd_widths w = fwd_widths_of(&m->hp);
    int64_t k = w.d, ff = max_dense_ff(m);
    if (w.vd > k) k = w.vd;
    if (w.hd * w.H > k) k = w.hd * w.H;
    if (ff > k) k = ff;
    return k;
}

st_status st_forward_cuda(st_cuda_backend *be, const struct st_model *m, const st_dweights *w, st_state *state,
                          st_workspace *ws, const st_dchunk *c, st_dlogits_fn emit, void *emit_ctx) {
    const st_hparams *hp = &m->hp;
    int64_t n = c->n, d = hp->n_embd, V = hp->n_vocab;
    if (n <= 0 || n > ws->rows)
        return st_fail(ST_ERR_INVALID, "cuda forward: chunk of %lld rows, workspace holds %lld", (long long)n, (long long)ws->rows);
    if (c->keep_steps && (n > ST_DEV_VERIFY_ROWS || !c->logits_all))
        return st_fail(ST_ERR_INVALID, "cuda forward: a verify chunk of %lld rows (1..%d, every row's logits)", (long long)n,
                       ST_DEV_VERIFY_ROWS);
    st_dprofile *prof = c->tokens_host ? c->prof : NULL;
    st_cuda_backend_begin(be, c->unfused, c->outs_unfused, prof ? prof->ms : NULL);
    st_fwd fw = {.m = m, .hp = hp, .s = state, .ws = ws, .be = &be->be, .moe = moe_cuda, .moe_ctx = w, .n = n,
                 .pos0 = c->pos0, .pos = st_workspace_get(ws, WS_POS), .n_kv = c->n_kv, .row_n_kv = c->row_n_kv,
                 .keep_steps = c->keep_steps && st_hp_is_hybrid(hp), .hidden = c->h_host ? st_workspace_f32(ws, WS_X2) : NULL,
                 .ple_win_given = c->ple_win_given};
    st_fwd *f = &fw;
    float *x = BUF(WS_X), *h = BUF(WS_H);
    if (prof) {
        prof->chunks++;
        prof->rows += n;
    }

    /* x = token_embd[token] */
    fwd_prof_begin(f);
    if (c->tokens_host) FWD_OP(f, get_rows, m->tok_embd.type, m->tok_embd.data, V, d, c->tokens_host, n, x, d);
    else DO(st_cuda_get_rows_dev(be->cu, m->tok_embd.type, m->tok_embd.data, V, d, st_workspace_get(ws, WS_TOK), n, x, d));
    fwd_prof_end(f, FWD_PROF_EMBED);

    /* The layers and the final norm: the rows that need logits (the last, or all) in WS_H. */
    int last_only = !c->logits_all;
    int64_t n_out = last_only ? 1 : n;
    fwd_layers_and_norm(f, last_only, n_out);
    if (c->h_host && n > 1 && last_only && be->be.err == ST_OK)
        DO(st_cuda_download(be->cu, c->h_host, fw.hidden, (size_t)(n * d) * F));

    /* logits = W_out h, for the rows that need them */
    float *lg = BUF(WS_LOGITS);
    fwd_prof_begin(f);
    if (last_only || f->row_n_kv) {
        /* the last row, or a verify chunk's rows: the head on the prepared rows, as a decode step's */
        fwd_matmul(f, &m->output, h, d, n_out, lg, V);
        if (!last_only && be->be.err == ST_OK && emit) DO(emit(emit_ctx, 0, n_out));
    } else {
        for (int64_t r0 = 0; r0 < n_out && be->be.err == ST_OK; r0 += ST_DEV_LOGIT_ROWS) {
            int64_t nr = n_out - r0 < ST_DEV_LOGIT_ROWS ? n_out - r0 : ST_DEV_LOGIT_ROWS;
            fwd_matmul(f, &m->output, h + r0 * d, d, nr, lg, V);
            if (be->be.err == ST_OK && emit) DO(emit(emit_ctx, r0, nr));
        }
    }
    fwd_prof_end(f, FWD_PROF_HEAD);
    return be->be.err;
}
