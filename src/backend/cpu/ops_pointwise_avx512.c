/* ops_pointwise_avx512.c: the exp-based pointwise row kernels with AVX-512. The gates use the
 * reference's formulas (x/(1+e^-x), 1/(1+e^-x)) with exact division, and take e^x where
 * llama.cpp's AVX-512 build does, to match it bit for bit: SiLU (and SwiGLU) with its vector exp
 * (exp512_ggml, ops_avx512.h), sigmoid with the C library's expf one element at a time, as ggml's
 * sigmoid is written. */
#include <math.h>
#include "backend/cpu/ops_avx512.h"

static inline __m512 sigmoid512(__m512 x) {
    float v[16];
    _mm512_storeu_ps(v, x);
    for (int i = 0; i < 16; i++) v[i] = 1.0f / (1.0f + expf(-v[i]));
    return _mm512_loadu_ps(v);
}

static inline __m512 silu512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(x, _mm512_add_ps(one, exp512_ggml(_mm512_sub_ps(_mm512_setzero_ps(), x))));
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

void ops_scale_avx512(float *y, int64_t n, const float *x, float s) {
    const __m512 vs = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs));
    }
}

/* y + x*s as the reference: a rounded product, then the sum (no fused multiply-add), so the
 * result is the same bit for bit. */
void ops_axpy_avx512(float *y, int64_t n, const float *x, float s) {
    const __m512 vs = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs);
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), p));
    }
}
