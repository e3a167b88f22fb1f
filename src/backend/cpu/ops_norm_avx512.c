/* ops_norm_avx512.c: the RMSNorm row kernel with AVX-512. Squares are formed in float (as the
 * reference does) and widened to double before summing, 16 lanes at a time; only the order of
 * the double additions differs from ops_rms_row_ref. Called only when st_cpu() has avx512f+dq. */
#include <immintrin.h>
#include <math.h>
#include "backend/cpu/ops_cpu.h"

void ops_rms_row_avx512(const float *x, const float *w, float *y, int64_t n, float eps) {
    __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 sq = _mm512_mul_ps(v, v);
        acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
        acc1 = _mm512_add_pd(acc1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(sq, 1)));
    }
    double sum = _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
    for (; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)sum / (float)n;
    const float s = 1.0f / sqrtf(mean + eps);
    const __m512 vs = _mm512_set1_ps(s);
    i = 0;
    if (w) {
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs),
                                                  _mm512_loadu_ps(w + i)));
        for (; i < n; i++) y[i] = (x[i] * s) * w[i];
    } else {
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
        for (; i < n; i++) y[i] = x[i] * s;
    }
}
