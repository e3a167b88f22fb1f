/* test_ops_attn.c: KV cache rows and causal attention.
 *  - kv_store: f32 rows copied, f16 rows rounded to nearest even;
 *  - hand cases: one visible key gives V; two keys with scores 0 and ln 3 weigh V 1/4 and 3/4;
 *    a query at position p ignores cells after p; GQA head h reads kv head h / (H/H_kv);
 *  - random problems (odd head sizes, GQA 1/2/4, f32 and f16 caches, prefill and decode shapes,
 *    long contexts, a 4-thread pool where decode splits the cells) against a float64 softmax
 *    attention over the same cache contents, for the reference and each SIMD level;
 *  - each row of a short chunk (a speculative verify's) gives bit for bit what the one-row call
 *    for that row gives, also where decode splits the cells over threads (4 threads, long
 *    contexts, cells counts either side of a split boundary);
 *  - the tiled prompt kernels on odd shapes: head sizes 17 to 256, GQA 1/3/4/6/8/16, chunks that
 *    fill a vector of rows or not and tiles cut short, cached prefixes that end on, before and
 *    after a 64-cell block edge, thousands of cells, and positions out of order (some rows then
 *    see nothing, others fewer cells than the row before), which moves the causal edge row by
 *    row inside the blocks;
 *  - a prompt split into tiled chunks (32 tokens or more) gives one chunk's bits. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "base/cpu.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "test.h"

static uint64_t rng = 0x853c49e6748fea9bull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static float cache_at(const void *c, uint32_t type, int64_t idx) {
    return type == ST_TYPE_F16 ? st_fp16_to_fp32(((const uint16_t *)c)[idx]) : ((const float *)c)[idx];
}

static void test_kv_store(void) {
    float src[2][6] = { { 1, 2, 3, 4, 5, 6 }, { 0.1f, -0.2f, 65504.0f, 1e-8f, 3.14159f, -7 } };
    uint16_t h[4 * 6];
    float f[4 * 6];
    memset(h, 0, sizeof h);
    memset(f, 0, sizeof f);
    st_op_kv_store(ST_TYPE_F16, h, 6, 1, &src[0][0], 6, 2);
    st_op_kv_store(ST_TYPE_F32, f, 6, 2, &src[0][0], 6, 2);
    int ok = 1;
    for (int e = 0; e < 6; e++) {
        if (h[6 + e] != st_fp32_to_fp16(src[0][e]) || h[12 + e] != st_fp32_to_fp16(src[1][e])) ok = 0;
        if (f[12 + e] != src[0][e] || f[18 + e] != src[1][e]) ok = 0;
        if (h[e] != 0 || h[18 + e] != 0 || f[e] != 0) ok = 0;
    }
    CHECK(ok);
    /* the hardware conversion (AVX-512 level) against the reference on awkward values: ties,
     * subnormals, overflow to inf, the largest half */
    float v[37];
    uint16_t h0[37], h1[37];
    const float special[] = { 65504.0f, 65519.99f, 65520.0f, 1e9f, -1e9f, 5.96e-8f, 2.98e-8f, 2.99e-8f,
                              6.1e-5f, 1.0f + 1.0f / 2048.0f, 1.0f + 3.0f / 2048.0f, -0.0f, 0.0f };
    for (int i = 0; i < 37; i++) v[i] = i < 13 ? special[i] : 300.0f * frand();
    st_cpu_limit(0);
    st_op_kv_store(ST_TYPE_F16, h0, 37, 0, v, 37, 1);
    st_cpu_limit(3);
    st_op_kv_store(ST_TYPE_F16, h1, 37, 0, v, 37, 1);
    CHECK(memcmp(h0, h1, sizeof h0) == 0);
    for (int i = 0; i < 37; i++) CHECKF(h0[i] == st_fp32_to_fp16(v[i]), "%g", v[i]);
    CHECK(st_kv_row_bytes(ST_TYPE_F16, 256) == 512 && st_kv_row_bytes(ST_TYPE_F32, 256) == 1024);
}

static void test_hand_cases(st_pool *pool) {
    /* H = 4, H_kv = 2, hd = 2; cells hold distinct V per kv head */
    const int64_t H = 4, Hkv = 2, hd = 2, row = Hkv * hd;
    float k[3][4] = { { 1, 0, 0, 1 }, { 0, 0, 0, 0 }, { 0, 0, 0, 0 } };
    float v[3][4] = { { 1, 2, -3, 4 }, { 5, 6, 7, 8 }, { 9, 10, 11, 12 } };
    const float scale = 1.0f / sqrtf(2.0f);
    const float L3 = logf(3.0f) / scale;
    /* kv head 0: k0 = k1 = (1, 0); kv head 1: k0 = (0, 1), k1 = (1, 0). Query 0 (pos 0) sees
     * cell 0 only; query 1 (pos 1) sees cells 0 and 1, never cell 2. Head 0 of query 1 scores
     * 0 and 0; head 2 (kv head 1) scores 0 and ln 3. */
    k[1][0] = 1; k[1][1] = 0; k[1][2] = 1; k[1][3] = 0;
    const float q[2][4][2] = { { { 3, 1 }, { 0, 0 }, { 5, 5 }, { -1, 2 } },
                               { { 0, 0 }, { 0, L3 }, { L3, 0 }, { 0, 0 } } };
    int32_t pos[2] = { 0, 1 };
    for (int tcase = 0; tcase < 2; tcase++) {
        const uint32_t type = tcase ? ST_TYPE_F16 : ST_TYPE_F32;
        uint16_t kh[3 * 4], vh[3 * 4];
        float kf[3 * 4], vf[3 * 4];
        void *kc = tcase ? (void *)kh : (void *)kf, *vc = tcase ? (void *)vh : (void *)vf;
        st_op_kv_store(type, kc, row, 0, &k[0][0], row, 3);
        st_op_kv_store(type, vc, row, 0, &v[0][0], row, 3);
        for (int lvl = 0; lvl < 3; lvl++) {
            st_cpu_limit(lvl == 0 ? 0 : lvl == 1 ? 1 : 3);
            float out[2][4][2];
            memset(out, 0xff, sizeof out);
            st_attn_args a = { .q = &q[0][0][0], .ldq_tok = H * hd, .ldq_head = hd,
                               .k_cache = kc, .v_cache = vc, .kv_type = type, .pos = pos,
                               .n_tok = 2, .n_head = H, .n_head_kv = Hkv, .head_dim = hd,
                               .n_kv = 3, .scale = scale, .out = &out[0][0][0], .ldo_tok = H * hd };
            st_op_attention(pool, &a);
            /* token 0 sees one cell: output = V of its kv head, whatever q is */
            CHECKF(out[0][0][0] == 1 && out[0][0][1] == 2 && out[0][1][0] == 1 && out[0][1][1] == 2,
                   "lvl %d type %d: %g %g", lvl, tcase, out[0][0][0], out[0][0][1]);
            CHECK(out[0][2][0] == -3 && out[0][2][1] == 4 && out[0][3][0] == -3 && out[0][3][1] == 4);
            /* token 1, head 0: equal scores: mean of cells 0 and 1 (cell 2 is in the future) */
            CHECKF(fabsf(out[1][0][0] - 3.0f) < 1e-6f && fabsf(out[1][0][1] - 4.0f) < 1e-6f,
                   "lvl %d: %g %g", lvl, out[1][0][0], out[1][0][1]);
            /* head 2: weights 1/4, 3/4 on kv head 1's values (-3,4) and (7,8) */
            CHECKF(fabsf(out[1][2][0] - (0.25f * -3 + 0.75f * 7)) < 1e-5f &&
                   fabsf(out[1][2][1] - (0.25f * 4 + 0.75f * 8)) < 1e-5f,
                   "lvl %d: %g %g", lvl, out[1][2][0], out[1][2][1]);
        }
    }
    st_cpu_limit(3);
}

typedef struct prob {
    int64_t T, H, Hkv, hd, n_kv;
    uint32_t type;
    int scramble;   /* positions drawn at random in [-1, n_kv) instead of the chunk's last T */
} prob;

static void check_random(st_pool *pool, prob pr) {
    const int64_t row = pr.Hkv * pr.hd, r = pr.H / pr.Hkv;
    const size_t esz = pr.type == ST_TYPE_F16 ? 2 : 4;
    float *kv = calloc((size_t)(pr.n_kv * row), sizeof(float));
    void *kc = malloc(esz * (size_t)(pr.n_kv * row)), *vc = malloc(esz * (size_t)(pr.n_kv * row));
    for (int64_t i = 0; i < pr.n_kv * row; i++) kv[i] = 2.0f * frand();
    st_op_kv_store(pr.type, kc, row, 0, kv, row, pr.n_kv);
    for (int64_t i = 0; i < pr.n_kv * row; i++) kv[i] = frand();
    st_op_kv_store(pr.type, vc, row, 0, kv, row, pr.n_kv);
    /* q with a head stride of 2*hd (the interleaved q|gate buffer) */
    const int64_t ldq = pr.H * 2 * pr.hd;
    float *q = malloc(sizeof(float) * (size_t)(pr.T * ldq));
    for (int64_t i = 0; i < pr.T * ldq; i++) q[i] = 2.0f * frand();
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)pr.T);
    for (int64_t t = 0; t < pr.T; t++) pos[t] = (int32_t)(pr.n_kv - pr.T + t);
    if (pr.scramble)
        for (int64_t t = 0; t < pr.T; t++) pos[t] = (int32_t)((frand() + 1.0f) * 0.5f * (float)(pr.n_kv + 1)) - 1;
    const int64_t ldo = pr.H * pr.hd + 3;
    float *out = malloc(sizeof(float) * (size_t)(pr.T * ldo));
    double *ref = malloc(sizeof(double) * (size_t)(pr.T * pr.H * pr.hd));
    double *s = malloc(sizeof(double) * (size_t)pr.n_kv);
    const float scale = 1.0f / sqrtf((float)pr.hd);
    for (int64_t t = 0; t < pr.T; t++)
        for (int64_t h = 0; h < pr.H; h++) {
            const int64_t g = h / r, nv = pos[t] + 1 < pr.n_kv ? pos[t] + 1 : pr.n_kv;
            const float *qq = q + t * ldq + h * 2 * pr.hd;
            double m = -INFINITY, l = 0;
            for (int64_t c = 0; c < nv; c++) {
                double dot = 0;
                for (int64_t i = 0; i < pr.hd; i++) dot += (double)qq[i] * cache_at(kc, pr.type, c * row + g * pr.hd + i);
                s[c] = dot * scale;
                m = fmax(m, s[c]);
            }
            for (int64_t c = 0; c < nv; c++) { s[c] = exp(s[c] - m); l += s[c]; }
            for (int64_t i = 0; i < pr.hd; i++) {
                double o = 0;
                for (int64_t c = 0; c < nv; c++) o += s[c] * cache_at(vc, pr.type, c * row + g * pr.hd + i);
                ref[(t * pr.H + h) * pr.hd + i] = nv > 0 ? o / l : 0.0;
            }
        }
    for (int lvl = 0; lvl < 3; lvl++) {
        st_cpu_limit(lvl == 0 ? 0 : lvl == 1 ? 1 : 3);
        st_attn_args a = { .q = q, .ldq_tok = ldq, .ldq_head = 2 * pr.hd, .k_cache = kc, .v_cache = vc,
                           .kv_type = pr.type, .pos = pos, .n_tok = pr.T, .n_head = pr.H,
                           .n_head_kv = pr.Hkv, .head_dim = pr.hd, .n_kv = pr.n_kv, .scale = scale,
                           .out = out, .ldo_tok = ldo };
        st_op_attention(pool, &a);
        double err = 0;
        for (int64_t t = 0; t < pr.T; t++)
            for (int64_t e = 0; e < pr.H * pr.hd; e++)
                err = fmax(err, fabs(out[t * ldo + e] - ref[t * pr.H * pr.hd + e]));
        CHECKF(err < 2e-5, "lvl %d T=%ld H=%ld Hkv=%ld hd=%ld n_kv=%ld type=%u: err %g", lvl, (long)pr.T,
               (long)pr.H, (long)pr.Hkv, (long)pr.hd, (long)pr.n_kv, pr.type, err);
    }
    st_cpu_limit(3);
    /* each row alone, as decode would run it: bit for bit the chunk's row */
    float *one = malloc(sizeof(float) * (size_t)ldo);
    int same = 1;
    for (int64_t t = 0; t < pr.T && pr.T <= 16; t++) {
        st_attn_args a = { .q = q + t * ldq, .ldq_tok = ldq, .ldq_head = 2 * pr.hd, .k_cache = kc, .v_cache = vc,
                           .kv_type = pr.type, .pos = pos + t, .n_tok = 1, .n_head = pr.H,
                           .n_head_kv = pr.Hkv, .head_dim = pr.hd, .n_kv = pos[t] + 1, .scale = scale,
                           .out = one, .ldo_tok = ldo };
        st_op_attention(pool, &a);
        same &= !memcmp(one, out + t * ldo, sizeof(float) * (size_t)(pr.H * pr.hd));
    }
    CHECKF(same, "T=%ld H=%ld Hkv=%ld n_kv=%ld: a chunk's row differs from the row alone", (long)pr.T, (long)pr.H,
           (long)pr.Hkv, (long)pr.n_kv);
    free(one);
    free(kv); free(kc); free(vc); free(q); free(pos); free(out); free(ref); free(s);
}

/* The same rows through one chunk and through chunks of 32, 33 and 35 tokens (each seeing the cells
 * before it): the same bits at each SIMD level, whatever rows shared a tile. */
static void test_chunk_invariance(st_pool *pool) {
    const int64_t T = 100, H = 8, Hkv = 2, hd = 128, row = Hkv * hd, n_kv = 100 + T;
    float *kv = malloc(sizeof(float) * (size_t)(n_kv * row));
    uint16_t *kc = malloc(2 * (size_t)(n_kv * row)), *vc = malloc(2 * (size_t)(n_kv * row));
    for (int64_t i = 0; i < n_kv * row; i++) kv[i] = 2.0f * frand();
    st_op_kv_store(ST_TYPE_F16, kc, row, 0, kv, row, n_kv);
    for (int64_t i = 0; i < n_kv * row; i++) kv[i] = frand();
    st_op_kv_store(ST_TYPE_F16, vc, row, 0, kv, row, n_kv);
    float *q = malloc(sizeof(float) * (size_t)(T * H * hd));
    float *one = malloc(sizeof(float) * (size_t)(T * H * hd)), *split = malloc(sizeof(float) * (size_t)(T * H * hd));
    for (int64_t i = 0; i < T * H * hd; i++) q[i] = 2.0f * frand();
    int32_t pos[100];
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(100 + t);
    const int64_t cuts[4] = { 0, 32, 65, 100 };
    for (int lvl = 1; lvl < 3; lvl++) {
        st_cpu_limit(lvl == 1 ? 1 : 3);
        st_attn_args a = { .q = q, .ldq_tok = H * hd, .ldq_head = hd, .k_cache = kc, .v_cache = vc,
                           .kv_type = ST_TYPE_F16, .pos = pos, .n_tok = T, .n_head = H, .n_head_kv = Hkv,
                           .head_dim = hd, .n_kv = n_kv, .scale = 0.088f, .out = one, .ldo_tok = H * hd };
        st_op_attention(pool, &a);
        for (int c = 0; c < 3; c++) {
            st_attn_args b = a;
            b.q = q + cuts[c] * H * hd;
            b.pos = pos + cuts[c];
            b.n_tok = cuts[c + 1] - cuts[c];
            b.n_kv = 100 + cuts[c + 1];
            b.out = split + cuts[c] * H * hd;
            st_op_attention(pool, &b);
        }
        CHECKF(!memcmp(one, split, sizeof(float) * (size_t)(T * H * hd)), "lvl %d: chunks of 32, 33, 35 differ from one", lvl);
    }
    st_cpu_limit(3);
    free(kv); free(kc); free(vc); free(q); free(one); free(split);
}

int main(void) {
    st_pool *pool = NULL;
    if (st_pool_create(2, &pool) != ST_OK) return 1;
    test_kv_store();
    test_hand_cases(pool);
    test_chunk_invariance(pool);
    const prob probs[] = {
        { 1, 8, 2, 128, 1, ST_TYPE_F16, 0 },      /* decode, first token */
        { 1, 8, 2, 128, 700, ST_TYPE_F16, 0 },    /* decode at some context */
        { 1, 8, 2, 128, 333, ST_TYPE_F32, 0 },
        { 37, 8, 2, 128, 37, ST_TYPE_F16, 0 },    /* prefill from empty */
        { 29, 8, 2, 128, 90, ST_TYPE_F32, 0 },    /* prefill after a cached prefix */
        { 13, 4, 4, 64, 50, ST_TYPE_F16, 0 },     /* no GQA */
        { 9, 6, 3, 24, 31, ST_TYPE_F16, 0 },      /* odd head size */
        { 5, 3, 1, 17, 12, ST_TYPE_F32, 0 },
        { 7, 2, 1, 256, 40, ST_TYPE_F16, 0 },     /* the largest head */
        { 3, 16, 2, 80, 2100, ST_TYPE_F16, 0 },   /* long context */
        { 1, 4, 1, 64, 100, ST_TYPE_F16, 0 },     /* fewer items than threads: single-head items */
        { 1, 16, 2, 256, 300, ST_TYPE_F32, 0 },   /* qwen3next-like: groups of 8, head 256 */
    };
    for (size_t i = 0; i < sizeof probs / sizeof probs[0]; i++) check_random(pool, probs[i]);
    /* prompt chunks through the tiles: T tokens after a prefix of n_kv - T cells */
    const prob tiles[] = {
        { 32, 4, 1, 128, 32, ST_TYPE_F16, 0 },          /* the shortest tiled chunk, from empty */
        { 33, 8, 2, 128, 33 + 64, ST_TYPE_F16, 0 },     /* prefix on a block edge, a short tile */
        { 65, 8, 2, 64, 65 + 63, ST_TYPE_F32, 0 },      /* prefix one short of the edge */
        { 130, 2, 2, 100, 130 + 1, ST_TYPE_F16, 0 },    /* no GQA: 64 tokens per tile */
        { 33, 9, 3, 17, 33 + 200, ST_TYPE_F32, 0 },     /* GQA 3, head size 17 */
        { 40, 12, 2, 48, 40 + 129, ST_TYPE_F16, 0 },    /* GQA 6 */
        { 32, 16, 1, 256, 32 + 300, ST_TYPE_F16, 0 },   /* GQA 16, head 256 */
        { 64, 16, 2, 256, 64 + 1000, ST_TYPE_F32, 0 },  /* qwen3next-like */
        { 35, 8, 1, 64, 35 + 700, ST_TYPE_F16, 0 },     /* a tile of 3 tokens */
        { 65, 1, 1, 32, 65 + 5, ST_TYPE_F16, 0 },       /* no GQA: a tile of one row */
        { 48, 4, 2, 40, 48 + 5000, ST_TYPE_F16, 0 },    /* a long prefix */
        { 57, 8, 2, 128, 300, ST_TYPE_F16, 1 },         /* positions out of order */
        { 40, 6, 2, 24, 90, ST_TYPE_F32, 1 },
    };
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) check_random(pool, tiles[i]);
    st_pool_destroy(pool);
    /* more threads than (token, kv head) items and long contexts: the cells are split into parts
     * merged after a barrier (2, 4 and 2 parts here) */
    if (st_pool_create(4, &pool) != ST_OK) return 1;
    const prob split[] = {
        { 1, 8, 2, 128, 3000, ST_TYPE_F16, 0 },
        { 1, 4, 1, 64, 5000, ST_TYPE_F32, 0 },
        { 2, 8, 1, 128, 2000, ST_TYPE_F16, 0 },
        { 1, 2, 1, 24, 1100, ST_TYPE_F16, 0 },
        { 4, 8, 2, 64, 2050, ST_TYPE_F16, 0 },    /* verify chunks: rows either side of 2048 cells */
        { 6, 4, 1, 64, 1026, ST_TYPE_F32, 0 },    /* ... and of the first split at 1024 */
        { 40, 8, 2, 128, 40 + 3000, ST_TYPE_F16, 0 },   /* tiles cut to a vector of rows for 4 threads */
        { 33, 16, 1, 64, 33 + 500, ST_TYPE_F32, 0 },
    };
    for (size_t i = 0; i < sizeof split / sizeof split[0]; i++) check_random(pool, split[i]);
    st_pool_destroy(pool);
    return test_report("test_ops_attn");
}
