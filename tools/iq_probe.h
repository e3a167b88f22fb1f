/* iq_probe.h: crafted blocks that show every entry of the i-quant grids and every sign pattern
 * through a type's plain dequantizer, shared by tools/iq_grids_gen.c (which reads the grids out of
 * the peer's libggml with them) and tests/unit/test_quant_ggml.c (which checks that ours decodes
 * the same blocks to the same bits).
 *
 * Each probe fills `nblocks` blocks of its carrier type with d = 1 (half 0x3c00), every sub-block
 * scale 0 and every sign off, so the decoded values are the grid's levels times a fixed factor
 * (probe.factor: 1/8 for the iq2 types, 1/4 for iq3_xxs, 1 for iq3_s, and for iq1_s the level
 * plus the delta 1/8). Group g of `group` decoded values, in element order, is grid entry g.
 * The sign probe (on iq2_xxs) puts grid entry 0 in every group and sign index g in group g, so
 * the negative values of group g are the bits of sign mask g.
 *
 * Layouts (bytes in a block), as the formats define them:
 *   iq2_xxs 66: d, then per 32 elements 4 grid indices (u8) and a u32 of 4 x 7-bit sign
 *               indices with the 4-bit scale on top;
 *   iq2_xs  74: d, 32 u16 (9-bit grid index | 7-bit sign index << 9), 8 scale bytes (2 nibbles);
 *   iq2_s   82: d, 32 index low bytes, 32 sign bytes, 8 bytes of 2-bit index tops, 8 scale bytes;
 *   iq3_xxs 98: d, 64 grid indices (u8, 4 values each), 8 u32 of signs and scale as iq2_xxs;
 *   iq3_s  110: d, 64 index low bytes, 8 bytes of index top bits, 32 sign bytes, 4 scale bytes;
 *   iq1_s   50: d, 32 index low bytes, 8 u16 (3-bit index tops x 4, 3-bit scale, delta sign). */
#ifndef ST_TOOLS_IQ_PROBE_H
#define ST_TOOLS_IQ_PROBE_H

#include <stdint.h>
#include <string.h>

typedef struct iq_probe {
    const char *grid;   /* the grid's name */
    int type;           /* ggml type id of the carrier */
    int type_size;      /* bytes per block */
    int entries;        /* grid entries */
    int group;          /* values per entry */
    float factor;       /* decoded value = factor * level (+ 1/8 for iq1_s) */
} iq_probe;

enum { IQ_PROBE_IQ2XXS, IQ_PROBE_IQ2XS, IQ_PROBE_IQ2S, IQ_PROBE_IQ3XXS, IQ_PROBE_IQ3S, IQ_PROBE_IQ1S, IQ_PROBE_COUNT };

static const iq_probe iq_probes[IQ_PROBE_COUNT] = {
    {"iq2xxs", 16, 66, 256, 8, 0.125f}, {"iq2xs", 17, 74, 512, 8, 0.125f},
    {"iq2s", 22, 82, 1024, 8, 0.125f},  {"iq3xxs", 18, 98, 256, 4, 0.25f},
    {"iq3s", 21, 110, 512, 4, 1.0f},    {"iq1s", 19, 50, 2048, 8, 1.0f},
};

/* Blocks needed to show every entry of probe p (256 values per block). */
static inline int iq_probe_blocks(const iq_probe *p) { return p->entries * p->group / 256; }

static inline void iq_probe_put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* Fills iq_probe_blocks(p) blocks at out so that group g decodes to entry g. */
static inline void iq_probe_fill(int which, uint8_t *out) {
    const iq_probe *p = &iq_probes[which];
    int nb = iq_probe_blocks(p);
    memset(out, 0, (size_t)nb * (size_t)p->type_size);
    for (int b = 0; b < nb; b++) {
        uint8_t *blk = out + (size_t)b * (size_t)p->type_size;
        iq_probe_put16(blk, 0x3c00);
        int per_block = 256 / p->group;
        for (int i = 0; i < per_block; i++) {
            int e = b * per_block + i;
            switch (which) {
            case IQ_PROBE_IQ2XXS: blk[2 + 8 * (i / 4) + i % 4] = (uint8_t)e; break;
            case IQ_PROBE_IQ2XS: iq_probe_put16(blk + 2 + 2 * i, (uint16_t)e); break;
            case IQ_PROBE_IQ2S:
                blk[2 + i] = (uint8_t)e;
                blk[66 + i / 4] |= (uint8_t)((e >> 8) << (2 * (i % 4)));
                break;
            case IQ_PROBE_IQ3XXS: blk[2 + i] = (uint8_t)e; break;
            case IQ_PROBE_IQ3S:
                blk[2 + i] = (uint8_t)e;
                blk[66 + i / 8] |= (uint8_t)((e >> 8) << (i % 8));
                break;
            case IQ_PROBE_IQ1S: {
                blk[2 + i] = (uint8_t)e;
                uint16_t qh;
                memcpy(&qh, blk + 34 + 2 * (i / 4), 2);
                qh = (uint16_t)(qh | (e >> 8) << (3 * (i % 4)));
                iq_probe_put16(blk + 34 + 2 * (i / 4), qh);
                break;
            }
            }
        }
    }
}

/* The sign probe: 4 iq2_xxs blocks (66 bytes each); group g (of 8 values) carries sign index g
 * over grid entry 0, so value j of group g is negative exactly when bit j of sign mask g is set. */
enum { IQ_SIGN_PROBE_BLOCKS = 4 };
static inline void iq_probe_fill_signs(uint8_t *out) {
    memset(out, 0, IQ_SIGN_PROBE_BLOCKS * 66);
    for (int b = 0; b < IQ_SIGN_PROBE_BLOCKS; b++) {
        uint8_t *blk = out + 66 * b;
        iq_probe_put16(blk, 0x3c00);
        for (int ib = 0; ib < 8; ib++) {
            uint32_t s = 0;
            for (int l = 0; l < 4; l++) s |= (uint32_t)(32 * b + 4 * ib + l) << (7 * l);
            memcpy(blk + 2 + 8 * ib + 4, &s, 4);
        }
    }
}

#endif
