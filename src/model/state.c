/* state.c: the return of a sequence's state to the one after row k of a keep_steps chunk
 * (state.h), the PLE hash's window of ids, and QSA's block count around a step the forward does
 * not run. They swap planes the
 * session allocated and move counts; they allocate nothing and run no layer. */
#include <string.h>

#include "model/state.h"

void st_state_keep_row(const struct st_model *m, st_state *s, int64_t pos0, int64_t k) {
    const st_hparams *hp = &m->hp;
    size_t conv_bytes = (size_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1)) * sizeof(float);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        st_layer_state *L = &s->layers[il];
        if (!L->ssm_steps) continue;
        /* The planes are the session's: row k's becomes the state, the old state a plane. */
        float *t = L->ssm;
        L->ssm = L->ssm_steps[k];
        L->ssm_steps[k] = t;
        memcpy(L->conv, L->conv_steps[k], conv_bytes);
    }
    s->n_past = pos0 + k + 1;
}

int st_state_qsa_step_ready(const struct st_model *m, const st_state *s, int64_t pos) {
    const st_hparams *hp = &m->hp;
    for (int64_t il = 0; il < hp->n_layer; il++)
        if (st_hp_qsa(hp, il) && s->layers[il].n_blocks < pos / hp->compress_ratio[il]) return 0;
    return 1;
}

void st_state_qsa_step_done(const struct st_model *m, st_state *s, int64_t pos) {
    const st_hparams *hp = &m->hp;
    for (int64_t il = 0; il < hp->n_layer; il++)
        if (st_hp_qsa(hp, il)) s->layers[il].n_blocks = (pos + 1) / hp->compress_ratio[il];
}

void st_state_ple_window(const struct st_model *m, const st_state *s, int64_t pos0, int64_t n, int32_t *win) {
    const int64_t N = m->hp.ple_ngram;
    for (int64_t j = 0; j < n + N - 1; j++) {
        const int64_t p = pos0 - (N - 1) + j;
        win[j] = p < 0 ? -1 : s->ids[p];
    }
}
