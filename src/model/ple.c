/* ple.c: qwen4exp's PLE layer, the n-gram hash embedding (MODELS.md §6.3, ERRATA F6).
 *
 *   t_0 = the token; t_s = the token s positions back, s < N, from the sequence's ids; the first
 *        missing (before position 0) or EOS predecessor and every older one read as EOS
 *   mix_n = (t_0 M_0) ^ ... ^ (t_{n-1} M_{n-1})  in uint64, for n = 2 .. N
 *   row_h = mix_n mod size_h + offset_h for the h_per heads of order n;  e = [table rows] (d wide)
 *   K = RMSNorm(W_key e), Q = RMSNorm(R) per stream;  gate_c = sigmoid(signed sqrt(K_c.Q_c/sqrt d))
 *   gv_c = (W_value e) gate_c;  nu = RMSNorm(gv) per stream
 *   conv = dilated causal depthwise conv of nu (dilation N, history carried per sequence)
 *   R_c += gv_c + silu(conv)_c
 * The hash is the backend's op over a window of the sequence's ids (llama.cpp runs it on the host:
 * ggml has no 64-bit xor); the table's rows are gathered a few per token from host memory (the
 * file mapping; a GPU reads a pinned copy over the bus), so the table is never read whole. The
 * conv is the backend's conv1d over the widened kernel bind.c builds, with the PLE history as its
 * state. Only text: an image position would hash ple.image_token_id. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "model/blocks.h"
#include "model/forward_ws.h"
#include "model/fwd_matmul.h"
#include "model/rows.h"
#include "model/state.h"

_Static_assert(ST_PLE_MAX_NGRAM <= ST_PLE_HASH_MAX_NGRAM, "the hash op takes every order the loader accepts");

/* The hash's window (st_state_ple_window) in the backend's WS_PLE_IDS; a GPU's replayed step has
 * had it uploaded there by the session (f->ple_win_given). */
static const int32_t *hash_window(st_fwd *f) {
    const int64_t N = f->hp->ple_ngram, len = f->n + N - 1;
    int32_t *win = st_workspace_get(f->ws, WS_PLE_IDS);
    if (f->ple_win_given) return win;
    int32_t small[64] = {0}, *host = len <= 64 ? small : malloc((size_t)len * sizeof *host); /* decode: no malloc */
    if (!host) {
        if (f->be->err == ST_OK) f->be->err = st_fail(ST_ERR_NOMEM, "forward: out of memory for the PLE window");
        return win;
    }
    st_state_ple_window(f->m, f->s, f->pos0, f->n, host);
    FWD_OP(f, upload, win, host, (size_t)len * sizeof *host);
    if (host != small) free(host);
    return win;
}

/* y = RMSNorm(x_c; w_c) for each of the hc streams (d wide, rows hc*d apart). */
static void stream_norm(st_fwd *f, const float *x, const st_tensor *w, float *y, int64_t rows) {
    const int64_t d = f->hp->n_embd, hcd = f->hp->n_hc * d;
    for (int64_t c = 0; c < f->hp->n_hc; c++)
        FWD_OP(f, rms_norm, x + c * d, hcd, w->f32 + c * d, y + c * d, hcd, rows, d, f->hp->eps);
}

void fwd_ple(st_fwd *f, int il, float *R) {
    const st_hparams *hp = f->hp;
    const st_model *m = f->m;
    const st_layer *L = &m->layers[il];
    const int64_t n = f->n, d = hp->n_embd, hc = hp->n_hc, hcd = hc * d, nh = hp->ple_n_heads;
    st_workspace *ws = f->ws;

    /* e: the n_ple table rows of each token, concatenated (hashed, and gathered from the table in
     * host memory) */
    float *e = st_workspace_f32(ws, WS_PLE_E);
    const st_ple_hash hash = {.ngram = hp->ple_ngram, .per = hp->ple_heads_per_ngram, .n_heads = nh,
                              .eos = hp->ple_eos, .mult = hp->ple_mult, .offset = hp->ple_offset, .size = hp->ple_size};
    FWD_OP(f, ple_rows, &hash, hash_window(f), n, st_workspace_get(ws, WS_PLE_ROWS), m->ple_table.type,
           m->ple_table.data, m->ple_table.ne[1], hp->ple_dim, e, hp->ple_dim);

    /* key and value projections; per-stream norms of the key and of the streams (the query) */
    float *key = st_workspace_f32(ws, WS_XN), *query = st_workspace_f32(ws, WS_HC_G);
    float *val = st_workspace_f32(ws, WS_T), *gv = st_workspace_f32(ws, WS_PLE_GV);
    fwd_mm_item it[2] = {{&L->ple_key, key, hcd}, {&L->ple_value, val, d}};
    fwd_matmul_many(f, e, d, n, it, 2);
    stream_norm(f, key, &L->ple_norm_key, key, n);
    stream_norm(f, R, &L->ple_norm_query, query, n);

    /* gv_c = value * gate_c */
    FWD_OP(f, ple_gate, key, query, hcd, val, d, gv, hcd, n, hc, d);

    /* conv = silu(dilated conv(RMSNorm(gv; norm_conv))), the history carried in the state */
    float *nu = key, *conv = query;
    stream_norm(f, gv, &L->ple_norm_conv, nu, n);
    FWD_OP(f, conv1d, nu, hcd, L->ple_conv_wide.f32, f->s->layers[il].ple_hist, conv, hcd, n, hcd,
                 L->ple_conv_wide.ne[0], 1);

    /* R += gv + silu(conv) */
    FWD_OP(f, pointwise, ST_PW_ADD, gv, hcd, conv, hcd, gv, hcd, n, hcd, NULL);
    FWD_OP(f, pointwise, ST_PW_ADD, R, hcd, gv, hcd, R, hcd, n, hcd, NULL);
}
