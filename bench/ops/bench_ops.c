/* bench_ops.c: the non-matmul CPU ops at the shapes of the target qwen35moe model (n_embd 1024,
 * GDN 8 key / 16 value heads of 64, attention 8 q / 2 kv heads of 128, f16 KV cache), for each
 * variant (forced with st_cpu_limit) and 1 and 2 threads. Prints a markdown table of the median
 * time per call and per token. It exists to choose between the GDN forms and to see what share of
 * the prefill / decode budget the ops take; it asserts nothing.
 *
 *   bench_ops [--repeats R] [--threads N] [--attn] [--qsa]   (N = the largest thread count tried, default 2)
 *
 * --attn: attention only, for prompt chunks of 512 after 0, 4096 and 16384 cached positions and
 * for decode after 16384, with the attention FLOPs per second (4 hd per query head and visible
 * cell: q.k and the weighted sum of v).
 *
 * --qsa: qwen4exp's QSA decode step at the flash preset's shape (24 q / 2 kv heads of 256, f16 KV;
 * indexer 4 heads of 128, r = 4, W = 2051) after 2047, 4096, 16384 and 65536 cached positions:
 * the block scores with the selection, and the attention over the selected cells, apart. The
 * block keys are random (scores in no order: few heap replacements) or made so that the scores
 * grow with the position (every block replaces the heap's top: the selection's worst case). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "base/clock.h"
#include "base/cpu.h"
#include "base/pool.h"
#include "quant/types.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static float *rand_buf(size_t n, float s) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = s * frand();
    return x;
}

static int repeats = 7;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef void (*bench_fn)(void *ctx, st_pool *pool);

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Median wall time per call; *cpu gets the smallest process CPU time per call (all threads): on a
 * machine shared with other work that is the figure least disturbed by it. */
static double median_time(bench_fn fn, void *ctx, st_pool *pool, double *cpu) {
    double t[64], c[64];
    fn(ctx, pool);   /* warm-up */
    for (int r = 0; r < repeats; r++) {
        double t0 = st_now(), c0 = cpu_seconds();
        fn(ctx, pool);
        t[r] = st_now() - t0;
        c[r] = cpu_seconds() - c0;
    }
    qsort(t, (size_t)repeats, sizeof(double), cmp_d);
    qsort(c, (size_t)repeats, sizeof(double), cmp_d);
    *cpu = c[0];
    return t[repeats / 2];
}

/* ---- GDN ---- */
typedef struct gdn_ctx {
    st_gdn_args a;
    float *state0;
    size_t state_bytes;
    int form;   /* 0 step, 1 chunked */
    void *scratch;
} gdn_ctx;

static void run_gdn(void *p, st_pool *pool) {
    gdn_ctx *c = p;
    memcpy(c->a.state, c->state0, c->state_bytes);
    if (c->form) st_op_gdn_chunked(pool, &c->a, c->scratch);
    else st_op_gdn_step(pool, &c->a);
}

/* ---- attention: the target's 8 q / 2 kv heads of 128, f16 cache, T tokens ending at cell n_kv ---- */
typedef struct attn_ctx { st_attn_args a; double cells; } attn_ctx;
static void run_attn(void *p, st_pool *pool) { st_op_attention(pool, &((attn_ctx *)p)->a); }

static attn_ctx attn_case(int64_t T, int64_t n_kv) {
    const int64_t H = 8, Hkv = 2, hd = 128, row = Hkv * hd;
    float *src = rand_buf((size_t)(n_kv * row), 1.0f);
    uint16_t *kc = malloc(2 * (size_t)(n_kv * row)), *vc = malloc(2 * (size_t)(n_kv * row));
    st_op_kv_store(ST_TYPE_F16, kc, row, 0, src, row, n_kv);
    st_op_kv_store(ST_TYPE_F16, vc, row, 0, src, row, n_kv);
    free(src);
    float *q = rand_buf((size_t)(T * H * 2 * hd), 1.0f), *out = malloc(sizeof(float) * (size_t)(T * H * hd));
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)T);
    double cells = 0;
    for (int64_t t = 0; t < T; t++) {
        pos[t] = (int32_t)(n_kv - T + t);
        cells += (double)pos[t] + 1;
    }
    return (attn_ctx){ { .q = q, .ldq_tok = H * 2 * hd, .ldq_head = 2 * hd, .k_cache = kc, .v_cache = vc,
                         .kv_type = ST_TYPE_F16, .pos = pos, .n_tok = T, .n_head = H, .n_head_kv = Hkv,
                         .head_dim = hd, .n_kv = n_kv, .scale = 1.0f / sqrtf((float)hd), .out = out,
                         .ldo_tok = H * hd }, cells };
}

static void attn_case_free(attn_ctx *c) {
    free((void *)c->a.q); free((void *)c->a.k_cache); free((void *)c->a.v_cache); free((void *)c->a.pos);
    free(c->a.out);
}

/* ---- small ops ---- */
typedef struct small_ctx { float *x, *y, *w, *state; int64_t T; int op; } small_ctx;
static void run_small(void *p, st_pool *pool) {
    small_ctx *c = p;
    switch (c->op) {
    case 0: st_op_rms_norm(pool, c->x, 1024, c->w, c->y, 1024, c->T, 1024, 1e-6f); break;
    case 1: st_op_conv1d(pool, c->x, 2048, c->w, c->state, c->y, 2048, c->T, 2048, 4, 1); break;
    case 2: st_op_swiglu(pool, c->x, 1024, c->x + 512, 1024, c->y, 512, c->T * 8, 512); break;
    case 3: st_op_l2_norm(pool, c->x, 64, c->y, 64, c->T * 16, 64, 1e-6f); break;
    }
}

static const char *level_name(int lvl) { return lvl == 0 ? "scalar" : lvl == 1 ? "avx2" : "avx512"; }

/* Attention at depth: chunks of 512 and a decode row after n cached positions. */
static void bench_attn_depth(st_pool *pool, int nth) {
    const int64_t cases[5][2] = { { 512, 0 }, { 512, 4096 }, { 512, 16384 }, { 1, 16384 }, { 4096, 0 } };
    for (int ci = 0; ci < 5; ci++) {
        const int64_t T = cases[ci][0];
        attn_ctx c = attn_case(T, cases[ci][1] + T);
        for (int lvl = 1; lvl < 3; lvl++) {
            st_cpu_limit(lvl == 2 ? 3 : lvl);
            double cpu, t = median_time(run_attn, &c, pool, &cpu);
            printf("| attention f16 | T=%ld after %ld | %s | %d | %.3f | %.3f | %.2f | %.1f GFLOP/s |\n", (long)T,
                   (long)cases[ci][1], level_name(lvl), nth, t * 1e3, cpu * 1e3, t * 1e6 / (double)T,
                   4.0 * 128 * 8 * c.cells / t / 1e9);
        }
        st_cpu_limit(3);
        attn_case_free(&c);
    }
}

/* ---- QSA decode: qwen4exp flash's shapes ---- */
typedef struct qsa_ctx {
    st_qsa_args s;
    st_attn_cells_args c;
    void *scratch;
} qsa_ctx;
static void run_qsa_select(void *p, st_pool *pool) {
    qsa_ctx *c = p;
    st_op_qsa_select(pool, &c->s, c->scratch);
}
static void run_qsa_cells(void *p, st_pool *pool) { st_op_attention_cells(pool, &((qsa_ctx *)p)->c); }

static void bench_qsa(st_pool *pool, int nth) {
    const int64_t H = 24, Hkv = 2, hd = 256, row = Hkv * hd, Hi = 4, dim = 128, r = 4, W = 2048 + r - 1;
    const int64_t depths[4] = { 2047, 4096, 16384, 65536 };
    for (int di = 0; di < 4; di++)
        for (int grow = 0; grow < 2; grow++) {
            const int64_t n_ctx = depths[di] + 1, nb = n_ctx / r;
            float *blocks = rand_buf((size_t)((nb + 1) * dim), 1.0f), *q = rand_buf((size_t)(Hi * dim), 1.0f);
            if (grow) /* K_b = q_0 scaled by b: sigma_b = relu(b |q_0|^2) + ... grows with b */
                for (int64_t b = 0; b <= nb; b++)
                    for (int64_t i = 0; i < dim; i++) blocks[b * dim + i] = q[i] * (float)(b + 1) / (float)nb;
            float *src = rand_buf((size_t)(n_ctx * row), 1.0f);
            uint16_t *kc = malloc(2 * (size_t)(n_ctx * row)), *vc = malloc(2 * (size_t)(n_ctx * row));
            st_op_kv_store(ST_TYPE_F16, kc, row, 0, src, row, n_ctx);
            st_op_kv_store(ST_TYPE_F16, vc, row, 0, src, row, n_ctx);
            free(src);
            float *qa = rand_buf((size_t)(H * hd), 1.0f), *out = malloc(sizeof(float) * (size_t)(H * hd));
            int32_t pos = (int32_t)depths[di], *cells = malloc(sizeof(int32_t) * (size_t)W), n_cells = 0;
            qsa_ctx c = { .s = { .q = q, .ld_q = Hi * dim, .n_head = Hi, .dim = dim, .blocks = blocks, .pos = &pos,
                                 .n_tok = 1, .r = r, .width = W, .n_ctx = n_ctx, .cells = cells, .ld_cells = W,
                                 .n_cells = &n_cells },
                          .scratch = malloc(st_qsa_scratch_size(nth, n_ctx, r, W)) };
            c.c = (st_attn_cells_args){ .a = { .q = qa, .ldq_tok = H * hd, .ldq_head = hd, .k_cache = kc, .v_cache = vc,
                                               .kv_type = ST_TYPE_F16, .pos = &pos, .n_tok = 1, .n_head = H,
                                               .n_head_kv = Hkv, .head_dim = hd, .n_kv = n_ctx,
                                               .scale = 1.0f / sqrtf((float)hd), .out = out, .ldo_tok = H * hd },
                                        .cells = cells, .ld_cells = W, .n_cells = &n_cells };
            double cpu, t = median_time(run_qsa_select, &c, pool, &cpu);
            printf("| qsa select | after %ld, scores %s | avx512 | %d | %.3f | %.3f | %.2f |\n", (long)depths[di],
                   grow ? "growing" : "random", nth, t * 1e3, cpu * 1e3, t * 1e6);
            if (!grow) {
                t = median_time(run_qsa_cells, &c, pool, &cpu);
                printf("| qsa attention over %d cells | after %ld | avx512 | %d | %.3f | %.3f | %.2f |\n", (int)n_cells,
                       (long)depths[di], nth, t * 1e3, cpu * 1e3, t * 1e6);
            }
            free(blocks); free(q); free(kc); free(vc); free(qa); free(out); free(cells); free(c.scratch);
        }
}

int main(int argc, char **argv) {
    int max_threads = 2, attn_only = 0, qsa_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) max_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--attn")) attn_only = 1;
        else if (!strcmp(argv[i], "--qsa")) qsa_only = 1;
    }
    if (repeats < 1) repeats = 1;
    if (repeats > 64) repeats = 64;
    char cpu[256];
    st_cpu_describe(cpu, sizeof cpu);
    printf("# bench_ops\n\nCPU features: %s; median of %d runs.\n\n", cpu, repeats);
    printf("| op | shape | variant | threads | ms/call (median wall) | cpu ms/call (min) | us/token (wall) |\n|---|---|---|---|---|---|---|\n");

    for (int nth = 1; nth <= max_threads; nth++) {
        st_pool *pool = NULL;
        if (st_pool_create(nth, &pool) != ST_OK) return 1;

        if (qsa_only) {
            bench_qsa(pool, nth);
            st_pool_destroy(pool);
            continue;
        }
        if (attn_only) {
            bench_attn_depth(pool, nth);
            st_pool_destroy(pool);
            continue;
        }
        /* GDN: 16 v-heads of 64, 8 k-heads; prefill 512 and decode 1 */
        const int64_t n_k = 8, n_v = 16, d = 64, C = 2 * n_k * d + n_v * d;
        const int64_t Ts[2] = { 512, 1 };
        for (int ti = 0; ti < 2; ti++) {
            const int64_t T = Ts[ti];
            float *qkv = rand_buf((size_t)(T * C), 1.0f), *g = rand_buf((size_t)(T * n_v), 0.5f);
            float *beta = rand_buf((size_t)(T * n_v), 0.5f), *out = malloc(sizeof(float) * (size_t)(T * n_v * d));
            for (int64_t i = 0; i < T * n_v; i++) { g[i] = -fabsf(g[i]); beta[i] = fabsf(beta[i]); }
            for (int64_t t = 0; t < T; t++)   /* rough L2 normalisation of q and k */
                for (int64_t i = 0; i < 2 * n_k * d; i++) qkv[t * C + i] *= 0.2f;
            gdn_ctx c;
            memset(&c, 0, sizeof c);
            c.state_bytes = sizeof(float) * (size_t)(n_v * d * d);
            c.state0 = rand_buf((size_t)(n_v * d * d), 0.1f);
            c.a = (st_gdn_args){ .n_tok = T, .n_k = n_k, .n_v = n_v, .d = d, .head_map = ST_GDN_TILED,
                                 .q = qkv, .k = qkv + n_k * d, .ld_q = C, .ld_k = C, .v = qkv + 2 * n_k * d,
                                 .ld_v = C, .g = g, .beta = beta, .state = malloc(c.state_bytes),
                                 .out = out, .ld_out = n_v * d, .scale = 0.125f };
            c.scratch = malloc(st_gdn_chunked_scratch_size(nth, d));
            for (int form = 0; form < 2; form++)
                for (int lvl = 0; lvl < 3; lvl++) {
                    if (form == 1 && lvl == 1) continue;   /* the chunked form has no AVX2 kernel */
                    st_cpu_limit(lvl == 2 ? 3 : lvl);
                    c.form = form;
                    double cpu, t = median_time(run_gdn, &c, pool, &cpu);
                    printf("| gdn %s | T=%ld n_v=16 d=64 | %s | %d | %.3f | %.3f | %.2f |\n", form ? "chunked" : "step",
                           (long)T, level_name(lvl), nth, t * 1e3,
                           cpu * 1e3, t * 1e6 / (double)T);
                }
            st_cpu_limit(3);
            free(qkv); free(g); free(beta); free(out); free(c.state0); free(c.a.state); free(c.scratch);
        }

        /* attention: prefill 512 from empty, decode at several context lengths */
        const int64_t cases[4][2] = { { 512, 512 }, { 1, 512 }, { 1, 4096 }, { 1, 32768 } };
        for (int ci = 0; ci < 4; ci++) {
            const int64_t T = cases[ci][0], n_kv = cases[ci][1];
            attn_ctx c = attn_case(T, n_kv);
            for (int lvl = 0; lvl < 3; lvl++) {
                if (lvl == 0 && n_kv > 4096) continue;
                st_cpu_limit(lvl == 2 ? 3 : lvl);
                double cpu, t = median_time(run_attn, &c, pool, &cpu);
                printf("| attention f16 | T=%ld n_kv=%ld | %s | %d | %.3f | %.3f | %.2f |\n", (long)T, (long)n_kv,
                       level_name(lvl), nth, t * 1e3, cpu * 1e3, t * 1e6 / (double)T);
            }
            st_cpu_limit(3);
            attn_case_free(&c);
        }

        /* small ops at prefill 512 */
        small_ctx s = { rand_buf(512 * 4096, 1.0f), rand_buf(512 * 4096, 1.0f), rand_buf(8192, 1.0f),
                        rand_buf(2048 * 3, 1.0f), 512, 0 };
        const char *names[4] = { "rms_norm 1024", "conv1d silu C=2048 K=4", "swiglu 8x512", "l2_norm 16x64" };
        for (int op = 0; op < 4; op++)
            for (int lvl = 0; lvl < 3; lvl++) {
                st_cpu_limit(lvl == 2 ? 3 : lvl);
                s.op = op;
                double cpu, t = median_time(run_small, &s, pool, &cpu);
                printf("| %s | T=512 | %s | %d | %.3f | %.3f | %.2f |\n", names[op], level_name(lvl), nth, t * 1e3,
                       cpu * 1e3, t * 1e6 / 512.0);
            }
        st_cpu_limit(3);
        free(s.x); free(s.y); free(s.w); free(s.state);
        st_pool_destroy(pool);
    }
    return 0;
}
