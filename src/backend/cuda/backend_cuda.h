/* backend_cuda.h: the op table (backend.h) on the GPU (backend_cuda.c): each entry the CUDA op of
 * cuda_backend.h on device pointers, on the context's stream, nothing waiting; the fused entries
 * as one kernel where the device has it, and the prepared 8-bit rows of a decode-sized chunk
 * (backend.h, "Prepared rows") kept here between the op that writes them and the products that
 * read them. One per device session: graphs captured through it record its buffers. */
#ifndef ST_BACKEND_CUDA_BACKEND_CUDA_H
#define ST_BACKEND_CUDA_BACKEND_CUDA_H

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

/* Rows in 8 bits for products, where an op left them: x (the f32 rows, K wide, n of them). */
typedef struct st_cuda_prep {
    const float *x;
    int64_t K, n;
    st_cuda_q8 q;
    int multi;                 /* from a norm: products take the multi-matrix matvec (same bits) */
} st_cuda_prep;

enum { ST_CUDA_PREP_NORM, ST_CUDA_PREP_OUT, ST_CUDA_PREP_SLOTS };

typedef struct st_cuda_backend {
    st_backend be;
    st_cuda *cu;
    void *q8_buf[3];           /* the norm's rows, a block output's, the SwiGLU's: max_k x 8 rows each */
    int64_t max_k;
    st_cuda_prep prep[ST_CUDA_PREP_SLOTS];
    int unfused;               /* the plain op sequence: no fused norms, no prepared rows, no side stream */
    int outs_unfused;          /* no fused block outputs (the gates into 8 bits) */
    int plain;                 /* STRATA_CUDA_PLAIN bits: prompt paths left for the decode kernels */
    double *prof_ms;           /* NULL, or block times per kind (the forward's FWD_PROF_*) */
    float *stage;              /* ple_rows's gathered rows on the host, where the table is not mapped */
    size_t stage_bytes;
    /* qwen4exp's PLE table: its host address (the model's) and the device's view of it where the
     * session mapped it (NULL: not mapped; ple_rows gathers on the host then) */
    const void *ple_host, *ple_dev;
} st_cuda_backend;

/* max_k: the widest product input a norm, a block output or a SwiGLU prepares. */
st_status st_cuda_backend_init(st_cuda_backend *b, st_cuda *cu, int64_t max_k);
void st_cuda_backend_free(st_cuda_backend *b);
/* Before each chunk: the error cleared, no rows prepared, the chunk's switches. */
void st_cuda_backend_begin(st_cuda_backend *b, int unfused, int outs_unfused, double *prof_ms);
/* The prepared form of x (n rows of K), or NULL. */
const st_cuda_prep *st_cuda_backend_prepared(const st_cuda_backend *b, const float *x, int64_t n, int64_t K);
/* An op outside the table wrote [y, y + n floats): drop what it overwrote. */
void st_cuda_backend_wrote(st_cuda_backend *b, const float *y, int64_t n);
/* be->err = s if it is still ST_OK; returns whether it is. */
int st_cuda_backend_ok(st_cuda_backend *b, st_status s);

#endif
