/* matmul.h: quantized matrix products on the CPU, the op that reads the weights.
 *
 *   Y[i][m] = sum_k W[m][k] * X[i][k]     for i < n, m < M
 *
 * W is M contiguous rows of K elements of `type` (ggml's layout: a {K, M} tensor), X and Y are f32
 * with row strides ldx and ldy (in floats). X is first converted to the weight type's activation
 * form (Q8_0 or Q8_K blocks, f16, bf16, or kept f32), once, into `scratch`; then the threads split
 * the work. The variant (scalar reference, AVX2, AVX-512/VNNI) is chosen at run time. */
#ifndef ST_BACKEND_CPU_MATMUL_H
#define ST_BACKEND_CPU_MATMUL_H

#include <stddef.h>
#include <stdint.h>
#include "base/pool.h"

/* One product's operands: W (M rows of K, K given beside the part), n rows of X (ldx floats
 * apart) and n rows of Y (M columns, ldy floats apart). */
typedef struct st_matmul_part {
    const void *W;
    int64_t M;
    const float *X;
    int64_t ldx, n;
    float *Y;
    int64_t ldy;
} st_matmul_part;

/* Bytes of scratch st_matmul needs for n rows of K activations against `type`. */
size_t st_matmul_scratch_size(uint32_t type, int64_t K, int64_t n);
/* Y = X . W^T for one part: st_matmul_batch of one. */
void st_matmul(st_pool *pool, uint32_t type, int64_t K, const st_matmul_part *p, void *scratch);

/* Several products of one weight type and one K in a single pass of the pool (the benches run a
 * MoE layer's selected experts through it; the model's MoE layers use model/moe_exec.c's job,
 * which also fuses the SwiGLU, and st_matmul is a batch of one). Part p computes
 * Y_p = X_p . W_p^T (M_p rows of W_p, n_p rows of X_p); parts that share the same X pointer, ldx
 * and n convert it once. The threads split the concatenated weight rows of all parts, so one call
 * pays one dispatch and one barrier instead of one per matrix. */
/* Bytes of scratch st_matmul_batch needs when the parts hold `rows` distinct activation rows in
 * all (at most the sum of n_p). */
size_t st_matmul_batch_scratch_size(uint32_t type, int64_t K, int64_t rows);
void st_matmul_batch(st_pool *pool, uint32_t type, int64_t K, const st_matmul_part *parts, int n_parts,
                     void *scratch);

#endif
