/* ops_qwen4exp.cu: the qwen4exp ops of backend.h on the GPU (MODELS.md §6, ERRATA F1-F6): the
 * hyper-connections' gated mean and combine, the PLE hash and gate, and QSA's block keys, cell
 * selection and attention over the selected cells. The PLE's dilated conv is st_cuda_conv1d (ops.cu) over
 * the widened kernel model/bind.c builds (10 taps for the real file, under its limit of 16).
 *
 * Numerics: the CPU references' order where it is cheap, products and sums kept apart
 * (__fmul_rn/__fadd_rn, so nvcc forms no FMA the CPU does not), host-computed constants (1/hc,
 * 1/sqrt(d), 1/r). hc_pre, hc_post and ple_gate then differ from the CPU only through the GPU's
 * expf (an ulp or two); the PLE hash is exact, and the block keys are the GPU's pool, norm and
 * RoPE kernels' bits. The selection and the attention are described at
 * their kernels. Nothing here synchronizes with the host. */
#include <cuda_fp16.h>
#include <math.h>
#include <string.h>
#include "backend/cuda/cuda_internal.cuh"

#define Q4_THREADS 256
#define PLE_MAX_HEADS 64   /* model.h's ST_PLE_MAX_HEADS */

/* ---- Hyper-connections: one thread per output element ---------------------------------------- */

/* m[t][i] = scale * sum_c xn[t][c*d+i] * sigmoid(g[t][c*d+i]), streams in order from 0.0f. */
__global__ void hc_pre_kernel(const float *xn, int64_t ld_x, const float *g, int64_t ld_g, float *m, int64_t ld_m,
                              int64_t n_tok, int64_t hc, int64_t d, float scale) {
    cu_pdl();
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n_tok * d) return;
    const int64_t t = e / d, i = e % d;
    const float *x = xn + t * ld_x + i, *gt = g + t * ld_g + i;
    float sum = 0.0f;
    for (int64_t c = 0; c < hc; c++) sum = __fadd_rn(sum, __fmul_rn(x[c * d], 1.0f / (1.0f + expf(-gt[c * d]))));
    m[t * ld_m + i] = __fmul_rn(scale, sum);
}

/* R[t][c*d+i] += y[t][i] * w_c, w_c = 2 * sigmoid(inj[t][c] * (1/hc)) (a product, then a sum). */
__global__ void hc_post_kernel(float *R, int64_t ld_r, const float *y, int64_t ld_y, const float *inj, int64_t ld_inj,
                               int64_t n_tok, int64_t hc, int64_t d, float inv_hc) {
    cu_pdl();
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n_tok * hc * d) return;
    const int64_t t = e / (hc * d), c = e % (hc * d) / d, i = e % d;
    const float w = 2.0f * (1.0f / (1.0f + expf(-__fmul_rn(inj[t * ld_inj + c], inv_hc))));
    float *r = R + t * ld_r + c * d + i;
    *r = __fadd_rn(*r, __fmul_rn(y[t * ld_y + i], w));
}

extern "C" st_status st_cuda_hc_pre(st_cuda *cu, const float *xn, int64_t ld_x, const float *g, int64_t ld_g, float *m,
                                    int64_t ld_m, int64_t n_tok, int64_t hc, int64_t d, float scale) {
    if (n_tok * d <= 0) return ST_OK;
    cu_launch(hc_pre_kernel, cu_blocks(n_tok * d, Q4_THREADS), Q4_THREADS, 0, cu->stream, xn, ld_x, g, ld_g, m, ld_m,
              n_tok, hc, d, scale);
    return cu_launched("hc_pre");
}

extern "C" st_status st_cuda_hc_post(st_cuda *cu, float *R, int64_t ld_r, const float *y, int64_t ld_y,
                                     const float *inj, int64_t ld_inj, int64_t n_tok, int64_t hc, int64_t d) {
    if (n_tok * hc * d <= 0) return ST_OK;
    cu_launch(hc_post_kernel, cu_blocks(n_tok * hc * d, Q4_THREADS), Q4_THREADS, 0, cu->stream, R, ld_r, y, ld_y, inj,
              ld_inj, n_tok, hc, d, 1.0f / (float)hc);
    return cu_launched("hc_post");
}

/* ---- PLE gate: one block per (token, stream) --------------------------------------------------- */

/* s = (sum_i k_i q_i in double) * inv; gate = sigmoid(sgn(s) sqrt(max(|s|, 1e-6))); gv = val * gate.
 * Each warp sums its share in double, the warps' sums are added in warp order by every thread. */
__global__ void __launch_bounds__(Q4_THREADS) ple_gate_kernel(const float *k, const float *q, int64_t ld_kq,
                                                              const float *val, int64_t ld_v, float *gv, int64_t ld_gv,
                                                              int64_t hc, int64_t d, float inv) {
    cu_pdl();
    __shared__ double part[Q4_THREADS / 32];
    const int64_t t = blockIdx.x / hc, c = blockIdx.x % hc;
    const float *kr = k + t * ld_kq + c * d, *qr = q + t * ld_kq + c * d;
    double dot = 0.0;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) dot += (double)__fmul_rn(kr[i], qr[i]);
    dot = warp_sum_d(dot);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = dot;
    __syncthreads();
    dot = 0.0;
    for (unsigned w = 0; w < blockDim.x >> 5; w++) dot += part[w];
    const float s = __fmul_rn((float)dot, inv);
    const float a = fabsf(s), mag = sqrtf(a > 1e-6f ? a : 1e-6f);
    const float sgn = s > 0.0f ? 1.0f : s < 0.0f ? -1.0f : 0.0f;
    const float gate = 1.0f / (1.0f + expf(-(sgn * mag)));
    const float *v = val + t * ld_v;
    float *o = gv + t * ld_gv + c * d;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) o[i] = __fmul_rn(v[i], gate);
}

extern "C" st_status st_cuda_ple_gate(st_cuda *cu, const float *k, const float *q, int64_t ld_kq, const float *val,
                                      int64_t ld_v, float *gv, int64_t ld_gv, int64_t n_tok, int64_t hc, int64_t d) {
    if (n_tok * hc <= 0 || d <= 0) return ST_OK;
    cu_launch(ple_gate_kernel, (unsigned)(n_tok * hc), Q4_THREADS, 0, cu->stream, k, q, ld_kq, val, ld_v, gv, ld_gv, hc,
              d, 1.0f / sqrtf((float)d));
    return cu_launched("ple_gate");
}

/* ---- PLE: the n-gram hash, one thread per (token, head) -------------------------------------- */

struct ple_hash_k {
    int64_t ngram, per, n_heads;
    int32_t eos;
    uint64_t mult[ST_PLE_HASH_MAX_NGRAM];
    uint32_t offset[PLE_MAX_HEADS], size[PLE_MAX_HEADS];
};

__global__ void ple_hash_kernel(ple_hash_k h, const int32_t *win, int64_t n, int32_t *rows) {
    cu_pdl();
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n * h.n_heads) return;
    const int64_t t = e / h.n_heads, hd = e % h.n_heads, order = hd / h.per + 2;
    const int32_t *ids = win + t + h.ngram - 1;   /* ids[-s]: the s-th predecessor */
    uint64_t mix = (uint64_t)(int64_t)ids[0] * h.mult[0];
    int cut = 0;
    for (int64_t s = 1; s < order; s++) {
        cut = cut || ids[-s] < 0 || ids[-s] == h.eos;
        mix ^= (uint64_t)(int64_t)(cut ? h.eos : ids[-s]) * h.mult[s];
    }
    rows[e] = (int32_t)(mix % h.size[hd] + h.offset[hd]);
}

extern "C" st_status st_cuda_ple_hash(st_cuda *cu, const st_ple_hash *h, const int32_t *win, int64_t n, int32_t *rows) {
    if (h->ngram < 2 || h->ngram > ST_PLE_HASH_MAX_NGRAM || h->per < 1 || h->n_heads != (h->ngram - 1) * h->per ||
        h->n_heads > PLE_MAX_HEADS)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda ple_hash: n-grams to %lld, %lld heads per order (at most %d and %d heads)",
                       (long long)h->ngram, (long long)h->per, ST_PLE_HASH_MAX_NGRAM, PLE_MAX_HEADS);
    if (n <= 0) return ST_OK;
    ple_hash_k k;
    memset(&k, 0, sizeof k);
    k.ngram = h->ngram;
    k.per = h->per;
    k.n_heads = h->n_heads;
    k.eos = h->eos;
    memcpy(k.mult, h->mult, (size_t)h->ngram * sizeof k.mult[0]);
    memcpy(k.offset, h->offset, (size_t)h->n_heads * sizeof k.offset[0]);
    memcpy(k.size, h->size, (size_t)h->n_heads * sizeof k.size[0]);
    cu_launch(ple_hash_kernel, cu_blocks(n * h->n_heads, Q4_THREADS), Q4_THREADS, 0, cu->stream, k, win, n, rows);
    return cu_launched("ple_hash");
}

/* ---- QSA: the block keys, one block of threads per pooled block ---------------------------------
 * The mean of the block's r raw keys (summed in order from the first, times 1/r from the host),
 * RMSNorm with the norm kernel's sum (the same 256 threads, each over the same elements, in double,
 * the same tree: ops.cu's rms_norm_kernel), NeoX RoPE at position b*r (rope_kernel's angles): the
 * three ops' bits in one launch. With last, the grid is one block that pools the block the
 * position completes, or returns. */
#define QB_THREADS 256   /* ops.cu's OPS_THREADS: the norm's sum tree */
#define QB_MAX_DIM 1024

__global__ void __launch_bounds__(QB_THREADS) qsa_blocks_kernel(int f16, const void *cache, int64_t dim, int64_t r,
                                                                int64_t b0, const int32_t *last, const float *w,
                                                                float eps, float inv, cu_rope_k rk, float *blocks) {
    cu_pdl();
    int64_t b = b0 + blockIdx.x;
    if (last) {
        const int64_t p1 = (int64_t)last[0] + 1;
        if (p1 % r) return;
        b = p1 / r - 1;
    }
    __shared__ float v[QB_MAX_DIM];
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float o = 0.0f;
        for (int64_t j = 0; j < r; j++) {
            const int64_t at = (b * r + j) * dim + i;
            const float k = f16 ? __half2float(((const __half *)cache)[at]) : ((const float *)cache)[at];
            o = j == 0 ? k : __fadd_rn(o, k);
        }
        o = __fmul_rn(o, inv);
        v[i] = o;
        sum += (double)(o * o);
    }
    sum = block_sum_d(sum);
    const float mean = (float)sum / (float)dim;
    const float s = 1.0f / sqrtf(mean + eps);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float x = v[i] * s;
        if (w) x = x * w[i];
        v[i] = x;
    }
    __syncthreads();
    float *out = blocks + b * dim;
    for (int64_t i = threadIdx.x; i < rk.half; i += blockDim.x) {
        float cs, sn;
        cu_rope_cs(rk, (float)(int32_t)(b * r), i, &cs, &sn);
        const float x0 = v[i], x1 = v[i + rk.half];
        out[i] = x0 * cs - x1 * sn;
        out[i + rk.half] = x0 * sn + x1 * cs;
    }
    for (int64_t i = 2 * rk.half + threadIdx.x; i < dim; i += blockDim.x) out[i] = v[i];
}

extern "C" st_status st_cuda_qsa_blocks(st_cuda *cu, uint32_t kv_type, const void *cache, int64_t dim, int64_t r,
                                        int64_t b0, int64_t b1, const int32_t *last, const float *norm_w, float eps,
                                        const st_rope_params *rp, float *blocks) {
    if (kv_type != ST_TYPE_F16 && kv_type != ST_TYPE_F32)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda qsa_blocks: cache type %u", kv_type);
    if (r <= 0 || dim <= 0 || dim > QB_MAX_DIM || rp->n_rot <= 0 || rp->n_rot % 2 || rp->n_rot > dim)
        return st_fail(ST_ERR_INVALID, "cuda qsa_blocks: block size %lld, keys of %lld (at most %d), n_rot %lld",
                       (long long)r, (long long)dim, QB_MAX_DIM, (long long)rp->n_rot);
    const int64_t nb = last ? 1 : b1 - b0;
    if (nb <= 0) return ST_OK;
    if (nb > INT32_MAX) return st_fail(ST_ERR_UNSUPPORTED, "cuda qsa_blocks: %lld blocks", (long long)nb);
    cu_launch(qsa_blocks_kernel, (unsigned)nb, QB_THREADS, 0, cu->stream, kv_type == ST_TYPE_F16 ? 1 : 0, cache, dim,
              r, last ? (int64_t)0 : b0, last, norm_w, eps, 1.0f / (float)r, cu_rope_of(rp), blocks);
    return cu_launched("qsa_blocks");
}

/* ---- QSA: the selection -------------------------------------------------------------------------
 * Two launches. qsa_scores_kernel: sigma[t][b] = sum_h relu(q_{t,h} . K_b) for every block before
 * query t's tail, one warp per block (lanes over dim, per-head partial dots in registers, a warp sum
 * each, the heads' ReLUs added in order from 0.0f), the query in shared memory; the grid spans the
 * blocks (a lone decode query spreads its blocks over the whole GPU) and the queries.
 * qsa_select_kernel: one block per query. Its cell budget W is the tail's n_tail cells (always
 * read: their 1e9 exceeds every score) and M = W - n_tail cells from blocks: the M/r best blocks
 * whole and, when r does not divide M, the first M % r cells of the next best. "Best" is the total
 * order (sigma descending, block index ascending), so blocks of equal score go lower index first.
 * A radix select over the scores' bits (four passes of 8 bits, a shared histogram) finds the score
 * T of the k-th best block, k = ceil(M / r), and how many of the blocks scoring exactly T it takes;
 * one pass in block order (QSA_PER blocks a thread, two block-wide scans a step: rank among the T
 * blocks, then cells before) writes the cells ascending, then the tail.
 * Against the CPU (ERRATA F1): where the scores are distinct and no block is split, the cells are
 * the CPU's exactly; a split block is the same block, but the CPU's heap may take other cells of
 * it; among blocks of equal score the CPU's heap, not the index, decides. In every case the cells'
 * values (their block scores) are the same multiset, so the selection is as good; llama.cpp's own
 * CUDA top-k differs from its CPU there too. The scores' sum order differs from the CPU's, so
 * blocks within rounding of each other at the cut may swap. */
#define QSA_MAX_HEAD 16
#define QSA_WARPS 8
#define QSA_SEL_THREADS 512
#define QSA_PER 8   /* blocks a thread takes per step of the output pass */

__global__ void __launch_bounds__(QSA_WARPS * 32) qsa_scores_kernel(st_qsa_args a, float *sigma, int64_t ld_sigma) {
    cu_pdl();
    extern __shared__ float qs[];
    const int64_t t = blockIdx.y, p = a.pos[t];
    const int64_t nb = p + 1 > a.width ? (p + 1) / a.r : 0;
    if ((int64_t)blockIdx.x * QSA_WARPS >= nb) return;   /* the whole block */
    const int64_t nq = a.n_head * a.dim;
    for (int64_t i = threadIdx.x; i < nq; i += blockDim.x) qs[i] = a.q[t * a.ld_q + i];
    __syncthreads();
    const int lane = threadIdx.x & 31;
    for (int64_t b = (int64_t)blockIdx.x * QSA_WARPS + (threadIdx.x >> 5); b < nb; b += (int64_t)gridDim.x * QSA_WARPS) {
        const float *K = a.blocks + b * a.dim;
        float dot[QSA_MAX_HEAD];
#pragma unroll
        for (int h = 0; h < QSA_MAX_HEAD; h++) dot[h] = 0.0f;
        for (int64_t i = lane; i < a.dim; i += 32) {
            const float kv = K[i];
#pragma unroll
            for (int h = 0; h < QSA_MAX_HEAD; h++)
                if (h < a.n_head) dot[h] += qs[h * a.dim + i] * kv;
        }
        float sum = 0.0f;
#pragma unroll
        for (int h = 0; h < QSA_MAX_HEAD; h++)
            if (h < a.n_head) {
                const float s = warp_sum(dot[h]);
                sum += s > 0.0f ? s : 0.0f;
            }
        if (lane == 0) sigma[t * ld_sigma + b] = sum;
    }
}

/* A float's bits as an unsigned that orders as the float does (-0 below +0; NaNs at the ends). */
__device__ __forceinline__ unsigned qsa_key(float f) {
    const unsigned u = __float_as_uint(f);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* The exclusive prefix sum of v over the block's threads in order; *total = the sum. */
__device__ unsigned long long qsa_block_scan(unsigned long long v, unsigned long long *total) {
    __shared__ unsigned long long warp_incl[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    unsigned long long x = v;
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    __syncthreads();   /* the previous call's readers are done with warp_incl */
    if (lane == 31) warp_incl[w] = x;
    __syncthreads();
    if (w == 0) {
        unsigned long long s = lane < nw ? warp_incl[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned long long y = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += y;
        }
        if (lane < nw) warp_incl[lane] = s;
    }
    __syncthreads();
    *total = warp_incl[nw - 1];
    return (w > 0 ? warp_incl[w - 1] : 0) + x - v;
}

__global__ void __launch_bounds__(QSA_SEL_THREADS) qsa_select_kernel(st_qsa_args a, const float *sigma, int64_t ld_sigma) {
    cu_pdl();
    __shared__ unsigned hist[256], s_digit, s_kk;
    const int64_t t = blockIdx.x, p = a.pos[t], W = a.width, r = a.r;
    int32_t *cells = a.cells + t * a.ld_cells;
    if (p + 1 <= W) {   /* dense: every visible cell */
        for (int64_t c = threadIdx.x; c <= p; c += blockDim.x) cells[c] = (int32_t)c;
        if (threadIdx.x == 0) a.n_cells[t] = (int32_t)(p + 1);
        return;
    }
    const int64_t tail_start = (p + 1) / r * r, nb = tail_start / r, n_tail = p + 1 - tail_start;
    const int64_t M = W - n_tail, rem = M % r, k = M / r + (rem > 0);   /* k <= nb since nb * r > M */
    const float *sg = sigma + t * ld_sigma;

    /* T = the k-th largest key; kk = how many blocks of key T are taken (those of lowest index) */
    unsigned prefix = 0, mask = 0, kk = (unsigned)k;
    for (int shift = 24; k > 0 && shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        /* scores cluster in a few digits (the top byte is the exponent): the lanes of one digit
         * add their count with one atomic */
        for (int64_t base = 0; base < nb; base += blockDim.x) {
            const int64_t b = base + threadIdx.x;
            const unsigned u = b < nb ? qsa_key(sg[b]) : 0u;
            const int in = b < nb && (u & mask) == prefix;
            const unsigned dg = in ? (u >> shift) & 255u : 0xffffffffu;
            const unsigned peers = __match_any_sync(0xffffffffu, dg);
            if (in && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[dg], (unsigned)__popc(peers));
        }
        __syncthreads();
        if (threadIdx.x < 32) {   /* lane l holds digits 255 - 8l down to 248 - 8l */
            const int lane = threadIdx.x, top = 255 - 8 * lane;
            unsigned local = 0;
            for (int j = 0; j < 8; j++) local += hist[top - j];
            unsigned incl = local;
            for (int o = 1; o < 32; o <<= 1) {
                const unsigned y = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o) incl += y;
            }
            unsigned before = incl - local;   /* keys in the digits above this lane's */
            if (before < kk && kk <= incl)
                for (int j = 0; j < 8; j++) {
                    if (before + hist[top - j] >= kk) {
                        s_digit = (unsigned)(top - j);
                        s_kk = kk - before;
                        break;
                    }
                    before += hist[top - j];
                }
        }
        __syncthreads();
        prefix |= s_digit << shift;
        mask |= 255u << shift;
        kk = s_kk;
    }

    /* the blocks in order, QSA_PER consecutive ones a thread: those above T whole, the first kk
     * of T (the kk-th split when rem) */
    unsigned long long run_eq = 0, run_n = 0;
    const int64_t chunk = (int64_t)blockDim.x * QSA_PER;
    for (int64_t base = 0; base < nb && run_n < (unsigned long long)M; base += chunk) {
        const int64_t b0 = base + (int64_t)threadIdx.x * QSA_PER;
        unsigned u[QSA_PER], n_eq = 0;
#pragma unroll
        for (int i = 0; i < QSA_PER; i++) {
            u[i] = b0 + i < nb ? qsa_key(sg[b0 + i]) : 0u;
            n_eq += b0 + i < nb && k > 0 && u[i] == prefix;
        }
        unsigned long long tot_eq, tot_n;
        unsigned long long rank = run_eq + qsa_block_scan(n_eq, &tot_eq);
        int64_t cnt[QSA_PER], mine = 0;
#pragma unroll
        for (int i = 0; i < QSA_PER; i++) {
            const int live = b0 + i < nb && k > 0, gt = live && u[i] > prefix, eq = live && u[i] == prefix;
            const int sel = gt || (eq && rank < kk), split = rem > 0 && eq && rank + 1 == kk;
            cnt[i] = sel ? (split ? rem : r) : 0;
            mine += cnt[i];
            rank += (unsigned long long)eq;
        }
        unsigned long long at = run_n + qsa_block_scan((unsigned long long)mine, &tot_n);
#pragma unroll
        for (int i = 0; i < QSA_PER; i++)
            for (int64_t j = 0; j < cnt[i]; j++) cells[at++] = (int32_t)((b0 + i) * r + j);
        run_eq += tot_eq;
        run_n += tot_n;
    }
    for (int64_t c = threadIdx.x; c < n_tail; c += blockDim.x) cells[M + c] = (int32_t)(tail_start + c);
    if (threadIdx.x == 0) a.n_cells[t] = (int32_t)W;
}

extern "C" size_t st_cuda_qsa_scratch_size(int64_t n_tok, int64_t n_ctx, int64_t r) {
    if (r <= 0 || n_tok <= 0) return 0;
    return (size_t)n_tok * (size_t)(n_ctx / r + 1) * sizeof(float);
}

extern "C" st_status st_cuda_qsa_select(st_cuda *cu, const st_qsa_args *a) {
    if (a->n_head <= 0 || a->n_head > QSA_MAX_HEAD || a->dim <= 0 ||
        (size_t)(a->n_head * a->dim) * sizeof(float) > 48 * 1024)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda qsa_select: %lld indexer heads of %lld (at most %d heads, 12288 floats)",
                       (long long)a->n_head, (long long)a->dim, QSA_MAX_HEAD);
    if (a->r <= 0 || a->width < a->r || a->ld_cells < a->width || a->n_ctx <= 0)
        return st_fail(ST_ERR_INVALID, "cuda qsa_select: block size %lld, cell budget %lld, rows of %lld cells, n_ctx %lld",
                       (long long)a->r, (long long)a->width, (long long)a->ld_cells, (long long)a->n_ctx);
    if (a->n_tok > 65535) return st_fail(ST_ERR_UNSUPPORTED, "cuda qsa_select: %lld queries", (long long)a->n_tok);
    if (a->n_tok <= 0) return ST_OK;
    const int64_t ld_sigma = a->n_ctx / a->r + 1;
    void *scr;
    ST_TRY(cu_scratch(cu, st_cuda_qsa_scratch_size(a->n_tok, a->n_ctx, a->r), &scr));
    /* enough blocks of warps for ~4 per SM over all the queries, no more than the blocks need */
    int64_t gx = ((int64_t)cu->n_sm * 4 + a->n_tok - 1) / a->n_tok;
    const int64_t need = (ld_sigma + QSA_WARPS - 1) / QSA_WARPS;
    if (gx > need) gx = need;
    if (gx < 1) gx = 1;
    cu_launch(qsa_scores_kernel, dim3((unsigned)gx, (unsigned)a->n_tok), QSA_WARPS * 32,
              (size_t)(a->n_head * a->dim) * sizeof(float), cu->stream, *a, (float *)scr, ld_sigma);
    ST_TRY(cu_launched("qsa_select scores"));
    cu_launch(qsa_select_kernel, (unsigned)a->n_tok, QSA_SEL_THREADS, 0, cu->stream, *a, (const float *)scr, ld_sigma);
    return cu_launched("qsa_select");
}

/* ---- QSA: attention over the listed cells ---------------------------------------------------------
 * st_cuda_attention's flash-decoding over a list: one warp per (token, head, split of the list),
 * each lane owning 1/32 of the dims (in 16-byte vectors where they fit); the warp takes QSA_STEP
 * cells at a time (their dots and warp sums independent, then one online-softmax update for the
 * group), writes (max, sum, acc[hd]) to scratch, and the combine merges the splits. The list's capacity ld_cells bounds every row's
 * n_cells, so the splits are sized from it on the host; splits past a row's n_cells are empty. */
#define QSA_MAXD 8   /* 256 / 32 */
#define QSA_STEP 4
#define QSA_ATT_THREADS 384   /* a block: the 12 query heads of one kv head of qwen4exp's attention */

/* V consecutive elements of a K or V row from element off: one 16-byte load for V = 8 halves or
 * 4 floats (off a multiple of V), else one element. */
template <int F16, int V> __device__ __forceinline__ void qsa_kv(const void *base, int64_t off, float *out) {
    if constexpr (V == 1) {
        out[0] = F16 ? __half2float(((const __half *)base)[off]) : ((const float *)base)[off];
    } else if constexpr (F16) {
        const uint4 raw = *(const uint4 *)((const __half *)base + off);
        const __half2 *h2 = (const __half2 *)&raw;
#pragma unroll
        for (int i = 0; i < V / 2; i++) {
            const float2 f = __half22float2(h2[i]);
            out[2 * i] = f.x;
            out[2 * i + 1] = f.y;
        }
    } else {
        const float4 f = *(const float4 *)((const float *)base + off);
        out[0] = f.x; out[1] = f.y; out[2] = f.z; out[3] = f.w;
    }
}

/* Lane l owns the V dims from (32c + l) V, c < QSA_MAXD / V: dims l, l + 32, ... for V = 1; for
 * V = 8 (f16) or 4 (f32), head_dim a multiple of 32 V, 16-byte loads. */
template <int F16, int V> __global__ void __launch_bounds__(QSA_ATT_THREADS)
attn_cells_split_kernel(st_attn_cells_args c, int64_t n_split, int64_t split_len, float *part) {
    cu_pdl();
    const st_attn_args &a = c.a;
    const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (w >= a.n_tok * a.n_head * n_split) return;   /* whole warps */
    /* the heads of one (token, split) in adjacent warps: with blocks of r warps a block is one kv
     * group's heads, which read the same K/V rows */
    const int64_t h = w % a.n_head, s = (w / a.n_head) % n_split, t = w / (n_split * a.n_head);
    const int64_t g = h / (a.n_head / a.n_head_kv), hd = a.head_dim, row = a.n_head_kv * hd;
    const int32_t *list = c.cells + t * c.ld_cells;
    const int64_t n = c.n_cells[t], j0 = s * split_len, j1 = j0 + split_len < n ? j0 + split_len : n;
    constexpr int NC = QSA_MAXD / V;
    float q[QSA_MAXD], acc[QSA_MAXD];
    const float *qp = a.q + t * a.ldq_tok + h * a.ldq_head;
#pragma unroll
    for (int e = 0; e < QSA_MAXD; e++) {
        const int64_t dim = (32 * (e / V) + lane) * V + e % V;
        q[e] = dim < hd ? qp[dim] : 0.0f;
        acc[e] = 0.0f;
    }
    float mx = -INFINITY, l = 0.0f;
    for (int64_t j = j0; j < j1; j += QSA_STEP) {
        int64_t off[QSA_STEP];
        float sc[QSA_STEP];
#pragma unroll
        for (int u = 0; u < QSA_STEP; u++) {
            off[u] = j + u < j1 ? (int64_t)list[j + u] * row + g * hd : -1;
            float dot = 0.0f;
#pragma unroll
            for (int ch = 0; ch < NC; ch++) {
                const int64_t d0 = (32 * ch + lane) * V;
                if (off[u] >= 0 && d0 < hd) {
                    float k[V];
                    qsa_kv<F16, V>(a.k_cache, off[u] + d0, k);
#pragma unroll
                    for (int v = 0; v < V; v++) dot += q[ch * V + v] * k[v];
                }
            }
            sc[u] = off[u] >= 0 ? a.scale * warp_sum(dot) : -INFINITY;
        }
        float mn = mx;
#pragma unroll
        for (int u = 0; u < QSA_STEP; u++) mn = fmaxf(mn, sc[u]);
        const float c_old = expf(mx - mn);
        float p[QSA_STEP], psum = 0.0f;
#pragma unroll
        for (int u = 0; u < QSA_STEP; u++) {
            p[u] = off[u] >= 0 ? expf(sc[u] - mn) : 0.0f;
            psum += p[u];
        }
        l = l * c_old + psum;
#pragma unroll
        for (int e = 0; e < QSA_MAXD; e++) acc[e] *= c_old;
#pragma unroll
        for (int u = 0; u < QSA_STEP; u++)
#pragma unroll
            for (int ch = 0; ch < NC; ch++) {
                const int64_t d0 = (32 * ch + lane) * V;
                if (off[u] >= 0 && d0 < hd) {
                    float vv[V];
                    qsa_kv<F16, V>(a.v_cache, off[u] + d0, vv);
#pragma unroll
                    for (int v = 0; v < V; v++) acc[ch * V + v] += p[u] * vv[v];
                }
            }
        mx = mn;
    }
    float *o = part + ((t * a.n_head + h) * n_split + s) * (hd + 2);
#pragma unroll
    for (int e = 0; e < QSA_MAXD; e++) {
        const int64_t dim = (32 * (e / V) + lane) * V + e % V;
        if (dim < hd) o[2 + dim] = acc[e];
    }
    if (lane == 0) {
        o[0] = mx;
        o[1] = l;
    }
}

/* out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s over the splits that saw cells; zeros for
 * a row with none. */
__global__ void attn_cells_combine_kernel(st_attn_args a, int64_t n_split, const float *part) {
    cu_pdl();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, hd = a.head_dim;
    if (i >= a.n_tok * a.n_head * hd) return;
    const int64_t d = i % hd, th = i / hd, h = th % a.n_head, t = th / a.n_head;
    const float *pt = part + th * n_split * (hd + 2);
    float M = -INFINITY;
    for (int64_t s = 0; s < n_split; s++)
        if (pt[s * (hd + 2) + 1] > 0.0f) M = fmaxf(M, pt[s * (hd + 2)]);
    float num = 0.0f, den = 0.0f;
    for (int64_t s = 0; M != -INFINITY && s < n_split; s++) {
        const float *ps = pt + s * (hd + 2);
        if (ps[1] == 0.0f) continue;
        const float f = expf(ps[0] - M);
        num += f * ps[2 + d];
        den += f * ps[1];
    }
    a.out[t * a.ldo_tok + h * hd + d] = den > 0.0f ? num / den : 0.0f;
}

extern "C" st_status st_cuda_attention_cells(st_cuda *cu, const st_attn_cells_args *c) {
    const st_attn_args *a = &c->a;
    if (a->head_dim <= 0 || a->head_dim > 256)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda attention_cells: head_dim %lld (at most 256)", (long long)a->head_dim);
    if (a->n_head_kv <= 0 || a->n_head % a->n_head_kv)
        return st_fail(ST_ERR_INVALID, "cuda attention_cells: %lld heads over %lld kv heads", (long long)a->n_head,
                       (long long)a->n_head_kv);
    if (a->kv_type != ST_TYPE_F16 && a->kv_type != ST_TYPE_F32)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda attention_cells: cache type %u", a->kv_type);
    const int64_t rows = a->n_tok * a->n_head;
    if (rows <= 0) return ST_OK;
    /* enough warps to fill the GPU (~8 per SM), each walking at least 16 entries */
    const int64_t want = (int64_t)cu->n_sm * 8, cap = c->ld_cells > 0 ? c->ld_cells : 1;
    int64_t n_split = (want + rows - 1) / rows;
    const int64_t max_split = (cap + 15) / 16;
    if (n_split > max_split) n_split = max_split;
    if (n_split < 1) n_split = 1;
    const int64_t split_len = (cap + n_split - 1) / n_split;
    void *scr;
    ST_TRY(cu_scratch(cu, (size_t)(rows * n_split) * (size_t)(a->head_dim + 2) * sizeof(float), &scr));
    float *part = (float *)scr;
    /* one warp per query head of a kv group in a block (up to 12), so the block's warps read the
     * same K/V rows: the group's heads share one pass over them through L1 */
    const int64_t r = a->n_head / a->n_head_kv;
    const int threads = 32 * (int)(r <= QSA_ATT_THREADS / 32 ? r : 4);
    const unsigned blocks = cu_blocks(rows * n_split * 32, threads);
    /* 16-byte loads where a lane's share of a row is whole vectors (head_dim 256 in f16, 128 or
     * 256 in f32) */
    if (a->kv_type == ST_TYPE_F16 && a->head_dim == 256)
        cu_launch(attn_cells_split_kernel<1, 8>, blocks, threads, 0, cu->stream, *c, n_split, split_len, part);
    else if (a->kv_type == ST_TYPE_F16)
        cu_launch(attn_cells_split_kernel<1, 1>, blocks, threads, 0, cu->stream, *c, n_split, split_len, part);
    else if (a->head_dim % 128 == 0)
        cu_launch(attn_cells_split_kernel<0, 4>, blocks, threads, 0, cu->stream, *c, n_split, split_len, part);
    else cu_launch(attn_cells_split_kernel<0, 1>, blocks, threads, 0, cu->stream, *c, n_split, split_len, part);
    ST_TRY(cu_launched("attention_cells"));
    cu_launch(attn_cells_combine_kernel, cu_blocks(rows * a->head_dim, Q4_THREADS), Q4_THREADS, 0, cu->stream, *a,
              n_split, part);
    return cu_launched("attention_cells combine");
}
