/* cmd_run.c: `strata run -m MODEL -p TEXT [-n N] [sampling options]`: tokenizes the prompt, feeds
 * it through the prompt chain, then samples and streams the continuation to stdout until N tokens
 * or an end-of-generation token (cli_generate, generate.c). Timings go to stderr. Also
 * cli_load_model, shared by the engine commands (run, eval, bench, chat). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "cli/cli.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "strata.h"
#include "text/tokenizer.h"

int cli_copy_weights = -1;
int cli_device = ST_DEVICE_AUTO;

int cli_parse_device(const char *v) {
    if (!strcmp(v, "cpu")) cli_device = ST_DEVICE_CPU;
    else if (!strcmp(v, "cuda")) cli_device = ST_DEVICE_CUDA;
    else if (!strcmp(v, "auto")) cli_device = ST_DEVICE_AUTO;
    else {
        fprintf(stderr, "strata: --device %s: expected cpu, cuda or auto\n", v);
        return 1;
    }
    return 0;
}

int cli_load_model(const char *path, struct st_model **out) {
    st_model_params mp = st_model_default_params();
    mp.copy_weights = cli_copy_weights;
    mp.device = cli_device;
    if (st_model_load(path, &mp, out) != ST_OK) return cli_fail("cannot load the model");
    if (!st_model_has_tokenizer(*out))
        st_warn("%s: tokenizer not supported (%s); only token ids can be used", path, st_model_tokenizer_error(*out));
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: strata run [-m MODEL] -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S]\n"
            "                  [--repeat-penalty R] [--prefill N] [-t THREADS] [--ctx N] [--kv-f32] [--device D]\n"
            "  Prints the model's continuation of TEXT, streaming, to stdout.\n"
            "  -m MODEL      a GGUF file (default: the demo model, models/strata-demo-q8_0.gguf)\n"
            "  -n N          tokens to generate (default 128)\n"
            "  --temp T      temperature (default 0.8; 0 = greedy)\n"
            "  --top-k K     keep the K most likely tokens (default 40; 0 = off)\n"
            "  --top-p P     nucleus sampling (default 0.95; 1 = off)\n"
            "  --min-p P     drop tokens below P x the best probability (default 0.05; 0 = off)\n"
            "  --seed S      random seed (default 0): the same seed gives the same text\n"
            "  --repeat-penalty R  penalise the last 64 tokens (default 1 = off)\n"
            "  --prefill N   rows per prompt chunk (default 512)\n"
            "  -t THREADS    threads (default: one per core)\n"
            "  --ctx N       context size in tokens (default min(context_length, 4096))\n"
            "  --kv-f32      keep the KV cache in f32 instead of f16\n"
            "  --device D    cpu, cuda or auto (default: cuda when this build has it and a GPU is present,\n"
            "                else cpu)\n"
            "  --copy-weights / --no-copy-weights\n"
            "                copy the weights out of the file mapping into RAM (about twice the decode\n"
            "                speed per core), or read them in place; default: copy when the model\n"
            "                takes at most half of the available memory\n");
}

static void print_text(void *ctx, const char *text, size_t len) {
    (void)ctx;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

int cmd_run(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL;
    int n_predict = 128;
    st_session_params sp = st_session_default_params();
    st_sampler_params sa = st_sampler_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") && has) model = argv[++i];
        else if (!strcmp(a, "-p") && has) prompt = argv[++i];
        else if (!strcmp(a, "-n") && has) n_predict = atoi(argv[++i]);
        else if (!strcmp(a, "--temp") && has) sa.temperature = (float)atof(argv[++i]);
        else if (!strcmp(a, "--top-k") && has) sa.top_k = atoi(argv[++i]);
        else if (!strcmp(a, "--top-p") && has) sa.top_p = (float)atof(argv[++i]);
        else if (!strcmp(a, "--min-p") && has) sa.min_p = (float)atof(argv[++i]);
        else if (!strcmp(a, "--seed") && has) sa.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--repeat-penalty") && has) sa.repeat_penalty = (float)atof(argv[++i]);
        else if (!strcmp(a, "--prefill") && has) sp.n_prefill = atoi(argv[++i]);
        else if (!strcmp(a, "-t") && has) sp.n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--ctx") && has) sp.n_ctx = atoll(argv[++i]);
        else if (!strcmp(a, "--kv-f32")) sp.kv_f32 = 1;
        else if (!strcmp(a, "--device") && has) {
            if (cli_parse_device(argv[++i])) return 2;
        }
        else if (!strcmp(a, "--copy-weights")) cli_copy_weights = 1;
        else if (!strcmp(a, "--no-copy-weights")) cli_copy_weights = 0;
        else {
            fprintf(stderr, "strata: run: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (prompt && !(model = cli_model_or_default(model, "run"))) return 1;
    if (!model || !prompt) {
        usage(stderr);
        return 2;
    }
    if (sp.n_prefill <= 0 || n_predict < 0) {
        fprintf(stderr, "strata: run: --prefill must be > 0 and -n >= 0\n");
        return 2;
    }

    st_model *m;
    if (cli_load_model(model, &m)) return 1;
    int rc = 1;
    st_session *s = NULL;
    st_sampler *smp = NULL;
    st_detok *dt = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!st_model_has_tokenizer(m)) {
        fprintf(stderr, "strata: run: this model has no supported tokenizer; use `strata eval --tokens` instead\n");
        goto done;
    }
    if (st_model_tokenize(m, prompt, strlen(prompt), 1, 1, &ids, &n_ids) != ST_OK) {
        cli_fail("run: tokenize");
        goto done;
    }
    if (n_ids == 0) {
        fprintf(stderr, "strata: run: the prompt is empty\n");
        goto done;
    }
    if (sp.n_ctx == 0) {
        /* Room for the prompt and the whole continuation. */
        int64_t c = st_model_n_ctx_train(m) < 4096 ? st_model_n_ctx_train(m) : 4096;
        sp.n_ctx = (int64_t)n_ids + n_predict > c ? (int64_t)n_ids + n_predict : c;
    }
    if (st_session_new(m, &sp, &s) != ST_OK || st_sampler_new(&sa, st_model_n_vocab(m), &smp) != ST_OK ||
        st_detok_new(m->tok, 0, &dt) != ST_OK) {
        cli_fail("run");
        goto done;
    }
    for (size_t i = 0; i < n_ids; i++) st_sampler_accept(smp, ids[i]);

    double t0 = st_now();
    if (st_session_feed(s, ids, (int64_t)n_ids, NULL) != ST_OK) {
        cli_fail("run: prompt");
        goto done;
    }
    double t1 = st_now();
    int generated = 0;
    cli_generation g = {.model = m, .session = s, .sampler = smp, .detok = dt, .on_text = print_text, .what = "run"};
    if (cli_generate(&g, n_predict, &generated)) goto done;
    fputc('\n', stdout);
    double t2 = st_now();
    fprintf(stderr, "strata: prompt %zu tokens in %.2f s (%.1f tok/s), generated %d tokens in %.2f s (%.1f tok/s)\n",
            n_ids, t1 - t0, (double)n_ids / (t1 - t0), generated, t2 - t1, generated > 0 ? generated / (t2 - t1) : 0.0);
    rc = 0;
done:
    st_detok_free(dt);
    st_sampler_free(smp);
    st_session_free(s);
    free(ids);
    st_model_free(m);
    return rc;
}
