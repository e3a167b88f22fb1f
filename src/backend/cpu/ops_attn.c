/* ops_attn.c: the KV cache rows and causal attention over them (MODELS.md §2.6).
 *
 * Work is split in items of (query token, kv head): the r = n_head/n_head_kv query heads of a GQA
 * group read the same K and V rows, so a fast kernel widens each cache row (f16 -> f32) once for
 * all r heads. Items are dealt round-robin to the threads because causal items grow with the token
 * position. With fewer items than threads (decode on many cores) and enough cells, each group's
 * cells are cut into parts computed as separate items, whose softmax states (running max, sum,
 * unnormalised output) are merged after a barrier.
 * The reference item is the textbook online softmax, one key at a time. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
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
        float m = -INFINITY, l = 0.0f;
        for (int64_t i = 0; i < hd; i++) acc[i] = 0.0f;
        for (int64_t c = it->c_begin; c < it->n_vis; c++) {
            cache_row(it->k, kv_type, ops_attn_cell(it, c) * it->row, hd, kr);
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
            cache_row(it->v, kv_type, ops_attn_cell(it, c) * it->row, hd, vr);
            for (int64_t i = 0; i < hd; i++) acc[i] += p * vr[i];
        }
        ops_attn_finish(it, h, m, l, acc);
    }
}

typedef struct attn_job {
    const st_attn_args *a;
    ops_attn_fn item;
    int64_t per_item;   /* query heads per item: r, or 1 when r is too large */
    int64_t n_split;    /* parts the visible cells of each group are cut into (1 = no split): the
                           most of any row when by_row */
    int by_row;         /* each row takes its own count, row_split() */
    int nth;
    int64_t n_items;    /* n_tok * (n_head / per_item) * n_split */
    st_pool *pool;      /* for the barrier before the merge of split parts */
    float *part;        /* n_items * per_item * (hd + 2) floats when n_split > 1 */
} attn_job;

static int64_t visible(const st_attn_args *a, int64_t t) {
    int64_t n_vis = (int64_t)a->pos[t] + 1;
    if (n_vis > a->n_kv) n_vis = a->n_kv;
    return n_vis < 0 ? 0 : n_vis;
}

/* Below this many visible cells per part, splitting a group's cells over threads costs more in
 * merging and in thread wake-ups than it saves. */
#define ATTN_SPLIT_MIN_CELLS 512
/* Chunks of up to this many rows split each row's cells as that row alone would be split (decode):
 * the count depends on the row, never on the chunk, so a speculative verify chunk computes every
 * row bit for bit as the one-row decode of it would. */
#define ATTN_SPLIT_BY_ROW_MAX 16

/* The parts row t's cells are cut into when by_row: what a one-row job would choose. */
static int64_t row_split(const attn_job *j, int64_t t) {
    const int64_t groups = j->a->n_head / j->per_item, vis = visible(j->a, t);
    if (!j->by_row) return j->n_split;
    if (groups >= j->nth || vis < 2 * ATTN_SPLIT_MIN_CELLS) return 1;
    int64_t n = (j->nth + groups - 1) / groups;
    return n > vis / ATTN_SPLIT_MIN_CELLS ? vis / ATTN_SPLIT_MIN_CELLS : n;
}

/* Combines the split parts of one (token, head): the softmax of the union is the parts' sums
 * rescaled to the largest running max. */
static void attn_merge(const attn_job *j, int64_t t, int64_t h) {
    const st_attn_args *a = j->a;
    const int64_t hd = a->head_dim, stride = hd + 2;
    const int64_t hg = h / j->per_item, hh = h % j->per_item;
    const int64_t groups = a->n_head / j->per_item;
    float m = -INFINITY, l = 0.0f;
    const int64_t n_t = row_split(j, t);
    for (int64_t s = 0; s < n_t; s++) {
        const float *pp = j->part + (((t * groups + hg) * j->n_split + s) * j->per_item + hh) * stride;
        if (pp[1] > 0.0f && pp[0] > m) m = pp[0];
    }
    float *o = a->out + t * a->ldo_tok + h * hd;
    for (int64_t i = 0; i < hd; i++) o[i] = 0.0f;
    for (int64_t s = 0; s < n_t; s++) {
        const float *pp = j->part + (((t * groups + hg) * j->n_split + s) * j->per_item + hh) * stride;
        if (!(pp[1] > 0.0f)) continue;
        const float c = expf(pp[0] - m);
        l += pp[1] * c;
        for (int64_t i = 0; i < hd; i++) o[i] += pp[2 + i] * c;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int64_t i = 0; i < hd; i++) o[i] *= inv;
}

static void attn_worker(void *ctx, int ith, int nth) {
    const attn_job *j = ctx;
    const st_attn_args *a = j->a;
    const int64_t r = a->n_head / a->n_head_kv;
    const int64_t groups = a->n_head / j->per_item;
    const int64_t row = a->n_head_kv * a->head_dim;
    const size_t esz = a->kv_type == ST_TYPE_F16 ? 2 : 4;
    for (int64_t n = ith; n < j->n_items; n += nth) {
        const int64_t s = n % j->n_split, tg = n / j->n_split;
        const int64_t t = tg / groups, h0 = (tg % groups) * j->per_item;
        const int64_t g = h0 / r, n_vis = visible(a, t), n_t = row_split(j, t);
        if (s >= n_t) continue; /* this row has fewer parts: its spare items stay idle */
        long c0 = 0, c1 = (long)n_vis;
        if (n_t > 1) st_split((long)n_vis, (int)s, (int)n_t, &c0, &c1);
        ops_attn_item it = {
            .q = a->q + t * a->ldq_tok + h0 * a->ldq_head, .ldq_head = a->ldq_head,
            .r = j->per_item,
            .k = (const char *)a->k_cache + (size_t)(g * a->head_dim) * esz,
            .v = (const char *)a->v_cache + (size_t)(g * a->head_dim) * esz,
            .row = row, .hd = a->head_dim, .c_begin = c0, .n_vis = c1, .scale = a->scale,
            .out = a->out + t * a->ldo_tok + h0 * a->head_dim,
            .part = n_t > 1 ? j->part + n * j->per_item * (a->head_dim + 2) : NULL,
        };
        j->item(&it, a->kv_type);
    }
    if (j->n_split == 1) return;
    st_pool_barrier(j->pool);
    long m0, m1;
    st_split((long)(a->n_tok * a->n_head), ith, nth, &m0, &m1);
    for (long m = m0; m < m1; m++)
        if (row_split(j, m / a->n_head) > 1) attn_merge(j, m / a->n_head, m % a->n_head);
}

/* ---- the tiled path (prompt chunks) ---- */

typedef struct tile_job {
    const st_attn_args *a;
    ops_attn_tile_fn fn;
    int64_t tq;             /* tokens per tile */
    int64_t n_blocks;       /* token blocks per kv head */
    const int32_t *n_vis;   /* per token */
    float *scratch;         /* per thread: per_thread floats */
    size_t per_thread;
    atomic_long next;       /* the next tile to take */
} tile_job;

/* Tiles are taken from a shared counter, the last token block first: causal tiles grow with the
 * position, so the large ones start early and the small ones fill the gaps at the end. */
static void tile_worker(void *ctx, int ith, int nth) {
    (void)nth;
    tile_job *j = ctx;
    const st_attn_args *a = j->a;
    const int64_t r = a->n_head / a->n_head_kv, hd = a->head_dim;
    const size_t esz = a->kv_type == ST_TYPE_F16 ? 2 : 4;
    float *scratch = j->scratch + (size_t)ith * j->per_thread;
    for (;;) {
        const long n = atomic_fetch_add(&j->next, 1);
        if (n >= j->n_blocks * a->n_head_kv) break;
        const int64_t b = j->n_blocks - 1 - n / a->n_head_kv, g = n % a->n_head_kv;
        const int64_t t0 = b * j->tq, nt = a->n_tok - t0 < j->tq ? a->n_tok - t0 : j->tq;
        ops_attn_tile tile = {
            .q = a->q + t0 * a->ldq_tok + g * r * a->ldq_head, .ldq_tok = a->ldq_tok, .ldq_head = a->ldq_head,
            .n_tok = nt, .r = r, .hd = hd, .n_vis = j->n_vis + t0,
            .k = (const char *)a->k_cache + (size_t)(g * hd) * esz,
            .v = (const char *)a->v_cache + (size_t)(g * hd) * esz,
            .row = a->n_head_kv * hd, .scale = a->scale,
            .out = a->out + t0 * a->ldo_tok + g * r * hd, .ldo_tok = a->ldo_tok,
        };
        j->fn(&tile, a->kv_type, scratch);
    }
}

/* The tile kernel for this CPU and its vector width in floats; NULL when there is none. */
static ops_attn_tile_fn tile_pick(int *lanes) {
    const st_cpu_features *f = st_cpu();
    if (f->avx512f && f->avx512bw && f->avx512vl) { *lanes = 16; return ops_attn_tile_avx512; }
    if (f->avx2 && f->fma && f->f16c) { *lanes = 8; return ops_attn_tile_avx2; }
    return NULL;
}

/* Tiles for prompt chunks of ATTN_TILE_MIN_TOK tokens or more: each block of cells is then read
 * (and widened) once per tile instead of once per token. A row's result does not depend on the
 * rows that share its tile (lanes are independent, the blocks start at cell 0 whatever the tile,
 * and a masked cell adds an exact 0), so any split of a prompt into such chunks gives the same
 * bits. Shorter chunks (decode, a speculative verify, short pieces of a conversation) take the
 * per-token items, whose rows equal the one-row call's bit for bit, which the verify relies on
 * (test_ops_attn) and a cut-back session fed again in short pieces too (test_session_state).
 * Returns 0 when the items run instead: a short chunk, no SIMD kernel, a group wider than a
 * tile, or no memory for the scratch. */
#define ATTN_TILE_MIN_TOK 32
static int attn_tiled(st_pool *pool, const st_attn_args *a) {
    int lanes = 0;
    ops_attn_tile_fn fn = tile_pick(&lanes);
    const int64_t r = a->n_head / a->n_head_kv;
    if (!fn || a->n_tok < ATTN_TILE_MIN_TOK || r > OPS_ATTN_TILE_M) return 0;
    const int nth = pool ? st_pool_size(pool) : 1;
    int64_t tq = OPS_ATTN_TILE_M / r;
    if (tq > a->n_tok) tq = a->n_tok;
    /* Smaller tiles when there are too few to keep every thread busy, down to one vector of rows. */
    while (a->n_head_kv * ((a->n_tok + tq - 1) / tq) < 2 * nth && (tq / 2) * r >= lanes) tq /= 2;
    tile_job j = { .a = a, .fn = fn, .tq = tq, .n_blocks = (a->n_tok + tq - 1) / tq,
                   .per_thread = ops_attn_tile_floats(a->head_dim) };
    atomic_init(&j.next, 0);
    const size_t floats = j.per_thread * (size_t)nth + (size_t)a->n_tok;
    float *buf = aligned_alloc(64, (floats * sizeof(float) + 63) & ~(size_t)63);
    if (!buf) return 0;
    int32_t *n_vis = (int32_t *)(buf + j.per_thread * (size_t)nth);
    for (int64_t t = 0; t < a->n_tok; t++) n_vis[t] = (int32_t)visible(a, t);
    j.scratch = buf;
    j.n_vis = n_vis;
    ops_run(pool, j.n_blocks * a->n_head_kv > 1, tile_worker, &j);
    free(buf);
    return 1;
}

ops_attn_fn ops_attn_item_pick(void) {
    const st_cpu_features *f = st_cpu();
    if (f->avx512f && f->avx512bw && f->avx512vl) return ops_attn_item_avx512;
    if (f->avx2 && f->fma && f->f16c) return ops_attn_item_avx2;
    return ops_attn_item_ref;
}

#define ATTN_SPLIT_STACK_FLOATS 8192

void st_op_attention(st_pool *pool, const st_attn_args *a) {
    if (a->head_dim > ATTN_MAX_HD || a->n_head_kv <= 0 || a->n_head % a->n_head_kv) return;
    if (attn_tiled(pool, a)) return;
    const int nth = pool ? st_pool_size(pool) : 1;
    const int64_t r = a->n_head / a->n_head_kv;
    attn_job j = { a, ops_attn_item_pick(), r, 1, 0, nth, a->n_tok * a->n_head_kv, pool, NULL };
    if (r > ATTN_MAX_GROUP) {
        j.per_item = 1;
        j.n_items = a->n_tok * a->n_head;
    }
    /* Fewer items than threads (decode with few kv heads on many cores): cut each group's cells
     * into parts, one item each, and merge the parts' softmax states after a barrier. */
    float stack_part[ATTN_SPLIT_STACK_FLOATS];
    void *owned = NULL;
    int64_t max_vis = 0, n_split = 1;
    for (int64_t t = 0; t < a->n_tok; t++) max_vis = visible(a, t) > max_vis ? visible(a, t) : max_vis;
    if (a->n_tok <= ATTN_SPLIT_BY_ROW_MAX) {
        j.by_row = 1;
        for (int64_t t = 0; t < a->n_tok; t++) n_split = row_split(&j, t) > n_split ? row_split(&j, t) : n_split;
    } else if (j.n_items < nth && max_vis >= 2 * ATTN_SPLIT_MIN_CELLS) {
        n_split = (nth + j.n_items - 1) / j.n_items;
        if (n_split > max_vis / ATTN_SPLIT_MIN_CELLS) n_split = max_vis / ATTN_SPLIT_MIN_CELLS;
    }
    if (n_split > 1) {
        const size_t floats = (size_t)(j.n_items * n_split * j.per_item * (a->head_dim + 2));
        float *part = floats <= ATTN_SPLIT_STACK_FLOATS ? stack_part : (float *)(owned = malloc(floats * sizeof(float)));
        if (part) {
            j.n_split = n_split;
            j.n_items *= n_split;
            j.part = part;
        } else {
            j.by_row = 0; /* no room for the parts: every row whole */
        }
    }
    ops_run(pool, j.n_items > 1, attn_worker, &j);
    free(owned);
}
