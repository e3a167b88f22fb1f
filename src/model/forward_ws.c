/* forward_ws.c: the sizes of every workspace buffer of the CPU forward (forward_ws.h's st_ws_id),
 * derived from the hyperparameters, the bound tensors and the rows of the chunk, and the facts of
 * the hyperparameters both forwards size and run by (the most heads, the most experts used).
 * Nothing here runs the model. */
#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "model/forward_ws.h"
#include "model/moe_exec.h"
#include "quant/types.h"

int64_t fwd_max_heads(const st_hparams *hp, int kv) {
    int64_t mx = 0;
    for (int64_t i = 0; i < hp->n_layer; i++) {
        if (hp->is_linear[i]) continue;
        int64_t h = kv ? hp->n_head_kv[i] : hp->n_head[i];
        if (h > mx) mx = h;
    }
    return mx;
}

static int64_t max_dense_ff(const st_hparams *hp) {
    int64_t mx = 0;
    if (st_hp_is_moe(hp)) return hp->n_ff_shexp > 0 && hp->arch != ST_ARCH_QWEN3MOE ? hp->n_ff_shexp : 0;
    for (int64_t i = 0; i < hp->n_layer; i++)
        if (hp->n_ff[i] > mx) mx = hp->n_ff[i];
    return mx;
}

int64_t fwd_max_experts_used(const st_hparams *hp) {
    int64_t mx = 0;
    for (int64_t i = 0; i < hp->n_layer; i++)
        if (hp->n_expert_used[i] > mx) mx = hp->n_expert_used[i];
    return mx;
}

static size_t mm_scratch_one(const st_tensor *t, int64_t rows, size_t cur) {
    if (!t->data) return cur;
    size_t s = st_matmul_scratch_size(t->type, t->ne[0], rows);
    return s > cur ? s : cur;
}

/* The largest matmul scratch any product needs for `rows` rows: every bound matrix of every layer
 * (the MATRIX and EXPERTS rows of st_layer_tensors), the head (and qwen4exp's head mixer), and the shared-expert gate, an f32
 * {d} vector multiplied as a 1-row f32 matrix (ffn.c). */
static size_t mm_scratch_size(const struct st_model *m, int64_t rows) {
    size_t s = st_matmul_scratch_size(ST_TYPE_F32, m->hp.n_embd, rows);
    s = mm_scratch_one(&m->output, rows, s);
    s = mm_scratch_one(&m->hc_head_down, rows, s);
    s = mm_scratch_one(&m->hc_head_up, rows, s);
    for (int64_t i = 0; i < st_model_n_blocks(m); i++)
        for (int j = 0; j < ST_LAYER_N_TENSORS; j++)
            if (st_layer_tensors[j].kind != ST_LT_VECTOR) s = mm_scratch_one(st_layer_tensor_get(&m->layers[i], j), rows, s);
    return s;
}

/* The activation row sizes of the fused expert job (moe_exec.c): K = d for gate/up, K = the
 * expert or shared width for down, over every layer's expert types. */
size_t fwd_moe_act_row(const struct st_model *m, int down) {
    size_t mx = 0;
    for (int64_t i = 0; i < st_model_n_blocks(m); i++) {
        const st_layer *L = &m->layers[i];
        size_t s;
        if (down) {
            const st_tensor *de[] = {&L->down_exps}, *ds[] = {&L->down_shexp};
            s = moe_act_row_max(de, 1, m->hp.n_ff_exp);
            size_t s2 = L->down_shexp.data ? moe_act_row_max(ds, 1, L->down_shexp.ne[0]) : 0;
            if (s2 > s) s = s2;
        } else {
            const st_tensor *g[] = {&L->gate_exps, &L->up_exps, &L->gate_up_exps, &L->gate_shexp, &L->up_shexp};
            s = moe_act_row_max(g, 5, m->hp.n_embd);
        }
        if (s > mx) mx = s;
    }
    return mx;
}

int64_t fwd_moe_gu_width(const st_hparams *hp) {
    int64_t sh = max_dense_ff(hp);
    return 2 * (hp->n_ff_exp > sh ? hp->n_ff_exp : sh);
}

/* The largest QSA cell budget W and the smallest block size of any QSA layer. */
static void qsa_extent(const st_hparams *hp, int64_t *width, int64_t *ratio) {
    *width = 0;
    *ratio = 0;
    for (int64_t i = 0; i < hp->n_layer; i++) {
        if (!st_hp_qsa(hp, i)) continue;
        if (st_hp_qsa_width(hp, i) > *width) *width = st_hp_qsa_width(hp, i);
        if (*ratio == 0 || hp->compress_ratio[i] < *ratio) *ratio = hp->compress_ratio[i];
    }
}

size_t fwd_q4_ws_size(const st_ws_plan *plan, int id, int64_t n) {
    const st_hparams *hp = &plan->m->hp;
    if (hp->arch != ST_ARCH_QWEN4EXP) return 0;
    const size_t F = sizeof(float);
    const int64_t hcd = hp->n_hc * hp->n_embd;
    int64_t width, ratio;
    qsa_extent(hp, &width, &ratio);
    int ple = hp->ple_layer >= 0;
    switch (id) {
    case WS_R: case WS_XN: case WS_HC_G: return (size_t)(n * hcd) * F;
    case WS_HC_LO: return (size_t)(n * hp->hc_rank) * F;
    case WS_HC_INJ: return (size_t)(n * hp->n_hc) * F;
    /* the hash's window of ids (the chunk's and up to N-1 before it) and its rows */
    case WS_PLE_IDS: return ple ? (size_t)(n + ST_PLE_HASH_MAX_NGRAM) * sizeof(int32_t) : 0;
    case WS_PLE_ROWS: return ple ? (size_t)(n * hp->ple_n_heads) * sizeof(int32_t) : 0;
    case WS_PLE_E: return ple ? (size_t)(n * hp->n_embd) * F : 0;
    case WS_PLE_GV: return ple ? (size_t)(n * hcd) * F : 0;
    case WS_IDX_Q: return (size_t)(n * hp->idx_n_head * hp->idx_dim) * F;
    case WS_IDX_K: return (size_t)(n * hp->idx_dim) * F;
    case WS_QSA_CELLS: return (size_t)(n * width) * sizeof(int32_t);
    case WS_QSA_N: return (size_t)n * sizeof(int32_t);
    case WS_QSA_SCRATCH: return st_qsa_scratch_size(plan->n_threads, plan->n_ctx, ratio, width);
    default: return 0;
    }
}

fwd_widths fwd_widths_of(const st_hparams *hp) {
    fwd_widths w = {.d = hp->n_embd, .hd = hp->head_dim, .H = fwd_max_heads(hp, 0), .Hkv = fwd_max_heads(hp, 1),
                    .hybrid = st_hp_is_hybrid(hp), .moe = st_hp_is_moe(hp)};
    w.qw = w.hd * w.H * (w.hybrid ? 2 : 1);
    if (w.hybrid) {
        w.kd = st_hp_key_dim(hp);
        w.vd = hp->ssm_inner;
        w.C = st_hp_conv_channels(hp);
        w.n_v = hp->ssm_n_v;
    }
    if (w.moe) {
        w.k = fwd_max_experts_used(hp);
        w.E = hp->n_expert;
        w.ffe = hp->n_ff_exp;
    }
    w.qkv = w.qw + 2 * w.hd * w.Hkv;
    if (2 * w.kd + 2 * w.vd > w.qkv) w.qkv = 2 * w.kd + 2 * w.vd;
    return w;
}

size_t st_forward_ws_size(const void *ctx, int id, int64_t n) {
    const st_ws_plan *plan = ctx;
    const struct st_model *m = plan->m;
    const st_hparams *hp = &m->hp;
    const size_t F = sizeof(float);
    const fwd_widths w = fwd_widths_of(hp);
    switch (id) {
    case WS_X: case WS_H: case WS_T: return (size_t)(n * w.d) * F;
    case WS_POS: return (size_t)n * sizeof(int32_t);
    case WS_Q: return (size_t)(n * w.qw) * F;
    case WS_QN: case WS_ATT: return (size_t)(n * w.hd * w.H) * F;
    case WS_K: case WS_V: return (size_t)(n * w.hd * w.Hkv) * F;
    case WS_QKV: return (size_t)(n * w.qkv) * F;
    case WS_CONV: /* also holds qwen3next's legacy ssm_in product before the conv */
        return (size_t)(n * (hp->arch == ST_ARCH_QWEN3NEXT ? w.C + w.vd : w.C)) * F;
    case WS_Z: case WS_GDN_OUT: return (size_t)(n * w.vd) * F;
    case WS_BA: return hp->arch == ST_ARCH_QWEN3NEXT ? (size_t)(n * 2 * w.n_v) * F : 0;
    case WS_A: case WS_B: case WS_GATE_G: case WS_GATE_BETA: return (size_t)(n * w.n_v) * F;
    case WS_GDN_SCRATCH: return w.hybrid ? st_gdn_chunked_scratch_size(plan->n_threads, hp->ssm_state) : 0;
    case WS_FF_A: case WS_FF_B: return (size_t)(n * max_dense_ff(hp)) * F;
    case WS_ROUTER: return (size_t)(n * w.E) * F;
    case WS_IDS: case WS_SLOT: return (size_t)(n * w.k) * sizeof(int32_t);
    case WS_ORDER: return (size_t)(n * (w.k + 1)) * sizeof(int32_t);
    case WS_W: return (size_t)(n * w.k) * F;
    case WS_EXPERT_ROWS: return w.moe ? (size_t)(2 * w.E + 2) * sizeof(int64_t) : 0;
    /* Gathered expert rows: n*k routed plus n shared (the fused expert job runs both). */
    case WS_XE: return (size_t)(n * w.k * w.d) * F; /* only the per-matmul fallback gathers */
    case WS_YE: return (size_t)(n * (w.k + 1) * w.d) * F;
    case WS_GE: return w.moe ? (size_t)(n * (w.k + 1) * fwd_moe_gu_width(hp)) * F : 0;
    case WS_ACT1: return w.moe ? (size_t)(n * (w.k + 1)) * fwd_moe_act_row(m, 0) : 0;
    case WS_ACT2: return w.moe ? (size_t)(n * (w.k + 1)) * fwd_moe_act_row(m, 1) : 0;
    case WS_ENT: return w.moe ? (size_t)(w.E + 1) * sizeof(moe_entry) : 0;
    case WS_UE: return (size_t)(n * w.k * w.ffe) * F;
    case WS_SH_G: return w.moe ? (size_t)n * F : 0;
    case WS_SH_OUT: return w.moe && hp->arch != ST_ARCH_QWEN3MOE ? (size_t)(n * w.d) * F : 0;
    case WS_MM: return mm_scratch_size(m, n);
    case WS_LOGITS: return (size_t)hp->n_vocab * F;
    /* IMRoPE pairs kept unrotated (rope.c): at most every pair of every q head */
    case WS_ROPE_KEEP: /* the QSA indexer's query heads rotate the same way */
        return hp->rope_kind == ST_ROPE_IMROPE ? (size_t)(n * (w.H > hp->idx_n_head ? w.H : hp->idx_n_head) * hp->n_rot) * F : 0;
    case WS_CAT: return m->n_mtp ? (size_t)(n * 2 * w.d) * F : 0; /* the MTP head's [e ; h] rows */
    default: return fwd_q4_ws_size(plan, id, n);
    }
}
