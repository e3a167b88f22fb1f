/* ops_avx512.h: small AVX-512 building blocks shared by the ops_*_avx512.c files (and only
 * them: every function here needs the AVX-512 compile flags those files get).
 *
 * exp512: exp(x) = 2^n * e^r with n = round(x*log2 e) and r = x - n*ln 2 (two-part ln 2, so r is
 * exact to about 1e-10), |r| <= 0.35, e^r by its Taylor series to degree 7 (truncation < 1e-8
 * relative), 2^n applied with vscalefps, which saturates to inf and flushes to 0 correctly. The
 * result is within about 2 ulp of expf. Inputs are clamped to [-150, 128] so that +-inf give inf
 * and 0. (Attention and the chunked GDN.)
 * exp512_ggml: e^x computed as llama.cpp's AVX-512 build computes it for SiLU and SwiGLU (ggml's
 * vector expf, the Arm optimized-routines algorithm), so those activations match it bit for bit:
 * they are rounded to 8 bits right after, and a last-bit difference sometimes rounds one the
 * other way (issue 12). n = round(x log2 e) by adding and removing 1.5 * 2^23, b = x - n ln 2
 * (two-part ln 2), e^b ~ 1 + c1 b + ... + c5 b^5 (Horner in b^2 pairs), times 2^n with vscalefps;
 * |n| > 192 gives inf or 0. At most 1.5 ulp from e^x. (Its AVX2 sibling, ops_avx2.h, rounds
 * differently: the two builds of llama.cpp differ too.)
 * hsum16: the 16 horizontal sums of 16 vectors in one vector, by a transpose-and-add tree
 * (45 instructions instead of 16 separate reductions). */
#ifndef ST_BACKEND_CPU_OPS_AVX512_H
#define ST_BACKEND_CPU_OPS_AVX512_H

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

static inline __m512 exp512_ggml(__m512 x) {
    const __m512 shift = _mm512_set1_ps(0x1.8p23f);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift), shift);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512 b2 = _mm512_mul_ps(b, b);
    const __m512 hi = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), b2,
                                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f)));
    const __m512 p = _mm512_fmadd_ps(hi, b2, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 r = _mm512_scalef_ps(p, n);
    const __mmask16 out = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    if (!out) return r;
    const __mmask16 low = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    return _mm512_mask_blend_ps(out, r, _mm512_mask_blend_ps(low, _mm512_set1_ps(INFINITY), _mm512_setzero_ps()));
}

/* The tree in two stages, so that a kernel can reduce rows in groups of 4 as it goes (fewer live
 * registers): hsum4 folds 4 vectors into one whose 128-bit lane L holds partial sums of
 * v0..v3 (element e of each lane belongs to v_e); hsum_final adds the lanes of 4 such vectors,
 * giving r[4m + e] = sum of v_{4m+e}. hsum16(v) = hsum_final(hsum4(v0..v3), ..., hsum4(v12..v15)). */
static inline __m512 hsum4(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
    __m512 w0 = _mm512_add_ps(_mm512_unpacklo_ps(v0, v1), _mm512_unpackhi_ps(v0, v1));
    __m512 w1 = _mm512_add_ps(_mm512_unpacklo_ps(v2, v3), _mm512_unpackhi_ps(v2, v3));
    return _mm512_add_ps(_mm512_shuffle_ps(w0, w1, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(w0, w1, _MM_SHUFFLE(3, 2, 3, 2)));
}

static inline __m512 hsum_final(__m512 u0, __m512 u1, __m512 u2, __m512 u3) {
    __m512 p01 = _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
    __m512 p23 = _mm512_add_ps(_mm512_shuffle_f32x4(u2, u3, _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_f32x4(u2, u3, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(p01, p23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(p01, p23, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* r[j] = sum of the 16 lanes of v[j], for j < 16. */
static inline __m512 hsum16(const __m512 v[16]) {
    return hsum_final(hsum4(v[0], v[1], v[2], v[3]), hsum4(v[4], v[5], v[6], v[7]),
                      hsum4(v[8], v[9], v[10], v[11]), hsum4(v[12], v[13], v[14], v[15]));
}

/* The same 16 sums in the order of _mm512_reduce_add_ps (GCC's: the 256-bit halves, then the
 * 128-bit halves, then lanes i and i + 2, then the last two), which is how llama.cpp's AVX-512
 * build finishes a dot product: hsum4_ggml folds v0..v3 to [t_0 | t_1 | t_2 | t_3], t_r the
 * four-lane stage of v_r; hsum_final_ggml finishes four of those, r[j] = the sum of v_j. */
static inline __m512 hsum4_ggml(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
    __m512 x01 = _mm512_add_ps(_mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 x23 = _mm512_add_ps(_mm512_shuffle_f32x4(v2, v3, _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm512_shuffle_f32x4(v2, v3, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(x01, x23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(x01, x23, _MM_SHUFFLE(3, 1, 3, 1)));
}

static inline __m512 hsum_final_ggml(__m512 y0, __m512 y1, __m512 y2, __m512 y3) {
    __m512 z0 = _mm512_add_ps(_mm512_shuffle_ps(y0, y1, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(y0, y1, _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 z1 = _mm512_add_ps(_mm512_shuffle_ps(y2, y3, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(y2, y3, _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(z0, z1, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(z0, z1, _MM_SHUFFLE(3, 1, 3, 1)));
    /* r[4L + e] is the sum of row 4e + L */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, r);
}

/* Lanes [0, left) of a 16-lane vector (none when left <= 0). */
static inline __mmask16 tail_mask16(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
}

#endif
