/* test_dot.c: every dot-product variant (scalar, AVX2, AVX-512) against the scalar reference,
 * and the reference against "dequantize both sides, dot in double"; the fast activation
 * converters against the reference quantizers byte for byte.
 *
 * Weights are both quantized from random floats (random blocks for the grid i-quants, which have
 * no quantizer) and raw random bytes (with sane fp16 scales), so
 * every bit pattern of the packed fields is exercised; sizes have odd block counts (the AVX-512
 * kernels pair 32-element blocks) and every nx from 1 to ST_DOT_MAX_NX is run. Tolerances are
 * relative to sum |w_i x_i|: the integer sums are exact, only the f32 rounding order differs. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "quant/dot.h"
#include "quant/quant.h"
#include "quant/random_iq.h"
#include "test.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float frand(void) { return (float)rnd() / 4294967296.0f * 2 - 1; } /* [-1, 1) */

/* the grid i-quants: no quantizer, so make_weights draws their blocks (quant/random_iq.h) */
static const uint32_t grid_types[] = {ST_TYPE_IQ2_XXS, ST_TYPE_IQ2_XS, ST_TYPE_IQ2_S, ST_TYPE_IQ3_XXS,
                                      ST_TYPE_IQ3_S,   ST_TYPE_IQ1_S,  ST_TYPE_IQ1_M};
#define NGRID (sizeof grid_types / sizeof grid_types[0])
static int is_grid_type(uint32_t type) {
    for (size_t i = 0; i < NGRID; i++)
        if (grid_types[i] == type) return 1;
    return 0;
}

static const uint32_t types[] = {ST_TYPE_F32,  ST_TYPE_F16,  ST_TYPE_BF16, ST_TYPE_Q8_0,   ST_TYPE_Q4_0,
                                 ST_TYPE_Q4_1, ST_TYPE_Q5_0, ST_TYPE_Q5_1, ST_TYPE_Q2_K,   ST_TYPE_Q3_K,
                                 ST_TYPE_Q4_K, ST_TYPE_Q5_K, ST_TYPE_Q6_K, ST_TYPE_IQ4_NL, ST_TYPE_IQ4_XS,
                                 ST_TYPE_Q1_0, ST_TYPE_Q2_0, ST_TYPE_TQ1_0, ST_TYPE_TQ2_0,  ST_TYPE_MXFP4,
                                 ST_TYPE_NVFP4};
#define NTYPES (sizeof types / sizeof types[0])

/* byte offsets of the fp16 scale fields of one block, for random-byte blocks */
static int scale_fields(uint32_t type, int off[2]) {
    if (is_grid_type(type)) { off[0] = 0; return type != ST_TYPE_IQ1_M; } /* iq1_m: see iq1_m_finite_d */
    switch (type) {
    case ST_TYPE_Q4_0: case ST_TYPE_Q5_0: case ST_TYPE_Q8_0: case ST_TYPE_IQ4_NL: case ST_TYPE_IQ4_XS:
    case ST_TYPE_Q1_0: case ST_TYPE_Q2_0:
        off[0] = 0; return 1;
    case ST_TYPE_Q4_1: case ST_TYPE_Q5_1: case ST_TYPE_Q4_K: case ST_TYPE_Q5_K:
        off[0] = 0; off[1] = 2; return 2;
    case ST_TYPE_Q2_K: off[0] = 80; off[1] = 82; return 2;
    case ST_TYPE_Q3_K: off[0] = 108; return 1;
    case ST_TYPE_Q6_K: off[0] = 208; return 1;
    case ST_TYPE_TQ1_0: off[0] = 52; return 1;
    case ST_TYPE_TQ2_0: off[0] = 64; return 1;
    default: return 0; /* MXFP4, NVFP4: byte scales, see make_weights */
    }
}

/* iq1_m keeps its d in the top nibbles of its four scale words: a sane half there */
static void iq1_m_finite_d(void *w, int64_t k) {
    for (int64_t b = 0; b < k / QK_K; b++) {
        uint16_t h = st_fp32_to_fp16(frand() * 0.01f), sw[4];
        uint8_t *sc = (uint8_t *)w + (size_t)b * sizeof(block_iq1_m) + 48;
        memcpy(sw, sc, 8);
        for (int i = 0; i < 4; i++) sw[i] = (uint16_t)((sw[i] & 0x0fff) | ((h >> (4 * i)) & 15) << 12);
        memcpy(sc, sw, 8);
    }
}

/* One weight row: from floats through the reference quantizer (random blocks for the types
 * without one), or (raw) random bytes. */
static void make_weights(uint32_t type, int64_t k, int raw, void *w) {
    const st_type_info *t = st_type_get(type);
    size_t bytes = st_row_size(t, k);
    float *f = malloc((size_t)k * sizeof(float));
    float scale = (float)(rnd() % 4 + 1);
    for (int64_t i = 0; i < k; i++) f[i] = frand() * scale;
    if (!raw || t->block_size == 1) {
        if (!st_quantize_row(type, f, w, k)) CHECK(st_random_iq_blocks(type, scale, &rng_state, w, k));
    } else {
        uint8_t *p = w;
        for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rnd();
        int off[2], n = scale_fields(type, off);
        for (int64_t b = 0; b < k / t->block_size; b++)
            for (int s = 0; s < n; s++) {
                uint16_t h = st_fp32_to_fp16(frand() * 0.01f);
                memcpy(p + (size_t)b * (size_t)t->type_size + off[s], &h, 2);
            }
        /* MXFP4's E8M0 exponent: 2^-10 .. 2^-3 (random bytes would reach 2^127); NVFP4's UE4M3
         * scales are all finite, so random bytes stay */
        if (type == ST_TYPE_MXFP4)
            for (int64_t b = 0; b < k / 32; b++) p[(size_t)b * sizeof(block_mxfp4)] = (uint8_t)(117 + rnd() % 8);
    }
    if (raw && type == ST_TYPE_IQ1_M) iq1_m_finite_d(w, k);
    free(f);
}

static void act_ref(uint32_t act, const float *x, void *y, int64_t k) {
    switch (act) {
    case ST_TYPE_F32: st_act_f32_ref(x, y, k); break;
    case ST_TYPE_F16: st_act_f16_ref(x, y, k); break;
    case ST_ACT_F16X: st_act_f16x_ref(x, y, k); break;
    case ST_TYPE_BF16: st_act_bf16_ref(x, y, k); break;
    case ST_TYPE_Q8_0: st_act_q8_0_ref(x, y, k); break;
    case ST_TYPE_Q8_1: st_act_q8_1_ref(x, y, k); break;
    case ST_TYPE_Q8_K: st_quantize_row_q8_K_ref(x, y, k); break;
    }
}

/* the activation's values as the kernel sees them */
static void act_values(uint32_t act, const void *y, float *out, int64_t k) {
    if (act == ST_TYPE_F32 || act == ST_TYPE_F16 || act == ST_TYPE_BF16) {
        st_dequantize_row(act, y, out, k);
    } else if (act == ST_ACT_F16X) {
        memcpy(out, y, (size_t)k * sizeof(float));
    } else if (act == ST_TYPE_Q8_0) {
        const block_q8_0 *b = y;
        for (int64_t i = 0; i < k; i++) out[i] = st_fp16_to_fp32(b[i / 32].d) * b[i / 32].qs[i % 32];
    } else if (act == ST_TYPE_Q8_1) {
        const block_q8_1 *b = y;
        for (int64_t i = 0; i < k; i++) out[i] = st_fp16_to_fp32(b[i / 32].d) * b[i / 32].qs[i % 32];
    } else {
        const block_q8_K *b = y;
        for (int64_t i = 0; i < k; i++) out[i] = b[i / QK_K].d * b[i / QK_K].qs[i % QK_K];
    }
}

/* Q4_1 / Q5_1 meet the block minimum m through Q8_1's s = fp16(d * sum qs), as ggml does; the
 * exact value of what the kernel computes has m * s in place of m * sum(x). */
static double q8_1_sum_correction(uint32_t type, const void *w, const void *xq, const float *xf, int64_t k) {
    const block_q8_1 *x = xq;
    size_t bs = st_type_get(type)->type_size;
    double c = 0;
    for (int64_t b = 0; b < k / 32; b++) {
        uint16_t mh;
        memcpy(&mh, (const char *)w + (size_t)b * bs + 2, 2);
        double sum = 0;
        for (int i = 0; i < 32; i++) sum += xf[32 * b + i];
        c += st_fp16_to_fp32(mh) * (st_fp16_to_fp32(x[b].s) - sum);
    }
    return c;
}

/* the types whose kernels at every level give a row the same bits alone (decode, nx = 1) as
 * among others (a prompt chunk, a verify batch): AVX-512's one-row forms of these run in 256-bit
 * registers (dot_row_avx512.c) and must keep the order of the 512-bit ones */
static int one_row_same_bits(uint32_t type) {
    switch (type) {
    case ST_TYPE_Q8_0: case ST_TYPE_Q4_0: case ST_TYPE_Q4_1: case ST_TYPE_Q5_0: case ST_TYPE_Q5_1:
    case ST_TYPE_IQ4_NL: case ST_TYPE_MXFP4: case ST_TYPE_NVFP4:
        return 1;
    default: return 0;
    }
}

static void test_type(uint32_t type, int64_t k) {
    const st_type_info *t = st_type_get(type);
    uint32_t act = st_dot_act_type(type);
    size_t wbytes = st_row_size(t, k), xbytes = st_dot_act_row_size(act, k);
    void *w = malloc(wbytes);
    char *x = malloc(xbytes * ST_DOT_MAX_NX);
    float *wf = malloc((size_t)k * sizeof(float)), *xf = malloc((size_t)k * sizeof(float));
    for (int raw = 0; raw < 2; raw++) {
        make_weights(type, k, raw, w);
        st_dequantize_row(type, w, wf, k);
        double exact[ST_DOT_MAX_NX], mag[ST_DOT_MAX_NX];
        for (int j = 0; j < ST_DOT_MAX_NX; j++) {
            float scale = j == 3 ? 1e-3f : (float)(j + 1);
            for (int64_t i = 0; i < k; i++) xf[i] = frand() * scale;
            act_ref(act, xf, x + (size_t)j * xbytes, k);
            act_values(act, x + (size_t)j * xbytes, xf, k);
            exact[j] = mag[j] = 0;
            for (int64_t i = 0; i < k; i++) {
                exact[j] += (double)wf[i] * xf[i];
                mag[j] += fabs((double)wf[i] * xf[i]);
            }
            if (act == ST_TYPE_Q8_1) exact[j] += q8_1_sum_correction(type, w, x + (size_t)j * xbytes, xf, k);
        }
        float ref[ST_DOT_MAX_NX];
        st_dot_ref[type](k, w, x, xbytes, ST_DOT_MAX_NX, ref);
        for (int j = 0; j < ST_DOT_MAX_NX; j++)
            CHECKF(fabs(ref[j] - exact[j]) <= 1e-5 * mag[j] + 1e-30, "%s k=%lld raw=%d row %d: ref %g, exact %g (sum|wx| %g)",
                   t->name, (long long)k, raw, j, ref[j], exact[j], mag[j]);
        for (int level = 0; level <= 3; level++) {
            st_cpu_limit(level);
            st_dot_fn fast = st_dot_kernel(type);
            /* every type has every variant: the level asked for is the one run, where the CPU has it */
            const st_cpu_features *f = st_cpu();
            int have = f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni ? 2 : f->avx2 && f->fma && f->f16c ? 1 : 0;
            CHECKF(st_dot_level(type) == have, "%s at level %d runs variant %d, expected %d", t->name, level,
                   st_dot_level(type), have);
            for (int nx = 1; nx <= ST_DOT_MAX_NX; nx++) {
                float got[ST_DOT_MAX_NX];
                fast(k, w, x, xbytes, nx, got);
                for (int j = 0; j < nx; j++)
                    CHECKF(fabs(got[j] - ref[j]) <= 2e-6 * mag[j] + 1e-30,
                           "%s k=%lld raw=%d level %d (variant %d) nx=%d row %d: got %.9g, ref %.9g (sum|wx| %g)",
                           t->name, (long long)k, raw, level, st_dot_level(type), nx, j, got[j], ref[j], mag[j]);
                for (int j = 0; j < nx && one_row_same_bits(type); j++) {
                    float alone;
                    fast(k, w, x + (size_t)j * xbytes, xbytes, 1, &alone);
                    CHECKF(memcmp(&alone, &got[j], sizeof alone) == 0,
                           "%s k=%lld raw=%d level %d nx=%d row %d: alone %.9g, among %d rows %.9g", t->name,
                           (long long)k, raw, st_dot_level(type), nx, j, alone, nx, got[j]);
                }
            }
        }
        st_cpu_limit(3);
    }
    free(w);
    free(x);
    free(wf);
    free(xf);
}

/* Activation converters: same bytes as the reference for random data, exact ties, zeros. */
static void test_converters(void) {
    const uint32_t acts[] = {ST_TYPE_F32, ST_TYPE_F16, ST_ACT_F16X, ST_TYPE_BF16, ST_TYPE_Q8_0, ST_TYPE_Q8_1, ST_TYPE_Q8_K};
    const int64_t k = 3 * QK_K;
    float *x = malloc(k * sizeof(float));
    char *want = malloc(st_dot_act_row_size(ST_TYPE_F32, k)), *got = malloc(st_dot_act_row_size(ST_TYPE_F32, k));
    for (int pattern = 0; pattern < 5; pattern++) {
        for (int64_t i = 0; i < k; i++) {
            switch (pattern) {
            case 0: x[i] = frand() * 3; break;
            case 1: x[i] = (float)((int)(rnd() % 255) - 127) + 0.5f * (i % 2); break; /* ties at .5 */
            case 2: x[i] = (i / 32) % 2 ? 0 : frand() * 1e-3f; break;                /* zero blocks */
            case 3: x[i] = (float)((int)(rnd() % 255) - 127); break;                  /* integers */
            default: x[i] = frand() * 1e4f; break;
            }
        }
        if (pattern == 1) x[0] = 127, x[1] = -127; /* a max with both signs: the first one wins */
        for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
            size_t bytes = st_dot_act_row_size(acts[a], k);
            act_ref(acts[a], x, want, k);
            for (int level = 0; level <= 3; level++) {
                st_cpu_limit(level);
                memset(got, 0x55, bytes);
                st_act_converter(acts[a])(x, got, k);
                CHECKF(memcmp(got, want, bytes) == 0, "converter to %s at level %d, pattern %d differs from the reference",
                       acts[a] == ST_TYPE_Q8_K ? "q8_K" : acts[a] == ST_TYPE_Q8_1 ? "q8_1"
                       : acts[a] == ST_ACT_F16X ? "f16x" : st_type_get(acts[a])->name,
                       level, pattern);
            }
        }
    }
    st_cpu_limit(3);
    free(x);
    free(want);
    free(got);
}

int main(void) {
    char desc[256];
    st_cpu_describe(desc, sizeof desc);
    fprintf(stderr, "cpu: %s\n", desc);
    for (size_t i = 0; i < NTYPES + NGRID; i++) {
        const uint32_t type = i < NTYPES ? types[i] : grid_types[i - NTYPES];
        const st_type_info *t = st_type_get(type);
        int64_t bs = t->block_size == 1 ? 1 : t->block_size;
        const int64_t blocks[] = {1, 3, 8, 11};
        for (int s = 0; s < 4; s++) test_type(type, blocks[s] * (bs == 1 ? 32 : bs) + (bs == 1 ? s * 5 : 0));
    }
    test_converters();
    return test_report("test_dot");
}
