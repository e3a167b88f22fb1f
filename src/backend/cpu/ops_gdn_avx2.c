/* ops_gdn_avx2.c: the per-token Gated DeltaNet recurrence for one v-head with AVX2/FMA, for
 * processors without AVX-512. Row by row as the reference (decay, delta_j, update, o_j), 8 lanes,
 * one horizontal sum per dot product; a scalar tail handles d % 8. */
#include <immintrin.h>
#include <math.h>
#include "backend/cpu/ops_cpu.h"

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void ops_gdn_head_step_avx2(const ops_gdn_head *p) {
    const int64_t d = p->d, d8 = d & ~(int64_t)7;
    for (int64_t t = 0; t < p->n_tok; t++) {
        const float *q = p->q + t * p->ld_q, *k = p->k + t * p->ld_k, *v = p->v + t * p->ld_v;
        const float egs = expf(p->g[t * p->ld_gb]), beta = p->beta[t * p->ld_gb];
        const __m256 eg = _mm256_set1_ps(egs);
        float *o = p->out + t * p->ld_out;
        const float *src = ops_gdn_src(p, t);
        float *dst = ops_gdn_dst(p, t);
        for (int64_t j = 0; j < d; j++) {
            float *row = dst + j * d;
            const float *in = src + j * d;
            __m256 acc = _mm256_setzero_ps();
            for (int64_t i = 0; i < d8; i += 8) {
                __m256 r = _mm256_mul_ps(_mm256_loadu_ps(in + i), eg);
                _mm256_storeu_ps(row + i, r);
                acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(k + i), acc);
            }
            float kv = hsum8(acc);
            for (int64_t i = d8; i < d; i++) { row[i] = in[i] * egs; kv += row[i] * k[i]; }
            const float delta = (v[j] - kv) * beta;
            const __m256 dj = _mm256_set1_ps(delta);
            acc = _mm256_setzero_ps();
            for (int64_t i = 0; i < d8; i += 8) {
                __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), dj, _mm256_loadu_ps(row + i));
                _mm256_storeu_ps(row + i, r);
                acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + i), acc);
            }
            float qs = hsum8(acc);
            for (int64_t i = d8; i < d; i++) { row[i] += k[i] * delta; qs += row[i] * q[i]; }
            o[j] = qs * p->scale;
        }
    }
}
