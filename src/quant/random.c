/* random.c: random rows of any tensor type (random.h). The block generators draw a block's
 * scales so its values spread like N(0, std^2) and centre on 0, then its level bits uniformly;
 * the rest quantize normal deviates with the reference quantizers (quant.h). */
#include "quant/random.h"

#include <string.h>

#include "quant/quant.h"
#include "quant/random_iq.h"
#include "quant/types.h"

uint64_t st_random_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float st_random_normal(uint64_t *state) {
    uint64_t r = st_random_next(state);
    int64_t sum = (int64_t)(r & 0xffff) + (int64_t)((r >> 16) & 0xffff) + (int64_t)((r >> 32) & 0xffff) + (int64_t)(r >> 48);
    static const float inv_std = (float)(1.0 / 37837.22723);    /* sqrt((2^32 - 1) / 3) */
    return (float)(sum - 2 * 65535) * inv_std;      /* the sum's mean is 4 * 65535 / 2 */
}

/* Q4_K: level step s = std / 4.61 (16 uniform levels have std 4.61 s); each sub-block's scale sc
 * and min m are one random 6-bit value in [24, 40], with d = s / 32 and dmin = 7.5 s / 32, so the
 * sub-block's values d*sc*q - dmin*m are centred on 0. */
static void blocks_q4_K(float std, uint64_t *state, void *dst, int64_t n) {
    float step = std / 4.61f;
    uint16_t d = st_fp32_to_fp16(step / 32.0f), dmin = st_fp32_to_fp16(7.5f * step / 32.0f);
    for (int64_t b = 0; b < n / QK_K; b++) {
        block_q4_K *q = (block_q4_K *)dst + b;
        q->d = d;
        q->dmin = dmin;
        uint64_t r = st_random_next(state);
        uint8_t sc[8];
        for (int j = 0; j < 8; j++) sc[j] = (uint8_t)(24 + ((r >> (5 * j)) % 17));
        for (int j = 0; j < 4; j++) {   /* ggml's 6-bit packing, with m = sc */
            q->scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
            q->scales[j + 4] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
            q->scales[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((sc[j + 4] & 0xF) << 4));
        }
        for (int i = 0; i < 128; i += 8) {
            uint64_t v = st_random_next(state);
            memcpy(q->qs + i, &v, 8);
        }
    }
}

/* The one place that knows which types have a block generator: a case each. n = 0 asks only
 * whether the type has one. Returns 0 for a type without. */
static int random_blocks(uint32_t type, float std, uint64_t *state, void *dst, int64_t n) {
    switch (type) {
    case ST_TYPE_Q4_K: blocks_q4_K(std, state, dst, n); return 1;
    default: return st_random_iq_blocks(type, std, state, dst, n); /* the grid i-quants, else 0 */
    }
}

int st_random_has_blocks(uint32_t type) {
    uint64_t s = 0;
    return random_blocks(type, 0, &s, NULL, 0);
}

int st_random_row(uint32_t type, float std, int blocks, uint64_t *state, void *dst, int64_t n, float *scratch) {
    if (blocks && random_blocks(type, std, state, dst, n)) return 1;
    for (int64_t i = 0; i < n; i++) scratch[i] = std * st_random_normal(state);
    if (st_quantize_row(type, scratch, dst, n)) return 1;
    return random_blocks(type, std, state, dst, n);    /* no quantizer: blocks are the only way */
}
