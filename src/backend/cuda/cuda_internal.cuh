/* cuda_internal.cuh: what the CUDA backend's translation units share and nobody else sees: the
 * context struct, error plumbing (CUDA errors become st_status with CUDA's text), the scratch
 * buffer, and small device helpers (warp reductions). */
#ifndef ST_BACKEND_CUDA_INTERNAL_CUH
#define ST_BACKEND_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>
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
};

/* Returns ST_OK, or ST_ERR_IO with "where: CUDA's message". */
st_status cu_check(cudaError_t e, const char *where);
/* The launch error of the last kernel, if any. */
static inline st_status cu_launched(const char *where) { return cu_check(cudaGetLastError(), where); }
/* Scratch of at least `bytes` (device), valid until the next op that asks for scratch. */
st_status cu_scratch(st_cuda *cu, size_t bytes, void **out);

#define CU_TRY(expr, where) do { st_status s_ = cu_check((expr), (where)); if (s_ != ST_OK) return s_; } while (0)

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
/* Sum over groups of G lanes (G a power of two <= 32). */
template <int G> __device__ __forceinline__ float group_sum(float v) {
    for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static inline unsigned cu_blocks(int64_t n, int per) { return (unsigned)((n + per - 1) / per); }

#endif
