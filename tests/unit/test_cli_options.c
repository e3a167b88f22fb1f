/* test_cli_options.c: the engine commands' one parser (src/cli/options.c): every shared flag
 * reaches its field, under its alias too; --kv-f32 is --kv-type f32; numbers out of range, bad
 * choices, unknown flags and a missing value are refused with exit status 2 and nothing else
 * changes; a group a command does not take is unknown to it; --help exits 0 and lists every flag
 * the command parses (own and shared), the help being written from the same rows. */
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "cli/options.h"
#include "test.h"

typedef struct own_flags {
    int n;
    const char *text;
    int on;
} own_flags;

static const cli_flag own[] = {
    {"-n", NULL, "N", CLI_INT, offsetof(own_flags, n), 0, 10, NULL, NULL, "a number", 0},
    {"--text", "-x", "TEXT", CLI_STRING, offsetof(own_flags, text), 0, 0, NULL, NULL, "a text", 0},
    {"--on", NULL, NULL, CLI_SWITCH, offsetof(own_flags, on), 1, 0, NULL, NULL, "a switch", 0},
    {NULL},
};
static const cli_command all = {"test", "[options]", "Tests.", CLI_MODEL | CLI_SESSION | CLI_SAMPLING, own, 0};
static const cli_command model_only = {"test2", "[options]", NULL, CLI_MODEL, NULL, 0};

static int parse(const cli_command *c, cli_options *o, own_flags *f, const char *const *args, int n) {
    char *argv[32];
    argv[0] = "test";
    for (int i = 0; i < n; i++) argv[i + 1] = (char *)args[i];
    cli_options_default(o);
    memset(f, 0, sizeof *f);
    return cli_parse(c, n + 1, argv, o, f);
}

#define PARSE(c, ...) parse(c, &o, &f, (const char *const[]){__VA_ARGS__}, \
                            (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))

static void test_values(void) {
    cli_options o;
    own_flags f;
    CHECK(PARSE(&all, "-m", "a.gguf", "--device", "cpu", "--copy-weights", "-t", "3", "-c", "1000", "--prefill", "64",
                "--kv-type", "f32", "--temp", "0.5", "--top-k", "7", "--top-p", "0.9", "--min-p", "0.1", "--seed", "42",
                "--repeat-penalty", "1.1", "-n", "4", "-x", "hi", "--on") == -1);
    CHECK(!strcmp(o.model, "a.gguf") && o.device == ST_DEVICE_CPU && o.copy_weights == 1);
    CHECK(o.session.n_threads == 3 && o.session.n_ctx == 1000 && o.session.n_prefill == 64 && o.session.kv_f32 == 1);
    CHECK(o.sampling.temperature == 0.5f && o.sampling.top_k == 7 && o.sampling.top_p == 0.9f && o.sampling.min_p == 0.1f);
    CHECK(o.sampling.seed == 42 && o.sampling.repeat_penalty == 1.1f);
    CHECK(f.n == 4 && !strcmp(f.text, "hi") && f.on == 1);
    CHECK(PARSE(&all, "--model", "b.gguf", "--threads", "2", "--ctx", "77", "--device", "cuda", "--no-copy-weights", "--text", "t") == -1);
    CHECK(!strcmp(o.model, "b.gguf") && o.session.n_threads == 2 && o.session.n_ctx == 77 && o.device == ST_DEVICE_CUDA &&
          o.copy_weights == 0 && !strcmp(f.text, "t"));
    CHECK(PARSE(&all, "--kv-f32") == -1 && o.session.kv_f32 == 1);
    CHECK(PARSE(&all, "--kv-type", "f16") == -1 && o.session.kv_f32 == 0);
    CHECK(PARSE(&all, "--device", "auto") == -1 && o.device == ST_DEVICE_AUTO);
    /* the defaults */
    CHECK(PARSE(&all, "--on") == -1);
    st_session_params sp = st_session_default_params();
    CHECK(o.model == NULL && o.copy_weights == -1 && o.device == ST_DEVICE_AUTO && o.session.n_ctx == sp.n_ctx &&
          o.session.n_prefill == sp.n_prefill && o.session.n_threads == sp.n_threads && o.session.kv_f32 == sp.kv_f32);
}

/* Sends f (stdout or stderr) to /dev/null; returns the descriptor to give back to unmute. */
static int mute(FILE *f) {
    fflush(f);
    int saved = dup(fileno(f));
    FILE *null = freopen("/dev/null", "w", f);
    (void)null;
    return saved;
}

static void unmute(FILE *f, int fd, int saved) {
    fflush(f);
    dup2(saved, fd);
    close(saved);
}

static void test_refusals(void) {
    cli_options o;
    own_flags f;
    /* the refusals' reasons go to /dev/null */
    int saved = mute(stderr);
    int r[] = {
        PARSE(&all, "-n", "11"),          PARSE(&all, "-n", "x"),          PARSE(&all, "-n", "3x"),
        PARSE(&all, "-n"),                PARSE(&all, "--kv-type", "f8"),  PARSE(&all, "--device", "gpu"),
        PARSE(&all, "--top-p", "1.5"),    PARSE(&all, "--temp", "nan"),    PARSE(&all, "--seed", "-1"),
        PARSE(&all, "--prefill", "0"),    PARSE(&all, "--bogus"),          PARSE(&model_only, "-t", "2"),
        PARSE(&model_only, "--temp", "1"),
    };
    unmute(stderr, 2, saved);
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) CHECKF(r[i] == 2, "refusal %zu returned %d", i, r[i]);
    CHECK(PARSE(&model_only, "-m", "x.gguf") == -1 && !strcmp(o.model, "x.gguf"));
}

/* --help exits 0 and names every flag the command parses: the rows the parser reads. */
static void test_help(void) {
    char path[] = "/tmp/strata-test-help-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w+");
    cli_usage(&all, f);
    fflush(f);
    rewind(f);
    static char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    remove(path);
    const char *names[] = {"-m, --model MODEL", "--device D", "--copy-weights", "--no-copy-weights", "-t, --threads N",
                           "-c, --ctx N", "--prefill N", "--kv-type T", "--kv-f32", "--temp T", "--top-k K",
                           "--top-p P", "--min-p P", "--seed S", "--repeat-penalty R", "-n N", "-x, --text TEXT",
                           "--on", "-h, --help"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) CHECKF(strstr(text, names[i]) != NULL, "help lacks %s", names[i]);
    cli_options o;
    own_flags fl;
    int saved = mute(stdout);
    int rc = parse(&all, &o, &fl, (const char *const[]){"-t", "2", "--help", "--bogus"}, 4);
    unmute(stdout, 1, saved);
    CHECK(rc == 0);
}

int main(void) {
    test_values();
    test_refusals();
    test_help();
    return test_report("test_cli_options");
}
