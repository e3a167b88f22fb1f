/* compare.c: the judge of the conformance tests, in two modes.
 *
 *   compare tokens N VOCAB SEED
 *       prints N token ids drawn uniformly from [0, VOCAB), comma-separated (splitmix64 of SEED),
 *       the same list on every machine.
 *
 *   compare PEER OURS VOCAB [--min-top1 F] [--max-rel F] [--max-rel-skip N] [--max-kl F] [--label TEXT]
 *       PEER and OURS are f32 logits files, row-major [n_tokens][VOCAB]. Prints one line:
 *         top-1 agreement: the share of positions whose argmax is the same;
 *         max|diff| / max|logit|: the largest element difference over the largest peer logit;
 *         mean KL(peer || ours): softmax of each row in double, averaged over positions;
 *       and exits 1 when a given threshold is missed (top-1 below, rel or KL above), 2 on bad
 *       input (sizes that differ, NaN).
 *       --max-rel-skip N judges --max-rel on the positions other than the N with the largest
 *       difference (they are named on the line; top-1 and KL still count every position). For the
 *       bit-level tests: one activation that sits on an 8-bit rounding boundary in one engine and
 *       a few ulp off it in the other moves that one position by ~1e-3, while a wrong kernel
 *       shows at most positions. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int print_tokens(long n, long vocab, uint64_t seed) {
    if (n <= 0 || vocab <= 0) return 2;
    for (long i = 0; i < n; i++) printf("%s%llu", i ? "," : "", (unsigned long long)(splitmix64(&seed) % (uint64_t)vocab));
    printf("\n");
    return 0;
}

static float *read_logits(const char *path, long vocab, long *n_rows) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "compare: cannot open %s\n", path); return NULL; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size <= 0 || size % (long)(vocab * sizeof(float))) {
        fprintf(stderr, "compare: %s has %ld bytes, not a whole number of rows of %ld logits\n", path, size, vocab);
        fclose(f);
        return NULL;
    }
    float *x = malloc((size_t)size);
    if (!x || fread(x, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "compare: cannot read %s\n", path);
        free(x);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *n_rows = size / (long)(vocab * sizeof(float));
    return x;
}

static long argmax(const float *x, long n) {
    long best = 0;
    for (long i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

/* KL(p || q) for p = softmax(a), q = softmax(b), in double. */
static double kl_divergence(const float *a, const float *b, long n) {
    double ma = a[argmax(a, n)], mb = b[argmax(b, n)], za = 0, zb = 0;
    for (long i = 0; i < n; i++) { za += exp(a[i] - ma); zb += exp(b[i] - mb); }
    double lza = log(za), lzb = log(zb), kl = 0;
    for (long i = 0; i < n; i++) {
        double lp = a[i] - ma - lza, lq = b[i] - mb - lzb;
        kl += exp(lp) * (lp - lq);
    }
    return kl > 0 ? kl : 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "tokens")) return print_tokens(atol(argv[2]), atol(argv[3]), strtoull(argv[4], NULL, 0));
    if (argc < 4) {
        fprintf(stderr, "usage: compare tokens N VOCAB SEED\n"
                        "       compare PEER OURS VOCAB [--min-top1 F] [--max-rel F] [--max-rel-skip N] [--max-kl F] [--label TEXT]\n");
        return 2;
    }
    long vocab = atol(argv[3]);
    double min_top1 = -1, max_rel = -1, max_kl = -1;
    long skip = 0;
    const char *label = "";
    for (int i = 4; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--min-top1")) min_top1 = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-rel")) max_rel = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-rel-skip")) skip = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-kl")) max_kl = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--label")) label = argv[i + 1];
        else { fprintf(stderr, "compare: unknown option %s\n", argv[i]); return 2; }
    }
    if (vocab <= 0) { fprintf(stderr, "compare: VOCAB must be positive\n"); return 2; }
    if (skip < 0) { fprintf(stderr, "compare: --max-rel-skip must be 0 or more\n"); return 2; }
    long na = 0, nb = 0;
    float *a = read_logits(argv[1], vocab, &na), *b = read_logits(argv[2], vocab, &nb);
    if (!a || !b) return 2;
    if (na != nb) {
        fprintf(stderr, "compare: %s has %ld positions, %s has %ld\n", argv[1], na, argv[2], nb);
        return 2;
    }
    long same = 0, first_diff = -1;
    double max_diff = 0, max_logit = 0, kl_sum = 0, kl_max = 0;
    double *row_diff = calloc((size_t)na, sizeof *row_diff);
    if (!row_diff) return 2;
    for (long r = 0; r < na; r++) {
        const float *pa = a + r * vocab, *pb = b + r * vocab;
        for (long i = 0; i < vocab; i++) {
            if (!isfinite(pa[i]) || !isfinite(pb[i])) {
                fprintf(stderr, "compare: %s: non-finite logit at position %ld, token %ld (peer %g, ours %g)\n", label, r, i, pa[i], pb[i]);
                return 2;
            }
            double d = fabs((double)pa[i] - pb[i]);
            if (d > max_diff) max_diff = d;
            if (d > row_diff[r]) row_diff[r] = d;
            if (fabs(pa[i]) > max_logit) max_logit = fabs(pa[i]);
        }
        if (argmax(pa, vocab) == argmax(pb, vocab)) same++;
        else if (first_diff < 0) first_diff = r;
        double kl = kl_divergence(pa, pb, vocab);
        kl_sum += kl;
        if (kl > kl_max) kl_max = kl;
    }
    double top1 = (double)same / na, scale = max_logit > 0 ? max_logit : 1, rel = max_diff / scale, kl = kl_sum / na;
    /* the --max-rel-skip positions: the largest row differences, taken out one at a time */
    char skipped[256] = "";
    double judged = rel;
    for (long k = 0, n = 0; k < skip && k < na; k++) {
        long worst = 0;
        for (long r = 1; r < na; r++) if (row_diff[r] > row_diff[worst]) worst = r;
        if (n < (long)sizeof skipped - 40)
            n += snprintf(skipped + n, sizeof skipped - (size_t)n, "%s%ld (%.2e)", k ? ", " : "", worst, row_diff[worst] / scale);
        row_diff[worst] = -1;
        judged = 0;
        for (long r = 0; r < na; r++) if (row_diff[r] > judged) judged = row_diff[r];
        judged /= scale;
    }
    free(row_diff);
    int ok = (min_top1 < 0 || top1 >= min_top1) && (max_rel < 0 || judged <= max_rel) && (max_kl < 0 || kl <= max_kl);
    printf("%-40s top1 %6.2f%% (%ld/%ld)  max|d|/max|l| %.2e  KL mean %.2e max %.2e  %s", label, 100 * top1, same, na,
           rel, kl, kl_max, ok ? "PASS" : "FAIL");
    if (skip > 0) printf("  (max|d|/max|l| %.2e without the worst %ld position(s): %s)", judged, skip, skipped);
    if (first_diff >= 0) printf("  (first argmax difference at position %ld)", first_diff);
    printf("\n");
    free(a);
    free(b);
    return ok ? 0 : 1;
}
