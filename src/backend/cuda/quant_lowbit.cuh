/* quant_lowbit.cuh: the block decode of the low-bit weight types on the GPU (iq4_xs, iq3_xxs,
 * iq3_s, iq2_xs, iq4_nl, q2_0, q2_K, q3_K) and of the legacy 32-element blocks that quantizers
 * fall back to where a row is not a multiple of 256 (q4_0, q4_1, q5_0, q5_1), once, for every
 * kernel that reads them: the decode matvec's unit dot products on 8-bit activations, and the
 * dequantizers of the prompt GEMM, the MoE prefill and get_rows. Only matmul.cu includes it (the
 * grids live in its device memory); the MoE prefill asks matmul.cu for its dequantized experts
 * (cu_dequant_experts_lowbit).
 *
 * All twelve types share one shape: every group of 8 consecutive elements decodes to 8 signed
 * int8 values q, and every 16 elements share one float factor f (and, q2_K, q4_1 and q5_1, a
 * minimum m): value = f * q (or f * q - m). A type is a traits struct lb<T> with grp8 (group g of
 * a block as two ints of 4 int8 each) and factor/minv (sub-block t of 16); the generic code below
 * turns that into a 32-element unit dot (dp4a against the activations' int8, one f per 16) and
 * into the dequantized values, evaluated in the order of the CPU's reference dequantizers (src/quant/
 * ref_iq.c, ref_iq4.c, ref_lowbit.c, ref_k.c, ref_legacy.c), so that the GPU's f16/f32 weights equal
 * st_dequantize_row's bit for bit (tests/cuda/test_cuda_host.cu checks it on random blocks).
 *
 * The grids, sign masks and iq4 levels are src/quant's own tables (quant/iq_grids.h), copied to
 * device memory by cu_lowbit_upload when a context opens; the host build of these functions reads
 * the host tables directly. Blocks of 74, 98, 110, 18 and 22 bytes are only 2-byte aligned, so their
 * words are read as halves (ld_int_b2). */
#ifndef ST_BACKEND_CUDA_QUANT_LOWBIT_CUH
#define ST_BACKEND_CUDA_QUANT_LOWBIT_CUH

#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>
extern "C" {
#include "quant/quant.h"
#include "quant/iq_grids.h"
}

/* The decode functions are __host__ __device__ so that tests/cuda/test_cuda_host.cu checks the
 * very same code against the CPU reference on a machine without a GPU; these shims give the host
 * the integer intrinsics they use. */
#define HD __host__ __device__ __forceinline__

HD int dp4a(int a, int b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; i++) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
#endif
}
/* per byte a - b, signed, saturating */
HD int vsubss4(int a, int b) {
#ifdef __CUDA_ARCH__
    return __vsubss4(a, b);
#else
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) {
        int v = (int)(int8_t)(a >> (8 * i)) - (int)(int8_t)(b >> (8 * i));
        v = v < -128 ? -128 : v > 127 ? 127 : v;
        r |= (uint32_t)(uint8_t)v << (8 * i);
    }
    return (int)r;
#endif
}
/* bytes of {hi:lo} picked by the 3-bit selectors in the low 4 nibbles of s (their bit 3 clear) */
HD uint32_t byte_perm(uint32_t lo, uint32_t hi, uint32_t s) {
#ifdef __CUDA_ARCH__
    return __byte_perm(lo, hi, s);
#else
    const uint64_t v = (uint64_t)hi << 32 | lo;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)(uint8_t)(v >> (8 * ((s >> (4 * i)) & 7))) << (8 * i);
    return r;
#endif
}
HD float h2f(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    return st_fp16_to_fp32(h);
#endif
}
HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
HD float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
/* int from two 2-byte aligned halves (Q6_K, Q8_0 and most low-bit blocks are only 2-byte aligned) */
HD int ld_int_b2(const uint8_t *p, int i) {
    const uint16_t *h = (const uint16_t *)p;
    return (int)((uint32_t)h[2 * i] | ((uint32_t)h[2 * i + 1] << 16));
}
/* 32 bytes from a 16-byte aligned address as two 16-byte loads */
HD void ld_32b(const void *p, int v[8]) {
    const int4 a = ((const int4 *)p)[0], b = ((const int4 *)p)[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

/* ---- The tables, in device memory ------------------------------------------------------------ */

static __device__ uint64_t lb_grid_iq2xs[512];
static __device__ uint32_t lb_grid_iq3xxs[256], lb_grid_iq3s[512];
static __device__ uint8_t lb_signs[128];
static __device__ uint32_t lb_iq4nl[4];   /* the 16 levels as 4 words of 4 bytes */

#ifdef __CUDA_ARCH__
#define LB_TABLE(dev, host) (dev)
#else
#define LB_TABLE(dev, host) (host)
#endif

HD uint64_t grid_iq2xs(int i) { return LB_TABLE(lb_grid_iq2xs, st_iq2xs_grid)[i]; }
HD uint32_t grid_iq3xxs(int i) { return LB_TABLE(lb_grid_iq3xxs, st_iq3xxs_grid)[i]; }
HD uint32_t grid_iq3s(int i) { return LB_TABLE(lb_grid_iq3s, st_iq3s_grid)[i]; }
HD unsigned sign_mask(int i) { return LB_TABLE(lb_signs, st_iq_signs)[i]; }
HD uint32_t iq4nl_word(int i) {
#ifdef __CUDA_ARCH__
    return lb_iq4nl[i];
#else
    uint32_t w;
    memcpy(&w, st_iq4nl_levels + 4 * i, 4);
    return w;
#endif
}

/* ---- Byte arithmetic shared by the types ------------------------------------------------------ */

/* 4 unsigned grid bytes (each 1..127) negated where bit j of the 4-bit mask m is set:
 * s = 0xFF in those bytes, and (g ^ 0xFF) + 1 = -g per byte, with no carry because g >= 1. */
HD int apply_signs4(uint32_t g, unsigned m) {
    const uint32_t s = ((m * 0x00204081u) & 0x01010101u) * 0xFFu;
    return (int)((g ^ s) + (s & 0x01010101u));
}
/* per byte v - k for bytes v in 0..127 and k <= v + 128 (no borrow crosses a byte) */
HD int sub_bytes(uint32_t v, uint32_t k) { return (int)(((v | 0x80808080u) - k) ^ 0x80808080u); }
/* the iq4 level of each of 4 nibble indices, one per byte (v & 0x0F0F0F0F) */
HD int iq4_levels4(uint32_t v) {
    const uint32_t i7 = v & 0x07070707u;
    const uint32_t sel = (i7 & 7) | ((i7 >> 4) & 0x70) | ((i7 >> 8) & 0x700) | ((i7 >> 12) & 0x7000);
    const uint32_t lo = byte_perm(iq4nl_word(0), iq4nl_word(1), sel);
    const uint32_t hi = byte_perm(iq4nl_word(2), iq4nl_word(3), sel);
    const uint32_t m = ((v >> 3) & 0x01010101u) * 0xFFu;
    return (int)((lo & ~m) | (hi & m));
}
/* the 2-bit fields of byte b (element 4k+i at bits 2i) spread one per byte */
HD uint32_t spread2(uint32_t b) { return (b | b << 6 | b << 12 | b << 18) & 0x03030303u; }

/* ---- The types -------------------------------------------------------------------------------- */

/* lb<T>: TYPE = T; QK elements in BYTES per block; grp8(blk, g, q): group g (elements 8g .. 8g+7) as two
 * ints; factor(blk, t) and minv(blk, t): sub-block t (elements 16t .. 16t+15). ELEMS: the matvec
 * unit. */
template <int T> struct lb;

/* iq4_xs: sub-block j of 32: 6-bit scale (biased by 32), 16 bytes of nibbles, low nibbles the
 * first 16 elements; value d * scale * level. */
template <> struct lb<ST_TYPE_IQ4_XS> {
    enum { TYPE = ST_TYPE_IQ4_XS, QK = 256, BYTES = 136, ELEMS = 32, HAS_MIN = 0 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) {
        const uint8_t *qs = b + 8 + 16 * (g >> 2) + 8 * (g & 1);
        const int sh = 4 * ((g >> 1) & 1);
        for (int i = 0; i < 2; i++) q[i] = iq4_levels4(((uint32_t)ld_int_b2(qs, i) >> sh) & 0x0F0F0F0Fu);
    }
    static HD float factor(const uint8_t *b, int t) {
        const int j = t >> 1;
        const int sc = (((b[4 + j / 2] >> (4 * (j % 2))) & 15) | ((*(const uint16_t *)(b + 2) >> (2 * j)) & 3) << 4) - 32;
        return h2f(*(const uint16_t *)b) * (float)sc;
    }
    static HD float minv(const uint8_t *, int) { return 0.0f; }
};

/* iq4_nl: blocks of 32 with one f16 d, nibbles as iq4_xs's sub-block */
template <> struct lb<ST_TYPE_IQ4_NL> {
    enum { TYPE = ST_TYPE_IQ4_NL, QK = 32, BYTES = 18, ELEMS = 32, HAS_MIN = 0 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) {
        const uint8_t *qs = b + 2 + 8 * (g & 1);
        const int sh = 4 * (g >> 1);
        for (int i = 0; i < 2; i++) q[i] = iq4_levels4(((uint32_t)ld_int_b2(qs, i) >> sh) & 0x0F0F0F0Fu);
    }
    static HD float factor(const uint8_t *b, int) { return h2f(*(const uint16_t *)b); }
    static HD float minv(const uint8_t *, int) { return 0.0f; }
};

/* iq3_xxs: per 32 elements 8 grid bytes (4 values each) and a u32 of 4 x 7-bit sign indices and
 * the scale s (top 4 bits); factor d * (0.5 + s) * 0.5. */
template <> struct lb<ST_TYPE_IQ3_XXS> {
    enum { TYPE = ST_TYPE_IQ3_XXS, QK = 256, BYTES = 98, ELEMS = 32, HAS_MIN = 0 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) {
        const int ib = g >> 2, l = g & 3;
        const unsigned m = sign_mask(((uint32_t)ld_int_b2(b + 66 + 4 * ib, 0) >> (7 * l)) & 127);
        const unsigned ix = *(const uint16_t *)(b + 2 + 8 * ib + 2 * l);   /* two grid bytes */
        q[0] = apply_signs4(grid_iq3xxs((int)(ix & 255)), m & 15);
        q[1] = apply_signs4(grid_iq3xxs((int)(ix >> 8)), m >> 4);
    }
    static HD float factor(const uint8_t *b, int t) {
        const int s = (int)((uint32_t)ld_int_b2(b + 66 + 4 * (t >> 1), 0) >> 28);
        return h2f(*(const uint16_t *)b) * (0.5f + (float)s) * 0.5f;
    }
    static HD float minv(const uint8_t *, int) { return 0.0f; }
};

/* iq3_s: 9-bit grid indices (a byte of qs, the top bit from qh), full sign bytes, 4-bit s per 32;
 * factor d * (2s + 1). */
template <> struct lb<ST_TYPE_IQ3_S> {
    enum { TYPE = ST_TYPE_IQ3_S, QK = 256, BYTES = 110, ELEMS = 32, HAS_MIN = 0 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) {
        const int ib = g >> 2, l = g & 3;
        const unsigned qh = b[66 + ib], m = b[74 + g];
        const unsigned ix = *(const uint16_t *)(b + 2 + 8 * ib + 2 * l);   /* two index bytes */
        const int i0 = (int)(ix & 255) | ((qh >> (2 * l)) & 1) << 8;
        const int i1 = (int)(ix >> 8) | ((qh >> (2 * l + 1)) & 1) << 8;
        q[0] = apply_signs4(grid_iq3s(i0), m & 15);
        q[1] = apply_signs4(grid_iq3s(i1), m >> 4);
    }
    static HD float factor(const uint8_t *b, int t) {
        const int s = (b[106 + (t >> 2)] >> (4 * ((t >> 1) & 1))) & 15;
        return h2f(*(const uint16_t *)b) * (float)(2 * s + 1);
    }
    static HD float minv(const uint8_t *, int) { return 0.0f; }
};

/* iq2_xs: per 8 elements a u16 (9-bit grid index, 7-bit sign index); 4-bit s per 16;
 * factor d * (0.5 + s) * 0.25. */
template <> struct lb<ST_TYPE_IQ2_XS> {
    enum { TYPE = ST_TYPE_IQ2_XS, QK = 256, BYTES = 74, ELEMS = 32, HAS_MIN = 0 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) {
        const unsigned v = *(const uint16_t *)(b + 2 + 2 * g);
        const uint64_t gr = grid_iq2xs((int)(v & 511));
        const unsigned m = sign_mask((int)(v >> 9));
        q[0] = apply_signs4((uint32_t)gr, m & 15);
        q[1] = apply_signs4((uint32_t)(gr >> 32), m >> 4);
    }
    static HD float factor(const uint8_t *b, int t) {
        const int s = (b[66 + (t >> 1)] >> (4 * (t & 1))) & 15;
        return h2f(*(const uint16_t *)b) * (0.5f + (float)s) * 0.25f;
    }
    static HD float minv(const uint8_t *, int) { return 0.0f; }
};

/* q2_0: blocks of 64, element j at bits 2(j%4) of byte j/4, value (q - 1) * d */
template <> struct lb<ST_TYPE_Q2_0> {
    enum { TYPE = ST_TYPE_Q2_0, QK = 64, BYTES = 18, ELEMS = 32, HAS_MIN = 0 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) {
        const unsigned w = *(const uint16_t *)(b + 2 + 2 * g);
        q[0] = sub_bytes(spread2(w & 255), 0x01010101u);
        q[1] = sub_bytes(spread2(w >> 8), 0x01010101u);
    }
    static HD float factor(const uint8_t *b, int) { return h2f(*(const uint16_t *)b); }
    static HD float minv(const uint8_t *, int) { return 0.0f; }
};

/* q2_K: element 128h + 32s + 16t + l is bits 2s of qs[32h + 16t + l], sub-block 8h + 2s + t (= the
 * element / 16) has a byte of 4-bit scale and 4-bit min: value d*sc*q - dmin*m. */
template <> struct lb<ST_TYPE_Q2_K> {
    enum { TYPE = ST_TYPE_Q2_K, QK = 256, BYTES = 84, ELEMS = 32, HAS_MIN = 1 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) {
        const int e = 8 * g, h = e >> 7, s = (e >> 5) & 3, tl = e & 31;
        const uint8_t *qs = b + 16 + 32 * h + tl;
        for (int i = 0; i < 2; i++) q[i] = ((uint32_t)ld_int_b2(qs, i) >> (2 * s)) & 0x03030303u;
    }
    static HD float factor(const uint8_t *b, int t) { return h2f(*(const uint16_t *)(b + 80)) * (float)(b[t] & 15); }
    static HD float minv(const uint8_t *b, int t) { return h2f(*(const uint16_t *)(b + 82)) * (float)(b[t] >> 4); }
};

/* q3_K: q2_K's 2-bit fields (qs at 32), a high bit in hmask[16t + l] bit 4h + s that when clear
 * subtracts 4, and 6-bit scales biased by 32 (low nibbles in bytes 0-7 of scales, top two bits in
 * byte 8 + t%4); value d * scale * q. */
template <> struct lb<ST_TYPE_Q3_K> {
    enum { TYPE = ST_TYPE_Q3_K, QK = 256, BYTES = 110, ELEMS = 32, HAS_MIN = 0 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) {
        const int e = 8 * g, h = e >> 7, s = (e >> 5) & 3, tl = e & 31;
        const uint8_t *qs = b + 32 + 32 * h + tl, *hm = b + tl;
        for (int i = 0; i < 2; i++) {
            const uint32_t lo = ((uint32_t)ld_int_b2(qs, i) >> (2 * s)) & 0x03030303u;
            const uint32_t hb = ((uint32_t)ld_int_b2(hm, i) >> (4 * h + s)) & 0x01010101u;
            q[i] = sub_bytes(lo | hb << 2, 0x04040404u);
        }
    }
    static HD float factor(const uint8_t *b, int t) {
        const uint8_t *sc = b + 96;
        const int lo = t < 8 ? sc[t] & 15 : sc[t - 8] >> 4, hi = (sc[8 + t % 4] >> (2 * (t / 4))) & 3;
        return h2f(*(const uint16_t *)(b + 108)) * (float)((lo | hi << 4) - 32);
    }
    static HD float minv(const uint8_t *, int) { return 0.0f; }
};

/* q4_0, q4_1, q5_0, q5_1: blocks of 32, an f16 d (and, the _1 forms, an f16 minimum m), 16 bytes of
 * nibbles (low nibbles elements 0..15, high 16..31) and, the q5 forms, a u32 qh whose bit j is
 * element j's fifth bit. q4_0: d * (q - 8); q5_0: d * (q - 16); the _1 forms d * q + m (minv -m).
 * Group g: nibbles of qs[8 (g & 1) ..], shift 4 (g >> 1); qh bits 8g .. 8g+7. */
HD void nib_grp8(const uint8_t *qs, int g, int q[2]) {
    const int sh = 4 * (g >> 1);
    for (int i = 0; i < 2; i++) q[i] = ((uint32_t)ld_int_b2(qs + 8 * (g & 1), i) >> sh) & 0x0F0F0F0Fu;
}
/* the fifth bits of a group from its qh byte: bit i of m to bit 4 of byte i */
HD void q5_high(unsigned m, int q[2]) {
    q[0] |= (int)((((m & 15) * 0x00204081u) & 0x01010101u) << 4);
    q[1] |= (int)((((m >> 4) * 0x00204081u) & 0x01010101u) << 4);
}
template <> struct lb<ST_TYPE_Q4_0> {
    enum { TYPE = ST_TYPE_Q4_0, QK = 32, BYTES = 18, ELEMS = 32, HAS_MIN = 0 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) {
        nib_grp8(b + 2, g, q);
        for (int i = 0; i < 2; i++) q[i] = sub_bytes((uint32_t)q[i], 0x08080808u);
    }
    static HD float factor(const uint8_t *b, int) { return h2f(*(const uint16_t *)b); }
    static HD float minv(const uint8_t *, int) { return 0.0f; }
};
template <> struct lb<ST_TYPE_Q4_1> {
    enum { TYPE = ST_TYPE_Q4_1, QK = 32, BYTES = 20, ELEMS = 32, HAS_MIN = 1 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) { nib_grp8(b + 4, g, q); }
    static HD float factor(const uint8_t *b, int) { return h2f(*(const uint16_t *)b); }
    static HD float minv(const uint8_t *b, int) { return -h2f(*(const uint16_t *)(b + 2)); }
};
template <> struct lb<ST_TYPE_Q5_0> {
    enum { TYPE = ST_TYPE_Q5_0, QK = 32, BYTES = 22, ELEMS = 32, HAS_MIN = 0 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) {
        nib_grp8(b + 6, g, q);
        q5_high(b[2 + g], q);
        for (int i = 0; i < 2; i++) q[i] = sub_bytes((uint32_t)q[i], 0x10101010u);
    }
    static HD float factor(const uint8_t *b, int) { return h2f(*(const uint16_t *)b); }
    static HD float minv(const uint8_t *, int) { return 0.0f; }
};
template <> struct lb<ST_TYPE_Q5_1> {
    enum { TYPE = ST_TYPE_Q5_1, QK = 32, BYTES = 24, ELEMS = 32, HAS_MIN = 1 };
    static HD void grp8(const uint8_t *b, int g, int q[2]) {
        nib_grp8(b + 8, g, q);
        q5_high(b[4 + g], q);
    }
    static HD float factor(const uint8_t *b, int) { return h2f(*(const uint16_t *)b); }
    static HD float minv(const uint8_t *b, int) { return -h2f(*(const uint16_t *)(b + 2)); }
};

/* The types above, for the dispatch switches: F(type id). */
#define LB_CASES(F) \
    case ST_TYPE_IQ4_XS: F(ST_TYPE_IQ4_XS); break; \
    case ST_TYPE_IQ3_XXS: F(ST_TYPE_IQ3_XXS); break; \
    case ST_TYPE_IQ3_S: F(ST_TYPE_IQ3_S); break; \
    case ST_TYPE_IQ2_XS: F(ST_TYPE_IQ2_XS); break; \
    case ST_TYPE_IQ4_NL: F(ST_TYPE_IQ4_NL); break; \
    case ST_TYPE_Q2_0: F(ST_TYPE_Q2_0); break; \
    case ST_TYPE_Q2_K: F(ST_TYPE_Q2_K); break; \
    case ST_TYPE_Q3_K: F(ST_TYPE_Q3_K); break; \
    case ST_TYPE_Q4_0: F(ST_TYPE_Q4_0); break; \
    case ST_TYPE_Q4_1: F(ST_TYPE_Q4_1); break; \
    case ST_TYPE_Q5_0: F(ST_TYPE_Q5_0); break; \
    case ST_TYPE_Q5_1: F(ST_TYPE_Q5_1); break;

__host__ __device__ constexpr int lb_type(uint32_t t) {
    switch (t) {
#define LB_YES(T) return 1
    LB_CASES(LB_YES)
#undef LB_YES
    default: return 0;
    }
}

/* ---- What the kernels call --------------------------------------------------------------------- */

/* byte i (0..7) of a group's two ints, as the signed value */
HD int grp_byte(const int q[2], int i) { return (int)(int8_t)(q[i >> 2] >> (8 * (i & 3))); }

/* Unit u (elements 32u .. 32u+31 of the row) against the activations' int8 xq and scale xd per 32:
 * xd * sum over the two sub-blocks t of (f_t * sum q x - m_t * sum x). */
template <int T> HD float lb_unit_dot(const uint8_t *row, int64_t u, const int8_t *xq, const float *xd) {
    typedef lb<T> L;
    const int per = L::QK / 32;
    const uint8_t *blk = row + (u / per) * L::BYTES;
    const int j = (int)(u % per);
    int xv[8];
    ld_32b(xq + u * 32, xv);
    int s[2] = { 0, 0 };
#pragma unroll
    for (int k = 0; k < 4; k++) {
        int q[2];
        L::grp8(blk, 4 * j + k, q);
        s[k >> 1] = dp4a(q[1], xv[2 * k + 1], dp4a(q[0], xv[2 * k], s[k >> 1]));
    }
    float r = L::factor(blk, 2 * j) * (float)s[0] + L::factor(blk, 2 * j + 1) * (float)s[1];
    if (L::HAS_MIN) {
        int sx[2] = { 0, 0 };
#pragma unroll
        for (int i = 0; i < 8; i++) sx[i >> 2] = dp4a(0x01010101, xv[i], sx[i >> 2]);
        r -= L::minv(blk, 2 * j) * (float)sx[0] + L::minv(blk, 2 * j + 1) * (float)sx[1];
    }
    return xd[u] * r;
}

/* the value of element e of a block from its group's ints, in the reference's order */
template <int T> HD float lb_value(const uint8_t *blk, int e, const int q[2]) {
    typedef lb<T> L;
    const float f = L::factor(blk, e >> 4), v = (float)grp_byte(q, e & 7);
    return L::HAS_MIN ? sub_rn(mul_rn(f, v), L::minv(blk, e >> 4)) : f * v;
}

/* element i of a row */
template <int T> HD float lb_dequant1(const uint8_t *row, int64_t i) {
    typedef lb<T> L;
    const uint8_t *blk = row + (i / L::QK) * L::BYTES;
    const int e = (int)(i % L::QK);
    int q[2];
    L::grp8(blk, e >> 3, q);
    return lb_value<T>(blk, e, q);
}

/* elements i0 .. i0+7 of a row (i0 % 8 == 0): one group, one factor */
template <int T> HD void lb_dequant8(const uint8_t *row, int64_t i0, float v[8]) {
    typedef lb<T> L;
    const uint8_t *blk = row + (i0 / L::QK) * L::BYTES;
    const int e = (int)(i0 % L::QK);
    int q[2];
    L::grp8(blk, e >> 3, q);
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = lb_value<T>(blk, e + i, q);
}

#endif
