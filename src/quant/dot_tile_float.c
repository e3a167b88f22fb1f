/* dot_tile_float.c: picks the F32 / F16 tile kernel of dot_tile_float.h at the level of the
 * one-row kernel that st_dot_kernel() picks, so that the two give the same bits. */
#include "quant/dot_tile_float.h"

#include "quant/types.h"

st_dot_tile_fn st_dot_tile_float_kernel(uint32_t type) {
    if (type != ST_TYPE_F32 && type != ST_TYPE_F16) return NULL;
    switch (st_dot_level(type)) {
    case 2: return type == ST_TYPE_F32 ? st_dot_tile_f32_avx512 : st_dot_tile_f16_avx512;
    case 1: return type == ST_TYPE_F32 ? st_dot_tile_f32_avx2 : st_dot_tile_f16_avx2;
    default: return NULL;
    }
}
