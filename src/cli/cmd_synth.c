/* cmd_synth.c: `strata synth OUT.gguf --arch A --preset P --type T [--tokenizer tokenizer.json]
 * [--seed S] [-t THREADS] [--qsa-budget B] [--qsa-ratio R] [--route-skew S]`: writes a random-weight model in
 * llama.cpp's converter layout (the plan is synth_plan.c, the writing synth_write.c). Prints one
 * summary line when done. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli/cli.h"
#include "cli/synth.h"
#include "quant/types.h"

static void synth_usage(FILE *f) {
    fprintf(f,
            "usage: strata synth OUT.gguf --arch A --preset P --type T [--tokenizer tokenizer.json] [--seed S] [-t THREADS]\n"
            "                    [--random-blocks] [--qsa-budget B] [--qsa-ratio R] [--route-skew S]\n"
            "  --arch      qwen35moe | qwen35 | qwen3next | qwen3moe | qwen3 | qwen4exp\n"
            "  --preset    tiny (tests) | small (issue 3's 2.0 B speed shape) | a3b (Qwen3.5-35B-A3B's shape)\n"
            "              | flash (qwen4exp only: Qwen3.8-Flash-Next's widths in 4 layers, a 1 GiB PLE table)\n"
            "  --type      any weight type, by ggml's name: f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, iq4_xs, tq1_0,\n"
            "              mxfp4, q1_0, ... (the matrices' type; norms, routers, conv and SSM vectors stay f32)\n"
            "  --tokenizer a Hugging Face tokenizer.json; without it a small built-in byte-level BPE is written\n"
            "  --seed      the random seed (default 1): the same seed gives the same bytes\n"
            "  -t          threads (default: one per core)\n"
            "  --random-blocks  draw the matrices' blocks directly (same spread, centred) where the type has a\n"
            "              block generator (q4_k: about 50x faster than quantizing normal deviates, for speed\n"
            "              runs on the a3b shape)\n"
            "  --qsa-budget, --qsa-ratio  qwen4exp: the QSA budget B (indexer.top_k) and block ratio r of the\n"
            "              full-attention layers instead of the preset's (tiny: 16 and 3; flash: 2048 and 4)\n"
            "  --route-skew S  MoE: route unevenly, as trained models do: router row e is drawn with its std times\n"
            "              e^(S z_e), z_e ~ N(0, 1), so a few experts per layer win most picks (S = 0.3: the top\n"
            "              quarter of 256 experts takes about 63%% of them); default 0, the file unchanged\n");
}

/* A type by its ggml name, any case ("q4_K", "q4_k", "Q4_K"). */
static int parse_type(const char *s, uint32_t *type) {
    for (uint32_t t = 0; t < ST_TYPE_COUNT; t++) {
        const st_type_info *ti = st_type_get(t);
        if (ti && !strcasecmp(s, ti->name)) { *type = t; return 1; }
    }
    return 0;
}

int cmd_synth(int argc, char **argv) {
    synth_options o = {.seed = 1, .n_threads = 0, .progress = isatty(2)};
    const char *type_name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { synth_usage(stdout); return 0; }
        else if (!strcmp(a, "--arch") && has_value) o.arch = argv[++i];
        else if (!strcmp(a, "--preset") && has_value) o.preset = argv[++i];
        else if (!strcmp(a, "--type") && has_value) type_name = argv[++i];
        else if (!strcmp(a, "--tokenizer") && has_value) o.tokenizer = argv[++i];
        else if (!strcmp(a, "--seed") && has_value) o.seed = strtoull(argv[++i], NULL, 0);
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && has_value) o.n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--random-blocks")) o.random_blocks = 1;
        else if (!strcmp(a, "--qsa-budget") && has_value) o.qsa_budget = strtoll(argv[++i], NULL, 0);
        else if (!strcmp(a, "--qsa-ratio") && has_value) o.qsa_ratio = strtoll(argv[++i], NULL, 0);
        else if (!strcmp(a, "--route-skew") && has_value) o.route_skew = strtof(argv[++i], NULL);
        else if (a[0] != '-' && !o.out) o.out = a;
        else {
            fprintf(stderr, "strata synth: unexpected argument '%s'\n", a);
            synth_usage(stderr);
            return 2;
        }
    }
    if (!o.out || !o.arch || !o.preset || !type_name) {
        fprintf(stderr, "strata synth: OUT.gguf, --arch, --preset and --type are required\n");
        synth_usage(stderr);
        return 2;
    }
    if (!(o.route_skew >= 0 && o.route_skew <= 4)) {
        fprintf(stderr, "strata synth: --route-skew %g: expected 0 to 4\n", (double)o.route_skew);
        return 2;
    }
    if (!parse_type(type_name, &o.type)) {
        fprintf(stderr, "strata synth: unknown --type '%s' (a ggml type name: f32, q8_0, q4_k, ...)\n", type_name);
        return 2;
    }
    double t0 = st_now();
    synth_plan plan;
    if (synth_write(&o, &plan) != ST_OK) return cli_fail("synth");
    double dt = st_now() - t0;
    uint64_t bytes = synth_plan_bytes(&plan);
    printf("%s: %s %s %s, vocab %lld, %d tensors, %.3f B parameters, %.2f GiB of tensor data, %.1f s (%.0f MiB/s)\n",
           o.out, o.arch, o.preset, type_name, (long long)plan.hp.n_vocab, plan.n_tensors,
           (double)synth_plan_params(&plan) / 1e9, (double)bytes / (1 << 30), dt, (double)bytes / (1 << 20) / (dt > 0 ? dt : 1));
    synth_plan_free(&plan);
    return 0;
}
