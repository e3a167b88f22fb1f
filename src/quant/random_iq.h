/* random_iq.h: random blocks of the grid i-quants (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs,
 * iq3_s), which have no quantizer here, for `strata synth --type`, benches and tests: uniform grid
 * indices and signs, sub-block scales from the middle of their range, and d set so the values
 * have mean 0 and the standard deviation asked for. The bytes depend only on *state (a splitmix64
 * state), which the call advances.
 *
 * The shape is that of the block generators behind quant/random.h's st_random_row (branch
 * wtypes: random.c's one switch), so that switch can hand these seven types to this function. */
#ifndef ST_QUANT_RANDOM_IQ_H
#define ST_QUANT_RANDOM_IQ_H

#include <stdint.h>

/* n elements (a multiple of 256) of `type` at dst. n = 0 only asks whether the type is one of
 * these (dst is not touched). Returns 1, or 0 for another type or an n that is not whole blocks. */
int st_random_iq_blocks(uint32_t type, float std, uint64_t *state, void *dst, int64_t n);

#endif
