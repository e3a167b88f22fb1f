/* iq_grids.c: expands the compact i-quant grids of iq_grids_data.c into the byte tables of
 * iq_grids.h, and builds the sign masks from their rule, once when the library loads (a
 * constructor, as fp16.c's table: ready before main, not inside other constructors). */
#include "quant/iq_grids.h"

uint64_t st_iq2xxs_grid[256], st_iq2xs_grid[512], st_iq2s_grid[1024], st_iq1s_grid[2048], st_iq1s_grid8[4096];
uint32_t st_iq3xxs_grid[256], st_iq3s_grid[512];
uint8_t st_iq_signs[128];
uint64_t st_iq_sign_bytes[128];
const int8_t st_iq4nl_levels[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

/* Entry e as bytes, value j in byte j. */
static uint64_t entry_bytes(const st_iq_grid_code *g, int e) {
    uint64_t v = 0;
    unsigned c = g->code[e];
    for (int j = 0; j < g->group; j++, c /= (unsigned)g->nlevels)
        v |= (uint64_t)(uint8_t)g->levels[c % (unsigned)g->nlevels] << (8 * j);
    return v;
}

__attribute__((constructor)) static void iq_grids_expand(void) {
    for (int e = 0; e < 256; e++) st_iq2xxs_grid[e] = entry_bytes(&st_iq_code_iq2xxs, e);
    for (int e = 0; e < 512; e++) st_iq2xs_grid[e] = entry_bytes(&st_iq_code_iq2xs, e);
    for (int e = 0; e < 1024; e++) st_iq2s_grid[e] = entry_bytes(&st_iq_code_iq2s, e);
    for (int e = 0; e < 2048; e++) {
        st_iq1s_grid[e] = entry_bytes(&st_iq_code_iq1s, e);
        for (int neg = 0; neg < 2; neg++) {
            uint64_t v = 0;
            for (int j = 0; j < 8; j++)
                v |= (uint64_t)(uint8_t)(8 * (int8_t)(st_iq1s_grid[e] >> (8 * j)) + (neg ? -1 : 1)) << (8 * j);
            st_iq1s_grid8[e | neg << 11] = v;
        }
    }
    for (int e = 0; e < 256; e++) st_iq3xxs_grid[e] = (uint32_t)entry_bytes(&st_iq_code_iq3xxs, e);
    for (int e = 0; e < 512; e++) st_iq3s_grid[e] = (uint32_t)entry_bytes(&st_iq_code_iq3s, e);
    for (int g = 0; g < 128; g++) {
        st_iq_signs[g] = (uint8_t)(g | (__builtin_popcount((unsigned)g) & 1) << 7);
        st_iq_sign_bytes[g] = 0;
        for (int j = 0; j < 8; j++) st_iq_sign_bytes[g] |= (uint64_t)((st_iq_signs[g] >> j) & 1 ? 0xFF : 0x01) << (8 * j);
    }
}
