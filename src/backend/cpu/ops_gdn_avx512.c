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
 * k and q live in registers and no load is masked, and which computes llama.cpp's AVX-512 bits
 * (see gdn_token_fixed; measured cost against the earlier folded-decay body: ~5% at d = 128,
 * ~20% at d = 64, cache-resident);
 * any other d takes the masked generic body, which follows the reference's order exactly. */
#include "backend/cpu/ops_avx512.h"

#define GDN_ALWAYS_INLINE __attribute__((always_inline)) inline

/* The head sizes of real models (64, 128), in llama.cpp's AVX-512 arithmetic bit for bit: its
 * CPU op (ggml_gated_delta_net) scales the state by e^g, forms row.k on the decayed row with
 * ggml_vec_dot_f32 (four accumulators of 16 lanes over 64-element steps, added as
 * (a0 + a2) + (a1 + a3), then _mm512_reduce_add_ps), updates the row with fused multiply-adds
 * and forms row.q the same way. A last-bit difference here rounds an 8-bit activation the other
 * way now and then (issue 12). Here the decayed row is not stored in pass A (pass B forms the
 * same rounded product again), and the 16 rows of a block reduce together (hsum4_ggml,
 * hsum_final_ggml: the reduce_add order, 16 rows at once), 4 at a time as they are produced so
 * few partial vectors are live beside k and q. */
static GDN_ALWAYS_INLINE __m512 row_dot(const float *in, const __m512 *kr, __m512 eg, const int D) {
    __m512 a[4];
    OPS_UNROLL
    for (int c = 0; c < 4; c++) a[c] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(in + 16 * c), eg), kr[c], _mm512_setzero_ps());
    OPS_UNROLL
    for (int i = 64; i < D; i += 64)
        for (int c = 0; c < 4; c++)
            a[c] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(in + i + 16 * c), eg), kr[i / 16 + c], a[c]);
    return _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
}

/* Row j becomes e^g row + delta_j k, stored once; returns its row.q partial vector. */
static GDN_ALWAYS_INLINE __m512 row_update_dot(const float *in, float *row, const __m512 *kr, const __m512 *qr,
                                               __m512 eg, float dj, const int D) {
    const __m512 d = _mm512_set1_ps(dj);
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    OPS_UNROLL
    for (int i = 0; i < D / 16; i++) {
        __m512 r = _mm512_fmadd_ps(kr[i], d, _mm512_mul_ps(_mm512_loadu_ps(in + 16 * i), eg));
        _mm512_storeu_ps(row + 16 * i, r);
        a[i % 4] = _mm512_fmadd_ps(r, qr[i], a[i % 4]);
    }
    return _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
}

static GDN_ALWAYS_INLINE void gdn_token_fixed(const float *Sin, float *S, const float *q, const float *k,
                                              const float *v, __m512 eg, __m512 beta,
                                              __m512 vscale, float *o, const int D) {
    __m512 kr[8], qr[8];   /* D <= 128 */
    OPS_UNROLL
    for (int i = 0; i < D / 16; i++) {
        kr[i] = _mm512_loadu_ps(k + 16 * i);
        qr[i] = _mm512_loadu_ps(q + 16 * i);
    }
    for (int j0 = 0; j0 < D; j0 += 16) {
        const float *in = Sin + j0 * D;
        float *rows = S + j0 * D;
        __m512 u[4];
        OPS_UNROLL
        for (int g = 0; g < 4; g++) {                      /* pass A: (e^g row).k, read only */
            const float *r = in + 4 * g * D;
            u[g] = hsum4_ggml(row_dot(r, kr, eg, D), row_dot(r + D, kr, eg, D), row_dot(r + 2 * D, kr, eg, D),
                              row_dot(r + 3 * D, kr, eg, D));
        }
        const __m512 kv = hsum_final_ggml(u[0], u[1], u[2], u[3]);
        const __m512 delta = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(v + j0), kv), beta);
        float dl[16];
        _mm512_storeu_ps(dl, delta);
        OPS_UNROLL
        for (int g = 0; g < 4; g++) {                      /* pass B: decay, += delta_j k, row.q */
            float *r = rows + 4 * g * D;
            const float *ri = in + 4 * g * D, *dg = dl + 4 * g;
            u[g] = hsum4_ggml(row_update_dot(ri, r, kr, qr, eg, dg[0], D), row_update_dot(ri + D, r + D, kr, qr, eg, dg[1], D),
                              row_update_dot(ri + 2 * D, r + 2 * D, kr, qr, eg, dg[2], D),
                              row_update_dot(ri + 3 * D, r + 3 * D, kr, qr, eg, dg[3], D));
        }
        _mm512_storeu_ps(o + j0, _mm512_mul_ps(hsum_final_ggml(u[0], u[1], u[2], u[3]), vscale));
    }
}

static void gdn_token_any(const float *Sin, float *S, const float *q, const float *k, const float *v, __m512 eg,
                          __m512 beta, __m512 vscale, float *o, int64_t d) {
    for (int64_t j0 = 0; j0 < d; j0 += 16) {
        const int64_t nj = d - j0 < 16 ? d - j0 : 16;
        __m512 part[16];
        for (int64_t jj = 0; jj < 16; jj++) part[jj] = _mm512_setzero_ps();
        for (int64_t jj = 0; jj < nj; jj++) {
            float *row = S + (j0 + jj) * d;
            const float *in = Sin + (j0 + jj) * d;
            __m512 acc = _mm512_setzero_ps();
            for (int64_t i = 0; i < d; i += 16) {
                const __mmask16 m = tail_mask16(d - i);
                __m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, in + i), eg);
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
        const float *src = ops_gdn_src(p, t);
        float *dst = ops_gdn_dst(p, t);
        if (d == 64) gdn_token_fixed(src, dst, q, k, v, eg, beta, vscale, o, 64);
        else if (d == 128) gdn_token_fixed(src, dst, q, k, v, eg, beta, vscale, o, 128);
        else gdn_token_any(src, dst, q, k, v, eg, beta, vscale, o, d);
    }
}
