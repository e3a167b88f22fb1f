/* context.cu: the CUDA device context: device choice, stream, cuBLAS handle, memory (plain
 * cudaMalloc, never managed memory), host<->device copies, the grow-only scratch buffer, timing.
 * Nothing here launches kernels. */
#include <stdio.h>
#include <stdlib.h>
#include "backend/cuda/cuda_internal.cuh"

st_status cu_check(cudaError_t e, const char *where) {
    if (e == cudaSuccess) return ST_OK;
    return st_fail(ST_ERR_IO, "cuda: %s: %s", where, cudaGetErrorString(e));
}

int st_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();   /* no driver: not an error for the caller, clear it */
        return 0;
    }
    return n;
}

int cu_pdl_on = 0;

st_status st_cuda_open(int device, st_cuda **out) {
    *out = NULL;
    const int n = st_cuda_device_count();
    if (device < 0 || device >= n)
        return st_fail(ST_ERR_UNSUPPORTED, "cuda: device %d requested, %d present", device, n);
    st_cuda *cu = (st_cuda *)calloc(1, sizeof *cu);
    if (!cu) return st_fail(ST_ERR_NOMEM, "cuda: context");
    cu->device = device;
    st_status s = cu_check(cudaSetDevice(device), "cudaSetDevice");
    if (s == ST_OK) s = cu_check(cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking), "stream");
    if (s == ST_OK) s = cu_check(cudaStreamCreateWithFlags(&cu->side, cudaStreamNonBlocking), "stream");
    if (s == ST_OK) s = cu_check(cudaEventCreateWithFlags(&cu->fork_ev, cudaEventDisableTiming), "event");
    if (s == ST_OK) s = cu_check(cudaEventCreateWithFlags(&cu->join_ev, cudaEventDisableTiming), "event");
    if (s == ST_OK) s = cu_check(cudaEventCreate(&cu->t0), "event");
    if (s == ST_OK) s = cu_check(cudaEventCreate(&cu->t1), "event");
    if (s == ST_OK && cublasCreate(&cu->blas) != CUBLAS_STATUS_SUCCESS) {
        cu->blas = NULL;
        s = st_fail(ST_ERR_IO, "cuda: cublasCreate failed");
    }
    if (s == ST_OK && cublasSetStream(cu->blas, cu->stream) != CUBLAS_STATUS_SUCCESS)
        s = st_fail(ST_ERR_IO, "cuda: cublasSetStream failed");
    if (s == ST_OK) s = cu_lowbit_upload();
    if (s == ST_OK) s = cu_check(cudaMalloc(&cu->bar, CU_BAR_WORDS * sizeof(unsigned)), "barrier words");
    if (s == ST_OK) s = cu_check(cudaMemset(cu->bar, 0, CU_BAR_WORDS * sizeof(unsigned)), "barrier words");
    if (s != ST_OK) { st_cuda_close(cu); return s; }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, device) == cudaSuccess) {
        cu->n_sm = p.multiProcessorCount;
        const char *pdl = getenv("STRATA_CUDA_PDL");
        cu_pdl_on = p.major >= 9 && !(pdl && pdl[0] == '0');
        snprintf(cu->desc, sizeof cu->desc, "%.200s, %d SMs, %.1f GiB, cc %d.%d, L2 %d MiB", p.name,
                 p.multiProcessorCount, (double)p.totalGlobalMem / (1024.0 * 1024 * 1024), p.major,
                 p.minor, p.l2CacheSize >> 20);
    } else {
        cu->n_sm = 1;
    }
    *out = cu;
    return ST_OK;
}

void st_cuda_close(st_cuda *cu) {
    if (!cu) return;
    if (cu->forked) st_cuda_unfork(cu);
    if (cu->stream) cudaStreamSynchronize(cu->stream);
    if (cu->side) cudaStreamSynchronize(cu->side);
    if (cu->scratch) cudaFree(cu->scratch);
    if (cu->side_scratch) cudaFree(cu->side_scratch);
    if (cu->bar) cudaFree(cu->bar);
    if (cu->side) cudaStreamDestroy(cu->side);
    if (cu->fork_ev) cudaEventDestroy(cu->fork_ev);
    if (cu->join_ev) cudaEventDestroy(cu->join_ev);
    if (cu->blas) cublasDestroy(cu->blas);
    if (cu->t0) cudaEventDestroy(cu->t0);
    if (cu->t1) cudaEventDestroy(cu->t1);
    if (cu->stream) cudaStreamDestroy(cu->stream);
    free(cu);
}

const char *st_cuda_describe(const st_cuda *cu) { return cu->desc; }

st_status st_cuda_alloc(st_cuda *cu, size_t bytes, void **out) {
    *out = NULL;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *out = NULL;
        return st_fail(ST_ERR_NOMEM, "cuda: cudaMalloc of %zu bytes: %s", bytes, cudaGetErrorString(e));
    }
    return ST_OK;
}

void st_cuda_free(st_cuda *cu, void *p) {
    if (!p) return;
    cudaStreamSynchronize(cu->stream);   /* no in-flight kernel may still read it */
    cudaFree(p);
}

st_status st_cuda_upload(st_cuda *cu, void *dst, const void *src_host, size_t bytes) {
    CU_TRY(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, cu->stream), "upload");
    return cu_check(cudaStreamSynchronize(cu->stream), "upload");
}

st_status st_cuda_download(st_cuda *cu, void *dst_host, const void *src, size_t bytes) {
    CU_TRY(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, cu->stream), "download");
    return cu_check(cudaStreamSynchronize(cu->stream), "download");
}

st_status st_cuda_copy(st_cuda *cu, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return ST_OK;
    return cu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu->stream), "copy");
}

st_status st_cuda_copy2d(st_cuda *cu, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height) {
    if (width == 0 || height == 0) return ST_OK;
    return cu_check(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice, cu->stream),
                    "copy2d");
}

st_status st_cuda_upload_async(st_cuda *cu, void *dst, const void *src_host, size_t bytes) {
    return cu_check(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, cu->stream), "upload");
}

st_status st_cuda_host_alloc(size_t bytes, void **out) {
    *out = NULL;
    return cu_check(cudaMallocHost(out, bytes), "cudaMallocHost");
}

st_status st_cuda_download_async(st_cuda *cu, void *dst_host, const void *src, size_t bytes) {
    return cu_check(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, cu->stream), "download");
}

st_status st_cuda_host_fn(st_cuda *cu, void (*fn)(void *arg), void *arg) {
    return cu_check(cudaLaunchHostFunc(cu->stream, fn, arg), "cudaLaunchHostFunc");
}

st_status st_cuda_host_alloc_mapped(size_t bytes, int write_combined, void **host, void **dev) {
    *host = *dev = NULL;
    unsigned flags = cudaHostAllocMapped | (write_combined ? cudaHostAllocWriteCombined : 0);
    ST_TRY(cu_check(cudaHostAlloc(host, bytes, flags), "cudaHostAlloc"));
    st_status s = cu_check(cudaHostGetDevicePointer(dev, *host, 0), "cudaHostGetDevicePointer");
    if (s != ST_OK) {
        cudaFreeHost(*host);
        *host = *dev = NULL;
    }
    return s;
}

void st_cuda_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

st_status st_cuda_memset0(st_cuda *cu, void *p, size_t bytes) {
    return cu_check(cudaMemsetAsync(p, 0, bytes, cu->stream), "memset");
}

st_status st_cuda_sync(st_cuda *cu) { return cu_check(cudaStreamSynchronize(cu->stream), "sync"); }

st_status st_cuda_mem_info(st_cuda *cu, size_t *free_bytes, size_t *total_bytes) {
    return cu_check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
}

st_status st_cuda_timer_start(st_cuda *cu) { return cu_check(cudaEventRecord(cu->t0, cu->stream), "event"); }

st_status st_cuda_timer_stop(st_cuda *cu, float *ms) {
    CU_TRY(cudaEventRecord(cu->t1, cu->stream), "event");
    CU_TRY(cudaEventSynchronize(cu->t1), "event");
    return cu_check(cudaEventElapsedTime(ms, cu->t0, cu->t1), "event");
}

extern "C" uint64_t st_cuda_scratch_epoch(const st_cuda *cu) { return cu->scratch_epoch; }

st_status cu_scratch(st_cuda *cu, size_t bytes, void **out) {
    if (bytes > cu->scratch_bytes) {
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        CU_TRY(cudaStreamIsCapturing(cu->stream, &cs), "scratch");
        if (cs != cudaStreamCaptureStatusNone)
            return st_fail(ST_ERR_INVALID, "cuda: scratch must grow to %zu bytes during a graph capture: "
                           "st_cuda_reserve_scratch first", bytes);
        /* growth waits for the stream: an earlier op's kernels may still read the old buffer */
        CU_TRY(cudaStreamSynchronize(cu->stream), "scratch");
        if (cu->scratch) cudaFree(cu->scratch);
        cu->scratch = NULL;
        cu->scratch_bytes = 0;
        const size_t want = bytes + bytes / 4;
        CU_TRY(cudaMalloc(&cu->scratch, want), "scratch cudaMalloc");
        cu->scratch_bytes = want;
        cu->scratch_epoch++;
    }
    *out = cu->scratch;
    return ST_OK;
}

/* Swaps the context's stream and scratch with the side's (cuBLAS follows the stream). */
static void swap_side(st_cuda *cu) {
    cudaStream_t st = cu->stream;
    cu->stream = cu->side;
    cu->side = st;
    void *p = cu->scratch;
    cu->scratch = cu->side_scratch;
    cu->side_scratch = p;
    size_t b = cu->scratch_bytes;
    cu->scratch_bytes = cu->side_scratch_bytes;
    cu->side_scratch_bytes = b;
    cublasSetStream(cu->blas, cu->stream);
}

st_status st_cuda_fork(st_cuda *cu) {
    if (cu->forked) return st_fail(ST_ERR_INVALID, "cuda: fork while forked");
    CU_TRY(cudaEventRecord(cu->fork_ev, cu->stream), "fork");
    CU_TRY(cudaStreamWaitEvent(cu->side, cu->fork_ev, 0), "fork");
    swap_side(cu);
    cu->forked = 1;
    return ST_OK;
}

st_status st_cuda_unfork(st_cuda *cu) {
    if (!cu->forked) return st_fail(ST_ERR_INVALID, "cuda: unfork without a fork");
    st_status s = cu_check(cudaEventRecord(cu->join_ev, cu->stream), "unfork");
    swap_side(cu);
    cu->forked = 0;
    return s;
}

st_status st_cuda_join(st_cuda *cu) {
    if (cu->forked) ST_TRY(st_cuda_unfork(cu));
    return cu_check(cudaStreamWaitEvent(cu->stream, cu->join_ev, 0), "join");
}

st_status st_cuda_reserve_scratch(st_cuda *cu, size_t bytes) {
    void *p;
    return cu_scratch(cu, bytes, &p);
}

struct st_cuda_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

st_status st_cuda_capture_begin(st_cuda *cu) {
    /* relaxed: other threads may still call CUDA (the engine thread owns the stream anyway) */
    return cu_check(cudaStreamBeginCapture(cu->stream, cudaStreamCaptureModeRelaxed), "capture begin");
}

st_status st_cuda_capture_end(st_cuda *cu, st_cuda_graph **out) {
    *out = NULL;
    cudaGraph_t g = NULL;
    CU_TRY(cudaStreamEndCapture(cu->stream, &g), "capture end");
    st_cuda_graph *cg = (st_cuda_graph *)calloc(1, sizeof *cg);
    if (!cg) { cudaGraphDestroy(g); return st_fail(ST_ERR_NOMEM, "cuda: graph"); }
    cg->graph = g;
    st_status s = cu_check(cudaGraphInstantiate(&cg->exec, g, 0), "graph instantiate");
    if (s != ST_OK) { cudaGraphDestroy(g); free(cg); return s; }
    *out = cg;
    return ST_OK;
}

st_status st_cuda_graph_launch(st_cuda *cu, const st_cuda_graph *g) {
    return cu_check(cudaGraphLaunch(g->exec, cu->stream), "graph launch");
}

void st_cuda_graph_free(st_cuda_graph *g) {
    if (!g) return;
    if (g->exec) cudaGraphExecDestroy(g->exec);
    if (g->graph) cudaGraphDestroy(g->graph);
    free(g);
}
