/* ops_cpu.h: internals shared by the CPU op files (ops_*.c) and their SIMD variants
 * (ops_*_avx2.c, ops_*_avx512.c): running a job on the pool or inline, and the per-row kernels
 * whose fast versions the dispatchers pick. Not part of the backend contract (that is backend.h). */
#ifndef ST_BACKEND_CPU_OPS_CPU_H
#define ST_BACKEND_CPU_OPS_CPU_H

#include <stddef.h>
#include <stdint.h>
#include "backend/backend.h"
#include "quant/types.h"

/* Fully unroll the loop that follows: arrays of vectors indexed by its counter then stay in
 * registers instead of the stack (GCC at -O2 does not unroll them by itself). */
#define OPS_UNROLL _Pragma("GCC unroll 16")

/* Runs fn on every pool thread, or once on this thread when pool is NULL or the job is small. */
static inline void ops_run(st_pool *pool, int threaded, st_pool_fn fn, void *ctx) {
    if (pool && threaded && st_pool_size(pool) > 1) st_pool_run(pool, fn, ctx);
    else fn(ctx, 0, 1);
}

/* ---- RMSNorm row kernels: y = x * (1/sqrt(mean(x^2)+eps)) [* w] ---- */
typedef void (*ops_rms_row_fn)(const float *x, const float *w, float *y, int64_t n, float eps);
void ops_rms_row_ref(const float *x, const float *w, float *y, int64_t n, float eps);
void ops_rms_row_avx512(const float *x, const float *w, float *y, int64_t n, float eps);
void ops_rms_row_avx2(const float *x, const float *w, float *y, int64_t n, float eps);

#define ATTN_MAX_HD 256     /* largest head size st_op_attention accepts */
#define ATTN_MAX_GROUP 16   /* most query heads in one work item */

/* ---- Attention: one (token, kv head) work item over cells [0, n_vis) for the r query heads
 * sharing that kv head. q rows r*hd apart by ldq_head; out rows hd apart. ---- */
typedef struct ops_attn_item {
    const float *q;       /* first query head of the group */
    int64_t ldq_head;
    int64_t r;            /* query heads in the group */
    const void *k, *v;    /* cache base of kv head g: cell c at + c*row elements */
    int64_t row;          /* elements per cache cell (n_head_kv * head_dim) */
    int64_t hd;
    int64_t c_begin, n_vis;  /* the cells [c_begin, n_vis), or with cells their entries */
    const int32_t *cells; /* NULL, or the cells to read (QSA's selection): entry j is cell cells[j] */
    float scale;
    float *out;           /* first head's output; heads hd apart */
    float *part;          /* NULL, or: write the unnormalised state instead of out, per head h at
                             part + h*(hd+2): running max m, sum l, then acc[hd] (cell-split decode) */
} ops_attn_item;

/* The cell an item's j-th entry reads. */
static inline int64_t ops_attn_cell(const ops_attn_item *it, int64_t j) { return it->cells ? it->cells[j] : j; }

/* Ends an item for head h: out = acc / l, or the partial state when the cells were split. */
static inline void ops_attn_finish(const ops_attn_item *it, int64_t h, float m, float l, const float *acc) {
    if (it->part) {
        float *pp = it->part + h * (it->hd + 2);
        pp[0] = m;
        pp[1] = l;
        for (int64_t i = 0; i < it->hd; i++) pp[2 + i] = acc[i];
        return;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int64_t i = 0; i < it->hd; i++) it->out[h * it->hd + i] = acc[i] * inv;
}
typedef void (*ops_attn_fn)(const ops_attn_item *it, uint32_t kv_type);
void ops_attn_item_ref(const ops_attn_item *it, uint32_t kv_type);
void ops_attn_item_avx512(const ops_attn_item *it, uint32_t kv_type);
void ops_attn_item_avx2(const ops_attn_item *it, uint32_t kv_type);

/* ---- Attention, tiled (prompt chunks): one tile is up to OPS_ATTN_TILE_M query rows, the
 * n_tok x r (token, head) pairs of n_tok consecutive tokens and the r query heads of one kv head
 * (row tt*r + hh), against that kv head's cells in blocks of OPS_ATTN_TILE_K, read once for all
 * rows. The kernels keep the rows in vector lanes: Q^T [hd][M] (scaled), the scores and weights
 * S^T [K][M], the output O^T [hd][M], the running max and sum per lane. ---- */
#define OPS_ATTN_TILE_M 64
#define OPS_ATTN_TILE_K 64
typedef struct ops_attn_tile {
    const float *q;       /* token tt, head hh of the group at q + tt*ldq_tok + hh*ldq_head */
    int64_t ldq_tok, ldq_head;
    int64_t n_tok, r, hd; /* n_tok * r <= OPS_ATTN_TILE_M */
    const int32_t *n_vis; /* per token: it sees the cells [0, n_vis[tt]) */
    const void *k, *v;    /* cache base of the kv head: cell c at + c*row elements */
    int64_t row;
    float scale;
    float *out;           /* token tt, head hh at out + tt*ldo_tok + hh*hd */
    int64_t ldo_tok;
} ops_attn_tile;
/* Scratch floats a tile kernel needs (64-byte aligned). */
static inline size_t ops_attn_tile_floats(int64_t hd) {
    return (size_t)(2 * hd * OPS_ATTN_TILE_M + OPS_ATTN_TILE_K * OPS_ATTN_TILE_M + 2 * OPS_ATTN_TILE_K * hd +
                    4 * OPS_ATTN_TILE_M);
}
/* The scalar ends of every tile kernel (ops_attn.c). Load: Q^T scaled, zero in the padding rows;
 * the rows' visible counts (0 for padding); O^T = 0, max = -inf, sum = 0; *kmin, *kmax the
 * smallest and largest count of a real row. Store: out = O / sum (0 for a row that saw nothing). */
void ops_attn_tile_load(const ops_attn_tile *t, float *qt, int32_t *nvis, float *ot, float *m, float *l,
                        int64_t *kmin, int64_t *kmax);
void ops_attn_tile_store(const ops_attn_tile *t, const float *ot, const float *l);
/* Asks for the f16 row at p (hd elements) into the caches: a tile streams the whole prefix, so the
 * kernels ask for the next block's rows while they widen this one's. */
static inline void ops_attn_prefetch_row(const uint16_t *p, int64_t hd) {
    for (int64_t i = 0; i < hd; i += 32) __builtin_prefetch(p + i, 0, 2);
}
typedef void (*ops_attn_tile_fn)(const ops_attn_tile *t, uint32_t kv_type, float *scratch);
void ops_attn_tile_avx512(const ops_attn_tile *t, uint32_t kv_type, float *scratch);
void ops_attn_tile_avx2(const ops_attn_tile *t, uint32_t kv_type, float *scratch);
void ops_f32_to_f16_avx512(const float *src, uint16_t *dst, int64_t n);

/* ---- Gated DeltaNet: one v-head over all tokens, per-token recurrence. S is [d][d] (row j =
 * value index, contiguous over key index i). q, k, v, o advance by their ld per token; g, beta
 * advance by n_v. With steps, token t reads the state token t-1 left (S for t = 0) and writes its
 * own into steps[t] + step_off, S untouched: the same stores as in place, to other addresses. ---- */
typedef struct ops_gdn_head {
    const float *q, *k, *v, *g, *beta;
    int64_t ld_q, ld_k, ld_v, ld_gb, ld_out;
    float *S, *out;
    float *const *steps;  /* NULL: S in place */
    int64_t step_off;
    int64_t n_tok, d;
    float scale;
} ops_gdn_head;
/* The state token t reads and the one it writes. */
static inline const float *ops_gdn_src(const ops_gdn_head *p, int64_t t) {
    return !p->steps || t == 0 ? p->S : p->steps[t - 1] + p->step_off;
}
static inline float *ops_gdn_dst(const ops_gdn_head *p, int64_t t) {
    return p->steps ? p->steps[t] + p->step_off : p->S;
}
typedef void (*ops_gdn_head_fn)(const ops_gdn_head *h);
void ops_gdn_head_step_ref(const ops_gdn_head *h);
void ops_gdn_head_step_avx512(const ops_gdn_head *h);
void ops_gdn_head_step_avx2(const ops_gdn_head *h);

/* The chunked form: one chunk of L <= OPS_GDN_CHUNK tokens from token t0 of one head, with
 * per-thread scratch blocks. The AVX-512 kernel takes d = 64 or 128 only. */
#define OPS_GDN_CHUNK 64
typedef struct ops_gdn_chunk_bufs {
    float *A, *QK;     /* [64][64] */
    float *U, *W;      /* [64][d] */
    float *S0;         /* [d][d]: the entering state as S0[i][j] */
    float *KT;         /* [d][64]: the chunk's keys transposed */
    float *G;          /* [64] */
} ops_gdn_chunk_bufs;
static inline size_t ops_gdn_chunk_floats(int64_t d) {
    return (size_t)(2 * OPS_GDN_CHUNK * OPS_GDN_CHUNK + 4 * OPS_GDN_CHUNK * d + d * d + OPS_GDN_CHUNK);
}
typedef void (*ops_gdn_chunk_fn)(const ops_gdn_head *p, int64_t t0, int64_t L, const ops_gdn_chunk_bufs *b);
void ops_gdn_chunk_ref(const ops_gdn_head *p, int64_t t0, int64_t L, const ops_gdn_chunk_bufs *b);
void ops_gdn_chunk_avx512(const ops_gdn_head *p, int64_t t0, int64_t L, const ops_gdn_chunk_bufs *b);

/* ---- Pointwise row kernels: y = op(a[, b]) over n elements ---- */
enum { OPS_PW_SILU, OPS_PW_SIGMOID, OPS_PW_SOFTPLUS, OPS_PW_SWIGLU, OPS_PW_MUL_SIGMOID,
       OPS_PW_MUL_SILU, OPS_PW_MUL, OPS_PW_ADD };
typedef void (*ops_pw_fn)(int op, const float *a, const float *b, float *y, int64_t n);
void ops_pw_ref(int op, const float *a, const float *b, float *y, int64_t n);
void ops_pw_avx512(int op, const float *a, const float *b, float *y, int64_t n);
void ops_pw_avx2(int op, const float *a, const float *b, float *y, int64_t n);

/* ---- conv1d: one block of nc <= OPS_CONV_BLOCK channels starting at c0, all tokens ---- */
#define OPS_CONV_BLOCK 256
#define OPS_CONV_MAX_K 16
typedef struct ops_conv_job {
    const float *m, *w;
    float *state, *out;
    int64_t ld_m, ld_out, n_tok, C, K;
    int apply_silu;
} ops_conv_job;
typedef void (*ops_conv_block_fn)(const ops_conv_job *j, int64_t c0, int64_t nc);
void ops_conv_block_ref(const ops_conv_job *j, int64_t c0, int64_t nc);
void ops_conv_block_avx512(const ops_conv_job *j, int64_t c0, int64_t nc);
void ops_conv_block_avx2(const ops_conv_job *j, int64_t c0, int64_t nc);

/* ---- RoPE's rotation of one head's pairs (i, i + half) by the angles with cos cs[i], sin sn[i] ---- */
typedef void (*ops_rope_rotate_fn)(float *x, const float *cs, const float *sn, int64_t half);
void ops_rope_rotate_ref(float *x, const float *cs, const float *sn, int64_t half);
void ops_rope_rotate_fma(float *x, const float *cs, const float *sn, int64_t half);

/* ---- Hyper-connections (ops_hc.c): n elements of one token's hc streams, stream c at c*ls ---- */
/* m[i] = scale * sum_c x[c*ls+i] * sigmoid(g[c*ls+i]) */
typedef void (*ops_hc_pre_fn)(const float *x, const float *g, int64_t ls, float *m, int64_t hc, int64_t n, float scale);
void ops_hc_pre_ref(const float *x, const float *g, int64_t ls, float *m, int64_t hc, int64_t n, float scale);
void ops_hc_pre_avx512(const float *x, const float *g, int64_t ls, float *m, int64_t hc, int64_t n, float scale);
void ops_hc_pre_avx2(const float *x, const float *g, int64_t ls, float *m, int64_t hc, int64_t n, float scale);
/* R[c*ls+i] = R[c*ls+i] + y[i] * w[c] (a product, then a sum: no fused multiply-add) */
typedef void (*ops_hc_post_fn)(float *R, int64_t ls, const float *y, const float *w, int64_t hc, int64_t n);
void ops_hc_post_ref(float *R, int64_t ls, const float *y, const float *w, int64_t hc, int64_t n);
void ops_hc_post_avx512(float *R, int64_t ls, const float *y, const float *w, int64_t hc, int64_t n);
void ops_hc_post_avx2(float *R, int64_t ls, const float *y, const float *w, int64_t hc, int64_t n);

/* ---- QSA block scores (ops_qsa.c): sigma[b] = sum over heads h in order of relu(q_h . K_b) ---- */
typedef void (*ops_qsa_scores_fn)(const float *q, int64_t n_head, int64_t dim, const float *K, int64_t n_blocks,
                                  float *sigma);
void ops_qsa_scores_ref(const float *q, int64_t n_head, int64_t dim, const float *K, int64_t n_blocks, float *sigma);
void ops_qsa_scores_avx512(const float *q, int64_t n_head, int64_t dim, const float *K, int64_t n_blocks, float *sigma);
void ops_qsa_scores_avx2(const float *q, int64_t n_head, int64_t dim, const float *K, int64_t n_blocks, float *sigma);

/* ---- QSA's selection (ops_qsa.c): std::__heap_select over cells 0 .. n-1 of one query's row,
 * cell j worth sigma[j / r] before tail_start and 1e9 from there; the W cells kept into h (in
 * heap order). The reference computes each compared value again; the other keeps the values of
 * the heap's entries in hv [W] and passes over blocks that cannot enter. Both move the same. ---- */
void ops_qsa_heap_select_ref(int32_t *h, int64_t W, int64_t n, const float *sigma, int64_t r, int64_t tail_start);
void ops_qsa_heap_select(int32_t *h, float *hv, int64_t W, int64_t n, const float *sigma, int64_t r,
                         int64_t tail_start);

/* The best attention item kernel of this CPU (ops_attn.c's choice), for the sparse attention. */
ops_attn_fn ops_attn_item_pick(void);

/* ---- y = s*x and y += s*x over n ---- */
void ops_scale_avx512(float *y, int64_t n, const float *x, float s);
void ops_axpy_avx512(float *y, int64_t n, const float *x, float s);
void ops_scale_avx2(float *y, int64_t n, const float *x, float s);
void ops_axpy_avx2(float *y, int64_t n, const float *x, float s);

#endif
