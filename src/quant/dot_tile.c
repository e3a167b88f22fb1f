/* dot_tile.c: picks the tile kernel of dot_tile.h for a type, only where it matches the one-row
 * kernel st_dot_kernel() picks (the level it is written for). */
#include "quant/dot_tile.h"
#include "quant/dot_tile_float.h"

#include "base/cpu.h"
#include "quant/types.h"

st_dot_tile_fn st_dot_tile_kernel(uint32_t type) {
    if (type == ST_TYPE_F32 || type == ST_TYPE_F16) return st_dot_tile_float_kernel(type);
    if (type == ST_TYPE_Q5_0 && st_dot_level(type) == 2) return st_dot_tile_q5_0_avx512;
    if (type == ST_TYPE_Q8_0 && st_dot_level(type) == 2) return st_dot_tile_q8_0_avx512;
    if (type == ST_TYPE_Q4_K && st_dot_level(type) == 1) return st_dot_tile_q4_K_avx2;
    if (type == ST_TYPE_Q5_K && st_dot_level(type) == 1) return st_dot_tile_q5_K_avx2;
    if (type == ST_TYPE_Q6_K && st_dot_level(type) == 1)
        return st_cpu()->avx_vnni ? st_dot_tile_q6_K_avxvnni : st_dot_tile_q6_K_avx2;
    if (type == ST_TYPE_Q8_0 && st_dot_level(type) == 1)
        return st_cpu()->avx_vnni ? st_dot_tile_q8_0_avxvnni : st_dot_tile_q8_0_avx2;
    if (type == ST_TYPE_Q1_0 && st_dot_level(type) == 2) return st_dot_tile_q1_0_avx512;
    if (type == ST_TYPE_Q1_0 && st_dot_level(type) == 1) return st_dot_tile_q1_0_avx2;
    return NULL;
}
