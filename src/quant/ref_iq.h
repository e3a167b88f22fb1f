/* ref_iq.h: the grid i-quants (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s) on the
 * reference side: one super-block unpacked (ref_iq.c) into the values as signed grid integers,
 * the sub-block scale field s per 16 values (repeated where the type has one per 32), and for
 * iq1 the delta's sign per 8. The dequantizer (st_dequantize_row_iq, dispatched by quant.c) and
 * the reference dot products (dot_iq_ref.c) both read this form. No quantizers: see ref_iq.c.
 * Private to src/quant and its tests. */
#ifndef ST_QUANT_REF_IQ_H
#define ST_QUANT_REF_IQ_H

#include <stdint.h>
#include "quant/types.h"

typedef struct st_iq_unpacked {
    float d;
    int8_t q[QK_K];
    uint8_t s[QK_K / 16];
    int8_t delta[QK_K / 8];   /* iq1_s, iq1_m: +1 or -1 */
} st_iq_unpacked;
void st_iq_unpack(uint32_t type, const void *block, st_iq_unpacked *u);
/* n: a multiple of 256 */
void st_dequantize_row_iq(uint32_t type, const void *x, float *y, int64_t n);

#endif
