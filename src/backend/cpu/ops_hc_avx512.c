/* ops_hc_avx512.c: the hyper-connection kernels of ops_hc.c with AVX-512, 16 elements per
 * vector: the same stream order and the same separate products and sums as the references;
 * sigmoid with the vector exp of ops_avx512.h. */
#include "backend/cpu/ops_avx512.h"

void ops_hc_pre_avx512(const float *x, const float *g, int64_t ls, float *m, int64_t hc, int64_t n, float scale) {
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps(), vs = _mm512_set1_ps(scale);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 mk = tail_mask16(n - i);
        __m512 sum = zero;
        for (int64_t c = 0; c < hc; c++) {
            const __m512 gv = _mm512_maskz_loadu_ps(mk, g + c * ls + i);
            const __m512 sg = _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(zero, gv))));
            sum = _mm512_add_ps(sum, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + c * ls + i), sg));
        }
        _mm512_mask_storeu_ps(m + i, mk, _mm512_mul_ps(vs, sum));
    }
}

void ops_hc_post_avx512(float *R, int64_t ls, const float *y, const float *w, int64_t hc, int64_t n) {
    for (int64_t c = 0; c < hc; c++) {
        const __m512 wc = _mm512_set1_ps(w[c]);
        float *r = R + c * ls;
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 mk = tail_mask16(n - i);
            const __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, y + i), wc);
            _mm512_mask_storeu_ps(r + i, mk, _mm512_add_ps(_mm512_maskz_loadu_ps(mk, r + i), p));
        }
    }
}
