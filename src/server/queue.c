/* queue.c: the request queue, the engine threads, and each job's output channel.
 *
 * The engine threads (as many as the engine runs requests at once, sv_model_info.parallel) are the
 * only callers of engine->generate(); each takes the next job in order. Jobs wait in a bounded
 * FIFO ring; pushing to a full ring fails (the HTTP layer answers 429 with Retry-After). A job is
 * shared by its HTTP thread and an engine thread and freed by whoever lets go last (refs under its
 * mutex).
 *
 * No client can hold the engine: a channel more than SV_CHANNEL_HIGH_WATER bytes behind makes the
 * engine wait for its reader, but only for cfg.stall_ms without progress; then the request is
 * cancelled and its socket shut, and the engine goes on with the next. Stopping drains: queued jobs
 * are answered 503 at once, the running one has cfg.drain_ms to finish and is then ended with its
 * API's final error event. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"
#include "engine/json_schema.h"
#include "server/internal.h"

/* A client this far behind makes the engine wait: a stalled reader cannot grow memory without end. */
#define SV_CHANNEL_HIGH_WATER (1u << 20)

void sv_deadline_in(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (long)ms * 1000000L;
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

sv_job *sv_job_new(void) {
    sv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    atomic_init(&j->cancel, 0);
    j->refs = 1;
    j->http_status = 200;
    j->fail_status = 500;
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
    st_json_schema_free(j->schema);
    for (int i = 0; j->choice_ids && i < j->n_choices; i++)
        if (!i || j->choice_ids[i] != j->choice_ids[i - 1]) free(j->choice_ids[i]);
    free(j->choice_ids);
    free(j->choice_n);
    json_decref(j->pending_logprobs);
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

/* Waits while the reader is far behind; a reader that makes no progress for stall_ms loses its
 * request (cancel, and its socket shut so its HTTP thread lets go too). Returns 0 when cancelled. */
static int wait_for_reader(sv_job *j) {
    size_t last_read = j->out_read;
    double since = st_now();
    while (j->out_n - j->out_read > SV_CHANNEL_HIGH_WATER && !atomic_load(&j->cancel)) {
        struct timespec ts;
        sv_deadline_in(&ts, 100);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (j->out_read != last_read) {
            last_read = j->out_read;
            since = st_now();
        } else if ((st_now() - since) * 1000.0 >= j->stall_ms) {
            atomic_store(&j->cancel, 1);
            j->stalled = 1;
            if (j->conn_fd >= 0) shutdown(j->conn_fd, SHUT_RDWR);
        }
    }
    return !atomic_load(&j->cancel);
}

void sv_job_write(sv_job *j, const char *data, size_t n) {
    pthread_mutex_lock(&j->mu);
    if (!wait_for_reader(j) && j->out_n - j->out_read > SV_CHANNEL_HIGH_WATER) {
        pthread_mutex_unlock(&j->mu); /* nobody will read it */
        return;
    }
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

/* A token's logprobs entry as OpenAI's chat shapes it: its text, log-probability and bytes, and
 * the alternatives the same way. */
static json_t *logprob_entry(sv_engine *g, int32_t token, float logprob) {
    char *text = NULL;
    size_t len = 0;
    if (g->ops->detokenize(g, &token, 1, &text, &len) != ST_OK) { st_clear_error(); len = 0; }
    json_t *bytes = json_array();
    for (size_t i = 0; i < len; i++) json_array_append_new(bytes, json_integer((unsigned char)text[i]));
    json_t *t = text ? json_stringn(text, len) : NULL;
    json_t *e = json_pack("{s:o,s:f,s:o}", "token", t ? t : json_string("\xEF\xBF\xBD"), "logprob", (double)logprob, "bytes", bytes);
    free(text);
    return e;
}

static int on_piece(void *ctx, const char *text, size_t len, int32_t token, const sv_logprob *lp) {
    sv_job *j = ctx;
    if (!j->t_first) j->t_first = st_now();
    if (lp) {
        /* the entry waits for the text it makes to come out of the reply parser */
        sv_engine *g = j->engine;
        json_t *e = logprob_entry(g, token, lp->logprob), *top = json_array();
        for (int i = 0; i < lp->n_top && i < j->gen.top_logprobs; i++) json_array_append_new(top, logprob_entry(g, lp->top[i], lp->top_logprob[i]));
        json_object_set_new(e, "top_logprobs", top);
        if (!j->pending_logprobs) j->pending_logprobs = json_array();
        json_array_append_new(j->pending_logprobs, e);
    }
    return sv_reply_feed(j->reply, text, len) || atomic_load(&j->cancel) || (j->one_call && sv_reply_tool_calls(j->reply) > 0);
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

/* The job's choices one after another (n > 1 reuses the prompt's state: each after the first
 * reads only its last token again), each with its own reply parser and, with a seed, seed + its
 * index; usage counts each distinct prompt once and every generated token. */
static st_status run_choices(sv_server *s, sv_job *j, sv_usage *usage, sv_finish *finish, char *error, size_t cap) {
    st_status st = ST_OK;
    int n = j->n_choices > 0 ? j->n_choices : 1;
    for (int c = 0; c < n && st == ST_OK && !atomic_load(&j->cancel); c++) {
        j->choice = c;
        sv_reply_free(j->reply);
        json_decref(j->pending_logprobs);
        j->pending_logprobs = NULL;
        j->reply = sv_reply_new((const char *const *)j->stops, j->reply_flags, on_event, j);
        if (!j->reply) return st_fail(ST_ERR_NOMEM, "out of memory for a reply");
        sv_reply_prefix(j->reply, j->reply_prefix ? j->reply_prefix : "");
        sv_generate g = j->gen;
        g.prompt = j->choice_ids ? j->choice_ids[c] : j->ids;
        g.n_prompt = j->choice_ids ? j->choice_n[c] : j->n_ids;
        if (g.sampling.has_seed) g.sampling.seed += (uint64_t)c;
        g.cancel = &j->cancel;
        g.on_piece = on_piece;
        g.on_progress = on_progress;
        g.ctx = j;
        sv_usage u = {0};
        sv_finish f = SV_FINISH_EOS;
        st = s->engine->ops->generate(s->engine, &g, &u, &f);
        if (st == ST_OK) sv_reply_finish(j->reply);
        else snprintf(error, cap, "%s", st_last_error());
        if (c == 0 || (j->choice_ids && j->choice_ids[c] != j->choice_ids[c - 1])) usage->prompt_tokens += u.prompt_tokens;
        if (c == 0) usage->cached_tokens = u.cached_tokens;
        usage->completion_tokens += u.completion_tokens;
        usage->draft_tokens += u.draft_tokens;
        usage->draft_accepted += u.draft_accepted;
        usage->prompt_seconds += u.prompt_seconds;
        usage->decode_seconds += u.decode_seconds;
        *finish = f;
        if (st == ST_OK && j->fmt->choice_end && !atomic_load(&j->cancel)) {
            job_begin(j);
            j->fmt->choice_end(j, f);
        }
    }
    if (atomic_load(&j->cancel) && st == ST_OK) *finish = SV_FINISH_CANCELLED;
    return st;
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
    char error[512] = "";
    st_status st = run_choices(s, j, &usage, &finish, error, sizeof error);
    if (atomic_load(&j->cancel)) finish = SV_FINISH_CANCELLED;
    if (atomic_load(&j->shutdown)) {
        /* Not the client's doing: the reply ends with an error event it can see. */
        st = ST_ERR_CANCELLED;
        snprintf(error, sizeof error, "the server is shutting down: the reply was ended after %d tokens", usage.completion_tokens);
        finish = SV_FINISH_STOP;
        j->fail_status = 503;
    }
    if (st == ST_OK) job_begin(j);
    j->cached = (size_t)usage.cached_tokens;
    j->fmt->end(j, st, error, finish, &usage);

    int status = st != ST_OK ? j->fail_status : finish == SV_FINISH_CANCELLED ? 499 : j->http_status;
    double now = st_now();
    sv_log_request(s, j->req_id, j->url, status, &usage, j->t_first ? j->t_first - j->t_arrival : -1, now - j->t_arrival);

    sv_metrics *m = &s->m;
    if (finish == SV_FINISH_CANCELLED) atomic_fetch_add(&m->cancelled, 1);
    pthread_mutex_lock(&j->mu);
    if (j->stalled) atomic_fetch_add(&m->stalled, 1);
    pthread_mutex_unlock(&j->mu);
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
    double took = usage.prompt_seconds + usage.decode_seconds;
    s->recent_job_seconds = s->recent_job_seconds > 0 ? 0.8 * s->recent_job_seconds + 0.2 * took : took;
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
        pthread_cond_broadcast(&s->qcv);
        pthread_mutex_unlock(&s->qmu);
        sv_job_release(j);
    }
}

/* Running jobs (qmu held). */
static int n_running(const sv_server *s) {
    int n = 0;
    for (int i = 0; i < s->n_engine_threads; i++) n += s->running[i] != NULL;
    return n;
}

/* Cancels every running job, marked shutdown or not (qmu held). */
static void cancel_running(sv_server *s, int shutdown) {
    for (int i = 0; i < s->n_engine_threads; i++) {
        sv_job *r = s->running[i];
        if (!r) continue;
        if (shutdown) atomic_store(&r->shutdown, 1);
        atomic_store(&r->cancel, 1);
        pthread_mutex_lock(&r->mu);
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
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
    cancel_running(s, 0);
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
    if (s->quitting || atomic_load(&s->draining) || s->q_len >= (size_t)s->cfg.queue_max) {
        pthread_mutex_unlock(&s->qmu);
        return -1;
    }
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    j->seq = s->next_seq++;
    j->stall_ms = s->cfg.stall_ms;
    j->engine = s->engine;
    s->queue[(s->q_head + s->q_len) % (size_t)s->cfg.queue_max] = j;
    s->q_len++;
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    return 0;
}

int sv_queue_retry_after(sv_server *s) {
    pthread_mutex_lock(&s->qmu);
    /* The jobs ahead, shared among the engine threads. */
    double ahead = (double)s->q_len + n_running(s), per = s->recent_job_seconds;
    int threads = s->n_engine_threads > 0 ? s->n_engine_threads : 1;
    pthread_mutex_unlock(&s->qmu);
    double t = ceil(ahead * (per > 0 ? per : 1.0) / threads);
    return t < 1 ? 1 : t > 600 ? 600 : (int)t;
}

void sv_enqueue(sv_server *s, sv_job *j, sv_http_reply *out, sv_error *e) {
    j->req_id = out->req_id;
    j->t_arrival = out->t_arrival;
    snprintf(j->url, sizeof j->url, "%s", out->url ? out->url : "");
    if (sv_queue_push(s, j)) {
        if (atomic_load(&s->draining)) {
            sv_error_set(e, 503, "server_error", "shutting_down", NULL, "the server is shutting down; retry on its successor");
        } else {
            atomic_fetch_add(&s->m.rejected_queue_full, 1);
            sv_error_set(e, 429, "rate_limit_error", "queue_full", NULL, "the request queue is full (%d waiting); retry later", s->cfg.queue_max);
        }
        e->retry_after = sv_queue_retry_after(s);
        sv_job_release(j);
        return;
    }
    out->status = 200;
    out->job = j;
    out->content_type = j->stream ? "text/event-stream" : "application/json";
}

/* Ends a job that never ran with an error its formatter writes (on the stopping thread: the engine
 * thread no longer sees it once it is off the queue). */
static void refuse_queued(sv_job *j) {
    static const char why[] = "the server is shutting down; the request was not started";
    j->fail_status = 503;
    if (j->fmt) {
        sv_usage u = {0};
        j->fmt->end(j, ST_ERR_CANCELLED, why, SV_FINISH_STOP, &u);
    } else {
        sv_error e;
        sv_error_set(&e, 503, "server_error", "shutting_down", NULL, "%s", why);
        char *body = sv_error_openai(&e);
        j->http_status = 503;
        if (body) sv_job_write(j, body, strlen(body));
        free(body);
    }
    pthread_mutex_lock(&j->mu);
    j->finished = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    sv_job_release(j);
}

void sv_queue_drain(sv_server *s, int drain_ms) {
    atomic_store(&s->draining, 1);
    pthread_mutex_lock(&s->qmu);
    while (s->q_len) {
        sv_job *j = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % (size_t)s->cfg.queue_max;
        s->q_len--;
        pthread_mutex_unlock(&s->qmu);
        refuse_queued(j);
        pthread_mutex_lock(&s->qmu);
    }
    double until = st_now() + drain_ms / 1000.0;
    while (n_running(s) && st_now() < until) {
        struct timespec ts;
        sv_deadline_in(&ts, 20);
        pthread_cond_timedwait(&s->qcv, &s->qmu, &ts);
    }
    cancel_running(s, 1);
    pthread_mutex_unlock(&s->qmu);
    sv_queue_stop(s);
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
