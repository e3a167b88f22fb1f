/* ops.cu: every op of backend.h except the weight products (matmul.cu), on the GPU: norms, NeoX
 * RoPE, the KV store and attention over the cache, the Gated DeltaNet gates and recurrence, the
 * causal conv1d with state, pointwise gates, softmax, MoE routing and argmax.
 *
 * Numerics follow the CPU references in backend/cpu/ (MODELS.md §2): double sums where they sum
 * in double, the same order of operations where rounding is visible (RoPE's angle recurrence,
 * conv taps with separate multiply and add), and host-computed constants (powf, logf) so the GPU's
 * math library does not shift every angle by an ulp. */
#include <cuda_fp16.h>
#include <math.h>
#include <string.h>
#include "backend/cuda/cuda_internal.cuh"

#define OPS_THREADS 256

/* ---- Norms: one block per row ----------------------------------------------------------------- */

/* y = (x * s) * w with s = 1/sqrtf(mean(x^2) + eps), sum in double; l2: eps/n then 1/sqrt(n).
 * Row b is head b % per of token b / per: x + (b / per) * ld_tok + (b % per) * ld_x (per = rows and
 * ld_tok = 0 give plain rows ld_x apart); y likewise with ld_y, in place when y == x. */
__global__ void rms_norm_kernel(const float *x, int64_t ld_x, const float *w, float *y, int64_t ld_y,
                                int64_t dim, float eps, int l2, int64_t per, int64_t ld_tok) {
    cu_pdl();
    const int64_t b = blockIdx.x, t = b / per, h = b % per;
    const float *xr = x + t * ld_tok + h * ld_x;
    float *yr = y + t * ld_tok + h * ld_y;
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += (double)(xr[i] * xr[i]);
    sum = block_sum_d(sum);
    const float e = l2 ? eps / (float)dim : eps;
    const float mean = (float)sum / (float)dim;
    const float s = 1.0f / sqrtf(mean + e);
    const float s2 = 1.0f / sqrtf((float)dim);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = xr[i] * s;
        if (w) v = v * w[i];
        if (l2) v = v * s2;
        yr[i] = v;
    }
}

extern "C" st_status st_cuda_rms_norm(st_cuda *cu, const float *x, int64_t ld_x, const float *w, float *y,
                                      int64_t ld_y, int64_t rows, int64_t dim, float eps) {
    if (rows <= 0) return ST_OK;
    cu_launch(rms_norm_kernel, (unsigned)rows, OPS_THREADS, 0, cu->stream, x, ld_x, w, y, ld_y, dim, eps, 0, rows, 0);
    return cu_launched("rms_norm");
}

extern "C" st_status st_cuda_l2_norm(st_cuda *cu, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                                     int64_t rows, int64_t dim, float eps) {
    if (rows <= 0) return ST_OK;
    cu_launch(rms_norm_kernel, (unsigned)rows, OPS_THREADS, 0, cu->stream, x, ld_x, NULL, y, ld_y, dim, eps, 1, rows, 0);
    return cu_launched("l2_norm");
}

extern "C" st_status st_cuda_l2_norm_heads(st_cuda *cu, float *x, int64_t ld_tok, int64_t n_tok, int64_t n_head,
                                           int64_t dim, float eps) {
    if (n_tok * n_head <= 0) return ST_OK;
    const int threads = dim <= 128 ? 128 : OPS_THREADS;
    cu_launch(rms_norm_kernel, (unsigned)(n_tok * n_head), threads, 0, cu->stream, x, dim, NULL, x, dim, dim, eps, 1, n_head, ld_tok);
    return cu_launched("l2_norm_heads");
}

/* The value of element i: RMSNorm's (x * s) * w, times silu(z). */
__device__ __forceinline__ float norm_mul_silu_at(const float *xr, float s, const float *w, const float *zr, int64_t i) {
    const float v = (xr[i] * s) * w[i];
    const float g = zr[i];
    return v * (g / (1.0f + expf(-g)));
}

/* xq (optional): y's 8-bit form as well, rows contiguous, so row r's blocks are the flat blocks of
 * the [rows][dim] matrix (dim % 32 == 0). A warp's 32 lanes take one whole block per step of the
 * loop (the block size is a multiple of 32), so the value quantized is the value stored. */
__global__ void rms_norm_mul_silu_kernel(const float *x, const float *w, const float *z, float *y, int64_t dim,
                                         float eps, int8_t *xq, float *xd, float *xs) {
    cu_pdl();
    const int64_t row = blockIdx.x;
    const float *xr = x + row * dim;
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += (double)(xr[i] * xr[i]);
    sum = block_sum_d(sum);   /* its barriers also order the reads of x before the writes of y */
    const float mean = (float)sum / (float)dim;
    const float s = 1.0f / sqrtf(mean + eps);
    const int lane = threadIdx.x & 31;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = norm_mul_silu_at(xr, s, w, z + row * dim, i);
        y[row * dim + i] = v;
        if (xq) {
            const int64_t b = (row * dim + i) / 32;
            q8_put(v, lane, xq + b * 32, xd + b, xs + b);
        }
    }
}

extern "C" st_status st_cuda_rms_norm_mul_silu(st_cuda *cu, const float *x, const float *w, const float *z, float *y,
                                               int64_t rows, int64_t dim, float eps) {
    if (rows <= 0) return ST_OK;
    /* the block size of rms_norm_kernel, so the double sum adds in the same order */
    cu_launch(rms_norm_mul_silu_kernel, (unsigned)rows, OPS_THREADS, 0, cu->stream, x, w, z, y, dim, eps,
              (int8_t *)NULL, (float *)NULL, (float *)NULL);
    return cu_launched("rms_norm_mul_silu");
}

extern "C" st_status st_cuda_rms_norm_mul_silu_q8(st_cuda *cu, const float *x, const float *w, const float *z, float *y,
                                                  st_cuda_q8 q, int64_t rows, int64_t dim, float eps) {
    if (rows <= 0) return ST_OK;
    if (dim % 32 || q.K <= 0 || (rows * dim) % q.K || rows * dim > q.n * q.K)
        return st_fail(ST_ERR_INVALID, "cuda rms_norm_mul_silu_q8: %lld rows of %lld into %lld of %lld", (long long)rows,
                       (long long)dim, (long long)q.n, (long long)q.K);
    cu_launch(rms_norm_mul_silu_kernel, (unsigned)rows, OPS_THREADS, 0, cu->stream, x, w, z, y, dim, eps, q.q, q.d, q.s);
    return cu_launched("rms_norm_mul_silu_q8");
}

/* x += r; y = (x * s) * w; and y's 8-bit form per 32 (as quantize_q8_kernel): one block per row.
 * The loop form, for any width: each pass reads memory again (x after its store, w), so a row of
 * 2048 took ~10 us on the H200, a third of a 35B-A3B decode step (ncu, bench/cuda/NOTES.md). */
__global__ void add_rms_norm_q8_loop_kernel(float *x, const float *r, const float *w, float *y, int8_t *xq, float *xd,
                                       float *xs, int64_t dim, float eps) {
    cu_pdl();
    const int64_t row = blockIdx.x;
    float *xr = x + row * dim;
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = xr[i];
        if (r) {
            v = v + r[row * dim + i];
            xr[i] = v;
        }
        sum += (double)(v * v);
    }
    sum = block_sum_d(sum);   /* its barriers also order the writes of x above */
    const float mean = (float)sum / (float)dim;
    const float s = 1.0f / sqrtf(mean + eps);
    if (y)
        for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) y[row * dim + i] = (xr[i] * s) * w[i];
    if (xq) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
        const int64_t nb = dim / 32;
        for (int64_t b = warp; b < nb; b += n_warps) {
            const float v = (xr[b * 32 + lane] * s) * w[b * 32 + lane];
            const float amax = warp_max(fabsf(v));
            const float d = amax / 127.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            const int q = (int)roundf(v * id);
            xq[row * dim + b * 32 + lane] = (int8_t)q;
            const float qs = warp_sum((float)q);
            if (lane == 0) {
                xd[row * nb + b] = d;
                xs[row * nb + b] = d * qs;
            }
        }
    }
}

/* The same with the row in registers (dim <= NORM_NPT * blockDim): every load is issued before
 * the first store, and the 8-bit blocks are quantized from the registers, since a warp's lanes at
 * step k hold elements 32w + 256k + lane, one whole block. The sum adds in the loop form's order
 * (thread t: elements t, t + 256, ...), so the bits are the loop form's. */
#define NORM_NPT 16
__global__ void add_rms_norm_q8_kernel(float *x, const float *r, const float *w, float *y, int8_t *xq, float *xd,
                                       float *xs, int64_t dim, float eps) {
    cu_pdl();
    const int64_t row = blockIdx.x, T = blockDim.x;
    float *xr = x + row * dim;
    const float *rr = r ? r + row * dim : NULL;
    float v[NORM_NPT], wv[NORM_NPT];
#pragma unroll
    for (int k = 0; k < NORM_NPT; k++) {
        const int64_t i = threadIdx.x + k * T;
        v[k] = wv[k] = 0.0f;
        if (i < dim) {
            v[k] = xr[i];
            wv[k] = w[i];
            if (rr) v[k] = v[k] + rr[i];
        }
    }
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < NORM_NPT; k++) {
        const int64_t i = threadIdx.x + k * T;
        if (i < dim) {
            if (rr) xr[i] = v[k];
            sum += (double)(v[k] * v[k]);
        }
    }
    sum = block_sum_d(sum);
    const float mean = (float)sum / (float)dim;
    const float s = 1.0f / sqrtf(mean + eps);
    const int lane = threadIdx.x & 31;
    const int64_t nb = dim / 32;
#pragma unroll
    for (int k = 0; k < NORM_NPT; k++) {
        const int64_t i = threadIdx.x + k * T;
        if (i < dim) {   /* whole warps when xq is set (dim % 32 == 0) */
            const float yv = (v[k] * s) * wv[k];
            if (y) y[row * dim + i] = yv;
            if (xq) q8_put(yv, lane, xq + row * dim + (i - lane), xd + row * nb + i / 32, xs + row * nb + i / 32);
        }
    }
}

/* The register form spread over G = dim / 256 blocks a row (decode's few rows): every block sums
 * the whole row in the register form's order (so the same bits) and then writes only its slice of
 * 256, the elements of step k = its index, so each warp quantizes one 8-bit block where the one
 * block of the register form went through eight in turn. The row's blocks pass one barrier (bar:
 * arrivals and generation of the row, CU_BAR_ROWS) after their loads and before the slice of x is
 * stored back, so no block reads an x another one has already updated. A row's G <= 16 blocks are
 * resident together (the kernel after this one is launched only once all of them have started). */
__global__ void add_rms_norm_q8_split_kernel(float *x, const float *r, const float *w, float *y, int8_t *xq, float *xd,
                                             float *xs, int64_t dim, float eps, unsigned *bar) {
    cu_pdl();
    const int G = gridDim.x, part = blockIdx.x;
    const int64_t row = blockIdx.y, T = blockDim.x;
    float *xr = x + row * dim;
    const float *rr = r ? r + row * dim : NULL;
    float v[NORM_NPT];
#pragma unroll
    for (int k = 0; k < NORM_NPT; k++) {
        const int64_t i = threadIdx.x + k * T;
        v[k] = 0.0f;
        if (i < dim) {
            v[k] = xr[i];
            if (rr) v[k] = v[k] + rr[i];
        }
    }
    const int64_t i0 = threadIdx.x + part * T;
    const float wv = w[i0];
    unsigned *cnt = bar + 2 * row, *gen = cnt + 1;
    double sum = 0.0;
    float mine = 0.0f;
#pragma unroll
    for (int k = 0; k < NORM_NPT; k++) {
        if (threadIdx.x + k * T < dim) sum += (double)(v[k] * v[k]);
        if (k == part) mine = v[k];
    }
    sum = block_sum_d(sum);   /* every load of this block has returned: it may arrive */
    unsigned g = 0;
    if (rr && threadIdx.x == 0) {
        g = *(volatile unsigned *)gen;
        __threadfence();
        if (atomicAdd(cnt, 1u) == (unsigned)G - 1) {
            *cnt = 0;
            __threadfence();
            atomicAdd(gen, 1u);
        }
    }
    const float mean = (float)sum / (float)dim;
    const float s = 1.0f / sqrtf(mean + eps);
    const int lane = threadIdx.x & 31;
    const int64_t nb = dim / 32;
    const float yv = (mine * s) * wv;
    if (y) y[row * dim + i0] = yv;
    if (xq) q8_put(yv, lane, xq + row * dim + (i0 - lane), xd + row * nb + i0 / 32, xs + row * nb + i0 / 32);
    if (!rr) return;
    if (threadIdx.x == 0)
        while (*(volatile unsigned *)gen == g) { }
    __syncthreads();
    xr[i0] = mine;
}

/* STRATA_CUDA_NORM=reg (A/B): decode rows keep the one-block register form. Read once. */
static int norm_split_off(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("STRATA_CUDA_NORM");
        v = e && !strcmp(e, "reg");
    }
    return v;
}

extern "C" st_status st_cuda_add_rms_norm_q8(st_cuda *cu, float *x, const float *r, const float *w, float *y,
                                             st_cuda_q8 q, int64_t rows, int64_t dim, float eps) {
    if (rows <= 0) return ST_OK;
    if (q.q && (q.K != dim || dim % 32 || q.n < rows))
        return st_fail(ST_ERR_INVALID, "cuda add_rms_norm_q8: %lld rows of %lld into %lld of %lld", (long long)rows,
                       (long long)dim, (long long)q.n, (long long)q.K);
    /* decode rows: the split form (2048: 8.96 -> 4.84 us); more rows the register form (9.9 -> 8.8
     * us against the loop), narrow rows the loop */
    if (dim >= 1024 && dim <= NORM_NPT * OPS_THREADS && dim % OPS_THREADS == 0 && rows <= 8 && !norm_split_off()) {
        unsigned *bar = cu->bar + (cu->forked ? 2 * CU_BAR_ROWS : 0);
        cu_launch(add_rms_norm_q8_split_kernel, dim3((unsigned)(dim / OPS_THREADS), (unsigned)rows), OPS_THREADS, 0,
                  cu->stream, x, r, w, y, q.q, q.d, q.s, dim, eps, bar);
    } else if (dim >= 1024 && dim <= NORM_NPT * OPS_THREADS)
        cu_launch(add_rms_norm_q8_kernel, (unsigned)rows, OPS_THREADS, 0, cu->stream, x, r, w, y, q.q, q.d, q.s, dim, eps);
    else
        cu_launch(add_rms_norm_q8_loop_kernel, (unsigned)rows, OPS_THREADS, 0, cu->stream, x, r, w, y, q.q, q.d, q.s, dim, eps);
    return cu_launched("add_rms_norm_q8");
}

/* ---- RoPE NeoX: one thread per (token, head, pair) --------------------------------------------- */

__global__ void rope_kernel(float *x, int64_t ld_tok, int64_t ld_head, int64_t n_tok, int64_t n_head,
                            const int32_t *pos, cu_rope_k p) {
    cu_pdl();
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_tok * n_head * p.half) return;
    const int64_t i = idx % p.half, h = (idx / p.half) % n_head, t = idx / (p.half * n_head);
    float cs, sn;
    cu_rope_cs(p, (float)pos[t], i, &cs, &sn);
    float *v = x + t * ld_tok + h * ld_head;
    const float x0 = v[i], x1 = v[i + p.half];
    v[i] = x0 * cs - x1 * sn;
    v[i + p.half] = x0 * sn + x1 * cs;
}

cu_rope_k cu_rope_of(const st_rope_params *p) {
    cu_rope_k k;
    k.half = p->n_rot / 2;
    k.ts = powf(p->freq_base, -2.0f / (float)p->n_rot);
    k.freq_scale = p->freq_scale;
    k.ext_factor = p->ext_factor;
    k.mscale = p->attn_factor;
    if (p->ext_factor != 0.0f) k.mscale *= 1.0f + 0.1f * logf(1.0f / p->freq_scale);
    k.corr0 = p->corr_dims[0];
    k.corr1 = p->corr_dims[1];
    return k;
}

extern "C" st_status st_cuda_rope_neox(st_cuda *cu, float *x, int64_t ld_tok, int64_t ld_head, int64_t n_tok,
                                       int64_t n_head, const int32_t *pos, const st_rope_params *p) {
    if (p->n_rot <= 0 || p->n_rot % 2) return st_fail(ST_ERR_INVALID, "cuda rope: n_rot %lld", (long long)p->n_rot);
    const cu_rope_k k = cu_rope_of(p);
    const int64_t n = n_tok * n_head * k.half;
    if (n == 0) return ST_OK;
    cu_launch(rope_kernel, cu_blocks(n, OPS_THREADS), OPS_THREADS, 0, cu->stream, x, ld_tok, ld_head, n_tok, n_head, pos, k);
    return cu_launched("rope_neox");
}

/* ---- KV cache -------------------------------------------------------------------------------- */

__global__ void kv_store_kernel(int f16, void *cache, int64_t row, int64_t cell0, const float *src,
                                int64_t ld_src, int64_t n_tok) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tok * row) return;
    const int64_t t = i / row, e = i % row;
    const float v = src[t * ld_src + e];
    if (f16) ((__half *)cache)[(cell0 + t) * row + e] = __float2half_rn(v);
    else ((float *)cache)[(cell0 + t) * row + e] = v;
}

/* The same with the cells from the device: row t goes to cell pos[t] (a captured decode step). */
__global__ void kv_store_pos_kernel(int f16, void *cache, int64_t row, const int32_t *pos, const float *src,
                                    int64_t ld_src, int64_t n_tok) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tok * row) return;
    const int64_t t = i / row, e = i % row, cell = pos[t];
    const float v = src[t * ld_src + e];
    if (f16) ((__half *)cache)[cell * row + e] = __float2half_rn(v);
    else ((float *)cache)[cell * row + e] = v;
}

extern "C" st_status st_cuda_kv_store_pos(st_cuda *cu, uint32_t type, void *cache, int64_t row, const int32_t *pos,
                                          const float *src, int64_t ld_src, int64_t n_tok) {
    if (type != ST_TYPE_F16 && type != ST_TYPE_F32)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda kv_store: cache type %u", type);
    if (n_tok * row == 0) return ST_OK;
    cu_launch(kv_store_pos_kernel, cu_blocks(n_tok * row, OPS_THREADS), OPS_THREADS, 0, cu->stream, 
        type == ST_TYPE_F16, cache, row, pos, src, ld_src, n_tok);
    return cu_launched("kv_store_pos");
}

extern "C" st_status st_cuda_kv_store(st_cuda *cu, uint32_t type, void *cache, int64_t row, int64_t cell0,
                                      const float *src, int64_t ld_src, int64_t n_tok) {
    if (type != ST_TYPE_F16 && type != ST_TYPE_F32)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda kv_store: cache type %u", type);
    if (n_tok * row == 0) return ST_OK;
    cu_launch(kv_store_kernel, cu_blocks(n_tok * row, OPS_THREADS), OPS_THREADS, 0, cu->stream, 
        type == ST_TYPE_F16, cache, row, cell0, src, ld_src, n_tok);
    return cu_launched("kv_store");
}

/* ---- Attention: flash-decoding --------------------------------------------------------------
 * One warp per (token, head, split of the context). Lane l owns dims l, l+32, ... (hd/32 of them).
 * Each warp runs the online softmax over its cells and writes (max, sum, acc[hd]) to scratch; the
 * combine kernel merges the splits: o = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s. */
#define ATT_MAXD 8   /* 256 / 32 */

template <int F16> __device__ __forceinline__ float kv_ld(const void *base, int64_t off) {
    if (F16) return __half2float(((const __half *)base)[off]);
    return ((const float *)base)[off];
}

template <int F16> __global__ void __launch_bounds__(128)
attn_split_kernel(st_attn_args a, int64_t n_split, int64_t split_len, float *part) {
    cu_pdl();
    const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (w >= a.n_tok * a.n_head * n_split) return;   /* whole warps */
    const int64_t s = w % n_split, h = (w / n_split) % a.n_head, t = w / (n_split * a.n_head);
    const int64_t r = a.n_head / a.n_head_kv, g = h / r, nd = a.head_dim / 32;
    const int64_t row = a.n_head_kv * a.head_dim;
    int64_t n_vis = (int64_t)a.pos[t] + 1;
    if (n_vis > a.n_kv) n_vis = a.n_kv;
    if (n_vis < 0) n_vis = 0;
    const int64_t c0 = s * split_len;
    const int64_t c1 = c0 + split_len < n_vis ? c0 + split_len : n_vis;
    float q[ATT_MAXD], acc[ATT_MAXD];
    const float *qp = a.q + t * a.ldq_tok + h * a.ldq_head;
#pragma unroll
    for (int m = 0; m < ATT_MAXD; m++) { q[m] = m < nd ? qp[lane + 32 * m] : 0.0f; acc[m] = 0.0f; }
    float mx = -INFINITY, l = 0.0f;
    for (int64_t c = c0; c < c1; c++) {
        const int64_t off = c * row + g * a.head_dim + lane;
        float dot = 0.0f;
#pragma unroll
        for (int m = 0; m < ATT_MAXD; m++) if (m < nd) dot += q[m] * kv_ld<F16>(a.k_cache, off + 32 * m);
        const float sc = a.scale * warp_sum(dot);
        const float mn = fmaxf(mx, sc);
        const float c_old = expf(mx - mn), p = expf(sc - mn);
        l = l * c_old + p;
#pragma unroll
        for (int m = 0; m < ATT_MAXD; m++)
            if (m < nd) acc[m] = acc[m] * c_old + p * kv_ld<F16>(a.v_cache, off + 32 * m);
        mx = mn;
    }
    float *o = part + w * (a.head_dim + 2);
#pragma unroll
    for (int m = 0; m < ATT_MAXD; m++) if (m < nd) o[2 + lane + 32 * m] = acc[m];
    if (lane == 0) { o[0] = mx; o[1] = l; }
}

__global__ void attn_combine_kernel(st_attn_args a, int64_t n_split, const float *part) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t hd = a.head_dim;
    if (i >= a.n_tok * a.n_head * hd) return;
    const int64_t d = i % hd, th = i / hd, h = th % a.n_head, t = th / a.n_head;
    const float *p = part + th * n_split * (hd + 2);
    float M = -INFINITY;
    for (int64_t s = 0; s < n_split; s++) M = fmaxf(M, p[s * (hd + 2)]);
    float num = 0.0f, den = 0.0f;
    if (M != -INFINITY)
        for (int64_t s = 0; s < n_split; s++) {
            const float *ps = p + s * (hd + 2);
            if (ps[1] == 0.0f) continue;
            const float f = expf(ps[0] - M);
            num += f * ps[2 + d];
            den += f * ps[1];
        }
    a.out[t * a.ldo_tok + h * hd + d] = den > 0.0f ? num / den : 0.0f;
}

extern "C" st_status st_cuda_attention(st_cuda *cu, const st_attn_args *a) {
    if (a->head_dim % 32 || a->head_dim > 256 || a->head_dim <= 0)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda attention: head_dim %lld (a multiple of 32 up to 256)",
                       (long long)a->head_dim);
    if (a->n_head_kv <= 0 || a->n_head % a->n_head_kv)
        return st_fail(ST_ERR_INVALID, "cuda attention: %lld heads over %lld kv heads", (long long)a->n_head,
                       (long long)a->n_head_kv);
    if (a->kv_type != ST_TYPE_F16 && a->kv_type != ST_TYPE_F32)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda attention: cache type %u", a->kv_type);
    const int64_t rows = a->n_tok * a->n_head;
    if (rows == 0) return ST_OK;
    /* enough warps to fill the GPU (~8 per SM) */
    const int64_t want = (int64_t)cu->n_sm * 8;
    int64_t n_split = (want + rows - 1) / rows;
    /* at least 8 cells a split: each warp's walk over its cells is a chain of dependent steps
     * (dot, warp sum, rescale), so decode wants many short walks */
    const int64_t max_split = (a->n_kv + 7) / 8;
    if (n_split > max_split) n_split = max_split;
    if (n_split < 1) n_split = 1;
    const int64_t split_len = (a->n_kv + n_split - 1) / n_split;
    void *scr;
    ST_TRY(cu_scratch(cu, (size_t)(rows * n_split) * (size_t)(a->head_dim + 2) * sizeof(float), &scr));
    float *part = (float *)scr;
    const unsigned blocks = cu_blocks(rows * n_split * 32, 128);
    if (a->kv_type == ST_TYPE_F16) cu_launch(attn_split_kernel<1>, blocks, 128, 0, cu->stream, *a, n_split, split_len, part);
    else cu_launch(attn_split_kernel<0>, blocks, 128, 0, cu->stream, *a, n_split, split_len, part);
    ST_TRY(cu_launched("attention"));
    cu_launch(attn_combine_kernel, cu_blocks(rows * a->head_dim, OPS_THREADS), OPS_THREADS, 0, cu->stream, *a, n_split, part);
    return cu_launched("attention combine");
}

/* ---- Gated DeltaNet ---------------------------------------------------------------------------- */

__global__ void gdn_gates_kernel(const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                                 const float *dt_bias, const float *ssm_a, int64_t n_tok, int64_t n_v,
                                 float *g_out, float *beta_out) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tok * n_v) return;
    const int64_t t = i / n_v, h = i % n_v;
    beta_out[i] = 1.0f / (1.0f + expf(-b[t * ld_b + h]));
    const float z = a[t * ld_a + h] + dt_bias[h];
    g_out[i] = (z > 20.0f ? z : logf(1.0f + expf(z))) * ssm_a[h];
}

extern "C" st_status st_cuda_gdn_gates(st_cuda *cu, const float *a, int64_t ld_a, const float *b,
                                       int64_t ld_b, const float *dt_bias, const float *ssm_a, int64_t n_tok,
                                       int64_t n_v, float *g_out, float *beta_out) {
    if (n_tok * n_v == 0) return ST_OK;
    cu_launch(gdn_gates_kernel, cu_blocks(n_tok * n_v, OPS_THREADS), OPS_THREADS, 0, cu->stream, 
        a, ld_a, b, ld_b, dt_bias, ssm_a, n_tok, n_v, g_out, beta_out);
    return cu_launched("gdn_gates");
}

/* One warp per state row (v-head h, value index j); lane owns key indices lane + 32m. The row
 * stays in registers for all tokens, so a prompt reads and writes the state once. */
#define GDN_MAXD 8

__global__ void __launch_bounds__(128) gdn_step_kernel(st_gdn_args a) {
    cu_pdl();
    const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    const int64_t d = a.d, nd = d / 32;
    if (w >= a.n_v * d) return;   /* whole warps */
    const int64_t h = w / d, j = w % d;
    const int64_t kh = a.head_map == ST_GDN_GROUPED ? h / (a.n_v / a.n_k) : h % a.n_k;
    float *S = a.state + h * d * d + j * d;
    float s[GDN_MAXD];
#pragma unroll
    for (int m = 0; m < GDN_MAXD; m++) s[m] = m < nd ? S[lane + 32 * m] : 0.0f;
    for (int64_t t = 0; t < a.n_tok; t++) {
        const float *q = a.q + t * a.ld_q + kh * d, *k = a.k + t * a.ld_k + kh * d;
        const float eg = expf(a.g[t * a.n_v + h]), beta = a.beta[t * a.n_v + h];
        float kr[GDN_MAXD];
        float kv = 0.0f;
#pragma unroll
        for (int m = 0; m < GDN_MAXD; m++)
            if (m < nd) { s[m] *= eg; kr[m] = k[lane + 32 * m]; kv += s[m] * kr[m]; }
        kv = warp_sum(kv);
        const float delta = (a.v[t * a.ld_v + h * d + j] - kv) * beta;
        float qs = 0.0f;
#pragma unroll
        for (int m = 0; m < GDN_MAXD; m++)
            if (m < nd) { s[m] += kr[m] * delta; qs += s[m] * q[lane + 32 * m]; }
        qs = warp_sum(qs);
        if (lane == 0) a.out[t * a.ld_out + h * d + j] = qs * a.scale;
        if (a.state_steps) {
            float *P = a.state_steps[t] + h * d * d + j * d;
#pragma unroll
            for (int m = 0; m < GDN_MAXD; m++) if (m < nd) P[lane + 32 * m] = s[m];
        }
    }
    if (a.state_steps) return;   /* `state` stays as it was */
#pragma unroll
    for (int m = 0; m < GDN_MAXD; m++) if (m < nd) S[lane + 32 * m] = s[m];
}

extern "C" st_status st_cuda_gdn_step(st_cuda *cu, const st_gdn_args *a) {
    if (a->d % 32 || a->d > 32 * GDN_MAXD || a->d <= 0)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda gdn: head size %lld (a multiple of 32 up to 256)", (long long)a->d);
    if (a->n_k <= 0 || a->n_v % a->n_k)
        return st_fail(ST_ERR_INVALID, "cuda gdn: %lld v-heads over %lld k-heads", (long long)a->n_v, (long long)a->n_k);
    if (a->n_v == 0) return ST_OK;
    cu_launch(gdn_step_kernel, cu_blocks(a->n_v * a->d * 32, 128), 128, 0, cu->stream, *a);
    return cu_launched("gdn_step");
}

/* ---- Conv1d with state: one thread per channel, tokens in order ------------------------------- */

#define CONV_MAX_K 16

__global__ void conv1d_kernel(const float *m, int64_t ld_m, const float *w, float *state, float *out,
                              int64_t ld_out, int64_t n_tok, int64_t C, int K, int apply_silu) {
    cu_pdl();
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int K1 = K - 1;
    float win[CONV_MAX_K], wt[CONV_MAX_K];
    for (int i = 0; i < K; i++) wt[i] = w[c * K + i];
    for (int i = 0; i < K1; i++) win[i] = state[c * K1 + i];
    for (int64_t t = 0; t < n_tok; t++) {
        win[K1] = m[t * ld_m + c];
        float o = 0.0f;
        for (int i = 0; i < K; i++) o = __fadd_rn(o, __fmul_rn(win[i], wt[i]));   /* as ggml: no FMA */
        if (apply_silu) o = o / (1.0f + expf(-o));
        out[t * ld_out + c] = o;
        for (int i = 0; i < K1; i++) win[i] = win[i + 1];
    }
    for (int i = 0; i < K1; i++) state[c * K1 + i] = win[i];
}

/* One decode token: conv1d_kernel's step with SiLU, then the first n_norm heads of dim = blockDim.x
 * channels L2-normalised as l2_norm_heads does them (rms_norm_kernel with l2, one element per
 * thread, the same double sum): the GDN's q and k heads. One block per head of channels. */
__global__ void conv1d_silu_l2_kernel(const float *m, const float *w, float *state, float *out, int K, int64_t n_norm,
                                      float eps) {
    cu_pdl();
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int K1 = K - 1;
    float win[CONV_MAX_K], wt[CONV_MAX_K];
    for (int i = 0; i < K; i++) wt[i] = w[c * K + i];
    for (int i = 0; i < K1; i++) win[i] = state[c * K1 + i];
    win[K1] = m[c];
    float o = 0.0f;
    for (int i = 0; i < K; i++) o = __fadd_rn(o, __fmul_rn(win[i], wt[i]));   /* as conv1d_kernel */
    o = o / (1.0f + expf(-o));
    for (int i = 0; i < K1; i++) state[c * K1 + i] = win[i + 1];
    if ((int64_t)blockIdx.x < n_norm) {   /* the same for the whole block */
        const double sum = block_sum_d((double)(o * o));
        const float dim = (float)(int64_t)blockDim.x;
        const float mean = (float)sum / dim;
        const float s = 1.0f / sqrtf(mean + eps / dim);
        o = o * s;
        o = o * (1.0f / sqrtf(dim));
    }
    out[c] = o;
}

extern "C" st_status st_cuda_conv1d_silu_l2(st_cuda *cu, const float *m, const float *w, float *state, float *out,
                                            int64_t C, int64_t K, int64_t n_norm, int64_t dim, float eps) {
    if (K < 1 || K > CONV_MAX_K) return st_fail(ST_ERR_UNSUPPORTED, "cuda conv1d: kernel size %lld", (long long)K);
    if (dim < 32 || dim > 256 || dim % 32 || C % dim || n_norm * dim > C)
        return st_fail(ST_ERR_INVALID, "cuda conv1d_silu_l2: %lld channels in heads of %lld, %lld normed", (long long)C,
                       (long long)dim, (long long)n_norm);
    if (C == 0) return ST_OK;
    cu_launch(conv1d_silu_l2_kernel, (unsigned)(C / dim), (unsigned)dim, 0, cu->stream, m, w, state, out, (int)K, n_norm, eps);
    return cu_launched("conv1d_silu_l2");
}

/* A prompt chunk: one thread per (token, channel) over the sequence s = state ++ m, the taps summed
 * in conv1d_kernel's order; the state is moved on afterwards by conv1d_state_kernel (the chunk's
 * outputs read the old state, so it cannot change in the same pass). A thread walking 4096 tokens
 * of one channel took ~4 ms per layer on the H200 (bench/cuda/NOTES.md). */
__device__ __forceinline__ float conv_seq(const float *m, int64_t ld_m, const float *state, int64_t c, int K1,
                                          int64_t q) {
    return q < K1 ? state[c * K1 + q] : m[(q - K1) * ld_m + c];
}

__global__ void conv1d_tokens_kernel(const float *m, int64_t ld_m, const float *w, const float *state, float *out,
                                     int64_t ld_out, int64_t n_tok, int64_t C, int K, int apply_silu) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tok * C) return;
    const int64_t t = i / C, c = i % C;
    const int K1 = K - 1;
    float o = 0.0f;
    for (int k = 0; k < K; k++) o = __fadd_rn(o, __fmul_rn(conv_seq(m, ld_m, state, c, K1, t + k), w[c * K + k]));
    if (apply_silu) o = o / (1.0f + expf(-o));
    out[t * ld_out + c] = o;
}

__global__ void conv1d_state_kernel(const float *m, int64_t ld_m, float *state, int64_t n_tok, int64_t C, int K) {
    cu_pdl();
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int K1 = K - 1;
    float next[CONV_MAX_K];
    for (int k = 0; k < K1; k++) next[k] = conv_seq(m, ld_m, state, c, K1, n_tok + k);
    for (int k = 0; k < K1; k++) state[c * K1 + k] = next[k];
}

/* The state after each token t of a chunk: the K-1 values of s = state ++ m ending at token t. */
__global__ void conv1d_steps_kernel(const float *m, int64_t ld_m, const float *state, float *steps, int64_t ld_steps,
                                    int64_t n_tok, int64_t C, int K) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tok * C) return;
    const int64_t t = i / C, c = i % C;
    const int K1 = K - 1;
    for (int k = 0; k < K1; k++) steps[t * ld_steps + c * K1 + k] = conv_seq(m, ld_m, state, c, K1, t + 1 + k);
}

extern "C" st_status st_cuda_conv1d_steps(st_cuda *cu, const float *m, int64_t ld_m, const float *state, float *steps,
                                          int64_t ld_steps, int64_t n_tok, int64_t C, int64_t K) {
    if (K < 1 || K > CONV_MAX_K) return st_fail(ST_ERR_UNSUPPORTED, "cuda conv1d: kernel size %lld", (long long)K);
    if (C == 0 || n_tok == 0 || K == 1) return ST_OK;
    cu_launch(conv1d_steps_kernel, cu_blocks(n_tok * C, OPS_THREADS), OPS_THREADS, 0, cu->stream, m, ld_m, state, steps, ld_steps,
                                                                                         n_tok, C, (int)K);
    return cu_launched("conv1d steps");
}

extern "C" st_status st_cuda_conv1d(st_cuda *cu, const float *m, int64_t ld_m, const float *w, float *state,
                                    float *out, int64_t ld_out, int64_t n_tok, int64_t C, int64_t K,
                                    int apply_silu) {
    if (K < 1 || K > CONV_MAX_K) return st_fail(ST_ERR_UNSUPPORTED, "cuda conv1d: kernel size %lld", (long long)K);
    if (C == 0) return ST_OK;
    if (n_tok > 1) {
        cu_launch(conv1d_tokens_kernel, cu_blocks(n_tok * C, OPS_THREADS), OPS_THREADS, 0, cu->stream, 
            m, ld_m, w, state, out, ld_out, n_tok, C, (int)K, apply_silu);
        ST_TRY(cu_launched("conv1d"));
        cu_launch(conv1d_state_kernel, cu_blocks(C, OPS_THREADS), OPS_THREADS, 0, cu->stream, m, ld_m, state, n_tok, C, (int)K);
        return cu_launched("conv1d state");
    }
    cu_launch(conv1d_kernel, cu_blocks(C, OPS_THREADS), OPS_THREADS, 0, cu->stream, m, ld_m, w, state, out, ld_out,
                                                                               n_tok, C, (int)K, apply_silu);
    return cu_launched("conv1d");
}

/* ---- Pointwise ------------------------------------------------------------------------------- */

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void pointwise_kernel(int op, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                                 float *y, int64_t ld_y, int64_t rows, int64_t n) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * n) return;
    const int64_t r = i / n, e = i % n;
    const float x = a[r * ld_a + e];
    const float z = b ? b[r * ld_b + e] : 0.0f;
    float v;
    switch (op) {
    case ST_CUDA_SILU:        v = silu_f(x); break;
    case ST_CUDA_SIGMOID:     v = sigmoid_f(x); break;
    case ST_CUDA_SOFTPLUS:    v = x > 20.0f ? x : logf(1.0f + expf(x)); break;
    case ST_CUDA_SWIGLU:      v = silu_f(x) * z; break;
    case ST_CUDA_MUL_SIGMOID: v = x * sigmoid_f(z); break;
    case ST_CUDA_MUL_SILU:    v = x * silu_f(z); break;
    case ST_CUDA_MUL:         v = x * z; break;
    default:                  v = x + z; break;
    }
    y[r * ld_y + e] = v;
}

extern "C" st_status st_cuda_pointwise(st_cuda *cu, int op, const float *a, int64_t ld_a, const float *b,
                                       int64_t ld_b, float *y, int64_t ld_y, int64_t rows, int64_t n) {
    if (op < ST_CUDA_SILU || op > ST_CUDA_ADD) return st_fail(ST_ERR_INVALID, "cuda pointwise: op %d", op);
    if (op >= ST_CUDA_SWIGLU && !b) return st_fail(ST_ERR_INVALID, "cuda pointwise: op %d needs b", op);
    if (rows * n == 0) return ST_OK;
    cu_launch(pointwise_kernel, cu_blocks(rows * n, OPS_THREADS), OPS_THREADS, 0, cu->stream, 
        op, a, ld_a, op >= ST_CUDA_SWIGLU ? b : NULL, ld_b, y, ld_y, rows, n);
    return cu_launched("pointwise");
}

/* y = a * sigmoid(b) over rows of n (n % 32 == 0, y dense: ld_y == n) and y's 8-bit form over the
 * flat [rows][n] matrix: one thread per element, so a warp holds one whole block. */
__global__ void mul_sigmoid_q8_kernel(const float *a, int64_t ld_a, const float *b, int64_t ld_b, float *y,
                                      int64_t rows, int64_t n, int8_t *xq, float *xd, float *xs) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * n) return;   /* whole warps: rows * n % 32 == 0 */
    const int64_t r = i / n, e = i % n;
    const float v = a[r * ld_a + e] * sigmoid_f(b[r * ld_b + e]);
    y[i] = v;
    q8_put(v, threadIdx.x & 31, xq + (i & ~(int64_t)31), xd + i / 32, xs + i / 32);
}

extern "C" st_status st_cuda_mul_sigmoid_q8(st_cuda *cu, const float *a, int64_t ld_a, const float *b, int64_t ld_b,
                                            float *y, int64_t rows, int64_t n, st_cuda_q8 q) {
    if (rows * n == 0) return ST_OK;
    if (n % 32 || q.K <= 0 || (rows * n) % q.K || rows * n > q.n * q.K)
        return st_fail(ST_ERR_INVALID, "cuda mul_sigmoid_q8: %lld rows of %lld into %lld of %lld", (long long)rows,
                       (long long)n, (long long)q.n, (long long)q.K);
    cu_launch(mul_sigmoid_q8_kernel, cu_blocks(rows * n, OPS_THREADS), OPS_THREADS, 0, cu->stream, a, ld_a, b, ld_b, y,
              rows, n, q.q, q.d, q.s);
    return cu_launched("mul_sigmoid_q8");
}

__global__ void axpy_kernel(float *y, int64_t n, const float *x, float s, int accumulate) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = accumulate ? y[i] + s * x[i] : s * x[i];
}

extern "C" st_status st_cuda_axpy(st_cuda *cu, float *y, int64_t n, const float *x, float s, int accumulate) {
    if (n == 0) return ST_OK;
    cu_launch(axpy_kernel, cu_blocks(n, OPS_THREADS), OPS_THREADS, 0, cu->stream, y, n, x, s, accumulate);
    return cu_launched("axpy");
}

/* ---- Softmax and MoE routing: one warp per row ------------------------------------------------ */

#define ROUTE_MAX_E 1024
#define ROUTE_WARPS 4

/* p[0..n) = softmax(x), the sum in double (ggml_vec_soft_max_f32) */
__device__ void warp_softmax(const float *x, float *p, int64_t n) {
    const int lane = threadIdx.x & 31;
    float mx = -INFINITY;
    for (int64_t i = lane; i < n; i += 32) mx = fmaxf(mx, x[i]);
    mx = warp_max(mx);
    double sum = 0.0;
    for (int64_t i = lane; i < n; i += 32) { const float e = expf(x[i] - mx); p[i] = e; sum += (double)e; }
    sum = warp_sum_d(sum);
    const float inv = (float)(1.0 / sum);
    for (int64_t i = lane; i < n; i += 32) p[i] *= inv;
}

__global__ void softmax_kernel(const float *x, int64_t ld_x, float *y, int64_t ld_y, int64_t rows, int64_t n) {
    cu_pdl();
    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (r >= rows) return;
    warp_softmax(x + r * ld_x, y + r * ld_y, n);
}

extern "C" st_status st_cuda_softmax(st_cuda *cu, const float *x, int64_t ld_x, float *y, int64_t ld_y,
                                     int64_t rows, int64_t n) {
    if (rows == 0) return ST_OK;
    cu_launch(softmax_kernel, cu_blocks(rows * 32, 128), 128, 0, cu->stream, x, ld_x, y, ld_y, rows, n);
    return cu_launched("softmax");
}

__global__ void __launch_bounds__(ROUTE_WARPS * 32)
moe_route_kernel(const float *logits, int64_t ld, int64_t n_tok, int64_t E, int64_t k, int32_t *ids,
                 float *weights) {
    cu_pdl();
    __shared__ float prob[ROUTE_WARPS][ROUTE_MAX_E];
    const int wi = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t t = (int64_t)blockIdx.x * ROUTE_WARPS + wi;
    if (t >= n_tok) return;
    float *p = prob[wi];
    warp_softmax(logits + t * ld, p, E);
    __syncwarp();
    int32_t *id = ids + t * k;
    float *w = weights + t * k;
    double dsum = 0.0;
    for (int64_t j = 0; j < k; j++) {
        /* the largest remaining probability, lowest index on ties; taken ones are marked -1 */
        float bv = -1.0f;
        int bi = 0x7fffffff;
        for (int64_t e = lane; e < E; e += 32)
            if (p[e] > bv) { bv = p[e]; bi = (int)e; }
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
        }
        if (bi == 0x7fffffff) bi = 0;   /* only NaNs left */
        if (lane == 0) { id[j] = bi; w[j] = bv; }
        dsum += (double)bv;
        __syncwarp();
        if (lane == (bi & 31)) p[bi] = -1.0f;
        __syncwarp();
    }
    float sum = (float)dsum;
    if (sum < MOE_WEIGHT_FLOOR) sum = MOE_WEIGHT_FLOOR;
    __syncwarp();
    for (int64_t j = lane; j < k; j += 32) w[j] = w[j] / sum;
}

/* The same rule with the probabilities in registers (route_warp, cuda_internal.cuh), for E <= 256. */
template <int SLOTS>
__global__ void __launch_bounds__(ROUTE_WARPS * 32)
moe_route_reg_kernel(const float *logits, int64_t ld, int64_t n_tok, int64_t E, int64_t k, int32_t *ids,
                     float *weights) {
    cu_pdl();
    const int64_t t = (int64_t)blockIdx.x * ROUTE_WARPS + (threadIdx.x >> 5);
    if (t >= n_tok) return;
    route_warp<SLOTS>(logits + t * ld, E, k, ids + t * k, weights + t * k);
}

/* STRATA_CUDA_ROUTE (A/B, read once): "smem" the shared-memory form at every width and the router
 * product apart (the build before 2026-12-03's routing change), "reg" the register form with the
 * product apart; unset: the register form, fused with the router's product where it fits. */
int cu_route_mode(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("STRATA_CUDA_ROUTE");
        v = e && !strcmp(e, "smem") ? CU_ROUTE_SMEM : e && !strcmp(e, "reg") ? CU_ROUTE_REG : CU_ROUTE_FUSED;
    }
    return v;
}

extern "C" st_status st_cuda_moe_route(st_cuda *cu, const float *logits, int64_t ld_logits, int64_t n_tok,
                                       int64_t E, int64_t k, int32_t *ids, float *weights) {
    if (E > ROUTE_MAX_E || k > E || k <= 0)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda moe_route: %lld of %lld experts", (long long)k, (long long)E);
    if (n_tok == 0) return ST_OK;
    if (E <= 256 && cu_route_mode() != CU_ROUTE_SMEM) {
        cu_launch(E <= 128 ? moe_route_reg_kernel<4> : moe_route_reg_kernel<8>, cu_blocks(n_tok, ROUTE_WARPS),
                  ROUTE_WARPS * 32, 0, cu->stream, logits, ld_logits, n_tok, E, k, ids, weights);
        return cu_launched("moe_route");
    }
    cu_launch(moe_route_kernel, cu_blocks(n_tok, ROUTE_WARPS), ROUTE_WARPS * 32, 0, cu->stream, 
        logits, ld_logits, n_tok, E, k, ids, weights);
    return cu_launched("moe_route");
}

/* ---- Argmax: one block of 1024 threads; NaN never wins, lowest index on ties ------------------ */

__global__ void __launch_bounds__(1024) argmax_kernel(const float *x, int64_t n, int32_t *out) {
    cu_pdl();
    __shared__ float sv[32];
    __shared__ int si[32];
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = x[i];
        if (!isnan(v) && (bi == 0x7fffffff || v > bv)) { bv = v; bi = (int)i; }
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int pass = 0; pass < 2; pass++) {
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            const int take = oi != 0x7fffffff && (bi == 0x7fffffff || ov > bv || (ov == bv && oi < bi));
            if (take) { bv = ov; bi = oi; }
        }
        if (pass == 1) break;
        if (lane == 0) { sv[w] = bv; si[w] = bi; }
        __syncthreads();
        if (w != 0) return;
        bv = lane < (int)(blockDim.x >> 5) ? sv[lane] : -INFINITY;
        bi = lane < (int)(blockDim.x >> 5) ? si[lane] : 0x7fffffff;
    }
    if (threadIdx.x == 0) *out = bi == 0x7fffffff ? 0 : bi;
}

extern "C" st_status st_cuda_argmax(st_cuda *cu, const float *x, int64_t n, int32_t *out) {
    cu_launch(argmax_kernel, 1, 1024, 0, cu->stream, x, n, out);
    return cu_launched("argmax");
}

/* ---- Read-bandwidth probe -------------------------------------------------------------------- */

__global__ void read_probe_kernel(const int4 *p, int64_t n, int *sink) {
    cu_pdl();
    int acc = 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) *sink = acc;   /* practically never: keeps the loads */
}

extern "C" st_status st_cuda_read_bandwidth(st_cuda *cu, size_t bytes, double *gbs) {
    *gbs = 0.0;
    void *buf = NULL;
    ST_TRY(st_cuda_alloc(cu, bytes + 256, &buf));
    st_status s = st_cuda_memset0(cu, buf, bytes + 256);
    const int64_t n = (int64_t)(bytes / sizeof(int4));
    float best = 0.0f;
    for (int r = 0; r < 5 && s == ST_OK; r++) {
        float ms = 0.0f;
        s = st_cuda_timer_start(cu);
        if (s == ST_OK) {
            cu_launch(read_probe_kernel, (unsigned)cu->n_sm * 8, 512, 0, cu->stream, (const int4 *)buf, n, (int *)((char *)buf + bytes));
            s = cu_launched("read probe");
        }
        if (s == ST_OK) s = st_cuda_timer_stop(cu, &ms);
        if (s == ST_OK && ms > 0.0f && (best == 0.0f || ms < best)) best = ms;
    }
    st_cuda_free(cu, buf);
    if (s == ST_OK && best > 0.0f) *gbs = (double)bytes / (best * 1e-3) / 1e9;
    return s;
}

extern "C" st_status st_cuda_host_bandwidth(st_cuda *cu, size_t bytes, double *mapped_gbs, double *copy_gbs) {
    *mapped_gbs = *copy_gbs = 0.0;
    void *host = NULL, *mapped = NULL, *dev = NULL;
    ST_TRY(st_cuda_host_alloc_mapped(bytes + 256, 1, &host, &mapped));
    memset(host, 0, bytes + 256);
    st_status s = st_cuda_alloc(cu, bytes + 256, &dev);
    const int64_t n = (int64_t)(bytes / sizeof(int4));
    float best_mapped = 0.0f, best_copy = 0.0f;
    for (int r = 0; r < 5 && s == ST_OK; r++) {
        float ms = 0.0f;
        s = st_cuda_timer_start(cu);
        if (s == ST_OK) {
            cu_launch(read_probe_kernel, (unsigned)cu->n_sm * 8, 512, 0, cu->stream, (const int4 *)mapped, n, (int *)((char *)dev + bytes));
            s = cu_launched("host read probe");
        }
        if (s == ST_OK) s = st_cuda_timer_stop(cu, &ms);
        if (s == ST_OK && ms > 0.0f && (best_mapped == 0.0f || ms < best_mapped)) best_mapped = ms;
        if (s == ST_OK) s = st_cuda_timer_start(cu);
        if (s == ST_OK) s = st_cuda_upload_async(cu, dev, host, bytes);
        if (s == ST_OK) s = st_cuda_timer_stop(cu, &ms);
        if (s == ST_OK && ms > 0.0f && (best_copy == 0.0f || ms < best_copy)) best_copy = ms;
    }
    st_cuda_free(cu, dev);
    st_cuda_host_free(host);
    if (s == ST_OK && best_mapped > 0.0f) *mapped_gbs = (double)bytes / (best_mapped * 1e-3) / 1e9;
    if (s == ST_OK && best_copy > 0.0f) *copy_gbs = (double)bytes / (best_copy * 1e-3) / 1e9;
    return s;
}
