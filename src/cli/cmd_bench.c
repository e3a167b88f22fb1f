/* cmd_bench.c: `strata bench [-m MODEL] [-p 512] [-n 128] [-d 0] [-r 3] [-t THREADS] [--json]`; with
 * --spec mtp|ngram, speculative against plain decoding instead (bench_spec.c).
 *
 * Prompt speed: P token ids fed through the prompt chain (chunks of --prefill). Decode speed: N
 * tokens fed one at a time (as llama-bench's tg test). Both start from a sequence that holds D
 * tokens (as llama-bench's -d): the D ids are fed once, a checkpoint taken there, and each run
 * cuts back to it (for an attention-only model the cut just forgets the later cells). Each test is
 * repeated R times after one warm-up; the median is reported. Then the distance to the physical
 * limit: decode reads st_model_decode_bytes() of weights per token (every dense weight, k/E of
 * the experts), so bytes/token x tokens/s over the read bandwidth measured here, in the same
 * command and with the same threads, is decode's share of the memory bandwidth. The probe runs
 * before, between and after the tests, 5 passes each, and its median is the figure: on a shared
 * machine single passes swing by 2x. */
#include <immintrin.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/cpu.h"
#include "base/pool.h"
#include "cli/cli.h"
#include "strata.h"

typedef struct bench_flags {
    int n_prompt, n_gen, n_depth, reps, json;
    const char *prompts;
} bench_flags;

#define OWN(field) offsetof(bench_flags, field)
static const cli_flag bench_own[] = {
    {"-p", NULL, "P", CLI_INT, OWN(n_prompt), 0, 1 << 20, NULL, NULL, "prompt tokens (default 512; 0 = skip)", 0},
    {"-n", NULL, "N", CLI_INT, OWN(n_gen), 0, 1 << 20, NULL, NULL,
     "decoded tokens (default 128; 0 = skip); with --spec, at most N per prompt\n(default 256)", 0},
    {"-d", NULL, "D", CLI_INT, OWN(n_depth), 0, 1 << 22, NULL, NULL,
     "tokens already in the sequence before each prompt and decode test (default 0)", 0},
    {"-r", NULL, "R", CLI_INT, OWN(reps), 1, 100, NULL, NULL, "repeats (default 3)", 0},
    {"--json", NULL, NULL, CLI_SWITCH, OWN(json), 1, 0, NULL, NULL, "one JSON object on stdout instead of the table", 0},
    {"--prompts", NULL, "FILE", CLI_STRING, OWN(prompts), 0, 0, NULL, NULL,
     "with --spec: one prompt per line, \\n for a newline (default: one built-in\nchat prompt)", 0},
    {NULL},
};

static const cli_command bench_command = {
    "bench", "[-m MODEL] [-p 512] [-n 128] [-d 0] [-r 3] [options]",
    "Prints prompt (pp) and decode (tg) tokens/s, the median of R runs after a warm-up, and\n"
    "decode's share of the memory read bandwidth measured in the same command (on a GPU, the GPU\n"
    "memory's). The context is what the longer test needs, or --ctx if larger.\n"
    "With --spec mtp|ngram: speculative against plain decoding on the same prompts, alternating,\n"
    "R rounds (greedy unless --temp): tok/s of both, the speed-up, tokens per trunk forward, the\n"
    "acceptance at each draft position; it fails if the two texts differ.",
    CLI_MODEL | CLI_SESSION | CLI_SAMPLING | CLI_SPEC, bench_own, 0};

/* ---- read-bandwidth probe: every thread streams its share of a buffer far larger than caches ---- */

typedef struct probe_job {
    const char *buf;
    size_t size;
    unsigned long long sink[64]; /* keeps the reads from being optimised away */
} probe_job;

__attribute__((target("avx2"))) static unsigned long long read_avx2(const char *p, size_t n) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t o = 0; o + 128 <= n; o += 128) {
        s0 = _mm256_add_epi64(s0, _mm256_load_si256((const __m256i *)(p + o)));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256((const __m256i *)(p + o + 32)));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256((const __m256i *)(p + o + 64)));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256((const __m256i *)(p + o + 96)));
    }
    unsigned long long t[4];
    _mm256_storeu_si256((__m256i *)t, _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
    return t[0] + t[1] + t[2] + t[3];
}

static unsigned long long read_plain(const char *p, size_t n) {
    const unsigned long long *q = (const unsigned long long *)p;
    unsigned long long s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= n / 8; i += 4) {
        s0 += q[i];
        s1 += q[i + 1];
        s2 += q[i + 2];
        s3 += q[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

static void probe_worker(void *ctx, int ith, int nth) {
    probe_job *job = ctx;
    long b, e;
    st_split((long)(job->size / 4096), ith, nth, &b, &e);
    const char *p = job->buf + (size_t)b * 4096;
    size_t n = (size_t)(e - b) * 4096;
    job->sink[ith % 64] += st_cpu()->avx2 ? read_avx2(p, n) : read_plain(p, n);
}

#define PROBE_PASSES 5
#define PROBE_ROUNDS 3

/* PROBE_PASSES passes over 256 MiB (far past any last-level cache) into gbs[], in GB/s. */
static void probe_bandwidth(st_pool *pool, double *gbs) {
    probe_job job = {.size = (size_t)256 << 20};
    char *buf = aligned_alloc(4096, job.size);
    for (int r = 0; r < PROBE_PASSES; r++) gbs[r] = 0;
    if (!buf) return;
    memset(buf, 1, job.size);
    job.buf = buf;
    for (int r = 0; r < PROBE_PASSES; r++) {
        double t0 = st_now();
        st_pool_run(pool, probe_worker, &job);
        gbs[r] = (double)job.size / (st_now() - t0) / 1e9;
    }
    free(buf);
}

/* ---- the measurements ---- */

/* The process's resident peak so far (VmHWM), in bytes; 0 where /proc does not say. */
static double peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    double kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
    fclose(f);
    return kib * 1024;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Back to the first depth positions (fed and checkpointed once by fill_depth). */
static int to_depth(st_session *s, int depth) {
    int64_t kept = 0;
    if (depth == 0) st_session_reset(s);
    else if (st_session_cut(s, depth, &kept) != ST_OK || kept != depth) return cli_fail("bench: back to the depth");
    return 0;
}

static int fill_depth(st_session *s, const int32_t *ids, int depth, double *tps) {
    st_session_reset(s);
    *tps = 0;
    if (!depth) return 0;
    double t0 = st_now();
    if (st_session_feed(s, ids, depth, NULL) != ST_OK || st_session_checkpoint(s) != ST_OK) return cli_fail("bench: depth");
    *tps = depth / (st_now() - t0);
    return 0;
}

/* Tokens/s of a prompt of n ids after depth positions. */
static int time_prompt(st_session *s, int depth, const int32_t *ids, int n, double *tps) {
    if (to_depth(s, depth)) return 1;
    double t0 = st_now();
    if (st_session_feed(s, ids, n, NULL) != ST_OK) return cli_fail("bench: prompt");
    *tps = n / (st_now() - t0);
    return 0;
}

/* Tokens/s of n single-token steps after depth positions. */
static int time_decode(st_session *s, int depth, const int32_t *ids, int n, double *tps) {
    if (to_depth(s, depth)) return 1;
    double t0 = st_now();
    for (int i = 0; i < n; i++)
        if (st_session_feed(s, ids + i, 1, NULL) != ST_OK) return cli_fail("bench: decode");
    *tps = n / (st_now() - t0);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    cli_options o;
    cli_options_default(&o);
    bench_flags bf = {.n_prompt = 512, .n_gen = -1, .reps = 3};
    o.sampling.temperature = 0.0f; /* the speculative bench is greedy unless told */
    int prc = cli_parse(&bench_command, argc, argv, &o, &bf);
    if (prc >= 0) return prc;
    int spec = o.spec.mode == ST_SPEC_MTP || o.spec.mode == ST_SPEC_NGRAM;
    if (bf.n_gen < 0) bf.n_gen = spec ? 256 : 128;
    int n_prompt = bf.n_prompt, n_gen = bf.n_gen, depth = bf.n_depth, reps = bf.reps, json = bf.json;
    st_session_params sp = o.session;
    st_model *m;
    if (cli_load_model("bench", &o, &m)) return 1;
    double load_rss = peak_rss();   /* before the session, the probe's buffer and the tests */
    if (spec) {
        cli_bench_spec_opts so = {.session = sp, .sampler = o.sampling, .spec = o.spec, .prompts = bf.prompts,
                                  .n_gen = n_gen > 0 ? n_gen : 1, .reps = reps, .json = json};
        int r = cli_bench_spec(o.model, m, &so);
        st_model_free(m);
        return r;
    }
    int rc = 1;
    int total = depth + (n_prompt > n_gen ? n_prompt : n_gen) + 1;
    if (sp.n_ctx < total) sp.n_ctx = total;
    st_session *s = NULL;
    st_pool *probe_pool = NULL;
    int32_t *ids = malloc((size_t)total * sizeof *ids);
    double *pp = calloc((size_t)reps, sizeof *pp), *tg = calloc((size_t)reps, sizeof *tg);
    if (!ids || !pp || !tg) goto done;
    /* Fixed pseudo-random ids (as llama-bench uses random ones), the same on every run. */
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < total; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (int32_t)(x % (uint64_t)st_model_n_vocab(m));
    }
    if (st_session_new(m, &sp, &s) != ST_OK || st_pool_create(sp.n_threads, &probe_pool) != ST_OK) {
        cli_fail("bench");
        goto done;
    }
    int on_gpu = strcmp(st_model_device(m), "cpu") != 0;
    double probe[PROBE_ROUNDS * PROBE_PASSES];
    if (!on_gpu) probe_bandwidth(probe_pool, probe);
    const int32_t *test_ids = ids + depth;
    double fill_tps;
    if (fill_depth(s, ids, depth, &fill_tps)) goto done;
    /* Warm-up: grows the workspace and touches every weight once. */
    double ignore;
    if (n_prompt && time_prompt(s, depth, test_ids, n_prompt, &ignore)) goto done;
    if (n_gen && time_decode(s, depth, test_ids, n_gen < 8 ? n_gen : 8, &ignore)) goto done;
    for (int r = 0; r < reps; r++) {
        if (n_prompt && time_prompt(s, depth, test_ids, n_prompt, &pp[r])) goto done;
        if (n_gen && time_decode(s, depth, test_ids, n_gen, &tg[r])) goto done;
        if (!on_gpu && r == reps / 2) probe_bandwidth(probe_pool, probe + PROBE_PASSES);
    }
    double pp_med = n_prompt ? median(pp, reps) : 0, tg_med = n_gen ? median(tg, reps) : 0;

    int threads = st_pool_size(probe_pool);
    double bw, bw_lo = 0, bw_hi = 0;
    if (on_gpu) {
        bw = st_model_device_bandwidth(m);
    } else {
        probe_bandwidth(probe_pool, probe + 2 * PROBE_PASSES);
        bw = median(probe, PROBE_ROUNDS * PROBE_PASSES);   /* sorts probe */
        bw_lo = probe[0];
        bw_hi = probe[PROBE_ROUNDS * PROBE_PASSES - 1];
    }
    /* Decode also reads the KV rows of the held positions it attends to (a QSA layer the cells
     * it selects): at depth they are a real share. The mean over the timed steps. */
    double kv_bytes = 0;
    for (int i = 0; i < n_gen; i++) kv_bytes += (double)st_model_decode_kv_bytes(m, sp.kv_f32, depth + i);
    if (n_gen) kv_bytes /= n_gen;
    double bytes = (double)st_model_decode_bytes(m) + kv_bytes;
    double share = bw > 0 ? bytes * tg_med / (bw * 1e9) : 0;
    char cpu[256];
    st_cpu_describe(cpu, sizeof cpu);
    if (json) {
        printf("{\"model\": \"%s\", \"arch\": \"%s\", \"threads\": %d, \"prefill\": %d, \"repeats\": %d, "
               "\"depth\": %d, \"depth_fill_tok_s\": %.2f, "
               "\"pp\": {\"tokens\": %d, \"tok_s\": %.2f}, \"tg\": {\"tokens\": %d, \"tok_s\": %.2f}, "
               "\"weight_bytes\": %llu, \"decode_bytes_per_token\": %.0f, \"read_bandwidth_gb_s\": %.2f, "
               "\"read_bandwidth_range_gb_s\": [%.2f, %.2f], "
               "\"decode_bandwidth_share\": %.4f, \"scratch_bytes\": %llu, \"state_bytes\": %llu, "
               "\"load_peak_rss_bytes\": %.0f, \"cpu\": \"%s\", \"device\": \"%s\"}\n",
               o.model, st_model_arch(m), threads, sp.n_prefill, reps, depth, fill_tps, n_prompt, pp_med, n_gen, tg_med,
               (unsigned long long)st_model_weight_bytes(m), bytes, bw, bw_lo, bw_hi, share,
               (unsigned long long)st_session_scratch_bytes(s), (unsigned long long)st_session_state_bytes(s), load_rss,
               cpu, st_model_device(m));
    } else {
        double wb = (double)st_model_weight_bytes(m);
        printf("model    %s (%s), %.2f GiB of weights, %d threads, median of %d\n", o.model, st_model_arch(m),
               wb / (1 << 30), threads, reps);
        if (load_rss > 0)
            printf("memory   resident peak after the load %.2f GiB (%.2fx the weights)\n", load_rss / (1 << 30),
                   wb > 0 ? load_rss / wb : 0);
        if (depth) printf("depth    %d tokens before each test (filled at %.2f tok/s)\n", depth, fill_tps);
        const char *at = depth ? " @ depth" : "";
        if (n_prompt) printf("pp%-6d %8.2f tok/s%s\n", n_prompt, pp_med, at);
        if (n_gen) printf("tg%-6d %8.2f tok/s%s\n", n_gen, tg_med, at);
        if (on_gpu)
            printf("device   %s\ndecode reads %.1f MiB/token; GPU memory read bandwidth %.0f GB/s (probe); decode uses %.1f%% of it\n",
                   st_model_device(m), bytes / (1 << 20), bw, 100 * share);
        else
            printf("decode reads %.1f MiB/token (%.1f of them KV cache); read bandwidth %.2f GB/s (median of %d probe passes, %.1f-%.1f, %d threads); "
                   "decode uses %.1f%% of it\n",
                   bytes / (1 << 20), kv_bytes / (1 << 20), bw, PROBE_ROUNDS * PROBE_PASSES, bw_lo, bw_hi, threads, 100 * share);
        if (on_gpu && strstr(st_model_device_plan(m), "host memory")) {
            /* tiers: the bus the experts in host memory are read over */
            double mapped = 0, copy = 0;
            st_model_device_bus_bandwidth(m, (size_t)1 << 30, &mapped, &copy);
            printf("tiers    %s\nbus      kernels reading pinned host memory %.1f GB/s, host-to-device copies %.1f GB/s (probe)\n",
                   st_model_device_plan(m), mapped, copy);
        }
        printf("scratch %.1f MiB (chunks of %d rows), state %.1f MiB (%lld positions)\n",
               (double)st_session_scratch_bytes(s) / (1 << 20), sp.n_prefill, (double)st_session_state_bytes(s) / (1 << 20),
               (long long)st_session_n_ctx(s));
    }
    rc = 0;
done:
    if (probe_pool) st_pool_destroy(probe_pool);
    st_session_free(s);
    free(ids);
    free(pp);
    free(tg);
    st_model_free(m);
    return rc;
}
