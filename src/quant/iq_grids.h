/* iq_grids.h: the grids and sign masks of the grid-based i-quants (iq1_s, iq1_m, iq2_xxs, iq2_xs,
 * iq2_s, iq3_xxs, iq3_s), a fact of those formats like iq4_nl's 16 levels.
 *
 * A grid maps an index to a group of 8 (iq1, iq2) or 4 (iq3) small values; a block stores indices,
 * scales and signs. The grids are kept in our compact encoding (iq_grids_data.c, written by
 * tools/iq_grids_gen.c from the peer's libggml: see there how) and expanded when the library
 * loads into the byte tables below, which the dequantizers and every dot-product variant read.
 * The sign masks of iq2_xxs, iq2_xs and iq3_xxs come from a 7-bit index by a rule (bit 7 makes
 * the number of minus signs even), checked against the peer by the generator and the tests. */
#ifndef ST_QUANT_IQ_GRIDS_H
#define ST_QUANT_IQ_GRIDS_H

#include <stdint.h>

typedef struct st_iq_grid_code {
    int entries, group, nlevels;
    int8_t levels[8];          /* the grid's distinct values, ascending */
    const uint16_t *code;      /* entry e: sum_j index_j * nlevels^j, index_j into levels */
} st_iq_grid_code;

extern const st_iq_grid_code st_iq_code_iq2xxs, st_iq_code_iq2xs, st_iq_code_iq2s, st_iq_code_iq3xxs,
    st_iq_code_iq3s, st_iq_code_iq1s;

/* Expanded when the library loads (before main): byte j of entry e is value j of the entry
 * (iq1s: the int8 values -1, 0, 1; the others unsigned). */
extern uint64_t st_iq2xxs_grid[256], st_iq2xs_grid[512], st_iq2s_grid[1024], st_iq1s_grid[2048];
extern uint32_t st_iq3xxs_grid[256], st_iq3s_grid[512];
/* For the SIMD kernels of iq1_s / iq1_m: entry e | d << 11 holds the bytes 8 * value + delta,
 * delta = -1 where d = 1 and +1 where d = 0 (the delta folded into an integer weight). */
extern uint64_t st_iq1s_grid8[4096];
/* 7-bit sign index -> mask of the 8 values that are negative */
extern uint8_t st_iq_signs[128];
/* the same masks as 8 bytes, 0xFF for a negative value and 0x01 for a positive one (an operand
 * for a byte-wise sign instruction) */
extern uint64_t st_iq_sign_bytes[128];

/* iq4_nl's and iq4_xs's 16 levels (a 4-bit index -> int8), ascending */
extern const int8_t st_iq4nl_levels[16];

/* The delta iq1_s and iq1_m add to every grid value before scaling (sign per group). */
#define ST_IQ1_DELTA 0.125f

#endif
