/* test_random_iq.c: st_random_iq_blocks (quant/random_iq.h), which the kernel tests and benches use
 * for rows of the grid i-quants (and synth --type will): for each of the seven types the decoded
 * row has mean about 0 and the standard deviation asked for (within 15%), every value is finite,
 * the same state gives the same bytes, and the call advances the state; other types and partial
 * blocks are refused. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/random_iq.h"
#include "test.h"

int main(void) {
    const int64_t n = 64 * QK_K;
    float *y = malloc(sizeof(float) * (size_t)n);
    const uint32_t types[] = {ST_TYPE_IQ2_XXS, ST_TYPE_IQ2_XS, ST_TYPE_IQ2_S, ST_TYPE_IQ3_XXS,
                              ST_TYPE_IQ3_S,   ST_TYPE_IQ1_S,  ST_TYPE_IQ1_M};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const uint32_t type = types[i];
        const st_type_info *t = st_type_get(type);
        const size_t bytes = st_row_size(t, n);
        uint8_t *a = malloc(bytes), *b = malloc(bytes);
        uint64_t s1 = 42, s2 = 42;
        const float std = 0.02f;
        CHECKF(st_random_iq_blocks(type, std, &s1, a, n) == 1, "%s: not drawn", t->name);
        CHECK(st_random_iq_blocks(type, std, &s2, b, n) == 1);
        CHECKF(!memcmp(a, b, bytes) && s1 == s2 && s1 != 42, "%s: not a function of the state", t->name);
        CHECK(st_random_iq_blocks(type, std, &s1, b, n) == 1);
        CHECKF(memcmp(a, b, bytes) != 0, "%s: the next row repeats the first", t->name);
        st_dequantize_row(type, a, y, n);
        double sum = 0, sq = 0;
        int finite = 1;
        for (int64_t i = 0; i < n; i++) {
            finite &= isfinite(y[i]) != 0;
            sum += y[i];
            sq += (double)y[i] * y[i];
        }
        const double mean = sum / (double)n, sd = sqrt(sq / (double)n - mean * mean);
        CHECKF(finite && fabs(mean) < 0.05 * std && fabs(sd - std) < 0.15 * std, "%s: mean %g, std %g (want 0, %g)",
               t->name, mean, sd, (double)std);
        free(a);
        free(b);
    }
    /* another type, or not a whole number of blocks: refused; n = 0 only asks */
    uint8_t buf[512];
    uint64_t s = 1;
    CHECK(st_random_iq_blocks(ST_TYPE_Q4_K, 1, &s, buf, 256) == 0);
    CHECK(st_random_iq_blocks(ST_TYPE_IQ2_XXS, 1, &s, buf, 100) == 0);
    CHECK(st_random_iq_blocks(ST_TYPE_IQ1_M, 1, &s, NULL, 0) == 1 && s == 1);
    free(y);
    return test_report("test_random_iq");
}
