/* gdn.c: the Gated DeltaNet mixer of the hybrid models (MODELS.md §2.10).
 *
 *   m = W_qkv h (conv channels [Q | K | V]), z = W_gate h, b = W_beta h, a = W_alpha h
 *   beta = sigmoid(b), g = softplus(a + dt_bias) * ssm_a
 *   u = silu(causal depthwise conv(m)), with the last K-1 columns carried in the conv state
 *   q, k = L2(u's q and k heads); v = u's v heads
 *   delta rule per v-head (tiled or grouped k-head), state carried across chunks
 *   o_h = RMSNorm(o_h; ssm_norm) * silu(z_h) (sigmoid(z_h) on qwen4exp);  out = W_out o
 * qwen3next reads b and a from one ssm_ba projection laid out per k-head, may carry the legacy
 * fused ssm_in ([q_g | k_g | v_g.. | z_g..] per k-head), and maps v-heads to k-heads grouped. */
#include <math.h>

#include "backend/backend.h"
#include "model/blocks.h"
#include "model/forward_ws.h"
#include "model/fwd_matmul.h"
#include "model/rows.h"
#include "model/state.h"

/* qwen3next ssm_ba: for k-head g, [b of v-heads g*r .. g*r+r-1 | a of the same heads]. */
static void split_ba(st_fwd *f, const float *ba, int64_t n, int64_t n_k, int64_t r, float *a, float *b) {
    int64_t n_v = n_k * r;
    for (int64_t g = 0; g < n_k; g++) {
        FWD_OP(f, copy_rows, b + g * r, n_v, ba + 2 * r * g, 2 * n_v, r, n);
        FWD_OP(f, copy_rows, a + g * r, n_v, ba + 2 * r * g + r, 2 * n_v, r, n);
    }
}

/* Legacy ssm_in rows, per k-head g: [q_g (dk) | k_g (dk) | v of r heads (r*dv) | z of r heads].
 * Reassembled into m = [all q | all k | all v] and z. */
static void split_qkvz(st_fwd *f, const float *p, int64_t n, int64_t n_k, int64_t dk, int64_t r, float *m, float *z) {
    int64_t kd = n_k * dk, vd = n_k * r * dk, blk = 2 * dk + 2 * r * dk, C = 2 * kd + vd, ldp = n_k * blk;
    for (int64_t g = 0; g < n_k; g++) {
        const float *src = p + g * blk;
        FWD_OP(f, copy_rows, m + g * dk, C, src, ldp, dk, n);
        FWD_OP(f, copy_rows, m + kd + g * dk, C, src + dk, ldp, dk, n);
        FWD_OP(f, copy_rows, m + 2 * kd + g * r * dk, C, src + 2 * dk, ldp, r * dk, n);
        FWD_OP(f, copy_rows, z + g * r * dk, vd, src + 2 * dk + r * dk, ldp, r * dk, n);
    }
}

void fwd_gdn(st_fwd *f, int il, const float *h, float *out) {
    const st_hparams *hp = f->hp;
    const st_layer *L = &f->m->layers[il];
    st_workspace *ws = f->ws;
    int64_t n = f->n, d = hp->n_embd, dk = hp->ssm_state, n_k = hp->ssm_n_k, n_v = hp->ssm_n_v;
    int64_t r = n_v / n_k, kd = n_k * dk, vd = hp->ssm_inner, C = 2 * kd + vd, K = hp->ssm_conv_kernel;

    /* Projections. */
    float *m = st_workspace_f32(ws, WS_QKV), *z = st_workspace_f32(ws, WS_Z);
    float *a = st_workspace_f32(ws, WS_A), *b = st_workspace_f32(ws, WS_B);
    float *ba = st_workspace_f32(ws, WS_BA);
    fwd_mm_item it[4];
    int n_it = 0;
    if (L->ssm_qkv.data) {
        it[n_it++] = (fwd_mm_item){&L->ssm_qkv, m, C};
        it[n_it++] = (fwd_mm_item){&L->ssm_gate, z, vd};
    }
    if (L->ssm_ba.data) {
        it[n_it++] = (fwd_mm_item){&L->ssm_ba, ba, 2 * n_v};
    } else {
        it[n_it++] = (fwd_mm_item){&L->ssm_beta, b, n_v};
        it[n_it++] = (fwd_mm_item){&L->ssm_alpha, a, n_v};
    }
    fwd_matmul_many(f, h, d, n, it, n_it);
    if (!L->ssm_qkv.data) {
        /* The legacy product goes into WS_CONV (free until the conv), then is split into m and z. */
        float *p = st_workspace_f32(ws, WS_CONV);
        fwd_matmul(f, &L->ssm_in, h, d, n, p, 2 * kd + 2 * vd);
        split_qkvz(f, p, n, n_k, dk, r, m, z);
    }
    if (L->ssm_ba.data) split_ba(f, ba, n, n_k, r, a, b);

    /* Gates: beta = sigmoid(b), g = softplus(a + dt_bias) * ssm_a (a decode step's side branch,
     * beside the conv). */
    float *gg = st_workspace_f32(ws, WS_GATE_G), *beta = st_workspace_f32(ws, WS_GATE_BETA);
    int side = FWD_OP(f, fork, n);
    FWD_OP(f, gdn_gates, a, n_v, b, n_v, L->ssm_dt.f32, L->ssm_a.f32, n, n_v, gg, beta);
    FWD_OP(f, unfork, side);

    /* Each sequence's rows with its own conv and delta state. */
    float *u = st_workspace_f32(ws, WS_CONV), *o = st_workspace_f32(ws, WS_GDN_OUT);
    for (int q = 0; q < fwd_n_seqs(f); q++) {
        int64_t r0;
        st_fwd g = fwd_seq(f, q, &r0);
        const st_layer_state *S = &g.s->layers[il];
        int64_t ns = g.n;
        float *ms = m + r0 * C, *us = u + r0 * C;
        /* u = silu(conv(m)) with the carried state; then L2-normalise the q and k heads of each row
         * (2*n_k contiguous heads of dk at the start of the row). */
        if (g.keep_steps) FWD_OP(f, conv1d_steps, ms, C, S->conv, S->conv_steps, ns, C, K);
        FWD_OP(f, conv1d_l2, ms, L->ssm_conv1d.f32, S->conv, us, ns, C, K, 2 * n_k, dk, hp->eps);
        if (q == 0) FWD_OP(f, join, side);

        /* The delta rule over the chunk (chunked or per token, as the backend finds faster). */
        st_gdn_args ga = {
            .n_tok = ns, .n_k = n_k, .n_v = n_v, .d = dk,
            .head_map = hp->gdn_grouped ? ST_GDN_GROUPED : ST_GDN_TILED,
            .q = us, .k = us + kd, .ld_q = C, .ld_k = C, .v = us + 2 * kd, .ld_v = C,
            .g = gg + r0 * n_v, .beta = beta + r0 * n_v, .state = S->ssm, .out = o + r0 * vd, .ld_out = vd,
            .scale = 1.0f / sqrtf((float)dk),
            .state_steps = g.keep_steps ? S->ssm_steps : NULL,
        };
        FWD_OP(f, gdn, &ga, st_workspace_get(ws, WS_GDN_SCRATCH));
    }

    /* o_h = RMSNorm(o_h; ssm_norm) * silu(z_h) (qwen4exp: * sigmoid(z_h)), then the output projection. */
    st_mat wout = fwd_mat(&L->ssm_out);
    FWD_OP(f, gated_norm, o, L->ssm_norm.f32, z, n * n_v, dk, hp->eps, hp->arch == ST_ARCH_QWEN4EXP, &wout);
    FWD_OP(f, matmul, &wout, o, vd, n, out, d);
}
