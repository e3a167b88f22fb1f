/* test_quant_ggml.c: our reference conversions equal the peer's (llama.cpp's libggml-base.so,
 * loaded with dlopen) bit for bit:
 *   - half and bfloat16 -> f32 for all 65536 inputs; f32 -> half / bfloat16 on random bit
 *     patterns and every boundary (NaNs included);
 *   - dequantization of every computable type on random blocks (random bytes, scale fields set
 *     to random finite halves, plus blocks with zero, subnormal, huge and negative scales; the
 *     byte scales of MXFP4 and NVFP4 take all 256 values);
 *   - quantization of every computable type (and the activation forms q8_1, q8_K) on random
 *     rows of several shapes, compared byte for byte with ggml's from_float_ref.
 * The grid i-quants (grid_qtypes) have no quantizer; for them every grid entry and all 128 sign
 * masks are checked as well: the crafted blocks of tools/iq_probe.h (which the grids were read
 * out of the peer with) decode to the same bits.
 * Prints one line per type. Skips when the peer library is not installed. */
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant/quant.h"
#include "quant/ref.h"
#include "test.h"
#include "../tools/iq_probe.h"

#define PEER_LIB "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"

/* The leading fields of ggml.h's struct ggml_type_traits, in its order. */
typedef void (*ggml_to_float)(const void *x, float *y, int64_t n);
typedef void (*ggml_from_float)(const float *x, void *y, int64_t n);
struct ggml_type_traits {
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    ggml_to_float to_float;
    ggml_from_float from_float_ref;
};
typedef const struct ggml_type_traits *(*get_traits_fn)(int type);

static void *peer;
static get_traits_fn get_traits;

/* ---- random numbers (splitmix64; deterministic) ---- */
static uint64_t rng_state = 0x5eed5eedULL;
static uint64_t rnd64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static float rnd_unit(void) { return (float)(rnd64() >> 40) / 16777216.0f; }   /* [0, 1) */
static float rnd_gauss(void) {
    float u = rnd_unit() + 1e-7f, v = rnd_unit();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}
static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float f32_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void *peer_open(void) {
    const char *dir = getenv("STRATA_PEER_DIR");
    char path[4096];
    if (dir && *dir) snprintf(path, sizeof path, "%s/%s", dir, PEER_LIB);
    else {
        const char *src = getenv("STRATA_SOURCE_DIR");
        if (!src) return NULL;
        snprintf(path, sizeof path, "%s/.peer/%s", src, PEER_LIB);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return h;
}

/* ---- fp16 / bf16 ---- */

static void test_halves(void) {
    const struct ggml_type_traits *f16 = get_traits(ST_TYPE_F16), *bf16 = get_traits(ST_TYPE_BF16);
    uint16_t *h = malloc(65536 * sizeof *h);
    float *ref = malloc(65536 * sizeof *ref);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;

    int bad = 0;
    f16->to_float(h, ref, 65536);
    for (uint32_t i = 0; i < 65536; i++) {
        if (f32_bits(st_fp16_to_fp32(h[i])) != f32_bits(ref[i]) ||
            f32_bits(st_fp16_widen(h[i])) != f32_bits(ref[i])) {
            if (bad++ < 5) fprintf(stderr, "  f16 %04x: ours %08x ggml %08x\n", i,
                                   f32_bits(st_fp16_to_fp32(h[i])), f32_bits(ref[i]));
        }
    }
    CHECKF(bad == 0, "f16 -> f32: %d of 65536 differ", bad);
    fprintf(stderr, "f16 -> f32: %d/65536 bit-exact\n", 65536 - bad);

    bad = 0;
    bf16->to_float(h, ref, 65536);
    for (uint32_t i = 0; i < 65536; i++) bad += f32_bits(st_bf16_to_fp32(h[i])) != f32_bits(ref[i]);
    CHECKF(bad == 0, "bf16 -> f32: %d of 65536 differ", bad);
    fprintf(stderr, "bf16 -> f32: %d/65536 bit-exact\n", 65536 - bad);

    /* f32 -> half: random bit patterns, plus every value near each half's rounding boundary */
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x);
    uint16_t *got = malloc(N * sizeof *got), *want = malloc(N * sizeof *want);
    int n = 0;
    for (uint32_t i = 0; i < 65536 && n + 8 <= N; i++) {
        /* the f32 that is exactly half (h), and the midpoint to its successor, +-1 ulp */
        uint32_t c = f32_bits(st_fp16_widen((uint16_t)i));
        if ((i & 0x7c00) == 0x7c00) continue;
        uint32_t next = f32_bits(st_fp16_widen((uint16_t)(i + 1)));
        uint32_t mid = f32_bits((f32_of(c) + f32_of(next)) / 2);
        uint32_t e[8] = {c, c + 1, c - 1, mid, mid + 1, mid - 1, c ^ 0x80000000u, mid ^ 0x80000000u};
        for (int k = 0; k < 8; k++) x[n++] = f32_of(e[k]);
    }
    const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                                0x477fefffu, 0x477ff000u, 0x477ff001u, 0x33000000u, 0x33000001u,
                                0x32ffffffu, 0x00000001u, 0x80000000u, 0x7f7fffffu};
    for (size_t k = 0; k < sizeof special / sizeof *special; k++) x[n++] = f32_of(special[k]);
    while (n < N) x[n++] = f32_of((uint32_t)rnd64());
    f16->from_float_ref(x, want, N);
    bad = 0;
    for (int i = 0; i < N; i++) {
        got[i] = st_fp32_to_fp16(x[i]);
        if (got[i] != want[i] && bad++ < 5)
            fprintf(stderr, "  f32 %08x -> f16: ours %04x ggml %04x\n", f32_bits(x[i]), got[i], want[i]);
    }
    CHECKF(bad == 0, "f32 -> f16: %d of %d differ", bad, N);
    fprintf(stderr, "f32 -> f16: %d/%d bit-exact\n", N - bad, N);

    bf16->from_float_ref(x, want, N);
    bad = 0;
    for (int i = 0; i < N; i++) bad += st_fp32_to_bf16(x[i]) != want[i];
    CHECKF(bad == 0, "f32 -> bf16: %d of %d differ", bad, N);
    fprintf(stderr, "f32 -> bf16: %d/%d bit-exact\n", N - bad, N);
    free(x); free(got); free(want); free(h); free(ref);
}

/* ---- quantized types ---- */

typedef struct {
    uint32_t type;
    int half_at[2];   /* byte offsets of the fp16 scale fields in a block, -1 if none */
} qtype;

/* The grid i-quants: dequantization only (no quantizer here: quant.h). */
static const qtype grid_qtypes[] = {
    {ST_TYPE_IQ2_XXS, {0, -1}}, {ST_TYPE_IQ2_XS, {0, -1}}, {ST_TYPE_IQ2_S, {0, -1}},
    {ST_TYPE_IQ3_XXS, {0, -1}}, {ST_TYPE_IQ3_S, {0, -1}}, {ST_TYPE_IQ1_S, {0, -1}},
    {ST_TYPE_IQ1_M, {-1, -1}},   /* d in the top nibbles of its four scale words: see test_dequant */
};

static const qtype qtypes[] = {
    {ST_TYPE_Q4_0, {0, -1}},  {ST_TYPE_Q4_1, {0, 2}},   {ST_TYPE_Q5_0, {0, -1}},
    {ST_TYPE_Q5_1, {0, 2}},   {ST_TYPE_Q8_0, {0, -1}},  {ST_TYPE_Q2_K, {80, 82}},
    {ST_TYPE_Q3_K, {108, -1}}, {ST_TYPE_Q4_K, {0, 2}},  {ST_TYPE_Q5_K, {0, 2}},
    {ST_TYPE_Q6_K, {208, -1}}, {ST_TYPE_IQ4_NL, {0, -1}}, {ST_TYPE_IQ4_XS, {0, -1}},
    {ST_TYPE_Q1_0, {0, -1}},  {ST_TYPE_Q2_0, {0, -1}},  {ST_TYPE_TQ1_0, {52, -1}},
    {ST_TYPE_TQ2_0, {64, -1}}, {ST_TYPE_MXFP4, {-1, -1}}, {ST_TYPE_NVFP4, {-1, -1}},
};

/* A finite half: mostly a normal magnitude 2^-14 .. 2^3 with random sign; block `b` of every
 * 16 gets an edge value instead (zero, subnormal, largest, negative zero). */
static uint16_t scale_half(int b) {
    switch (b % 16) {
    case 1: return 0x0000;
    case 2: return 0x8000;
    case 3: return (uint16_t)(1 + rnd64() % 0x3ff);   /* subnormal */
    case 4: return 0x7bff;                            /* 65504 */
    case 5: return 0xfbff;
    default: {
        uint16_t e = (uint16_t)(1 + rnd64() % 17);
        return (uint16_t)((rnd64() & 0x8000) | e << 10 | (rnd64() & 0x3ff));
    }
    }
}

static int compare_floats(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (f32_bits(a[i]) != f32_bits(b[i])) return 0;
    return 1;
}

static void test_dequant(const qtype *q, int nblocks) {
    const st_type_info *t = st_type_get(q->type);
    const struct ggml_type_traits *g = get_traits((int)q->type);
    const int64_t n = (int64_t)nblocks * t->block_size;
    uint8_t *blocks = malloc((size_t)nblocks * t->type_size);
    float *ours = malloc((size_t)n * sizeof(float)), *theirs = malloc((size_t)n * sizeof(float));
    for (size_t i = 0; i < (size_t)nblocks * t->type_size; i++) blocks[i] = (uint8_t)rnd64();
    for (int b = 0; b < nblocks; b++)
        for (int k = 0; k < 2; k++)
            if (q->half_at[k] >= 0) {
                uint16_t h = scale_half(b + 7 * k);
                memcpy(blocks + (size_t)b * t->type_size + q->half_at[k], &h, 2);
            }
    if (q->type == ST_TYPE_IQ1_M) /* the scale words' top nibbles, u16 3 the highest, are d */
        for (int b = 0; b < nblocks; b++) {
            uint16_t h = scale_half(b), w[4];
            uint8_t *sc = blocks + (size_t)b * t->type_size + 48;
            memcpy(w, sc, 8);
            for (int i = 0; i < 4; i++) w[i] = (uint16_t)((w[i] & 0x0fff) | ((h >> (4 * i)) & 15) << 12);
            memcpy(sc, w, 8);
        }
    CHECK(st_dequantize_row(q->type, blocks, ours, n) == 1);
    g->to_float(blocks, theirs, n);
    int good = 0;
    for (int b = 0; b < nblocks; b++) {
        int64_t o = (int64_t)b * t->block_size;
        good += compare_floats(ours + o, theirs + o, t->block_size);
    }
    CHECKF(good == nblocks, "%s dequantize: %d of %d blocks differ", t->name, nblocks - good, nblocks);
    fprintf(stderr, "%-7s dequantize: %d/%d blocks bit-exact\n", t->name, good, nblocks);
    free(blocks); free(ours); free(theirs);
}

/* Fill a row with a mix of the shapes quantizers meet: gaussian weights, uniform, heavy
 * outliers, one-signed, sparse, constant, all-zero, on-grid (ties), a spike, tiny values. Each
 * block gets one shape and a scale from 1e-6 to 1e4, or (half the 256-blocks) each 32-stretch
 * of it does. */
static void fill_row(float *x, int64_t n, int block_size) {
    for (int64_t o = 0, len = block_size; o < n; o += len) {
        /* half the super-blocks mix eight 32-element stretches of different shapes and scales */
        len = block_size > 32 && (o % block_size != 0 || rnd64() % 2) ? 32 : block_size;
        int shape = (int)(rnd64() % 15);
        float scale = powf(10.0f, (float)((int)(rnd64() % 11) - 6));   /* 1e-6 .. 1e4 */
        for (int i = 0; i < len; i++) {
            float v;
            switch (shape) {
            case 0: case 1: case 2: v = rnd_gauss(); break;
            case 3: v = 2 * rnd_unit() - 1; break;
            case 4: v = rnd_gauss() * (rnd64() % 16 == 0 ? 20.0f : 1.0f); break;
            case 5: v = fabsf(rnd_gauss()); break;
            case 6: v = -fabsf(rnd_gauss()); break;
            case 7: v = rnd64() % 8 == 0 ? rnd_gauss() : 0.0f; break;
            case 8: v = 0.75f; break;
            case 9: v = 0.0f; break;
            case 10: v = rnd_gauss() * 1e-20f; break;
            case 12: v = (float)((int)(rnd64() % 17) - 8); break;            /* on a grid: ties */
            case 13: v = (float)((int)(rnd64() % 5) - 2) * 0.5f; break;      /* few distinct values */
            case 14: v = i == 7 ? 1.0f : rnd_gauss() * 1e-3f; break;          /* one spike */
            default: v = rnd_gauss() + (i % 32 < 16 ? 3.0f : -1.0f); break;   /* sub-blocks differ */
            }
            x[o + i] = v * scale;
        }
    }
}

typedef void (*quant_fn)(const float *x, void *y, int64_t n);

/* Compare our quantizer with ggml's on nblocks blocks. Blocks whose bytes differ pass only if
 * the input block is all zero and both decode (with ggml's decoder) to equal values, -0 == +0.
 * That case exists: for an all-zero iq4_nl block ggml stores d = 0 with whatever levels its
 * stack buffer held from the previous block, which decode to zeros of either sign; we store
 * d = 0 and levels 0. */
static void test_quant(const char *name, int block_size, size_t type_size, quant_fn ours_fn,
                       ggml_from_float theirs_fn, ggml_to_float decode, int nblocks) {
    const int64_t n = (int64_t)nblocks * block_size;
    float *x = malloc((size_t)n * sizeof(float));
    uint8_t *ours = calloc((size_t)nblocks, type_size), *theirs = calloc((size_t)nblocks, type_size);
    fill_row(x, n, block_size);
    /* rows of 1, 2 and 3 blocks as well as the whole row: row length must not matter */
    int64_t done = 0;
    for (int rows = 0; done < n; rows++) {
        int64_t len = (int64_t)block_size * (1 + rows % 3);
        if (done + len > n) len = n - done;
        ours_fn(x + done, ours + (size_t)(done / block_size) * type_size, len);
        theirs_fn(x + done, theirs + (size_t)(done / block_size) * type_size, len);
        done += len;
    }
    float *da = malloc((size_t)block_size * sizeof(float)), *db = malloc((size_t)block_size * sizeof(float));
    int exact = 0, decoded_same = 0;
    for (int b = 0; b < nblocks; b++) {
        const uint8_t *pa = ours + (size_t)b * type_size, *pb = theirs + (size_t)b * type_size;
        if (!memcmp(pa, pb, type_size)) { exact++; continue; }
        float amax = 0;
        for (int i = 0; i < block_size; i++) amax = fmaxf(amax, fabsf(x[(size_t)b * block_size + i]));
        if (decode && amax < 1e-15f) {
            decode(pa, da, block_size);
            decode(pb, db, block_size);
            int same = 1;
            for (int i = 0; i < block_size; i++) same &= da[i] == db[i];
            if (same) { decoded_same++; continue; }
        }
        if (b - exact - decoded_same < 3)   /* the first three differing blocks */
            fprintf(stderr, "  %s block %d differs (first input %g)\n", name, b, (double)x[(size_t)b * block_size]);
    }
    fprintf(stderr, "%-7s quantize:   %d/%d blocks byte-exact, %d more decode to equal values\n", name, exact, nblocks,
            decoded_same);
    CHECKF(exact + decoded_same == nblocks, "%s quantize: %d of %d blocks differ", name,
           nblocks - exact - decoded_same, nblocks);
    /* only iq4_nl has blocks (the all-zero ones) that ggml leaves partly unset */
    if (strcmp(name, "iq4_nl") != 0) CHECKF(exact == nblocks, "%s: %d blocks not byte-exact", name, nblocks - exact);
    free(x); free(ours); free(theirs); free(da); free(db);
}

/* The grid i-quants: their traits, random blocks, then every grid entry and sign mask through
 * the probe blocks. */
static void test_grids(void) {
    for (size_t i = 0; i < sizeof grid_qtypes / sizeof *grid_qtypes; i++) {
        const st_type_info *t = st_type_get(grid_qtypes[i].type);
        const struct ggml_type_traits *g = get_traits((int)grid_qtypes[i].type);
        CHECKF(g && !strcmp(g->type_name, t->name) && g->blck_size == t->block_size &&
               g->type_size == (size_t)t->type_size && g->to_float, "type %u: peer traits disagree with ours",
               grid_qtypes[i].type);
        if (test_failed) return;
        test_dequant(&grid_qtypes[i], 1500);
    }
    for (int w = 0; w <= IQ_PROBE_COUNT; w++) {
        const int sign = w == IQ_PROBE_COUNT; /* the sign probe last */
        const int type = sign ? ST_TYPE_IQ2_XXS : iq_probes[w].type;
        const int nb = sign ? IQ_SIGN_PROBE_BLOCKS : iq_probe_blocks(&iq_probes[w]);
        const size_t bs = (size_t)st_type_get((uint32_t)type)->type_size;
        uint8_t *blocks = malloc((size_t)nb * bs);
        float *ours = malloc(sizeof(float) * 256 * (size_t)nb), *theirs = malloc(sizeof(float) * 256 * (size_t)nb);
        if (sign) iq_probe_fill_signs(blocks);
        else iq_probe_fill(w, blocks);
        st_dequantize_row((uint32_t)type, blocks, ours, 256 * (int64_t)nb);
        get_traits(type)->to_float(blocks, theirs, 256 * (int64_t)nb);
        const int group = sign ? 8 : iq_probes[w].group, groups = 256 * nb / group;
        int good = 0;
        for (int g = 0; g < groups; g++) good += compare_floats(ours + g * group, theirs + g * group, group);
        const char *name = sign ? "signs" : iq_probes[w].grid;
        CHECKF(good == groups, "grid %s: %d of %d entries differ", name, groups - good, groups);
        fprintf(stderr, "%-7s grid:       %d/%d entries bit-exact\n", name, good, groups);
        free(blocks); free(ours); free(theirs);
    }
}

/* st_quantize_row for the type under test, in from_float's shape */
static uint32_t type_under_test;
static void quant_current(const float *x, void *y, int64_t n) { st_quantize_row(type_under_test, x, y, n); }
static void q8_1_ours(const float *x, void *y, int64_t n) { st_quantize_row_q8_1_ref(x, y, n); }
static void q8_K_ours(const float *x, void *y, int64_t n) { st_quantize_row_q8_K_ref(x, y, n); }

int main(void) {
    peer = peer_open();
    if (!peer) SKIP("peer libggml-base.so not found (set STRATA_PEER_DIR or run tools/setup.sh)");
    get_traits = (get_traits_fn)(uintptr_t)dlsym(peer, "ggml_get_type_traits");
    if (!get_traits) SKIP("peer library has no ggml_get_type_traits");

    /* the prototype above must match the library: check names and sizes against our table */
    for (size_t i = 0; i < sizeof qtypes / sizeof *qtypes; i++) {
        const st_type_info *t = st_type_get(qtypes[i].type);
        const struct ggml_type_traits *g = get_traits((int)qtypes[i].type);
        CHECKF(g && !strcmp(g->type_name, t->name) && g->blck_size == t->block_size &&
               g->type_size == (size_t)t->type_size && g->to_float && g->from_float_ref,
               "type %u: peer traits disagree with ours", qtypes[i].type);
        if (test_failed) return test_report("quant_ggml");
    }

    test_halves();

    for (size_t i = 0; i < sizeof qtypes / sizeof *qtypes; i++) {
        const st_type_info *t = st_type_get(qtypes[i].type);
        const struct ggml_type_traits *g = get_traits((int)qtypes[i].type);
        int nblocks = t->block_size == 32 ? 8000 : 1500;
        test_dequant(&qtypes[i], nblocks);
        type_under_test = qtypes[i].type;
        test_quant(t->name, t->block_size, (size_t)t->type_size, quant_current, g->from_float_ref, g->to_float,
                   nblocks);
    }

    test_grids();

    /* activation forms: q8_1 through its traits, q8_K through its exported functions */
    const struct ggml_type_traits *g81 = get_traits(ST_TYPE_Q8_1);
    test_quant("q8_1", 32, sizeof(block_q8_1), q8_1_ours, g81->from_float_ref, NULL, 8000);
    ggml_from_float q8k = (ggml_from_float)(uintptr_t)dlsym(peer, "quantize_row_q8_K_ref");
    ggml_to_float dq8k = (ggml_to_float)(uintptr_t)dlsym(peer, "dequantize_row_q8_K");
    if (q8k && dq8k) {
        test_quant("q8_K", QK_K, sizeof(block_q8_K), q8_K_ours, q8k, NULL, 1500);
        /* and our q8_K decoder against theirs, on what the quantizer produced */
        enum { NB = 64 };
        float *x = malloc(NB * QK_K * sizeof(float)), *a = malloc(NB * QK_K * sizeof(float)),
              *b = malloc(NB * QK_K * sizeof(float));
        block_q8_K *q = malloc(NB * sizeof *q);
        fill_row(x, NB * QK_K, QK_K);
        st_quantize_row_q8_K_ref(x, q, NB * QK_K);
        st_dequantize_row_q8_K(q, a, NB * QK_K);
        dq8k(q, b, NB * QK_K);
        CHECK(compare_floats(a, b, NB * QK_K));
        free(x); free(a); free(b); free(q);
    } else {
        fprintf(stderr, "q8_K: peer does not export quantize_row_q8_K_ref; not compared\n");
    }
    dlclose(peer);
    return test_report("quant_ggml");
}
