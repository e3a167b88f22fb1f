/* ops_hc_avx2.c: the hyper-connection kernels of ops_hc.c with AVX2, 8 elements per vector and a
 * scalar tail: the same order and separate products and sums as the references; sigmoid with the
 * vector exp of ops_avx2.h. */
#include <math.h>
#include "backend/cpu/ops_avx2.h"

void ops_hc_pre_avx2(const float *x, const float *g, int64_t ls, float *m, int64_t hc, int64_t n, float scale) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps(), vs = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 sum = zero;
        for (int64_t c = 0; c < hc; c++) {
            const __m256 gv = _mm256_loadu_ps(g + c * ls + i);
            const __m256 sg = _mm256_div_ps(one, _mm256_add_ps(one, exp256(_mm256_sub_ps(zero, gv))));
            sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_loadu_ps(x + c * ls + i), sg));
        }
        _mm256_storeu_ps(m + i, _mm256_mul_ps(vs, sum));
    }
    if (i < n) ops_hc_pre_ref(x + i, g + i, ls, m + i, hc, n - i, scale);
}

void ops_hc_post_avx2(float *R, int64_t ls, const float *y, const float *w, int64_t hc, int64_t n) {
    for (int64_t c = 0; c < hc; c++) {
        const __m256 wc = _mm256_set1_ps(w[c]);
        float *r = R + c * ls;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(r + i, _mm256_add_ps(_mm256_loadu_ps(r + i), _mm256_mul_ps(_mm256_loadu_ps(y + i), wc)));
        for (; i < n; i++) r[i] = r[i] + y[i] * w[c];
    }
}
