/* mtp.c: the MTP (NextN) head of qwen35, qwen35moe and qwen3next, as llama.cpp's graph_mtp
 * computes it (MODELS.md §7, MODELS-ERRATA F10-F13):
 *
 *   e = RMSNorm(token_embd(x_{i+1}); nextn.enorm)
 *   g = RMSNorm(h_i; nextn.hnorm)                  h_i: the trunk's output-normed state
 *   u = W_eh [e ; g]                                embedding first, hidden second
 *   u = one layer of the architecture on u          full attention over the head's own KV cache
 *                                                   (layers[n_layer]), then FFN or MoE + shared
 *   h' = RMSNorm(u; shared_head_norm or output_norm), logits = (shared_head_head or output) h'
 *
 * h' is what a chained draft feeds back as the next row's h. Rows run at the head's own
 * positions (st_state.mtp_n_past), which the driver keeps equal to the trunk's (engine/spec.c).
 * Only the last row's logits are ever read (the draft context runs masked, F13), so the layer's
 * FFN runs on the last row alone. It owns no state: the cache is the session's, the scratch the
 * workspace's. */
#include <string.h>

#include "backend/backend.h"
#include "model/blocks.h"
#include "model/forward_ws.h"
#include "model/fwd_matmul.h"
#include "model/mtp.h"
#include "model/rows.h"
#include "model/stacks.h"
#include "model/state.h"

st_status st_forward_mtp(const struct st_model *m, st_state *s, st_workspace *ws, st_pool *pool, const st_mtp_chunk *c) {
    const st_hparams *hp = &m->hp;
    int64_t n = c->n, d = hp->n_embd, V = hp->n_vocab;
    int il = (int)hp->n_layer;
    if (!m->n_mtp) return st_fail(ST_ERR_INVALID, "forward: this model has no MTP head");
    if (n <= 0 || n > ws->rows)
        return st_fail(ST_ERR_INVALID, "forward: MTP chunk of %lld rows, workspace holds %lld", (long long)n, (long long)ws->rows);
    if (s->mtp_n_past + n > s->n_ctx)
        return st_fail(ST_ERR_RANGE, "context is full: the MTP head holds %lld positions, %lld more exceed %lld",
                       (long long)s->mtp_n_past, (long long)n, (long long)s->n_ctx);
    if (!c->kv_only && (!c->logits || !c->h_out)) return st_fail(ST_ERR_INVALID, "forward: MTP logits need destinations");

    const st_layer *L = &m->layers[il];
    st_cpu_backend cpu;
    void *mm = st_workspace_get(ws, WS_MM);
    st_fwd f = {.m = m, .hp = hp, .s = s, .ws = ws, .be = st_cpu_backend_init(&cpu, pool, mm), .moe = fwd_moe,
                .pool = pool, .n = n, .pos0 = s->mtp_n_past, .mm_scratch = mm};
    int32_t *pos = st_workspace_get(ws, WS_POS);
    for (int64_t t = 0; t < n; t++) pos[t] = (int32_t)(s->mtp_n_past + t);
    f.pos = pos;

    /* u = W_eh [RMSNorm(embed(x); enorm) ; RMSNorm(h; hnorm)] */
    float *x = st_workspace_f32(ws, WS_X), *h = st_workspace_f32(ws, WS_H), *cat = st_workspace_f32(ws, WS_CAT);
    const st_tensor *embed = &m->tok_embd;
    if (!st_op_get_rows(embed->type, embed->data, V, d, c->tokens, n, h, d))
        return st_fail(ST_ERR_RANGE, "forward: a token id is outside the vocabulary of %lld", (long long)V);
    st_op_rms_norm(pool, h, d, L->nextn_enorm.f32, cat, 2 * d, n, d, hp->eps);
    st_op_rms_norm(pool, c->h_in, d, L->nextn_hnorm.f32, cat + d, 2 * d, n, d, hp->eps);
    fwd_matmul(&f, &L->nextn_eh_proj, cat, 2 * d, n, x, d);

    if (c->kv_only) {
        /* The cache rows are all a catch-up row leaves behind. */
        st_op_rms_norm(pool, x, d, L->attn_norm.f32, h, d, n, d, hp->eps);
        fwd_attention_kv(&f, il, h);
        s->mtp_n_past += n;
        return ST_OK;
    }

    /* The block, the FFN on the last row; then h' and the head. */
    fwd_layer_qwen35(&f, il, 1);
    FWD_OP(&f, add_rms_norm, x, f.pending, st_mtp_head_norm(m)->f32, c->h_out, 1, d, hp->eps);
    fwd_matmul(&f, st_mtp_head(m), c->h_out, d, 1, c->logits, V);
    s->mtp_n_past += n;
    return ST_OK;
}
