/* cuda_backend.h: the CUDA op set, mirroring backend.h and backend/cpu/matmul.h.
 *
 * A context (st_cuda) owns one device, one stream, a cuBLAS handle, a grow-only scratch buffer
 * and a pair of timing events. Every op below enqueues on the context's stream and returns at
 * once (no host synchronisation) unless it says otherwise; st_cuda_download and st_cuda_sync wait.
 *
 * Conventions are backend.h's, with two differences:
 *  - every float/int pointer argument is DEVICE memory (st_cuda_alloc), except where an argument
 *    is named *_host;
 *  - the thread pool argument is replaced by the context.
 * The numerics follow the CPU reference (MODELS.md §2) within f32 rounding; the quantized
 * matrix-vector product quantizes activations to 8 bits per 32 (f32 scale), as the CPU does with
 * q8_0/q8_K, so it agrees with st_matmul within that quantization (tests/cuda/op_harness.c).
 *
 * Errors: an op returns ST_ERR_UNSUPPORTED for a shape or type it does not run (the message names
 * it) and ST_ERR_IO when the CUDA runtime reports a failure (the message has CUDA's text). */
#ifndef ST_BACKEND_CUDA_CUDA_BACKEND_H
#define ST_BACKEND_CUDA_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "strata.h"
#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct st_cuda st_cuda;

/* ---- Device, memory, timing ------------------------------------------------------------------ */

/* Number of usable CUDA devices; 0 when there is no driver or no GPU (never an error). */
int st_cuda_device_count(void);
st_status st_cuda_open(int device, st_cuda **out);
void st_cuda_close(st_cuda *cu);
/* "NVIDIA H200, 132 SMs, 139.8 GiB, cc 9.0" */
const char *st_cuda_describe(const st_cuda *cu);

st_status st_cuda_alloc(st_cuda *cu, size_t bytes, void **out);
void st_cuda_free(st_cuda *cu, void *p);
/* Host -> device copy of `bytes` (weights in their file type, or activations); waits. */
st_status st_cuda_upload(st_cuda *cu, void *dst, const void *src_host, size_t bytes);
/* Device -> host; waits for everything enqueued before it. */
st_status st_cuda_download(st_cuda *cu, void *dst_host, const void *src, size_t bytes);
st_status st_cuda_memset0(st_cuda *cu, void *p, size_t bytes);
st_status st_cuda_sync(st_cuda *cu);
/* The device's own free/total memory (cudaMemGetInfo), for the workspace tests. */
st_status st_cuda_mem_info(st_cuda *cu, size_t *free_bytes, size_t *total_bytes);
/* Grows the context's scratch (activation quantization, attention partials, GEMM tiles) to at
 * least `bytes` now, so that no op grows it (which synchronizes) while a CUDA graph is captured. */
st_status st_cuda_reserve_scratch(st_cuda *cu, size_t bytes);
/* Counts the reallocations of the scratch buffers (main and side): a graph captured at another
 * count reads freed scratch, and must be captured again. */
uint64_t st_cuda_scratch_epoch(const st_cuda *cu);
/* CUDA graphs: everything enqueued between capture_begin and capture_end is recorded, not run;
 * graph_launch replays it on the stream (same pointers, same shapes). Inside a capture no op may
 * synchronize: reserve the scratch first, use get_rows_dev, no alloc/free/upload/download.
 * A scratch growth during capture fails with ST_ERR_INVALID naming the bytes to reserve. */
typedef struct st_cuda_graph st_cuda_graph;
st_status st_cuda_capture_begin(st_cuda *cu);
st_status st_cuda_capture_end(st_cuda *cu, st_cuda_graph **out);
st_status st_cuda_graph_launch(st_cuda *cu, const st_cuda_graph *g);
void st_cuda_graph_free(st_cuda_graph *g);
/* Independent work on a second stream: after st_cuda_fork every op runs on the side stream (with
 * its own scratch), after everything enqueued before the fork; st_cuda_unfork returns to the main
 * stream while the side runs on; st_cuda_join (which unforks first if needed) makes the main
 * stream wait for the side's work. Captured graphs keep the two branches parallel; the branches
 * must not write what the other reads, and a capture must join before it ends. */
st_status st_cuda_fork(st_cuda *cu);
st_status st_cuda_unfork(st_cuda *cu);
st_status st_cuda_join(st_cuda *cu);
/* Milliseconds of GPU time between timer_start and timer_stop (events on the stream). */
st_status st_cuda_timer_start(st_cuda *cu);
st_status st_cuda_timer_stop(st_cuda *cu, float *ms);

/* Device-to-device copies on the stream (no wait; graph-safe): `bytes`, or `height` rows of
 * `width` bytes with the given pitches (the splits of fused projections). */
st_status st_cuda_copy(st_cuda *cu, void *dst, const void *src, size_t bytes);
st_status st_cuda_copy2d(st_cuda *cu, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height);
/* Host -> device on the stream from pinned host memory (st_cuda_host_alloc); no wait, so it can
 * precede a graph launch. */
st_status st_cuda_upload_async(st_cuda *cu, void *dst, const void *src_host, size_t bytes);
/* Device -> pinned host memory on the stream; no wait (graph-safe). */
st_status st_cuda_download_async(st_cuda *cu, void *dst_host, const void *src, size_t bytes);
/* fn(arg) on a host thread once the stream's work before it is done; the stream's later work waits
 * for it to return (a host node in a captured graph, run at every replay). fn must not call CUDA. */
st_status st_cuda_host_fn(st_cuda *cu, void (*fn)(void *arg), void *arg);
st_status st_cuda_host_alloc(size_t bytes, void **out);
/* Pinned host memory that kernels read in place over the bus. *dev is the pointer kernels use;
 * free it with st_cuda_host_free(*host). write_combined: the host only writes it, once (its own
 * reads of it are uncached and slow); 0: cached, for memory the CPU reads too. */
st_status st_cuda_host_alloc_mapped(size_t bytes, int write_combined, void **host, void **dev);
void st_cuda_host_free(void *p);

/* The memory's read bandwidth in GB/s: a buffer of `bytes` read by every SM (best of 5 runs). */
st_status st_cuda_read_bandwidth(st_cuda *cu, size_t bytes, double *gbs);
/* The bus between host memory and the device, over `bytes` of pinned host memory (best of 5):
 * *mapped_gbs, kernels reading mapped host memory in place (how experts left in host memory are
 * read); *copy_gbs, a host-to-device copy. */
st_status st_cuda_host_bandwidth(st_cuda *cu, size_t bytes, double *mapped_gbs, double *copy_gbs);

/* ---- The CPU's share of a decode step, without the driver (memory tiers v4) -----------------
 * The device side of model/expert_mailbox.h (its header has the sequence rules), as two graph-safe
 * one-block kernels (mailbox.cu). The block lies in pinned, mapped, cached host memory; the
 * addresses here are the kernels' (device) view of it. */
typedef struct st_cuda_mbox {
    uint64_t *req, *done, *err;  /* the header's words */
    char *slot0;                 /* layer 0's slot; layer il's is slot_bytes * il further */
    size_t slot_bytes, off_ids, off_w, off_h, off_y;
    uint64_t *seq;               /* device memory, zeroed: [0] the last request's number, [1 + il] layer il's */
    int64_t k, d;
    uint64_t timeout_ns;         /* the wait's bound */
} st_cuda_mbox;
/* Layer il's request: ids and w (k each) and h (d floats, one row) into its slot, a system-scope
 * fence, the next number into seq, then req (a release store at system scope). */
st_status st_cuda_mbox_publish(st_cuda *cu, const st_cuda_mbox *mb, int64_t il, const int32_t *ids, const float *w,
                               const float *h);
/* Spins until done equals layer il's number (acquire loads at system scope), then out[0..d) += the
 * slot's y. Gives up at once if err is set, or after timeout_ns (globaltimer), then sets err to
 * il's request and leaves out alone. */
st_status st_cuda_mbox_wait_add(st_cuda *cu, const st_cuda_mbox *mb, int64_t il, float *out);

/* ---- Quantized products (matmul.h) ---------------------------------------------------------- */

/* The weight types the products and get_rows take: st_cuda_type_q8 for those whose products run on
 * 8-bit activations (Q4_K, Q5_K, Q6_K, Q8_0 and the low-bit IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XS, IQ4_NL,
 * Q2_0, Q2_K, Q3_K), st_cuda_type_ok for those and F32, F16, BF16. */
int st_cuda_type_q8(uint32_t type);
int st_cuda_type_ok(uint32_t type);

/* Y[i][m] = sum_k W[m][k] X[i][k], i < n, m < M; W of `type` as in the GGUF file: the
 * st_cuda_type_q8 types (activations quantized to 8 bits per 32, integer dot products), F32, F16,
 * BF16 (f32 activations). n <= 8: the matrix-vector kernel, one weight pass per row of X; larger n:
 * W dequantized to f16 in row tiles and cuBLAS (tensor cores, f32 accumulation). */
st_status st_cuda_matmul(st_cuda *cu, uint32_t type, const void *W, int64_t M, int64_t K,
                         const float *X, int64_t ldx, int64_t n, float *Y, int64_t ldy);

/* The weights and routing of an expert product (st_cuda_matmul_id and the forms below). W points
 * at expert 0 of a stacked [n_expert][M][K] tensor of `type` (experts expert_bytes apart); W2 at
 * the up matrices, stacked alike, for the SwiGLU forms (NULL otherwise). Slot s < n_slots reads
 * expert ids[s] (a device int32[n_slots]; an out-of-range id gives a zero row) and input row
 * s / x_group: x_group = k for the gate/up of tokens routed to k experts each (slot s = t*k + j
 * reads token t), 1 for the down projection. ids NULL: one matrix (the shared expert, a dense
 * FFN), n_expert and expert_bytes ignored. */
typedef struct st_cuda_experts {
    uint32_t type;
    const void *W, *W2;
    size_t expert_bytes;
    int64_t n_expert, M;
    const int32_t *ids;
    int64_t x_group, n_slots;
} st_cuda_experts;

/* The MoE expert product: Y[s] = W_{ids[s]} . X[s / x_group] for each slot s (rows of K; e->W2
 * must be NULL). */
st_status st_cuda_matmul_id(st_cuda *cu, const st_cuda_experts *e, int64_t K, const float *X, int64_t ldx, float *Y,
                            int64_t ldy);

/* Gate, up and SwiGLU in one pass (quantized types): Y[s] = silu(Wg_{ids[s]} . x) * (Wu_{ids[s]} . x)
 * with x = X[s / x_group], Wg = e->W, Wu = e->W2. Saves the activation's second quantization, two
 * launches and the round trip of the gate/up outputs through memory. */
st_status st_cuda_matmul_id_swiglu(st_cuda *cu, const st_cuda_experts *e, int64_t K, const float *X, int64_t ldx,
                                   float *Y, int64_t ldy);

/* The weighted combination of the experts' outputs (the scatter back to tokens):
 *   out[t] (+)= sum_j w[t*k + j] * Y[(t*k + j)*ldy ...]   over M columns; accumulate: add to out. */
st_status st_cuda_moe_combine(st_cuda *cu, const float *Y, int64_t ldy, const float *w,
                              int64_t n_tok, int64_t k, int64_t M, float *out, int64_t ld_out,
                              int accumulate);

/* out[t] = sum_j w[t*k + j] * Y[t*k + j] + w2[t] * Y2[t]: the routed experts' combine and then the
 * shared expert's (gated) add in one pass, bit for bit st_cuda_moe_combine (accumulate 0) followed
 * by st_cuda_moe_combine(Y2, w2, k = 1, accumulate 1). */
st_status st_cuda_moe_combine_shared(st_cuda *cu, const float *Y, int64_t ldy, const float *w,
                                     int64_t n_tok, int64_t k, int64_t M, float *out, int64_t ld_out,
                                     const float *Y2, int64_t ldy2, const float *w2);

/* st_op_get_rows with host ids (token ids come from the host); same types as st_cuda_matmul.
 * ST_ERR_RANGE for an id outside [0, n_rows). */
st_status st_cuda_get_rows(st_cuda *cu, uint32_t type, const void *table, int64_t n_rows,
                           int64_t n_embd, const int32_t *ids_host, int64_t n_tok, float *out,
                           int64_t ld_out);

/* The same with device ids (no host round trip, no synchronisation: usable inside a CUDA graph);
 * an out-of-range id gives a zero row, since a kernel cannot return an error. */
st_status st_cuda_get_rows_dev(st_cuda *cu, uint32_t type, const void *table, int64_t n_rows,
                               int64_t n_embd, const int32_t *ids, int64_t n_tok, float *out,
                               int64_t ld_out);

/* ---- Prepared 8-bit activations (decode): quantize once, feed several products ---------------
 * The layout the quantized products read: n rows of K int8 (256-byte aligned), then n*K/32 scales
 * d and n*K/32 scaled sums s = d * sum(q), per 32 values; d = amax/127, q = round(v/d). */
typedef struct st_cuda_q8 {
    int8_t *q;
    float *d, *s;
    int64_t K, n;
} st_cuda_q8;
/* Bytes of a buffer for n rows of K (K a multiple of 32), and the views into one (buf 256-aligned). */
size_t st_cuda_q8_bytes(int64_t K, int64_t n);
st_cuda_q8 st_cuda_q8_at(void *buf, int64_t K, int64_t n);
/* y = RMSNorm(x; w) * silu(z) per row of dim (rows contiguous; the Gated DeltaNet's output gate):
 * bit for bit st_cuda_rms_norm then st_cuda_pointwise(MUL_SILU). In place allowed (y == x). */
st_status st_cuda_rms_norm_mul_silu(st_cuda *cu, const float *x, const float *w, const float *z, float *y,
                                    int64_t rows, int64_t dim, float eps);
/* The same, and y's 8-bit form into q (rows * dim == q.n' * q.K for the q.n' <= q.n rows it fills;
 * dim % 32 == 0): the input of the product that follows (the GDN's ssm_out) with no quantize launch.
 * Bit for bit st_cuda_rms_norm_mul_silu then the prepared form of y. */
st_status st_cuda_rms_norm_mul_silu_q8(st_cuda *cu, const float *x, const float *w, const float *z, float *y,
                                       st_cuda_q8 q, int64_t rows, int64_t dim, float eps);
/* y = a * sigmoid(b) (st_cuda_pointwise MUL_SIGMOID with y dense, rows of n, n % 32 == 0) and y's
 * 8-bit form into q as above: attention's output gate and the input of its output product. */
st_status st_cuda_mul_sigmoid_q8(st_cuda *cu, const float *a, int64_t ld_a, const float *b, int64_t ld_b, float *y,
                                 int64_t rows, int64_t n, st_cuda_q8 q);
/* The residual step and the next norm in one pass, rows of dim contiguous floats:
 *   x += r (when r is not NULL; x is written back),  y = RMSNorm(x) * w  (when y is not NULL),
 *   q = y's 8-bit form (when q.q is not NULL; q.K == dim).
 * Bit for bit st_cuda_pointwise(ADD), st_cuda_rms_norm, then the prepared form of y. */
st_status st_cuda_add_rms_norm_q8(st_cuda *cu, float *x, const float *r, const float *w, float *y, st_cuda_q8 q,
                                  int64_t rows, int64_t dim, float eps);
/* Y_i = W_i x for up to ST_CUDA_MV_MULTI matrices of one st_cuda_type_q8 type
 * and K = q.K, on the q.n prepared rows (n <= 8), in one launch. */
#define ST_CUDA_MV_MULTI 4
typedef struct st_cuda_mv {
    const void *W;
    int64_t M;
    float *Y;
    int64_t ldy;
} st_cuda_mv;
st_status st_cuda_matvec_q8_multi(st_cuda *cu, uint32_t type, const st_cuda_mv *items, int n_items, st_cuda_q8 q);
/* st_cuda_matmul_id (e->W2 NULL) and st_cuda_matmul_id_swiglu (e->W2 the up matrices) on prepared
 * rows (K = q.K). */
st_status st_cuda_matvec_q8_id(st_cuda *cu, const st_cuda_experts *e, st_cuda_q8 q, float *Y, int64_t ldy);
/* The SwiGLU of st_cuda_matvec_q8_id (e->W2 the up matrices) written straight into 8 bits: out's
 * row s (out.K == e->M, a multiple of 32) is slot s's silu(gate) * up in the prepared form (8 bits
 * per 32, as the quantizing kernel forms it from the f32 result), so the down product reads it
 * with no quantize launch. */
st_status st_cuda_matvec_q8_swiglu_q8(st_cuda *cu, const st_cuda_experts *e, st_cuda_q8 q, st_cuda_q8 out);

/* ---- The rest of backend.h, same arguments (device pointers) ------------------------------- */

st_status st_cuda_rms_norm(st_cuda *cu, const float *x, int64_t ld_x, const float *w, float *y,
                           int64_t ld_y, int64_t rows, int64_t dim, float eps);
st_status st_cuda_l2_norm(st_cuda *cu, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                          int64_t rows, int64_t dim, float eps);
/* pos: device int32[n_tok]. */
st_status st_cuda_rope_neox(st_cuda *cu, float *x, int64_t ld_tok, int64_t ld_head, int64_t n_tok,
                            int64_t n_head, const int32_t *pos, const st_rope_params *p);
st_status st_cuda_kv_store(st_cuda *cu, uint32_t type, void *cache, int64_t row, int64_t cell0,
                           const float *src, int64_t ld_src, int64_t n_tok);
/* st_cuda_kv_store with the cells on the device: row t to cell pos[t] (graph-safe decode). */
st_status st_cuda_kv_store_pos(st_cuda *cu, uint32_t type, void *cache, int64_t row, const int32_t *pos,
                               const float *src, int64_t ld_src, int64_t n_tok);
/* L2-normalises, in place, heads 0 .. n_head-1 of dim floats at the start of each of n_tok rows
 * ld_tok apart (the q and k heads of the Gated DeltaNet's conv output). */
st_status st_cuda_l2_norm_heads(st_cuda *cu, float *x, int64_t ld_tok, int64_t n_tok, int64_t n_head, int64_t dim,
                                float eps);
/* a's pointers are device pointers (pos included); head_dim a multiple of 32, <= 256. One query
 * row (decode) is split over the context (flash-decoding) and the parts combined; many rows
 * (prefill) likewise, causal per row. */
st_status st_cuda_attention(st_cuda *cu, const st_attn_args *a);
st_status st_cuda_gdn_gates(st_cuda *cu, const float *a, int64_t ld_a, const float *b,
                            int64_t ld_b, const float *dt_bias, const float *ssm_a, int64_t n_tok,
                            int64_t n_v, float *g_out, float *beta_out);
/* The per-token recurrence for any n_tok (decode: fused single step; prefill: the state rows stay
 * in registers across the tokens). d a multiple of 32, <= 256. */
st_status st_cuda_gdn_step(st_cuda *cu, const st_gdn_args *a);
st_status st_cuda_conv1d(st_cuda *cu, const float *m, int64_t ld_m, const float *w, float *state,
                         float *out, int64_t ld_out, int64_t n_tok, int64_t C, int64_t K,
                         int apply_silu);
/* One token (decode): st_cuda_conv1d with SiLU, then st_cuda_l2_norm_heads on its first n_norm heads
 * of dim channels, bit for bit, in one launch (C % dim == 0, dim a multiple of 32 up to 256). */
st_status st_cuda_conv1d_silu_l2(st_cuda *cu, const float *m, const float *w, float *state, float *out, int64_t C,
                                 int64_t K, int64_t n_norm, int64_t dim, float eps);
/* The conv state after each of the chunk's n_tok rows m (the state before them in `state`,
 * [C][K-1]) into steps + t*ld_steps, laid out as `state`; call it before st_cuda_conv1d moves the
 * state on. For a speculative verify chunk (a->state_steps of st_cuda_gdn_step: a device array of
 * device planes) that returns to the state after any of its rows. */
st_status st_cuda_conv1d_steps(st_cuda *cu, const float *m, int64_t ld_m, const float *state, float *steps,
                               int64_t ld_steps, int64_t n_tok, int64_t C, int64_t K);

enum { ST_CUDA_SILU, ST_CUDA_SIGMOID, ST_CUDA_SOFTPLUS, ST_CUDA_SWIGLU, ST_CUDA_MUL_SIGMOID,
       ST_CUDA_MUL_SILU, ST_CUDA_MUL, ST_CUDA_ADD };
/* y = f(a) (unary: b ignored) or f(a, b), as the st_op_* pointwise ops; in place allowed. */
st_status st_cuda_pointwise(st_cuda *cu, int op, const float *a, int64_t ld_a, const float *b,
                            int64_t ld_b, float *y, int64_t ld_y, int64_t rows, int64_t n);
/* y = s*x (accumulate 0) or y += s*x (accumulate 1), n floats. */
st_status st_cuda_axpy(st_cuda *cu, float *y, int64_t n, const float *x, float s, int accumulate);
st_status st_cuda_softmax(st_cuda *cu, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                          int64_t rows, int64_t n);
st_status st_cuda_moe_route(st_cuda *cu, const float *logits, int64_t ld_logits, int64_t n_tok,
                            int64_t E, int64_t k, int32_t *ids, float *weights);
/* The router and the routing of n tokens: logits[n][E] = W X (W f32 [E][K], X rows K apart) as
 * st_cuda_matmul computes it, then st_cuda_moe_route on them, in one launch where n <= 8 and E <= 256
 * (two otherwise); the same bits either way. */
st_status st_cuda_router_route(st_cuda *cu, const float *W, int64_t E, int64_t K, const float *X, int64_t n,
                               float *logits, int64_t k, int32_t *ids, float *wts);
/* *out (device int32) = st_op_argmax(x, n). */
st_status st_cuda_argmax(st_cuda *cu, const float *x, int64_t n, int32_t *out);

/* ---- Prompt (prefill) paths: tensor-core GEMMs (moe_prefill.cu, attn_prefill.cu) ------------- */

/* The routed experts' weights of one MoE layer, stacked as in the GGUF file and resident on the
 * device: gate and up [n_expert][ff][d], down [n_expert][d][ff], each in its own type (Q4_K, Q5_K,
 * Q6_K, Q8_0, F16, BF16, F32; K-quant rows need a multiple of 256, Q8_0 of 32, floats of 8). */
typedef struct st_cuda_moe_w {
    uint32_t type_gate, type_up, type_down;
    const void *gate, *up, *down;
    int64_t n_expert, d, ff;
} st_cuda_moe_w;

/* The token rows of a routed-expert FFN: n_tok rows of X (ldx floats apart) routed to k experts
 * each (ids, wts: device arrays [n_tok][k]), the sum into out (ld_out floats apart), added to what
 * out holds when accumulate. */
typedef struct st_cuda_moe_rows {
    const int32_t *ids;
    const float *wts;
    int64_t k;
    const float *X;
    int64_t ldx, n_tok;
    float *out;
    int64_t ld_out;
    int accumulate;
} st_cuda_moe_rows;

/* The routed-expert FFN of a prompt chunk:
 *   out[t] (+)= sum_{j<k} wts[t*k+j] * down_e( silu(gate_e x_t) * up_e x_t ),  e = ids[t*k+j]
 * (ids, wts device arrays [n_tok][k]; an id outside [0, n_expert) contributes nothing; the sum is
 * formed in slot order j = 0..k-1 and then added to out when accumulate, as src/model/ffn.c).
 * The slots are counting-sorted by expert on the device, X rows gathered in that order as f16,
 * each used expert's three matrices dequantized to f16 (in batches of <= 1 GiB), and the products
 * run as grouped cuBLAS GEMMs (f16 in, f32 accumulate, f16 out: the expert outputs and the
 * SwiGLU product must stay below 65504). SYNCHRONIZES once per call (the per-expert counts come
 * to the host to size the GEMMs): for prompts, never inside a CUDA graph capture.
 * Scratch: the context's, about n_tok*k*(4*d + 6*ff) bytes plus the weight batch (<= 1 GiB). */
st_status st_cuda_moe_ffn_prefill(st_cuda *cu, const st_cuda_moe_w *w, const st_cuda_moe_rows *r);

/* Optional f16 copies of every expert of a layer, made once at load: gate_up_f16 [n_expert][2ff][d]
 * (per expert its gate rows, then its up rows) and down_f16 [n_expert][d][ff], 6*d*ff bytes per
 * expert (64 GB for the 35B-A3B's 40 layers: fits an H200 beside its 18 GB of Q4_K weights).
 * st_cuda_moe_dequant_f16 fills them (waits); st_cuda_moe_ffn_prefill_f16 is
 * st_cuda_moe_ffn_prefill reading them instead of dequantizing the used experts on every call
 * (the times of both: docs/cuda.md, "Prompt paths"). */
st_status st_cuda_moe_dequant_f16(st_cuda *cu, const st_cuda_moe_w *w, void *gate_up_f16, void *down_f16);
st_status st_cuda_moe_ffn_prefill_f16(st_cuda *cu, const st_cuda_moe_w *w, const void *gate_up_f16,
                                      const void *down_f16, const st_cuda_moe_rows *r);

/* st_cuda_attention's semantics (st_attn_args; f16 or f32 cache, GQA, causal per row from pos,
 * scale) on tensor cores, for prompt chunks: per kv head S = Q K^T (cuBLAS, Q rounded to f16, K
 * read in place from an f16 cache or converted from an f32 one), a causal softmax writing P in
 * f16 (row max and sum in f32, the sum over the rounded P), O = P V, normalised and permuted into
 * a->out. Rows go in blocks so that S and P stay under ~1 GiB of scratch. n_tok < 16 (or a
 * head_dim that is not a multiple of 8) is passed to st_cuda_attention. No host synchronisation. */
st_status st_cuda_attention_prefill(st_cuda *cu, const st_attn_args *a);

/* st_cuda_gdn_step's semantics (st_gdn_args, state in/out) in the chunked WY/UT form of the CPU's
 * st_op_gdn_chunked, chunks of 64 tokens: all chunks' intra-chunk products and triangular solves
 * at once, then one pass over the chunks per (v-head, 32 value columns) with the state slice in
 * shared memory. Equal to the per-token recurrence within f32 rounding. d a multiple of 32 up to
 * 128 (other sizes: st_cuda_gdn_step). Scratch: n_v * ceil(n_tok/64) * (128*d + 4160) floats.
 * No host synchronisation. Its times against the per-token kernel: docs/cuda.md. */
st_status st_cuda_gdn_chunked(st_cuda *cu, const st_gdn_args *a);

/* Test hooks (process-wide; 0 restores the default): cap the experts dequantized per batch of
 * st_cuda_moe_ffn_prefill and the tokens per row block of st_cuda_attention_prefill, so that small
 * harness shapes run the multi-batch / multi-block paths that the model's shapes take. */
void st_cuda_prefill_test_limits(int64_t moe_experts_per_batch, int64_t attn_tokens_per_block);

/* ---- qwen4exp (ops_qwen4exp.cu): backend.h's hyper-connection, PLE and QSA ops ---------------
 * Same arguments and semantics as the st_op_* ops named, on device pointers (a->pos, the cells and
 * counts included). hc_pre, hc_post and ple_gate keep the CPU's order of products and sums (the
 * ple dot in double); they differ from it only through the GPU's expf, within 1e-6. The PLE's
 * dilated conv is st_cuda_conv1d over the widened kernel (K up to 16). */
st_status st_cuda_hc_pre(st_cuda *cu, const float *xn, int64_t ld_x, const float *g, int64_t ld_g, float *m,
                         int64_t ld_m, int64_t n_tok, int64_t hc, int64_t d, float scale);
st_status st_cuda_hc_post(st_cuda *cu, float *R, int64_t ld_r, const float *y, int64_t ld_y, const float *inj,
                          int64_t ld_inj, int64_t n_tok, int64_t hc, int64_t d);
st_status st_cuda_ple_gate(st_cuda *cu, const float *k, const float *q, int64_t ld_kq, const float *val,
                           int64_t ld_v, float *gv, int64_t ld_gv, int64_t n_tok, int64_t hc, int64_t d);
/* st_op_ple_hash with the window and the rows on the device (exact; N <= 8, at most 64 heads). */
st_status st_cuda_ple_hash(st_cuda *cu, const st_ple_hash *h, const int32_t *win, int64_t n, int32_t *rows);
/* The op table's qsa_blocks (backend.h): f16 or f32 cache, keys of at most 1024, one launch; last
 * (a device position) for a decode step's block. The bits of the GPU's pool (the CPU's), norm and
 * RoPE kernels in turn. */
st_status st_cuda_qsa_blocks(st_cuda *cu, uint32_t kv_type, const void *cache, int64_t dim, int64_t r, int64_t b0,
                             int64_t b1, const int32_t *last, const float *norm_w, float eps,
                             const st_rope_params *rp, float *blocks);
/* st_op_qsa_select on the GPU: dense rows (p + 1 <= W) read 0 .. p; other rows the tail and the
 * W - n_tail best block cells, ascending, n_cells = W. The tie rule is not the CPU's heap (ERRATA
 * F1): blocks rank by (score descending, index ascending); the first floor(M/r) whole, then the
 * lowest M % r cells of the next (M = W - n_tail). So the cells equal the CPU's whenever the block
 * scores are distinct and no block is split; a split block is the same block with possibly other
 * cells, and equal scores may pick other blocks, always of the same scores. The block scores sum
 * in another order than the CPU's (rounding). n_head <= 16, n_head * dim <= 12288, r <= width,
 * n_tok <= 65535; ld_cells >= width (every sparse row writes W cells). The context's scratch holds
 * the scores, st_cuda_qsa_scratch_size bytes (reserve it before a graph capture). Two launches. */
size_t st_cuda_qsa_scratch_size(int64_t n_tok, int64_t n_ctx, int64_t r);
st_status st_cuda_qsa_select(st_cuda *cu, const st_qsa_args *a);
/* st_op_attention_cells: softmax attention of each query over its listed cells (GQA, f16 or f32
 * cache, head_dim <= 256, online softmax, f32 accumulation); a row with no cells gets zeros.
 * Flash-decoding over the lists, split by their capacity ld_cells; scratch as st_cuda_attention's
 * with ld_cells for n_kv. */
st_status st_cuda_attention_cells(st_cuda *cu, const st_attn_cells_args *c);

#ifdef __cplusplus
}
#endif
#endif
