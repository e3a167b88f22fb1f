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
#include <time.h>

#include <jansson.h>

#include "server/engine_port.h"
#include "server/reply.h"
#include "server/response_store.h"
#include "server/server.h"

/* An API error: HTTP status, the API's error type and code, the offending field. */
typedef struct sv_error {
    int status;
    char type[48];     /* "invalid_request_error", ... */
    char code[48];     /* OpenAI's code ("context_length_exceeded") or "" */
    char param[128];   /* the field, "messages[0].content", or "" */
    char message[512];
    int retry_after;   /* seconds, for 429 and 503 (a Retry-After header); 0: none */
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
    /* One choice ended (j->choice says which); NULL where the API has one choice only. */
    void (*choice_end)(sv_job *j, sv_finish f);
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
    struct st_json_schema *schema; /* what gen.schema points to (freed with the job) */
    int one_call;        /* parallel_tool_calls false: generation stops after the first call */
    int n_choices;       /* replies to generate (n, and one per prompt of /v1/completions) */
    int choice;          /* the one being generated */
    int32_t **choice_ids; /* each choice's prompt (NULL: all take ids); owned */
    size_t *choice_n;
    json_t *pending_logprobs; /* logprobs entries of tokens whose text has not come out yet */
    sv_engine *engine;   /* the server's, for the engine thread's callbacks */
    char endpoint[32];   /* for metrics */
    unsigned long long req_id; /* the request's number (the log, X-Request-Id) */
    char url[48];        /* the endpoint's path, for the log */
    double t_arrival, t_first; /* when the request came, and its first token (0: none yet) */
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
    int conn_fd;         /* the client's socket, to notice it closing (-1 once the response is gone) */
    int stall_ms;        /* cfg.stall_ms, for the engine's writes */
    atomic_int shutdown; /* cancelled by a stopping server: ends with an error event, not silently */
    int stalled;         /* cancelled because the client stopped reading (under mu) */
    int fail_status;     /* the HTTP status of a failed non-streaming reply (500, or 503 on shutdown) */

    /* The channel: bytes from the engine thread to the HTTP thread. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *out;
    size_t out_n, out_read, out_cap;
    int finished;        /* the engine is done with it (the channel ends after out is drained) */
    int http_status;     /* for non-streaming replies */
    int refs;
};

/* A CLOCK_REALTIME deadline ms from now, for pthread_cond_timedwait. */
void sv_deadline_in(struct timespec *ts, int ms);

sv_job *sv_job_new(void);
void sv_job_release(sv_job *j);
/* Engine thread: appends bytes; waits while the client is far behind, unless cancelled. */
void sv_job_write(sv_job *j, const char *data, size_t n);
void sv_job_printf(sv_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes "data: <json>\n\n" (with "event: NAME\n" first when name is given) and frees json. */
void sv_job_sse(sv_job *j, const char *name, json_t *json);

typedef struct sv_metrics {
    atomic_ullong requests, responses_ok, responses_error, rejected_queue_full, cancelled, stalled;
    atomic_ullong refused_cross_site, connections_evicted;
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
    double recent_job_seconds; /* a running mean of the time per request (under qmu), for Retry-After */

    sv_metrics m;
    sv_sampling defaults; /* for requests that send no sampling fields */
    sv_rstore *responses; /* finished /v1/responses, for previous_response_id */

    /* Open connections, oldest first (http.c), for the idle limit and the drain. */
    pthread_mutex_t cmu;
    struct sv_conn *conns, *conns_tail;
    int n_conns;         /* not yet closed or evicted */
    int n_busy;          /* with a request in progress */
    atomic_int draining; /* stopping: new requests get 503 */
};

/* The queue (queue.c). */
st_status sv_queue_start(sv_server *s);
void sv_queue_stop(sv_server *s);
/* Takes a reference; 0 when queued, -1 when the queue is full or the server is stopping. */
int sv_queue_push(sv_server *s, sv_job *j);
/* Seconds a client should wait before retrying a refused request: the queue ahead at the recent
 * time per request, at least 1. */
int sv_queue_retry_after(sv_server *s);
/* Stopping: answers every queued job 503, lets the running one go on for drain_ms, then ends it
 * (with its final event) and stops the engine thread. */
void sv_queue_drain(sv_server *s, int drain_ms);
void sv_queue_depth(sv_server *s, size_t *waiting, int *busy, size_t *done, size_t *total, size_t *cached);

/* Request parsing helpers shared by the APIs (api_common.c). */
int sv_get_number(json_t *o, const char *key, double lo, double hi, double *out, sv_error *e);
int sv_get_int(json_t *o, const char *key, long long lo, long long hi, long long *out, sv_error *e);
int sv_get_bool(json_t *o, const char *key, int *out, sv_error *e);
int sv_get_string(json_t *o, const char *key, const char **out, sv_error *e);
/* Compact JSON text of v (malloc'd), and v released. */
char *sv_dump(json_t *v);
/* Appends len bytes of t to the NUL-terminated *s of *n bytes (left as it was when out of memory). */
void sv_append(char **s, size_t *n, const char *t, size_t len);
/* Strings made while parsing (joined content parts), freed after the prompt is rendered. */
typedef struct sv_strpool {
    char **p;
    size_t n;
} sv_strpool;
const char *sv_pool_keep(sv_strpool *sp, char *s);
void sv_pool_free(sv_strpool *sp);
/* A content field: a string, null, or an array of parts whose type is one of types (NULL-ended),
 * each with a "text", joined with newlines. */
int sv_text_parts(json_t *c, const char *field, const char *const *types, sv_strpool *sp, const char **out, sv_error *e);
/* The OpenAI sampling fields (temperature, top_p, top_k, min_p, penalties, seed) over the server's
 * defaults into j->gen.sampling, and llama.cpp's ignore_eos into j->gen. */
int sv_parse_sampling(sv_server *s, json_t *req, sv_job *j, sv_error *e);
/* OpenAI's tools ([{type: function, function: {name, ...}}]) and tool_choice into chat. */
int sv_parse_tools(json_t *req, sv_chat *chat, sv_strpool *sp, sv_error *e);
/* reasoning_effort and chat_template_kwargs.enable_thinking into *thinking (default on). */
int sv_parse_thinking(json_t *req, int *thinking, sv_error *e);
/* Renders, tokenizes and checks the context; fills j->ids, j->reply_prefix, j->gen.max_tokens. */
int sv_prepare_chat(sv_server *s, sv_job *j, const sv_chat *chat, long long max_tokens, sv_error *e, const char *ctx_param);
int sv_prepare_text(sv_server *s, sv_job *j, const char *prompt, long long max_tokens, sv_error *e);
/* /v1/completions' prompt: a string, an array of token ids, or an array of several (strings or id
 * arrays); j->n_choices (n) becomes prompts x n, each choice with its prompt's ids. */
int sv_prepare_prompts(sv_server *s, sv_job *j, json_t *prompt, long long max_tokens, sv_error *e);
/* top_p 0 keeps one candidate: greedy, said as temperature 0, which every engine reads the same
 * way (the sampler refuses top_p 0). */
void sv_sampling_settle(sv_sampling *sp);
/* Compiles a schema into j->schema (and j->gen.schema); a schema that cannot be enforced is a 400
 * whose param is field and the path inside it. */
int sv_set_schema(sv_job *j, json_t *schema, const char *field, sv_error *e);
/* A forced tool call (tool_choice required or named) as a constraint on the reply, for the chat's
 * tools, in the form the model writes; parallel: more calls may follow. */
int sv_set_tool_schema(sv_server *s, sv_job *j, const sv_chat *chat, int parallel, sv_error *e);
/* With tool_choice required or named: the forced call as the reply's constraint (a response
 * format gives way to it); and parallel_tool_calls into j->one_call. */
int sv_force_tool_call(sv_server *s, sv_job *j, sv_chat *chat, int parallel, sv_error *e);
/* A failed reply's OpenAI error body (malloc'd); j->http_status becomes j->fail_status. */
char *sv_failure_openai(sv_job *j, const char *error);
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
    /* Set by the HTTP layer before the endpoint runs; sv_enqueue gives them to the job. */
    unsigned long long req_id;
    const char *url;
    double t_arrival;
} sv_http_reply;

/* The request log (status.c): one line through cfg.log, text or JSON. ttft < 0: no token came. */
void sv_log_request(sv_server *s, unsigned long long id, const char *url, int status, const sv_usage *u, double ttft, double total);

/* Queues j for its HTTP reply (out->job), or sets the 429/503 error (with Retry-After) and
 * releases it. */
void sv_enqueue(sv_server *s, sv_job *j, sv_http_reply *out, sv_error *e);

void sv_api_chat(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
void sv_api_completions(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
void sv_api_responses(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
/* GET and DELETE /v1/responses/ID: the body, or NULL with e set (404). */
char *sv_api_response_get(sv_server *s, const char *id, sv_error *e);
char *sv_api_response_delete(sv_server *s, const char *id, sv_error *e);
void sv_api_messages(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
void sv_api_count_tokens(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
void sv_api_embeddings(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
void sv_api_tokenize(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
void sv_api_detokenize(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
void sv_api_apply_template(sv_server *s, json_t *req, sv_http_reply *out, sv_error *e);
char *sv_api_props(sv_server *s);
char *sv_api_slots(sv_server *s);
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
