/* cmd_serve.c: `strata serve`: the OpenAI- and Anthropic-compatible HTTP server and web app.
 * Parses options, opens the engine (the model, or the echo stand-in for tests), starts the server,
 * prints where it listens, and runs until SIGINT/SIGTERM. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "server/server.h"

static volatile sig_atomic_t serve_stop;

static void on_signal(int sig) { serve_stop = 1; }

static void serve_usage(FILE *f) {
    fprintf(f,
            "usage: strata serve [-m MODEL.gguf] [options]\n"
            "  -m, --model FILE     the model to serve (default: the demo model, models/strata-demo-q8_0.gguf)\n"
            "  --host ADDR          address to listen on (default 127.0.0.1; loopback only by default)\n"
            "  --port N             port (default 8080; 0 picks a free one)\n"
            "  --api-key KEY        require this key (Bearer or x-api-key) on every endpoint but /health;\n"
            "                       also read from STRATA_API_KEY\n"
            "  --ctx N              context length in tokens (default: the model's)\n"
            "  --device D           cpu, cuda or auto (default: cuda when this build has it and a GPU is\n"
            "                       present, else cpu)\n"
            "  --cors ORIGIN        allow browser calls from ORIGIN (or *); off by default\n"
            "  --queue N            requests that may wait for the engine (default 32; more get 429)\n"
            "  --max-body BYTES     largest request body (default 8388608; larger get 413)\n"
            "  --state-dir DIR      where saved sessions are written (default ./strata-sessions)\n"
            "  --engine KIND        strata (default) or echo: the deterministic stand-in of the server's tests\n");
}

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cmd_serve(int argc, char **argv) {
    sv_config cfg;
    sv_config_defaults(&cfg);
    const char *model = NULL, *engine_kind = "strata";
    long ctx = 0, v;
    cfg.api_key = getenv("STRATA_API_KEY");
    if (cfg.api_key && !*cfg.api_key) cfg.api_key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { serve_usage(stdout); return 0; }
        if (!val) { fprintf(stderr, "strata serve: %s needs a value (or is unknown)\n", a); return 2; }
        i++;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = val;
        else if (!strcmp(a, "--host")) cfg.host = val;
        else if (!strcmp(a, "--api-key")) cfg.api_key = *val ? val : NULL;
        else if (!strcmp(a, "--cors")) cfg.cors = val;
        else if (!strcmp(a, "--engine")) engine_kind = val;
        else if (!strcmp(a, "--state-dir")) cfg.state_dir = val;
        else if (!strcmp(a, "--device")) {
            if (cli_parse_device(val)) return 2;
        }
        else if (!strcmp(a, "--port") && !parse_int(val, 0, 65535, &v)) cfg.port = (int)v;
        else if (!strcmp(a, "--ctx") && !parse_int(val, 16, 1 << 24, &v)) ctx = v;
        else if (!strcmp(a, "--queue") && !parse_int(val, 1, 1 << 16, &v)) cfg.queue_max = (int)v;
        else if (!strcmp(a, "--max-body") && !parse_int(val, 1024, 1L << 32, &v)) cfg.max_body = (size_t)v;
        else { fprintf(stderr, "strata serve: bad option %s %s\n", a, val); serve_usage(stderr); return 2; }
    }
    sv_engine *engine = NULL;
    st_status st;
    if (!strcmp(engine_kind, "echo")) {
        st = sv_engine_echo_open((int)ctx, &engine);
    } else if (!strcmp(engine_kind, "strata")) {
        if (!(model = cli_model_or_default(model, "serve"))) return 2;
        st = sv_engine_strata_open(model, (int)ctx, cli_device, &engine);
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
