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
#include <string.h>

#include "backend/backend.h"
#include "model/blocks.h"
#include "model/forward_ws.h"
#include "model/fwd_matmul.h"
#include "model/rows.h"
#include "model/state.h"

/* qwen3next ssm_ba: for k-head g, [b of v-heads g*r .. g*r+r-1 | a of the same heads]. */
static void split_ba(const float *ba, int64_t n, int64_t n_k, int64_t r, float *a, float *b) {
    int64_t n_v = n_k * r;
    for (int64_t t = 0; t < n; t++) {
        const float *row = ba + t * 2 * n_v;
        for (int64_t g = 0; g < n_k; g++)
            for (int64_t j = 0; j < r; j++) {
                b[t * n_v + g * r + j] = row[2 * r * g + j];
                a[t * n_v + g * r + j] = row[2 * r * g + r + j];
            }
    }
}

/* Legacy ssm_in rows, per k-head g: [q_g (dk) | k_g (dk) | v of r heads (r*dv) | z of r heads].
 * Reassembled into m = [all q | all k | all v] and z. */
static void split_qkvz(const float *p, int64_t n, int64_t n_k, int64_t dk, int64_t r, float *m, float *z) {
    int64_t kd = n_k * dk, vd = n_k * r * dk, blk = 2 * dk + 2 * r * dk, C = 2 * kd + vd;
    size_t row_bytes = (size_t)dk * sizeof(float);
    for (int64_t t = 0; t < n; t++) {
        const float *src = p + t * n_k * blk;
        float *mt = m + t * C, *zt = z + t * vd;
        for (int64_t g = 0; g < n_k; g++) {
            const float *s = src + g * blk;
            memcpy(mt + g * dk, s, row_bytes);
            memcpy(mt + kd + g * dk, s + dk, row_bytes);
            memcpy(mt + 2 * kd + g * r * dk, s + 2 * dk, (size_t)r * row_bytes);
            memcpy(zt + g * r * dk, s + 2 * dk + r * dk, (size_t)r * row_bytes);
        }
    }
}

/* The conv state after each row t of the chunk, into S->conv_steps[t]: the last K-1 columns of
 * [state | m rows 0..t], per channel oldest first (st_op_conv1d's layout). */
static void conv_steps(const st_layer_state *S, const float *m, int64_t ld_m, int64_t n, int64_t C, int64_t K) {
    int64_t K1 = K - 1;
    for (int64_t t = 0; t < n; t++) {
        float *dst = S->conv_steps[t];
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < K1; j++) {
                int64_t col = t + 1 + j; /* in [state (K1 columns) | m rows] */
                dst[c * K1 + j] = col < K1 ? S->conv[c * K1 + col] : m[(col - K1) * ld_m + c];
            }
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
        split_qkvz(p, n, n_k, dk, r, m, z);
    }
    if (L->ssm_ba.data) split_ba(ba, n, n_k, r, a, b);

    /* Gates: beta = sigmoid(b), g = softplus(a + dt_bias) * ssm_a. */
    float *gg = st_workspace_f32(ws, WS_GATE_G), *beta = st_workspace_f32(ws, WS_GATE_BETA);
    st_op_gdn_gates(a, n_v, b, n_v, L->ssm_dt.f32, L->ssm_a.f32, n, n_v, gg, beta);

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
        if (g.keep_steps) conv_steps(S, ms, C, ns, C, K);
        st_op_conv1d(g.pool, ms, C, L->ssm_conv1d.f32, S->conv, us, C, ns, C, K, 1);
        for (int64_t t = 0; t < ns; t++) st_op_l2_norm(NULL, us + t * C, dk, us + t * C, dk, 2 * n_k, dk, hp->eps);

        /* The delta rule over the chunk (chunked or per token, as the op finds faster). */
        st_gdn_args ga = {
            .n_tok = ns, .n_k = n_k, .n_v = n_v, .d = dk,
            .head_map = hp->gdn_grouped ? ST_GDN_GROUPED : ST_GDN_TILED,
            .q = us, .k = us + kd, .ld_q = C, .ld_k = C, .v = us + 2 * kd, .ld_v = C,
            .g = gg + r0 * n_v, .beta = beta + r0 * n_v, .state = S->ssm, .out = o + r0 * vd, .ld_out = vd,
            .scale = 1.0f / sqrtf((float)dk),
            .state_steps = g.keep_steps ? S->ssm_steps : NULL,
        };
        st_op_gdn(g.pool, &ga, st_workspace_get(ws, WS_GDN_SCRATCH));
    }

    /* o_h = RMSNorm(o_h; ssm_norm) * silu(z_h) (qwen4exp: * sigmoid(z_h)), then the output projection. */
    st_op_rms_norm(f->pool, o, dk, L->ssm_norm.f32, o, dk, n * n_v, dk, hp->eps);
    if (hp->arch == ST_ARCH_QWEN4EXP) st_op_mul_sigmoid(f->pool, o, vd, z, vd, o, vd, n, vd);
    else st_op_mul_silu(f->pool, o, vd, z, vd, o, vd, n, vd);
    fwd_matmul(f, &L->ssm_out, o, vd, n, out, d);
}
