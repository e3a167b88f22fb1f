/* dot_iq.h: the dot products of the grid i-quants (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs,
 * iq3_s) against Q8_K activations, one kernel per type and variant: dot_iq_ref.c (the reference,
 * integer sums as ref_iq.c unpacks the blocks), dot_iq_avx2.c, dot_iq_avx512.c. ST_DOT_IQ_ENTRIES
 * puts a variant's kernels into that variant's table of dot.h. Internal to src/quant. */
#ifndef ST_QUANT_DOT_IQ_H
#define ST_QUANT_DOT_IQ_H

#include "quant/dot.h"

#define ST_DOT_IQ_DECLARE(v)                                                                       \
    void st_dot_iq2_xxs_##v(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out); \
    void st_dot_iq2_xs_##v(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out);  \
    void st_dot_iq2_s_##v(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out);   \
    void st_dot_iq3_xxs_##v(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out); \
    void st_dot_iq3_s_##v(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out);   \
    void st_dot_iq1_s_##v(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out);   \
    void st_dot_iq1_m_##v(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out);
ST_DOT_IQ_DECLARE(ref)
ST_DOT_IQ_DECLARE(avx2)
ST_DOT_IQ_DECLARE(avx512)

#define ST_DOT_IQ_ENTRIES(v)                                                                       \
    [ST_TYPE_IQ2_XXS] = st_dot_iq2_xxs_##v, [ST_TYPE_IQ2_XS] = st_dot_iq2_xs_##v,                  \
    [ST_TYPE_IQ2_S] = st_dot_iq2_s_##v, [ST_TYPE_IQ3_XXS] = st_dot_iq3_xxs_##v,                    \
    [ST_TYPE_IQ3_S] = st_dot_iq3_s_##v, [ST_TYPE_IQ1_S] = st_dot_iq1_s_##v,                        \
    [ST_TYPE_IQ1_M] = st_dot_iq1_m_##v

#endif
