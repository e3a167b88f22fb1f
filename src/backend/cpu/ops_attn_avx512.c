/* ops_attn_avx512.c: one attention work item (a query token and the r query heads of one kv
 * head) with AVX-512.
 *
 * Cells are taken 16 at a time, from it->c_begin. An f16 block of K rows is widened (vcvtph2ps)
 * once into an f32 tile that all r heads then read; an f32 cache is read in place. Per head, the
 * 16 q.k products are left as 16 partial vectors and reduced together by hsum16, so a block's
 * scores come out as one vector; the softmax is then updated block-wise (running max m, sum l,
 * accumulator rescaled by e^(m_old - m_new) once per block) and the block's V rows are added with
 * their weights. The head sizes 64, 128 and 256 (attn_item_fixed) keep q and the accumulators in
 * registers and widen V rows in registers, a few heads at a time; other sizes (attn_item_any)
 * use masked loads and a V tile. Everything is f32; only the order of additions and exp512
 * differ from the reference. */
#include "backend/cpu/ops_avx512.h"

#define BLK 16

static void widen_rows(const void *cache, int64_t off, int64_t row, int64_t nc, int64_t hd, float *dst) {
    for (int64_t c = 0; c < nc; c++) {
        const uint16_t *s = (const uint16_t *)cache + off + c * row;
        for (int64_t i = 0; i < hd; i += 16) {
            const __mmask16 m = tail_mask16(hd - i);
            __m256i h = _mm256_maskz_loadu_epi16(m, s + i);
            _mm512_mask_storeu_ps(dst + c * hd + i, m, _mm512_cvtph_ps(h));
        }
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
        const float *K, *V;
        int64_t ld;
        if (f16) {
            widen_rows(it->k, c0 * it->row, it->row, nc, hd, kt);
            widen_rows(it->v, c0 * it->row, it->row, nc, hd, vt);
            K = kt; V = vt; ld = hd;
        } else {
            K = (const float *)it->k + c0 * it->row;
            V = (const float *)it->v + c0 * it->row;
            ld = it->row;
        }
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
                    a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, K + c * ld + i),
                                        _mm512_maskz_loadu_ps(mk, q + i), a);
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
                    a = _mm512_fmadd_ps(_mm512_set1_ps(pw[h][c]), _mm512_maskz_loadu_ps(mk, V + c * ld + i), a);
                _mm512_mask_storeu_ps(ah + i, mk, a);
            }
        }
    }
    for (int64_t h = 0; h < r; h++) ops_attn_finish(it, h, m[h], l[h], acc + h * hd);
}

/* The same steps with the head size a compile-time constant (64, 128, 256): q and the
 * accumulator rows live in registers and no load is masked. */
static __attribute__((always_inline)) inline void attn_item_fixed(const ops_attn_item *it, uint32_t kv_type,
                                                                  const int HD) {
    const int64_t r = it->r;
    float kt[BLK * ATTN_MAX_HD];
    float acc[ATTN_MAX_GROUP * ATTN_MAX_HD], m[ATTN_MAX_GROUP], l[ATTN_MAX_GROUP];
    float pw[ATTN_MAX_GROUP][BLK], corr[ATTN_MAX_GROUP];
    const int f16 = kv_type == ST_TYPE_F16;
    for (int64_t h = 0; h < r; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
        for (int i = 0; i < HD; i++) acc[h * HD + i] = 0.0f;
    }
    const __m512 vscale = _mm512_set1_ps(it->scale);
    for (int64_t c0 = it->c_begin; c0 < it->n_vis; c0 += BLK) {
        const int64_t nc = it->n_vis - c0 < BLK ? it->n_vis - c0 : BLK;
        const float *K, *V;
        int64_t ld;
        if (f16) {
            for (int64_t c = 0; c < nc; c++) {
                const uint16_t *ks = (const uint16_t *)it->k + (c0 + c) * it->row;
                for (int i = 0; i < HD; i += 16)
                    _mm512_storeu_ps(kt + c * HD + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(ks + i))));
            }
            K = kt; V = NULL; ld = HD;
        } else {
            K = (const float *)it->k + c0 * it->row;
            V = (const float *)it->v + c0 * it->row;
            ld = it->row;
        }
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
                __m512 a = _mm512_mul_ps(_mm512_loadu_ps(K + c * ld), qr[0]);
                OPS_UNROLL
                for (int i = 1; i < HD / 16; i++) a = _mm512_fmadd_ps(_mm512_loadu_ps(K + c * ld + 16 * i), qr[i], a);
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
         * accumulators and one V row fit in registers; an f16 V row is widened in registers
         * once per HP heads instead of through the tile */
        const int HP = HD <= 64 ? 4 : HD <= 128 ? 2 : 1;
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
                if (f16) {
                    const uint16_t *vs = (const uint16_t *)it->v + (c0 + c) * it->row;
                    OPS_UNROLL
                    for (int i = 0; i < HD / 16; i++) vr[i] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vs + 16 * i)));
                } else {
                    OPS_UNROLL
                    for (int i = 0; i < HD / 16; i++) vr[i] = _mm512_loadu_ps(V + c * ld + 16 * i);
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
