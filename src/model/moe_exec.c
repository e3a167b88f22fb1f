/* moe_exec.c: every expert of one MoE layer (the routed ones and the shared one) in a single
 * thread-pool job, on the CPU.
 *
 * With one st_matmul per expert projection, a decoded token costs 3 pool dispatches per selected
 * expert (24 per layer for top-8), each too small to keep two threads busy; a prompt chunk leaves
 * threads idle on the experts that got few rows. Here the whole layer is one job in four phases,
 * separated by barriers:
 *   1. each thread converts its share of the gathered input rows to the weights' activation form
 *      (Q8_K for K-quants, ...), once;
 *   2. gate and up: tiles of weight rows of any expert are taken from a shared counter, each
 *      tile run against all of that expert's rows (the weight tile stays in cache);
 *   3. silu(gate) * up per row, converted to the down projection's activation form;
 *   4. down, tiled the same way.
 * The products are the same dot kernels st_matmul uses (quant/dot.h), so the results are
 * bit-identical to the per-expert path; the expert's .scale multiplies each product as in §2.1.
 * It is the one CPU kernel outside the backend: it reads the layer's expert tensors (st_tensor)
 * directly. The CUDA backend takes the same products through a layout-free description
 * (cuda_backend.h's st_cuda_experts); giving the CPU one too would move this to backend/cpu/. */
#include <stdatomic.h>
#include <string.h>

#include "backend/backend.h"
#include "model/moe_exec.h"
#include "quant/dot.h"
#include "quant/dot_tile.h"
#include "quant/types.h"

/* Weight rows per tile: with many rows per expert (a prompt chunk) a small tile stays in L1 while
 * it is run against all of them; with about one row per expert (decode) a larger tile is a longer
 * sequential read for the prefetchers. */
enum { TILE_PROMPT = 16, TILE_DECODE = 64 };

typedef struct moe_job {
    st_pool *pool;
    const moe_args *a;
    int64_t tile;                /* weight rows per tile */
    int dynamic;                 /* tiles from the shared counter (else a static split) */
    int64_t tiles1, tiles2;      /* total tiles of the gate/up and the down phase */
    atomic_llong next1, next2;
} moe_job;

/* A forward-only cursor over the entries: the rows (and tiles) a thread visits only increase, so
 * finding each one's entry costs O(1) amortised instead of a scan from entry 0 (at 512 experts a
 * prompt chunk has tens of thousands of tiles). */
typedef struct ent_cursor {
    int e;
    int64_t first;               /* the first tile of entry e (tiles only) */
} ent_cursor;

static int entry_of_row(const moe_args *a, int64_t p, ent_cursor *c) {
    while (c->e + 1 < a->n_ent && a->ent[c->e + 1].p0 <= p) c->e++;
    return c->e;
}

static int64_t tiles_of(const moe_job *j, int e, int phase) {
    int64_t m = phase == 1 ? 2 * j->a->ent[e].ff : j->a->d;
    return (m + j->tile - 1) / j->tile;
}

/* The entry of tile t of a phase (entries in order, each with ceil(weight rows / tile) tiles). */
static int entry_of_tile(const moe_job *j, int64_t t, int phase, ent_cursor *c, int64_t *first) {
    while (c->e < j->a->n_ent && t >= c->first + tiles_of(j, c->e, phase)) c->first += tiles_of(j, c->e++, phase);
    if (c->e >= j->a->n_ent) return -1;
    *first = (t - c->first) * j->tile;
    return c->e;
}

/* out rows [m0, m1) of weight rows `row(m)` against the entry's activation rows; a projection
 * with a tile kernel (quant/dot_tile.h) takes ST_DOT_TILE_MR weight rows per call, never across
 * the gate/up boundary (same bits as one row per call). */
static void run_tile(const moe_entry *en, int64_t m0, int64_t m1, int phase, const moe_args *j) {
    int64_t K = phase == 1 ? j->d : en->ff;
    const char *act = phase == 1 ? j->act1 : j->act2;
    size_t act_row = phase == 1 ? j->act1_row : j->act2_row;
    float out[ST_DOT_TILE_MR * ST_DOT_MAX_NX];
    for (int64_t i = 0; i < en->rows; i += ST_DOT_MAX_NX) {
        int nx = en->rows - i < ST_DOT_MAX_NX ? (int)(en->rows - i) : ST_DOT_MAX_NX;
        const char *x = act + (size_t)(en->p0 + i) * act_row;
        for (int64_t m = m0; m < m1;) {
            const char *w;
            size_t rb;
            st_dot_fn dot;
            st_dot_tile_fn tile;
            float s;
            int64_t lim = m1;
            if (phase == 2) {
                w = en->wd + (size_t)m * en->rd, rb = en->rd, dot = en->dot_d, tile = en->tile_d, s = en->sd;
            } else if (m < en->ff) {
                w = en->wg + (size_t)m * en->rg, rb = en->rg, dot = en->dot_g, tile = en->tile_g, s = en->sg;
                lim = en->ff < m1 ? en->ff : m1;
            } else {
                w = en->wu + (size_t)(m - en->ff) * en->ru, rb = en->ru, dot = en->dot_u, tile = en->tile_u, s = en->su;
            }
            const int mr = tile ? (int)(lim - m < ST_DOT_TILE_MR ? lim - m : ST_DOT_TILE_MR) : 1;
            if (tile) tile(K, w, rb, mr, x, act_row, nx, out, nx);
            else dot(K, w, x, act_row, nx, out);
            float *dst = phase == 1 ? j->gu + (en->p0 + i) * j->ld_gu : j->y + (en->p0 + i) * j->d;
            const int64_t ld = phase == 1 ? j->ld_gu : j->d;
            for (int q = 0; q < mr; q++)
                for (int r = 0; r < nx; r++) dst[r * ld + m + q] = s == 1.0f ? out[q * nx + r] : out[q * nx + r] * s;
            m += mr;
        }
    }
}

/* With many rows per expert the tiles differ in cost, so threads take them from a shared counter;
 * with about one row per expert (decode) they cost the same, and each thread takes one contiguous
 * range of tiles: one long sequential read of the weights per thread. */
static void run_tiles(moe_job *j, int phase, int ith, int nth) {
    atomic_llong *next = phase == 1 ? &j->next1 : &j->next2;
    int64_t total = phase == 1 ? j->tiles1 : j->tiles2;
    long t_static, t_end;
    st_split((long)total, ith, nth, &t_static, &t_end);
    ent_cursor c = {0, 0};
    for (;;) {
        int64_t t;
        if (j->dynamic) t = atomic_fetch_add_explicit(next, 1, memory_order_relaxed);
        else if ((t = t_static++) >= t_end) break;
        if (t >= total) break;
        int64_t m0 = 0;
        int e = entry_of_tile(j, t, phase, &c, &m0);
        if (e < 0) break;
        const moe_entry *en = &j->a->ent[e];
        int64_t m_end = phase == 1 ? 2 * en->ff : j->a->d;
        run_tile(en, m0, m0 + j->tile < m_end ? m0 + j->tile : m_end, phase, j->a);
    }
}

static void moe_worker(void *ctx, int ith, int nth) {
    moe_job *j = ctx;
    const moe_args *a = j->a;
    long b, e;
    /* 1: each gathered row, read from its token, to the gate/up weights' activation form */
    st_split((long)a->P, ith, nth, &b, &e);
    ent_cursor c1 = {0, 0};
    for (long p = b; p < e; p++) {
        const moe_entry *en = &a->ent[entry_of_row(a, p, &c1)];
        en->act_g(a->x + (int64_t)a->x_row[p] * a->d, a->act1 + (size_t)p * a->act1_row, a->d);
    }
    st_pool_barrier(j->pool);
    /* 2: gate and up */
    run_tiles(j, 1, ith, nth);
    st_pool_barrier(j->pool);
    /* 3: silu(gate) * up, to the down weights' activation form */
    ent_cursor c3 = {0, 0};
    for (long p = b; p < e; p++) {
        const moe_entry *en = &a->ent[entry_of_row(a, p, &c3)];
        float *g = a->gu + p * a->ld_gu;
        st_op_swiglu(NULL, g, en->ff, g + en->ff, en->ff, g, en->ff, 1, en->ff);
        en->act_d(g, a->act2 + (size_t)p * a->act2_row, en->ff);
    }
    st_pool_barrier(j->pool);
    /* 4: down */
    run_tiles(j, 2, ith, nth);
    if (!a->out) return;
    st_pool_barrier(j->pool);
    /* 5: the weighted sum per token, in selection order, then the gated shared expert */
    st_split((long)a->n_tok, ith, nth, &b, &e);
    int64_t d = a->d, k = a->k;
    for (long t = b; t < e; t++) {
        float *o = a->out + t * d;
        st_op_scale(o, d, a->y + (int64_t)a->slot[t * k] * d, a->w[t * k]);
        for (int64_t s = 1; s < k; s++) st_op_axpy(o, d, a->y + (int64_t)a->slot[t * k + s] * d, a->w[t * k + s]);
        if (a->shared_gate) {
            float *ys = a->y + (a->shared_p0 + t) * d;
            st_op_scale(ys, d, ys, a->shared_gate[t]);
            st_op_add(NULL, o, d, ys, d, o, d, 1, d);
        }
    }
}

int moe_entry_init(moe_entry *en, const st_tensor *gate, const st_tensor *up, const st_tensor *gate_up,
                   const st_tensor *down, int64_t e, int64_t ff) {
    memset(en, 0, sizeof *en);
    en->ff = ff;
    if (gate_up && gate_up->data) {
        const char *base = (const char *)gate_up->data + (size_t)e * (size_t)gate_up->ne[1] * gate_up->row_bytes;
        en->wg = base;
        en->wu = base + (size_t)ff * gate_up->row_bytes;
        en->tg = en->tu = gate_up->type;
        en->rg = en->ru = gate_up->row_bytes;
        en->sg = en->su = 1.0f;
    } else {
        en->wg = (const char *)gate->data + (size_t)e * (size_t)gate->ne[1] * gate->row_bytes;
        en->wu = (const char *)up->data + (size_t)e * (size_t)up->ne[1] * up->row_bytes;
        en->tg = gate->type;
        en->tu = up->type;
        en->rg = gate->row_bytes;
        en->ru = up->row_bytes;
        en->sg = gate->ne[2] > 1 ? (gate->escale ? gate->escale[e] : 1.0f) : gate->scale;
        en->su = up->ne[2] > 1 ? (up->escale ? up->escale[e] : 1.0f) : up->scale;
    }
    en->wd = (const char *)down->data + (size_t)e * (size_t)down->ne[1] * down->row_bytes;
    en->td = down->type;
    en->rd = down->row_bytes;
    en->sd = down->ne[2] > 1 ? (down->escale ? down->escale[e] : 1.0f) : down->scale;
    /* gate and up share one converted input, so they must want the same activation form */
    if (st_dot_act_type(en->tg) != st_dot_act_type(en->tu)) return 0;
    en->dot_g = st_dot_kernel(en->tg);
    en->dot_u = st_dot_kernel(en->tu);
    en->dot_d = st_dot_kernel(en->td);
    en->tile_g = st_dot_tile_kernel(en->tg);
    en->tile_u = st_dot_tile_kernel(en->tu);
    en->tile_d = st_dot_tile_kernel(en->td);
    en->act_g = st_act_converter(st_dot_act_type(en->tg));
    en->act_d = st_act_converter(st_dot_act_type(en->td));
    return en->dot_g && en->dot_u && en->dot_d && en->act_g && en->act_d;
}

size_t moe_act_row_max(const st_tensor *const *ts, int n, int64_t K) {
    size_t mx = 0;
    for (int i = 0; i < n; i++) {
        if (!ts[i]->data) continue;
        size_t s = st_dot_act_row_size(st_dot_act_type(ts[i]->type), K);
        if (s > mx) mx = s;
    }
    return (mx + 63) / 64 * 64;
}

void moe_exec(st_pool *pool, const moe_args *a) {
    moe_job j = {.pool = pool, .a = a};
    j.dynamic = a->P > 2 * (int64_t)a->n_ent;
    j.tile = j.dynamic ? TILE_PROMPT : TILE_DECODE;
    for (int e = 0; e < a->n_ent; e++) {
        j.tiles1 += (2 * a->ent[e].ff + j.tile - 1) / j.tile;
        j.tiles2 += (a->d + j.tile - 1) / j.tile;
    }
    atomic_init(&j.next1, 0);
    atomic_init(&j.next2, 0);
    st_pool_run(pool, moe_worker, &j);
}
