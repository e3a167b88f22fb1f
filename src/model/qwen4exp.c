/* qwen4exp.c: the stack of qwen4exp, Qwen3.8-Flash-Next (MODELS.md §5.6, §6): hc residual streams
 * in place of a residual vector, a hyper-connection mixer in place of every norm.
 *
 *   R_c = token_embd[token]                          for each of the hc streams
 *   for each layer:  R = PLE(R)                       on the PLE layer (ple.c)
 *                    (m, inj) = HCmix(R; hc_attn)
 *                    y = GDN(m) (sigmoid output gate)  or  gated Attn(m) with QSA (attn.c, qsa.c)
 *                    R_c += y 2 sigmoid(inj_c / hc)   (HCcombine)
 *                    (m, inj) = HCmix(R; hc_ffn);  R_c += MoE+shared(m) 2 sigmoid(inj_c / hc)
 *   m = HCmix(R; output_hc) without inject;  logits = W_out m     (no output_norm)
 *
 *   HCmix:  X_c = RMSNorm(R_c; gamma_c);  l = silu(W_down [X_0..X_hc-1] / hc);  G = W_up l
 *           m = (1/hc) sum_c X_c sigmoid(G_c);  inj = W_inject [X_0..X_hc-1]
 * Nothing of the streams outlives a chunk. With last_only the last layer's combine and everything
 * after it run on the last row only, moved to row 0 (of each sequence, for several: the PLE layer
 * and the mixers run per sequence, fwd_per_seq). */
#include "backend/backend.h"
#include "model/blocks.h"
#include "model/forward_ws.h"
#include "model/fwd_matmul.h"
#include "model/rows.h"
#include "model/stacks.h"

typedef struct hc_mixer {
    const st_tensor *norm, *down, *up, *inject; /* inject NULL for the head's mixer */
} hc_mixer;

/* (m, inj) = HCmix(R) over `rows` rows: m [rows][d] into h, inj [rows][hc]. */
static void hc_mix(st_fwd *f, const hc_mixer *x, const float *R, int64_t rows, float *m, float *inj) {
    const st_hparams *hp = f->hp;
    const int64_t d = hp->n_embd, hc = hp->n_hc, hcd = hc * d, lr = hp->hc_rank;
    float *xn = st_workspace_f32(f->ws, WS_XN), *lo = st_workspace_f32(f->ws, WS_HC_LO);
    float *g = st_workspace_f32(f->ws, WS_HC_G);
    for (int64_t c = 0; c < hc; c++)
        FWD_OP(f, rms_norm, R + c * d, hcd, x->norm->f32 + c * d, xn + c * d, hcd, rows, d, hp->eps);
    fwd_mm_item it[2] = {{x->down, lo, lr}, {x->inject, inj, hc}};
    fwd_matmul_many(f, xn, hcd, rows, it, x->inject ? 2 : 1);
    FWD_OP(f, scale, lo, lr, rows, lr, 1.0f / (float)hc);
    FWD_OP(f, pointwise, ST_PW_SILU, lo, lr, NULL, 0, lo, lr, rows, lr, NULL);
    fwd_matmul(f, x->up, lo, lr, rows, g, hcd);
    FWD_OP(f, hc_pre, xn, hcd, g, hcd, m, d, rows, hc, d, 1.0f / (float)hc);
}

/* The PLE layer as a mixer on R [n][hc*d] in place (fwd_per_seq's shape). */
static void ple_rows(st_fwd *f, int il, const float *R, float *out) {
    (void)R;
    fwd_ple(f, il, out);
}

void fwd_qwen4exp(st_fwd *f, int last_only) {
    const st_hparams *hp = f->hp;
    const int64_t d = hp->n_embd, n = f->n, hc = hp->n_hc, hcd = hc * d;
    float *x = st_workspace_f32(f->ws, WS_X), *R = st_workspace_f32(f->ws, WS_R);
    float *h = st_workspace_f32(f->ws, WS_H), *y = st_workspace_f32(f->ws, WS_T);
    float *inj = st_workspace_f32(f->ws, WS_HC_INJ);

    /* R_c = the token's embedding (forward.c gathered it into x) */
    for (int64_t c = 0; c < hc; c++) FWD_OP(f, copy_rows, R + c * d, hcd, x, d, d, n);

    int64_t rows = n;
    for (int il = 0; il < hp->n_layer; il++) {
        const st_layer *L = &f->m->layers[il];
        if (il == hp->ple_layer) fwd_per_seq(f, il, R, hcd, R, hcd, ple_rows);

        /* R += mixer(HCmix(R)) */
        hc_mixer ma = {&L->hc_attn_norm, &L->hc_attn_down, &L->hc_attn_up, &L->hc_attn_inject};
        hc_mix(f, &ma, R, n, h, inj);
        if (hp->is_linear[il]) fwd_gdn(f, il, h, y);
        else fwd_attention(f, il, h, y);
        if (last_only && il == hp->n_layer - 1) {
            /* only the rows that need logits go on */
            fwd_keep_last_rows(f, R, hcd);
            fwd_keep_last_rows(f, y, d);
            rows = fwd_keep_last_rows(f, inj, hc);
        }
        FWD_OP(f, hc_post, R, hcd, y, d, inj, hc, rows, hc, d);

        /* R += MoE(HCmix(R)) */
        hc_mixer mf = {&L->hc_ffn_norm, &L->hc_ffn_down, &L->hc_ffn_up, &L->hc_ffn_inject};
        hc_mix(f, &mf, R, rows, h, inj);
        f->moe(f, il, h, y, rows);
        FWD_OP(f, hc_post, R, hcd, y, d, inj, hc, rows, hc, d);
    }

    /* the head's mixer is the output norm */
    hc_mixer mh = {&f->m->hc_head_norm, &f->m->hc_head_down, &f->m->hc_head_up, NULL};
    hc_mix(f, &mh, R, rows, h, NULL);
}
