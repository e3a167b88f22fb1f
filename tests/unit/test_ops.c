/* test_ops.c: the small CPU ops against hand-computed cases, and their fast variants against the
 * references (st_cpu_limit(0) forces the references): RMSNorm, L2 norm, RoPE (known angles, the
 * repeated-multiplication recurrence, each level's rotation bit for bit, YaRN correction dims),
 * conv1d with state (hand case, chunk splits), pointwise gates, softmax, MoE routing (order, ties,
 * renormalisation), argmax, rows. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "base/cpu.h"
#include "quant/quant.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {   /* uniform in [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void fill(float *x, int64_t n, float s) { for (int64_t i = 0; i < n; i++) x[i] = s * frand(); }

static float max_rel(const float *a, const float *b, int64_t n) {
    float m = 0.0f, ref = 1e-30f;
    for (int64_t i = 0; i < n; i++) { m = fmaxf(m, fabsf(a[i] - b[i])); ref = fmaxf(ref, fabsf(b[i])); }
    return m / ref;
}

static void test_rms_norm(st_pool *pool) {
    float x[4] = { 1, 2, 3, 4 }, w[4] = { 1, 0.5f, 2, -1 }, y[4];
    st_op_rms_norm(NULL, x, 4, w, y, 4, 1, 4, 0.0f);
    const double s = 1.0 / sqrt(7.5);
    for (int i = 0; i < 4; i++) CHECKF(fabs(y[i] - x[i] * s * w[i]) < 1e-6, "i=%d %g", i, y[i]);
    /* per-head use with a strided input (the q|gate interleave): only the q halves change */
    const int64_t T = 3, H = 5, hd = 37, rows = T * H;
    float *qg = malloc(sizeof(float) * rows * 2 * hd), *ref = malloc(sizeof(float) * rows * 2 * hd);
    float *hw = malloc(sizeof(float) * hd);
    fill(qg, rows * 2 * hd, 3.0f);
    fill(hw, hd, 1.0f);
    memcpy(ref, qg, sizeof(float) * rows * 2 * hd);
    st_op_rms_norm(pool, qg, 2 * hd, hw, qg, 2 * hd, rows, hd, 1e-6f);
    int ok = 1;
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < hd; i++) ss += (double)ref[r * 2 * hd + i] * ref[r * 2 * hd + i];
        double sc = 1.0 / sqrt(ss / hd + 1e-6);
        for (int64_t i = 0; i < hd; i++) {
            if (fabs(qg[r * 2 * hd + i] - ref[r * 2 * hd + i] * sc * hw[i]) > 1e-5) ok = 0;
            if (qg[r * 2 * hd + hd + i] != ref[r * 2 * hd + hd + i]) ok = 0;
        }
    }
    CHECK(ok);
    /* AVX2 and AVX-512 against the reference on odd sizes */
    const int64_t dims[] = { 1, 15, 17, 127, 1023, 2048 };
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        const int64_t n = dims[d];
        float *a = malloc(sizeof(float) * n * 3), *ww = malloc(sizeof(float) * n);
        float *y0 = malloc(sizeof(float) * n * 3), *y1 = malloc(sizeof(float) * n * 3);
        fill(a, n * 3, 10.0f);
        fill(ww, n, 2.0f);
        st_cpu_limit(0);
        st_op_rms_norm(pool, a, n, ww, y0, n, 3, n, 1e-5f);
        for (int lvl = 1; lvl <= 3; lvl += 2) {   /* AVX2, then AVX-512 */
            st_cpu_limit(lvl);
            st_op_rms_norm(pool, a, n, ww, y1, n, 3, n, 1e-5f);
            CHECKF(max_rel(y1, y0, n * 3) < 1e-6f, "lvl %d n=%ld rel %g", lvl, (long)n, max_rel(y1, y0, n * 3));
        }
        free(a); free(ww); free(y0); free(y1);
    }
    free(qg); free(ref); free(hw);
}

static void test_l2_norm(void) {
    float x[2] = { 3, 4 }, y[2];
    st_op_l2_norm(NULL, x, 2, y, 2, 1, 2, 0.0f);
    CHECKF(fabsf(y[0] - 0.6f) < 1e-6f && fabsf(y[1] - 0.8f) < 1e-6f, "%g %g", y[0], y[1]);
    float z[3] = { 0, 0, 0 };
    st_op_l2_norm(NULL, z, 3, z, 3, 1, 3, 1e-6f);   /* eps keeps a zero row finite */
    CHECK(z[0] == 0.0f && z[2] == 0.0f);
    float u[64], v[64];
    fill(u, 64, 1.0f);
    st_op_l2_norm(NULL, u, 64, v, 64, 1, 64, 1e-6f);
    double ss = 0, s2 = 0;
    for (int i = 0; i < 64; i++) { ss += (double)u[i] * u[i]; s2 += (double)v[i] * v[i]; }
    CHECKF(fabs(s2 * (ss + 1e-6) / ss - 1.0) < 1e-5, "norm^2 %g", s2);
}

static void test_rope(st_pool *pool) {
    /* head_dim 6, n_rot 4, base 10000: pair 0 angle p, pair 1 angle p/100; dims 4, 5 untouched */
    float x[2][6] = { { 1, 2, 3, 4, 5, 6 }, { -1, 0.5f, 2, 1, 7, 8 } };
    int32_t pos[1] = { 7 };
    st_rope_params p = st_rope_plain(4, 10000.0f);
    float y[2][6];
    memcpy(y, x, sizeof x);
    st_op_rope_neox(pool, &y[0][0], 12, 6, 1, 2, pos, &p);
    for (int h = 0; h < 2; h++) {
        const double th[2] = { 7.0, 0.07 };
        for (int i = 0; i < 2; i++) {
            double e0 = x[h][i] * cos(th[i]) - x[h][i + 2] * sin(th[i]);
            double e1 = x[h][i] * sin(th[i]) + x[h][i + 2] * cos(th[i]);
            CHECKF(fabs(y[h][i] - e0) < 1e-5 && fabs(y[h][i + 2] - e1) < 1e-5, "h%d i%d", h, i);
        }
        CHECK(y[h][4] == x[h][4] && y[h][5] == x[h][5]);
    }
    /* position 0 is the identity */
    memcpy(y, x, sizeof x);
    pos[0] = 0;
    st_op_rope_neox(pool, &y[0][0], 12, 6, 1, 2, pos, &p);
    CHECK(memcmp(y, x, sizeof x) == 0);

    /* the angle recurrence: at a long position the last pair's angle is the float product
     * p*ts*ts*..., which differs from p*powf(base, -2i/n) in the last bits */
    const int64_t nr = 128;
    float big[128];
    for (int i = 0; i < 128; i++) big[i] = (i == 63) ? 1.0f : 0.0f;   /* x[63]=1, x[127]=0 */
    pos[0] = 100000;
    st_rope_params pb = st_rope_plain(nr, 1000000.0f);
    st_op_rope_neox(NULL, big, 128, 128, 1, 1, pos, &pb);
    float theta = 100000.0f, ts = powf(1000000.0f, -2.0f / 128.0f);
    for (int i = 0; i < 63; i++) theta *= ts;
    CHECKF(big[63] == cosf(theta) && big[127] == sinf(theta), "%.9g vs %.9g", big[63], cosf(theta));

    /* The rotation of each level is llama.cpp's for that CPU bit for bit: every product rounded
     * where there is no FMA (level 0), x0' = fma(x0, cos, -(x1 sin)), x1' = fma(x0, sin, x1 cos)
     * where there is (its haswell and AVX-512 builds alike), on 3 heads of 80 with 64 rotated
     * dims (whole vectors of pairs) and with 20 (a tail of 2 pairs). */
    for (int64_t nrot = 64; nrot >= 20; nrot -= 44) {
        const int64_t hf = nrot / 2;
        float r0[3 * 80], r1[3 * 80];
        fill(r0, 3 * 80, 2.0f);
        int32_t pr[1] = { 37 };
        st_rope_params prr = st_rope_plain(nrot, 10000.0f);
        float cs[32], sn[32], th = 37.0f;
        for (int64_t i = 0; i < hf; i++) { cs[i] = cosf(th); sn[i] = sinf(th); th *= powf(10000.0f, -2.0f / (float)nrot); }
        for (int lvl = 0; lvl <= 2; lvl++) {
            st_cpu_limit(lvl);
            const int fused = st_cpu()->fma;
            memcpy(r1, r0, sizeof r0);
            st_op_rope_neox(NULL, r1, 3 * 80, 80, 1, 3, pr, &prr);
            int bad = 0;
            for (int h = 0; h < 3; h++) {
                for (int64_t i = 0; i < hf; i++) {
                    const float x0 = r0[h * 80 + i], x1 = r0[h * 80 + i + hf];
                    const float p1 = x1 * sn[i], q1 = x1 * cs[i];
                    const float e0 = fused ? fmaf(x0, cs[i], -p1) : x0 * cs[i] - p1;
                    const float e1 = fused ? fmaf(x0, sn[i], q1) : x0 * sn[i] + q1;
                    bad += (r1[h * 80 + i] != e0) + (r1[h * 80 + i + hf] != e1);
                }
                bad += memcmp(r1 + h * 80 + nrot, r0 + h * 80 + nrot, (size_t)(80 - nrot) * sizeof(float)) != 0;
            }
            CHECKF(bad == 0, "rope n_rot %ld lvl %d: %d differ", (long)nrot, lvl, bad);
        }
        st_cpu_limit(3);
    }

    /* YaRN correction dims (hand computed: 20.94 -> 20, 45.03 -> 46) and the blend bounds */
    float dims[2];
    st_rope_yarn_corr_dims(128, 4096, 10000.0f, 32.0f, 1.0f, dims);
    CHECKF(dims[0] == 20.0f && dims[1] == 46.0f, "%g %g", dims[0], dims[1]);
    st_rope_params py = { 128, 10000.0f, 0.25f, 1.0f, 1.0f, { dims[0], dims[1] } };
    float a[128], b[128];
    for (int i = 0; i < 128; i++) a[i] = b[i] = (i == 0 || i == 63) ? 1.0f : 0.0f;
    pos[0] = 1000;
    st_op_rope_neox(NULL, a, 128, 128, 1, 1, pos, &py);
    /* pair 0 (< lo) extrapolates: angle p; pair 63 (> hi) interpolates: angle p*ts^63/4;
     * both scaled by mscale = 1 + 0.1 ln 4 */
    const float ms = 1.0f + 0.1f * logf(4.0f);
    float t63 = 1000.0f, ts2 = powf(10000.0f, -2.0f / 128.0f);
    for (int i = 0; i < 63; i++) t63 *= ts2;
    CHECKF(fabsf(a[0] - cosf(1000.0f) * ms) < 1e-5f && fabsf(a[64] - sinf(1000.0f) * ms) < 1e-5f,
           "pair0 %g", a[0]);
    CHECKF(fabsf(a[63] - cosf(0.25f * t63) * ms) < 1e-5f, "pair63 %g", a[63]);
    (void)b;
}

static void test_conv(st_pool *pool) {
    /* C = 2, K = 3: w[c][i] at i + 3c */
    const float w[6] = { 1, 2, 3, -1, 0.5f, 2 };
    float state[4] = { 10, 20, 30, 40 };            /* channel 0: [10, 20], channel 1: [30, 40] */
    const float m[3][2] = { { 1, 2 }, { 3, 4 }, { 5, 6 } };
    float out[3][2];
    st_op_conv1d(pool, &m[0][0], 2, w, state, &out[0][0], 2, 3, 2, 3, 0);
    /* channel 0: t0 = 1*10 + 2*20 + 3*1 = 53; t1 = 20 + 2 + 9 = 31; t2 = 1 + 6 + 15 = 22 */
    CHECKF(out[0][0] == 53 && out[1][0] == 31 && out[2][0] == 22, "%g %g %g", out[0][0], out[1][0], out[2][0]);
    /* channel 1: t0 = -30 + 20 + 4 = -6; t1 = -40 + 1 + 8 = -31; t2 = -2 + 2 + 12 = 12 */
    CHECKF(out[0][1] == -6 && out[1][1] == -31 && out[2][1] == 12, "%g %g %g", out[0][1], out[1][1], out[2][1]);
    CHECK(state[0] == 3 && state[1] == 5 && state[2] == 4 && state[3] == 6);

    /* any split into chunks gives the same outputs and state, bit for bit (incl. chunks < K-1) */
    const int64_t C = 600, K = 4, T = 37;
    float *mm = malloc(sizeof(float) * T * C), *ww = malloc(sizeof(float) * C * K);
    float *s0 = calloc((size_t)C * (K - 1), sizeof(float)), *s1 = calloc((size_t)C * (K - 1), sizeof(float));
    float *o0 = malloc(sizeof(float) * T * C), *o1 = malloc(sizeof(float) * T * C);
    fill(mm, T * C, 2.0f);
    fill(ww, C * K, 1.0f);
    fill(s0, C * (K - 1), 1.0f);
    memcpy(s1, s0, sizeof(float) * C * (K - 1));
    st_op_conv1d(pool, mm, C, ww, s0, o0, C, T, C, K, 1);
    const int64_t cuts[] = { 1, 2, 1, 13, 20 };
    int64_t t = 0;
    for (int c = 0; c < 5; c++) {
        st_op_conv1d(NULL, mm + t * C, C, ww, s1, o1 + t * C, C, cuts[c], C, K, 1);
        t += cuts[c];
    }
    CHECK(t == T);
    CHECK(memcmp(o0, o1, sizeof(float) * T * C) == 0);
    CHECK(memcmp(s0, s1, sizeof(float) * C * (K - 1)) == 0);
    /* silu applied: compare a value to the formula */
    float direct = 0.0f;
    for (int64_t i = 0; i < K; i++) direct += ww[5 * K + i] * mm[(T - K + i) * C + 5];
    const float expect = direct / (1.0f + expf(-direct));
    CHECKF(fabsf(o0[(T - 1) * C + 5] - expect) <= 4e-7f * fabsf(expect), "%g vs %g", o0[(T - 1) * C + 5], expect);
    /* AVX2 and AVX-512 blocks vs the reference: identical sums without silu, a few ulp with it */
    for (int silu = 0; silu < 2; silu++) {
        const int64_t C2 = 300;   /* a full block and a partial one */
        memcpy(s0, s1, sizeof(float) * C2 * (K - 1));
        float *s2 = malloc(sizeof(float) * C2 * (K - 1));
        st_cpu_limit(0);
        st_op_conv1d(pool, mm, C, ww, s0, o0, C, T, C2, K, silu);
        for (int lvl = 1; lvl <= 3; lvl += 2) {
            memcpy(s2, s1, sizeof(float) * C2 * (K - 1));
            st_cpu_limit(lvl);
            st_op_conv1d(pool, mm, C, ww, s2, o1, C, T, C2, K, silu);
            int bad = 0;
            for (int64_t tt = 0; tt < T; tt++)
                for (int64_t c = 0; c < C2; c++) {
                    const float u = o0[tt * C + c], v = o1[tt * C + c];
                    if (silu ? !(fabsf(u - v) <= 4e-7f * fabsf(u)) : u != v) bad++;
                }
            CHECKF(bad == 0, "conv lvl %d silu=%d: %d differ", lvl, silu, bad);
            CHECK(memcmp(s0, s2, sizeof(float) * C2 * (K - 1)) == 0);
        }
        st_cpu_limit(3);
        free(s2);
    }
    free(mm); free(ww); free(s0); free(s1); free(o0); free(o1);
}

static void test_pointwise(st_pool *pool) {
    float x[4] = { 0.0f, 30.0f, -1.0f, 2.0f }, y[4];
    st_op_softplus(NULL, x, 4, y, 4, 1, 4);
    CHECK(fabsf(y[0] - logf(2.0f)) < 1e-7f && y[1] == 30.0f);
    st_op_sigmoid(NULL, x, 4, y, 4, 1, 4);
    CHECK(y[0] == 0.5f && fabsf(y[2] - 1.0f / (1.0f + expf(1.0f))) < 1e-7f);
    st_op_silu(NULL, x, 4, y, 4, 1, 4);
    CHECK(y[0] == 0.0f && fabsf(y[3] - 2.0f / (1.0f + expf(-2.0f))) < 1e-6f);

    /* every fast row kernel against the reference, odd lengths, strided rows, incl. big |x| */
    const int64_t n = 1037, rows = 3, ld = 1040;
    float *a = malloc(sizeof(float) * rows * ld), *b = malloc(sizeof(float) * rows * ld);
    float *y0 = calloc((size_t)(rows * ld), sizeof(float)), *y1 = calloc((size_t)(rows * ld), sizeof(float));
    fill(a, rows * ld, 20.0f);
    fill(b, rows * ld, 20.0f);
    a[5] = 120.0f; a[6] = -120.0f; b[7] = 200.0f; b[8] = -200.0f; a[9] = INFINITY;
    for (int k = 0; k < 16; k++) {   /* each op at AVX2, then AVX-512, against the reference */
        const int op = k / 2, fast = k % 2 ? 3 : 1;
        for (int lvl = 0; lvl < 2; lvl++) {
            st_cpu_limit(lvl ? fast : 0);
            float *yy = lvl ? y1 : y0;
            switch (op) {
            case 0: st_op_silu(pool, a, ld, yy, ld, rows, n); break;
            case 1: st_op_sigmoid(pool, a, ld, yy, ld, rows, n); break;
            case 2: st_op_softplus(pool, a, ld, yy, ld, rows, n); break;
            case 3: st_op_swiglu(pool, a, ld, b, ld, yy, ld, rows, n); break;
            case 4: st_op_mul_sigmoid(pool, a, ld, b, ld, yy, ld, rows, n); break;
            case 5: st_op_mul_silu(pool, a, ld, b, ld, yy, ld, rows, n); break;
            case 6: st_op_mul(pool, a, ld, b, ld, yy, ld, rows, n); break;
            case 7: st_op_add(pool, a, ld, b, ld, yy, ld, rows, n); break;
            }
        }
        int bad = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < n; i++) {
                float u = y0[r * ld + i], v = y1[r * ld + i];
                if (u == v) continue;
                if (!(fabsf(u - v) <= 4e-7f * fabsf(u) + 1e-30f)) {
                    if (bad++ < 3) fprintf(stderr, "op %d [%ld][%ld] ref %.9g fast %.9g\n", op, (long)r, (long)i, u, v);
                }
            }
        CHECKF(bad == 0, "op %d lvl %d: %d elements differ", op, fast, bad);
        CHECK(y0[ld - 1] == 0.0f && y1[ld - 1] == 0.0f);   /* padding between rows untouched */
    }
    /* scale and axpy: the AVX2 and AVX-512 loops give the reference's bits */
    for (int fast = 1; fast <= 3; fast += 2)
        for (int64_t len = 1; len < 40; len += 7) {
            float ya[40], yb[40];
            for (int64_t i = 0; i < len; i++) ya[i] = yb[i] = b[i];
            st_cpu_limit(0);
            st_op_axpy(ya, len, a, 0.37f);
            st_op_scale(ya, len, ya, -1.3f);
            st_cpu_limit(fast);
            st_op_axpy(yb, len, a, 0.37f);
            st_op_scale(yb, len, yb, -1.3f);
            CHECK(memcmp(ya, yb, sizeof(float) * (size_t)len) == 0);
        }
    st_cpu_limit(3);
    float s[3] = { 1, 2, 3 }, acc[3] = { 1, 1, 1 };
    st_op_axpy(acc, 3, s, 0.5f);
    CHECK(acc[0] == 1.5f && acc[2] == 2.5f);
    st_op_scale(acc, 3, s, 2.0f);
    CHECK(acc[0] == 2.0f && acc[2] == 6.0f);
    free(a); free(b); free(y0); free(y1);
}

static void test_softmax_route(void) {
    float l[3] = { 0.0f, logf(2.0f), logf(5.0f) }, p[3];
    st_op_softmax(l, 3, p, 3, 1, 3);
    CHECK(fabsf(p[0] - 0.125f) < 1e-7f && fabsf(p[1] - 0.25f) < 1e-7f && fabsf(p[2] - 0.625f) < 1e-7f);

    /* 6 experts, top-3: probabilities proportional to 1, 4, 2, 4, 8, 1 (sum 20) */
    float lg[6];
    const float rel[6] = { 1, 4, 2, 4, 8, 1 };
    for (int i = 0; i < 6; i++) lg[i] = logf(rel[i]) + 3.0f;
    int32_t ids[3];
    float w[3];
    st_op_moe_route(lg, 6, 1, 6, 3, ids, w);
    /* descending; experts 1 and 3 tie: lower index first; renormalised over 8+4+4 */
    CHECKF(ids[0] == 4 && ids[1] == 1 && ids[2] == 3, "%d %d %d", ids[0], ids[1], ids[2]);
    CHECKF(fabsf(w[0] - 0.5f) < 1e-6f && fabsf(w[1] - 0.25f) < 1e-6f && fabsf(w[2] - 0.25f) < 1e-6f,
           "%g %g %g", w[0], w[1], w[2]);
    /* all equal: the first k indices, each 1/k */
    float flat[2][8] = { { 0 }, { 0 } };
    int32_t ids2[2][4];
    float w2[2][4];
    for (int i = 0; i < 8; i++) flat[1][i] = (float)(i % 3);   /* 0 1 2 0 1 2 0 1 */
    st_op_moe_route(&flat[0][0], 8, 2, 8, 4, &ids2[0][0], &w2[0][0]);
    CHECK(ids2[0][0] == 0 && ids2[0][1] == 1 && ids2[0][2] == 2 && ids2[0][3] == 3);
    CHECK(fabsf(w2[0][0] - 0.25f) < 1e-7f && fabsf(w2[0][3] - 0.25f) < 1e-7f);
    CHECKF(ids2[1][0] == 2 && ids2[1][1] == 5 && ids2[1][2] == 1 && ids2[1][3] == 4,
           "%d %d %d %d", ids2[1][0], ids2[1][1], ids2[1][2], ids2[1][3]);

    /* random 64 experts top-8 against a sort of the softmax */
    float big[64], pr[64];
    int32_t bi[8];
    float bw[8];
    fill(big, 64, 4.0f);
    st_op_moe_route(big, 64, 1, 64, 8, bi, bw);
    st_op_softmax(big, 64, pr, 64, 1, 64);
    int ok = 1;
    double sum = 0;
    for (int i = 0; i < 8; i++) {
        int larger = 0;
        for (int e = 0; e < 64; e++) larger += pr[e] > pr[bi[i]];
        if (larger != i) ok = 0;
        sum += bw[i];
    }
    CHECK(ok);
    CHECK(fabs(sum - 1.0) < 1e-6);
}

static void test_argmax(void) {
    float x[6] = { 1, 5, 3, 5, -2, 0 };
    CHECK(st_op_argmax(x, 6) == 1);
    float y[4] = { NAN, -INFINITY, -3, -3 };
    CHECK(st_op_argmax(y, 4) == 2);
    float z[2] = { NAN, NAN };
    CHECK(st_op_argmax(z, 2) == 0);
}

static void test_rows(void) {
    const int64_t n_rows = 5, d = 64;
    float tab[5 * 64], out[2 * 70];
    fill(tab, n_rows * d, 1.0f);
    int32_t ids[2] = { 3, 0 };
    CHECK(st_op_get_rows(ST_TYPE_F32, tab, n_rows, d, ids, 2, out, 70) == 1);
    CHECK(memcmp(out, tab + 3 * d, d * sizeof(float)) == 0 && memcmp(out + 70, tab, d * sizeof(float)) == 0);
    block_q8_0 q[5 * 2];
    for (int r = 0; r < 5; r++) st_quantize_row(ST_TYPE_Q8_0, tab + r * d, q + r * 2, d);
    float ref[64];
    st_dequantize_row(ST_TYPE_Q8_0, q + 2 * 3, ref, d);
    CHECK(st_op_get_rows(ST_TYPE_Q8_0, q, n_rows, d, ids, 1, out, 70) == 1);
    CHECK(memcmp(out, ref, sizeof ref) == 0);
    int32_t bad[1] = { 5 };
    CHECK(st_op_get_rows(ST_TYPE_F32, tab, n_rows, d, bad, 1, out, 70) == 0);
}

/* The threaded paths (big enough jobs that the ops split them over the pool) give the same bits
 * as the same op run on the calling thread (pool NULL), and RoPE over many tokens matches a
 * direct evaluation in double. */
static void test_threaded(st_pool *pool) {
    const int64_t T = 64, d = 1024, H = 8, hd = 128;
    const size_t n = (size_t)(T * d);
    float *x = malloc(sizeof(float) * n), *w = malloc(sizeof(float) * d), *b = malloc(sizeof(float) * n);
    float *y0 = malloc(sizeof(float) * n), *y1 = malloc(sizeof(float) * n);
    fill(x, (int64_t)n, 3.0f);
    fill(b, (int64_t)n, 3.0f);
    fill(w, d, 1.0f);
    st_op_rms_norm(NULL, x, d, w, y0, d, T, d, 1e-6f);
    st_op_rms_norm(pool, x, d, w, y1, d, T, d, 1e-6f);
    CHECK(memcmp(y0, y1, sizeof(float) * n) == 0);
    st_op_l2_norm(NULL, x, 64, y0, 64, T * 16, 64, 1e-6f);
    st_op_l2_norm(pool, x, 64, y1, 64, T * 16, 64, 1e-6f);
    CHECK(memcmp(y0, y1, sizeof(float) * n) == 0);
    st_op_swiglu(NULL, x, d, b, d, y0, d, T, d);
    st_op_swiglu(pool, x, d, b, d, y1, d, T, d);
    CHECK(memcmp(y0, y1, sizeof(float) * n) == 0);
    st_op_mul_sigmoid(NULL, x, (int64_t)n, b, (int64_t)n, y0, (int64_t)n, 1, (int64_t)n);   /* one long row */
    st_op_mul_sigmoid(pool, x, (int64_t)n, b, (int64_t)n, y1, (int64_t)n, 1, (int64_t)n);
    CHECK(memcmp(y0, y1, sizeof(float) * n) == 0);

    const int64_t C = 2048, K = 4;
    float *cw = malloc(sizeof(float) * C * K), *s0 = calloc((size_t)(C * (K - 1)), sizeof(float));
    float *s1 = calloc((size_t)(C * (K - 1)), sizeof(float));
    float *m = malloc(sizeof(float) * (size_t)(20 * C));
    fill(cw, C * K, 1.0f);
    fill(m, 20 * C, 1.0f);
    fill(s0, C * (K - 1), 1.0f);
    memcpy(s1, s0, sizeof(float) * (size_t)(C * (K - 1)));
    st_op_conv1d(NULL, m, C, cw, s0, y0, C, 20, C, K, 1);
    st_op_conv1d(pool, m, C, cw, s1, y1, C, 20, C, K, 1);
    CHECK(memcmp(y0, y1, sizeof(float) * (size_t)(20 * C)) == 0);
    CHECK(memcmp(s0, s1, sizeof(float) * (size_t)(C * (K - 1))) == 0);

    /* RoPE: 64 tokens at scattered positions, 8 heads with a head stride of 2*hd, n_rot 32 */
    const int64_t ldh = 2 * hd, ldt = H * ldh;
    float *q = malloc(sizeof(float) * (size_t)(T * ldt)), *q0 = malloc(sizeof(float) * (size_t)(T * ldt));
    int32_t pos[64];
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(t * 37 + 5);
    fill(q0, T * ldt, 1.0f);
    memcpy(q, q0, sizeof(float) * (size_t)(T * ldt));
    st_rope_params p = st_rope_plain(32, 10000000.0f);
    st_op_rope_neox(pool, q, ldt, ldh, T, H, pos, &p);
    double err = 0;
    int untouched = 1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            const float *a = q0 + t * ldt + h * ldh, *r = q + t * ldt + h * ldh;
            for (int64_t i = 0; i < 16; i++) {
                const double th = pos[t] * pow(10000000.0, -2.0 * (double)i / 32.0);
                err = fmax(err, fabs(r[i] - (a[i] * cos(th) - a[i + 16] * sin(th))));
                err = fmax(err, fabs(r[i + 16] - (a[i] * sin(th) + a[i + 16] * cos(th))));
            }
            for (int64_t i = 32; i < ldh; i++) untouched &= r[i] == a[i];
        }
    CHECKF(err < 2e-4, "rope err %g", err);   /* float angles at p ~ 2000: ~1e-4 rad */
    CHECK(untouched);
    free(x); free(w); free(b); free(y0); free(y1); free(cw); free(s0); free(s1); free(m); free(q); free(q0);
}

int main(void) {
    st_pool *pool = NULL;
    if (st_pool_create(2, &pool) != ST_OK) { fprintf(stderr, "no pool\n"); return 1; }
    test_rms_norm(pool);
    test_l2_norm();
    test_rope(pool);
    test_conv(pool);
    test_pointwise(pool);
    test_softmax_route();
    test_argmax();
    test_rows();
    test_threaded(pool);
    st_pool_destroy(pool);
    return test_report("test_ops");
}
