/* op_harness.c: every CUDA op (src/backend/cuda/cuda_backend.h) against its CPU reference
 * (backend.h, backend/cpu/matmul.h) on random inputs of odd sizes. Per op it prints the
 * normalised error max|gpu - cpu| / max|cpu| and PASS/FAIL against the op's tolerance; the exit
 * status is 1 if any op failed, 77 (skipped) when there is no GPU.
 *
 *   cuda_op_harness          correctness
 *   cuda_op_harness --lowbit [TYPE]   only the low-bit weight types' cases (all, or the one named
 *                            as ggml names it: iq4_xs, q2_K, ...)
 *   cuda_op_harness --perf-lowbit   instead: the low-bit types' matvec GB/s and the 35B-A3B FFN
 *                            decode stack per type (Q4_K's beside them)
 *   cuda_op_harness --perf   instead: per-op GPU time, and GB/s of the weight products at the model's
 *                            shapes (expert slices, 2048x8192, the 151936x2048 head), each over
 *                            copies of the weights larger than the L2 so HBM is what is measured
 *
 * Tolerances: f32 ops 1e-4 (the GPU's expf/cosf differ from glibc's by an ulp or two); the
 * quantized products 3e-2 (the GPU quantizes activations per 32 with an f32 scale, the CPU per
 * 256 (q8_K) or per 32 with an f16 scale, so both carry ~0.4% noise per block of their own);
 * f16/bf16 weights 1e-2/2e-2 (the CPU rounds X to the weight type, the GPU keeps it f32); the
 * prompt GEMM at least 1e-2 (W and X rounded to f16 for the tensor cores). qwen4exp: hc_pre,
 * hc_post, ple_gate 1e-6 (the CPU's order, expf's ulp), qsa_pool bit for bit, qsa_select on exact
 * scores: the CPU's cells where scores are distinct and no block is split, the same scores always
 * (test_qsa_select says what is asserted), attention_cells 1e-4. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda_backend.h"
#include "base/status.h"
#include "quant/quant.h"
#include "quant/random.h"
#include "quant/types.h"

static st_cuda *cu;
static int n_fail, n_pass;

/* ---- helpers ---------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) {   /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static float *rand_vec(int64_t n, float scale) {
    float *v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = frand() * scale;
    return v;
}

static void die(const char *what) {
    fprintf(stderr, "cuda_op_harness: %s failed: %s\n", what, st_last_error());
    exit(1);
}
#define GPU(expr) do { if ((expr) != ST_OK) die(#expr); } while (0)

static void *dev_from(const void *host, size_t bytes) {
    void *d;
    GPU(st_cuda_alloc(cu, bytes, &d));
    if (host) GPU(st_cuda_upload(cu, d, host, bytes));
    else GPU(st_cuda_memset0(cu, d, bytes));
    return d;
}
static float *to_host(const void *dev, size_t n_floats) {
    float *h = malloc(n_floats * sizeof(float));
    GPU(st_cuda_download(cu, h, dev, n_floats * sizeof(float)));
    return h;
}

/* max|g - c| / max|c| over rows x n with strides */
static double norm_err(const float *g, const float *c, int64_t rows, int64_t n, int64_t ld) {
    double md = 0.0, mc = 0.0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) {
            const double a = g[r * ld + i], b = c[r * ld + i];
            const double d = fabs(a - b);
            if (!(d <= md)) md = d;   /* NaN counts as the worst */
            if (fabs(b) > mc) mc = fabs(b);
        }
    return mc > 0.0 ? md / mc : md;
}

/* max|a - b| (NaN counts as the worst): 0 for the same bits */
static double max_diff(const float *a, const float *b, int64_t n) {
    double md = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= md)) md = d;
    }
    return md;
}

static void report(const char *op, double err, double tol) {
    const int ok = err <= tol;
    printf("%-34s err %.3e  tol %.0e  %s\n", op, err, tol, ok ? "PASS" : "FAIL");
    if (ok) n_pass++; else n_fail++;
}

/* ---- weight products -------------------------------------------------------------------------- */

static void *quantize_matrix(uint32_t type, const float *w, int64_t M, int64_t K, size_t *bytes) {
    const size_t rb = st_row_size(st_type_get(type), K);
    uint8_t *q = malloc(rb * (size_t)M);
    uint64_t state = 0x10B17u + type;
    for (int64_t m = 0; m < M; m++)   /* a type without a quantizer (the grid i-quants): random blocks */
        if (!st_quantize_row(type, w + m * K, q + (size_t)m * rb, K) &&
            !st_random_row(type, 1.0f, 1, &state, q + (size_t)m * rb, K, NULL)) die("a weight type with no source of blocks");
    *bytes = rb * (size_t)M;
    return q;
}

static void cpu_matmul(uint32_t type, const void *W, int64_t M, int64_t K, const float *X, int64_t ldx,
                       int64_t n, float *Y, int64_t ldy) {
    void *scratch = malloc(st_matmul_scratch_size(type, K, n) + 64);
    st_matmul(NULL, type, K, &(st_matmul_part){W, M, X, ldx, n, Y, ldy}, scratch);
    free(scratch);
}

static double type_tol(uint32_t type) {
    return type == ST_TYPE_F32 ? 1e-4 : type == ST_TYPE_F16 ? 1e-2 : type == ST_TYPE_BF16 ? 2e-2 : 3e-2;
}

static void test_matmul(uint32_t type, int64_t M, int64_t K, int64_t n) {
    float *w = rand_vec(M * K, 1.0f);
    size_t wb;
    void *Wq = quantize_matrix(type, w, M, K, &wb);
    /* n = 1: dense X (the vector-load path of the float kernels); else padded rows */
    const int64_t ldx = n == 1 ? K : K + 3, ldy = M + 5;
    float *X = rand_vec(n * ldx, 1.0f);
    float *Yc = calloc((size_t)(n * ldy), sizeof(float));
    cpu_matmul(type, Wq, M, K, X, ldx, n, Yc, ldy);
    void *dW = dev_from(Wq, wb);
    float *dX = dev_from(X, (size_t)(n * ldx) * sizeof(float));
    float *dY = dev_from(NULL, (size_t)(n * ldy) * sizeof(float));
    GPU(st_cuda_matmul(cu, type, dW, M, K, dX, ldx, n, dY, ldy));
    float *Yg = to_host(dY, (size_t)(n * ldy));
    char name[96];
    snprintf(name, sizeof name, "matmul %s %lldx%lld n=%lld%s", st_type_get(type)->name, (long long)M,
             (long long)K, (long long)n, n > 8 ? " (gemm)" : "");
    /* the GEMM path rounds W and X to f16 */
    const double tol = n > 8 && type_tol(type) < 1e-2 ? 1e-2 : type_tol(type);
    report(name, norm_err(Yg, Yc, n, M, ldy), tol);
    st_cuda_free(cu, dW); st_cuda_free(cu, dX); st_cuda_free(cu, dY);
    free(w); free(Wq); free(X); free(Yc); free(Yg);
}

/* gate/up (x_group = k: all slots read one token) and down (x_group = 1) with expert ids */
static void test_matmul_id(uint32_t type, int64_t n_expert, int64_t M, int64_t K, int64_t n_slots) {
    float *w = rand_vec(n_expert * M * K, 1.0f);
    size_t wb;
    void *Wq = quantize_matrix(type, w, n_expert * M, K, &wb);
    const size_t eb = wb / (size_t)n_expert;
    /* 5 slots (decode: one token's experts) or 37 (a prompt: slots sorted by expert on the GPU) */
    int32_t ids[37];
    for (int i = 0; i < 37; i++) ids[i] = (int32_t)((i * 3 + i / 5) % n_expert);
    ids[0] = 3; ids[1] = 0; ids[2] = 4 % (int32_t)n_expert; ids[3] = 3; ids[4] = 1;
    const int64_t ns = n_slots, ldx = K + 1, ldy = M + 2;
    void *dW = dev_from(Wq, wb);
    int32_t *dids = dev_from(ids, sizeof ids);
    for (int down = 0; down < 2; down++) {
        /* gate: decode's k slots read one token; the prompt case, 4 slots per token */
        const int64_t x_group = down ? 1 : ns == 5 ? 5 : 4, n_x = (ns + x_group - 1) / x_group;
        float *X = rand_vec(n_x * ldx, 1.0f);
        float *Yc = calloc((size_t)(ns * ldy), sizeof(float));
        for (int64_t s = 0; s < ns; s++)
            cpu_matmul(type, (const uint8_t *)Wq + (size_t)ids[s] * eb, M, K, X + (s / x_group) * ldx, ldx, 1,
                       Yc + s * ldy, ldy);
        float *dX = dev_from(X, (size_t)(n_x * ldx) * sizeof(float));
        float *dY = dev_from(NULL, (size_t)(ns * ldy) * sizeof(float));
        GPU(st_cuda_matmul_id(cu,
                &(st_cuda_experts){.type = type, .W = dW, .expert_bytes = eb, .n_expert = n_expert, .M = M,
                    .ids = dids, .x_group = x_group, .n_slots = ns}, K, dX, ldx, dY, ldy));
        float *Yg = to_host(dY, (size_t)(ns * ldy));
        char name[96];
        snprintf(name, sizeof name, "matmul_id %s %s %lldx%lld slots=%lld", st_type_get(type)->name,
                 down ? "down" : "gate", (long long)M, (long long)K, (long long)ns);
        report(name, norm_err(Yg, Yc, ns, M, ldy), type_tol(type));
        /* the weighted combination back to the token */
        if (down && ns == 5) {
            const float wts[5] = { 0.3f, 0.25f, 0.2f, 0.15f, 0.1f };
            float *dw = dev_from(wts, sizeof wts);
            float *out0 = rand_vec(M, 1.0f), *outc = malloc((size_t)M * sizeof(float));
            memcpy(outc, out0, (size_t)M * sizeof(float));
            for (int64_t s = 0; s < ns; s++) st_op_axpy(outc, M, Yg + s * ldy, wts[s]);
            float *dout = dev_from(out0, (size_t)M * sizeof(float));
            GPU(st_cuda_moe_combine(cu, dY, ldy, dw, 1, ns, M, dout, M, 1));
            float *outg = to_host(dout, (size_t)M);
            report("moe_combine (accumulate)", norm_err(outg, outc, 1, M, M), 1e-5);
            st_cuda_free(cu, dw); st_cuda_free(cu, dout);
            free(out0); free(outc); free(outg);
        }
        st_cuda_free(cu, dX); st_cuda_free(cu, dY);
        free(X); free(Yc); free(Yg);
    }
    st_cuda_free(cu, dW); st_cuda_free(cu, dids);
    free(w); free(Wq);
}

/* gate, up and SwiGLU fused, with ids (one token's k slots) and without (a dense FFN) */
static void test_matmul_id_swiglu(uint32_t type, int64_t n_expert, int64_t M, int64_t K) {
    float *wg = rand_vec(n_expert * M * K, 1.0f), *wu = rand_vec(n_expert * M * K, 1.0f);
    size_t wb;
    void *Gq = quantize_matrix(type, wg, n_expert * M, K, &wb);
    void *Uq = quantize_matrix(type, wu, n_expert * M, K, &wb);
    const size_t eb = wb / (size_t)n_expert;
    const int32_t ids[4] = { 2, 0, 2, 1 };
    const int64_t ns = 4, ldy = M + 1;
    float *X = rand_vec(K, 1.0f);
    float *Yc = calloc((size_t)(ns * ldy), sizeof(float)), *g = malloc((size_t)M * 4), *u = malloc((size_t)M * 4);
    for (int64_t s = 0; s < ns; s++) {
        cpu_matmul(type, (const uint8_t *)Gq + (size_t)ids[s] * eb, M, K, X, K, 1, g, M);
        cpu_matmul(type, (const uint8_t *)Uq + (size_t)ids[s] * eb, M, K, X, K, 1, u, M);
        st_op_swiglu(NULL, g, M, u, M, Yc + s * ldy, M, 1, M);
    }
    void *dG = dev_from(Gq, wb), *dU = dev_from(Uq, wb);
    int32_t *dids = dev_from(ids, sizeof ids);
    float *dX = dev_from(X, (size_t)K * 4), *dY = dev_from(NULL, (size_t)(ns * ldy) * 4);
    GPU(st_cuda_matmul_id_swiglu(cu,
            &(st_cuda_experts){.type = type, .W = dG, .W2 = dU, .expert_bytes = eb, .n_expert = n_expert, .M = M,
                .ids = dids, .x_group = ns, .n_slots = ns}, K, dX, K, dY, ldy));
    float *Yg = to_host(dY, (size_t)(ns * ldy));
    char name[96];
    snprintf(name, sizeof name, "matmul_id_swiglu %s %lldx%lld", st_type_get(type)->name, (long long)M, (long long)K);
    report(name, norm_err(Yg, Yc, ns, M, ldy), type_tol(type));
    /* no ids: expert 0 as a dense FFN (slot 1 above used expert 0) */
    GPU(st_cuda_matmul_id_swiglu(cu,
            &(st_cuda_experts){.type = type, .W = dG, .W2 = dU, .M = M, .x_group = 1, .n_slots = 1}, K, dX, K, dY, ldy));
    free(Yg);
    Yg = to_host(dY, (size_t)M);
    snprintf(name, sizeof name, "matmul_swiglu (dense) %s", st_type_get(type)->name);
    report(name, norm_err(Yg, Yc + ldy, 1, M, M), type_tol(type));
    st_cuda_free(cu, dG); st_cuda_free(cu, dU); st_cuda_free(cu, dids); st_cuda_free(cu, dX); st_cuda_free(cu, dY);
    free(wg); free(wu); free(Gq); free(Uq); free(X); free(Yc); free(g); free(u); free(Yg);
}

static void test_get_rows(uint32_t type) {
    const int64_t n_rows = 37, n_embd = 512, n_tok = 4, ld = n_embd + 7;
    float *w = rand_vec(n_rows * n_embd, 1.0f);
    size_t wb;
    void *Wq = quantize_matrix(type, w, n_rows, n_embd, &wb);
    const int32_t ids[4] = { 36, 0, 17, 17 };
    float *oc = calloc((size_t)(n_tok * ld), sizeof(float));
    st_op_get_rows(type, Wq, n_rows, n_embd, ids, n_tok, oc, ld);
    void *dW = dev_from(Wq, wb);
    float *dout = dev_from(NULL, (size_t)(n_tok * ld) * sizeof(float));
    GPU(st_cuda_get_rows(cu, type, dW, n_rows, n_embd, ids, n_tok, dout, ld));
    float *og = to_host(dout, (size_t)(n_tok * ld));
    char name[64];
    snprintf(name, sizeof name, "get_rows %s", st_type_get(type)->name);
    report(name, norm_err(og, oc, n_tok, n_embd, ld), 1e-6);
    /* device ids, one out of range (a zero row) */
    const int32_t ids2[4] = { 36, 0, 17, 37 };
    memset(oc + 3 * ld, 0, (size_t)n_embd * sizeof(float));
    int32_t *dids = dev_from(ids2, sizeof ids2);
    float *dout2 = dev_from(NULL, (size_t)(n_tok * ld) * sizeof(float));
    GPU(st_cuda_get_rows_dev(cu, type, dW, n_rows, n_embd, dids, n_tok, dout2, ld));
    float *og2 = to_host(dout2, (size_t)(n_tok * ld));
    snprintf(name, sizeof name, "get_rows_dev %s", st_type_get(type)->name);
    report(name, norm_err(og2, oc, n_tok, n_embd, ld), 1e-6);
    st_cuda_free(cu, dids); st_cuda_free(cu, dout2);
    free(og2);
    const int32_t bad[1] = { 37 };
    if (st_cuda_get_rows(cu, type, dW, n_rows, n_embd, bad, 1, dout, ld) != ST_ERR_RANGE) {
        printf("get_rows: out-of-range id not refused  FAIL\n");
        n_fail++;
    }
    st_cuda_free(cu, dW); st_cuda_free(cu, dout);
    free(w); free(Wq); free(oc); free(og);
}

/* ---- norms, rope, pointwise ------------------------------------------------------------------- */

static void test_norms(void) {
    /* plain rows */
    {
        const int64_t rows = 7, dim = 2049, ld = 2053;
        float *x = rand_vec(rows * ld, 3.0f), *w = rand_vec(dim, 1.0f);
        float *yc = calloc((size_t)(rows * ld), sizeof(float));
        st_op_rms_norm(NULL, x, ld, w, yc, ld, rows, dim, 1e-6f);
        float *dx = dev_from(x, (size_t)(rows * ld) * 4), *dw = dev_from(w, (size_t)dim * 4);
        float *dy = dev_from(NULL, (size_t)(rows * ld) * 4);
        GPU(st_cuda_rms_norm(cu, dx, ld, dw, dy, ld, rows, dim, 1e-6f));
        float *yg = to_host(dy, (size_t)(rows * ld));
        report("rms_norm 7x2049", norm_err(yg, yc, rows, dim, ld), 1e-5);
        st_op_l2_norm(NULL, x, ld, yc, ld, rows, dim, 1e-6f);
        GPU(st_cuda_l2_norm(cu, dx, ld, dy, ld, rows, dim, 1e-6f));
        free(yg);
        yg = to_host(dy, (size_t)(rows * ld));
        report("l2_norm 7x2049", norm_err(yg, yc, rows, dim, ld), 1e-5);
        st_cuda_free(cu, dx); st_cuda_free(cu, dw); st_cuda_free(cu, dy);
        free(x); free(w); free(yc); free(yg);
    }
    /* per head, in place, over the interleaved q|gate layout (ld = 2 * hd) */
    {
        const int64_t n_tok = 5, n_head = 3, hd = 96, ld = 2 * hd, n = n_tok * n_head * ld;
        float *x = rand_vec(n, 2.0f), *w = rand_vec(hd, 1.0f), *yc = malloc((size_t)n * 4);
        memcpy(yc, x, (size_t)n * 4);
        st_op_rms_norm(NULL, yc, ld, w, yc, ld, n_tok * n_head, hd, 1e-6f);
        float *dx = dev_from(x, (size_t)n * 4), *dw = dev_from(w, (size_t)hd * 4);
        GPU(st_cuda_rms_norm(cu, dx, ld, dw, dx, ld, n_tok * n_head, hd, 1e-6f));
        float *yg = to_host(dx, (size_t)n);
        report("rms_norm per-head in place", norm_err(yg, yc, 1, n, n), 1e-5);
        st_cuda_free(cu, dx); st_cuda_free(cu, dw);
        free(x); free(w); free(yc); free(yg);
    }
}

static void test_rope(int yarn) {
    const int64_t n_tok = 5, n_head = 3, hd = 96, ld_tok = n_head * hd + 4, n = n_tok * ld_tok;
    st_rope_params p = st_rope_plain(64, 10000000.0f);
    if (yarn) {
        p.freq_scale = 0.25f;
        p.ext_factor = 1.0f;
        st_rope_yarn_corr_dims(64, 32768, p.freq_base, 32.0f, 1.0f, p.corr_dims);
    }
    const int32_t pos[5] = { 0, 1, 77, 4095, 200000 };
    float *x = rand_vec(n, 1.0f), *xc = malloc((size_t)n * 4);
    memcpy(xc, x, (size_t)n * 4);
    st_op_rope_neox(NULL, xc, ld_tok, hd, n_tok, n_head, pos, &p);
    float *dx = dev_from(x, (size_t)n * 4);
    int32_t *dpos = dev_from(pos, sizeof pos);
    GPU(st_cuda_rope_neox(cu, dx, ld_tok, hd, n_tok, n_head, dpos, &p));
    float *xg = to_host(dx, (size_t)n);
    report(yarn ? "rope_neox yarn 64/96" : "rope_neox 64/96", norm_err(xg, xc, 1, n, n), 1e-4);
    st_cuda_free(cu, dx); st_cuda_free(cu, dpos);
    free(x); free(xc); free(xg);
}

static void test_pointwise(void) {
    static const char *names[] = { "silu", "sigmoid", "softplus", "swiglu", "mul_sigmoid", "mul_silu", "mul", "add" };
    const int64_t rows = 3, n = 1001, ld = 1005, sz = rows * ld;
    float *a = rand_vec(sz, 30.0f), *b = rand_vec(sz, 8.0f);
    float *da = dev_from(a, (size_t)sz * 4), *db = dev_from(b, (size_t)sz * 4), *dy = dev_from(NULL, (size_t)sz * 4);
    float *yc = calloc((size_t)sz, 4);
    for (int op = ST_CUDA_SILU; op <= ST_CUDA_ADD; op++) {
        switch (op) {
        case ST_CUDA_SILU:        st_op_silu(NULL, a, ld, yc, ld, rows, n); break;
        case ST_CUDA_SIGMOID:     st_op_sigmoid(NULL, a, ld, yc, ld, rows, n); break;
        case ST_CUDA_SOFTPLUS:    st_op_softplus(NULL, a, ld, yc, ld, rows, n); break;
        case ST_CUDA_SWIGLU:      st_op_swiglu(NULL, a, ld, b, ld, yc, ld, rows, n); break;
        case ST_CUDA_MUL_SIGMOID: st_op_mul_sigmoid(NULL, a, ld, b, ld, yc, ld, rows, n); break;
        case ST_CUDA_MUL_SILU:    st_op_mul_silu(NULL, a, ld, b, ld, yc, ld, rows, n); break;
        case ST_CUDA_MUL:         st_op_mul(NULL, a, ld, b, ld, yc, ld, rows, n); break;
        default:                  st_op_add(NULL, a, ld, b, ld, yc, ld, rows, n); break;
        }
        GPU(st_cuda_pointwise(cu, op, da, ld, db, ld, dy, ld, rows, n));
        float *yg = to_host(dy, (size_t)sz);
        char name[64];
        snprintf(name, sizeof name, "pointwise %s", names[op]);
        report(name, norm_err(yg, yc, rows, n, ld), 1e-5);
        free(yg);
    }
    {   /* axpy */
        float *y0 = rand_vec(n, 1.0f), *yc2 = malloc((size_t)n * 4);
        memcpy(yc2, y0, (size_t)n * 4);
        st_op_axpy(yc2, n, a, 0.37f);
        float *dy0 = dev_from(y0, (size_t)n * 4);
        GPU(st_cuda_axpy(cu, dy0, n, da, 0.37f, 1));
        float *yg = to_host(dy0, (size_t)n);
        report("axpy", norm_err(yg, yc2, 1, n, n), 1e-6);
        st_cuda_free(cu, dy0);
        free(y0); free(yc2); free(yg);
    }
    st_cuda_free(cu, da); st_cuda_free(cu, db); st_cuda_free(cu, dy);
    free(a); free(b); free(yc);
}

/* ---- attention -------------------------------------------------------------------------------- */

static void test_attention(int64_t n_tok, int64_t n_kv, int64_t hd, uint32_t kv_type) {
    const int64_t n_head = 6, n_head_kv = 2, row = n_head_kv * hd;
    const int64_t ldq_tok = n_head * hd * 2, ldq_head = 2 * hd;   /* q interleaved with its gate */
    float *q = rand_vec(n_tok * ldq_tok, 1.0f);
    float *kv_src = rand_vec(2 * n_kv * row, 1.0f);
    const size_t cb = st_kv_row_bytes(kv_type, row) * (size_t)n_kv;
    void *kc = malloc(cb), *vc = malloc(cb);
    st_op_kv_store(kv_type, kc, row, 0, kv_src, row, n_kv);
    st_op_kv_store(kv_type, vc, row, 0, kv_src + n_kv * row, row, n_kv);
    int32_t *pos = malloc((size_t)n_tok * sizeof(int32_t));
    for (int64_t t = 0; t < n_tok; t++) pos[t] = (int32_t)(n_kv - n_tok + t);
    const int64_t ldo = n_head * hd + 3;
    float *oc = calloc((size_t)(n_tok * ldo), 4);
    st_attn_args a = { q, ldq_tok, ldq_head, kc, vc, kv_type, pos, n_tok, n_head, n_head_kv, hd, n_kv,
                       1.0f / sqrtf((float)hd), oc, ldo };
    st_op_attention(NULL, &a);
    /* the GPU cache is written by its own kv_store, from the same f32 rows */
    float *dsrc = dev_from(kv_src, (size_t)(2 * n_kv * row) * 4);
    void *dk = dev_from(NULL, cb), *dv = dev_from(NULL, cb);
    GPU(st_cuda_kv_store(cu, kv_type, dk, row, 0, dsrc, row, n_kv));
    GPU(st_cuda_kv_store(cu, kv_type, dv, row, 0, dsrc + n_kv * row, row, n_kv));
    void *kg = malloc(cb);
    GPU(st_cuda_download(cu, kg, dk, cb));
    char name[96];
    snprintf(name, sizeof name, "kv_store %s", kv_type == ST_TYPE_F16 ? "f16" : "f32");
    if (n_tok == 1) report(name, memcmp(kg, kc, cb) ? 1.0 : 0.0, 0.0);
    float *dq = dev_from(q, (size_t)(n_tok * ldq_tok) * 4);
    int32_t *dpos = dev_from(pos, (size_t)n_tok * 4);
    float *dout = dev_from(NULL, (size_t)(n_tok * ldo) * 4);
    st_attn_args g = a;
    g.q = dq; g.k_cache = dk; g.v_cache = dv; g.pos = dpos; g.out = dout;
    GPU(st_cuda_attention(cu, &g));
    float *og = to_host(dout, (size_t)(n_tok * ldo));
    snprintf(name, sizeof name, "attention %s n_tok=%lld n_kv=%lld hd=%lld", kv_type == ST_TYPE_F16 ? "f16" : "f32",
             (long long)n_tok, (long long)n_kv, (long long)hd);
    report(name, norm_err(og, oc, n_tok, n_head * hd, ldo), 1e-4);
    st_cuda_free(cu, dsrc); st_cuda_free(cu, dk); st_cuda_free(cu, dv); st_cuda_free(cu, dq);
    st_cuda_free(cu, dpos); st_cuda_free(cu, dout);
    free(q); free(kv_src); free(kc); free(vc); free(pos); free(oc); free(kg); free(og);
}

/* ---- Gated DeltaNet, conv ------------------------------------------------------------------- */

static void test_gdn(int64_t n_tok, int head_map) {
    const int64_t n_k = 2, n_v = 4, d = 128, ldqk = n_k * d + 5, ldv = n_v * d + 3;
    float *q = rand_vec(n_tok * ldqk, 1.0f), *k = rand_vec(n_tok * ldqk, 1.0f), *v = rand_vec(n_tok * ldv, 1.0f);
    /* roughly unit vectors (chunks of d, not aligned with the padded rows: inputs only need to be tame) */
    st_op_l2_norm(NULL, q, d, q, d, n_tok * n_k, d, 1e-6f);
    st_op_l2_norm(NULL, k, d, k, d, n_tok * n_k, d, 1e-6f);
    float *ga = rand_vec(n_tok * n_v, 2.0f), *gb = rand_vec(n_tok * n_v, 2.0f);
    float *dt = rand_vec(n_v, 1.0f), *sa = rand_vec(n_v, 1.0f);
    for (int64_t h = 0; h < n_v; h++) sa[h] = -fabsf(sa[h]) - 0.1f;
    float *g = malloc((size_t)(n_tok * n_v) * 4), *beta = malloc((size_t)(n_tok * n_v) * 4);
    st_op_gdn_gates(ga, n_v, gb, n_v, dt, sa, n_tok, n_v, g, beta);
    const int64_t ns = n_v * d * d;
    float *S = rand_vec(ns, 0.1f), *Sc = malloc((size_t)ns * 4);
    memcpy(Sc, S, (size_t)ns * 4);
    float *oc = calloc((size_t)(n_tok * ldv), 4);
    st_gdn_args a = { n_tok, n_k, n_v, d, head_map, q, k, ldqk, ldqk, v, ldv, g, beta, Sc, oc, ldv,
                      1.0f / sqrtf((float)d), NULL };
    st_op_gdn_step(NULL, &a);
    float *dq = dev_from(q, (size_t)(n_tok * ldqk) * 4), *dk = dev_from(k, (size_t)(n_tok * ldqk) * 4);
    float *dv = dev_from(v, (size_t)(n_tok * ldv) * 4);
    float *dga = dev_from(ga, (size_t)(n_tok * n_v) * 4), *dgb = dev_from(gb, (size_t)(n_tok * n_v) * 4);
    float *ddt = dev_from(dt, (size_t)n_v * 4), *dsa = dev_from(sa, (size_t)n_v * 4);
    float *dg = dev_from(NULL, (size_t)(n_tok * n_v) * 4), *dbeta = dev_from(NULL, (size_t)(n_tok * n_v) * 4);
    float *dS = dev_from(S, (size_t)ns * 4), *dout = dev_from(NULL, (size_t)(n_tok * ldv) * 4);
    GPU(st_cuda_gdn_gates(cu, dga, n_v, dgb, n_v, ddt, dsa, n_tok, n_v, dg, dbeta));
    float *gg = to_host(dg, (size_t)(n_tok * n_v)), *bg = to_host(dbeta, (size_t)(n_tok * n_v));
    char name[96];
    if (n_tok > 1 && head_map == ST_GDN_TILED) {
        report("gdn_gates g", norm_err(gg, g, 1, n_tok * n_v, 0), 1e-5);
        report("gdn_gates beta", norm_err(bg, beta, 1, n_tok * n_v, 0), 1e-5);
    }
    st_gdn_args b = a;
    b.q = dq; b.k = dk; b.v = dv; b.g = dg; b.beta = dbeta; b.state = dS; b.out = dout;
    GPU(st_cuda_gdn_step(cu, &b));
    float *og = to_host(dout, (size_t)(n_tok * ldv)), *Sg = to_host(dS, (size_t)ns);
    snprintf(name, sizeof name, "gdn_step n_tok=%lld %s out", (long long)n_tok, head_map ? "grouped" : "tiled");
    report(name, norm_err(og, oc, n_tok, n_v * d, ldv), 1e-4);
    snprintf(name, sizeof name, "gdn_step n_tok=%lld %s state", (long long)n_tok, head_map ? "grouped" : "tiled");
    report(name, norm_err(Sg, Sc, 1, ns, ns), 1e-4);
    st_cuda_free(cu, dq); st_cuda_free(cu, dk); st_cuda_free(cu, dv); st_cuda_free(cu, dga);
    st_cuda_free(cu, dgb); st_cuda_free(cu, ddt); st_cuda_free(cu, dsa); st_cuda_free(cu, dg);
    st_cuda_free(cu, dbeta); st_cuda_free(cu, dS); st_cuda_free(cu, dout);
    free(q); free(k); free(v); free(ga); free(gb); free(dt); free(sa); free(g); free(beta);
    free(S); free(Sc); free(oc); free(gg); free(bg); free(og); free(Sg);
}

static void test_conv(int64_t n_tok, int64_t C, int64_t K) {
    const int64_t ld_m = C + 2, ld_out = C + 1;
    float *m = rand_vec(n_tok * ld_m, 2.0f), *w = rand_vec(C * K, 1.0f), *st = rand_vec(C * (K - 1), 1.0f);
    float *stc = malloc((size_t)(C * (K - 1)) * 4), *oc = calloc((size_t)(n_tok * ld_out), 4);
    memcpy(stc, st, (size_t)(C * (K - 1)) * 4);
    st_op_conv1d(NULL, m, ld_m, w, stc, oc, ld_out, n_tok, C, K, 1);
    float *dm = dev_from(m, (size_t)(n_tok * ld_m) * 4), *dw = dev_from(w, (size_t)(C * K) * 4);
    float *dst = dev_from(st, (size_t)(C * (K - 1)) * 4), *dout = dev_from(NULL, (size_t)(n_tok * ld_out) * 4);
    GPU(st_cuda_conv1d(cu, dm, ld_m, dw, dst, dout, ld_out, n_tok, C, K, 1));
    float *og = to_host(dout, (size_t)(n_tok * ld_out)), *sg = to_host(dst, (size_t)(C * (K - 1)));
    char name[64];
    snprintf(name, sizeof name, "conv1d+silu n_tok=%lld C=%lld K=%lld out", (long long)n_tok, (long long)C, (long long)K);
    report(name, norm_err(og, oc, n_tok, C, ld_out), 1e-5);
    snprintf(name, sizeof name, "conv1d+silu n_tok=%lld C=%lld K=%lld state", (long long)n_tok, (long long)C, (long long)K);
    report(name, norm_err(sg, stc, 1, C * (K - 1), 0), 0.0);
    st_cuda_free(cu, dm); st_cuda_free(cu, dw); st_cuda_free(cu, dst); st_cuda_free(cu, dout);
    free(m); free(w); free(st); free(stc); free(oc); free(og); free(sg);
}

/* The decode step's conv with its q and k heads L2-normalised in one launch, bit for bit the two
 * launches it replaces (output and state). */
static void test_conv_l2(int64_t n_k, int64_t n_v, int64_t dk) {
    const int64_t C = (2 * n_k + n_v) * dk, K = 4;
    float *m = rand_vec(C, 2.0f), *w = rand_vec(C * K, 1.0f), *st = rand_vec(C * (K - 1), 1.0f);
    float *dm = dev_from(m, (size_t)C * 4), *dw = dev_from(w, (size_t)(C * K) * 4);
    float *ds1 = dev_from(st, (size_t)(C * (K - 1)) * 4), *ds2 = dev_from(st, (size_t)(C * (K - 1)) * 4);
    float *do1 = dev_from(NULL, (size_t)C * 4), *do2 = dev_from(NULL, (size_t)C * 4);
    GPU(st_cuda_conv1d(cu, dm, C, dw, ds1, do1, C, 1, C, K, 1));
    GPU(st_cuda_l2_norm_heads(cu, do1, C, 1, 2 * n_k, dk, 1e-6f));
    GPU(st_cuda_conv1d_silu_l2(cu, dm, dw, ds2, do2, C, K, 2 * n_k, dk, 1e-6f));
    float *o1 = to_host(do1, (size_t)C), *o2 = to_host(do2, (size_t)C);
    float *s1 = to_host(ds1, (size_t)(C * (K - 1))), *s2 = to_host(ds2, (size_t)(C * (K - 1)));
    char name[64];
    snprintf(name, sizeof name, "conv1d_silu_l2 %lld+%lld heads of %lld", (long long)(2 * n_k), (long long)n_v, (long long)dk);
    report(name, norm_err(o1, o2, 1, C, 0) + norm_err(s1, s2, 1, C * (K - 1), 0), 0.0);
    st_cuda_free(cu, dm); st_cuda_free(cu, dw); st_cuda_free(cu, ds1); st_cuda_free(cu, ds2);
    st_cuda_free(cu, do1); st_cuda_free(cu, do2);
    free(m); free(w); free(st); free(o1); free(o2); free(s1); free(s2);
}

/* ---- qwen4exp: hyper-connections, PLE gate, QSA --------------------------------------------- */

/* hc_pre and hc_post on padded rows; both within 1e-6 of the CPU (the sums in its order, only
 * expf differing by an ulp or two). */
static void test_hc(int64_t n_tok, int64_t hc, int64_t d) {
    const int64_t hcd = hc * d, ld_x = hcd + 3, ld_g = hcd + 1, ld_m = d + 5, ld_inj = hc + 2;
    float *xn = rand_vec(n_tok * ld_x, 1.0f), *g = rand_vec(n_tok * ld_g, 4.0f), *y = rand_vec(n_tok * d, 1.0f);
    float *inj = rand_vec(n_tok * ld_inj, 4.0f), *R = rand_vec(n_tok * ld_x, 1.0f);
    float *mc = calloc((size_t)(n_tok * ld_m), 4), *Rc = malloc((size_t)(n_tok * ld_x) * 4);
    memcpy(Rc, R, (size_t)(n_tok * ld_x) * 4);
    st_op_hc_pre(NULL, xn, ld_x, g, ld_g, mc, ld_m, n_tok, hc, d, 1.0f / (float)hc);
    st_op_hc_post(NULL, Rc, ld_x, y, d, inj, ld_inj, n_tok, hc, d);
    float *dx = dev_from(xn, (size_t)(n_tok * ld_x) * 4), *dg = dev_from(g, (size_t)(n_tok * ld_g) * 4);
    float *dm = dev_from(NULL, (size_t)(n_tok * ld_m) * 4), *dy = dev_from(y, (size_t)(n_tok * d) * 4);
    float *dinj = dev_from(inj, (size_t)(n_tok * ld_inj) * 4), *dR = dev_from(R, (size_t)(n_tok * ld_x) * 4);
    GPU(st_cuda_hc_pre(cu, dx, ld_x, dg, ld_g, dm, ld_m, n_tok, hc, d, 1.0f / (float)hc));
    GPU(st_cuda_hc_post(cu, dR, ld_x, dy, d, dinj, ld_inj, n_tok, hc, d));
    float *mg = to_host(dm, (size_t)(n_tok * ld_m)), *Rg = to_host(dR, (size_t)(n_tok * ld_x));
    char name[96];
    snprintf(name, sizeof name, "hc_pre n_tok=%lld hc=%lld d=%lld", (long long)n_tok, (long long)hc, (long long)d);
    report(name, norm_err(mg, mc, n_tok, d, ld_m), 1e-6);
    snprintf(name, sizeof name, "hc_post n_tok=%lld hc=%lld d=%lld", (long long)n_tok, (long long)hc, (long long)d);
    report(name, norm_err(Rg, Rc, n_tok, hcd, ld_x), 1e-6);
    st_cuda_free(cu, dx); st_cuda_free(cu, dg); st_cuda_free(cu, dm); st_cuda_free(cu, dy);
    st_cuda_free(cu, dinj); st_cuda_free(cu, dR);
    free(xn); free(g); free(y); free(inj); free(R); free(mc); free(Rc); free(mg); free(Rg);
}

/* The PLE gate: the per-stream dot in double, so the gates agree to expf's ulp (1e-6). */
static void test_ple_gate(int64_t n_tok, int64_t hc, int64_t d) {
    const int64_t hcd = hc * d, ld_kq = hcd + 3, ld_v = d + 1, ld_gv = hcd + 2;
    float *k = rand_vec(n_tok * ld_kq, 1.0f), *q = rand_vec(n_tok * ld_kq, 1.0f), *v = rand_vec(n_tok * ld_v, 1.0f);
    float *gc = calloc((size_t)(n_tok * ld_gv), 4);
    st_op_ple_gate(NULL, k, q, ld_kq, v, ld_v, gc, ld_gv, n_tok, hc, d);
    float *dk = dev_from(k, (size_t)(n_tok * ld_kq) * 4), *dq = dev_from(q, (size_t)(n_tok * ld_kq) * 4);
    float *dv = dev_from(v, (size_t)(n_tok * ld_v) * 4), *dgv = dev_from(NULL, (size_t)(n_tok * ld_gv) * 4);
    GPU(st_cuda_ple_gate(cu, dk, dq, ld_kq, dv, ld_v, dgv, ld_gv, n_tok, hc, d));
    float *gg = to_host(dgv, (size_t)(n_tok * ld_gv));
    char name[96];
    snprintf(name, sizeof name, "ple_gate n_tok=%lld hc=%lld d=%lld", (long long)n_tok, (long long)hc, (long long)d);
    report(name, norm_err(gg, gc, n_tok, hcd, ld_gv), 1e-6);
    st_cuda_free(cu, dk); st_cuda_free(cu, dq); st_cuda_free(cu, dv); st_cuda_free(cu, dgv);
    free(k); free(q); free(v); free(gc); free(gg);
}

static int64_t irand(int64_t n);

/* QSA's block keys (qsa_blocks) for blocks b0 .. b1-1: bit for bit the pool (the CPU's, exact
 * on both), the GPU's rms_norm and rope kernels in turn; within 1e-4 of the CPU's three ops. Then
 * the decode form: a position that completes block b writes that block's bits, one that completes
 * none writes nothing. */
static void test_qsa_blocks(uint32_t kv_type, int64_t dim, int64_t n_rot, int64_t r, int64_t b0, int64_t b1) {
    const int64_t n_cells = b1 * r + r - 1, nb = b1 - b0;   /* a partial block after the last */
    float *src = rand_vec(n_cells * dim, 2.0f), *w = rand_vec(dim, 1.0f);
    const size_t cb = st_kv_row_bytes(kv_type, dim) * (size_t)n_cells, ob = (size_t)(b1 * dim) * 4;
    void *cache = malloc(cb);
    st_op_kv_store(kv_type, cache, dim, 0, src, dim, n_cells);
    st_rope_params rp = st_rope_plain(n_rot, 10000.0f);
    const float eps = 1e-6f;
    /* the CPU's ops; the pooled keys alone, for the GPU's kernels */
    float *pooled = calloc((size_t)(b1 * dim), 4), *oc = calloc((size_t)(b1 * dim), 4);
    int32_t *pos = malloc((size_t)nb * sizeof *pos);
    for (int64_t b = 0; b < nb; b++) pos[b] = (int32_t)((b0 + b) * r);
    st_op_qsa_pool(kv_type, cache, dim, r, b0, b1, pooled + b0 * dim);
    memcpy(oc, pooled, ob);
    st_op_rms_norm(NULL, oc + b0 * dim, dim, w, oc + b0 * dim, dim, nb, dim, eps);
    st_op_rope_neox(NULL, oc + b0 * dim, dim, dim, nb, 1, pos, &rp);
    float *dref = dev_from(pooled, ob), *dw = dev_from(w, (size_t)dim * 4);
    int32_t *dpos = dev_from(pos, (size_t)nb * sizeof *pos);
    GPU(st_cuda_rms_norm(cu, dref + b0 * dim, dim, dw, dref + b0 * dim, dim, nb, dim, eps));
    GPU(st_cuda_rope_neox(cu, dref + b0 * dim, dim, dim, nb, 1, dpos, &rp));
    float *ref = to_host(dref, (size_t)(b1 * dim));
    void *dc = dev_from(cache, cb);
    float *dout = dev_from(NULL, ob);
    GPU(st_cuda_memset0(cu, dout, ob));
    GPU(st_cuda_qsa_blocks(cu, kv_type, dc, dim, r, b0, b1, NULL, dw, eps, &rp, dout));
    float *og = to_host(dout, (size_t)(b1 * dim));
    char name[128];
    snprintf(name, sizeof name, "qsa_blocks %s dim=%lld n_rot=%lld r=%lld blocks %lld..%lld",
             kv_type == ST_TYPE_F16 ? "f16" : "f32", (long long)dim, (long long)n_rot, (long long)r, (long long)b0,
             (long long)b1);
    report(name, max_diff(og + b0 * dim, ref + b0 * dim, nb * dim), 0.0);
    snprintf(name + strlen(name), sizeof name - strlen(name), " vs CPU");
    report(name, norm_err(og + b0 * dim, oc + b0 * dim, 1, nb * dim, nb * dim), 1e-4);
    /* decode: the last block through its position, then a position inside the next block */
    const int32_t at[2] = {(int32_t)(b1 * r - 1), (int32_t)(b1 * r)};
    int32_t *dlast = dev_from(at, sizeof at);
    GPU(st_cuda_memset0(cu, dout, ob));
    GPU(st_cuda_qsa_blocks(cu, kv_type, dc, dim, r, 0, 0, dlast, dw, eps, &rp, dout));
    GPU(st_cuda_qsa_blocks(cu, kv_type, dc, dim, r, 0, 0, dlast + 1, dw, eps, &rp, dout));
    float *od = to_host(dout, (size_t)(b1 * dim));
    double other = 0.0;
    for (int64_t i = 0; i < (b1 - 1) * dim; i++) other += fabs(od[i]);
    snprintf(name, sizeof name, "qsa_blocks decode form: block %lld, none after", (long long)(b1 - 1));
    report(name, max_diff(od + (b1 - 1) * dim, og + (b1 - 1) * dim, dim) + other, 0.0);
    st_cuda_free(cu, dref); st_cuda_free(cu, dw); st_cuda_free(cu, dpos); st_cuda_free(cu, dc);
    st_cuda_free(cu, dout); st_cuda_free(cu, dlast);
    free(src); free(w); free(cache); free(pooled); free(oc); free(pos); free(ref); free(og); free(od);
}

/* The PLE hash on the device equals the CPU's on windows with missing and EOS predecessors and
 * multipliers past 2^32; and its rows gathered from a host table in pinned mapped memory (as
 * device_model.c copies the PLE table) equal st_op_get_rows's. */
static void test_ple_rows(uint32_t type, int64_t ngram, int64_t per, int64_t n, int64_t dim) {
    const int64_t nh = (ngram - 1) * per, len = n + ngram - 1, eos = 7;
    uint64_t mult[ST_PLE_HASH_MAX_NGRAM];
    uint32_t offset[64], size[64], rows_total = 0;
    for (int64_t j = 0; j < ngram; j++) mult[j] = 0x9E3779B97F4A7C15ull * (uint64_t)(2 * j + 1) + (uint64_t)j;
    for (int64_t h = 0; h < nh; h++) {
        size[h] = 1009u + 2u * (uint32_t)h;   /* not powers of two */
        offset[h] = rows_total;
        rows_total += size[h];
    }
    st_ple_hash hs = {.ngram = ngram, .per = per, .n_heads = nh, .eos = (int32_t)eos, .mult = mult, .offset = offset,
                      .size = size};
    int32_t *win = malloc((size_t)len * sizeof *win);
    for (int64_t j = 0; j < len; j++) win[j] = j < ngram - 2 ? -1 : (j % 5 == 3 ? (int32_t)eos : (int32_t)(irand(50000)));
    int32_t *rc = malloc((size_t)(n * nh) * sizeof *rc);
    st_op_ple_hash(&hs, win, n, rc);
    int32_t *dwin = dev_from(win, (size_t)len * sizeof *win), *drows = dev_from(NULL, (size_t)(n * nh) * sizeof *rc);
    GPU(st_cuda_ple_hash(cu, &hs, dwin, n, drows));
    int32_t *rg = malloc((size_t)(n * nh) * sizeof *rg);
    GPU(st_cuda_download(cu, rg, drows, (size_t)(n * nh) * sizeof *rg));
    int64_t bad = 0;
    for (int64_t i = 0; i < n * nh; i++) bad += rg[i] != rc[i];
    char name[128];
    snprintf(name, sizeof name, "ple_hash N=%lld per=%lld n=%lld", (long long)ngram, (long long)per, (long long)n);
    report(name, (double)bad, 0.0);
    /* the rows from a host table the device reads over the bus */
    float *tf = rand_vec((int64_t)rows_total * dim, 1.0f);
    size_t tb = 0;
    void *q = quantize_matrix(type, tf, rows_total, dim, &tb), *table = NULL, *tdev = NULL;
    GPU(st_cuda_host_alloc_mapped(tb, 1, &table, &tdev));   /* as device_model.c copies the PLE table */
    memcpy(table, q, tb);
    free(q);
    float *ec = malloc((size_t)(n * nh * dim) * 4);
    if (!st_op_get_rows(type, table, rows_total, dim, rc, n * nh, ec, dim)) die("ple rows on the CPU");
    float *de = dev_from(NULL, (size_t)(n * nh * dim) * 4);
    GPU(st_cuda_get_rows_dev(cu, type, tdev, rows_total, dim, drows, n * nh, de, dim));
    float *eg = to_host(de, (size_t)(n * nh * dim));
    snprintf(name, sizeof name, "ple rows %s from a mapped host table, n=%lld", st_type_get(type)->name, (long long)n);
    report(name, max_diff(eg, ec, n * nh * dim), 0.0);
    st_cuda_host_free(table);
    st_cuda_free(cu, dwin); st_cuda_free(cu, drows); st_cuda_free(cu, de);
    free(win); free(rc); free(rg); free(tf); free(ec); free(eg);
}

static int64_t irand(int64_t n) {   /* uniform in [0, n) */
    const int64_t v = (int64_t)((frand() + 1.0f) * 0.5f * (float)n);
    return v < n ? v : n - 1;
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Indexer queries and block keys whose dot products are exact in f32 (small integers, and
 * multiples of 2^-14 below 1), so that the GPU's block scores are the CPU's bits whatever the sum
 * order. distinct: head 0 reads only dim 0, where block b holds (perm(b) + 1) / 16384, and the
 * other heads give integers below 1024: every score is an integer plus a fraction no other block
 * has. Otherwise: small integers everywhere, with many equal scores and many zeros. */
static void qsa_exact_inputs(int distinct, int64_t n_tok, int64_t n_head, int64_t dim, int64_t ld_q, int64_t nb,
                             float *q, float *blocks) {
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t h = 0; h < n_head; h++)
            for (int64_t i = 0; i < dim; i++) {
                float v = (float)(irand(5) - 2);
                if (distinct) v = h == 0 ? (i == 0 ? 1.0f : 0.0f) : i == 0 ? 0.0f : v;
                q[t * ld_q + h * dim + i] = v;
            }
    int32_t *perm = malloc((size_t)nb * sizeof(int32_t));
    for (int64_t b = 0; b < nb; b++) perm[b] = (int32_t)b;
    for (int64_t b = nb - 1; b > 0; b--) {
        const int64_t j = irand(b + 1);
        const int32_t x = perm[b]; perm[b] = perm[j]; perm[j] = x;
    }
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < dim; i++)
            blocks[b * dim + i] = distinct && i == 0 ? (float)(perm[b] + 1) / 16384.0f : (float)(irand(distinct ? 7 : 3) - (distinct ? 3 : 1));
    free(perm);
}

/* qsa_select against the CPU's on exact scores, queries at positions p0 .. p0+n_tok-1. Always
 * asserted: the counts, ascending cells, and the same multiset of cell values (block scores, the
 * tail's 1e9): any top-W choice has it. With distinct scores, also every block's count of cells
 * (whole blocks exactly the CPU's, the split block the same block); the cells that differ inside
 * split blocks (or, with equal scores, anywhere) are reported, not failed. */
static void test_qsa_select(int distinct, int64_t n_tok, int64_t p0, int64_t n_head, int64_t dim, int64_t r,
                            int64_t B) {
    const int64_t W = B + r - 1, p_last = p0 + n_tok - 1, n_ctx = p_last + 3, nb = (p_last + 1) / r;
    const int64_t ld_q = n_head * dim + 5, ld_cells = W + 3;
    float *q = malloc((size_t)(n_tok * ld_q) * 4), *blocks = malloc((size_t)((nb + 1) * dim) * 4);
    qsa_exact_inputs(distinct, n_tok, n_head, dim, ld_q, nb, q, blocks);
    int32_t *pos = malloc((size_t)n_tok * 4);
    for (int64_t t = 0; t < n_tok; t++) pos[t] = (int32_t)(p0 + t);
    int32_t *cc = calloc((size_t)(n_tok * ld_cells), 4), *nc = calloc((size_t)n_tok, 4);
    st_qsa_args a = {q, ld_q, n_head, dim, blocks, pos, n_tok, r, W, n_ctx, cc, ld_cells, nc};
    void *scratch = malloc(st_qsa_scratch_size(1, n_ctx, r, W));
    st_op_qsa_select(NULL, &a, scratch);
    float *dq = dev_from(q, (size_t)(n_tok * ld_q) * 4), *dblk = dev_from(blocks, (size_t)((nb + 1) * dim) * 4);
    int32_t *dpos = dev_from(pos, (size_t)n_tok * 4), *dcells = dev_from(NULL, (size_t)(n_tok * ld_cells) * 4);
    int32_t *dn = dev_from(NULL, (size_t)n_tok * 4);
    st_qsa_args g = a;
    g.q = dq; g.blocks = dblk; g.pos = dpos; g.cells = dcells; g.n_cells = dn;
    GPU(st_cuda_qsa_select(cu, &g));
    int32_t *cg = malloc((size_t)(n_tok * ld_cells) * 4), *ng = malloc((size_t)n_tok * 4);
    GPU(st_cuda_download(cu, cg, dcells, (size_t)(n_tok * ld_cells) * 4));
    GPU(st_cuda_download(cu, ng, dn, (size_t)n_tok * 4));
    /* the CPU's scores, exact, for the cell values */
    float *sigma = malloc((size_t)(nb + 1) * 4), *vc = malloc((size_t)W * 4), *vg = malloc((size_t)W * 4);
    int32_t *cnt_c = malloc((size_t)(nb + 1) * 4), *cnt_g = malloc((size_t)(nb + 1) * 4);
    long bad = 0, differ = 0, split_rows = 0;
    for (int64_t t = 0; t < n_tok; t++) {
        const int64_t p = pos[t], n = nc[t], ts = (p + 1) / r * r;
        const int32_t *c1 = cc + t * ld_cells, *c2 = cg + t * ld_cells;
        if (ng[t] != n) { bad++; continue; }
        int ok = 1;
        for (int64_t j = 0; j < n; j++)
            if (c2[j] < 0 || c2[j] > p || (j > 0 && c2[j] <= c2[j - 1])) ok = 0;
        if (!ok) { bad++; continue; }
        if (p + 1 <= W) {   /* dense: 0 .. p on both */
            bad += memcmp(c1, c2, (size_t)n * 4) != 0;
            continue;
        }
        for (int64_t b = 0; b < ts / r; b++) {
            float s = 0.0f;
            for (int64_t h = 0; h < n_head; h++) {
                double dot = 0.0;
                for (int64_t i = 0; i < dim; i++) dot += (double)q[t * ld_q + h * dim + i] * blocks[b * dim + i];
                s += dot > 0.0 ? (float)dot : 0.0f;
            }
            sigma[b] = s;
            cnt_c[b] = cnt_g[b] = 0;
        }
        for (int64_t j = 0; j < n; j++) {
            vc[j] = c1[j] >= ts ? 1e9f : sigma[c1[j] / r];
            vg[j] = c2[j] >= ts ? 1e9f : sigma[c2[j] / r];
            if (c1[j] < ts) cnt_c[c1[j] / r]++;
            if (c2[j] < ts) cnt_g[c2[j] / r]++;
        }
        qsort(vc, (size_t)n, 4, cmp_float);
        qsort(vg, (size_t)n, 4, cmp_float);
        if (memcmp(vc, vg, (size_t)n * 4)) { bad++; continue; }
        int split = 0;
        for (int64_t b = 0; b < ts / r; b++) {
            if (distinct && cnt_c[b] != cnt_g[b]) ok = 0;
            split |= cnt_c[b] > 0 && cnt_c[b] < r;
        }
        split_rows += split;
        bad += !ok;
        for (int64_t i = 0, j = 0; i < n || j < n;) {   /* cells in one list and not the other */
            if (j >= n || (i < n && c1[i] < c2[j])) { differ++; i++; }
            else if (i >= n || c2[j] < c1[i]) { differ++; j++; }
            else { i++; j++; }
        }
    }
    char name[128];
    snprintf(name, sizeof name, "qsa_select %s n_tok=%lld p=%lld.. r=%lld W=%lld", distinct ? "distinct" : "ties",
             (long long)n_tok, (long long)p0, (long long)r, (long long)W);
    printf("  %s: %ld of %lld rows with a split block; %ld cells in one selection and not the other (allowed)\n",
           name, split_rows, (long long)n_tok, differ);
    report(name, (double)bad, 0.0);
    st_cuda_free(cu, dq); st_cuda_free(cu, dblk); st_cuda_free(cu, dpos); st_cuda_free(cu, dcells); st_cuda_free(cu, dn);
    free(q); free(blocks); free(pos); free(cc); free(nc); free(scratch); free(cg); free(ng); free(sigma);
    free(vc); free(vg); free(cnt_c); free(cnt_g);
}

/* qsa_select on random float inputs (normed-like queries and keys): the scores now round
 * differently on the two sides, so the GPU's selection is checked against scores computed here in
 * double: W cells, ascending, the tail included, and no block left out scoring above a block taken
 * by more than rounding (1e-5 of the largest score). */
static void test_qsa_select_float(int64_t n_tok, int64_t p0, int64_t n_head, int64_t dim, int64_t r, int64_t B) {
    const int64_t W = B + r - 1, p_last = p0 + n_tok - 1, n_ctx = p_last + 1, nb = (p_last + 1) / r;
    float *q = rand_vec(n_tok * n_head * dim, 0.2f), *blocks = rand_vec((nb + 1) * dim, 0.2f);
    int32_t *pos = malloc((size_t)n_tok * 4);
    for (int64_t t = 0; t < n_tok; t++) pos[t] = (int32_t)(p0 + t);
    float *dq = dev_from(q, (size_t)(n_tok * n_head * dim) * 4), *dblk = dev_from(blocks, (size_t)((nb + 1) * dim) * 4);
    int32_t *dpos = dev_from(pos, (size_t)n_tok * 4), *dcells = dev_from(NULL, (size_t)(n_tok * W) * 4);
    int32_t *dn = dev_from(NULL, (size_t)n_tok * 4);
    st_qsa_args g = {dq, n_head * dim, n_head, dim, dblk, dpos, n_tok, r, W, n_ctx, dcells, W, dn};
    GPU(st_cuda_qsa_select(cu, &g));
    int32_t *cg = malloc((size_t)(n_tok * W) * 4), *ng = malloc((size_t)n_tok * 4);
    GPU(st_cuda_download(cu, cg, dcells, (size_t)(n_tok * W) * 4));
    GPU(st_cuda_download(cu, ng, dn, (size_t)n_tok * 4));
    double *sigma = malloc((size_t)(nb + 1) * sizeof(double));
    int32_t *cnt = malloc((size_t)(nb + 1) * 4);
    long bad = 0;
    for (int64_t t = 0; t < n_tok; t++) {
        const int64_t p = pos[t], ts = (p + 1) / r * r, n = ng[t];
        const int32_t *c = cg + t * W;
        int ok = n == (p + 1 <= W ? p + 1 : W);
        for (int64_t j = 0; ok && j < n; j++) ok = c[j] >= 0 && c[j] <= p && (j == 0 || c[j] > c[j - 1]);
        if (ok && p + 1 > W) {
            for (int64_t j = 0; j < p + 1 - ts; j++) ok &= c[n - (p + 1 - ts) + j] == ts + j;   /* the tail, last */
            double top = 0.0, taken_min = INFINITY, left_max = -INFINITY;
            for (int64_t b = 0; b < ts / r; b++) {
                double s = 0.0;
                for (int64_t h = 0; h < n_head; h++) {
                    double dot = 0.0;
                    for (int64_t i = 0; i < dim; i++) dot += (double)q[t * n_head * dim + h * dim + i] * blocks[b * dim + i];
                    s += dot > 0.0 ? dot : 0.0;
                }
                sigma[b] = s;
                cnt[b] = 0;
                if (s > top) top = s;
            }
            for (int64_t j = 0; j < n; j++) if (c[j] < ts) cnt[c[j] / r]++;
            for (int64_t b = 0; b < ts / r; b++) {
                if (cnt[b] == r && sigma[b] < taken_min) taken_min = sigma[b];
                if (cnt[b] == 0 && sigma[b] > left_max) left_max = sigma[b];
            }
            ok &= left_max <= taken_min + 1e-5 * top;
        }
        bad += !ok;
    }
    char name[112];
    snprintf(name, sizeof name, "qsa_select float n_tok=%lld p=%lld.. r=%lld W=%lld", (long long)n_tok, (long long)p0,
             (long long)r, (long long)W);
    report(name, (double)bad, 0.0);
    st_cuda_free(cu, dq); st_cuda_free(cu, dblk); st_cuda_free(cu, dpos); st_cuda_free(cu, dcells); st_cuda_free(cu, dn);
    free(q); free(blocks); free(pos); free(cg); free(ng); free(sigma); free(cnt);
}

/* Attention over random ascending cell lists of random lengths (an empty one included: zeros),
 * against st_op_attention_cells; 1e-4 as the attention over the cache. */
static void test_attention_cells(int64_t n_tok, int64_t n_ctx, int64_t width, int64_t hd, int64_t n_head,
                                 int64_t n_head_kv, uint32_t kv_type) {
    const int64_t row = n_head_kv * hd, ldq_tok = n_head * hd + 7, ld_cells = width + 1, ldo = n_head * hd + 3;
    float *q = rand_vec(n_tok * ldq_tok, 1.0f), *kv_src = rand_vec(2 * n_ctx * row, 1.0f);
    const size_t cb = st_kv_row_bytes(kv_type, row) * (size_t)n_ctx;
    void *kc = malloc(cb), *vc = malloc(cb);
    st_op_kv_store(kv_type, kc, row, 0, kv_src, row, n_ctx);
    st_op_kv_store(kv_type, vc, row, 0, kv_src + n_ctx * row, row, n_ctx);
    int32_t *cells = calloc((size_t)(n_tok * ld_cells), 4), *n_cells = malloc((size_t)n_tok * 4);
    for (int64_t t = 0; t < n_tok; t++) {   /* each cell kept with probability want / n_ctx, capped at width */
        const int64_t want = t == 1 ? 0 : t == 0 ? width : 1 + irand(width);
        int64_t n = 0;
        for (int64_t c = 0; c < n_ctx && n < want; c++)
            if (irand(n_ctx) < want || n_ctx - c <= want - n) cells[t * ld_cells + n++] = (int32_t)c;
        n_cells[t] = (int32_t)n;
    }
    float *oc = calloc((size_t)(n_tok * ldo), 4);
    st_attn_cells_args ca = {{q, ldq_tok, hd, kc, vc, kv_type, NULL, n_tok, n_head, n_head_kv, hd, n_ctx,
                              1.0f / sqrtf((float)hd), oc, ldo}, cells, ld_cells, n_cells};
    st_op_attention_cells(NULL, &ca);
    float *dq = dev_from(q, (size_t)(n_tok * ldq_tok) * 4);
    void *dk = dev_from(kc, cb), *dv = dev_from(vc, cb);
    int32_t *dcells = dev_from(cells, (size_t)(n_tok * ld_cells) * 4), *dn = dev_from(n_cells, (size_t)n_tok * 4);
    float *dout = dev_from(NULL, (size_t)(n_tok * ldo) * 4);
    st_attn_cells_args g = ca;
    g.a.q = dq; g.a.k_cache = dk; g.a.v_cache = dv; g.a.out = dout; g.cells = dcells; g.n_cells = dn;
    GPU(st_cuda_attention_cells(cu, &g));
    float *og = to_host(dout, (size_t)(n_tok * ldo));
    char name[112];
    snprintf(name, sizeof name, "attention_cells %s n_tok=%lld W=%lld hd=%lld %lld/%lld",
             kv_type == ST_TYPE_F16 ? "f16" : "f32", (long long)n_tok, (long long)width, (long long)hd,
             (long long)n_head, (long long)n_head_kv);
    report(name, norm_err(og, oc, n_tok, n_head * hd, ldo), 1e-4);
    st_cuda_free(cu, dq); st_cuda_free(cu, dk); st_cuda_free(cu, dv); st_cuda_free(cu, dcells);
    st_cuda_free(cu, dn); st_cuda_free(cu, dout);
    free(q); free(kv_src); free(kc); free(vc); free(cells); free(n_cells); free(oc); free(og);
}

static void test_qwen4exp(void) {
    test_hc(1, 4, 4096);     /* a decode row of the real model's width */
    test_hc(7, 4, 333);
    test_hc(3, 3, 100);
    test_ple_gate(1, 4, 4096);
    test_ple_gate(5, 4, 333);
    test_ple_gate(2, 3, 61);
    test_conv(1, 4 * 4096, 10);   /* the PLE's conv: 4 taps dilated by 3, over hc*d channels */
    test_conv(5, 4 * 4096, 10);
    test_conv(9, 1003, 10);
    test_qsa_blocks(ST_TYPE_F16, 128, 128, 4, 0, 37);   /* the real indexer: 128 wide, r = 4 */
    test_qsa_blocks(ST_TYPE_F16, 128, 64, 4, 3, 4);     /* a decode step's one block, half rotated */
    test_qsa_blocks(ST_TYPE_F32, 38, 38, 3, 5, 19);
    test_ple_rows(ST_TYPE_Q5_0, 3, 8, 1, 160);          /* a decode step of the flash shape: N = 3, 16 heads of 160 */
    test_ple_rows(ST_TYPE_Q8_0, 4, 3, 37, 64);
    test_ple_rows(ST_TYPE_F16, 2, 5, 9, 40);
    test_qsa_select(1, 1, 33001, 4, 128, 4, 2048);   /* decode at 33k: the real shape, a split block */
    test_qsa_select(1, 1, 33002, 4, 128, 4, 2048);   /* n_tail = 3: whole blocks only, the CPU's cells */
    test_qsa_select(1, 200, 30, 3, 37, 4, 64);       /* a chunk across the dense rows, every n_tail */
    test_qsa_select(1, 97, 500, 2, 64, 3, 10);       /* r = 3, B = 10 (ERRATA F2: clean at n_tail 0) */
    test_qsa_select(0, 64, 100, 3, 40, 3, 30);       /* many equal scores, zeros among them */
    test_qsa_select(0, 1, 20000, 4, 128, 4, 2048);
    test_qsa_select_float(1, 40000, 4, 128, 4, 2048);
    test_qsa_select_float(77, 3000, 4, 128, 4, 2048);
    test_attention_cells(1, 5000, 2051, 256, 24, 2, ST_TYPE_F16);   /* the real decode shape */
    test_attention_cells(9, 700, 131, 256, 6, 2, ST_TYPE_F16);
    test_attention_cells(4, 200, 45, 128, 8, 2, ST_TYPE_F16);        /* f16 without the vector loads */
    test_attention_cells(2, 400, 77, 128, 4, 1, ST_TYPE_F32);        /* f32 with them */
    test_attention_cells(5, 300, 67, 96, 4, 4, ST_TYPE_F32);
    test_attention_cells(3, 90, 33, 40, 3, 1, ST_TYPE_F32);          /* head_dim not a multiple of 32 */
}

/* add_rms_norm_q8 (the split form for up to 8 rows, the register form up to 16 x 256 wide, the loop form past it) bit for bit the
 * sequence its header names: pointwise ADD, rms_norm, and the product's own quantization (read
 * through a Q8_0 matvec on both sides). */
static void test_add_norm_exact(int64_t rows, int64_t dim) {
    const int64_t M = 40;
    size_t wb;
    float *wf = rand_vec(M * dim, 1.0f), *x = rand_vec(rows * dim, 3.0f), *r = rand_vec(rows * dim, 2.0f);
    float *nw = rand_vec(dim, 1.5f);
    void *Wq = quantize_matrix(ST_TYPE_Q8_0, wf, M, dim, &wb);
    void *dW = dev_from(Wq, wb);
    float *dx1 = dev_from(x, (size_t)(rows * dim) * 4), *dx2 = dev_from(x, (size_t)(rows * dim) * 4);
    float *dr = dev_from(r, (size_t)(rows * dim) * 4), *dnw = dev_from(nw, (size_t)dim * 4);
    float *dy1 = dev_from(NULL, (size_t)(rows * dim) * 4), *dy2 = dev_from(NULL, (size_t)(rows * dim) * 4);
    float *dY1 = dev_from(NULL, (size_t)(rows * M) * 4), *dY2 = dev_from(NULL, (size_t)(rows * M) * 4);
    void *qbuf = dev_from(NULL, st_cuda_q8_bytes(dim, rows));
    const st_cuda_q8 q = st_cuda_q8_at(qbuf, dim, rows);
    GPU(st_cuda_pointwise(cu, ST_CUDA_ADD, dx1, dim, dr, dim, dx1, dim, rows, dim));
    GPU(st_cuda_rms_norm(cu, dx1, dim, dnw, dy1, dim, rows, dim, 1e-6f));
    GPU(st_cuda_matmul(cu, ST_TYPE_Q8_0, dW, M, dim, dy1, dim, rows, dY1, M));
    GPU(st_cuda_add_rms_norm_q8(cu, dx2, dr, dnw, dy2, q, rows, dim, 1e-6f));
    const st_cuda_experts e = { .type = ST_TYPE_Q8_0, .W = dW, .M = M, .x_group = 1, .n_slots = rows };
    GPU(st_cuda_matvec_q8_id(cu, &e, q, dY2, M));
    float *a = to_host(dx1, (size_t)(rows * dim)), *b = to_host(dx2, (size_t)(rows * dim));
    float *c = to_host(dy1, (size_t)(rows * dim)), *d = to_host(dy2, (size_t)(rows * dim));
    float *A = to_host(dY1, (size_t)(rows * M)), *B = to_host(dY2, (size_t)(rows * M));
    char name[64];
    snprintf(name, sizeof name, "add_rms_norm_q8 %lldx%lld exact", (long long)rows, (long long)dim);
    /* past 8 rows st_cuda_matmul takes the f16 GEMM, so only x and y are compared there */
    report(name, max_diff(a, b, rows * dim) + max_diff(c, d, rows * dim) + (rows <= 8 ? max_diff(A, B, rows * M) : 0.0),
           0.0);
    st_cuda_free(cu, dW); st_cuda_free(cu, dx1); st_cuda_free(cu, dx2); st_cuda_free(cu, dr); st_cuda_free(cu, dnw);
    st_cuda_free(cu, dy1); st_cuda_free(cu, dy2); st_cuda_free(cu, dY1); st_cuda_free(cu, dY2); st_cuda_free(cu, qbuf);
    free(wf); free(x); free(r); free(nw); free(Wq); free(a); free(b); free(c); free(d); free(A); free(B);
}

/* moe_route bit for bit its rule applied to the GPU's own softmax: the k largest by repeated argmax
 * (lowest index on ties, taken ones marked -1), weights over their sum in double. */
static void test_route_exact(int64_t rows, int64_t E, int64_t k) {
    const int64_t ld = E + 5;
    float *x = rand_vec(rows * ld, 4.0f);
    x[ld + 7] = x[ld + 9];   /* a tie */
    float *dx = dev_from(x, (size_t)(rows * ld) * 4), *dp = dev_from(NULL, (size_t)(rows * E) * 4);
    int32_t *dids = dev_from(NULL, (size_t)(rows * k) * 4);
    float *dw = dev_from(NULL, (size_t)(rows * k) * 4);
    GPU(st_cuda_softmax(cu, dx, ld, dp, E, rows, E));
    GPU(st_cuda_moe_route(cu, dx, ld, rows, E, k, dids, dw));
    float *p = to_host(dp, (size_t)(rows * E)), *wg = to_host(dw, (size_t)(rows * k));
    int32_t *ig = malloc((size_t)(rows * k) * 4);
    GPU(st_cuda_download(cu, ig, dids, (size_t)(rows * k) * 4));
    double err = 0.0;
    for (int64_t t = 0; t < rows; t++) {
        float *pr = p + t * E, w[64];
        double dsum = 0.0;
        for (int64_t j = 0; j < k; j++) {
            float bv = -1.0f;
            int64_t bi = -1;
            for (int64_t e = 0; e < E; e++) if (pr[e] > bv) { bv = pr[e]; bi = e; }
            if (bi < 0) bi = 0;
            err += ig[t * k + j] != (int32_t)bi;
            w[j] = bv;
            dsum += (double)bv;
            pr[bi] = -1.0f;
        }
        float ws = (float)dsum;
        if (ws < 6.103515625e-5f) ws = 6.103515625e-5f;
        for (int64_t j = 0; j < k; j++) err += fabs((double)(w[j] / ws) - (double)wg[t * k + j]);
    }
    char name[64];
    snprintf(name, sizeof name, "moe_route %lld of %lld exact", (long long)k, (long long)E);
    report(name, err, 0.0);
    st_cuda_free(cu, dx); st_cuda_free(cu, dp); st_cuda_free(cu, dids); st_cuda_free(cu, dw);
    free(x); free(p); free(wg); free(ig);
}

/* router_route bit for bit the f32 product and moe_route it fuses (logits, picks and weights). */
static void test_router_route_exact(int64_t n, int64_t E, int64_t K, int64_t k) {
    float *W = rand_vec(E * K, 0.05f), *x = rand_vec(n * K, 1.0f);
    float *dW = dev_from(W, (size_t)(E * K) * 4), *dx = dev_from(x, (size_t)(n * K) * 4);
    float *dl1 = dev_from(NULL, (size_t)(n * E) * 4), *dl2 = dev_from(NULL, (size_t)(n * E) * 4);
    int32_t *di1 = dev_from(NULL, (size_t)(n * k) * 4), *di2 = dev_from(NULL, (size_t)(n * k) * 4);
    float *dw1 = dev_from(NULL, (size_t)(n * k) * 4), *dw2 = dev_from(NULL, (size_t)(n * k) * 4);
    GPU(st_cuda_matmul(cu, ST_TYPE_F32, dW, E, K, dx, K, n, dl1, E));
    GPU(st_cuda_moe_route(cu, dl1, E, n, E, k, di1, dw1));
    for (int rep = 0; rep < 3; rep++)   /* the last-block count must wrap back each time */
        GPU(st_cuda_router_route(cu, dW, E, K, dx, n, dl2, k, di2, dw2));
    float *l1 = to_host(dl1, (size_t)(n * E)), *l2 = to_host(dl2, (size_t)(n * E));
    float *w1 = to_host(dw1, (size_t)(n * k)), *w2 = to_host(dw2, (size_t)(n * k));
    int32_t *i1 = malloc((size_t)(n * k) * 4), *i2 = malloc((size_t)(n * k) * 4);
    GPU(st_cuda_download(cu, i1, di1, (size_t)(n * k) * 4));
    GPU(st_cuda_download(cu, i2, di2, (size_t)(n * k) * 4));
    double err = max_diff(l1, l2, n * E) + max_diff(w1, w2, n * k);
    for (int64_t i = 0; i < n * k; i++) err += i1[i] != i2[i];
    char name[80];
    snprintf(name, sizeof name, "router_route %lld rows, %lld of %lld exact", (long long)n, (long long)k, (long long)E);
    report(name, err, 0.0);
    st_cuda_free(cu, dW); st_cuda_free(cu, dx); st_cuda_free(cu, dl1); st_cuda_free(cu, dl2); st_cuda_free(cu, di1);
    st_cuda_free(cu, di2); st_cuda_free(cu, dw1); st_cuda_free(cu, dw2);
    free(W); free(x); free(l1); free(l2); free(w1); free(w2); free(i1); free(i2);
}

/* ---- softmax, routing, argmax ----------------------------------------------------------------- */

static void test_routing(void) {
    const int64_t rows = 5, E = 256, k = 8, ld = E + 3;
    float *x = rand_vec(rows * ld, 4.0f);
    x[2 * ld + 10] = x[2 * ld + 11];   /* a tie: the lower index must come first */
    float *yc = calloc((size_t)(rows * ld), 4);
    st_op_softmax(x, ld, yc, ld, rows, E);
    float *dx = dev_from(x, (size_t)(rows * ld) * 4), *dy = dev_from(NULL, (size_t)(rows * ld) * 4);
    GPU(st_cuda_softmax(cu, dx, ld, dy, ld, rows, E));
    float *yg = to_host(dy, (size_t)(rows * ld));
    report("softmax 5x256", norm_err(yg, yc, rows, E, ld), 1e-5);
    int32_t idc[5 * 8], idg[5 * 8];
    float wc[5 * 8];
    st_op_moe_route(x, ld, rows, E, k, idc, wc);
    int32_t *dids = dev_from(NULL, sizeof idg);
    float *dw = dev_from(NULL, sizeof wc);
    GPU(st_cuda_moe_route(cu, dx, ld, rows, E, k, dids, dw));
    GPU(st_cuda_download(cu, idg, dids, sizeof idg));
    float *wg = to_host(dw, (size_t)(rows * k));
    int mism = 0;
    for (int i = 0; i < rows * k; i++) mism += idc[i] != idg[i];
    report("moe_route ids (mismatches)", (double)mism, 0.0);
    report("moe_route weights", norm_err(wg, wc, 1, rows * k, 0), 1e-5);
    st_cuda_free(cu, dx); st_cuda_free(cu, dy); st_cuda_free(cu, dids); st_cuda_free(cu, dw);
    free(x); free(yc); free(yg); free(wg);
}

static void test_argmax(void) {
    const int64_t n = 151936;
    float *x = rand_vec(n, 10.0f);
    x[99999] = 20.0f; x[123456] = 20.0f; x[5] = NAN;
    int32_t *d_out = dev_from(NULL, 4), g;
    float *dx = dev_from(x, (size_t)n * 4);
    GPU(st_cuda_argmax(cu, dx, n, d_out));
    GPU(st_cuda_download(cu, &g, d_out, 4));
    report("argmax 151936 (tie, NaN)", g == st_op_argmax(x, n) ? 0.0 : 1.0, 0.0);
    st_cuda_free(cu, dx); st_cuda_free(cu, d_out);
    free(x);
}

/* ---- CUDA graphs ------------------------------------------------------------------------------ */

/* norm -> Q4_K matvec -> silu, run directly and as a captured graph replayed twice: equal bits */
static void test_graph(void) {
    const int64_t M = 257, K = 512;
    float *w = rand_vec(M * K, 1.0f), *x = rand_vec(K, 2.0f), *nw = rand_vec(K, 1.0f);
    size_t wb;
    void *Wq = quantize_matrix(ST_TYPE_Q4_K, w, M, K, &wb);
    void *dW = dev_from(Wq, wb);
    float *dx = dev_from(x, (size_t)K * 4), *dnw = dev_from(nw, (size_t)K * 4), *dxn = dev_from(NULL, (size_t)K * 4);
    float *dy = dev_from(NULL, (size_t)M * 4), *dz = dev_from(NULL, (size_t)M * 4);
    GPU(st_cuda_rms_norm(cu, dx, K, dnw, dxn, K, 1, K, 1e-6f));
    GPU(st_cuda_matmul(cu, ST_TYPE_Q4_K, dW, M, K, dxn, K, 1, dy, M));
    GPU(st_cuda_pointwise(cu, ST_CUDA_SILU, dy, M, NULL, 0, dz, M, 1, M));
    float *direct = to_host(dz, (size_t)M);
    GPU(st_cuda_memset0(cu, dz, (size_t)M * 4));
    GPU(st_cuda_sync(cu));
    GPU(st_cuda_reserve_scratch(cu, (size_t)1 << 20));
    st_cuda_graph *g = NULL;
    GPU(st_cuda_capture_begin(cu));
    st_status s1 = st_cuda_rms_norm(cu, dx, K, dnw, dxn, K, 1, K, 1e-6f);
    st_status s2 = st_cuda_matmul(cu, ST_TYPE_Q4_K, dW, M, K, dxn, K, 1, dy, M);
    st_status s3 = st_cuda_pointwise(cu, ST_CUDA_SILU, dy, M, NULL, 0, dz, M, 1, M);
    GPU(st_cuda_capture_end(cu, &g));
    if (s1 != ST_OK || s2 != ST_OK || s3 != ST_OK) die("ops inside the capture");
    GPU(st_cuda_graph_launch(cu, g));
    GPU(st_cuda_graph_launch(cu, g));
    float *replay = to_host(dz, (size_t)M);
    report("graph capture + replay (bits)", memcmp(direct, replay, (size_t)M * 4) ? 1.0 : 0.0, 0.0);
    st_cuda_graph_free(g);
    st_cuda_free(cu, dW); st_cuda_free(cu, dx); st_cuda_free(cu, dnw); st_cuda_free(cu, dxn);
    st_cuda_free(cu, dy); st_cuda_free(cu, dz);
    free(w); free(x); free(nw); free(Wq); free(direct); free(replay);
}

/* ---- prompt paths: MoE FFN and attention on tensor cores ------------------------------------- */

/* k distinct experts per token (a partial Fisher-Yates over E), weights positive, summing to 1 */
static void route_random(int64_t n_tok, int64_t E, int64_t k, int32_t *ids, float *wts) {
    int32_t perm[1024];
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t e = 0; e < E; e++) perm[e] = (int32_t)e;
        float sum = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            const int64_t r = j + (int64_t)((frand() * 0.5f + 0.5f) * (float)(E - j)) % (E - j);
            const int32_t tmp = perm[j]; perm[j] = perm[r]; perm[r] = tmp;
            ids[t * k + j] = perm[j];
            wts[t * k + j] = 0.1f + (frand() * 0.5f + 0.5f);
            sum += wts[t * k + j];
        }
        for (int64_t j = 0; j < k; j++) wts[t * k + j] /= sum;
    }
}

/* st_cuda_moe_ffn_prefill against the CPU's per-expert form (st_matmul, swiglu, then scale/axpy
 * over j in order, as src/model/ffn.c). invalid: slot 1 of token 0 gets id -1 (contributes
 * nothing). batch: experts dequantized per batch (0 = by the budget: one batch here). */
static void test_moe_prefill(uint32_t tg, uint32_t tu, uint32_t td, int64_t E, int64_t k, int64_t d,
                             int64_t ff, int64_t n_tok, int accumulate, int invalid, int64_t batch, int cached) {
    float *wg = rand_vec(E * ff * d, 1.0f), *wu = rand_vec(E * ff * d, 1.0f), *wd = rand_vec(E * d * ff, 1.0f);
    size_t bg, bu, bd;
    void *Gq = quantize_matrix(tg, wg, E * ff, d, &bg), *Uq = quantize_matrix(tu, wu, E * ff, d, &bu);
    void *Dq = quantize_matrix(td, wd, E * d, ff, &bd);
    const size_t eg = bg / (size_t)E, eu = bu / (size_t)E, ed = bd / (size_t)E;
    const int64_t ldx = d + 3, ldo = d + 5;
    float *X = rand_vec(n_tok * ldx, 1.0f), *out0 = rand_vec(n_tok * ldo, 1.0f);
    int32_t *ids = malloc((size_t)(n_tok * k) * 4);
    float *wts = malloc((size_t)(n_tok * k) * 4);
    route_random(n_tok, E, k, ids, wts);
    if (invalid) ids[1] = -1;
    float *oc = malloc((size_t)(n_tok * ldo) * 4), *g = malloc((size_t)ff * 4), *u = malloc((size_t)ff * 4);
    float *y = malloc((size_t)d * 4), *o = malloc((size_t)d * 4);
    memcpy(oc, out0, (size_t)(n_tok * ldo) * 4);
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t j = 0; j < k; j++) {
            const int32_t e = ids[t * k + j];
            if (e < 0) { if (j == 0) memset(o, 0, (size_t)d * 4); continue; }
            cpu_matmul(tg, (const uint8_t *)Gq + (size_t)e * eg, ff, d, X + t * ldx, ldx, 1, g, ff);
            cpu_matmul(tu, (const uint8_t *)Uq + (size_t)e * eu, ff, d, X + t * ldx, ldx, 1, u, ff);
            st_op_swiglu(NULL, g, ff, u, ff, g, ff, 1, ff);
            cpu_matmul(td, (const uint8_t *)Dq + (size_t)e * ed, d, ff, g, ff, 1, y, d);
            if (j == 0) st_op_scale(o, d, y, wts[t * k + j]);
            else st_op_axpy(o, d, y, wts[t * k + j]);
        }
        float *orow = oc + t * ldo;
        for (int64_t c = 0; c < d; c++) orow[c] = accumulate ? orow[c] + o[c] : o[c];
    }
    void *dG = dev_from(Gq, bg), *dU = dev_from(Uq, bu), *dD = dev_from(Dq, bd);
    int32_t *dids = dev_from(ids, (size_t)(n_tok * k) * 4);
    float *dw = dev_from(wts, (size_t)(n_tok * k) * 4), *dX = dev_from(X, (size_t)(n_tok * ldx) * 4);
    float *dout = dev_from(out0, (size_t)(n_tok * ldo) * 4);
    const st_cuda_moe_w mw = { tg, tu, td, dG, dU, dD, E, d, ff };
    void *gu16 = NULL, *dn16 = NULL;
    if (cached) {   /* the f16 copies made at load, read instead of dequantizing per call */
        gu16 = dev_from(NULL, (size_t)(E * 2 * ff * d) * 2);
        dn16 = dev_from(NULL, (size_t)(E * d * ff) * 2);
        GPU(st_cuda_moe_dequant_f16(cu, &mw, gu16, dn16));
        GPU(st_cuda_moe_ffn_prefill_f16(cu, &mw, gu16, dn16,
                &(st_cuda_moe_rows){.ids = dids, .wts = dw, .k = k, .X = dX, .ldx = ldx, .n_tok = n_tok, .out = dout,
                    .ld_out = ldo, .accumulate = accumulate}));
        st_cuda_free(cu, gu16); st_cuda_free(cu, dn16);
    } else {
        st_cuda_prefill_test_limits(batch, 0);
        GPU(st_cuda_moe_ffn_prefill(cu, &mw,
                &(st_cuda_moe_rows){.ids = dids, .wts = dw, .k = k, .X = dX, .ldx = ldx, .n_tok = n_tok, .out = dout,
                    .ld_out = ldo, .accumulate = accumulate}));
        st_cuda_prefill_test_limits(0, 0);
    }
    float *og = to_host(dout, (size_t)(n_tok * ldo));
    char name[128];
    snprintf(name, sizeof name, "moe_ffn_prefill%s %s/%s/%s E=%lld k=%lld %lldx%lld n=%lld%s%s%s", cached ? "_f16" : "",
             st_type_get(tg)->name, st_type_get(tu)->name, st_type_get(td)->name, (long long)E, (long long)k,
             (long long)d, (long long)ff, (long long)n_tok, accumulate ? " acc" : "", invalid ? " bad-id" : "",
             batch ? " batched" : "");
    const double tol = type_tol(tg) > type_tol(td) ? type_tol(tg) : type_tol(td);
    report(name, norm_err(og, oc, n_tok, d, ldo), tol < 1e-2 ? 1e-2 : tol);
    st_cuda_free(cu, dG); st_cuda_free(cu, dU); st_cuda_free(cu, dD); st_cuda_free(cu, dids);
    st_cuda_free(cu, dw); st_cuda_free(cu, dX); st_cuda_free(cu, dout);
    free(wg); free(wu); free(wd); free(Gq); free(Uq); free(Dq); free(X); free(out0); free(ids); free(wts);
    free(oc); free(g); free(u); free(y); free(o); free(og);
}

/* st_cuda_attention_prefill against st_op_attention: a chunk of n_tok rows at positions
 * n_kv - n_tok .. n_kv - 1 (so n_kv - n_tok prefix cells precede it), q interleaved with its gate,
 * padded output rows. block: tokens per row block (0 = by the budget: one block here). Tolerance
 * 5e-3: q and P are rounded to f16 for the tensor cores. */
static void test_attention_prefill(int64_t n_tok, int64_t n_kv, int64_t hd, int64_t n_head, int64_t n_head_kv,
                                   uint32_t kv_type, int64_t block) {
    const int64_t row = n_head_kv * hd, ldq_tok = n_head * hd * 2, ldq_head = 2 * hd;
    float *q = rand_vec(n_tok * ldq_tok, 1.0f), *kv_src = rand_vec(2 * n_kv * row, 1.0f);
    const size_t cb = st_kv_row_bytes(kv_type, row) * (size_t)n_kv;
    void *kc = malloc(cb), *vc = malloc(cb);
    st_op_kv_store(kv_type, kc, row, 0, kv_src, row, n_kv);
    st_op_kv_store(kv_type, vc, row, 0, kv_src + n_kv * row, row, n_kv);
    int32_t *pos = malloc((size_t)n_tok * 4);
    for (int64_t t = 0; t < n_tok; t++) pos[t] = (int32_t)(n_kv - n_tok + t);
    const int64_t ldo = n_head * hd + 3;
    float *oc = calloc((size_t)(n_tok * ldo), 4);
    st_attn_args a = { q, ldq_tok, ldq_head, kc, vc, kv_type, pos, n_tok, n_head, n_head_kv, hd, n_kv,
                       1.0f / sqrtf((float)hd), oc, ldo };
    st_op_attention(NULL, &a);
    void *dk = dev_from(kc, cb), *dv = dev_from(vc, cb);
    float *dq = dev_from(q, (size_t)(n_tok * ldq_tok) * 4);
    int32_t *dpos = dev_from(pos, (size_t)n_tok * 4);
    float *dout = dev_from(NULL, (size_t)(n_tok * ldo) * 4);
    st_attn_args g = a;
    g.q = dq; g.k_cache = dk; g.v_cache = dv; g.pos = dpos; g.out = dout;
    st_cuda_prefill_test_limits(0, block);
    GPU(st_cuda_attention_prefill(cu, &g));
    st_cuda_prefill_test_limits(0, 0);
    float *og = to_host(dout, (size_t)(n_tok * ldo));
    char name[128];
    snprintf(name, sizeof name, "attention_prefill %s n_tok=%lld n_kv=%lld hd=%lld %lld/%lld%s",
             kv_type == ST_TYPE_F16 ? "f16" : "f32", (long long)n_tok, (long long)n_kv, (long long)hd,
             (long long)n_head, (long long)n_head_kv, block ? " blocked" : "");
    report(name, norm_err(og, oc, n_tok, n_head * hd, ldo), 5e-3);
    st_cuda_free(cu, dk); st_cuda_free(cu, dv); st_cuda_free(cu, dq); st_cuda_free(cu, dpos); st_cuda_free(cu, dout);
    free(q); free(kv_src); free(kc); free(vc); free(pos); free(oc); free(og);
}

static void test_prefill_paths(void) {
    const int64_t E = 16, k = 4;
    test_moe_prefill(ST_TYPE_Q4_K, ST_TYPE_Q4_K, ST_TYPE_Q4_K, E, k, 512, 256, 1, 0, 0, 0, 0);
    test_moe_prefill(ST_TYPE_Q4_K, ST_TYPE_Q4_K, ST_TYPE_Q6_K, E, k, 256, 256, 37, 1, 1, 0, 0);
    test_moe_prefill(ST_TYPE_Q6_K, ST_TYPE_Q6_K, ST_TYPE_Q6_K, E, k, 512, 256, 300, 0, 0, 0, 0);
    test_moe_prefill(ST_TYPE_Q4_K, ST_TYPE_Q4_K, ST_TYPE_Q4_K, E, k, 256, 256, 300, 1, 0, 5, 0);
    test_moe_prefill(ST_TYPE_Q4_K, ST_TYPE_Q5_K, ST_TYPE_Q8_0, E, k, 512, 160, 300, 0, 0, 0, 0);
    test_moe_prefill(ST_TYPE_Q8_0, ST_TYPE_Q8_0, ST_TYPE_Q8_0, E, k, 256, 128, 37, 0, 0, 3, 0);
    test_moe_prefill(ST_TYPE_F16, ST_TYPE_BF16, ST_TYPE_F32, E, k, 256, 192, 37, 1, 0, 0, 0);
    test_moe_prefill(ST_TYPE_Q4_K, ST_TYPE_Q5_K, ST_TYPE_Q6_K, E, k, 512, 256, 300, 1, 1, 0, 1);
    test_moe_prefill(ST_TYPE_Q8_0, ST_TYPE_Q8_0, ST_TYPE_Q8_0, 70, 8, 256, 128, 37, 0, 0, 0, 1);
    test_attention_prefill(16, 16, 128, 16, 2, ST_TYPE_F16, 0);
    test_attention_prefill(16, 500, 256, 16, 2, ST_TYPE_F16, 0);
    test_attention_prefill(77, 1000, 128, 8, 8, ST_TYPE_F32, 0);
    test_attention_prefill(77, 77, 256, 8, 8, ST_TYPE_F16, 0);
    test_attention_prefill(300, 1000, 256, 16, 2, ST_TYPE_F16, 0);
    test_attention_prefill(300, 1000, 128, 16, 2, ST_TYPE_F32, 0);
    test_attention_prefill(300, 300, 128, 8, 8, ST_TYPE_F32, 0);
    test_attention_prefill(300, 700, 256, 16, 2, ST_TYPE_F16, 37);   /* 9 row blocks */
    /* the demo model's and the small preset's shapes: 8 heads over 2 (r = 4) of 64 and 128 */
    test_attention_prefill(16, 16, 64, 8, 2, ST_TYPE_F16, 0);
    test_attention_prefill(100, 100, 64, 8, 2, ST_TYPE_F16, 0);
    test_attention_prefill(100, 100, 128, 8, 2, ST_TYPE_F16, 0);
    test_attention_prefill(100, 300, 64, 8, 2, ST_TYPE_F32, 0);
    test_moe_prefill(ST_TYPE_Q8_0, ST_TYPE_Q8_0, ST_TYPE_Q8_0, 8, 2, 512, 192, 100, 0, 0, 0, 0);
    test_moe_prefill(ST_TYPE_Q8_0, ST_TYPE_Q8_0, ST_TYPE_Q8_0, 8, 2, 512, 192, 100, 0, 0, 0, 1);
}

/* st_cuda_gdn_chunked against the CPU's per-token recurrence (st_op_gdn_step), output and state,
 * from a random state; lengths around the chunk of 64. Tolerance 1e-4 as gdn_step: the chunked
 * form reorders the sums. */
static void test_gdn_chunked(int64_t n_tok, int head_map, int64_t n_k, int64_t n_v, int64_t d) {
    const int64_t ldqk = n_k * d + 5, ldv = n_v * d + 3;
    float *q = rand_vec(n_tok * ldqk, 1.0f), *k = rand_vec(n_tok * ldqk, 1.0f), *v = rand_vec(n_tok * ldv, 1.0f);
    for (int64_t t = 0; t < n_tok; t++) {   /* unit q and k heads, as the model's l2_norm gives */
        st_op_l2_norm(NULL, q + t * ldqk, d, q + t * ldqk, d, n_k, d, 1e-6f);
        st_op_l2_norm(NULL, k + t * ldqk, d, k + t * ldqk, d, n_k, d, 1e-6f);
    }
    float *ga = rand_vec(n_tok * n_v, 2.0f), *gb = rand_vec(n_tok * n_v, 2.0f);
    float *dt = rand_vec(n_v, 1.0f), *sa = rand_vec(n_v, 1.0f);
    for (int64_t h = 0; h < n_v; h++) sa[h] = -fabsf(sa[h]) - 0.1f;
    float *g = malloc((size_t)(n_tok * n_v) * 4), *beta = malloc((size_t)(n_tok * n_v) * 4);
    st_op_gdn_gates(ga, n_v, gb, n_v, dt, sa, n_tok, n_v, g, beta);
    const int64_t ns = n_v * d * d;
    float *S = rand_vec(ns, 0.1f), *Sc = malloc((size_t)ns * 4);
    memcpy(Sc, S, (size_t)ns * 4);
    float *oc = calloc((size_t)(n_tok * ldv), 4);
    st_gdn_args a = { n_tok, n_k, n_v, d, head_map, q, k, ldqk, ldqk, v, ldv, g, beta, Sc, oc, ldv,
                      1.0f / sqrtf((float)d), NULL };
    st_op_gdn_step(NULL, &a);
    float *dq = dev_from(q, (size_t)(n_tok * ldqk) * 4), *dk = dev_from(k, (size_t)(n_tok * ldqk) * 4);
    float *dv = dev_from(v, (size_t)(n_tok * ldv) * 4);
    float *dg = dev_from(g, (size_t)(n_tok * n_v) * 4), *dbeta = dev_from(beta, (size_t)(n_tok * n_v) * 4);
    float *dS = dev_from(S, (size_t)ns * 4), *dout = dev_from(NULL, (size_t)(n_tok * ldv) * 4);
    st_gdn_args b = a;
    b.q = dq; b.k = dk; b.v = dv; b.g = dg; b.beta = dbeta; b.state = dS; b.out = dout;
    GPU(st_cuda_gdn_chunked(cu, &b));
    float *og = to_host(dout, (size_t)(n_tok * ldv)), *Sg = to_host(dS, (size_t)ns);
    char name[96];
    snprintf(name, sizeof name, "gdn_chunked n_tok=%lld d=%lld %lld/%lld %s out", (long long)n_tok, (long long)d,
             (long long)n_k, (long long)n_v, head_map ? "grouped" : "tiled");
    report(name, norm_err(og, oc, n_tok, n_v * d, ldv), 1e-4);
    snprintf(name, sizeof name, "gdn_chunked n_tok=%lld d=%lld %lld/%lld %s state", (long long)n_tok, (long long)d,
             (long long)n_k, (long long)n_v, head_map ? "grouped" : "tiled");
    report(name, norm_err(Sg, Sc, 1, ns, ns), 1e-4);
    st_cuda_free(cu, dq); st_cuda_free(cu, dk); st_cuda_free(cu, dv); st_cuda_free(cu, dg);
    st_cuda_free(cu, dbeta); st_cuda_free(cu, dS); st_cuda_free(cu, dout);
    free(q); free(k); free(v); free(ga); free(gb); free(dt); free(sa); free(g); free(beta);
    free(S); free(Sc); free(oc); free(og); free(Sg);
}

static void test_gdn_chunked_all(void) {
    test_gdn_chunked(1, ST_GDN_TILED, 2, 4, 128);
    test_gdn_chunked(63, ST_GDN_TILED, 2, 4, 128);
    test_gdn_chunked(64, ST_GDN_TILED, 2, 4, 128);
    test_gdn_chunked(65, ST_GDN_TILED, 2, 4, 128);
    test_gdn_chunked(300, ST_GDN_TILED, 2, 4, 128);
    test_gdn_chunked(130, ST_GDN_GROUPED, 2, 6, 64);
    test_gdn_chunked(200, ST_GDN_TILED, 1, 3, 32);
    test_gdn_chunked(77, ST_GDN_GROUPED, 3, 3, 96);
    test_gdn_chunked(600, ST_GDN_TILED, 16, 32, 128);   /* the 35B-A3B's heads */
}

/* The decode forms on prepared 8-bit rows: add_rms_norm_q8 prepares the normed x, two matrices in
 * one matvec_q8_multi launch, the experts' gate/up by matvec_q8_id and fused with SwiGLU into 8
 * bits (matvec_q8_swiglu_q8, read back through its scales), each against the CPU on the normed x. */
static void test_matvec_q8(uint32_t type, int64_t M, int64_t K) {
    const int64_t E = 3, ns = 3;
    float *x = rand_vec(K, 2.0f), *ones = malloc((size_t)K * 4);
    for (int64_t i = 0; i < K; i++) ones[i] = 1.0f;
    size_t wb;
    float *w = rand_vec(E * M * K, 1.0f);
    void *Gq = quantize_matrix(type, w, E * M, K, &wb);
    for (int64_t i = 0; i < E * M * K; i++) w[i] = frand();
    void *Uq = quantize_matrix(type, w, E * M, K, &wb);
    const size_t eb = wb / (size_t)E;
    float *dx = dev_from(x, (size_t)K * 4), *dones = dev_from(ones, (size_t)K * 4), *dxn = dev_from(NULL, (size_t)K * 4);
    void *qbuf = dev_from(NULL, st_cuda_q8_bytes(K, 1));
    const st_cuda_q8 q = st_cuda_q8_at(qbuf, K, 1);
    GPU(st_cuda_add_rms_norm_q8(cu, dx, NULL, dones, dxn, q, 1, K, 1e-6f));
    float *xn = to_host(dxn, (size_t)K);
    void *dG = dev_from(Gq, wb), *dU = dev_from(Uq, wb);
    float *dY = dev_from(NULL, (size_t)(ns * M) * 4);
    float *yc = malloc((size_t)(ns * M) * 4), *uc = malloc((size_t)M * 4);
    char name[96];
    /* multi: expert 0 of gate and expert 1 of up as two plain matrices */
    const st_cuda_mv items[2] = { { dG, M, dY, M }, { (uint8_t *)dU + eb, M, dY + M, M } };
    GPU(st_cuda_matvec_q8_multi(cu, type, items, 2, q));
    cpu_matmul(type, Gq, M, K, xn, K, 1, yc, M);
    cpu_matmul(type, (uint8_t *)Uq + eb, M, K, xn, K, 1, yc + M, M);
    float *yg = to_host(dY, (size_t)(2 * M));
    snprintf(name, sizeof name, "matvec_q8_multi %s %lldx%lld", st_type_get(type)->name, (long long)M, (long long)K);
    report(name, norm_err(yg, yc, 2, M, M), type_tol(type));
    free(yg);
    /* the experts of one token */
    const int32_t ids[3] = { 2, 0, 1 };
    int32_t *dids = dev_from(ids, sizeof ids);
    const st_cuda_experts ex = { .type = type, .W = dG, .expert_bytes = eb, .n_expert = E, .M = M, .ids = dids,
                                 .x_group = ns, .n_slots = ns };
    GPU(st_cuda_matvec_q8_id(cu, &ex, q, dY, M));
    for (int64_t s = 0; s < ns; s++) cpu_matmul(type, (uint8_t *)Gq + (size_t)ids[s] * eb, M, K, xn, K, 1, yc + s * M, M);
    yg = to_host(dY, (size_t)(ns * M));
    snprintf(name, sizeof name, "matvec_q8_id %s %lldx%lld", st_type_get(type)->name, (long long)M, (long long)K);
    report(name, norm_err(yg, yc, ns, M, M), type_tol(type));
    free(yg);
    /* SwiGLU into 8 bits */
    st_cuda_experts sw = ex;
    sw.W2 = dU;
    void *obuf = dev_from(NULL, st_cuda_q8_bytes(M, ns));
    const st_cuda_q8 o = st_cuda_q8_at(obuf, M, ns);
    GPU(st_cuda_matvec_q8_swiglu_q8(cu, &sw, q, o));
    for (int64_t s = 0; s < ns; s++) {
        cpu_matmul(type, (uint8_t *)Uq + (size_t)ids[s] * eb, M, K, xn, K, 1, uc, M);
        st_op_swiglu(NULL, yc + s * M, M, uc, M, yc + s * M, M, 1, M);
    }
    int8_t *oq = malloc((size_t)(ns * M));
    float *od = malloc((size_t)(ns * M / 32) * 4);
    GPU(st_cuda_download(cu, oq, o.q, (size_t)(ns * M)));
    GPU(st_cuda_download(cu, od, o.d, (size_t)(ns * M / 32) * 4));
    yg = malloc((size_t)(ns * M) * 4);
    for (int64_t i = 0; i < ns * M; i++) yg[i] = (float)oq[i] * od[i / 32];
    snprintf(name, sizeof name, "matvec_q8_swiglu_q8 %s %lldx%lld", st_type_get(type)->name, (long long)M, (long long)K);
    report(name, norm_err(yg, yc, ns, M, M), type_tol(type));
    st_cuda_free(cu, dx); st_cuda_free(cu, dones); st_cuda_free(cu, dxn); st_cuda_free(cu, qbuf);
    st_cuda_free(cu, dG); st_cuda_free(cu, dU); st_cuda_free(cu, dY); st_cuda_free(cu, dids); st_cuda_free(cu, obuf);
    free(x); free(ones); free(w); free(Gq); free(Uq); free(xn); free(yc); free(uc); free(yg); free(oq); free(od);
}

/* The fused block outputs of decode (forward_cuda.c out_q8): the GDN's gated norm and attention's
 * gate straight into 8 bits, read by the out product's matvec_q8_id, and the routed and shared
 * combines in one pass; each against the unfused GPU sequence it replaces, bit for bit (err 0). */
static void test_fused_outputs(uint32_t type, int64_t n, int64_t heads, int64_t hd, int64_t M) {
    const int64_t K = heads * hd, rows = n * heads;
    size_t wb;
    float *wf = rand_vec(M * K, 1.0f);
    void *Wq = quantize_matrix(type, wf, M, K, &wb);
    void *dW = dev_from(Wq, wb);
    float *x = rand_vec(rows * hd, 3.0f), *z = rand_vec(rows * 2 * hd, 4.0f), *nw = rand_vec(hd, 1.5f);
    float *dx = dev_from(x, (size_t)(rows * hd) * 4), *dz = dev_from(z, (size_t)(rows * 2 * hd) * 4);
    float *dnw = dev_from(nw, (size_t)hd * 4);
    float *dy1 = dev_from(NULL, (size_t)(rows * hd) * 4), *dy2 = dev_from(NULL, (size_t)(rows * hd) * 4);
    float *dY1 = dev_from(NULL, (size_t)(n * M) * 4), *dY2 = dev_from(NULL, (size_t)(n * M) * 4);
    void *qbuf = dev_from(NULL, st_cuda_q8_bytes(K, n));
    const st_cuda_q8 q = st_cuda_q8_at(qbuf, K, n);
    const st_cuda_experts e = { .type = type, .W = dW, .M = M, .x_group = 1, .n_slots = n };
    char name[96];
    /* GDN: RMSNorm(x) * silu(z) (z dense here), then ssm_out */
    GPU(st_cuda_rms_norm_mul_silu(cu, dx, dnw, dz, dy1, rows, hd, 1e-6f));
    GPU(st_cuda_matmul(cu, type, dW, M, K, dy1, K, n, dY1, M));
    GPU(st_cuda_rms_norm_mul_silu_q8(cu, dx, dnw, dz, dy2, q, rows, hd, 1e-6f));
    GPU(st_cuda_matvec_q8_id(cu, &e, q, dY2, M));
    float *a = to_host(dy1, (size_t)(rows * hd)), *b = to_host(dy2, (size_t)(rows * hd));
    float *A = to_host(dY1, (size_t)(n * M)), *B = to_host(dY2, (size_t)(n * M));
    snprintf(name, sizeof name, "rms_norm_mul_silu_q8 %s n%lld %lldx%lld", st_type_get(type)->name, (long long)n,
             (long long)heads, (long long)hd);
    report(name, max_diff(a, b, rows * hd) + max_diff(A, B, n * M), 0.0);
    free(a); free(b); free(A); free(B);
    /* attention: o * sigmoid(g), g the second half of each head's q|g slot, then wo */
    GPU(st_cuda_pointwise(cu, ST_CUDA_MUL_SIGMOID, dx, hd, dz + hd, 2 * hd, dy1, hd, rows, hd));
    GPU(st_cuda_matmul(cu, type, dW, M, K, dy1, K, n, dY1, M));
    GPU(st_cuda_mul_sigmoid_q8(cu, dx, hd, dz + hd, 2 * hd, dy2, rows, hd, q));
    GPU(st_cuda_matvec_q8_id(cu, &e, q, dY2, M));
    a = to_host(dy1, (size_t)(rows * hd)); b = to_host(dy2, (size_t)(rows * hd));
    A = to_host(dY1, (size_t)(n * M)); B = to_host(dY2, (size_t)(n * M));
    snprintf(name, sizeof name, "mul_sigmoid_q8 %s n%lld %lldx%lld", st_type_get(type)->name, (long long)n,
             (long long)heads, (long long)hd);
    report(name, max_diff(a, b, rows * hd) + max_diff(A, B, n * M), 0.0);
    free(a); free(b); free(A); free(B);
    /* combine: k routed slots per token (rows of M from dx), then the shared row gated by w2 */
    const int64_t k = 3;
    if (n * k * M <= rows * hd && n * M <= rows * 2 * hd) {
        float *w = rand_vec(n * k + n, 1.0f);
        float *dw = dev_from(w, (size_t)(n * k + n) * 4);
        GPU(st_cuda_moe_combine(cu, dx, M, dw, n, k, M, dY1, M, 0));
        GPU(st_cuda_moe_combine(cu, dz, M, dw + n * k, n, 1, M, dY1, M, 1));
        GPU(st_cuda_moe_combine_shared(cu, dx, M, dw, n, k, M, dY2, M, dz, M, dw + n * k));
        A = to_host(dY1, (size_t)(n * M)); B = to_host(dY2, (size_t)(n * M));
        snprintf(name, sizeof name, "moe_combine_shared n%lld k%lld %lld", (long long)n, (long long)k, (long long)M);
        report(name, max_diff(A, B, n * M), 0.0);
        free(A); free(B); free(w);
        st_cuda_free(cu, dw);
    }
    st_cuda_free(cu, dW); st_cuda_free(cu, dx); st_cuda_free(cu, dz); st_cuda_free(cu, dnw); st_cuda_free(cu, dy1);
    st_cuda_free(cu, dy2); st_cuda_free(cu, dY1); st_cuda_free(cu, dY2); st_cuda_free(cu, qbuf);
    free(wf); free(Wq); free(x); free(z); free(nw);
}

/* The low-bit and legacy weight types (src/backend/cuda/quant_lowbit.cuh) on every path that takes a weight:
 * decode matvec and its prepared-row forms, the expert products, the prompt GEMM, the MoE prefill
 * and get_rows. K is a multiple of 256 (the super-block) and of 64 (q2_0's block). */
static const uint32_t lowbit_types[] = { ST_TYPE_IQ4_XS, ST_TYPE_IQ3_XXS, ST_TYPE_IQ3_S, ST_TYPE_IQ2_XS,
                                         ST_TYPE_IQ4_NL, ST_TYPE_Q2_0, ST_TYPE_Q2_K, ST_TYPE_Q3_K,
                                         ST_TYPE_Q4_0, ST_TYPE_Q4_1, ST_TYPE_Q5_0, ST_TYPE_Q5_1 };

static void test_lowbit(uint32_t type) {
    test_matmul(type, 77, 768, 1);
    test_matmul(type, 131, 1280, 3);
    test_matmul(type, 67, 512, 37);
    test_matmul(type, 5, 256, 1);   /* fewer units than lanes */
    test_get_rows(type);
    test_matmul_id(type, 5, 65, 512, 5);
    test_matmul_id(type, 5, 65, 512, 37);
    test_matmul_id_swiglu(type, 3, 64, 512);
    test_matvec_q8(type, 96, 768);
    test_moe_prefill(type, type, type, 16, 4, 512, 256, 37, 0, 0, 0, 0);
    test_moe_prefill(type, type, ST_TYPE_Q6_K, 16, 4, 256, 256, 300, 1, 0, 0, 1);
}

/* ---- perf ------------------------------------------------------------------------------------- */

#define PERF_ITERS 50

/* GB/s of one weight product at a model shape, cycling over copies that together exceed the L2 */
static void perf_matmul(uint32_t type, int64_t M, int64_t K, const char *what) {
    const size_t rb = st_row_size(st_type_get(type), K), wb = rb * (size_t)M;
    int n_copies = (int)(((size_t)512 << 20) / wb) + 1;
    if (n_copies > 2048) n_copies = 2048;
    uint8_t *Wh = malloc(wb);
    for (size_t i = 0; i < wb; i++) Wh[i] = (uint8_t)(frand() * 127.0f);
    /* sane scales: zero every f16 d/dmin would be simplest, but random bytes are fine for timing;
     * float types get finite values */
    if (type == ST_TYPE_F32 || type == ST_TYPE_F16 || type == ST_TYPE_BF16) memset(Wh, 0, wb);
    void **dW = malloc((size_t)n_copies * sizeof(void *));
    for (int c = 0; c < n_copies; c++) dW[c] = dev_from(Wh, wb);
    float *X = rand_vec(K, 1.0f);
    float *dX = dev_from(X, (size_t)K * 4), *dY = dev_from(NULL, (size_t)M * 4);
    GPU(st_cuda_matmul(cu, type, dW[0], M, K, dX, K, 1, dY, M));   /* warm-up */
    float ms;
    GPU(st_cuda_timer_start(cu));
    for (int i = 0; i < PERF_ITERS; i++) GPU(st_cuda_matmul(cu, type, dW[i % n_copies], M, K, dX, K, 1, dY, M));
    GPU(st_cuda_timer_stop(cu, &ms));
    const double us = 1000.0 * ms / PERF_ITERS;
    printf("perf matvec %-5s %-22s M=%-6lld K=%-5lld %9.1f us  %7.1f GB/s\n", st_type_get(type)->name, what,
           (long long)M, (long long)K, us, (double)wb / (us * 1e3));
    for (int c = 0; c < n_copies; c++) st_cuda_free(cu, dW[c]);
    st_cuda_free(cu, dX); st_cuda_free(cu, dY);
    free(dW); free(Wh); free(X);
}

/* The decode MoE: 8 of 256 experts of 512x2048 (gate), different experts each call */
static void perf_moe(uint32_t type) {
    const int64_t E = 256, k = 8, M = 512, K = 2048;
    const size_t eb = st_row_size(st_type_get(type), K) * (size_t)M;
    uint8_t *Wh = malloc(eb * (size_t)E);
    for (size_t i = 0; i < eb * (size_t)E; i++) Wh[i] = (uint8_t)(frand() * 127.0f);
    void *dW = dev_from(Wh, eb * (size_t)E);
    int32_t ids[PERF_ITERS * 8];
    for (int i = 0; i < PERF_ITERS * 8; i++) ids[i] = (int32_t)((i * 37 + i / 8 * 11) % E);
    int32_t *dids = dev_from(ids, sizeof ids);
    float *X = rand_vec(K, 1.0f);
    float *dX = dev_from(X, (size_t)K * 4), *dY = dev_from(NULL, (size_t)(k * M) * 4);
    float ms;
    GPU(st_cuda_matmul_id(cu,
            &(st_cuda_experts){.type = type, .W = dW, .expert_bytes = eb, .n_expert = E, .M = M, .ids = dids,
                .x_group = k, .n_slots = k}, K, dX, K, dY, M));
    GPU(st_cuda_timer_start(cu));
    for (int i = 0; i < PERF_ITERS; i++)
        GPU(st_cuda_matmul_id(cu,
                &(st_cuda_experts){.type = type, .W = dW, .expert_bytes = eb, .n_expert = E, .M = M,
                    .ids = dids + i * k, .x_group = k, .n_slots = k}, K, dX, K, dY, M));
    GPU(st_cuda_timer_stop(cu, &ms));
    const double us = 1000.0 * ms / PERF_ITERS;
    printf("perf matmul_id %-5s 8 of 256 experts 512x2048 %9.1f us  %7.1f GB/s\n", st_type_get(type)->name, us,
           (double)(eb * (size_t)k) / (us * 1e3));
    /* gate+up+swiglu fused (the same tensor serves as both: the bytes read are what count) */
    GPU(st_cuda_timer_start(cu));
    for (int i = 0; i < PERF_ITERS; i++)
        GPU(st_cuda_matmul_id_swiglu(cu,
                &(st_cuda_experts){.type = type, .W = dW, .W2 = dW, .expert_bytes = eb, .n_expert = E, .M = M,
                    .ids = dids + i * k, .x_group = k, .n_slots = k}, K, dX, K, dY, M));
    GPU(st_cuda_timer_stop(cu, &ms));
    const double us2 = 1000.0 * ms / PERF_ITERS;
    printf("perf matmul_id_swiglu %-5s 8 of 256, gate+up 2x512x2048 %9.1f us  %7.1f GB/s\n", st_type_get(type)->name,
           us2, (double)(2 * eb * (size_t)k) / (us2 * 1e3));
    st_cuda_free(cu, dW); st_cuda_free(cu, dids); st_cuda_free(cu, dX); st_cuda_free(cu, dY);
    free(Wh); free(X);
}

/* The MoE FFN of a decode step of the 35B-A3B shape, 40 layers, every weight distinct and Q4_K
 * (router f32): rms_norm, router, route, gate/up (8 of 256 experts), swiglu, down, combine, and the
 * shared expert. Weights are zeros (cudaMemset): no kernel's time depends on the values, and
 * 17.7 GB need no upload. Attention/GDN projections are not included. */
static void perf_moe_decode(uint32_t type) {
    const int L = 40;
    const int64_t E = 256, k = 8, F = 512, D = 2048;
    const size_t rb_in = st_row_size(st_type_get(type), D), rb_out = st_row_size(st_type_get(type), F);
    const size_t e_in = rb_in * (size_t)F, e_out = rb_out * (size_t)D;   /* gate/up, down per expert */
    void *gate[40], *up[40], *down[40], *sh[40], *router[40];
    for (int l = 0; l < L; l++) {
        gate[l] = dev_from(NULL, e_in * (size_t)E);
        up[l] = dev_from(NULL, e_in * (size_t)E);
        down[l] = dev_from(NULL, e_out * (size_t)E);
        sh[l] = dev_from(NULL, 2 * e_in + e_out);
        router[l] = dev_from(NULL, (size_t)(E * D) * 4);
    }
    float *x = dev_from(NULL, (size_t)D * 4), *xn = dev_from(NULL, (size_t)D * 4), *nw = dev_from(NULL, (size_t)D * 4);
    float *logits = dev_from(NULL, (size_t)E * 4), *wts = dev_from(NULL, (size_t)k * 4);
    int32_t *ids = dev_from(NULL, (size_t)k * 4);
    float *g = dev_from(NULL, (size_t)(k * F) * 4), *u = dev_from(NULL, (size_t)(k * F) * 4);
    float *yd = dev_from(NULL, (size_t)(k * D) * 4), *sg = dev_from(NULL, (size_t)F * 8), *so = dev_from(NULL, (size_t)D * 4);
    float ms = 0.0f, ms_graph = -1.0f;
    st_cuda_graph *graph = NULL;
    /* passes: 0 warm-up, 1 timed on the stream, 2 captured into a graph (then replayed) */
    for (int rep = 0; rep < 3; rep++) {
        if (rep == 2) {
            GPU(st_cuda_reserve_scratch(cu, (size_t)64 << 20));
            if (st_cuda_capture_begin(cu) != ST_OK) { printf("perf moe_ffn graph: capture failed: %s\n", st_last_error()); break; }
        } else {
            GPU(st_cuda_timer_start(cu));
        }
        for (int l = 0; l < L; l++) {
            GPU(st_cuda_rms_norm(cu, x, D, nw, xn, D, 1, D, 1e-6f));
            GPU(st_cuda_matmul(cu, ST_TYPE_F32, router[l], E, D, xn, D, 1, logits, E));
            GPU(st_cuda_moe_route(cu, logits, E, 1, E, k, ids, wts));
            GPU(st_cuda_matmul_id(cu,
                    &(st_cuda_experts){.type = type, .W = gate[l], .expert_bytes = e_in, .n_expert = E, .M = F,
                        .ids = ids, .x_group = k, .n_slots = k}, D, xn, D, g, F));
            GPU(st_cuda_matmul_id(cu,
                    &(st_cuda_experts){.type = type, .W = up[l], .expert_bytes = e_in, .n_expert = E, .M = F,
                        .ids = ids, .x_group = k, .n_slots = k}, D, xn, D, u, F));
            GPU(st_cuda_pointwise(cu, ST_CUDA_SWIGLU, g, F, u, F, g, F, k, F));
            GPU(st_cuda_matmul_id(cu,
                    &(st_cuda_experts){.type = type, .W = down[l], .expert_bytes = e_out, .n_expert = E,
                        .M = D, .ids = ids, .x_group = 1, .n_slots = k}, F, g, F, yd, D));
            GPU(st_cuda_moe_combine(cu, yd, D, wts, 1, k, D, x, D, 1));
            GPU(st_cuda_matmul(cu, type, sh[l], 2 * F, D, xn, D, 1, sg, 2 * F));   /* shared gate|up */
            GPU(st_cuda_pointwise(cu, ST_CUDA_SWIGLU, sg, F, sg + F, F, sg, F, 1, F));
            GPU(st_cuda_matmul(cu, type, (uint8_t *)sh[l] + 2 * e_in, D, F, sg, F, 1, so, D));
            GPU(st_cuda_axpy(cu, x, D, so, 1.0f, 1));
        }
        if (rep < 2) { GPU(st_cuda_timer_stop(cu, &ms)); continue; }
        if (st_cuda_capture_end(cu, &graph) != ST_OK) { printf("perf moe_ffn graph: %s\n", st_last_error()); break; }
        GPU(st_cuda_graph_launch(cu, graph));   /* warm-up */
        GPU(st_cuda_timer_start(cu));
        for (int i = 0; i < 10; i++) GPU(st_cuda_graph_launch(cu, graph));
        GPU(st_cuda_timer_stop(cu, &ms_graph));
        ms_graph /= 10.0f;
        st_cuda_graph_free(graph);
    }
    const double bytes = (double)L * ((double)k * (2 * e_in + e_out) + 2 * e_in + e_out + (double)(E * D) * 4);
    const char *tn = st_type_get(type)->name;
    printf("perf moe_ffn decode, 40 layers (35B-A3B shape, %-7s): %8.1f us/token  %7.1f GB/s of weights  "
           "(%d launches; FFN-only bound %.0f tok/s)\n", tn, 1000.0 * ms, bytes / (ms * 1e6), L * 17, 1000.0 / ms);
    if (ms_graph > 0.0f)
        printf("perf moe_ffn decode, same, as one CUDA graph (%-7s): %8.1f us/token  %7.1f GB/s of weights  "
               "(FFN-only bound %.0f tok/s)\n", tn, 1000.0 * ms_graph, bytes / (ms_graph * 1e6), 1000.0 / ms_graph);
    for (int l = 0; l < L; l++) {
        st_cuda_free(cu, gate[l]); st_cuda_free(cu, up[l]); st_cuda_free(cu, down[l]);
        st_cuda_free(cu, sh[l]); st_cuda_free(cu, router[l]);
    }
    st_cuda_free(cu, x); st_cuda_free(cu, xn); st_cuda_free(cu, nw); st_cuda_free(cu, logits); st_cuda_free(cu, wts);
    st_cuda_free(cu, ids); st_cuda_free(cu, g); st_cuda_free(cu, u); st_cuda_free(cu, yd); st_cuda_free(cu, sg);
    st_cuda_free(cu, so);
}

static void perf_attention(int64_t n_kv) {
    const int64_t n_head = 16, n_head_kv = 2, hd = 256, row = n_head_kv * hd;
    const size_t cb = (size_t)n_kv * (size_t)row * 2;
    void *dk = dev_from(NULL, cb), *dv = dev_from(NULL, cb);
    float *q = rand_vec(n_head * hd, 1.0f);
    float *dq = dev_from(q, (size_t)(n_head * hd) * 4), *dout = dev_from(NULL, (size_t)(n_head * hd) * 4);
    int32_t pos = (int32_t)(n_kv - 1);
    int32_t *dpos = dev_from(&pos, 4);
    st_attn_args a = { dq, n_head * hd, hd, dk, dv, ST_TYPE_F16, dpos, 1, n_head, n_head_kv, hd, n_kv,
                       0.0625f, dout, n_head * hd };
    GPU(st_cuda_attention(cu, &a));
    float ms;
    GPU(st_cuda_timer_start(cu));
    for (int i = 0; i < PERF_ITERS; i++) GPU(st_cuda_attention(cu, &a));
    GPU(st_cuda_timer_stop(cu, &ms));
    const double us = 1000.0 * ms / PERF_ITERS;
    printf("perf attention decode 16/2 heads of 256, n_kv=%-6lld %9.1f us  %7.1f GB/s (K+V f16)\n",
           (long long)n_kv, us, (double)(2 * cb) / (us * 1e3));
    st_cuda_free(cu, dk); st_cuda_free(cu, dv); st_cuda_free(cu, dq); st_cuda_free(cu, dout); st_cuda_free(cu, dpos);
    free(q);
}

static void perf_gdn(int64_t n_tok) {
    const int64_t n_k = 16, n_v = 32, d = 128;
    float *dq = dev_from(NULL, (size_t)(n_tok * n_k * d) * 4), *dk = dev_from(NULL, (size_t)(n_tok * n_k * d) * 4);
    float *dv = dev_from(NULL, (size_t)(n_tok * n_v * d) * 4), *dg = dev_from(NULL, (size_t)(n_tok * n_v) * 4);
    float *db = dev_from(NULL, (size_t)(n_tok * n_v) * 4), *dS = dev_from(NULL, (size_t)(n_v * d * d) * 4);
    float *dout = dev_from(NULL, (size_t)(n_tok * n_v * d) * 4);
    st_gdn_args a = { n_tok, n_k, n_v, d, ST_GDN_TILED, dq, dk, n_k * d, n_k * d, dv, n_v * d, dg, db, dS,
                      dout, n_v * d, 0.088f, NULL };
    GPU(st_cuda_gdn_step(cu, &a));
    float ms;
    const int iters = n_tok > 1 ? 5 : PERF_ITERS;
    GPU(st_cuda_timer_start(cu));
    for (int i = 0; i < iters; i++) GPU(st_cuda_gdn_step(cu, &a));
    GPU(st_cuda_timer_stop(cu, &ms));
    const double us = 1000.0 * ms / iters;
    printf("perf gdn_step 32 v-heads of 128, n_tok=%-5lld %9.1f us  (state %.1f GB/s)\n", (long long)n_tok, us,
           (double)(2 * n_v * d * d * 4) / (us * 1e3));
    st_cuda_free(cu, dq); st_cuda_free(cu, dk); st_cuda_free(cu, dv); st_cuda_free(cu, dg);
    st_cuda_free(cu, db); st_cuda_free(cu, dS); st_cuda_free(cu, dout);
}

static void perf_small(void) {
    const int64_t n = 151936;
    float *x = rand_vec(n, 1.0f);
    float *dx = dev_from(x, (size_t)n * 4), *dy = dev_from(NULL, (size_t)n * 4), *dw = dev_from(NULL, 32768 * 4);
    int32_t *dids = dev_from(NULL, 64);
    float *dwt = dev_from(NULL, 64);
    float ms;
#define TIME(label, call) do { GPU(call); GPU(st_cuda_timer_start(cu)); \
        for (int i_ = 0; i_ < PERF_ITERS; i_++) { GPU(call); } GPU(st_cuda_timer_stop(cu, &ms)); \
        printf("perf %-46s %9.1f us\n", label, 1000.0 * ms / PERF_ITERS); } while (0)
    TIME("rms_norm 1x2048", st_cuda_rms_norm(cu, dx, 2048, dw, dy, 2048, 1, 2048, 1e-6f));
    TIME("rms_norm per-head 16x256", st_cuda_rms_norm(cu, dx, 256, dw, dy, 256, 16, 256, 1e-6f));
    TIME("moe_route 1x256 top-8", st_cuda_moe_route(cu, dx, 256, 1, 256, 8, dids, dwt));
    TIME("swiglu 8x512", st_cuda_pointwise(cu, ST_CUDA_SWIGLU, dx, 512, dx + 4096, 512, dy, 512, 8, 512));
    TIME("argmax 151936", st_cuda_argmax(cu, dx, n, dids));
    TIME("conv1d decode C=8192 K=4", st_cuda_conv1d(cu, dx, 8192, dw, dy + 8192, dy, 8192, 1, 8192, 4, 1));
#undef TIME
    st_cuda_free(cu, dx); st_cuda_free(cu, dy); st_cuda_free(cu, dw); st_cuda_free(cu, dids); st_cuda_free(cu, dwt);
    free(x);
}

/* The routed-expert FFN of one 35B-A3B layer for a prompt chunk (E = 256, top-8, 2048 -> 512,
 * Q4_K, zero weights: no kernel's time depends on the values), new path against the matvec path
 * (matmul_id gate/up/down + swiglu + combine) at n_tok = 512. */
static void perf_moe_prefill(int64_t n_tok) {
    const int64_t E = 256, k = 8, F = 512, D = 2048;
    const size_t e_in = st_row_size(st_type_get(ST_TYPE_Q4_K), D) * (size_t)F;
    const size_t e_out = st_row_size(st_type_get(ST_TYPE_Q4_K), F) * (size_t)D;
    void *gate = dev_from(NULL, e_in * (size_t)E), *up = dev_from(NULL, e_in * (size_t)E);
    void *down = dev_from(NULL, e_out * (size_t)E);
    int32_t *ids = malloc((size_t)(n_tok * k) * 4);
    float *wts = malloc((size_t)(n_tok * k) * 4);
    route_random(n_tok, E, k, ids, wts);
    int32_t *dids = dev_from(ids, (size_t)(n_tok * k) * 4);
    float *dw = dev_from(wts, (size_t)(n_tok * k) * 4);
    float *X = rand_vec(n_tok * D, 1.0f);
    float *dX = dev_from(X, (size_t)(n_tok * D) * 4), *dout = dev_from(NULL, (size_t)(n_tok * D) * 4);
    const st_cuda_moe_w mw = { ST_TYPE_Q4_K, ST_TYPE_Q4_K, ST_TYPE_Q4_K, gate, up, down, E, D, F };
    GPU(st_cuda_moe_ffn_prefill(cu, &mw,
            &(st_cuda_moe_rows){.ids = dids, .wts = dw, .k = k, .X = dX, .ldx = D, .n_tok = n_tok, .out = dout,
                .ld_out = D, .accumulate = 1}));   /* warm-up */
    const int iters = 5;
    float ms;
    GPU(st_cuda_timer_start(cu));
    for (int i = 0; i < iters; i++) GPU(st_cuda_moe_ffn_prefill(cu, &mw,
            &(st_cuda_moe_rows){.ids = dids, .wts = dw, .k = k, .X = dX, .ldx = D, .n_tok = n_tok, .out = dout,
                .ld_out = D, .accumulate = 1}));
    GPU(st_cuda_timer_stop(cu, &ms));
    ms /= (float)iters;
    const double flop = 2.0 * (double)(n_tok * k) * (double)(3 * F * D);
    printf("perf moe_ffn_prefill 35B-A3B layer (256 experts top-8, Q4_K) n_tok=%-5lld %8.2f ms  %9.0f tok/s per layer"
           "  %6.1f TFLOP/s  (40 layers: %.0f tok/s FFN-only)\n", (long long)n_tok, ms, 1000.0 * n_tok / ms,
           flop / (ms * 1e9), 1000.0 * n_tok / (ms * 40));
    {   /* with the f16 copies of the experts made at load */
        void *gu16 = dev_from(NULL, (size_t)(E * 2 * F * D) * 2), *dn16 = dev_from(NULL, (size_t)(E * D * F) * 2);
        GPU(st_cuda_moe_dequant_f16(cu, &mw, gu16, dn16));
        GPU(st_cuda_moe_ffn_prefill_f16(cu, &mw, gu16, dn16,
                &(st_cuda_moe_rows){.ids = dids, .wts = dw, .k = k, .X = dX, .ldx = D, .n_tok = n_tok, .out = dout,
                    .ld_out = D, .accumulate = 1}));
        GPU(st_cuda_timer_start(cu));
        for (int i = 0; i < iters; i++)
            GPU(st_cuda_moe_ffn_prefill_f16(cu, &mw, gu16, dn16,
                    &(st_cuda_moe_rows){.ids = dids, .wts = dw, .k = k, .X = dX, .ldx = D, .n_tok = n_tok, .out = dout,
                        .ld_out = D, .accumulate = 1}));
        GPU(st_cuda_timer_stop(cu, &ms));
        ms /= (float)iters;
        printf("perf moe_ffn_prefill_f16 (f16 expert copies)      n_tok=%-5lld %8.2f ms  %9.0f tok/s per layer"
               "  %6.1f TFLOP/s  (40 layers: %.0f tok/s FFN-only)\n", (long long)n_tok, ms, 1000.0 * n_tok / ms,
               flop / (ms * 1e9), 1000.0 * n_tok / (ms * 40));
        st_cuda_free(cu, gu16); st_cuda_free(cu, dn16);
    }
    if (n_tok <= 512) {   /* the matvec path it replaces, once */
        float *g = dev_from(NULL, (size_t)(n_tok * k * F) * 4), *u = dev_from(NULL, (size_t)(n_tok * k * F) * 4);
        float *yd = dev_from(NULL, (size_t)(n_tok * k * D) * 4);
        GPU(st_cuda_timer_start(cu));
        GPU(st_cuda_matmul_id(cu,
                &(st_cuda_experts){.type = ST_TYPE_Q4_K, .W = gate, .expert_bytes = e_in, .n_expert = E, .M = F,
                    .ids = dids, .x_group = k, .n_slots = n_tok * k}, D, dX, D, g, F));
        GPU(st_cuda_matmul_id(cu,
                &(st_cuda_experts){.type = ST_TYPE_Q4_K, .W = up, .expert_bytes = e_in, .n_expert = E, .M = F,
                    .ids = dids, .x_group = k, .n_slots = n_tok * k}, D, dX, D, u, F));
        GPU(st_cuda_pointwise(cu, ST_CUDA_SWIGLU, g, F, u, F, g, F, n_tok * k, F));
        GPU(st_cuda_matmul_id(cu,
                &(st_cuda_experts){.type = ST_TYPE_Q4_K, .W = down, .expert_bytes = e_out, .n_expert = E, .M = D,
                    .ids = dids, .x_group = 1, .n_slots = n_tok * k}, F, g, F, yd, D));
        GPU(st_cuda_moe_combine(cu, yd, D, dw, n_tok, k, D, dout, D, 1));
        GPU(st_cuda_timer_stop(cu, &ms));
        printf("perf moe_ffn matvec path (matmul_id x3)           n_tok=%-5lld %8.2f ms  %9.0f tok/s per layer\n",
               (long long)n_tok, ms, 1000.0 * n_tok / ms);
        st_cuda_free(cu, g); st_cuda_free(cu, u); st_cuda_free(cu, yd);
    }
    st_cuda_free(cu, gate); st_cuda_free(cu, up); st_cuda_free(cu, down); st_cuda_free(cu, dids);
    st_cuda_free(cu, dw); st_cuda_free(cu, dX); st_cuda_free(cu, dout);
    free(ids); free(wts); free(X);
}

/* One 35B-A3B attention layer's attention (16/2 heads of 256, f16 cache) for a prompt chunk of
 * n_tok rows after `prefix` cells, against the CUDA-core kernel (st_cuda_attention), once. */
static void perf_attention_prefill(int64_t n_tok, int64_t prefix) {
    const int64_t H = 16, Hkv = 2, hd = 256, row = Hkv * hd, n_kv = prefix + n_tok;
    void *dk = dev_from(NULL, (size_t)(n_kv * row) * 2), *dv = dev_from(NULL, (size_t)(n_kv * row) * 2);
    float *q = rand_vec(n_tok * H * hd, 1.0f);
    float *dq = dev_from(q, (size_t)(n_tok * H * hd) * 4), *dout = dev_from(NULL, (size_t)(n_tok * H * hd) * 4);
    int32_t *pos = malloc((size_t)n_tok * 4);
    for (int64_t t = 0; t < n_tok; t++) pos[t] = (int32_t)(prefix + t);
    int32_t *dpos = dev_from(pos, (size_t)n_tok * 4);
    st_attn_args a = { dq, H * hd, hd, dk, dv, ST_TYPE_F16, dpos, n_tok, H, Hkv, hd, n_kv, 0.0625f, dout, H * hd };
    GPU(st_cuda_attention_prefill(cu, &a));   /* warm-up */
    const int iters = 5;
    float ms, ms_old;
    GPU(st_cuda_timer_start(cu));
    for (int i = 0; i < iters; i++) GPU(st_cuda_attention_prefill(cu, &a));
    GPU(st_cuda_timer_stop(cu, &ms));
    ms /= (float)iters;
    GPU(st_cuda_timer_start(cu));
    GPU(st_cuda_attention(cu, &a));
    GPU(st_cuda_timer_stop(cu, &ms_old));
    const double flop = 4.0 * (double)n_tok * (double)n_kv * (double)(H * hd);   /* QK^T and PV, unmasked */
    printf("perf attention_prefill 16/2 heads of 256 n_tok=%-5lld n_kv=%-6lld %8.2f ms  %9.0f tok/s per layer"
           "  %6.1f TFLOP/s  (CUDA-core kernel: %.2f ms)\n", (long long)n_tok, (long long)n_kv, ms,
           1000.0 * n_tok / ms, flop / (ms * 1e9), ms_old);
    st_cuda_free(cu, dk); st_cuda_free(cu, dv); st_cuda_free(cu, dq); st_cuda_free(cu, dout); st_cuda_free(cu, dpos);
    free(q); free(pos);
}

/* The 35B-A3B's Gated DeltaNet recurrence (16 k-heads, 32 v-heads of 128) for a prompt chunk:
 * chunked form against the per-token kernel. */
static void perf_gdn_chunked(int64_t n_tok) {
    const int64_t n_k = 16, n_v = 32, d = 128;
    float *dq = dev_from(NULL, (size_t)(n_tok * n_k * d) * 4), *dk = dev_from(NULL, (size_t)(n_tok * n_k * d) * 4);
    float *dv = dev_from(NULL, (size_t)(n_tok * n_v * d) * 4), *dg = dev_from(NULL, (size_t)(n_tok * n_v) * 4);
    float *db = dev_from(NULL, (size_t)(n_tok * n_v) * 4), *dS = dev_from(NULL, (size_t)(n_v * d * d) * 4);
    float *dout = dev_from(NULL, (size_t)(n_tok * n_v * d) * 4);
    st_gdn_args a = { n_tok, n_k, n_v, d, ST_GDN_TILED, dq, dk, n_k * d, n_k * d, dv, n_v * d, dg, db, dS,
                      dout, n_v * d, 0.088f, NULL };
    GPU(st_cuda_gdn_chunked(cu, &a));
    float ms, ms_step;
    GPU(st_cuda_timer_start(cu));
    for (int i = 0; i < 5; i++) GPU(st_cuda_gdn_chunked(cu, &a));
    GPU(st_cuda_timer_stop(cu, &ms));
    ms /= 5.0f;
    GPU(st_cuda_timer_start(cu));
    GPU(st_cuda_gdn_step(cu, &a));
    GPU(st_cuda_timer_stop(cu, &ms_step));
    printf("perf gdn_chunked 32 v-heads of 128 n_tok=%-5lld %8.3f ms  %9.0f tok/s per layer  (per-token kernel: %.3f ms)\n",
           (long long)n_tok, ms, 1000.0 * n_tok / ms, ms_step);
    st_cuda_free(cu, dq); st_cuda_free(cu, dk); st_cuda_free(cu, dv); st_cuda_free(cu, dg);
    st_cuda_free(cu, db); st_cuda_free(cu, dS); st_cuda_free(cu, dout);
}

/* QSA at the real model's shapes (4 indexer heads of 128, r = 4, W = 2051; 24/2 heads of 256):
 * the selection of a decode row and of a 512-row chunk at the end of an n_ctx context, and the
 * attention over the W cells it gives. */
static void perf_qsa(int64_t n_tok, int64_t n_ctx) {
    const int64_t nh = 4, dim = 128, r = 4, W = 2051, nb = n_ctx / r, n_head = 24, n_head_kv = 2, hd = 256;
    float *q = rand_vec(n_tok * nh * dim, 1.0f), *blk = rand_vec(nb * dim, 1.0f);
    int32_t *pos = malloc((size_t)n_tok * 4);
    for (int64_t t = 0; t < n_tok; t++) pos[t] = (int32_t)(n_ctx - n_tok + t);
    float *dq = dev_from(q, (size_t)(n_tok * nh * dim) * 4), *dblk = dev_from(blk, (size_t)(nb * dim) * 4);
    int32_t *dpos = dev_from(pos, (size_t)n_tok * 4), *dcells = dev_from(NULL, (size_t)(n_tok * W) * 4);
    int32_t *dn = dev_from(NULL, (size_t)n_tok * 4);
    st_qsa_args a = {dq, nh * dim, nh, dim, dblk, dpos, n_tok, r, W, n_ctx + 1, dcells, W, dn};
    const size_t cb = (size_t)n_ctx * (size_t)(n_head_kv * hd) * 2;
    void *dk = dev_from(NULL, cb), *dv = dev_from(NULL, cb);
    float *daq = dev_from(NULL, (size_t)(n_tok * n_head * hd) * 4), *dout = dev_from(NULL, (size_t)(n_tok * n_head * hd) * 4);
    st_attn_cells_args ca = {{daq, n_head * hd, hd, dk, dv, ST_TYPE_F16, NULL, n_tok, n_head, n_head_kv, hd, n_ctx,
                              0.0625f, dout, n_head * hd}, dcells, W, dn};
    const int iters = n_tok > 1 ? 5 : PERF_ITERS;
    float ms;
    GPU(st_cuda_qsa_select(cu, &a));
    GPU(st_cuda_timer_start(cu));
    for (int i = 0; i < iters; i++) GPU(st_cuda_qsa_select(cu, &a));
    GPU(st_cuda_timer_stop(cu, &ms));
    printf("perf qsa_select n_tok=%-4lld n_ctx=%-6lld (%lld blocks)   %9.1f us\n", (long long)n_tok, (long long)n_ctx,
           (long long)nb, 1000.0 * ms / iters);
    GPU(st_cuda_attention_cells(cu, &ca));
    GPU(st_cuda_timer_start(cu));
    for (int i = 0; i < iters; i++) GPU(st_cuda_attention_cells(cu, &ca));
    GPU(st_cuda_timer_stop(cu, &ms));
    const double us = 1000.0 * ms / iters;
    printf("perf attention_cells n_tok=%-4lld W=2051 24/2 heads of 256 %9.1f us  %7.1f GB/s (K+V rows read once)\n",
           (long long)n_tok, us, (double)n_tok * W * n_head_kv * hd * 2 * 2 / (us * 1e3));
    st_cuda_free(cu, dq); st_cuda_free(cu, dblk); st_cuda_free(cu, dpos); st_cuda_free(cu, dcells); st_cuda_free(cu, dn);
    st_cuda_free(cu, dk); st_cuda_free(cu, dv); st_cuda_free(cu, daq); st_cuda_free(cu, dout);
    free(q); free(blk); free(pos);
}

static void run_perf(void) {
    printf("\n== perf (%d iterations each; weights cycled over copies > L2)\n", PERF_ITERS);
    static const uint32_t types[] = { ST_TYPE_Q4_K, ST_TYPE_Q5_K, ST_TYPE_Q6_K, ST_TYPE_Q8_0, ST_TYPE_F16 };
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        perf_matmul(types[t], 512, 2048, "expert gate/up");
        perf_matmul(types[t], 2048, 512, "expert down");
        perf_matmul(types[t], 8192, 2048, "2048->8192");
        perf_matmul(types[t], 2048, 8192, "8192->2048");
        perf_matmul(types[t], 151936, 2048, "head");
    }
    perf_moe(ST_TYPE_Q4_K);
    perf_moe(ST_TYPE_Q6_K);
    perf_attention(4096);
    perf_attention(32768);
    perf_gdn(1);
    perf_gdn(512);
    perf_small();
    perf_moe_prefill(512);
    perf_moe_prefill(4096);
    perf_attention_prefill(4096, 0);
    perf_attention_prefill(512, 8192);
    perf_gdn_chunked(512);
    perf_gdn_chunked(4096);
    perf_qsa(1, 32768);
    perf_qsa(1, 262144);
    perf_qsa(512, 32768);
    perf_moe_decode(ST_TYPE_Q4_K);   /* last: it holds 17.7 GB and captures a graph */
}

/* --perf-lowbit: the low-bit types' matvec GB/s at the model's shapes and the 35B-A3B FFN decode
 * stack per type, Q4_K first as the yardstick */
static void run_perf_lowbit(void) {
    printf("\n== perf, low-bit weight types (%d iterations each; weights cycled over copies > L2)\n", PERF_ITERS);
    for (size_t t = 0; t < sizeof lowbit_types / sizeof lowbit_types[0]; t++) {
        perf_matmul(lowbit_types[t], 512, 2048, "expert gate/up");
        perf_matmul(lowbit_types[t], 2048, 512, "expert down");
        perf_matmul(lowbit_types[t], 2048, 8192, "8192->2048");
        perf_matmul(lowbit_types[t], 151936, 2048, "head");
    }
    perf_moe_decode(ST_TYPE_Q4_K);
    for (size_t t = 0; t < sizeof lowbit_types / sizeof lowbit_types[0]; t++) perf_moe_decode(lowbit_types[t]);
}

int main(int argc, char **argv) {
    const int perf = argc > 1 && !strcmp(argv[1], "--perf");
    const int perf_lowbit = argc > 1 && !strcmp(argv[1], "--perf-lowbit");
    const int lowbit = argc > 1 && !strcmp(argv[1], "--lowbit");   /* only the low-bit cases: [type name] */
    const int n_dev = st_cuda_device_count();
    if (n_dev <= 0) {
        fprintf(stderr, "skipped: no CUDA device (cudaGetDeviceCount gave 0 or failed)\n");
        return 77;
    }
    if (st_cuda_open(0, &cu) != ST_OK) die("st_cuda_open");
    printf("device: %s\n", st_cuda_describe(cu));
    static const uint32_t qtypes[] = { ST_TYPE_Q4_K, ST_TYPE_Q5_K, ST_TYPE_Q6_K, ST_TYPE_Q8_0,
                                       ST_TYPE_F32, ST_TYPE_F16, ST_TYPE_BF16 };
    if (perf || perf_lowbit) {   /* a separate run, so a fault in one mode cannot hide the other's results */
        if (perf) run_perf();
        else run_perf_lowbit();
        st_cuda_close(cu);
        return 0;
    }
    if (lowbit) {
        for (size_t t = 0; t < sizeof lowbit_types / sizeof lowbit_types[0]; t++)
            if (argc < 3 || !strcmp(argv[2], st_type_get(lowbit_types[t])->name)) test_lowbit(lowbit_types[t]);
        printf("cuda_op_harness: %d passed, %d failed\n", n_pass, n_fail);
        st_cuda_close(cu);
        return n_fail ? 1 : n_pass ? 0 : 2;
    }
    for (size_t t = 0; t < sizeof qtypes / sizeof qtypes[0]; t++) {
        test_matmul(qtypes[t], 77, 768, 1);
        test_matmul(qtypes[t], 131, 1280, 3);
        test_matmul(qtypes[t], 67, 512, 37);
        test_get_rows(qtypes[t]);
    }
    test_matmul(ST_TYPE_Q4_K, 5, 256, 1);   /* fewer units than lanes */
    test_matmul_id(ST_TYPE_Q4_K, 5, 65, 512, 5);
    test_matmul_id(ST_TYPE_Q4_K, 5, 65, 512, 37);
    test_matmul_id(ST_TYPE_Q6_K, 5, 33, 768, 5);
    test_matmul_id(ST_TYPE_Q8_0, 7, 33, 256, 37);
    test_matmul_id(ST_TYPE_F16, 5, 19, 96, 5);
    test_matmul_id(ST_TYPE_F16, 5, 19, 96, 37);
    test_matmul_id_swiglu(ST_TYPE_Q4_K, 3, 70, 512);
    test_matmul_id_swiglu(ST_TYPE_Q6_K, 3, 33, 256);
    test_matmul_id_swiglu(ST_TYPE_Q8_0, 3, 9, 96);
    test_norms();
    test_fused_outputs(ST_TYPE_Q4_K, 1, 32, 128, 2048);   /* the 35B-A3B's GDN output */
    test_fused_outputs(ST_TYPE_Q4_K, 3, 16, 256, 2048);   /* its attention output, 3 rows */
    test_fused_outputs(ST_TYPE_Q8_0, 8, 4, 64, 96);
    test_fused_outputs(ST_TYPE_Q6_K, 2, 2, 128, 33);
    test_fused_outputs(ST_TYPE_IQ4_XS, 1, 8, 32, 40);
    test_rope(0);
    test_rope(1);
    test_pointwise();
    test_attention(1, 333, 128, ST_TYPE_F16);
    test_attention(1, 3001, 256, ST_TYPE_F16);
    test_attention(9, 333, 256, ST_TYPE_F16);
    test_attention(1, 77, 64, ST_TYPE_F32);
    test_attention(13, 13, 96, ST_TYPE_F32);
    test_gdn(1, ST_GDN_TILED);
    test_gdn(19, ST_GDN_TILED);
    test_gdn(7, ST_GDN_GROUPED);
    test_conv(1, 133, 4);
    test_conv(7, 133, 4);
    test_conv_l2(16, 32, 128);   /* the 35B-A3B's */
    test_conv_l2(2, 4, 64);
    test_conv_l2(1, 3, 256);
    test_routing();
    test_router_route_exact(1, 256, 2048, 8);
    test_router_route_exact(8, 128, 1024, 6);
    test_router_route_exact(3, 100, 512, 4);
    test_route_exact(5, 256, 8);     /* the register form */
    test_route_exact(4, 100, 6);     /* the register form, 4 slots, lanes past E */
    test_route_exact(9, 256, 40);    /* the register form, more picks than lanes */
    test_route_exact(3, 512, 10);
    test_route_exact(2, 1000, 40);   /* picks past the 32 lanes */
    test_add_norm_exact(1, 2048);    /* the split form (decode rows) */
    test_add_norm_exact(8, 3072);
    test_add_norm_exact(9, 2048);    /* the register form (more rows) */
    test_add_norm_exact(3, 96);
    test_add_norm_exact(2, 4096);
    test_add_norm_exact(2, 4128);    /* the loop form */
    test_argmax();
    test_graph();
    test_prefill_paths();
    test_gdn_chunked_all();
    for (size_t t = 0; t < sizeof lowbit_types / sizeof lowbit_types[0]; t++) test_lowbit(lowbit_types[t]);
    test_qwen4exp();   /* last: the cases before it draw the random inputs they drew before it came */
    printf("cuda_op_harness: %d passed, %d failed\n", n_pass, n_fail);
    st_cuda_close(cu);
    return n_fail ? 1 : 0;
}
