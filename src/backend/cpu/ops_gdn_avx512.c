/* ops_gdn_avx512.c: the per-token Gated DeltaNet recurrence for one v-head with AVX-512.
 *
 * Same operations in the same order as ops_gdn_head_step_ref, row by row of the state (row j is
 * contiguous over the key index): decay, delta_j = beta (v_j - row.k), row += delta_j k,
 * o_j = scale row.q. Rows go in blocks of 16 and in two passes per block: pass A decays the rows
 * and leaves 16 vectors of partial row.k products, which one transpose-and-add tree (hsum16
 * of ops_avx512.h) turns into the 16 deltas at once; pass B updates the rows and reduces the
 * row.q products the same way. Only the summation order of the dot products differs from the reference. The block's
 * 16 rows (4 KiB at d = 64) stay in L1 between the passes. Any d (masked tail). */
#include "backend/cpu/ops_avx512.h"

void ops_gdn_head_step_avx512(const ops_gdn_head *p) {
    const int64_t d = p->d;
    const __m512 vscale = _mm512_set1_ps(p->scale);
    for (int64_t t = 0; t < p->n_tok; t++) {
        const float *q = p->q + t * p->ld_q, *k = p->k + t * p->ld_k, *v = p->v + t * p->ld_v;
        const __m512 eg = _mm512_set1_ps(expf(p->g[t * p->ld_gb]));
        const __m512 beta = _mm512_set1_ps(p->beta[t * p->ld_gb]);
        float *o = p->out + t * p->ld_out;
        for (int64_t j0 = 0; j0 < d; j0 += 16) {
            const int64_t nj = d - j0 < 16 ? d - j0 : 16;
            __m512 part[16];
            for (int64_t jj = 0; jj < 16; jj++) part[jj] = _mm512_setzero_ps();
            for (int64_t jj = 0; jj < nj; jj++) {          /* pass A: decay, row.k */
                float *row = p->S + (j0 + jj) * d;
                __m512 acc = _mm512_setzero_ps();
                for (int64_t i = 0; i < d; i += 16) {
                    const __mmask16 m = tail_mask16(d - i);
                    __m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + i), eg);
                    _mm512_mask_storeu_ps(row + i, m, r);
                    acc = _mm512_fmadd_ps(r, _mm512_maskz_loadu_ps(m, k + i), acc);
                }
                part[jj] = acc;
            }
            const __mmask16 mj = tail_mask16(nj);
            const __m512 kv = hsum16(part);
            const __m512 delta = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mj, v + j0), kv), beta);
            float dl[16];
            _mm512_storeu_ps(dl, delta);
            for (int64_t jj = 0; jj < nj; jj++) {          /* pass B: row += delta_j k, row.q */
                float *row = p->S + (j0 + jj) * d;
                const __m512 dj = _mm512_set1_ps(dl[jj]);
                __m512 acc = _mm512_setzero_ps();
                for (int64_t i = 0; i < d; i += 16) {
                    const __mmask16 m = tail_mask16(d - i);
                    __m512 r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, k + i), dj,
                                               _mm512_maskz_loadu_ps(m, row + i));
                    _mm512_mask_storeu_ps(row + i, m, r);
                    acc = _mm512_fmadd_ps(r, _mm512_maskz_loadu_ps(m, q + i), acc);
                }
                part[jj] = acc;
            }
            _mm512_mask_storeu_ps(o + j0, mj, _mm512_mul_ps(hsum16(part), vscale));
        }
    }
}
