/* ops_gdn_avx512.c: the per-token Gated DeltaNet recurrence for one v-head with AVX-512.
 *
 * Same operations in the same order as ops_gdn_head_step_ref, row by row of the state (row j is
 * contiguous over the key index): decay, delta_j = beta (v_j - row.k), row += delta_j k,
 * o_j = scale row.q. Rows go in blocks of 16 and in two passes per block: pass A decays the rows
 * and leaves 16 vectors of partial row.k products, which one transpose-and-add tree (hsum16 of
 * ops_avx512.h) turns into the 16 deltas at once; pass B updates the rows and reduces the row.q
 * products the same way. Only the summation order of the dot products differs from the
 * reference. The block's 16 rows (4 KiB at d = 64) stay in L1 between the passes.
 *
 * The head sizes of real models (64, 128) get a body with the size as a compile-time constant, so
 * k and q live in registers and no load is masked; any other d takes the masked generic body. */
#include "backend/cpu/ops_avx512.h"

#define GDN_ALWAYS_INLINE __attribute__((always_inline)) inline

static GDN_ALWAYS_INLINE void gdn_token_fixed(float *S, const float *q, const float *k,
                                              const float *v, __m512 eg, __m512 beta,
                                              __m512 vscale, float *o, const int D) {
    __m512 kr[8], qr[8];   /* D <= 128 */
    for (int i = 0; i < D / 16; i++) {
        kr[i] = _mm512_loadu_ps(k + 16 * i);
        qr[i] = _mm512_loadu_ps(q + 16 * i);
    }
    for (int j0 = 0; j0 < D; j0 += 16) {
        __m512 part[16];
        for (int jj = 0; jj < 16; jj++) {                 /* pass A: decay, row.k */
            float *row = S + (j0 + jj) * D;
            __m512 r0 = _mm512_mul_ps(_mm512_loadu_ps(row), eg);
            _mm512_storeu_ps(row, r0);
            __m512 acc = _mm512_mul_ps(r0, kr[0]);
            for (int i = 1; i < D / 16; i++) {
                __m512 r = _mm512_mul_ps(_mm512_loadu_ps(row + 16 * i), eg);
                _mm512_storeu_ps(row + 16 * i, r);
                acc = _mm512_fmadd_ps(r, kr[i], acc);
            }
            part[jj] = acc;
        }
        const __m512 delta = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(v + j0), hsum16(part)), beta);
        float dl[16];
        _mm512_storeu_ps(dl, delta);
        for (int jj = 0; jj < 16; jj++) {                 /* pass B: row += delta_j k, row.q */
            float *row = S + (j0 + jj) * D;
            const __m512 dj = _mm512_set1_ps(dl[jj]);
            __m512 r0 = _mm512_fmadd_ps(kr[0], dj, _mm512_loadu_ps(row));
            _mm512_storeu_ps(row, r0);
            __m512 acc = _mm512_mul_ps(r0, qr[0]);
            for (int i = 1; i < D / 16; i++) {
                __m512 r = _mm512_fmadd_ps(kr[i], dj, _mm512_loadu_ps(row + 16 * i));
                _mm512_storeu_ps(row + 16 * i, r);
                acc = _mm512_fmadd_ps(r, qr[i], acc);
            }
            part[jj] = acc;
        }
        _mm512_storeu_ps(o + j0, _mm512_mul_ps(hsum16(part), vscale));
    }
}

static void gdn_token_any(float *S, const float *q, const float *k, const float *v, __m512 eg,
                          __m512 beta, __m512 vscale, float *o, int64_t d) {
    for (int64_t j0 = 0; j0 < d; j0 += 16) {
        const int64_t nj = d - j0 < 16 ? d - j0 : 16;
        __m512 part[16];
        for (int64_t jj = 0; jj < 16; jj++) part[jj] = _mm512_setzero_ps();
        for (int64_t jj = 0; jj < nj; jj++) {
            float *row = S + (j0 + jj) * d;
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
        for (int64_t jj = 0; jj < nj; jj++) {
            float *row = S + (j0 + jj) * d;
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

void ops_gdn_head_step_avx512(const ops_gdn_head *p) {
    const int64_t d = p->d;
    const __m512 vscale = _mm512_set1_ps(p->scale);
    for (int64_t t = 0; t < p->n_tok; t++) {
        const float *q = p->q + t * p->ld_q, *k = p->k + t * p->ld_k, *v = p->v + t * p->ld_v;
        const __m512 eg = _mm512_set1_ps(expf(p->g[t * p->ld_gb]));
        const __m512 beta = _mm512_set1_ps(p->beta[t * p->ld_gb]);
        float *o = p->out + t * p->ld_out;
        if (d == 64) gdn_token_fixed(p->S, q, k, v, eg, beta, vscale, o, 64);
        else if (d == 128) gdn_token_fixed(p->S, q, k, v, eg, beta, vscale, o, 128);
        else gdn_token_any(p->S, q, k, v, eg, beta, vscale, o, d);
    }
}
