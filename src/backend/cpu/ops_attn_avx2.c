/* ops_attn_avx2.c: one attention work item with AVX2/FMA/F16C, for processors without AVX-512.
 * Per cell, the K and V rows are widened once (f16 -> f32 with vcvtph2ps) for all r heads of the
 * group; each head then does the reference's online softmax step with 8-lane dot and axpy, and a
 * scalar tail for head sizes that are not a multiple of 8. */
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include "backend/cpu/ops_cpu.h"

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static void widen_row(const void *cache, uint32_t type, int64_t off, int64_t hd, float *dst) {
    if (type != ST_TYPE_F16) { memcpy(dst, (const float *)cache + off, (size_t)hd * sizeof(float)); return; }
    const uint16_t *s = (const uint16_t *)cache + off;
    int64_t i = 0;
    for (; i + 8 <= hd; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < hd; i++) {
        __m128i h = _mm_cvtsi32_si128(s[i]);
        dst[i] = _mm_cvtss_f32(_mm_cvtph_ps(h));
    }
}

void ops_attn_item_avx2(const ops_attn_item *it, uint32_t kv_type) {
    const int64_t hd = it->hd, r = it->r, h8 = hd & ~(int64_t)7;
    float kr[ATTN_MAX_HD], vr[ATTN_MAX_HD];
    float acc[ATTN_MAX_GROUP * ATTN_MAX_HD], m[ATTN_MAX_GROUP], l[ATTN_MAX_GROUP];
    for (int64_t h = 0; h < r; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
        for (int64_t i = 0; i < hd; i++) acc[h * hd + i] = 0.0f;
    }
    for (int64_t c = it->c_begin; c < it->n_vis; c++) {
        widen_row(it->k, kv_type, c * it->row, hd, kr);
        widen_row(it->v, kv_type, c * it->row, hd, vr);
        for (int64_t h = 0; h < r; h++) {
            const float *q = it->q + h * it->ldq_head;
            float *ah = acc + h * hd;
            __m256 d8 = _mm256_setzero_ps();
            for (int64_t i = 0; i < h8; i += 8)
                d8 = _mm256_fmadd_ps(_mm256_loadu_ps(kr + i), _mm256_loadu_ps(q + i), d8);
            float dot = hsum8(d8);
            for (int64_t i = h8; i < hd; i++) dot += kr[i] * q[i];
            const float s = it->scale * dot;
            float c0 = 1.0f;
            if (s > m[h]) { c0 = expf(m[h] - s); m[h] = s; }
            const float p = expf(s - m[h]);
            l[h] = l[h] * c0 + p;
            const __m256 vc = _mm256_set1_ps(c0), vp = _mm256_set1_ps(p);
            for (int64_t i = 0; i < h8; i += 8)
                _mm256_storeu_ps(ah + i, _mm256_fmadd_ps(vp, _mm256_loadu_ps(vr + i),
                                                         _mm256_mul_ps(_mm256_loadu_ps(ah + i), vc)));
            for (int64_t i = h8; i < hd; i++) ah[i] = ah[i] * c0 + p * vr[i];
        }
    }
    for (int64_t h = 0; h < r; h++) ops_attn_finish(it, h, m[h], l[h], acc + h * hd);
}
