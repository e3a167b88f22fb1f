/* random_blocks.h: random rows of any computable type whose values look like weights (zero mean,
 * a chosen standard deviation), for `strata synth --type`, benches and tests that need files or
 * rows of a type without going through its quantizer.
 *
 * The grid i-quants (which have no quantizer here) are drawn as blocks: uniform grid indices and
 * signs, sub-block scales from the middle of their range, and d set so the values' standard
 * deviation is `std`. Every other type quantizes normal deviates of that deviation with its
 * reference quantizer. The bytes depend only on *state, which the call advances. */
#ifndef ST_QUANT_RANDOM_BLOCKS_H
#define ST_QUANT_RANDOM_BLOCKS_H

#include <stdint.h>

/* n: elements, a multiple of the type's block size. Returns 1, or 0 for a type it cannot make. */
int st_random_row(uint32_t type, float std, uint64_t *state, void *dst, int64_t n);

#endif
