/* cli.h: the `strata` command's subcommands. Each lives in its own cmd_*.c file and is listed
 * once in main.c's table. A subcommand returns the process exit status. */
#ifndef ST_CLI_H
#define ST_CLI_H

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

#endif
