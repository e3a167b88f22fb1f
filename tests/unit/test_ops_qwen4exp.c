/* test_ops_qwen4exp.c: the ops qwen4exp adds (backend.h): the hyper-connection mix and combine,
 * the PLE hash and gate, and QSA's pooling (with the backend's block keys in both forms), block
 * scores, cell selection and attention over listed cells.
 * Hand cases pin the formulas; the AVX2 and AVX-512 kernels (st_cpu_limit 1 and 3) are compared
 * with the references (level 0) on random inputs of odd sizes; the selection is checked against
 * the cells libstdc++'s std::partial_sort keeps for a row with tied blocks (computed once with
 * g++ from the values below), including partly selected blocks that are neither the lowest nor
 * the highest positions; attention over the cells 0 .. p equals the causal op. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "backend/cpu/ops_cpu.h"
#include "base/cpu.h"
#include "quant/quant.h"
#include "test.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void fill(float *x, int64_t n, float s) { for (int64_t i = 0; i < n; i++) x[i] = s * frand(); }

static float max_rel(const float *a, const float *b, int64_t n) {
    float m = 0.0f, ref = 1e-30f;
    for (int64_t i = 0; i < n; i++) { m = fmaxf(m, fabsf(a[i] - b[i])); ref = fmaxf(ref, fabsf(b[i])); }
    return m / ref;
}
static const int levels[3] = {0, 1, 3};

static void test_hc(st_pool *pool) {
    /* hand case: hc = 2, d = 2; g = 0 gives sigmoid 1/2 */
    float xn[4] = {1, 2, 3, 4}, g[4] = {0, 0, 0, 0}, m[2];
    st_op_hc_pre(NULL, xn, 4, g, 4, m, 2, 1, 2, 2, 0.5f);
    CHECK(fabsf(m[0] - 0.5f * (0.5f + 1.5f)) < 1e-6f && fabsf(m[1] - 0.5f * (1.0f + 2.0f)) < 1e-6f);
    /* combine: a zero injection is a plain residual add; inj = hc*ln 3 gives weight 2*0.75 */
    float R[4] = {1, 1, 1, 1}, y[2] = {2, -4}, inj[2] = {0, 2.0f * logf(3.0f)};
    st_op_hc_post(NULL, R, 4, y, 2, inj, 2, 1, 2, 2);
    CHECK(fabsf(R[0] - 3) < 1e-6f && fabsf(R[1] + 3) < 1e-6f && fabsf(R[2] - 4) < 1e-5f && fabsf(R[3] + 5) < 1e-5f);

    /* odd sizes, several tokens and one token (split by elements), every level against level 0 */
    const int64_t hc = 4, d = 37, hcd = hc * d;
    for (int64_t n = 1; n <= 5; n += 4) {
        float *x = malloc(sizeof(float) * n * hcd), *gg = malloc(sizeof(float) * n * hcd);
        float *mo[3], *Ro[3], *ii = malloc(sizeof(float) * n * hc), *yy = malloc(sizeof(float) * n * d);
        fill(x, n * hcd, 2.0f);
        fill(gg, n * hcd, 6.0f);
        fill(ii, n * hc, 5.0f);
        fill(yy, n * d, 1.0f);
        for (int l = 0; l < 3; l++) {
            st_cpu_limit(levels[l]);
            mo[l] = malloc(sizeof(float) * n * d);
            Ro[l] = malloc(sizeof(float) * n * hcd);
            memcpy(Ro[l], x, sizeof(float) * n * hcd);
            st_op_hc_pre(pool, x, hcd, gg, hcd, mo[l], d, n, hc, d, 1.0f / hc);
            st_op_hc_post(pool, Ro[l], hcd, yy, d, ii, hc, n, hc, d);
        }
        st_cpu_limit(3);
        for (int l = 1; l < 3; l++) {
            CHECKF(max_rel(mo[l], mo[0], n * d) < 1e-6f, "hc_pre level %d n %lld", levels[l], (long long)n);
            CHECKF(memcmp(Ro[l], Ro[0], sizeof(float) * n * hcd) == 0, "hc_post level %d n %lld", levels[l], (long long)n);
        }
        /* the reference is the formula */
        int ok = 1;
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < d; i++) {
                double s = 0;
                for (int64_t c = 0; c < hc; c++) s += x[t * hcd + c * d + i] / (1.0 + exp(-gg[t * hcd + c * d + i]));
                if (fabs(mo[0][t * d + i] - s / hc) > 1e-5) ok = 0;
            }
        CHECK(ok);
        for (int l = 0; l < 3; l++) { free(mo[l]); free(Ro[l]); }
        free(x); free(gg); free(ii); free(yy);
    }
}

static void test_ple_gate(void) {
    /* hc = 2, d = 4: stream 0 has k.q = 4 -> s = 4/2 = 2; stream 1 k.q = 0 -> gate 1/2 */
    float k[8] = {1, 1, 1, 1, 1, 0, 0, 0}, q[8] = {1, 1, 1, 1, 0, 1, 1, 1}, v[4] = {1, -2, 3, 0.5f}, gv[8];
    st_op_ple_gate(NULL, k, q, 8, v, 4, gv, 8, 1, 2, 4);
    const float g0 = 1.0f / (1.0f + expf(-sqrtf(2.0f)));
    for (int i = 0; i < 4; i++) {
        CHECKF(fabsf(gv[i] - v[i] * g0) < 1e-6f, "stream 0 [%d] %g", i, gv[i]);
        CHECKF(fabsf(gv[4 + i] - v[i] * 0.5f) < 1e-6f, "stream 1 [%d] %g", i, gv[4 + i]);
    }
    /* a negative score: the signed square root */
    float kn[4] = {-1, -1, -1, -1}, qn[4] = {1, 1, 1, 1}, one = 1.0f, out[4];
    st_op_ple_gate(NULL, kn, qn, 4, &one, 1, out, 4, 1, 1, 1);
    CHECK(fabsf(out[0] - 1.0f / (1.0f + expf(1.0f))) < 1e-6f);
}

/* The n-gram hash on a hand case: N = 3, one head per order, EOS 9. Token 0 has no
 * predecessors (both read as EOS); token 1 is EOS itself (kept) after 2; token 2 follows the EOS,
 * so its context is cut there. */
static void test_ple_hash(void) {
    const uint64_t mult[3] = {3, 5, 7};
    const uint32_t offset[2] = {0, 11}, size[2] = {11, 13};
    const st_ple_hash h = {.ngram = 3, .per = 1, .n_heads = 2, .eos = 9, .mult = mult, .offset = offset, .size = size};
    const int32_t win[5] = {-1, -1, 2, 9, 4};
    int32_t rows[6];
    st_op_ple_hash(&h, win, 3, rows);
    /* 2*3^9*5 = 43, ^9*7 = 20; 9*3^2*5 = 17, ^9*7 = 46; 4*3^9*5 = 33, ^9*7 = 30 */
    const int32_t want[6] = {43 % 11, 20 % 13 + 11, 17 % 11, 46 % 13 + 11, 33 % 11, 30 % 13 + 11};
    for (int i = 0; i < 6; i++) CHECKF(rows[i] == want[i], "row %d: %d, want %d", i, rows[i], want[i]);
    /* products past 2^64 wrap as uint64 */
    const uint64_t big[3] = {0xFFFFFFFFFFFFFFFFull, 1, 1};
    const st_ple_hash hb = {.ngram = 2, .per = 1, .n_heads = 1, .eos = 9, .mult = big, .offset = offset, .size = size};
    const int32_t w2[2] = {5, 3};
    st_op_ple_hash(&hb, w2, 1, rows);
    CHECK(rows[0] == (int32_t)(((uint64_t)3 * big[0] ^ 5u) % 11u));
}

/* The CPU backend's qsa_blocks: the decode form (a position) writes exactly the block that
 * position completes, as the range form computes it, and nothing for a position inside a block. */
static void test_qsa_blocks_forms(void) {
    enum { R = 3, DIM = 8, NB = 4 };
    float cache[(NB * R) * DIM], ranged[NB * DIM], step[NB * DIM], w[DIM];
    fill(cache, (NB * R) * DIM, 1.0f);
    fill(w, DIM, 1.0f);
    const st_rope_params rp = st_rope_plain(DIM, 10000.0f);
    st_cpu_backend cb;
    st_backend *be = st_cpu_backend_init(&cb, NULL, NULL);
    memset(ranged, 0, sizeof ranged);
    memset(step, 0, sizeof step);
    be->ops->qsa_blocks(be, ST_TYPE_F32, cache, DIM, R, 0, NB, NULL, w, 1e-6f, &rp, ranged);
    const int32_t done = 2 * R - 1, inside = 2 * R;   /* completes block 1; inside block 2 */
    be->ops->qsa_blocks(be, ST_TYPE_F32, cache, DIM, R, 0, 0, &done, w, 1e-6f, &rp, step);
    be->ops->qsa_blocks(be, ST_TYPE_F32, cache, DIM, R, 0, 0, &inside, w, 1e-6f, &rp, step);
    CHECK(be->err == ST_OK);
    CHECK(memcmp(step + DIM, ranged + DIM, DIM * sizeof(float)) == 0);
    int untouched = 1;
    for (int i = 0; i < NB * DIM; i++) untouched &= (i >= DIM && i < 2 * DIM) || step[i] == 0.0f;
    CHECK(untouched);
    /* block 1 pooled by hand: the mean of cells 3..5, normed, rotated at position 3 */
    float ref[DIM];
    st_op_qsa_pool(ST_TYPE_F32, cache, DIM, R, 1, 2, ref);
    st_op_rms_norm(NULL, ref, DIM, w, ref, DIM, 1, DIM, 1e-6f);
    const int32_t p3 = R;
    st_op_rope_neox(NULL, ref, DIM, DIM, 1, 1, &p3, &rp);
    CHECK(memcmp(ref, ranged + DIM, sizeof ref) == 0);
}

static void test_qsa_pool_scores(void) {
    /* pool: r = 2 blocks of dim 3 from an f16 cache */
    float keys[12] = {1, 2, 3, 3, 2, 1, -1, 0, 5, 1, 0, 1}, out[6];
    uint16_t kh[12];
    st_op_kv_store(ST_TYPE_F16, kh, 3, 0, keys, 3, 4);
    st_op_qsa_pool(ST_TYPE_F16, kh, 3, 2, 0, 2, out);
    const float want[6] = {2, 2, 2, 0, 0, 3};
    for (int i = 0; i < 6; i++) CHECKF(out[i] == want[i], "pool[%d] %g", i, out[i]);
    st_op_qsa_pool(ST_TYPE_F32, keys, 3, 2, 1, 2, out);
    CHECK(out[0] == 0 && out[1] == 0 && out[2] == 3);

    const int64_t H = 3, dim = 37, nb = 29;
    float *q = malloc(sizeof(float) * H * dim), *K = malloc(sizeof(float) * nb * dim);
    fill(q, H * dim, 1.0f);
    fill(K, nb * dim, 1.0f);
    /* the selection of a query that sees everything as its own row: cells of the W best blocks */
    int32_t pos = (int32_t)(nb * 4 + 2), cells[3][64], ncell[3];
    for (int l = 0; l < 3; l++) {
        st_cpu_limit(levels[l]);
        st_qsa_args a = {.q = q, .ld_q = H * dim, .n_head = H, .dim = dim, .blocks = K, .pos = &pos, .n_tok = 1,
                         .r = 4, .width = 4 * 8 + 3, .n_ctx = 512, .cells = cells[l], .ld_cells = 64, .n_cells = &ncell[l]};
        void *scr = malloc(st_qsa_scratch_size(1, 512, 4, a.width));
        st_op_qsa_select(NULL, &a, scr);
        free(scr);
    }
    st_cpu_limit(3);
    /* random scores have no ties: every level picks the same 8 blocks and the 3 tail cells */
    for (int l = 1; l < 3; l++) CHECKF(ncell[l] == ncell[0] && !memcmp(cells[l], cells[0], sizeof(int32_t) * ncell[0]), "level %d", levels[l]);
    CHECK(ncell[0] == 35 && cells[0][34] == pos && cells[0][32] == pos - 2);
    /* and those are the 8 largest sigma = sum_h relu(q_h . K_b) of a plain double computation */
    double sig[29];
    for (int b = 0; b < nb; b++) {
        sig[b] = 0;
        for (int h = 0; h < H; h++) {
            double dot = 0;
            for (int i = 0; i < dim; i++) dot += (double)q[h * dim + i] * K[b * dim + i];
            sig[b] += dot > 0 ? dot : 0;
        }
    }
    int ok = 1;
    for (int j = 0; j < 32; j += 4) {
        int b = cells[0][j] / 4, better = 0;
        for (int o = 0; o < nb; o++) better += sig[o] > sig[b];
        if (better >= 8 || cells[0][j] % 4 || cells[0][j + 3] != cells[0][j] + 3) ok = 0;
    }
    CHECK(ok);
    free(q);
    free(K);
}

/* A row with tied blocks, r = 3, p = 22: the scores below make blocks 1, 3, 5 tie at 0 and
 * blocks 0, 4 tie at 0.5. q is one head of dim 1 equal to 1 and block b's key is sigma_b, so
 * sigma = relu(K_b). The expected cells are std::partial_sort's (g++ 12, libstdc++). */
static void test_qsa_select_ties(void) {
    float K[7] = {0.5f, -1.0f, 2.0f, 0.0f, 0.5f, -3.0f, 1.25f}, q = 1.0f;
    const int32_t pos = 22;
    const struct { int W; int cells[11]; } want[] = {
        {7, {6, 7, 8, 19, 20, 21, 22}},
        {8, {6, 7, 8, 18, 19, 20, 21, 22}},
        {10, {6, 7, 8, 13, 14, 18, 19, 20, 21, 22}},
        {11, {6, 7, 8, 12, 13, 14, 18, 19, 20, 21, 22}},
    };
    for (size_t c = 0; c < sizeof want / sizeof want[0]; c++) {
        int32_t cells[32], n;
        st_qsa_args a = {.q = &q, .ld_q = 1, .n_head = 1, .dim = 1, .blocks = K, .pos = &pos, .n_tok = 1, .r = 3,
                         .width = want[c].W, .n_ctx = 64, .cells = cells, .ld_cells = 32, .n_cells = &n};
        void *scr = malloc(st_qsa_scratch_size(1, 64, 3, want[c].W));
        st_op_qsa_select(NULL, &a, scr);
        free(scr);
        int ok = n == want[c].W;
        for (int i = 0; ok && i < n; i++) ok = cells[i] == want[c].cells[i];
        CHECKF(ok, "W = %d: %d cells, first %d", want[c].W, n, n ? cells[0] : -1);
    }
    /* p + 1 <= W: every cell, dense */
    int32_t cells[32], n, p5 = 5;
    st_qsa_args a = {.q = &q, .ld_q = 1, .n_head = 1, .dim = 1, .blocks = K, .pos = &p5, .n_tok = 1, .r = 3,
                     .width = 6, .n_ctx = 64, .cells = cells, .ld_cells = 32, .n_cells = &n};
    void *scr = malloc(st_qsa_scratch_size(1, 64, 3, 6));
    st_op_qsa_select(NULL, &a, scr);
    free(scr);
    CHECK(n == 6 && cells[0] == 0 && cells[5] == 5);
}

/* A lone query over many blocks: the threads score slices of them (decode); the cells must be
 * those of one thread. */
static void test_qsa_select_decode(st_pool *pool) {
    const int64_t H = 2, dim = 19, r = 4, W = 4 * 30 + 3, n_ctx = 6000;
    const int32_t pos = 4999;
    const int64_t nb = (pos + 1) / r;
    float *q = malloc(sizeof(float) * H * dim), *K = malloc(sizeof(float) * nb * dim);
    fill(q, H * dim, 1.0f);
    fill(K, nb * dim, 1.0f);
    for (int64_t b = 0; b < nb; b += 7) memset(K + b * dim, 0, sizeof(float) * dim); /* ties at 0 */
    int32_t *c1 = malloc(sizeof(int32_t) * W), *c2 = malloc(sizeof(int32_t) * W), n1, n2;
    void *scr = malloc(st_qsa_scratch_size(st_pool_size(pool), n_ctx, r, W));
    st_qsa_args a = {.q = q, .ld_q = H * dim, .n_head = H, .dim = dim, .blocks = K, .pos = &pos, .n_tok = 1,
                     .r = r, .width = W, .n_ctx = n_ctx, .cells = c1, .ld_cells = W, .n_cells = &n1};
    st_op_qsa_select(NULL, &a, scr);
    a.cells = c2;
    a.n_cells = &n2;
    st_op_qsa_select(pool, &a, scr);
    CHECK(n1 == W && n2 == W && !memcmp(c1, c2, sizeof(int32_t) * W));
    free(q); free(K); free(c1); free(c2); free(scr);
}

/* The heap that keeps its values beside its cells ends as the reference's, entry for entry, on
 * rows whose scores take a few values (ties everywhere, within and across blocks) or are all
 * distinct, for odd widths, block sizes and tails. */
static void test_qsa_heap_kept(void) {
    const int64_t n_max = 3001;
    float *sigma = malloc(sizeof(float) * n_max), *hv = malloc(sizeof(float) * n_max);
    int32_t *h0 = malloc(sizeof(int32_t) * n_max), *h1 = malloc(sizeof(int32_t) * n_max);
    int ok = 1;
    for (int c = 0; c < 60 && ok; c++) {
        const int64_t r = 1 + c % 5, n = 200 + (int64_t)((frand() + 1.0f) * 1400.0f);
        const int64_t W = 1 + (int64_t)((frand() + 1.0f) * 0.5f * (float)(n - 1)), tail_start = n / r * r;
        for (int64_t b = 0; b < n / r + 1; b++) {
            const float x = frand();
            sigma[b] = c % 3 == 0 ? x : c % 3 == 1 ? (x > 0.0f ? x : 0.0f) : (float)(int)(4.0f * x) * 0.25f;
        }
        ops_qsa_heap_select_ref(h0, W, n, sigma, r, tail_start);
        ops_qsa_heap_select(h1, hv, W, n, sigma, r, tail_start);
        ok = !memcmp(h0, h1, sizeof(int32_t) * W);
        CHECKF(ok, "case %d: n %lld, W %lld, r %lld", c, (long long)n, (long long)W, (long long)r);
    }
    free(sigma); free(hv); free(h0); free(h1);
}

static void test_attention_cells(st_pool *pool) {
    const int64_t hds[4] = {40, 64, 128, 256}; /* 256: the flash preset's, its V rows through a tile */
    for (int ih = 0; ih < 4; ih++)
        for (int f16 = 0; f16 < 2; f16++) {
            const int64_t hd = hds[ih], H = 6, Hkv = 2, row = Hkv * hd, n_ctx = 300, T = 3;
            const uint32_t type = f16 ? ST_TYPE_F16 : ST_TYPE_F32;
            float *k = malloc(sizeof(float) * n_ctx * row), *v = malloc(sizeof(float) * n_ctx * row);
            float *q = malloc(sizeof(float) * T * H * hd);
            fill(k, n_ctx * row, 1.0f);
            fill(v, n_ctx * row, 1.0f);
            fill(q, T * H * hd, 1.0f);
            void *kc = malloc(n_ctx * st_kv_row_bytes(type, row)), *vc = malloc(n_ctx * st_kv_row_bytes(type, row));
            st_op_kv_store(type, kc, row, 0, k, row, n_ctx);
            st_op_kv_store(type, vc, row, 0, v, row, n_ctx);
            int32_t pos[3] = {0, 150, 299};
            float *dense = malloc(sizeof(float) * T * H * hd), *out[3];
            st_attn_args a = {.q = q, .ldq_tok = H * hd, .ldq_head = hd, .k_cache = kc, .v_cache = vc, .kv_type = type,
                              .pos = pos, .n_tok = T, .n_head = H, .n_head_kv = Hkv, .head_dim = hd, .n_kv = n_ctx,
                              .scale = 1.0f / sqrtf((float)hd), .out = dense, .ldo_tok = H * hd};
            st_op_attention(pool, &a);
            /* cells 0 .. p (more than one tile) equal the causal op */
            int32_t *cells = malloc(sizeof(int32_t) * T * n_ctx), ncell[3];
            for (int t = 0; t < T; t++) {
                ncell[t] = pos[t] + 1;
                for (int c = 0; c <= pos[t]; c++) cells[t * n_ctx + c] = c;
            }
            for (int l = 0; l < 3; l++) {
                st_cpu_limit(levels[l]);
                out[l] = malloc(sizeof(float) * T * H * hd);
                st_attn_cells_args c = {.a = a, .cells = cells, .ld_cells = n_ctx, .n_cells = ncell};
                c.a.out = out[l];
                st_op_attention_cells(pool, &c);
            }
            st_cpu_limit(3);
            for (int l = 0; l < 3; l++)
                CHECKF(max_rel(out[l], dense, T * H * hd) < 2e-6f, "hd %lld f16 %d level %d: %g", (long long)hd, f16, levels[l],
                       max_rel(out[l], dense, T * H * hd));
            /* a sparse list (every third cell): level 0 against a double-precision softmax */
            for (int t = 0; t < T; t++) {
                ncell[t] = 0;
                for (int c = 0; c <= pos[t]; c += 3) cells[t * n_ctx + ncell[t]++] = c;
            }
            for (int l = 0; l < 3; l++) {
                st_cpu_limit(levels[l]);
                st_attn_cells_args c = {.a = a, .cells = cells, .ld_cells = n_ctx, .n_cells = ncell};
                c.a.out = out[l];
                st_op_attention_cells(pool, &c);
            }
            st_cpu_limit(3);
            int ok = 1;
            for (int t = 0; t < T && ok; t++)
                for (int h = 0; h < H; h++) {
                    const int g = h / (H / Hkv);
                    double mx = -1e30, l = 0, o[256] = {0};
                    double s[300];
                    for (int j = 0; j < ncell[t]; j++) {
                        int c = cells[t * n_ctx + j];
                        double dot = 0;
                        for (int i = 0; i < hd; i++) {
                            float kk = f16 ? st_fp16_to_fp32(((uint16_t *)kc)[c * row + g * hd + i]) : k[c * row + g * hd + i];
                            dot += (double)q[(t * H + h) * hd + i] * kk;
                        }
                        s[j] = dot / sqrt((double)hd);
                        if (s[j] > mx) mx = s[j];
                    }
                    for (int j = 0; j < ncell[t]; j++) {
                        int c = cells[t * n_ctx + j];
                        double p = exp(s[j] - mx);
                        l += p;
                        for (int i = 0; i < hd; i++) {
                            float vv = f16 ? st_fp16_to_fp32(((uint16_t *)vc)[c * row + g * hd + i]) : v[c * row + g * hd + i];
                            o[i] += p * vv;
                        }
                    }
                    for (int i = 0; i < hd; i++)
                        if (fabs(out[0][(t * H + h) * hd + i] - o[i] / l) > 1e-5) ok = 0;
                }
            CHECKF(ok, "sparse hd %lld f16 %d", (long long)hd, f16);
            for (int l = 1; l < 3; l++) CHECKF(max_rel(out[l], out[0], T * H * hd) < 2e-6f, "sparse level %d", levels[l]);
            for (int l = 0; l < 3; l++) free(out[l]);
            free(k); free(v); free(q); free(kc); free(vc); free(dense); free(cells);
        }
}

int main(void) {
    st_pool *pool;
    if (st_pool_create(2, &pool) != ST_OK) return 1;
    test_hc(pool);
    test_ple_gate();
    test_ple_hash();
    test_qsa_blocks_forms();
    test_qsa_pool_scores();
    test_qsa_select_ties();
    test_qsa_select_decode(pool);
    test_qsa_heap_kept();
    test_attention_cells(pool);
    st_pool_destroy(pool);
    return test_report("test_ops_qwen4exp");
}
