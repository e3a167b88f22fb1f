/* test_sampler.c: the sampler's filters and draw on hand-made logits: greedy is the argmax,
 * top-k 1 is greedy, a seed repeats its choices, each penalty moves exactly the logits it should,
 * top-k/top-p/min-p keep the right sets, and a fixed-seed histogram over many draws follows the
 * softmax (a chi-square bound, not a timing); logits masked to -inf are never drawn. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "test.h"
#include "engine/sampler.h"

#define V 151936

static st_sampler *make(st_sampler_params p, int32_t n_vocab) {
    st_sampler *s = NULL;
    if (st_sampler_new(&p, n_vocab, &s) != ST_OK) return NULL;
    return s;
}

static st_sampler_params plain(void) {
    st_sampler_params p = {0};
    p.temperature = 1.0f;
    p.top_p = 1.0f;
    p.repeat_penalty = 1.0f;
    return p;
}

static int kept(st_sampler *s, int32_t id) {
    const int32_t *ids;
    const float *pr;
    int32_t n = st_sampler_last_candidates(s, &ids, &pr);
    for (int32_t i = 0; i < n; i++) if (ids[i] == id) return 1;
    return 0;
}

int main(void) {
    float *logits = malloc(sizeof *logits * V);
    uint64_t x = 12345;
    for (int i = 0; i < V; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        logits[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 10.0 - 5.0);
    }
    logits[777] = 9.0f;
    logits[4242] = 8.5f;

    /* greedy = argmax; top-k 1 = greedy whatever the temperature */
    st_sampler_params g = plain();
    g.temperature = 0.0f;
    st_sampler *s = make(g, V);
    int32_t t = -1;
    CHECK(s && st_sampler_sample(s, logits, &t) == ST_OK && t == 777);
    st_sampler_free(s);
    st_sampler_params k1 = plain();
    k1.top_k = 1;
    k1.temperature = 5.0f;
    s = make(k1, V);
    int all = 1;
    for (int i = 0; i < 50; i++) { all &= st_sampler_sample(s, logits, &t) == ST_OK && t == 777; }
    CHECK(all);
    st_sampler_free(s);

    /* the same seed gives the same choices; another seed other choices; reset restarts */
    st_sampler_params d = st_sampler_default_params();
    d.temperature = 2.0f;
    d.top_k = 0; d.top_p = 1.0f; d.min_p = 0.0f;
    d.seed = 42;
    st_sampler *a = make(d, V), *b = make(d, V);
    d.seed = 43;
    st_sampler *c = make(d, V);
    int32_t seq_a[64];
    int same = 1, differ = 0;
    for (int i = 0; i < 64; i++) {
        int32_t ta, tb, tc;
        st_sampler_sample(a, logits, &ta);
        st_sampler_sample(b, logits, &tb);
        st_sampler_sample(c, logits, &tc);
        seq_a[i] = ta;
        same &= ta == tb;
        differ += ta != tc;
    }
    CHECK(same);
    CHECK(differ > 32);
    st_sampler_reset(a);
    int again = 1;
    for (int i = 0; i < 64; i++) { st_sampler_sample(a, logits, &t); again &= t == seq_a[i]; }
    CHECK(again);
    st_sampler_free(a); st_sampler_free(b); st_sampler_free(c);

    /* the generator: a fixed value for seed 0 (so a change of generator is noticed), in [0,1) */
    {
        st_sampler_params z = plain();
        st_sampler *r = make(z, 4);
        double u0 = st_sampler_uniform(r);
        CHECK(fabs(u0 - 0.60126299941790484) < 1e-15 && fabs(st_sampler_uniform(r) - 0.74777409254723981) < 1e-15);
        st_sampler_reset(r);
        CHECK(st_sampler_uniform(r) == u0);
        int in_range = 1;
        double sum = 0;
        for (int i = 0; i < 100000; i++) { double u = st_sampler_uniform(r); in_range &= u >= 0 && u < 1; sum += u; }
        CHECK(in_range && fabs(sum / 100000 - 0.5) < 0.01);
        st_sampler_free(r);
    }

    /* penalties: greedy picks show which logits moved, and by how much */
    {
        float l[6] = {2.0f, 1.9f, -1.0f, -1.1f, 0.5f, 0.0f};
        st_sampler_params pp = plain();
        pp.temperature = 0.0f;
        pp.repeat_penalty = 1.1f;
        pp.penalty_last_n = 3;
        st_sampler *ps = make(pp, 6);
        st_sampler_accept(ps, 0);
        CHECK(st_sampler_sample(ps, l, &t) == ST_OK && t == 1); /* 2.0/1.1 = 1.82 < 1.9 */
        CHECK(l[0] == 2.0f);                                     /* the input is untouched */
        /* a negative logit is multiplied: token 2 (-1.0 -> -1.1) vs 3 (-1.1): order kept only by id */
        float l2[4] = {-1.0f, -1.05f, -5.0f, -5.0f};
        st_sampler_params pq = pp;
        st_sampler *ps2 = make(pq, 4);
        st_sampler_accept(ps2, 0);
        CHECK(st_sampler_sample(ps2, l2, &t) == ST_OK && t == 1); /* -1.0*1.1 = -1.1 < -1.05 */
        st_sampler_free(ps2);
        /* the window forgets: after 3 more tokens, token 0 is no longer penalized */
        st_sampler_accept(ps, 5); st_sampler_accept(ps, 5); st_sampler_accept(ps, 5);
        CHECK(st_sampler_sample(ps, l, &t) == ST_OK && t == 0);
        st_sampler_free(ps);

        /* frequency counts occurrences; presence counts once */
        st_sampler_params pf = plain();
        pf.temperature = 0.0f;
        pf.frequency_penalty = 0.06f;
        pf.penalty_last_n = 16;
        st_sampler *fs = make(pf, 6);
        st_sampler_accept(fs, 0);
        CHECK(st_sampler_sample(fs, l, &t) == ST_OK && t == 0);  /* 2.0 - 0.06 = 1.94 > 1.9 */
        st_sampler_accept(fs, 0);
        CHECK(st_sampler_sample(fs, l, &t) == ST_OK && t == 1);  /* 2.0 - 0.12 = 1.88 < 1.9 */
        st_sampler_free(fs);
        st_sampler_params pr = plain();
        pr.temperature = 0.0f;
        pr.presence_penalty = 0.06f;
        pr.penalty_last_n = 16;
        st_sampler *rs = make(pr, 6);
        st_sampler_accept(rs, 0); st_sampler_accept(rs, 0); st_sampler_accept(rs, 0);
        CHECK(st_sampler_sample(rs, l, &t) == ST_OK && t == 0);  /* 2.0 - 0.06 once */
        pr.presence_penalty = 0.2f;
        st_sampler_free(rs);
        rs = make(pr, 6);
        st_sampler_accept(rs, 0);
        CHECK(st_sampler_sample(rs, l, &t) == ST_OK && t == 1);
        CHECK(st_sampler_accept(rs, 6) == ST_ERR_RANGE);
        st_sampler_free(rs);
    }

    /* top-k keeps exactly the k best; top-p the smallest prefix reaching p; min-p relative to max */
    {
        /* probabilities (temperature 1) of logits log(0.5), log(0.25), log(0.125), ... */
        float l[8];
        for (int i = 0; i < 8; i++) l[i] = logf(powf(0.5f, (float)(i + 1)));
        l[7] = l[6]; /* so the tail sums to 1 */
        st_sampler_params pk = plain();
        pk.top_k = 3;
        st_sampler *ks = make(pk, 8);
        st_sampler_sample(ks, l, &t);
        const int32_t *ids;
        const float *pr;
        int32_t n = st_sampler_last_candidates(ks, &ids, &pr);
        CHECK(n == 3 && ids[0] == 0 && ids[1] == 1 && ids[2] == 2);
        CHECK(fabsf(pr[0] - 4.0f / 7.0f) < 1e-5f); /* renormalized over the three */
        st_sampler_free(ks);

        st_sampler_params pp = plain();
        pp.top_p = 0.8f; /* 0.5, 0.75, 0.875: three tokens */
        st_sampler *tp = make(pp, 8);
        st_sampler_sample(tp, l, &t);
        n = st_sampler_last_candidates(tp, &ids, &pr);
        CHECK(n == 3 && kept(tp, 2) && !kept(tp, 3));
        st_sampler_free(tp);
        pp.top_p = 0.75f; /* reached exactly at two */
        tp = make(pp, 8);
        st_sampler_sample(tp, l, &t);
        CHECK(st_sampler_last_candidates(tp, &ids, &pr) == 2);
        st_sampler_free(tp);
        /* top-p after top-k is over the k kept: 4/7, 6/7 -> two reach 0.8 */
        pp.top_k = 3;
        pp.top_p = 0.8f;
        tp = make(pp, 8);
        st_sampler_sample(tp, l, &t);
        CHECK(st_sampler_last_candidates(tp, &ids, &pr) == 2);
        st_sampler_free(tp);

        st_sampler_params pm = plain();
        pm.min_p = 0.2f; /* keeps p >= 0.1: 0.5, 0.25, 0.125 */
        st_sampler *ms = make(pm, 8);
        st_sampler_sample(ms, l, &t);
        n = st_sampler_last_candidates(ms, &ids, &pr);
        CHECK(n == 3 && kept(ms, 0) && kept(ms, 1) && kept(ms, 2) && !kept(ms, 3));
        st_sampler_free(ms);
        pm.top_k = 5; /* the same through the sorted path */
        ms = make(pm, 8);
        st_sampler_sample(ms, l, &t);
        CHECK(st_sampler_last_candidates(ms, &ids, &pr) == 3);
        st_sampler_free(ms);
    }

    /* top-p on the full vocabulary: a flat distribution needs more than the first guess of
     * candidates, and the kept set is still the exact nucleus */
    {
        float *flat = malloc(sizeof *flat * V);
        for (int i = 0; i < V; i++) flat[i] = 0.0f;
        st_sampler_params pp = plain();
        pp.top_p = 0.5f;
        st_sampler *tp = make(pp, V);
        CHECK(st_sampler_sample(tp, flat, &t) == ST_OK);
        const int32_t *ids;
        const float *pr;
        int32_t n = st_sampler_last_candidates(tp, &ids, &pr);
        CHECK(n == (V + 1) / 2 || n == V / 2 + 1);
        CHECK(ids[0] == 0 && ids[1] == 1); /* ties broken by id */
        /* the peaked random logits: the nucleus is within the first guess */
        CHECK(st_sampler_sample(tp, logits, &t) == ST_OK);
        n = st_sampler_last_candidates(tp, &ids, &pr);
        double cum = 0;
        for (int32_t i = 0; i < n; i++) cum += pr[i];
        CHECK(n >= 2 && ids[0] == 777 && kept(tp, 4242) && fabs(cum - 1.0) < 1e-3);
        /* the kept mass (before renormalizing) reaches top_p and one token fewer would not:
         * with temperature 1, the kept probabilities are the softmax ones scaled by 1/mass */
        double z = 0, zmax = 0;
        for (int i = 0; i < V; i++) z += exp((double)logits[i] - 9.0);
        double kept_mass = 0, smallest = 1;
        for (int32_t i = 0; i < n; i++) {
            double w = exp((double)logits[ids[i]] - 9.0) / z;
            kept_mass += w;
            if (w < smallest) smallest = w;
        }
        zmax = kept_mass - smallest;
        CHECKF(kept_mass >= 0.5 - 1e-6 && zmax < 0.5 + 1e-6, "kept mass %.6f, without the smallest %.6f", kept_mass, zmax);
        /* every dropped token is no more likely than every kept one */
        float lowest_kept = 1e30f;
        for (int32_t i = 0; i < n; i++) if (logits[ids[i]] < lowest_kept) lowest_kept = logits[ids[i]];
        int above_dropped = 0;
        char *is_kept = calloc(V, 1);
        for (int32_t i = 0; i < n; i++) is_kept[ids[i]] = 1;
        for (int i = 0; i < V; i++) above_dropped += !is_kept[i] && logits[i] > lowest_kept;
        CHECK(above_dropped == 0);
        free(is_kept);
        st_sampler_free(tp);
        free(flat);
    }

    /* distribution: 4 tokens with probabilities 0.4, 0.3, 0.2, 0.1 at temperature 1, and
     * temperature 0.5 squares them; 200000 fixed-seed draws within a chi-square bound */
    {
        double p4[4] = {0.4, 0.3, 0.2, 0.1};
        float l[4];
        for (int i = 0; i < 4; i++) l[i] = (float)log(p4[i]);
        for (int pass = 0; pass < 2; pass++) {
            st_sampler_params pd = plain();
            pd.temperature = pass ? 0.5f : 1.0f;
            pd.seed = 7;
            st_sampler *ds = make(pd, 4);
            double want[4], z = 0;
            for (int i = 0; i < 4; i++) { want[i] = pass ? p4[i] * p4[i] : p4[i]; z += want[i]; }
            long hist[4] = {0};
            int draws = 200000;
            for (int i = 0; i < draws; i++) { st_sampler_sample(ds, l, &t); hist[t]++; }
            double chi = 0;
            for (int i = 0; i < 4; i++) {
                double e = want[i] / z * draws;
                chi += (hist[i] - e) * (hist[i] - e) / e;
            }
            CHECKF(chi < 16.3, "chi-square %.2f with 3 degrees of freedom (p = 0.001 bound)", chi);
            st_sampler_free(ds);
        }
    }

    /* logits at -inf (what the JSON constraint's mask writes) are never drawn, by any path of the
     * chain: greedy, top-k, top-p alone (narrow and wide nucleus), min-p alone at 0 */
    {
        enum { N = 4096 };
        float *m = malloc(sizeof *m * N);
        st_sampler_params ps[5];
        for (int k = 0; k < 5; k++) ps[k] = plain();
        ps[0].temperature = 0.0f;
        ps[1].top_k = 40;
        ps[2].top_p = 0.5f;
        ps[3].top_p = 0.999f;
        ps[4].min_p = 0.0f;
        int never = 1;
        for (int k = 0; k < 5; k++) {
            st_sampler *ms = make(ps[k], N);
            for (int draw = 0; draw < 200 && ms; draw++) {
                for (int i = 0; i < N; i++) {
                    x = x * 6364136223846793005ull + 1442695040888963407ull;
                    /* flat logits: a wide nucleus; every third token masked, the masked ones highest before masking */
                    m[i] = i % 3 ? (float)((double)(x >> 11) / 9007199254740992.0) : -INFINITY;
                }
                int32_t t = -1;
                never &= st_sampler_sample(ms, m, &t) == ST_OK && t % 3 != 0;
            }
            st_sampler_free(ms);
        }
        CHECK(never);
        /* nothing but -inf: an error, not a pick */
        for (int i = 0; i < N; i++) m[i] = -INFINITY;
        m[5] = 0.0f;
        st_sampler *one = make(ps[4], N);
        int32_t t = -1;
        CHECK(one && st_sampler_sample(one, m, &t) == ST_OK && t == 5);
        st_sampler_free(one);
        free(m);
    }

    /* bad parameters are refused */
    {
        st_sampler_params bp = plain();
        bp.top_p = 0.0f;
        st_sampler *bs = NULL;
        CHECK(st_sampler_new(&bp, 10, &bs) == ST_ERR_INVALID && !bs);
        bp = plain();
        CHECK(st_sampler_new(&bp, 0, &bs) == ST_ERR_INVALID);
    }
    free(logits);
    return test_report("test_sampler");
}
