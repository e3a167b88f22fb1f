/* sampler.c: penalties, top-k, top-p, min-p, temperature and a seeded draw (see sampler.h).
 *
 * Work per call: one copy of the logits (penalties are applied to the copy), one pass for the
 * maximum and the softmax normalizer when top-p needs it, a heap selection of the best
 * candidates, and a sort of only those. Probabilities are computed in double from logit - max. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine/json_grammar.h"
#include "engine/sampler.h"

typedef struct cand { float logit; int32_t id; } cand;

struct st_sampler {
    st_sampler_params p;
    int32_t n_vocab;
    float *work;          /* penalized logits */
    float *weight;        /* exp(logit - max), for a wide top-p */
    cand *cands;          /* candidate buffer, n_vocab long */
    int32_t n_cands;
    int32_t *out_ids;     /* the last kept set, for st_sampler_last_candidates */
    float *out_probs;
    int32_t *window;      /* ring of the last penalty_last_n accepted tokens */
    int32_t *window_tmp;
    int32_t window_n, window_pos;
    uint64_t rng[4];
    st_json_constraint *json; /* response_format json_object, or NULL */
    int64_t json_masks;       /* picks the constraint refused (the mask was applied and the chain rerun) */
};

st_sampler_params st_sampler_default_params(void) {
    st_sampler_params p = {0};
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.penalty_last_n = 64;
    return p;
}

/* ---- xoshiro256**, seeded by splitmix64 ---- */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t s[4]) {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static void rng_seed(uint64_t s[4], uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
}

double st_sampler_uniform(st_sampler *s) {
    return (double)(rng_next(s->rng) >> 11) * 0x1.0p-53;
}

/* ---- lifetime ---- */
st_status st_sampler_new(const st_sampler_params *p, int32_t n_vocab, st_sampler **out) {
    *out = NULL;
    if (n_vocab <= 0) return st_fail(ST_ERR_INVALID, "sampler: vocabulary size %d", n_vocab);
    if (!(p->top_p > 0.0f) || p->min_p > 1.0f || !(p->repeat_penalty > 0.0f) || p->penalty_last_n < 0 ||
        isnan(p->temperature) || isnan(p->frequency_penalty) || isnan(p->presence_penalty))
        return st_fail(ST_ERR_INVALID, "sampler: bad parameters (top_p %g must be > 0, min_p %g <= 1, "
                       "repeat_penalty %g > 0, penalty_last_n %d >= 0)",
                       (double)p->top_p, (double)p->min_p, (double)p->repeat_penalty, p->penalty_last_n);
    st_sampler *s = calloc(1, sizeof *s);
    if (!s) return st_fail(ST_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->work = malloc(sizeof *s->work * (size_t)n_vocab);
    s->weight = malloc(sizeof *s->weight * (size_t)n_vocab);
    s->cands = malloc(sizeof *s->cands * (size_t)n_vocab);
    s->out_ids = malloc(sizeof *s->out_ids * (size_t)n_vocab);
    s->out_probs = malloc(sizeof *s->out_probs * (size_t)n_vocab);
    size_t w = (size_t)(p->penalty_last_n > 0 ? p->penalty_last_n : 1);
    s->window = malloc(sizeof *s->window * w);
    s->window_tmp = malloc(sizeof *s->window_tmp * w);
    if (!s->work || !s->weight || !s->cands || !s->out_ids || !s->out_probs || !s->window || !s->window_tmp) {
        st_sampler_free(s);
        return st_fail(ST_ERR_NOMEM, "sampler: out of memory for a vocabulary of %d", n_vocab);
    }
    st_sampler_reset(s);
    *out = s;
    return ST_OK;
}

void st_sampler_free(st_sampler *s) {
    if (!s) return;
    free(s->work); free(s->weight); free(s->cands); free(s->out_ids); free(s->out_probs);
    free(s->window); free(s->window_tmp);
    st_json_constraint_free(s->json);
    free(s);
}

void st_sampler_reset(st_sampler *s) {
    st_json_constraint_free(s->json);
    s->json = NULL;
    s->json_masks = 0;
    s->window_n = s->window_pos = 0;
    s->n_cands = 0;
    rng_seed(s->rng, s->p.seed);
}

st_status st_sampler_accept(st_sampler *s, int32_t token) {
    if (token < 0 || token >= s->n_vocab)
        return st_fail(ST_ERR_RANGE, "sampler: token %d is outside the vocabulary of %d", token, s->n_vocab);
    if (s->json) ST_TRY(st_json_constraint_accept(s->json, token));
    int32_t cap = s->p.penalty_last_n;
    if (cap <= 0) return ST_OK;
    s->window[s->window_pos] = token;
    s->window_pos = (s->window_pos + 1) % cap;
    if (s->window_n < cap) s->window_n++;
    return ST_OK;
}

int32_t st_sampler_last_candidates(const st_sampler *s, const int32_t **ids, const float **probs) {
    *ids = s->out_ids;
    *probs = s->out_probs;
    return s->n_cands;
}

/* ---- the chain ---- */
static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void apply_penalties(st_sampler *s) {
    const st_sampler_params *p = &s->p;
    if (s->window_n == 0 || (p->repeat_penalty == 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f))
        return;
    memcpy(s->window_tmp, s->window, sizeof *s->window * (size_t)s->window_n);
    qsort(s->window_tmp, (size_t)s->window_n, sizeof *s->window_tmp, cmp_i32);
    for (int32_t i = 0; i < s->window_n;) {
        int32_t id = s->window_tmp[i], count = 0;
        while (i < s->window_n && s->window_tmp[i] == id) { i++; count++; }
        float *l = &s->work[id];
        *l = *l > 0.0f ? *l / p->repeat_penalty : *l * p->repeat_penalty;
        *l -= (float)count * p->frequency_penalty + p->presence_penalty;
    }
}

/* better = higher logit, then lower id (a fixed order for ties) */
static int cand_better(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp_cand_desc(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    return cand_better(a, b) ? -1 : cand_better(b, a) ? 1 : 0;
}

/* The best k of the logits into s->cands[0..k), best first: a min-heap of k entries. */
static int32_t select_top(st_sampler *s, int32_t k) {
    cand *h = s->cands;
    int32_t n = 0;
    for (int32_t id = 0; id < s->n_vocab; id++) {
        cand c = {s->work[id], id};
        if (isnan(c.logit) || c.logit == -INFINITY) continue; /* NaN, or masked by the constraint */
        if (n < k) {
            int32_t i = n++;
            while (i > 0) { /* sift up: the root is the worst kept */
                int32_t par = (i - 1) / 2;
                if (!cand_better(&h[par], &c)) break;
                h[i] = h[par];
                i = par;
            }
            h[i] = c;
        } else if (cand_better(&c, &h[0])) {
            int32_t i = 0;
            for (;;) {
                int32_t l = 2 * i + 1, r = l + 1, m = i;
                const cand *worst = &c;
                if (l < n && cand_better(worst, &h[l])) { m = l; worst = &h[l]; }
                if (r < n && cand_better(worst, &h[r])) m = r;
                if (m == i) break;
                h[i] = h[m];
                i = m;
            }
            h[i] = c;
        }
    }
    qsort(h, (size_t)n, sizeof *h, cmp_cand_desc);
    return n;
}

/* Softmax normalizer of s->cands[0..n) relative to max: sum exp(l - max). */
static double mass(const cand *c, int32_t n, float max) {
    double z = 0.0;
    for (int32_t i = 0; i < n; i++) z += expf(c[i].logit - max);
    return z;
}

/* Keeps the smallest best-first prefix whose probability reaches top_p; the probabilities are
 * over the set that top-k left (z_all), which may be larger than the candidates in hand. Returns
 * the new count, or -1 when the nucleus is not within the first n. */
static int32_t nucleus(const cand *c, int32_t n, float max, double z_all, float top_p) {
    double cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cum += expf(c[i].logit - max);
        if (cum >= top_p * z_all) return i + 1;
    }
    return -1;
}

/* Top-p when the nucleus is too wide to sort: the logits are binned by value (bin 0 the
 * highest), the bin where the mass from the top reaches top_p is found in one pass, and only that
 * bin is sorted (by logit, then id, the order a full sort gives) to place the cut exactly. The
 * candidates come out with the best first and the rest unordered. */
#define WIDE_BINS 4096
static int32_t bin_of(float l, float max, float scale) {
    int32_t b = (int32_t)((max - l) * scale);
    return b < WIDE_BINS - 1 ? b : WIDE_BINS - 1;
}

static int32_t wide_nucleus(st_sampler *s, double z_all, float max) {
    double target = s->p.top_p * z_all;
    float min = max;
    for (int32_t i = 0; i < s->n_vocab; i++)
        if (s->work[i] < min && isfinite(s->work[i])) min = s->work[i];
    double bin_mass[WIDE_BINS] = {0};
    float scale = max > min ? (float)(WIDE_BINS - 1) / (max - min) : 0.0f;
    for (int32_t i = 0; i < s->n_vocab; i++)
        if (isfinite(s->work[i])) bin_mass[bin_of(s->work[i], max, scale)] += s->weight[i];
    int32_t cut = WIDE_BINS - 1;
    double above = 0.0;
    for (int32_t b = 0; b < WIDE_BINS; b++) {
        if (above + bin_mass[b] >= target) { cut = b; break; }
        above += bin_mass[b];
    }
    int32_t n = 0;
    for (int32_t i = 0; i < s->n_vocab; i++)
        if (isfinite(s->work[i]) && bin_of(s->work[i], max, scale) < cut) s->cands[n++] = (cand){s->work[i], i};
    int32_t first_edge = n;
    for (int32_t i = 0; i < s->n_vocab; i++)
        if (isfinite(s->work[i]) && bin_of(s->work[i], max, scale) == cut) s->cands[n++] = (cand){s->work[i], i};
    qsort(s->cands + first_edge, (size_t)(n - first_edge), sizeof *s->cands, cmp_cand_desc);
    int32_t k = first_edge;
    while (k < n && above < target) above += s->weight[s->cands[k++].id];
    n = k > 0 ? k : n;
    for (int32_t i = 1; i < n; i++)
        if (cand_better(&s->cands[i], &s->cands[0])) { cand t = s->cands[0]; s->cands[0] = s->cands[i]; s->cands[i] = t; }
    return n;
}

static int32_t argmax(const float *l, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[best] || (isnan(l[best]) && !isnan(l[i]))) best = i;
    return best;
}

/* The chain on s->work (which it does not modify): greedy, or the filters and a draw. */
static st_status choose(st_sampler *s, int32_t *token) {
    const st_sampler_params *p = &s->p;
    if (p->temperature <= 0.0f) {
        int32_t id = argmax(s->work, s->n_vocab);
        s->n_cands = 1;
        s->out_ids[0] = id;
        s->out_probs[0] = 1.0f;
        *token = id;
        return ST_OK;
    }

    /* top-k, or when off, the best few as a first guess at the nucleus */
    int32_t n;
    int sorted = 1;
    int top_k_on = p->top_k > 0 && p->top_k < s->n_vocab;
    if (top_k_on) {
        n = select_top(s, p->top_k);
    } else if (p->top_p < 1.0f) {
        float max = s->work[argmax(s->work, s->n_vocab)];
        double z_all = 0.0;
        for (int32_t i = 0; i < s->n_vocab; i++) {
            s->weight[i] = isnan(s->work[i]) ? 0.0f : expf(s->work[i] - max);
            z_all += s->weight[i];
        }
        int32_t got = select_top(s, s->n_vocab < 1024 ? s->n_vocab : 1024);
        n = nucleus(s->cands, got, max, z_all, p->top_p);
        if (n < 0) {
            n = wide_nucleus(s, z_all, max);
            sorted = 0;
        }
    } else {
        /* no top-k or top-p: only min-p filters, which needs no order */
        float top = s->work[argmax(s->work, s->n_vocab)];
        float min_logit = p->min_p > 0.0f ? top + logf(p->min_p) : -INFINITY;
        n = 0;
        for (int32_t id = 0; id < s->n_vocab; id++)
            if (s->work[id] >= min_logit && s->work[id] > -INFINITY) s->cands[n++] = (cand){s->work[id], id};
        sorted = 0;
        /* the best first, as everywhere else */
        for (int32_t i = 1; i < n; i++)
            if (cand_better(&s->cands[i], &s->cands[0])) { cand t = s->cands[0]; s->cands[0] = s->cands[i]; s->cands[i] = t; }
    }
    if (n == 0) return st_fail(ST_ERR_INVALID, "sampler: every logit is NaN");
    float max = s->cands[0].logit;

    if (top_k_on && p->top_p < 1.0f) {
        int32_t k = nucleus(s->cands, n, max, mass(s->cands, n, max), p->top_p);
        if (k > 0) n = k;
    }
    if (p->min_p > 0.0f && (top_k_on || p->top_p < 1.0f)) {
        float min_logit = max + logf(p->min_p);
        int32_t k = 1;
        if (sorted) {
            while (k < n && s->cands[k].logit >= min_logit) k++;
        } else {
            for (int32_t i = 1; i < n; i++)
                if (s->cands[i].logit >= min_logit) s->cands[k++] = s->cands[i];
        }
        n = k;
    }

    /* temperature, softmax over what is left, and the draw */
    double z = 0.0;
    for (int32_t i = 0; i < n; i++) {
        double e = exp(((double)s->cands[i].logit - max) / p->temperature);
        s->out_probs[i] = (float)e;
        z += e;
    }
    double u = st_sampler_uniform(s) * z, cum = 0.0;
    int32_t pick = n - 1;
    for (int32_t i = 0; i < n; i++) {
        cum += s->out_probs[i];
        if (u < cum) { pick = i; break; }
    }
    for (int32_t i = 0; i < n; i++) {
        s->out_ids[i] = s->cands[i].id;
        s->out_probs[i] = (float)(s->out_probs[i] / z);
    }
    s->n_cands = n;
    *token = s->cands[pick].id;
    return ST_OK;
}

/* With a constraint the chain runs first on the plain logits and its pick is checked (one walk of
 * the token's bytes); only a refused pick costs the mask and a second run on the masked logits.
 * For greedy this is the masked argmax exactly. For a draw the rerun uses the masked chain, as
 * llama.cpp's sampler does when its grammar refuses a pick. */
st_status st_sampler_sample(st_sampler *s, const float *logits, int32_t *token) {
    memcpy(s->work, logits, sizeof *s->work * (size_t)s->n_vocab);
    apply_penalties(s);
    if (!s->json) return choose(s, token);
    if (choose(s, token) == ST_OK && st_json_constraint_allows(s->json, *token)) return ST_OK;
    s->json_masks++;
    if (st_json_constraint_mask(s->json, s->work) == 0)
        return st_fail(ST_ERR_INVALID, "sampler: no token of the vocabulary can continue the JSON object");
    return choose(s, token);
}

st_status st_sampler_constrain_json(st_sampler *s, const st_json_vocab *v, const int32_t *prompt, size_t n_prompt, int64_t max_tokens) {
    return st_sampler_constrain_schema(s, v, NULL, prompt, n_prompt, max_tokens);
}

st_status st_sampler_constrain_schema(st_sampler *s, const st_json_vocab *v, const st_json_schema *schema, const int32_t *prompt,
                                      size_t n_prompt, int64_t max_tokens) {
    if (st_json_vocab_size(v) != s->n_vocab)
        return st_fail(ST_ERR_INVALID, "sampler: a JSON vocabulary of %d tokens for a sampler of %d", st_json_vocab_size(v), s->n_vocab);
    st_json_constraint *c = NULL;
    ST_TRY(st_json_constraint_new_schema(v, schema, prompt, n_prompt, &c));
    st_json_constraint_set_budget(c, max_tokens > 0 ? max_tokens : -1);
    st_json_constraint_free(s->json);
    s->json = c;
    s->json_masks = 0;
    return ST_OK;
}

int st_sampler_json_complete(const st_sampler *s) { return s->json && st_json_constraint_complete(s->json); }
int64_t st_sampler_json_masks(const st_sampler *s) { return s->json_masks; }
