/* status.c: the read-only endpoints: GET /v1/models, GET /v1/status (what the web monitor polls)
 * and GET /metrics (Prometheus text format, version 0.0.4). The request log is request_log.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "server/internal.h"

char *sv_api_models(sv_server *s) {
    json_t *m = json_pack("{s:s,s:[{s:s,s:s,s:I,s:s,s:i}]}", "object", "list", "data", "id", s->info.name, "object", "model",
                          "created", (json_int_t)0, "owned_by", "strata", "context_length", s->info.context_length);
    char *r = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return r;
}

/* Resident set size of the process, from /proc (0 where it cannot be read). */
static size_t rss_bytes(void) {
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
    return (size_t)rss * (size_t)sysconf(_SC_PAGESIZE);
}

char *sv_api_status(sv_server *s) {
    size_t waiting, done, total, cached;
    int busy;
    sv_queue_depth(s, &waiting, &busy, &done, &total, &cached);
    sv_metrics *m = &s->m;
    json_t *r = json_pack(
        "{s:s,s:s,s:i,s:b,s:{s:I,s:i},s:{s:I,s:I,s:I},s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I},s:{s:f,s:f},s:{s:I,s:I},s:f,s:{s:b,s:o,s:i,s:I,s:i}}",
        "model", s->info.name, "engine", s->engine->ops->kind, "context_length", s->info.context_length, "busy", busy,
        "queue", "waiting", (json_int_t)waiting, "max", s->cfg.queue_max,
        "prompt", "done", (json_int_t)done, "total", (json_int_t)total, "reused", (json_int_t)cached,
        "totals", "requests", (json_int_t)atomic_load(&m->requests), "ok", (json_int_t)atomic_load(&m->responses_ok),
        "errors", (json_int_t)atomic_load(&m->responses_error), "cancelled", (json_int_t)atomic_load(&m->cancelled),
        "rejected", (json_int_t)atomic_load(&m->rejected_queue_full), "prompt_tokens", (json_int_t)atomic_load(&m->prompt_tokens),
        "completion_tokens", (json_int_t)atomic_load(&m->completion_tokens),
        "speed", "prompt_tokens_per_second", (double)m->last_prompt_tps, "decode_tokens_per_second", (double)m->last_decode_tps,
        "memory", "rss_bytes", (json_int_t)rss_bytes(), "engine_bytes",
        (json_int_t)(s->engine->ops->memory_bytes ? s->engine->ops->memory_bytes(s->engine) : 0),
        "uptime_seconds", st_now() - s->started,
        "settings", "api_key", s->cfg.api_key != NULL, "cors", s->cfg.cors ? json_string(s->cfg.cors) : json_null(),
        "max_body", (int)s->cfg.max_body, "reused_tokens", (json_int_t)atomic_load(&m->cached_tokens), "port", s->port);
    json_object_set_new(r, "host", json_string(s->cfg.host));
    json_object_set_new(json_object_get(r, "totals"), "stalled", json_integer((json_int_t)atomic_load(&m->stalled)));
    json_object_set_new(json_object_get(r, "totals"), "refused_cross_site", json_integer((json_int_t)atomic_load(&m->refused_cross_site)));
    pthread_mutex_lock(&s->cmu);
    json_object_set_new(r, "connections", json_pack("{s:i,s:i,s:i,s:I}", "open", s->n_conns, "busy", s->n_busy, "max",
                                                    s->cfg.max_connections, "evicted",
                                                    (json_int_t)atomic_load(&m->connections_evicted)));
    pthread_mutex_unlock(&s->cmu);
    size_t kept, kept_bytes;
    sv_rstore_usage(s->responses, &kept, &kept_bytes);
    json_object_set_new(r, "responses", json_pack("{s:I,s:I,s:I,s:I}", "kept", (json_int_t)kept, "bytes", (json_int_t)kept_bytes,
                                                  "max", (json_int_t)s->cfg.responses_max, "max_bytes", (json_int_t)s->cfg.responses_bytes));
    return sv_dump(r);
}

char *sv_api_metrics(sv_server *s) {
    size_t waiting, done, total, cached;
    int busy;
    sv_queue_depth(s, &waiting, &busy, &done, &total, &cached);
    sv_metrics *m = &s->m;
    char *out = NULL;
    int n = asprintf(&out,
        "# HELP strata_requests_total Requests received by the API endpoints.\n"
        "# TYPE strata_requests_total counter\nstrata_requests_total %llu\n"
        "# HELP strata_responses_total Requests the engine finished, by outcome.\n"
        "# TYPE strata_responses_total counter\n"
        "strata_responses_total{outcome=\"ok\"} %llu\nstrata_responses_total{outcome=\"error\"} %llu\n"
        "# HELP strata_cancelled_total Requests cancelled because the client went away.\n"
        "# TYPE strata_cancelled_total counter\nstrata_cancelled_total %llu\n"
        "# HELP strata_rejected_total Requests refused with 429 because the queue was full.\n"
        "# TYPE strata_rejected_total counter\nstrata_rejected_total %llu\n"
        "# HELP strata_prompt_tokens_total Prompt tokens, reused ones included.\n"
        "# TYPE strata_prompt_tokens_total counter\nstrata_prompt_tokens_total %llu\n"
        "# HELP strata_reused_tokens_total Prompt tokens reused from the held conversation state.\n"
        "# TYPE strata_reused_tokens_total counter\nstrata_reused_tokens_total %llu\n"
        "# HELP strata_completion_tokens_total Tokens generated.\n"
        "# TYPE strata_completion_tokens_total counter\nstrata_completion_tokens_total %llu\n"
        "# HELP strata_draft_tokens_total Tokens drafted ahead by speculative decoding.\n"
        "# TYPE strata_draft_tokens_total counter\nstrata_draft_tokens_total %llu\n"
        "# HELP strata_draft_accepted_total Drafted tokens the model's own samples confirmed.\n"
        "# TYPE strata_draft_accepted_total counter\nstrata_draft_accepted_total %llu\n"
        "# HELP strata_prompt_tokens_per_second Prompt reading speed of the last request.\n"
        "# TYPE strata_prompt_tokens_per_second gauge\nstrata_prompt_tokens_per_second %.3f\n"
        "# HELP strata_decode_tokens_per_second Generation speed of the last request.\n"
        "# TYPE strata_decode_tokens_per_second gauge\nstrata_decode_tokens_per_second %.3f\n"
        "# HELP strata_queue_depth Requests waiting for the engine.\n"
        "# TYPE strata_queue_depth gauge\nstrata_queue_depth %zu\n"
        "# HELP strata_busy Whether the engine is running a request.\n"
        "# TYPE strata_busy gauge\nstrata_busy %d\n"
        "# HELP strata_resident_memory_bytes Resident memory of the process.\n"
        "# TYPE strata_resident_memory_bytes gauge\nstrata_resident_memory_bytes %zu\n",
        (unsigned long long)atomic_load(&m->requests), (unsigned long long)atomic_load(&m->responses_ok),
        (unsigned long long)atomic_load(&m->responses_error), (unsigned long long)atomic_load(&m->cancelled),
        (unsigned long long)atomic_load(&m->rejected_queue_full), (unsigned long long)atomic_load(&m->prompt_tokens),
        (unsigned long long)atomic_load(&m->cached_tokens), (unsigned long long)atomic_load(&m->completion_tokens),
        (unsigned long long)atomic_load(&m->draft_tokens), (unsigned long long)atomic_load(&m->draft_accepted),
        (double)m->last_prompt_tps, (double)m->last_decode_tps, waiting, busy, rss_bytes());
    return n < 0 ? NULL : out;
}
