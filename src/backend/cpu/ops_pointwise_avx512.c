/* ops_pointwise_avx512.c: the exp-based pointwise row kernels with AVX-512.
 *
 * exp(x) = 2^n * e^r with n = round(x*log2 e) and r = x - n*ln 2 (two-part ln 2, so r is exact to
 * about 1e-10), |r| <= 0.35, e^r by its Taylor series to degree 7 (truncation < 1e-8 relative),
 * 2^n applied with vscalefps, which saturates to inf and flushes to 0 correctly. The result is
 * within about 2 ulp of expf. Inputs are clamped to [-150, 128] so that +-inf give inf and 0. The
 * gates then use the reference's formulas (x/(1+e^-x), 1/(1+e^-x)) with exact division. */
#include <immintrin.h>
#include <math.h>
#include "backend/cpu/ops_cpu.h"

static inline __m512 exp512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-150.0f)), _mm512_set1_ps(128.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static inline __m512 sigmoid512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

static inline __m512 silu512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(x, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

static inline __m512 pw_apply(int op, __m512 a, __m512 b) {
    switch (op) {
    case OPS_PW_SILU: return silu512(a);
    case OPS_PW_SIGMOID: return sigmoid512(a);
    case OPS_PW_SWIGLU: return _mm512_mul_ps(silu512(a), b);
    case OPS_PW_MUL_SIGMOID: return _mm512_mul_ps(a, sigmoid512(b));
    case OPS_PW_MUL_SILU: return _mm512_mul_ps(a, silu512(b));
    case OPS_PW_MUL: return _mm512_mul_ps(a, b);
    case OPS_PW_ADD: return _mm512_add_ps(a, b);
    default: return a;
    }
}

void ops_pw_avx512(int op, const float *a, const float *b, float *y, int64_t n) {
    int64_t i = 0;
    const __m512 zero = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        __m512 va = _mm512_loadu_ps(a + i);
        __m512 vb = b ? _mm512_loadu_ps(b + i) : zero;
        _mm512_storeu_ps(y + i, pw_apply(op, va, vb));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 va = _mm512_maskz_loadu_ps(m, a + i);
        __m512 vb = b ? _mm512_maskz_loadu_ps(m, b + i) : zero;
        _mm512_mask_storeu_ps(y + i, m, pw_apply(op, va, vb));
    }
}
