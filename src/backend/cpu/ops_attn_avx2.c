/* ops_attn_avx2.c: attention with AVX2/FMA/F16C, for processors without AVX-512.
 *
 * The per-token item (decode): per cell, the K and V rows are widened once (f16 -> f32 with
 * vcvtph2ps) for all r heads of the group; each head then does the reference's online softmax
 * step with 8-lane dot and axpy, and a scalar tail for head sizes that are not a multiple of 8.
 *
 * The tile (prompt chunks): the form of ops_attn_avx512.c's tile with 8 lanes, up to 8 vectors of
 * query rows taken two at a time (16 registers: 8 accumulators, 2 rows of Q^T or P^T, a
 * broadcast). exp256 clamps at -87, so masked cells get their weight set to 0 explicitly.
 *
 * Neither form computes llama.cpp's bits, and this is what keeps
 * conformance_quantize_q6_k_exact_avx2 red on an AVX-512 host. Its model (llama-quantize Q6_K tiny
 * qwen35moe) has one activation on a rounding boundary: attn_gated-3 (the input of layer 3's
 * Q6_K wo, rounded to Q8_K) at position 13, element 132, is exactly 43.5 steps after scaling in
 * llama.cpp's haswell build (44, half to even; 43.50001 at --prefill 1), and a few ulp lower in
 * its AVX-512 builds and here (43): that one position's logits move by 1.2e-3 of max|logit|,
 * the 99 others agree to 2.2e-7 (logits_peer --dump, this CPU level, --prefill 1 and 100).
 * Everything before the attention of that layer equals the haswell build bit for bit at decode
 * (the three GDN layers, their MoE blocks, q, k and v after RoPE). llama.cpp's attention without
 * flash attention is three ops in three orders: K.q by ggml_vec_dot_f32 (4 x 8 lanes over steps of
 * 32), a softmax whose sum is a double, and P.V by ggml_vec_dot_f32 at one token but by
 * llamafile's tinyBLAS (one 8-lane accumulator per output) at two or more; matching it would mean
 * two passes over the cells instead of this online softmax, no cell split across threads, and a
 * verify chunk no longer equal to the decode of its rows (test_ops_attn relies on that). */
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include "backend/cpu/ops_avx2.h"

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
        const int64_t off = ops_attn_cell(it, c) * it->row;
        widen_row(it->k, kv_type, off, hd, kr);
        widen_row(it->v, kv_type, off, hd, vr);
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

#define TM OPS_ATTN_TILE_M
#define TK OPS_ATTN_TILE_K

/* S^T[j][lanes of vectors v0..v0+QV) = K_j . Q^T for the nc cells. */
static __attribute__((always_inline)) inline void tile_scores(const float *qt, const float *K, int64_t ldk,
                                                              int64_t nc, int64_t hd, float *st, const int QV) {
    int64_t j = 0;
    for (; j + 4 <= nc; j += 4) {
        __m256 acc[4][2];
        OPS_UNROLL
        for (int jj = 0; jj < 4; jj++)
            OPS_UNROLL
            for (int v = 0; v < QV; v++) acc[jj][v] = _mm256_setzero_ps();
        const float *kr = K + j * ldk;
        for (int64_t d = 0; d < hd; d++) {
            __m256 qv[2];
            OPS_UNROLL
            for (int v = 0; v < QV; v++) qv[v] = _mm256_load_ps(qt + d * TM + 8 * v);
            OPS_UNROLL
            for (int jj = 0; jj < 4; jj++) {
                const __m256 b = _mm256_broadcast_ss(kr + jj * ldk + d);
                OPS_UNROLL
                for (int v = 0; v < QV; v++) acc[jj][v] = _mm256_fmadd_ps(qv[v], b, acc[jj][v]);
            }
        }
        OPS_UNROLL
        for (int jj = 0; jj < 4; jj++)
            OPS_UNROLL
            for (int v = 0; v < QV; v++) _mm256_store_ps(st + (j + jj) * TM + 8 * v, acc[jj][v]);
    }
    for (; j < nc; j++) {
        __m256 acc[2];
        OPS_UNROLL
        for (int v = 0; v < QV; v++) acc[v] = _mm256_setzero_ps();
        const float *kr = K + j * ldk;
        for (int64_t d = 0; d < hd; d++) {
            const __m256 b = _mm256_broadcast_ss(kr + d);
            OPS_UNROLL
            for (int v = 0; v < QV; v++) acc[v] = _mm256_fmadd_ps(_mm256_load_ps(qt + d * TM + 8 * v), b, acc[v]);
        }
        OPS_UNROLL
        for (int v = 0; v < QV; v++) _mm256_store_ps(st + j * TM + 8 * v, acc[v]);
    }
}

/* Scores into weights for the 8 lanes at offset o (see the AVX-512 tile_softmax). */
static void tile_softmax(float *st, int64_t nc, int64_t c0, const int32_t *nvis, int masked, float *m, float *l,
                         float *corr, int64_t o) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256 mo = _mm256_load_ps(m + o);
    const __m256i nv = _mm256_load_si256((const __m256i *)(nvis + o));
    __m256 mx = mo;
    for (int64_t j = 0; j < nc; j++) {
        __m256 s = _mm256_load_ps(st + j * TM + o);
        if (masked) {
            const __m256 vis = _mm256_castsi256_ps(_mm256_cmpgt_epi32(nv, _mm256_set1_epi32((int)(c0 + j))));
            s = _mm256_blendv_ps(ninf, s, vis);
            _mm256_store_ps(st + j * TM + o, s);
        }
        mx = _mm256_max_ps(mx, s);
    }
    const __m256 mu = _mm256_blendv_ps(mx, _mm256_setzero_ps(), _mm256_cmp_ps(mx, ninf, _CMP_EQ_OQ));
    const __m256 c = exp256(_mm256_sub_ps(mo, mu));
    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < nc; j++) {
        const __m256 s = _mm256_load_ps(st + j * TM + o);
        __m256 p = exp256(_mm256_sub_ps(s, mu));
        if (masked) p = _mm256_andnot_ps(_mm256_cmp_ps(s, ninf, _CMP_EQ_OQ), p);
        _mm256_store_ps(st + j * TM + o, p);
        sum = _mm256_add_ps(sum, p);
    }
    _mm256_store_ps(l + o, _mm256_fmadd_ps(_mm256_load_ps(l + o), c, sum));
    _mm256_store_ps(m + o, mx);
    _mm256_store_ps(corr + o, c);
}

/* O^T = corr O^T + V^T P^T for the lanes of vectors v0..v0+QV (pt, ot and corr already offset). */
static __attribute__((always_inline)) inline void tile_pv(const float *pt, const float *V, int64_t ldv, int64_t nc,
                                                          int64_t hd, float *ot, const float *corr, const int QV) {
    __m256 cv[2];
    OPS_UNROLL
    for (int v = 0; v < QV; v++) cv[v] = _mm256_load_ps(corr + 8 * v);
    int64_t d = 0;
    for (; d + 4 <= hd; d += 4) {
        __m256 acc[4][2];
        OPS_UNROLL
        for (int dd = 0; dd < 4; dd++)
            OPS_UNROLL
            for (int v = 0; v < QV; v++) acc[dd][v] = _mm256_mul_ps(_mm256_load_ps(ot + (d + dd) * TM + 8 * v), cv[v]);
        for (int64_t j = 0; j < nc; j++) {
            __m256 p[2];
            OPS_UNROLL
            for (int v = 0; v < QV; v++) p[v] = _mm256_load_ps(pt + j * TM + 8 * v);
            const float *vr = V + j * ldv + d;
            OPS_UNROLL
            for (int dd = 0; dd < 4; dd++) {
                const __m256 b = _mm256_broadcast_ss(vr + dd);
                OPS_UNROLL
                for (int v = 0; v < QV; v++) acc[dd][v] = _mm256_fmadd_ps(p[v], b, acc[dd][v]);
            }
        }
        OPS_UNROLL
        for (int dd = 0; dd < 4; dd++)
            OPS_UNROLL
            for (int v = 0; v < QV; v++) _mm256_store_ps(ot + (d + dd) * TM + 8 * v, acc[dd][v]);
    }
    for (; d < hd; d++) {
        __m256 acc[2];
        OPS_UNROLL
        for (int v = 0; v < QV; v++) acc[v] = _mm256_mul_ps(_mm256_load_ps(ot + d * TM + 8 * v), cv[v]);
        for (int64_t j = 0; j < nc; j++) {
            const __m256 b = _mm256_broadcast_ss(V + j * ldv + d);
            OPS_UNROLL
            for (int v = 0; v < QV; v++) acc[v] = _mm256_fmadd_ps(_mm256_load_ps(pt + j * TM + 8 * v), b, acc[v]);
        }
        OPS_UNROLL
        for (int v = 0; v < QV; v++) _mm256_store_ps(ot + d * TM + 8 * v, acc[v]);
    }
}

void ops_attn_tile_avx2(const ops_attn_tile *t, uint32_t kv_type, float *scratch) {
    const int64_t hd = t->hd, mv = (t->n_tok * t->r + 7) / 8;
    float *qt = scratch, *ot = qt + hd * TM, *st = ot + hd * TM, *kw = st + TK * TM, *vw = kw + TK * hd;
    float *m = vw + TK * hd, *l = m + TM, *corr = l + TM;
    int32_t *nvis = (int32_t *)(corr + TM);
    int64_t kmin, kmax;
    ops_attn_tile_load(t, qt, nvis, ot, m, l, &kmin, &kmax);
    const int f16 = kv_type == ST_TYPE_F16;
    for (int64_t c0 = 0; c0 < kmax; c0 += TK) {
        const int64_t nc = kmax - c0 < TK ? kmax - c0 : TK;
        const float *K, *V;
        int64_t ld;
        if (f16) {
            const int64_t n_next = kmax - c0 - TK < TK ? kmax - c0 - TK : TK;
            for (int64_t c = 0; c < nc; c++) {
                widen_row(t->k, kv_type, (c0 + c) * t->row, hd, kw + c * hd);
                widen_row(t->v, kv_type, (c0 + c) * t->row, hd, vw + c * hd);
                if (c < n_next) {
                    ops_attn_prefetch_row((const uint16_t *)t->k + (c0 + TK + c) * t->row, hd);
                    ops_attn_prefetch_row((const uint16_t *)t->v + (c0 + TK + c) * t->row, hd);
                }
            }
            K = kw; V = vw; ld = hd;
        } else {
            K = (const float *)t->k + c0 * t->row;
            V = (const float *)t->v + c0 * t->row;
            ld = t->row;
        }
        const int masked = c0 + nc > kmin;
        for (int64_t v0 = 0; v0 < mv; v0 += 2) {
            const int64_t o = 8 * v0;
            if (mv - v0 >= 2) tile_scores(qt + o, K, ld, nc, hd, st + o, 2);
            else tile_scores(qt + o, K, ld, nc, hd, st + o, 1);
        }
        for (int64_t v0 = 0; v0 < mv; v0++) tile_softmax(st, nc, c0, nvis, masked, m, l, corr, 8 * v0);
        for (int64_t v0 = 0; v0 < mv; v0 += 2) {
            const int64_t o = 8 * v0;
            if (mv - v0 >= 2) tile_pv(st + o, V, ld, nc, hd, ot + o, corr + o, 2);
            else tile_pv(st + o, V, ld, nc, hd, ot + o, corr + o, 1);
        }
    }
    ops_attn_tile_store(t, ot, l);
}
