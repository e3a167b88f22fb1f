/* table_harness.c: the op table (backend.h) on both backends: each entry the forward calls, the
 * fused ones included (add_rms_norm with the products that read its prepared rows, matmul_many,
 * the gated outputs into 8 bits for their product, swiglu_ffn, conv1d_l2, the side stream's
 * fork/unfork/join), run through the CPU's table on host buffers and the GPU's on device buffers
 * with the same inputs, decode-sized (prepared rows) and prompt-sized (plain). Per case it prints
 * the normalised error max|gpu - cpu| / max|cpu| and PASS/FAIL against the tolerance of
 * cuda_op_harness (f32 ops 1e-4, quantized products 3e-2); exit 1 if any failed, 77 without a GPU.
 * The CUDA kernels themselves are op_harness.c's; this checks the table's choice among them. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "backend/cuda/backend_cuda.h"
#include "base/status.h"
#include "quant/quant.h"
#include "quant/types.h"

static st_cuda *cu;
static st_cuda_backend gpu;
static st_cpu_backend cpu;
static st_backend *G, *C;
static void *mm_scratch;
static int n_fail, n_pass;

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static void die(const char *what) {
    fprintf(stderr, "cuda_table_harness: %s failed: %s\n", what, st_last_error());
    exit(1);
}
#define GPU(expr) do { if ((expr) != ST_OK) die(#expr); } while (0)

/* A host buffer of n random floats and its device twin. */
typedef struct buf {
    float *h, *d;
    int64_t n;
} buf;

static buf mk(int64_t n, float scale) {
    buf b = {malloc((size_t)n * sizeof(float)), NULL, n};
    for (int64_t i = 0; i < n; i++) b.h[i] = frand() * scale;
    GPU(st_cuda_alloc(cu, (size_t)n * sizeof(float), (void **)&b.d));
    GPU(st_cuda_upload(cu, b.d, b.h, (size_t)n * sizeof(float)));
    return b;
}

static void drop(buf *b) {
    free(b->h);
    st_cuda_free(cu, b->d);
}

/* A weight matrix on both sides. */
typedef struct wmat {
    st_mat h, d;
} wmat;

static wmat mkw(uint32_t type, int64_t M, int64_t K) {
    float *w = malloc((size_t)(M * K) * sizeof(float));
    for (int64_t i = 0; i < M * K; i++) w[i] = frand() * 0.1f;
    size_t rb = st_row_size(st_type_get(type), K);
    uint8_t *q = malloc(rb * (size_t)M);
    for (int64_t m = 0; m < M; m++)
        if (!st_quantize_row(type, w + m * K, q + (size_t)m * rb, K)) die("quantize");
    free(w);
    void *d;
    GPU(st_cuda_alloc(cu, rb * (size_t)M, &d));
    GPU(st_cuda_upload(cu, d, q, rb * (size_t)M));
    st_mat h = {.type = type, .data = q, .K = K, .M = M, .row_bytes = rb, .scale = 1.0f};
    st_mat dm = h;
    dm.data = d;
    return (wmat){h, dm};
}

/* Compares b's device copy (after the GPU ran) with its host copy (after the CPU ran). */
static void check(const char *what, const buf *b, double tol) {
    if (G->err != ST_OK || C->err != ST_OK) {
        printf("%-48s FAIL (%s)\n", what, st_last_error());
        n_fail++;
        G->err = C->err = ST_OK;
        return;
    }
    GPU(st_cuda_sync(cu));
    float *g = malloc((size_t)b->n * sizeof(float));
    GPU(st_cuda_download(cu, g, b->d, (size_t)b->n * sizeof(float)));
    double md = 0, mc = 0;
    for (int64_t i = 0; i < b->n; i++) {
        double d = fabs((double)g[i] - b->h[i]);
        if (!(d <= md)) md = d;
        if (fabs(b->h[i]) > mc) mc = fabs(b->h[i]);
    }
    double err = mc > 0 ? md / mc : md;
    int ok = err <= tol;
    printf("%-48s err %.2e (tol %.0e) %s\n", what, err, tol, ok ? "PASS" : "FAIL");
    ok ? n_pass++ : n_fail++;
    free(g);
}

/* Both backends run the same call: OP2(name, args with H(x) for buffers and W(w) for weights). */
#define BOTH(call_h, call_d) do { call_h; call_d; } while (0)

/* The residual add and norm, then products on the normed rows: one, several, the SwiGLU FFN. */
static void test_norm_products(int64_t n, int64_t d, int64_t ff, uint32_t type) {
    char what[96];
    buf x = mk(n * d, 1.0f), r = mk(n * d, 1.0f), w = mk(d, 1.0f), h = mk(n * d, 0.0f);
    wmat a = mkw(type, 96, d), b2 = mkw(ST_TYPE_Q8_0, 64, d), c2 = mkw(type, 32, d);
    wmat g = mkw(type, ff, d), u = mkw(type, ff, d), dn = mkw(type, d, ff);
    buf ya = mk(n * 96, 0), yb = mk(n * 64, 0), yc = mk(n * 32, 0), mid = mk(n * ff, 0), tmp = mk(n * ff, 0), out = mk(n * d, 0);
    st_cuda_backend_begin(&gpu, 0, 0, NULL);
    BOTH(C->ops->add_rms_norm(C, x.h, r.h, w.h, h.h, n, d, 1e-6f), G->ops->add_rms_norm(G, x.d, r.d, w.d, h.d, n, d, 1e-6f));
    snprintf(what, sizeof what, "add_rms_norm x (%lld rows of %lld)", (long long)n, (long long)d);
    check(what, &x, 1e-5);
    snprintf(what, sizeof what, "add_rms_norm h (%lld rows of %lld)", (long long)n, (long long)d);
    check(what, &h, 1e-5);
    BOTH(C->ops->matmul(C, &a.h, h.h, d, n, ya.h, 96), G->ops->matmul(G, &a.d, h.d, d, n, ya.d, 96));
    snprintf(what, sizeof what, "matmul on the normed rows (%s, %lld rows)", st_type_get(type)->name, (long long)n);
    check(what, &ya, 3e-2);
    st_mm_out ih[3] = {{a.h, ya.h, 96}, {b2.h, yb.h, 64}, {c2.h, yc.h, 32}};
    st_mm_out id[3] = {{a.d, ya.d, 96}, {b2.d, yb.d, 64}, {c2.d, yc.d, 32}};
    BOTH(C->ops->matmul_many(C, h.h, d, n, ih, 3), G->ops->matmul_many(G, h.d, d, n, id, 3));
    check("matmul_many: the first", &ya, 3e-2);
    check("matmul_many: a second type", &yb, 3e-2);
    check("matmul_many: the third", &yc, 3e-2);
    BOTH(C->ops->swiglu_ffn(C, &g.h, &u.h, &dn.h, h.h, d, n, mid.h, tmp.h, out.h, d),
         G->ops->swiglu_ffn(G, &g.d, &u.d, &dn.d, h.d, d, n, mid.d, tmp.d, out.d, d));
    snprintf(what, sizeof what, "swiglu_ffn (%s, %lld rows, ff %lld)", st_type_get(type)->name, (long long)n, (long long)ff);
    check(what, &out, 3e-2);
    buf *all[] = {&x, &r, &w, &h, &ya, &yb, &yc, &mid, &tmp, &out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) drop(all[i]);
}

/* A block's gated output into its product: attention's o * sigmoid(g) per head, the GDN's
 * RMSNorm(o) * silu(z) (and qwen4exp's sigmoid), then W_out. */
static void test_gated_outputs(int64_t n, int64_t heads, int64_t hd, uint32_t type) {
    char what[96];
    int64_t K = heads * hd;
    buf o = mk(n * K, 1.0f), qg = mk(n * 2 * K, 1.0f), z = mk(n * K, 1.0f), w = mk(hd, 1.0f), y = mk(n * 80, 0);
    wmat wo = mkw(type, 80, K);
    st_cuda_backend_begin(&gpu, 0, 0, NULL);
    BOTH(C->ops->pointwise(C, ST_PW_MUL_SIGMOID, o.h, hd, qg.h + hd, 2 * hd, o.h, hd, n * heads, hd, &wo.h),
         G->ops->pointwise(G, ST_PW_MUL_SIGMOID, o.d, hd, qg.d + hd, 2 * hd, o.d, hd, n * heads, hd, &wo.d));
    snprintf(what, sizeof what, "mul_sigmoid gate (%lld rows, %lld x %lld)", (long long)n, (long long)heads, (long long)hd);
    check(what, &o, 1e-5);
    BOTH(C->ops->matmul(C, &wo.h, o.h, K, n, y.h, 80), G->ops->matmul(G, &wo.d, o.d, K, n, y.d, 80));
    check("  its product", &y, 3e-2);
    for (int sig = 0; sig < 2; sig++) {
        BOTH(C->ops->gated_norm(C, o.h, w.h, z.h, n * heads, hd, 1e-6f, sig, &wo.h),
             G->ops->gated_norm(G, o.d, w.d, z.d, n * heads, hd, 1e-6f, sig, &wo.d));
        snprintf(what, sizeof what, "gated_norm %s (%lld rows)", sig ? "sigmoid" : "silu", (long long)n);
        check(what, &o, 1e-5);
        BOTH(C->ops->matmul(C, &wo.h, o.h, K, n, y.h, 80), G->ops->matmul(G, &wo.d, o.d, K, n, y.d, 80));
        check("  its product", &y, 3e-2);
    }
    buf *all[] = {&o, &qg, &z, &w, &y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) drop(all[i]);
}

/* The conv with SiLU and the l2 norm of the q and k heads, the state carried; on a side branch. */
static void test_conv_l2(int64_t n, int64_t n_k, int64_t dk) {
    char what[96];
    int64_t C_ = 2 * n_k * dk + 2 * n_k * dk, K = 4;
    buf m = mk(n * C_, 1.0f), w = mk(C_ * K, 0.5f), st = mk(C_ * (K - 1), 1.0f), out = mk(n * C_, 0);
    st_cuda_backend_begin(&gpu, 0, 0, NULL);
    int sc = C->ops->fork(C, n), sg = G->ops->fork(G, n);
    BOTH(C->ops->conv1d_l2(C, m.h, w.h, st.h, out.h, n, C_, K, 2 * n_k, dk, 1e-6f),
         G->ops->conv1d_l2(G, m.d, w.d, st.d, out.d, n, C_, K, 2 * n_k, dk, 1e-6f));
    C->ops->unfork(C, sc);
    G->ops->unfork(G, sg);
    C->ops->join(C, sc);
    G->ops->join(G, sg);
    snprintf(what, sizeof what, "conv1d_l2 out (%lld rows, %s)", (long long)n, sg ? "side stream" : "in order");
    check(what, &out, 1e-4);
    check("  its state", &st, 1e-5);
    buf *all[] = {&m, &w, &st, &out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) drop(all[i]);
}

/* Rows apart and moved down, scale, the l2 norm of heads. */
static void test_rows(void) {
    buf a = mk(9 * 40, 1.0f), b = mk(9 * 24, 0);
    st_cuda_backend_begin(&gpu, 0, 0, NULL);
    BOTH(C->ops->copy_rows(C, b.h, 24, a.h + 3, 40, 17, 9), G->ops->copy_rows(G, b.d, 24, a.d + 3, 40, 17, 9));
    check("copy_rows strided", &b, 0);
    BOTH(C->ops->copy_rows(C, a.h, 40, a.h + 5 * 40, 40, 40, 4), G->ops->copy_rows(G, a.d, 40, a.d + 5 * 40, 40, 40, 4));
    check("copy_rows moved down", &a, 0);
    BOTH(C->ops->scale(C, a.h, 40, 9, 33, 0.25f), G->ops->scale(G, a.d, 40, 9, 33, 0.25f));
    check("scale", &a, 1e-6);
    BOTH(C->ops->l2_norm_heads(C, a.h, 40, 9, 3, 8, 1e-6f), G->ops->l2_norm_heads(G, a.d, 40, 9, 3, 8, 1e-6f));
    check("l2_norm_heads", &a, 1e-5);
    drop(&a);
    drop(&b);
}

int main(void) {
    if (st_cuda_device_count() <= 0) {
        fprintf(stderr, "skipped: no CUDA device\n");
        return 77;
    }
    GPU(st_cuda_open(0, &cu));
    GPU(st_cuda_backend_init(&gpu, cu, 4096));
    mm_scratch = malloc(st_matmul_scratch_size(ST_TYPE_Q4_K, 4096, 64) + 64);
    C = st_cpu_backend_init(&cpu, NULL, mm_scratch);
    G = &gpu.be;
    test_norm_products(1, 2048, 512, ST_TYPE_Q4_K);
    test_norm_products(5, 1024, 768, ST_TYPE_Q6_K);
    test_norm_products(8, 512, 256, ST_TYPE_Q8_0);
    test_norm_products(20, 512, 256, ST_TYPE_Q4_K);   /* prompt-sized: the plain products */
    test_gated_outputs(1, 32, 128, ST_TYPE_Q4_K);
    test_gated_outputs(3, 16, 256, ST_TYPE_Q8_0);
    test_gated_outputs(12, 4, 64, ST_TYPE_Q4_K);
    test_conv_l2(1, 16, 128);
    test_conv_l2(7, 2, 64);
    test_rows();
    printf("cuda_table_harness: %d passed, %d failed\n", n_pass, n_fail);
    st_cuda_backend_free(&gpu);
    st_cuda_close(cu);
    free(mm_scratch);
    return n_fail ? 1 : 0;
}
