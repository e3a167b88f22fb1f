/* repack.c: the load-time rearrangement of weight blocks for the CPU kernels (layouts in
 * repack.h): Q4_K <-> Q4_K_R, the layout table entries of the internal ids, the choice of
 * whether to repack, and the portable kernel for a repacked row (converts back, plain kernel). */
#include "quant/repack.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "quant/dot.h"

static const st_type_info q4_K_r_info = {"q4_K_r", QK_K, 144, 1};

const st_type_info *st_layout_get(uint32_t type) {
    if (type == ST_TYPE_Q4_K_R) return &q4_K_r_info;
    return st_type_get(type);
}

uint32_t st_repack_file_type(uint32_t type) { return type == ST_TYPE_Q4_K_R ? ST_TYPE_Q4_K : type; }

static int repack_off;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static void read_env(void) {
    const char *e = getenv("STRATA_REPACK");
    repack_off = e && e[0] == '0';
}

uint32_t st_repack_target(uint32_t type) {
    pthread_once(&env_once, read_env);
    if (repack_off) return type;
    /* only where the repacked kernel is the one that will run */
    if (type == ST_TYPE_Q4_K && st_dot_level(ST_TYPE_Q4_K_R) == 2) return ST_TYPE_Q4_K_R;
    return type;
}

/* Q4_K's 6-bit packing of 8 scales and 8 minimums in 12 bytes (the file format's). */
static void q4_K_scales_get(const uint8_t *q, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        mn[j] = q[j + 4] & 63;
        sc[j + 4] = (uint8_t)((q[j + 8] & 0x0F) | ((q[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}
static void q4_K_scales_set(uint8_t *q, const uint8_t sc[8], const uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((sc[j + 4] & 0x0F) | ((mn[j + 4] & 0x0F) << 4));
    }
}

/* One block of each layout. The file's qs[32g + l] holds element 64g + l (low nibble) and
 * 64g + 32 + l (high); the repacked q[i] holds i and 64 + i, q[64 + i] 128 + i and 192 + i. */
static void q4_K_to_r(uint8_t *dst, const block_q4_K *b) {
    uint8_t sc[8], mn[8];
    q4_K_scales_get(b->scales, sc, mn);
    for (int j = 0; j < 8; j++) dst[j] = (uint8_t)(sc[j] | (mn[j] & 3) << 6);
    for (int i = 0; i < 4; i++) dst[8 + i] = (uint8_t)((mn[2 * i] >> 2) | (mn[2 * i + 1] >> 2) << 4);
    memcpy(dst + 12, &b->d, 2);
    memcpy(dst + 14, &b->dmin, 2);
    for (int h = 0; h < 2; h++) {
        const uint8_t *q = b->qs + 64 * h; /* groups 2h (q[0..31]) and 2h + 1 (q[32..63]) */
        uint8_t *o = dst + 16 + 64 * h;
        for (int l = 0; l < 32; l++) {
            o[l] = (uint8_t)((q[l] & 0x0F) | (q[32 + l] & 0x0F) << 4);
            o[32 + l] = (uint8_t)((q[l] >> 4) | (q[32 + l] & 0xF0));
        }
    }
}
static void q4_K_from_r(block_q4_K *b, const uint8_t *src) {
    uint8_t e[QK_K], sc[8], mn[8];
    for (int i = 0; i < 64; i++) {
        e[i] = src[16 + i] & 0x0F;
        e[64 + i] = src[16 + i] >> 4;
        e[128 + i] = src[80 + i] & 0x0F;
        e[192 + i] = src[80 + i] >> 4;
    }
    for (int j = 0; j < 8; j++) {
        sc[j] = src[j] & 63;
        mn[j] = (uint8_t)((src[j] >> 6) | ((src[8 + j / 2] >> (4 * (j & 1))) & 0x0F) << 2);
    }
    memcpy(&b->d, src + 12, 2);
    memcpy(&b->dmin, src + 14, 2);
    q4_K_scales_set(b->scales, sc, mn);
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) b->qs[32 * g + l] = (uint8_t)(e[64 * g + l] | e[64 * g + 32 + l] << 4);
}

int st_repack_blocks(uint32_t to, void *dst, const void *src, int64_t n_blocks) {
    if (to != ST_TYPE_Q4_K_R) return 0;
    for (int64_t i = 0; i < n_blocks; i++) {
        block_q4_K b; /* a copy, so dst may alias src */
        memcpy(&b, (const char *)src + i * sizeof b, sizeof b);
        q4_K_to_r((uint8_t *)dst + i * sizeof b, &b);
    }
    return 1;
}

int st_unrepack_blocks(uint32_t from, void *dst, const void *src, int64_t n_blocks) {
    if (from != ST_TYPE_Q4_K_R) return 0;
    for (int64_t i = 0; i < n_blocks; i++) {
        uint8_t r[sizeof(block_q4_K)];
        memcpy(r, (const char *)src + i * sizeof r, sizeof r);
        q4_K_from_r((block_q4_K *)((char *)dst + i * sizeof r), r);
    }
    return 1;
}

/* Chunks of the row back in the file's layout, each through the plain kernel; the partial sums
 * add up in a different order than one call over the row, so results agree to rounding. */
void st_dot_q4_K_r_plain(int64_t k, const void *w, const void *x, size_t xs, int nx, float *out) {
    enum { CHUNK = 16 };
    block_q4_K tmp[CHUNK];
    st_dot_fn dot = st_dot_kernel(ST_TYPE_Q4_K);
    float part[ST_DOT_MAX_NX];
    for (int j = 0; j < nx; j++) out[j] = 0;
    int64_t nb = k / QK_K;
    for (int64_t b = 0; b < nb; b += CHUNK) {
        int64_t n = nb - b < CHUNK ? nb - b : CHUNK;
        st_unrepack_blocks(ST_TYPE_Q4_K_R, tmp, (const char *)w + b * (int64_t)sizeof tmp[0], n);
        dot(n * QK_K, tmp, (const char *)x + b * (int64_t)sizeof(block_q8_K), xs, nx, part);
        for (int j = 0; j < nx; j++) out[j] += part[j];
    }
}
