/* random_iq.c: st_random_iq_blocks (random_iq.h): grid i-quant rows drawn as blocks. Not on any
 * hot path. */
#include "quant/random_iq.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "quant/iq_grids.h"
#include "quant/quant.h"

static uint64_t next_u64(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Mean square of a grid's values (bytes of `group` per entry; iq1: int8 plus the delta). */
static double grid_mean_square(const void *grid, int entries, int group, int iq1) {
    const uint8_t *p = grid;
    const int stride = group == 4 ? 4 : 8;
    double s = 0;
    for (int e = 0; e < entries; e++)
        for (int j = 0; j < group; j++) {
            double v = iq1 ? (double)(int8_t)p[e * stride + j] : (double)p[e * stride + j];
            s += iq1 ? v * v + (double)ST_IQ1_DELTA * ST_IQ1_DELTA : v * v;
        }
    return s / (double)(entries * group);
}

/* Scale fields are drawn from [lo, lo + 3]; returns the mean of (2s + 1)^2 over that range. */
static double scale_mean_square(int lo) {
    double s = 0;
    for (int v = lo; v < lo + 4; v++) s += (double)(2 * v + 1) * (2 * v + 1);
    return s / 4;
}

typedef struct iq_draw {
    uint32_t type;
    int size;                 /* bytes per block */
    const void *grid;
    int entries, group, iq1;
    float divisor;            /* value = d * (2s + 1) / divisor * grid value */
    int scale_lo;             /* sub-block scale fields drawn from scale_lo .. scale_lo + 3 */
} iq_draw;

static const iq_draw *iq_draw_of(uint32_t type) {
    static const iq_draw draws[] = {
        {ST_TYPE_IQ2_XXS, 66, st_iq2xxs_grid, 256, 8, 0, 8, 6},  {ST_TYPE_IQ2_XS, 74, st_iq2xs_grid, 512, 8, 0, 8, 6},
        {ST_TYPE_IQ2_S, 82, st_iq2s_grid, 1024, 8, 0, 8, 6},     {ST_TYPE_IQ3_XXS, 98, st_iq3xxs_grid, 256, 4, 0, 4, 6},
        {ST_TYPE_IQ3_S, 110, st_iq3s_grid, 512, 4, 0, 1, 6},     {ST_TYPE_IQ1_S, 50, st_iq1s_grid, 2048, 8, 1, 1, 2},
        {ST_TYPE_IQ1_M, 56, st_iq1s_grid, 2048, 8, 1, 1, 2},
    };
    for (size_t i = 0; i < sizeof draws / sizeof draws[0]; i++)
        if (draws[i].type == type) return &draws[i];
    return 0;
}

/* One block of random bytes, then its scale fields and d put right. */
static void draw_iq_block(const iq_draw *t, uint16_t d, uint64_t *s, uint8_t *blk) {
    for (int o = 0; o < t->size; o += 8) {
        uint64_t v = next_u64(s);
        memcpy(blk + o, &v, t->size - o < 8 ? (size_t)(t->size - o) : 8);
    }
    /* a sub-block scale field: scale_lo + 0..3 */
#define SC() ((unsigned)t->scale_lo + (unsigned)(next_u64(s) & 3))
    switch (t->type) {
    case ST_TYPE_IQ2_XXS: case ST_TYPE_IQ3_XXS: {
        uint8_t *aux = blk + (t->type == ST_TYPE_IQ2_XXS ? 2 + 4 : 2 + 64);
        const int step = t->type == ST_TYPE_IQ2_XXS ? 8 : 4;
        for (int ib = 0; ib < 8; ib++) aux[step * ib + 3] = (uint8_t)((aux[step * ib + 3] & 0x0f) | SC() << 4);
        break;
    }
    case ST_TYPE_IQ2_XS: case ST_TYPE_IQ2_S: {
        uint8_t *sc = blk + t->size - 8;
        for (int ib = 0; ib < 8; ib++) sc[ib] = (uint8_t)(SC() | SC() << 4);
        break;
    }
    case ST_TYPE_IQ3_S:
        for (int i = 0; i < 4; i++) blk[106 + i] = (uint8_t)(SC() | SC() << 4);
        break;
    case ST_TYPE_IQ1_S:
        for (int ib = 0; ib < 8; ib++) {
            uint16_t qh;
            memcpy(&qh, blk + 34 + 2 * ib, 2);
            qh = (uint16_t)((qh & 0x8fff) | SC() << 12);
            memcpy(blk + 34 + 2 * ib, &qh, 2);
        }
        break;
    case ST_TYPE_IQ1_M: { /* four u16: 4 x 3-bit scales, d's nibble on top */
        uint16_t w[4];
        for (int i = 0; i < 4; i++)
            w[i] = (uint16_t)(SC() | SC() << 3 | SC() << 6 | SC() << 9 | ((d >> (4 * i)) & 15) << 12);
        memcpy(blk + 48, w, 8);
        return;
    }
    }
#undef SC
    memcpy(blk, &d, 2);
}

int st_random_iq_blocks(uint32_t type, float std, uint64_t *state, void *dst, int64_t n) {
    const iq_draw *t = iq_draw_of(type);
    if (!t || n < 0 || n % 256) return 0;
    if (n == 0) return 1;
    double ms = grid_mean_square(t->grid, t->entries, t->group, t->iq1) * scale_mean_square(t->scale_lo);
    uint16_t d = st_fp32_to_fp16((float)(std * t->divisor / sqrt(ms)));
    for (int64_t b = 0; b < n / 256; b++) draw_iq_block(t, d, state, (uint8_t *)dst + (size_t)b * (size_t)t->size);
    return 1;
}
