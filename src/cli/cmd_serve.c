/* cmd_serve.c: `strata serve`: the OpenAI- and Anthropic-compatible HTTP server and web app.
 * Parses options (the model's, the session's and sampling as for `strata run`, and the server's
 * own), opens the engine (the model, or the echo stand-in for tests), starts the server, prints
 * where it listens and a line per request, and runs until SIGINT/SIGTERM (then drains).
 *
 * The sampling flags are the defaults of requests that send no sampling fields; a flag not given
 * leaves the model's recommendation (GGUF general.sampling.*) or else `strata run`'s default, so
 * the parser's defaults are replaced by marks first, to see which flags were given. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "server/server.h"

/* SIGINT/SIGTERM write a byte here and the main thread waits to read it: whichever thread the
 * signal lands on, and whenever it lands, the wait ends (a flag checked before pause() could miss
 * a signal that came between the check and the call). */
static int serve_stop_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    (void)sig;
    int saved = errno;
    ssize_t w = write(serve_stop_pipe[1], "", 1);
    (void)w;
    errno = saved;
}

/* Handlers on from before the "listening" line, so a client that stops the server at once stops it. */
static int stop_signals_on(void) {
    if (pipe(serve_stop_pipe) != 0) {
        fprintf(stderr, "strata serve: cannot make the stop pipe: %s\n", strerror(errno));
        return -1;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static void wait_for_stop(void) {
    char c;
    while (read(serve_stop_pipe[0], &c, 1) < 0 && errno == EINTR) {
    }
}

/* serve's own flags: the server's configuration. */
typedef struct serve_flags {
    sv_config cfg;
    const char *engine;
    int64_t max_body;
    const char *template_file;
    int no_webui;
    int log_format; /* 0 text, 1 json */
    int64_t cache_mib;   /* -1: st_prompt_cache_default_bytes */
    int parallel;
    int64_t responses_max, responses_mib; /* the kept /v1/responses */
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
    {"--responses-kept", NULL, "N", CLI_INT64, OWN(responses_max), 0, 1 << 20, NULL, NULL,
     "keep the last N finished /v1/responses (not those sent with store: false) for\n"
     "previous_response_id and GET /v1/responses/ID (default 256; 0: none)", 0},
    {"--responses-mib", NULL, "MiB", CLI_INT64, OWN(responses_mib), 1, 1 << 20, NULL, NULL,
     "the most memory the kept responses take (default 64); the least recently used go first", 0},
    {"--engine", NULL, "KIND", CLI_STRING, OWN(engine), 0, 0, NULL, NULL,
     "strata (default) or echo: the deterministic stand-in of the server's tests", 0},
    {"--alias", NULL, "NAME", CLI_STRING, OWN(cfg.alias), 0, 0, NULL, NULL,
     "the model's id in /v1/models and in replies (default: the model's name)", 0},
    {"--chat-template-file", NULL, "FILE", CLI_STRING, OWN(template_file), 0, 0, NULL, NULL,
     "render chats as this template does (Qwen3's or Qwen 3.5's ChatML forms)\nin place of the model's own", 0},
    {"--no-webui", NULL, NULL, CLI_SWITCH, OWN(no_webui), 1, 0, NULL, NULL, "do not serve the web app at /", 0},
    {"--embeddings", NULL, NULL, CLI_SWITCH, OWN(cfg.embeddings), 1, 0, NULL, NULL,
     "answer /v1/embeddings (the model's pooled hidden state; it uses the one\nsession, so the held conversation is read afresh after it)", 0},
    {"--timeout", NULL, "SECONDS", CLI_INT, OWN(cfg.timeout_s), 1, 86400, NULL, NULL,
     "close a connection that reads or writes nothing this long (default 600)", 0},
    {"--log-format", NULL, "FORMAT", CLI_CHOICE, OWN(log_format), 0, 0, "text|json", NULL,
     "one line per request on stderr, as text (default) or JSON: id, endpoint,\nstatus, prompt tokens, cached, generated, time to first token, total", 0},
    {NULL},
};

static const cli_command serve_command = {
    "serve", "[-m MODEL.gguf] [options]",
    "Serves the model over OpenAI- and Anthropic-compatible HTTP, with a web chat at /.\n"
    "--spec sets the server's speculative decoding; a request may ask for its own with\n"
    "\"speculative.type\": \"mtp\"|\"ngram\"|\"none\" and \"speculative.n_max\": N. Drafts made and\n"
    "accepted are in usage.completion_tokens_details, \"timings\" and /metrics.",
    CLI_MODEL | CLI_SESSION | CLI_SAMPLING | CLI_SPEC, serve_own, 0};

static void log_line(void *ctx, const char *line) {
    fprintf(stderr, ctx ? "%s\n" : "strata serve: %s\n", line);
}

/* The sampling flags given, as request defaults (the marks left by the others are skipped). */
static void sampling_defaults(const st_sampler_params *p, sv_config *cfg) {
    cfg->sampling_set = 0;
    if (!isnan(p->temperature)) { cfg->sampling.temperature = p->temperature; cfg->sampling_set |= SV_SET_TEMPERATURE; }
    if (!isnan(p->top_p)) { cfg->sampling.top_p = p->top_p; cfg->sampling_set |= SV_SET_TOP_P; }
    if (p->top_k != INT32_MIN) { cfg->sampling.top_k = p->top_k; cfg->sampling_set |= SV_SET_TOP_K; }
    if (!isnan(p->min_p)) { cfg->sampling.min_p = p->min_p; cfg->sampling_set |= SV_SET_MIN_P; }
    if (p->seed != UINT64_MAX) { cfg->sampling.seed = p->seed; cfg->sampling.has_seed = 1; cfg->sampling_set |= SV_SET_SEED; }
    if (!isnan(p->repeat_penalty)) { cfg->sampling.repeat_penalty = p->repeat_penalty; cfg->sampling_set |= SV_SET_REPEAT_PENALTY; }
}

/* The whole file, NUL-terminated (NULL after saying why on stderr). */
static char *read_template(const char *path) {
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    long n = -1;
    if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) && (text = malloc((size_t)n + 1)) &&
        fread(text, 1, (size_t)n, f) == (size_t)n) {
        text[n] = 0;
    } else {
        fprintf(stderr, "strata serve: --chat-template-file %s: cannot read it\n", path);
        free(text);
        text = NULL;
    }
    if (f) fclose(f);
    return text;
}

int cmd_serve(int argc, char **argv) {
    cli_options o;
    cli_options_default(&o);
    serve_flags sf = {.engine = "strata", .cache_mib = -1, .parallel = 4};
    sv_config_defaults(&sf.cfg);
    sf.max_body = (int64_t)sf.cfg.max_body;
    sf.responses_max = (int64_t)sf.cfg.responses_max;
    sf.responses_mib = (int64_t)(sf.cfg.responses_bytes >> 20);
    sf.cfg.api_key = getenv("STRATA_API_KEY");
    o.sampling.temperature = o.sampling.top_p = o.sampling.min_p = o.sampling.repeat_penalty = NAN;
    o.sampling.top_k = INT32_MIN;
    o.sampling.seed = UINT64_MAX;
    int prc = cli_parse(&serve_command, argc, argv, &o, &sf);
    if (prc >= 0) return prc;
    sv_config cfg = sf.cfg;
    cfg.max_body = (size_t)sf.max_body;
    cfg.responses_max = (size_t)sf.responses_max;
    cfg.responses_bytes = (size_t)sf.responses_mib << 20;
    sampling_defaults(&o.sampling, &cfg);
    cfg.webui = !sf.no_webui;
    cfg.log = log_line;
    cfg.log_json = sf.log_format == 1;
    cfg.log_ctx = cfg.log_json ? (void *)"json" : NULL; /* JSON lines go out bare */
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
        mp.gpu_mem_gib = o.gpu_mem;
        char *tmpl = sf.template_file ? read_template(sf.template_file) : NULL;
        if (sf.template_file && !tmpl) return 2;
        sv_strata_options so = {.spec = &o.spec, .parallel = sf.parallel, .chat_template = tmpl,
                                .cache_bytes = sf.cache_mib < 0 ? st_prompt_cache_default_bytes() : (uint64_t)sf.cache_mib << 20};
        st = sv_engine_strata_open(o.model, &mp, &o.session, &so, &engine);
        free(tmpl);
    } else {
        fprintf(stderr, "strata serve: --engine must be strata or echo, not %s\n", engine_kind);
        return 2;
    }
    if (st != ST_OK) return cli_fail("serve");

    sv_server *server = NULL;
    if (stop_signals_on() != 0) {
        engine->ops->close(engine);
        return 1;
    }
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

    wait_for_stop();
    sv_server_stop(server);
    engine->ops->close(engine);
    fprintf(stderr, "strata serve: stopped\n");
    return 0;
}
