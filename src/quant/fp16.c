/* fp16.c: IEEE half and bfloat16 <-> f32, rounding exactly as ggml does.
 *
 * Half -> f32 is exact for every finite value; NaNs keep their payload and come out quiet (ggml
 * widens through a float multiply, which quiets a signalling NaN). F32 -> half rounds to nearest
 * even, including into the subnormal range and up to infinity from 65520; every NaN becomes the
 * canonical quiet 0x7E00 with its sign. Bfloat16 is the top half of an f32: rounding to nearest
 * even, NaN forced quiet. test_quant_ggml.c compares all 65536 halves and millions of floats with
 * the peer's own conversions.
 *
 * Kernels widen halves on hot paths, so st_fp16_to_fp32 reads a 256 KiB table filled once when
 * the library loads; st_fp16_widen is the arithmetic definition the table is built from. */
#include <string.h>
#include "quant/quant.h"

float st_fp16_lut[65536];

static inline float float_of_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t bits_of_float(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

float st_fp16_widen(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) /* inf, or NaN made quiet */
        return float_of_bits(sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0));
    if (exp != 0) /* normal: rebias 15 -> 127 */
        return float_of_bits(sign | ((exp + 112) << 23) | (man << 13));
    if (man == 0) return float_of_bits(sign);
    /* subnormal: man * 2^-24, renormalised so the leading one becomes implicit */
    int shift = 0;
    while (!(man & 0x400)) { man <<= 1; shift++; }
    return float_of_bits(sign | ((uint32_t)(113 - shift) << 23) | ((man & 0x3ff) << 13));
}

__attribute__((constructor)) static void fp16_lut_fill(void) {
    for (uint32_t h = 0; h < 65536; h++) st_fp16_lut[h] = st_fp16_widen((uint16_t)h);
}

float st_fp16_to_fp32(uint16_t h) { return st_fp16_lut[h]; }

/* Round the integer m >> shift to nearest, ties to even (shift >= 1). */
static inline uint32_t shift_round_even(uint32_t m, int shift) {
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}

uint16_t st_fp32_to_fp16(float f) {
    uint32_t w = bits_of_float(f);
    uint16_t sign = (uint16_t)((w >> 16) & 0x8000);
    uint32_t a = w & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00;          /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00;         /* rounds to >= 65536: infinity */
    if (a >= 0x38800000u) {                             /* >= 2^-14: a normal half */
        uint32_t r = a + 0xfffu + ((a >> 13) & 1);      /* ties to even on the 13 dropped bits */
        return sign | (uint16_t)((r - 0x38000000u) >> 13);
    }
    uint32_t e = a >> 23;
    if (e < 102) return sign;                           /* below 2^-25: rounds to zero */
    /* subnormal half: round |f| * 2^24 = m * 2^(e-126) to an integer */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    return sign | (uint16_t)shift_round_even(m, (int)(126 - e));
}

float st_bf16_to_fp32(uint16_t h) { return float_of_bits((uint32_t)h << 16); }

uint16_t st_fp32_to_bf16(float f) {
    uint32_t u = bits_of_float(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
