/* ref_iq.c: the grid i-quants (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s): what their
 * bits mean, once, in plain C, and the dequantizers built on that. dot_iq_ref.c's reference dot
 * products read the same unpacked form, so the layouts are written down in one place.
 *
 * Every type has 256-element super-blocks with one half-precision scale d (iq1_m spreads its d
 * over the top nibbles of its scale words), small integer sub-block scales s, and per group of
 * 8 (iq3: 4) values one index into a grid (quant/iq_grids.h). The iq2/iq3 grids hold magnitudes
 * and the signs come from a sign mask per 8 values; the iq1 grid holds -1, 0, 1 and every group
 * of 8 adds a delta of +-1/8. Value = d * (2s + 1) / F * signed grid value, with F = 8 (iq2),
 * 4 (iq3_xxs), 1 (iq3_s, whose s is 4 bits); iq1: d * (2s + 1) * (grid + delta).
 *
 * Per super-block:
 *   iq2_xxs: per 32 elements a u64: 4 grid bytes, then 4 x 7-bit sign indices and s (4 bits);
 *   iq2_xs:  per 8 elements a u16: 9-bit grid index, 7-bit sign index; s per 16 (nibbles);
 *   iq2_s:   10-bit grid index (a byte, two top bits from qh), full 8-bit sign bytes; s per 16;
 *   iq3_xxs: 64 grid bytes (4 values each), per 32 elements a u32 of sign indices and s;
 *   iq3_s:   9-bit grid index (a byte, top bit from qh), sign bytes, s per 32 (nibbles);
 *   iq1_s:   11-bit grid index (a byte + 3 bits of a u16 per 32 elements, which also holds s in
 *            bits 12-14 and the delta's sign in bit 15);
 *   iq1_m:   11-bit grid index (a byte + 3 bits of qh, whose 4th bit is the delta's sign per 8),
 *            3-bit s per 16 in four u16 scale words, d in their top nibbles.
 *
 * The dequantizers compute each sub-block's factor in ggml's order (bit-exact with the peer:
 * tests/unit/test_quant_ggml.c). No quantizers here: files of these types come from llama.cpp's
 * llama-quantize, and synthetic ones from random blocks (quant/random_iq.h). */
#include <string.h>
#include "quant/iq_grids.h"
#include "quant/quant.h"
#include "quant/ref_iq.h"

static uint32_t load_u32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* the 8 bytes of a grid entry, sign bit j of `signs` negating byte j */
static void put_signed8(int8_t *q, uint64_t grid, unsigned signs) {
    for (int j = 0; j < 8; j++) {
        int v = (int)(uint8_t)(grid >> (8 * j));
        q[j] = (int8_t)((signs >> j) & 1 ? -v : v);
    }
}

static void unpack_iq2_xxs(const block_iq2_xxs *x, st_iq_unpacked *u) {
    const uint8_t *qs = (const uint8_t *)x->qs;
    u->d = st_fp16_to_fp32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        uint32_t idx = load_u32(qs + 8 * ib), aux = load_u32(qs + 8 * ib + 4);
        u->s[2 * ib] = u->s[2 * ib + 1] = (uint8_t)(aux >> 28);
        for (int l = 0; l < 4; l++)
            put_signed8(u->q + 32 * ib + 8 * l, st_iq2xxs_grid[(idx >> (8 * l)) & 255], st_iq_signs[(aux >> (7 * l)) & 127]);
    }
}

static void unpack_iq2_xs(const block_iq2_xs *x, st_iq_unpacked *u) {
    u->d = st_fp16_to_fp32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        u->s[2 * ib] = x->scales[ib] & 15;
        u->s[2 * ib + 1] = x->scales[ib] >> 4;
        for (int l = 0; l < 4; l++) {
            uint16_t v = x->qs[4 * ib + l];
            put_signed8(u->q + 32 * ib + 8 * l, st_iq2xs_grid[v & 511], st_iq_signs[v >> 9]);
        }
    }
}

static void unpack_iq2_s(const block_iq2_s *x, st_iq_unpacked *u) {
    const uint8_t *signs = x->qs + QK_K / 8;
    u->d = st_fp16_to_fp32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        u->s[2 * ib] = x->scales[ib] & 15;
        u->s[2 * ib + 1] = x->scales[ib] >> 4;
        for (int l = 0; l < 4; l++) {
            int idx = x->qs[4 * ib + l] | ((x->qh[ib] >> (2 * l)) & 3) << 8;
            put_signed8(u->q + 32 * ib + 8 * l, st_iq2s_grid[idx], signs[4 * ib + l]);
        }
    }
}

static void unpack_iq3_xxs(const block_iq3_xxs *x, st_iq_unpacked *u) {
    const uint8_t *ss = x->qs + QK_K / 4;
    u->d = st_fp16_to_fp32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        uint32_t aux = load_u32(ss + 4 * ib);
        u->s[2 * ib] = u->s[2 * ib + 1] = (uint8_t)(aux >> 28);
        for (int l = 0; l < 4; l++) {
            uint64_t g = st_iq3xxs_grid[x->qs[8 * ib + 2 * l]] | (uint64_t)st_iq3xxs_grid[x->qs[8 * ib + 2 * l + 1]] << 32;
            put_signed8(u->q + 32 * ib + 8 * l, g, st_iq_signs[(aux >> (7 * l)) & 127]);
        }
    }
}

static void unpack_iq3_s(const block_iq3_s *x, st_iq_unpacked *u) {
    u->d = st_fp16_to_fp32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        u->s[2 * ib] = u->s[2 * ib + 1] = (x->scales[ib / 2] >> (4 * (ib % 2))) & 15;
        for (int l = 0; l < 4; l++) {
            int i0 = x->qs[8 * ib + 2 * l] | ((x->qh[ib] >> (2 * l)) & 1) << 8;
            int i1 = x->qs[8 * ib + 2 * l + 1] | ((x->qh[ib] >> (2 * l + 1)) & 1) << 8;
            put_signed8(u->q + 32 * ib + 8 * l, st_iq3s_grid[i0] | (uint64_t)st_iq3s_grid[i1] << 32, x->signs[4 * ib + l]);
        }
    }
}

static void put_grid8(int8_t *q, uint64_t grid) { memcpy(q, &grid, 8); }

static void unpack_iq1_s(const block_iq1_s *x, st_iq_unpacked *u) {
    u->d = st_fp16_to_fp32(x->d);
    for (int ib = 0; ib < 8; ib++) {
        unsigned qh = x->qh[ib];
        u->s[2 * ib] = u->s[2 * ib + 1] = (qh >> 12) & 7;
        for (int l = 0; l < 4; l++) {
            put_grid8(u->q + 32 * ib + 8 * l, st_iq1s_grid[x->qs[4 * ib + l] | ((qh >> (3 * l)) & 7) << 8]);
            u->delta[4 * ib + l] = qh & 0x8000 ? -1 : 1;
        }
    }
}

static void unpack_iq1_m(const block_iq1_m *x, st_iq_unpacked *u) {
    uint16_t sc[4];
    memcpy(sc, x->scales, 8);
    uint16_t d = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    u->d = st_fp16_to_fp32(d);
    for (int ib = 0; ib < 8; ib++) {
        u->s[2 * ib] = (sc[ib / 2] >> (6 * (ib % 2))) & 7;
        u->s[2 * ib + 1] = (sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7;
        for (int l = 0; l < 4; l++) {
            unsigned h = x->qh[2 * ib + l / 2] >> (4 * (l % 2));
            put_grid8(u->q + 32 * ib + 8 * l, st_iq1s_grid[x->qs[4 * ib + l] | (h & 7) << 8]);
            u->delta[4 * ib + l] = h & 8 ? -1 : 1;
        }
    }
}

void st_iq_unpack(uint32_t type, const void *block, st_iq_unpacked *u) {
    switch (type) {
    case ST_TYPE_IQ2_XXS: unpack_iq2_xxs(block, u); break;
    case ST_TYPE_IQ2_XS: unpack_iq2_xs(block, u); break;
    case ST_TYPE_IQ2_S: unpack_iq2_s(block, u); break;
    case ST_TYPE_IQ3_XXS: unpack_iq3_xxs(block, u); break;
    case ST_TYPE_IQ3_S: unpack_iq3_s(block, u); break;
    case ST_TYPE_IQ1_S: unpack_iq1_s(block, u); break;
    case ST_TYPE_IQ1_M: unpack_iq1_m(block, u); break;
    }
}

/* The factor of the 16 values of sub-block t, in ggml's evaluation order. */
static float sub_factor(uint32_t type, float d, int s) {
    switch (type) {
    case ST_TYPE_IQ2_XXS: case ST_TYPE_IQ2_XS: case ST_TYPE_IQ2_S: return d * (0.5f + (float)s) * 0.25f;
    case ST_TYPE_IQ3_XXS: return d * (0.5f + (float)s) * 0.5f;
    default: return d * (float)(2 * s + 1);   /* iq3_s, iq1_s, iq1_m */
    }
}

void st_dequantize_row_iq(uint32_t type, const void *x, float *y, int64_t n) {
    const size_t bs = (size_t)st_type_get(type)->type_size;
    const int iq1 = type == ST_TYPE_IQ1_S || type == ST_TYPE_IQ1_M;
    st_iq_unpacked u;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        st_iq_unpack(type, (const char *)x + (size_t)b * bs, &u);
        for (int t = 0; t < 16; t++) {
            const float f = sub_factor(type, u.d, u.s[t]);
            for (int i = 16 * t; i < 16 * t + 16; i++)
                y[i] = iq1 ? f * ((float)u.q[i] + (float)u.delta[i / 8] * ST_IQ1_DELTA) : f * (float)u.q[i];
        }
    }
}
