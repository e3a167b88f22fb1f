/* matmul.cu: the products that read the weights, on the GPU: the decode matrix-vector product
 * (plain and with MoE expert ids), the prompt GEMM, the expert combination and get_rows.
 *
 * Decode is bound by HBM bandwidth: every weight byte is read once per token, so the kernel must
 * keep enough loads in flight and spend few instructions per byte. For the K-quants, Q8_0 and the
 * low-bit types (quant_lowbit.cuh: iq4_xs, iq3_xxs, iq3_s, iq2_xs, iq4_nl, q2_0, q2_K, q3_K) the
 * activations are first quantized to int8 per 32 elements with an f32 scale d and the sum
 * s = d * sum(q) (our q8_1, kept as three arrays), and each 32-element sub-block becomes a few
 * dp4a integer dot products scaled once, instead of 32 dequantize+FMA steps.
 *
 * Work split: a group of G lanes (G = 32, 16, 8 or 4, picked from the row length) takes one
 * weight row; its lanes stride over the row's units (64 elements for Q4_K/Q5_K: one 32-byte run of
 * qs serves two sub-blocks; 32 elements for Q6_K/Q8_0 and the low-bit types) and the group sums
 * with shuffles. Four warps per block. grid.y is the activation column (n <= 8 rows of X, or the MoE slots).
 *
 * Prompt chunks (n > 8): W is dequantized to f16 in row tiles and multiplied with cuBLAS
 * (tensor cores, f32 accumulation); a fused int8 GEMM on the quantized blocks is the next step. */
#include <string.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "backend/cuda/cuda_internal.cuh"
#include "backend/cuda/quant_lowbit.cuh"
extern "C" {
#include "quant/quant.h"
}

#define MV_WARPS 4
#define MV_MAX_COLS 8

/* ---- Activations: int8 per 32 with f32 scale and scaled sum ------------------------------------ */

/* One warp per 32 values: row r of X (rows n_rows, K % 32 == 0). */
__global__ void quantize_q8_kernel(const float *X, int64_t ldx, int64_t K, int64_t n_rows,
                                   int8_t *xq, float *xd, float *xs) {
    cu_pdl();
    const int64_t nb = K / 32;
    const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (w >= nb * n_rows) return;
    const int64_t r = w / nb, b = w % nb;
    const float v = X[r * ldx + b * 32 + lane];
    float d;
    const int q = q8_round(v, &d);
    xq[r * K + b * 32 + lane] = (int8_t)q;
    const float sum = warp_sum((float)q);
    if (lane == 0) { xd[r * nb + b] = d; xs[r * nb + b] = d * sum; }
}

/* ---- Per-type unit dot products ---------------------------------------------------------------- */

HD void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) { *sc = q[j] & 63; *m = q[j + 4] & 63; }
    else { *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

struct unit_q4_K { enum { ELEMS = 64 }; };
struct unit_q5_K { enum { ELEMS = 64 }; };
struct unit_q6_K { enum { ELEMS = 32 }; };
struct unit_q8_0 { enum { ELEMS = 32 }; };

/* Unit u of a row (u-th run of ELEMS elements) against the quantized activations of the column;
 * by default a low-bit type of quant_lowbit.cuh (U = lb<T>), the others are specialized below. */
template <class U> __host__ __device__ float unit_dot(const uint8_t *row, int64_t u, const int8_t *xq,
                                             const float *xd, const float *xs) {
    return lb_unit_dot<U::TYPE>(row, u, xq, xd);
}

template <> __host__ __device__ float unit_dot<unit_q4_K>(const uint8_t *row, int64_t u, const int8_t *xq,
                                                 const float *xd, const float *xs) {
    const int64_t b = u >> 2;
    const int j = (int)(u & 3);
    const uint8_t *blk = row + b * sizeof(block_q4_K);
    const uint8_t *qs = blk + 16 + 32 * j;
    const int8_t *x = xq + b * 256 + 64 * j;
    int q[8], xl[8], xh[8];
    ld_32b(qs, q);
    ld_32b(x, xl);
    ld_32b(x + 32, xh);
    int lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        lo = dp4a(q[i] & 0x0F0F0F0F, xl[i], lo);
        hi = dp4a((q[i] >> 4) & 0x0F0F0F0F, xh[i], hi);
    }
    int sc0, m0, sc1, m1;
    scale_min_k4(2 * j, blk + 4, &sc0, &m0);
    scale_min_k4(2 * j + 1, blk + 4, &sc1, &m1);
    const float d = h2f(*(const uint16_t *)blk), dmin = h2f(*(const uint16_t *)(blk + 2));
    const int64_t s = b * 8 + 2 * j;
    return d * ((float)(sc0 * lo) * xd[s] + (float)(sc1 * hi) * xd[s + 1]) -
           dmin * ((float)m0 * xs[s] + (float)m1 * xs[s + 1]);
}

template <> __host__ __device__ float unit_dot<unit_q5_K>(const uint8_t *row, int64_t u, const int8_t *xq,
                                                 const float *xd, const float *xs) {
    const int64_t b = u >> 2;
    const int j = (int)(u & 3);
    const uint8_t *blk = row + b * sizeof(block_q5_K);
    const uint8_t *qh = blk + 16, *qs = blk + 48 + 32 * j;
    const int8_t *x = xq + b * 256 + 64 * j;
    int q[8], hb[8], xl[8], xh[8];
    ld_32b(qs, q);
    ld_32b(qh, hb);
    ld_32b(x, xl);
    ld_32b(x + 32, xh);
    int lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int ql = (q[i] & 0x0F0F0F0F) | (((hb[i] >> (2 * j)) & 0x01010101) << 4);
        const int qu = ((q[i] >> 4) & 0x0F0F0F0F) | (((hb[i] >> (2 * j + 1)) & 0x01010101) << 4);
        lo = dp4a(ql, xl[i], lo);
        hi = dp4a(qu, xh[i], hi);
    }
    int sc0, m0, sc1, m1;
    scale_min_k4(2 * j, blk + 4, &sc0, &m0);
    scale_min_k4(2 * j + 1, blk + 4, &sc1, &m1);
    const float d = h2f(*(const uint16_t *)blk), dmin = h2f(*(const uint16_t *)(blk + 2));
    const int64_t s = b * 8 + 2 * j;
    return d * ((float)(sc0 * lo) * xd[s] + (float)(sc1 * hi) * xd[s + 1]) -
           dmin * ((float)m0 * xs[s] + (float)m1 * xs[s + 1]);
}

/* Q6_K unit r (0..7) of a block: half h = r/4, quarter c = r%4; elements 128h + 32c + l take
 * ql[64h + 32(c&1) + l] (low nibble for c < 2, high for c >= 2), 2 bits (qh[32h + l] >> 2c),
 * minus 32, and scale sc[8h + 2c + l/16]. */
template <> __host__ __device__ float unit_dot<unit_q6_K>(const uint8_t *row, int64_t u, const int8_t *xq,
                                                 const float *xd, const float *xs) {
    const int64_t b = u >> 3;
    const int r = (int)(u & 7), h = r >> 2, c = r & 3;
    const uint8_t *blk = row + b * sizeof(block_q6_K);
    const uint8_t *ql = blk + 64 * h + 32 * (c & 1), *qh = blk + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(blk + 192) + 8 * h + 2 * c;
    const int8_t *x = xq + b * 256 + 32 * r;
    int xv[8];
    ld_32b(x, xv);
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int l4 = ld_int_b2(ql, i), h4 = ld_int_b2(qh, i);
        const int nib = c >= 2 ? (l4 >> 4) & 0x0F0F0F0F : l4 & 0x0F0F0F0F;
        const int v = vsubss4(nib | (((h4 >> (2 * c)) & 0x03030303) << 4), 0x20202020);
        if (i < 4) s0 = dp4a(v, xv[i], s0);
        else       s1 = dp4a(v, xv[i], s1);
    }
    const float d = h2f(*(const uint16_t *)(blk + 208));
    return d * xd[b * 8 + r] * (float)(sc[0] * s0 + sc[1] * s1);
}

template <> __host__ __device__ float unit_dot<unit_q8_0>(const uint8_t *row, int64_t u, const int8_t *xq,
                                                 const float *xd, const float *xs) {
    const uint8_t *blk = row + u * sizeof(block_q8_0);
    int xv[8];
    ld_32b(xq + u * 32, xv);
    int s = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) s = dp4a(ld_int_b2(blk + 2, i), xv[i], s);
    return h2f(*(const uint16_t *)blk) * xd[u] * (float)s;
}

/* The unit of each type that the matvec takes, by type id, and the dispatch over them: F(type id). */
template <int T> struct unit_of { typedef lb<T> type; };
template <> struct unit_of<ST_TYPE_Q4_K> { typedef unit_q4_K type; };
template <> struct unit_of<ST_TYPE_Q5_K> { typedef unit_q5_K type; };
template <> struct unit_of<ST_TYPE_Q6_K> { typedef unit_q6_K type; };
template <> struct unit_of<ST_TYPE_Q8_0> { typedef unit_q8_0 type; };
template <int T> using unit_t = typename unit_of<T>::type;
#define MV_CASES(F) \
    switch (type) { \
    case ST_TYPE_Q4_K: F(ST_TYPE_Q4_K); break; \
    case ST_TYPE_Q5_K: F(ST_TYPE_Q5_K); break; \
    case ST_TYPE_Q6_K: F(ST_TYPE_Q6_K); break; \
    LB_CASES(F) \
    default:           F(ST_TYPE_Q8_0); break; \
    }

/* ---- The quantized matrix-vector kernel ------------------------------------------------------- */

#define SORT_MAX_E 1024

/* perm = the slots ordered by expert id (counting sort; order within an expert is arbitrary, each
 * slot is computed on its own). Invalid ids go last. One block. */
__global__ void __launch_bounds__(1024) sort_slots_kernel(const int32_t *ids, int64_t n, int64_t E, int32_t *perm) {
    cu_pdl();
    __shared__ int cnt[SORT_MAX_E + 1];
    for (int64_t i = threadIdx.x; i <= E; i += blockDim.x) cnt[i] = 0;
    __syncthreads();
    for (int64_t s = threadIdx.x; s < n; s += blockDim.x) {
        const int32_t e = ids[s];
        atomicAdd(&cnt[e < 0 || e >= E ? E : e], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int run = 0;
        for (int64_t i = 0; i <= E; i++) { const int c = cnt[i]; cnt[i] = run; run += c; }
    }
    __syncthreads();
    for (int64_t s = threadIdx.x; s < n; s += blockDim.x) {
        const int32_t e = ids[s];
        perm[atomicAdd(&cnt[e < 0 || e >= E ? E : e], 1)] = (int32_t)s;
    }
}

struct mv_args {
    const uint8_t *W;
    const uint8_t *W2;       /* SWIGLU: the up projection, laid out as W; y = silu(W.x) * (W2.x) */
    size_t row_bytes, expert_bytes;
    int64_t n_expert, M, K;
    const int32_t *ids;      /* per column (slot) expert id, or NULL */
    int64_t x_group;         /* column c reads activation row c / x_group */
    const int32_t *perm;     /* blockIdx.y -> column, slots sorted by expert (prompts), or NULL */
    const int8_t *xq;
    const float *xd, *xs;
    float *Y;
    int64_t ldy;
};

template <class U, int G, int SWIGLU> __global__ void __launch_bounds__(MV_WARPS * 32)
matvec_q_kernel(mv_args a) {
    cu_pdl();
    const int64_t col = a.perm ? a.perm[blockIdx.y] : blockIdx.y;
    const int lane = threadIdx.x % G;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    /* no early return: the group sum shuffles over the whole warp */
    int64_t n_units = row < a.M ? a.K / U::ELEMS : 0;
    const uint8_t *W = a.W, *W2 = a.W2;
    float *y = a.Y + col * a.ldy;
    if (a.ids) {
        const int32_t e = a.ids[col];
        if (e < 0 || e >= a.n_expert) n_units = 0;
        else { W += (size_t)e * a.expert_bytes; if (SWIGLU) W2 += (size_t)e * a.expert_bytes; }
    }
    const int64_t xr = col / a.x_group, nb = a.K / 32;
    const int8_t *xq = a.xq + xr * a.K;
    const float *xd = a.xd + xr * nb, *xs = a.xs + xr * nb;
    const uint8_t *w_row = W + (size_t)row * a.row_bytes;
    float acc = 0.0f, acc2 = 0.0f;
    for (int64_t u = lane; u < n_units; u += G) {
        acc += unit_dot<U>(w_row, u, xq, xd, xs);
        if (SWIGLU) acc2 += unit_dot<U>(W2 + (size_t)row * a.row_bytes, u, xq, xd, xs);
    }
    acc = group_sum<G>(acc);
    if (SWIGLU) {
        acc2 = group_sum<G>(acc2);
        acc = acc / (1.0f + expf(-acc)) * acc2;
    }
    if (lane == 0 && row < a.M) y[row] = acc;
}

/* ---- Float weights (F32, F16, BF16): f32 activations, lanes stride over elements (coalesced) - */

template <int T> HD float ld_w(const uint8_t *row, int64_t i) {
    if (T == ST_TYPE_F32) return ((const float *)row)[i];
    if (T == ST_TYPE_F16) return __half2float(((const __half *)row)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)row)[i]);
}

struct mvf_args {
    const uint8_t *W;
    size_t row_bytes, expert_bytes;
    int64_t n_expert, M, K;
    const int32_t *ids;
    int64_t x_group;
    const float *X;
    int64_t ldx;
    float *Y;
    int64_t ldy;
};

/* elements 8*i8 .. 8*i8+7 of a row whose start is 16-byte aligned */
template <int T> __device__ __forceinline__ void ld_w8(const uint8_t *row, int64_t i8, float w[8]) {
    if (T == ST_TYPE_F32) {
        const float4 a = ((const float4 *)row)[2 * i8], b = ((const float4 *)row)[2 * i8 + 1];
        w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w; w[4] = b.x; w[5] = b.y; w[6] = b.z; w[7] = b.w;
        return;
    }
    const uint4 v = ((const uint4 *)row)[i8];
    const uint32_t p[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (T == ST_TYPE_F16) {
            const float2 f = __half22float2(*(const __half2 *)&p[i]);
            w[2 * i] = f.x; w[2 * i + 1] = f.y;
        } else {   /* bf16 is the top half of an f32 */
            w[2 * i] = __uint_as_float(p[i] << 16);
            w[2 * i + 1] = __uint_as_float(p[i] & 0xFFFF0000u);
        }
    }
}

/* VEC: K % 8 == 0 and X rows 16-byte aligned: each lane takes 8 consecutive elements per step
 * (one 16-byte weight load for f16/bf16). Otherwise lanes stride over single elements. */
template <int T, int G, int VEC> __device__ __forceinline__ void matvec_f_rows(const mvf_args &a) {
    const int64_t col = blockIdx.y;
    const int lane = threadIdx.x % G;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    int64_t K = row < a.M ? a.K : 0;   /* no early return: see matvec_q_kernel */
    const uint8_t *W = a.W;
    float *y = a.Y + col * a.ldy;
    if (a.ids) {
        const int32_t e = a.ids[col];
        if (e < 0 || e >= a.n_expert) K = 0;
        else W += (size_t)e * a.expert_bytes;
    }
    const float *x = a.X + (col / a.x_group) * a.ldx;
    const uint8_t *w_row = W + (size_t)row * a.row_bytes;
    float acc = 0.0f;
    if (VEC) {
        for (int64_t i8 = lane; i8 < K / 8; i8 += G) {
            float w[8];
            ld_w8<T>(w_row, i8, w);
            const float4 xa = ((const float4 *)x)[2 * i8], xb = ((const float4 *)x)[2 * i8 + 1];
            acc += w[0] * xa.x + w[1] * xa.y + w[2] * xa.z + w[3] * xa.w +
                   w[4] * xb.x + w[5] * xb.y + w[6] * xb.z + w[7] * xb.w;
        }
    } else {
        for (int64_t i = lane; i < K; i += G) acc += ld_w<T>(w_row, i) * x[i];
    }
    acc = group_sum<G>(acc);
    if (lane == 0 && row < a.M) y[row] = acc;
}

template <int T, int G, int VEC> __global__ void __launch_bounds__(MV_WARPS * 32)
matvec_f_kernel(mvf_args a) {
    cu_pdl();
    matvec_f_rows<T, G, VEC>(a);
}

/* The router's f32 product (matvec_f_rows, the same bits) and the routing of its tokens (route_warp,
 * as moe_route) in one launch: the last block to finish its rows (a count in cu->bar that wraps
 * back to 0 as it is reached) routes every token, a warp each. */
template <int SLOTS> __global__ void __launch_bounds__(MV_WARPS * 32)
router_route_kernel(mvf_args a, int64_t k, int32_t *ids, float *wts, unsigned *count) {
    cu_pdl();
    matvec_f_rows<ST_TYPE_F32, 32, 1>(a);
    __shared__ int last;
    __threadfence();
    __syncthreads();
    const unsigned total = gridDim.x * gridDim.y;
    if (threadIdx.x == 0) last = atomicInc(count, total - 1) == total - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int64_t t = threadIdx.x >> 5; t < (int64_t)gridDim.y; t += MV_WARPS)
        route_warp<SLOTS>(a.Y + t * a.ldy, a.M, k, ids + t * k, wts + t * k);
}

/* ---- Dispatch ------------------------------------------------------------------------------- */

static int is_quant_mv(uint32_t t) {
    return t == ST_TYPE_Q4_K || t == ST_TYPE_Q5_K || t == ST_TYPE_Q6_K || t == ST_TYPE_Q8_0 || lb_type(t);
}
static int is_float_mv(uint32_t t) { return t == ST_TYPE_F32 || t == ST_TYPE_F16 || t == ST_TYPE_BF16; }

/* Lanes per row: enough units for every lane, never more than a warp. */
static int pick_group(int64_t units) { return units >= 32 ? 32 : units >= 16 ? 16 : units >= 8 ? 8 : 4; }

template <class U, int SW> static void launch_qs(const mv_args &a, int G, dim3 grid, cudaStream_t st) {
    switch (G) {
    case 32: cu_launch(matvec_q_kernel<U, 32, SW>, grid, MV_WARPS * 32, 0, st, a); break;
    case 16: cu_launch(matvec_q_kernel<U, 16, SW>, grid, MV_WARPS * 32, 0, st, a); break;
    case 8:  cu_launch(matvec_q_kernel<U, 8, SW>, grid, MV_WARPS * 32, 0, st, a); break;
    default: cu_launch(matvec_q_kernel<U, 4, SW>, grid, MV_WARPS * 32, 0, st, a); break;
    }
}

template <class U> static void launch_q(const mv_args &a, int64_t n_cols, cudaStream_t st) {
    const int G = pick_group(a.K / U::ELEMS);
    const int rows_per_block = MV_WARPS * 32 / G;
    dim3 grid(cu_blocks(a.M, rows_per_block), (unsigned)n_cols);
    if (a.W2) launch_qs<U, 1>(a, G, grid, st);
    else launch_qs<U, 0>(a, G, grid, st);
}

template <int T, int VEC> static void launch_fv(const mvf_args &a, int G, dim3 grid, cudaStream_t st) {
    switch (G) {
    case 32: cu_launch(matvec_f_kernel<T, 32, VEC>, grid, MV_WARPS * 32, 0, st, a); break;
    case 16: cu_launch(matvec_f_kernel<T, 16, VEC>, grid, MV_WARPS * 32, 0, st, a); break;
    case 8:  cu_launch(matvec_f_kernel<T, 8, VEC>, grid, MV_WARPS * 32, 0, st, a); break;
    default: cu_launch(matvec_f_kernel<T, 4, VEC>, grid, MV_WARPS * 32, 0, st, a); break;
    }
}

template <int T> static void launch_f(const mvf_args &a, int64_t n_cols, cudaStream_t st) {
    const int G = pick_group(a.K / 8);
    const int rows_per_block = MV_WARPS * 32 / G;
    dim3 grid(cu_blocks(a.M, rows_per_block), (unsigned)n_cols);
    const int vec = a.K % 8 == 0 && (uintptr_t)a.X % 16 == 0 && (a.ldx % 4 == 0 || n_cols == 1) &&
                    (uintptr_t)a.W % 16 == 0 && a.expert_bytes % 16 == 0;
    if (vec) launch_fv<T, 1>(a, G, grid, st);
    else launch_fv<T, 0>(a, G, grid, st);
}

static st_status check_type(uint32_t type, int64_t K) {
    const st_type_info *ti = st_type_get(type);
    if (!ti || !(is_quant_mv(type) || is_float_mv(type)))
        return st_fail(ST_ERR_UNSUPPORTED, "cuda matmul: weight type %s (%u) has no CUDA kernel",
                       ti && ti->name ? ti->name : "?", type);
    if (K % ti->block_size || (is_quant_mv(type) && K % 32))
        return st_fail(ST_ERR_INVALID, "cuda matmul: K = %lld is not a multiple of %s's block %d",
                       (long long)K, ti->name, ti->block_size);
    return ST_OK;
}

/* The common core of st_cuda_matmul (n <= 8) and st_cuda_matmul_id. */
static st_status matvec_run(st_cuda *cu, uint32_t type, const void *W, const void *W2, size_t expert_bytes,
                            int64_t n_expert, int64_t M, int64_t K, const int32_t *ids,
                            const float *X, int64_t ldx, int64_t x_group, int64_t n_cols,
                            float *Y, int64_t ldy) {
    ST_TRY(check_type(type, K));
    if (n_cols <= 0 || M <= 0) return ST_OK;
    if (n_cols > 65535) return st_fail(ST_ERR_UNSUPPORTED, "cuda matvec: %lld columns", (long long)n_cols);
    const size_t row_bytes = st_row_size(st_type_get(type), K);
    if (W2 && !is_quant_mv(type))
        return st_fail(ST_ERR_UNSUPPORTED, "cuda matvec: fused swiglu for %s weights", st_type_get(type)->name);
    if (is_float_mv(type)) {
        mvf_args a = { (const uint8_t *)W, row_bytes, expert_bytes, n_expert, M, K, ids, x_group,
                       X, ldx, Y, ldy };
        if (type == ST_TYPE_F32) launch_f<ST_TYPE_F32>(a, n_cols, cu->stream);
        else if (type == ST_TYPE_F16) launch_f<ST_TYPE_F16>(a, n_cols, cu->stream);
        else launch_f<ST_TYPE_BF16>(a, n_cols, cu->stream);
        return cu_launched("matvec_f");
    }
    const int64_t n_xrows = (n_cols + x_group - 1) / x_group, nb = K / 32;
    void *scr;
    /* xq first: its 32-byte runs must be 16-byte aligned for the vector loads */
    const size_t q_bytes = ((size_t)(n_xrows * K) + 255) / 256 * 256;
    /* a prompt's (token, expert) slots run grouped by expert, so the blocks of one expert's slots
     * run back to back and read its weights from L2 instead of HBM */
    const int sorted = ids && n_cols > MV_MAX_COLS && n_expert <= SORT_MAX_E;
    ST_TRY(cu_scratch(cu, q_bytes + (size_t)(n_xrows * nb) * 8 + (sorted ? (size_t)n_cols * 4 : 0), &scr));
    int8_t *xq = (int8_t *)scr;
    float *xd = (float *)((char *)scr + q_bytes), *xs = xd + n_xrows * nb;
    cu_launch(quantize_q8_kernel, cu_blocks(n_xrows * nb * 32, 256), 256, 0, cu->stream, X, ldx, K, n_xrows, xq, xd, xs);
    ST_TRY(cu_launched("quantize_q8"));
    int32_t *perm = NULL;
    if (sorted) {
        perm = (int32_t *)(xs + n_xrows * nb);
        cu_launch(sort_slots_kernel, 1, 1024, 0, cu->stream, ids, n_cols, n_expert, perm);
        ST_TRY(cu_launched("sort_slots"));
    }
    mv_args a = { (const uint8_t *)W, (const uint8_t *)W2, row_bytes, expert_bytes, n_expert, M, K, ids, x_group,
                  perm, xq, xd, xs, Y, ldy };
#define MV_LAUNCH(T) launch_q<unit_t<T>>(a, n_cols, cu->stream)
    MV_CASES(MV_LAUNCH)
#undef MV_LAUNCH
    return cu_launched("matvec_q");
}

/* ---- Prepared activations (decode) ------------------------------------------------------------ */

extern "C" size_t st_cuda_q8_bytes(int64_t K, int64_t n) {
    return ((size_t)(n * K) + 255) / 256 * 256 + (size_t)(n * (K / 32)) * 8 + 256;
}

extern "C" st_cuda_q8 st_cuda_q8_at(void *buf, int64_t K, int64_t n) {
    st_cuda_q8 q;
    q.q = (int8_t *)buf;
    q.d = (float *)((char *)buf + ((size_t)(n * K) + 255) / 256 * 256);
    q.s = q.d + n * (K / 32);
    q.K = K;
    q.n = n;
    return q;
}

#define MV_MULTI ST_CUDA_MV_MULTI
struct mv_multi {
    const uint8_t *W[MV_MULTI];
    float *Y[MV_MULTI];
    int64_t M[MV_MULTI], ldy[MV_MULTI];
    int64_t blk0[MV_MULTI + 1];   /* first block of each matrix along grid.x */
    int n;
    size_t row_bytes;
    int64_t K;
    const int8_t *xq;
    const float *xd, *xs;
};

/* matvec_q_kernel over several matrices: grid.x runs through their row blocks one after another. */
template <class U, int G> __global__ void __launch_bounds__(MV_WARPS * 32)
matvec_q_multi_kernel(mv_multi a) {
    cu_pdl();
    int it = 0;
    while (it + 1 < a.n && (int64_t)blockIdx.x >= a.blk0[it + 1]) it++;
    const int64_t col = blockIdx.y;
    const int lane = threadIdx.x % G;
    const int64_t row = (((int64_t)blockIdx.x - a.blk0[it]) * blockDim.x + threadIdx.x) / G;
    const int64_t M = a.M[it], nb = a.K / 32;
    const int64_t n_units = row < M ? a.K / U::ELEMS : 0;
    const int8_t *xq = a.xq + col * a.K;
    const float *xd = a.xd + col * nb, *xs = a.xs + col * nb;
    const uint8_t *w_row = a.W[it] + (size_t)row * a.row_bytes;
    float acc = 0.0f;
    for (int64_t u = lane; u < n_units; u += G) acc += unit_dot<U>(w_row, u, xq, xd, xs);
    acc = group_sum<G>(acc);
    if (lane == 0 && row < M) a.Y[it][col * a.ldy[it] + row] = acc;
}

template <class U> static void launch_multi(mv_multi &a, int64_t n_cols, cudaStream_t st) {
    const int G = pick_group(a.K / U::ELEMS);
    const int rows_per_block = MV_WARPS * 32 / G;
    a.blk0[0] = 0;
    for (int i = 0; i < a.n; i++) a.blk0[i + 1] = a.blk0[i] + cu_blocks(a.M[i], rows_per_block);
    dim3 grid((unsigned)a.blk0[a.n], (unsigned)n_cols);
    switch (G) {
    case 32: cu_launch(matvec_q_multi_kernel<U, 32>, grid, MV_WARPS * 32, 0, st, a); break;
    case 16: cu_launch(matvec_q_multi_kernel<U, 16>, grid, MV_WARPS * 32, 0, st, a); break;
    case 8:  cu_launch(matvec_q_multi_kernel<U, 8>, grid, MV_WARPS * 32, 0, st, a); break;
    default: cu_launch(matvec_q_multi_kernel<U, 4>, grid, MV_WARPS * 32, 0, st, a); break;
    }
}

extern "C" st_status st_cuda_matvec_q8_multi(st_cuda *cu, uint32_t type, const st_cuda_mv *items, int n_items,
                                             st_cuda_q8 q) {
    ST_TRY(check_type(type, q.K));
    if (!is_quant_mv(type)) return st_fail(ST_ERR_INVALID, "cuda matvec_q8_multi: %s weights", st_type_get(type)->name);
    if (n_items < 1 || n_items > MV_MULTI || q.n < 1 || q.n > MV_MAX_COLS)
        return st_fail(ST_ERR_INVALID, "cuda matvec_q8_multi: %d matrices, %lld rows", n_items, (long long)q.n);
    mv_multi a;
    memset(&a, 0, sizeof a);
    a.n = n_items;
    a.row_bytes = st_row_size(st_type_get(type), q.K);
    a.K = q.K;
    a.xq = q.q;
    a.xd = q.d;
    a.xs = q.s;
    for (int i = 0; i < n_items; i++) {
        a.W[i] = (const uint8_t *)items[i].W;
        a.Y[i] = items[i].Y;
        a.M[i] = items[i].M;
        a.ldy[i] = items[i].ldy;
    }
#define MV_LAUNCH(T) launch_multi<unit_t<T>>(a, q.n, cu->stream)
    MV_CASES(MV_LAUNCH)
#undef MV_LAUNCH
    return cu_launched("matvec_q8_multi");
}

/* SwiGLU of 32 consecutive rows per block (a warp per row), written in 8 bits: the 32 outputs of a
 * block are one quantization group of the down product's input, as quantize_q8_kernel forms it. */
template <class U> __global__ void __launch_bounds__(1024)
swiglu_q8_kernel(mv_args a, int8_t *yq, float *yd, float *ys) {
    cu_pdl();
    __shared__ float part[32];
    const int64_t col = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t row = (int64_t)blockIdx.x * 32 + warp;
    int64_t n_units = a.K / U::ELEMS;
    const uint8_t *W = a.W, *W2 = a.W2;
    if (a.ids) {
        const int32_t e = a.ids[col];
        if (e < 0 || e >= a.n_expert) n_units = 0;
        else { W += (size_t)e * a.expert_bytes; W2 += (size_t)e * a.expert_bytes; }
    }
    const int64_t xr = col / a.x_group, nb = a.K / 32;
    const int8_t *xq = a.xq + xr * a.K;
    const float *xd = a.xd + xr * nb, *xs = a.xs + xr * nb;
    float acc = 0.0f, acc2 = 0.0f;
    for (int64_t u = lane; u < n_units; u += 32) {
        acc += unit_dot<U>(W + (size_t)row * a.row_bytes, u, xq, xd, xs);
        acc2 += unit_dot<U>(W2 + (size_t)row * a.row_bytes, u, xq, xd, xs);
    }
    acc = group_sum<32>(acc);
    acc2 = group_sum<32>(acc2);
    if (lane == 0) part[warp] = acc / (1.0f + expf(-acc)) * acc2;
    __syncthreads();
    if (warp == 0) {
        const float v = part[lane];
        const float amax = warp_max(fabsf(v));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const int q = (int)roundf(v * id);
        yq[col * a.M + row - warp + lane] = (int8_t)q;
        const float qs = warp_sum((float)q);
        if (lane == 0) {
            yd[col * (a.M / 32) + blockIdx.x] = d;
            ys[col * (a.M / 32) + blockIdx.x] = d * qs;
        }
    }
}

extern "C" st_status st_cuda_matvec_q8_swiglu_q8(st_cuda *cu, const st_cuda_experts *e, st_cuda_q8 q, st_cuda_q8 out) {
    ST_TRY(check_type(e->type, q.K));
    if (!is_quant_mv(e->type)) return st_fail(ST_ERR_INVALID, "cuda swiglu_q8: %s weights", st_type_get(e->type)->name);
    if (e->M % 32 || out.K != e->M || out.n < e->n_slots || e->x_group < 1 || e->n_slots < 1 || e->n_slots > 65535 ||
        (e->n_slots + e->x_group - 1) / e->x_group > q.n)
        return st_fail(ST_ERR_INVALID, "cuda swiglu_q8: %lld rows, %lld slots in groups of %lld, out %lld x %lld",
                       (long long)e->M, (long long)e->n_slots, (long long)e->x_group, (long long)out.n, (long long)out.K);
    /* ids NULL: one matrix */
    mv_args a = { (const uint8_t *)e->W, (const uint8_t *)e->W2, st_row_size(st_type_get(e->type), q.K), e->expert_bytes,
                  e->ids ? e->n_expert : 1, e->M, q.K, e->ids, e->x_group, NULL, q.q, q.d, q.s, NULL, 0 };
    dim3 grid((unsigned)(e->M / 32), (unsigned)e->n_slots);
    const uint32_t type = e->type;
#define MV_LAUNCH(T) cu_launch(swiglu_q8_kernel<unit_t<T>>, grid, 1024, 0, cu->stream, a, out.q, out.d, out.s)
    MV_CASES(MV_LAUNCH)
#undef MV_LAUNCH
    return cu_launched("swiglu_q8");
}

extern "C" st_status st_cuda_matvec_q8_id(st_cuda *cu, const st_cuda_experts *e, st_cuda_q8 q, float *Y, int64_t ldy) {
    ST_TRY(check_type(e->type, q.K));
    if (!is_quant_mv(e->type)) return st_fail(ST_ERR_INVALID, "cuda matvec_q8_id: %s weights", st_type_get(e->type)->name);
    if (e->x_group < 1 || e->n_slots < 1 || e->n_slots > 65535 || (e->n_slots + e->x_group - 1) / e->x_group > q.n)
        return st_fail(ST_ERR_INVALID, "cuda matvec_q8_id: %lld slots in groups of %lld over %lld rows",
                       (long long)e->n_slots, (long long)e->x_group, (long long)q.n);
    /* ids NULL: one matrix */
    mv_args a = { (const uint8_t *)e->W, (const uint8_t *)e->W2, st_row_size(st_type_get(e->type), q.K), e->expert_bytes,
                  e->ids ? e->n_expert : 1, e->M, q.K, e->ids, e->x_group, NULL, q.q, q.d, q.s, Y, ldy };
    const uint32_t type = e->type;
#define MV_LAUNCH(T) launch_q<unit_t<T>>(a, e->n_slots, cu->stream)
    MV_CASES(MV_LAUNCH)
#undef MV_LAUNCH
    return cu_launched("matvec_q8_id");
}

/* ---- Dequantization (prompt GEMM and get_rows) ---------------------------------------------- */

template <int T> __host__ __device__ float dequant_elem_k(const uint8_t *row, int64_t i) {
    if (T == ST_TYPE_F32 || T == ST_TYPE_F16 || T == ST_TYPE_BF16) return ld_w<T>(row, i);
    if (T == ST_TYPE_Q8_0) {
        const uint8_t *blk = row + (i / 32) * sizeof(block_q8_0);
        return h2f(*(const uint16_t *)blk) * (float)((const int8_t *)(blk + 2))[i % 32];
    }
    if (T == ST_TYPE_Q6_K) {
        const uint8_t *blk = row + (i / 256) * sizeof(block_q6_K);
        const int e = (int)(i % 256), h = e / 128, c = (e % 128) / 32, l = e % 32;
        const int nib = (blk[64 * h + 32 * (c & 1) + l] >> (c >= 2 ? 4 : 0)) & 0xF;
        const int q = (nib | (((blk[128 + 32 * h + l] >> (2 * c)) & 3) << 4)) - 32;
        const int sc = ((const int8_t *)(blk + 192))[8 * h + 2 * c + l / 16];
        return h2f(*(const uint16_t *)(blk + 208)) * (float)sc * (float)q;
    }
    /* Q4_K, Q5_K: sub-block s = 2j + hi of chunk j; d1 = d*sc, m1 = dmin*m, y = d1*q - m1 */
    const size_t bsz = T == ST_TYPE_Q4_K ? sizeof(block_q4_K) : sizeof(block_q5_K);
    const uint8_t *blk = row + (i / 256) * bsz;
    const int e = (int)(i % 256), j = e / 64, hi = (e / 32) & 1, l = e % 32;
    int sc, m;
    scale_min_k4(2 * j + hi, blk + 4, &sc, &m);
    int q;
    if (T == ST_TYPE_Q4_K) q = (blk[16 + 32 * j + l] >> (4 * hi)) & 0xF;
    else q = ((blk[48 + 32 * j + l] >> (4 * hi)) & 0xF) | (((blk[16 + l] >> (2 * j + hi)) & 1) << 4);
    const float d1 = h2f(*(const uint16_t *)blk) * (float)sc;
    const float m1 = h2f(*(const uint16_t *)(blk + 2)) * (float)m;
    return sub_rn(mul_rn(d1, (float)q), m1);
}

/* element i of a row of any type the GPU runs */
template <int T> __host__ __device__ float dequant_elem(const uint8_t *row, int64_t i) {
    if constexpr (lb_type(T)) return lb_dequant1<T>(row, i);
    else return dequant_elem_k<T>(row, i);
}

/* rows [r0, r0 + n_rows) of W -> f16 out[n_rows][K] */
template <int T> __global__ void dequant_f16_kernel(const uint8_t *W, size_t row_bytes, int64_t K,
                                                    int64_t r0, int64_t n_rows, __half *out) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_rows * K) return;
    const int64_t r = i / K, k = i % K;
    out[i] = __float2half_rn(dequant_elem<T>(W + (size_t)(r0 + r) * row_bytes, k));
}

template <int T> __global__ void get_rows_kernel(const uint8_t *table, size_t row_bytes, int64_t n_rows, int64_t n_embd,
                                                 const int32_t *ids, int64_t n_tok, float *out,
                                                 int64_t ld_out) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tok * n_embd) return;
    const int64_t t = i / n_embd, k = i % n_embd;
    const int32_t id = ids[t];
    out[t * ld_out + k] = id >= 0 && id < n_rows ? dequant_elem<T>(table + (size_t)id * row_bytes, k) : 0.0f;
}

#define DQ_CASES(F) \
    switch (type) { \
    case ST_TYPE_F32:  F(ST_TYPE_F32); break; \
    case ST_TYPE_F16:  F(ST_TYPE_F16); break; \
    case ST_TYPE_BF16: F(ST_TYPE_BF16); break; \
    case ST_TYPE_Q8_0: F(ST_TYPE_Q8_0); break; \
    case ST_TYPE_Q4_K: F(ST_TYPE_Q4_K); break; \
    case ST_TYPE_Q5_K: F(ST_TYPE_Q5_K); break; \
    LB_CASES(F) \
    default:           F(ST_TYPE_Q6_K); break; \
    }

__global__ void f32_to_f16_kernel(const float *x, int64_t ldx, int64_t n, int64_t K, __half *y) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * K) return;
    y[i] = __float2half_rn(x[(i / K) * ldx + i % K]);
}

/* The same on the 8-bit grid (q8_grid; K % 32 == 0, so a warp is one block of one row and a warp
 * past the end is past it whole). */
__global__ void f32_to_f16_q8_kernel(const float *x, int64_t ldx, int64_t n, int64_t K, __half *y) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * K) return;
    y[i] = __float2half_rn(q8_grid(x[(i / K) * ldx + i % K]));
}

/* Y = X W^T for a prompt chunk: column-major view, C (M x n, ld ldy) = A^T B with A = W (K x M)
 * and B = X (K x n). W is dequantized to f16 in row tiles that fit the scratch budget. For a
 * quantized W, X goes onto the decode products' 8-bit grid first: without it a prompt chunk and
 * the same rows one at a time differ by the whole 8-bit rounding (KL 0.25 on the demo model, whose
 * activations have outliers), and so does the chunk from the CPU's. */
static st_status gemm_run(st_cuda *cu, uint32_t type, const void *W, int64_t M, int64_t K,
                          const float *X, int64_t ldx, int64_t n, float *Y, int64_t ldy) {
    const size_t budget = (size_t)256 << 20;
    int64_t tile = (int64_t)(budget / ((size_t)K * sizeof(__half)));
    if (tile > M) tile = M;
    if (tile < 1) tile = 1;
    void *scr;
    ST_TRY(cu_scratch(cu, ((size_t)n * K + (size_t)tile * K) * sizeof(__half) + 256, &scr));
    __half *xh = (__half *)scr;
    __half *wh = xh + ((n * K + 127) / 128) * 128;
    if (!is_float_mv(type) && K % 32 == 0)
        cu_launch(f32_to_f16_q8_kernel, cu_blocks(n * K, 256), 256, 0, cu->stream, X, ldx, n, K, xh);
    else
        cu_launch(f32_to_f16_kernel, cu_blocks(n * K, 256), 256, 0, cu->stream, X, ldx, n, K, xh);
    ST_TRY(cu_launched("f32_to_f16"));
    const size_t row_bytes = st_row_size(st_type_get(type), K);
    const float one = 1.0f, zero = 0.0f;
    for (int64_t r0 = 0; r0 < M; r0 += tile) {
        const int64_t rows = M - r0 < tile ? M - r0 : tile;
        const unsigned blocks = cu_blocks(rows * K, 256);
#define DQ_LAUNCH(T) cu_launch(dequant_f16_kernel<T>, blocks, 256, 0, cu->stream, (const uint8_t *)W, row_bytes, K, r0, rows, wh)
        DQ_CASES(DQ_LAUNCH)
#undef DQ_LAUNCH
        ST_TRY(cu_launched("dequant_f16"));
        cublasStatus_t bs = cublasGemmEx(cu->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)n, (int)K,
                                         &one, wh, CUDA_R_16F, (int)K, xh, CUDA_R_16F, (int)K,
                                         &zero, Y + r0, CUDA_R_32F, (int)ldy,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (bs != CUBLAS_STATUS_SUCCESS)
            return st_fail(ST_ERR_IO, "cuda: cublasGemmEx %lldx%lldx%lld failed (%d)", (long long)rows,
                           (long long)n, (long long)K, (int)bs);
    }
    return ST_OK;
}

/* ---- Public entry points -------------------------------------------------------------------- */

extern "C" st_status st_cuda_matmul(st_cuda *cu, uint32_t type, const void *W, int64_t M, int64_t K,
                                    const float *X, int64_t ldx, int64_t n, float *Y, int64_t ldy) {
    ST_TRY(check_type(type, K));
    if (n <= MV_MAX_COLS)
        return matvec_run(cu, type, W, NULL, 0, 1, M, K, NULL, X, ldx, 1, n, Y, ldy);
    return gemm_run(cu, type, W, M, K, X, ldx, n, Y, ldy);
}

extern "C" st_status st_cuda_router_route(st_cuda *cu, const float *W, int64_t E, int64_t K, const float *X, int64_t n,
                                          float *logits, int64_t k, int32_t *ids, float *wts) {
    const int fits = n >= 1 && n <= MV_MAX_COLS && E <= 256 && k >= 1 && k <= E && K >= 256 && K % 8 == 0 &&
                     (uintptr_t)X % 16 == 0 && (uintptr_t)W % 16 == 0;
    if (!fits || cu_route_mode() != CU_ROUTE_FUSED) {
        ST_TRY(st_cuda_matmul(cu, ST_TYPE_F32, W, E, K, X, K, n, logits, E));
        return st_cuda_moe_route(cu, logits, E, n, E, k, ids, wts);
    }
    const mvf_args a = { (const uint8_t *)W, (size_t)K * sizeof(float), 0, 1, E, K, NULL, 1, X, K, logits, E };
    dim3 grid(cu_blocks(E, MV_WARPS), (unsigned)n);   /* a warp a row (G = 32: K / 8 >= 32) */
    unsigned *count = cu->bar + 4 * CU_BAR_ROWS + (cu->forked ? 1 : 0);
    if (E <= 128) cu_launch(router_route_kernel<4>, grid, MV_WARPS * 32, 0, cu->stream, a, k, ids, wts, count);
    else cu_launch(router_route_kernel<8>, grid, MV_WARPS * 32, 0, cu->stream, a, k, ids, wts, count);
    return cu_launched("router_route");
}

extern "C" st_status st_cuda_matmul_id(st_cuda *cu, const st_cuda_experts *e, int64_t K, const float *X, int64_t ldx,
                                       float *Y, int64_t ldy) {
    if (e->x_group < 1) return st_fail(ST_ERR_INVALID, "cuda matmul_id: x_group %lld", (long long)e->x_group);
    if (e->W2) return st_fail(ST_ERR_INVALID, "cuda matmul_id: a second matrix (the SwiGLU form is st_cuda_matmul_id_swiglu)");
    return matvec_run(cu, e->type, e->W, NULL, e->expert_bytes, e->n_expert, e->M, K, e->ids, X, ldx, e->x_group,
                      e->n_slots, Y, ldy);
}

extern "C" st_status st_cuda_matmul_id_swiglu(st_cuda *cu, const st_cuda_experts *e, int64_t K, const float *X,
                                              int64_t ldx, float *Y, int64_t ldy) {
    if (e->x_group < 1) return st_fail(ST_ERR_INVALID, "cuda matmul_id_swiglu: x_group %lld", (long long)e->x_group);
    return matvec_run(cu, e->type, e->W, e->W2, e->expert_bytes, e->ids ? e->n_expert : 1, e->M, K, e->ids, X, ldx,
                      e->x_group, e->n_slots, Y, ldy);
}

/* Y2/w2 (optional): then out[t] += w2[t] * Y2[t], as a second combine with k = 1 and accumulate
 * would add it (the shared expert after the routed ones), in the same pass. */
__global__ void moe_combine_kernel(const float *Y, int64_t ldy, const float *w, int64_t n_tok,
                                   int64_t k, int64_t M, float *out, int64_t ld_out, int accumulate,
                                   const float *Y2, int64_t ldy2, const float *w2) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tok * M) return;
    const int64_t t = i / M, m = i % M;
    float acc = accumulate ? out[t * ld_out + m] : 0.0f;
    for (int64_t j = 0; j < k; j++) acc += w[t * k + j] * Y[(t * k + j) * ldy + m];
    if (Y2) {
        const float routed = acc;   /* rounded as the first combine stores it */
        acc = routed + w2[t] * Y2[t * ldy2 + m];
    }
    out[t * ld_out + m] = acc;
}

extern "C" st_status st_cuda_moe_combine(st_cuda *cu, const float *Y, int64_t ldy, const float *w,
                                         int64_t n_tok, int64_t k, int64_t M, float *out,
                                         int64_t ld_out, int accumulate) {
    if (n_tok * M == 0) return ST_OK;
    cu_launch(moe_combine_kernel, cu_blocks(n_tok * M, 256), 256, 0, cu->stream, Y, ldy, w, n_tok, k, M, out, ld_out, accumulate,
              (const float *)NULL, (int64_t)0, (const float *)NULL);
    return cu_launched("moe_combine");
}

extern "C" st_status st_cuda_moe_combine_shared(st_cuda *cu, const float *Y, int64_t ldy, const float *w,
                                                int64_t n_tok, int64_t k, int64_t M, float *out, int64_t ld_out,
                                                const float *Y2, int64_t ldy2, const float *w2) {
    if (n_tok * M == 0) return ST_OK;
    cu_launch(moe_combine_kernel, cu_blocks(n_tok * M, 256), 256, 0, cu->stream, Y, ldy, w, n_tok, k, M, out, ld_out, 0,
              Y2, ldy2, w2);
    return cu_launched("moe_combine_shared");
}

extern "C" st_status st_cuda_get_rows(st_cuda *cu, uint32_t type, const void *table, int64_t n_rows,
                                      int64_t n_embd, const int32_t *ids_host, int64_t n_tok,
                                      float *out, int64_t ld_out) {
    ST_TRY(check_type(type, n_embd));
    for (int64_t t = 0; t < n_tok; t++)
        if (ids_host[t] < 0 || ids_host[t] >= n_rows)
            return st_fail(ST_ERR_RANGE, "cuda get_rows: id %d at %lld outside [0, %lld)", ids_host[t],
                           (long long)t, (long long)n_rows);
    if (n_tok <= 0) return ST_OK;
    void *scr;
    ST_TRY(cu_scratch(cu, (size_t)n_tok * sizeof(int32_t), &scr));
    CU_TRY(cudaMemcpyAsync(scr, ids_host, (size_t)n_tok * sizeof(int32_t), cudaMemcpyHostToDevice,
                           cu->stream), "get_rows ids");
    const size_t row_bytes = st_row_size(st_type_get(type), n_embd);
    const unsigned blocks = cu_blocks(n_tok * n_embd, 256);
#define GR_LAUNCH(T) cu_launch(get_rows_kernel<T>, blocks, 256, 0, cu->stream, (const uint8_t *)table, row_bytes, n_rows, n_embd, (const int32_t *)scr, n_tok, out, ld_out)
    DQ_CASES(GR_LAUNCH)
#undef GR_LAUNCH
    ST_TRY(cu_launched("get_rows"));
    /* the ids live in scratch: the copy must be consumed before the next op reuses it */
    return cu_check(cudaStreamSynchronize(cu->stream), "get_rows");
}

extern "C" st_status st_cuda_get_rows_dev(st_cuda *cu, uint32_t type, const void *table, int64_t n_rows,
                                          int64_t n_embd, const int32_t *ids, int64_t n_tok, float *out,
                                          int64_t ld_out) {
    ST_TRY(check_type(type, n_embd));
    if (n_tok <= 0) return ST_OK;
    const size_t row_bytes = st_row_size(st_type_get(type), n_embd);
    const unsigned blocks = cu_blocks(n_tok * n_embd, 256);
#define GRD_LAUNCH(T) cu_launch(get_rows_kernel<T>, blocks, 256, 0, cu->stream, (const uint8_t *)table, row_bytes, n_rows, n_embd, ids, n_tok, out, ld_out)
    DQ_CASES(GRD_LAUNCH)
#undef GRD_LAUNCH
    return cu_launched("get_rows_dev");
}

/* ---- The low-bit types' tables and the MoE prefill's dequantizer ---------------------------- */

extern "C" int st_cuda_type_q8(uint32_t type) { return is_quant_mv(type); }
extern "C" int st_cuda_type_ok(uint32_t type) { return is_quant_mv(type) || is_float_mv(type); }
int cu_lowbit_type(uint32_t type) { return lb_type(type); }

st_status cu_lowbit_upload(void) {
    CU_TRY(cudaMemcpyToSymbol(lb_grid_iq2xs, st_iq2xs_grid, sizeof lb_grid_iq2xs), "iq2_xs grid");
    CU_TRY(cudaMemcpyToSymbol(lb_grid_iq3xxs, st_iq3xxs_grid, sizeof lb_grid_iq3xxs), "iq3_xxs grid");
    CU_TRY(cudaMemcpyToSymbol(lb_grid_iq3s, st_iq3s_grid, sizeof lb_grid_iq3s), "iq3_s grid");
    CU_TRY(cudaMemcpyToSymbol(lb_signs, st_iq_signs, sizeof lb_signs), "iq sign masks");
    CU_TRY(cudaMemcpyToSymbol(lb_iq4nl, st_iq4nl_levels, sizeof lb_iq4nl), "iq4 levels");
    return ST_OK;
}

template <int T> struct lb_dq8 {
    static __device__ __forceinline__ void at(const uint8_t *row, int64_t i0, float v[8]) { lb_dequant8<T>(row, i0, v); }
};

st_status cu_dequant_experts_lowbit(st_cuda *cu, uint32_t type, const void *W, int64_t rows, int64_t K,
                                    const int32_t *eids, int64_t nb, void *out, int64_t out_stride) {
    if (!lb_type(type) || K % 8) return st_fail(ST_ERR_INVALID, "cuda: low-bit dequant of type %u, K %lld", type, (long long)K);
    const size_t row_bytes = st_row_size(st_type_get(type), K), eb = row_bytes * (size_t)rows;
    const dim3 grid(cu_blocks(rows * K / 8, CU_DQ8_THREADS), (unsigned)nb);
    switch (type) {
#define DQ8_LAUNCH(T) cu_launch(dq8_experts_kernel<lb_dq8<T>>, grid, CU_DQ8_THREADS, 0, cu->stream, (const uint8_t *)W, eb, row_bytes, rows, K, eids, (__half *)out, out_stride)
    LB_CASES(DQ8_LAUNCH)
#undef DQ8_LAUNCH
    default: break;
    }
    return cu_launched("dq8_experts (low-bit)");
}
