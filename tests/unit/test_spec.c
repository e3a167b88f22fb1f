/* test_spec.c: speculative decoding is exact (engine/spec.h), on tiny f32 models of the hybrids
 * with an MTP block and of qwen3 (n-gram drafts only), at 1 and 2 threads.
 *
 *  - a chunk of rows gives, row for row, bit for bit the logits of one-row decodes of the same
 *    prefix (what makes acceptance by the target's own sample exact);
 *  - after a chunk that kept its rows' states, st_session_keep_row(k) leaves the recurrent states
 *    byte for byte those of a session fed only rows 0..k, and decoding goes on to the same logits;
 *  - generating with --spec mtp and --spec ngram (1, 3 and 5 drafts and the defaults, p_min 0 and
 *    0.5, adapting or not) gives the
 *    same tokens as without drafts, greedy and at temperature 0.8 with a seed, and after
 *    st_spec_finish the session holds the same ids and logits; drafts are made and some accepted;
 *  - the MTP head: its draft row equals a hand computation of MODELS.md §7 on the same weights
 *    (embedding, the two norms, eh_proj, then a trunk-shaped layer, the shared head);
 *  - --spec mtp on a model without a head is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/sampler.h"
#include "engine/session_internal.h"
#include "engine/session_spec.h"
#include "engine/spec.h"
#include "model/model.h"
#include "strata.h"
#include "test.h"
#include "test_model_fixture.h"

enum { P = 24, R = 5, GEN = 128 };
static int32_t prompt[P];
static char dir[256];
static int n_threads = 1;

static st_model *load(const char *arch, int mtp) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, arch);
    fx_opts o = {.arch = arch, .mtp = mtp};
    if (fx_write(path, &o)) return NULL;
    st_model_params mp = {.progress = 0, .prefault = 0, .copy_weights = 0, .device = ST_DEVICE_CPU};
    st_model *m = NULL;
    if (st_model_load(path, &mp, &m) != ST_OK) fprintf(stderr, "%s: %s\n", arch, st_last_error());
    remove(path);
    return m;
}

static int kv_f32;

static st_session *session(st_model *m) {
    st_session_params sp = st_session_default_params();
    sp.kv_f32 = kv_f32;
    sp.n_threads = n_threads;
    sp.n_ctx = 256;
    sp.n_prefill = 7;
    st_session *s = NULL;
    if (st_session_new(m, &sp, &s) != ST_OK) fprintf(stderr, "session: %s\n", st_last_error());
    return s;
}

/* Bytes of the recurrent states of the trunk. */
static int same_recurrent(st_model *m, st_session *a, st_session *b) {
    const st_hparams *hp = &m->hp;
    size_t conv = (size_t)(st_hp_conv_channels(hp) * (hp->ssm_conv_kernel - 1)) * sizeof(float);
    size_t ssm = (size_t)(hp->ssm_n_v * hp->ssm_state * hp->ssm_state) * sizeof(float);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        st_layer_state *x = &st_session_state(a)->layers[il], *y = &st_session_state(b)->layers[il];
        if (!x->ssm) continue;
        if (memcmp(x->ssm, y->ssm, ssm) || memcmp(x->conv, y->conv, conv)) return 0;
    }
    return 1;
}

static void check_chunk_equals_decode(st_model *m, const char *arch) {
    int64_t V = m->hp.n_vocab, d = m->hp.n_embd;
    int32_t rows[R] = {3, 17, 5, 60, 9};
    float *one = malloc(sizeof(float) * R * V), *chunk = malloc(sizeof(float) * R * V), *h = malloc(sizeof(float) * R * d);
    st_session *a = session(m), *b = session(m);
    CHECK(st_session_feed(a, prompt, P, NULL) == ST_OK && st_session_feed(b, prompt, P, NULL) == ST_OK);
    for (int i = 0; i < R; i++) {
        CHECK(st_session_feed(a, &rows[i], 1, NULL) == ST_OK);
        memcpy(one + i * V, st_session_logits(a), sizeof(float) * V);
    }
    CHECK(st_session_reserve_steps(b, R) == ST_OK);
    CHECK(st_session_feed_rows(b, rows, R, chunk, h, st_session_is_recurrent(b)) == ST_OK);
    CHECKF(!memcmp(one, chunk, sizeof(float) * R * V), "%s, %d threads: a chunk's rows differ from one-row decodes", arch, n_threads);

    /* Back to the state after row 2; then the same as a session fed rows 0..2 and the next row. */
    if (st_session_is_recurrent(b)) st_session_keep_row(b, P, 2);
    else CHECK(st_session_cut(b, P + 3, NULL) == ST_OK);
    st_session *c = session(m);
    CHECK(st_session_feed(c, prompt, P, NULL) == ST_OK && st_session_feed(c, rows, 3, NULL) == ST_OK);
    CHECK(st_session_n_past(b) == P + 3);
    if (st_session_is_recurrent(b)) CHECKF(same_recurrent(m, b, c), "%s: the kept row's state differs", arch);
    int32_t next = 11;
    CHECK(st_session_feed(b, &next, 1, NULL) == ST_OK && st_session_feed(c, &next, 1, NULL) == ST_OK);
    CHECKF(!memcmp(st_session_logits(b), st_session_logits(c), sizeof(float) * V), "%s: after the rollback the logits differ", arch);
    st_session_free(a);
    st_session_free(b);
    st_session_free(c);
    free(one);
    free(chunk);
    free(h);
}

/* Generates GEN tokens after the prompt, plainly (mode < 0) or through a decoder. */
static int generate(st_model *m, int mode, int n_draft, float p_min, int adapt, float temp, int32_t *out,
                    st_spec_stats *stats, int32_t *ids_out, float *logits_out) {
    st_sampler_params sp = st_sampler_default_params();
    sp.temperature = temp;
    sp.seed = 7;
    st_sampler *smp = NULL;
    st_session *s = session(m);
    st_spec *d = NULL;
    st_sampler_new(&sp, (int32_t)m->hp.n_vocab, &smp);
    for (int i = 0; i < P; i++) st_sampler_accept(smp, prompt[i]);
    int n = 0;
    if (mode < 0) {
        CHECK(st_session_feed(s, prompt, P, NULL) == ST_OK);
        for (; n < GEN; n++) {
            CHECK(st_sampler_sample(smp, st_session_logits(s), &out[n]) == ST_OK);
            st_sampler_accept(smp, out[n]);
            CHECK(st_session_feed(s, &out[n], 1, NULL) == ST_OK);
        }
    } else {
        st_spec_params p = {.mode = mode, .n_draft = n_draft, .p_min = p_min, .adapt = adapt};
        CHECK(st_spec_new(s, &p, &d) == ST_OK);
        CHECK(st_spec_prompt(d, prompt, P) == ST_OK);
        for (; n < GEN; n++) {
            CHECK(st_sampler_sample(smp, st_spec_logits(d), &out[n]) == ST_OK);
            st_sampler_accept(smp, out[n]);
            CHECK(st_spec_feed(d, out[n]) == ST_OK);
            CHECK(st_spec_n_past(d) == P + n + 1);
        }
        st_spec_finish(d);
        *stats = *st_spec_stats_get(d);
    }
    CHECK(st_session_n_past(s) == P + GEN);
    memcpy(ids_out, st_session_ids(s), sizeof(int32_t) * (P + GEN));
    memcpy(logits_out, st_session_logits(s), sizeof(float) * m->hp.n_vocab);
    st_spec_free(d);
    st_session_free(s);
    st_sampler_free(smp);
    return n;
}

static void check_generation(st_model *m, const char *arch) {
    int64_t V = m->hp.n_vocab;
    /* (mode, drafts, p_min): every draft length at one thread, the usual one at two */
    static const struct { int mode, n_draft; float p_min; int adapt; } runs[] = {
        {ST_SPEC_MTP, 3, 0.0f, 0}, {ST_SPEC_NGRAM, 3, 0.0f, 0}, {ST_SPEC_MTP, 1, 0.0f, 0},
        {ST_SPEC_MTP, 5, 0.5f, 0}, {ST_SPEC_NGRAM, 5, 0.0f, 0}, {ST_SPEC_NGRAM, 1, 0.0f, 0},
        {ST_SPEC_MTP, 3, 0.0f, 1}, {ST_SPEC_NGRAM, 4, 0.0f, 1},
        {ST_SPEC_MTP, 0, 0.0f, 1}, {ST_SPEC_NGRAM, 0, 0.0f, 1}, /* the defaults: 3 and 8 drafts */
    };
    int n_runs = n_threads == 1 ? (int)(sizeof runs / sizeof runs[0]) : 2;
    float temps[2] = {0.0f, 0.8f};
    int32_t ref[GEN], got[GEN], ref_ids[P + GEN], got_ids[P + GEN];
    float *ref_l = malloc(sizeof(float) * V), *got_l = malloc(sizeof(float) * V);
    int64_t accepted[3] = {0}, drafted[3] = {0};
    for (int ti = 0; ti < 2; ti++) {
        st_spec_stats st;
        generate(m, -1, 0, 0, 0, temps[ti], ref, &st, ref_ids, ref_l);
        for (int ri = 0; ri < n_runs; ri++) {
            int mode = runs[ri].mode;
            if (mode == ST_SPEC_MTP && !m->n_mtp) continue;
            generate(m, mode, runs[ri].n_draft, runs[ri].p_min, runs[ri].adapt, temps[ti], got, &st, got_ids, got_l);
            CHECKF(!memcmp(ref, got, sizeof ref), "%s %s, %d drafts, p_min %.1f, temp %.1f, %d threads: the text differs",
                   arch, st_spec_mode_name(mode), runs[ri].n_draft, (double)runs[ri].p_min, (double)temps[ti], n_threads);
            CHECKF(!memcmp(ref_ids, got_ids, sizeof ref_ids) && !memcmp(ref_l, got_l, sizeof(float) * V),
                   "%s %s: the session after the reply differs", arch, st_spec_mode_name(mode));
            CHECK(st.fed == GEN && st.accepted <= st.drafted && st.forwards + st.accepted == GEN);
            drafted[mode] += st.drafted;
            accepted[mode] += st.accepted;
        }
    }
    for (int mode = ST_SPEC_MTP; mode <= ST_SPEC_NGRAM; mode++) {
        if (mode == ST_SPEC_MTP && !m->n_mtp) continue;
        CHECKF(drafted[mode] > 0 && accepted[mode] > 0, "%s %s: %lld drafted, %lld accepted: the accept path went untested",
               arch, st_spec_mode_name(mode), (long long)drafted[mode], (long long)accepted[mode]);
    }
    free(ref_l);
    free(got_l);
}

static float dot(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return (float)s;
}

static void rms(const float *x, const float *w, float *y, int64_t n, float eps) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(s / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

/* The first draft row at position 0 (h = 0): with one cell the attention is that cell's v, so
 * the block is simple enough to write out: u = W_eh[e ; 0-norm], u += W_o(v * sigmoid(gate)),
 * u += FFN(norm u), logits = W_head norm(u). Checked against st_forward_mtp within 1e-4. */
static void check_head_by_hand(st_model *m, const char *arch) {
    const st_hparams *hp = &m->hp;
    int64_t d = hp->n_embd, V = hp->n_vocab, hd = hp->head_dim, il = hp->n_layer;
    const st_layer *L = &m->layers[il];
    if (L->gate_exps.data || L->gate_up_exps.data) return; /* the dense block only (qwen35) */
    int32_t tok = 42;
    float *e = calloc((size_t)(4 * d + 4 * V + 64 * d), sizeof(float));
    float *cat = e + d, *u = cat + 2 * d, *t = u + d, *logits = t + d, *want = logits + V, *zero = want + V;
    float *big = zero + d;
    kv_f32 = 1; /* the hand computation reads v in f32 */
    st_session *s = session(m);
    kv_f32 = 0;
    float hout[FX_D];
    st_mtp_chunk c = {.tokens = &tok, .h_in = zero, .n = 1, .logits = logits, .h_out = hout};
    CHECK(st_session_mtp(s, &c) == ST_OK);
    /* by hand, f32 weights */
    const float *E = m->tok_embd.data;
    rms(E + tok * d, L->nextn_enorm.f32, cat, d, hp->eps);
    rms(zero, L->nextn_hnorm.f32, cat + d, d, hp->eps);
    for (int64_t r = 0; r < d; r++) u[r] = dot((const float *)L->nextn_eh_proj.data + r * 2 * d, cat, 2 * d);
    float *hn = big, *v = big + d, *o = v + hd * hp->n_head_kv[il], *qg = o + hd * hp->n_head[il];
    rms(u, L->attn_norm.f32, hn, d, hp->eps);
    int64_t Hkv = hp->n_head_kv[il], H = hp->n_head[il], r = H / Hkv;
    for (int64_t j = 0; j < hd * Hkv; j++) v[j] = dot((const float *)L->wv.data + j * d, hn, d);
    for (int64_t j = 0; j < 2 * hd * H; j++) qg[j] = dot((const float *)L->wq.data + j * d, hn, d);
    for (int64_t hh = 0; hh < H; hh++)
        for (int64_t i = 0; i < hd; i++) {
            float g = qg[hh * 2 * hd + hd + i];
            o[hh * hd + i] = v[(hh / r) * hd + i] / (1.0f + expf(-g));
        }
    for (int64_t j = 0; j < d; j++) u[j] += dot((const float *)L->wo.data + j * hd * H, o, hd * H);
    rms(u, L->ffn_norm.f32, hn, d, hp->eps);
    int64_t ff = hp->n_ff[il];
    float *a = big + 40 * d;
    for (int64_t j = 0; j < ff; j++) {
        float g = dot((const float *)L->ffn_gate.data + j * d, hn, d), up = dot((const float *)L->ffn_up.data + j * d, hn, d);
        a[j] = g / (1.0f + expf(-g)) * up;
    }
    for (int64_t j = 0; j < d; j++) u[j] += dot((const float *)L->ffn_down.data + j * ff, a, ff);
    rms(u, st_mtp_head_norm(m)->f32, t, d, hp->eps);
    const st_tensor *head = st_mtp_head(m);
    float err = 0, mx = 0;
    for (int64_t j = 0; j < V; j++) {
        want[j] = dot((const float *)head->data + j * d, t, d);
        err = fmaxf(err, fabsf(want[j] - logits[j]));
        mx = fmaxf(mx, fabsf(want[j]));
    }
    CHECKF(err <= 1e-4f * mx, "%s: the MTP head's logits are %g off a hand computation (max %g)", arch, (double)err, (double)mx);
    CHECK(st_session_mtp_n_past(s) == 1);
    st_session_free(s);
    free(e);
}

int main(void) {
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/strata-test-spec-XXXXXX", tmp);
    if (!mkdtemp(dir)) SKIP("cannot create a temporary directory");
    /* a prompt that repeats itself, so the n-gram lookup finds matches */
    for (int i = 0; i < P; i++) prompt[i] = (int32_t)((i * 7 + 3) % 13 + (i >= 12 ? 0 : 1));
    const char *archs[] = {"qwen35", "qwen35moe", "qwen3next", "qwen3"};
    for (int a = 0; a < 4; a++) {
        st_model *m = load(archs[a], a == 1 ? 2 : 1);
        CHECKF(m != NULL, "%s: the model with an MTP block loads", archs[a]);
        if (!m) continue;
        CHECK(m->n_mtp == (a < 3));
        for (n_threads = 1; n_threads <= 2; n_threads++) {
            check_chunk_equals_decode(m, archs[a]);
            check_generation(m, archs[a]);
        }
        n_threads = 1;
        if (m->n_mtp) check_head_by_hand(m, archs[a]);
        if (!m->n_mtp) {
            st_session *s = session(m);
            st_spec *d = NULL;
            st_spec_params p = st_spec_default_params();
            p.mode = ST_SPEC_MTP;
            CHECK(st_spec_new(s, &p, &d) == ST_ERR_UNSUPPORTED && d == NULL);
            p.mode = ST_SPEC_AUTO;
            CHECK(st_spec_new(s, &p, &d) == ST_OK && st_spec_mode(d) == ST_SPEC_NONE);
            st_spec_free(d);
            st_session_free(s);
        }
        st_model_free(m);
    }
    rmdir(dir);
    return test_report("test_spec");
}
