/* ops_qsa_avx512.c: QSA block scores with AVX-512: each block key is loaded 16 floats at a time
 * once for up to 8 heads, whose dot products accumulate in separate vectors and are reduced at
 * the end; then the ReLUs are summed over the heads in order, as the reference does. Only the
 * order of the additions inside a dot product differs from it. */
#include "backend/cpu/ops_avx512.h"

void ops_qsa_scores_avx512(const float *q, int64_t n_head, int64_t dim, const float *K, int64_t n_blocks, float *sigma) {
    for (int64_t b = 0; b < n_blocks; b++) {
        const float *k = K + b * dim;
        float sum = 0.0f;
        for (int64_t h0 = 0; h0 < n_head; h0 += 8) {
            const int64_t nh = n_head - h0 < 8 ? n_head - h0 : 8;
            __m512 acc[8];
            OPS_UNROLL
            for (int h = 0; h < 8; h++) acc[h] = _mm512_setzero_ps();
            for (int64_t i = 0; i < dim; i += 16) {
                const __mmask16 mk = tail_mask16(dim - i);
                const __m512 kv = _mm512_maskz_loadu_ps(mk, k + i);
                OPS_UNROLL
                for (int h = 0; h < 8; h++)
                    if (h < nh) acc[h] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, q + (h0 + h) * dim + i), kv, acc[h]);
            }
            for (int64_t h = 0; h < nh; h++) {
                const float dot = _mm512_reduce_add_ps(acc[h]);
                sum += dot > 0.0f ? dot : 0.0f;
            }
        }
        sigma[b] = sum;
    }
}
