/* bench_spec.c: `strata bench --spec mtp|ngram`: speculative decoding against plain decoding, on
 * the same prompts, in the same run, rounds alternating which goes first.
 *
 * Each prompt (a file of one prompt per line, "\n" written as backslash-n; or a built-in one) is
 * fed to a fresh sequence, then up to -n tokens are generated, stopping at an end-of-generation
 * token; only the generation is timed. Per round, tok/s is the tokens of all prompts over their
 * time; the median of the rounds is reported, and the speed-up is the median of the rounds'
 * ratios. The two texts must be the same token for token (else the bench fails: exactness is
 * checked on every run). Also reported: tokens per trunk forward, the acceptance at each draft
 * position, and the MTP head's forwards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cli/cli.h"
#include "engine/sampler.h"
#include "engine/spec.h"
#include "strata.h"

static const char *builtin_prompt =
    "<|im_start|>user\nWhat does ocean mean?<|im_end|>\n<|im_start|>assistant\n";

/* Prompts from `path`, one per line with \n escapes, or the built-in one; returns how many. */
static int read_prompts(const char *path, char ***out) {
    char **v = NULL;
    int n = 0;
    if (!path) {
        v = malloc(sizeof *v);
        if (v && (v[0] = strdup(builtin_prompt))) n = 1;
        *out = v;
        return n;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "strata: bench: cannot read %s\n", path);
        *out = NULL;
        return -1;
    }
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\r\n"), w = 0;
        if (len == 0) continue;
        for (size_t r = 0; r < len; r++) {
            if (line[r] == '\\' && r + 1 < len && line[r + 1] == 'n') line[w++] = '\n', r++;
            else line[w++] = line[r];
        }
        line[w] = 0;
        char **g = realloc(v, (size_t)(n + 1) * sizeof *v);
        if (!g) break;
        v = g;
        if (!(v[n] = strdup(line))) break;
        n++;
    }
    fclose(f);
    *out = v;
    return n;
}

typedef struct run_result {
    double seconds;
    int64_t tokens;
} run_result;

/* One generation from a fresh sequence; the ids go to out (up to n), their count to *n_out. */
static int generate(st_session *s, st_spec *d, const st_model *m, const st_sampler_params *sa, const int32_t *prompt,
                    size_t n_prompt, int n, int32_t *out, int *n_out, run_result *r) {
    st_session_reset(s);
    st_sampler *smp = NULL;
    if (st_sampler_new(sa, st_model_n_vocab(m), &smp) != ST_OK) return cli_fail("bench");
    for (size_t i = 0; i < n_prompt; i++) st_sampler_accept(smp, prompt[i]);
    int rc = 0, k = 0;
    if (st_spec_prompt(d, prompt, (int64_t)n_prompt) != ST_OK) rc = cli_fail("bench: prompt");
    double t0 = st_now();
    while (!rc && k < n) {
        int32_t tok;
        if (st_sampler_sample(smp, st_spec_logits(d), &tok) != ST_OK) rc = cli_fail("bench");
        if (rc || st_model_is_eog(m, tok)) break;
        st_sampler_accept(smp, tok);
        out[k++] = tok;
        if (k == n || st_spec_n_past(d) + 1 >= st_session_n_ctx(s)) break;
        if (st_spec_feed(d, tok) != ST_OK) rc = cli_fail("bench: decode");
    }
    st_spec_finish(d);
    r->seconds += st_now() - t0;
    r->tokens += k;
    *n_out = k;
    st_sampler_free(smp);
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int cli_bench_spec(const char *path, st_model *m, const cli_bench_spec_opts *o) {
    char **prompts = NULL;
    int n_prompts = read_prompts(o->prompts, &prompts), rc = 1;
    if (n_prompts <= 0) {
        if (n_prompts == 0) fprintf(stderr, "strata: bench: %s holds no prompt\n", o->prompts);
        free(prompts);
        return 1;
    }
    st_session_params sp = o->session;
    st_session *s = NULL;
    st_spec *plain = NULL, *spec = NULL;
    int32_t **ids = calloc((size_t)n_prompts, sizeof *ids), *a = malloc(sizeof(int32_t) * (size_t)o->n_gen),
            *b = malloc(sizeof(int32_t) * (size_t)o->n_gen);
    size_t *n_ids = calloc((size_t)n_prompts, sizeof *n_ids), longest = 0;
    double *tps_plain = calloc((size_t)o->reps, sizeof(double)), *tps_spec = calloc((size_t)o->reps, sizeof(double)),
           *ratio = calloc((size_t)o->reps, sizeof(double));
    if (!ids || !a || !b || !n_ids || !tps_plain || !tps_spec || !ratio) goto done;
    for (int i = 0; i < n_prompts; i++) {
        if (st_model_tokenize(m, prompts[i], strlen(prompts[i]), 1, 1, &ids[i], &n_ids[i]) != ST_OK || n_ids[i] == 0) {
            cli_fail("bench: tokenize");
            goto done;
        }
        if (n_ids[i] > longest) longest = n_ids[i];
    }
    sp.n_ctx = (int64_t)longest + o->n_gen + ST_SPEC_MAX_DRAFT + 2;
    st_spec_params none = st_spec_default_params();
    none.mode = ST_SPEC_NONE;
    if (st_session_new(m, &sp, &s) != ST_OK || st_spec_new(s, &none, &plain) != ST_OK ||
        st_spec_new(s, &o->spec, &spec) != ST_OK) {
        cli_fail("bench");
        goto done;
    }
    /* warm-up: grows the workspace, allocates the step planes, touches every weight */
    int k;
    run_result warm = {0, 0};
    if (generate(s, spec, m, &o->sampler, ids[0], n_ids[0], 8, a, &k, &warm)) goto done;
    int64_t tokens = 0;
    for (int r = 0; r < o->reps; r++) {
        run_result rp = {0, 0}, rs = {0, 0};
        st_spec_stats_reset(spec);
        for (int i = 0; i < n_prompts; i++) {
            int ka, kb;
            int first_plain = (r + i) % 2 == 0;
            if (first_plain && generate(s, plain, m, &o->sampler, ids[i], n_ids[i], o->n_gen, a, &ka, &rp)) goto done;
            if (generate(s, spec, m, &o->sampler, ids[i], n_ids[i], o->n_gen, b, &kb, &rs)) goto done;
            if (!first_plain && generate(s, plain, m, &o->sampler, ids[i], n_ids[i], o->n_gen, a, &ka, &rp)) goto done;
            if (ka != kb || memcmp(a, b, sizeof(int32_t) * (size_t)ka)) {
                fprintf(stderr, "strata: bench: prompt %d: the text with --spec %s differs from the text without it\n",
                        i + 1, st_spec_mode_name(st_spec_mode(spec)));
                goto done;
            }
        }
        tokens = rp.tokens;
        tps_plain[r] = (double)rp.tokens / rp.seconds;
        tps_spec[r] = (double)rs.tokens / rs.seconds;
        ratio[r] = tps_spec[r] / tps_plain[r];
    }
    const st_spec_stats *st = st_spec_stats_get(spec);
    double plain_med = median_of(tps_plain, o->reps), spec_med = median_of(tps_spec, o->reps),
           speedup = median_of(ratio, o->reps);
    double per_forward = st->forwards ? (double)st->fed / (double)st->forwards : 0;
    const char *mode = st_spec_mode_name(st_spec_mode(spec));
    int n_pos = st_spec_n_draft(spec);
    if (o->json) {
        printf("{\"model\": \"%s\", \"arch\": \"%s\", \"spec\": \"%s\", \"draft\": %d, \"p_min\": %g, \"temperature\": %g, "
               "\"seed\": %llu, \"prompts\": %d, \"max_tokens\": %d, \"repeats\": %d, \"tokens\": %lld, "
               "\"plain_tok_s\": %.2f, \"spec_tok_s\": %.2f, \"speedup\": %.3f, \"tokens_per_forward\": %.3f, "
               "\"drafted\": %lld, \"accepted\": %lld, \"head_forwards\": %lld, \"text_identical\": true, \"accepted_at\": [",
               path, st_model_arch(m), mode, n_pos, (double)o->spec.p_min, (double)o->sampler.temperature,
               (unsigned long long)o->sampler.seed, n_prompts, o->n_gen, o->reps, (long long)tokens, plain_med, spec_med,
               speedup, per_forward, (long long)st->drafted, (long long)st->accepted, (long long)st->head_forwards);
        for (int i = 0; i < n_pos; i++)
            printf("%s%.4f", i ? ", " : "", st->drafted_at[i] ? (double)st->accepted_at[i] / (double)st->drafted_at[i] : 0.0);
        printf("]}\n");
    } else {
        printf("model    %s (%s), spec %s, %d drafts, p_min %g, %s, %d prompts x up to %d tokens, median of %d\n", path,
               st_model_arch(m), mode, n_pos, (double)o->spec.p_min,
               o->sampler.temperature <= 0 ? "greedy" : "sampled", n_prompts, o->n_gen, o->reps);
        printf("plain    %8.2f tok/s\n", plain_med);
        printf("%-8s %8.2f tok/s   %.2fx   %.2f tokens per trunk forward, %lld of %lld drafts accepted, %lld head forwards\n",
               mode, spec_med, speedup, per_forward, (long long)st->accepted, (long long)st->drafted,
               (long long)st->head_forwards);
        printf("accepted by draft position:");
        for (int i = 0; i < n_pos; i++)
            printf("  %d: %.1f%%", i + 1, st->drafted_at[i] ? 100.0 * (double)st->accepted_at[i] / (double)st->drafted_at[i] : 0.0);
        printf("\ntext     identical, %lld tokens\n", (long long)tokens);
    }
    rc = 0;
done:
    st_spec_free(spec);
    st_spec_free(plain);
    st_session_free(s);
    for (int i = 0; i < n_prompts; i++) {
        free(prompts[i]);
        if (ids) free(ids[i]);
    }
    free(prompts);
    free(ids);
    free(n_ids);
    free(a);
    free(b);
    free(tps_plain);
    free(tps_spec);
    free(ratio);
    return rc;
}
