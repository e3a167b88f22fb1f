/* cmd_eval.c: `strata eval -m MODEL --tokens ID,ID,... [--prefill N] --logits FILE`: feeds the
 * token ids as a prompt (in chunks of --prefill rows) and writes the f32 logits of every
 * position, row-major [n_tokens][n_vocab], little-endian. The conformance harness compares them
 * with llama.cpp's. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "strata.h"

typedef struct eval_flags {
    const char *tokens, *out;
} eval_flags;

#define OWN(field) offsetof(eval_flags, field)
static const cli_flag eval_own[] = {
    {"--tokens", NULL, "ID,ID,...", CLI_STRING, OWN(tokens), 0, 0, NULL, NULL, "the token ids to feed", 0},
    {"--logits", NULL, "FILE", CLI_STRING, OWN(out), 0, 0, NULL, NULL, "where the logits go", 0},
    {NULL},
};

static const cli_command eval_command = {
    "eval", "-m MODEL --tokens ID,ID,... --logits FILE [options]",
    "Feeds the token ids and writes the f32 logits of every position to FILE,\n"
    "row-major [n_tokens][n_vocab], little-endian. The context is at least n_tokens.",
    CLI_MODEL | CLI_SESSION, eval_own, 0};

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
    cli_options o;
    cli_options_default(&o);
    eval_flags ef = {0};
    int prc = cli_parse(&eval_command, argc, argv, &o, &ef);
    if (prc >= 0) return prc;
    if (!o.model || !ef.tokens || !ef.out) {
        fprintf(stderr, "strata eval: -m, --tokens and --logits are needed\n");
        cli_usage(&eval_command, stderr);
        return 2;
    }
    const char *out = ef.out;
    st_session_params sp = o.session;
    int32_t *ids;
    int64_t n;
    if (!parse_ids(ef.tokens, &ids, &n)) return 1;

    st_model *m;
    if (cli_load_model("eval", &o, &m)) {
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
        cli_fit_context("eval", m, &sp);
        if (sp.n_ctx < n) sp.n_ctx = n;
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
