/* gdn_chunked.cu: the Gated DeltaNet recurrence for prompt chunks in its chunked (WY/UT) form
 * (st_cuda_gdn_chunked), the CPU's st_op_gdn_chunked on the GPU.
 *
 * The per-token kernel in ops.cu (st_cuda_gdn_step) walks the tokens one by one: two warp
 * reductions per token and state row, latency-bound at ~0.8 us per token for the 35B-A3B's 32
 * heads. The chunked form cuts the sequence into chunks of L = 64 tokens; for chunk c of head h,
 * entering with state S0 (S0[i][j], key i, value j) and G_t = sum_{s<=t} g_s inside the chunk:
 *   A[t][s]  = beta_t (k_t . k_s) e^(G_t - G_s), s < t;  QK[t][s] = (q_t . k_s) e^(G_t - G_s), s <= t
 *   [U | W]  = (I + A)^-1 [beta (.) V | beta e^G (.) K]          (forward substitution)
 *   Vn       = U - W S0
 *   o_t      = scale (e^G_t q_t^T S0 + sum_{s<=t} QK[t][s] Vn_s)
 *   S       <- e^G_last S0 + sum_s e^(G_last - G_s) k_s Vn_s^T
 * Two kernels:
 *   gc_prep: one block per (chunk, head), all chunks at once (nothing here depends on the state):
 *     A and QK as 4x4 register tiles per thread over K and Q in shared memory, then the forward
 *     substitution with one thread per column of [U | W]; U, W, QK and G go to scratch.
 *   gc_state: one block per (head, 16 value columns j): the state's columns are independent, so
 *     a block keeps its d x 16 slice of S in shared memory and walks the chunks in order: Vn, o,
 *     then the state update, each a small product with vector broadcasts from shared memory
 *     (Vn and the inter-chunk part of o share one pass over S0; 93 KB of shared memory at
 *     d = 128: two blocks per SM).
 * The operation order inside each sum is the CPU reference's (ops_gdn_chunk_ref), so the two
 * agree within f32 rounding (FMA contraction aside). d a multiple of 32 up to 128; other sizes go
 * to st_cuda_gdn_step. No host synchronisation. */
#include "backend/cuda/cuda_internal.cuh"

namespace {

const int GC_L = 64;          /* chunk length (the CPU's OPS_GDN_CHUNK) */
const int GC_THREADS = 256;
const int GC_JS = 16;         /* value columns per block of the state pass */
const int GC_SP = GC_JS + 1;  /* padded row of the state slice in shared memory */
const int GC_ST_THREADS = 256;             /* the state pass (512 measured no faster) */
const int GC_TY = GC_ST_THREADS / GC_JS;   /* thread rows of the state pass (16) */
const int GC_RV = GC_L / GC_TY;            /* token rows per thread in Vn and o (4) */
const int GC_MAXD = 128;

struct gc_args {
    st_gdn_args a;
    int64_t n_chunks;
    float *U, *W, *QK, *G;    /* per (head h, chunk c), index h*n_chunks + c: [L][d], [L][d], [L][L], [L] */
};

__device__ __forceinline__ int64_t gc_k_head(const st_gdn_args &a, int64_t h) {
    return a.head_map == ST_GDN_GROUPED ? h / (a.n_v / a.n_k) : h % a.n_k;
}

/* Shared memory: Ks, Qs [L][d+1], A [L][L], G [L], Bt [L], UW [L][2d]. */
size_t gc_prep_smem(int64_t d) {
    return (size_t)(2 * GC_L * (d + 1) + GC_L * GC_L + 2 * GC_L + GC_L * 2 * d) * sizeof(float);
}

__global__ void __launch_bounds__(GC_THREADS) gc_prep_kernel(gc_args p) {
    cu_pdl();
    extern __shared__ float sm[];
    const st_gdn_args &a = p.a;
    const int c = blockIdx.x, h = blockIdx.y, d = (int)a.d, dp = d + 1;
    const int64_t t0 = (int64_t)c * GC_L, hc = (int64_t)h * p.n_chunks + c, kh = gc_k_head(a, h);
    const int Lr = (int)(a.n_tok - t0 < GC_L ? a.n_tok - t0 : GC_L);
    float *Ks = sm, *Qs = Ks + GC_L * dp, *A = Qs + GC_L * dp, *G = A + GC_L * GC_L, *Bt = G + GC_L;
    float *UW = Bt + GC_L;
    const int tid = threadIdx.x, lane = tid & 31;
    for (int t = tid >> 5; t < GC_L; t += GC_THREADS / 32) {
        const float *kr = a.k + (t0 + t) * a.ld_k + kh * d, *qr = a.q + (t0 + t) * a.ld_q + kh * d;
        for (int i = lane; i < d; i += 32) {
            Ks[t * dp + i] = t < Lr ? kr[i] : 0.0f;
            Qs[t * dp + i] = t < Lr ? qr[i] : 0.0f;
        }
    }
    if (tid < GC_L) {
        G[tid] = tid < Lr ? a.g[(t0 + tid) * a.n_v + h] : 0.0f;
        Bt[tid] = tid < Lr ? a.beta[(t0 + tid) * a.n_v + h] : 0.0f;
    }
    __syncthreads();
    if (tid == 0)   /* cumulative log decay, in token order as the CPU */
        for (int t = 1; t < GC_L; t++) G[t] += G[t - 1];
    __syncthreads();
    /* the right-hand sides [beta V | beta e^G K] into UW, loaded in parallel (the substitution
     * below is a chain per column: no global load may sit inside it) */
    for (int t = tid >> 5; t < Lr; t += GC_THREADS / 32) {
        const float *vr = a.v + (t0 + t) * a.ld_v + (int64_t)h * d;
        const float eg = Bt[t] * expf(G[t]);
        for (int i = lane; i < d; i += 32) {
            UW[t * 2 * d + i] = Bt[t] * vr[i];
            UW[t * 2 * d + d + i] = eg * Ks[t * dp + i];
        }
    }

    /* A and QK: thread (tt, ss) owns rows t = tt + 16x and columns s = ss + 16y (x, y < 4); rows
     * d+1 apart (d % 32 == 0) put the 16 s of a warp in 16 different banks */
    {
        const int tt = tid / 16, ss = tid % 16;
        float kk[4][4], qk[4][4];
#pragma unroll
        for (int x = 0; x < 4; x++)
#pragma unroll
            for (int y = 0; y < 4; y++) { kk[x][y] = 0.0f; qk[x][y] = 0.0f; }
        for (int i = 0; i < d; i++) {
            float kt[4], qt[4], ks[4];
#pragma unroll
            for (int x = 0; x < 4; x++) {
                kt[x] = Ks[(tt + 16 * x) * dp + i];
                qt[x] = Qs[(tt + 16 * x) * dp + i];
                ks[x] = Ks[(ss + 16 * x) * dp + i];
            }
#pragma unroll
            for (int x = 0; x < 4; x++)
#pragma unroll
                for (int y = 0; y < 4; y++) { kk[x][y] += kt[x] * ks[y]; qk[x][y] += qt[x] * ks[y]; }
        }
        float *QKg = p.QK + hc * GC_L * GC_L;
#pragma unroll
        for (int x = 0; x < 4; x++)
#pragma unroll
            for (int y = 0; y < 4; y++) {
                const int t = tt + 16 * x, s = ss + 16 * y;
                float av = 0.0f, qv = 0.0f;
                if (t < Lr && s <= t) {
                    const float e = expf(G[t] - G[s]);
                    if (s < t) av = Bt[t] * kk[x][y] * e;
                    qv = qk[x][y] * e;
                }
                A[t * GC_L + s] = av;
                QKg[t * GC_L + s] = qv;
            }
    }
    if (tid < GC_L) p.G[hc * GC_L + tid] = G[tid];
    __syncthreads();

    /* [U | W] by forward substitution with the unit lower (I + A): thread j owns column j (U for
     * j < d, W for j >= d) and only reads its own column back, so no barrier inside. The sum over
     * s < t runs in four interleaved partial sums (the chain of dependent adds is the cost here);
     * the CPU subtracts term by term: a rounding-level difference. */
    const int j = tid;
    if (j < 2 * d) {
        float *out = j < d ? p.U + hc * GC_L * d + j : p.W + hc * GC_L * d + (j - d);
        for (int t = 0; t < Lr; t++) {
            float u = UW[t * 2 * d + j];
            const float *At = A + t * GC_L;
            float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
            int s = 0;
            for (; s + 4 <= t; s += 4) {
                p0 += At[s] * UW[s * 2 * d + j];
                p1 += At[s + 1] * UW[(s + 1) * 2 * d + j];
                p2 += At[s + 2] * UW[(s + 2) * 2 * d + j];
                p3 += At[s + 3] * UW[(s + 3) * 2 * d + j];
            }
            for (; s < t; s++) p0 += At[s] * UW[s * 2 * d + j];
            u -= (p0 + p1) + (p2 + p3);
            UW[t * 2 * d + j] = u;
            out[t * d] = u;
        }
    }
}

/* Shared memory: S0 [d][JS+1], XW [L][d] (W, then K of the chunk), XQ [L][d] (q), V [L][JS],
 * QK [L][L], G [L], Dk [L]. */
size_t gc_state_smem(int64_t d) {
    return (size_t)(d * GC_SP + 2 * GC_L * d + GC_L * GC_JS + GC_L * GC_L + 2 * GC_L) * sizeof(float);
}

/* rows t < Lr of a [t][d] slice of q or k (row stride ld) into X */
__device__ __forceinline__ void gc_load_rows(float *X, const float *src, int64_t ld, int Lr, int d) {
    const int tid = threadIdx.x, lane = tid & 31;
    for (int t = tid >> 5; t < Lr; t += GC_ST_THREADS / 32) {
        const float *r = src + t * ld;
        for (int i = lane; i < d; i += 32) X[t * d + i] = r[i];
    }
}

__global__ void __launch_bounds__(GC_ST_THREADS) gc_state_kernel(gc_args p) {
    cu_pdl();
    extern __shared__ float sm[];
    const st_gdn_args &a = p.a;
    const int h = blockIdx.x, j0 = blockIdx.y * GC_JS, d = (int)a.d;
    const int64_t kh = gc_k_head(a, h);
    const int tid = threadIdx.x, tx = tid % GC_JS, ty = tid / GC_JS;   /* ty < GC_TY */
    float *S0 = sm, *XW = S0 + d * GC_SP, *XQ = XW + GC_L * d, *V = XQ + GC_L * d, *QK = V + GC_L * GC_JS;
    float *G = QK + GC_L * GC_L, *Dk = G + GC_L;
    float *Sg = a.state + (int64_t)h * d * d;
    for (int e = tid; e < d * GC_JS; e += GC_ST_THREADS) {
        const int jj = e / d, i = e % d;
        S0[i * GC_SP + jj] = Sg[(j0 + jj) * d + i];
    }
    const int nr = d / GC_TY;   /* state rows per thread in the update: i = ty*nr + r, nr even */
    for (int64_t c = 0; c < p.n_chunks; c++) {
        const int64_t t0 = c * GC_L, hc = (int64_t)h * p.n_chunks + c;
        const int Lr = (int)(a.n_tok - t0 < GC_L ? a.n_tok - t0 : GC_L);
        const float *Wc = p.W + hc * GC_L * d, *Uc = p.U + hc * GC_L * d, *QKc = p.QK + hc * GC_L * GC_L;
        __syncthreads();   /* the previous chunk is done with every buffer (and the S0 load) */
        for (int e = tid; e < Lr * d / 4; e += GC_ST_THREADS) ((float4 *)XW)[e] = ((const float4 *)Wc)[e];
        gc_load_rows(XQ, a.q + t0 * a.ld_q + kh * d, a.ld_q, Lr, d);
        for (int e = tid; e < Lr * GC_JS; e += GC_ST_THREADS) V[e] = Uc[(e / GC_JS) * d + j0 + e % GC_JS];
        for (int e = tid; e < Lr * GC_L / 4; e += GC_ST_THREADS) ((float4 *)QK)[e] = ((const float4 *)QKc)[e];
        if (tid < GC_L) G[tid] = p.G[hc * GC_L + tid];
        __syncthreads();

        /* in one pass over i (S0 read once for both), rows t = ty + GC_TY*r:
         *   Vn[t][j] = U[t][j] - sum_i W[t][i] S0[i][j]
         *   o_t[j]   = sum_i (q_t[i] e^G_t) S0[i][j]          (the intra-chunk part comes below)
         * rows >= Lr are computed from stale shared memory and dropped */
        float av[GC_RV], ao[GC_RV], eg[GC_RV];
#pragma unroll
        for (int r = 0; r < GC_RV; r++) {
            const int t = ty + GC_TY * r;
            av[r] = t < Lr ? V[t * GC_JS + tx] : 0.0f;
            ao[r] = 0.0f;
            eg[r] = expf(G[t]);
        }
        for (int i = 0; i < d; i += 4) {
            const float s0 = S0[i * GC_SP + tx], s1 = S0[(i + 1) * GC_SP + tx];
            const float s2 = S0[(i + 2) * GC_SP + tx], s3 = S0[(i + 3) * GC_SP + tx];
#pragma unroll
            for (int r = 0; r < GC_RV; r++) {
                const float4 w = *(const float4 *)&XW[(ty + GC_TY * r) * d + i];
                const float4 q = *(const float4 *)&XQ[(ty + GC_TY * r) * d + i];
                av[r] -= w.x * s0;
                av[r] -= w.y * s1;
                av[r] -= w.z * s2;
                av[r] -= w.w * s3;
                ao[r] += (q.x * eg[r]) * s0;
                ao[r] += (q.y * eg[r]) * s1;
                ao[r] += (q.z * eg[r]) * s2;
                ao[r] += (q.w * eg[r]) * s3;
            }
        }
        __syncthreads();   /* every read of U in V and of W in XW is done */
#pragma unroll
        for (int r = 0; r < GC_RV; r++)
            if (ty + GC_TY * r < Lr) V[(ty + GC_TY * r) * GC_JS + tx] = av[r];
        gc_load_rows(XW, a.k + t0 * a.ld_k + kh * d, a.ld_k, Lr, d);
        const float gl = G[Lr - 1];
        if (tid < GC_L) Dk[tid] = expf(gl - G[tid]);   /* each delta's decay to the chunk end */
        __syncthreads();

        /* o_t += sum_{s<=t} QK[t][s] Vn[s][j]; out = scale o */
#pragma unroll
        for (int r = 0; r < GC_RV; r++) {
            const int t = ty + GC_TY * r;
            if (t >= Lr) continue;
            float o = ao[r];
            for (int s = 0; s <= t; s++) o += QK[t * GC_L + s] * V[s * GC_JS + tx];
            a.out[(t0 + t) * a.ld_out + (int64_t)h * d + j0 + tx] = o * a.scale;
        }

        /* S <- e^G_last S0 + sum_s (Vn[s][j] e^(G_last - G_s)) k_s[i]: a thread updates only the
         * elements it reads, and nobody else reads S0 before the next chunk's barrier */
        const float el = expf(gl);
        float sa[GC_MAXD / GC_TY];
#pragma unroll
        for (int r = 0; r < GC_MAXD / GC_TY; r++) sa[r] = r < nr ? S0[(ty * nr + r) * GC_SP + tx] * el : 0.0f;
        for (int s = 0; s < Lr; s++) {
            const float cv = V[s * GC_JS + tx] * Dk[s];
            const float *xr = XW + s * d + ty * nr;
#pragma unroll
            for (int r = 0; r < GC_MAXD / GC_TY; r += 2) {
                if (r >= nr) break;
                const float2 k = *(const float2 *)&xr[r];
                sa[r] += cv * k.x;
                sa[r + 1] += cv * k.y;
            }
        }
#pragma unroll
        for (int r = 0; r < GC_MAXD / GC_TY; r++)
            if (r < nr) S0[(ty * nr + r) * GC_SP + tx] = sa[r];
    }
    __syncthreads();
    for (int e = tid; e < d * GC_JS; e += GC_ST_THREADS) {
        const int jj = e / d, i = e % d;
        Sg[(j0 + jj) * d + i] = S0[i * GC_SP + jj];
    }
}

} /* namespace */

extern "C" st_status st_cuda_gdn_chunked(st_cuda *cu, const st_gdn_args *a) {
    const int64_t d = a->d;
    if (d <= 0 || d % 32 || d > GC_MAXD) return st_cuda_gdn_step(cu, a);
    if (a->n_k <= 0 || a->n_v % a->n_k)
        return st_fail(ST_ERR_INVALID, "cuda gdn_chunked: %lld v-heads over %lld k-heads", (long long)a->n_v,
                       (long long)a->n_k);
    if (a->n_tok <= 0 || a->n_v == 0) return ST_OK;
    if (a->n_v > 65535) return st_fail(ST_ERR_UNSUPPORTED, "cuda gdn_chunked: %lld v-heads", (long long)a->n_v);
    const int64_t n_chunks = (a->n_tok + GC_L - 1) / GC_L;
    const size_t per_hc = (size_t)(2 * GC_L * d + GC_L * GC_L + GC_L);
    void *scr;
    ST_TRY(cu_scratch(cu, (size_t)(a->n_v * n_chunks) * per_hc * sizeof(float), &scr));
    gc_args p;
    p.a = *a;
    p.n_chunks = n_chunks;
    p.U = (float *)scr;
    p.W = p.U + (size_t)(a->n_v * n_chunks) * (size_t)(GC_L * d);
    p.QK = p.W + (size_t)(a->n_v * n_chunks) * (size_t)(GC_L * d);
    p.G = p.QK + (size_t)(a->n_v * n_chunks) * (size_t)(GC_L * GC_L);
    const size_t sm1 = gc_prep_smem(d), sm2 = gc_state_smem(d);
    CU_TRY(cudaFuncSetAttribute(gc_prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm1),
           "gdn_chunked smem");
    CU_TRY(cudaFuncSetAttribute(gc_state_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm2),
           "gdn_chunked smem");
    cu_launch(gc_prep_kernel, dim3((unsigned)n_chunks, (unsigned)a->n_v), GC_THREADS, sm1, cu->stream, p);
    ST_TRY(cu_launched("gdn_chunked prep"));
    cu_launch(gc_state_kernel, dim3((unsigned)a->n_v, (unsigned)(d / GC_JS)), GC_ST_THREADS, sm2, cu->stream, p);
    return cu_launched("gdn_chunked state");
}
