/* cuda_internal.cuh: what the CUDA backend's translation units share and nobody else sees: the
 * context struct, error plumbing (CUDA errors become st_status with CUDA's text), the scratch
 * buffer, and small device helpers (warp reductions). */
#ifndef ST_BACKEND_CUDA_INTERNAL_CUH
#define ST_BACKEND_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>
#include <limits.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <stdint.h>

/* The C headers have no extern "C" of their own; types.h's _Static_asserts are spelled
 * static_assert in C++. */
extern "C" {
#define _Static_assert static_assert
#include "quant/types.h"
#undef _Static_assert
#include "base/status.h"
}
#include "backend/cuda/cuda_backend.h"

struct st_cuda {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudaEvent_t t0, t1;
    void *scratch;          /* grow-only, reused op after op (ops are ordered on the stream) */
    size_t scratch_bytes;
    int n_sm;
    char desc[512];
    /* st_cuda_fork/join: a second stream with its own scratch, for independent work of one layer
     * (the shared expert beside the routed ones); while forked, `stream` and `scratch` are its. */
    cudaStream_t side, main_stream;
    cudaEvent_t fork_ev, join_ev;
    void *side_scratch;
    size_t side_scratch_bytes;
    int forked;
    uint64_t scratch_epoch;  /* counts the scratch buffers' reallocations (st_cuda_scratch_epoch) */
    /* Barriers between the blocks of one row (add_rms_norm_q8's split form, ops.cu): per stream
     * (main, side) CU_BAR_ROWS pairs of words (arrivals, generation), zeroed at open. */
    unsigned *bar;
};
#define CU_BAR_ROWS 64
/* after the rows' pairs: one word per stream for router_route's last-block count (matmul.cu) */
#define CU_BAR_WORDS (4 * CU_BAR_ROWS + 2)

/* ---- Launches: programmatic dependent launch ---------------------------------------------------
 * Every kernel of this backend starts with cu_pdl(): it lets the kernel after it in the stream be
 * scheduled now (griddepcontrol.launch_dependents) and then waits until the kernels before it have
 * finished and their writes are visible (griddepcontrol.wait) before it touches memory. Every
 * launch goes through cu_launch, which marks it as one that may start before its predecessor ends
 * (cudaLaunchAttributeProgrammaticStreamSerialization, captured into graphs as programmatic edges).
 * The order of effects is the stream's as before: a kernel still reads only finished results. What
 * overlaps is the next kernel's launch and block scheduling with the tail of the current one: the
 * ~2 us between dependent kernels that bound decode (bench/cuda/NOTES.md). cu_pdl_on is 0 before
 * compute capability 9.0 or with STRATA_CUDA_PDL=0 (context.cu): plain launches then, and cu_pdl()
 * is a no-op there. */
extern int cu_pdl_on;

__device__ __forceinline__ void cu_pdl() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class T> struct cu_same { typedef T type; };

/* kernel<<<grid, block, smem, stream>>>(args...), with the arguments converted to the kernel's
 * parameter types at the call (so NULL and literals convert as they would in a <<<>>> launch). */
template <typename... P>
static inline void cu_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                             typename cu_same<P>::type... args) {
    void *argv[] = {(void *)&args...};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = cu_pdl_on ? 1 : 0;
    (void)cudaLaunchKernelExC(&cfg, (const void *)kernel, argv);   /* errors: cu_launched */
}

/* Returns ST_OK, or ST_ERR_IO with "where: CUDA's message". */
st_status cu_check(cudaError_t e, const char *where);
/* The launch error of the last kernel, if any. */
static inline st_status cu_launched(const char *where) { return cu_check(cudaGetLastError(), where); }
/* Scratch of at least `bytes` (device), valid until the next op that asks for scratch. */
st_status cu_scratch(st_cuda *cu, size_t bytes, void **out);

/* matmul.cu: the low-bit types' tables (quant_lowbit.cuh) to this device, when a context opens. */
st_status cu_lowbit_upload(void);
/* matmul.cu, for the MoE prefill: a low-bit type's (quant_lowbit.cuh's lb_type) rows x K of the
 * experts eids[b] of a stacked tensor (experts rows x K apart) -> f16 out + b * out_stride (void *:
 * __half), K % 8 == 0. */
st_status cu_dequant_experts_lowbit(st_cuda *cu, uint32_t type, const void *W, int64_t rows, int64_t K,
                                    const int32_t *eids, int64_t nb, void *out, int64_t out_stride);
/* whether cu_dequant_experts_lowbit takes `type` */
int cu_lowbit_type(uint32_t type);

#define CU_TRY(expr, where) do { st_status s_ = cu_check((expr), (where)); if (s_ != ST_OK) return s_; } while (0)

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* The 8-bit activation grid of every quantized product (quantize_q8_kernel, the decode path): a
 * warp's 32 lanes hold one block of 32; *d = amax/127, and the lane's value is q * d with
 * q = round(v / d). The prompt paths' f16 GEMMs round their inputs to the same grid (q8_grid), so a
 * chunk computes what its rows would one by one, within f16 rounding. */
__device__ __forceinline__ int q8_round(float v, float *d) {
    const float amax = warp_max(fabsf(v));
    *d = amax / 127.0f;
    const float id = *d != 0.0f ? 1.0f / *d : 0.0f;
    return (int)roundf(v * id);
}
/* One warp's 32 values v (lane = element) into a prepared 8-bit block: q at xq[lane], and on lane 0
 * its scale *xd and scaled sum *xs, as quantize_q8_kernel writes them (same bits). */
__device__ __forceinline__ void q8_put(float v, int lane, int8_t *xq, float *xd, float *xs) {
    float d;
    const int q = q8_round(v, &d);
    xq[lane] = (int8_t)q;
    const float sum = warp_sum((float)q);
    if (lane == 0) { *xd = d; *xs = d * sum; }
}
__device__ __forceinline__ float q8_grid(float v) {
    float d;
    const int q = q8_round(v, &d);
    return (float)q * d;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
/* Sum over groups of G lanes (G a power of two <= 32). */
/* The sum over a block of up to 1024 threads, in double (every thread gets it); a barrier
 * before and after. */
static __device__ __forceinline__ double block_sum_d(double v) {
    __shared__ double part[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) part[w] = v;
    __syncthreads();
    double t = 0.0;
    if (w == 0) {
        t = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0;
        t = warp_sum_d(t);
        if (lane == 0) part[0] = t;
    }
    __syncthreads();
    return part[0];
}

/* NeoX RoPE's rotation of pair i at position pos (st_op_rope_neox's numbers): the angle by the
 * CPU's repeated product, the YaRN blend without FMA, cos and sin times mscale. cu_rope_of (ops.cu)
 * makes the constants on the host. */
struct cu_rope_k {
    int64_t half;
    float ts;          /* powf(base, -2/n_rot), from the host */
    float freq_scale, ext_factor, mscale;   /* mscale: attn_factor (times YaRN's factor) */
    float corr0, corr1;
};
cu_rope_k cu_rope_of(const st_rope_params *p);

static __device__ __forceinline__ void cu_rope_cs(const cu_rope_k &p, float pos, int64_t i, float *cs, float *sn) {
    float theta = pos;
    for (int64_t k = 0; k < i; k++) theta *= p.ts;   /* the CPU's repeated product, bit for bit */
    float a = p.freq_scale * theta;
    if (p.ext_factor != 0.0f) {
        const float span = p.corr1 - p.corr0;
        float r = ((float)i - p.corr0) / (span > 0.001f ? span : 0.001f);
        r = r < 0.0f ? 0.0f : (r > 1.0f ? 1.0f : r);
        const float mix = (1.0f - r) * p.ext_factor;
        a = __fadd_rn(__fmul_rn(a, 1.0f - mix), __fmul_rn(theta, mix));   /* no FMA: the CPU's rounding */
    }
    *cs = cosf(a) * p.mscale;
    *sn = sinf(a) * p.mscale;
}

template <int G> __device__ __forceinline__ float group_sum(float v) {
    for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* ---- MoE routing of one token by one warp (ops.cu's moe_route, matmul.cu's router_route) ------
 * st_op_moe_route's rule with the probabilities in registers, for E <= 32 * SLOTS: lane l holds
 * experts l, l + 32, ...; the softmax sums in double in that order (ggml_vec_soft_max_f32's
 * rounding of each step). A pick is two warp reductions: the largest key (a probability's bits as
 * an int; NaN and the taken ones INT_MIN, so they never win), then the lowest expert index holding
 * it; the winning lane then finds its next best. Weights: P_e over the picks' sum in double,
 * floored at MOE_WEIGHT_FLOOR. x: the E logits; id, w: the k picks. */
#define MOE_WEIGHT_FLOOR 6.103515625e-5f
enum { CU_ROUTE_SMEM, CU_ROUTE_REG, CU_ROUTE_FUSED };
int cu_route_mode(void);   /* ops.cu: STRATA_CUDA_ROUTE */
template <int SLOTS>
__device__ __forceinline__ void route_warp(const float *x, int64_t E, int64_t k, int32_t *id, float *w) {
    const int lane = threadIdx.x & 31;
    float p[SLOTS];
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < SLOTS; j++) {
        const int64_t e = lane + 32 * j;
        p[j] = e < E ? __ldcg(x + e) : -INFINITY;   /* L2: x may be another block's output */
        if (e < E) mx = fmaxf(mx, p[j]);
    }
    mx = warp_max(mx);
    double sum = 0.0;
#pragma unroll
    for (int j = 0; j < SLOTS; j++)
        if (lane + 32 * j < E) { const float e = expf(p[j] - mx); p[j] = e; sum += (double)e; }
    sum = warp_sum_d(sum);
    const float inv = (float)(1.0 / sum);
    int key[SLOTS];
#pragma unroll
    for (int j = 0; j < SLOTS; j++) {
        p[j] *= inv;
        key[j] = lane + 32 * j < E && !isnan(p[j]) ? __float_as_int(p[j]) : INT_MIN;
    }
    int bk = INT_MIN, bj = 0;   /* this lane's best: the largest key, its lowest slot on ties */
#pragma unroll
    for (int j = 0; j < SLOTS; j++) if (key[j] > bk) { bk = key[j]; bj = j; }
    double dsum = 0.0;
    for (int64_t j = 0; j < k; j++) {
        const int m = __reduce_max_sync(0xffffffffu, bk);
        int bi = (int)__reduce_min_sync(0xffffffffu, bk == m ? (unsigned)(lane + 32 * bj) : 0xffffffffu);
        const float bv = m == INT_MIN ? -1.0f : __int_as_float(m);
        if (m == INT_MIN) bi = 0;   /* only NaNs left */
        if (lane == 0) { id[j] = bi; w[j] = bv; }
        dsum += (double)bv;
        if (m != INT_MIN && lane == (bi & 31)) {
#pragma unroll
            for (int s = 0; s < SLOTS; s++) if (s == bj) key[s] = INT_MIN;
            bk = INT_MIN;
            bj = 0;
#pragma unroll
            for (int s = 0; s < SLOTS; s++) if (key[s] > bk) { bk = key[s]; bj = s; }
        }
    }
    float ws = (float)dsum;
    if (ws < MOE_WEIGHT_FLOOR) ws = MOE_WEIGHT_FLOOR;
    __syncwarp();
    for (int64_t j = lane; j < k; j += 32) w[j] = w[j] / ws;
}

/* The MoE prefill's dequantizer (moe_prefill.cu, and matmul.cu for the low-bit types): for batch
 * entry b (blockIdx.y), expert eids[b]: its rows x K of W (a stacked tensor, experts expert_bytes
 * apart) -> f16 out + b*out_stride, rows K apart; D::at(row, i0, v) gives a row's elements i0 ..
 * i0+7. out 16-byte aligned, K and out_stride multiples of 8 (one 16-byte store per thread). */
#define CU_DQ8_THREADS 256
template <class D> __global__ void __launch_bounds__(CU_DQ8_THREADS)
dq8_experts_kernel(const uint8_t *W, size_t expert_bytes, size_t row_bytes, int64_t rows, int64_t K,
                   const int32_t *eids, __half *out, int64_t out_stride) {
    cu_pdl();
    const int64_t i8 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i8 >= rows * K / 8) return;
    const int64_t r = i8 * 8 / K, c = i8 * 8 % K;
    const uint8_t *row = W + (size_t)eids[blockIdx.y] * expert_bytes + (size_t)r * row_bytes;
    float v[8];
    D::at(row, c, v);
    union { __half2 h[4]; uint4 u; } pk;
    for (int j = 0; j < 4; j++) pk.h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
    *(uint4 *)(out + blockIdx.y * out_stride + r * K + c) = pk.u;
}

static inline unsigned cu_blocks(int64_t n, int per) { return (unsigned)((n + per - 1) / per); }

#endif
