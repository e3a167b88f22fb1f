/* cmd_eval.c: `strata eval -m MODEL --tokens ID,ID,... [--prefill N] --logits FILE`: feeds the
 * token ids as a prompt (in chunks of --prefill rows) and writes the f32 logits of every
 * position, row-major [n_tokens][n_vocab], little-endian. The conformance harness compares them
 * with llama.cpp's. `--hidden FILE` writes every position's output-normed hidden state instead or
 * as well ([n_tokens][n_embd], the MTP head's input: tools/train-demo/train_mtp.py fits the demo
 * model's head on them); `--window W` feeds the ids as windows of W tokens, each from a fresh
 * sequence; `--tokens @FILE` reads the ids from FILE. */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/session_spec.h"
#include "model/model.h"
#include "strata.h"

typedef struct eval_flags {
    const char *tokens, *out, *hidden;
    int64_t window;
} eval_flags;

#define OWN(field) offsetof(eval_flags, field)
static const cli_flag eval_own[] = {
    {"--tokens", NULL, "ID,ID,...", CLI_STRING, OWN(tokens), 0, 0, NULL, NULL, "the token ids to feed", 0},
    {"--logits", NULL, "FILE", CLI_STRING, OWN(out), 0, 0, NULL, NULL, "where the logits go", 0},
    {"--hidden", NULL, "FILE", CLI_STRING, OWN(hidden), 0, 0, NULL, NULL,
     "where every position's output-normed hidden state goes, [n_tokens][n_embd]\n"
     "f32 (on the CPU; --logits may then be left out)", 0},
    {"--window", NULL, "W", CLI_INT64, OWN(window), 0, 1 << 30, NULL, NULL,
     "feed the ids in windows of W tokens, each from a fresh sequence", 0},
    {NULL},
};

static const cli_command eval_command = {
    "eval", "-m MODEL --tokens ID,ID,...|@FILE --logits FILE [--hidden FILE] [options]",
    "Feeds the token ids (or those of FILE, comma or white-space separated) and writes the f32\n"
    "logits of every position to FILE, row-major [n_tokens][n_vocab], little-endian. The context\n"
    "is at least n_tokens (or the window).",
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
        if (*p == ',' || isspace((unsigned char)*p))
            while (*p == ',' || isspace((unsigned char)*p)) p++;
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

/* The text of file `path` (malloc'd), or NULL after saying why. */
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)size + 1)) && fread(buf, 1, (size_t)size, f) == (size_t)size) {
        buf[size] = 0;
        fclose(f);
        return buf;
    }
    fprintf(stderr, "strata: eval: cannot read %s: %s\n", path, strerror(errno));
    free(buf);
    if (f) fclose(f);
    return NULL;
}

/* Feeds ids[0..n) in windows of w, each from a fresh sequence, writing the logits and hidden rows
 * asked for. */
static int feed_windows(st_session *s, const st_model *m, const int32_t *ids, int64_t n, int64_t w, int prefill,
                        float *logits, float *hidden) {
    int64_t V = m->hp.n_vocab, d = m->hp.n_embd;
    for (int64_t w0 = 0; w0 < n; w0 += w) {
        int64_t len = n - w0 < w ? n - w0 : w;
        st_session_reset(s);
        if (!hidden) {
            if (st_session_feed(s, ids + w0, len, logits + w0 * V) != ST_OK) return cli_fail("eval");
            continue;
        }
        for (int64_t off = 0; off < len; off += prefill) {
            int64_t rows = len - off < prefill ? len - off : prefill, at = w0 + off;
            if (st_session_feed_rows(s, ids + at, rows, logits ? logits + at * V : NULL, hidden + at * d, 0) != ST_OK)
                return cli_fail("eval");
        }
    }
    return 0;
}

static int write_floats(const char *path, const float *x, int64_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof(float), (size_t)n, f) != (size_t)n || fclose(f) != 0) {
        fprintf(stderr, "strata: eval: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

int cmd_eval(int argc, char **argv) {
    cli_options o;
    cli_options_default(&o);
    eval_flags ef = {0};
    int prc = cli_parse(&eval_command, argc, argv, &o, &ef);
    if (prc >= 0) return prc;
    if (!o.model || !ef.tokens || (!ef.out && !ef.hidden)) {
        fprintf(stderr, "strata eval: -m, --tokens and --logits (or --hidden) are needed\n");
        cli_usage(&eval_command, stderr);
        return 2;
    }
    const char *out = ef.out;
    st_session_params sp = o.session;
    if (ef.hidden) o.device = ST_DEVICE_CPU;
    char *text = ef.tokens[0] == '@' ? read_text(ef.tokens + 1) : NULL;
    if (ef.tokens[0] == '@' && !text) return 1;
    int32_t *ids;
    int64_t n;
    int parsed = parse_ids(text ? text : ef.tokens, &ids, &n);
    free(text);
    if (!parsed) return 1;
    int64_t window = ef.window == 0 || ef.window > n ? n : ef.window;

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
        if (sp.n_ctx < window) sp.n_ctx = window;
    }
    st_session *s;
    if (st_session_new(m, &sp, &s) != ST_OK) {
        cli_fail("eval");
        goto done_model;
    }
    float *logits = out ? malloc((size_t)n * (size_t)V * sizeof(float)) : NULL;
    float *hidden = ef.hidden ? malloc((size_t)(n * m->hp.n_embd) * sizeof(float)) : NULL;
    if ((out && !logits) || (ef.hidden && !hidden)) {
        fprintf(stderr, "strata: eval: out of memory for the rows of %lld positions\n", (long long)n);
        goto done_rows;
    }
    if (feed_windows(s, m, ids, n, window, sp.n_prefill, logits, hidden)) goto done_rows;
    if (out && write_floats(out, logits, n * V)) goto done_rows;
    if (ef.hidden && write_floats(ef.hidden, hidden, n * m->hp.n_embd)) goto done_rows;
    rc = 0;
done_rows:
    free(logits);
    free(hidden);
    st_session_free(s);
done_model:
    st_model_free(m);
    free(ids);
    return rc;
}
