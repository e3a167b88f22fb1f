/* ops_attn_tile.c: the bookkeeping of a prompt-attention tile that the SIMD tile kernels share
 * (ops_attn_avx2.c, ops_attn_avx512.c; ops_attn.c deals the tiles): loading a tile's queries,
 * pre-scaled and transposed to [hd][OPS_ATTN_TILE_M], with each row's visible cells and the empty
 * online-softmax state, and storing its normalised outputs. Kept apart from ops_attn.c, which
 * calls the kernels, so that the kernels do not call back into their caller's file. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/ops_cpu.h"

void ops_attn_tile_load(const ops_attn_tile *t, float *qt, int32_t *nvis, float *ot, float *m, float *l,
                        int64_t *kmin, int64_t *kmax) {
    const int64_t hd = t->hd, rows = t->n_tok * t->r;
    memset(qt, 0, sizeof(float) * (size_t)(hd * OPS_ATTN_TILE_M));
    memset(ot, 0, sizeof(float) * (size_t)(hd * OPS_ATTN_TILE_M));
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t i = 0; i < OPS_ATTN_TILE_M; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
        nvis[i] = 0;
        if (i >= rows) continue;
        const int64_t tt = i / t->r, hh = i % t->r;
        const float *q = t->q + tt * t->ldq_tok + hh * t->ldq_head;
        for (int64_t d = 0; d < hd; d++) qt[d * OPS_ATTN_TILE_M + i] = t->scale * q[d];
        nvis[i] = t->n_vis[tt];
        if (nvis[i] < lo) lo = nvis[i];
        if (nvis[i] > hi) hi = nvis[i];
    }
    *kmin = rows ? lo : 0;
    *kmax = hi;
}

void ops_attn_tile_store(const ops_attn_tile *t, const float *ot, const float *l) {
    const int64_t hd = t->hd;
    for (int64_t i = 0; i < t->n_tok * t->r; i++) {
        const int64_t tt = i / t->r, hh = i % t->r;
        float *o = t->out + tt * t->ldo_tok + hh * hd;
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        for (int64_t d = 0; d < hd; d++) o[d] = ot[d * OPS_ATTN_TILE_M + i] * inv;
    }
}
