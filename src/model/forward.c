/* forward.c: one chunk through the model: the token embedding, the per-architecture layer stack
 * (qwen3.c, qwen35.c, qwen4exp.c), the final norm (qwen4exp: its head mixer) and the LM head for
 * the rows that need logits; st_forward_seqs: the rows of several sequences in one, each of any
 * kind of chunk. The buffers it uses are sized in forward_ws.c; the products go through
 * fwd_matmul.c. */
#include <string.h>

#include "backend/backend.h"
#include "model/blocks.h"
#include "model/forward.h"
#include "model/forward_ws.h"
#include "model/fwd_matmul.h"
#include "model/rows.h"
#include "model/stacks.h"
#include "model/state.h"

/* The layer stack on the embedded rows in WS_X, then the final norm (qwen4exp: its head mixer) of
 * n_out rows (all, or with last_only the rows fwd_keep_last_rows keeps) into WS_H. */
void fwd_layers_and_norm(st_fwd *f, int last_only, int64_t n_out) {
    const st_hparams *hp = f->hp;
    if (hp->arch == ST_ARCH_QWEN4EXP) {
        /* logits = W_out · HCmix(R; output_hc), the mixer's rows already in WS_H */
        fwd_qwen4exp(f, last_only);
        return;
    }
    if (st_hp_is_hybrid(hp)) fwd_layers_qwen35(f, last_only);
    else fwd_layers_qwen3(f, last_only);
    /* logits = W_out · RMSNorm(x; output_norm), for the rows that need them */
    fwd_add_norm(f, &f->m->output_norm, n_out);
}

/* A pass of the CPU's over n rows of the workspace. */
static st_fwd cpu_pass(const struct st_model *m, st_state *s, st_workspace *ws, st_pool *pool, st_cpu_backend *cpu,
                       int64_t n) {
    void *mm = st_workspace_get(ws, WS_MM);
    return (st_fwd){.m = m, .hp = &m->hp, .s = s, .ws = ws, .be = st_cpu_backend_init(cpu, pool, mm), .moe = fwd_moe,
                    .pool = pool, .n = n, .pos0 = s->n_past, .mm_scratch = mm};
}

st_status st_forward(const struct st_model *m, st_state *s, st_workspace *ws, st_pool *pool, const st_chunk *c) {
    const st_hparams *hp = &m->hp;
    int64_t n = c->n, d = hp->n_embd, V = hp->n_vocab;
    if (n <= 0 || n > ws->rows)
        return st_fail(ST_ERR_INVALID, "forward: chunk of %lld rows, workspace holds %lld", (long long)n, (long long)ws->rows);
    if (s->n_past + n > s->n_ctx)
        return st_fail(ST_ERR_RANGE, "context is full: %lld positions + %lld new tokens exceed the context size %lld",
                       (long long)s->n_past, (long long)n, (long long)s->n_ctx);
    if (c->logits_all && !c->logits) return st_fail(ST_ERR_INVALID, "forward: logits for every row need a destination");

    int keep_steps = c->keep_steps && st_hp_is_hybrid(hp); /* attention forgets cells by itself */
    if (keep_steps && n > s->n_steps)
        return st_fail(ST_ERR_INVALID, "forward: %lld rows keep their states, the state has %d step planes",
                       (long long)n, s->n_steps);
    st_cpu_backend cpu;
    st_fwd f = cpu_pass(m, s, ws, pool, &cpu, n);
    f.keep_steps = keep_steps;
    int32_t *pos = st_workspace_get(ws, WS_POS);
    for (int64_t t = 0; t < n; t++) pos[t] = (int32_t)(s->n_past + t);
    f.pos = pos;

    /* x = token_embd[token] */
    float *x = st_workspace_f32(ws, WS_X);
    if (!st_op_get_rows(m->tok_embd.type, m->tok_embd.data, V, d, c->tokens, n, x, d))
        return st_fail(ST_ERR_RANGE, "forward: a token id is outside the vocabulary of %lld", (long long)V);

    /* The layers; with last_only the final layer's FFN runs on the last row alone, moved to row 0. */
    int last_only = !c->logits_all && !c->h_out;
    int64_t n_out = last_only ? 1 : n;
    if (hp->arch == ST_ARCH_QWEN4EXP) {
        /* no MTP head: h_out and keep_steps are not for this architecture, engine/spec.c refuses it */
        if (hp->ple_layer >= 0 && !s->ids) return st_fail(ST_ERR_INVALID, "forward: the PLE hash needs the sequence's ids");
        if (c->h_out) return st_fail(ST_ERR_UNSUPPORTED, "forward: qwen4exp has no hidden-state output");
    }
    float *dst = c->logits ? c->logits : st_workspace_f32(ws, WS_LOGITS);
    int64_t ld = c->logits ? c->ld_logits : V;
    /* h = RMSNorm(x; output_norm) for the rows that need it (all, for the MTP head's input);
     * logits = W_out h for the rows that need logits */
    fwd_layers_and_norm(&f, last_only, n_out);
    float *h = st_workspace_f32(ws, WS_H);
    if (c->h_out) memcpy(c->h_out, h, (size_t)(n_out * d) * sizeof *h);
    if (c->logits_all) fwd_matmul(&f, &m->output, h, d, n, dst, ld);
    else fwd_matmul(&f, &m->output, h + (n_out - 1) * d, d, 1, dst, ld);
    if (c->hidden) memcpy(c->hidden, h + (n_out - 1) * d, (size_t)d * sizeof *h);
    if (f.be->err != ST_OK) return f.be->err;
    s->n_past += n;
    return ST_OK;
}

st_status st_forward_seqs(const struct st_model *m, st_workspace *ws, st_pool *pool, const st_seq_rows *seqs, int n_seqs,
                          float *stage) {
    const st_hparams *hp = &m->hp;
    int64_t d = hp->n_embd, V = hp->n_vocab, n, n_out;
    int64_t row0[ST_FORWARD_MAX_SEQS], out0[ST_FORWARD_MAX_SEQS];
    ST_TRY(fwd_seqs_layout(hp, seqs, n_seqs, row0, out0, &n, &n_out));
    if (n <= 0 || n > ws->rows)
        return st_fail(ST_ERR_INVALID, "forward: %lld rows of %d sequences, workspace holds %lld", (long long)n, n_seqs,
                       (long long)ws->rows);
    st_cpu_backend cpu;
    st_fwd f = cpu_pass(m, seqs[0].s, ws, pool, &cpu, n);
    f.seqs = seqs;
    f.n_seqs = n_seqs;
    f.seq_row0 = row0;
    int32_t *pos = st_workspace_get(ws, WS_POS);
    float *x = st_workspace_f32(ws, WS_X);
    for (int k = 0; k < n_seqs; k++) {
        for (int64_t t = 0; t < seqs[k].n; t++) pos[row0[k] + t] = (int32_t)(seqs[k].s->n_past + t);
        if (!st_op_get_rows(m->tok_embd.type, m->tok_embd.data, V, d, seqs[k].tokens, seqs[k].n, x + row0[k] * d, d))
            return st_fail(ST_ERR_RANGE, "forward: a token id is outside the vocabulary of %lld", (long long)V);
    }
    f.pos = pos;
    /* The layers and the final norm of the rows that go on, each sequence's at out0; its hidden
     * states out, then the head's rows of each (all, or its last) packed in order for one product. */
    fwd_layers_and_norm(&f, 1, n_out);
    float *h = st_workspace_f32(ws, WS_H);
    for (int k = 0; k < n_seqs; k++)
        if (seqs[k].h_out) memcpy(seqs[k].h_out, h + out0[k] * d, (size_t)(seqs[k].n * d) * sizeof *h);
    int64_t n_head = fwd_seqs_pack_head(&f, h, d, out0);
    fwd_matmul(&f, &m->output, h, d, n_head, stage, V);
    n_head = 0;
    for (int k = 0; k < n_seqs; k++) {
        int64_t rows = st_seq_head_rows(&seqs[k]);
        memcpy(seqs[k].logits, stage + n_head * V, (size_t)(rows * V) * sizeof *stage);
        n_head += rows;
        seqs[k].s->n_past += seqs[k].n;
    }
    return ST_OK;
}
