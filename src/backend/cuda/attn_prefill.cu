/* attn_prefill.cu: attention for prompt chunks on tensor cores (st_cuda_attention_prefill).
 *
 * The flash-decoding kernel in ops.cu runs one warp per (row, head) on CUDA cores; a prompt of
 * thousands of rows is a pair of GEMMs per kv head instead. For a block of T tokens and kv head g
 * (the r = n_head/n_head_kv query heads of g stacked as rows t*r + qi):
 *   Qh[g]  = f16(q)                            [T*r][hd]
 *   S[g]   = scale * Qh[g] K_g^T               [T*r][n_kv]   f32   (cuBLAS strided batched over g)
 *   P[g]   = exp(S - rowmax) over visible cells, 0 elsewhere, f16; l = sum of the rounded P
 *   O[g]   = P[g] V_g                          [T*r][hd]     f32   (cuBLAS strided batched over g)
 *   out    = O / l, permuted to [t][h][hd] with the caller's strides.
 * K_g and V_g are read in place from an f16 cache (column g*hd of rows n_head_kv*hd apart); an f32
 * cache is first converted to an f16 copy. The causal mask is per row from pos[t], as on the CPU,
 * so chunks after a prefix (pos0 > 0) and any positions work. The blocks of T tokens keep S and P
 * under ~1 GiB. Nothing here waits for the device. */
#include <cuda_fp16.h>
#include "backend/cuda/cuda_internal.cuh"

namespace {

const size_t AP_BUDGET = (size_t)1 << 30;
const int AP_THREADS = 256;
const int AP_SM_THREADS = 256;   /* softmax: one block per row */

/* Qh[g][tl*r + qi][i] = f16(q(t0 + tl, g*r + qi, i)) for tl < T */
__global__ void ap_pack_q_kernel(st_attn_args a, int64_t t0, int64_t T, __half *Qh) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t hd = a.head_dim, r = a.n_head / a.n_head_kv, R = T * r;
    if (i >= a.n_head_kv * R * hd) return;
    const int64_t c = i % hd, row = (i / hd) % R, g = i / (hd * R);
    const int64_t tl = row / r, qi = row % r;
    Qh[i] = __float2half_rn(a.q[(t0 + tl) * a.ldq_tok + (g * r + qi) * a.ldq_head + c]);
}

/* f32 cache rows -> f16, same layout: n elements */
__global__ void ap_f32_to_f16_kernel(const float *x, int64_t n, __half *y) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half_rn(x[i]);
}

__device__ __forceinline__ float ap_block_max(float v, float *sh) {
    v = warp_max(v);
    const int w = threadIdx.x / 32, lane = threadIdx.x & 31, nw = blockDim.x / 32;
    __syncthreads();   /* sh may still be read from the previous reduction */
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -INFINITY;
    return warp_max(v);
}
__device__ __forceinline__ float ap_block_sum(float v, float *sh) {
    v = warp_sum(v);
    const int w = threadIdx.x / 32, lane = threadIdx.x & 31, nw = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.0f;
    return warp_sum(v);
}

/* Row z = g*R + tl*r + qi of S (ld ldS): P = f16(exp(S - max)) over the visible cells
 * c < min(pos[t0 + tl] + 1, n_kv), 0 for the rest up to n_kv; L[z] = sum of the rounded P
 * (0 when no cell is visible). */
__global__ void __launch_bounds__(AP_SM_THREADS)
ap_softmax_kernel(const float *S, int64_t ldS, const int32_t *pos, int64_t t0, int64_t r, int64_t R,
                  int64_t n_kv, __half *P, float *L) {
    cu_pdl();
    __shared__ float sh[32];
    const int64_t z = blockIdx.x;
    const int64_t tl = (z % R) / r;
    int64_t n_vis = (int64_t)pos[t0 + tl] + 1;
    if (n_vis > n_kv) n_vis = n_kv;
    if (n_vis < 0) n_vis = 0;
    const float *s = S + z * ldS;
    __half *p = P + z * ldS;
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < n_vis; c += blockDim.x) mx = fmaxf(mx, s[c]);
    mx = ap_block_max(mx, sh);
    float l = 0.0f;
    for (int64_t c = threadIdx.x; c < n_kv; c += blockDim.x) {
        __half h = __float2half_rn(0.0f);
        if (c < n_vis) {
            h = __float2half_rn(expf(s[c] - mx));
            l += __half2float(h);
        }
        p[c] = h;
    }
    l = ap_block_sum(l, sh);
    if (threadIdx.x == 0) L[z] = l;
}

/* out(t0 + tl, h, i) = O[g][tl*r + qi][i] / L, h = g*r + qi */
__global__ void ap_out_kernel(st_attn_args a, int64_t t0, int64_t T, const float *O, const float *L) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t hd = a.head_dim, H = a.n_head, r = H / a.n_head_kv, R = T * r;
    if (i >= T * H * hd) return;
    const int64_t c = i % hd, h = (i / hd) % H, tl = i / (hd * H);
    const int64_t z = (h / r) * R + tl * r + h % r;
    const float l = L[z];
    a.out[(t0 + tl) * a.ldo_tok + h * hd + c] = l > 0.0f ? O[z * hd + c] / l : 0.0f;
}

size_t ap_al(size_t b) { return (b + 255) / 256 * 256; }

st_status ap_blas(cublasStatus_t bs, const char *what, int64_t m, int64_t n, int64_t k) {
    if (bs == CUBLAS_STATUS_SUCCESS) return ST_OK;
    return st_fail(ST_ERR_IO, "cuda attention_prefill: %s %lldx%lldx%lld failed (%d)", what, (long long)m,
                   (long long)n, (long long)k, (int)bs);
}

} /* namespace */

extern int64_t cu_moe_prefill_test_batch;   /* moe_prefill.cu */
static int64_t attn_prefill_test_block = 0;

extern "C" void st_cuda_prefill_test_limits(int64_t moe_experts_per_batch, int64_t attn_tokens_per_block) {
    cu_moe_prefill_test_batch = moe_experts_per_batch > 0 ? moe_experts_per_batch : 0;
    attn_prefill_test_block = attn_tokens_per_block > 0 ? attn_tokens_per_block : 0;
}

extern "C" st_status st_cuda_attention_prefill(st_cuda *cu, const st_attn_args *a) {
    const int64_t hd = a->head_dim, Hkv = a->n_head_kv, H = a->n_head, n_kv = a->n_kv;
    if (a->n_tok < 16 || hd <= 0 || hd % 8 || hd > 256) return st_cuda_attention(cu, a);
    if (Hkv <= 0 || H % Hkv)
        return st_fail(ST_ERR_INVALID, "cuda attention_prefill: %lld heads over %lld kv heads", (long long)H,
                       (long long)Hkv);
    if (a->kv_type != ST_TYPE_F16 && a->kv_type != ST_TYPE_F32)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda attention_prefill: cache type %u", a->kv_type);
    if (n_kv <= 0 || n_kv > INT32_MAX / 2 || Hkv * hd > INT32_MAX / 2) {
        if (n_kv <= 0) return st_cuda_attention(cu, a);   /* nothing visible: zeros */
        return st_fail(ST_ERR_UNSUPPORTED, "cuda attention_prefill: %lld cells", (long long)n_kv);
    }
    const int64_t r = H / Hkv, row = Hkv * hd;
    const int64_t ldS = (n_kv + 7) / 8 * 8;   /* f16 rows of P 16-byte aligned */
    /* per token: S (f32) and P (f16) rows, Qh, O, L for its H query rows */
    const size_t per_tok = (size_t)H * ((size_t)ldS * 6 + (size_t)hd * 6 + 4);
    int64_t T = (int64_t)(AP_BUDGET / per_tok);
    if (T < 1) T = 1;
    if (attn_prefill_test_block > 0 && T > attn_prefill_test_block) T = attn_prefill_test_block;
    if (T > a->n_tok) T = a->n_tok;
    const size_t s_kv = a->kv_type == ST_TYPE_F32 ? ap_al((size_t)(n_kv * row) * 2) : 0;
    const size_t s_q = ap_al((size_t)(T * H * hd) * 2), s_s = ap_al((size_t)(T * H) * (size_t)ldS * 4);
    const size_t s_p = ap_al((size_t)(T * H) * (size_t)ldS * 2), s_o = ap_al((size_t)(T * H * hd) * 4);
    const size_t s_l = ap_al((size_t)(T * H) * 4);
    void *scr;
    ST_TRY(cu_scratch(cu, 2 * s_kv + s_q + s_s + s_p + s_o + s_l, &scr));
    char *p = (char *)scr;
    const __half *Kh = (const __half *)a->k_cache, *Vh = (const __half *)a->v_cache;
    if (a->kv_type == ST_TYPE_F32) {
        __half *kh = (__half *)p, *vh = (__half *)(p + s_kv);
        p += 2 * s_kv;
        cu_launch(ap_f32_to_f16_kernel, cu_blocks(n_kv * row, AP_THREADS), AP_THREADS, 0, cu->stream, 
            (const float *)a->k_cache, n_kv * row, kh);
        cu_launch(ap_f32_to_f16_kernel, cu_blocks(n_kv * row, AP_THREADS), AP_THREADS, 0, cu->stream, 
            (const float *)a->v_cache, n_kv * row, vh);
        ST_TRY(cu_launched("attention_prefill f32->f16"));
        Kh = kh;
        Vh = vh;
    }
    __half *Qh = (__half *)p; p += s_q;
    float *S = (float *)p; p += s_s;
    __half *P = (__half *)p; p += s_p;
    float *O = (float *)p; p += s_o;
    float *L = (float *)p;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t t0 = 0; t0 < a->n_tok; t0 += T) {
        const int64_t Tb = a->n_tok - t0 < T ? a->n_tok - t0 : T, R = Tb * r;
        cu_launch(ap_pack_q_kernel, cu_blocks(Tb * H * hd, AP_THREADS), AP_THREADS, 0, cu->stream, *a, t0, Tb, Qh);
        ST_TRY(cu_launched("attention_prefill pack q"));
        /* S^T (n_kv x R, col-major ld ldS) = K_g (hd x n_kv, ld row)^T * Qh_g (hd x R, ld hd) */
        ST_TRY(ap_blas(cublasGemmStridedBatchedEx(cu->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n_kv, (int)R, (int)hd,
                                                  &a->scale, Kh, CUDA_R_16F, (int)row, (long long)hd,
                                                  Qh, CUDA_R_16F, (int)hd, (long long)(R * hd), &zero,
                                                  S, CUDA_R_32F, (int)ldS, (long long)(R * ldS), (int)Hkv,
                                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "S = Q K^T", n_kv, R, hd));
        cu_launch(ap_softmax_kernel, (unsigned)(Hkv * R), AP_SM_THREADS, 0, cu->stream, S, ldS, a->pos, t0, r, R, n_kv,
                                                                                 P, L);
        ST_TRY(cu_launched("attention_prefill softmax"));
        /* O^T (hd x R, ld hd) = V_g (hd x n_kv, ld row) * P^T (n_kv x R, ld ldS) */
        ST_TRY(ap_blas(cublasGemmStridedBatchedEx(cu->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)hd, (int)R, (int)n_kv,
                                                  &one, Vh, CUDA_R_16F, (int)row, (long long)hd,
                                                  P, CUDA_R_16F, (int)ldS, (long long)(R * ldS), &zero,
                                                  O, CUDA_R_32F, (int)hd, (long long)(R * hd), (int)Hkv,
                                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "O = P V", hd, R, n_kv));
        cu_launch(ap_out_kernel, cu_blocks(Tb * H * hd, AP_THREADS), AP_THREADS, 0, cu->stream, *a, t0, Tb, O, L);
        ST_TRY(cu_launched("attention_prefill out"));
    }
    return ST_OK;
}
