/* random.h: random weights of any tensor type, for `strata synth`, tests and benches.
 *
 * st_random_row fills one row with values of about N(0, std^2) in `type`, from a caller's
 * splitmix64 state (so the bytes depend only on the state). Each type is either drawn as blocks
 * directly (a generator of its own, listed in random.c's one switch: fast, and the only way for
 * a type without a reference quantizer) or drawn as f32 normal deviates and quantized with
 * st_quantize_row. Adding a type is one case in that switch. */
#ifndef ST_QUANT_RANDOM_H
#define ST_QUANT_RANDOM_H

#include <stdint.h>

/* The splitmix64 step and an approximately standard normal deviate (the sum of four uniform
 * 16-bit integers, centred and scaled: exact integer arithmetic, the same on every machine). */
uint64_t st_random_next(uint64_t *state);
float st_random_normal(uint64_t *state);

/* Whether `type` has a block generator of its own (else st_random_row quantizes deviates). */
int st_random_has_blocks(uint32_t type);
/* One row of n elements of `type` (n a multiple of its block size). blocks != 0 asks for the
 * block generator where the type has one. scratch holds n floats (used when quantizing).
 * Returns 0 when the type can be neither drawn nor quantized. */
int st_random_row(uint32_t type, float std, int blocks, uint64_t *state, void *dst, int64_t n, float *scratch);

#endif
