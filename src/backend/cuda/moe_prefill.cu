/* moe_prefill.cu: the routed-expert FFN of a prompt chunk on tensor cores
 * (st_cuda_moe_ffn_prefill).
 *
 * A prompt chunk of n tokens routed to k of E experts makes n*k (token, expert) slots; with
 * n = 4096, k = 8, E = 256 every expert gets ~128 rows, enough for a tensor-core GEMM each. So:
 *   1. counting-sort the slots by expert on the device (perm: position -> slot, inv: slot ->
 *      position), and bring the E per-expert counts to the host (the one synchronisation: cuBLAS
 *      takes the GEMM sizes from host memory);
 *   2. gather the X rows into expert order as f16;
 *   3. for batches of used experts (<= 1 GiB of f16 weights): dequantize their gate|up (one
 *      [2ff][d] matrix per expert, so gate and up are one GEMM) and down to f16, run the gate|up
 *      GEMMs as one grouped cuBLAS call (an expert per group; f16 in and out, f32 accumulation),
 *      SwiGLU into f16, the down GEMMs likewise;
 *   4. combine per token in slot order j = 0..k-1 (the CPU's order), then add to out.
 * The dequantizer is this file's own (8 consecutive elements per thread, one 16-byte store, in
 * cuda_internal.cuh's dq8_experts_kernel), so that matmul.cu stays untouched; it follows the block
 * layouts of src/quant/types.h. The low-bit types (quant_lowbit.cuh) are dequantized by matmul.cu,
 * where their grids live in device memory.
 *
 * The grouped GEMM (cublasGemmGroupedBatchedEx) is tried first; if cuBLAS refuses it for these
 * types, the same products run as one cublasGemmEx per expert (the context remembers which). */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cuda/cuda_internal.cuh"
extern "C" {
#include "quant/quant.h"
}

namespace {

const int MP_MAX_E = 1024;                       /* experts the one-block sort can count */
const size_t MP_W_BUDGET = (size_t)1 << 30;      /* f16 weights dequantized at once */
const int MP_THREADS = 256;

/* ---- Dequantization: 8 consecutive elements of a row ---------------------------------------- */

__host__ __device__ __forceinline__ float mp_h2f(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    return st_fp16_to_fp32(h);
#endif
}
/* d*q - m without FMA contraction, as the CPU's reference dequantizer rounds it */
__host__ __device__ __forceinline__ float mp_dqm(float d1, float q, float m1) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(__fmul_rn(d1, q), m1);
#else
    return d1 * q - m1;
#endif
}
__host__ __device__ __forceinline__ void mp_scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) { *sc = q[j] & 63; *m = q[j + 4] & 63; }
    else { *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

/* Elements i0 .. i0+7 of a row of type T (i0 % 8 == 0): one 32-element sub-block, one scale. */
template <int T> __host__ __device__ __forceinline__ void dq8(const uint8_t *row, int64_t i0, float v[8]) {
    if (T == ST_TYPE_F32) {
        for (int j = 0; j < 8; j++) v[j] = ((const float *)row)[i0 + j];
    } else if (T == ST_TYPE_F16) {
        for (int j = 0; j < 8; j++) v[j] = mp_h2f(((const uint16_t *)row)[i0 + j]);
    } else if (T == ST_TYPE_BF16) {
        for (int j = 0; j < 8; j++) {   /* bf16 is the top half of an f32 */
            const uint32_t b = (uint32_t)((const uint16_t *)row)[i0 + j] << 16;
#ifdef __CUDA_ARCH__
            v[j] = __uint_as_float(b);
#else
            memcpy(&v[j], &b, 4);
#endif
        }
    } else if (T == ST_TYPE_Q8_0) {
        const uint8_t *blk = row + (i0 / 32) * sizeof(block_q8_0);
        const float d = mp_h2f(*(const uint16_t *)blk);
        const int8_t *q = (const int8_t *)(blk + 2) + i0 % 32;
        for (int j = 0; j < 8; j++) v[j] = d * (float)q[j];
    } else if (T == ST_TYPE_Q6_K) {
        /* element e = 128h + 32c + l: low 4 bits from ql[64h + 32(c&1) + l] (high nibble for
         * c >= 2), 2 bits from qh[32h + l] >> 2c, minus 32, scale sc[8h + 2c + l/16] */
        const uint8_t *blk = row + (i0 / 256) * sizeof(block_q6_K);
        const int e = (int)(i0 % 256), h = e / 128, c = (e % 128) / 32, l = e % 32;
        const float d = mp_h2f(*(const uint16_t *)(blk + 208));
        const float ds = d * (float)((const int8_t *)(blk + 192))[8 * h + 2 * c + l / 16];
        const uint8_t *ql = blk + 64 * h + 32 * (c & 1) + l, *qh = blk + 128 + 32 * h + l;
        const int sh = c >= 2 ? 4 : 0;
        for (int j = 0; j < 8; j++) {
            const int q = (((ql[j] >> sh) & 0xF) | (((qh[j] >> (2 * c)) & 3) << 4)) - 32;
            v[j] = ds * (float)q;
        }
    } else {
        /* Q4_K / Q5_K: chunk j of 64 holds sub-blocks 2j (low nibbles) and 2j+1 (high nibbles);
         * y = d*sc*q - dmin*m */
        const size_t bsz = T == ST_TYPE_Q4_K ? sizeof(block_q4_K) : sizeof(block_q5_K);
        const uint8_t *blk = row + (i0 / 256) * bsz;
        const int e = (int)(i0 % 256), j = e / 64, hi = (e / 32) & 1, l = e % 32;
        int sc, m;
        mp_scale_min_k4(2 * j + hi, blk + 4, &sc, &m);
        const float d1 = mp_h2f(*(const uint16_t *)blk) * (float)sc;
        const float m1 = mp_h2f(*(const uint16_t *)(blk + 2)) * (float)m;
        if (T == ST_TYPE_Q4_K) {
            const uint8_t *qs = blk + 16 + 32 * j + l;
            for (int i = 0; i < 8; i++) v[i] = mp_dqm(d1, (float)((qs[i] >> (4 * hi)) & 0xF), m1);
        } else {
            const uint8_t *qs = blk + 48 + 32 * j + l, *qh = blk + 16 + l;
            for (int i = 0; i < 8; i++) {
                const int q = ((qs[i] >> (4 * hi)) & 0xF) | (((qh[i] >> (2 * j + hi)) & 1) << 4);
                v[i] = mp_dqm(d1, (float)q, m1);
            }
        }
    }
}

template <int T> struct mp_dq8 {
    static __device__ __forceinline__ void at(const uint8_t *row, int64_t i0, float v[8]) { dq8<T>(row, i0, v); }
};

/* ---- Routing bookkeeping, gather, SwiGLU, combine ------------------------------------------- */

/* One block. counts[e] for e < E (counts[E]: slots with an invalid id); perm[p] = slot at sorted
 * position p (expert-major; order within an expert is whatever the atomics give: every row is
 * computed on its own); inv[slot] = p. */
__global__ void __launch_bounds__(1024)
mp_sort_kernel(const int32_t *ids, int64_t n, int64_t E, int32_t *counts, int32_t *perm, int32_t *inv) {
    cu_pdl();
    __shared__ int cnt[MP_MAX_E + 1];
    for (int64_t i = threadIdx.x; i <= E; i += blockDim.x) cnt[i] = 0;
    __syncthreads();
    for (int64_t s = threadIdx.x; s < n; s += blockDim.x) {
        const int32_t e = ids[s];
        atomicAdd(&cnt[e < 0 || e >= E ? E : e], 1);
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i <= E; i += blockDim.x) counts[i] = cnt[i];
    __syncthreads();
    if (threadIdx.x == 0) {
        int run = 0;
        for (int64_t i = 0; i <= E; i++) { const int c = cnt[i]; cnt[i] = run; run += c; }
    }
    __syncthreads();
    for (int64_t s = threadIdx.x; s < n; s += blockDim.x) {
        const int32_t e = ids[s];
        const int p = atomicAdd(&cnt[e < 0 || e >= E ? E : e], 1);
        perm[p] = (int32_t)s;
        inv[s] = p;
    }
}

/* xg[p] = f16(X[perm[p] / k]) for the n_rows valid positions; q8: on the decode products' 8-bit
 * grid first (q8_grid; d % 32 == 0), as a decode step's experts read it */
__global__ void mp_gather_kernel(const float *X, int64_t ldx, int64_t d, int64_t k, const int32_t *perm,
                                 int64_t n_rows, int q8, __half *xg) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_rows * d) return;
    const int64_t p = i / d, c = i % d;
    const float v = X[(int64_t)(perm[p] / k) * ldx + c];
    xg[i] = __float2half_rn(q8 ? q8_grid(v) : v);
}

/* act[p][i] = f16(silu(H[p][i]) * H[p][ff + i]) for rows [p0, p1); q8: on the 8-bit grid first,
 * as the decode step's SwiGLU hands it to the down product (ff % 32 == 0) */
__global__ void mp_swiglu_kernel(const __half *H, int64_t ff, int64_t p0, int64_t p1, int q8, __half *act) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (p1 - p0) * ff) return;
    const int64_t p = p0 + i / ff, c = i % ff;
    const float g = __half2float(H[p * 2 * ff + c]), u = __half2float(H[p * 2 * ff + ff + c]);
    const float v = g / (1.0f + expf(-g)) * u;
    act[p * ff + c] = __float2half_rn(q8 ? q8_grid(v) : v);
}

__global__ void mp_combine_kernel(const __half *Y, int64_t d, const int32_t *ids, const int32_t *inv,
                                  const float *wts, int64_t n_tok, int64_t k, int64_t E, float *out,
                                  int64_t ld_out, int accumulate) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tok * d) return;
    const int64_t t = i / d, c = i % d;
    float acc = 0.0f;
    for (int64_t j = 0; j < k; j++) {
        const int64_t s = t * k + j;
        const int32_t e = ids[s];
        if (e < 0 || e >= E) continue;
        acc += wts[s] * __half2float(Y[(int64_t)inv[s] * d + c]);
    }
    float *o = out + t * ld_out + c;
    *o = accumulate ? *o + acc : acc;
}

/* ---- Host side ------------------------------------------------------------------------------ */

int mp_float(uint32_t t) { return t == ST_TYPE_F32 || t == ST_TYPE_F16 || t == ST_TYPE_BF16; }

int mp_supported(uint32_t t) {
    return t == ST_TYPE_Q4_K || t == ST_TYPE_Q5_K || t == ST_TYPE_Q6_K || t == ST_TYPE_Q8_0 ||
           t == ST_TYPE_F32 || t == ST_TYPE_F16 || t == ST_TYPE_BF16 || cu_lowbit_type(t);
}

st_status mp_check(const char *which, uint32_t type, int64_t K) {
    const st_type_info *ti = st_type_get(type);
    if (!ti || !mp_supported(type))
        return st_fail(ST_ERR_UNSUPPORTED, "cuda moe_ffn_prefill: %s weight type %s (%u) has no CUDA kernel",
                       which, ti && ti->name ? ti->name : "?", type);
    if (K % ti->block_size || K % 8)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda moe_ffn_prefill: %s rows of %lld are not a multiple of %s's "
                       "block (%d) and of 8", which, (long long)K, ti->name, ti->block_size);
    return ST_OK;
}

/* Dequantizes the batch's experts (device ids eids[nb]) of one stacked tensor: rows x K each,
 * into out + b*out_stride. */
st_status mp_dequant(st_cuda *cu, uint32_t type, const void *W, int64_t rows, int64_t K, const int32_t *eids,
                     int64_t nb, __half *out, int64_t out_stride) {
    if (cu_lowbit_type(type)) return cu_dequant_experts_lowbit(cu, type, W, rows, K, eids, nb, out, out_stride);
    const size_t row_bytes = st_row_size(st_type_get(type), K), eb = row_bytes * (size_t)rows;
    const dim3 grid(cu_blocks(rows * K / 8, CU_DQ8_THREADS), (unsigned)nb);
    const uint8_t *w = (const uint8_t *)W;
    switch (type) {
    case ST_TYPE_F32:  cu_launch(dq8_experts_kernel<mp_dq8<ST_TYPE_F32>>, grid, CU_DQ8_THREADS, 0, cu->stream, w, eb, row_bytes, rows, K, eids, out, out_stride); break;
    case ST_TYPE_F16:  cu_launch(dq8_experts_kernel<mp_dq8<ST_TYPE_F16>>, grid, CU_DQ8_THREADS, 0, cu->stream, w, eb, row_bytes, rows, K, eids, out, out_stride); break;
    case ST_TYPE_BF16: cu_launch(dq8_experts_kernel<mp_dq8<ST_TYPE_BF16>>, grid, CU_DQ8_THREADS, 0, cu->stream, w, eb, row_bytes, rows, K, eids, out, out_stride); break;
    case ST_TYPE_Q8_0: cu_launch(dq8_experts_kernel<mp_dq8<ST_TYPE_Q8_0>>, grid, CU_DQ8_THREADS, 0, cu->stream, w, eb, row_bytes, rows, K, eids, out, out_stride); break;
    case ST_TYPE_Q4_K: cu_launch(dq8_experts_kernel<mp_dq8<ST_TYPE_Q4_K>>, grid, CU_DQ8_THREADS, 0, cu->stream, w, eb, row_bytes, rows, K, eids, out, out_stride); break;
    case ST_TYPE_Q5_K: cu_launch(dq8_experts_kernel<mp_dq8<ST_TYPE_Q5_K>>, grid, CU_DQ8_THREADS, 0, cu->stream, w, eb, row_bytes, rows, K, eids, out, out_stride); break;
    default:           cu_launch(dq8_experts_kernel<mp_dq8<ST_TYPE_Q6_K>>, grid, CU_DQ8_THREADS, 0, cu->stream, w, eb, row_bytes, rows, K, eids, out, out_stride); break;
    }
    return cu_launched("moe_prefill dequant");
}

/* One product per expert of the batch: C_b (m x n_b, ldc) = A_b^T (A_b: k x m, lda = k) * B_b
 * (k x n_b, ldb = k), f16 in, f32 accumulation, f16 out (cuBLAS 13.1's grouped GEMM refuses f32
 * out for f16 in: CUBLAS_STATUS_NOT_SUPPORTED, measured on the H200). dev_ptrs: device room for
 * 3*nb pointers (A, B, C). */
struct mp_gemms {
    int nb;
    int m, k;
    int *n;                  /* host [nb] rows of each expert */
    const void **A, **B;     /* host [nb] */
    void **C;                /* host [nb] */
};

/* -1 unknown, 1 the grouped call works, 0 it was refused: loop of cublasGemmEx. Process-wide:
 * the answer depends on the cuBLAS build, not the context. */
int g_grouped_ok = -1;

st_status mp_gemm_loop(st_cuda *cu, const mp_gemms &g) {
    const float one = 1.0f, zero = 0.0f;
    for (int b = 0; b < g.nb; b++) {
        const cublasStatus_t bs = cublasGemmEx(cu->blas, CUBLAS_OP_T, CUBLAS_OP_N, g.m, g.n[b], g.k, &one,
                                               g.A[b], CUDA_R_16F, g.k, g.B[b], CUDA_R_16F, g.k, &zero,
                                               g.C[b], CUDA_R_16F, g.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (bs != CUBLAS_STATUS_SUCCESS)
            return st_fail(ST_ERR_IO, "cuda moe_ffn_prefill: cublasGemmEx %dx%dx%d failed (%d)", g.m, g.n[b],
                           g.k, (int)bs);
    }
    return ST_OK;
}

st_status mp_gemm(st_cuda *cu, const mp_gemms &g, void **dev_ptrs, void **host_ptrs) {
    if (g.nb == 0) return ST_OK;
    if (g_grouped_ok != 0) {
        /* the pointer arrays live in device memory; the copy from pageable host memory is staged
         * before cudaMemcpyAsync returns, so host_ptrs may be reused right after */
        for (int b = 0; b < g.nb; b++) {
            host_ptrs[b] = (void *)g.A[b];
            host_ptrs[g.nb + b] = (void *)g.B[b];
            host_ptrs[2 * g.nb + b] = g.C[b];
        }
        CU_TRY(cudaMemcpyAsync(dev_ptrs, host_ptrs, (size_t)(3 * g.nb) * sizeof(void *), cudaMemcpyHostToDevice,
                               cu->stream), "moe_prefill pointers");
        int *ip = (int *)malloc((size_t)g.nb * 6 * sizeof(int));
        cublasOperation_t *ops = (cublasOperation_t *)malloc((size_t)g.nb * 2 * sizeof(cublasOperation_t));
        float *ab = (float *)malloc((size_t)g.nb * 2 * sizeof(float));
        if (!ip || !ops || !ab) {
            free(ip); free(ops); free(ab);
            return st_fail(ST_ERR_NOMEM, "cuda moe_ffn_prefill: %d GEMM descriptors", g.nb);
        }
        int *m = ip, *k = ip + g.nb, *ld_a = ip + 2 * g.nb, *ld_c = ip + 3 * g.nb, *gs = ip + 4 * g.nb;
        for (int b = 0; b < g.nb; b++) {
            m[b] = g.m; k[b] = g.k; ld_a[b] = g.k; ld_c[b] = g.m; gs[b] = 1;
            ops[b] = CUBLAS_OP_T; ops[g.nb + b] = CUBLAS_OP_N;
            ab[b] = 1.0f; ab[g.nb + b] = 0.0f;
        }
        const cublasStatus_t bs = cublasGemmGroupedBatchedEx(
            cu->blas, ops, ops + g.nb, m, g.n, k, ab, (const void *const *)dev_ptrs, CUDA_R_16F, ld_a,
            (const void *const *)(dev_ptrs + g.nb), CUDA_R_16F, ld_a, ab + g.nb, dev_ptrs + 2 * g.nb,
            CUDA_R_16F, ld_c, g.nb, gs, CUBLAS_COMPUTE_32F);
        free(ip); free(ops); free(ab);
        if (bs == CUBLAS_STATUS_SUCCESS) { g_grouped_ok = 1; return ST_OK; }
        if (g_grouped_ok == 1)
            return st_fail(ST_ERR_IO, "cuda moe_ffn_prefill: cublasGemmGroupedBatchedEx (%d groups) failed (%d)",
                           g.nb, (int)bs);
        g_grouped_ok = 0;   /* refused on first use (types not supported by this cuBLAS): loop */
    }
    return mp_gemm_loop(cu, g);
}

size_t mp_al(size_t b) { return (b + 255) / 256 * 256; }

} /* namespace */

/* st_cuda_prefill_test_limits (attn_prefill.cu defines it): experts per batch, 0 = by budget */
int64_t cu_moe_prefill_test_batch = 0;

/* The common body: gu16/dn16 the f16 copies of every expert, or NULL to dequantize per call. */
static st_status moe_prefill_run(st_cuda *cu, const st_cuda_moe_w *w, const void *gu16, const void *dn16,
                                 const int32_t *ids, const float *wts, int64_t k, const float *X, int64_t ldx,
                                 int64_t n_tok, float *out, int64_t ld_out, int accumulate) {
    const int64_t E = w->n_expert, d = w->d, ff = w->ff;
    if (n_tok <= 0) return ST_OK;
    if (k < 1 || E < 1 || E > MP_MAX_E || d < 1 || ff < 1)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda moe_ffn_prefill: k %lld, %lld experts (at most %d), d %lld, ff %lld",
                       (long long)k, (long long)E, MP_MAX_E, (long long)d, (long long)ff);
    ST_TRY(mp_check("gate", w->type_gate, d));
    ST_TRY(mp_check("up", w->type_up, d));
    ST_TRY(mp_check("down", w->type_down, ff));
    const int64_t n_slots = n_tok * k;
    if (n_slots > INT32_MAX / 2 || 2 * ff * d > INT32_MAX)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda moe_ffn_prefill: %lld slots of %lldx%lld", (long long)n_slots,
                       (long long)ff, (long long)d);

    /* batch of experts whose f16 gate|up and down fit the budget */
    const size_t per_expert = (size_t)(3 * ff * d) * sizeof(__half);
    const int cached = gu16 && dn16;   /* f16 copies made at load: no dequantization */
    int64_t b_max = cached ? E : (int64_t)(MP_W_BUDGET / per_expert);
    if (b_max < 1) b_max = 1;
    if (b_max > E) b_max = E;
    if (b_max > n_slots) b_max = n_slots;
    if (cu_moe_prefill_test_batch > 0 && b_max > cu_moe_prefill_test_batch) b_max = cu_moe_prefill_test_batch;

    /* scratch: everything at once (a later growth would drop what the sort wrote) */
    const size_t s_cnt = mp_al((size_t)(E + 1) * 4), s_idx = mp_al((size_t)n_slots * 4);
    const size_t s_xg = mp_al((size_t)(n_slots * d) * 2), s_h = mp_al((size_t)(n_slots * 2 * ff) * 2);
    const size_t s_act = mp_al((size_t)(n_slots * ff) * 2), s_y = mp_al((size_t)(n_slots * d) * 2);
    const size_t s_eid = mp_al((size_t)b_max * 4), s_ptr = mp_al((size_t)(6 * b_max) * sizeof(void *));
    const size_t s_w = cached ? 0 : mp_al(per_expert * (size_t)b_max);
    void *scr;
    ST_TRY(cu_scratch(cu, s_cnt + 2 * s_idx + s_xg + s_h + s_act + s_y + s_eid + s_ptr + s_w, &scr));
    char *p = (char *)scr;
    int32_t *d_cnt = (int32_t *)p; p += s_cnt;
    int32_t *d_perm = (int32_t *)p; p += s_idx;
    int32_t *d_inv = (int32_t *)p; p += s_idx;
    __half *xg = (__half *)p; p += s_xg;
    __half *H = (__half *)p; p += s_h;
    __half *act = (__half *)p; p += s_act;
    __half *Y = (__half *)p; p += s_y;
    int32_t *d_eid = (int32_t *)p; p += s_eid;
    void **d_ptr = (void **)p; p += s_ptr;
    const __half *Wgu = cached ? (const __half *)gu16 : (const __half *)p;
    const __half *Wd = cached ? (const __half *)dn16 : Wgu + (size_t)(2 * ff * d) * (size_t)b_max;
    __half *Wgu_scr = (__half *)p, *Wd_scr = Wgu_scr + (size_t)(2 * ff * d) * (size_t)b_max;

    /* the activations on the 8-bit grid where the decode step quantizes them */
    const int q8_in = !mp_float(w->type_gate) && d % 32 == 0, q8_mid = !mp_float(w->type_down) && ff % 32 == 0;
    cu_launch(mp_sort_kernel, 1, 1024, 0, cu->stream, ids, n_slots, E, d_cnt, d_perm, d_inv);
    ST_TRY(cu_launched("moe_prefill sort"));

    /* host bookkeeping: counts, offsets, the batch's descriptors */
    const size_t hb = (size_t)(E + 1) * 4 * 2 + (size_t)b_max * (4 + 4 + 9 * sizeof(void *));   /* eid, nrow; A1 B1 A2 B2 C1 C2; hptr[3] */
    char *hmem = (char *)malloc(hb);
    if (!hmem) return st_fail(ST_ERR_NOMEM, "cuda moe_ffn_prefill: %zu host bytes", hb);
    int32_t *cnt = (int32_t *)hmem, *off = cnt + (E + 1);
    int32_t *eid = off + (E + 1);
    int *nrow = (int *)(eid + b_max);
    const void **A1 = (const void **)(nrow + b_max), **B1 = A1 + b_max, **A2 = B1 + b_max, **B2 = A2 + b_max;
    void **C1 = (void **)(B2 + b_max), **C2 = C1 + b_max, **hptr = C2 + b_max;
    st_status s = st_cuda_download(cu, cnt, d_cnt, (size_t)(E + 1) * 4);   /* the one wait */
    int64_t n_valid = 0;
    for (int64_t e = 0; e < E && s == ST_OK; e++) { off[e] = (int32_t)n_valid; n_valid += cnt[e]; }

    if (s == ST_OK && n_valid > 0) {
        cu_launch(mp_gather_kernel, cu_blocks(n_valid * d, MP_THREADS), MP_THREADS, 0, cu->stream, X, ldx, d, k, d_perm,
                                                                                           n_valid, q8_in, xg);
        s = cu_launched("moe_prefill gather");
    }
    for (int64_t e0 = 0; s == ST_OK && e0 < E;) {
        /* next batch: up to b_max used experts */
        int nb = 0;
        int64_t e = e0;
        for (; e < E && nb < b_max; e++) {
            if (cnt[e] == 0) continue;
            const int b = nb++;
            eid[b] = (int32_t)e;
            nrow[b] = cnt[e];
            const size_t wi = cached ? (size_t)e : (size_t)b;   /* the cache is indexed by expert */
            A1[b] = Wgu + wi * (size_t)(2 * ff * d);
            B1[b] = xg + (size_t)off[e] * (size_t)d;
            C1[b] = H + (size_t)off[e] * (size_t)(2 * ff);
            A2[b] = Wd + wi * (size_t)(d * ff);
            B2[b] = act + (size_t)off[e] * (size_t)ff;
            C2[b] = Y + (size_t)off[e] * (size_t)d;
        }
        e0 = e;
        if (nb == 0) break;
        const int64_t p0 = off[eid[0]], p1 = off[eid[nb - 1]] + cnt[eid[nb - 1]];
        if (!cached) {
            s = cu_check(cudaMemcpyAsync(d_eid, eid, (size_t)nb * 4, cudaMemcpyHostToDevice, cu->stream),
                         "moe_prefill expert ids");
            if (s == ST_OK) s = mp_dequant(cu, w->type_gate, w->gate, ff, d, d_eid, nb, Wgu_scr, 2 * ff * d);
            if (s == ST_OK) s = mp_dequant(cu, w->type_up, w->up, ff, d, d_eid, nb, Wgu_scr + ff * d, 2 * ff * d);
            if (s == ST_OK) s = mp_dequant(cu, w->type_down, w->down, d, ff, d_eid, nb, Wd_scr, d * ff);
        }
        const mp_gemms g1 = { nb, (int)(2 * ff), (int)d, nrow, A1, B1, C1 };
        if (s == ST_OK) s = mp_gemm(cu, g1, d_ptr, hptr);
        if (s == ST_OK) {
            cu_launch(mp_swiglu_kernel, cu_blocks((p1 - p0) * ff, MP_THREADS), MP_THREADS, 0, cu->stream, H, ff, p0, p1, q8_mid,
                                                                                                 act);
            s = cu_launched("moe_prefill swiglu");
        }
        const mp_gemms g2 = { nb, (int)d, (int)ff, nrow, A2, B2, C2 };
        /* the second pointer set in its own room: the first may still be read by the queued GEMM */
        if (s == ST_OK) s = mp_gemm(cu, g2, d_ptr + 3 * b_max, hptr);
    }
    if (s == ST_OK) {
        cu_launch(mp_combine_kernel, cu_blocks(n_tok * d, MP_THREADS), MP_THREADS, 0, cu->stream, 
            Y, d, ids, d_inv, wts, n_tok, k, E, out, ld_out, accumulate);
        s = cu_launched("moe_prefill combine");
    }
    free(hmem);
    return s;
}

extern "C" st_status st_cuda_moe_ffn_prefill(st_cuda *cu, const st_cuda_moe_w *w, const st_cuda_moe_rows *r) {
    return moe_prefill_run(cu, w, NULL, NULL, r->ids, r->wts, r->k, r->X, r->ldx, r->n_tok, r->out, r->ld_out, r->accumulate);
}

extern "C" st_status st_cuda_moe_ffn_prefill_f16(st_cuda *cu, const st_cuda_moe_w *w, const void *gate_up_f16,
                                                 const void *down_f16, const st_cuda_moe_rows *r) {
    if (!gate_up_f16 || !down_f16)
        return st_fail(ST_ERR_INVALID, "cuda moe_ffn_prefill_f16: no f16 expert copies (st_cuda_moe_dequant_f16)");
    return moe_prefill_run(cu, w, gate_up_f16, down_f16, r->ids, r->wts, r->k, r->X, r->ldx, r->n_tok, r->out, r->ld_out,
                           r->accumulate);
}

/* The f16 copies of every expert for st_cuda_moe_ffn_prefill_f16, made once at load: experts
 * dequantized in batches of 64 through a small id table in scratch. */
extern "C" st_status st_cuda_moe_dequant_f16(st_cuda *cu, const st_cuda_moe_w *w, void *gate_up_f16, void *down_f16) {
    const int64_t E = w->n_expert, d = w->d, ff = w->ff;
    ST_TRY(mp_check("gate", w->type_gate, d));
    ST_TRY(mp_check("up", w->type_up, d));
    ST_TRY(mp_check("down", w->type_down, ff));
    const int64_t B = 64;
    int32_t ids[64];
    void *scr;
    ST_TRY(cu_scratch(cu, sizeof ids, &scr));
    __half *gu = (__half *)gate_up_f16, *dn = (__half *)down_f16;
    for (int64_t e0 = 0; e0 < E; e0 += B) {
        const int64_t nb = E - e0 < B ? E - e0 : B;
        for (int64_t b = 0; b < nb; b++) ids[b] = (int32_t)(e0 + b);
        /* waits: the next batch rewrites the table (this runs once, at load) */
        ST_TRY(st_cuda_upload(cu, scr, ids, (size_t)nb * 4));
        __half *g0 = gu + (size_t)e0 * (size_t)(2 * ff * d), *d0 = dn + (size_t)e0 * (size_t)(d * ff);
        ST_TRY(mp_dequant(cu, w->type_gate, w->gate, ff, d, (const int32_t *)scr, nb, g0, 2 * ff * d));
        ST_TRY(mp_dequant(cu, w->type_up, w->up, ff, d, (const int32_t *)scr, nb, g0 + ff * d, 2 * ff * d));
        ST_TRY(mp_dequant(cu, w->type_down, w->down, d, ff, (const int32_t *)scr, nb, d0, d * ff));
        ST_TRY(st_cuda_sync(cu));
    }
    return ST_OK;
}
