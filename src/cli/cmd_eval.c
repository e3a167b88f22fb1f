/* cmd_eval.c: `strata eval -m MODEL --tokens ID,ID,... [--prefill N] --logits FILE`: feeds the
 * token ids as a prompt (in chunks of --prefill rows) and writes the f32 logits of every
 * position, row-major [n_tokens][n_vocab], little-endian. The conformance harness compares them
 * with llama.cpp's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "strata.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: strata eval -m MODEL --tokens ID,ID,... --logits FILE [--prefill N] [-t THREADS] [--ctx N] [--kv-f32]\n"
            "                  [--device D]\n"
            "  Feeds the token ids and writes the f32 logits of every position to FILE,\n"
            "  row-major [n_tokens][n_vocab], little-endian.\n"
            "  --prefill N   rows per prompt chunk (default 512)\n"
            "  -t THREADS    threads (default: one per core)\n"
            "  --ctx N       KV cache cells (default: max(n_tokens, min(context_length, 4096)))\n"
            "  --kv-f32      keep the KV cache in f32 instead of f16\n"
            "  --device D    cpu, cuda or auto (default: cuda when this build has it and a GPU is present)\n");
}

/* "1,2,3" -> ids; fails on anything that is not a comma-separated list of integers. */
static int parse_ids(const char *s, int32_t **out, int64_t *n) {
    int64_t cap = 64, cnt = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX) {
            fprintf(stderr, "strata: eval: --tokens: '%.20s' is not a token id\n", p);
            free(ids);
            return 0;
        }
        if (cnt == cap) {
            cap *= 2;
            int32_t *g = realloc(ids, (size_t)cap * sizeof *ids);
            if (!g) {
                free(ids);
                return 0;
            }
            ids = g;
        }
        ids[cnt++] = (int32_t)v;
        p = end;
        if (*p == ',') p++;
        else if (*p) {
            fprintf(stderr, "strata: eval: --tokens: unexpected '%c' after %lld\n", *p, v);
            free(ids);
            return 0;
        }
    }
    if (cnt == 0) {
        fprintf(stderr, "strata: eval: --tokens is empty\n");
        free(ids);
        return 0;
    }
    *out = ids;
    *n = cnt;
    return 1;
}

int cmd_eval(int argc, char **argv) {
    const char *model = NULL, *tokens = NULL, *out = NULL;
    st_session_params sp = st_session_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") && has) model = argv[++i];
        else if (!strcmp(a, "--tokens") && has) tokens = argv[++i];
        else if (!strcmp(a, "--logits") && has) out = argv[++i];
        else if (!strcmp(a, "--prefill") && has) sp.n_prefill = atoi(argv[++i]);
        else if (!strcmp(a, "-t") && has) sp.n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--ctx") && has) sp.n_ctx = atoll(argv[++i]);
        else if (!strcmp(a, "--kv-f32")) sp.kv_f32 = 1;
        else if (!strcmp(a, "--device") && has) {
            if (cli_parse_device(argv[++i])) return 2;
        }
        else {
            fprintf(stderr, "strata: eval: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model || !tokens || !out) {
        usage(stderr);
        return 2;
    }
    if (sp.n_prefill <= 0) {
        fprintf(stderr, "strata: eval: --prefill must be > 0\n");
        return 2;
    }
    int32_t *ids;
    int64_t n;
    if (!parse_ids(tokens, &ids, &n)) return 1;

    st_model *m;
    if (cli_load_model(model, &m)) {
        free(ids);
        return 1;
    }
    int rc = 1;
    int64_t V = st_model_n_vocab(m);
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= V) {
            fprintf(stderr, "strata: eval: token id %d (position %lld) is outside the vocabulary 0..%lld\n", ids[i],
                    (long long)i, (long long)(V - 1));
            goto done_model;
        }
    }
    if (sp.n_ctx == 0) {
        int64_t c = st_model_n_ctx_train(m) < 4096 ? st_model_n_ctx_train(m) : 4096;
        sp.n_ctx = n > c ? n : c;
    }
    st_session *s;
    if (st_session_new(m, &sp, &s) != ST_OK) {
        cli_fail("eval");
        goto done_model;
    }
    float *logits = malloc((size_t)n * (size_t)V * sizeof(float));
    if (!logits) {
        fprintf(stderr, "strata: eval: out of memory for %lld x %lld logits\n", (long long)n, (long long)V);
        goto done_session;
    }
    if (st_session_feed(s, ids, n, logits) != ST_OK) {
        cli_fail("eval");
        goto done_logits;
    }
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(logits, sizeof(float), (size_t)(n * V), f) != (size_t)(n * V) || fclose(f) != 0) {
        fprintf(stderr, "strata: eval: cannot write %s: %s\n", out, strerror(errno));
        goto done_logits;
    }
    rc = 0;
done_logits:
    free(logits);
done_session:
    st_session_free(s);
done_model:
    st_model_free(m);
    free(ids);
    return rc;
}
