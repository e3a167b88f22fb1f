/* cmd_serve.c: `strata serve`: the OpenAI- and Anthropic-compatible HTTP server and web app.
 * Parses options (the model's and the session's as for `strata run`, and the server's own), opens
 * the engine (the model, or the echo stand-in for tests), starts the server,
 * prints where it listens, and runs until SIGINT/SIGTERM. */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "server/server.h"

static volatile sig_atomic_t serve_stop;

static void on_signal(int sig) { serve_stop = 1; }

/* serve's own flags: the server's configuration. */
typedef struct serve_flags {
    sv_config cfg;
    const char *engine;
    int64_t max_body;
    int64_t cache_mib;   /* -1: st_prompt_cache_default_bytes */
    int parallel;
} serve_flags;

#define OWN(field) offsetof(serve_flags, field)
static const cli_flag serve_own[] = {
    {"--host", NULL, "ADDR", CLI_STRING, OWN(cfg.host), 0, 0, NULL, NULL,
     "address to listen on (default 127.0.0.1; loopback only by default)", 0},
    {"--port", NULL, "N", CLI_INT, OWN(cfg.port), 0, 65535, NULL, NULL, "port (default 8080; 0 picks a free one)", 0},
    {"--api-key", NULL, "KEY", CLI_STRING, OWN(cfg.api_key), 0, 0, NULL, NULL,
     "require this key (Bearer or x-api-key) on every endpoint but /health;\nalso read from STRATA_API_KEY", 0},
    {"--cors", NULL, "ORIGIN", CLI_STRING, OWN(cfg.cors), 0, 0, NULL, NULL, "allow browser calls from ORIGIN (or *); off by default", 0},
    {"--queue", NULL, "N", CLI_INT, OWN(cfg.queue_max), 1, 1 << 16, NULL, NULL,
     "requests that may wait for the engine (default 32; more get 429)", 0},
    {"--max-body", NULL, "BYTES", CLI_INT64, OWN(max_body), 1024, 4294967296.0, NULL, NULL,
     "largest request body (default 8388608; larger get 413)", 0},
    {"--state-dir", NULL, "DIR", CLI_STRING, OWN(cfg.state_dir), 0, 0, NULL, NULL,
     "where saved sessions are written (default ./strata-sessions)", 0},
    {"--parallel", "-np", "N", CLI_INT, OWN(parallel), 1, SV_MAX_SLOTS, NULL, NULL,
     "serve N requests at once (default 4): N sequences decoded together, one forward a\n"
     "step (on the CPU; one on a GPU); each has its own context of --ctx tokens", 0},
    {"--cache-ram", NULL, "MiB", CLI_INT64, OWN(cache_mib), 0, 1 << 30, NULL, NULL,
     "keep the states of recent conversations (KV rows, recurrent checkpoints) in up to\n"
     "MiB of memory, so a request that extends any of them reuses it; 0: off (default: a\n"
     "quarter of the memory available at start, at most 8192)", 0},
    {"--engine", NULL, "KIND", CLI_STRING, OWN(engine), 0, 0, NULL, NULL,
     "strata (default) or echo: the deterministic stand-in of the server's tests", 0},
    {NULL},
};

static const cli_command serve_command = {
    "serve", "[-m MODEL.gguf] [options]",
    "Serves the model over OpenAI- and Anthropic-compatible HTTP, with a web chat at /.\n"
    "--spec sets the server's speculative decoding; a request may ask for its own with\n"
    "\"speculative.type\": \"mtp\"|\"ngram\"|\"none\" and \"speculative.n_max\": N. Drafts made and\n"
    "accepted are in usage.completion_tokens_details, \"timings\" and /metrics.",
    CLI_MODEL | CLI_SESSION | CLI_SPEC, serve_own, 0};

int cmd_serve(int argc, char **argv) {
    cli_options o;
    cli_options_default(&o);
    serve_flags sf = {.engine = "strata", .cache_mib = -1, .parallel = 4};
    sv_config_defaults(&sf.cfg);
    sf.max_body = (int64_t)sf.cfg.max_body;
    sf.cfg.api_key = getenv("STRATA_API_KEY");
    int prc = cli_parse(&serve_command, argc, argv, &o, &sf);
    if (prc >= 0) return prc;
    sv_config cfg = sf.cfg;
    cfg.max_body = (size_t)sf.max_body;
    if (cfg.api_key && !*cfg.api_key) cfg.api_key = NULL;
    const char *engine_kind = sf.engine;
    sv_engine *engine = NULL;
    st_status st;
    if (!strcmp(engine_kind, "echo")) {
        st = sv_engine_echo_open((int)o.session.n_ctx, &engine);
    } else if (!strcmp(engine_kind, "strata")) {
        if (!cli_model_or_default(&o, "serve")) return 2;
        st_model_params mp = st_model_default_params();
        mp.device = o.device;
        mp.copy_weights = o.copy_weights;
        sv_strata_options so = {.spec = &o.spec, .parallel = sf.parallel,
                                .cache_bytes = sf.cache_mib < 0 ? st_prompt_cache_default_bytes() : (uint64_t)sf.cache_mib << 20};
        st = sv_engine_strata_open(o.model, &mp, &o.session, &so, &engine);
    } else {
        fprintf(stderr, "strata serve: --engine must be strata or echo, not %s\n", engine_kind);
        return 2;
    }
    if (st != ST_OK) return cli_fail("serve");

    sv_server *server = NULL;
    if (sv_server_start(&cfg, engine, &server) != ST_OK) {
        engine->ops->close(engine);
        return cli_fail("serve");
    }
    int loopback = !strcmp(cfg.host, "127.0.0.1") || !strcmp(cfg.host, "::1") || !strcmp(cfg.host, "localhost");
    if (!loopback && !cfg.api_key)
        fprintf(stderr, "strata serve: warning: listening on %s without --api-key; only requests naming a loopback Host are answered\n", cfg.host);
    int v6 = strchr(cfg.host, ':') != NULL;
    /* The tests read this line to find the port. */
    printf("strata serve: listening on http://%s%s%s:%d/ (engine %s)\n", v6 ? "[" : "", cfg.host, v6 ? "]" : "",
           sv_server_port(server), engine_kind);
    fflush(stdout);

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    while (!serve_stop) pause();
    sv_server_stop(server);
    engine->ops->close(engine);
    fprintf(stderr, "strata serve: stopped\n");
    return 0;
}
