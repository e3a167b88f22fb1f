/* http.c: the HTTP face of `strata serve` on libmicrohttpd: binding, the checks every request
 * passes (Host, key, CORS, body size, UTF-8, nesting, JSON), routing to the endpoints, and moving a
 * job's channel to the client (SSE or one body) while watching for the client to go away.
 *
 * Threads: one per connection (MHD_USE_THREAD_PER_CONNECTION), so a handler may block waiting
 * for the engine. While it waits it polls its socket; a closed socket raises the job's cancel flag,
 * which the engine checks between tokens. Keep-alive comments (": ...") go out on an SSE stream
 * while the prompt is read and after a silence of cfg.keepalive_ms. */
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

#include "base/clock.h"
#include "base/status.h"
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
}

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

static void deadline_in(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (long)ms * 1000000L;
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
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
    return send_body(s, c, e->status, body, "application/json");
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
        deadline_in(&ts, 100);
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
    pthread_cond_broadcast(&sc->j->cv);
    pthread_mutex_unlock(&sc->j->mu);
    sv_job_release(sc->j);
    free(sc);
}

static enum MHD_Result send_job(sv_server *s, struct MHD_Connection *c, sv_job *j, const char *type) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->conn_fd = ci ? ci->connect_fd : -1;
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
        add_cors(s, c, r);
        enum MHD_Result ok = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ok;
    }
    pthread_mutex_lock(&j->mu);
    while (!j->finished) {
        struct timespec ts;
        deadline_in(&ts, 100);
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (!j->finished && client_gone(j->conn_fd)) {
            atomic_store(&j->cancel, 1);
            pthread_cond_broadcast(&j->cv);
            pthread_mutex_unlock(&j->mu);
            sv_job_release(j);
            return MHD_NO;
        }
    }
    pthread_mutex_unlock(&j->mu);
    char *body = strndup(j->out ? j->out + j->out_read : "", j->out_n - j->out_read);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    snprintf(seq, sizeof seq, "%llu", (unsigned long long)j->seq);
    MHD_add_response_header(r, "X-Strata-Seq", seq);
    snprintf(seq, sizeof seq, "%llu", (unsigned long long)j->served);
    MHD_add_response_header(r, "X-Strata-Served", seq);
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
    if (!strcmp(url, "/v1/messages")) return sv_api_messages;
    if (!strcmp(url, "/v1/messages/count_tokens")) return sv_api_count_tokens;
    if (!strcmp(url, "/v1/sessions/save")) return sv_api_session_save;
    if (!strcmp(url, "/v1/sessions/restore")) return sv_api_session_restore;
    return NULL;
}

static enum MHD_Result handle_post(sv_server *s, struct MHD_Connection *c, api_fn fn, int anthropic, request *rq) {
    sv_error e = {0};
    atomic_fetch_add(&s->m.requests, 1);
    if (rq->too_big) {
        sv_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL, "the request body is larger than the limit of %zu bytes",
                     s->cfg.max_body);
        return send_error(s, c, anthropic, &e);
    }
    char param[128], msg[256];
    if (sv_json_check(rq->body ? rq->body : "", rq->n, s->cfg.max_depth, param, sizeof param, msg, sizeof msg)) {
        sv_error_set(&e, 400, "invalid_request_error", "invalid_request_body", param, "%s", msg);
        return send_error(s, c, anthropic, &e);
    }
    json_error_t je;
    json_t *req = json_loadb(rq->body ? rq->body : "", rq->n, 0, &je);
    if (!req) {
        sv_error_set(&e, 400, "invalid_request_error", "invalid_json", NULL, "the body is not valid JSON: %s at line %d column %d",
                     je.text, je.line, je.column);
        return send_error(s, c, anthropic, &e);
    }
    if (!json_is_object(req)) {
        json_decref(req);
        sv_error_set(&e, 400, "invalid_request_error", "invalid_type", NULL, "the body must be a JSON object");
        return send_error(s, c, anthropic, &e);
    }
    sv_http_reply out = {0};
    fn(s, req, &out, &e);
    json_decref(req);
    if (out.job) return send_job(s, c, out.job, out.content_type);
    if (out.body) return send_body(s, c, out.status, out.body, out.content_type);
    if (!e.status) sv_error_set(&e, 500, "server_error", NULL, NULL, "no reply");
    return send_error(s, c, anthropic, &e);
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
            MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
            MHD_add_response_header(r, "Access-Control-Allow-Headers",
                                    "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta");
            MHD_add_response_header(r, "Access-Control-Max-Age", "600");
        }
        enum MHD_Result ok = MHD_queue_response(c, s->cfg.cors ? 204 : 405, r);
        MHD_destroy_response(r);
        return ok;
    }
    if (!strcmp(method, "GET") && !strcmp(url, "/health"))
        return send_text(s, c, strdup("{\"status\":\"ok\"}"), "application/json");
    /* The page itself holds no secret; the API calls it makes carry the key. */
    const sv_asset *asset = !strcmp(method, "GET") ? find_asset(url) : NULL;
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
    }
    if (fn && !strcmp(method, "POST")) return handle_post(s, c, fn, anthropic, rq);
    if (fn) {
        sv_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL, "%s %s: use POST", method, url);
        return send_error(s, c, anthropic, &e);
    }
    sv_error_set(&e, 404, "invalid_request_error", "not_found", NULL, "no endpoint %s %s", method, url);
    return send_error(s, c, anthropic, &e);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    sv_server *s = cls;
    request *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        *con_cls = rq;
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
    free(rq->body);
    free(rq);
    *con_cls = NULL;
}

st_status sv_server_start(const sv_config *cfg, sv_engine *engine, sv_server **out) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    if (getaddrinfo(cfg->host, port, &hints, &ai) || !ai)
        return st_fail(ST_ERR_INVALID, "--host %s is not an address this machine can bind", cfg->host);
    sv_server *s = calloc(1, sizeof *s);
    s->cfg = *cfg;
    s->engine = engine;
    s->started = st_now();
    engine->ops->info(engine, &s->info);
    st_status st = sv_queue_start(s);
    if (st != ST_OK) {
        freeaddrinfo(ai);
        free(s);
        return st;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, s,
                                 MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
                                 MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        sv_queue_stop(s);
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
    sv_queue_stop(s);
    MHD_stop_daemon(s->daemon);
    free(s);
}
