/* cli.h: the `strata` command's subcommands and what the engine commands share. Each command
 * lives in its own cmd_*.c file and is listed once in main.c's table; it returns the process exit
 * status. Their flags are parsed by options.h's tables. */
#ifndef ST_CLI_H
#define ST_CLI_H

#include <stddef.h>

#include "cli/options.h"
#include "strata.h"

int cmd_info(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_chat(int argc, char **argv);

/* load.c: prints "strata: WHAT: <msg>" from st_last_error() to stderr and returns 1. */
int cli_fail(const char *what);

/* default_model.c: o->model if given, else the demo model's path (kept in o->model_found, and
 * said on stderr), else NULL after saying on stderr that none was found. */
const char *cli_model_or_default(cli_options *o, const char *command);

/* load.c: loads the model o names (the demo model without -m) on o->device, with o's weight copy
 * and a progress line; on failure prints the reason and returns 1. An unsupported tokenizer is a
 * warning. */
int cli_load_model(const char *command, cli_options *o, st_model **out);
/* load.c: a context not asked for (sp->n_ctx 0) becomes the model's context_length, lowered to
 * what the memory free holds (st_model_ctx_fit), with a line on stderr when it is lowered. */
void cli_fit_context(const char *command, const st_model *m, st_session_params *sp);

/* reply_print.c: a chat reply as the terminal shows it. Fed the generated text piece by piece
 * (cli_reply_text, an on_text callback for cli_generate), it keeps the raw text (for the
 * conversation) and parses it (st_chat_parser): the answer goes to stdout, the reasoning
 * (<think>...</think>) is folded: hidden by default (a dim "(thinking...)" note on a terminal
 * while it lasts), shown on stderr with show_thinking, dimmed on a terminal. */
struct st_chat_parser;
typedef struct cli_reply {
    char *text;               /* the raw reply so far (not NUL-terminated) */
    size_t len, cap;
    struct st_chat_parser *parser;
    int show_thinking, tty;   /* tty: stderr is a terminal (the dim note and the dimming) */
    int answering;            /* the answer's first visible character is out */
    int reasoning;            /* shown reasoning has started (its leading blank lines skipped) */
    int note;                 /* the "(thinking...)" note is on the screen */
    int failed;               /* out of memory for the text */
} cli_reply;
/* Starts a reply (in_reasoning: the prompt opened a <think> block); 1 after a failure message. */
int cli_reply_begin(cli_reply *r, int in_reasoning);
void cli_reply_text(void *ctx, const char *text, size_t len);
/* Ends the reply's output: the parser's held-back text, an open dim span, the line. */
void cli_reply_end(cli_reply *r);
void cli_reply_free(cli_reply *r);
/* Sets opt->style from the model's tokenizer.chat_template; 1 when the model has one, else 0. */
struct st_chat_options;
int cli_chat_style(const st_model *m, struct st_chat_options *opt);

/* generate.c: one line on stderr: the drafts made and accepted, tokens per trunk forward. */
void cli_spec_report(const struct st_spec *d);

/* `strata bench --spec` (bench_spec.c): plain and speculative decoding on the same prompts. */
typedef struct cli_bench_spec_opts {
    st_session_params session;
    st_sampler_params sampler;
    st_spec_params spec;
    const char *prompts;   /* one prompt per line ("\n" escapes), or NULL for a built-in one */
    int n_gen, reps, json;
} cli_bench_spec_opts;
int cli_bench_spec(const char *path, struct st_model *m, const cli_bench_spec_opts *o);

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
    struct st_spec *spec;  /* the session's speculative decoder, or NULL (plain decoding) */
    void (*on_text)(void *ctx, const char *text, size_t len);
    void *ctx;
    const char *what; /* names the command in messages: "run", "chat" */
    int feed_last;    /* 1: feed the budget's last token too, so the session holds the whole reply */
} cli_generation;
int cli_generate(const cli_generation *g, int max_tokens, int *generated);

#endif
