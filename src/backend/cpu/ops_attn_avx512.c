/* ops_attn_avx512.c: one attention work item (a query token and the r query heads of one kv
 * head) with AVX-512.
 *
 * Cells are taken 16 at a time, from it->c_begin. An f16 block of K rows is widened (vcvtph2ps)
 * once into an f32 tile that all r heads then read; an f32 cache is read in place. Per head, the
 * 16 q.k products are left as 16 partial vectors and reduced together by hsum16, so a block's
 * scores come out as one vector; the softmax is then updated block-wise (running max m, sum l,
 * accumulator rescaled by e^(m_old - m_new) once per block) and the block's V rows are added with
 * their weights. The head sizes 64, 128 and 256 (attn_item_fixed) keep q and the accumulators in
 * registers, a few heads at a time, and widen an f16 V row in registers when one such pass reads
 * it, into a tile when several do; other sizes (attn_item_any) use masked loads and a V tile.
 * An item over listed cells (QSA) reads them in list order and prefetches the next block's rows.
 * Everything is f32; only the order of additions and exp512 differ from the reference. */
#include "backend/cpu/ops_avx512.h"

#define BLK 16

static void widen_row(const void *cache, int64_t off, int64_t hd, float *dst) {
    const uint16_t *s = (const uint16_t *)cache + off;
    for (int64_t i = 0; i < hd; i += 16) {
        const __mmask16 m = tail_mask16(hd - i);
        __m256i h = _mm256_maskz_loadu_epi16(m, s + i);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(h));
    }
}

/* A listed item's next block of rows into the caches while this one is computed: the cells are
 * scattered over the cache, so the hardware's stream prefetch does not see them coming. */
static void prefetch_next(const ops_attn_item *it, int64_t c0, int64_t hd) {
    const int64_t end = it->n_vis < c0 + 2 * BLK ? it->n_vis : c0 + 2 * BLK;
    for (int64_t c = c0 + BLK; c < end; c++) {
        const int64_t off = ops_attn_cell(it, c) * it->row;
        ops_attn_prefetch_row((const uint16_t *)it->k + off, hd);
        ops_attn_prefetch_row((const uint16_t *)it->v + off, hd);
    }
}

static void attn_item_any(const ops_attn_item *it, uint32_t kv_type) {
    const int64_t hd = it->hd, r = it->r;
    float kt[BLK * ATTN_MAX_HD], vt[BLK * ATTN_MAX_HD];
    float acc[ATTN_MAX_GROUP * ATTN_MAX_HD], m[ATTN_MAX_GROUP], l[ATTN_MAX_GROUP];
    float pw[ATTN_MAX_GROUP][BLK], corr[ATTN_MAX_GROUP];
    const int f16 = kv_type == ST_TYPE_F16;
    for (int64_t h = 0; h < r; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
        for (int64_t i = 0; i < hd; i++) acc[h * hd + i] = 0.0f;
    }
    const __m512 vscale = _mm512_set1_ps(it->scale);
    for (int64_t c0 = it->c_begin; c0 < it->n_vis; c0 += BLK) {
        const int64_t nc = it->n_vis - c0 < BLK ? it->n_vis - c0 : BLK;
        const float *K[BLK], *V[BLK];
        for (int64_t c = 0; c < nc; c++) {
            const int64_t off = ops_attn_cell(it, c0 + c) * it->row;
            if (f16) {
                widen_row(it->k, off, hd, kt + c * hd);
                widen_row(it->v, off, hd, vt + c * hd);
                K[c] = kt + c * hd;
                V[c] = vt + c * hd;
            } else {
                K[c] = (const float *)it->k + off;
                V[c] = (const float *)it->v + off;
            }
        }
        if (f16 && it->cells) prefetch_next(it, c0, hd);
        const __mmask16 valid = tail_mask16(nc);
        for (int64_t h = 0; h < r; h++) {
            const float *q = it->q + h * it->ldq_head;
            __m512 part[BLK];
            OPS_UNROLL
            for (int64_t c = 0; c < BLK; c++) part[c] = _mm512_setzero_ps();
            for (int64_t c = 0; c < nc; c++) {
                __m512 a = _mm512_setzero_ps();
                for (int64_t i = 0; i < hd; i += 16) {
                    const __mmask16 mk = tail_mask16(hd - i);
                    a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, K[c] + i), _mm512_maskz_loadu_ps(mk, q + i), a);
                }
                part[c] = a;
            }
            const __m512 s = _mm512_mul_ps(hsum16(part), vscale);
            const float bmax = _mm512_mask_reduce_max_ps(valid, s);
            const float m_new = bmax > m[h] ? bmax : m[h];
            const __m512 p = _mm512_maskz_mov_ps(valid, exp512(_mm512_sub_ps(s, _mm512_set1_ps(m_new))));
            corr[h] = expf(m[h] - m_new);
            l[h] = l[h] * corr[h] + _mm512_reduce_add_ps(p);
            m[h] = m_new;
            _mm512_storeu_ps(pw[h], p);
        }
        for (int64_t h = 0; h < r; h++) {
            float *ah = acc + h * hd;
            const __m512 ch = _mm512_set1_ps(corr[h]);
            for (int64_t i = 0; i < hd; i += 16) {
                const __mmask16 mk = tail_mask16(hd - i);
                __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, ah + i), ch);
                for (int64_t c = 0; c < nc; c++)
                    a = _mm512_fmadd_ps(_mm512_set1_ps(pw[h][c]), _mm512_maskz_loadu_ps(mk, V[c] + i), a);
                _mm512_mask_storeu_ps(ah + i, mk, a);
            }
        }
    }
    for (int64_t h = 0; h < r; h++) ops_attn_finish(it, h, m[h], l[h], acc + h * hd);
}

/* The same steps with the head size a compile-time constant (64, 128, 256): q and the
 * accumulator rows live in registers and no load is masked. An f16 V row is widened in registers
 * when one pass over the heads uses it, and into a tile once when several do (the same values). */
static __attribute__((always_inline)) inline void attn_item_fixed(const ops_attn_item *it, uint32_t kv_type,
                                                                  const int HD) {
    const int64_t r = it->r;
    float kt[BLK * ATTN_MAX_HD], vt[BLK * ATTN_MAX_HD];
    float acc[ATTN_MAX_GROUP * ATTN_MAX_HD], m[ATTN_MAX_GROUP], l[ATTN_MAX_GROUP];
    float pw[ATTN_MAX_GROUP][BLK], corr[ATTN_MAX_GROUP];
    const int f16 = kv_type == ST_TYPE_F16;
    const int HP = HD <= 64 ? 4 : HD <= 128 ? 2 : 1; /* heads per pass over a block's V rows */
    const int v_tile = f16 && r > HP;
    for (int64_t h = 0; h < r; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
        for (int i = 0; i < HD; i++) acc[h * HD + i] = 0.0f;
    }
    const __m512 vscale = _mm512_set1_ps(it->scale);
    for (int64_t c0 = it->c_begin; c0 < it->n_vis; c0 += BLK) {
        const int64_t nc = it->n_vis - c0 < BLK ? it->n_vis - c0 : BLK;
        const float *K[BLK], *V[BLK];
        const uint16_t *Vh[BLK];
        for (int64_t c = 0; c < nc; c++) {
            const int64_t off = ops_attn_cell(it, c0 + c) * it->row;
            if (f16) {
                const uint16_t *ks = (const uint16_t *)it->k + off;
                for (int i = 0; i < HD; i += 16)
                    _mm512_storeu_ps(kt + c * HD + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(ks + i))));
                K[c] = kt + c * HD;
                Vh[c] = (const uint16_t *)it->v + off;
                if (v_tile) {
                    for (int i = 0; i < HD; i += 16)
                        _mm512_storeu_ps(vt + c * HD + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(Vh[c] + i))));
                    V[c] = vt + c * HD;
                }
            } else {
                K[c] = (const float *)it->k + off;
                V[c] = (const float *)it->v + off;
            }
        }
        if (f16 && it->cells) prefetch_next(it, c0, HD);
        const int v_wide = !f16 || v_tile; /* V[c] holds f32 rows */
        const __mmask16 valid = tail_mask16(nc);
        for (int64_t h = 0; h < r; h++) {
            const float *q = it->q + h * it->ldq_head;
            __m512 qr[ATTN_MAX_HD / 16];
            OPS_UNROLL
            for (int i = 0; i < HD / 16; i++) qr[i] = _mm512_loadu_ps(q + 16 * i);
            __m512 part[BLK];
            OPS_UNROLL
            for (int64_t c = 0; c < BLK; c++) {
                if (c >= nc) { part[c] = _mm512_setzero_ps(); continue; }
                __m512 a = _mm512_mul_ps(_mm512_loadu_ps(K[c]), qr[0]);
                OPS_UNROLL
                for (int i = 1; i < HD / 16; i++) a = _mm512_fmadd_ps(_mm512_loadu_ps(K[c] + 16 * i), qr[i], a);
                part[c] = a;
            }
            const __m512 s = _mm512_mul_ps(hsum16(part), vscale);
            const float bmax = _mm512_mask_reduce_max_ps(valid, s);
            const float m_new = bmax > m[h] ? bmax : m[h];
            const __m512 p = _mm512_maskz_mov_ps(valid, exp512(_mm512_sub_ps(s, _mm512_set1_ps(m_new))));
            corr[h] = expf(m[h] - m_new);
            l[h] = l[h] * corr[h] + _mm512_reduce_add_ps(p);
            m[h] = m_new;
            _mm512_storeu_ps(pw[h], p);
        }
        /* acc_h = corr_h acc_h + sum_c p_h[c] V_c, for HP heads at a time so that their
         * accumulators and one V row fit in registers */
        for (int64_t h0 = 0; h0 < r; h0 += HP) {
            const int64_t nh = r - h0 < HP ? r - h0 : HP;
            __m512 a[4][ATTN_MAX_HD / 16];
            OPS_UNROLL
            for (int hh = 0; hh < HP; hh++) {
                const int live = hh < nh;
                const __m512 ch = _mm512_set1_ps(live ? corr[h0 + hh] : 0.0f);
                OPS_UNROLL
                for (int i = 0; i < HD / 16; i++)
                    a[hh][i] = live ? _mm512_mul_ps(_mm512_loadu_ps(acc + (h0 + hh) * HD + 16 * i), ch) : _mm512_setzero_ps();
            }
            for (int64_t c = 0; c < nc; c++) {
                __m512 vr[ATTN_MAX_HD / 16];
                if (v_wide) {
                    OPS_UNROLL
                    for (int i = 0; i < HD / 16; i++) vr[i] = _mm512_loadu_ps(V[c] + 16 * i);
                } else {
                    OPS_UNROLL
                    for (int i = 0; i < HD / 16; i++) vr[i] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(Vh[c] + 16 * i)));
                }
                OPS_UNROLL
                for (int hh = 0; hh < HP; hh++) {
                    if (hh >= nh) break;
                    const __m512 pc = _mm512_set1_ps(pw[h0 + hh][c]);
                    OPS_UNROLL
                    for (int i = 0; i < HD / 16; i++) a[hh][i] = _mm512_fmadd_ps(pc, vr[i], a[hh][i]);
                }
            }
            OPS_UNROLL
            for (int hh = 0; hh < HP; hh++) {
                if (hh >= nh) break;
                OPS_UNROLL
                for (int i = 0; i < HD / 16; i++) _mm512_storeu_ps(acc + (h0 + hh) * HD + 16 * i, a[hh][i]);
            }
        }
    }
    for (int64_t h = 0; h < r; h++) ops_attn_finish(it, h, m[h], l[h], acc + h * HD);
}

void ops_attn_item_avx512(const ops_attn_item *it, uint32_t kv_type) {
    switch (it->hd) {
    case 64: attn_item_fixed(it, kv_type, 64); break;
    case 128: attn_item_fixed(it, kv_type, 128); break;
    case 256: attn_item_fixed(it, kv_type, 256); break;
    default: attn_item_any(it, kv_type); break;
    }
}

/* ---- The tiled prompt kernel: up to 64 query rows (MV vectors of 16 lanes) against the cells in
 * blocks of 64. Per block: S^T = K Q^T (4 cells x MV vectors of accumulators, K broadcast, Q^T
 * rows loaded), the online softmax per lane with exp512, then O^T = corr O^T + V^T P^T (4 head
 * dims x MV vectors, V broadcast). An f16 block is widened once into an f32 tile that every row
 * then reads; an f32 cache is read in place. ---- */
#define TM OPS_ATTN_TILE_M
#define TK OPS_ATTN_TILE_K

static __attribute__((always_inline)) inline void tile_scores(const float *qt, const float *K, int64_t ldk,
                                                              int64_t nc, int64_t hd, float *st, const int MV) {
    int64_t j = 0;
    for (; j + 4 <= nc; j += 4) {
        __m512 acc[4][4];
        OPS_UNROLL
        for (int jj = 0; jj < 4; jj++)
            OPS_UNROLL
            for (int v = 0; v < MV; v++) acc[jj][v] = _mm512_setzero_ps();
        const float *kr = K + j * ldk;
        for (int64_t d = 0; d < hd; d++) {
            __m512 qv[4];
            OPS_UNROLL
            for (int v = 0; v < MV; v++) qv[v] = _mm512_load_ps(qt + d * TM + 16 * v);
            OPS_UNROLL
            for (int jj = 0; jj < 4; jj++) {
                const __m512 b = _mm512_set1_ps(kr[jj * ldk + d]);
                OPS_UNROLL
                for (int v = 0; v < MV; v++) acc[jj][v] = _mm512_fmadd_ps(qv[v], b, acc[jj][v]);
            }
        }
        OPS_UNROLL
        for (int jj = 0; jj < 4; jj++)
            OPS_UNROLL
            for (int v = 0; v < MV; v++) _mm512_store_ps(st + (j + jj) * TM + 16 * v, acc[jj][v]);
    }
    for (; j < nc; j++) {
        __m512 acc[4];
        OPS_UNROLL
        for (int v = 0; v < MV; v++) acc[v] = _mm512_setzero_ps();
        const float *kr = K + j * ldk;
        for (int64_t d = 0; d < hd; d++) {
            const __m512 b = _mm512_set1_ps(kr[d]);
            OPS_UNROLL
            for (int v = 0; v < MV; v++) acc[v] = _mm512_fmadd_ps(_mm512_load_ps(qt + d * TM + 16 * v), b, acc[v]);
        }
        OPS_UNROLL
        for (int v = 0; v < MV; v++) _mm512_store_ps(st + j * TM + 16 * v, acc[v]);
    }
}

/* Scores of the block's nc cells from c0 into weights, in place; the running max m and sum l
 * updated, corr = e^(m_old - m_new) per lane. A lane that has seen no visible cell keeps m = -inf
 * and is computed against 0 so that no inf - inf appears. */
static __attribute__((always_inline)) inline void tile_softmax(float *st, int64_t nc, int64_t c0, const int32_t *nvis,
                                                               int masked, float *m, float *l, float *corr, const int MV) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    OPS_UNROLL
    for (int v = 0; v < MV; v++) {
        const __m512 mo = _mm512_load_ps(m + 16 * v);
        const __m512i nv = _mm512_load_si512((const void *)(nvis + 16 * v));
        __m512 mx = mo;
        for (int64_t j = 0; j < nc; j++) {
            __m512 s = _mm512_load_ps(st + j * TM + 16 * v);
            if (masked) {
                const __mmask16 vis = _mm512_cmpgt_epi32_mask(nv, _mm512_set1_epi32((int)(c0 + j)));
                s = _mm512_mask_mov_ps(ninf, vis, s);
                _mm512_store_ps(st + j * TM + 16 * v, s);
            }
            mx = _mm512_max_ps(mx, s);
        }
        const __m512 mu = _mm512_mask_mov_ps(mx, _mm512_cmp_ps_mask(mx, ninf, _CMP_EQ_OQ), _mm512_setzero_ps());
        const __m512 c = exp512(_mm512_sub_ps(mo, mu));
        __m512 sum = _mm512_setzero_ps();
        for (int64_t j = 0; j < nc; j++) {
            const __m512 p = exp512(_mm512_sub_ps(_mm512_load_ps(st + j * TM + 16 * v), mu));
            _mm512_store_ps(st + j * TM + 16 * v, p);
            sum = _mm512_add_ps(sum, p);
        }
        _mm512_store_ps(l + 16 * v, _mm512_fmadd_ps(_mm512_load_ps(l + 16 * v), c, sum));
        _mm512_store_ps(m + 16 * v, mx);
        _mm512_store_ps(corr + 16 * v, c);
    }
}

static __attribute__((always_inline)) inline void tile_pv(const float *pt, const float *V, int64_t ldv, int64_t nc,
                                                          int64_t hd, float *ot, const float *corr, const int MV) {
    __m512 cv[4];
    OPS_UNROLL
    for (int v = 0; v < MV; v++) cv[v] = _mm512_load_ps(corr + 16 * v);
    int64_t d = 0;
    for (; d + 4 <= hd; d += 4) {
        __m512 acc[4][4];
        OPS_UNROLL
        for (int dd = 0; dd < 4; dd++)
            OPS_UNROLL
            for (int v = 0; v < MV; v++) acc[dd][v] = _mm512_mul_ps(_mm512_load_ps(ot + (d + dd) * TM + 16 * v), cv[v]);
        for (int64_t j = 0; j < nc; j++) {
            __m512 p[4];
            OPS_UNROLL
            for (int v = 0; v < MV; v++) p[v] = _mm512_load_ps(pt + j * TM + 16 * v);
            const float *vr = V + j * ldv + d;
            OPS_UNROLL
            for (int dd = 0; dd < 4; dd++) {
                const __m512 b = _mm512_set1_ps(vr[dd]);
                OPS_UNROLL
                for (int v = 0; v < MV; v++) acc[dd][v] = _mm512_fmadd_ps(p[v], b, acc[dd][v]);
            }
        }
        OPS_UNROLL
        for (int dd = 0; dd < 4; dd++)
            OPS_UNROLL
            for (int v = 0; v < MV; v++) _mm512_store_ps(ot + (d + dd) * TM + 16 * v, acc[dd][v]);
    }
    for (; d < hd; d++) {
        __m512 acc[4];
        OPS_UNROLL
        for (int v = 0; v < MV; v++) acc[v] = _mm512_mul_ps(_mm512_load_ps(ot + d * TM + 16 * v), cv[v]);
        for (int64_t j = 0; j < nc; j++) {
            const __m512 b = _mm512_set1_ps(V[j * ldv + d]);
            OPS_UNROLL
            for (int v = 0; v < MV; v++) acc[v] = _mm512_fmadd_ps(_mm512_load_ps(pt + j * TM + 16 * v), b, acc[v]);
        }
        OPS_UNROLL
        for (int v = 0; v < MV; v++) _mm512_store_ps(ot + d * TM + 16 * v, acc[v]);
    }
}

static __attribute__((always_inline)) inline void attn_tile_mv(const ops_attn_tile *t, uint32_t kv_type,
                                                               float *scratch, const int MV) {
    const int64_t hd = t->hd;
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
                widen_row(t->k, (c0 + c) * t->row, hd, kw + c * hd);
                widen_row(t->v, (c0 + c) * t->row, hd, vw + c * hd);
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
        tile_scores(qt, K, ld, nc, hd, st, MV);
        tile_softmax(st, nc, c0, nvis, c0 + nc > kmin, m, l, corr, MV);
        tile_pv(st, V, ld, nc, hd, ot, corr, MV);
    }
    ops_attn_tile_store(t, ot, l);
}

void ops_attn_tile_avx512(const ops_attn_tile *t, uint32_t kv_type, float *scratch) {
    switch ((t->n_tok * t->r + 15) / 16) {
    case 1: attn_tile_mv(t, kv_type, scratch, 1); break;
    case 2: attn_tile_mv(t, kv_type, scratch, 2); break;
    case 3: attn_tile_mv(t, kv_type, scratch, 3); break;
    default: attn_tile_mv(t, kv_type, scratch, 4); break;
    }
}

/* f32 -> f16 with the hardware conversion, round to nearest even: the same bits as
 * st_fp32_to_fp16 for every non-NaN input (a NaN stays a quiet NaN with its payload, as ggml's own
 * F16C path does, instead of the canonical 0x7E00). */
void ops_f32_to_f16_avx512(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(n - i);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_mask_storeu_epi16(dst + i, m, h);
    }
}
