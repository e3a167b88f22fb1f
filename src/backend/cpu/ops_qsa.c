/* ops_qsa.c: qwen4exp's QSA sparse attention on the CPU (MODELS.md §6.2, ERRATA F1-F4): pooling
 * the raw indexer keys of complete blocks, the block scores, the selection of the cells each query
 * reads, and the attention over those cells only.
 *
 * The selection reproduces llama.cpp's CPU exactly. There each query row holds one f32 value per
 * cell: its block's score sigma for cells of complete blocks before the query's tail, sigma + 1e9
 * for the tail cells (the bias of llama_memory_hybrid_idx::set_input_qsa), -inf for empty, future
 * or foreign cells; ggml_top_k then takes the W = B + r - 1 largest with
 * std::partial_sort(idx, idx + W, idx + n_kv, value greater), which in libstdc++ is a heap
 * selection: make_heap over the first W indices, then every later index whose value beats the
 * heap's top (the smallest kept) replaces it. Cells share their block's value, so which cells of a
 * partly selected block win, and which of several equal-score blocks (sigma = 0 is common: a sum
 * of ReLUs), is decided by that heap's order, not by position; ops_qsa_heap_select_ref is the same
 * algorithm step for step (sift-down to a leaf, then sift-up, as __adjust_heap does). Two facts
 * make the row cheap to rebuild here: for one sequence cell j is position j, and every -inf cell
 * lies after the query's last visible cell, so no -inf ever enters the heap and the row is just
 * cells 0 .. p. The tail's exact value does not matter: its cells share one value above every
 * block score (unless a score reaches about 1e9), and there are at most r - 1 <= W of them, so all
 * are taken whatever it is; 1e9 stands for sigma_tail + 1e9 (ERRATA F4's spare block included).
 * A query with p + 1 <= W keeps every visible cell: dense attention.
 *
 * The attention over the chosen cells is the attention item kernel st_op_attention would run
 * (ops_attn_*.c, the reference one under st_cpu_limit(0)) given the list: it reads each listed
 * cell's K and V rows where they lie in the cache, and fetches the next block's ahead. A query
 * costs O(W) however long the context. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/ops_cpu.h"
#include "base/cpu.h"
#include "quant/quant.h"

#define QSA_TAIL 1e9f

void st_op_qsa_pool(uint32_t kv_type, const void *cache, int64_t dim, int64_t r, int64_t b0, int64_t b1,
                    float *out) {
    const float inv = 1.0f / (float)r;
    for (int64_t b = b0; b < b1; b++) {
        float *o = out + (b - b0) * dim;
        for (int64_t j = 0; j < r; j++) {
            const int64_t cell = b * r + j;
            for (int64_t i = 0; i < dim; i++) {
                const float k = kv_type == ST_TYPE_F16 ? st_fp16_to_fp32(((const uint16_t *)cache)[cell * dim + i])
                                                       : ((const float *)cache)[cell * dim + i];
                o[i] = j == 0 ? k : o[i] + k;
            }
        }
        for (int64_t i = 0; i < dim; i++) o[i] *= inv;
    }
}

void ops_qsa_scores_ref(const float *q, int64_t n_head, int64_t dim, const float *K, int64_t n_blocks, float *sigma) {
    for (int64_t b = 0; b < n_blocks; b++) {
        float sum = 0.0f;
        for (int64_t h = 0; h < n_head; h++) {
            float dot = 0.0f;
            for (int64_t i = 0; i < dim; i++) dot += q[h * dim + i] * K[b * dim + i];
            sum += dot > 0.0f ? dot : 0.0f;
        }
        sigma[b] = sum;
    }
}

static ops_qsa_scores_fn scores_pick(void) {
    const st_cpu_features *f = st_cpu();
    if (f->avx512f) return ops_qsa_scores_avx512;
    if (f->avx2 && f->fma) return ops_qsa_scores_avx2;
    return ops_qsa_scores_ref;
}

/* ---- the selection ---- */

/* One query's row: the value of cell j (j <= p). */
typedef struct qsa_row {
    const float *sigma;
    int64_t r, tail_start;
} qsa_row;

static inline float cell_value(const qsa_row *v, int32_t j) {
    return j >= v->tail_start ? QSA_TAIL : v->sigma[j / v->r];
}

/* std::__adjust_heap with comp(a, b) = value(a) > value(b): the hole at `hole` sinks to a leaf
 * along the children that are not greater, then `x` rises from there (std::__push_heap). */
static void adjust_heap(int32_t *h, int64_t hole, int64_t len, int32_t x, const qsa_row *v) {
    const int64_t top = hole;
    int64_t child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (cell_value(v, h[child]) > cell_value(v, h[child - 1])) child--;
        h[hole] = h[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        h[hole] = h[child - 1];
        hole = child - 1;
    }
    const float xv = cell_value(v, x);
    int64_t parent = (hole - 1) / 2;
    while (hole > top && cell_value(v, h[parent]) > xv) {
        h[hole] = h[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    h[hole] = x;
}

void ops_qsa_heap_select_ref(int32_t *h, int64_t W, int64_t n, const float *sigma, int64_t r, int64_t tail_start) {
    const qsa_row v = {sigma, r, tail_start};
    for (int64_t i = 0; i < W; i++) h[i] = (int32_t)i;
    if (W >= 2)
        for (int64_t parent = (W - 2) / 2;; parent--) {
            adjust_heap(h, parent, W, h[parent], &v);
            if (parent == 0) break;
        }
    for (int64_t i = W; i < n; i++)
        if (cell_value(&v, (int32_t)i) > cell_value(&v, h[0])) adjust_heap(h, 0, W, (int32_t)i, &v); /* __pop_heap */
}

/* The same heap with each entry's value kept beside its cell (hv), so that a comparison loads a
 * float instead of dividing a cell by r; the moves are the reference's, one for one. */
static void adjust_heap_kept(int32_t *h, float *hv, int64_t hole, int64_t len, int32_t x, float xv) {
    const int64_t top = hole;
    int64_t child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        child -= hv[child] > hv[child - 1]; /* no branch: the comparison is a coin toss */
        h[hole] = h[child];
        hv[hole] = hv[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        h[hole] = h[child - 1];
        hv[hole] = hv[child - 1];
        hole = child - 1;
    }
    int64_t parent = (hole - 1) / 2;
    while (hole > top && hv[parent] > xv) {
        h[hole] = h[parent];
        hv[hole] = hv[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    h[hole] = x;
    hv[hole] = xv;
}

void ops_qsa_heap_select(int32_t *h, float *hv, int64_t W, int64_t n, const float *sigma, int64_t r,
                         int64_t tail_start) {
    const qsa_row v = {sigma, r, tail_start};
    for (int64_t i = 0; i < W; i++) {
        h[i] = (int32_t)i;
        hv[i] = cell_value(&v, (int32_t)i);
    }
    if (W >= 2)
        for (int64_t parent = (W - 2) / 2;; parent--) {
            adjust_heap_kept(h, hv, parent, W, h[parent], hv[parent]);
            if (parent == 0) break;
        }
    /* the later cells a block at a time (the tail is one short block): its cells share a value,
     * and a block that does not beat the heap's top leaves the heap as it is */
    for (int64_t i = W, end = (W / r + 1) * r; i < n; end += r) {
        const float x = i >= tail_start ? QSA_TAIL : sigma[i / r];
        if (end > n) end = n;
        for (; i < end; i++)
            if (x > hv[0]) adjust_heap_kept(h, hv, 0, W, (int32_t)i, x); /* __pop_heap */
    }
}

typedef struct qsa_job {
    const st_qsa_args *a;
    char *scratch;
    size_t per_thread;
    int64_t max_blocks;
    ops_qsa_scores_fn scores;
    st_pool *pool;     /* for the barrier of a lone query, whose blocks the threads score together */
} qsa_job;

/* A thread's scratch: block scores, then the heap's cells and values, then the cell mark (8-byte
 * aligned parts). */
static size_t round8(size_t n) { return (n + 7) / 8 * 8; }
static size_t sigma_bytes(int64_t max_blocks) { return round8((size_t)(max_blocks + 1) * sizeof(float)); }
static size_t heap_bytes(int64_t width) { return round8((size_t)width * sizeof(int32_t)); }

static size_t qsa_thread_bytes(int64_t n_ctx, int64_t r, int64_t width) {
    size_t mark = (size_t)(n_ctx / 64 + 1) * sizeof(uint64_t);
    return (sigma_bytes(n_ctx / r) + 2 * heap_bytes(width) + mark + 63) / 64 * 64;
}

size_t st_qsa_scratch_size(int n_threads, int64_t n_ctx, int64_t r, int64_t width) {
    if (r <= 0) return 0;
    return (size_t)(n_threads > 0 ? n_threads : 1) * qsa_thread_bytes(n_ctx, r, width);
}

/* Query t's selection from its block scores sigma (already computed when `scored`). */
static void qsa_select_row(const qsa_job *j, int64_t t, char *scr, int scored) {
    const st_qsa_args *a = j->a;
    int32_t *cells = a->cells + t * a->ld_cells;
    const int64_t p = a->pos[t], W = a->width;
    if (p + 1 <= W) {
        for (int64_t c = 0; c <= p; c++) cells[c] = (int32_t)c;
        a->n_cells[t] = (int32_t)(p + 1);
        return;
    }
    float *sigma = (float *)scr;
    int32_t *heap = (int32_t *)(scr + sigma_bytes(j->max_blocks));
    float *heap_val = (float *)((char *)heap + heap_bytes(W));
    uint64_t *mark = (uint64_t *)((char *)heap_val + heap_bytes(W));
    const int64_t tail_start = (p + 1) / a->r * a->r, n_blocks = tail_start / a->r;
    if (!scored) j->scores(a->q + t * a->ld_q, a->n_head, a->dim, a->blocks, n_blocks, sigma);
    ops_qsa_heap_select(heap, heap_val, W, p + 1, sigma, a->r, tail_start);
    const int64_t words = (p + 1 + 63) / 64;
    memset(mark, 0, (size_t)words * sizeof *mark);
    for (int64_t i = 0; i < W; i++) mark[heap[i] >> 6] |= 1ull << (heap[i] & 63);
    int64_t n = 0;
    for (int64_t w = 0; w < words; w++)
        for (uint64_t bits = mark[w]; bits; bits &= bits - 1) cells[n++] = (int32_t)(w * 64 + __builtin_ctzll(bits));
    a->n_cells[t] = (int32_t)n;
}

static void qsa_worker(void *ctx, int ith, int nth) {
    const qsa_job *j = ctx;
    const st_qsa_args *a = j->a;
    if (a->n_tok == 1 && nth > 1) {
        /* decode: the threads score slices of the blocks into thread 0's scratch, which selects */
        const int64_t p = a->pos[0], n_blocks = p + 1 > a->width ? (p + 1) / a->r : 0;
        long b0, b1;
        st_split((long)n_blocks, ith, nth, &b0, &b1);
        if (b1 > b0) j->scores(a->q, a->n_head, a->dim, a->blocks + b0 * a->dim, b1 - b0, (float *)j->scratch + b0);
        st_pool_barrier(j->pool);
        if (ith == 0) qsa_select_row(j, 0, j->scratch, 1);
        return;
    }
    char *scr = j->scratch + (size_t)ith * j->per_thread;
    for (int64_t t = ith; t < a->n_tok; t += nth) qsa_select_row(j, t, scr, 0);
}

void st_op_qsa_select(st_pool *pool, const st_qsa_args *a, void *scratch) {
    qsa_job j = {a, scratch, qsa_thread_bytes(a->n_ctx, a->r, a->width), a->n_ctx / a->r, scores_pick(), pool};
    /* a lone query is worth the threads only with many blocks to score */
    int threaded = a->n_tok > 1 || (a->pos[0] + 1) / a->r >= 1024;
    ops_run(pool, threaded, qsa_worker, &j);
}

/* ---- attention over the chosen cells ---- */

typedef struct cells_job {
    const st_attn_cells_args *c;
    int64_t per_item, n_items;
    ops_attn_fn kernel;
} cells_job;

/* One (token, group of per_item query heads) item: the attention item kernel over the token's
 * list, reading the cache rows in place. */
static void cells_worker(void *ctx, int ith, int nth) {
    const cells_job *j = ctx;
    const st_attn_args *a = &j->c->a;
    const int64_t groups = a->n_head / j->per_item, hd = a->head_dim, r = a->n_head / a->n_head_kv;
    const size_t esize = a->kv_type == ST_TYPE_F16 ? 2 : 4;
    for (int64_t n = ith; n < j->n_items; n += nth) {
        const int64_t t = n / groups, h0 = (n % groups) * j->per_item, g = h0 / r;
        ops_attn_item it = {
            .q = a->q + t * a->ldq_tok + h0 * a->ldq_head, .ldq_head = a->ldq_head, .r = j->per_item,
            .k = (const char *)a->k_cache + (size_t)(g * hd) * esize, .v = (const char *)a->v_cache + (size_t)(g * hd) * esize,
            .row = a->n_head_kv * hd, .hd = hd, .c_begin = 0, .n_vis = j->c->n_cells[t],
            .cells = j->c->cells + t * j->c->ld_cells, .scale = a->scale, .out = a->out + t * a->ldo_tok + h0 * hd,
        };
        j->kernel(&it, a->kv_type);
    }
}

void st_op_attention_cells(st_pool *pool, const st_attn_cells_args *c) {
    const st_attn_args *a = &c->a;
    if (a->head_dim > ATTN_MAX_HD || a->n_head_kv <= 0 || a->n_head % a->n_head_kv) return;
    const int64_t r = a->n_head / a->n_head_kv;
    cells_job j = {c, r <= ATTN_MAX_GROUP ? r : 1, 0, ops_attn_item_pick()};
    j.n_items = a->n_tok * (a->n_head / j.per_item);
    ops_run(pool, j.n_items > 1, cells_worker, &j);
}
