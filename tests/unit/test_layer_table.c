/* test_layer_table.c: the table of st_layer's tensors (model/layer.c) is the layer: one row per
 * field, in field order, each kind what the binder does with it; and the walks that use it see
 * every bound weight: on tiny models of all five architectures in their optional forms, every
 * bound matrix's matmul scratch fits the workspace's WS_MM, every tensor of the file is bound to
 * one slot of st_model_tensor_slot, and the slots hold no tensor the file lacks. */
#include <string.h>
#include <unistd.h>

#include "backend/cpu/matmul.h"
#include "model/forward_ws.h"
#include "model/model.h"
#include "strata.h"
#include "test.h"
#include "test_model_fixture.h"

static char dir[256];

static void test_rows(void) {
    for (int j = 0; j < ST_LAYER_N_TENSORS; j++) {
        CHECKF(st_layer_tensors[j].offset == (size_t)j * sizeof(st_tensor), "row %d (%s) is out of field order", j,
               st_layer_tensors[j].field);
        for (int k = 0; k < j; k++) CHECKF(strcmp(st_layer_tensors[j].field, st_layer_tensors[k].field), "%s twice", st_layer_tensors[j].field);
    }
}

/* Is `name` the name of a bound slot (other than the tied head's copy)? */
static int bound_slot(struct st_model *m, const char *name) {
    for (int64_t i = 0; i < st_model_n_tensor_slots(m); i++) {
        const st_tensor *t = st_model_tensor_slot(m, i);
        if (t->data && t->name && !strcmp(t->name, name)) return 1;
    }
    return 0;
}

static void check_model(const fx_opts *o, const char *tag) {
    st_model_params mp = {.progress = 0, .prefault = 0, .copy_weights = 0};
    st_model *m = fx_load(dir, o, tag, &mp);
    CHECKF(m != NULL, "%s %s: does not load", o->arch, tag);
    if (!m) return;
    /* kinds */
    for (int64_t il = 0; il < m->hp.n_layer; il++)
        for (int j = 0; j < ST_LAYER_N_TENSORS; j++) {
            const st_tensor *t = st_layer_tensor_get(&m->layers[il], j);
            if (!t->data) continue;
            st_layer_tensor_kind k = st_layer_tensors[j].kind;
            CHECKF((t->f32 != NULL) == (k == ST_LT_VECTOR), "%s %s: %s bound %s a vector, its row says otherwise", o->arch,
                   tag, t->name, t->f32 ? "as" : "not as");
            if (k == ST_LT_EXPERTS) CHECKF(t->ne[2] == m->hp.n_expert, "%s: %s is no expert tensor", tag, t->name);
            if (k == ST_LT_MATRIX) CHECKF(t->ne[2] == 1 && t->ne[1] > 1, "%s: %s is no matrix", tag, t->name);
        }
    /* WS_MM holds every product's scratch */
    st_ws_plan plan = {.m = m, .n_threads = 1};
    for (int64_t rows = 1; rows <= 64; rows *= 8) {
        size_t mm = st_forward_ws_size(&plan, WS_MM, rows);
        for (int64_t i = 1; i < st_model_n_tensor_slots(m); i++) {
            const st_tensor *t = st_model_tensor_slot(m, i);
            if (!t->data || t->f32) continue;
            CHECKF(st_matmul_scratch_size(t->type, t->ne[0], rows) <= mm, "%s %s: %s needs more matmul scratch than WS_MM",
                   o->arch, tag, t->name);
        }
    }
    /* every tensor of the file is in a slot (but for the .scale companions, folded into scale/escale) */
    for (int64_t i = 0; i < st_gguf_n_tensors(m->gguf); i++) {
        const char *name = st_gguf_tensor_at(m->gguf, i)->name;
        size_t len = strlen(name);
        if (len > 6 && !strcmp(name + len - 6, ".scale")) continue;
        CHECKF(bound_slot(m, name), "%s %s: %s is in the file but in no slot", o->arch, tag, name);
    }
    st_model_free(m);
}

int main(void) {
    test_rows();
    if (!fx_tmpdir(dir, sizeof dir, "layer")) SKIP("cannot create a temporary directory");
    const char *archs[] = {"qwen35moe", "qwen35", "qwen3next", "qwen3moe", "qwen3"};
    for (int a = 0; a < 5; a++) {
        fx_opts plain = {.arch = archs[a]};
        check_model(&plain, "plain");
        fx_opts forms = {.arch = archs[a], .fused_gate_up = a != 3, /* qwen3moe has no fused form */ .fused_attn_qkv = 1, .biases = 2, .f16 = "norm", .scale = 2.0f};
        check_model(&forms, "forms");
    }
    fx_opts legacy = {.arch = "qwen3next", .legacy_ssm_in = 1};
    check_model(&legacy, "legacy");
    rmdir(dir);
    return test_report("test_layer_table");
}
