/* server.h: `strata serve` as a library: start an HTTP server over an engine, stop it. */
#ifndef ST_SERVER_SERVER_H
#define ST_SERVER_SERVER_H

#include <stddef.h>

#include "server/engine_port.h"

typedef struct sv_config {
    const char *host;    /* address to bind ("127.0.0.1", "::1", "0.0.0.0") */
    int port;            /* 0: any free port (see sv_server_port) */
    const char *api_key; /* NULL: no key; then Host must name the loopback */
    const char *cors;    /* an origin (or "*") allowed to call from a browser; NULL: none */
    size_t max_body;     /* bytes; larger bodies get 413 */
    int max_depth;       /* JSON nesting limit */
    int queue_max;       /* requests waiting for the engine; more get 429 */
    int keepalive_ms;    /* SSE comment after this much silence */
    const char *state_dir; /* where saved sessions live */
    int timeout_s;       /* a connection that makes no progress reading or writing this long is closed */
    int stall_ms;        /* a client this long more than the channel's high-water mark behind loses its
                            request, so the engine moves on to the others */
    int max_connections; /* open connections; past it the oldest idle (or half-open) one is closed */
    int drain_ms;        /* on stop, how long the running request may go on before it is ended */
    sv_sampling sampling;  /* defaults for requests that send no sampling fields: those sampling_set */
    unsigned sampling_set; /* names (SV_SET_*) win over the model's (GGUF general.sampling.*), and the
                              model's over `strata run`'s (st_sampler_default_params) */
    const char *alias;   /* the model's id in /v1/models and in replies (NULL: the model's name) */
    int webui;           /* serve the web app at / (1) or not (0: 404) */
    int embeddings;      /* answer /v1/embeddings (it uses the session: off by default) */
    size_t responses_max;   /* finished /v1/responses kept for previous_response_id (0: none) */
    size_t responses_bytes; /* and the most bytes they may take */
    /* One line per request (id, endpoint, status, prompt tokens, cached, generated, time to first
     * token, total), as text or JSON (log_json); NULL: none. Called from any thread. */
    void (*log)(void *ctx, const char *line);
    void *log_ctx;
    int log_json;
} sv_config;

void sv_config_defaults(sv_config *c);

typedef struct sv_server sv_server;

/* Starts the HTTP threads and the engine thread. The server uses the engine until stopped; the
 * caller still owns it and closes it after sv_server_stop(). */
st_status sv_server_start(const sv_config *cfg, sv_engine *engine, sv_server **out);
int sv_server_port(const sv_server *s);
/* Drains and stops: new requests get 503, queued ones are answered 503, the running one has
 * cfg.drain_ms to finish and is then ended with a final error event (or body); the replies are
 * written out to their clients before the threads stop and the server is freed. */
void sv_server_stop(sv_server *s);

#endif
