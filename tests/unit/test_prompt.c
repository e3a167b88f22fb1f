/* test_prompt.c: strata.h's reuse policy (st_session_prompt, st_session_prompt_feed) and the prompt
 * cache, on the demo model (qwen35moe, hybrid, a real ChatML vocabulary) and the tiny attention-only
 * qwen3 fixture (raw ids).
 *
 *  - turn N+1 reuses all of turn N: a reply generated after a prompt, then rendered by the template
 *    without its think block as the history of the next prompt, is held as the model wrote it: the
 *    form is the held prompt and reply, then the new prompt from the message's <|im_end|>, and all
 *    of the held ids are cached; the logits then equal a fresh session fed the form;
 *  - an edited reply or a respaced user message is not spliced: the form is the prompt as given,
 *    and the hybrid returns to the checkpoint before the message (pieces end at <|im_start|>);
 *  - the cache: an unrelated prompt in between, and two conversations alternating, each keep all of
 *    their earlier turn; a cache with room for one state drops the least recently used; a state
 *    that extends an entry replaces it; the bytes stay within the limit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "strata.h"
#include "test.h"
#include "test_model_fixture.h"
#include "text/chat.h"
#include "text/tokenizer.h"

static st_session *session(st_model *m) {
    st_session_params sp = st_session_default_params();
    sp.n_threads = 1;
    sp.n_ctx = 512;
    st_session *s = NULL;
    if (st_session_new(m, &sp, &s) != ST_OK) fprintf(stderr, "session: %s\n", st_last_error());
    return s;
}

/* st_session_prompt and every piece; returns the cached count (-1 on failure), the form in *form. */
static int64_t prompt_in(st_session *s, st_prompt_cache *c, const int32_t *ids, int64_t n, st_prompt *form) {
    st_prompt p;
    if (st_session_prompt(s, c, ids, n, &p) != ST_OK) return -1;
    while (p.done < p.n)
        if (st_session_prompt_feed(s, &p, 0) != ST_OK) {
            st_prompt_free(&p);
            return -1;
        }
    int64_t cached = p.cached;
    if (form) *form = p;
    else st_prompt_free(&p);
    return cached;
}

/* Greedy reply of up to n tokens, every token fed (as the server and the chat hold it). */
static int64_t reply(st_model *m, st_session *s, int32_t *out, int64_t n) {
    int64_t k = 0;
    while (k < n) {
        int32_t t = fx_argmax(st_session_logits(s), st_model_n_vocab(m));
        if (st_model_is_eog(m, t)) break;
        out[k++] = t;
        if (st_session_feed(s, &t, 1, NULL) != ST_OK) return -1;
    }
    return k;
}

typedef struct conv {
    st_chat_message msg[8];
    char *owned[8];
    size_t n;
} conv;

static void say(conv *c, st_chat_role role, const char *text) {
    c->owned[c->n] = strdup(text);
    c->msg[c->n] = (st_chat_message){.role = role, .content = c->owned[c->n]};
    c->n++;
}

static void conv_free(conv *c) {
    for (size_t i = 0; i < c->n; i++) free(c->owned[i]);
}

static int32_t *render(st_model *m, const conv *c, int64_t *n) {
    st_chat_options o = {.add_generation_prompt = 1, .enable_thinking = 0};
    char *text;
    size_t len, nn;
    int32_t *ids = NULL;
    if (st_chat_render(c->msg, c->n, &o, &text, &len) != ST_OK) return NULL;
    if (st_model_tokenize(m, text, len, 0, 1, &ids, &nn) != ST_OK) ids = NULL;
    free(text);
    *n = (int64_t)nn;
    return ids;
}

/* One turn of conversation c on s: render, prompt, reply; the reply's text joins c. Returns the
 * cached count; *held receives the ids the session holds after it. */
static int64_t turn(st_model *m, st_session *s, st_prompt_cache *cache, conv *c, int64_t *held) {
    int64_t n;
    int32_t *ids = render(m, c, &n), r[16];
    int64_t cached = ids ? prompt_in(s, cache, ids, n, NULL) : -1;
    free(ids);
    int64_t k = cached >= 0 ? reply(m, s, r, 16) : -1;
    char *text = NULL;
    size_t len;
    if (k >= 0 && st_detokenize(m->tok, r, (size_t)k, 0, &text, &len) == ST_OK) say(c, ST_ROLE_ASSISTANT, text);
    free(text);
    *held = st_session_n_past(s);
    return cached;
}

static void test_splice(st_model *m) {
    st_session *s = session(m), *f = session(m);
    if (!s || !f) return;
    conv c = {0};
    say(&c, ST_ROLE_USER, "What does ocean mean?");
    int64_t n1, held1;
    int32_t *p1 = render(m, &c, &n1);
    CHECK(turn(m, s, NULL, &c, &held1) == 0 && held1 > n1);
    const int32_t *h = st_session_ids(s);
    int32_t *held = malloc((size_t)held1 * sizeof *held);
    memcpy(held, h, (size_t)held1 * sizeof *held);
    /* The template writes the reply without the prompt's empty think block: not the held ids. */
    say(&c, ST_ROLE_USER, "And river?");
    int64_t n2;
    int32_t *p2 = render(m, &c, &n2);
    CHECK(p1 && p2 && memcmp(p2 + n1, held + n1, (size_t)(held1 - n1) * sizeof *held));
    st_prompt form;
    int64_t cached = prompt_in(s, NULL, p2, n2, &form);
    CHECKF(cached == held1, "turn 2 keeps all of turn 1: %lld of %lld", (long long)cached, (long long)held1);
    int32_t im_end = st_tokenizer_find(m->tok, "<|im_end|>", 10);
    int64_t e = n1;
    while (e < n2 && p2[e] != im_end) e++;
    CHECK(cached > 0 && form.n == held1 + (n2 - e) && !memcmp(form.ids, held, (size_t)held1 * sizeof *held) &&
          !memcmp(form.ids + held1, p2 + e, (size_t)(n2 - e) * sizeof *p2));
    /* Exact: a fresh session fed the form in the same pieces (turn 1's prompt, its reply token by
     * token, the rest) reads the same logits. */
    CHECK(prompt_in(f, NULL, p1, n1, NULL) == 0);
    for (int64_t i = n1; i < held1; i++) CHECK(st_session_feed(f, held + i, 1, NULL) == ST_OK);
    CHECK(prompt_in(f, NULL, form.ids, form.n, NULL) == held1);
    CHECK(!memcmp(st_session_logits(s), st_session_logits(f), (size_t)st_model_n_vocab(m) * sizeof(float)));
    st_prompt_free(&form);

    /* An edited reply is the client's: the prompt as given, back to the message's checkpoint. */
    int64_t held2;
    int32_t r[16];
    CHECK(reply(m, s, r, 16) >= 0);
    held2 = st_session_n_past(s);
    conv d = {0};
    say(&d, ST_ROLE_USER, "What does ocean mean?");
    say(&d, ST_ROLE_ASSISTANT, "Something else entirely.");
    say(&d, ST_ROLE_USER, "And river?");
    int64_t n3;
    int32_t *p3 = render(m, &d, &n3);
    cached = prompt_in(s, NULL, p3, n3, &form);
    CHECKF(cached > 0 && cached < n1 && form.n == n3 && !memcmp(form.ids, p3, (size_t)n3 * sizeof *p3), "edited: cached %lld",
           (long long)cached);
    CHECK(held2 > held1);
    st_prompt_free(&form);
    /* A user message with other spacing is another message. */
    conv u = {0};
    say(&u, ST_ROLE_USER, "What does ocean  mean?");
    int64_t n4;
    int32_t *p4 = render(m, &u, &n4);
    cached = prompt_in(s, NULL, p4, n4, &form);
    CHECK(form.n == n4 && !memcmp(form.ids, p4, (size_t)n4 * sizeof *p4) && cached < n1);
    st_prompt_free(&form);
    free(p1), free(p2), free(p3), free(p4), free(held);
    conv_free(&c), conv_free(&d), conv_free(&u);
    st_session_free(s);
    st_session_free(f);
}

static void test_cache(st_model *m) {
    st_session *s = session(m);
    st_prompt_cache *c = NULL;
    if (!s || st_prompt_cache_new(64ull << 20, &c) != ST_OK) return;
    conv a = {0}, b = {0}, x = {0};
    say(&a, ST_ROLE_USER, "What does ocean mean?");
    say(&b, ST_ROLE_USER, "Who are you?");
    say(&x, ST_ROLE_USER, "unrelated");
    int64_t ha, hb, hx;
    CHECK(turn(m, s, c, &a, &ha) == 0);
    /* An unrelated request in between: A's state goes into the cache, and comes back whole. */
    CHECK(turn(m, s, c, &x, &hx) == 0 && st_prompt_cache_count(c) == 1);
    say(&a, ST_ROLE_USER, "And river?");
    int64_t got = turn(m, s, c, &a, &ha);
    CHECKF(got > 0 && st_prompt_cache_count(c) == 2, "after the unrelated one: cached %lld, %d entries", (long long)got,
           st_prompt_cache_count(c));
    int64_t want = ha;
    /* Two conversations alternating: each turn keeps all of its conversation's last one. */
    CHECK(turn(m, s, c, &b, &hb) == 0);
    for (int k = 0; k < 2; k++) {
        say(&a, ST_ROLE_USER, k ? "And lake?" : "And sea?");
        got = turn(m, s, c, &a, &ha);
        CHECKF(got == want, "A turn %d: cached %lld of %lld", k, (long long)got, (long long)want);
        want = ha;
        int64_t wb = hb;
        say(&b, ST_ROLE_USER, k ? "Why?" : "Tell me more.");
        got = turn(m, s, c, &b, &hb);
        CHECKF(got == wb, "B turn %d: cached %lld of %lld", k, (long long)got, (long long)wb);
    }
    /* A's entry was replaced by its extension each time, not kept beside it: A, B, x. */
    CHECKF(st_prompt_cache_count(c) == 3 && st_prompt_cache_bytes(c) <= 64ull << 20, "%d entries", st_prompt_cache_count(c));
    st_prompt_cache_free(c);

    /* Room for one state: storing B drops A (least recently used). */
    CHECK(st_prompt_cache_new(1, &c) == ST_OK);
    CHECK(st_prompt_cache_store(c, s) == ST_OK && st_prompt_cache_count(c) == 0); /* larger than the cache: not kept */
    st_prompt_cache_free(c);
    conv_free(&a), conv_free(&b), conv_free(&x);
    st_session_free(s);
}

/* The LRU order on the attention-only fixture, with raw ids (no ChatML). */
static void test_lru(void) {
    fx_opts o = {.arch = "qwen3"};
    st_model_params mp = st_model_default_params();
    mp.copy_weights = 0;
    st_model *m = fx_load("/tmp", &o, "prompt", &mp);
    CHECK(m != NULL);
    if (!m) return;
    st_session *s = session(m);
    int32_t a[24], b[24], d[24];
    for (int i = 0; i < 24; i++) a[i] = 1 + i, b[i] = 33 + i, d[i] = 65 + i; /* inside the fixture's 96 ids */
    CHECK(prompt_in(s, NULL, a, 20, NULL) == 0);
    uint64_t one = 0;
    void *blob;
    size_t nb;
    CHECK(st_session_state_save(s, &blob, &nb) == ST_OK);
    free(blob);
    one = nb;
    st_prompt_cache *c = NULL;
    CHECK(st_prompt_cache_new(one + one / 2, &c) == ST_OK); /* room for one state of 20 ids */
    CHECK(prompt_in(s, c, b, 20, NULL) == 0 && st_prompt_cache_count(c) == 1);  /* A kept */
    /* A restored: B does not fit beside it, and A, the one restored, is not dropped for it. */
    CHECK(prompt_in(s, c, a, 24, NULL) == 20 && st_prompt_cache_count(c) == 1);
    CHECK(prompt_in(s, c, d, 20, NULL) == 0 && st_prompt_cache_count(c) == 1); /* A's 24 replace its 20 */
    CHECK(prompt_in(s, c, b, 24, NULL) == 0);  /* B was not kept; D is, A dropped (least recent) */
    CHECK(prompt_in(s, c, a, 24, NULL) == 0);  /* A is gone; B is kept, D dropped */
    CHECK(prompt_in(s, c, b, 24, NULL) == 23); /* B back: the same prompt keeps all but its last id */
    CHECK(st_prompt_cache_bytes(c) <= one + one / 2);
    st_prompt_cache_free(c);
    st_session_free(s);
    st_model_free(m);
}

int main(void) {
    test_lru();
    st_model *m = fx_load_demo();
    if (m) {
        test_splice(m);
        test_cache(m);
    }
    st_model_free(m);
    return test_report("test_prompt");
}
