/* layer.c: the table of st_layer's tensors (model.h) and the walk over every tensor slot of a
 * model. The table is the one place that lists a layer's fields; a field without its row fails
 * the build (the count below) and test_layer_table (the order). */
#include <stddef.h>

#include "model/model.h"

#define ROW(field, kind) {#field, offsetof(st_layer, field), kind}

const st_layer_tensor st_layer_tensors[] = {
    ROW(attn_norm, ST_LT_VECTOR),   ROW(ffn_norm, ST_LT_VECTOR),
    /* attention */
    ROW(wq, ST_LT_MATRIX),          ROW(wk, ST_LT_MATRIX),        ROW(wv, ST_LT_MATRIX),
    ROW(wqkv, ST_LT_MATRIX),        ROW(wo, ST_LT_MATRIX),
    ROW(bq, ST_LT_VECTOR),          ROW(bk, ST_LT_VECTOR),        ROW(bv, ST_LT_VECTOR),
    ROW(bqkv, ST_LT_VECTOR),
    ROW(q_norm, ST_LT_VECTOR),      ROW(k_norm, ST_LT_VECTOR),
    /* Gated DeltaNet */
    ROW(ssm_qkv, ST_LT_MATRIX),     ROW(ssm_gate, ST_LT_MATRIX),  ROW(ssm_in, ST_LT_MATRIX),
    ROW(ssm_conv1d, ST_LT_VECTOR),  ROW(ssm_dt, ST_LT_VECTOR),    ROW(ssm_a, ST_LT_VECTOR),
    ROW(ssm_beta, ST_LT_MATRIX),    ROW(ssm_alpha, ST_LT_MATRIX), ROW(ssm_ba, ST_LT_MATRIX),
    ROW(ssm_norm, ST_LT_VECTOR),    ROW(ssm_out, ST_LT_MATRIX),
    /* dense FFN */
    ROW(ffn_gate, ST_LT_MATRIX),    ROW(ffn_up, ST_LT_MATRIX),    ROW(ffn_down, ST_LT_MATRIX),
    /* MoE */
    ROW(gate_inp, ST_LT_MATRIX),    ROW(gate_exps, ST_LT_EXPERTS), ROW(up_exps, ST_LT_EXPERTS),
    ROW(gate_up_exps, ST_LT_EXPERTS), ROW(down_exps, ST_LT_EXPERTS),
    ROW(gate_inp_shexp, ST_LT_VECTOR), ROW(gate_shexp, ST_LT_MATRIX), ROW(up_shexp, ST_LT_MATRIX),
    ROW(down_shexp, ST_LT_MATRIX),
    /* qwen4exp: hyper-connection mixers, QSA indexer, PLE */
    ROW(hc_attn_norm, ST_LT_VECTOR), ROW(hc_attn_down, ST_LT_MATRIX), ROW(hc_attn_up, ST_LT_MATRIX),
    ROW(hc_attn_inject, ST_LT_MATRIX),
    ROW(hc_ffn_norm, ST_LT_VECTOR), ROW(hc_ffn_down, ST_LT_MATRIX), ROW(hc_ffn_up, ST_LT_MATRIX),
    ROW(hc_ffn_inject, ST_LT_MATRIX),
    ROW(idx_q, ST_LT_MATRIX),       ROW(idx_k, ST_LT_MATRIX),
    ROW(idx_q_norm, ST_LT_VECTOR),  ROW(idx_k_norm, ST_LT_VECTOR),
    ROW(ple_key, ST_LT_MATRIX),     ROW(ple_value, ST_LT_MATRIX),
    ROW(ple_norm_key, ST_LT_VECTOR), ROW(ple_norm_query, ST_LT_VECTOR), ROW(ple_norm_conv, ST_LT_VECTOR),
    ROW(ple_conv1d, ST_LT_VECTOR),  ROW(ple_conv_wide, ST_LT_VECTOR),
    /* the MTP block */
    ROW(nextn_eh_proj, ST_LT_MATRIX), ROW(nextn_enorm, ST_LT_VECTOR), ROW(nextn_hnorm, ST_LT_VECTOR),
    ROW(nextn_head_norm, ST_LT_VECTOR), ROW(nextn_head, ST_LT_MATRIX),
};

_Static_assert(sizeof(st_layer) % sizeof(st_tensor) == 0, "st_layer holds st_tensor fields only");
_Static_assert(sizeof st_layer_tensors / sizeof st_layer_tensors[0] == sizeof(st_layer) / sizeof(st_tensor),
               "every st_layer field needs its row in st_layer_tensors");

enum { TOP_SLOTS = 7 };

int64_t st_model_n_tensor_slots(const struct st_model *m) {
    return TOP_SLOTS + st_model_n_blocks(m) * ST_LAYER_N_TENSORS;
}

st_tensor *st_model_tensor_slot(struct st_model *m, int64_t i) {
    if (i == 0) return &m->tok_embd;
    if (i == 1) return &m->output;
    if (i == 2) return &m->output_norm;
    if (i == 3) return &m->hc_head_norm;
    if (i == 4) return &m->hc_head_down;
    if (i == 5) return &m->hc_head_up;
    if (i == 6) return &m->ple_table;
    i -= TOP_SLOTS;
    return st_layer_tensor_at(&m->layers[i / ST_LAYER_N_TENSORS], (int)(i % ST_LAYER_N_TENSORS));
}

const st_tensor *st_model_tensor_slot_get(const struct st_model *m, int64_t i) {
    return st_model_tensor_slot((struct st_model *)m, i);
}

st_layer_tensor_kind st_model_tensor_slot_kind(const struct st_model *m, int64_t i) {
    (void)m;
    if (i < TOP_SLOTS) return i == 2 ? ST_LT_VECTOR : ST_LT_MATRIX;
    return st_layer_tensors[(i - TOP_SLOTS) % ST_LAYER_N_TENSORS].kind;
}
