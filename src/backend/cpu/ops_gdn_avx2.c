/* ops_gdn_avx2.c: the per-token Gated DeltaNet recurrence for one v-head with AVX2/FMA, for
 * processors without AVX-512, in llama.cpp's arithmetic on such processors bit for bit: its CPU
 * op (ggml_gated_delta_net) scales the state by e^g, then per row j forms row.k with
 * ggml_vec_dot_f32, delta_j = (v_j - row.k) beta, row += delta_j k with fused multiply-adds, and
 * o_j = (row.q) scale. ggml's AVX2 ggml_vec_dot_f32 keeps four accumulators of 8 lanes over
 * 32-element steps (fused multiply-adds), adds them as (a0 + a2) + (a1 + a3), folds the two
 * halves and finishes with two horizontal adds; the leftover d % 32 elements add one by one
 * (bit-exact for d a multiple of 32, as every model's head size is; checked against the peer's
 * libggml-cpu-haswell.so). The decay and row.k, then the update and row.q, share a pass over the
 * row, which rounds nothing differently.
 * Matching it matters because the activations are rounded to 8 bits after this op: a last-bit
 * difference here sometimes rounds an activation the other way, and on a model with random
 * weights one such flip moves every later logit by ~1e-3 (issue 12). */
#include <immintrin.h>
#include <math.h>
#include "backend/cpu/ops_cpu.h"

/* ggml_vec_dot_f32's reduction of its four accumulators (GGML_F32x8_REDUCE) */
static inline float ggml_reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

void ops_gdn_head_step_avx2(const ops_gdn_head *p) {
    const int64_t d = p->d, np = d & ~(int64_t)31;
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
            /* pass 1: the decay (the same rounded products as scaling the whole state first) and
             * row.k on the decayed row */
            __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int64_t i = 0; i < np; i += 32)
                for (int c = 0; c < 4; c++) {
                    __m256 r = _mm256_mul_ps(_mm256_loadu_ps(in + i + 8 * c), eg);
                    _mm256_storeu_ps(row + i + 8 * c, r);
                    a[c] = _mm256_fmadd_ps(r, _mm256_loadu_ps(k + i + 8 * c), a[c]);
                }
            float kv = ggml_reduce4(a[0], a[1], a[2], a[3]);
            for (int64_t i = np; i < d; i++) {
                row[i] = in[i] * egs;
                kv += row[i] * k[i];
            }
            const float delta = (v[j] - kv) * beta;
            /* pass 2: row += delta_j k, then row.q */
            const __m256 dj = _mm256_set1_ps(delta);
            for (int c = 0; c < 4; c++) a[c] = _mm256_setzero_ps();
            for (int64_t i = 0; i < np; i += 32)
                for (int c = 0; c < 4; c++) {
                    __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 8 * c), dj, _mm256_loadu_ps(row + i + 8 * c));
                    _mm256_storeu_ps(row + i + 8 * c, r);
                    a[c] = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + i + 8 * c), a[c]);
                }
            float qs = ggml_reduce4(a[0], a[1], a[2], a[3]);
            for (int64_t i = np; i < d; i++) {
                row[i] += k[i] * delta;
                qs += row[i] * q[i];
            }
            o[j] = qs * p->scale;
        }
    }
}
