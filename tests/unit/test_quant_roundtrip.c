/* test_quant_roundtrip.c: the reference conversions on their own (no peer needed):
 *   - half / bfloat16 rounding on hand-picked edges (ties to even, subnormals, overflow to
 *     infinity, NaN), the lookup table against its arithmetic definition, and the round trip
 *     half -> f32 -> half for every half;
 *   - quantize -> dequantize error of every computable type on gaussian rows, against a bound
 *     per type (measured values, 10-20% headroom: a worse quantizer fails);
 *   - exactly representable rows survive exactly, zero rows stay zero, scaled rows scale;
 *   - a row quantized in one call equals the same row quantized block by block, for lengths of
 *     1..9 blocks;
 *   - the activation forms' side data: q8_1's s and q8_K's bsums;
 *   - non-computable types are refused. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "quant/quant.h"
#include "test.h"

static uint64_t rng = 12345;
static float rnd_unit(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) & 0xffffff) / 16777216.0f;
}
static float rnd_gauss(void) {
    float u = rnd_unit() + 1e-7f, v = rnd_unit();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}
static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float of_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_fp16_edges(void) {
    static const struct { uint32_t f; uint16_t h; } to_half[] = {
        {0x3f800000u, 0x3c00},   /* 1 */
        {0xbf800000u, 0xbc00},   /* -1 */
        {0x00000000u, 0x0000}, {0x80000000u, 0x8000},
        {0x477fe000u, 0x7bff},   /* 65504, the largest half */
        {0x477fefffu, 0x7bff},   /* just below the midpoint to 65536: stays finite */
        {0x477ff000u, 0x7c00},   /* 65520, the midpoint: ties to even = infinity */
        {0x7f7fffffu, 0x7c00}, {0xff7fffffu, 0xfc00},
        {0x7f800000u, 0x7c00}, {0xff800000u, 0xfc00},
        {0x7fc00000u, 0x7e00}, {0x7f800001u, 0x7e00}, {0xffc12345u, 0xfe00},   /* NaN: canonical */
        {0x3f801000u, 0x3c00},   /* 1 + 2^-11: tie, to even (down) */
        {0x3f803000u, 0x3c02},   /* 1 + 3*2^-11: tie, to even (up) */
        {0x3f801001u, 0x3c01},   /* just above the tie */
        {0x38800000u, 0x0400},   /* 2^-14, the smallest normal */
        {0x387fc000u, 0x03ff},   /* the largest subnormal */
        {0x33800000u, 0x0001},   /* 2^-24, the smallest subnormal */
        {0x33000000u, 0x0000},   /* 2^-25: tie, to even = 0 */
        {0x33000001u, 0x0001},   /* just above: rounds up */
        {0x33c00000u, 0x0002},   /* 1.5 * 2^-24: tie, to even = 2 */
        {0x34200000u, 0x0002},   /* 2.5 * 2^-24: tie, to even = 2 */
        {0x387fe000u, 0x0400},   /* 0x3ff.8 subnormals: tie, rounds up into the normals */
        {0x00000001u, 0x0000},   /* f32 subnormal */
    };
    for (size_t i = 0; i < sizeof to_half / sizeof *to_half; i++)
        CHECKF(st_fp32_to_fp16(of_bits(to_half[i].f)) == to_half[i].h, "f32 %08x -> %04x, want %04x",
               to_half[i].f, st_fp32_to_fp16(of_bits(to_half[i].f)), to_half[i].h);

    CHECK(st_fp16_to_fp32(0x0001) == ldexpf(1, -24));
    CHECK(st_fp16_to_fp32(0x03ff) == ldexpf(1023, -24));
    CHECK(st_fp16_to_fp32(0x3555) == 0.333251953125f);
    CHECK(st_fp16_to_fp32(0xfbff) == -65504.0f);
    CHECK(isinf(st_fp16_to_fp32(0x7c00)) && st_fp16_to_fp32(0xfc00) < 0);
    CHECK(bits(st_fp16_to_fp32(0x8000)) == 0x80000000u);
    /* NaN keeps its payload and comes out quiet */
    CHECK(bits(st_fp16_to_fp32(0x7c01)) == 0x7fc02000u);
    CHECK(bits(st_fp16_to_fp32(0xfe00)) == 0xffc00000u);

    int table_bad = 0, trip_bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = st_fp16_to_fp32((uint16_t)h);
        table_bad += bits(f) != bits(st_fp16_widen((uint16_t)h)) || bits(f) != bits(st_fp16_to_fp32_inline((uint16_t)h));
        uint16_t back = st_fp32_to_fp16(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        trip_bad += is_nan ? back != ((h & 0x8000) | 0x7e00) : back != h;
    }
    CHECKF(table_bad == 0, "%d table entries differ from the definition", table_bad);
    CHECKF(trip_bad == 0, "%d halves do not survive half -> f32 -> half", trip_bad);

    /* monotone: rounding never reverses order on positive finite floats */
    int mono_bad = 0;
    uint16_t prev = 0;
    for (uint32_t u = 0; u < 0x47800000u; u += 0x1f3) {
        uint16_t h = st_fp32_to_fp16(of_bits(u));
        mono_bad += h < prev;
        prev = h;
    }
    CHECK(mono_bad == 0);
}

static void test_bf16_edges(void) {
    static const struct { uint32_t f; uint16_t h; } to_bf16[] = {
        {0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80} /* tie, even down */, {0x3f818000u, 0x3f82} /* tie, up */,
        {0x3f808001u, 0x3f81}, {0x7f7fffffu, 0x7f80} /* rounds to infinity */, {0x7f800000u, 0x7f80},
        {0x7f800001u, 0x7fc0} /* signalling NaN made quiet */, {0xff800001u, 0xffc0}, {0x7fc00000u, 0x7fc0},
        {0x00000001u, 0x0000}, {0x00008000u, 0x0000}, {0x00018000u, 0x0002}, {0x80000000u, 0x8000},
    };
    for (size_t i = 0; i < sizeof to_bf16 / sizeof *to_bf16; i++)
        CHECKF(st_fp32_to_bf16(of_bits(to_bf16[i].f)) == to_bf16[i].h, "f32 %08x -> bf16 %04x, want %04x",
               to_bf16[i].f, st_fp32_to_bf16(of_bits(to_bf16[i].f)), to_bf16[i].h);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = st_bf16_to_fp32((uint16_t)h);
        bad += bits(f) != h << 16;
        if (!isnan(f)) bad += st_fp32_to_bf16(f) != h;
    }
    CHECK(bad == 0);
}

typedef struct { uint32_t type; double max_rel_rmse; } bound;

/* Relative RMS error of quantize -> dequantize on unit gaussians, measured 0.0053 (q8_0),
 * 0.086 (q4_0), 0.078 (q4_1), 0.043 (q5_0), 0.038 (q5_1), 0.298 (q2_K), 0.150 (q3_K),
 * 0.072 (q4_K), 0.036 (q5_K), 0.0177 (q6_K), 0.078 (iq4_nl), 0.076 (iq4_xs), 0.0002 (f16),
 * 0.0017 (bf16). */
static const bound bounds[] = {
    {ST_TYPE_Q8_0, 0.0060}, {ST_TYPE_Q4_0, 0.095}, {ST_TYPE_Q4_1, 0.087}, {ST_TYPE_Q5_0, 0.048},
    {ST_TYPE_Q5_1, 0.042},  {ST_TYPE_Q2_K, 0.33},  {ST_TYPE_Q3_K, 0.167}, {ST_TYPE_Q4_K, 0.080},
    {ST_TYPE_Q5_K, 0.040},  {ST_TYPE_Q6_K, 0.020}, {ST_TYPE_IQ4_NL, 0.087}, {ST_TYPE_IQ4_XS, 0.085},
    {ST_TYPE_F16, 0.00025}, {ST_TYPE_BF16, 0.0019}, {ST_TYPE_F32, 0.0},
};

static double rel_rmse(const float *x, const float *y, int64_t n) {
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        r += (double)x[i] * x[i];
    }
    return r > 0 ? sqrt(e / r) : sqrt(e);
}

static void test_type(const bound *b) {
    const st_type_info *t = st_type_get(b->type);
    const int64_t n = 256 * 48;   /* a multiple of every block size */
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    size_t bytes = st_row_size(t, n);
    uint8_t *q = malloc(bytes), *q2 = malloc(bytes);

    /* error bound on gaussians, and the error is scale-free: 1000x the input, same relative error */
    for (int64_t i = 0; i < n; i++) x[i] = rnd_gauss();
    CHECK(st_quantize_row(b->type, x, q, n) == 1);
    CHECK(st_dequantize_row(b->type, q, y, n) == 1);
    double err = rel_rmse(x, y, n);
    CHECKF(err <= b->max_rel_rmse, "%s: relative rmse %.5f above %.5f", t->name, err, b->max_rel_rmse);
    for (int64_t i = 0; i < n; i++) x[i] *= 1024.0f;
    st_quantize_row(b->type, x, q, n);
    st_dequantize_row(b->type, q, y, n);
    CHECKF(fabs(rel_rmse(x, y, n) - err) < 0.05 * err + 1e-9, "%s: error changes with scale: %.5f vs %.5f",
           t->name, rel_rmse(x, y, n), err);
    fprintf(stderr, "%-7s relative rmse %.5f (bound %.5f)\n", t->name, err, b->max_rel_rmse);

    /* one call over the row equals block-by-block calls, for rows of 1..9 blocks */
    for (int nb = 1; nb <= 9; nb++) {
        int64_t len = (int64_t)nb * t->block_size;
        st_quantize_row(b->type, x, q, len);
        for (int k = 0; k < nb; k++)
            st_quantize_row(b->type, x + (int64_t)k * t->block_size, q2 + (size_t)k * t->type_size, t->block_size);
        CHECKF(!memcmp(q, q2, st_row_size(t, len)), "%s: %d blocks in one call differ from one by one", t->name, nb);
        st_dequantize_row(b->type, q, y, len);
        float *y2 = malloc((size_t)len * sizeof *y2);
        for (int k = 0; k < nb; k++)
            st_dequantize_row(b->type, q + (size_t)k * t->type_size, y2 + (int64_t)k * t->block_size, t->block_size);
        CHECK(!memcmp(y, y2, (size_t)len * sizeof *y));
        free(y2);
    }

    /* zeros stay zeros */
    memset(x, 0, n * sizeof *x);
    st_quantize_row(b->type, x, q, n);
    st_dequantize_row(b->type, q, y, n);
    int nonzero = 0;
    for (int64_t i = 0; i < n; i++) nonzero += y[i] != 0;
    CHECKF(nonzero == 0, "%s: %d zeros came back nonzero", t->name, nonzero);

    /* a block holding a constant comes back close (affine types exactly representable) */
    for (int64_t i = 0; i < n; i++) x[i] = -0.3125f;
    st_quantize_row(b->type, x, q, n);
    st_dequantize_row(b->type, q, y, n);
    CHECKF(rel_rmse(x, y, n) <= 0.01, "%s: constant row error %.5f", t->name, rel_rmse(x, y, n));
    free(x); free(y); free(q); free(q2);
}

/* q8_0 holds integers -127..127 times a power of two exactly; q4_0 and q5_0 their own levels. */
static void test_exact_levels(void) {
    float x[64], y[64];
    block_q8_0 q8[2];
    for (int i = 0; i < 64; i++) x[i] = ldexpf((float)((i * 37) % 255 - 127), -5);
    x[3] = ldexpf(-127, -5);
    x[40] = ldexpf(127, -5);
    st_quantize_row_q8_0_ref(x, q8, 64);
    st_dequantize_row(ST_TYPE_Q8_0, q8, y, 64);
    CHECK(!memcmp(x, y, sizeof x));

    block_q4_0 q4[2];
    for (int i = 0; i < 64; i++) x[i] = 0.25f * (float)((i * 5) % 16 - 8);   /* levels -8..7, includes -8 */
    st_quantize_row(ST_TYPE_Q4_0, x, q4, 64);
    st_dequantize_row(ST_TYPE_Q4_0, q4, y, 64);
    CHECK(!memcmp(x, y, sizeof x));

    block_q5_0 q5[2];
    for (int i = 0; i < 64; i++) x[i] = -0.5f * (float)((i * 7) % 32 - 16);   /* levels 16..-15, includes 16 */
    st_quantize_row(ST_TYPE_Q5_0, x, q5, 64);
    st_dequantize_row(ST_TYPE_Q5_0, q5, y, 64);
    CHECK(!memcmp(x, y, sizeof x));
}

static void test_activation_side_data(void) {
    enum { N = 256 * 4 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = rnd_gauss() * (i < 256 ? 0.01f : 3.0f);
    for (int i = 512; i < 768; i++) x[i] = 0;   /* an all-zero q8_K block */

    block_q8_1 q1[N / 32];
    st_quantize_row_q8_1_ref(x, q1, N);
    int bad = 0;
    for (int b = 0; b < N / 32; b++) {
        int sum = 0;
        for (int j = 0; j < 32; j++) sum += q1[b].qs[j];
        /* s is d * sum(qs), taken with d before its rounding to half: within half an ulp or so */
        float s = st_fp16_to_fp32(q1[b].s), want = (float)sum * st_fp16_to_fp32(q1[b].d);
        bad += fabsf(s - want) > fabsf(want) * 2e-3f;
        for (int j = 0; j < 32; j++) {
            float d = st_fp16_to_fp32(q1[b].d);
            bad += fabsf(x[32 * b + j] - d * q1[b].qs[j]) > 0.5f * d * 1.01f + fabsf(x[32 * b + j]) * 1e-3f;
        }
    }
    CHECKF(bad == 0, "q8_1: %d bad values", bad);

    block_q8_K qk[N / 256];
    st_quantize_row_q8_K_ref(x, qk, N);
    bad = 0;
    for (int b = 0; b < N / 256; b++) {
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += qk[b].qs[16 * g + j];
            bad += qk[b].bsums[g] != sum;
        }
        int saw127 = 0;
        for (int j = 0; j < 256; j++) {
            bad += qk[b].qs[j] < -127;   /* -127..127 only */
            saw127 |= abs(qk[b].qs[j]) == 127;
            bad += fabsf(x[256 * b + j] - qk[b].d * qk[b].qs[j]) > 0.5f * fabsf(qk[b].d) * 1.0001f;
        }
        bad += b == 2 ? qk[b].d != 0 : !saw127;
    }
    CHECKF(bad == 0, "q8_K: %d bad values", bad);

    block_q8_0 q0[N / 32];
    st_quantize_row_q8_0_ref(x, q0, N);
    float y[N];
    st_dequantize_row(ST_TYPE_Q8_0, q0, y, N);
    CHECK(rel_rmse(x, y, N) < 0.006);
}

int main(void) {
    test_fp16_edges();
    test_bf16_edges();
    for (size_t i = 0; i < sizeof bounds / sizeof *bounds; i++) test_type(&bounds[i]);
    test_exact_levels();
    test_activation_side_data();

    /* types without a reference conversion are refused, and leave the output alone (the grid
     * i-quants decode but have no quantizer) */
    float x[256] = {0}, y[256];
    uint8_t q[512];
    memset(y, 0x55, sizeof y);
    memset(q, 0x5a, sizeof q);
    CHECK(st_quantize_row(ST_TYPE_IQ2_XXS, x, q, 256) == 0);
    CHECK(q[0] == 0x5a && q[65] == 0x5a);
    CHECK(st_dequantize_row(ST_TYPE_Q8_1, q, y, 256) == 0);
    CHECK(st_dequantize_row(ST_TYPE_COUNT + 5, q, y, 256) == 0);
    CHECK(bits(y[0]) == 0x55555555u);
    return test_report("quant_roundtrip");
}
