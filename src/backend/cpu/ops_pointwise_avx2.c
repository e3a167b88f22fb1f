/* ops_pointwise_avx2.c: the pointwise row kernels, scale and axpy with AVX2/FMA, for processors
 * without AVX-512: 8 lanes, the reference's formulas with exact division; the element tail goes
 * through the reference. Each gate takes e^x where llama.cpp's AVX2 build does, to match it bit
 * for bit: SiLU (and SwiGLU) with its vector exp (exp256_ggml, ops_avx2.h), sigmoid with the C
 * library's expf one element at a time, as ggml's sigmoid is written. scale and axpy give the
 * reference's bits. */
#include <math.h>
#include "backend/cpu/ops_avx2.h"

static inline __m256 sigmoid256(__m256 x) {
    float v[8];
    _mm256_storeu_ps(v, x);
    for (int i = 0; i < 8; i++) v[i] = 1.0f / (1.0f + expf(-v[i]));
    return _mm256_loadu_ps(v);
}

static inline __m256 silu256(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(x, _mm256_add_ps(one, exp256_ggml(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

static inline __m256 pw_apply(int op, __m256 a, __m256 b) {
    switch (op) {
    case OPS_PW_SILU: return silu256(a);
    case OPS_PW_SIGMOID: return sigmoid256(a);
    case OPS_PW_SWIGLU: return _mm256_mul_ps(silu256(a), b);
    case OPS_PW_MUL_SIGMOID: return _mm256_mul_ps(a, sigmoid256(b));
    case OPS_PW_MUL_SILU: return _mm256_mul_ps(a, silu256(b));
    case OPS_PW_MUL: return _mm256_mul_ps(a, b);
    case OPS_PW_ADD: return _mm256_add_ps(a, b);
    default: return a;
    }
}

void ops_pw_avx2(int op, const float *a, const float *b, float *y, int64_t n) {
    int64_t i = 0;
    const __m256 zero = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        __m256 va = _mm256_loadu_ps(a + i);
        __m256 vb = b ? _mm256_loadu_ps(b + i) : zero;
        _mm256_storeu_ps(y + i, pw_apply(op, va, vb));
    }
    if (i < n) ops_pw_ref(op, a + i, b ? b + i : NULL, y + i, n - i);
}

void ops_scale_avx2(float *y, int64_t n, const float *x, float s) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; i++) y[i] = x[i] * s;
}

void ops_axpy_avx2(float *y, int64_t n, const float *x, float s) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(_mm256_loadu_ps(x + i), vs)));
    for (; i < n; i++) y[i] += x[i] * s;
}
