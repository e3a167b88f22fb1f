/* ops_qsa_avx2.c: QSA block scores with AVX2/FMA: the AVX-512 kernel's scheme with 8-float
 * vectors and a scalar tail of each dot product. */
#include "backend/cpu/ops_avx2.h"

static float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void ops_qsa_scores_avx2(const float *q, int64_t n_head, int64_t dim, const float *K, int64_t n_blocks, float *sigma) {
    const int64_t dv = dim / 8 * 8;
    for (int64_t b = 0; b < n_blocks; b++) {
        const float *k = K + b * dim;
        float sum = 0.0f;
        for (int64_t h0 = 0; h0 < n_head; h0 += 4) {
            const int64_t nh = n_head - h0 < 4 ? n_head - h0 : 4;
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int64_t i = 0; i < dv; i += 8) {
                const __m256 kv = _mm256_loadu_ps(k + i);
                for (int h = 0; h < nh; h++) acc[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + (h0 + h) * dim + i), kv, acc[h]);
            }
            for (int64_t h = 0; h < nh; h++) {
                float dot = hsum256(acc[h]);
                for (int64_t i = dv; i < dim; i++) dot += q[(h0 + h) * dim + i] * k[i];
                sum += dot > 0.0f ? dot : 0.0f;
            }
        }
        sigma[b] = sum;
    }
}
