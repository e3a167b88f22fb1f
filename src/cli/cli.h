/* cli.h: the `strata` command's subcommands. Each lives in its own cmd_*.c file and is listed
 * once in main.c's table. A subcommand returns the process exit status. */
#ifndef ST_CLI_H
#define ST_CLI_H

#include <stddef.h>

int cmd_info(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_chat(int argc, char **argv);

/* Prints "strata: <msg>" from st_last_error() to stderr and returns 1. */
int cli_fail(const char *what);

/* `model` if given, else the demo model's path (printing which, to stderr), else NULL after
 * saying on stderr that none was found. */
const char *cli_model_or_default(const char *model, const char *command);

/* Loads a model with a progress line; on failure prints the reason and returns 1 (cmd_run.c). An
 * unsupported tokenizer is a warning. */
struct st_model;
int cli_load_model(const char *path, struct st_model **out);
/* Set by --copy-weights: cli_load_model copies the weights out of the file mapping. */
extern int cli_copy_weights;
/* Set by --device cpu|cuda|auto (cli_parse_device): where cli_load_model runs the model. */
extern int cli_device;
int cli_parse_device(const char *v);

/* One reply (generate.c): samples from the session's last logits, passes each piece of text to
 * on_text as it comes, and feeds each token back, until an end-of-generation token, max_tokens or
 * a full context. On a failure prints "strata: WHAT: reason" and returns 1. */
struct st_session;
struct st_sampler;
struct st_detok;
typedef struct cli_generation {
    struct st_model *model;
    struct st_session *session;
    struct st_sampler *sampler;
    struct st_detok *detok;
    void (*on_text)(void *ctx, const char *text, size_t len);
    void *ctx;
    const char *what; /* names the command in messages: "run", "chat" */
    int feed_last;    /* 1: feed the budget's last token too, so the session holds the whole reply */
} cli_generation;
int cli_generate(const cli_generation *g, int max_tokens, int *generated);

#endif
