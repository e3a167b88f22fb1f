/* queue.c: the request queue, the engine threads, and each job's output channel.
 *
 * The engine threads (as many as the engine runs requests at once, sv_model_info.parallel) are the
 * only callers of engine->generate(); each takes the next job in order. Jobs wait in a bounded
 * FIFO ring; pushing to a full ring fails (the HTTP layer answers 429). A job is shared by
 * its HTTP thread and the engine thread and freed by whoever lets go last (refs under its mutex). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"
#include "server/internal.h"

/* A client this far behind makes the engine wait: a stalled reader cannot grow memory without end. */
#define SV_CHANNEL_HIGH_WATER (1u << 20)

sv_job *sv_job_new(void) {
    sv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    atomic_init(&j->cancel, 0);
    j->refs = 1;
    j->http_status = 200;
    j->conn_fd = -1;
    return j;
}

void sv_job_release(sv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    if (j->fmt && j->fmt->free_api) j->fmt->free_api(j->api);
    else if (j->control) free(j->api);
    free(j->ids);
    free(j->reply_prefix);
    for (size_t i = 0; j->stops && j->stops[i]; i++) free(j->stops[i]);
    free(j->stops);
    sv_reply_free(j->reply);
    free(j->out);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void sv_job_write(sv_job *j, const char *data, size_t n) {
    pthread_mutex_lock(&j->mu);
    while (j->out_n - j->out_read > SV_CHANNEL_HIGH_WATER && !atomic_load(&j->cancel))
        pthread_cond_wait(&j->cv, &j->mu);
    if (j->out_read == j->out_n) j->out_read = j->out_n = 0;
    if (j->out_n + n > j->out_cap) {
        size_t cap = j->out_cap ? j->out_cap : 4096;
        while (cap < j->out_n + n) cap *= 2;
        char *p = realloc(j->out, cap);
        if (!p) { pthread_mutex_unlock(&j->mu); return; }
        j->out = p;
        j->out_cap = cap;
    }
    memcpy(j->out + j->out_n, data, n);
    j->out_n += n;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void sv_job_printf(sv_job *j, const char *fmt, ...) {
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n >= 0) sv_job_write(j, s, (size_t)n);
    free(s);
}

void sv_job_sse(sv_job *j, const char *name, json_t *json) {
    char *s = json_dumps(json, JSON_COMPACT);
    json_decref(json);
    if (!s) return;
    if (name) sv_job_printf(j, "event: %s\ndata: %s\n\n", name, s);
    else sv_job_printf(j, "data: %s\n\n", s);
    free(s);
}

/* --- the engine thread's callbacks --------------------------------------------------------- */

static void job_begin(sv_job *j) {
    if (j->begun) return;
    j->begun = 1;
    j->fmt->begin(j);
}

static void on_event(void *ctx, sv_event kind, const char *text, size_t len, const sv_tool_call *call) {
    sv_job *j = ctx;
    job_begin(j);
    j->fmt->event(j, kind, text, len, call);
}

static int on_piece(void *ctx, const char *text, size_t len, int32_t token) {
    sv_job *j = ctx;
    return sv_reply_feed(j->reply, text, len) || atomic_load(&j->cancel);
}

static void on_progress(void *ctx, size_t cached, size_t done, size_t total) {
    sv_job *j = ctx;
    pthread_mutex_lock(&j->mu);
    j->cached = cached;
    j->done = done;
    j->total = total;
    j->progress_new = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void run_job(sv_server *s, sv_job *j) {
    if (j->control) {
        if (!atomic_load(&j->cancel)) j->control(s, j);
        pthread_mutex_lock(&j->mu);
        j->finished = 1;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        return;
    }
    sv_usage usage = {0};
    sv_finish finish = SV_FINISH_EOS;
    st_status st = ST_OK;
    char error[512] = "";
    j->reply = sv_reply_new((const char *const *)j->stops, j->reply_flags, on_event, j);
    if (!j->reply) {
        st = st_fail(ST_ERR_NOMEM, "out of memory for a reply");
    } else if (!atomic_load(&j->cancel)) {
        sv_reply_prefix(j->reply, j->reply_prefix ? j->reply_prefix : "");
        sv_generate g = j->gen;
        g.prompt = j->ids;
        g.n_prompt = j->n_ids;
        g.cancel = &j->cancel;
        g.on_piece = on_piece;
        g.on_progress = on_progress;
        g.ctx = j;
        st = s->engine->ops->generate(s->engine, &g, &usage, &finish);
        if (st == ST_OK) sv_reply_finish(j->reply);
        else snprintf(error, sizeof error, "%s", st_last_error());
    } else {
        finish = SV_FINISH_CANCELLED;
    }
    if (atomic_load(&j->cancel)) finish = SV_FINISH_CANCELLED;
    if (st == ST_OK) job_begin(j);
    j->cached = (size_t)usage.cached_tokens;
    j->fmt->end(j, st, error, finish, &usage);

    sv_metrics *m = &s->m;
    if (finish == SV_FINISH_CANCELLED) atomic_fetch_add(&m->cancelled, 1);
    if (st == ST_OK) atomic_fetch_add(&m->responses_ok, 1);
    else atomic_fetch_add(&m->responses_error, 1);
    atomic_fetch_add(&m->prompt_tokens, (unsigned long long)usage.prompt_tokens);
    atomic_fetch_add(&m->cached_tokens, (unsigned long long)usage.cached_tokens);
    atomic_fetch_add(&m->completion_tokens, (unsigned long long)usage.completion_tokens);
    atomic_fetch_add(&m->draft_tokens, (unsigned long long)usage.draft_tokens);
    atomic_fetch_add(&m->draft_accepted, (unsigned long long)usage.draft_accepted);
    /* The engine threads write the sums under qmu, so a load and a store need no read-modify-write. */
    pthread_mutex_lock(&s->qmu);
    m->prompt_seconds = m->prompt_seconds + usage.prompt_seconds;
    m->decode_seconds = m->decode_seconds + usage.decode_seconds;
    int computed = usage.prompt_tokens - usage.cached_tokens;
    if (usage.prompt_seconds > 0 && computed > 0) m->last_prompt_tps = computed / usage.prompt_seconds;
    if (usage.decode_seconds > 0 && usage.completion_tokens > 0)
        m->last_decode_tps = usage.completion_tokens / usage.decode_seconds;
    pthread_mutex_unlock(&s->qmu);

    pthread_mutex_lock(&j->mu);
    j->finished = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

typedef struct engine_thread {
    sv_server *s;
    int index;
} engine_thread;

static void *engine_main(void *arg) {
    engine_thread *t = arg;
    sv_server *s = t->s;
    for (;;) {
        pthread_mutex_lock(&s->qmu);
        while (!s->quitting && s->q_len == 0) pthread_cond_wait(&s->qcv, &s->qmu);
        if (s->quitting && s->q_len == 0) {
            pthread_mutex_unlock(&s->qmu);
            free(t);
            return NULL;
        }
        sv_job *j = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % (size_t)s->cfg.queue_max;
        s->q_len--;
        j->served = s->next_served++;
        s->running[t->index] = j;
        if (s->quitting) atomic_store(&j->cancel, 1);
        pthread_mutex_unlock(&s->qmu);

        run_job(s, j);

        pthread_mutex_lock(&s->qmu);
        s->running[t->index] = NULL;
        pthread_mutex_unlock(&s->qmu);
        sv_job_release(j);
    }
}

st_status sv_queue_start(sv_server *s) {
    int n = s->info.parallel > 0 ? s->info.parallel : 1;
    s->queue = calloc((size_t)s->cfg.queue_max, sizeof *s->queue);
    s->running = calloc((size_t)n, sizeof *s->running);
    s->engine_threads = calloc((size_t)n, sizeof *s->engine_threads);
    if (!s->queue || !s->running || !s->engine_threads)
        return st_fail(ST_ERR_NOMEM, "out of memory for a queue of %d", s->cfg.queue_max);
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    for (int i = 0; i < n; i++) {
        engine_thread *t = malloc(sizeof *t);
        if (!t) return st_fail(ST_ERR_NOMEM, "out of memory for an engine thread");
        *t = (engine_thread){s, i};
        if (pthread_create(&s->engine_threads[i], NULL, engine_main, t)) {
            free(t);
            return st_fail(ST_ERR_NOMEM, "could not start engine thread %d", i);
        }
        s->n_engine_threads = i + 1;
    }
    return ST_OK;
}

void sv_queue_stop(sv_server *s) {
    pthread_mutex_lock(&s->qmu);
    s->quitting = 1;
    for (size_t i = 0; i < s->q_len; i++)
        atomic_store(&s->queue[(s->q_head + i) % (size_t)s->cfg.queue_max]->cancel, 1);
    for (int i = 0; i < s->n_engine_threads; i++) {
        sv_job *r = s->running[i];
        if (!r) continue;
        atomic_store(&r->cancel, 1);
        pthread_mutex_lock(&r->mu);
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
    pthread_cond_broadcast(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    for (int i = 0; i < s->n_engine_threads; i++) pthread_join(s->engine_threads[i], NULL);
    free(s->engine_threads);
    free(s->running);
    free(s->queue);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
}

int sv_queue_push(sv_server *s, sv_job *j) {
    pthread_mutex_lock(&s->qmu);
    if (s->quitting || s->q_len >= (size_t)s->cfg.queue_max) {
        pthread_mutex_unlock(&s->qmu);
        return -1;
    }
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    j->seq = s->next_seq++;
    s->queue[(s->q_head + s->q_len) % (size_t)s->cfg.queue_max] = j;
    s->q_len++;
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    return 0;
}

void sv_queue_depth(sv_server *s, size_t *waiting, int *busy, size_t *done, size_t *total, size_t *cached) {
    pthread_mutex_lock(&s->qmu);
    *waiting = s->q_len;
    *busy = 0;
    *done = *total = *cached = 0;
    /* The progress shown is the earliest running request's. */
    sv_job *first = NULL;
    for (int i = 0; i < s->n_engine_threads; i++)
        if (s->running[i] && (!first || s->running[i]->served < first->served)) first = s->running[i];
    if (first) {
        *busy = 1;
        pthread_mutex_lock(&first->mu);
        *done = first->done;
        *total = first->total;
        *cached = first->cached;
        pthread_mutex_unlock(&first->mu);
    }
    pthread_mutex_unlock(&s->qmu);
}
