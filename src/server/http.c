/* http.c: the HTTP face of `strata serve` on libmicrohttpd: binding, the checks every request
 * passes (Host, cross-site, key, CORS, body size, UTF-8, nesting, JSON), routing to the endpoints,
 * and moving a job's channel to the client (SSE or one body) while watching for the client to go
 * away.
 *
 * Threads: one per connection (MHD_USE_THREAD_PER_CONNECTION), so a handler may block waiting
 * for the engine. While it waits it polls its socket; a closed socket raises the job's cancel flag,
 * which the engine checks between tokens. Keep-alive comments (": ...") go out on an SSE stream
 * while the prompt is read and after a silence of cfg.keepalive_ms.
 *
 * Holding up. A connection that makes no progress for cfg.timeout_s is closed by libmicrohttpd.
 * Open connections are listed here, oldest first, each marked busy while a request is in progress:
 * when a new one would pass cfg.max_connections, the oldest idle one (kept alive between requests,
 * or half-open: its request headers not complete) is shut, so idle sockets cannot lock clients out.
 * Without a key, a POST must be application/json and its Origin, when sent, must be the server's
 * own or the --cors one: a web page elsewhere cannot send either without a preflight the server
 * refuses. Stopping drains (queue.c), then waits for the replies to reach their clients. */
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "base/clock.h"
#include "base/status.h"
#include "engine/sampler.h"
#include "server/internal.h"
#include "server/json_check.h"

void sv_config_defaults(sv_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->max_body = 8u << 20;
    c->max_depth = 64;
    c->queue_max = 32;
    c->keepalive_ms = 5000;
    c->state_dir = "strata-sessions";
    c->timeout_s = 600;
    c->stall_ms = 5000;
    c->max_connections = 256;
    c->drain_ms = 3000;
    c->webui = 1;
    c->responses_max = 256;
    c->responses_bytes = 64u << 20;
}

/* One open connection (MHD's socket context). */
typedef struct sv_conn {
    int fd;
    int busy;    /* a request is in progress */
    int evicted; /* shut to make room; its thread is closing it */
    struct sv_conn *prev, *next;
} sv_conn;

typedef struct request {
    char *body;
    size_t n, cap;
    int too_big;
} request;

/* --- small helpers ---------------------------------------------------------------------------- */

static int client_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return 1;
    char b;
    return (p.revents & POLLIN) && recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Compares without an early exit, so the time taken does not tell how much of the key matched. */
static int key_equal(const char *given, const char *key) {
    size_t n = strlen(key), g = strlen(given);
    unsigned char diff = (unsigned char)(n != g);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(key[i] ^ (i < g ? given[i] : 0));
    return diff == 0;
}

/* localhost, 127.x.x.x, [::1], with or without a port. */
static int host_is_loopback(const char *host) {
    if (!host) return 0;
    char h[256];
    snprintf(h, sizeof h, "%s", host);
    if (h[0] == '[') {
        char *e = strchr(h, ']');
        if (!e) return 0;
        *e = 0;
        return !strcmp(h + 1, "::1");
    }
    char *colon = strchr(h, ':');
    if (colon) *colon = 0;
    if (!strcasecmp(h, "localhost") || !strcasecmp(h, "localhost.")) return 1;
    struct in_addr a;
    return inet_pton(AF_INET, h, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

static void add_cors(sv_server *s, struct MHD_Connection *c, struct MHD_Response *r) {
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!s->cfg.cors || !origin) return;
    if (strcmp(s->cfg.cors, "*") && strcmp(s->cfg.cors, origin)) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", !strcmp(s->cfg.cors, "*") ? "*" : origin);
    MHD_add_response_header(r, "Vary", "Origin");
}

static enum MHD_Result send_body(sv_server *s, struct MHD_Connection *c, int status, char *body, const char *type) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", type);
    add_cors(s, c, r);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_error(sv_server *s, struct MHD_Connection *c, int anthropic, const sv_error *e) {
    char *body = anthropic ? sv_error_anthropic(e) : sv_error_openai(e);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (e->retry_after > 0) {
        char secs[16];
        snprintf(secs, sizeof secs, "%d", e->retry_after);
        MHD_add_response_header(r, "Retry-After", secs);
    }
    add_cors(s, c, r);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)e->status, r);
    MHD_destroy_response(r);
    return ok;
}

/* --- streaming a job -------------------------------------------------------------------------- */

typedef struct stream_ctx {
    sv_server *s;
    sv_job *j;
    double last_sent;
} stream_ctx;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_ctx *sc = cls;
    sv_job *j = sc->j;
    ssize_t n = 0;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (j->progress_new) {
            /* The prompt is being read: a comment keeps proxies and clients from timing out. It
             * goes first, so a stream always shows prompt progress before the reply. */
            j->progress_new = 0;
            n = snprintf(buf, max, ": prompt %zu/%zu\n\n", j->done, j->total);
            break;
        }
        if (j->out_read < j->out_n) {
            size_t k = j->out_n - j->out_read < max ? j->out_n - j->out_read : max;
            memcpy(buf, j->out + j->out_read, k);
            j->out_read += k;
            pthread_cond_broadcast(&j->cv); /* the engine may wait for room */
            n = (ssize_t)k;
            break;
        }
        if (j->finished) { n = MHD_CONTENT_READER_END_OF_STREAM; break; }
        if (st_now() - sc->last_sent > sc->s->cfg.keepalive_ms / 1000.0) {
            n = snprintf(buf, max, ": keep-alive\n\n");
            break;
        }
        struct timespec ts;
        sv_deadline_in(&ts, 100);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (!j->finished && j->out_read == j->out_n && client_gone(j->conn_fd)) {
            atomic_store(&j->cancel, 1);
            pthread_cond_broadcast(&j->cv);
            n = MHD_CONTENT_READER_END_WITH_ERROR;
            break;
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (n > 0) sc->last_sent = st_now();
    return n;
}

static void stream_free(void *cls) {
    stream_ctx *sc = cls;
    /* The response is gone: if the engine still runs it, nobody will read what it writes. */
    atomic_store(&sc->j->cancel, 1);
    pthread_mutex_lock(&sc->j->mu);
    sc->j->conn_fd = -1; /* libmicrohttpd closes the socket after this: nobody may shut it now */
    pthread_cond_broadcast(&sc->j->cv);
    pthread_mutex_unlock(&sc->j->mu);
    sv_job_release(sc->j);
    free(sc);
}

static enum MHD_Result send_job(sv_server *s, struct MHD_Connection *c, sv_job *j, const char *type) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    pthread_mutex_lock(&j->mu);
    j->conn_fd = ci ? ci->connect_fd : -1;
    pthread_mutex_unlock(&j->mu);
    char seq[64];
    if (j->stream) {
        stream_ctx *sc = calloc(1, sizeof *sc);
        sc->s = s;
        sc->j = j;
        sc->last_sent = st_now();
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, sc, stream_free);
        MHD_add_response_header(r, "Content-Type", type);
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        snprintf(seq, sizeof seq, "%llu", (unsigned long long)j->seq);
        MHD_add_response_header(r, "X-Strata-Seq", seq);
        snprintf(seq, sizeof seq, "%llu", j->req_id);
        MHD_add_response_header(r, "X-Request-Id", seq);
        add_cors(s, c, r);
        enum MHD_Result ok = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ok;
    }
    pthread_mutex_lock(&j->mu);
    while (!j->finished) {
        struct timespec ts;
        sv_deadline_in(&ts, 100);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (!j->finished && client_gone(j->conn_fd)) {
            atomic_store(&j->cancel, 1);
            j->conn_fd = -1;
            pthread_cond_broadcast(&j->cv);
            pthread_mutex_unlock(&j->mu);
            sv_job_release(j);
            return MHD_NO;
        }
    }
    j->conn_fd = -1;
    pthread_mutex_unlock(&j->mu);
    char *body = strndup(j->out ? j->out + j->out_read : "", j->out_n - j->out_read);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    snprintf(seq, sizeof seq, "%llu", (unsigned long long)j->seq);
    MHD_add_response_header(r, "X-Strata-Seq", seq);
    snprintf(seq, sizeof seq, "%llu", (unsigned long long)j->served);
    MHD_add_response_header(r, "X-Strata-Served", seq);
    snprintf(seq, sizeof seq, "%llu", j->req_id);
    MHD_add_response_header(r, "X-Request-Id", seq);
    add_cors(s, c, r);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)j->http_status, r);
    MHD_destroy_response(r);
    sv_job_release(j);
    return ok;
}

/* --- routing ---------------------------------------------------------------------------------- */

static const sv_asset *find_asset(const char *url) {
    if (!strcmp(url, "/")) url = "/index.html";
    for (size_t i = 0; i < sv_n_assets; i++)
        if (!strcmp(url + 1, sv_assets[i].path)) return &sv_assets[i];
    return NULL;
}

static enum MHD_Result send_text(sv_server *s, struct MHD_Connection *c, char *body, const char *type) {
    if (!body) {
        sv_error e;
        sv_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        return send_error(s, c, 0, &e);
    }
    return send_body(s, c, 200, body, type);
}

/* The request headers a browser may send across origins: the APIs' own and what the openai and
 * Anthropic SDKs add (x-stainless-*). Of those the preflight asks for, the allowed ones, listed. */
static int header_allowed(const char *name, size_t n) {
    static const char *const names[] = {"authorization", "content-type", "x-api-key", "anthropic-version", "anthropic-beta",
                                        "anthropic-dangerous-direct-browser-access", "openai-organization", "openai-project",
                                        "openai-beta", "idempotency-key", "x-request-id"};
    if (n > 11 && !strncasecmp(name, "x-stainless-", 12)) return 1;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i]) == n && !strncasecmp(name, names[i], n)) return 1;
    return 0;
}

static void allowed_headers(const char *requested, char *out, size_t cap) {
    snprintf(out, cap, "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta");
    size_t used = strlen(out);
    for (const char *p = requested; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        const char *end = p;
        while (*end && *end != ',') end++;
        size_t n = (size_t)(end - p);
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
        if (n && header_allowed(p, n) && used + n + 3 < cap) {
            used += (size_t)snprintf(out + used, cap - used, ", %.*s", (int)n, p);
        }
        p = end;
    }
}

/* Whether a keyless server must refuse this POST as a cross-site one (sets e): its body is not
 * declared JSON (a form or text/plain post needs no preflight), or its Origin is neither the
 * server's own (the web app) nor the --cors one. */
static int cross_site(sv_server *s, struct MHD_Connection *c, sv_error *e) {
    const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    size_t n = strlen("application/json");
    if (!type || strncasecmp(type, "application/json", n) || (type[n] && type[n] != ';' && type[n] != ' '))
        return sv_error_set(e, 403, "permission_error", "cross_site_refused", NULL,
                            "a POST must have 'Content-Type: application/json' (got '%s'); without --api-key other kinds are "
                            "refused, since any web page may send them", type ? type : "");
    if (!origin) return 0;
    if (s->cfg.cors && (!strcmp(s->cfg.cors, "*") || !strcmp(s->cfg.cors, origin))) return 0;
    const char *rest = !strncmp(origin, "http://", 7) ? origin + 7 : !strncmp(origin, "https://", 8) ? origin + 8 : NULL;
    if (rest && host && !strcasecmp(rest, host)) return 0;
    return sv_error_set(e, 403, "permission_error", "origin_not_allowed", NULL,
                        "Origin '%s' may not call this server; allow it with --cors, or start the server with --api-key", origin);
}

static int authorized(sv_server *s, struct MHD_Connection *c) {
    if (!s->cfg.api_key) return 1;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *xkey = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    if (auth && !strncasecmp(auth, "Bearer ", 7) && key_equal(auth + 7, s->cfg.api_key)) return 1;
    return xkey && key_equal(xkey, s->cfg.api_key);
}

typedef void (*api_fn)(sv_server *, json_t *, sv_http_reply *, sv_error *);

static api_fn post_route(const char *url, int *anthropic) {
    *anthropic = !strncmp(url, "/v1/messages", 12);
    if (!strcmp(url, "/v1/chat/completions")) return sv_api_chat;
    if (!strcmp(url, "/v1/completions")) return sv_api_completions;
    if (!strcmp(url, "/v1/responses")) return sv_api_responses;
    if (!strcmp(url, "/v1/embeddings") || !strcmp(url, "/embeddings")) return sv_api_embeddings;
    if (!strcmp(url, "/tokenize")) return sv_api_tokenize;
    if (!strcmp(url, "/detokenize")) return sv_api_detokenize;
    if (!strcmp(url, "/apply-template")) return sv_api_apply_template;
    if (!strcmp(url, "/v1/messages")) return sv_api_messages;
    if (!strcmp(url, "/v1/messages/count_tokens")) return sv_api_count_tokens;
    if (!strcmp(url, "/v1/sessions/save")) return sv_api_session_save;
    if (!strcmp(url, "/v1/sessions/restore")) return sv_api_session_restore;
    return NULL;
}

/* A request refused before it reached the queue: its log line. */
static enum MHD_Result refuse(sv_server *s, struct MHD_Connection *c, int anthropic, const sv_error *e, const sv_http_reply *out) {
    sv_usage u = {0};
    sv_log_request(s, out->req_id, out->url, e->status, &u, -1, st_now() - out->t_arrival);
    return send_error(s, c, anthropic, e);
}

static enum MHD_Result handle_post(sv_server *s, struct MHD_Connection *c, const char *url, api_fn fn, int anthropic, request *rq) {
    sv_error e = {0};
    sv_http_reply out = {.req_id = atomic_fetch_add(&s->m.requests, 1) + 1, .url = url, .t_arrival = st_now()};
    if (rq->too_big) {
        sv_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL, "the request body is larger than the limit of %zu bytes",
                     s->cfg.max_body);
        return refuse(s, c, anthropic, &e, &out);
    }
    char param[128], msg[256];
    if (sv_json_check(rq->body ? rq->body : "", rq->n, s->cfg.max_depth, param, sizeof param, msg, sizeof msg)) {
        sv_error_set(&e, 400, "invalid_request_error", "invalid_request_body", param, "%s", msg);
        return refuse(s, c, anthropic, &e, &out);
    }
    json_error_t je;
    json_t *req = json_loadb(rq->body ? rq->body : "", rq->n, 0, &je);
    if (!req) {
        sv_error_set(&e, 400, "invalid_request_error", "invalid_json", NULL, "the body is not valid JSON: %s at line %d column %d",
                     je.text, je.line, je.column);
        return refuse(s, c, anthropic, &e, &out);
    }
    if (!json_is_object(req)) {
        json_decref(req);
        sv_error_set(&e, 400, "invalid_request_error", "invalid_type", NULL, "the body must be a JSON object");
        return refuse(s, c, anthropic, &e, &out);
    }
    fn(s, req, &out, &e);
    json_decref(req);
    if (out.job) return send_job(s, c, out.job, out.content_type);
    if (out.body) {
        sv_usage u = {0};
        sv_log_request(s, out.req_id, url, out.status, &u, -1, st_now() - out.t_arrival);
        return send_body(s, c, out.status, out.body, out.content_type);
    }
    if (!e.status) sv_error_set(&e, 500, "server_error", NULL, NULL, "no reply");
    return refuse(s, c, anthropic, &e, &out);
}

static enum MHD_Result dispatch(sv_server *s, struct MHD_Connection *c, const char *url, const char *method, request *rq) {
    sv_error e = {0};
    int anthropic = 0;
    api_fn fn = post_route(url, &anthropic);
    if (!s->cfg.api_key && !host_is_loopback(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"))) {
        /* Without a key, only loopback names may reach us: a page that rebinds its own DNS name
         * to 127.0.0.1 must not be able to drive the model. */
        sv_error_set(&e, 403, "permission_error", "host_not_allowed", NULL,
                     "Host '%s' is not a loopback name; start the server with --api-key to serve other names",
                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host") ?: "");
        return send_error(s, c, anthropic, &e);
    }
    if (!strcmp(method, "OPTIONS")) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        if (s->cfg.cors) {
            add_cors(s, c, r);
            MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS");
            char allow[1024];
            allowed_headers(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers"), allow, sizeof allow);
            MHD_add_response_header(r, "Access-Control-Allow-Headers", allow);
            MHD_add_response_header(r, "Access-Control-Max-Age", "600");
        }
        enum MHD_Result ok = MHD_queue_response(c, s->cfg.cors ? 204 : 405, r);
        MHD_destroy_response(r);
        return ok;
    }
    if (!strcmp(method, "POST") && !s->cfg.api_key && cross_site(s, c, &e)) {
        atomic_fetch_add(&s->m.refused_cross_site, 1);
        return send_error(s, c, anthropic, &e);
    }
    if ((!strcmp(method, "GET") || !strcmp(method, "HEAD")) && !strcmp(url, "/health"))
        return send_text(s, c, strdup("{\"status\":\"ok\"}"), "application/json");
    /* The page itself holds no secret; the API calls it makes carry the key. */
    const sv_asset *asset = !strcmp(method, "GET") && s->cfg.webui ? find_asset(url) : NULL;
    if (asset) {
        struct MHD_Response *r = MHD_create_response_from_buffer(asset->size, (void *)asset->data, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Type", asset->content_type);
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'");
        enum MHD_Result ok = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ok;
    }
    if (!authorized(s, c)) {
        sv_error_set(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
                     "Incorrect API key provided: send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'");
        return send_error(s, c, anthropic, &e);
    }
    if (!strcmp(method, "GET")) {
        if (!strcmp(url, "/v1/models")) return send_text(s, c, sv_api_models(s), "application/json");
        if (!strcmp(url, "/v1/status")) return send_text(s, c, sv_api_status(s), "application/json");
        if (!strcmp(url, "/metrics")) return send_text(s, c, sv_api_metrics(s), "text/plain; version=0.0.4");
        if (!strcmp(url, "/v1/sessions")) return send_text(s, c, sv_api_sessions(s), "application/json");
        if (!strcmp(url, "/props")) return send_text(s, c, sv_api_props(s), "application/json");
        if (!strcmp(url, "/slots")) return send_text(s, c, sv_api_slots(s), "application/json");
    }
    if ((!strcmp(method, "GET") || !strcmp(method, "DELETE")) && !strncmp(url, "/v1/responses/", 14) && url[14] && !strchr(url + 14, '/')) {
        char *body = !strcmp(method, "GET") ? sv_api_response_get(s, url + 14, &e) : sv_api_response_delete(s, url + 14, &e);
        return body ? send_body(s, c, 200, body, "application/json") : send_error(s, c, 0, &e);
    }
    if (fn && !strcmp(method, "POST") && atomic_load(&s->draining)) {
        sv_error_set(&e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
        e.retry_after = 1;
        return send_error(s, c, anthropic, &e);
    }
    if (fn && !strcmp(method, "POST")) return handle_post(s, c, url, fn, anthropic, rq);
    if (fn) {
        sv_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL, "%s %s: use POST", method, url);
        return send_error(s, c, anthropic, &e);
    }
    sv_error_set(&e, 404, "invalid_request_error", "not_found", NULL, "no endpoint %s %s", method, url);
    return send_error(s, c, anthropic, &e);
}

/* --- open connections ------------------------------------------------------------------------ */

static void conn_set_busy(sv_server *s, struct MHD_Connection *c, int busy) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    sv_conn *k = ci ? ci->socket_context : NULL;
    if (!k) return;
    pthread_mutex_lock(&s->cmu);
    if (k->busy != busy) s->n_busy += busy ? 1 : -1;
    k->busy = busy;
    if (!busy && k != s->conns_tail) {
        /* idle from now: to the end of the list, which is ordered by when each became idle */
        if (k->prev) k->prev->next = k->next; else s->conns = k->next;
        k->next->prev = k->prev;
        k->prev = s->conns_tail;
        k->next = NULL;
        s->conns_tail->next = k;
        s->conns_tail = k;
    }
    pthread_mutex_unlock(&s->cmu);
}

/* Started: listed, after making room by shutting the idle connection listed first (the longest
 * idle); with none idle the new one is shut instead. Closed (before libmicrohttpd closes the
 * socket, so a shut never reaches a reused descriptor): unlisted. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code) {
    sv_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        sv_conn *k = calloc(1, sizeof *k);
        if (!k) return;
        k->fd = ci ? ci->connect_fd : -1;
        pthread_mutex_lock(&s->cmu);
        if (s->n_conns >= s->cfg.max_connections) {
            sv_conn *idle = s->conns;
            while (idle && (idle->busy || idle->evicted)) idle = idle->next;
            sv_conn *victim = idle ? idle : k;
            if (victim->fd >= 0) shutdown(victim->fd, SHUT_RDWR);
            victim->evicted = 1;
            if (idle) s->n_conns--;
            atomic_fetch_add(&s->m.connections_evicted, 1);
        }
        if (!k->evicted) s->n_conns++;
        k->prev = s->conns_tail;
        if (s->conns_tail) s->conns_tail->next = k; else s->conns = k;
        s->conns_tail = k;
        pthread_mutex_unlock(&s->cmu);
        *socket_context = k;
        return;
    }
    sv_conn *k = *socket_context;
    if (!k) return;
    pthread_mutex_lock(&s->cmu);
    if (k->prev) k->prev->next = k->next; else s->conns = k->next;
    if (k->next) k->next->prev = k->prev; else s->conns_tail = k->prev;
    if (!k->evicted) s->n_conns--;
    if (k->busy) s->n_busy--;
    pthread_mutex_unlock(&s->cmu);
    free(k);
    *socket_context = NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    sv_server *s = cls;
    request *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        *con_cls = rq;
        conn_set_busy(s, c, 1);
        return MHD_YES;
    }
    if (*upload_size) {
        /* Over the limit the rest is read and dropped, so the client sees the 413 rather than a
         * connection reset in the middle of its upload. */
        if (!rq->too_big && rq->n + *upload_size > s->cfg.max_body) {
            rq->too_big = 1;
            free(rq->body);
            rq->body = NULL;
            rq->n = rq->cap = 0;
        }
        if (!rq->too_big) {
            if (rq->n + *upload_size + 1 > rq->cap) {
                size_t cap = rq->cap ? rq->cap : 4096;
                while (cap < rq->n + *upload_size + 1) cap *= 2;
                char *p = realloc(rq->body, cap);
                if (!p) return MHD_NO;
                rq->body = p;
                rq->cap = cap;
            }
            memcpy(rq->body + rq->n, upload, *upload_size);
            rq->n += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return dispatch(s, c, url, method, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    request *rq = *con_cls;
    if (!rq) return;
    conn_set_busy(cls, c, 0);
    free(rq->body);
    free(rq);
    *con_cls = NULL;
}

/* What a request that sends no sampling fields gets: the command line's, else the model's, else
 * `strata run`'s. */
static sv_sampling request_defaults(const sv_config *cfg, const sv_model_info *info) {
    st_sampler_params run = st_sampler_default_params();
    sv_sampling d = {.temperature = run.temperature, .top_p = run.top_p, .top_k = run.top_k, .min_p = run.min_p};
    const sv_sampling *from[2] = {&info->sampling, &cfg->sampling};
    const unsigned set[2] = {info->sampling_set, cfg->sampling_set};
    for (int i = 0; i < 2; i++) {
        if (set[i] & SV_SET_TEMPERATURE) d.temperature = from[i]->temperature;
        if (set[i] & SV_SET_TOP_P) d.top_p = from[i]->top_p;
        if (set[i] & SV_SET_TOP_K) d.top_k = from[i]->top_k;
        if (set[i] & SV_SET_MIN_P) d.min_p = from[i]->min_p;
        if (set[i] & SV_SET_SEED) { d.seed = from[i]->seed; d.has_seed = 1; }
        if (set[i] & SV_SET_REPEAT_PENALTY) d.repeat_penalty = from[i]->repeat_penalty;
    }
    return d;
}

st_status sv_server_start(const sv_config *cfg, sv_engine *engine, sv_server **out) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    if (getaddrinfo(cfg->host, port, &hints, &ai) || !ai)
        return st_fail(ST_ERR_INVALID, "--host %s is not an address this machine can bind", cfg->host);
    sv_server *s = calloc(1, sizeof *s);
    s->cfg = *cfg;
    pthread_mutex_init(&s->cmu, NULL);
    s->engine = engine;
    s->started = st_now();
    engine->ops->info(engine, &s->info);
    if (cfg->alias && *cfg->alias) snprintf(s->info.name, sizeof s->info.name, "%s", cfg->alias);
    s->defaults = request_defaults(cfg, &s->info);
    s->responses = sv_rstore_new(cfg->responses_max, cfg->responses_bytes);
    st_status st = s->responses ? sv_queue_start(s) : st_fail(ST_ERR_NOMEM, "serve: out of memory");
    if (st != ST_OK) {
        freeaddrinfo(ai);
        sv_rstore_free(s->responses);
        free(s);
        return st;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, s,
                                 MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                 /* room past max_connections for the ones being shut */
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections + 64,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout_s,
                                 MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        sv_queue_stop(s);
        sv_rstore_free(s->responses);
        free(s);
        return st_fail(ST_ERR_IO, "could not listen on %s port %d (in use, or not allowed)", cfg->host, cfg->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : cfg->port;
    *out = s;
    return ST_OK;
}

int sv_server_port(const sv_server *s) { return s->port; }

void sv_server_stop(sv_server *s) {
    if (!s) return;
    sv_queue_drain(s, s->cfg.drain_ms);
    /* The replies' last bytes are still on their way: give the HTTP threads a moment to write
     * them (a client that does not read is cut when the time is up). */
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&s->cmu);
        int busy = s->n_busy;
        pthread_mutex_unlock(&s->cmu);
        if (!busy) break;
        usleep(10000);
    }
    MHD_stop_daemon(s->daemon);
    pthread_mutex_destroy(&s->cmu);
    sv_rstore_free(s->responses);
    free(s);
}
