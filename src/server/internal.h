/* internal.h: what the server's files share: the server, a request on its way through the queue
 * (a job), its output channel, API errors and the metrics. Not part of any public API.
 *
 * A job's life: an HTTP thread parses and validates a request, renders and tokenizes the prompt,
 * and enqueues the job (429 when the queue is full). The engine thread takes jobs in FIFO order,
 * runs generate(), and the job's formatter turns reply events into bytes (SSE chunks or one JSON
 * body) written to the job's channel. The HTTP thread copies the channel to the client; when the
 * client goes away it raises the job's cancel flag, which the engine checks between tokens. */
#ifndef ST_SERVER_INTERNAL_H
#define ST_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <jansson.h>

#include "server/engine_port.h"
#include "server/reply.h"
#include "server/server.h"

/* An API error: HTTP status, the API's error type and code, the offending field. */
typedef struct sv_error {
    int status;
    char type[48];     /* "invalid_request_error", ... */
    char code[48];     /* OpenAI's code ("context_length_exceeded") or "" */
    char param[128];   /* the field, "messages[0].content", or "" */
    char message[512];
} sv_error;

int sv_error_set(sv_error *e, int status, const char *type, const char *code, const char *param,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The two shapes of error body (malloc'd JSON text). */
char *sv_error_openai(const sv_error *e);
char *sv_error_anthropic(const sv_error *e);

typedef struct sv_job sv_job;
typedef struct sv_server sv_server;

/* How a job's reply becomes bytes; each API provides one for streaming and one for not. All run on
 * the engine thread. begin() comes once, before the first event or at the end, when the reused
 * count is known. */
typedef struct sv_job_format {
    void (*begin)(sv_job *j);
    void (*event)(sv_job *j, sv_event kind, const char *text, size_t len, const sv_tool_call *call);
    void (*end)(sv_job *j, st_status s, const char *error, sv_finish finish, const sv_usage *u);
    void (*free_api)(void *api);
} sv_job_format;

struct sv_job {
    /* Set by the API layer before enqueueing. */
    const sv_job_format *fmt;
    void *api;           /* the API's own state (ids, accumulated text) */
    int32_t *ids;
    size_t n_ids;
    char *reply_prefix;
    char **stops;        /* NULL-terminated */
    int reply_flags;     /* SV_REPLY_* */
    sv_generate gen;     /* sampling, max_tokens, json_object; callbacks are the queue's */
    int stream;
    char endpoint[32];   /* for metrics */
    /* Set for work other than generation (saved sessions): run on the engine thread instead. */
    void (*control)(struct sv_server *s, sv_job *j);

    /* The queue's. */
    atomic_int cancel;
    uint64_t seq;        /* admission order */
    uint64_t served;     /* the order the engine took it in */
    int begun;
    size_t cached, done, total; /* prompt progress */
    int progress_new;
    sv_reply *reply;
    int conn_fd;         /* the client's socket, to notice it closing */

    /* The channel: bytes from the engine thread to the HTTP thread. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *out;
    size_t out_n, out_read, out_cap;
    int finished;        /* the engine is done with it (the channel ends after out is drained) */
    int http_status;     /* for non-streaming replies */
    int refs;
};

sv_job *sv_job_new(void);
void sv_job_release(sv_job *j);
/* Engine thread: appends bytes; waits while the client is far behind, unless cancelled. */
void sv_job_write(sv_job *j, const char *data, size_t n);
void sv_job_printf(sv_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes "data: <json>\n\n" (with "event: NAME\n" first when name is given) and frees json. */
void sv_job_sse(sv_job *j, const char *name, json_t *json);

typedef struct sv_metrics {
    atomic_ullong requests, responses_ok, responses_error, rejected_queue_full, cancelled;
    atomic_ullong prompt_tokens, cached_tokens, completion_tokens;
    atomic_ullong draft_tokens, draft_accepted;
    _Atomic double prompt_seconds, decode_seconds;
    _Atomic double last_prompt_tps, last_decode_tps;
} sv_metrics;

struct sv_server {
    sv_config cfg;
    sv_engine *engine;
    sv_model_info info;
    struct MHD_Daemon *daemon;
    int port;
    double started;

    pthread_t *engine_threads; /* info.parallel of them: each runs one request at a time */
    int n_engine_threads;
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    sv_job **queue;      /* ring of cfg.queue_max */
    size_t q_head, q_len;
    int quitting;
    sv_job **running;    /* under qmu: [n_engine_threads], NULL where a thread is idle */
    uint64_t next_seq, next_served;
    atomic_ullong ids;   /* for response ids */

    sv_metrics m;
};

/* The queue (queue.c). */
st_status sv_queue_start(sv_server *s);
void sv_queue_stop(sv_server *s);
/* Takes a reference; 0 when queued, -1 when the queue is full. */
int sv_queue_push(sv_server *s, sv_job *j);
void sv_queue_depth(sv_server *s, size_t *waiting, int *busy, size_t *done, size_t *total, size_t *cached);

/* Request parsing helpers shared by the APIs (api_common.c). */
int sv_get_number(json_t *o, const char *key, double lo, double hi, double *out, sv_error *e);
int sv_get_int(json_t *o, const char *key, long long lo, long long hi, long long *out, sv_error *e);
int sv_get_bool(json_t *o, const char *key, int *out, sv_error *e);
int sv_get_string(json_t *o, const char *key, const char **out, sv_error *e);
/* Renders, tokenizes and checks the context; fills j->ids, j->reply_prefix, j->gen.max_tokens. */
int sv_prepare_chat(sv_server *s, sv_job *j, const sv_chat *chat, long long max_tokens, sv_error *e, const char *ctx_param);
int sv_prepare_text(sv_server *s, sv_job *j, const char *prompt, long long max_tokens, sv_error *e);
/* "stop" as a string or an array of strings into j->stops. */
int sv_get_stops(json_t *o, const char *key, sv_job *j, sv_error *e);
/* Per request speculative decoding, as llama.cpp's server names it: "speculative.type" ("mtp",
 * "ngram" or "none") and "speculative.n_max" (drafts per step, 1..16) into j->gen. */
int sv_get_spec(json_t *o, sv_job *j, sv_error *e);
char *sv_make_id(sv_server *s, const char *prefix);

/* The endpoints. Each returns the HTTP status and a body (malloc'd), or 0 when it queued a
 * streaming job in *stream_job. */
typedef struct sv_http_reply {
    int status;
    char *body;
    const char *content_type;
    sv_job *job;      /* a queued job whose channel is the body */
} sv_http_reply;

void sv_api_chat(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
void sv_api_completions(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
void sv_api_messages(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
void sv_api_count_tokens(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
char *sv_api_models(sv_server *s);
char *sv_api_status(sv_server *s);
char *sv_api_metrics(sv_server *s);
void sv_api_session_save(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
void sv_api_session_restore(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
char *sv_api_sessions(sv_server *s);

/* The web app's files (web_assets.c, generated from web/ at build time). */
typedef struct sv_asset {
    const char *path;
    const char *content_type;
    const unsigned char *data;
    size_t size;
} sv_asset;
extern const sv_asset sv_assets[];
extern const size_t sv_n_assets;

#endif
