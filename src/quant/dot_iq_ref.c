/* dot_iq_ref.c: the reference dot products of the grid i-quants against Q8_K, plain C on the
 * blocks as ref_iq.c unpacks them, in ggml's order: per super-block the integer sum of
 * (2s + 1) * q * x over its sub-blocks (and for iq1 the deltas' sum of (2s + 1) * sign * x), then
 * d * d_x times that in f32, the type's 1/8 or 1/4 taken once at the end. */
#include "quant/dot_iq.h"

#include "quant/iq_grids.h"
#include "quant/ref_iq.h"

static float dot_iq_row(uint32_t type, int64_t k, const void *w, const block_q8_K *x) {
    const size_t bs = (size_t)st_type_get(type)->type_size;
    const int iq1 = type == ST_TYPE_IQ1_S || type == ST_TYPE_IQ1_M;
    st_iq_unpacked u;
    float sum = 0;
    for (int64_t b = 0; b < k / QK_K; b++) {
        st_iq_unpack(type, (const char *)w + (size_t)b * bs, &u);
        int bsum = 0, dsum = 0;
        for (int t = 0; t < QK_K / 16; t++) {
            const int ls = 2 * u.s[t] + 1;
            int isum = 0;
            for (int i = 16 * t; i < 16 * t + 16; i++) isum += u.q[i] * x[b].qs[i];
            bsum += ls * isum;
            for (int g = 2 * t; iq1 && g < 2 * t + 2; g++) {
                int xs = 0;
                for (int i = 8 * g; i < 8 * g + 8; i++) xs += x[b].qs[i];
                dsum += ls * u.delta[g] * xs;
            }
        }
        if (iq1) sum += u.d * x[b].d * ((float)bsum + ST_IQ1_DELTA * (float)dsum);
        else sum += u.d * x[b].d * (float)bsum;
    }
    switch (type) {
    case ST_TYPE_IQ2_XXS: case ST_TYPE_IQ2_XS: case ST_TYPE_IQ2_S: return 0.125f * sum;
    case ST_TYPE_IQ3_XXS: return 0.25f * sum;
    default: return sum;
    }
}

#define REF_IQ_KERNEL(name, TYPE)                                                                  \
    void st_dot_##name##_ref(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out) { \
        for (int j = 0; j < nx; j++) out[j] = dot_iq_row(TYPE, k, w, (const block_q8_K *)((const char *)x + (size_t)j * xs)); \
    }
REF_IQ_KERNEL(iq2_xxs, ST_TYPE_IQ2_XXS)
REF_IQ_KERNEL(iq2_xs, ST_TYPE_IQ2_XS)
REF_IQ_KERNEL(iq2_s, ST_TYPE_IQ2_S)
REF_IQ_KERNEL(iq3_xxs, ST_TYPE_IQ3_XXS)
REF_IQ_KERNEL(iq3_s, ST_TYPE_IQ3_S)
REF_IQ_KERNEL(iq1_s, ST_TYPE_IQ1_S)
REF_IQ_KERNEL(iq1_m, ST_TYPE_IQ1_M)
