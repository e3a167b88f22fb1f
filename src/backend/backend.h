/* backend.h: the CPU op set (implemented in backend/cpu/), and at the end the op table every
 * forward is written against (st_backend), which the CPU (backend/cpu/backend_cpu.c, on these
 * ops) and the GPU (backend/cuda/backend_cuda.c, on backend/cuda/cuda_backend.h) implement. The
 * CPU's quantized products are backend/cpu/matmul.h; each backend's MoE layer is its own
 * (model/ffn.c, model/cuda/forward_cuda.c).
 *
 * Conventions, for every op below:
 *  - Activations are host f32. A "row" is one token (or one token's head); rows are `ld*` floats
 *    apart, elements inside a row are contiguous. Shapes are written C-style, slowest first:
 *    x[n_tok][dim] means x[t*ld + i].
 *  - `pool` may be NULL: the op then runs on the calling thread. Ops must be called from outside a
 *    pool job (st_pool_run is not reentrant); small ops ignore the pool.
 *  - In place is allowed where an op says so (y == x); otherwise inputs and outputs must not overlap.
 *  - Each op has a plain C reference (f32 accumulation unless MODELS.md says double); fast variants
 *    (AVX2, AVX-512) are picked at run time from st_cpu() and tested against the reference.
 *  - Numerics follow ../shared/MODELS.md §2 (llama.cpp's CPU backend). */
#ifndef ST_BACKEND_BACKEND_H
#define ST_BACKEND_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "base/pool.h"
#include "base/status.h"

/* ---- Norms ------------------------------------------------------------------------------------ */

/* RMSNorm over each of `rows` rows of `dim` floats (MODELS.md §2.2):
 *   y = x / sqrt(mean(x^2) + eps) [* w]
 * The sum of squares is accumulated in double, the mean and 1/sqrtf(mean+eps) in float, then the
 * row is scaled and multiplied by w elementwise (w[dim], NULL = no weight). Per-head norms: rows =
 * n_tok*n_head, dim = head size, ld = head stride, provided the token stride is n_head*ld (true for
 * q/k buffers and for the interleaved q|gate projection with ld = 2*hd). In place allowed. */
void st_op_rms_norm(st_pool *pool, const float *x, int64_t ld_x, const float *w, float *y,
                    int64_t ld_y, int64_t rows, int64_t dim, float eps);

/* L2 norm of Gated DeltaNet (MODELS.md §2.3): y = x / sqrt(sum x^2 + eps), per row, computed as
 * llama.cpp does: rms_norm(x, eps/n) then a scale by 1/sqrt(n). In place allowed. */
void st_op_l2_norm(st_pool *pool, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                   int64_t rows, int64_t dim, float eps);

/* ---- Rotary position embedding ---------------------------------------------------------------- */

typedef struct st_rope_params {
    int64_t n_rot;        /* rotated dims per head (rope.dimension_count), even, <= head_dim */
    float freq_base;      /* rope.freq_base */
    float freq_scale;     /* 1 = none; linear scaling 1/factor; YaRN 1/factor */
    float ext_factor;     /* 0 = plain/linear; 1 = YaRN */
    float attn_factor;    /* magnitude factor on cos/sin (1 by default) */
    float corr_dims[2];   /* YaRN correction dims (st_rope_yarn_corr_dims); unused when ext_factor 0 */
} st_rope_params;

/* Plain RoPE parameters: freq_scale 1, ext_factor 0, attn_factor 1. */
st_rope_params st_rope_plain(int64_t n_rot, float freq_base);
/* YaRN correction dims as ggml_rope_yarn_corr_dims (beta_fast 32, beta_slow 1 for Qwen). */
void st_rope_yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast,
                            float beta_slow, float dims[2]);

/* NeoX RoPE in place (MODELS.md §2.5; IMRoPE equals it for text). x element i of head h of token
 * t is at x[t*ld_tok + h*ld_head + i]. Pair (i, i + n_rot/2), i < n_rot/2, is rotated by theta_i,
 * theta_0 = pos[t], theta_{i+1} = theta_i * powf(base, -2/n_rot) by repeated float multiplication,
 * then freq_scale / YaRN blend, cos and sin times attn_factor (and YaRN's 1+0.1 ln(1/freq_scale)).
 * Dims n_rot..head_dim-1 are untouched. */
void st_op_rope_neox(st_pool *pool, float *x, int64_t ld_tok, int64_t ld_head, int64_t n_tok,
                     int64_t n_head, const int32_t *pos, const st_rope_params *p);

/* ---- KV cache and attention ------------------------------------------------------------------- */

/* A layer's K (or V) cache is n_ctx cells of `row` = H_kv*hd elements of `type`, ST_TYPE_F16
 * (llama.cpp's default) or ST_TYPE_F32: element (cell c, kv head g, i) at c*row + g*hd + i. */
size_t st_kv_row_bytes(uint32_t type, int64_t row);

/* Writes n_tok rows of src (src[t*ld_src + e], e < row) into cells cell0 .. cell0+n_tok-1 of the
 * cache, converting to its type (f16: round to nearest even). Call once for K, once for V. */
void st_op_kv_store(uint32_t type, void *cache, int64_t row, int64_t cell0, const float *src,
                    int64_t ld_src, int64_t n_tok);

typedef struct st_attn_args {
    const float *q;       /* q element (t, h, i) at q[t*ldq_tok + h*ldq_head + i] */
    int64_t ldq_tok, ldq_head;
    const void *k_cache;  /* [n_ctx][n_head_kv][head_dim] of kv_type, as above */
    const void *v_cache;
    uint32_t kv_type;     /* ST_TYPE_F16 or ST_TYPE_F32 */
    const int32_t *pos;   /* pos[t]: query t sees cells 0 .. min(pos[t], n_kv-1) (causal mask) */
    int64_t n_tok, n_head, n_head_kv, head_dim;  /* head_dim <= 256; n_head % n_head_kv == 0 */
    int64_t n_kv;         /* cells that hold valid entries */
    float scale;          /* 1/sqrt(head_dim) for every Qwen model */
    float *out;           /* out element (t, h, i) at out[t*ldo_tok + h*head_dim + i] */
    int64_t ldo_tok;
} st_attn_args;

/* Causal softmax attention over the cache (MODELS.md §2.6): for query head h, kv head
 * g = h / (n_head/n_head_kv) (grouped GQA), o = sum_j softmax_j(scale*q.k_j) v_j over visible cells.
 * f32 accumulation, online (running max) softmax; K and V rows are converted from f16 exactly. A
 * query that sees no cell gets zeros. Threaded over (token, kv head); when there are fewer of those
 * than threads (decode on many cores) and at least 1024 visible cells, each group's cells are also
 * split over threads and the parts' softmax states merged. Does nothing if head_dim > 256 or
 * n_head is not a multiple of n_head_kv. */
void st_op_attention(st_pool *pool, const st_attn_args *a);

/* ---- Gated DeltaNet (MODELS.md §2.10) --------------------------------------------------------- */

enum { ST_GDN_TILED = 0,   /* v-head h reads k-head h mod n_k (qwen35, qwen35moe, qwen4exp) */
       ST_GDN_GROUPED = 1  /* v-head h reads k-head h / (n_v/n_k) (qwen3next) */ };

/* Gates per token and v-head: beta = sigmoid(b), g = softplus(a + dt_bias) * ssm_a (the log decay,
 * <= 0). a, b: [n_tok][n_v] with row strides ld_a, ld_b; g_out, beta_out: [n_tok][n_v] dense. */
void st_op_gdn_gates(const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                     const float *dt_bias, const float *ssm_a, int64_t n_tok, int64_t n_v,
                     float *g_out, float *beta_out);

typedef struct st_gdn_args {
    int64_t n_tok, n_k, n_v, d;  /* d = dk = dv (head size); n_v % n_k == 0 */
    int head_map;                /* ST_GDN_TILED or ST_GDN_GROUPED */
    const float *q, *k;          /* k-head g of token t at q[t*ld_q + g*d], L2-normalised */
    int64_t ld_q, ld_k;
    const float *v;              /* v-head h of token t at v[t*ld_v + h*d] */
    int64_t ld_v;
    const float *g, *beta;       /* [n_tok][n_v] dense: log decay and beta (st_op_gdn_gates) */
    float *state;                /* in/out [n_v][d (value j)][d (key i)]: S_h[i][j] at
                                    h*d*d + j*d + i, llama.cpp's {dk, dv, n_v}; zeros = fresh */
    float *out;                  /* o_h of token t at out[t*ld_out + h*d] */
    int64_t ld_out;
    float scale;                 /* applied to the output: 1/sqrt(d) */
    float *const *state_steps;   /* NULL, or n_tok planes laid out as `state`: token t then reads
                                    the state after token t-1 (`state` for t = 0) and writes its
                                    own into state_steps[t], leaving `state` as it was (the
                                    per-row states a speculative verify rolls back to) */
} st_gdn_args;

/* Per-token recurrence, for each token in order and each v-head h with k-head kappa(h):
 *   S <- e^g S;  delta = beta (v - S^T k);  S <- S + k delta^T;  o = scale * S^T q.
 * The reference is exactly llama.cpp's fused op order; the AVX-512 kernel for d = 64 and 128 folds
 * the decay into the update (e^g (S^T k) for (e^g S)^T k), a rounding-level difference. Threaded
 * over v-heads. */
void st_op_gdn_step(st_pool *pool, const st_gdn_args *a);

/* The chunked (WY/UT) form over chunks of 64 tokens, equal to st_op_gdn_step within f32 rounding.
 * scratch: st_gdn_chunked_scratch_size(pool threads, d) bytes, or NULL to allocate internally
 * (falls back to the per-token form if that fails). */
size_t st_gdn_chunked_scratch_size(int n_threads, int64_t d);
void st_op_gdn_chunked(st_pool *pool, const st_gdn_args *a, void *scratch);

/* Runs the faster form for a->n_tok: on the CPU that is the per-token form at every length
 * (ops_gdn.c has the measurement). scratch as for st_op_gdn_chunked (NULL allowed). */
void st_op_gdn(st_pool *pool, const st_gdn_args *a, void *scratch);

/* ---- Causal depthwise conv1d with state (MODELS.md §2.10 step 3) ------------------------------ */

/* For each token t and channel c (C channels, kernel K):
 *   out[t][c] = sum_{i=0..K-1} w[c*K + i] * x_{t-K+1+i}[c]   (taps summed in order, f32)
 * where x_s for s < 0 comes from the state. state: [C][K-1] (llama.cpp's {K-1, C}): per channel the
 * last K-1 inputs, oldest first; updated to hold the last K-1 columns of [old state | m].
 * m: m[t*ld_m + c]; out: out[t*ld_out + c], must not overlap m. apply_silu: out = silu(out). */
void st_op_conv1d(st_pool *pool, const float *m, int64_t ld_m, const float *w, float *state,
                  float *out, int64_t ld_out, int64_t n_tok, int64_t C, int64_t K, int apply_silu);

/* ---- Pointwise (MODELS.md §2.4), over `rows` rows of n; in place allowed (y == x or a) ---------- */

void st_op_silu(st_pool *pool, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                int64_t rows, int64_t n);
void st_op_sigmoid(st_pool *pool, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                   int64_t rows, int64_t n);
void st_op_softplus(st_pool *pool, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                    int64_t rows, int64_t n);   /* x > 20 ? x : log(1 + e^x) */

/* Binary ops: y = f(a, b). */
void st_op_swiglu(st_pool *pool, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                  float *y, int64_t ld_y, int64_t rows, int64_t n);      /* silu(a) * b */
void st_op_mul_sigmoid(st_pool *pool, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                       float *y, int64_t ld_y, int64_t rows, int64_t n); /* a * sigmoid(b) */
void st_op_mul_silu(st_pool *pool, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                    float *y, int64_t ld_y, int64_t rows, int64_t n);    /* a * silu(b) */
void st_op_mul(st_pool *pool, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
               float *y, int64_t ld_y, int64_t rows, int64_t n);         /* a * b */
void st_op_add(st_pool *pool, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
               float *y, int64_t ld_y, int64_t rows, int64_t n);         /* a + b */
/* y = s * x (in place allowed). */
void st_op_scale(float *y, int64_t n, const float *x, float s);
/* y += s * x (MoE: accumulate an expert's output with its routing weight). */
void st_op_axpy(float *y, int64_t n, const float *x, float s);

/* Softmax of each row: e^(x - max) / sum, the sum accumulated in double (ggml_vec_soft_max_f32). */
void st_op_softmax(const float *x, int64_t ld_x, float *y, int64_t ld_y, int64_t rows, int64_t n);

/* ---- MoE routing (MODELS.md §2.8) ------------------------------------------------------------- */

/* For each token: P = softmax(logits) over E experts, the k largest in descending order of P
 * (ties: lower expert index first), weights P_e / max(sum of the k selected P, 6.103515625e-5).
 * logits [n_tok][ld_logits], ids and weights [n_tok][k]. k <= E <= 1024. */
void st_op_moe_route(const float *logits, int64_t ld_logits, int64_t n_tok, int64_t E, int64_t k,
                     int32_t *ids, float *weights);

/* ---- qwen4exp: hyper-connections (MODELS.md §6.1) -------------------------------------------- */
/* A token's hc streams of d floats are one row of hc*d: stream c at c*d. */

/* The mix's gated mean (ggml_dsv4_hc_pre_gated): m[t][i] = scale * sum_{c < hc} xn[t][c*d+i] *
 * sigmoid(g[t][c*d+i]), the streams summed in order from 0.0f; scale = 1/hc. */
void st_op_hc_pre(st_pool *pool, const float *xn, int64_t ld_x, const float *g, int64_t ld_g,
                  float *m, int64_t ld_m, int64_t n_tok, int64_t hc, int64_t d, float scale);

/* The combine (ggml_dsv4_hc_post with no comb): R[t][c*d+i] += y[t][i] * w_c with the stream
 * weight w_c = 2 * sigmoid(inj[t][c] * (1/hc)), a product then a sum as ggml does. */
void st_op_hc_post(st_pool *pool, float *R, int64_t ld_r, const float *y, int64_t ld_y,
                   const float *inj, int64_t ld_inj, int64_t n_tok, int64_t hc, int64_t d);

/* ---- qwen4exp: PLE (MODELS.md §6.3) ------------------------------------------------------------ */

/* The gated value of each stream: s_c = (sum_i k[c*d+i] q[c*d+i]) * (1/sqrt(d)), the sum in
 * double as ggml_sum_rows; gate_c = sigmoid(sgn(s_c) sqrt(max(|s_c|, 1e-6))); gv[t][c*d+i] =
 * val[t][i] * gate_c. k and q rows are ld_kq apart, val rows ld_v, gv rows ld_gv. */
void st_op_ple_gate(st_pool *pool, const float *k, const float *q, int64_t ld_kq, const float *val,
                    int64_t ld_v, float *gv, int64_t ld_gv, int64_t n_tok, int64_t hc, int64_t d);

/* The n-gram hash (MODELS.md §6.3, ERRATA F6): the hyperparameters it reads (ngram at most
 * ST_PLE_HASH_MAX_NGRAM, llama.cpp's LLAMA_MAX_PLE_NGRAM). */
#define ST_PLE_HASH_MAX_NGRAM 8
typedef struct st_ple_hash {
    int64_t ngram;              /* N: orders 2 .. N */
    int64_t per, n_heads;       /* heads per order; n_heads = (N-1) per */
    int32_t eos;                /* the reset token */
    const uint64_t *mult;       /* [N] */
    const uint32_t *offset, *size; /* [n_heads] */
} st_ple_hash;

/* The table rows of n tokens: win[j] is the token N-1-j positions before the first (-1 before
 * position 0), so token t is win[t + N - 1] and its s-th predecessor win[t + N - 1 - s]. Its
 * context c_0 = the token, c_s = the s-th predecessor, the first missing or EOS predecessor and
 * every older one read as EOS; mix = (c_0 M_0) ^ ... ^ (c_{o-1} M_{o-1}) in uint64 for the order
 * o; rows[t*n_heads + h] = mix mod size_h + offset_h for the per heads of each order. */
void st_op_ple_hash(const st_ple_hash *h, const int32_t *win, int64_t n, int32_t *rows);

/* ---- qwen4exp: QSA sparse attention (MODELS.md §6.2, ERRATA F1-F4) ---------------------------- */

/* The mean of each block of r consecutive cached raw indexer keys, for blocks b0 .. b1-1:
 * out[(b-b0)*dim + i] = (key(b*r) + key(b*r+1) + ... + key(b*r+r-1))[i] * (1/r), summed in order
 * from the first; the cache holds rows of dim elements of kv_type (f16 or f32). */
void st_op_qsa_pool(uint32_t kv_type, const void *cache, int64_t dim, int64_t r, int64_t b0, int64_t b1,
                    float *out);

struct st_qsa_args {
    const float *q;        /* indexer query of token t, head h at q[t*ld_q + h*dim] (normed, rotated) */
    int64_t ld_q, n_head, dim;
    const float *blocks;   /* pooled block keys [b][dim] (normed, rotated), every block before
                              the tail of the last query */
    const int32_t *pos;    /* query positions: query t sees cells 0 .. pos[t] (cell = position) */
    int64_t n_tok, r, width;   /* block size r, cell budget W = B + r - 1 */
    int64_t n_ctx;         /* cells the scratch was sized for (> every pos) */
    int32_t *cells;        /* out: the cells query t reads, ascending, at cells[t*ld_cells ..] */
    int64_t ld_cells;      /* >= min(width, pos + 1) */
    int32_t *n_cells;      /* out: how many */
};
typedef struct st_qsa_args st_qsa_args;

/* Scratch bytes for st_op_qsa_select: per thread, block scores, the heap and a cell mark. */
size_t st_qsa_scratch_size(int n_threads, int64_t n_ctx, int64_t r, int64_t width);

/* The cells each query reads, exactly as llama.cpp's CPU picks them. A query at position p with
 * p + 1 <= W reads every cell 0 .. p (dense). Otherwise block b (cells b*r .. b*r+r-1) scores
 * sigma_b = sum_h relu(q_h . K_b); cells of blocks before tail_start = floor((p+1)/r)*r take their
 * block's score, the tail cells tail_start .. p take 1e9, and the W largest win, chosen by the
 * heap selection of libstdc++'s std::partial_sort over the cell indices 0 .. p with the comparator
 * "value greater" (ggml_compute_forward_top_k_f32; ERRATA F1): that rule decides which cells of a
 * partly selected block, and which of several blocks of one score, are taken. */
void st_op_qsa_select(st_pool *pool, const st_qsa_args *a, void *scratch);

/* Attention over listed cells: as st_op_attention, but query t reads only the cells
 * cells[t*ld_cells + j], j < n_cells[t] (ascending, each < n_ctx), not the causal range. */
typedef struct st_attn_cells_args {
    st_attn_args a;        /* pos and n_kv unused */
    const int32_t *cells;
    int64_t ld_cells;
    const int32_t *n_cells;
} st_attn_cells_args;
void st_op_attention_cells(st_pool *pool, const st_attn_cells_args *c);

/* ---- Embedding and logits --------------------------------------------------------------------- */

/* out[t*ld_out + i] = row ids[t] of a [n_rows][n_embd] table of `type` (any type st_dequantize_row
 * supports), dequantized. Returns 0 if an id is out of range or the type is not computable. */
int st_op_get_rows(uint32_t type, const void *table, int64_t n_rows, int64_t n_embd,
                   const int32_t *ids, int64_t n_tok, float *out, int64_t ld_out);

/* Index of the largest of x[0..n-1]; the lowest index on ties; NaN never wins. */
int64_t st_op_argmax(const float *x, int64_t n);


/* ---- The op table: the one interface every forward is written against ----------------------- */
/* The model's forward (src/model/) runs each architecture once, through a backend: the CPU's
 * (backend/cpu/backend_cpu.c: the st_op_* above on the pool, host pointers) or the GPU's
 * (backend/cuda/backend_cuda.c: device pointers, nothing waits). Every pointer an op takes is in
 * its backend's memory, except where it says "host". The fused ops each name their reference
 * decomposition (the CPU runs that), and a backend may run them as one kernel if the bits agree
 * within its tolerance (tests/cuda/op_harness.c runs both).
 *
 * Errors: ops return nothing; the first failing op's status stays in be->err and every later op
 * is skipped, so a block reads as its math and the caller checks once. The CPU ops cannot fail.
 *
 * Prepared rows: an op whose output is the input of a product may be told which (`next`, NULL:
 * none known), and add_rms_norm's output feeds the products that follow. A backend may then keep
 * a product-ready form of those rows (the GPU: 8-bit rows for a decode-sized chunk) that the next
 * matmul on exactly those rows reads instead of quantizing them again; any op that writes the
 * rows again drops it. It changes no bits: the GPU's products quantize their input the same way
 * either way. */

/* A weight matrix as the products read it: M rows of K elements of `type`, row_bytes apart,
 * times `scale` (MODELS.md §2.1). */
typedef struct st_mat {
    uint32_t type;
    const void *data;
    int64_t K, M;
    size_t row_bytes;
    float scale;
} st_mat;

/* One product of several on the same input rows (matmul_many). */
typedef struct st_mm_out {
    st_mat w;
    float *y;
    int64_t ldy;
} st_mm_out;

/* The pointwise ops (y = f(a) or f(a, b)), as st_op_silu ... st_op_add. */
typedef enum st_pw {
    ST_PW_ADD, ST_PW_MUL, ST_PW_SWIGLU, ST_PW_MUL_SIGMOID, ST_PW_MUL_SILU, ST_PW_SIGMOID, ST_PW_SILU
} st_pw;

typedef struct st_backend st_backend;
struct st_mat;
typedef struct st_backend_ops {
    const char *name;
    /* Norms: st_op_rms_norm; fused: x += r (r NULL: none), then h = RMSNorm(x; w) over rows of d
     * contiguous floats (h prepared for products of width d); the l2 norm of heads 0..n_head-1
     * of dim floats at the start of each of n_tok rows ld_tok apart (st_op_l2_norm per row). */
    void (*rms_norm)(st_backend *be, const float *x, int64_t ld_x, const float *w, float *y, int64_t ld_y,
                     int64_t rows, int64_t dim, float eps);
    void (*add_rms_norm)(st_backend *be, float *x, const float *r, const float *w, float *h, int64_t rows,
                         int64_t d, float eps);
    void (*l2_norm_heads)(st_backend *be, float *x, int64_t ld_tok, int64_t n_tok, int64_t n_head, int64_t dim,
                          float eps);
    /* y = f(a, b) (b ignored by the unary ops; ld_b 0 reads one row for every row: a bias). */
    void (*pointwise)(st_backend *be, st_pw op, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                      float *y, int64_t ld_y, int64_t rows, int64_t n, const struct st_mat *next);
    /* x[r][i] *= s over rows of n, ld apart (st_op_scale per row). */
    void (*scale)(st_backend *be, float *x, int64_t ld, int64_t rows, int64_t n, float s);
    /* Fused: o = RMSNorm(o_h; w) * act(z) per head of dim (rows heads, dense; o and z alike),
     * act = silu (sigmoid: 0) or sigmoid (1): st_op_rms_norm then st_op_mul_silu / mul_sigmoid. */
    void (*gated_norm)(st_backend *be, float *o, const float *w, const float *z, int64_t rows, int64_t dim,
                       float eps, int sigmoid, const struct st_mat *next);
    /* Products: y = scale * (W x) for n rows; several weights on the same rows; the fused SwiGLU
     * FFN: out = down (silu(gate x) * (up x)), as the products gate x into mid and up x into tmp
     * ([n][ff] each), st_op_swiglu into mid, the product down mid (mid may then hold only the
     * prepared form: read it through a product alone). */
    void (*matmul)(st_backend *be, const st_mat *w, const float *x, int64_t ldx, int64_t n, float *y, int64_t ldy);
    void (*matmul_many)(st_backend *be, const float *x, int64_t ldx, int64_t n, const st_mm_out *items, int n_items);
    void (*swiglu_ffn)(st_backend *be, const st_mat *gate, const st_mat *up, const st_mat *down, const float *x,
                       int64_t ldx, int64_t n, float *mid, float *tmp, float *out, int64_t ld_out);
    /* Rows: rows of width floats from src (spitch floats apart) to dst (dpitch apart); the
     * regions may overlap only as a move to lower addresses. get_rows: st_op_get_rows with the ids
     * on the host; a bad id is an ST_ERR_RANGE in be->err. */
    void (*copy_rows)(st_backend *be, float *dst, int64_t dpitch, const float *src, int64_t spitch, int64_t width,
                      int64_t rows);
    void (*get_rows)(st_backend *be, uint32_t type, const void *table, int64_t n_rows, int64_t dim,
                     const int32_t *ids_host, int64_t n, float *out, int64_t ld_out);
    /* qwen4exp's PLE rows: st_op_ple_hash over the window win (n + N - 1 ids, the backend's
     * memory) into rows (n * n_heads, the backend's), then st_op_get_rows of those rows from the
     * table in host memory (a few rows a token; never uploaded whole: a GPU reads them over the bus
     * where it can map the table, else the host gathers them) into out. And bytes from the host
     * into the backend's memory, ordered with the ops around. */
    void (*ple_rows)(st_backend *be, const st_ple_hash *h, const int32_t *win, int64_t n, int32_t *rows,
                     uint32_t type, const void *table_host, int64_t n_rows, int64_t dim, float *out, int64_t ld_out);
    void (*upload)(st_backend *be, void *dst, const void *src_host, size_t bytes);
    /* RoPE (st_op_rope_neox); K/V rows into a cache at cells cell0.. (host) which are also pos[]
     * (the backend's, for a GPU's replayed graph); attention (st_op_attention, st_op_attention_cells). */
    void (*rope)(st_backend *be, float *x, int64_t ld_tok, int64_t ld_head, int64_t n_tok, int64_t n_head,
                 const int32_t *pos, const st_rope_params *p);
    void (*kv_store)(st_backend *be, uint32_t type, void *cache, int64_t row, int64_t cell0, const int32_t *pos,
                     const float *src, int64_t ld_src, int64_t n_tok);
    void (*attention)(st_backend *be, const st_attn_args *a);
    void (*attention_cells)(st_backend *be, const st_attn_cells_args *a);
    /* Gated DeltaNet: the conv (st_op_conv1d); fused for the GDN: the conv with SiLU, then the l2
     * norm of the first n_norm heads of dim channels of each row (ld = C both); the conv states
     * after each row into steps[t] (before the conv moves the state on); the gates; the rule. */
    void (*conv1d)(st_backend *be, const float *m, int64_t ld_m, const float *w, float *state, float *out,
                   int64_t ld_out, int64_t n_tok, int64_t C, int64_t K, int apply_silu);
    void (*conv1d_l2)(st_backend *be, const float *m, const float *w, float *state, float *out, int64_t n_tok,
                      int64_t C, int64_t K, int64_t n_norm, int64_t dim, float eps);
    void (*conv1d_steps)(st_backend *be, const float *m, int64_t ld_m, const float *state, float *const *steps,
                         int64_t n_tok, int64_t C, int64_t K);
    void (*gdn_gates)(st_backend *be, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                      const float *dt_bias, const float *ssm_a, int64_t n_tok, int64_t n_v, float *g_out,
                      float *beta_out);
    void (*gdn)(st_backend *be, const st_gdn_args *a, void *scratch);
    /* qwen4exp: st_op_hc_pre, st_op_hc_post, st_op_ple_gate, st_op_qsa_select; qsa_blocks: the
     * block keys of QSA, Kbar_b = RoPE_{b r}(RMSNorm(pooled keys of block b; norm_w)) into
     * blocks + b*dim for b0 <= b < b1 (st_op_qsa_pool, st_op_rms_norm, st_op_rope_neox on one head
     * of dim, in turn), or, with last (a decode step's position, the backend's memory), for the
     * one block that position completes: b = (last+1)/r - 1 when r divides last+1, none
     * otherwise (so a GPU's replayed step pools its own). */
    void (*hc_pre)(st_backend *be, const float *xn, int64_t ld_x, const float *g, int64_t ld_g, float *m,
                   int64_t ld_m, int64_t n_tok, int64_t hc, int64_t d, float scale);
    void (*hc_post)(st_backend *be, float *R, int64_t ld_r, const float *y, int64_t ld_y, const float *inj,
                    int64_t ld_inj, int64_t n_tok, int64_t hc, int64_t d);
    void (*ple_gate)(st_backend *be, const float *k, const float *q, int64_t ld_kq, const float *val, int64_t ld_v,
                     float *gv, int64_t ld_gv, int64_t n_tok, int64_t hc, int64_t d);
    void (*qsa_blocks)(st_backend *be, uint32_t kv_type, const void *cache, int64_t dim, int64_t r, int64_t b0,
                       int64_t b1, const int32_t *last, const float *norm_w, float eps, const st_rope_params *rp,
                       float *blocks);
    void (*qsa_select)(st_backend *be, const st_qsa_args *a, void *scratch);
    /* Independent work (a decode step's second stream): fork returns 1 when the ops that follow go
     * to a side branch (0: they run in order, nothing to undo); unfork returns to the main branch,
     * join makes it wait for the side. A backend without streams returns 0. */
    int (*fork)(st_backend *be, int64_t n_rows);
    void (*unfork)(st_backend *be, int side);
    void (*join)(st_backend *be, int side);
    /* Profiling marks around a block of kind `kind` (NULL: none). */
    void (*prof_begin)(st_backend *be);
    void (*prof_end)(st_backend *be, int kind);
} st_backend_ops;

struct st_backend {
    const st_backend_ops *ops;
    st_status err;             /* the first failing op's status; later ops do nothing */
};

/* The CPU backend: the ops on `pool` (NULL: the calling thread), products through mm_scratch
 * (the activation rows' conversion, st_matmul's scratch). */
typedef struct st_cpu_backend {
    st_backend be;
    st_pool *pool;
    void *mm_scratch;
} st_cpu_backend;
st_backend *st_cpu_backend_init(st_cpu_backend *b, st_pool *pool, void *mm_scratch);

#endif
