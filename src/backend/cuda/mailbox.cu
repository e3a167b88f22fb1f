/* mailbox.cu: the device side of the decode step's CPU share (model/expert_mailbox.h, memory
 * tiers v4): a kernel that posts a tiered layer's request into mapped host memory, and one that
 * waits for the CPU's answer and adds it. One block each, no driver call, graph-safe; the host's
 * plain reference of both is st_mbox_ref_publish / st_mbox_ref_wait. */
#include "backend/cuda/cuda_internal.cuh"
extern "C" {
#include "model/expert_mailbox.h"
}

#define MBOX_THREADS 256

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ float ld_relaxed_sys_f32(const float *p) {
    float v;
    asm volatile("ld.relaxed.sys.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release_sys(uint64_t *p, uint64_t v) {
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t global_ns(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* The payload by every thread, each thread's stores fenced at system scope, then (after the
 * barrier) thread 0 takes the next number and publishes it. */
__global__ void __launch_bounds__(MBOX_THREADS)
mbox_publish_kernel(st_cuda_mbox mb, int64_t il, const int32_t *ids, const float *w, const float *h) {
    cu_pdl();
    char *slot = mb.slot0 + (size_t)il * mb.slot_bytes;
    float *sh = (float *)(slot + mb.off_h);
    for (int64_t i = threadIdx.x; i < mb.d; i += blockDim.x) sh[i] = h[i];
    for (int64_t j = threadIdx.x; j < mb.k; j += blockDim.x) {
        ((int32_t *)(slot + mb.off_ids))[j] = ids[j];
        ((float *)(slot + mb.off_w))[j] = w[j];
    }
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
        const uint64_t s = mb.seq[0] + 1;
        mb.seq[0] = s;
        mb.seq[1 + il] = s;
        __threadfence_system();
        st_release_sys(mb.req, s << ST_MBOX_LAYER_BITS | (uint64_t)il);
    }
}

/* Thread 0 spins on done (each load a round trip over the bus); the block adds y once it is in. */
__global__ void __launch_bounds__(MBOX_THREADS) mbox_wait_add_kernel(st_cuda_mbox mb, int64_t il, float *out) {
    cu_pdl();
    __shared__ int ok;
    if (threadIdx.x == 0) {
        const uint64_t s = mb.seq[1 + il];
        int got = 0;
        if (ld_acquire_sys(mb.err) == 0) {
            const uint64_t t0 = global_ns();
            for (;;) {
                if (ld_acquire_sys(mb.done) == s) {
                    got = 1;
                    break;
                }
                if (global_ns() - t0 > mb.timeout_ns) {
                    st_release_sys(mb.err, s << ST_MBOX_LAYER_BITS | (uint64_t)il);
                    break;
                }
            }
        }
        ok = got;
    }
    __syncthreads();
    if (!ok) return;
    const float *y = (const float *)(mb.slot0 + (size_t)il * mb.slot_bytes + mb.off_y);
    for (int64_t i = threadIdx.x; i < mb.d; i += blockDim.x) out[i] += ld_relaxed_sys_f32(y + i);
}

extern "C" st_status st_cuda_mbox_publish(st_cuda *cu, const st_cuda_mbox *mb, int64_t il, const int32_t *ids,
                                          const float *w, const float *h) {
    cu_launch(mbox_publish_kernel, 1, MBOX_THREADS, 0, cu->stream, *mb, il, ids, w, h);
    return cu_launched("mbox publish");
}

extern "C" st_status st_cuda_mbox_wait_add(st_cuda *cu, const st_cuda_mbox *mb, int64_t il, float *out) {
    cu_launch(mbox_wait_add_kernel, 1, MBOX_THREADS, 0, cu->stream, *mb, il, out);
    return cu_launched("mbox wait");
}
