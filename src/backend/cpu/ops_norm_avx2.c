/* ops_norm_avx2.c: the RMSNorm row kernel with AVX2: squares formed in float, widened to double
 * 4 at a time and summed (only the order of the double additions differs from the reference),
 * then the same float scale and weight products. */
#include <immintrin.h>
#include <math.h>
#include "backend/cpu/ops_cpu.h"

void ops_rms_row_avx2(const float *x, const float *w, float *y, int64_t n, float eps) {
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 sq = _mm256_mul_ps(v, v);
        acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
        acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
    }
    double part[4];
    _mm256_storeu_pd(part, _mm256_add_pd(acc0, acc1));
    double sum = (part[0] + part[1]) + (part[2] + part[3]);
    for (; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)sum / (float)n;
    const float s = 1.0f / sqrtf(mean + eps);
    const __m256 vs = _mm256_set1_ps(s);
    i = 0;
    if (w) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
        for (; i < n; i++) y[i] = (x[i] * s) * w[i];
    } else {
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
        for (; i < n; i++) y[i] = x[i] * s;
    }
}
