/* ops_attn.c: the KV cache rows and causal attention over them (MODELS.md §2.6).
 *
 * Work is split in items of (query token, kv head): the r = n_head/n_head_kv query heads of a GQA
 * group read the same K and V rows, so a fast kernel widens each cache row (f16 -> f32) once for
 * all r heads. Items are dealt round-robin to the threads because causal items grow with the token
 * position. With fewer items than threads, items are single query heads instead.
 * The reference item is the textbook online softmax, one key at a time. */
#include <math.h>
#include <string.h>
#include "backend/cpu/ops_cpu.h"
#include "base/cpu.h"
#include "quant/quant.h"



size_t st_kv_row_bytes(uint32_t type, int64_t row) {
    return (size_t)row * (type == ST_TYPE_F16 ? 2u : 4u);
}

void st_op_kv_store(uint32_t type, void *cache, int64_t row, int64_t cell0, const float *src,
                    int64_t ld_src, int64_t n_tok) {
    const st_cpu_features *f = st_cpu();
    const int hw_f16 = f->avx512f && f->avx512bw && f->avx512vl;
    for (int64_t t = 0; t < n_tok; t++) {
        const float *s = src + t * ld_src;
        if (type == ST_TYPE_F16) {
            uint16_t *d = (uint16_t *)cache + (cell0 + t) * row;
            if (hw_f16) ops_f32_to_f16_avx512(s, d, row);
            else for (int64_t e = 0; e < row; e++) d[e] = st_fp32_to_fp16(s[e]);
        } else {
            memcpy((float *)cache + (cell0 + t) * row, s, (size_t)row * sizeof(float));
        }
    }
}

static void cache_row(const void *base, uint32_t type, int64_t off, int64_t n, float *dst) {
    if (type == ST_TYPE_F16) {
        const uint16_t *s = (const uint16_t *)base + off;
        for (int64_t i = 0; i < n; i++) dst[i] = st_fp16_to_fp32(s[i]);
    } else {
        memcpy(dst, (const float *)base + off, (size_t)n * sizeof(float));
    }
}

void ops_attn_item_ref(const ops_attn_item *it, uint32_t kv_type) {
    float kr[ATTN_MAX_HD], vr[ATTN_MAX_HD], acc[ATTN_MAX_HD];
    const int64_t hd = it->hd;
    for (int64_t h = 0; h < it->r; h++) {
        const float *q = it->q + h * it->ldq_head;
        float *o = it->out + h * hd;
        float m = -INFINITY, l = 0.0f;
        for (int64_t i = 0; i < hd; i++) acc[i] = 0.0f;
        for (int64_t c = 0; c < it->n_vis; c++) {
            cache_row(it->k, kv_type, c * it->row, hd, kr);
            float dot = 0.0f;
            for (int64_t i = 0; i < hd; i++) dot += q[i] * kr[i];
            const float s = it->scale * dot;
            if (s > m) {            /* new running max: rescale what was summed so far */
                const float c0 = expf(m - s);
                l *= c0;
                for (int64_t i = 0; i < hd; i++) acc[i] *= c0;
                m = s;
            }
            const float p = expf(s - m);
            l += p;
            cache_row(it->v, kv_type, c * it->row, hd, vr);
            for (int64_t i = 0; i < hd; i++) acc[i] += p * vr[i];
        }
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int64_t i = 0; i < hd; i++) o[i] = acc[i] * inv;
    }
}

typedef struct attn_job {
    const st_attn_args *a;
    ops_attn_fn item;
    int64_t per_item;   /* query heads per item: r, or 1 when items are too few */
    int64_t n_items;
} attn_job;

static void attn_worker(void *ctx, int ith, int nth) {
    const attn_job *j = ctx;
    const st_attn_args *a = j->a;
    const int64_t r = a->n_head / a->n_head_kv;
    const int64_t items_per_tok = a->n_head / j->per_item;
    const int64_t row = a->n_head_kv * a->head_dim;
    const size_t esz = a->kv_type == ST_TYPE_F16 ? 2 : 4;
    for (int64_t n = ith; n < j->n_items; n += nth) {
        const int64_t t = n / items_per_tok, h0 = (n % items_per_tok) * j->per_item;
        const int64_t g = h0 / r;
        int64_t n_vis = (int64_t)a->pos[t] + 1;
        if (n_vis > a->n_kv) n_vis = a->n_kv;
        if (n_vis < 0) n_vis = 0;
        ops_attn_item it = {
            .q = a->q + t * a->ldq_tok + h0 * a->ldq_head, .ldq_head = a->ldq_head,
            .r = j->per_item,
            .k = (const char *)a->k_cache + (size_t)(g * a->head_dim) * esz,
            .v = (const char *)a->v_cache + (size_t)(g * a->head_dim) * esz,
            .row = row, .hd = a->head_dim, .n_vis = n_vis, .scale = a->scale,
            .out = a->out + t * a->ldo_tok + h0 * a->head_dim,
        };
        j->item(&it, a->kv_type);
    }
}

static ops_attn_fn attn_pick(void) {
    const st_cpu_features *f = st_cpu();
    if (f->avx512f && f->avx512bw && f->avx512vl) return ops_attn_item_avx512;
    if (f->avx2 && f->fma && f->f16c) return ops_attn_item_avx2;
    return ops_attn_item_ref;
}

void st_op_attention(st_pool *pool, const st_attn_args *a) {
    if (a->head_dim > ATTN_MAX_HD || a->n_head_kv <= 0 || a->n_head % a->n_head_kv) return;
    const int nth = pool ? st_pool_size(pool) : 1;
    const int64_t r = a->n_head / a->n_head_kv;
    attn_job j = { a, attn_pick(), r, a->n_tok * a->n_head_kv };
    /* fewer (token, kv head) items than threads (decode with few kv heads on many cores): split
     * the groups so every thread has work, at the price of widening each K/V row r times */
    if (j.n_items < nth || r > ATTN_MAX_GROUP) {
        j.per_item = 1;
        j.n_items = a->n_tok * a->n_head;
    }
    ops_run(pool, j.n_items > 1, attn_worker, &j);
}
