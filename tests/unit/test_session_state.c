/* test_session_state.c: strata.h's "Session state" on tiny f32 models (test_model_fixture.h: the
 * hybrid qwen35 and qwen35moe, the attention-only qwen3) and, when present, the demo model.
 *
 *  - the session holds exactly the ids it was fed; a failed feed and a reset hold none;
 *  - cut-back equals a fresh feed bit for bit: the session cut back (KV) or returned to a
 *    checkpoint (recurrent state) and fed a new tail gives the logits of a fresh session fed the
 *    kept ids and the same tail in the same pieces;
 *  - checkpoints: at most ST_SESSION_CHECKPOINTS, the oldest dropped; a cut goes to the latest at
 *    or before the position and drops the later ones; with none there it is refused and the
 *    session untouched; a reset forgets them, so an old checkpoint never stands for new ids;
 *  - save/load (memory and FILE*) round trip: the same ids, checkpoints and next logits;
 *  - a truncated, padded, altered, resealed-with-bad-content, foreign-model, other-KV-type or
 *    too-long state is refused with a message saying which, and the session is untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/session_internal.h"
#include "model/model.h"
#include "strata.h"
#include "test.h"
#include "test_model_fixture.h"

enum { N = 40, CTX = 64 };
static char dir[256];

static st_model *load_fixture(const char *arch) {
    st_model_params mp = st_model_default_params();
    mp.copy_weights = 0;
    return fx_load(dir, &(fx_opts){.arch = arch}, "state", &mp);
}

static st_session *session(st_model *m, int64_t n_ctx, int kv_f32) {
    st_session_params sp = st_session_default_params();
    sp.n_threads = 1;
    sp.n_ctx = n_ctx;
    sp.kv_f32 = kv_f32;
    st_session *s = NULL;
    if (st_session_new(m, &sp, &s) != ST_OK) fprintf(stderr, "session: %s\n", st_last_error());
    return s;
}

static int32_t a_ids[N], b_ids[N];

static int feed(st_session *s, const int32_t *ids, int64_t from, int64_t to) {
    return st_session_feed(s, ids + from, to - from, NULL) == ST_OK;
}

static int same_logits(st_model *m, st_session *x, st_session *y) {
    return !memcmp(st_session_logits(x), st_session_logits(y), (size_t)st_model_n_vocab(m) * sizeof(float));
}

/* The whole state as bytes (the save path), to prove "untouched". */
static void *snapshot(st_session *s, size_t *n) {
    void *b = NULL;
    if (st_session_state_save(s, &b, n) != ST_OK) return NULL;
    return b;
}

static uint64_t fnv(const unsigned char *p, size_t n) {
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* Rewrites the trailing checksum, as someone forging a state would. */
static void reseal(unsigned char *b, size_t n) {
    uint64_t h = fnv(b, n - 8);
    memcpy(b + n - 8, &h, 8);
}

static void test_ids(st_model *m, const char *name) {
    st_session *s = session(m, CTX, 0);
    if (!s) return;
    CHECKF(st_session_n_past(s) == 0, "%s", name);
    CHECK(feed(s, a_ids, 0, 7) && feed(s, a_ids, 7, 20));
    CHECKF(st_session_n_past(s) == 20 && !memcmp(st_session_ids(s), a_ids, 20 * sizeof(int32_t)), "%s: ids held", name);
    int32_t bad[2] = {1, 100000};
    CHECK(st_session_feed(s, bad, 2, NULL) == ST_ERR_RANGE);
    CHECKF(st_session_n_past(s) == 20 && !memcmp(st_session_ids(s), a_ids, 20 * sizeof(int32_t)), "%s: a refused feed holds the same", name);
    st_session_reset(s);
    CHECK(st_session_n_past(s) == 0);
    st_session_free(s);
}

/* Reference: a fresh session fed ids[0..k) then tail[k..end) in the same pieces. */
static st_session *fresh(st_model *m, const int32_t *ids, int64_t k, const int32_t *tail, int64_t end) {
    st_session *f = session(m, CTX, 0);
    if (f && (!feed(f, ids, 0, k) || !feed(f, tail, k, end))) fprintf(stderr, "fresh: %s\n", st_last_error());
    return f;
}

static void test_cut(st_model *m, const char *name) {
    int rec = st_hp_is_hybrid(&m->hp);
    st_session *s = session(m, CTX, 0);
    if (!s) return;
    CHECKF(st_session_is_recurrent(s) == rec, "%s: recurrent %d", name, st_session_is_recurrent(s));
    /* Pieces of 5 with a checkpoint after each: positions 5, 10, ..., 30 (the last 4 kept). */
    for (int64_t p = 0; p < 30; p += 5) {
        CHECK(feed(s, a_ids, p, p + 5));
        CHECK(st_session_checkpoint(s) == ST_OK);
    }
    CHECK(feed(s, a_ids, 30, 33));
    int64_t pos[8];
    int nc = st_session_checkpoints(s, pos, 8);
    if (rec)
        CHECKF(nc == ST_SESSION_CHECKPOINTS && pos[0] == 15 && pos[3] == 30, "%s: %d checkpoints, oldest %lld", name, nc,
               (long long)pos[0]);
    else
        CHECKF(nc == 0, "%s: attention only keeps no checkpoints (%d)", name, nc);

    /* A cut before the oldest checkpoint: refused, nothing changes. */
    if (rec) {
        size_t n0, n1;
        void *before = snapshot(s, &n0);
        int64_t kept = -1;
        CHECKF(st_session_cut(s, 12, &kept) == ST_ERR_RANGE && strstr(st_last_error(), "no checkpoint"), "%s: %s", name, st_last_error());
        void *after = snapshot(s, &n1);
        CHECKF(before && after && n0 == n1 && !memcmp(before, after, n0) && kept == -1, "%s: a refused cut leaves the state", name);
        free(before);
        free(after);
    }
    CHECK(st_session_cut(s, 34, NULL) == ST_ERR_RANGE);

    /* Cut to 22: the KV goes to 22 exactly, the recurrent state to the checkpoint at 20. */
    int64_t kept = -1;
    CHECKF(st_session_cut(s, 22, &kept) == ST_OK, "%s: %s", name, st_last_error());
    int64_t want = rec ? 20 : 22;
    CHECKF(kept == want && st_session_n_past(s) == want, "%s: kept %lld", name, (long long)kept);
    nc = st_session_checkpoints(s, pos, 8);
    CHECKF(!rec || (nc == 2 && pos[1] == 20), "%s: the checkpoints after the cut are dropped (%d)", name, nc);
    CHECK(!memcmp(st_session_ids(s), a_ids, (size_t)want * sizeof(int32_t)));
    CHECK(feed(s, b_ids, want, 36));
    st_session *f = fresh(m, a_ids, want, b_ids, 36);
    CHECKF(f && same_logits(m, s, f), "%s: cut back and fed equals fresh, bit for bit", name);
    st_session_free(f);

    /* Reuse: a prompt sharing 27 ids with what is held (a_ids[0..20) + b_ids[20..36) ...). */
    int32_t prompt[40];
    memcpy(prompt, st_session_ids(s), 27 * sizeof(int32_t));
    memcpy(prompt + 27, a_ids + 27, 13 * sizeof(int32_t));
    CHECK(st_session_reuse(s, prompt, 40, &kept) == ST_OK);
    CHECKF(kept == (rec ? 20 : 27), "%s: reuse kept %lld", name, (long long)kept);
    CHECK(feed(s, prompt, kept, 40));
    f = fresh(m, prompt, kept, prompt, 40);
    CHECKF(f && same_logits(m, s, f), "%s: reuse equals fresh", name);
    st_session_free(f);
    /* The same prompt again: everything but its last token is kept. */
    CHECK(st_session_reuse(s, prompt, 40, &kept) == ST_OK);
    CHECKF(kept == (rec ? 20 : 39), "%s: reuse of the held prompt kept %lld", name, (long long)kept);

    /* A reset forgets the checkpoints: new ids never meet an old state. */
    st_session_reset(s);
    CHECK(st_session_checkpoints(s, pos, 8) == 0);
    CHECK(feed(s, b_ids, 0, 30));
    if (rec) CHECK(st_session_cut(s, 25, NULL) == ST_ERR_RANGE);
    CHECK(st_session_cut(s, 0, &kept) == ST_OK && kept == 0 && st_session_n_past(s) == 0);
    st_session_free(s);
}

static void test_save_load(st_model *m, st_model *other, const char *name) {
    st_session *s = session(m, CTX, 0);
    st_session *t = session(m, CTX, 0);
    if (!s || !t) goto done;
    for (int64_t p = 0; p < 24; p += 8) {
        CHECK(feed(s, a_ids, p, p + 8));
        CHECK(st_session_checkpoint(s) == ST_OK);
    }
    CHECK(feed(s, a_ids, 24, 30));
    void *buf = NULL;
    size_t n = 0;
    CHECKF(st_session_state_save(s, &buf, &n) == ST_OK, "%s: %s", name, st_last_error());
    CHECK(feed(t, b_ids, 0, 12));
    CHECKF(st_session_state_load(t, buf, n) == ST_OK, "%s: load: %s", name, st_last_error());
    int64_t ps[8], pt[8];
    int ns = st_session_checkpoints(s, ps, 8), nt = st_session_checkpoints(t, pt, 8);
    CHECKF(st_session_n_past(t) == 30 && !memcmp(st_session_ids(t), a_ids, 30 * sizeof(int32_t)), "%s: loaded ids", name);
    CHECKF(ns == nt && !memcmp(ps, pt, (size_t)ns * sizeof *ps), "%s: loaded checkpoints", name);
    CHECK(feed(s, b_ids, 30, 33) && feed(t, b_ids, 30, 33));
    CHECKF(same_logits(m, s, t), "%s: a loaded session continues as the saved one", name);
    /* And it can return to a saved checkpoint exactly. */
    int64_t ks = -1, kt = -1;
    CHECK(st_session_cut(s, 17, &ks) == ST_OK && st_session_cut(t, 17, &kt) == ST_OK && ks == kt);
    CHECK(feed(s, b_ids, ks, 26) && feed(t, b_ids, kt, 26));
    CHECKF(same_logits(m, s, t), "%s: cut back after a load", name);

    /* Through a FILE*. */
    FILE *f = tmpfile();
    CHECK(f && st_session_state_write(s, f) == ST_OK);
    st_session *u = session(m, CTX, 0);
    if (f && u) {
        rewind(f);
        CHECKF(st_session_state_read(u, f) == ST_OK, "%s: read: %s", name, st_last_error());
        CHECK(feed(s, a_ids, 26, 29) && feed(u, a_ids, 26, 29));
        CHECKF(same_logits(m, s, u), "%s: FILE round trip", name);
        /* A truncated file is refused. */
        rewind(f);
        CHECK(ftruncate(fileno(f), 200) == 0);
        st_session_reset(u);
        CHECK(feed(u, b_ids, 0, 5));
        CHECKF(st_session_state_read(u, f) == ST_ERR_FORMAT && strstr(st_last_error(), "truncated"), "%s: %s", name, st_last_error());
        CHECK(st_session_n_past(u) == 5);
    }
    if (f) fclose(f);
    st_session_free(u);

    /* Tampering: t holds something else; every refusal leaves it byte for byte. */
    st_session_reset(t);
    CHECK(feed(t, b_ids, 0, 9));
    size_t n0;
    void *before = snapshot(t, &n0);
    unsigned char *x = malloc(n + 16);
    const char *msgs[] = {"truncated", "truncated", "truncated", "altered", "altered", "another model", "version 9",
                          "outside the vocabulary", "not a Strata", "checkpoint"};
    for (int c = 0; c < 10; c++) {
        memcpy(x, buf, n);
        size_t len = n;
        switch (c) {
        case 0: len = n - 1; break;                          /* one byte short */
        case 1: len = 50; break;                             /* shorter than the header */
        case 2: len = n + 8; memset(x + n, 0, 8); break;     /* padded ("truncated or padded") */
        case 3: x[n / 2] ^= 1; break;                        /* a flipped bit in the state */
        case 4: x[n - 3] ^= 0x40; break;                     /* a flipped bit in the checksum */
        case 5: x[20] ^= 1; reseal(x, n); break;             /* another model's fingerprint */
        case 6: x[8] = 9; reseal(x, n); break;               /* a future version */
        case 7: { int32_t bad = 1 << 30; memcpy(x + 112 + 4, &bad, 4); reseal(x, n); break; }
        case 8: memcpy(x, "NOTSTATE", 8); break;
        case 9: {                                            /* checkpoints out of order */
            uint32_t nck;
            memcpy(&nck, x + 84, 4);
            if (nck < 2) { len = n - 1; msgs[9] = "truncated"; break; }
            uint64_t pos = 0;
            size_t rec = 8 + 4 * (size_t)(*(uint64_t *)(x + 96));
            memcpy(x + n - 8 - rec, &pos, 8); /* the last checkpoint at 0, before the others */
            reseal(x, n);
            break;
        }
        }
        st_status r = st_session_state_load(t, x, len);
        CHECKF(r != ST_OK && strstr(st_last_error(), msgs[c]), "%s: case %d: %s (want \"%s\")", name, c, st_last_error(), msgs[c]);
        size_t n1;
        void *after = snapshot(t, &n1);
        CHECKF(before && after && n0 == n1 && !memcmp(before, after, n0), "%s: case %d left the session untouched", name, c);
        free(after);
    }
    free(x);

    /* Another model's state; another KV type; a context too small for it. */
    st_session *o = other ? session(other, CTX, 0) : NULL;
    if (o) {
        CHECK(feed(o, a_ids, 0, 4));
        void *ob = NULL;
        size_t on = 0;
        CHECK(st_session_state_save(o, &ob, &on) == ST_OK);
        CHECKF(st_session_state_load(t, ob, on) == ST_ERR_FORMAT && strstr(st_last_error(), "another model"), "%s: %s", name, st_last_error());
        free(ob);
        st_session_free(o);
    }
    st_session *k32 = session(m, CTX, 1), *small = session(m, 16, 0);
    if (k32 && small) {
        CHECKF(st_session_state_load(k32, buf, n) == ST_ERR_FORMAT && strstr(st_last_error(), "KV type"), "%s: %s", name, st_last_error());
        CHECKF(st_session_state_load(small, buf, n) == ST_ERR_RANGE, "%s: %s", name, st_last_error());
        CHECK(st_session_n_past(small) == 0 && st_session_n_past(k32) == 0);
    }
    st_session_free(k32);
    st_session_free(small);
    size_t n1;
    void *after = snapshot(t, &n1);
    CHECKF(before && after && n0 == n1 && !memcmp(before, after, n0), "%s: untouched at the end", name);
    free(after);
    free(before);
    free(buf);
done:
    st_session_free(s);
    st_session_free(t);
}

/* The demo model (q8_0 qwen35moe with a real vocabulary), when the tree has it. */
static void test_demo(void) {
    const char *src = getenv("STRATA_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/strata-demo-q8_0.gguf", src ? src : ".");
    if (access(path, R_OK)) {
        fprintf(stderr, "note: %s not found; the demo model case is skipped\n", path);
        return;
    }
    st_model_params mp = st_model_default_params();
    mp.copy_weights = 0;
    st_model *m = NULL;
    if (st_model_load(path, &mp, &m) != ST_OK) {
        CHECKF(0, "demo: %s", st_last_error());
        return;
    }
    test_cut(m, "demo");
    test_save_load(m, NULL, "demo");
    st_model_free(m);
}

int main(void) {
    if (!fx_tmpdir(dir, sizeof dir, "state")) SKIP("cannot create a temporary directory");
    for (int i = 0; i < N; i++) {
        a_ids[i] = (int32_t)((i * 37 + 11) % FX_V);
        b_ids[i] = (int32_t)((i * 53 + 5) % FX_V);
    }
    b_ids[0] = a_ids[0] + 1; /* b differs from a from the first id */
    st_model *q3 = load_fixture("qwen3");
    const char *archs[] = {"qwen35", "qwen35moe", "qwen3"};
    for (int i = 0; i < 3; i++) {
        st_model *m = i == 2 ? q3 : load_fixture(archs[i]);
        CHECKF(m != NULL, "%s: load", archs[i]);
        if (!m) continue;
        test_ids(m, archs[i]);
        test_cut(m, archs[i]);
        test_save_load(m, i == 2 ? NULL : q3, archs[i]);
        if (i != 2) st_model_free(m);
    }
    st_model_free(q3);
    test_demo();
    rmdir(dir);
    return test_report("test_session_state");
}
