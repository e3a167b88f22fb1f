/* state_check.c: strata.h's "Session state" on a session whose state lives on the GPU.
 *
 *   state_check MODEL.gguf [--cpu]   (a hybrid model: qwen35moe/qwen35/qwen3next; tiny q8_0 in ctest)
 *
 * Every device session here first grows its workspace to the largest chunk used and feeds one
 * token alone, so that its decode graph (bucket 0) is captured before anything is compared: every
 * later decode step replays it, and a comparison sees the state copied in and out, not an eager
 * step against a replayed one.
 *
 *  (a) cut: feed A, checkpoint, feed B (one chunk, then decode steps), cut back to the checkpoint
 *      and feed B again: every logit equal bit for bit to the first time's.
 *  (b) save/load: the device session of (a) saved (buffer and FILE*: the same bytes) and loaded
 *      into a fresh device session, which continues bit for bit like the original (and cuts back
 *      to the saved checkpoint exactly), and into a CPU session (same file, ST_DEVICE_CPU, f16 KV
 *      both), which continues like it within quantization noise (top-1 counting near ties, mean
 *      KL < 1e-3). A CPU session's saved state has the GPU's header and size, and loads into a
 *      device session that then continues like the CPU session within the same bounds.
 *  (c) refusal: a state with a byte flipped, truncated, with a bad magic, or for another KV type
 *      is refused, and the device session continues bit for bit like an untouched twin.
 *
 * One PASS/FAIL line per check. Exit: 0 pass, 1 fail, 77 no GPU (skipped). --cpu loads the
 * "device" model on the CPU as well: the same checks between CPU sessions, so that the program
 * itself can be checked on a machine without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "logit_compare.h"
#include "strata.h"

#define KL_MAX 1e-3

enum { NA = 40, NB = 12, ND = 4, NE = 9 };

static int64_t V;
static int32_t A[NA], B[NB], D[ND], E[NE];

static int fail(const char *what) {
    fprintf(stderr, "state_check: %s: %s\n", what, st_last_error());
    return 1;
}

/* Rows compared within noise: top-1 agreement (near ties count) and the sum of KL(ref || got). */
typedef struct cmp {
    int64_t rows, agree;
    double kl;
} cmp;

static void compare_row(cmp *c, const float *ref, const float *got) {
    int exact;
    c->rows++;
    c->agree += lc_top1(ref, got, V, &exact);
    c->kl += lc_kl(ref, got, V);
}

/* A session of 128 f16 cells (kv_f32 on request). warm (device sessions): the workspace grown to
 * the largest chunk used here (growing it drops the graphs) and then the decode graph captured, so
 * that every later decode step replays the same graph. */
static st_status new_session(st_model *m, int kv_f32, int warm, st_session **s) {
    st_session_params sp = st_session_default_params();
    sp.n_ctx = 128;
    sp.kv_f32 = kv_f32;
    ST_TRY(st_session_new(m, &sp, s));
    if (!warm) return ST_OK;
    ST_TRY(st_session_feed(*s, A, NA - 1, NULL));
    ST_TRY(st_session_feed(*s, &A[0], 1, NULL));
    st_session_reset(*s);
    return ST_OK;
}

/* The logits of a continuation: toks as one chunk (every row), then D as decode steps. */
typedef struct run {
    float *rows;  /* [n + ND][V] */
    int64_t n;
} run;

static st_status continue_with(st_session *s, const int32_t *toks, int64_t n, run *r) {
    r->n = n + ND;
    if (!r->rows && !(r->rows = malloc((size_t)(r->n * V) * sizeof(float))))
        return st_fail(ST_ERR_NOMEM, "out of memory");
    ST_TRY(st_session_feed(s, toks, n, r->rows));
    for (int64_t i = 0; i < ND; i++) {
        ST_TRY(st_session_feed(s, &D[i], 1, NULL));
        memcpy(r->rows + (n + i) * V, st_session_logits(s), (size_t)V * sizeof(float));
    }
    return ST_OK;
}

static int same_bits(const run *x, const run *y) {
    return x->n == y->n && !memcmp(x->rows, y->rows, (size_t)(x->n * V) * sizeof(float));
}

/* Rows of y within noise of x; prints the numbers. */
static int near_run(const char *what, const run *x, const run *y) {
    cmp c = {0};
    for (int64_t r = 0; r < x->n; r++) compare_row(&c, x->rows + r * V, y->rows + r * V);
    int ok = c.agree == c.rows && c.kl / (double)c.rows < KL_MAX;
    printf("  %s: %lld rows, top-1 %lld/%lld (near ties count), mean KL %.2e\n", what, (long long)c.rows,
           (long long)c.agree, (long long)c.rows, c.kl / (double)c.rows);
    return ok;
}

static int report(const char *name, int ok) {
    printf("%s: %s\n", name, ok ? "PASS" : "FAIL");
    return ok;
}

/* A as a chunk and its last token as a decode step, then a checkpoint at NA. */
static st_status feed_a(st_session *s) {
    ST_TRY(st_session_feed(s, A, NA - 1, NULL));
    ST_TRY(st_session_feed(s, &A[NA - 1], 1, NULL));
    return st_session_checkpoint(s);
}

int main(int argc, char **argv) {
    /* --cpu: the "device" model on the CPU too, to check this program where there is no GPU */
    int cpu_only = argc == 3 && !strcmp(argv[2], "--cpu");
    if (argc != 2 && !cpu_only) {
        fprintf(stderr, "usage: state_check MODEL.gguf [--cpu]\n");
        return 2;
    }
    if (st_device_count() == 0 && !cpu_only) {
        printf("state_check: skipped: no CUDA device in this build or machine\n");
        return 77;
    }
    st_model *gm, *cm;
    if (lc_load(argv[1], cpu_only ? ST_DEVICE_CPU : ST_DEVICE_CUDA, &gm) != ST_OK) return fail("cuda model");
    if (lc_load(argv[1], ST_DEVICE_CPU, &cm) != ST_OK) return fail("cpu model");
    printf("state_check: %s %s on %s\n", argv[1], st_model_arch(gm), st_model_device(gm));
    V = st_model_n_vocab(gm);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int32_t *all[] = {A, B, D, E};
    int lens[] = {NA, NB, ND, NE};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < lens[k]; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            all[k][i] = (int32_t)(x % (uint64_t)V);
        }
    int ok_all = 1;

    /* (a) cut back to a checkpoint on the device */
    st_session *g1;
    run b1 = {0}, b2 = {0};
    if (new_session(gm, 0, 1, &g1) || feed_a(g1)) return fail("(a) feed A");
    if (!st_session_is_recurrent(g1)) {
        fprintf(stderr, "state_check: %s has no recurrent layers: give a hybrid model\n", argv[1]);
        return 2;
    }
    if (continue_with(g1, B, NB, &b1)) return fail("(a) feed B");
    int64_t kept = -1, ck[8];
    int nck = st_session_checkpoints(g1, ck, 8);
    if (st_session_cut(g1, NA + 3, &kept)) return fail("(a) cut");
    int ok = kept == NA && nck == 1 && ck[0] == NA && st_session_n_past(g1) == NA;
    if (continue_with(g1, B, NB, &b2)) return fail("(a) feed B again");
    int bits = same_bits(&b1, &b2);
    printf("  cut to %d: kept %lld (checkpoint at %lld of %d held); B again (%d-row chunk + %d decode steps) %s\n", NA + 3,
           (long long)kept, nck ? (long long)ck[0] : -1LL, nck, NB, ND, bits ? "bit-identical" : "DIFFERS");
    ok_all &= report("(a) device cut back to a checkpoint", ok && bits);

    /* (b) save on the device; load on the device and on the CPU; save on the CPU, load on the device */
    void *gbuf;
    size_t gn;
    if (st_session_state_save(g1, &gbuf, &gn)) return fail("(b) device save");
    FILE *f = tmpfile();
    if (!f || st_session_state_write(g1, f)) return fail("(b) device write");
    long fn = ftell(f);
    unsigned char *fb = malloc(gn);
    rewind(f);
    int same_file = fb && fn == (long)gn && fread(fb, 1, gn, f) == gn && !memcmp(fb, gbuf, gn);
    free(fb);
    st_session *g2, *c2;
    if (new_session(gm, 0, 1, &g2) || new_session(cm, 0, 0, &c2)) return fail("(b) sessions");
    rewind(f);
    if (st_session_state_read(g2, f)) return fail("(b) device load (FILE*)");
    fclose(f);
    if (st_session_state_load(c2, gbuf, gn)) return fail("(b) cpu load of the device's state");
    int ok_pos = st_session_n_past(g2) == NA + NB + ND && st_session_n_past(c2) == NA + NB + ND &&
                 !memcmp(st_session_ids(g2), st_session_ids(g1), (NA + NB + ND) * sizeof(int32_t));
    run e1 = {0}, e2 = {0}, e3 = {0};
    if (continue_with(g1, E, NE, &e1) || continue_with(g2, E, NE, &e2) || continue_with(c2, E, NE, &e3))
        return fail("(b) continue");
    int dev_bits = same_bits(&e1, &e2);
    printf("  device state %zu bytes (buffer and FILE* %s); device -> device: continuation %s\n", gn,
           same_file ? "identical" : "DIFFER", dev_bits ? "bit-identical" : "DIFFERS");
    int cpu_near = near_run("device -> cpu, continuation vs the device session", &e1, &e3);
    /* the saved checkpoint came through: both go back to A and redo B */
    run b3 = {0}, b4 = {0};
    if (st_session_cut(g2, NA, &kept) || kept != NA || continue_with(g2, B, NB, &b3)) return fail("(b) device cut after load");
    if (st_session_cut(c2, NA, &kept) || kept != NA || continue_with(c2, B, NB, &b4)) return fail("(b) cpu cut after load");
    int ck_bits = same_bits(&b1, &b3);
    printf("  loaded checkpoint: device cut to %d + B %s\n", NA, ck_bits ? "bit-identical to (a)" : "DIFFERS from (a)");
    int ck_near = near_run("loaded checkpoint on the cpu: cut + B vs (a)", &b1, &b4);

    /* a CPU session's own state, into a device session */
    st_session *c1, *g3;
    void *cbuf;
    size_t cn;
    if (new_session(cm, 0, 0, &c1) || feed_a(c1) || st_session_feed(c1, B, NB, NULL)) return fail("(b) cpu feed");
    for (int i = 0; i < ND; i++)
        if (st_session_feed(c1, &D[i], 1, NULL)) return fail("(b) cpu decode");
    if (st_session_state_save(c1, &cbuf, &cn)) return fail("(b) cpu save");
    size_t head = 112 + (NA + NB + ND) * sizeof(int32_t);
    int same_layout = cn == gn && !memcmp(cbuf, gbuf, head);
    if (new_session(gm, 0, 1, &g3) || st_session_state_load(g3, cbuf, cn)) return fail("(b) device load of the cpu's state");
    run e4 = {0}, e5 = {0};
    if (continue_with(c1, E, NE, &e4) || continue_with(g3, E, NE, &e5)) return fail("(b) continue from the cpu's state");
    printf("  cpu state %zu bytes: header, ids and size %s the device's\n", cn, same_layout ? "equal" : "DIFFER from");
    int gpu_near = near_run("cpu -> device, continuation vs the cpu session", &e4, &e5);
    ok_all &= report("(b) save/load between device and cpu",
                     ok_pos && same_file && dev_bits && cpu_near && ck_bits && ck_near && same_layout && gpu_near);

    /* (c) refused states leave the device session as it was */
    st_session *g4, *g5, *g6;
    if (new_session(gm, 0, 1, &g4) || new_session(gm, 0, 1, &g5) || new_session(gm, 1, 1, &g6)) return fail("(c) sessions");
    if (st_session_state_load(g4, gbuf, gn) || st_session_state_load(g5, gbuf, gn)) return fail("(c) clean load");
    unsigned char *bad = malloc(gn);
    if (!bad) return fail("(c) memory");
    int refused = 0, tries = 0;
    for (int t = 0; t < 3; t++) {
        memcpy(bad, gbuf, gn);
        size_t n = gn;
        if (t == 0) bad[head + (gn - head) / 2] ^= 0x10;  /* inside the layers' state */
        if (t == 1) n = gn - 1;                           /* truncated */
        if (t == 2) bad[0] = 'X';                         /* not a state */
        tries++;
        refused += st_session_state_load(g5, bad, n) == ST_ERR_FORMAT;
        st_clear_error();
    }
    tries++;
    refused += st_session_state_load(g6, gbuf, gn) == ST_ERR_FORMAT;  /* f16 state, f32 session */
    st_clear_error();
    free(bad);
    int kept_pos = st_session_n_past(g5) == NA + NB + ND;
    run e6 = {0}, e7 = {0};
    if (continue_with(g4, E, NE, &e6) || continue_with(g5, E, NE, &e7)) return fail("(c) continue");
    int twin = same_bits(&e6, &e7);
    printf("  refused %d of %d bad states; the session kept %lld positions; continuation vs the untouched twin %s\n", refused,
           tries, (long long)st_session_n_past(g5) - NE - ND, twin ? "bit-identical" : "DIFFERS");
    ok_all &= report("(c) a refused state leaves the device session unchanged", refused == tries && kept_pos && twin);

    st_session *ss[] = {g1, g2, g3, g4, g5, g6, c1, c2};
    for (size_t i = 0; i < sizeof ss / sizeof *ss; i++) st_session_free(ss[i]);
    run *rs[] = {&b1, &b2, &b3, &b4, &e1, &e2, &e3, &e4, &e5, &e6, &e7};
    for (size_t i = 0; i < sizeof rs / sizeof *rs; i++) free(rs[i]->rows);
    free(gbuf);
    free(cbuf);
    st_model_free(gm);
    st_model_free(cm);
    printf("state_check: %s\n", ok_all ? "PASS" : "FAIL");
    return ok_all ? 0 : 1;
}
