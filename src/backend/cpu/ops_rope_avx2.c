/* ops_rope_avx2.c: RoPE's rotation with fused multiply-adds, in the arithmetic of llama.cpp's CPU
 * builds with FMA bit for bit (ops_rope.c says why).
 *
 * Measured on the peer's own tensors (logits_peer --dump: Qcur_normed-3 in, Qcur-3 out, a tiny
 * qwen35moe at 100 positions, 3200 rotated pairs): libggml-cpu-haswell.so and
 * libggml-cpu-sapphirerapids.so both compute
 *     x0' = fma(x0, cos, -(x1 sin)),   x1' = fma(x0, sin, x1 cos)
 * with the bracketed product rounded, 0 outputs off; the rounded form of the reference was off in
 * 1009 of 6400, the other pairing of products in 785 and 808. A last-bit difference in q or k
 * moves the attention output by an ulp, and an activation rounded to 8 bits after it then and
 * again lands on the other side (issue 12). 8 pairs per vector, the same operations on the tail. */
#include <immintrin.h>
#include <math.h>
#include "backend/cpu/ops_cpu.h"

void ops_rope_rotate_fma(float *x, const float *cs, const float *sn, int64_t half) {
    int64_t i = 0;
    for (; i + 8 <= half; i += 8) {
        const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + half);
        const __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
        _mm256_storeu_ps(x + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
        _mm256_storeu_ps(x + i + half, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
    }
    for (; i < half; i++) {
        const float x0 = x[i], x1 = x[i + half];
        x[i] = fmaf(x0, cs[i], -(x1 * sn[i]));
        x[i + half] = fmaf(x0, sn[i], x1 * cs[i]);
    }
}
