/* test_expert_mailbox.c: the decode step's CPU share protocol (model/expert_mailbox.h), with a CPU
 * thread playing the device through the kernels' plain reference (st_mbox_ref_publish/wait):
 *  - requests of many layers and tokens come back with the server's answer to that very payload;
 *  - an answer to an earlier token of the same layer (an earlier replay of the graph) is never
 *    taken: the wait gives up, and st_mbox_check reports the layer once, then clears;
 *  - once a wait of a step gave up, the later ones give up at once, and the first layer is named;
 *  - a server that is late serves the newest request next, and its late answer to the old one
 *    neither counts nor touches the new one's slot;
 *  - a sleeping server serves nothing until a step begins, and then does;
 *  - within a step the server does not fall asleep, however long the step runs before its first
 *    request (a first eager step, a prompt chunk whose one request is at its last layer).
 * Waits that must succeed have a bound far above any run time (a hang fails rather than blocks);
 * waits that must give up have a short one. Nothing asserts a duration. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/status.h"
#include "model/expert_mailbox.h"
#include "test.h"

#define K 8
#define D 67
#define LAYERS 5
#define NEVER 20000000000ull /* 20 s: "must not give up" */
#define SHORT 2000000ull     /* 2 ms: "must give up" */

typedef struct fixture {
    st_mbox_layout l;
    void *block;
    uint64_t counter;            /* the device's own */
    _Atomic int gate_layer;      /* the server blocks on a request of this layer while gate is closed */
    _Atomic int gate_open;
    _Atomic int gate_entered;    /* the server is inside that request */
    _Atomic int n_log;
    int64_t log[64];             /* the layers served, in order */
} fixture;

/* y[i] = w[0] * h[i] + ids[K-1] + layer: a function of the whole payload. */
static void serve(void *ctx, int64_t layer, const int32_t *ids, const float *w, const float *h, float *y) {
    fixture *fx = ctx;
    if (layer == atomic_load(&fx->gate_layer)) {
        atomic_store(&fx->gate_entered, 1);
        while (!atomic_load(&fx->gate_open)) sched_yield();
    }
    for (int64_t i = 0; i < D; i++) y[i] = w[0] * h[i] + (float)ids[K - 1] + (float)layer;
    int n = atomic_fetch_add(&fx->n_log, 1);
    if (n < 64) fx->log[n] = layer;
}

static void payload(int64_t layer, uint64_t token, int32_t *ids, float *w, float *h) {
    for (int j = 0; j < K; j++) {
        ids[j] = (int32_t)((token * 7 + (uint64_t)layer * 3 + (uint64_t)j) % 256);
        w[j] = 0.125f * (float)(j + 1) + 0.25f * (float)(token % 4); /* all sums below are exact */
    }
    for (int64_t i = 0; i < D; i++) h[i] = (float)((int64_t)(token % 50) - 25 + i % 13) * 0.5f;
}

static int answer_ok(int64_t layer, const int32_t *ids, const float *w, const float *h, const float *out) {
    for (int64_t i = 0; i < D; i++)
        if (out[i] != 1.0f + w[0] * h[i] + (float)ids[K - 1] + (float)layer) return 0;
    return 1;
}

static void fixture_init(fixture *fx) {
    memset(fx, 0, sizeof *fx);
    fx->l = st_mbox_layout_of(LAYERS, K, D);
    fx->block = aligned_alloc(64, (fx->l.bytes + 63) & ~(size_t)63);
    memset(fx->block, 0, fx->l.bytes);
    atomic_store(&fx->gate_layer, -1);
}

/* The device: steps of LAYERS requests, each waited for before the next, every answer checked. */
typedef struct device_run {
    fixture *fx;
    int steps, bad;
} device_run;

static void *device_main(void *arg) {
    device_run *r = arg;
    fixture *fx = r->fx;
    int32_t ids[K];
    float w[K], h[D], out[D];
    for (int t = 0; t < r->steps; t++)
        for (int64_t il = 0; il < LAYERS; il++) {
            payload(il, (uint64_t)t, ids, w, h);
            uint64_t s = st_mbox_ref_publish(fx->block, &fx->l, &fx->counter, il, ids, w, h);
            for (int64_t i = 0; i < D; i++) out[i] = 1.0f;
            if (!st_mbox_ref_wait(fx->block, &fx->l, il, s, NEVER, out) || !answer_ok(il, ids, w, h, out)) r->bad++;
        }
    return NULL;
}

static void test_layout(void) {
    st_mbox_layout l = st_mbox_layout_of(40, 8, 2048);
    CHECK(sizeof(st_mbox_header) == 192);
    CHECK(l.off_w >= 8 * sizeof(int32_t) && l.off_h >= l.off_w + 8 * sizeof(float));
    CHECK(l.off_y >= l.off_h + 2048 * sizeof(float) && l.slot_bytes >= l.off_y + 2048 * sizeof(float));
    CHECK(l.off_y % 64 == 0 && l.slot_bytes % 64 == 0);
    CHECK(l.bytes == sizeof(st_mbox_header) + 40 * l.slot_bytes);
}

static void test_round_trips(void) {
    fixture fx;
    fixture_init(&fx);
    st_mbox *mb;
    CHECK(st_mbox_create(fx.block, &fx.l, serve, &fx, 10.0, NEVER, &mb) == ST_OK);
    st_mbox_step_begin(mb);
    device_run r = {&fx, 60, 0};
    pthread_t dev;
    CHECK(pthread_create(&dev, NULL, device_main, &r) == 0);
    pthread_join(dev, NULL);
    CHECKF(r.bad == 0, "%d of %d answers wrong or missing", r.bad, r.steps * LAYERS);
    CHECK(st_mbox_served(mb) == (uint64_t)(r.steps * LAYERS));
    CHECK(st_mbox_check(mb) == ST_OK);
    st_mbox_destroy(mb);
    free(fx.block);
}

static void test_stale_answer_refused(void) {
    fixture fx;
    fixture_init(&fx);
    st_mbox *mb;
    CHECK(st_mbox_create(fx.block, &fx.l, serve, &fx, 10.0, SHORT, &mb) == ST_OK);
    st_mbox_step_begin(mb);
    int32_t ids[K];
    float w[K], h[D], out[D] = {0};
    payload(2, 0, ids, w, h);
    uint64_t s1 = st_mbox_ref_publish(fx.block, &fx.l, &fx.counter, 2, ids, w, h);
    CHECK(st_mbox_ref_wait(fx.block, &fx.l, 2, s1, NEVER, out) == 1);
    st_mbox_destroy(mb); /* no server any more: done stays at s1, y holds s1's answer */
    /* the next token (or the graph replayed) asks layer 2 again: s1's answer must not pass */
    payload(2, 1, ids, w, h);
    uint64_t s2 = st_mbox_ref_publish(fx.block, &fx.l, &fx.counter, 2, ids, w, h);
    CHECK(s2 == s1 + 1);
    memset(out, 0, sizeof out);
    CHECK(st_mbox_ref_wait(fx.block, &fx.l, 2, s2, SHORT, out) == 0);
    CHECK(out[0] == 0.0f && out[D - 1] == 0.0f); /* nothing added */
    /* a server is needed for st_mbox_check: a new one over the same block, spinning from now */
    CHECK(st_mbox_create(fx.block, &fx.l, serve, &fx, 10.0, SHORT, &mb) == ST_OK);
    st_status s = st_mbox_check(mb);
    CHECK(s == ST_ERR_IO);
    CHECKF(strstr(st_last_error(), "layer 2:") != NULL, "message: %s", st_last_error());
    st_clear_error();
    CHECK(st_mbox_check(mb) == ST_OK); /* reported once */
    st_mbox_destroy(mb);
    free(fx.block);
}

static void test_late_server(void) {
    fixture fx;
    fixture_init(&fx);
    atomic_store(&fx.gate_layer, 1);
    st_mbox *mb;
    CHECK(st_mbox_create(fx.block, &fx.l, serve, &fx, 10.0, SHORT, &mb) == ST_OK);
    st_mbox_step_begin(mb);
    int32_t ids[K], ids3[K];
    float w[K], h[D], w3[K], h3[D], out[D];
    /* step A: the server is stuck on layer 1; its wait gives up, and layer 2's at once */
    payload(1, 0, ids, w, h);
    uint64_t s1 = st_mbox_ref_publish(fx.block, &fx.l, &fx.counter, 1, ids, w, h);
    while (!atomic_load(&fx.gate_entered)) sched_yield();
    memset(out, 0, sizeof out);
    CHECK(st_mbox_ref_wait(fx.block, &fx.l, 1, s1, SHORT, out) == 0);
    payload(2, 0, ids, w, h);
    uint64_t s2 = st_mbox_ref_publish(fx.block, &fx.l, &fx.counter, 2, ids, w, h);
    CHECK(st_mbox_ref_wait(fx.block, &fx.l, 2, s2, NEVER, out) == 0); /* gives up at once: err is set */
    CHECK(st_mbox_check(mb) == ST_ERR_IO);
    CHECKF(strstr(st_last_error(), "layer 1:") != NULL, "message: %s", st_last_error());
    st_clear_error();
    /* step B: layer 3 asked while the server still serves layer 1, then the server is let go */
    payload(3, 1, ids3, w3, h3);
    uint64_t s3 = st_mbox_ref_publish(fx.block, &fx.l, &fx.counter, 3, ids3, w3, h3);
    atomic_store(&fx.gate_open, 1);
    for (int64_t i = 0; i < D; i++) out[i] = 1.0f;
    CHECK(st_mbox_ref_wait(fx.block, &fx.l, 3, s3, NEVER, out) == 1);
    CHECK(answer_ok(3, ids3, w3, h3, out));
    CHECK(st_mbox_check(mb) == ST_OK);
    /* served: layer 1 (late), then the newest request, layer 3; layer 2's was overwritten */
    CHECK(atomic_load(&fx.n_log) == 2);
    CHECK(fx.log[0] == 1 && fx.log[1] == 3);
    st_mbox_destroy(mb);
    free(fx.block);
}

static void test_sleep_and_wake(void) {
    fixture fx;
    fixture_init(&fx);
    st_mbox *mb;
    CHECK(st_mbox_create(fx.block, &fx.l, serve, &fx, 0.0005, SHORT, &mb) == ST_OK);
    while (!st_mbox_sleeping(mb)) sched_yield();
    int32_t ids[K];
    float w[K], h[D], out[D];
    /* asked without a wake: a sleeping server does not answer */
    payload(0, 0, ids, w, h);
    uint64_t s1 = st_mbox_ref_publish(fx.block, &fx.l, &fx.counter, 0, ids, w, h);
    CHECK(st_mbox_ref_wait(fx.block, &fx.l, 0, s1, SHORT, out) == 0);
    CHECK(st_mbox_served(mb) == 0);
    CHECK(st_mbox_check(mb) == ST_ERR_IO);
    st_clear_error();
    /* the next request, then the wake: the server answers it (the newest) on waking. (Woken
     * first, a server this idle-short could fall asleep again before the request on a loaded
     * machine; a real step wakes it with an idle time far above the step's.) */
    payload(4, 1, ids, w, h);
    uint64_t s2 = st_mbox_ref_publish(fx.block, &fx.l, &fx.counter, 4, ids, w, h);
    CHECK(st_mbox_served(mb) == 0);
    st_mbox_step_begin(mb);
    for (int64_t i = 0; i < D; i++) out[i] = 1.0f;
    CHECK(st_mbox_ref_wait(fx.block, &fx.l, 4, s2, NEVER, out) == 1);
    CHECK(answer_ok(4, ids, w, h, out));
    CHECK(st_mbox_check(mb) == ST_OK);
    st_mbox_destroy(mb);
    free(fx.block);
}

static void test_long_step(void) {
    fixture fx;
    fixture_init(&fx);
    st_mbox *mb;
    CHECK(st_mbox_create(fx.block, &fx.l, serve, &fx, 0.0005, NEVER, &mb) == ST_OK);
    int32_t ids[K];
    float w[K], h[D], out[D];
    for (int t = 0; t < 3; t++) {
        st_mbox_step_begin(mb);
        /* the step runs 40 idle times before its request (not a timing: a server that slept after
         * its idle time would leave the request unanswered, and the check below fails) */
        for (uint64_t t0 = st_now_ns(); st_now_ns() - t0 < 20000000ull;) sched_yield();
        payload(3, (uint64_t)t, ids, w, h);
        uint64_t s = st_mbox_ref_publish(fx.block, &fx.l, &fx.counter, 3, ids, w, h);
        for (int64_t i = 0; i < D; i++) out[i] = 1.0f;
        CHECK(st_mbox_ref_wait(fx.block, &fx.l, 3, s, NEVER, out) == 1);
        CHECK(answer_ok(3, ids, w, h, out));
        CHECK(st_mbox_step_end(mb) == ST_OK);
        /* between steps it sleeps after its idle time */
        while (!st_mbox_sleeping(mb)) sched_yield();
    }
    st_mbox_destroy(mb);
    free(fx.block);
}

int main(void) {
    test_layout();
    test_round_trips();
    test_stale_answer_refused();
    test_late_server();
    test_sleep_and_wake();
    test_long_step();
    return test_report("expert_mailbox");
}
