/* ops_gdn_chunk_avx512.c: one chunk of the chunked (WY/UT) Gated DeltaNet form with AVX-512,
 * for head sizes 64 and 128. The maths and the scratch layout are those of ops_gdn_chunk_ref
 * (ops_gdn.c); every product is written as "broadcast a scalar, multiply-add a contiguous row" so
 * that no horizontal sum is needed:
 *   1. KT = the chunk's keys transposed; rows t of A and QK as sum_i k_t[i] KT[i][:] and
 *      sum_i q_t[i] KT[i][:], times e^(G_t - G_s) (and beta_t for A), masked to s < t / s <= t;
 *   2. forward substitution for U and W, row t from rows s < t;
 *   3. S0[i][j] (the entering state, transposed from its [j][i] storage);
 *   4. per token t: Vn_t = U_t - sum_i W_t[i] S0[i][:] and o_t = e^G_t sum_i q_t[i] S0[i][:]
 *      + sum_{s<=t} QK[t][s] Vn_s, in that order (o_t needs Vn_t);
 *   5. the new state, RJ rows j at a time: e^G_last row_j + sum_s e^(G_last-G_s) Vn_s[j] k_s.
 * The test (test_ops_gdn.c) checks it against the per-token recurrence. */
#include "backend/cpu/ops_avx512.h"

#define CH OPS_GDN_CHUNK
#define INL __attribute__((always_inline)) inline

static INL void chunk_fixed(const ops_gdn_head *p, int64_t t0, int64_t L, const ops_gdn_chunk_bufs *b,
                            const int D) {
    enum { MAXV = 8 };                       /* D/16 <= 8 */
    const int NV = D / 16, RJ = 256 / D;     /* rows of the state updated together */
    float *A = b->A, *QK = b->QK, *U = b->U, *W = b->W, *S0 = b->S0, *KT = b->KT, *G = b->G;
    const float *kb = p->k + t0 * p->ld_k, *qb = p->q + t0 * p->ld_q, *vb = p->v + t0 * p->ld_v;
    const int64_t ldk = p->ld_k, ldq = p->ld_q, ldv = p->ld_v;

    float acc = 0.0f;
    for (int64_t t = 0; t < L; t++) { acc += p->g[(t0 + t) * p->ld_gb]; G[t] = acc; }
    for (int64_t t = L; t < CH; t++) G[t] = acc;
    for (int64_t s = 0; s < CH; s++) {       /* read rows of k in order: they are far apart */
        if (s < L) for (int i = 0; i < D; i++) KT[i * CH + s] = kb[s * ldk + i];
        else for (int i = 0; i < D; i++) KT[i * CH + s] = 0.0f;
    }

    /* 1. rows of A and QK */
    for (int64_t t = 0; t < L; t++) {
        const int nb = (int)(t / 16) + 1;
        __m512 ak[4], aq[4];
        OPS_UNROLL
        for (int c = 0; c < 4; c++) { ak[c] = _mm512_setzero_ps(); aq[c] = _mm512_setzero_ps(); }
        const float *kt = kb + t * ldk, *qt = qb + t * ldq;
        for (int i = 0; i < D; i++) {
            const __m512 ki = _mm512_set1_ps(kt[i]), qi = _mm512_set1_ps(qt[i]);
            OPS_UNROLL
            for (int c = 0; c < nb; c++) {
                const __m512 kr = _mm512_loadu_ps(KT + i * CH + 16 * c);
                ak[c] = _mm512_fmadd_ps(ki, kr, ak[c]);
                aq[c] = _mm512_fmadd_ps(qi, kr, aq[c]);
            }
        }
        const __m512 gt = _mm512_set1_ps(G[t]), bt = _mm512_set1_ps(p->beta[(t0 + t) * p->ld_gb]);
        OPS_UNROLL
        for (int c = 0; c < 4; c++) {
            const int64_t s0 = 16 * c;
            const __mmask16 lt = tail_mask16(t - s0), le = tail_mask16(t + 1 - s0);
            if (c < nb) {
                const __m512 e = exp512(_mm512_sub_ps(gt, _mm512_loadu_ps(G + s0)));
                _mm512_storeu_ps(A + t * CH + s0, _mm512_maskz_mov_ps(lt, _mm512_mul_ps(_mm512_mul_ps(ak[c], e), bt)));
                _mm512_storeu_ps(QK + t * CH + s0, _mm512_maskz_mov_ps(le, _mm512_mul_ps(aq[c], e)));
            } else {
                _mm512_storeu_ps(A + t * CH + s0, _mm512_setzero_ps());
                _mm512_storeu_ps(QK + t * CH + s0, _mm512_setzero_ps());
            }
        }
    }

    /* 2. [U | W] = (I + A)^-1 [beta V | beta e^G K] */
    for (int64_t t = 0; t < L; t++) {
        const float bt = p->beta[(t0 + t) * p->ld_gb];
        const __m512 vb_ = _mm512_set1_ps(bt), wb = _mm512_set1_ps(bt * expf(G[t]));
        __m512 u[MAXV], w[MAXV];
        OPS_UNROLL
        for (int c = 0; c < NV; c++) {
            u[c] = _mm512_mul_ps(vb_, _mm512_loadu_ps(vb + t * ldv + 16 * c));
            w[c] = _mm512_mul_ps(wb, _mm512_loadu_ps(kb + t * ldk + 16 * c));
        }
        for (int64_t s = 0; s < t; s++) {
            const __m512 a = _mm512_set1_ps(A[t * CH + s]);
            OPS_UNROLL
            for (int c = 0; c < NV; c++) {
                u[c] = _mm512_fnmadd_ps(a, _mm512_loadu_ps(U + s * D + 16 * c), u[c]);
                w[c] = _mm512_fnmadd_ps(a, _mm512_loadu_ps(W + s * D + 16 * c), w[c]);
            }
        }
        OPS_UNROLL
        for (int c = 0; c < NV; c++) {
            _mm512_storeu_ps(U + t * D + 16 * c, u[c]);
            _mm512_storeu_ps(W + t * D + 16 * c, w[c]);
        }
    }

    /* 3. S0[i][j] from the stored rows M[j][i] */
    for (int j = 0; j < D; j++)
        for (int i = 0; i < D; i++) S0[i * D + j] = p->S[j * D + i];

    /* 4. deltas and outputs, token by token */
    const __m512 vscale = _mm512_set1_ps(p->scale);
    for (int64_t t = 0; t < L; t++) {
        __m512 vn[MAXV], o[MAXV];
        OPS_UNROLL
        for (int c = 0; c < NV; c++) { vn[c] = _mm512_loadu_ps(U + t * D + 16 * c); o[c] = _mm512_setzero_ps(); }
        const float *qt = qb + t * ldq, *wt = W + t * D;
        for (int i = 0; i < D; i++) {
            const __m512 wi = _mm512_set1_ps(wt[i]), qi = _mm512_set1_ps(qt[i]);
            OPS_UNROLL
            for (int c = 0; c < NV; c++) {
                const __m512 sr = _mm512_loadu_ps(S0 + i * D + 16 * c);
                vn[c] = _mm512_fnmadd_ps(wi, sr, vn[c]);
                o[c] = _mm512_fmadd_ps(qi, sr, o[c]);
            }
        }
        const __m512 eg = _mm512_set1_ps(expf(G[t]));
        OPS_UNROLL
        for (int c = 0; c < NV; c++) {
            _mm512_storeu_ps(U + t * D + 16 * c, vn[c]);
            o[c] = _mm512_mul_ps(o[c], eg);
        }
        for (int64_t s = 0; s <= t; s++) {
            const __m512 a = _mm512_set1_ps(QK[t * CH + s]);
            OPS_UNROLL
            for (int c = 0; c < NV; c++) o[c] = _mm512_fmadd_ps(a, _mm512_loadu_ps(U + s * D + 16 * c), o[c]);
        }
        float *out = p->out + (t0 + t) * p->ld_out;
        OPS_UNROLL
        for (int c = 0; c < NV; c++) _mm512_storeu_ps(out + 16 * c, _mm512_mul_ps(o[c], vscale));
    }

    /* 5. the state leaving the chunk */
    const float glast = G[L - 1];
    for (int64_t s = 0; s < L; s++) {
        const __m512 e = _mm512_set1_ps(expf(glast - G[s]));
        OPS_UNROLL
        for (int c = 0; c < NV; c++) _mm512_storeu_ps(U + s * D + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(U + s * D + 16 * c), e));
    }
    const __m512 elast = _mm512_set1_ps(expf(glast));
    for (int j0 = 0; j0 < D; j0 += RJ) {
        __m512 r[4][MAXV];                    /* RJ * NV = 16 registers */
        OPS_UNROLL
        for (int jj = 0; jj < RJ; jj++)
            OPS_UNROLL
            for (int c = 0; c < NV; c++) r[jj][c] = _mm512_mul_ps(_mm512_loadu_ps(p->S + (j0 + jj) * D + 16 * c), elast);
        for (int64_t s = 0; s < L; s++) {
            __m512 kr[MAXV];
            OPS_UNROLL
            for (int c = 0; c < NV; c++) kr[c] = _mm512_loadu_ps(kb + s * ldk + 16 * c);
            OPS_UNROLL
            for (int jj = 0; jj < RJ; jj++) {
                const __m512 cs = _mm512_set1_ps(U[s * D + j0 + jj]);
                OPS_UNROLL
                for (int c = 0; c < NV; c++) r[jj][c] = _mm512_fmadd_ps(cs, kr[c], r[jj][c]);
            }
        }
        OPS_UNROLL
        for (int jj = 0; jj < RJ; jj++)
            OPS_UNROLL
            for (int c = 0; c < NV; c++) _mm512_storeu_ps(p->S + (j0 + jj) * D + 16 * c, r[jj][c]);
    }
}

void ops_gdn_chunk_avx512(const ops_gdn_head *p, int64_t t0, int64_t L, const ops_gdn_chunk_bufs *b) {
    if (p->d == 64) chunk_fixed(p, t0, L, b, 64);
    else if (p->d == 128) chunk_fixed(p, t0, L, b, 128);
    else ops_gdn_chunk_ref(p, t0, L, b);
}
